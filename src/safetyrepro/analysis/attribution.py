"""Surrogate attribution: which configuration axis moves cell scores, and which flips a verdict.

Two LightGBM surrogates per benchmark (paper §5.1, app. S), each explained by TreeSHAP mean |value|
per feature:

- the *regressor* predicts the cell score from the categorical axes (every axis of the envelope:
  template, decoding, shots, scoring and any declared one) and the model;
- a *pair classifier* per model pair (A, B) predicts, per config, the strict sign of A - B (A above
  B or below; ``flips.signs``, the rho_flip sign) from the axes alone. Tied configs (sign 0) are
  left out of its training rows and counted in ``n_ties``.

These are SURROGATES that localise which axis moves scores or verdicts, not the headline: the
headline is rho_flip on the observed grid (analysis.flips). Confounded axes (e.g. logprob scoring
only runs greedy) share credit in a way the surrogate chooses, not the data.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from safetyrepro.analysis.flips import score_matrix, signs
from safetyrepro.core.axes import AXES

if TYPE_CHECKING:
    import lightgbm as lgb

    from safetyrepro.analysis.suite import Inputs

SHAP_COLUMNS = [
    "benchmark",
    "surrogate",
    "model_a",
    "model_b",
    "feature",
    "mean_abs_shap",
    "share",
    "n_cells",
    "n_ties",
    "train_r2",
    "train_accuracy",
    "role",
    "reason",
]
REGRESSOR, PAIR_CLASSIFIER = "regressor", "pair classifier"
MIN_CELLS = 10
ROLE = "surrogate"
NOTE = (
    "surrogate attribution (LightGBM + TreeSHAP): a regressor of cell score on the axes and model, and a "
    "per-pair classifier of the strict sign of A - B on the axes; localises which axis moves scores or "
    "verdicts; not the headline, which is rho_flip on the observed grid"
)


def _params(seed: int) -> dict:
    """Small, deterministic, single-threaded LightGBM settings sized for ~50-150 rows."""
    return {
        "n_estimators": 200,
        "num_leaves": 8,
        "learning_rate": 0.05,
        "min_child_samples": 3,
        "min_data_per_group": 1,
        "cat_smooth": 1.0,
        "deterministic": True,
        "force_row_wise": True,
        "seed": seed,
        "verbose": -1,
        "n_jobs": 1,
    }


def _regressor(seed: int) -> lgb.LGBMRegressor:
    import lightgbm as lgb  # here: LightGBM and SHAP take a second to import, and only this analysis needs them

    return lgb.LGBMRegressor(**_params(seed))


def _classifier(seed: int) -> lgb.LGBMClassifier:
    import lightgbm as lgb

    return lgb.LGBMClassifier(**_params(seed))


def _mean_abs_shap(model, features: pd.DataFrame) -> np.ndarray:
    """TreeSHAP mean |value| per feature (for a binary classifier: of the positive class, log-odds)."""
    import shap

    values = np.asarray(shap.TreeExplainer(model)(features).values)
    if values.ndim == 3:  # (rows, features, classes), where a shap version splits the classes
        values = values[..., -1]
    return np.abs(values).mean(axis=0)


def _rows(base: dict, features: list[str], mean_abs: np.ndarray) -> list[dict]:
    """One row per feature: mean |SHAP| and its share of the summed mean |SHAP| (NaN when that is 0)."""
    total = mean_abs.sum()
    return [
        {
            **base,
            "feature": feature,
            "mean_abs_shap": float(value),
            "share": float(value / total) if total > 0 else np.nan,
        }
        for feature, value in zip(features, mean_abs)
    ]


def _base(
    benchmark: str,
    surrogate: str,
    n_cells: int,
    pair: tuple[str, str] | tuple[None, None] = (None, None),
    n_ties=np.nan,
) -> dict:
    """The columns a surrogate's rows share (fit statistics filled in once it is fitted)."""
    return {
        "benchmark": benchmark,
        "surrogate": surrogate,
        "model_a": pair[0],
        "model_b": pair[1],
        "n_cells": n_cells,
        "n_ties": n_ties,
        "train_r2": np.nan,
        "train_accuracy": np.nan,
        "role": ROLE,
        "reason": None,
    }


def _skipped(base: dict, reason: str) -> list[dict]:
    """The one row of a surrogate not fitted: no feature, the reason why."""
    return [{**base, "feature": None, "mean_abs_shap": np.nan, "share": np.nan, "reason": reason}]


