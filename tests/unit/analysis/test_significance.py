"""Item-level uncertainty (safetyrepro.analysis.significance) on synthetic tables with a known truth."""

from __future__ import annotations

import gc
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest, norm

from safetyrepro.analysis.flips import rho_flip_table
from safetyrepro.analysis.significance import (
    cell_intervals,
    minimum_detectable_difference,
    paired_tests,
    rho_flip_sig,
)
from safetyrepro.configuration.settings import SignificanceSettings

OPTIONS = SignificanceSettings(alpha=0.05, power=0.8, correction="holm", resamples=400, seed=0)
GREEDY = [f"T{t}-greedy-0shot-freeform" for t in range(1, 5)]
SAMPLED = [f"T{t}-t0.7-0shot-freeform" for t in range(1, 5)]


def simulate(rng, accuracy: dict[str, float], n_items: int, configs=GREEDY + SAMPLED, benchmark="bbq") -> pd.DataFrame:
    """Item rows: every model answers each item correctly with its accuracy; sampled configs have 5 seeds."""
    rows = []
    for model, p in accuracy.items():
        for config in configs:
            seeds = 5 if "-t0" in config else 1
            correct = rng.random((n_items, seeds)) < p
            for item in range(n_items):
                for seed in range(seeds):
                    rows.append((model, benchmark, config, f"i{item}", seed, bool(correct[item, seed])))
    return pd.DataFrame(rows, columns=["model", "benchmark", "config_id", "item_id", "seed", "correct"])


def cells_of(items: pd.DataFrame) -> pd.DataFrame:
    """Cell scores as the workflow computes them: the mean over seeds of each seed's accuracy."""
    per_seed = items.groupby(["model", "benchmark", "config_id", "seed"], sort=False)["correct"].mean()
    return per_seed.groupby(["model", "benchmark", "config_id"], sort=False).mean().rename("score").reset_index()


def test_a_large_margin_is_significant_on_every_config():
    items = simulate(np.random.default_rng(1), {"A": 0.8, "B": 0.4}, n_items=300)
    tests = paired_tests(cells_of(items), items, OPTIONS)
    assert len(tests) == 8 and set(tests["verdict"]) == {"A better"}
    assert set(tests["test"]) == {"mcnemar_exact", "paired_bootstrap"}
    assert (tests["lower"] > 0).all()
    table = rho_flip_sig(cells_of(items), items, OPTIONS).iloc[0]
    assert (table["n_plus_sig"], table["n_minus_sig"], table["rho_flip_sig"], table["rho_flip"]) == (8, 0, 0.0, 0.0)
    assert (table["rho_flip_lower"], table["rho_flip_upper"]) == (0.0, 0.0)


@pytest.mark.slow  # over 5 s alone: make test only
def test_equal_models_flip_by_noise_but_rarely_test_significant():
    """Same accuracy at 10 items: raw rho_flip is usually above 0, while significant verdicts stay at or
    under alpha, per config and per benchmark (familywise, Holm), over many simulated grids."""
    rng = np.random.default_rng(7)
    grids, raw_positive, significant, tests, any_significant = 200, 0, 0, 0, 0
    options = SignificanceSettings(alpha=0.05, power=0.8, correction="holm", resamples=200, seed=3)
    gc.freeze()  # statsmodels' Holm runs gc.collect() on every call: keep the test session's heap out of it
    try:
        for _ in range(grids):
            items = simulate(rng, {"A": 0.6, "B": 0.6}, n_items=10)
            cells = cells_of(items)
            raw_positive += rho_flip_table(cells)["rho_flip"].iloc[0] > 0
            verdicts = paired_tests(cells, items, options)["verdict"]
            significant += (verdicts != "inconclusive").sum()
            tests += len(verdicts)
            any_significant += (verdicts != "inconclusive").any()
    finally:
        gc.unfreeze()
    assert raw_positive / grids > 0.5
    assert significant / tests <= options.alpha and any_significant / grids <= options.alpha


def test_mcnemar_on_the_discordant_items():
    a = [1] * 8 + [0] * 1 + [1] * 6 + [0] * 5  # 8 items only A answers, 1 only B, 6 both, 5 neither
    b = [0] * 8 + [1] * 1 + [1] * 6 + [0] * 5
    items = pd.DataFrame(
        [("A", "bbq", GREEDY[0], f"i{i}", 0, bool(v)) for i, v in enumerate(a)]
        + [("B", "bbq", GREEDY[0], f"i{i}", 0, bool(v)) for i, v in enumerate(b)],
        columns=["model", "benchmark", "config_id", "item_id", "seed", "correct"],
    )
    row = paired_tests(cells_of(items), items, OPTIONS).iloc[0]
    assert (row["n_a_only"], row["n_b_only"], row["test"]) == (8, 1, "mcnemar_exact")
    assert row["p_value"] == pytest.approx(binomtest(8, 9, 0.5).pvalue)
    assert row["diff"] == pytest.approx(7 / 20)


def test_holm_adjusts_across_the_configs_of_a_pair():
    items = simulate(np.random.default_rng(2), {"A": 0.65, "B": 0.5}, n_items=60, configs=GREEDY)
    tests = paired_tests(cells_of(items), items, OPTIONS).sort_values("p_value")
    raw = tests["p_value"].to_numpy()
    holm = np.minimum(1, np.maximum.accumulate(raw * (len(raw) - np.arange(len(raw)))))
    assert tests["p_adjusted"].to_numpy() == pytest.approx(holm)


