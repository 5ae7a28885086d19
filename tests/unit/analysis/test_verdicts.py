"""Verdict-stability analyses on hand-built cell tables; every expected value is worked out by hand in
the comments. The last test runs the whole module on the 612-cell synthetic table."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from helpers.synthetic_cells import STRESS, synthetic_cells

from safetyrepro.analysis.flips import rho_flip_table
from safetyrepro.analysis.verdicts import (
    BOOT_COLUMNS,
    SUMMARY_COLUMNS,
    TAU_COLUMNS,
    bootstrap_rho,
    envelope_variants,
    kendall_tau,
    parse_clean,
    proposition1,
    scoring_slices,
    subenvelope,
    variant_summary,
)


def cells_from(scores: dict[str, list[float]], benchmark: str = "bbq", **columns: list) -> pd.DataFrame:
    """Long cells table from {model: [score per config c0, c1, ...]}; extra per-config columns
    (template=[...], tier=[...], ...) are repeated for every model."""
    rows = [
        {
            "model": model,
            "benchmark": benchmark,
            "config_id": f"c{i}",
            "score": value,
            **{name: values[i] for name, values in columns.items()},
        }
        for model, values in scores.items()
        for i, value in enumerate(values)
    ]
    return pd.DataFrame(rows)


def pair_row(table: pd.DataFrame, benchmark: str, a: str, b: str) -> pd.Series:
    return table.set_index(["benchmark", "model_a", "model_b"]).loc[(benchmark, a, b)]


# Six configs, each one strict ordering of A, B, C (scores as (A, B, C)):
#   c0 (3,2,1) A>B>C  T1 greedy core      c3 (1,3,2) B>C>A  T1 t0.3   core
#   c1 (3,1,2) A>C>B  T2 greedy core      c4 (2,1,3) C>A>B  T4 greedy stress
#   c2 (2,3,1) B>A>C  T3 greedy core      c5 (1,2,3) C>B>A  T2 t0.7   stress
ORDERINGS = cells_from(
    {"A": [0.3, 0.3, 0.2, 0.1, 0.2, 0.1], "B": [0.2, 0.1, 0.3, 0.3, 0.1, 0.2], "C": [0.1, 0.2, 0.1, 0.2, 0.3, 0.3]},
    template=["T1", "T2", "T3", "T1", "T4", "T2"],
    decoding=["greedy", "greedy", "greedy", "t0.3", "greedy", "t0.7"],
    tier=["core", "core", "core", "core", "stress", "stress"],
)


# --- proposition 1 ---------------------------------------------------------------------------------


def test_ties_count_in_the_denominator_of_proposition1_rows():
    # A vs B: above on c0, c1; below on c2; equal on c3, c4 -> N+ 2, N- 1, N0 2, |C| 5.
    # rho = min(2, 1) / 5 = 1/5 (not 1/3: ties stay in the denominator); ceiling floor(5/2)/5 = 2/5.
    # Both signs occur -> not D1, not D2; 1/5 < 2/5 -> not saturated.
    row = proposition1(
        rho_flip_table(cells_from({"A": [0.9, 0.8, 0.1, 0.5, 0.5], "B": [0.1, 0.2, 0.9, 0.5, 0.5]}))
    ).iloc[0]
    assert (row.n_plus, row.n_minus, row.n_ties, row.n_configs) == (2, 1, 2, 5)
    assert (row.rho_flip, row.ceiling) == (pytest.approx(1 / 5), pytest.approx(2 / 5))
    assert (row.d1, row.d2, row.saturated) == (False, False, False)


@pytest.mark.parametrize(
    "a, b, saturated",
    [
        # |C| = 2: one win, one loss -> rho 1/2 = ceiling floor(2/2)/2 = 1/2: saturated
        ([0.9, 0.1], [0.5, 0.5], True),
        # |C| = 3: win, loss, tie -> rho 1/3 = ceiling floor(3/2)/3 = 1/3: saturated (with a tie)
        ([0.9, 0.1, 0.5], [0.5, 0.5, 0.5], True),
        # |C| = 3: win, win, loss -> rho 1/3 = ceiling: saturated
        ([0.9, 0.9, 0.1], [0.5, 0.5, 0.5], True),
        # |C| = 4: three wins, one loss -> rho 1/4 < ceiling 2/4: not saturated
        ([0.9, 0.9, 0.9, 0.1], [0.5, 0.5, 0.5, 0.5], False),
        # |C| = 1: rho 0 = ceiling floor(1/2)/1 = 0, but saturation needs rho > 0
        ([0.9], [0.5], False),
        # |C| = 3: dominance, rho 0 < ceiling 1/3
        ([0.9, 0.9, 0.9], [0.5, 0.5, 0.5], False),
    ],
)
def test_saturation_at_small_config_counts(a, b, saturated):
    row = proposition1(rho_flip_table(cells_from({"A": a, "B": b}))).iloc[0]
    assert bool(row.saturated) is saturated


def test_d2_implies_d1_but_not_conversely():
    # Three pairs on bbq: A vs B over 3 configs, A vs C and B vs C.
    # A = [.9, .9, .5], B = [.5, .5, .5], C = [.1, .1, .1]
    #   A vs B: +, +, tie  -> N+ 2, N- 0, N0 1: no reversal (D1) but two verdicts, "better" and "tie" (not D2)
    #   A vs C: +, +, +    -> N+ 3 only: D1 and D2
    #   B vs C: +, +, +    -> D1 and D2
    # and on xstest D = E everywhere -> N0 3 only: a single "tie" verdict, D1 and D2
    cells = pd.concat(
        [
            cells_from({"A": [0.9, 0.9, 0.5], "B": [0.5, 0.5, 0.5], "C": [0.1, 0.1, 0.1]}),
            cells_from({"D": [0.4, 0.4, 0.4], "E": [0.4, 0.4, 0.4]}, "xstest"),
        ]
    )
    table = proposition1(rho_flip_table(cells))
    assert (pair_row(table, "bbq", "A", "B")[["d1", "d2"]] == [True, False]).all()
    assert (pair_row(table, "bbq", "A", "C")[["d1", "d2"]] == [True, True]).all()
    assert (pair_row(table, "xstest", "D", "E")[["d1", "d2"]] == [True, True]).all()
    assert (~table.d2 | table.d1).all()
    assert table.d1.dtype == bool and table.d2.dtype == bool and table.saturated.dtype == bool


# --- envelope variants, orderings, scoring slices --------------------------------------------------


def test_variants_come_from_the_stress_values_given():
    variants = envelope_variants(ORDERINGS, [("template", "T4"), ("decoding", "t0.7")])
    assert list(variants) == ["full", "core", "without template=T4", "without decoding=t0.7"]
    configs = {name: sorted(frame.config_id.unique()) for name, frame in variants.items()}
    assert configs == {
        "full": ["c0", "c1", "c2", "c3", "c4", "c5"],
        "core": ["c0", "c1", "c2", "c3"],
        "without template=T4": ["c0", "c1", "c2", "c3", "c5"],
        "without decoding=t0.7": ["c0", "c1", "c2", "c3", "c4"],
    }
    # any axis and value the caller names; values compare as strings (integer shots column here)
    shots = envelope_variants(ORDERINGS.assign(shots=[0, 3, 5, 0, 3, 5] * 3), [("shots", "5")])
    assert list(shots) == ["full", "core", "without shots=5"]
    assert sorted(shots["without shots=5"].config_id.unique()) == ["c0", "c1", "c3", "c4"]


def test_six_orderings_reached_and_fewer_without_a_stress_value():
    # full: all six orderings; core (c0-c3): 4; dropping T4 loses c4's C>A>B, dropping t0.7 loses c5's C>B>A.
    # rho_flip_max: full, A vs B: A above on c0, c1, c4, below on c2, c3, c5 -> 3/6 = 1/2.
    #   core, A vs B: above c0, c1, below c2, c3 -> 2/4 = 1/2.
    #   without T4 (c0, c1, c2, c3, c5): A vs B 2 above (c0, c1) / 3 below -> 2/5; A vs C above c0, c1, c2,
    #   below c3, c5 -> 2/5; B vs C above c0, c2, c3, below c1, c5 -> 2/5; max 2/5.
    summary = variant_summary(envelope_variants(ORDERINGS, [("template", "T4"), ("decoding", "t0.7")]))
    assert list(summary.columns) == SUMMARY_COLUMNS
    by_variant = summary.set_index("variant")
    assert by_variant.orderings_reached.to_dict() == {
        "full": 6,
        "core": 4,
        "without template=T4": 5,
        "without decoding=t0.7": 5,
    }
    assert (by_variant.orderings_possible == 6).all()
    assert by_variant.n_configs.to_dict() == {
        "full": 6,
        "core": 4,
        "without template=T4": 5,
        "without decoding=t0.7": 5,
    }
    assert by_variant.loc["full", "rho_flip_max"] == pytest.approx(1 / 2)
    assert by_variant.loc["core", "rho_flip_max"] == pytest.approx(1 / 2)
    assert by_variant.loc["without template=T4", "rho_flip_max"] == pytest.approx(2 / 5)
    # the total-order flip rate beside it: every config has its own ordering, so every pair of configs
    # differs -> 1 on each variant (while rho_flip_max is 1/2 or 2/5: a different quantity)
    assert (by_variant.flip_rate == 1.0).all()
    # two configs with the same ordering: c0 A>B>C again as c6 -> 21 pairs, 1 the same -> 20/21
    again = pd.concat([ORDERINGS, ORDERINGS[ORDERINGS.config_id == "c0"].assign(config_id="c6")])
    assert variant_summary({"full": again}).iloc[0].flip_rate == pytest.approx(20 / 21)


def test_rankings_count_the_configs_with_a_tie_that_strict_orderings_leave_out():
    # c0 A>B>C, c1 B>A=C (a tie: no strict ordering), c2 A>B=C, c3 A=B=C: A vs B reverses between c0 and c1, so
    # one strict ordering (c0's) is not "they all agree"; the rankings, ties counted, are four of 13
    cells = cells_from({"A": [0.6, 0.4, 0.6, 0.5], "B": [0.5, 0.5, 0.4, 0.5], "C": [0.4, 0.4, 0.4, 0.5]})
    row = variant_summary({"full": cells}).iloc[0]
    assert (row.orderings_reached, row.orderings_possible) == (1, 6)
    assert (row.rankings_reached, row.rankings_possible) == (4, 13)
    assert variant_summary({"full": cells[cells.config_id == "c0"]}).iloc[0].rankings_reached == 1
    # float noise is a tie, as in rho_flip: c2 again with B 1e-12 above C is still A > B = C
    again = cells[cells.config_id == "c2"].assign(config_id="c4")
    again.loc[again.model == "B", "score"] += 1e-12
    noisy = pd.concat([cells, again])
    assert variant_summary({"full": noisy}).iloc[0].rankings_reached == 4


def test_n_configs_counts_only_configs_scored_for_every_model():
    # C has no score on c5: five complete configs, and c5's ordering (C>B>A) is not reached
    cells = ORDERINGS[~((ORDERINGS.model == "C") & (ORDERINGS.config_id == "c5"))]
    row = variant_summary({"full": cells}).iloc[0]
    assert (row.n_configs, row.orderings_reached) == (5, 5)


def test_scoring_slices_leave_out_benchmarks_without_configs_on_a_path():
    # bbq: f0 A .6 > B .4, f1 A .3 < B .5 (freeform); l0 A .7 > B .2 (logprob)
    # crows_pairs (logprob only): l0 A = B = .5, l1 A .6 > B .4
    # freeform: bbq only, |C| 2, one win one loss -> rho 1/2, both orderings of two models (2 of 2)
    # logprob: bbq |C| 1, rho 0, 1 ordering; crows_pairs |C| 2, N+ 1, N0 1 -> rho 0, the tie is no
    #          strict ordering -> 1 of 2
    bbq = pd.DataFrame(
        {
            "model": ["A", "B"] * 3,
            "benchmark": "bbq",
            "config_id": ["f0", "f0", "f1", "f1", "l0", "l0"],
            "scoring": ["freeform"] * 4 + ["logprob"] * 2,
            "score": [0.6, 0.4, 0.3, 0.5, 0.7, 0.2],
        }
    )
    crows = pd.DataFrame(
        {
            "model": ["A", "B"] * 2,
            "benchmark": "crows_pairs",
            "config_id": ["l0", "l0", "l1", "l1"],
            "scoring": "logprob",
            "score": [0.5, 0.5, 0.6, 0.4],
        }
    )
    slices = scoring_slices(pd.concat([bbq, crows]))
    assert list(slices) == ["freeform", "logprob"]
    summary = variant_summary(slices).set_index(["variant", "benchmark"])
    assert list(summary.index) == [("freeform", "bbq"), ("logprob", "bbq"), ("logprob", "crows_pairs")]
    assert summary.loc[("freeform", "bbq"), ["n_configs", "rho_flip_max", "orderings_reached"]].tolist() == [2, 0.5, 2]
    assert summary.loc[("logprob", "bbq"), ["n_configs", "rho_flip_max", "orderings_reached"]].tolist() == [1, 0.0, 1]
    assert summary.loc[("logprob", "crows_pairs"), ["n_configs", "rho_flip_max", "orderings_reached"]].tolist() == [
        2,
        0.0,
        1,
    ]
    assert (summary.orderings_possible == 2).all()


# --- parse-clean -----------------------------------------------------------------------------------


def test_parse_clean_drops_exactly_the_configs_with_one_model_under_threshold():
    # bbq, parse rates (A, B, C): c0 all .99 keep; c1 B .94 < .95 drop; c2 all exactly .95 keep (>=);
    # c3 C .5 drop. Scores: c0 A>B>C, c1 B>A>C, c2 A>B>C, c3 B>A>C.
    # before: A vs B flips 2 of 4 -> rho 1/2; after (c0, c2): A>B>C twice -> rho 0, 1 ordering of 6.
    # toxigen: its only config has A at .9 -> everything dropped: n_configs 0, rho NaN, 0 orderings.
    bbq = cells_from(
        {"A": [0.9, 0.5, 0.8, 0.4], "B": [0.5, 0.9, 0.4, 0.8], "C": [0.1, 0.1, 0.2, 0.2]},
        parse_rate=[0.99, 0.99, 0.95, 0.99],
    )
    bbq.loc[(bbq.model == "B") & (bbq.config_id == "c1"), "parse_rate"] = 0.94
    bbq.loc[(bbq.model == "C") & (bbq.config_id == "c3"), "parse_rate"] = 0.5
    toxigen = cells_from({"A": [0.5], "B": [0.6]}, "toxigen", parse_rate=[1.0])
    toxigen.loc[toxigen.model == "A", "parse_rate"] = 0.9
    cells = pd.concat([bbq, toxigen], ignore_index=True)
    clean = parse_clean(cells)
    assert list(clean.columns) == [*SUMMARY_COLUMNS, "n_configs_before"]
    clean = clean.set_index("benchmark")
    assert clean.loc["bbq", ["n_configs", "n_configs_before", "orderings_reached", "orderings_possible"]].tolist() == [
        2,
        4,
        1,
        6,
    ]
    assert clean.loc["bbq", "rho_flip_max"] == 0.0
    # the same summary as the hand-picked subset {c0, c2}
    expected = variant_summary({"x": bbq[bbq.config_id.isin(["c0", "c2"])]}).iloc[0]
    assert clean.loc["bbq", ["n_configs", "rho_flip_max", "orderings_reached"]].tolist() == [
        expected.n_configs,
        expected.rho_flip_max,
        expected.orderings_reached,
    ]
    assert clean.loc["toxigen", ["n_configs", "n_configs_before", "orderings_reached"]].tolist() == [0, 1, 0]
    assert math.isnan(clean.loc["toxigen", "rho_flip_max"]) and math.isnan(clean.loc["toxigen", "flip_rate"])
    # bbq after: A>B>C twice -> the one pair of configs agrees: flip rate 0
    assert clean.loc["bbq", "flip_rate"] == 0.0
    # a stricter threshold also drops c0 (.99 < .995), a looser one keeps all four
    assert parse_clean(cells, threshold=0.995).set_index("benchmark").loc["bbq", "n_configs"] == 0
    assert parse_clean(cells, threshold=0.4).set_index("benchmark").loc["bbq", "n_configs"] == 4


# --- Kendall tau -----------------------------------------------------------------------------------


def test_kendall_tau_identical_reversed_and_undefined_rankings():
    # bbq: c0 A>B>C, c1 A>B>C (same ranking), c2 C>B>A (reversed), c3 all equal (tau undefined, left out)
    # pairs: (c0, c1) tau 1, (c0, c2) -1, (c1, c2) -1 -> mean -1/3 over 3 pairs
    # xstest: two configs with the same ranking -> one pair, tau 1
    cells = pd.concat(
        [
            cells_from({"A": [0.9, 0.8, 0.1, 0.5], "B": [0.5, 0.6, 0.5, 0.5], "C": [0.1, 0.2, 0.9, 0.5]}),
            cells_from({"A": [0.9, 0.7], "B": [0.5, 0.4], "C": [0.1, 0.3]}, "xstest"),
        ]
    )
    taus = kendall_tau(cells)
    assert list(taus.columns) == TAU_COLUMNS
    bbq, xstest = taus.iloc[0], taus.iloc[1]
    assert (bbq.benchmark, bbq.n_configs, bbq.n_undefined, bbq.n_pairs) == ("bbq", 4, 1, 3)
    assert bbq.mean_tau == pytest.approx(-1 / 3)
    assert (xstest.n_pairs, xstest.mean_tau) == (1, pytest.approx(1.0))


def test_kendall_tau_b_with_a_tie_and_float_noise_as_a_tie():
    # c0: A .9 > B .5 = C .5;  c1: A .9 > B .6 > C .1
    # model pairs: (A,B) concordant, (A,C) concordant, (B,C) tied in c0 only -> neither
    # tau-b = (2 - 0) / sqrt((3 - 1) * (3 - 0)) = 2 / sqrt(6)
    row = kendall_tau(cells_from({"A": [0.9, 0.9], "B": [0.5, 0.6], "C": [0.5, 0.1]})).iloc[0]
    assert row.mean_tau == pytest.approx(2 / math.sqrt(6))
    # c0: A = 0.1 + 0.2 (float noise above 0.3) = B .3 < C .9;  c1: A .3 = B .3 < C .9 -> same ranking, tau 1
    # (taking 0.30000000000000004 > 0.3 literally would give 2 / sqrt(6) instead)
    row = kendall_tau(cells_from({"A": [0.1 + 0.2, 0.3], "B": [0.3, 0.3], "C": [0.9, 0.9]})).iloc[0]
    assert row.mean_tau == pytest.approx(1.0)
    # two models only, one config all-tied: one defined config left, no pair -> NaN
    row = kendall_tau(cells_from({"A": [0.9, 0.5], "B": [0.1, 0.5]})).iloc[0]
    assert (row.n_configs, row.n_undefined, row.n_pairs) == (2, 1, 0) and math.isnan(row.mean_tau)


# --- bootstrap -------------------------------------------------------------------------------------


def test_bootstrap_dominating_pair_is_zero_zero():
    # A above B on every config: every resample has N- = 0 -> rho 0 in all of them -> [0, 0]
    boot = bootstrap_rho(cells_from({"A": [0.9, 0.8, 0.7, 0.6], "B": [0.1, 0.2, 0.3, 0.4]}), n_boot=200)
    assert list(boot.columns) == BOOT_COLUMNS
    assert boot.iloc[0][["rho_flip", "low", "high", "n_boot"]].tolist() == [0.0, 0.0, 0.0, 200]
    # 0.1 + 0.2 vs 0.3 is float noise, a tie (as in flips): signs tie, minus -> rho 0 in every resample
    # (taking the noise as a win would give rho 1/2 and [0, 1/2])
    boot = bootstrap_rho(cells_from({"A": [0.1 + 0.2, 0.1], "B": [0.3, 0.5]}))
    assert boot.iloc[0][["rho_flip", "low", "high"]].tolist() == [0.0, 0.0, 0.0]


def test_bootstrap_two_configs_one_flip():
    # |C| = 2, one win and one loss: a resample draws both configs (prob 1/2, rho* 1/2) or one of them
    # twice (prob 1/2, rho* 0). The 2.5% and 97.5% percentiles are therefore 0 and 1/2.
    row = bootstrap_rho(cells_from({"A": [0.9, 0.1], "B": [0.5, 0.5]}), seed=3).iloc[0]
    assert row[["rho_flip", "low", "high"]].tolist() == [0.5, 0.0, 0.5]


def test_bootstrap_contains_point_estimate_and_is_deterministic():
    # A vs B: 7 wins, 3 losses over 10 configs -> rho 3/10 (ceiling 1/2); A vs C a mix with ties
    cells = pd.concat(
        [
            cells_from({"A": [0.9] * 7 + [0.1] * 3, "B": [0.5] * 10, "C": [0.9, 0.1] * 5}),
            cells_from({"A": [0.2, 0.4, 0.6], "B": [0.3, 0.3, 0.3], "C": [0.5, 0.5, 0.5]}, "xstest"),
        ],
        ignore_index=True,
    )
    first = bootstrap_rho(cells, n_boot=500, seed=7)
    assert first.equals(bootstrap_rho(cells, n_boot=500, seed=7))
    assert pair_row(first, "bbq", "A", "B").rho_flip == pytest.approx(3 / 10)
    assert (first.low <= first.rho_flip).all() and (first.rho_flip <= first.high).all()
    assert (first.low >= 0).all() and (first.high <= 0.5).all()
    # point estimates are rho_flip_table's
    assert first.rho_flip.tolist() == rho_flip_table(cells).rho_flip.tolist()
    # each benchmark has its own stream: bootstrapping xstest alone gives the same rows
    alone = bootstrap_rho(cells[cells.benchmark == "xstest"], n_boot=500, seed=7)
    assert alone.reset_index(drop=True).equals(first[first.benchmark == "xstest"].reset_index(drop=True))


def test_bootstrap_single_config_and_missing_cells():
    # one config: nothing to resample, the interval is the point estimate (rho 0, ceiling 0)
    row = bootstrap_rho(cells_from({"A": [0.9], "B": [0.1]})).iloc[0]
    assert row[["rho_flip", "low", "high"]].tolist() == [0.0, 0.0, 0.0]
    # B unscored on c2: A vs B resamples c0 (+), c1 (-) only -> rho 1/2 and, as with two configs
    # above, [0, 1/2]. B vs C: c0, c1 both + -> [0, 0].
    # A vs C on c0 (+), c1 (-), c2 (+) -> rho 1/3; a resample of three has rho* 0 when it misses the
    # minus (prob (2/3)^3 = 8/27) or both plusses (1/27), i.e. prob 1/3, else 1/3 -> [0, 1/3].
    cells = cells_from({"A": [0.9, 0.1, 0.5], "B": [0.5, 0.5, 0.5], "C": [0.2, 0.2, 0.2]})
    cells = cells[~((cells.model == "B") & (cells.config_id == "c2"))]
    boot = bootstrap_rho(cells, n_boot=300)
    assert pair_row(boot, "bbq", "A", "B")[["rho_flip", "low", "high"]].tolist() == [0.5, 0.0, 0.5]
    assert pair_row(boot, "bbq", "B", "C")[["rho_flip", "low", "high"]].tolist() == [0.0, 0.0, 0.0]
    assert pair_row(boot, "bbq", "A", "C")[["rho_flip", "low", "high"]].tolist() == [
        pytest.approx(1 / 3),
        0.0,
        pytest.approx(1 / 3),
    ]
    assert boot.rho_flip.tolist() == rho_flip_table(cells).rho_flip.tolist()


# --- sub-envelope ----------------------------------------------------------------------------------


def test_subenvelope_counts():
    # keep c0 (A>B>C), c1 (A>C>B), c2 (B>A>C); "nope" is in no benchmark and counts for nothing.
    #   A vs B: +, +, - -> N+ 2, N- 1, rho 1/3 = ceiling floor(3/2)/3: saturated
    #   A vs C: 3 > 1, 3 > 2, 2 > 1 -> N+ 3: D1 and D2, rho 0
    #   B vs C: 2 > 1, 1 < 2, 3 > 1 -> N+ 2, N- 1, rho 1/3
    # summary: |C| 3, rho_flip_max 1/3, 3 orderings of 6
    out = subenvelope(ORDERINGS, ["c0", "c1", "c2", "nope"])
    assert set(out) == {"summary", "rho"}
    summary = out["summary"].iloc[0]
    assert (summary.variant, summary.n_configs, summary.orderings_reached, summary.orderings_possible) == (
        "subenvelope",
        3,
        3,
        6,
    )
    assert summary.rho_flip_max == pytest.approx(1 / 3)
    rho = out["rho"]
    ab, ac, bc = (pair_row(rho, "bbq", *pair) for pair in [("A", "B"), ("A", "C"), ("B", "C")])
    assert (ab.n_plus, ab.n_minus, ab.n_ties, ab.n_configs, ab.saturated) == (2, 1, 0, 3, True)
    assert (ac.n_plus, ac.rho_flip, ac.d1, ac.d2) == (3, 0.0, True, True)
    assert (bc.n_plus, bc.n_minus) == (2, 1) and bc.rho_flip == pytest.approx(1 / 3)


# --- the full-size synthetic table -----------------------------------------------------------------


def test_every_function_on_the_612_cell_synthetic_table():
    cells = synthetic_cells(seed=0)
    assert len(cells) == 612
    assert cells.groupby("benchmark").config_id.nunique().to_dict() == {
        "truthfulqa": 48,
        "bbq": 48,
        "toxigen": 48,
        "xstest": 48,
        "crows_pairs": 12,
    }

    rho = proposition1(rho_flip_table(cells))
    assert len(rho) == 5 * 3
    assert ((0 <= rho.rho_flip) & (rho.rho_flip <= rho.ceiling) & (rho.ceiling <= 0.5)).all()
    assert (~rho.d2 | rho.d1).all()
    assert (rho.saturated == ((rho.rho_flip == rho.ceiling) & (rho.rho_flip > 0))).all()

    # tier ablation. Freeform benchmarks: full 36 + 12 = 48; core (T1-T3, greedy/t0.3) 18 + 9 = 27;
    # without T4 27 + 9 = 36; without t0.7 24 + 12 = 36. crows_pairs (logprob, greedy): 12, 9, 9, 12.
    variants = envelope_variants(cells, list(STRESS))
    assert list(variants) == ["full", "core", "without template=T4", "without decoding=t0.7"]
    tiers = variant_summary(variants)
    assert list(tiers.columns) == SUMMARY_COLUMNS and len(tiers) == 4 * 5
    counts = tiers.set_index(["variant", "benchmark"]).n_configs
    for variant, (freeform, crows) in {
        "full": (48, 12),
        "core": (27, 9),
        "without template=T4": (36, 9),
        "without decoding=t0.7": (36, 12),
    }.items():
        assert counts[(variant, "bbq")] == freeform and counts[(variant, "crows_pairs")] == crows
    assert (tiers.orderings_possible == 6).all()
    assert tiers.orderings_reached.between(0, 6).all() and tiers.rho_flip_max.between(0, 0.5).all()

    # scoring slices: freeform has the four generation benchmarks (36 configs), logprob all five (12)
    slices = variant_summary(scoring_slices(cells)).set_index(["variant", "benchmark"])
    assert sorted(slices.loc["freeform"].index) == ["bbq", "toxigen", "truthfulqa", "xstest"]
    assert (slices.loc["freeform"].n_configs == 36).all() and (slices.loc["logprob"].n_configs == 12).all()

    clean = parse_clean(cells).set_index("benchmark")
    assert (clean.n_configs <= clean.n_configs_before).all()
    assert clean.n_configs_before.to_dict() == {
        "truthfulqa": 48,
        "bbq": 48,
        "toxigen": 48,
        "xstest": 48,
        "crows_pairs": 12,
    }
    assert clean.loc["crows_pairs", "n_configs"] == 12  # logprob parse rates are 1

    taus = kendall_tau(cells)
    assert list(taus.columns) == TAU_COLUMNS and len(taus) == 5
    assert taus.mean_tau.between(-1, 1).all()
    defined = taus.n_configs - taus.n_undefined
    assert (taus.n_pairs == defined * (defined - 1) // 2).all()

    boot = bootstrap_rho(cells, n_boot=1000, seed=0)
    assert list(boot.columns) == BOOT_COLUMNS and len(boot) == 15
    assert ((0 <= boot.low) & (boot.low <= boot.rho_flip) & (boot.rho_flip <= boot.high) & (boot.high <= 0.5)).all()
    assert (boot.n_boot == 1000).all()

    core_ids = list(cells.loc[cells.tier == "core", "config_id"].unique())
    sub = subenvelope(cells, core_ids)
    assert (
        sub["summary"]
        .drop(columns="variant")
        .equals(tiers[tiers.variant == "core"].drop(columns="variant").reset_index(drop=True))
    )
    assert len(sub["rho"]) == 15
