"""Gathering the per-cell outputs into the tidy tables every analysis reads, each cell file checked first:
a file changed or truncated since its cell wrote it stops the aggregation with one line naming it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from safetyrepro.results.storage import SUMMARY_SHA256, damaged, read_bytes, read_parquet_checked

CELL_KEYS = ["model", "benchmark", "config_id"]
AXIS_COLUMNS = ["template", "decoding", "shots", "scoring", "tier"]
CELL_COLUMNS = [
    *CELL_KEYS,
    *AXIS_COLUMNS,
    "score",
    "parse_rate",
    "n_items",
    "n_seeds",
    "seed_scores",
    "prompt_format",
    "batch_size",
    "batch_invariant",
]


def cells_table(summaries: Iterable[Path]) -> pd.DataFrame:
    """One row per cell from the cells' JSON summaries, in the order given.

    Declared axes and benchmark-specific extra metrics (e.g. BBQ bias scores) become extra columns (in
    name order), empty where a cell has none.
    """
    rows = []
    for path in summaries:
        summary = read_summary(Path(path))
        summary["seed_scores"] = json.dumps(summary["seed_scores"], sort_keys=True)
        rows.append(summary)
    frame = pd.DataFrame(rows)
    extras = sorted(set(frame.columns) - set(CELL_COLUMNS))
    return frame[CELL_COLUMNS + extras]


def read_summary(path: Path) -> dict:
    """A cell's JSON summary, checked against the SHA-256 that its item rows (the Parquet file beside it,
    checked too) recorded when the cell wrote both."""
    recorded = read_parquet_checked(path.with_suffix(".parquet")).attrs.get(SUMMARY_SHA256)
    content = read_bytes(path)
    if hashlib.sha256(content).hexdigest() != recorded:
        raise damaged(path, f"changed after it was written (its SHA-256 is not the one {path.stem}.parquet recorded)")
    return json.loads(content)


def missing_cells(expected: Iterable[tuple[str, str, str]], cells: pd.DataFrame) -> list[str]:
    """The expected cells ("model/benchmark/config_id") that have no row in the cells table."""
    present = set(zip(cells["model"], cells["benchmark"], cells["config_id"])) if len(cells) else set()
    return ["/".join(cell) for cell in expected if cell not in present]


def items_table(item_files: Iterable[Path]) -> pd.DataFrame:
    """All item rows of all cells, each file checked (prompt text stays in the per-cell files; a prompt_id
    links them)."""
    return pd.concat(
        [read_parquet_checked(Path(path)).drop(columns=["prompt"]) for path in item_files], ignore_index=True
    )
