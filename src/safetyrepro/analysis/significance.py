"""Verdicts that account for item noise: score intervals per cell, a paired test per model pair and
config, rho_flip_sig, an item-bootstrap interval for rho_flip and the minimum detectable difference.

- A cell's interval, on its own items: Wilson's score interval (Wilson 1927) for a single-seed
  cell; for a sampled cell a percentile bootstrap over its items, each item carrying its seeds (the
  seeds nested in the item: resampling them again would count seed noise twice, Davison & Hinkley
  1997, section 3.8).
- A pair's test per config, on the items both cells have: McNemar's exact test (McNemar 1947: a
  binomial test of the discordant items) when both cells have one seed; otherwise a paired
  bootstrap over those items (the same items drawn for both cells, seeds nested), its p-value from
  the bootstrap standard error, 2 P(T_{n-1} > |d| / (se sqrt(n / (n - 1)))) (the plug-in spread
  corrected, Student's t for few items; no floor at 1 / (B + 1), which under Holm over 48 configs
  would need B >= 960 to reach alpha at all). Across the configs of a
  benchmark the p-values of a pair are adjusted together (`analysis.significance.correction`,
  Holm's step-down method by default: Holm 1979, familywise error at alpha). A verdict is the sign
  of `flips.signs` on the two cells' scores over those items where the adjusted p-value is under
  alpha, and "inconclusive" otherwise.
- rho_flip_sig = min(N+sig, N-sig) / |C|, |C| the configs both models have, as for rho_flip.
- rho_flip's item-bootstrap interval: the items every cell of the benchmark has (all of them in a
  complete run) resampled jointly for all models and configs, every cell re-scored, rho_flip
  recomputed.
- Minimum detectable difference: the score difference a two-sided test at alpha detects with the
  given power at n items, by the normal approximation with a 0/1 score's largest spread (p = 0.5):
  (z_{1-alpha/2} + z_{power}) * sqrt(2 * 0.25 / n) (statsmodels' NormalIndPower); `mdd_adjusted_pp`
  is the same at alpha / |C|, the level one config's test meets under the Bonferroni bound of the
  correction.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.stats import binomtest
from scipy.stats import t as student_t
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_confint

from safetyrepro.analysis.flips import rho_flip_table, rho_of_signs, signs

if TYPE_CHECKING:
    from safetyrepro.analysis.suite import Inputs
    from safetyrepro.configuration.settings import SignificanceSettings

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
    "mdd_adjusted_pp",
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
    """Items x (model, config) seed means of one benchmark (NaN where a cell lacks the item), and the
    seed count per (model, config)."""
    frame = scores[scores["benchmark"] == benchmark]
    matrix = frame.pivot(index="item_id", columns=["model", "config_id"], values="p")
    seeds = frame.groupby(["model", "config_id"], sort=False)["n_seeds"].max().reindex(matrix.columns)
    return matrix, seeds


def bootstrap_scores(matrix: pd.DataFrame, resamples: int, rng: np.random.Generator) -> pd.DataFrame:
    """Every column's score (the mean of its items' seed means) in each resample of the rows of
    `matrix` (items, without gaps): the same items drawn for every column, so differences are paired."""
    draws = _item_draws(len(matrix), resamples, rng)
    return pd.DataFrame(draws @ matrix.to_numpy(float) / len(matrix), columns=matrix.columns)


def _quantiles(values: np.ndarray, level: float) -> tuple[float, float]:
    lower, upper = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lower), float(upper)


class _Resamples:
    """Bootstrap scores of one benchmark's cells, drawn once per set of items (every cell shares one
    set in a complete run; cells or pairs with other items get draws of their own)."""

    def __init__(self, matrix: pd.DataFrame, resamples: int, seed: list[int]):
        self.matrix, self.resamples, self.seed, self.drawn = matrix, resamples, seed, {}

    def scores(self, columns: list) -> pd.DataFrame:
        """The columns' bootstrap scores on the items all of them have."""
        present = self.matrix[columns].notna().all(axis=1)
        key = tuple(present)
        if key not in self.drawn:
            with_items = self.matrix.columns[self.matrix[present].notna().all(axis=0)]
            rng = np.random.default_rng([*self.seed, len(self.drawn)])
            self.drawn[key] = bootstrap_scores(self.matrix.loc[present, with_items], self.resamples, rng)
        return self.drawn[key][columns]


