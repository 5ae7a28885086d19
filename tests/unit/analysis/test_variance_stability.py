"""Variance shares, item-subsample stability, surrogate SHAP attribution and the precision probe, on
hand-built tables whose answers are worked out by hand in the comments."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from safetyrepro.analysis.attribution import SHAP_COLUMNS, shap_attribution
from safetyrepro.analysis.precision import ORDERING_COLUMNS, ordering_matches, precision_probe
from safetyrepro.analysis.stability import stratified_masks, subsample_stability
from safetyrepro.analysis.variance import VARIANCE_COLUMNS, variance_shares

# --- variance_shares -------------------------------------------------------------------------------


def factorial_cells(a=0.0, b=0.0, c=0.0, e=0.0, g=0.0, h=0.0, benchmark="bbq", scoring="freeform"):
    """2 models x 2 templates x 2 decodings x 2 shots, each factor coded -1/+1:
    score = 0.5 + a*m + b*t + c*d + e*s + g*m*t + h*m*t*d.

    The design is balanced and every product of codes is orthogonal to every other, so each term's
    sum of squares is 16 x coefficient^2. The three-way term m*t*d is not in the two-way model:
    it is the residual (16 h^2, with 16 - 11 = 5 residual degrees of freedom)."""
    rows = []
    for m, t, d, s in itertools.product([-1, 1], repeat=4):
        rows.append(
            {
                "model": f"M{m}",
                "benchmark": benchmark,
                "config_id": f"T{t}-D{d}-S{s}-{scoring}",
                "template": f"T{t}",
                "decoding": f"D{d}",
                "shots": str(s + 1),
                "scoring": scoring,
                "score": 0.5 + a * m + b * t + c * d + e * s + g * m * t + h * m * t * d,
            }
        )
    return pd.DataFrame(rows)


def test_exact_shares_on_an_orthogonal_design():
    # a=.1 b=.05 c=.05 e=0 g=.05 h=.05; squares .01 .0025 .0025 0 .0025 .0025, total .02
    # model .01/.02 = .5; implementation (.0025+.0025+0)/.02 = .25; interactions .0025/.02 = .125;
    # residual .0025/.02 = .125; rho = .25/.5 = .5
    table = variance_shares(factorial_cells(a=0.1, b=0.05, c=0.05, g=0.05, h=0.05))
    assert list(table.columns) == VARIANCE_COLUMNS
    row = table.iloc[0]
    assert "**2" in row.model_formula and row.n_cells == 16 and row.residual_df == 5
    assert row.model_share == pytest.approx(0.5)
    assert row.implementation_share == pytest.approx(0.25)
    assert row.interaction_share == pytest.approx(0.125)
    assert row.residual_share == pytest.approx(0.125)
    assert row.rho == pytest.approx(0.5)


def test_dominant_model_gives_small_rho():
    # a=.3 -> model SS 16 x .09 = 1.44; template .01 -> 16e-4, residual (h=.001) 16e-6
    # model share = 1.44 / 1.441616 > .99, rho = .0016 / 1.44 ~ .0011 < .1
    row = variance_shares(factorial_cells(a=0.3, b=0.01, h=0.001)).iloc[0]
    assert row.model_share > 0.9 and row.rho < 0.1


def test_dominant_template_gives_rho_above_one():
    # b=.2 -> template SS 16 x .04 = .64; a=.01 -> model SS 16e-4; rho = .64 / .0016 = 400
    row = variance_shares(factorial_cells(a=0.01, b=0.2, h=0.001)).iloc[0]
    assert row.rho > 1
    assert row.rho == pytest.approx(400, rel=1e-6)


def test_logprob_cells_are_left_out_and_logprob_only_benchmarks_are_absent():
    freeform = factorial_cells(a=0.1, b=0.05, c=0.05, g=0.05, h=0.05)
    # logprob cells where the template dominates: counted in, they would change every share
    noisy = factorial_cells(b=0.4, h=0.01, scoring="logprob")
    only_logprob = factorial_cells(a=0.2, h=0.01, benchmark="crows_pairs", scoring="logprob")
    table = variance_shares(pd.concat([freeform, noisy, only_logprob]))
    assert list(table.benchmark) == ["bbq"]
    assert table.iloc[0].n_cells == 16 and table.iloc[0].rho == pytest.approx(0.5)


@pytest.mark.parametrize(
    "decoding_of",
    [lambda t: "greedy", lambda t: "t0.3" if t == "T2" else "greedy"],
    ids=["single-decoding", "decoding-aliased-with-T2"],
)
def test_too_few_residual_df_falls_back_to_main_effects(decoding_of):
    # 2 models x 3 templates: 6 cells; with the model x template interaction there are 6
    # parameters (0 residual df) -> main effects only (4 parameters, 2 residual df).
    # Decoding is either a single value or run only with T2 (an incomplete grid): either way it
    # carries nothing template does not, so it is left out of the formula.
    # score = .5 + .1 m + t_eff + .02 m u, t_eff = (-.1, 0, .1), u = (1, -2, 1): m*u is orthogonal
    # to both main effects, so it is the residual.
    # SS model = 6 x .01 = .06; SS template = 2 x (.01 + 0 + .01) = .04;
    # SS residual = 2 x .0004 x (1 + 4 + 1) = .0048; total .1048; rho = .04 / .06 = 2/3
    rows = []
    for m, (t, t_eff, u) in itertools.product([-1, 1], zip(["T1", "T2", "T3"], [-0.1, 0, 0.1], [1, -2, 1])):
        rows.append(
            {
                "model": f"M{m}",
                "benchmark": "bbq",
                "config_id": t,
                "template": t,
                "decoding": decoding_of(t),
                "shots": "0",
                "scoring": "freeform",
                "score": 0.5 + 0.1 * m + t_eff + 0.02 * m * u,
            }
        )
    row = variance_shares(pd.DataFrame(rows)).iloc[0]
    assert "**2" not in row.model_formula and ":" not in row.model_formula
    assert "C(decoding)" not in row.model_formula and "C(template)" in row.model_formula
    assert row.residual_df == 2
    assert row.model_share == pytest.approx(0.06 / 0.1048)
    assert row.implementation_share == pytest.approx(0.04 / 0.1048)
    assert math.isnan(row.interaction_share)
    assert row.residual_share == pytest.approx(0.0048 / 0.1048)
    assert row.rho == pytest.approx(2 / 3)


def test_a_single_model_gives_infinite_rho():
    # one model: model share 0 while templates move scores -> rho = inf
    cells = factorial_cells(b=0.1, h=0.01)
    row = variance_shares(cells[cells.model == "M1"]).iloc[0]
    assert row.model_share == 0 and row.implementation_share > 0 and row.rho == math.inf


# --- subsample_stability ----------------------------------------------------------------------------


def items_from(
    correct: dict[tuple[str, str, int], set[str]], strata: dict[str, str], benchmark: str = "bbq"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(items, cells) from {(model, config, seed): set of correct item ids} and {item: stratum}."""
    rows = [
        {
            "model": model,
            "benchmark": benchmark,
            "config_id": config,
            "item_id": item,
            "stratum": stratum,
            "seed": seed,
            "label": "A",
            "parsed": True,
            "correct": item in hits,
        }
        for (model, config, seed), hits in correct.items()
        for item, stratum in strata.items()
    ]
    items = pd.DataFrame(rows)
    cells = items[["model", "benchmark", "config_id"]].drop_duplicates().assign(score=np.nan)
    return items, cells


