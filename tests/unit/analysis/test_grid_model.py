"""The grid model (safetyrepro.analysis.grid_model): exact where every config ran, right where the grid is what it
assumes, reproducible, and on the scores' lattice. Its coverage on synthetic grids is measured by
scripts/measure_grid_model.py (docs/estimation.md), not here."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from helpers.session import REPO, script_module

from safetyrepro.analysis.flips import rho_flip_table
from safetyrepro.analysis.grid_model import (
    NEW_VALUE_COLUMNS,
    QUANTILE_ESTIMATE_COLUMNS,
    QUANTILES,
    RHO_ESTIMATE_COLUMNS,
    VARIANCE_COLUMNS,
    axis_variances,
    centred_draws,
    configs_to_settle,
    estimate_grid,
    estimate_new_value,
    estimate_new_values,
    estimate_pair,
    lattice_steps,
    leads,
    on_lattice,
    predictive_draws,
    sampling_variances,
    settled,
    space_of,
    variance_components,
)
from safetyrepro.configuration.build import load_settings


def paper_space() -> pd.DataFrame:
    """The paper's 48 configs (TruthfulQA's in config/paper.yaml's envelope): config id -> axes."""
    return space_of(load_settings(REPO / "config" / "paper.yaml").envelope.configs("truthfulqa"))


def cells_of(grid: pd.DataFrame, benchmark: str = "bbq") -> pd.DataFrame:
    """A cells table (model, benchmark, config_id, score) of a configs x models score frame."""
    long = grid.rename_axis("config_id").reset_index().melt("config_id", var_name="model", value_name="score")
    return long.assign(benchmark=benchmark).dropna()


