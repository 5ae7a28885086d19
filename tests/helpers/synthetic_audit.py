"""Synthetic audits with known answers: one model pair on the paper's 48 TruthfulQA configs, a planted
region of configs where the verdict reverses, and the cells a random order needs to find it.

- `additive`: every axis value shifts the score difference (effects ~ N(0, 1)) plus a residual per
  config (N(0, residual^2), what the axes do not explain); the k configs with the lowest difference are
  pushed just past zero, so exactly k reverse the majority.
- `conjunction`: a reversal confined to two axis values together (e.g. T3 with 5 shots); elsewhere the
  difference is a positive level plus small axis effects. No single axis points at the region.

Scores are on the 0-1 scale (unit 0.05); A's majority verdict is "A better" or "B better" at random.

For the calibration of the majority verdict's probability, grids whose true majority is known and which
the audit's models need not fit, with ties (scores on the grid of 10 items, so a small difference ties):

- `rounded`: a shared shift plus axis effects plus a residual per config, rounded to 0.1 (a near 50/50
  split at shift 0, many ties when all three are small);
- `exchangeable`: each config A better, B better or tied with proportions ~ Dirichlet(1, 1, 1), in no
  relation to its axes (the majority model's own prior);
- `arranged`: given counts (N+, N-, N0) placed at random over the configs (e.g. the default run's
  TruthfulQA pair, 1 / 2 / 5).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers.session import REPO
from safetyrepro.analysis.flips import signs
from safetyrepro.analysis.grid_model import search_space
from safetyrepro.audit import CELLS_PER_CONFIG, search
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.settings import AuditSettings

UNIT = 0.05


def paper_space() -> pd.DataFrame:
    """The 48 configs of the paper's envelope for TruthfulQA (config/config.yaml's axes)."""
    envelope = load_settings(REPO / "config" / "config.yaml").envelope
    rows = pd.DataFrame([c.as_dict() for c in envelope.configs("truthfulqa")])
    return search_space(rows, envelope.axis_names)


def default_space() -> pd.DataFrame:
    """The default run's 8 TruthfulQA configs (config/config.yaml)."""
    settings = load_settings(REPO / "config" / "config.yaml")
    rows = pd.DataFrame([c.as_dict() for c in settings.configs("truthfulqa")])
    return search_space(rows, settings.envelope.axis_names)


def audit_options(budget: int) -> AuditSettings:
    """The default `audit` section (the schema's) with this budget."""
    return dataclasses.replace(load_settings(REPO / "config" / "config.yaml").audit, budget=budget)


@dataclass(frozen=True)
class Grid:
    """One synthetic pair: the observed score differences per config and the planted reversing configs."""

    diff: pd.Series
    reversing: frozenset[str]

    def observe(self, config_id: str) -> tuple[float, float]:
        return 0.5 + self.diff[config_id] / 2, 0.5 - self.diff[config_id] / 2


def additive_grid(space: pd.DataFrame, k: int, seed: int, residual: float = 0.5) -> Grid:
    """k reversing configs (k = 0: none, the closest config one unit on the majority's side)."""
    rng = np.random.default_rng(seed)
    effects = {(axis, value): rng.normal() for axis in space for value in space[axis].unique()}
    level = np.array([sum(effects[axis, row[axis]] for axis in space) for _, row in space.iterrows()])
    level = level + rng.normal(0.0, residual, len(space))
    ordered = np.sort(level)
    diff = (level - ((ordered[k - 1] + ordered[k]) / 2 if k else ordered[0] - 1)) * UNIT
    sign = rng.choice([-1.0, 1.0])
    diff = pd.Series(-diff * sign, index=space.index)  # the k lowest reverse: B better where A leads
    return Grid(diff, frozenset(space.index[np.argsort(level)[:k]]))


def conjunction_grid(space: pd.DataFrame, seed: int) -> Grid:
    rng = np.random.default_rng(seed)
    axes = rng.choice(list(space.columns), 2, replace=False)
    inside = pd.Series(False, index=space.index)
    while not inside.any():  # a combination the rules exclude (logprob at T=0.7) is drawn again
        values = [rng.choice(space[axis].unique()) for axis in axes]
        inside = (space[axes[0]] == values[0]) & (space[axes[1]] == values[1])
    effects = {(axis, value): rng.normal(0.0, 0.3) for axis in space for value in space[axis].unique()}
    level = 2.0 + np.array([sum(effects[axis, row[axis]] for axis in space) for _, row in space.iterrows()])
    level = np.where(inside, -np.abs(level), np.abs(level)) * UNIT
    sign = rng.choice([-1.0, 1.0])
    return Grid(pd.Series(level * sign, index=space.index), frozenset(space.index[inside]))