def test_full_fraction_gives_zero_range_and_seed_mean_scores():
    # A/c0: seed 0 right on i0, i1 of 4 -> .5; seed 1 right on i0, i1, i2 -> .75; score .625
    # B/c0: one seed, right on i3 -> .25. With fraction 1 every subsample is all items: range 0.
    strata = {"i0": "x", "i1": "x", "i2": "y", "i3": "y"}
    items, cells = items_from(
        {("A", "c0", 0): {"i0", "i1"}, ("A", "c0", 1): {"i0", "i1", "i2"}, ("B", "c0", 0): {"i3"}}, strata
    )
    per_cell, per_benchmark = subsample_stability(items, cells, n_subsamples=5, fraction=1.0)
    scores = per_cell.set_index("model")
    assert scores.loc["A", "full_score"] == pytest.approx(0.625)
    assert scores.loc["B", "full_score"] == pytest.approx(0.25)
    assert (per_cell["range_pp"] == 0).all() and (per_cell["min"] == per_cell["max"]).all()
    row = per_benchmark.iloc[0]
    assert (row.n_configs, row.configs_with_order_change, row.max_range_pp) == (1, 0, 0)


def test_one_item_decides_an_ordering_change():
    # One stratum {i0, i1}, fraction .5 -> each subsample keeps exactly one of the two items.
    # c0: A seed 0 right on both, seed 1 right on i0 -> full (1 + .5)/2 = .75; B right on i1 -> .5.
    #     keep i0: A (1+1)/2 = 1, B 0 -> A > B; keep i1: A (1+0)/2 = .5, B 1 -> B > A (reversal).
    #     A: min .5 max 1 range 50 pp; B: min 0 max 1 range 100 pp.
    # c1: A right on both (1), B on neither (0): ranges 0, never changes.
    # 20 subsamples all keeping the same item has probability 2 x 2^-20: both kinds occur.
    # ranges [50, 100, 0, 0] -> median 25, max 100; 1 of 2 configs changes order (a reversal).
    strata = {"i0": "s", "i1": "s"}
    items, cells = items_from(
        {
            ("A", "c0", 0): {"i0", "i1"},
            ("A", "c0", 1): {"i0"},
            ("B", "c0", 0): {"i1"},
            ("A", "c1", 0): {"i0", "i1"},
            ("B", "c1", 0): set(),
        },
        strata,
    )
    per_cell, per_benchmark = subsample_stability(items, cells, n_subsamples=20, fraction=0.5, seed=3)
    table = per_cell.set_index(["model", "config_id"])
    assert table.loc[("A", "c0"), ["full_score", "min", "max", "range_pp"]].tolist() == pytest.approx(
        [0.75, 0.5, 1.0, 50]
    )
    assert table.loc[("B", "c0"), ["full_score", "min", "max", "range_pp"]].tolist() == pytest.approx(
        [0.5, 0.0, 1.0, 100]
    )
    assert table.loc[[("A", "c1"), ("B", "c1")], "range_pp"].tolist() == [0, 0]
    row = per_benchmark.iloc[0]
    assert row.median_range_pp == pytest.approx(25) and row.max_range_pp == pytest.approx(100)
    assert (row.n_configs, row.configs_with_order_change, row.configs_with_reversal) == (2, 1, 1)


