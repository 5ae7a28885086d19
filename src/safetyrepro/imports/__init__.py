"""Results produced elsewhere as our tables (docs/importing.md): lm-evaluation-harness
output folders, Inspect AI logs and plain tables become cells.parquet and items.parquet (our schema plus a
`source` column), for the analysis half of the workflow."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from safetyrepro.configuration.settings import ImportSource
from safetyrepro.imports.inspect_logs import read_inspect
from safetyrepro.imports.lm_eval import read_lm_eval
from safetyrepro.imports.mapping import ImportMapping
from safetyrepro.imports.runs import Imported, ImportedRun, build_tables
from safetyrepro.imports.table import read_table

# One reader per source kind (the config schema's `imports[].kind`).
READERS: dict[str, Callable[[Path, ImportMapping, list[str]], list[ImportedRun]]] = {
    "lm_eval": read_lm_eval,
    "inspect": read_inspect,
    "table": read_table,
}


def import_sources(sources: Sequence[ImportSource]) -> Imported:
    """Read every source and build the tables; the notes say what could not be mapped."""
    notes: list[str] = []
    runs: list[ImportedRun] = []
    stress: list[tuple[str, str]] = []
    for source in sources:  # each reader names a source that is missing or neither a folder nor a regular file
        mapping = ImportMapping.load(source.mapping)
        runs += READERS[source.kind](Path(source.path), mapping, notes)
        stress += mapping.stress_values()
    return build_tables(runs, stress, notes)