def cell_intervals(items: pd.DataFrame, level: float, resamples: int, seed: int) -> pd.DataFrame:
    """Each cell's score with its interval at `level` (on its own items) and the spread of its
    per-seed scores."""
    rows, scores = [], item_scores(items)
    per_seed = items.groupby([*CELL_KEYS, "seed"], sort=False)["correct"].mean().groupby(CELL_KEYS, sort=False)
    spread = pd.DataFrame({"seed_sd": per_seed.std().fillna(0.0), "seed_range": per_seed.max() - per_seed.min()})
    for b_index, benchmark in enumerate(dict.fromkeys(scores["benchmark"])):
        matrix, seeds = benchmark_matrix(scores, benchmark)
        resampled = _Resamples(matrix, resamples, [seed, b_index])
        for (model, config), column in matrix.items():
            p, n_seeds = column.dropna(), int(seeds[(model, config)])
            if n_seeds == 1:
                lower, upper = proportion_confint(int(p.sum()), len(p), alpha=1 - level, method="wilson")
            else:
                lower, upper = _quantiles(resampled.scores([(model, config)]).iloc[:, 0].to_numpy(), level)
            rows.append(
                {
                    "model": model,
                    "benchmark": benchmark,
                    "config_id": config,
                    "score": float(p.mean()),
                    "lower": float(lower),
                    "upper": float(upper),
                    "method": "wilson" if n_seeds == 1 else "bootstrap",
                    "n_items": len(p),
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
    result = {"score_a": float(a.mean()), "score_b": float(b.mean()), "diff": diff, "lower": lower, "upper": upper}
    result["n_items"] = len(a)
    if seeds == (1, 1):
        a_only, b_only = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
        p_value = binomtest(a_only, a_only + b_only, 0.5).pvalue if a_only + b_only else 1.0
        return {**result, "n_a_only": a_only, "n_b_only": b_only, "test": "mcnemar_exact", "p_value": float(p_value)}
    n = len(a)  # the bootstrap's spread is the plug-in one: n / (n - 1) corrects it, t on n - 1 df
    spread = float(np.std(boot, ddof=1)) * math.sqrt(n / (n - 1)) if n > 1 else 0.0
    p_value = 1.0 if diff == 0 else 0.0 if spread == 0 else float(2 * student_t.sf(abs(diff) / spread, n - 1))
    return {**result, "n_a_only": math.nan, "n_b_only": math.nan, "test": "paired_bootstrap", "p_value": p_value}


def paired_tests(cells: pd.DataFrame, items: pd.DataFrame, options: SignificanceSettings) -> pd.DataFrame:
    """Per benchmark, model pair (in the cells' order) and config both have, on the items both cells
    have: the paired test, its adjusted p-value across the pair's configs and the verdict."""
    scores, rows = item_scores(items), []
    for b_index, benchmark in enumerate(dict.fromkeys(cells["benchmark"])):
        matrix, seeds = benchmark_matrix(scores, benchmark)
        resampled = _Resamples(matrix, options.resamples, [options.seed, b_index])
        frame = cells[cells["benchmark"] == benchmark]
        for model_a, model_b in itertools.combinations(dict.fromkeys(frame["model"]), 2):
            pair = []
            for config in dict.fromkeys(frame["config_id"]):
                a, b = (model_a, config), (model_b, config)
                if a not in matrix or b not in matrix:
                    continue
                shared = matrix[[a, b]].dropna()
                if shared.empty:
                    continue
                boot = resampled.scores([a, b])
                test = paired_test(
                    shared[a].to_numpy(float),
                    shared[b].to_numpy(float),
                    (int(seeds[a]), int(seeds[b])),
                    (boot[a] - boot[b]).to_numpy(),
                    1 - options.alpha,
                )
                pair.append(
                    {"benchmark": benchmark, "model_a": model_a, "model_b": model_b, "config_id": config, **test}
                )
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
    """rho_flip's percentile interval per pair and benchmark over resampled item sets (the items every
    cell of the benchmark has, drawn jointly for all models and configs); NaN without such items."""
    scores, rows = item_scores(items), []
    for b_index, benchmark in enumerate(dict.fromkeys(cells["benchmark"])):
        matrix, _ = benchmark_matrix(scores, benchmark)
        matrix = matrix.dropna()
        rescored = (
            bootstrap_scores(matrix, resamples, np.random.default_rng([seed, b_index])).T if len(matrix) else None
        )  # (model, config) x resamples
        models = list(dict.fromkeys(cells.loc[cells["benchmark"] == benchmark, "model"]))
        for model_a, model_b in itertools.combinations(models, 2):
            lower = upper = math.nan
            if rescored is not None:
                shared = rescored.loc[model_a].index.intersection(rescored.loc[model_b].index)
                sign = signs(rescored.loc[model_a].loc[shared], rescored.loc[model_b].loc[shared])  # configs x draws
                if len(sign):
                    lower, upper = _quantiles(rho_of_signs(sign.to_numpy(), axis=0), level)
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
    table["mdd_pp"], table["mdd_adjusted_pp"] = (
        [
            100 * minimum_detectable_difference(int(n), alpha, options.power) if n > 0 else math.nan
            for n, alpha in zip(table["n_items"].fillna(0), levels)
        ]
        for levels in ([options.alpha] * len(table), options.alpha / table["n_configs"].clip(lower=1))
    )
    table["alpha"], table["correction"] = options.alpha, options.correction
    return table[SIG_COLUMNS]


def intervals_table(inputs: Inputs) -> pd.DataFrame:
    options = inputs.settings.analysis.significance
    return cell_intervals(inputs.items, 1 - options.alpha, options.resamples, options.seed)


def paired_tests_table(inputs: Inputs) -> pd.DataFrame:
    return paired_tests(inputs.cells, inputs.items, inputs.settings.analysis.significance)


def rho_flip_sig_table(inputs: Inputs) -> pd.DataFrame:
    return rho_flip_sig(inputs.cells, inputs.items, inputs.settings.analysis.significance)
