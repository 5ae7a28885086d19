"""rho_flip, orderings and the total-order flip rate on hand-built cell tables whose answers are worked
out by hand."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from safetyrepro.analysis.flips import (
    FLIP_RATE_COLUMNS,
    flip_rate,
    orderings_reached,
    rho_flip_table,
    sign_counts,
    signs,
    strict_ordering,
)


def cells_from(scores: dict[str, list[float]], benchmark: str = "bbq") -> pd.DataFrame:
    """Long cells table from {model: [score per config]}."""
    rows = [
        {"model": model, "benchmark": benchmark, "config_id": f"c{i}", "score": value}
        for model, values in scores.items()
        for i, value in enumerate(values)
    ]
    return pd.DataFrame(rows)


def test_ties_stay_in_the_denominator():
    # A vs B: above on c0, c1, c2; below on c3; equal on c4, c5 -> N+ 3, N- 1, N0 2, rho = 1/6
    cells = cells_from({"A": [0.9, 0.8, 0.7, 0.1, 0.5, 0.5], "B": [0.1, 0.2, 0.3, 0.9, 0.5, 0.5]})
    row = rho_flip_table(cells).iloc[0]
    assert (row.model_a, row.model_b) == ("A", "B")
    assert (row.n_plus, row.n_minus, row.n_ties, row.n_configs) == (3, 1, 2, 6)
    assert row.rho_flip == pytest.approx(1 / 6)
    assert row.ceiling == pytest.approx(3 / 6)


def test_ceiling_at_small_and_odd_config_counts():
    # |C| = 3: one reversal out of three is already the ceiling floor(3/2)/3 = 1/3
    row = rho_flip_table(cells_from({"A": [0.9, 0.9, 0.1], "B": [0.5, 0.5, 0.5]})).iloc[0]
    assert (row.rho_flip, row.ceiling) == (pytest.approx(1 / 3), pytest.approx(1 / 3))
    row = rho_flip_table(cells_from({"A": [0.9], "B": [0.5]})).iloc[0]
    assert (row.rho_flip, row.ceiling) == (0.0, 0.0)


def test_dominance_gives_zero_and_float_noise_is_a_tie():
    # (0.1 + 0.2) differs from 0.3 by float noise only: a tie, not a win
    cells = cells_from({"A": [0.1 + 0.2, 0.9, 0.8], "B": [0.3, 0.2, 0.8]})
    assert sign_counts(
        cells.query("model == 'A'")["score"].reset_index(drop=True),
        cells.query("model == 'B'")["score"].reset_index(drop=True),
    ) == (1, 0, 2)
    assert rho_flip_table(cells).iloc[0].rho_flip == 0.0


def test_one_row_per_unordered_pair_and_benchmark_in_model_order():
    cells = pd.concat(
        [
            cells_from({"A": [0.1, 0.9], "B": [0.5, 0.5], "C": [0.2, 0.2]}, "bbq"),
            cells_from({"A": [0.3], "B": [0.4], "C": [0.5]}, "xstest"),
        ]
    )
    table = rho_flip_table(cells)
    assert list(zip(table.benchmark, table.model_a, table.model_b)) == [
        ("bbq", "A", "B"),
        ("bbq", "A", "C"),
        ("bbq", "B", "C"),
        ("xstest", "A", "B"),
        ("xstest", "A", "C"),
        ("xstest", "B", "C"),
    ]
    assert table.set_index(["benchmark", "model_a", "model_b"]).loc[("bbq", "A", "B"), "rho_flip"] == 0.5


def test_configs_missing_for_one_model_are_left_out_of_that_pair():
    cells = cells_from({"A": [0.9, 0.1, 0.5], "B": [0.5, 0.5, 0.5]})
    cells = cells[~((cells.model == "B") & (cells.config_id == "c2"))]
    row = rho_flip_table(cells).iloc[0]
    assert (row.n_plus, row.n_minus, row.n_ties, row.n_configs) == (1, 1, 0, 2)


def test_all_six_orderings_of_three_models():
    permutations = [(3, 2, 1), (3, 1, 2), (2, 3, 1), (1, 3, 2), (2, 1, 3), (1, 2, 3)]
    cells = cells_from({m: [p[i] / 10 for p in permutations] for i, m in enumerate("ABC")})
    assert orderings_reached(cells, "bbq") == (6, 6)
    assert orderings_reached(cells_from({"A": [0.3, 0.3], "B": [0.2, 0.3], "C": [0.1, 0.1]}), "bbq") == (1, 6)


def test_strict_ordering_refuses_ties():
    assert strict_ordering(pd.Series({"A": 0.2, "B": 0.9, "C": 0.5})) == ("B", "C", "A")
    assert strict_ordering(pd.Series({"A": 0.5, "B": 0.9, "C": 0.5})) is None


def test_empty_pair_is_nan_not_an_error():
    cells = cells_from({"A": [0.9], "B": [math.nan]})
    assert math.isnan(rho_flip_table(cells).iloc[0].rho_flip)


# --- total-order flip rate (the paper's "flip rate", §4): not rho_flip --------------------------------


def orderings_cells(orderings: list[str], benchmark: str = "bbq") -> pd.DataFrame:
    """One config per ordering string, best first ("ABC": A > B > C; "A=BC": A and B tie above C)."""
    scores: dict[str, list[float]] = {}
    for ordering in orderings:
        rank, ranks = -1, {}
        for i, model in enumerate(ordering):
            if model != "=":
                rank += ordering[i - 1 : i] != "="  # a new rank unless tied to the model before
                ranks[model] = rank
        for model in sorted(ranks):
            scores.setdefault(model, []).append(0.9 - 0.1 * ranks[model])
    return cells_from(scores, benchmark)


def test_flip_rate_known_small_cases():
    # all configs the same ordering: no pair differs -> 0
    row = flip_rate(orderings_cells(["ABC"] * 4)).iloc[0]
    assert (row.n_configs, row.n_strict, row.n_pairs, row.n_mismatched, row.flip_rate) == (4, 4, 6, 0, 0.0)
    # the six orderings once each: all 15 pairs differ -> 1 (rho_flip max is 1/2 here, a different number)
    cells = orderings_cells(["ABC", "ACB", "BAC", "BCA", "CAB", "CBA"])
    row = flip_rate(cells).iloc[0]
    assert (row.n_pairs, row.n_mismatched, row.flip_rate, row.orderings_reached) == (15, 15, 1.0, 6)
    assert orderings_reached(cells, "bbq") == (6, 6)
    assert rho_flip_table(cells).rho_flip.max() == 0.5
    # ABC, ABC, BAC + one config with a tie (A = B): the tie has no strict ordering, left out and counted;
    # pairs of the other three: (1,2) same, (1,3) and (2,3) differ -> 2/3
    row = flip_rate(orderings_cells(["ABC", "ABC", "BAC", "A=BC"])).iloc[0]
    assert (row.n_configs, row.n_tied, row.n_strict, row.n_pairs, row.n_mismatched) == (4, 1, 3, 3, 2)
    assert row.flip_rate == pytest.approx(2 / 3)
    assert row.null_flip_rate == pytest.approx(5 / 6) and row.n_models == 3


def test_flip_rate_float_noise_is_a_tie_and_too_few_configs_is_nan():
    # c0: A = 0.1 + 0.2 ties B = 0.3 (float noise); c1: A > B. One strict config: no pair -> NaN
    row = flip_rate(cells_from({"A": [0.1 + 0.2, 0.9], "B": [0.3, 0.1]})).iloc[0]
    assert (row.n_tied, row.n_strict, row.n_pairs) == (1, 1, 0) and math.isnan(row.flip_rate)
    assert row.null_flip_rate == 0.5  # two models: 1 - 1/2!
    # a config one model lacks is not among the configs compared
    cells = cells_from({"A": [0.9, 0.1, 0.5], "B": [0.1, 0.9, math.nan]})
    row = flip_rate(cells).iloc[0]
    assert (row.n_configs, row.n_pairs, row.flip_rate) == (2, 1, 1.0)
    assert list(flip_rate(cells).columns) == FLIP_RATE_COLUMNS


@pytest.mark.parametrize("n_models, n_configs", [(3, 3), (2, 4)])
def test_flip_rate_null_expectation_is_exact(n_models, n_configs):
    # every assignment of the k! strict orderings to the configs, equally likely (the uniform null):
    # the mean flip rate is 1 - 1/k! exactly (5/6 for three models, 1/2 for two)
    models = "ABC"[:n_models]
    perms = ["".join(p) for p in itertools.permutations(models)]
    cells = pd.concat(
        [
            orderings_cells(list(assignment), f"b{i}")
            for i, assignment in enumerate(itertools.product(perms, repeat=n_configs))
        ],
        ignore_index=True,
    )
    table = flip_rate(cells)
    assert len(table) == len(perms) ** n_configs
    assert (table.n_pairs == n_configs * (n_configs - 1) // 2).all()  # same n_pairs everywhere: mean = ratio
    expected = 1 - Fraction(1, math.factorial(n_models))
    assert Fraction(int(table.n_mismatched.sum()), int(table.n_pairs.sum())) == expected
    assert table.null_flip_rate.iloc[0] == pytest.approx(float(expected))


def test_flip_rate_under_simulated_uniform_orderings_is_near_five_sixths():
    # 300 configs with orderings drawn uniformly from the 6: the rate is a U-statistic with mean 5/6
    # and standard deviation well under 0.01 at this size
    rng = np.random.default_rng(0)
    perms = ["".join(p) for p in itertools.permutations("ABC")]
    row = flip_rate(orderings_cells([perms[i] for i in rng.integers(0, 6, size=300)])).iloc[0]
    assert row.flip_rate == pytest.approx(5 / 6, abs=0.02)


def test_signs_are_the_rho_flip_signs():
    # per config +1 / -1 / 0 with the same tolerance as sign_counts; a missing score has no sign
    a = pd.Series([0.9, 0.1, 0.1 + 0.2, 0.5], index=list("wxyz"))
    b = pd.Series([0.5, 0.5, 0.3, math.nan], index=list("wxyz"))
    assert signs(a, b).fillna(9).tolist() == [1.0, -1.0, 0.0, 9]
    assert sign_counts(a, b) == (1, 1, 1)
