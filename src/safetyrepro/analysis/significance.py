"""Verdicts that account for item noise: score intervals per cell, a paired test per model pair and
config, rho_flip_sig, an item-bootstrap interval for rho_flip and the minimum detectable difference.

- A cell's interval: Wilson's score interval (Wilson 1927) on the items for a single-seed cell; for
  a sampled cell a two-stage percentile bootstrap, items resampled and then each item's seeds
  (resampling the seeds of a 0/1 item is a binomial draw at its seed mean, which is how it is drawn).
- A pair's test per config, on the items both cells answered: McNemar's exact test (McNemar 1947: a
  binomial test of the discordant items) when both cells have one seed; otherwise a paired bootstrap
  over items with the seeds nested, p = (1 + #{|d* - d| >= |d|}) / (1 + B). Across the configs of a
  benchmark the p-values of a pair are adjusted together (`analysis.significance.correction`, Holm's
  step-down method by default: Holm 1979, familywise error at alpha). A verdict is the sign of
  `flips.signs` where the adjusted p-value is under alpha, and "inconclusive" otherwise.
- rho_flip_sig = min(N+sig, N-sig) / |C|, |C| the configs both models have, as for rho_flip.
- rho_flip's item-bootstrap interval: the benchmark's items resampled jointly for all models and
  configs (one draw of item weights per resample), every cell re-scored, rho_flip recomputed.
- Minimum detectable difference: the score difference a two-sided test at alpha detects with the
  given power at n items, by the normal approximation with a 0/1 score's largest spread (p = 0.5):
  (z_{1-alpha/2} + z_{power}) * sqrt(2 * 0.25 / n) (statsmodels' NormalIndPower).
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.stats import binomtest
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_confint

from .flips import rho_flip_table, signs

if TYPE_CHECKING:
    from ..config import SignificanceSettings
    from .suite import Inputs

CELL_KEYS = ["model", "benchmark", "config_id"]
INTERVAL_COLUMNS = [*CELL_KEYS, "score", "lower", "upper", "method", "n_items", "n_seeds", "seed_sd", "seed_range"]
TEST_COLUMNS = [
    "benchmark",
    "model_a",
    "model_b",
    "config_id",
    "score_a",
    "score_b",
    "diff",
    "lower",
    "upper",
    "n_items",
    "n_a_only",
    "n_b_only",
    "test",
    "p_value",
    "p_adjusted",
    "verdict",
]
SIG_COLUMNS = [
    "benchmark",
    "model_a",
    "model_b",
    "n_configs",
    "n_plus",
    "n_minus",
    "n_ties",
    "rho_flip",
    "ceiling",
    "rho_flip_lower",
    "rho_flip_upper",
    "n_plus_sig",
    "n_minus_sig",
    "n_inconclusive",
    "rho_flip_sig",
    "n_items",
    "mdd_pp",
    "alpha",
    "correction",
]


def item_scores(items: pd.DataFrame) -> pd.DataFrame:
    """Per cell and item: the share of its seeds answered correctly (`p`) and its seed count (`n_seeds`)."""
    grouped = items.groupby([*CELL_KEYS, "item_id"], sort=False)["correct"]
    return pd.DataFrame({"p": grouped.mean(), "n_seeds": grouped.size()}).reset_index()


def _item_draws(n_items: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """How often each item is drawn in each resample of the items (resamples x items)."""
    drawn = rng.integers(0, n_items, (resamples, n_items)) + n_items * np.arange(resamples)[:, None]
    return np.bincount(drawn.ravel(), minlength=resamples * n_items).reshape(resamples, n_items).astype(float)


def benchmark_matrix(scores: pd.DataFrame, benchmark: str) -> tuple[pd.DataFrame, pd.Series]:
    """Items x (model, config) seed means of one benchmark on the items every cell has (all of them
    in a complete run), and the seed count per (model, config)."""
    frame = scores[scores["benchmark"] == benchmark]
    matrix = frame.pivot(index="item_id", columns=["model", "config_id"], values="p").dropna()
    seeds = frame.groupby(["model", "config_id"], sort=False)["n_seeds"].max().reindex(matrix.columns)
    return matrix, seeds


def bootstrap_scores(matrix: pd.DataFrame, seeds: pd.Series, resamples: int, rng: np.random.Generator) -> pd.DataFrame:
    """Every cell's score (columns of `matrix`) in each resample of a two-stage bootstrap: the same
    items drawn for all cells of a resample (so differences are paired), then each drawn item's seeds
    redrawn with replacement. For 0/1 outcomes the redrawn successes of all drawn items with k of n
    seeds right sum to one Binomial(n x their count, k / n): n + 1 draws per cell and resample
    instead of one per item and seed. With one seed it is the plain item bootstrap."""
    n_items = len(matrix)
    draws = _item_draws(n_items, resamples, rng)
    scores = np.empty((resamples, matrix.shape[1]))
    for n_seeds in sorted(set(seeds)):
        columns = np.flatnonzero(seeds.to_numpy() == n_seeds)
        right = np.rint(matrix.to_numpy()[:, columns] * n_seeds).astype(np.intp)  # items x cells
        classes = (right[:, :, None] == np.arange(n_seeds + 1)).reshape(n_items, -1).astype(float)
        drawn = (draws @ classes).reshape(resamples, len(columns), n_seeds + 1)  # drawn items per k
        successes = rng.binomial(np.rint(n_seeds * drawn).astype(np.int64), np.arange(n_seeds + 1) / n_seeds)
        scores[:, columns] = successes.sum(axis=2) / (n_seeds * n_items)
    return pd.DataFrame(scores, columns=matrix.columns)


def _quantiles(values: np.ndarray, level: float) -> tuple[float, float]:
    lower, upper = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lower), float(upper)


def cell_intervals(items: pd.DataFrame, level: float, resamples: int, seed: int) -> pd.DataFrame:
    """Each cell's score with its interval at `level` and the spread of its per-seed scores."""
    rows, scores = [], item_scores(items)
    per_seed = items.groupby([*CELL_KEYS, "seed"], sort=False)["correct"].mean().groupby(CELL_KEYS, sort=False)
    spread = pd.DataFrame({"seed_sd": per_seed.std().fillna(0.0), "seed_range": per_seed.max() - per_seed.min()})
    for b_index, benchmark in enumerate(dict.fromkeys(scores["benchmark"])):
        matrix, seeds = benchmark_matrix(scores, benchmark)
        boot = bootstrap_scores(matrix, seeds, resamples, np.random.default_rng([seed, b_index]))
        for (model, config), p in matrix.items():
            n_seeds, n = int(seeds[(model, config)]), len(p)
            if n_seeds == 1:
                lower, upper = proportion_confint(int(p.sum()), n, alpha=1 - level, method="wilson")
            else:
                lower, upper = _quantiles(boot[(model, config)].to_numpy(), level)
            rows.append(
                {
                    "model": model,
                    "benchmark": benchmark,
                    "config_id": config,
                    "score": float(p.mean()),
                    "lower": float(lower),
                    "upper": float(upper),
                    "method": "wilson" if n_seeds == 1 else "bootstrap",
                    "n_items": n,
                    "n_seeds": n_seeds,
                    **spread.loc[(model, benchmark, config)].to_dict(),
                }
            )
    return pd.DataFrame(rows, columns=INTERVAL_COLUMNS)


