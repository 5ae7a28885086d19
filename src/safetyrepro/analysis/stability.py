"""Item-subsample stability: how far cell scores and model orderings move when the item set is
redrawn (stratified subsamples of the same items, re-scored from the stored per-item results; no
new inference). The paper's check (§5.1, app. X): stratified 80% TruthfulQA subsamples, median and
maximum per-cell range in pp, and whether the orderings change on the conservative-core configs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from safetyrepro.analysis.flips import strict_ordering
from safetyrepro.analysis.frames import stack_named

if TYPE_CHECKING:
    from safetyrepro.analysis.suite import Inputs

CELL_KEYS = ["model", "benchmark", "config_id"]
PER_CELL_COLUMNS = [*CELL_KEYS, "full_score", "min", "max", "range_pp"]
PER_BENCHMARK_COLUMNS = [
    "benchmark",
    "n_subsamples",
    "fraction",
    "median_range_pp",
    "max_range_pp",
    "n_configs",
    "configs_with_order_change",
    "configs_with_reversal",
    "n_core_configs",
    "core_configs_with_order_change",
    "core_configs_with_reversal",
]
COUNT_COLUMNS = [c for c in PER_BENCHMARK_COLUMNS if c.startswith(("n_", "configs_", "core_configs_"))]


def stratum_sizes(strata: pd.Series, fraction: float) -> pd.Series:
    """Items kept per stratum: fraction x size rounded half up, at least 1, at most the size."""
    sizes = strata.value_counts().sort_index()
    kept = np.floor(sizes.to_numpy() * fraction + 0.5).astype(int)
    return pd.Series(np.clip(kept, 1, sizes.to_numpy()), index=sizes.index, name="kept")


def stratified_masks(strata: pd.Series, n_subsamples: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Boolean (n_subsamples x len(strata)) array: row s marks the items of subsample s, drawn
    without replacement within each stratum (the lowest random keys of the stratum are kept)."""
    codes = strata.to_numpy()
    keys = rng.random((n_subsamples, len(codes)))
    masks = np.zeros(keys.shape, dtype=bool)
    for stratum, kept in stratum_sizes(strata, fraction).items():
        columns = np.flatnonzero(codes == stratum)
        ranks = keys[:, columns].argsort(axis=1).argsort(axis=1)
        masks[:, columns] = ranks < kept
    return masks


def _scores_on_masks(frame: pd.DataFrame, masks: np.ndarray, item_ids: pd.Index) -> pd.DataFrame:
    """Cell scores (seed mean of per-seed accuracy) on each subsample: cells x subsamples."""
    per_seed = frame.groupby([*CELL_KEYS, "seed", "item_id"], sort=False)["correct"].mean()
    correct = per_seed.unstack("item_id").reindex(columns=item_ids)
    present = correct.notna().to_numpy(dtype=float)
    hits = correct.fillna(0.0).to_numpy(dtype=float)
    weights = masks.T.astype(float)  # items x subsamples
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = (hits @ weights) / (present @ weights)
    seed_scores = pd.DataFrame(accuracy, index=correct.index)
    return seed_scores.groupby(level=CELL_KEYS, sort=False).mean()


def _order_changes(full: pd.DataFrame, subsampled: pd.DataFrame) -> pd.DataFrame:
    """Per config with >= 2 models scored (index config_id): ``changed`` (the strict ordering differs
    on some subsample) and ``reversed`` (a strict subsample ordering contradicts a strict full one)."""
    full_matrix = full.droplevel("benchmark").unstack("model")
    subsampled = subsampled.droplevel("benchmark")
    rows = {}
    for config_id, row in full_matrix.iterrows():
        row = row.dropna()
        if len(row) < 2:
            continue
        reference = strict_ordering(row)
        sub = subsampled.xs(config_id, level="config_id").loc[row.index]
        orderings = [strict_ordering(sub[column].dropna()) for column in sub.columns]
        rows[config_id] = {
            "changed": any(ordering != reference for ordering in orderings),
            "reversed": reference is not None
            and any(ordering is not None and ordering != reference for ordering in orderings),
        }
    return pd.DataFrame.from_dict(rows, orient="index", columns=["changed", "reversed"], dtype=bool)


