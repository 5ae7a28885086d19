"""The answer from a budget (docs/estimation.md).

A budgeted run (config section `estimate`, `budget_share` or `budget_cells`) runs each benchmark's configs in
rounds, every model on each config chosen. Round 0 chooses configs that between them take every value of every
axis; round n reads the scores of the configs run so far, estimates rho_flip of every pair over the envelope
(safetyrepro.analysis.grid_model) and chooses the configs whose verdicts are least known, weighed by how wide each
pair's interval is, until the budget is spent or every interval is at most `target_width` wide. A round's choice
does not depend on the budget except where the budget cuts it short, so a raised budget replays the same rounds
on the cells already run and goes on from the last.

`estimate_of_cells` is the estimate of a run's cells table over its envelope, for the workflow's estimate job and
`safetyrepro estimate` alike.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from safetyrepro.analysis.grid_model import (
    DRAWS,
    LEVEL,
    central,
    centred_draws,
    estimate_grid,
    estimate_new_values,
    on_lattice,
    pair_differences,
    rho_flips,
    space_of,
    variance_components,
)
from safetyrepro.benchmarks import DataError
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.configuration.settings import Settings
from safetyrepro.core.config_id import Config
from safetyrepro.results.aggregate import read_summary
from safetyrepro.results.storage import read_parquet_checked

STOPS = {
    "budget": "the budget is spent",
    "target_width": "every pair's interval is at most target_width wide",
    "envelope": "every config of the envelope has run",
}


def initial_design(space: pd.DataFrame, rng: np.random.Generator) -> tuple[list[str], int]:
    """The envelope's configs (config id -> axis values) in the first round's order, and how many of them take
    every axis value: each next config adds the most values not yet taken (ties in a random order), then the rest
    in a random order."""
    order = list(space.index[rng.permutation(len(space))])
    values = {c: {(axis, space.at[c, axis]) for axis in space.columns} for c in order}
    every = set().union(*values.values())
    taken: set = set()
    chosen: list[str] = []
    covering = 0
    while len(chosen) < len(order):
        rest = [c for c in order if c not in chosen]
        best = max(rest, key=lambda c: len(values[c] - taken))  # the first in `order` among the best
        chosen.append(best)
        taken |= values[best]
        covering = covering or (len(chosen) if taken == every else 0)
    return chosen, covering


def resolution(settings: Settings, configs: list[Config], n_items: pd.Series) -> pd.Series | None:
    """Config id -> items x seeds of every config (its scores' lattice is 1 / that), where the cells run
    (`n_items`, one per cell) all have the same number of items; None where they differ."""
    items = set(n_items)
    if len(items) != 1:
        return None
    return pd.Series({c.config_id: len(settings.envelope.seeds_for(c)) for c in configs}) * items.pop()


def _pair_draws(
    space: pd.DataFrame, matrix: pd.DataFrame, units: pd.Series | None, rng: np.random.Generator
) -> dict[tuple[str, str], np.ndarray]:
    """Per model pair, posterior draws (draws x configs) of the score difference on every config of `space`, on
    the scores' lattice (`units`: `resolution`)."""
    return {
        (model_a, model_b): on_lattice(centred_draws(space, difference, DRAWS, rng), steps, lowest=-1.0)
        for model_a, model_b, difference, steps in pair_differences(matrix, space, units)
        if not difference.empty
    }


def choose_configs(
    space: pd.DataFrame,
    matrix: pd.DataFrame,
    units: pd.Series | None,
    k: int,
    rng: np.random.Generator,
    explore: int = 0,
) -> tuple[list[str], list[dict]]:
    """The next `k` configs to run and every pair's rho_flip interval now. `matrix`: config id -> one score column
    per model, of the configs run. A config's worth is the sum over pairs of the pair's interval width times how
    unsure its verdict there is (1 - the share of draws on its likeliest side: A ahead, B ahead or a tie); the
    `k - explore` worthiest configs not run are chosen (ties in a random order), then `explore` more at random
    from the rest: configs the model is sure of are checked too, so that an effect it lacks can show."""
    drawn = _pair_draws(space, matrix, units, rng)
    intervals, worth = [], np.zeros(len(space))
    for (model_a, model_b), differences in drawn.items():
        estimate, low, high = central(rho_flips(differences), LEVEL)
        intervals.append({"model_a": model_a, "model_b": model_b, "rho_flip": estimate, "low": low, "high": high})
        sides = np.stack([(differences > 0).mean(0), (differences < 0).mean(0), (differences == 0).mean(0)])
        worth += (high - low) * (1.0 - sides.max(axis=0))
    order = rng.permutation(len(space))
    ranked = [space.index[i] for i in order[np.argsort(-worth[order], kind="stable")]]
    rest = [c for c in ranked if c not in matrix.index]
    worthiest = rest[: max(k - explore, 0)]
    others = [c for c in rest if c not in worthiest]
    drawn_at_random = [others[i] for i in sorted(rng.permutation(len(others))[: k - len(worthiest)])]
    return worthiest + drawn_at_random, intervals


def next_configs(
    space: pd.DataFrame,
    matrix: pd.DataFrame,
    units: pd.Series | None,
    n: int,
    round_configs: int,
    room: int,
    rng: np.random.Generator,
) -> tuple[list[str], list[dict]]:
    """Round n's choice of at most `room` configs, and every pair's interval (none before the first round). Round
    0 takes `initial_design`'s configs that take every axis value (at least `round_configs`); a later round takes
    `choose_configs`' `round_configs`, half of them (every other round's one) at random. The budget only cuts a
    choice short (`room`), so a round's choice under a larger budget starts with its choice under a smaller."""
    if matrix.empty:
        order, covering = initial_design(space, rng)
        return order[: min(max(round_configs, covering), room)], []
    explore = round_configs // 2 if round_configs > 1 else n % 2
    chosen, intervals = choose_configs(space, matrix, units, round_configs, rng, explore)
    return chosen[:room], intervals


def read_cell_scores(paths: Sequence[Path]) -> pd.DataFrame:
    """The scores of cells (model, config_id, score, n_items, n_seeds) from their summaries."""
    columns = ["model", "config_id", "score", "n_items", "n_seeds"]
    rows = [{key: summary[key] for key in columns} for summary in map(read_summary, paths)]
    return pd.DataFrame(rows, columns=columns)


def round_record(settings: Settings, benchmark: str, n: int, previous: dict | None, scores: pd.DataFrame) -> dict:
    """Round n of a benchmark: the configs run so far (the previous round's, plus those it chose, scored from
    `scores`), every pair's interval, and the decision: the configs to run next, or why the rounds stop."""
    observed = pd.DataFrame(previous["observed"] if previous else [], columns=scores.columns)
    models = [m.name for m in settings.models]
    if previous is not None:
        chosen = previous["decision"]["configs"]
        mine = scores[scores["config_id"].isin(chosen) & scores["model"].isin(models)]
        missing = sorted({(m, c) for m in models for c in chosen} - set(zip(mine["model"], mine["config_id"])))
        if missing:
            raise DataError(f"cell {missing[0][0]}/{benchmark}/{missing[0][1]}: no score for the round to read")
        observed = pd.concat([observed, mine], ignore_index=True) if len(observed) else mine.reset_index(drop=True)
    configs = settings.configs(benchmark)
    space = space_of(configs)
    budget, estimate = settings.budget_configs(benchmark), settings.estimate
    rng = np.random.default_rng([estimate.seed, zlib.crc32(benchmark.encode()), n])
    run = list(dict.fromkeys(observed["config_id"]))
    room = budget - len(run)
    matrix = observed.pivot(index="config_id", columns="model", values="score").reindex(columns=models)
    units = resolution(settings, configs, observed["n_items"])
    chosen, intervals = next_configs(space, matrix, units, n, estimate.round_configs, room, rng)
    widest = max((row["high"] - row["low"] for row in intervals), default=math.inf)
    stopped = (
        "envelope"
        if len(run) == len(space)
        else "budget"
        if room <= 0
        else "target_width"
        if estimate.target_width is not None and widest <= estimate.target_width
        else None
    )
    return {
        "benchmark": benchmark,
        "round": n,
        "budget_configs": budget,
        "envelope_configs": len(space),
        "observed": observed.to_dict("records"),
        "intervals": intervals,
        "decision": {"configs": [] if stopped else chosen, "stopped": stopped},
    }


ITEM_OUTCOME_COLUMNS = ["model", "benchmark", "config_id", "item_id", "correct"]


def read_item_outcomes(path: Path) -> pd.DataFrame:
    """A run's item rows (results/items.parquet), the columns the items variance component reads."""
    rows = read_parquet_checked(path)
    missing = [column for column in ITEM_OUTCOME_COLUMNS if column not in rows.columns]
    if missing:
        raise DataError(f"{path}: not a run's item rows (no column {', '.join(missing)})")
    return rows[ITEM_OUTCOME_COLUMNS]


def _check_cells(cells: pd.DataFrame, path: Path) -> None:
    """A cells table the estimate can read: the cells table's columns, each cell of a whole number of items (1 or
    more) and seed_scores a JSON object of seed -> score (one DataError naming the first cell that is not)."""
    missing = [c for c in ("model", "benchmark", "config_id", "score", "n_items", "seed_scores") if c not in cells]
    if missing:
        raise DataError(f"{path}: not a run's cells table (no column {', '.join(missing)})")
    for row in cells.itertuples():
        where = f"{path}: cell {row.model}/{row.benchmark}/{row.config_id}"
        if pd.isna(row.n_items) or row.n_items < 1 or row.n_items != int(row.n_items):
            raise DataError(f"{where}: n_items is {row.n_items}, not a whole number of items (1 or more)")
        try:
            seeds = json.loads(row.seed_scores)
        except (TypeError, ValueError):
            seeds = None
        if not (
            isinstance(seeds, dict)
            and seeds
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in seeds.values())
        ):
            raise DataError(f"{where}: seed_scores is {row.seed_scores!r}, not a JSON object of seed -> score")