def pair_classifier_rows(cells: pd.DataFrame, benchmark: str, seed: int = 0, axes: Sequence[str] = AXES) -> list[dict]:
    """Rows of the per-pair classifiers of one benchmark (see ``shap_attribution``)."""
    frame = cells[cells["benchmark"] == benchmark]
    matrix = score_matrix(frame, benchmark)
    by_config = frame.drop_duplicates("config_id").set_index("config_id")[list(axes)]
    rows = []
    for model_a, model_b in itertools.combinations(matrix.columns, 2):
        sign = signs(matrix[model_a], matrix[model_b]).dropna()
        strict = sign[sign != 0]
        n_plus, n_minus = int((strict > 0).sum()), int((strict < 0).sum())
        base = _base(benchmark, PAIR_CLASSIFIER, len(strict), (model_a, model_b), int((sign == 0).sum()))
        if len(strict) < MIN_CELLS:
            rows += _skipped(base, f"fewer than {MIN_CELLS} configs with a strict sign ({len(strict)})")
        elif n_plus == 0 or n_minus == 0:
            rows += _skipped(base, f"one class only (N+ {n_plus}, N- {n_minus}): no strict reversal to localise")
        else:
            features = by_config.loc[strict.index].astype(str).astype("category")
            target = (strict > 0).astype(int)
            classifier = _classifier(seed).fit(features, target)
            base["train_accuracy"] = float((classifier.predict(features) == target.to_numpy()).mean())
            rows += _rows(base, list(axes), _mean_abs_shap(classifier, features))
    return rows


def shap_attribution(cells: pd.DataFrame, seed: int = 0, axes: Sequence[str] = AXES) -> pd.DataFrame:
    """Per benchmark, mean |SHAP| per feature of the surrogates (column ``surrogate``):

    - ``regressor`` (model_a/model_b empty): LightGBM of cell score on the axes (`axes`, columns of
      `cells`) and the model,
      fitted on the benchmark's cells (n_cells; at least MIN_CELLS); ``train_r2`` its in-sample fit.
    - ``pair classifier``, one per unordered model pair (A, B) as in rho_flip_table: LightGBM of the
      strict sign of A - B per config (A above B = 1, below = 0) on the axes. Tied configs are
      left out (``n_ties``); n_cells counts the configs it is fitted on; ``train_accuracy`` its
      in-sample accuracy; mean |SHAP| is in log-odds of "A above B".

    `share` is the feature's part of its surrogate's summed mean |SHAP| (NaN when that is 0). A
    surrogate that cannot be fitted (fewer than MIN_CELLS rows; a pair with one class only, i.e. no
    strict reversal) gets one row with no feature and its ``reason``. `role` and `attrs["note"]` mark
    the table a surrogate. Deterministic for a seed (single-threaded).
    """
    rows = []
    features_of = [*axes, "model"]
    for benchmark in dict.fromkeys(cells["benchmark"]):
        frame = cells[cells["benchmark"] == benchmark]
        base = _base(benchmark, REGRESSOR, len(frame))
        if len(frame) < MIN_CELLS:
            rows += _skipped(base, f"fewer than {MIN_CELLS} cells ({len(frame)})")
        else:
            features = frame[features_of].astype(str).astype("category")
            target = frame["score"].astype(float)
            regressor = _regressor(seed).fit(features, target)
            variance = float(((target - target.mean()) ** 2).sum())
            residual = float(((target - regressor.predict(features)) ** 2).sum())
            base["train_r2"] = 1 - residual / variance if variance > 0 else np.nan
            rows += _rows(base, features_of, _mean_abs_shap(regressor, features))
        rows += pair_classifier_rows(cells, benchmark, seed, axes)
    table = pd.DataFrame(rows, columns=SHAP_COLUMNS).astype({"n_ties": "Int64"})
    table.attrs["note"] = NOTE
    return table


def shap_table(inputs: Inputs) -> pd.DataFrame:
    """The suite's entry: SHAP per axis, or a note when switched off."""
    analysis = inputs.settings.analysis
    if not analysis.shap:
        return pd.DataFrame({"note": ["SHAP attribution switched off (analysis.shap: false)"]})
    return shap_attribution(inputs.cells, analysis.seeds()["shap"], inputs.design.axis_names)
