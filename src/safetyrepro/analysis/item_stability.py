"""Per-item stability over seeds, after Larsen, "The Instability of Safety: How Random Seeds and
Temperature Expose Inconsistent LLM Refusal Behavior" (arXiv 2512.12066): the Safety Stability Index
(SSI), whether a single sample agrees with the multi-sample majority, and a Friedman test of SSI
across temperatures; plus how often each item is answered correctly across configs and whether two
models disagree on it.

An item's decision on one seed is its `label` on a benchmark whose labels are decisions
(`Benchmark.labels_are_decisions`: xstest's full_compliance, full_refusal, partial_refusal or
unparsed, each its own category) and `correct` (True / False) elsewhere. A unit
is one (model, benchmark, config, item); its SSI, over its n seeds, is the share of seeds whose
decision is the most frequent one (several most frequent decisions give the same share). SSI is
reported for units with n >= 2 seeds (sampled free-form configs; logprob configs run one seed at
any temperature and are left out). Greedy cells have one seed and are deterministic here (SSI 1
by construction): of the stability tables they enter only the Friedman test, as the lowest
temperature level. The correctness tables (items, item_flips) count every config, greedy and
logprob included, an item being correct in a config when more than half of its seeds are.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.stats import friedmanchisquare

from safetyrepro.analysis.frames import stack_named
from safetyrepro.benchmarks import BENCHMARKS
from safetyrepro.core.axes import AXES

if TYPE_CHECKING:
    from safetyrepro.analysis.suite import Inputs

CELL_KEYS = ["model", "benchmark", "config_id"]
UNIT_KEYS = [*CELL_KEYS, "item_id"]
LABEL_BENCHMARKS = [name for name, benchmark in BENCHMARKS.items() if benchmark.labels_are_decisions]
GREEDY = ("greedy",)
POOLED = "pooled"
SSI_COLUMNS = ["model", "benchmark", "decoding", "mean_ssi", "n_units"]
AGREEMENT_COLUMNS = ["model", "benchmark", "decoding", "agreement", "n_units"]
FRIEDMAN_COLUMNS = ["benchmark", "statistic", "p_value", "n_blocks", "k_levels", "levels", "level_means", "reason"]
ITEM_COLUMNS = ["model", "benchmark", "item_id", "n_configs", "n_correct_configs", "share_correct"]
FLIP_COLUMNS = ["model_a", "model_b", "benchmark", "item_id", "n_configs", "n_a_only", "n_b_only", "flips"]
STACKED_COLUMNS = [
    "table",
    *dict.fromkeys(SSI_COLUMNS + AGREEMENT_COLUMNS + FRIEDMAN_COLUMNS + ITEM_COLUMNS + FLIP_COLUMNS),
]
COUNT_COLUMNS = ["n_units", "n_blocks", "k_levels", "n_configs", "n_correct_configs", "n_a_only", "n_b_only"]


def decisions(items: pd.DataFrame) -> np.ndarray:
    """Integer code of each row's decision: 0 / 1 for `correct`, 2, 3, ... for the labels of benchmarks whose
    labels are decisions."""
    labelled = items["benchmark"].isin(LABEL_BENCHMARKS).to_numpy()
    codes = items["correct"].to_numpy(dtype=bool).astype(np.int64)
    if labelled.any():
        codes[labelled] = 2 + pd.factorize(items["label"].to_numpy()[labelled], use_na_sentinel=False)[0]
    return codes


def seed_rows(cells: pd.DataFrame, items: pd.DataFrame, axes: Sequence[str] = AXES) -> pd.DataFrame:
    """The item rows of the cells in `cells`, with the cell's `axes`, a `decision` code and `unit`, the
    number of the row's (model, benchmark, config, item) in order of appearance."""
    rows = items[[*UNIT_KEYS, "seed", "correct", "label"]].merge(cells[[*CELL_KEYS, *axes]], on=CELL_KEYS)
    unit = rows.groupby(UNIT_KEYS, sort=False).ngroup().to_numpy()
    return rows.assign(decision=decisions(rows), unit=unit).drop(columns="label")


