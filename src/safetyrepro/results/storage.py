"""Storing results: atomic writers of Parquet, JSON and text (a temporary file in the same folder, flushed,
then renamed), and readers of what a Parquet table's metadata carries (a partial run's missing cells, the
design of imported results, the checksum that shows it unchanged since it was written)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from safetyrepro.core.errors import DataError

# Parquet key-value metadata naming the grid cells a partial run lacks ("model/benchmark/config_id").
MISSING_CELLS_KEY = b"safetyrepro.missing_cells"
# Parquet key-value metadata of imported cells: the design of the results (axes, stress values, greedy decodings).
DESIGN_KEY = b"safetyrepro.design"
# Parquet key-value metadata of a budgeted run's cells (safetyrepro.estimation): the cells run of the grid's, per
# benchmark the configs run and why its rounds stopped.
BUDGET_KEY = b"safetyrepro.budget"
# Parquet key-value metadata: SHA-256 (hex) of the file's bytes before its footer, i.e. of all its data pages.
CHECKSUM_KEY = b"safetyrepro.sha256"
# A cell's item rows carry, in their DataFrame.attrs (kept in the Parquet file), the SHA-256 of its JSON summary.
SUMMARY_SHA256 = "safetyrepro.summary_sha256"
PARQUET_MAGIC = b"PAR1"


def cell_file(
    results_dir: Path | str, model: str, benchmark: str, config_id: str, kind: str, folder: str = "cells"
) -> Path:
    """Where a cell's output is: its item rows (kind 'items', Parquet) or summary ('summary', JSON), under the
    results folder's `folder` (the grid's cells, or the precision probe's own)."""
    suffix = "parquet" if kind == "items" else "json"
    return Path(results_dir) / folder / model / benchmark / f"{config_id}.{suffix}"


class ResultsFileError(DataError):
    """A results file that is unreadable, truncated or changed since it was written."""


def damaged(path: Path, what: str) -> ResultsFileError:
    """The error for a results file found damaged (`what` says how): the user deletes it, the rerun rewrites it."""
    return ResultsFileError(f"results file {path} {what}: delete it and run the workflow again, which writes it anew")


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


def _data_pages(content: bytes) -> bytes | None:
    """The bytes of a Parquet file before its footer, or None when it does not end in a whole footer (truncated)."""
    footer = int.from_bytes(content[-8:-4], "little") if len(content) >= 12 else -1
    whole = content[:4] == PARQUET_MAGIC and content[-4:] == PARQUET_MAGIC and 0 <= footer <= len(content) - 12
    return content[: len(content) - 8 - footer] if whole else None


def write_parquet(
    frame: pd.DataFrame,
    path: Path,
    missing_cells: Sequence[str] = (),
    design: dict | None = None,
    budget: dict | None = None,
) -> None:
    """Write a table as zstd-compressed Parquet, atomically; a partial run's missing cells, the design of
    imported results, a budgeted run's budget and the checksum of its data pages (`read_parquet_checked`) go in
    its metadata.

    The footer holds the metadata, so the data pages are written once in memory to take their checksum:
    the file's own pages are the same bytes."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    draft = pa.BufferOutputStream()
    pq.write_table(table, draft, compression="zstd")
    extra = {MISSING_CELLS_KEY: missing_cells or None, DESIGN_KEY: design, BUDGET_KEY: budget}
    metadata = {key: json.dumps(value).encode() for key, value in extra.items() if value}
    metadata[CHECKSUM_KEY] = hashlib.sha256(_data_pages(draft.getvalue().to_pybytes())).hexdigest().encode()
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    write_atomic(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def read_bytes(path: Path) -> bytes:
    """A results file's content; one that cannot be read is a `ResultsFileError`."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise damaged(path, f"cannot be read ({exc.strerror or type(exc).__name__})") from None


def read_parquet_checked(path: Path) -> pd.DataFrame:
    """A Parquet table written by `write_parquet`, after checking it is whole and its data pages are the bytes
    written (their SHA-256 is the one recorded then); anything else is one `ResultsFileError` naming the file."""
    content = read_bytes(path)
    pages = _data_pages(content)
    if pages is None:
        raise damaged(path, "is truncated or not Parquet (it does not end in a Parquet footer)")
    try:
        recorded = (pq.read_schema(pa.BufferReader(content)).metadata or {}).get(CHECKSUM_KEY)
    except (pa.ArrowException, OSError):
        raise damaged(path, "is damaged: its Parquet footer cannot be read") from None
    if recorded is None:
        raise damaged(path, "has no checksum: it was not written by safetyrepro, or was rewritten since")
    if hashlib.sha256(pages).hexdigest().encode() != recorded:
        raise damaged(path, "changed after it was written (its SHA-256 is not the one recorded then)")
    return pd.read_parquet(pa.BufferReader(content))


def read_missing_cells(path: Path) -> list[str]:
    """The cells a table was computed without, from its metadata (empty for a complete grid)."""
    metadata = pq.read_schema(path).metadata or {}
    return json.loads(metadata[MISSING_CELLS_KEY]) if MISSING_CELLS_KEY in metadata else []


def read_design(path: Path) -> dict | None:
    """The design an imported cells table carries (None for the cells of a run)."""
    metadata = pq.read_schema(path).metadata or {}
    return json.loads(metadata[DESIGN_KEY]) if DESIGN_KEY in metadata else None


def read_budget(path: Path) -> dict | None:
    """The budget a budgeted run's cells table carries (None for a run of every cell)."""
    metadata = pq.read_schema(path).metadata or {}
    return json.loads(metadata[BUDGET_KEY]) if BUDGET_KEY in metadata else None


def json_text(data: Any) -> str:
    """The text `write_json` writes: JSON with sorted keys, indented."""
    return json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"


def record_summary(rows: pd.DataFrame, summary: dict) -> None:
    """Record in a cell's item rows (their DataFrame.attrs, which the Parquet file keeps) the SHA-256 of the
    JSON that `write_json` writes of its summary: aggregation checks the summary file by it."""
    rows.attrs[SUMMARY_SHA256] = hashlib.sha256(json_text(summary).encode()).hexdigest()


def write_json(data: Any, path: Path) -> None:
    """Write JSON (sorted keys, indented), atomically."""
    write_atomic(path, lambda tmp: tmp.write_text(json_text(data), encoding="utf-8"))


def write_text(text: str, path: Path) -> None:
    """Write a text file, atomically."""
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