def test_cell_intervals():
    items = simulate(np.random.default_rng(3), {"A": 0.7}, n_items=50, configs=[GREEDY[0], SAMPLED[0]])
    table = cell_intervals(items, 0.95, 1000, 0).set_index("config_id")
    greedy, sampled = table.loc[GREEDY[0]], table.loc[SAMPLED[0]]
    k, n, z = items[items["config_id"] == GREEDY[0]]["correct"].sum(), 50, norm.ppf(0.975)
    p = k / n
    centre, half = (
        (p + z**2 / (2 * n)) / (1 + z**2 / n),
        z * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / (1 + z**2 / n),
    )
    assert (greedy["method"], greedy["lower"], greedy["upper"]) == (
        "wilson",
        pytest.approx(centre - half),
        pytest.approx(centre + half),
    )
    per_seed = items[items["config_id"] == SAMPLED[0]].groupby("seed")["correct"].mean()
    assert sampled["method"] == "bootstrap" and sampled["lower"] < sampled["score"] < sampled["upper"]
    assert sampled["score"] == pytest.approx(per_seed.mean()) and sampled["seed_sd"] == pytest.approx(per_seed.std())
    assert sampled["upper"] - sampled["lower"] < greedy["upper"] - greedy["lower"]  # five seeds per item


@pytest.mark.parametrize("n_items", [10, 100, 300])
def test_minimum_detectable_difference_is_the_normal_approximation(n_items):
    expected = (norm.ppf(0.975) + norm.ppf(0.8)) * math.sqrt(2 * 0.25 / n_items)
    assert minimum_detectable_difference(n_items, 0.05, 0.8) == pytest.approx(expected, rel=1e-4)


def test_rho_flip_interval_over_items_covers_a_noisy_flip():
    items = simulate(np.random.default_rng(4), {"A": 0.55, "B": 0.55, "C": 0.9}, n_items=30)
    table = rho_flip_sig(cells_of(items), items, OPTIONS).set_index(["model_a", "model_b"])
    noisy, clear = table.loc[("A", "B")], table.loc[("A", "C")]
    assert noisy["rho_flip_lower"] <= noisy["rho_flip"] <= noisy["rho_flip_upper"] and noisy["rho_flip_upper"] > 0
    assert noisy["rho_flip_sig"] <= noisy["rho_flip"] and clear["n_minus_sig"] >= 6 and clear["rho_flip_upper"] == 0
    assert table["mdd_pp"].iloc[0] == pytest.approx(100 * minimum_detectable_difference(30, 0.05, 0.8))


def _greedy_rows(model: str, correct: dict[str, bool], config=GREEDY[0]) -> list[tuple]:
    return [(model, "bbq", config, item, 0, value) for item, value in correct.items()]


def test_cells_with_other_items_are_compared_on_the_items_both_have():
    """A's 200 extra items (all right) lift its cell score above B's, but on the 30 shared items B is
    better: the verdict and its scores come from the shared items; each interval from its cell's own."""
    shared = {f"s{i}": i < 5 for i in range(30)}
    rows = _greedy_rows("A", shared | {f"x{i}": True for i in range(200)})
    rows += _greedy_rows("B", {item: i < 25 for i, item in enumerate(shared)})
    items = pd.DataFrame(rows, columns=["model", "benchmark", "config_id", "item_id", "seed", "correct"])
    cells = cells_of(items)
    assert cells.set_index("model").loc["A", "score"] > cells.set_index("model").loc["B", "score"]
    row = paired_tests(cells, items, OPTIONS).iloc[0]
    assert (row["n_items"], row["score_a"], row["score_b"], row["verdict"]) == (30, 5 / 30, 25 / 30, "B better")
    intervals = cell_intervals(items, 0.95, 200, 0).set_index("model")
    assert (intervals.loc["A", "n_items"], intervals.loc["B", "n_items"]) == (230, 30)
    disjoint = pd.DataFrame(
        _greedy_rows("A", {"a1": True, "a2": False}) + _greedy_rows("B", {"b1": True, "b2": True}),
        columns=items.columns,
    )
    assert paired_tests(cells_of(disjoint), disjoint, OPTIONS).empty  # no shared items: nothing to test
    table = rho_flip_sig(cells_of(disjoint), disjoint, OPTIONS).iloc[0]
    assert math.isnan(table["rho_flip_lower"]) and table["n_configs"] == 1


def test_a_pair_without_shared_items_has_a_null_interval_in_the_grid_card():
    """NaN in the tables is null in the card: standard JSON, which provenance-diff reads; the Markdown card says n/a."""
    from safetyrepro.benchmarks.files import load_json
    from safetyrepro.results.grid_card import _headline, _rho_flip_lines
    from safetyrepro.results.storage import json_text

    disjoint = pd.DataFrame(
        _greedy_rows("A", {"a1": True, "a2": False}) + _greedy_rows("B", {"b1": True, "b2": True}),
        columns=["model", "benchmark", "config_id", "item_id", "seed", "correct"],
    )
    cells = cells_of(disjoint)
    headline = _headline(rho_flip_sig(cells, disjoint, OPTIONS), cells)
    pair = load_json(json_text(headline), "grid_card.json", standard=True)["bbq"]["pairs"][0]
    assert (pair["rho_flip_lower"], pair["rho_flip_upper"], pair["n_items"]) == (None, None, None)
    assert pair["n_configs"] == 1 and isinstance(pair["rho_flip"], float)
    table = "\n".join(_rho_flip_lines(headline, OPTIONS.power))
    assert "| [n/a, n/a] |" in table and "nan" not in table
