"""Drawing a benchmark's item subsets: its data loaded once a process while its folder stays as it is, each item
id once, and the evaluated items and the few-shot pool drawn stratified by its `strata`."""

from __future__ import annotations

import contextlib
import functools
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from safetyrepro.core.errors import DataError


def folder_state(benchmark: Any, data_dir: Path) -> tuple:  # a Benchmark (base.py, which imports this module)
    """Each file under the benchmark's data folder, linked folders followed (once each), with its device,
    inode, size, and modification and change times: a file changed, replaced, added or removed gives
    another state."""
    found, seen = [], set()
    for root, folders, files in os.walk(Path(data_dir) / benchmark.folder, followlinks=True):
        with contextlib.suppress(OSError):
            status = os.stat(root)
            if (status.st_dev, status.st_ino) in seen:  # a link back to a folder walked already
                folders.clear()
                continue
            seen.add((status.st_dev, status.st_ino))
        for name in files:
            path = os.path.join(root, name)
            with contextlib.suppress(OSError):  # gone meanwhile: load names it
                status = os.stat(path)
                found.append(
                    (path, status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)
                )
    return tuple(sorted(found))


class Identity:
    """A benchmark as a cache key, by identity: a plugin's class may compare by value without a hash."""

    __slots__ = ("benchmark",)

    def __init__(self, benchmark: Any):  # a Benchmark
        self.benchmark = benchmark

    def __hash__(self) -> int:
        return id(self.benchmark)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and other.benchmark is self.benchmark


@functools.lru_cache(maxsize=32)
def drawn(
    key: Identity, data_dir: Path, n_items: int, pool_size: int, seed: int, where: str, state: tuple
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A benchmark's evaluated items and few-shot pool as drawn from its data folder in `state`: once a
    process (a Snakemake start checks every item set as it loads the workflow, and again, for the
    free-form prompts, before the first job). The frames are read, never changed."""
    benchmark = key.benchmark
    frame = loaded(key, data_dir, state)
    for column in benchmark.strata:
        if column not in frame.columns or frame[column].isna().any():
            raise DataError(
                f"{data_dir / benchmark.folder}: {benchmark.name}'s items need a value in column {column!r}, "
                "one of its strata (what the item subset is stratified by)"
            )
    rng = np.random.default_rng([seed, *benchmark.name.encode()])
    return draw_subset(frame, benchmark.strata, n_items, pool_size, rng, where)


@functools.lru_cache(maxsize=8)
def loaded(key: Identity, data_dir: Path, state: tuple) -> pd.DataFrame:
    """A benchmark's data as `load` reads it from its data folder in `state`, each item id once: read once a
    process. The frame is read, never changed."""
    benchmark = key.benchmark
    frame = benchmark.load(data_dir)
    duplicated = frame["item_id"][frame["item_id"].duplicated()]
    if len(duplicated):
        raise DataError(
            f"{data_dir / benchmark.folder}: item id {duplicated.iloc[0]!r} appears more than once "
            "(a duplicated row or a copied file)"
        )
    return frame


def stratum_name(values: Sequence) -> str:
    """An item's stratum: its `strata` values joined by "/" ("safe/homonyms")."""
    return "/".join(map(str, values))


def draw_subset(
    frame: pd.DataFrame, strata: Sequence[str], n_items: int, pool_size: int, rng: np.random.Generator, where: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stratified subset of `n_items` plus a disjoint few-shot pool of `pool_size` drawn the same way from
    the rest, each row given its `stratum` (its `strata` values joined by "/").

    Each stratum gives `stratum_counts` items, drawn at random by `rng` (which also breaks ties).
    """
    if n_items + pool_size > len(frame):
        raise DataError(
            f"{where}: {n_items} items + {pool_size} few-shot pool requested, "
            f"but the benchmark has only {len(frame)} items"
        )
    keys = pd.MultiIndex.from_frame(frame[list(strata)])
    found = keys.unique()  # every stratum, as its strata values
    stratum = found.get_indexer(keys)  # each item's, as its number in `found`
    evaluated = _stratified(found, stratum, np.arange(len(frame)), n_items, rng)
    rest = np.setdiff1d(np.arange(len(frame)), evaluated)
    pool = _stratified(found, stratum, rest, pool_size, rng) if pool_size else rest[:0]
    names = np.array([stratum_name(key) for key in found], dtype=object)
    rows = lambda drawn: frame.iloc[drawn].assign(stratum=names[stratum[drawn]]).reset_index(drop=True)  # noqa: E731
    return rows(evaluated), rows(pool)


def _stratified(
    found: pd.MultiIndex, stratum: np.ndarray, positions: np.ndarray, n: int, rng: np.random.Generator
) -> np.ndarray:
    """`n` of `positions` (rows whose stratum is their number in `found`): `stratum_counts` of each
    stratum, the first ones of the stratum in an order `rng` draws."""
    sizes = np.bincount(stratum[positions], minlength=len(found))
    counts = stratum_counts(dict(zip(found, sizes.tolist())), n, rng)
    order = rng.permutation(positions)
    rank = pd.Series(stratum[order]).groupby(stratum[order]).cumcount().to_numpy()
    return np.sort(order[rank < np.array([counts[key] for key in found])[stratum[order]]])


def stratum_counts(sizes: Mapping[tuple, int], n: int, rng: np.random.Generator) -> dict[tuple, int]:
    """How many of `n` items each stratum gives, from its number of items (keyed by its strata values,
    outermost first).

    Largest remainders, level by level: each group of each level (the strata whose keys start alike)
    gets the floor or the ceiling of its quota, n x its size / all items, and within each group of the
    level above the ceilings go to the largest remainders, equal ones in an order `rng` draws. So every
    group's count, a whole stratum's as a top-level one's, is within one item of its share of `n`.
    """
    total, counts = sum(sizes.values()), {(): n}
    for depth in range(1, len(next(iter(sizes))) + 1):
        level = Counter()
        for key, size in sizes.items():
            level[key[:depth]] += size
        ordered = sorted(level, key=str)  # whatever the values' types, then drawn into an order
        groups = [ordered[i] for i in rng.permutation(len(ordered))]
        groups.sort(key=lambda group: level[group] * n % total, reverse=True)  # stable: ties stay in drawn order
        given = {group: level[group] * n // total for group in groups}
        left = dict(counts)  # what each group of the level above has still to give
        for group in groups:
            left[group[:-1]] -= given[group]
        for group in groups:
            if left[group[:-1]] > 0:
                given[group] += 1
                left[group[:-1]] -= 1
        counts = given
    return counts
