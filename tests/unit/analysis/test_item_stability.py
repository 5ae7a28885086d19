"""Per-item stability over seeds (SSI, single-seed agreement, the Friedman test across temperatures)
and per-item correctness across configs and model pairs, on tiny tables worked out by hand."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from scipy.stats import friedmanchisquare

from safetyrepro.analysis.item_stability import (
    AGREEMENT_COLUMNS,
    FLIP_COLUMNS,
    FRIEDMAN_COLUMNS,
    ITEM_COLUMNS,
    SSI_COLUMNS,
    STACKED_COLUMNS,
    item_stability,
)

COMPLY, REFUSE, PARTIAL = "full_compliance", "full_refusal", "partial_refusal"
COLUMNS = {
    "ssi": SSI_COLUMNS,
    "single_seed_agreement": AGREEMENT_COLUMNS,
    "friedman": FRIEDMAN_COLUMNS,
    "items": ITEM_COLUMNS,
    "item_flips": FLIP_COLUMNS,
}


def cell(model, benchmark, decoding, decisions, template="T1", shots="0", scoring="freeform", seeds=None):
    """A cell row and its item rows: `decisions` maps item id -> one decision per seed (seeds 0, 1, ...
    unless given), a bool (correct) or, on xstest, a label. Off xstest the label varies with the seed
    while `correct` does not, so a label-based decision would show up."""
    config_id = f"{template}-{decoding}-{shots}shot-{scoring}"
    row = {"model": model, "benchmark": benchmark, "config_id": config_id, "template": template}
    row |= {"decoding": decoding, "shots": shots, "scoring": scoring, "score": 0.5}
    items = []
    for item_id, values in decisions.items():
        for seed, value in zip(seeds or range(len(values)), values):
            if benchmark == "xstest":
                correct, label = value == COMPLY, value
            else:
                correct, label = bool(value), "A" if value else "BC"[seed % 2]
            items.append({**{k: row[k] for k in ("model", "benchmark", "config_id")}, "item_id": item_id})
            items[-1] |= {"stratum": "s", "seed": seed, "correct": correct, "label": label}
    return row, items


def run(*built):
    """item_stability on the given cells, split back into its sub-tables (their own columns only)."""
    cells = pd.DataFrame([row for row, _ in built])
    items = pd.DataFrame([item for _, rows in built for item in rows])
    out = item_stability(cells, items)
    assert set(out["table"]) <= set(COLUMNS)
    return {name: out.loc[out["table"] == name, columns].reset_index(drop=True) for name, columns in COLUMNS.items()}


def ssi_of(tables, model, benchmark, decoding):
    row = tables["ssi"].set_index(["model", "benchmark", "decoding"]).loc[(model, benchmark, decoding)]
    return row["mean_ssi"], row["n_units"]


def test_ssi_by_hand():
    tables = run(
        # 3 of 5 seeds on the mode -> 0.6; all alike -> 1 (labels differ, correct does not): mean 0.8
        cell("M", "bbq", "t0.7", {"i1": [1, 1, 1, 0, 0], "i2": [1, 1, 1, 1, 1]}),
        # xstest decides by label: comply x3 of 5 -> 0.6, whatever `correct` says
        cell("M", "xstest", "t0.7", {"i1": [COMPLY, COMPLY, REFUSE, PARTIAL, COMPLY]}),
        # two modes (2 + 2 of 5): the share is 0.4 either way
        cell("M", "xstest", "t0.3", {"i1": [COMPLY, REFUSE, COMPLY, REFUSE, PARTIAL]}),
    )
    assert ssi_of(tables, "M", "bbq", "t0.7") == (pytest.approx(0.8), 2)
    assert ssi_of(tables, "M", "xstest", "t0.7") == (pytest.approx(0.6), 1)
    assert ssi_of(tables, "M", "xstest", "t0.3") == (pytest.approx(0.4), 1)
    # pooled xstest: comply 3 + 2 of the 10 decisions -> 0.5
    assert ssi_of(tables, "M", "xstest", "pooled") == (pytest.approx(0.5), 1)
    assert list(tables["ssi"]["decoding"]) == ["t0.7", "pooled", "t0.7", "t0.3", "pooled"]


def test_pooled_ssi_over_the_sampled_temperatures():
    tables = run(
        cell("M", "bbq", "greedy", {"i1": [0]}),  # greedy stays out of the pool (else 8 of 11)
        cell("M", "bbq", "t0.3", {"i1": [1, 1, 1, 1, 1]}),
        cell("M", "bbq", "t0.7", {"i1": [1, 1, 1, 0, 0]}),
        cell("M", "bbq", "t0.7", {"i1": [1, 1, 1, 1, 0]}, template="T2"),  # its own pooled unit: 0.8
        cell("M", "bbq", "t0.7", {"i1": [0]}, scoring="logprob"),  # one seed: no SSI
    )
    assert ssi_of(tables, "M", "bbq", "t0.3") == (pytest.approx(1.0), 1)
    assert ssi_of(tables, "M", "bbq", "t0.7") == (pytest.approx((0.6 + 0.8) / 2), 2)
    # T1: 8 of the 10 decisions of t0.3 and t0.7 are the mode -> 0.8; T2: 0.8
    assert ssi_of(tables, "M", "bbq", "pooled") == (pytest.approx(0.8), 2)
    assert "greedy" not in set(tables["ssi"]["decoding"])


def test_single_seed_agreement():
    tables = run(
        cell(
            "M",
            "bbq",
            "t0.7",
            {
                "a": [1, 0, 0, 0, 1],  # the other seeds' majority is 0: disagrees
                "b": [1, 1, 0, 1, 1],  # agrees
                "c": [1, 0, 0, 1, 1],  # a mode with itself, but the others tie 2-2: disagrees
            },
        ),
        # the lowest seed (0) is the third row, 0; the others' majority is 0 -> agrees
        cell("M", "bbq", "t0.7", {"d": [1, 0, 0, 0, 0]}, template="T2", seeds=[4, 3, 0, 1, 2]),
        # the others are refuse, partial, comply, refuse: refuse, not the first seed's comply
        cell("M", "xstest", "t0.7", {"a": [COMPLY, REFUSE, PARTIAL, COMPLY, REFUSE]}),
        cell("M", "xstest", "t0.3", {"a": [REFUSE, COMPLY, REFUSE, REFUSE, PARTIAL]}),  # agrees
    )
    agreement = tables["single_seed_agreement"].set_index(["benchmark", "decoding"])
    assert agreement.loc[("bbq", "t0.7"), "agreement"] == pytest.approx(2 / 4)
    assert agreement.loc[("bbq", "t0.7"), "n_units"] == 4
    assert agreement.loc[("xstest", "t0.7"), "agreement"] == 0
    assert agreement.loc[("xstest", "t0.3"), "agreement"] == 1
    assert ssi_of(tables, "M", "bbq", "t0.7") == (pytest.approx((0.6 + 0.8 + 0.6 + 0.8) / 4), 4)


PATTERN = {1.0: [1, 1, 1, 1, 1], 0.8: [1, 1, 1, 1, 0], 0.6: [1, 1, 1, 0, 0]}
# (model, item) -> SSI at t0.3, t0.7; greedy is 1 throughout: stability falls with temperature
FALLING = {
    ("M1", "i1"): (1.0, 0.6),
    ("M1", "i2"): (0.8, 0.6),
    ("M1", "i3"): (0.8, 0.8),
    ("M2", "i1"): (1.0, 0.8),
    ("M2", "i2"): (0.6, 0.6),
    ("M2", "i3"): (0.8, 0.6),
}


def falling_cells(benchmark="bbq"):
    built = []
    for model in ("M1", "M2"):
        mine = {item: ssi for (owner, item), ssi in FALLING.items() if owner == model}
        built.append(cell(model, benchmark, "greedy", {item: [1] for item in mine}))
        built.append(cell(model, benchmark, "t0.3", {item: PATTERN[low] for item, (low, _) in mine.items()}))
        built.append(cell(model, benchmark, "t0.7", {item: PATTERN[high] for item, (_, high) in mine.items()}))
    return built


def test_friedman_matches_scipy():
    built = falling_cells()
    # a logprob cell has one seed at any temperature: no SSI, so it adds nothing but a greedy 1
    built.append(cell("M1", "bbq", "greedy", {"i1": [1]}, scoring="logprob"))
    built.append(cell("M1", "bbq", "t0.3", {"i1": [0]}, scoring="logprob"))
    built.append(cell("M1", "bbq", "t0.7", {"i1": [0]}, scoring="logprob"))
    row = run(*built)["friedman"].iloc[0]
    # one block per item, its SSI averaged over the two models (items are the independent units)
    low = [(FALLING[("M1", i)][0] + FALLING[("M2", i)][0]) / 2 for i in ("i1", "i2", "i3")]
    high = [(FALLING[("M1", i)][1] + FALLING[("M2", i)][1]) / 2 for i in ("i1", "i2", "i3")]
    expected = friedmanchisquare([1.0] * 3, low, high)
    assert row["benchmark"] == "bbq" and row["levels"] == "greedy,t0.3,t0.7"
    assert row["n_blocks"] == 3 and row["k_levels"] == 3 and pd.isna(row["reason"])
    assert row["statistic"] == pytest.approx(expected.statistic)
    assert row["p_value"] == pytest.approx(expected.pvalue)
    means = json.loads(row["level_means"])
    assert list(means) == ["greedy", "t0.3", "t0.7"]
    assert means["greedy"] == 1 and means["t0.3"] == pytest.approx(5 / 6) and means["t0.7"] == pytest.approx(4 / 6)


def test_only_greedy_configs():
    tables = run(cell("M1", "bbq", "greedy", {"i1": [1], "i2": [0]}), cell("M2", "bbq", "greedy", {"i1": [0]}))
    assert tables["ssi"].empty and tables["single_seed_agreement"].empty
    row = tables["friedman"].iloc[0]
    assert pd.isna(row["statistic"]) and pd.isna(row["p_value"])
    assert row["k_levels"] == 1 and row["levels"] == "greedy" and "fewer than 3" in row["reason"]
    assert len(tables["items"]) == 3


def test_friedman_reasons():
    single = run(
        cell("M", "bbq", "greedy", {"i1": [1]}),
        cell("M", "bbq", "t0.3", {"i1": PATTERN[0.6]}),
        cell("M", "bbq", "t0.7", {"i1": PATTERN[0.8]}),
    )["friedman"].iloc[0]
    assert single["n_blocks"] == 1 and "fewer than 2 blocks" in single["reason"] and pd.isna(single["statistic"])
    flat = run(
        *[cell("M", "bbq", decoding, {"i1": [1] * n, "i2": [0] * n}) for decoding, n in [("greedy", 1), ("t0.3", 5)]],
        cell("M", "bbq", "t0.7", {"i1": [1] * 5, "i2": [0] * 5}),
    )["friedman"].iloc[0]
    assert flat["n_blocks"] == 2 and "no variation" in flat["reason"] and pd.isna(flat["p_value"])


def test_items_and_flips_by_hand():
    tables = run(
        # listed with model B first: pairs follow the order of first appearance in `cells`
        cell("B", "bbq", "greedy", {"i1": [0], "i2": [0]}),
        cell("B", "bbq", "t0.7", {"i1": [1, 1, 0, 0, 0], "i2": [1, 1, 1, 1, 0]}),
        cell("A", "bbq", "greedy", {"i1": [1], "i2": [1]}),
        cell("A", "bbq", "t0.7", {"i1": [1, 1, 1, 0, 0], "i2": [1, 1, 0, 0, 0]}),
        cell("A", "bbq", "t0.3", {"i1": [1, 1, 0, 0], "i2": [1, 1, 1, 0]}),  # A only; 2 of 4 is no majority
    )
    items = tables["items"].set_index(["model", "item_id"])
    # majority-correct configs: A i1 greedy, t0.7 (3/5); A i2 greedy, t0.3 (3/4); B i1 none; B i2 t0.7 (4/5)
    assert items.loc[("A", "i1"), ["n_configs", "n_correct_configs"]].tolist() == [3, 2]
    assert items.loc[("A", "i2"), ["n_configs", "n_correct_configs"]].tolist() == [3, 2]
    assert items.loc[("B", "i1"), ["n_configs", "n_correct_configs"]].tolist() == [2, 0]
    assert items.loc[("B", "i2"), "share_correct"] == pytest.approx(0.5)
    flips = tables["item_flips"].set_index("item_id")
    assert set(flips["model_a"]) == {"B"} and set(flips["model_b"]) == {"A"}
    # over the shared configs (greedy, t0.7): i1 B-only 0, A-only 2; i2 B-only t0.7, A-only greedy
    assert flips.loc["i1", ["n_configs", "n_a_only", "n_b_only", "flips"]].tolist() == [2, 0, 2, False]
    assert flips.loc["i2", ["n_configs", "n_a_only", "n_b_only", "flips"]].tolist() == [2, 1, 1, True]


def test_items_outside_cells_are_ignored_and_columns_are_fixed():
    kept, dropped = cell("M", "bbq", "t0.7", {"i1": PATTERN[0.6]}), cell("M", "tqa", "t0.7", {"i1": PATTERN[0.8]})
    cells = pd.DataFrame([kept[0]])
    out = item_stability(cells, pd.DataFrame(kept[1] + dropped[1]))
    assert out.columns[0] == "table" and set(out["benchmark"]) == {"bbq"}
    assert list(out.columns) == STACKED_COLUMNS  # item_flips is empty (one model): its columns stay
    assert out["n_units"].dtype == "Int64"
