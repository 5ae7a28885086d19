"""Surrogate attribution: which configuration axis moves cell scores.

A small LightGBM regressor per benchmark predicts the cell score from the categorical axes
(template, decoding, shots, scoring) and the model; TreeSHAP mean |value| per feature says which
axis the surrogate leans on. This is a SURROGATE that localises which axis moves scores, not the
headline: the headline is rho_flip on the observed grid (analysis.flips). Confounded axes (e.g.
logprob scoring only runs greedy) share credit in a way the surrogate chooses, not the data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lightgbm as lgb
import numpy as np
import pandas as pd
import shap

if TYPE_CHECKING:
    from .suite import Inputs

FEATURES = ["template", "decoding", "shots", "scoring", "model"]
SHAP_COLUMNS = ["benchmark", "feature", "mean_abs_shap", "share", "n_cells", "train_r2", "role"]
MIN_CELLS = 10
ROLE = "surrogate"
NOTE = (
    "surrogate attribution (LightGBM + TreeSHAP): localises which axis moves scores; "
    "not the headline, which is rho_flip on the observed grid"
)


def _regressor(seed: int) -> lgb.LGBMRegressor:
    """A small, deterministic, single-threaded LightGBM regressor sized for ~100 cells."""
    return lgb.LGBMRegressor(
        n_estimators=200,
        num_leaves=8,
        learning_rate=0.05,
        min_child_samples=3,
        min_data_per_group=1,
        cat_smooth=1.0,
        deterministic=True,
        force_row_wise=True,
        seed=seed,
        verbose=-1,
        n_jobs=1,
    )


def shap_attribution(cells: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per benchmark (>= MIN_CELLS cells): mean |SHAP| per feature of a LightGBM surrogate of score.

    `share` is the feature's part of the benchmark's summed mean |SHAP| (NaN when that is 0);
    `train_r2` is the surrogate's in-sample fit; `role` and `attrs["note"]` mark it a surrogate.
    """
    rows = []
    for benchmark in dict.fromkeys(cells["benchmark"]):
        frame = cells[cells["benchmark"] == benchmark]
        if len(frame) < MIN_CELLS:
            continue
        features = frame[FEATURES].astype(str).astype("category")
        target = frame["score"].astype(float)
        regressor = _regressor(seed).fit(features, target)
        values = shap.TreeExplainer(regressor).shap_values(features)
        mean_abs = np.abs(values).mean(axis=0)
        total = mean_abs.sum()
        variance = float(((target - target.mean()) ** 2).sum())
        residual = float(((target - regressor.predict(features)) ** 2).sum())
        r2 = 1 - residual / variance if variance > 0 else np.nan
        for feature, value in zip(FEATURES, mean_abs):
            rows.append(
                {
                    "benchmark": benchmark,
                    "feature": feature,
                    "mean_abs_shap": float(value),
                    "share": float(value / total) if total > 0 else np.nan,
                    "n_cells": len(frame),
                    "train_r2": r2,
                    "role": ROLE,
                }
            )
    table = pd.DataFrame(rows, columns=SHAP_COLUMNS)
    table.attrs["note"] = NOTE
    return table


def shap_table(inputs: Inputs) -> pd.DataFrame:
    """The suite's entry: SHAP per axis, or a note when switched off."""
    analysis = inputs.settings.analysis
    if not analysis.shap:
        return pd.DataFrame({"note": ["SHAP attribution switched off (analysis.shap: false)"]})
    return shap_attribution(inputs.cells, seed=analysis.seeds()["shap"])