def rounded_grid(space: pd.DataFrame, seed: int, shift: float, effect_sd: float, residual_sd: float) -> Grid:
    """d = shift + axis effects (N(0, effect_sd^2)) + residual (N(0, residual_sd^2)), rounded to 0.1."""
    rng = np.random.default_rng(seed)
    effects = {(axis, value): rng.normal(0.0, effect_sd) for axis in space for value in space[axis].unique()}
    level = shift + np.array([sum(effects[axis, row[axis]] for axis in space) for _, row in space.iterrows()])
    diff = np.round((level + rng.normal(0.0, residual_sd, len(space))) * 10) / 10
    return signed_grid(pd.Series(diff, index=space.index))


def exchangeable_grid(space: pd.DataFrame, seed: int) -> Grid:
    """Each config's sign drawn with proportions ~ Dirichlet(1, 1, 1), whatever its axes."""
    rng = np.random.default_rng(seed)
    return signed_grid(pd.Series(rng.choice([0.1, -0.1, 0.0], len(space), p=rng.dirichlet(np.ones(3))), space.index))


def arranged_grid(space: pd.DataFrame, counts: tuple[int, int, int], seed: int) -> Grid:
    """N+, N-, N0 configs A better, B better and tied (by 0.1), placed at random."""
    diff = np.repeat([0.1, -0.1, 0.0], counts)
    return signed_grid(pd.Series(np.random.default_rng(seed).permutation(diff), index=space.index))


def signed_grid(diff: pd.Series) -> Grid:
    """The grid of these differences, its reversing configs those on the minority side (none without one)."""
    sign = np.sign(diff.round(9))
    majority = true_majority(Grid(diff, frozenset()))
    return Grid(diff, frozenset(diff.index[sign == -majority]) if majority else frozenset())


def true_majority(grid: Grid) -> int:
    """The full grid's majority verdict: +1 (N+ > N-), -1 or 0, as `flips.signs` counts them."""
    observed = pd.DataFrame([grid.observe(c) for c in grid.diff.index], columns=["a", "b"])
    return int(np.sign(signs(observed["a"], observed["b"]).sum()))


def random_order_cells(grid: Grid, rng: np.random.Generator) -> int:
    """Cells a random order of configs runs up to and including its first reversing config."""
    order = rng.permutation(grid.diff.index)
    return CELLS_PER_CONFIG * (1 + next(i for i, c in enumerate(order) if c in grid.reversing))


def audit_outcome(space: pd.DataFrame, grid: Grid, options: AuditSettings) -> tuple[bool, int, str]:
    """(a planted reversing config was found, cells run, why the search stopped)."""
    observed, steps = search(space, grid.observe, options)
    found = steps[-1].reason == "reversal found" and bool(set(observed.index) & grid.reversing)
    return found, CELLS_PER_CONFIG * len(observed), steps[-1].reason


def compare(space: pd.DataFrame, grids: list[Grid], options: AuditSettings, seed: int = 0) -> dict:
    """Share found and mean cells of the audit and of a random order (itself a mean over 20 orders)."""
    rng = np.random.default_rng(seed)
    outcomes = [audit_outcome(space, grid, options) for grid in grids]
    random_cells = [np.mean([random_order_cells(grid, rng) for _ in range(20)]) for grid in grids]
    return {
        "found": float(np.mean([found for found, _, _ in outcomes])),
        "audit_cells": float(np.mean([cells for _, cells, _ in outcomes])),
        "random_cells": float(np.mean(random_cells)),
        "random_found_within_audit_budget": float(
            np.mean([random_order_cells(g, rng) <= options.budget for g in grids for _ in range(20)])
        ),
        "reasons": pd.Series([reason for _, _, reason in outcomes]).value_counts().to_dict(),
    }


def all_conjunctions(space: pd.DataFrame) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """Every pair of values of two different axes that some config has."""
    pairs = []
    for a, b in itertools.combinations(space.columns, 2):
        for va, vb in itertools.product(space[a].unique(), space[b].unique()):
            if ((space[a] == va) & (space[b] == vb)).any():
                pairs.append(((a, va), (b, vb)))
    return pairs