def test_a_tie_on_a_subsample_is_an_order_change_but_not_a_reversal():
    # A right on i0 and i1 (1.0), B right on i0 only (.5): keep i0 -> 1 vs 1, a tie; keep i1 -> A > B
    strata = {"i0": "s", "i1": "s"}
    items, cells = items_from({("A", "c0", 0): {"i0", "i1"}, ("B", "c0", 0): {"i0"}}, strata)
    _, per_benchmark = subsample_stability(items, cells, n_subsamples=20, fraction=0.5)
    row = per_benchmark.iloc[0]
    assert (row.configs_with_order_change, row.configs_with_reversal) == (1, 0)


def test_core_configs_and_benchmarks_restrict_the_counts():
    # the items of test_one_item_decides_an_ordering_change on bbq (c0 changes order and reverses, c1
    # never does) and a copy on xstest
    strata = {"i0": "s", "i1": "s"}
    correct = {
        ("A", "c0", 0): {"i0", "i1"},
        ("A", "c0", 1): {"i0"},
        ("B", "c0", 0): {"i1"},
        ("A", "c1", 0): {"i0", "i1"},
        ("B", "c1", 0): set(),
    }
    bbq, xstest = items_from(correct, strata), items_from(correct, strata, "xstest")
    items, cells = pd.concat([bbq[0], xstest[0]]), pd.concat([bbq[1], xstest[1]])
    kwargs = {"n_subsamples": 20, "fraction": 0.5, "seed": 3}
    _, table = subsample_stability(items, cells, core=["c0", "nope"], **kwargs)
    row = table.set_index("benchmark").loc["bbq"]
    assert (row.n_subsamples, row.fraction, row.n_configs, row.configs_with_order_change) == (20, 0.5, 2, 1)
    assert (row.n_core_configs, row.core_configs_with_order_change, row.core_configs_with_reversal) == (1, 1, 1)
    _, table = subsample_stability(items, cells, core=["c1"], **kwargs)
    assert table.iloc[0][["n_core_configs", "core_configs_with_order_change"]].tolist() == [1, 0]
    _, table = subsample_stability(items, cells, **kwargs)  # no core configs: none compared
    assert (table.n_core_configs == 0).all() and (table.core_configs_with_order_change == 0).all()
    # benchmarks: only those re-scored, and their draws are the same as with every benchmark
    per_cell, table = subsample_stability(items, cells, benchmarks=["xstest"], **kwargs)
    assert list(table.benchmark) == ["xstest"] and set(per_cell.benchmark) == {"xstest"}
    everything, _ = subsample_stability(items, cells, **kwargs)
    pd.testing.assert_frame_equal(per_cell, everything[everything.benchmark == "xstest"].reset_index(drop=True))