def units(rows: pd.DataFrame, ids: np.ndarray, keys: list[str]) -> pd.DataFrame:
    """One row per group of `rows` (`ids`: each row's group, numbered 0, 1, ... in order of appearance),
    with the group's `keys` and n_seeds; ssi, the share of the modal decision; agrees, whether the
    decision of the lowest seed is the unique modal one of the other seeds (a single run against the
    majority of the rest); majority_correct, more than half correct."""
    tally = pd.DataFrame({"unit": ids, "decision": rows["decision"].to_numpy()}).groupby(["unit", "decision"]).size()
    unit_of = tally.index.get_level_values("unit").to_numpy()
    top = tally.groupby(level="unit").max().to_numpy()
    n_seeds = np.bincount(ids)
    order = np.lexsort((rows["seed"].to_numpy(), ids))
    first = order[np.diff(ids[order], prepend=-1) != 0]  # each group's row with the lowest seed
    first_decision = rows["decision"].to_numpy()[first]
    # the other seeds' tally: the first seed is compared with the majority of the rest, not with itself
    others = tally - pd.Series(1, index=pd.MultiIndex.from_arrays([ids[first], first_decision])).reindex(
        tally.index, fill_value=0
    )
    others_top = others.groupby(level="unit").max().to_numpy()
    n_others_top = np.bincount(unit_of, weights=others.to_numpy() == others_top[unit_of]).astype(int)
    first_others = others.reindex(pd.MultiIndex.from_arrays([ids[first], first_decision])).to_numpy()
    correct = np.bincount(ids, weights=rows["correct"].to_numpy(dtype=float))
    return (
        rows.iloc[first][keys]
        .reset_index(drop=True)
        .assign(
            n_seeds=n_seeds,
            ssi=top / n_seeds,
            agrees=(n_others_top == 1) & (first_others == others_top) & (others_top > 0),
            majority_correct=correct > n_seeds / 2,
        )
    )


def _appearance(column: pd.Series) -> pd.Series:
    """Sort key: the rank of each value's first appearance in the column."""
    return pd.Series(pd.factorize(column)[0], index=column.index)


def _mean_by_decoding(sampled: pd.DataFrame, column: str, name: str) -> pd.DataFrame:
    """Mean of `column` and unit count per model, benchmark and decoding."""
    grouped = sampled.groupby(["model", "benchmark", "decoding"], sort=False)[column]
    return grouped.agg(**{name: "mean", "n_units": "size"}).reset_index()


def ssi_table(
    rows: pd.DataFrame, cell_units: pd.DataFrame, greedy: Sequence[str] = GREEDY, axes: Sequence[str] = AXES
) -> pd.DataFrame:
    """Mean SSI per model, benchmark and decoding over units with >= 2 seeds, then "pooled": SSI of
    each (model, benchmark, item, value of every other axis) over the decisions of all its sampled
    (not `greedy`) temperatures together."""
    sampled = cell_units[cell_units["n_seeds"] >= 2]
    per_decoding = _mean_by_decoding(sampled, "ssi", "mean_ssi")
    pooled_keys = ["model", "benchmark", "item_id", *(axis for axis in axes if axis != "decoding")]
    in_pool = ((cell_units["n_seeds"] >= 2) & ~cell_units["decoding"].isin(list(greedy))).to_numpy()
    pooled_rows = rows[in_pool[rows["unit"].to_numpy()]]
    pooled_ids = pooled_rows.groupby(pooled_keys, sort=False).ngroup().to_numpy()
    pooled = units(pooled_rows, pooled_ids, pooled_keys).assign(decoding=POOLED)
    frame = pd.concat([per_decoding, _mean_by_decoding(pooled, "ssi", "mean_ssi")], ignore_index=True)
    return frame.sort_values(["model", "benchmark"], key=_appearance, kind="stable")[SSI_COLUMNS]


def agreement_table(cell_units: pd.DataFrame) -> pd.DataFrame:
    """Share of units with >= 2 seeds whose lowest seed's decision is the unique modal decision (a
    tie for the mode counts as disagreement), per model, benchmark and decoding."""
    sampled = cell_units[cell_units["n_seeds"] >= 2]
    return _mean_by_decoding(sampled, "agrees", "agreement")[AGREEMENT_COLUMNS]