def subsample_stability(
    items: pd.DataFrame,
    cells: pd.DataFrame,
    n_subsamples: int = 20,
    fraction: float = 0.8,
    seed: int = 0,
    benchmarks: Sequence[str] = (),
    core: Sequence[str] = (),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Re-score every cell of `cells` (of `benchmarks` only, when given) on `n_subsamples` stratified
    item subsamples per benchmark.

    The same subsamples (a fresh numpy Generator(seed) per benchmark, so a benchmark's draws do
    not depend on which other benchmarks are present) serve every model and config. full_score
    is re-scored from `items` on all items, the same way. Returns (per_cell, per_benchmark):
    range_pp = (max - min) x 100 over subsamples; configs_with_order_change counts configs whose
    strict model ordering (ties count as no strict ordering) on some subsample differs from the
    full-data one; configs_with_reversal only those where both are strict and disagree. The
    core_* columns count the same over the configs in `core` (e.g. the conservative core;
    n_core_configs of them compared). range_pp is a max - min over the draws, so it grows with
    n_subsamples: compare ranges only at the same count and fraction.
    """
    wanted = cells[CELL_KEYS].drop_duplicates()
    if len(benchmarks):
        wanted = wanted[wanted["benchmark"].isin(list(benchmarks))]
    items = items[[*CELL_KEYS, "seed", "item_id", "stratum", "correct"]].merge(wanted, on=CELL_KEYS)
    cell_frames, benchmark_rows = [], []
    for benchmark in dict.fromkeys(items["benchmark"]):
        frame = items[items["benchmark"] == benchmark]
        strata = frame.drop_duplicates("item_id").set_index("item_id")["stratum"].astype(str).sort_index()
        masks = stratified_masks(strata, n_subsamples, fraction, np.random.default_rng(seed))
        full = _scores_on_masks(frame, np.ones((1, len(strata)), dtype=bool), strata.index)[0]
        subsampled = _scores_on_masks(frame, masks, strata.index)
        low, high = subsampled.min(axis=1), subsampled.max(axis=1)
        per_cell = pd.DataFrame(
            {"full_score": full, "min": low, "max": high, "range_pp": (high - low) * 100}
        ).reset_index()
        cell_frames.append(per_cell)
        changes = _order_changes(full, subsampled)
        in_core = changes[changes.index.isin(list(core))]
        benchmark_rows.append(
            {
                "benchmark": benchmark,
                "n_subsamples": n_subsamples,
                "fraction": fraction,
                "median_range_pp": float(per_cell["range_pp"].median()),
                "max_range_pp": float(per_cell["range_pp"].max()),
                "n_configs": len(changes),
                "configs_with_order_change": int(changes["changed"].sum()),
                "configs_with_reversal": int(changes["reversed"].sum()),
                "n_core_configs": len(in_core),
                "core_configs_with_order_change": int(in_core["changed"].sum()),
                "core_configs_with_reversal": int(in_core["reversed"].sum()),
            }
        )
    per_cell = (
        pd.concat(cell_frames, ignore_index=True)[PER_CELL_COLUMNS]
        if cell_frames
        else pd.DataFrame(columns=PER_CELL_COLUMNS)
    )
    return per_cell, pd.DataFrame(benchmark_rows, columns=PER_BENCHMARK_COLUMNS)


def subsample_table(inputs: Inputs) -> pd.DataFrame:
    """The suite's entry: the per-benchmark and per-cell tables with the run's options (benchmarks
    from analysis.subsample.benchmarks, core configs from analysis.conservative_core), stacked."""
    analysis = inputs.settings.analysis
    options = analysis.subsample
    per_cell, per_benchmark = subsample_stability(
        inputs.items,
        inputs.cells,
        n_subsamples=options.count,
        fraction=options.fraction,
        seed=options.seed,
        benchmarks=options.benchmarks,
        core=analysis.conservative_core,
    )
    stacked = stack_named({"per_benchmark": per_benchmark, "per_cell": per_cell}, "table")
    return stacked.astype({column: "Int64" for column in COUNT_COLUMNS if column in stacked.columns})