def test_ranges_grow_with_the_number_of_subsamples():
    # the first n draws of a seed are the same whatever the count, so each cell's max - min can only grow
    module = pytest.importorskip("helpers.synthetic_cells")
    cells = module.synthetic_cells(seed=0).query("benchmark == 'truthfulqa' and scoring == 'logprob'")
    items = module.synthetic_items(cells, n_items=40)
    few, _ = subsample_stability(items, cells, n_subsamples=5)
    many, _ = subsample_stability(items, cells, n_subsamples=40)
    assert (many.range_pp.to_numpy() >= few.range_pp.to_numpy() - 1e-9).all()
    assert many.range_pp.median() > few.range_pp.median()


def test_only_cells_in_the_cells_table_are_rescored():
    strata = {"i0": "s", "i1": "s"}
    items, cells = items_from({("A", "c0", 0): {"i0"}, ("B", "c0", 0): {"i1"}, ("C", "c0", 0): set()}, strata)
    per_cell, _ = subsample_stability(items, cells[cells.model != "C"], n_subsamples=3)
    assert sorted(per_cell.model) == ["A", "B"]


def test_stratified_masks_keep_rounded_fraction_per_stratum():
    # strata x: 5 items, y: 1 item, z: 4 items; fraction .5 -> x round(2.5) = 3 (half up),
    # y max(1, round(.5)) = 1, z 2
    strata = pd.Series(["x"] * 5 + ["y"] + ["z"] * 4)
    masks = stratified_masks(strata, 50, 0.5, np.random.default_rng(0))
    assert masks.shape == (50, 10)
    assert (masks[:, :5].sum(axis=1) == 3).all()
    assert masks[:, 5].all()
    assert (masks[:, 6:].sum(axis=1) == 2).all()
    assert len({row.tobytes() for row in masks}) > 1  # subsamples differ from one another
    again = stratified_masks(strata, 50, 0.5, np.random.default_rng(0))
    assert (masks == again).all()


# --- shap_attribution -------------------------------------------------------------------------------


def grid_cells(score_of, benchmark="bbq", models=("a", "b", "c")) -> pd.DataFrame:
    """The envelope's grid for some models: freeform 4 templates x 3 decodings x 3 shots, logprob
    greedy only (48 configs per model); score_of(row) gives the score."""
    rows = []
    for model, template, decoding, shots, scoring in itertools.product(
        models, ["T1", "T2", "T3", "T4"], ["greedy", "t0.3", "t0.7"], ["0", "3", "5"], ["freeform", "logprob"]
    ):
        if scoring == "logprob" and decoding != "greedy":
            continue
        row = {
            "model": model,
            "benchmark": benchmark,
            "config_id": f"{template}-{decoding}-{shots}shot-{scoring}",
            "template": template,
            "decoding": decoding,
            "shots": shots,
            "scoring": scoring,
        }
        rows.append({**row, "score": score_of(row)})
    return pd.DataFrame(rows)


