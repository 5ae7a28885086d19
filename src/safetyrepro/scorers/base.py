"""The scorer interface: what labels the free-form replies of a benchmark's cells, declared so that the pipeline
knows, before any job runs, what each scorer labels, what it reads with (an embedded model, fitted files) and
which code computes its labels (the cells' fingerprints). Importing it loads no plugin, pandas or torch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol


class Labelled(Protocol):
    """What a scorer is given of the benchmark whose replies it labels (a `safetyrepro.benchmarks.Benchmark`; the
    scorer interface names no benchmark module, so the two interfaces import each other nowhere)."""

    name: str
    scorers: tuple[str, ...]
    scorer_arguments: Mapping[str, Mapping[str, Any]]
    default_labels: tuple[str, ...]

    def extract(self, response: str, item: Any) -> str: ...


class Scorer:
    """One way of labelling free-form replies, registered under the entry-point group `safetyrepro.scorers` by its
    `name` (docs/extending.md#a-scorer).

    Attributes:
        name: the name a benchmark's `scorers` and a scorer axis's values give it; the entry point's name.
        benchmarks: the benchmarks whose replies it labels besides those that name it in their `scorers` (a
            scorer of a plugin package adds itself to a benchmark so); none by default.
        embedded_model: the embedded model (a name of settings.EMBEDDED_MODELS) it reads replies with: the run
            builds it before its cells and `label` gets its folder; None by default.
        files: the files it reads besides its code (a fitted head), each with the SHA-256 of the version shipped:
            their SHA-256 are part of its cells' fingerprints, and `check` and the GRID card name one that is not
            as shipped; none by default.
        asks_judge: whether a judge model labels (the pipeline asks it, not `label`: `question` says what).
        modules: the modules of its code besides its class's own (relative to the package, or a plugin's by its
            full name): only the cells it labels depend on them (`code`).
    """

    name: str
    benchmarks: tuple[str, ...] = ()
    embedded_model: str | None = None
    files: Mapping[Path, str] = {}
    asks_judge: bool = False
    modules: tuple[str, ...] = ()

    def code(self) -> tuple[str, ...]:
        """The modules whose code computes its labels: its class's and `modules`. Only the cells it labels
        depend on them; editing one relabels those cells and generates nothing again."""
        return (type(self).__module__.removeprefix("safetyrepro."), *self.modules)

    def check_files(self) -> None:
        """Read the files it reads besides its code (`files`), so one that is missing or broken fails before any
        job: DataError naming it. Here, that each is a file; a scorer whose files have a format checks it too."""
        from safetyrepro.core.errors import DataError

        for path in self.files:
            if not path.is_file():
                raise DataError(
                    f"{path}: not found (the {self.name} scorer reads it); reinstall the package that ships it"
                )

    def label(
        self,
        benchmark: Labelled,
        responses: Sequence[str],
        items: Sequence[Any],
        models: Mapping[str, Path],
    ) -> list[str]:
        """Labels of free-form responses to one benchmark's items.

        Args:
            benchmark: the benchmark whose items were answered.
            responses: the models' texts (not always text: a reply that is none gets "unparsed").
            items: the item each response answers (None where unknown).
            models: the built folder of its `embedded_model`, by name (empty when it reads with none).

        Returns:
            One label (one of the item's labels, or "unparsed") per response.
        """
        raise NotImplementedError(f"the scorer {self.name} labels nothing itself")
