"""rho_flip and orderings on hand-built cell tables whose answers are worked out by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from safetyrepro.analysis.flips import orderings_reached, rho_flip_table, sign_counts, strict_ordering


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
