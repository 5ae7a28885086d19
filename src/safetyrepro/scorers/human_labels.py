"""Human labels of a benchmark's replies, against which its scorers are measured: a declaration of its own,
registered under the entry-point group `safetyrepro.human_labels` by the name of the benchmark whose replies it
labels (docs/extending.md#human-labels). The scorers analysis reports each scorer's agreement with them, and each
judge that labels the benchmark is asked about the labelled replies by a job of its own. Importing this module
loads no plugin, pandas or torch; the registry is read when first asked."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cache
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetyrepro.plugins import PluginError, Registry, describe, load_registry, made

if TYPE_CHECKING:
    import pandas as pd

GROUP = "safetyrepro.human_labels"
MEASURES = ("scorer_agreement", "judge_agreement")  # what a HumanLabels must define


class HumanLabels:
    """Replies that people labelled, with the benchmark's labels, and how a scorer's or a judge's labels of the
    same replies agree with theirs. Registered by the benchmark's name; its class is made with no arguments.

    Attributes:
        modules: the modules of its code besides its class's own (relative to the package, or a plugin's by its
            full name): the scorers analysis and the judges' agreement jobs depend on them (`code`), no cell does.
        classes: the labels a person may give a reply (those of a file of a run's labelled replies).
    """

    modules: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()

    def code(self) -> tuple[str, ...]:
        """The modules whose code measures agreement: its class's and `modules`."""
        return (type(self).__module__.removeprefix("safetyrepro."), *self.modules)

    def scorer_agreement(self, data_dir: Path, scorers: Sequence[str]) -> pd.DataFrame:
        """Per labelled file and scorer (of the benchmark's): `labelled_model` (whose replies the file holds),
        `scorer`, `three_class`, `binary`, `kappa`, `n_answers`, `fitted_on` (the file a fitted scorer was fitted
        on, or None), `developed_on` (whether the scorer's rules were written against this file), and how often the
        scorer counts a reply as handled correctly where people do not (`scorer_over`) and the other way round
        (`scorer_under`)."""
        raise NotImplementedError(f"{type(self).__name__} measures no scorer")

    def judge_agreement(self, data_dir: Path, label: Callable[[list[str], list[Any]], list[str]]) -> pd.DataFrame:
        """Per labelled file: `labelled_model`, a judge's `three_class`, `binary`, `kappa`, `n_answers`,
        `scorer_over`, `scorer_under` (as `scorer_agreement`) and `parse_rate` (the share of its labels that name
        one); `label(replies, items)` returns its labels."""
        raise NotImplementedError(f"{type(self).__name__} measures no judge")


@cache
def discovered() -> Registry[HumanLabels]:
    """Every declaration registered under GROUP, by benchmark name; apart, the error of each that cannot be used."""
    return load_registry(GROUP, "human labels", _load)


def _load(point: EntryPoint) -> HumanLabels:
    """The HumanLabels an entry point names (a class is made with no arguments), for a registered benchmark."""
    from safetyrepro.benchmarks import registered

    labels = made(point, "human labels", HumanLabels, "safetyrepro.scorers.human_labels.HumanLabels")
    missing = [name for name in MEASURES if getattr(type(labels), name) is getattr(HumanLabels, name)]
    if missing:
        raise PluginError(f"{describe(point, 'human labels')} does not define {' and '.join(missing)}")
    benchmarks = registered()
    if point.name not in {*benchmarks.loaded, *benchmarks.broken}:
        raise PluginError(
            f"{describe(point, 'human labels')}: its name must be the benchmark's whose replies it labels; no "
            "benchmark is"
        )
    return labels


def human_labels_of(benchmark: str) -> HumanLabels:
    """The human labels of `benchmark`'s replies (KeyError where none are registered)."""
    return discovered().loaded[benchmark]


def with_human_labels(names: Iterable[str]) -> list[str]:
    """Those of the benchmarks `names` whose replies have human labels to measure scorers against."""
    return [name for name in names if name in discovered().loaded]