def test_only_template_matters_so_template_gets_the_largest_share():
    # score = .5 + template effect (T1 -.2, T2 0, T3 .1, T4 .2) + noise of sd .005 on every cell:
    # no other feature carries signal, so the surrogate's SHAP mass should sit on template
    rng = np.random.default_rng(1)
    effect = {"T1": -0.2, "T2": 0.0, "T3": 0.1, "T4": 0.2}
    cells = grid_cells(lambda row: 0.5 + effect[row["template"]] + rng.normal(0, 0.005))
    small = grid_cells(lambda row: 0.5, benchmark="xstest").head(9)  # < 10 cells: skipped
    table = shap_attribution(pd.concat([cells, small]))
    assert list(table.columns) == SHAP_COLUMNS and (table.role == "surrogate").all()
    regressor = table[table.surrogate == "regressor"]
    assert set(regressor.dropna(subset="feature").benchmark) == {"bbq"}
    skipped = regressor[regressor.benchmark == "xstest"].iloc[0]
    assert pd.isna(skipped.feature) and skipped.reason == "fewer than 10 cells (9)"
    fitted = regressor[regressor.benchmark == "bbq"]
    assert fitted.model_a.isna().all() and fitted.reason.isna().all()
    shares = fitted.set_index("feature")["share"]
    assert sorted(shares.index) == ["decoding", "model", "scoring", "shots", "template"]
    assert shares.idxmax() == "template" and shares["template"] > 0.8
    assert shares.sum() == pytest.approx(1.0)
    assert (fitted.n_cells == 144).all()
    assert "surrogate" in table.attrs["note"] and "rho_flip" in table.attrs["note"]


def test_shap_is_deterministic_for_a_seed():
    rng = np.random.default_rng(2)
    cells = grid_cells(lambda row: rng.random())
    pd.testing.assert_frame_equal(shap_attribution(cells, seed=0), shap_attribution(cells, seed=0))


def test_pair_classifier_localises_the_axis_that_flips_the_sign():
    # a - b > 0 exactly on templates T1 and T2 (a = .6 + noise vs b = .5 + noise there, a = .4 + noise
    # elsewhere; noise sd .005), so the sign of a - b is the template; one config is an exact tie
    # (T1-greedy-0shot-freeform: a = b = .5), left out of the classifier's rows and counted.
    # c scores .1 everywhere: a and b are always above it -> one class only, no classifier, a reason.
    rng = np.random.default_rng(3)

    def score(row):
        if row["model"] == "c":
            return 0.1
        if row["config_id"] == "T1-greedy-0shot-freeform":
            return 0.5
        base = 0.5 if row["model"] == "b" else (0.6 if row["template"] in ("T1", "T2") else 0.4)
        return base + rng.normal(0, 0.005)

    table = shap_attribution(grid_cells(score))
    pairs = table[table.surrogate == "pair classifier"].set_index(["model_a", "model_b"])
    ab = pairs.loc[("a", "b")].set_index("feature")
    assert list(ab.index) == ["template", "decoding", "shots", "scoring"]
    assert (ab.n_cells == 47).all() and (ab.n_ties == 1).all()
    assert ab.share.idxmax() == "template" and ab.share["template"] > 0.8
    assert ab.share.sum() == pytest.approx(1.0) and (ab.train_accuracy == 1.0).all()
    assert ab.train_r2.isna().all() and ab.reason.isna().all()
    for pair in [("a", "c"), ("b", "c")]:
        row = pairs.loc[pair]
        assert pd.isna(row.feature) and math.isnan(row.share)
        assert row.reason == "one class only (N+ 48, N- 0): no strict reversal to localise"
    # the regressor is beside it, on the axes and the model
    regressor = table[table.surrogate == "regressor"]
    assert (
        list(regressor.feature) == ["template", "decoding", "shots", "scoring", "model"]
        and regressor.model_a.isna().all()
    )


def test_pair_classifier_needs_enough_configs_with_a_strict_sign():
    # 12 configs, a above b on 6, below on 3, tied on 3 -> 9 strict configs < 10: no classifier
    cells = grid_cells(lambda row: 0.5, models=("a", "b"))
    cells = cells[cells.config_id.isin(cells.config_id.unique()[:12])].copy()
    cells.loc[cells.model == "a", "score"] = [0.6] * 6 + [0.4] * 3 + [0.5] * 3
    row = shap_attribution(cells).query("surrogate == 'pair classifier'").iloc[0]
    assert (row.n_cells, row.n_ties) == (9, 3)
    assert pd.isna(row.feature) and row.reason == "fewer than 10 configs with a strict sign (9)"


