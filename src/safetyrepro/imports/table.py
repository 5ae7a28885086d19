"""A plain table of results (CSV or Parquet): one row per cell (`model, benchmark, config_id, score`), or one
row per item and seed of each cell with `item_id` and `correct` (0/1) beside the cell's score.

Optional columns: the built-in axes `template, decoding, shots, scoring` (read from an id of our form,
e.g. T1-greedy-0shot-freeform, when absent; else 'unknown'), `tier`, `parse_rate`, and per item
`seed`, `item_text` (hashed to item_hash), `label`, `response`, `parsed`. Any other column is a declared
axis. The mapping's `models` and `tasks.<benchmark>.benchmark` rename; nothing else of it applies.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pandas as pd

from safetyrepro.benchmarks import DataError
from safetyrepro.benchmarks.files import read_text, regular_file
from safetyrepro.core.axes import AXES
from safetyrepro.core.messages import excerpt
from safetyrepro.core.tiers import CORE, STRESS
from safetyrepro.imports.mapping import ImportMapping
from safetyrepro.imports.runs import ImportedRun, check_names
from safetyrepro.running.hashing import item_hash

REQUIRED = ["model", "benchmark", "config_id", "score"]
ITEM_KEYS = ["item_id", "correct"]
PER_ITEM = [*ITEM_KEYS, "seed", "item_text", "label", "response", "parsed"]
OPTIONAL = ["tier", "parse_rate", *AXES]
OUR_ID = re.compile(
    r"^(?P<template>[A-Za-z0-9.]+)-(?P<decoding>[A-Za-z0-9.]+)-(?P<shots>\d+)shot-(?P<scoring>freeform|logprob)"
    r"(?P<declared>(-[a-z][a-z0-9_]*=[A-Za-z0-9.]+)*)$"
)
UNKNOWN = "unknown"
UNREADABLE = "not readable as CSV or Parquet"
MEMORY_PER_BYTE = 10  # a CSV's text and its frame of text cells take about this much memory per byte of the file
SPLIT = "split it into tables of one benchmark or model each (each an import source), or drop the columns not needed"
TRUE, FALSE = ("1", "true", "1.0"), ("0", "false", "0.0")  # the values of `parsed`, lower case
CONFIG_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]{0,199}")


def _read(path: Path) -> pd.DataFrame:
    """The table as written (CSV cells as text), from a regular file that fits in memory."""
    parquet = path.suffix.lower() == ".parquet"
    regular_file(path, "no such file or folder", f"{UNREADABLE}: ")
    _check_fits(path)
    text = "" if parquet else read_text(path, "no such file or folder", f"{UNREADABLE}: ")
    try:
        if parquet:
            frame, header = pd.read_parquet(path), []
        else:
            header = next(csv.reader(io.StringIO(text)), [])
            frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (OSError, ValueError, csv.Error) as exc:
        raise DataError(f"{path}: {UNREADABLE} ({' '.join(str(exc).split())[:120]})") from None
    except MemoryError:
        raise DataError(f"{path}: does not fit in this machine's memory as a table; {SPLIT}") from None
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise DataError(f"{path}: column {twice[0]!r} appears twice in the header")
    if frame.empty:
        raise DataError(f"{path}: no rows")
    return frame


def _check_fits(path: Path) -> None:
    """A table is read whole, as text cells: refuse one whose read copy would outgrow the memory free now."""
    import psutil  # accelerate's dependency, so always here

    size, free = path.stat().st_size, psutil.virtual_memory().available
    if size * MEMORY_PER_BYTE > free:
        raise DataError(
            f"{path}: {size / 1e9:.1f} GB, and a table is read whole, about {MEMORY_PER_BYTE} times its size in "
            f"memory, more than the {free / 1e9:.1f} GB free here; {SPLIT}"
        )


def _first_bad(path: Path, frame: pd.DataFrame, column: str, bad: pd.Series, what: str) -> None:
    """Refuse the first row where `bad` holds, naming the value it has in `column` as written, and the row."""
    if bad.any():
        row = bad.to_numpy().nonzero()[0][0]
        raise DataError(
            f"{path}: column {column}: {excerpt(frame[column].iloc[row], 40)} is not {what} (data row {row + 1})"
        )


def _numbers(path: Path, frame: pd.DataFrame, column: str) -> pd.Series:
    """A column of numbers in [0, 1] (score, correct, parse_rate)."""
    values = pd.to_numeric(frame[column], errors="coerce")
    _first_bad(path, frame, column, values.isna() | ~values.between(0, 1), "a number in [0, 1]")
    return values.astype(float)


def _seeds(path: Path, frame: pd.DataFrame) -> pd.Series:
    """The seed column: whole numbers a 64-bit integer holds."""
    seeds = pd.to_numeric(frame["seed"], errors="coerce")
    whole = seeds.notna() & (seeds.abs() < 2**63) & (seeds == seeds.round())
    _first_bad(path, frame, "seed", ~whole, "an integer")
    return seeds.astype("int64")


def _flags(path: Path, frame: pd.DataFrame) -> pd.Series:
    """The parsed column: true/false, 1/0."""
    text = frame["parsed"].astype(str).str.strip().str.lower()
    _first_bad(path, frame, "parsed", ~text.isin([*TRUE, *FALSE]), "true, false, 1 or 0")
    return text.isin(TRUE)


def _constant(path: Path, cell: pd.DataFrame, column: str, key: tuple):
    values = cell[column].astype(str).unique()
    if len(values) > 1:
        raise DataError(
            f"{path}: cell {'/'.join(key)!r}: column {column} takes several values ({', '.join(values[:3])!r})"
        )
    return cell[column].iloc[0]


def _axes(path: Path, config_id: str, row: dict, declared: list[str]) -> dict[str, str]:
    """The cell's axes: its columns, else read from an id of our form, else unknown; a column that
    contradicts the id is refused."""
    parsed = OUR_ID.match(config_id)
    from_id = {axis: parsed[axis] for axis in AXES} if parsed else {}
    if parsed:
        from_id |= dict(part.split("=", 1) for part in parsed["declared"].split("-")[1:])
    columns = {axis: str(row[axis]) for axis in [*AXES, *declared] if axis in row}
    clash = [axis for axis in columns.keys() & from_id.keys() if columns[axis] != from_id[axis]]
    if clash:
        raise DataError(
            f"{path}: config {config_id!r}: column {clash[0]} is {columns[clash[0]]!r}, the id says {from_id[clash[0]]!r}"
        )
    return {axis: UNKNOWN for axis in AXES} | from_id | columns


def read_table(path: Path, mapping: ImportMapping, notes: list[str]) -> list[ImportedRun]:
    """The runs (one per cell) of a results table."""
    frame = _read(path)
    missing = [column for column in REQUIRED if column not in frame.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)} (needs {', '.join(REQUIRED)})")
    per_item = [column for column in ITEM_KEYS if column in frame.columns]
    if len(per_item) == 1:
        raise DataError(f"{path}: per-item rows need both item_id and correct (found only {per_item[0]})")
    numbers = {
        column: _numbers(path, frame, column) for column in ("score", "correct", "parse_rate") if column in frame
    }
    if per_item:
        _first_bad(path, frame, "correct", ~numbers["correct"].isin([0.0, 1.0]), "0 or 1")
    if "seed" in frame:
        numbers["seed"] = _seeds(path, frame)
    if "parsed" in frame:
        numbers["parsed"] = _flags(path, frame)
    frame = frame.assign(**numbers)
    declared = [c for c in frame.columns if c not in {*REQUIRED, *PER_ITEM, *OPTIONAL}]
    absent = [axis for axis in AXES if axis not in frame.columns]
    if absent and not frame["config_id"].astype(str).str.fullmatch(OUR_ID.pattern).all():
        notes.append(
            f"{path}: no column {', '.join(absent)} and config ids not of our form: those axes are '{UNKNOWN}'"
        )
    if "tier" in frame.columns and not frame["tier"].isin([CORE, STRESS]).all():
        raise DataError(
            f"{path}: column tier: {frame['tier'][~frame['tier'].isin([CORE, STRESS])].iloc[0]!r} is not core or stress"
        )
    bad_id = ~frame["config_id"].astype(str).str.fullmatch(CONFIG_ID.pattern)
    if bad_id.any():
        raise DataError(
            f"{path}: config id {frame['config_id'][bad_id].iloc[0]!r} is not a plain id (letters, digits, . _ + = -)"
        )
    if "parse_rate" not in frame.columns and "parsed" not in frame.columns:
        notes.append(f"{path}: no parse_rate or parsed column: parse rates unknown, parse-clean drops these cells")
    runs = []
    for key, cell in frame.groupby(["model", "benchmark", "config_id"], sort=False):
        key = tuple(map(str, key))
        row = {column: _constant(path, cell, column, key) for column in cell.columns if column not in PER_ITEM}
        items = None
        seeds = (0,)
        if per_item:
            seed = cell["seed"] if "seed" in cell else 0
            items = pd.DataFrame(
                {
                    "item_id": cell["item_id"].astype(str),
                    "item_hash": cell["item_text"].astype(str).map(item_hash) if "item_text" in cell else None,
                    "seed": seed,
                    "prompt_id": None,
                    "response": cell["response"] if "response" in cell else None,
                    "logliks": None,
                    "label": cell["label"] if "label" in cell else None,
                    "parsed": cell["parsed"] if "parsed" in cell else True,
                    "correct": cell["correct"].astype(bool),
                }
            )
            seeds = tuple(sorted(set(items["seed"])))
        run = ImportedRun(
            file=path,
            source=f"table:{path.name}",
            model=mapping.model(key[0]),
            benchmark=mapping.task(key[1]).get("benchmark", key[1]),
            axes=_axes(path, key[2], row, declared),
            score=float(row["score"]),
            seeds=seeds,
            items=items,
            config_id=key[2],
            parse_rate=float(row["parse_rate"]) if "parse_rate" in row else None if "parsed" in cell else float("nan"),
            tier=str(row["tier"]) if "tier" in row else None,
            raw_model=key[0],
            files=(path,),
            where=f"{path} (cell {'/'.join(key)!r})",
        )
        check_names(run, f"cell {'/'.join(key)!r}")
        runs.append(run)
    return runs
