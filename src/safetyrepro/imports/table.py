"""A plain table of results (CSV or Parquet): one row per cell (`model, benchmark, config_id, score`), or one
row per item and seed of each cell with `item_id` and `correct` (0/1) beside the cell's score.

Optional columns: the built-in axes `template, decoding, shots, scoring` (read from an id of our form,
e.g. T1-greedy-0shot-freeform, when absent; else 'unknown'), `tier`, `parse_rate`, and per item
`seed`, `item_text` (hashed to item_hash), `label`, `response`, `parsed`. Any other column is a declared
axis. The mapping's `models` and `tasks.<benchmark>.benchmark` rename; nothing else of it applies.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd

from safetyrepro.benchmarks import DataError
from safetyrepro.configuration.envelope import AXES, CORE, STRESS
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
CONFIG_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]{0,199}")


def _read(path: Path) -> pd.DataFrame:
    try:
        if path.suffix.lower() == ".parquet":
            frame = pd.read_parquet(path)
        else:
            with open(path, encoding="utf-8-sig", newline="") as handle:
                header = next(csv.reader(handle), [])
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
            twice = sorted({name for name in header if header.count(name) > 1})
            if twice:
                raise DataError(f"{path}: column {twice[0]!r} appears twice in the header")
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not readable as CSV or Parquet ({' '.join(str(exc).split())[:120]})") from None
    if frame.empty:
        raise DataError(f"{path}: no rows")
    return frame


def _numbers(path: Path, frame: pd.DataFrame, column: str) -> pd.Series:
    values = pd.to_numeric(frame[column], errors="coerce")
    bad = frame[column][values.isna() | ~values.between(0, 1)]
    if len(bad):
        raise DataError(f"{path}: column {column}: {bad.iloc[0]!r} is not a number in [0, 1]")
    return values.astype(float)


def _seeds(path: Path, cell: pd.DataFrame) -> pd.Series:
    seeds = pd.to_numeric(cell["seed"], errors="coerce")
    if seeds.isna().any() or (seeds != seeds.round()).any():
        raise DataError(
            f"{path}: column seed: {cell['seed'][seeds.isna() | (seeds != seeds.round())].iloc[0]!r} is not an integer"
        )
    return seeds.astype(int)


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
    frame = frame.assign(score=_numbers(path, frame, "score"))
    if per_item:
        frame = frame.assign(correct=_numbers(path, frame, "correct"))
        if not frame["correct"].isin([0.0, 1.0]).all():
            raise DataError(f"{path}: column correct must be 0 or 1")
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
            seed = _seeds(path, cell) if "seed" in cell else 0
            items = pd.DataFrame(
                {
                    "item_id": cell["item_id"].astype(str),
                    "item_hash": cell["item_text"].astype(str).map(item_hash) if "item_text" in cell else None,
                    "seed": seed,
                    "prompt_id": None,
                    "response": cell["response"] if "response" in cell else None,
                    "logliks": None,
                    "label": cell["label"] if "label" in cell else None,
                    "parsed": cell["parsed"].astype(str).str.lower().isin(["1", "true", "1.0"])
                    if "parsed" in cell
                    else True,
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