def paired_test(a: np.ndarray, b: np.ndarray, seeds: tuple[int, int], boot: np.ndarray, level: float) -> dict:
    """Paired comparison of two cells on the same items (`a`, `b`: per-item seed means; `boot`: the
    difference in each resample of `bootstrap_scores`)."""
    diff = float(a.mean() - b.mean())
    lower, upper = _quantiles(boot, level)
    result = {"diff": diff, "lower": lower, "upper": upper, "n_items": len(a)}
    if seeds == (1, 1):
        a_only, b_only = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
        p_value = binomtest(a_only, a_only + b_only, 0.5).pvalue if a_only + b_only else 1.0
        return {**result, "n_a_only": a_only, "n_b_only": b_only, "test": "mcnemar_exact", "p_value": float(p_value)}
    extreme = int((np.abs(boot - diff) >= abs(diff) - 1e-12).sum()) if diff else len(boot)
    p_value = min(1.0, (1 + extreme) / (1 + len(boot)))
    return {**result, "n_a_only": math.nan, "n_b_only": math.nan, "test": "paired_bootstrap", "p_value": p_value}


def paired_tests(cells: pd.DataFrame, items: pd.DataFrame, options: SignificanceSettings) -> pd.DataFrame:
    """Per benchmark, model pair (in the cells' order) and config both have: the paired test, its
    adjusted p-value across the pair's configs and the verdict."""
    scores, rows = item_scores(items), []
    for b_index, benchmark in enumerate(dict.fromkeys(cells["benchmark"])):
        matrix, seeds = benchmark_matrix(scores, benchmark)
        boot = bootstrap_scores(matrix, seeds, options.resamples, np.random.default_rng([options.seed, b_index]))
        frame = cells[cells["benchmark"] == benchmark]
        score = frame.set_index(["model", "config_id"])["score"]
        for model_a, model_b in itertools.combinations(dict.fromkeys(frame["model"]), 2):
            pair = [
                {
                    "benchmark": benchmark,
                    "model_a": model_a,
                    "model_b": model_b,
                    "config_id": config,
                    "score_a": float(score[(model_a, config)]),
                    "score_b": float(score[(model_b, config)]),
                    **paired_test(
                        matrix[(model_a, config)].to_numpy(float),
                        matrix[(model_b, config)].to_numpy(float),
                        (int(seeds[(model_a, config)]), int(seeds[(model_b, config)])),
                        (boot[(model_a, config)] - boot[(model_b, config)]).to_numpy(),
                        1 - options.alpha,
                    ),
                }
                for config in dict.fromkeys(frame["config_id"])
                if (model_a, config) in matrix and (model_b, config) in matrix
            ]
            if not pair:
                continue
            table = pd.DataFrame(pair)
            reject, adjusted, _, _ = multipletests(table["p_value"], alpha=options.alpha, method=options.correction)
            sign = signs(table["score_a"], table["score_b"]).where(reject, 0.0)
            table["p_adjusted"] = adjusted
            table["verdict"] = sign.map({1.0: "A better", -1.0: "B better", 0.0: "inconclusive"})
            rows.append(table)
    return pd.concat(rows, ignore_index=True)[TEST_COLUMNS] if rows else pd.DataFrame(columns=TEST_COLUMNS)


