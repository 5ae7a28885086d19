"""The precision probe (config `precision_probe`): every model once more at a second precision, on a
few configs (the conservative core by default), as the paper's BF16-vs-NF4 check (54 paired cells:
median / mean / max absolute difference 1.7 / 2.6 / 20.7 pp; the three-model ordering matched on 17
of 18 (benchmark, config) cells).

Each grid model is paired with its twin: the same weights at the probe precision, either another
grid model or a probe model whose cells (precision_probe.parquet) stay out of the headline tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from safetyrepro.analysis.flips import strict_ordering
from safetyrepro.analysis.frames import stack_named

if TYPE_CHECKING:
    from safetyrepro.analysis.suite import Inputs

PAIR_COLUMNS = ["benchmark", "config_id", "model", "twin", "precision", "twin_precision", "diff_pp"]
DIFFERENCE_COLUMNS = [
    "benchmark",
    "n_cells",
    "median_diff_pp",
    "median_abs_diff_pp",
    "mean_abs_diff_pp",
    "max_abs_diff_pp",
    "n_orderings_compared",
    "n_orderings_matched",
]
ORDERING_COLUMNS = ["benchmark", "config_id", "n_models", "ordering", "twin_ordering", "match", "left_out"]
POOLED = "all"


def paired_cells(
    cells: pd.DataFrame, probe_cells: pd.DataFrame, twins: Mapping[str, str], configs: Sequence[str]
) -> pd.DataFrame:
    """One row per model, benchmark and probe config scored for both the model and its twin:
    diff_pp = (twin score - model score) x 100. Twins are looked up in the grid's cells first."""
    scores = pd.concat([cells, probe_cells], ignore_index=True)
    scores = scores[scores["config_id"].isin(list(configs))].drop_duplicates(["model", "benchmark", "config_id"])
    scores = scores.set_index(["model", "benchmark", "config_id"])
    precision = scores["precision"] if "precision" in scores else None
    rows = []
    for (model, benchmark, config_id), score in scores["score"].items():
        twin = twins.get(model)
        if twin is None or (twin, benchmark, config_id) not in scores.index:
            continue
        rows.append(
            {
                "benchmark": benchmark,
                "config_id": config_id,
                "model": model,
                "twin": twin,
                "precision": None if precision is None else precision[(model, benchmark, config_id)],
                "twin_precision": None if precision is None else precision[(twin, benchmark, config_id)],
                "diff_pp": float(scores["score"][(twin, benchmark, config_id)] - score) * 100,
            }
        )
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def differences(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark and pooled over all paired cells (benchmark "all"): the signed median and the
    median / mean / max of |diff| in percentage points (the ordering counts are filled in by
    `precision_probe`)."""

    def row(benchmark: str, diff: pd.Series) -> dict:
        return {
            "benchmark": benchmark,
            "n_cells": len(diff),
            "median_diff_pp": float(diff.median()),
            "median_abs_diff_pp": float(diff.abs().median()),
            "mean_abs_diff_pp": float(diff.abs().mean()),
            "max_abs_diff_pp": float(diff.abs().max()),
        }

    rows = [row(benchmark, group["diff_pp"]) for benchmark, group in pairs.groupby("benchmark", sort=False)]
    if len(pairs):
        rows.append(row(POOLED, pairs["diff_pp"]))
    return pd.DataFrame(rows, columns=DIFFERENCE_COLUMNS[:-2]).reindex(columns=DIFFERENCE_COLUMNS)


def orderings(cells: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Per (benchmark, config) scored for every compared model: the strict ordering of the models and
    of their twins (named by their model), and whether they match (None when either has a tie). A
    model already at the probe precision is its own twin (a pair with itself in `pairs`). Models
    that share one twin (one set of weights at several precisions) cannot be ordered at the probe
    precision: they are left out of every config, and named in `left_out`."""
    twin_of = pairs.drop_duplicates("model").set_index("model")["twin"]
    shared = twin_of[twin_of.duplicated(keep=False)].index
    compared = [model for model in twin_of.index if model not in shared]
    rows = []
    if len(compared) < 2:
        return pd.DataFrame(rows, columns=ORDERING_COLUMNS)
    for (benchmark, config_id), group in pairs[pairs["model"].isin(compared)].groupby(
        ["benchmark", "config_id"], sort=False
    ):
        if len(group) < len(compared):  # a model's cell is missing (a partial run): no full ordering
            continue
        scores = cells[(cells["benchmark"] == benchmark) & (cells["config_id"] == config_id)]
        own = scores.set_index("model")["score"].loc[group["model"]]
        twin = own + group.set_index("model")["diff_pp"] / 100
        first, second = strict_ordering(own), strict_ordering(twin)
        rows.append(
            {
                "benchmark": benchmark,
                "config_id": config_id,
                "n_models": len(group),
                "ordering": " > ".join(first) if first else "tie",
                "twin_ordering": " > ".join(second) if second else "tie",
                "match": None if first is None or second is None else first == second,
                "left_out": ", ".join(shared),
            }
        )
    return pd.DataFrame(rows, columns=ORDERING_COLUMNS)


def precision_probe(
    cells: pd.DataFrame, probe_cells: pd.DataFrame, twins: Mapping[str, str], configs: Sequence[str]
) -> dict[str, pd.DataFrame]:
    """The probe's tables: `differences` (per benchmark and pooled, with the cells whose model ordering
    is strict at both precisions and those where it matches), `orderings` (per benchmark and config),
    `pairs` (every paired cell). `twins` may map a model to itself (already at the probe precision):
    it then counts in the orderings, not in the differences."""
    pairs = paired_cells(cells, probe_cells, twins, configs)
    ordering_table = orderings(cells, pairs)
    pairs = pairs[pairs["model"] != pairs["twin"]].reset_index(drop=True)
    difference_table = differences(pairs)
    for index, benchmark in difference_table["benchmark"].items():
        rows = ordering_table if benchmark == POOLED else ordering_table[ordering_table["benchmark"] == benchmark]
        matched, compared = ordering_matches(rows)
        difference_table.loc[index, ["n_orderings_compared", "n_orderings_matched"]] = compared, matched
    difference_table = difference_table.astype({"n_orderings_compared": "Int64", "n_orderings_matched": "Int64"})
    return {"differences": difference_table, "orderings": ordering_table, "pairs": pairs}


def ordering_matches(ordering_table: pd.DataFrame) -> tuple[int, int]:
    """(cells whose model ordering matches at both precisions, cells with a strict ordering at both)."""
    compared = ordering_table["match"].dropna() if len(ordering_table) else pd.Series(dtype=object)
    return int(compared.astype(bool).sum()), len(compared)


def precision_table(inputs: Inputs) -> pd.DataFrame:
    """The suite's entry: the probe's tables stacked, or a note when the run has no probe."""
    probe = inputs.settings.precision_probe
    if probe is None:
        return pd.DataFrame({"note": ["no precision probe in this run (set precision_probe in the config)"]})
    precisions = {spec.name: spec.precision for spec in [*inputs.settings.models, *probe.new_models]}
    with_precision = lambda frame: frame.assign(precision=frame["model"].map(precisions))  # noqa: E731
    at_probe_precision = {spec.name: spec.name for spec in inputs.settings.models if spec.precision == probe.precision}
    tables = precision_probe(
        with_precision(inputs.cells),
        with_precision(inputs.probe_cells),
        {**at_probe_precision, **probe.twins},
        probe.configs,
    )
    return stack_named(tables, "table")
