"""Storing results: atomic writers of Parquet, JSON and text (a temporary file in the same folder, flushed,
then renamed), and readers of what a Parquet table's metadata carries (a partial run's missing cells, the
design of imported results)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

# Parquet key-value metadata naming the grid cells a partial run lacks ("model/benchmark/config_id").
MISSING_CELLS_KEY = b"safetyrepro.missing_cells"
# Parquet key-value metadata of imported cells: the design of the results (axes, stress values, greedy decodings).
DESIGN_KEY = b"safetyrepro.design"


def current_umask() -> int:
    """The process's file-mode creation mask: from /proc on Linux, else by setting it and putting it back."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            return next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):
        mask = os.umask(0o077)
        os.umask(mask)
        return mask


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Call `write` on a temporary file beside `path`, flush it to disk, then rename it to `path`.

    The file gets the mode a plain `open` would give (0666 less the umask), not the temporary file's 0600.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(handle, 0o666 & ~current_umask())
    finally:
        os.close(handle)
    try:
        write(Path(temporary))
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_parquet(
    frame: pd.DataFrame, path: Path, missing_cells: Sequence[str] = (), design: dict | None = None
) -> None:
    """Write a table as zstd-compressed Parquet, atomically; a partial run's missing cells and the design of
    imported results go in its metadata."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    extra = {MISSING_CELLS_KEY: missing_cells or None, DESIGN_KEY: design}
    metadata = {key: json.dumps(value).encode() for key, value in extra.items() if value}
    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    write_atomic(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def read_missing_cells(path: Path) -> list[str]:
    """The cells a table was computed without, from its metadata (empty for a complete grid)."""
    metadata = pq.read_schema(path).metadata or {}
    return json.loads(metadata[MISSING_CELLS_KEY]) if MISSING_CELLS_KEY in metadata else []


def read_design(path: Path) -> dict | None:
    """The design an imported cells table carries (None for the cells of a run)."""
    metadata = pq.read_schema(path).metadata or {}
    return json.loads(metadata[DESIGN_KEY]) if DESIGN_KEY in metadata else None


def write_json(data: Any, path: Path) -> None:
    """Write JSON (sorted keys, indented), atomically."""
    write_atomic(path, lambda tmp: tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"))


def write_text(text: str, path: Path) -> None:
    """Write a text file, atomically."""
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