def minimum_detectable_difference(n_items: int, alpha: float, power: float) -> float:
    """The smallest score difference (0-1 scale) detectable at `alpha` (two-sided) with `power`."""
    effect = NormalIndPower().solve_power(effect_size=None, nobs1=n_items, alpha=alpha, power=power, ratio=1.0)
    return 0.5 * float(effect)


def rho_flip_bootstrap(
    cells: pd.DataFrame, items: pd.DataFrame, level: float, resamples: int, seed: int
) -> pd.DataFrame:
    """rho_flip's percentile interval per pair and benchmark over resampled item sets (items drawn
    jointly for all models and configs of the benchmark)."""
    scores, rows = item_scores(items), []
    for b_index, benchmark in enumerate(dict.fromkeys(cells["benchmark"])):
        matrix, _ = benchmark_matrix(scores, benchmark)
        n = len(matrix)
        weights = _item_draws(n, resamples, np.random.default_rng([seed, b_index]))
        rescored = matrix.T.to_numpy(float) @ weights.T / n  # (model, config) x resamples
        rescored = pd.DataFrame(rescored, index=matrix.columns)
        models = list(dict.fromkeys(cells.loc[cells["benchmark"] == benchmark, "model"]))
        for model_a, model_b in itertools.combinations(models, 2):
            shared = rescored.loc[model_a].index.intersection(rescored.loc[model_b].index)
            sign = signs(rescored.loc[model_a].loc[shared], rescored.loc[model_b].loc[shared])  # configs x resamples
            rho = np.minimum((sign > 0).sum(), (sign < 0).sum()) / len(sign)
            lower, upper = np.quantile(rho, [(1 - level) / 2, (1 + level) / 2]) if len(sign) else (math.nan,) * 2
            rows.append((benchmark, model_a, model_b, lower, upper))
    return pd.DataFrame(rows, columns=["benchmark", "model_a", "model_b", "rho_flip_lower", "rho_flip_upper"])


def rho_flip_sig(cells: pd.DataFrame, items: pd.DataFrame, options: SignificanceSettings) -> pd.DataFrame:
    """rho_flip beside rho_flip_sig, with the counts, rho_flip's item-bootstrap interval and the
    minimum detectable difference at the benchmark's item count."""
    tests = paired_tests(cells, items, options)
    raw = rho_flip_table(cells)
    counts = (
        tests.assign(
            n_plus_sig=tests["verdict"] == "A better",
            n_minus_sig=tests["verdict"] == "B better",
            n_inconclusive=tests["verdict"] == "inconclusive",
        )
        .groupby(["benchmark", "model_a", "model_b"], sort=False)
        .agg(
            n_plus_sig=("n_plus_sig", "sum"),
            n_minus_sig=("n_minus_sig", "sum"),
            n_inconclusive=("n_inconclusive", "sum"),
            n_items=("n_items", "max"),
        )
        .reset_index()
    )
    interval = rho_flip_bootstrap(cells, items, 1 - options.alpha, options.resamples, options.seed)
    table = raw.merge(counts, on=["benchmark", "model_a", "model_b"], how="left").merge(
        interval, on=["benchmark", "model_a", "model_b"], how="left"
    )
    table["rho_flip_sig"] = np.minimum(table["n_plus_sig"], table["n_minus_sig"]) / table["n_configs"]
    table["mdd_pp"] = [
        100 * minimum_detectable_difference(int(n), options.alpha, options.power) if n > 0 else math.nan
        for n in table["n_items"].fillna(0)
    ]
    table["alpha"], table["correction"] = options.alpha, options.correction
    return table[SIG_COLUMNS]


def intervals_table(inputs: Inputs) -> pd.DataFrame:
    options = inputs.settings.analysis.significance
    return cell_intervals(inputs.items, 1 - options.alpha, options.resamples, options.seed)


def paired_tests_table(inputs: Inputs) -> pd.DataFrame:
    return paired_tests(inputs.cells, inputs.items, inputs.settings.analysis.significance)


def rho_flip_sig_table(inputs: Inputs) -> pd.DataFrame:
    return rho_flip_sig(inputs.cells, inputs.items, inputs.settings.analysis.significance)