def test_shap_figure_draws_the_regressor_and_the_pair_classifiers():
    from safetyrepro.results.figures import shap_per_axis

    rng = np.random.default_rng(2)
    table = shap_attribution(grid_cells(lambda row: rng.random()))
    fig = shap_per_axis(table)
    heat_maps = [ax for ax in fig.axes if ax.images and ax.get_title()]
    assert [ax.get_title().split(" (")[0] for ax in heat_maps] == [
        "regressor of cell score",
        "pair classifier of sign(A - B)",
    ]
    assert [label.get_text() for label in heat_maps[0].get_xticklabels()] == [
        "template",
        "decoding",
        "shots",
        "scoring",
        "model",
    ]
    assert len(heat_maps[1].get_yticklabels()) == 3  # one row per model pair
    # an older table (no surrogate column) and one with no fitted surrogate still draw
    old = table[table.surrogate == "regressor"].drop(columns=["surrogate", "model_a", "model_b"])
    assert len([ax for ax in shap_per_axis(old).axes if ax.images]) == 1
    one_class = shap_attribution(grid_cells(lambda row: 0.1 if row["model"] == "b" else 0.5, models=("a", "b")))
    message = shap_per_axis(one_class[one_class.feature.isna()]).axes[0].texts[0].get_text()
    assert message.startswith("no surrogate could be fitted: one class only")


# --- the precision probe ----------------------------------------------------------------------------


def probe_cells(scores: dict[str, list[float]], benchmark="bbq") -> pd.DataFrame:
    rows = [
        {"model": model, "benchmark": benchmark, "config_id": f"c{i}", "score": value}
        for model, values in scores.items()
        for i, value in enumerate(values)
    ]
    return pd.DataFrame(rows)


def test_probe_differences_pooled_and_orderings():
    # grid: a, b, c at nf4; the probe runs a@bf16, b@bf16, c@bf16 on c0, c1 (c2 is not a probe config).
    # twin - model: a +2, -3 pp; b -1, 0 pp; c +5, +1 pp -> |d| 2, 3, 1, 0, 5, 1: pooled median 1.5,
    # mean 2, max 5, signed median +0.5. Orderings: c0 nf4 c .70 > a .60 > b .50, bf16 c .75 > a .62 >
    # b .49 (match); c1 nf4 a .55 > b .53 > c .40, bf16 b .53 > a .52 > c .41 (differs).
    grid = probe_cells({"a": [0.60, 0.55, 0.9], "b": [0.50, 0.53, 0.9], "c": [0.70, 0.40, 0.9]})
    probe = probe_cells({"a@bf16": [0.62, 0.52], "b@bf16": [0.49, 0.53], "c@bf16": [0.75, 0.41]})
    twins = {"a": "a@bf16", "b": "b@bf16", "c": "c@bf16"}
    tables = precision_probe(grid, probe, twins, ["c0", "c1"])
    pooled = tables["differences"].set_index("benchmark").loc["all"]
    assert pooled.n_cells == 6
    assert [pooled.median_abs_diff_pp, pooled.mean_abs_diff_pp, pooled.max_abs_diff_pp] == pytest.approx([1.5, 2, 5])
    assert pooled.median_diff_pp == pytest.approx(0.5)
    assert list(tables["differences"]["benchmark"]) == ["bbq", "all"]
    orderings = tables["orderings"].set_index("config_id")
    assert list(orderings.columns) == ORDERING_COLUMNS[:1] + ORDERING_COLUMNS[2:]
    assert orderings.loc["c0", "ordering"] == "c > a > b" and bool(orderings.loc["c0", "match"])
    assert orderings.loc["c1", "twin_ordering"] == "b > a > c" and not orderings.loc["c1", "match"]
    assert ordering_matches(tables["orderings"]) == (1, 2)
    assert (pooled.n_orderings_compared, pooled.n_orderings_matched) == (2, 1)
    assert set(tables["pairs"]["config_id"]) == {"c0", "c1"}