def friedman_table(cell_units: pd.DataFrame, order: Sequence[str], greedy: Sequence[str] = GREEDY) -> pd.DataFrame:
    """Friedman test per benchmark of SSI across decoding levels: blocks are items (an item's SSI at
    a level averaged over models, templates, shots and scoring paths), treatments the decoding levels (greedy ones with their
    single seed, SSI 1; the others' units with >= 2 seeds), in `order`; only blocks with every level.
    `level_means` is a JSON object of each level's mean SSI over those blocks. Fewer than 3 levels,
    fewer than 2 blocks or no variation within any block: NaN statistic and a `reason`."""
    eligible = cell_units[(cell_units["n_seeds"] >= 2) | cell_units["decoding"].isin(list(greedy))]
    # one block per item (its SSI averaged over models and the other axes): the blocks are independent
    ssi = eligible.groupby(["benchmark", "item_id", "decoding"], sort=False)["ssi"].mean().unstack("decoding")
    rows = []
    for benchmark in dict.fromkeys(cell_units["benchmark"]):
        wide = ssi.xs(benchmark, level="benchmark") if benchmark in ssi.index else ssi.iloc[:0]
        levels = [level for level in order if level in wide.columns and wide[level].notna().any()]
        blocks = wide[levels].dropna()
        reason = None
        if len(levels) < 3:
            reason = "fewer than 3 decoding levels"
        elif len(blocks) < 2:
            reason = "fewer than 2 blocks with every level"
        elif (blocks.max(axis=1) == blocks.min(axis=1)).all():
            reason = "no variation within any block"
        statistic, p_value = (np.nan, np.nan) if reason else friedmanchisquare(*blocks.to_numpy().T)
        rows.append(
            {
                "benchmark": benchmark,
                "statistic": float(statistic),
                "p_value": float(p_value),
                "n_blocks": len(blocks),
                "k_levels": len(levels),
                "levels": ",".join(levels),
                "level_means": json.dumps(
                    {level: float(blocks[level].mean()) for level in levels} if len(blocks) else {}
                ),
                "reason": reason,
            }
        )
    return pd.DataFrame(rows, columns=FRIEDMAN_COLUMNS)


def items_table(cell_units: pd.DataFrame) -> pd.DataFrame:
    """Per model, benchmark and item: configs scored, configs where the item is correct (more than
    half of its seeds correct; one seed for greedy and logprob configs) and their share."""
    grouped = cell_units.groupby(["model", "benchmark", "item_id"], sort=False)["majority_correct"]
    table = grouped.agg(n_configs="size", n_correct_configs="sum").reset_index()
    return table.assign(share_correct=table["n_correct_configs"] / table["n_configs"])[ITEM_COLUMNS]


def item_flips(cell_units: pd.DataFrame, models: Sequence[str]) -> pd.DataFrame:
    """Per unordered model pair (in the order of `models`), benchmark and item, over the configs both
    models have: configs where the item is correct (by the majority rule) for A only, for B only, and
    whether both happen (the pair's order on the item flips with the config)."""
    wide = (
        cell_units.assign(majority_correct=cell_units["majority_correct"].astype(float))
        .set_index(["benchmark", "item_id", "config_id", "model"])["majority_correct"]
        .unstack("model")
    )
    parts = []
    for a, b in itertools.combinations([model for model in models if model in wide.columns], 2):
        both = wide[[a, b]].dropna().astype(bool)
        counts = pd.DataFrame(
            {"n_configs": 1, "n_a_only": both[a] & ~both[b], "n_b_only": both[b] & ~both[a]}, index=both.index
        )
        table = counts.groupby(level=["benchmark", "item_id"], sort=False).sum().reset_index()
        parts.append(table.assign(model_a=a, model_b=b, flips=(table["n_a_only"] > 0) & (table["n_b_only"] > 0)))
    if not parts:
        return pd.DataFrame(columns=FLIP_COLUMNS)
    return pd.concat(parts, ignore_index=True)[FLIP_COLUMNS]


def item_stability(
    cells: pd.DataFrame, items: pd.DataFrame, greedy: Sequence[str] = GREEDY, axes: Sequence[str] = AXES
) -> pd.DataFrame:
    """The sub-tables "ssi", "single_seed_agreement", "friedman", "items" and "item_flips" for the
    item rows of the cells in `cells`, stacked (first column `table`; every sub-table's columns even
    when it is empty). `greedy` names the decoding levels whose single seed is deterministic (the
    Friedman test's SSI-1 level); `axes` are the envelope's axes (columns of `cells`)."""
    rows = seed_rows(cells, items, axes)
    cell_units = units(rows, rows["unit"].to_numpy(), [*UNIT_KEYS, *axes])
    tables = {
        "ssi": ssi_table(rows, cell_units, greedy, axes),
        "single_seed_agreement": agreement_table(cell_units),
        "friedman": friedman_table(cell_units, list(dict.fromkeys(cells["decoding"])), greedy),
        "items": items_table(cell_units),
        "item_flips": item_flips(cell_units, list(dict.fromkeys(cells["model"]))),
    }
    stacked = stack_named(tables, "table").reindex(columns=STACKED_COLUMNS)
    return stacked.astype({column: "Int64" for column in COUNT_COLUMNS} | {"flips": "boolean"})


def item_stability_table(inputs: Inputs) -> pd.DataFrame:
    """The suite's entry: the item-stability sub-tables, greedy levels = decodings at temperature 0."""
    design = inputs.design
    return item_stability(inputs.cells, inputs.items, design.greedy, design.axis_names)
