"""Multi-prompt summaries of each model on each benchmark over the configs it was scored on, after
Mizrahi et al., "State of What Art? A Call for Multi-Prompt LLM Evaluation" (TACL 2024, arXiv
2401.00595): MaxP, the best config's score (what a developer tuning the prompt reports); AvgP,
the mean over configs (what a user meets on average); and their combined performance score
CPS = saturation x MaxP with saturation = 1 - (MaxP - AvgP), which penalises a model whose best
score sits far above its average. Scores are accuracies in [0, 1].
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from safetyrepro.analysis.suite import Inputs

MULTI_PROMPT_COLUMNS = [
    "model",
    "benchmark",
    "n_configs",
    "max_p",
    "avg_p",
    "saturation",
    "cps",
    "worst",
    "spread",
    "best_config",
    "worst_config",
]


def multi_prompt(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, benchmark), in order of appearance, over its configs with a score:
    max_p, avg_p, saturation, cps, worst (the minimum), spread (max_p - worst) and the best and
    worst config ids (ties: the first in config order, the order of first appearance in `cells`)."""
    pair = cells.groupby(["model", "benchmark"], sort=False).ngroup()
    scored = cells.assign(pair=pair, rank=pd.factorize(cells["config_id"])[0])[cells["score"].notna()]
    scored = scored.sort_values(["pair", "rank"], kind="stable").reset_index(drop=True)
    grouped = scored.groupby(["model", "benchmark"], sort=False)["score"]
    table = grouped.agg(n_configs="size", max_p="max", avg_p="mean", worst="min")
    table["best_config"] = scored["config_id"].to_numpy()[grouped.idxmax().to_numpy()]
    table["worst_config"] = scored["config_id"].to_numpy()[grouped.idxmin().to_numpy()]
    table["saturation"] = 1 - (table["max_p"] - table["avg_p"])
    table["cps"] = table["saturation"] * table["max_p"]
    table["spread"] = table["max_p"] - table["worst"]
    return table.reset_index()[MULTI_PROMPT_COLUMNS]


def multi_prompt_table(inputs: Inputs) -> pd.DataFrame:
    """The suite's entry: the multi-prompt summaries of the run's cells."""
    return multi_prompt(inputs.cells)