def test_probe_twins_in_the_grid_and_shared_twins_have_no_ordering():
    # the default run: fp32 and bf16 are paired with the grid's nf4 entry of the same weights; their
    # twins are one model, so no ordering can be compared; a tie at one precision is no comparison
    grid = probe_cells({"fp32": [0.6, 0.5], "bf16": [0.6, 0.4], "nf4": [0.5, 0.5]})
    tables = precision_probe(grid, grid.iloc[:0], {"fp32": "nf4", "bf16": "nf4"}, ["c0", "c1"])
    pooled = tables["differences"].set_index("benchmark").loc["all"]
    assert pooled.n_cells == 4 and pooled.max_abs_diff_pp == pytest.approx(10)
    assert tables["orderings"].empty and ordering_matches(tables["orderings"]) == (0, 0)
    # a model already at the probe precision is its own twin: in the orderings, not in the differences
    grid = probe_cells({"a": [0.5, 0.5, 0.5], "q": [0.6, 0.4, 0.7], "r": [0.7, 0.45, 0.2]})
    probe = probe_cells({"q@nf4": [0.55, 0.52, 0.2], "r@nf4": [0.65, 0.46]})  # r@nf4 on c2 missing (partial)
    tables = precision_probe(grid, probe, {"a": "a", "q": "q@nf4", "r": "r@nf4"}, ["c0", "c1", "c2"])
    assert set(tables["pairs"]["model"]) == {"q", "r"} and len(tables["pairs"]) == 5
    orderings = tables["orderings"].set_index("config_id")
    assert list(orderings.index) == ["c0", "c1"]  # c2 lacks r's twin: no full ordering there
    assert orderings.loc["c0", "ordering"] == "r > q > a" and orderings.loc["c0", "twin_ordering"] == "r > q > a"
    assert orderings.loc["c1", "twin_ordering"] == "q > a > r" and not orderings.loc["c1", "match"]
    assert (orderings["n_models"] == 3).all() and (orderings["left_out"] == "").all()
    tied = precision_probe(
        probe_cells({"a": [0.5], "b": [0.4]}),
        probe_cells({"a@x": [0.5], "b@x": [0.5]}),
        {"a": "a@x", "b": "b@x"},
        ["c0"],
    )
    assert tied["orderings"].iloc[0].twin_ordering == "tie" and ordering_matches(tied["orderings"]) == (0, 0)


# --- the synthetic 612-cell table (tests/helpers/synthetic_cells.py, when present) ---------------------------


def test_synthetic_grid_shapes():
    module = pytest.importorskip("helpers.synthetic_cells", reason="tests/helpers/synthetic_cells.py is not there yet")
    cells = module.synthetic_cells(seed=0)
    shares = variance_shares(cells)
    assert list(shares.columns) == VARIANCE_COLUMNS
    assert set(shares.benchmark) == set(cells.loc[cells.scoring == "freeform", "benchmark"])
    assert (shares.n_cells > 0).all()
    table = shap_attribution(cells)
    regressor = table[table.surrogate == "regressor"]
    counts = cells.groupby("benchmark").size()
    assert set(regressor.benchmark) == set(counts[counts >= 10].index)
    assert (regressor.groupby("benchmark").size() == 5).all()
    assert regressor.groupby("benchmark")["share"].sum().to_numpy() == pytest.approx(1.0)
    # one classifier per benchmark and model pair: 4 axis rows, or one row with the reason it has none
    pairs = table[table.surrogate == "pair classifier"]
    assert len(pairs.groupby(["benchmark", "model_a", "model_b"])) == 5 * 3
    fitted = pairs[pairs.feature.notna()]
    assert (fitted.groupby(["benchmark", "model_a", "model_b"]).size() == 4).all()
    assert pairs[pairs.feature.isna()].reason.notna().all()


def test_a_saturated_free_form_slice_gets_no_shares_rather_than_an_error():
    """Two models on one free-form config: no residual degree of freedom, so no Type II test."""
    cells = pd.DataFrame(
        {
            "model": ["a", "b"],
            "benchmark": "b1",
            "template": "T1",
            "decoding": "greedy",
            "shots": "0",
            "scoring": "freeform",
            "score": [0.5, 0.6],
        }
    )
    row = variance_shares(cells).iloc[0]
    assert row["residual_df"] == 0 and math.isnan(row["model_share"]) and math.isnan(row["rho"])