def additive_grid(space: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Two models whose scores are exactly additive in the axes, on a 1/100 lattice."""
    rng = np.random.default_rng(seed)
    scores = {}
    for model in ("A", "B"):
        effects = {(axis, v): rng.normal(0, 0.08) for axis in space for v in space[axis].unique()}
        value = 0.5 + sum(space[axis].map({v: e for (a, v), e in effects.items() if a == axis}) for axis in space)
        scores[model] = np.round(value.clip(0, 1) * 100) / 100
    return pd.DataFrame(scores, index=space.index)


def test_with_every_config_run_the_estimate_is_the_grids_rho_flip_and_quantiles_exactly():
    space = paper_space()
    grid = additive_grid(space, seed=1)
    grid.loc[space.index[:5], "B"] = grid.loc[space.index[:5], "A"]  # ties count in the denominator
    rho, quantiles = estimate_grid(cells_of(grid), {"bbq": space}, draws=200)
    assert list(rho.columns) == RHO_ESTIMATE_COLUMNS and list(quantiles.columns) == QUANTILE_ESTIMATE_COLUMNS
    (row,) = rho.itertuples()
    exact = rho_flip_table(cells_of(grid)).rho_flip.item()
    assert row.rho_flip == row.rho_flip_low == row.rho_flip_high == row.rho_flip_run == exact
    assert (row.n_run, row.n_configs) == (48, 48)
    for model in ("A", "B"):
        mine = quantiles[quantiles.model == model]
        assert mine["quantile"].tolist() == list(QUANTILES)
        expected = np.quantile(grid[model], QUANTILES)
        for column in ("score", "low", "high", "run"):
            assert np.allclose(mine[column], expected)


def test_an_additive_grid_is_recovered_from_a_quarter_of_its_configs():
    """Where the grid is what the model assumes, 12 of 48 configs give rho_flip within a few configs of the full
    grid's, inside its interval, and closer than the 12 configs alone give it, over ten grids."""
    space = paper_space()
    errors, naive, covered = [], [], 0
    for seed in range(10):
        grid = additive_grid(space, seed)
        truth = rho_flip_table(cells_of(grid)).rho_flip.item()
        run = np.random.default_rng(seed).choice(space.index, 12, replace=False)
        difference = grid.loc[run, "A"] - grid.loc[run, "B"]
        estimate = estimate_pair(space, difference, np.random.default_rng(seed), draws=1000)
        errors.append(abs(estimate["rho_flip"] - truth))
        naive.append(abs(estimate["rho_flip_run"] - truth))
        covered += estimate["rho_flip_low"] <= truth <= estimate["rho_flip_high"]
    assert np.median(errors) <= 2 / 48
    assert np.mean(errors) < np.mean(naive)
    assert covered >= 9


def test_estimates_are_reproducible_and_the_seed_matters():
    space = paper_space()
    grid = additive_grid(space, seed=3).iloc[::4]  # 12 configs run
    cells = cells_of(grid)
    first = estimate_grid(cells, {"bbq": space}, seed=7, draws=300)
    again = estimate_grid(cells, {"bbq": space}, seed=7, draws=300)
    other = estimate_grid(cells, {"bbq": space}, seed=8, draws=300)
    pd.testing.assert_frame_equal(first[0], again[0])
    pd.testing.assert_frame_equal(first[1], again[1])
    assert not first[1]["low"].equals(other[1]["low"])
    # a model's estimates, and a pair's, are its own: another model joining the table changes none of them
    third = cells[cells["model"] == "A"].assign(model="C", score=lambda frame: 1 - frame["score"])
    joined = estimate_grid(pd.concat([third, cells]), {"bbq": space}, seed=7, draws=300)
    pd.testing.assert_frame_equal(joined[1][joined[1]["model"] != "C"].reset_index(drop=True), first[1])
    pd.testing.assert_frame_equal(joined[0].query("model_a == 'A' and model_b == 'B'").reset_index(drop=True), first[0])


def test_a_filled_in_config_lands_on_the_scores_lattice_and_can_tie():
    space = paper_space()
    resolution = pd.Series(np.where(space["decoding"] == "greedy", 10, 50), index=space.index)
    run = pd.Series(0.5, index=space.index[:12])
    steps = lattice_steps(space, resolution, run)
    assert steps is not None and set(steps) == {0.1, 0.02}
    drawn = on_lattice(predictive_draws(space, run - 0.5, 500, np.random.default_rng(0)), steps, lowest=-1.0)
    greedy = (space["decoding"] == "greedy").to_numpy()
    assert np.allclose(drawn[:, greedy] * 10, np.round(drawn[:, greedy] * 10))
    assert (drawn[:, ~greedy][:, -1] == 0).mean() > 0.05  # a tie is a value a draw can take
    # a share of counts stays one: scores within 0 to 1, differences within -1 to 1
    wide = predictive_draws(
        space, pd.Series(np.r_[0.0, 1.0].repeat(6), index=space.index[:12]), 500, np.random.default_rng(0)
    )
    assert on_lattice(wide, steps).min() == 0 and on_lattice(wide, steps).max() == 1
    assert on_lattice(wide - 1, steps, lowest=-1.0).min() == -1
    # a score off the lattice (a continuous metric), or a config without a resolution: no rounding
    assert lattice_steps(space, resolution, pd.Series(0.123, index=space.index[:3])) is None
    assert lattice_steps(space, resolution.iloc[:-1], run) is None


def test_configs_outside_the_space_are_refused():
    space = paper_space()
    with pytest.raises(ValueError, match="outside the space"):
        predictive_draws(space, pd.Series([0.1], index=["T9-greedy-0shot-freeform"]), 10, np.random.default_rng(0))


@pytest.mark.slow  # about 5 s alone (every scenario's draws): make test only
def test_the_measurement_script_tables_every_scenario_and_a_real_grid(tmp_path, monkeypatch):
    """scripts/measure_grid_model.py as docs/estimation.md runs it, on 2 replicates: a row a scenario with coverage
    shares, and, with --cells, a row a benchmark of a grid run in full."""
    script = script_module("measure_grid_model")
    out = tmp_path / "synthetic.md"
    monkeypatch.setattr("sys.argv", ["measure_grid_model.py", "--replicates", "2", "--items", "20", "--out", str(out)])
    script.main()
    rows = [
        line.split("|")[1:-1] for line in out.read_text().splitlines() if line.startswith("| ") and "---" not in line
    ]
    assert [row[0].strip() for row in rows[1:]] == [scenario.name for scenario in script.SCENARIOS]
    assert all(float(row[1]) in (0.0, 0.5, 1.0) for row in rows[1:])  # the share of 2 replicates covered
    w1 = [[float(x) for x in row[-1].split(" / ")] for row in rows[1:]]  # model / configs run alone / oracle
    assert all(0 < oracle < run for _, run, oracle in w1)  # the oracle knows more than the configs run
    space = paper_space()
    grid = additive_grid(space, seed=0)
    cells = (
        cells_of(grid)
        .merge(space.rename_axis("config_id").reset_index(), on="config_id")
        .assign(n_items=100, n_seeds=1)
    )
    cells.to_parquet(tmp_path / "cells.parquet")
    rng = np.random.default_rng(0)
    items = cells.loc[cells.index.repeat(20), ["model", "benchmark", "config_id", "score"]]
    items = items.assign(item_id=np.tile([f"i{k}" for k in range(20)], len(cells)))
    items.assign(correct=rng.random(len(items)) < items["score"]).to_parquet(tmp_path / "items.parquet")
    argv = ["--cells", str(tmp_path / "cells.parquet"), "--item-rows", str(tmp_path / "items.parquet")]
    monkeypatch.setattr(
        "sys.argv", ["measure_grid_model.py", *argv, "--replicates", "2", "--out", str(tmp_path / "r.md")]
    )
    script.main()
    (row,) = [line for line in (tmp_path / "r.md").read_text().splitlines() if line.startswith("| bbq")]
    assert "| 12 of 48 |" in row
    errors = [float(value) for value in row.split("|")[3].split("/")]  # model / configs run alone / item-level
    assert len(errors) == 3 and all(0 <= e <= 0.5 for e in errors)
    # each template held out in turn: 12 configs each, one pair; the model's Brier score beside the baselines'
    argv = ["--cells", str(tmp_path / "cells.parquet"), "--held-out-axes", "template", "--out", str(tmp_path / "h.md")]
    monkeypatch.setattr("sys.argv", ["measure_grid_model.py", *argv])
    script.main()
    held = (tmp_path / "h.md").read_text()
    (row,) = [line for line in held.splitlines() if line.startswith("| template | bbq |")]
    brier = [float(value) for value in row.split("|")[4].split("/")]
    assert "| 48 |" in row and brier[0] < brier[1]  # the model is better than the majority rule on an additive grid
    rounds = ["--replicates", "2", "--items", "20", "--rounds", "4", "--out", str(tmp_path / "rounds.md")]
    monkeypatch.setattr("sys.argv", ["measure_grid_model.py", *rounds])
    script.main()
    assert "configs chosen in rounds of 4" in (tmp_path / "rounds.md").read_text()
    # how low W1 can go: the posterior under the generating model and the oracle below the configs run alone
    floor = ["--floor", "--replicates", "2", "--items", "20", "--out", str(tmp_path / "floor.md")]
    monkeypatch.setattr("sys.argv", ["measure_grid_model.py", *floor])
    script.main()
    rows = [line.split("|")[2:-1] for line in (tmp_path / "floor.md").read_text().splitlines() if line.startswith("| ")]
    w1 = [[float(cell.split()[0]) for cell in row] for row in rows[1:]]  # run alone / model / posterior / oracle
    assert len(w1) == len(script.SCENARIOS) and all(max(posterior, oracle) < run for run, _, posterior, oracle in w1)


def test_a_pair_without_a_shared_config_and_a_model_without_scores_are_not_available():
    """n/a, not a confident 0 (a pair that shares no config) nor a crash (a model whose cells all failed)."""
    space = paper_space()
    grid = additive_grid(space, seed=0)
    grid["C"] = grid["A"].where(np.arange(len(space)) < 6)
    grid.loc[space.index[:6], "B"] = np.nan
    failed = pd.DataFrame({"model": "D", "benchmark": "bbq", "config_id": space.index[:3], "score": np.nan})
    rho, quantiles = estimate_grid(pd.concat([cells_of(grid), failed]), {"bbq": space}, draws=100)
    (b_c,) = rho[(rho.model_a == "B") & (rho.model_b == "C")].itertuples()
    assert b_c.n_run == 0
    assert np.isnan([b_c.rho_flip, b_c.rho_flip_low, b_c.rho_flip_high, b_c.rho_flip_run]).all()
    d = quantiles[quantiles.model == "D"]
    assert (d["n_run"] == 0).all() and d[["score", "low", "high", "run"]].isna().all().all()
    assert rho[(rho.model_a == "A") & (rho.model_b != "D")]["rho_flip"].notna().all()  # the others are estimated


def test_an_envelope_of_one_config_is_its_own_estimate():
    """No axis takes two values (space_of keeps none): the intercept alone, and the one config run is exact."""
    space = paper_space().iloc[:1][[]]
    grid = pd.DataFrame({"A": [0.5], "B": [0.7]}, index=space.index)
    rho, quantiles = estimate_grid(cells_of(grid), {"bbq": space}, draws=50)
    assert rho[["n_run", "n_configs", "rho_flip", "rho_flip_low", "rho_flip_high"]].values.tolist() == [[1, 1, 0, 0, 0]]
    assert (quantiles.loc[quantiles.model == "B", ["score", "low", "high"]] == 0.7).all().all()


def test_a_new_template_carries_a_verdict_as_far_as_the_templates_run_agree():
    """A leads by 0.2 on every template: at a new one it is very likely ahead. A's lead flips sign with the
    template (T1 and T3 ahead, T2 and T4 behind, by 0.3): at a new one it is a coin toss, with a wide interval."""
    space = paper_space()
    steady = pd.Series(0.2, index=space.index)
    flipping = space["template"].map({"T1": 0.3, "T2": -0.3, "T3": 0.3, "T4": -0.3})
    settled = estimate_new_value(space, steady, "template", np.random.default_rng(0), draws=1000)
    unsettled = estimate_new_value(space, flipping, "template", np.random.default_rng(0), draws=1000)
    assert settled["n_values"] == unsettled["n_values"] == 4
    assert settled["p_a_ahead"] > 0.9 and settled["share_a_ahead_low"] > 0.5
    assert 0.3 < unsettled["p_a_ahead"] < 0.7 and 0.3 < unsettled["p_b_ahead"] < 0.7
    assert unsettled["share_a_ahead_low"] == 0.0 and unsettled["share_a_ahead_high"] == 1.0


def test_new_values_are_estimated_for_the_sampled_axes_the_run_varied():
    space = paper_space()
    grid = additive_grid(space, seed=3)
    table = estimate_new_values(
        cells_of(grid), {"bbq": space}, {"bbq": {"template": space.index, "shot_draw": space.index}}, draws=200
    )
    assert list(table.columns) == NEW_VALUE_COLUMNS
    assert table[["model_a", "model_b", "axis"]].values.tolist() == [["A", "B", "template"]]  # no shot_draw axis here
    one_template = cells_of(grid.loc[space.index[space["template"] == "T1"]])
    assert estimate_new_values(one_template, {"bbq": space}, {"bbq": {"template": space.index}}, draws=200).empty


def test_a_new_values_row_counts_the_axis_values_run_not_the_envelopes():
    """estimate.md's column is "values run": two of the four templates ran, so it reads 2."""
    space = paper_space()
    run = space.index[space["template"].isin(["T1", "T2"])]
    difference = pd.Series(0.1, index=run)
    assert estimate_new_value(space, difference, "template", np.random.default_rng(0), draws=200)["n_values"] == 2


def test_a_verdict_every_config_decides_is_settled_and_an_exact_tie_never_is():
    space = paper_space()
    grid = additive_grid(space, seed=2)
    grid["B"] = grid["A"] - np.where(np.arange(48) < 30, 0.01, -0.01)  # A ahead in 30 configs of 48
    (row,) = estimate_grid(cells_of(grid), {"bbq": space}, draws=200)[0].itertuples()
    assert (row.p_a_leads, row.p_b_leads, row.configs_to_settle) == (1.0, 0.0, 0.0)
    grid["B"] = grid["A"] - np.where(np.arange(48) < 24, 0.01, -0.01)  # 24 each way: a tie however many run
    (row,) = estimate_grid(cells_of(grid), {"bbq": space}, draws=200)[0].itertuples()
    assert (row.p_a_leads, row.p_b_leads) == (0.0, 0.0) and np.isnan(row.configs_to_settle)


def test_a_verdict_left_open_by_a_few_configs_needs_some_of_the_rest_and_they_settle_it():
    """A leads in two configs of three run: not settled; the counts are ordered and within the configs not run;
    and on grids drawn from the same posterior, the median count of more configs settles it about half the time,
    the 75th percentile's more often."""
    space = paper_space()
    difference = pd.Series([0.02, 0.03, -0.01], index=space.index[[0, 17, 40]])
    rng = np.random.default_rng(0)
    median, low, high = configs_to_settle(space, difference, rng, futures=40, draws=200)
    assert 0 < low <= median <= high <= 45
    hits = {median: 0, high: 0}
    for seed in range(30):
        truth = centred_draws(space, difference, 1, np.random.default_rng(100 + seed))[0]
        added = np.random.default_rng(200 + seed).permutation(np.flatnonzero(~space.index.isin(difference.index)))
        for more in hits:
            run = pd.Series(truth[added[: int(more)]], index=space.index[added[: int(more)]])
            hits[more] += settled(leads(centred_draws(space, pd.concat([difference, run]), 400, rng)), 0.9)
    assert 8 <= hits[median] <= 22 and hits[high] >= hits[median]  # 15 of 30 is a median's


def test_axis_variances_give_each_axis_what_it_moves_and_the_rest_to_interactions():
    """Scores that only the template moves (by +-0.1): with every config run, exactly 0.01 for the template and 0
    for the rest; from the 12 T1 and T2 configs, the template's interval holds 0.01 and the axes held at one value
    there are n/a, not the prior's guess."""
    space = paper_space()
    scores = 0.5 + space["template"].map({"T1": 0.1, "T2": -0.1, "T3": 0.1, "T4": -0.1})
    rows = {row["component"]: row for row in axis_variances(space, scores, np.random.default_rng(0), draws=400)}
    assert list(rows) == [*space.columns, "interactions"]
    assert rows["template"]["variance"] == rows["template"]["low"] == rows["template"]["high"] == pytest.approx(0.01)
    assert all(rows[axis]["variance"] == pytest.approx(0) for axis in [*space.columns[1:], "interactions"])
    greedy_0shot = scores[
        (space["decoding"] == "greedy") & (space["shots"] == "0") & space["template"].isin(["T1", "T2"])
    ]
    part = {row["component"]: row for row in axis_variances(space, greedy_0shot, np.random.default_rng(0), draws=400)}
    assert part["template"]["low"] <= 0.01 <= part["template"]["high"]
    assert np.isnan(part["decoding"]["variance"]) and np.isnan(part["shots"]["variance"])
    assert not np.isnan(part["scoring"]["variance"])  # free-form and log-likelihood both ran


def test_sampling_variances_are_paired_item_by_item_and_seed_by_seed():
    """Two models that differ on one item of four: A's score has the item variance of its outcomes 1, 1, 0, 0 over
    4 items, the pair's difference only that of 0, 1, 0, 0; seeds are paired the same way."""
    seed_scores = (
        pd.DataFrame(
            {
                "model": ["A", "B", "A", "B"],
                "config_id": ["greedy", "greedy", "sampled", "sampled"],
                "seed_scores": ['{"0": 0.5}', '{"0": 0.25}', '{"0": 0.3, "1": 0.5}', '{"0": 0.2, "1": 0.5}'],
            }
        )
        .set_index(["model", "config_id"])["seed_scores"]
        .map(json.loads)
    )
    items = pd.DataFrame(
        {
            "model": ["A"] * 4 + ["B"] * 4,
            "config_id": "greedy",
            "item_id": [1, 2, 3, 4] * 2,
            "correct": [True, True, False, False, True, False, False, False],
        }
    )
    mine = sampling_variances({"A": 1.0}, ["greedy"], seed_scores, items)
    assert mine["items"] == pytest.approx(np.var([1, 1, 0, 0], ddof=1) / 4) and np.isnan(mine["seeds"])
    pair = sampling_variances({"A": 1.0, "B": -1.0}, ["greedy", "sampled"], seed_scores, items)
    assert pair["items"] == pytest.approx(np.var([0, 1, 0, 0], ddof=1) / 4)  # the sampled config has no item rows
    assert pair["seeds"] == pytest.approx(np.var([0.1, 0.0], ddof=1) / 2)  # the difference at each seed
    assert np.isnan(sampling_variances({"A": 1.0}, ["greedy"], seed_scores, None)["items"])


def test_variance_components_cover_each_model_and_each_pair():
    space = paper_space()
    cells = cells_of(additive_grid(space, seed=3))
    cells["seed_scores"] = [f'{{"0": {s}}}' for s in cells["score"]]
    items = pd.DataFrame(
        [
            {"model": m, "benchmark": "bbq", "config_id": c, "item_id": i, "correct": (i + len(m) + len(c)) % 3 == 0}
            for m in ("A", "B")
            for c in space.index
            for i in range(6)
        ]
    )
    table = variance_components(cells, {"bbq": space}, items, draws=200)
    assert list(table.columns) == VARIANCE_COLUMNS
    assert list(dict.fromkeys(table["of"])) == ["A", "B", "A - B"]
    assert table.groupby("of")["component"].apply(list).map(len).eq(len(space.columns) + 3).all()
    pair = table[table["of"] == "A - B"].set_index("component")
    assert pair.at["items", "variance"] == 0  # A's and B's outcomes agree item by item (len("A") == len("B"))
    assert np.isnan(pair.at["seeds", "variance"])  # one seed a config
    assert table[table["component"] == "items"]["variance"].gt(0).sum() == 2  # each model's own
