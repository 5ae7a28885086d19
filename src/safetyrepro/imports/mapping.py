"""The import mapping file: what an imported run cannot say for itself (schemas/import_mapping.schema.yaml)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from safetyrepro.benchmarks.files import regular_file
from safetyrepro.configuration.checks import check_schema
from safetyrepro.configuration.loading import read_yaml


@dataclass(frozen=True)
class ImportMapping:
    """A source's mapping (all keys optional); `origin` names the file in messages."""

    origin: str = "(no mapping)"
    models: Mapping[str, str] = field(default_factory=dict)
    tasks: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    templates: Mapping[str, str] = field(default_factory=dict)
    task_args: Mapping[str, str] = field(default_factory=dict)
    metric: str | None = None
    filter: str | None = None
    scorer: str | None = None
    item_id: str | None = None
    item_text: tuple[str, ...] = ("question",)
    stress: Mapping[str, list] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path | None) -> ImportMapping:
        """The mapping in a YAML file (checked against its schema), or the empty mapping for None."""
        if path is None:
            return cls()
        data = read_yaml(regular_file(Path(path))) or {}  # a named pipe would block the read
        check_schema(data, "import_mapping", f"{path}: ")
        return cls(origin=str(path), **{**data, "item_text": tuple(data.get("item_text", ("question",)))})

    def model(self, name: str) -> str:
        """The model's name in our tables."""
        return self.models.get(name, name)

    def task(self, name: str) -> Mapping[str, Any]:
        """The task's entry (benchmark, template, shots, axes), empty when unmapped."""
        return self.tasks.get(name, {})

    def template(self, task: str, identity: str) -> str:
        """The template's name: the task's own, else the identity's, else the identity itself."""
        return self.task(task).get("template") or self.templates.get(identity, identity)

    def stress_values(self) -> list[tuple[str, str]]:
        """(axis, value) of every value tagged stress."""
        return [(axis, str(value)) for axis, values in self.stress.items() for value in values]