def estimate_of_cells(
    settings: Settings, cells: pd.DataFrame, seed: int, path: Path, items: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """rho_flip of every pair, each model's score quantiles, how each pair's verdict carries to a new value of each
    axis whose values are draws from a population (a template, a few-shot draw), and the variance components, over
    the envelope of each benchmark, from a cells table (read from `path`) and its item rows (`items`, or None),
    with intervals (safetyrepro.analysis.grid_model)."""
    others = [b for b in dict.fromkeys(cells["benchmark"]) if b not in settings.benchmarks]
    if others:
        raise ConfigError(
            f"--cells: {path} has cells of {', '.join(others)}, which this config does not run: give the "
            "configfile of the run that made them"
        )
    if cells.empty:
        raise ConfigError(f"--cells: {path} has no cells")
    _check_cells(cells, path)
    spaces, units, sampled = {}, {}, {}
    envelope = settings.envelope
    for benchmark in dict.fromkeys(cells["benchmark"]):
        configs = envelope.configs(benchmark)
        spaces[benchmark] = space_of(configs)
        sampled[benchmark] = {  # a few-shot draw changes nothing at 0 shots, an option order nothing on Yes/No items
            axis: [c.config_id for c in configs if axis == "template" or envelope.acts(axis, c, benchmark)]
            for axis in envelope.sampled_axes()
        }
        mine = cells[cells["benchmark"] == benchmark]
        outside = sorted(set(mine["config_id"]) - set(spaces[benchmark].index))
        if outside:
            raise ConfigError(
                f"--cells: config(s) outside this config's envelope of {benchmark}: {', '.join(outside[:3])}"
            )
        units[benchmark] = resolution(settings, configs, mine["n_items"])
    rho, quantiles = estimate_grid(cells, spaces, units, seed=seed)
    new_values = estimate_new_values(cells, spaces, sampled, units, seed=seed)
    return rho, quantiles, new_values, variance_components(cells, spaces, items, seed=seed)


def budget_summary(settings: Settings, last_rounds: Sequence[dict]) -> tuple[list[tuple[str, str, str]], dict]:
    """A budgeted run's cells (model, benchmark, config_id) from each benchmark's last round record, and the budget
    its tables carry: the cells run of the grid's, the cells run outside it (a chosen config that relabels its
    twin's responses runs the twin's cells, chosen or not), and per benchmark the configs run and why its rounds
    stopped."""
    if sorted(r["benchmark"] for r in last_rounds) != sorted(settings.benchmarks):
        raise ConfigError("--rounds: give the last round record of every benchmark of the run, once each")
    models = [m.name for m in settings.models]
    run = {r["benchmark"]: list(dict.fromkeys(row["config_id"] for row in r["observed"])) for r in last_rounds}
    cells = [(m, b, c) for m in models for b in settings.benchmarks for c in run[b]]
    twins = {
        (b, twin.config_id)
        for b in settings.benchmarks
        for c in settings.configs(b)
        if c.config_id in run[b] and (twin := settings.envelope.generation_twin(c, b)) is not None
    }
    budget = {
        "rule": settings.estimate.budget,
        "cells_run": len(cells),
        "cells": len(settings.cells()),
        "twin_cells": len(models) * sum(twin not in run[b] for b, twin in twins),
        "benchmarks": {
            r["benchmark"]: {
                "configs_run": len(run[r["benchmark"]]),
                "configs": r["envelope_configs"],
                "rounds": r["round"],
                "stopped": STOPS[r["decision"]["stopped"]],
            }
            for r in last_rounds
        },
    }
    return cells, budget
