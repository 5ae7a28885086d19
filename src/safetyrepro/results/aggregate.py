"""Gathering the per-cell outputs into the tidy tables every analysis reads."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

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
        summary = json.loads(Path(path).read_text())
        summary["seed_scores"] = json.dumps(summary["seed_scores"], sort_keys=True)
        rows.append(summary)
    frame = pd.DataFrame(rows)
    extras = sorted(set(frame.columns) - set(CELL_COLUMNS))
    return frame[CELL_COLUMNS + extras]


def missing_cells(expected: Iterable[tuple[str, str, str]], cells: pd.DataFrame) -> list[str]:
    """The expected cells ("model/benchmark/config_id") that have no row in the cells table."""
    present = set(zip(cells["model"], cells["benchmark"], cells["config_id"])) if len(cells) else set()
    return ["/".join(cell) for cell in expected if cell not in present]


def items_table(item_files: Iterable[Path]) -> pd.DataFrame:
    """All item rows of all cells (prompt text stays in the per-cell files; a prompt_id links them)."""
    return pd.concat([pd.read_parquet(path).drop(columns=["prompt"]) for path in item_files], ignore_index=True)
