"""Multi-prompt summaries (MaxP, AvgP, CPS, worst, spread) on tiny cells tables worked out by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from safetyrepro.analysis.multi_prompt import MULTI_PROMPT_COLUMNS, multi_prompt


def cells(scores):
    """A cells table from {(model, benchmark): {config_id: score}}."""
    return pd.DataFrame(
        [
            {"model": model, "benchmark": benchmark, "config_id": config_id, "score": score}
            for (model, benchmark), by_config in scores.items()
            for config_id, score in by_config.items()
        ]
    )


def test_hand_computed_summary():
    table = multi_prompt(cells({("A", "bbq"): {"c1": 0.9, "c2": 0.5, "c3": 0.7}}))
    assert list(table.columns) == MULTI_PROMPT_COLUMNS
    row = table.iloc[0]
    # MaxP .9, AvgP .7, saturation 1 - .2 = .8, CPS .8 x .9 = .72, worst .5, spread .4
    assert (row["model"], row["benchmark"], row["n_configs"]) == ("A", "bbq", 3)
    assert row["max_p"] == pytest.approx(0.9) and row["avg_p"] == pytest.approx(0.7)
    assert row["saturation"] == pytest.approx(0.8) and row["cps"] == pytest.approx(0.72)
    assert row["worst"] == pytest.approx(0.5) and row["spread"] == pytest.approx(0.4)
    assert (row["best_config"], row["worst_config"]) == ("c1", "c2")


def test_flat_model_keeps_its_score():
    row = multi_prompt(cells({("A", "bbq"): {"c1": 0.6, "c2": 0.6}})).iloc[0]
    assert row["cps"] == pytest.approx(0.6) and row["spread"] == 0 and row["saturation"] == pytest.approx(1)


def test_ties_go_to_the_first_config_in_config_order():
    # config order is that of first appearance in the table (c1, c2, c3); B lists c3 before c1
    table = cells({("A", "bbq"): {"c1": 0.5, "c2": 0.5, "c3": 0.5}, ("B", "bbq"): {"c3": 0.8, "c2": 0.2, "c1": 0.8}})
    table = multi_prompt(table).set_index("model")
    assert (table.loc["A", "best_config"], table.loc["A", "worst_config"]) == ("c1", "c1")
    assert (table.loc["B", "best_config"], table.loc["B", "worst_config"]) == ("c1", "c2")


def test_model_missing_a_config():
    scores = {
        ("A", "bbq"): {"c1": 0.4, "c2": 0.8},
        ("B", "bbq"): {"c1": 0.6},  # no c2 (and a NaN score counts as missing)
        ("A", "xstest"): {"c1": 0.3, "c2": float("nan"), "c3": 0.5},
    }
    table = multi_prompt(cells(scores))
    assert list(zip(table["model"], table["benchmark"])) == [("A", "bbq"), ("B", "bbq"), ("A", "xstest")]
    b = table.iloc[1]
    assert b["n_configs"] == 1 and b["max_p"] == b["avg_p"] == b["cps"] == pytest.approx(0.6)
    assert b["spread"] == 0 and b["best_config"] == b["worst_config"] == "c1"
    x = table.iloc[2]
    # MaxP .5, AvgP .4, CPS (1 - .1) x .5 = .45
    assert x["n_configs"] == 2 and x["cps"] == pytest.approx(0.45) and x["worst_config"] == "c1"


def test_empty_cells():
    table = multi_prompt(cells({}).reindex(columns=["model", "benchmark", "config_id", "score"]))
    assert table.empty and list(table.columns) == MULTI_PROMPT_COLUMNS
