"""The same model at two precisions: how far cell scores move, and whether model orderings hold.

Two entries of the run config's model list are the same model at two precisions when they share
`path` (or `embedded`) and differ in `precision` (default bf16, as in the config schema).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from safetyrepro.analysis.flips import strict_ordering

from .frames import stack_named

if TYPE_CHECKING:
    from .suite import Inputs

DIFFERENCE_COLUMNS = [
    "benchmark",
    "base_model",
    "precision_a",
    "precision_b",
    "model_a",
    "model_b",
    "n_configs",
    "median_diff_pp",
    "median_abs_diff_pp",
    "mean_abs_diff_pp",
    "max_abs_diff_pp",
]
ORDERING_COLUMNS = [
    "benchmark",
    "precision_a",
    "precision_b",
    "n_models",
    "n_configs",
    "n_orderings_compared",
    "n_match",
]
# precision_a is the higher precision of a pair; unknown precisions sort after these, by name
PRECISION_ORDER = ["fp32", "bf16", "fp16", "int8", "nf4"]
DEFAULT_PRECISION = "bf16"


def _precision_key(precision: str) -> tuple[int, str]:
    return (PRECISION_ORDER.index(precision) if precision in PRECISION_ORDER else len(PRECISION_ORDER), precision)


def model_variants(models: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per config model entry: name, base_model (path, or 'embedded:<id>'), precision."""
    rows = [
        {
            "name": entry["name"],
            "base_model": entry["path"] if entry.get("path") else f"embedded:{entry['embedded']}",
            "precision": entry.get("precision") or DEFAULT_PRECISION,
        }
        for entry in models
    ]
    return pd.DataFrame(rows, columns=["name", "base_model", "precision"])


def _pairs(variants: pd.DataFrame) -> list[tuple[str, str, str, str, str]]:
    """(base_model, precision_a, precision_b, name_a, name_b) for entries sharing a base model and
    differing in precision, precision_a the higher one."""
    pairs = []
    for base, group in variants.groupby("base_model", sort=False):
        entries = sorted(group.itertuples(index=False), key=lambda e: _precision_key(e.precision))
        for a, b in itertools.combinations(entries, 2):
            if a.precision != b.precision:
                pairs.append((base, a.precision, b.precision, a.name, b.name))
    return pairs


def _differences(cells: pd.DataFrame, pairs: list) -> pd.DataFrame:
    rows = []
    for benchmark in dict.fromkeys(cells["benchmark"]):
        scores = cells[cells["benchmark"] == benchmark].pivot_table(
            index="config_id", columns="model", values="score", aggfunc="first"
        )
        for base, precision_a, precision_b, name_a, name_b in pairs:
            if name_a not in scores or name_b not in scores:
                continue
            diff = ((scores[name_b] - scores[name_a]) * 100).dropna()
            if diff.empty:
                continue
            rows.append(
                {
                    "benchmark": benchmark,
                    "base_model": base,
                    "precision_a": precision_a,
                    "precision_b": precision_b,
                    "model_a": name_a,
                    "model_b": name_b,
                    "n_configs": len(diff),
                    "median_diff_pp": float(diff.median()),
                    "median_abs_diff_pp": float(diff.abs().median()),
                    "mean_abs_diff_pp": float(diff.abs().mean()),
                    "max_abs_diff_pp": float(diff.abs().max()),
                }
            )
    return pd.DataFrame(rows, columns=DIFFERENCE_COLUMNS)


def _orderings(cells: pd.DataFrame, variants: pd.DataFrame) -> pd.DataFrame:
    rows = []
    # the first entry of each (base model, precision) stands for that model at that precision
    variants = variants.drop_duplicates(["base_model", "precision"])
    precisions = sorted(variants["precision"].unique(), key=_precision_key)
    for precision_a, precision_b in itertools.combinations(precisions, 2):
        at = {
            p: variants[variants["precision"] == p].set_index("base_model")["name"] for p in (precision_a, precision_b)
        }
        bases = [base for base in at[precision_a].index if base in at[precision_b].index]
        if len(bases) < 2:
            continue
        for benchmark in dict.fromkeys(cells["benchmark"]):
            scores = cells[cells["benchmark"] == benchmark].pivot_table(
                index="config_id", columns="model", values="score", aggfunc="first"
            )
            names = [at[p][base] for p in (precision_a, precision_b) for base in bases]
            if not set(names) <= set(scores.columns):
                continue
            complete = scores[names].dropna()
            if complete.empty:
                continue
            n_compared = n_match = 0
            for _, row in complete.iterrows():
                first = strict_ordering(row[list(at[precision_a][bases])].set_axis(bases))
                second = strict_ordering(row[list(at[precision_b][bases])].set_axis(bases))
                if first is not None and second is not None:
                    n_compared += 1
                    n_match += first == second
            rows.append(
                {
                    "benchmark": benchmark,
                    "precision_a": precision_a,
                    "precision_b": precision_b,
                    "n_models": len(bases),
                    "n_configs": len(complete),
                    "n_orderings_compared": n_compared,
                    "n_match": n_match,
                }
            )
    return pd.DataFrame(rows, columns=ORDERING_COLUMNS)


def precision_pairs(cells: pd.DataFrame, models: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(differences, orderings) between precisions of the same underlying model.

    differences: per benchmark and pair, paired per-config score differences in percentage points
    (median_diff_pp is signed, precision_b minus precision_a; the rest are of |diff|).
    orderings: per benchmark and precision pair with >= 2 underlying models at both precisions,
    configs scored for all of them (n_configs), those with a strict ordering at both precisions
    (n_orderings_compared) and those where the two orderings are the same (n_match); an empty
    frame with these columns when no such comparison exists.
    """
    variants = model_variants(models)
    return _differences(cells, _pairs(variants)), _orderings(cells, variants)


def precision_table(inputs: Inputs) -> pd.DataFrame:
    """The suite's entry: differences and orderings, stacked."""
    differences, orderings = precision_pairs(inputs.cells, [vars(spec) for spec in inputs.settings.models])
    return stack_named({"differences": differences, "orderings": orderings}, "table")
