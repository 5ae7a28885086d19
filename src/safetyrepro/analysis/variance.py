"""How much of the free-form score variance is the model, and how much is the harness.

A Type II ANOVA per benchmark (statsmodels) splits the sum of squares of the cell scores into the
model factor, the implementation factors (every axis of the envelope but the scoring path, which
is constant within the free-form slice: template, decoding, shots and any declared axis), their
two-way interactions and the residual. rho = implementation share / model share: above 1 the harness moves scores more
than the choice of model does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf
from statsmodels.stats.anova import anova_lm

from safetyrepro.core.axes import AXES

if TYPE_CHECKING:
    from safetyrepro.analysis.suite import Inputs

VARIANCE_COLUMNS = [
    "benchmark",
    "model_formula",
    "n_cells",
    "residual_df",
    "model_share",
    "implementation_share",
    "interaction_share",
    "residual_share",
    "rho",
]
# Below this many residual degrees of freedom the interaction model is (nearly) saturated and its
# residual mean square, which Type II sums of squares are backed out from, is unusable.
MIN_RESIDUAL_DF = 2


def _formula(factors: list[str], interactions: bool) -> str:
    """Patsy formula of score on the given factors, optionally with all two-way interactions."""
    if not factors:
        return "score ~ 1"
    terms = " + ".join(f"C({factor})" for factor in factors)
    return f"score ~ ({terms})**2" if interactions and len(factors) > 1 else f"score ~ {terms}"


def _rank(frame: pd.DataFrame, formula: str) -> tuple[int, int]:
    """(rank, number of columns) of the formula's design matrix."""
    exog = smf.ols(formula, data=frame).exog
    return int(np.linalg.matrix_rank(exog)), exog.shape[1]


def _estimable(frame: pd.DataFrame, factors: list[str]) -> list[str]:
    """Factors kept in order (model first) while each adds its full rank; on an incomplete grid a
    factor aliased with earlier ones (e.g. a decoding only ever run with one template) is left out
    and its variance falls to the factor it is aliased with, or to the residual."""
    kept: list[str] = []
    for factor in factors:
        rank, columns = _rank(frame, _formula([*kept, factor], False))
        if rank == columns:
            kept.append(factor)
    return kept


def _fit(frame: pd.DataFrame, factors: list[str]):
    """OLS fit with two-way interactions, or main effects only when the interaction design is
    rank-deficient or leaves fewer than MIN_RESIDUAL_DF residual degrees of freedom."""
    formula = _formula(factors, True)
    rank, columns = _rank(frame, formula)
    if rank < columns or len(frame) - rank < MIN_RESIDUAL_DF:
        formula = _formula(factors, False)
    return smf.ols(formula, data=frame).fit(), formula


def _rho(implementation: float, model: float) -> float:
    """implementation / model share: inf when the model share is 0 and the harness moves scores,
    NaN when neither does (or a share is undefined)."""
    if math.isnan(implementation) or math.isnan(model):
        return math.nan
    if model == 0:
        return math.inf if implementation > 0 else math.nan
    return implementation / model


def variance_shares(cells: pd.DataFrame, axes: Sequence[str] = AXES) -> pd.DataFrame:
    """Per benchmark, on free-form cells only: Type II ANOVA shares of the total sum of squares, the
    factors being the model and every axis in `axes` (columns of `cells`) but scoring.

    Shares are sums of squares over the total (centred) sum of squares of the scores. In a
    balanced grid they add up to 1; in an unbalanced one Type II terms need not. Factors with a
    single level, or aliased with earlier factors on an incomplete grid, are left out of the
    formula (share 0; see `model_formula`). When only main effects could be fitted,
    `model_formula` shows it and `interaction_share` is NaN (interactions sit in the residual). A fit
    that leaves no residual degree of freedom (e.g. one free-form config and two models) has no Type II
    test and gets NaN shares.
    """
    rows = []
    harness_axes = [axis for axis in axes if axis != "scoring"]
    every = ["model", *harness_axes]
    freeform = cells[cells["scoring"] == "freeform"]
    for benchmark in dict.fromkeys(freeform["benchmark"]):
        frame = freeform[freeform["benchmark"] == benchmark][[*every, "score"]].copy()
        frame[every] = frame[every].astype(str)
        factors = _estimable(frame, [factor for factor in every if frame[factor].nunique() > 1])
        fit, formula = _fit(frame, factors)
        total = float(((frame["score"] - frame["score"].mean()) ** 2).sum())
        interactions = "**2" in formula
        if total > 0 and factors and fit.df_resid >= 1:
            table = anova_lm(fit, typ=2)["sum_sq"]
            effects = {term: float(value) for term, value in table.items() if term != "Residual"}
            model = effects.get("C(model)", 0.0) / total
            implementation = sum(effects.get(f"C({factor})", 0.0) for factor in harness_axes) / total
            interaction = (
                sum(value for term, value in effects.items() if ":" in term) / total if interactions else math.nan
            )
            residual = float(fit.ssr) / total
        elif total > 0 and not factors:  # no factor varies: everything is residual
            model, implementation, interaction, residual = 0.0, 0.0, math.nan, 1.0
        else:  # every score equal, or a saturated fit (no residual df): no shares to give
            model = implementation = interaction = residual = math.nan
        rows.append(
            {
                "benchmark": benchmark,
                "model_formula": formula,
                "n_cells": len(frame),
                "residual_df": float(fit.df_resid),
                "model_share": model,
                "implementation_share": implementation,
                "interaction_share": interaction,
                "residual_share": residual,
                "rho": _rho(implementation, model),
            }
        )
    return pd.DataFrame(rows, columns=VARIANCE_COLUMNS)


def variance_table(inputs: Inputs) -> pd.DataFrame:
    """The suite's entry: ANOVA shares of the run's cells."""
    return variance_shares(inputs.cells, inputs.design.axis_names)
