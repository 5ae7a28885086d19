"""Measures the grid model's intervals (safetyrepro.analysis.grid_model) on synthetic grids with a known answer:
how often the 90% intervals of rho_flip and of each model's score quantiles cover the full grid's values, when a
share of the configs is run, and the errors of its estimates against those of the configs run alone.

    python scripts/measure_grid_model.py --replicates 200 --share 0.25 --out grid_model_coverage.md

Each replicate draws a grid on the paper's envelope (48 configs: 4 templates x 3 decodings x 3 shot counts x 2
scoring paths, log-likelihood only under greedy) of two models, with item outcomes
logit p(m, c, i) = a_m + sum over axes of (shared + model's own) effect of c's value + item effect (+ interactions),
0/1 outcomes, 5 seeds on sampled configs; a cell's score is the mean. Scenarios: the additive model (what the
fit assumes, on the logit scale), template-by-shots interactions of each model's own (which it lacks),
heavy-tailed item effects (Student t, 2 degrees of freedom), and close models (verdicts near a coin toss).
Beside the model's W1 error and the configs run alone's is an oracle's (`oracle_w1`), which knows every cell's
outcome probabilities: how low any estimator's can go.

With --floor, how low the W1 error of the quantiles can go: the configs run alone, the grid model, the posterior
under the grid's own generating model (`posterior_floor_w1`) and the oracle, at --items a cell.

    python scripts/measure_grid_model.py --floor --replicates 100 --items 10

With --cells, the same on a grid the project ran in full (a run's results/cells.parquet): each of --replicates
draws runs a share of every benchmark's configs, and the estimates are compared with the full grid's values.

    python scripts/measure_grid_model.py --cells results/cells.parquet --replicates 50 --share 0.25
"""

from __future__ import annotations

import argparse
import itertools
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy.stats import wasserstein_distance

from safetyrepro.analysis.flips import score_matrix
from safetyrepro.analysis.grid_model import (
    DRAWS,
    LEVEL,
    NEW_VALUE,
    QUANTILES,
    centred_draws,
    configs_to_settle,
    estimate_pair,
    estimate_quantiles,
    lattice_steps,
    leads,
    new_value_draws,
    on_lattice,
    rho_flips,
    search_space,
    settled,
    space_of,
)
from safetyrepro.configuration.build import load_settings
from safetyrepro.core.axes import AXES
from safetyrepro.estimation import next_configs

REPO = Path(__file__).resolve().parents[1]
SEEDS = 5
ITEM_PENALTY = 0.01  # the item-level fit's ridge penalty per observation (statsmodels' alpha); not tuned


@dataclass(frozen=True)
class Scenario:
    name: str
    effect_sd: float = 0.35  # each axis value's effect shared by the models (logit scale)
    own_sd: float = 0.2  # each model's own part of it: what moves verdicts
    gap_sd: float = 0.15  # the models' difference in level
    interaction_sd: float = 0.0  # template x shots, each model's own
    item_df: float | None = None  # Student t items; None: normal
    item_sd: float = 1.0


SCENARIOS = (
    Scenario("additive"),
    Scenario("template x shots interactions", interaction_sd=0.25),
    Scenario("heavy-tailed items (t, 2 df)", item_df=2.0),
    Scenario("close models", gap_sd=0.02, own_sd=0.1),
    # not looked at while the model was chosen (with seeds from 1000, neither were the others)
    Scenario("all three at once", interaction_sd=0.25, item_df=2.0, gap_sd=0.02, own_sd=0.1),
)


def envelope() -> pd.DataFrame:
    """The paper's 48 configs (TruthfulQA's in config/paper.yaml's envelope): config id -> template, decoding, shots,
    scoring."""
    return space_of(load_settings(REPO / "config" / "paper.yaml").envelope.configs("truthfulqa"))


def draw_grid(scenario: Scenario, space: pd.DataFrame, items: int, rng: np.random.Generator) -> pd.DataFrame:
    """Two models' scores on every config (configs x [A, B])."""
    return draw_grid_with_probabilities(scenario, space, items, rng)[0]


def draw_grid_with_probabilities(
    scenario: Scenario, space: pd.DataFrame, items: int, rng: np.random.Generator
) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """`draw_grid`'s scores, and each model's outcome probabilities (configs x items) they were drawn from."""
    grid = draw_grid_parts(scenario, space, items, rng)
    return grid.scores, grid.probabilities


@dataclass(frozen=True)
class SyntheticGrid:
    """A drawn grid: scores (configs x [A, B]), outcome probabilities (configs x items), each model's level and
    config logits (level + axis effects + interactions; an item's logit adds its effect), the item effects."""

    scores: pd.DataFrame
    probabilities: dict[str, np.ndarray]
    levels: dict[str, float]
    logits: dict[str, np.ndarray]
    item: np.ndarray


def draw_grid_parts(scenario: Scenario, space: pd.DataFrame, items: int, rng: np.random.Generator) -> SyntheticGrid:
    """`draw_grid_with_probabilities`'s grid with the parts it is drawn from (the same numbers drawn in the same
    order: a seed gives the grid it always gave)."""
    values = {axis: sorted(space[axis].unique()) for axis in space.columns}
    shared = {(axis, v): rng.normal(0, scenario.effect_sd) for axis in values for v in values[axis]}
    if scenario.item_df is None:
        item = rng.normal(0, scenario.item_sd, items)
    else:
        item = scenario.item_sd * rng.standard_t(scenario.item_df, items)
    scores, probabilities, logits = {}, {}, {}
    levels = {"A": 0.0, "B": rng.normal(0, scenario.gap_sd)}
    for model, level in levels.items():
        own = {key: rng.normal(0, scenario.own_sd) for key in shared}
        pairs = {(t, s): rng.normal(0, scenario.interaction_sd) for t in values["template"] for s in values["shots"]}
        column, rows, config_logits = [], [], []
        for _, row in space.iterrows():
            logit = level + sum(shared[(a, row[a])] + own[(a, row[a])] for a in space.columns)
            logit += pairs[(row["template"], row["shots"])]
            seeds = 1 if row["decoding"] == "greedy" else SEEDS
            p = 1 / (1 + np.exp(-(logit + item)))
            column.append(rng.binomial(1, p, size=(seeds, items)).mean())
            rows.append(p)
            config_logits.append(logit)
        scores[model], probabilities[model], logits[model] = column, np.array(rows), np.array(config_logits)
    return SyntheticGrid(pd.DataFrame(scores, index=space.index), probabilities, levels, logits, item)


def oracle_w1(
    space: pd.DataFrame, scores: pd.Series, probabilities: np.ndarray, run, rng: np.random.Generator
) -> float:
    """The W1 error of an oracle that knows every cell's outcome probabilities and the configs run's scores, and
    not the 0/1 outcomes of the configs not run: the median of each quantile over 200 draws of those outcomes (what
    minimises the expected W1). No estimator from the configs run knows more: a floor for them all."""
    seeds = np.where(space["decoding"] == "greedy", 1, SEEDS)
    draws = rng.binomial(seeds[:, None], probabilities, size=(200, *probabilities.shape)).sum(axis=2)
    draws = draws / (seeds * probabilities.shape[1])
    draws[:, space.index.get_indexer(run)] = scores.loc[run].to_numpy()
    return wasserstein_distance(np.median(np.sort(draws, axis=1), axis=0), scores)


def posterior_floor_w1(
    scenario: Scenario, space: pd.DataFrame, grid: SyntheticGrid, run, rng: np.random.Generator
) -> dict[str, float]:
    """Each model's W1 error of the posterior under the grid's own generating model, told its scales, the models'
    levels and the item effects (not the axis effects, interactions or 0/1 outcomes): a floor that an estimator
    from the configs run could reach only by knowing as much. The config logits of both models are Gaussian a
    priori (shared and own axis effects, template x shots interactions), each run config's score is mapped to the
    logit scale through f(eta) = mean_i sigmoid(eta + item_i) with its sampling variance by the delta method, and
    the unrun configs' scores are drawn from the Gaussian posterior and binomial outcomes; the estimate is the
    median of each quantile over 400 draws, as the oracle's."""
    n, axes = len(space), list(space.columns)
    same = [space[a].to_numpy(dtype=object)[:, None] == space[a].to_numpy(dtype=object)[None, :] for a in axes]
    shared = sum(same) * scenario.effect_sd**2
    own = sum(same) * (scenario.effect_sd**2 + scenario.own_sd**2)
    own = own + same[axes.index("template")] * same[axes.index("shots")] * scenario.interaction_sd**2
    prior = np.block([[own, shared], [shared, own]])  # A's configs, then B's
    mean = np.repeat([grid.levels["A"], grid.levels["B"]], n)
    seeds = np.where(space["decoding"] == "greedy", 1, SEEDS)
    axis_logits = np.linspace(-12, 12, 2401)
    f = (1 / (1 + np.exp(-(axis_logits[:, None] + grid.item[None, :])))).mean(axis=1)
    slope = np.gradient(f, axis_logits)
    positions = space.index.get_indexer(run)
    seen, values, variances = [], [], []
    for k, model in enumerate(("A", "B")):
        for c in positions:
            resolution = seeds[c] * len(grid.item)
            score = np.clip(grid.scores[model].iloc[c], 0.5 / resolution, 1 - 0.5 / resolution)
            logit = np.interp(score, f, axis_logits)
            p = 1 / (1 + np.exp(-(logit + grid.item)))
            variance = (p * (1 - p)).sum() / len(grid.item) ** 2 / seeds[c]
            seen.append(k * n + c)
            values.append(logit)
            variances.append(variance / np.interp(logit, axis_logits, slope) ** 2)
    unseen = np.setdiff1d(np.arange(2 * n), seen)
    gain = np.linalg.solve(prior[np.ix_(seen, seen)] + np.diag(variances), prior[np.ix_(seen, unseen)]).T
    post_mean = mean[unseen] + gain @ (np.array(values) - mean[seen])
    post_cov = prior[np.ix_(unseen, unseen)] - gain @ prior[np.ix_(seen, unseen)]
    drawn = rng.multivariate_normal(post_mean, post_cov, size=400, method="eigh")
    errors = {}
    for k, model in enumerate(("A", "B")):
        columns = np.flatnonzero(unseen // n == k)
        configs = unseen[columns] % n
        filled = np.broadcast_to(grid.scores[model].to_numpy(), (400, n)).copy()
        for column, c in zip(columns, configs):
            p = 1 / (1 + np.exp(-(drawn[:, column][:, None] + grid.item[None, :])))
            filled[:, c] = rng.binomial(seeds[c], p).sum(axis=1) / (seeds[c] * len(grid.item))
        estimate = np.median(np.sort(filled, axis=1), axis=0)
        errors[model] = wasserstein_distance(estimate, grid.scores[model])
    return errors


def floor_lines(space: pd.DataFrame, items: int, share: float, replicates: int, first_seed: int) -> list[str]:
    """Mean W1 errors over both models of `replicates` grids a scenario, `share` of the configs run at random: the
    configs run alone, the grid model's pooled draws, the known-prior posterior (`posterior_floor_w1`) and the
    oracle (`oracle_w1`), each also as a share of the configs run alone's."""
    lines = [
        f"{replicates} replicates a scenario, {round(share * len(space))} of {len(space)} configs run at random, "
        f"{items} items, seeds from {first_seed}; mean W1 over both models (share of the configs run alone's).",
        "",
        "| scenario | configs run alone | grid model | posterior, generating model known | oracle |",
        "|---|---|---|---|---|",
    ]
    for scenario in SCENARIOS:
        errors = {kind: [] for kind in ("run", "model", "floor", "oracle")}
        for k in range(replicates):
            rng = np.random.default_rng(first_seed + k)
            grid = draw_grid_parts(scenario, space, items, rng)
            run = rng.choice(space.index, size=round(share * len(space)), replace=False)
            floor = posterior_floor_w1(scenario, space, grid, run, rng)
            for model in ("A", "B"):
                truth = grid.scores[model]
                errors["run"].append(wasserstein_distance(truth.loc[run], truth))
                errors["model"].append(
                    wasserstein_distance(centred_draws(space, truth.loc[run], 200, rng).ravel(), truth)
                )
                errors["floor"].append(floor[model])
                errors["oracle"].append(oracle_w1(space, truth, grid.probabilities[model], run, rng))
        naive = np.mean(errors["run"])
        cells = [f"{np.mean(errors[kind]):.4f} ({np.mean(errors[kind]) / naive:.2f})" for kind in errors]
        lines.append(f"| {scenario.name} | {' | '.join(cells)} |")
        print(lines[-1], flush=True)
    return lines


def chosen_in_rounds(
    space: pd.DataFrame, grid: pd.DataFrame, resolution: pd.Series, n_run: int, round_configs: int, rng
) -> list[str]:
    """The configs a budgeted run chooses (safetyrepro.estimation.next_configs), round by round, up to `n_run`."""
    run: list[str] = []
    n = 0
    while len(run) < n_run:
        run += next_configs(space, grid.loc[run], resolution, n, round_configs, n_run - len(run), rng)[0]
        n += 1
    return run


def replicate(scenario: Scenario, space: pd.DataFrame, items: int, share: float, seed: int, rounds: int) -> dict:
    """One synthetic grid and its estimates from `share` of the configs: drawn at random, or (`rounds`: configs a
    round) chosen in rounds."""
    rng = np.random.default_rng(seed)
    grid, probabilities = draw_grid_with_probabilities(scenario, space, items, rng)
    resolution = pd.Series([items * (1 if d == "greedy" else SEEDS) for d in space["decoding"]], index=space.index)
    n_run = round(share * len(space))
    if rounds:
        run = chosen_in_rounds(space, grid, resolution, n_run, rounds, rng)
    else:
        run = rng.choice(space.index, size=n_run, replace=False)
    observed = grid.loc[run]
    difference = observed["A"] - observed["B"]
    steps = lattice_steps(space, resolution, pd.concat([observed["A"], observed["B"]]))
    truth = float(rho_flips((grid["A"] - grid["B"]).to_numpy()[None, :])[0])
    pair = estimate_pair(space, difference, rng, steps)
    row = {
        "rho_truth": truth,
        "rho_covered": pair["rho_flip_low"] - 1e-12 <= truth <= pair["rho_flip_high"] + 1e-12,
        "rho_error": abs(pair["rho_flip"] - truth),
        "rho_error_run": abs(pair["rho_flip_run"] - truth),
        "rho_width": pair["rho_flip_high"] - pair["rho_flip_low"],
    }
    for model in ("A", "B"):
        true_quantiles = np.quantile(grid[model], QUANTILES)
        for q, estimate, true in zip(QUANTILES, estimate_quantiles(space, observed[model], rng, steps), true_quantiles):
            row[f"{model}_q{q}_covered"] = estimate["low"] - 1e-12 <= true <= estimate["high"] + 1e-12
        filled = centred_draws(space, observed[model], 200, rng).ravel()  # the draws pooled: their mixture
        row[f"{model}_w1"] = wasserstein_distance(filled, grid[model])
        row[f"{model}_w1_run"] = wasserstein_distance(observed[model], grid[model])
        oracle_rng = np.random.default_rng([seed, ord(model)])  # its own numbers: the other columns stay as they were
        row[f"{model}_w1_oracle"] = oracle_w1(space, grid[model], probabilities[model], run, oracle_rng)
    return row


def axes_of(frame: pd.DataFrame) -> list[str]:
    """The axes a cells table varies: the four every envelope has, and each declared axis, which a config id names
    where it takes other than its default value (T1-greedy-3shot-freeform-option_order=reversed)."""
    declared = [c for c in frame.columns if frame["config_id"].str.contains(f"-{c}=", regex=False).any()]
    return [a for a in (*AXES, *declared) if a in frame and frame[a].nunique() > 1]


def item_model_scores(rows: pd.DataFrame, space: pd.DataFrame, run: Sequence[str], penalty: float) -> pd.Series:
    """A PromptEval-style point estimate (Maia Polo et al., 2024) of one model's score on every config of `space`:
    logit P(correct) = intercept + axis-value effects + item effect, fitted by ridge-penalised logistic regression
    (statsmodels GLM, `penalty` per observation) on the item rows (`rows`: config_id, item_id, correct) of the configs
    `run`; a config's score is the mean over its items of the fitted probability, and a config run keeps its own."""
    mine = rows[rows["config_id"].isin(run)]
    items = sorted(rows["item_id"].unique())
    configs = pd.get_dummies(space, dtype=float)
    item_dummies = pd.get_dummies(pd.Categorical(mine["item_id"], categories=items), dtype=float).to_numpy()
    x = np.hstack([np.ones((len(mine), 1)), configs.loc[mine["config_id"]].to_numpy(), item_dummies])
    fit = sm.GLM(mine["correct"].astype(float).to_numpy(), x, family=sm.families.Binomial()).fit_regularized(
        alpha=penalty, L1_wt=0.0
    )
    coefficients = np.asarray(fit.params)
    n_config = configs.shape[1]
    config_part = coefficients[0] + configs.to_numpy() @ coefficients[1 : 1 + n_config]
    item_part = coefficients[1 + n_config :]
    predicted = pd.Series(
        (1 / (1 + np.exp(-(config_part[:, None] + item_part[None, :])))).mean(axis=1), index=space.index
    )
    observed = mine.groupby("config_id")["correct"].mean()
    predicted[observed.index] = observed
    return predicted


def real_grid(cells: pd.DataFrame, share: float, replicates: int, items: pd.DataFrame | None = None) -> list[str]:
    """Per benchmark: rho_flip's error and coverage over model pairs, and the quantiles' W1 error, over `replicates`
    random draws of `share` of the configs: the grid model, the configs run alone, and with `items` (the grid's item
    rows) a PromptEval-style item-level point estimate (`item_model_scores`) on the same configs. W1 of the grid
    model is of its pooled draws, and of its posterior mean per config."""
    lines = [
        "| benchmark | configs run | rho_flip error: model / run alone / item-level (median) | rho_flip covered | "
        "W1: model draws / model mean / run alone / item-level (median) |",
        "|---|---|---|---|---|",
    ]
    pooled: dict[str, list] = {"model": [], "run alone": [], "item-level": [], "covered": []}
    for benchmark, frame in cells.groupby("benchmark", sort=False):
        axes = axes_of(frame)
        space = search_space(frame, axes)
        resolution = frame.drop_duplicates("config_id").set_index("config_id").eval("n_items * n_seeds")
        grid = score_matrix(frame, benchmark).loc[space.index]
        truth = {
            (a, b): float(rho_flips((grid[a] - grid[b]).to_numpy()[None, :])[0])
            for a, b in itertools.combinations(grid.columns, 2)
        }
        n_run = max(2, round(share * len(space)))
        errors, naive, item_level, covered = [], [], [], []
        w1 = {"draws": [], "mean": [], "run": [], "item-level": []}
        for seed in range(replicates):
            rng = np.random.default_rng(seed)
            run = rng.choice(space.index, size=n_run, replace=False)
            fitted = {}
            if items is not None:
                mine = items[items["benchmark"] == benchmark]
                steps = 1.0 / resolution[space.index].to_numpy()
                for model in grid.columns:
                    scores = item_model_scores(mine[mine["model"] == model], space, run, ITEM_PENALTY)
                    fitted[model] = pd.Series(on_lattice(scores.to_numpy()[None, :], steps)[0], index=space.index)
            for (a, b), true in truth.items():
                observed = grid.loc[run, [a, b]]
                steps = lattice_steps(space, resolution, pd.concat([observed[a], observed[b]]))
                estimate = estimate_pair(space, observed[a] - observed[b], rng, steps)
                errors.append(abs(estimate["rho_flip"] - true))
                naive.append(abs(estimate["rho_flip_run"] - true))
                covered.append(estimate["rho_flip_low"] - 1e-12 <= true <= estimate["rho_flip_high"] + 1e-12)
                if fitted:
                    item_level.append(abs(rho_flips((fitted[a] - fitted[b]).to_numpy()[None, :])[0] - true))
            for model in grid.columns:
                drawn = centred_draws(space, grid.loc[run, model], 200, rng)
                w1["draws"].append(wasserstein_distance(drawn.ravel(), grid[model]))  # the draws pooled: their mixture
                w1["mean"].append(wasserstein_distance(drawn.mean(axis=0), grid[model]))
                w1["run"].append(wasserstein_distance(grid.loc[run, model], grid[model]))
                if fitted:
                    w1["item-level"].append(wasserstein_distance(fitted[model], grid[model]))
        item_error = f"{np.median(item_level):.3f}" if item_level else "-"
        shown = " / ".join(f"{np.median(v):.4f}" if v else "-" for v in w1.values())
        lines.append(
            f"| {benchmark} | {n_run} of {len(space)} | {np.median(errors):.3f} / {np.median(naive):.3f} / "
            f"{item_error} | {np.mean(covered):.3f} | {shown} |"
        )
        print(lines[-1], flush=True)
        for key, values in zip(pooled, (errors, naive, item_level, covered)):
            pooled[key] += values
    item_error = f"{np.median(pooled['item-level']):.3f}" if pooled["item-level"] else "-"
    lines.append(
        f"| all, pooled | | {np.median(pooled['model']):.3f} / {np.median(pooled['run alone']):.3f} / {item_error} | "
        f"{np.mean(pooled['covered']):.3f} | |"
    )
    print(lines[-1], flush=True)
    return lines


def held_out_predictions(cells: pd.DataFrame, axes: list[str]) -> pd.DataFrame:
    """Per benchmark and axis of `axes`, each value held out in turn: P(A ahead) at each of its configs for every
    pair, predicted from the other values' configs as a value never run (grid_model.new_value_draws), beside whether
    A is ahead there, the majority rule (the verdict of most configs run: 1, 0, or 0.5 at a tie) and the share of
    the configs run where A is ahead."""
    rows = []
    for benchmark, frame in cells.groupby("benchmark", sort=False):
        present = axes_of(frame)
        space = search_space(frame, present)
        resolution = frame.drop_duplicates("config_id").set_index("config_id").eval("n_items * n_seeds")
        grid = score_matrix(frame, benchmark).loc[space.index]
        for axis in [a for a in axes if a in present]:
            for value in space[axis].unique():
                held = space[axis] == value
                new = space[held].assign(**{axis: NEW_VALUE})
                rng = np.random.default_rng(zlib.crc32(f"{benchmark}/{axis}/{value}".encode()))
                for a, b in itertools.combinations(grid.columns, 2):
                    difference = grid[a] - grid[b]
                    seen = difference[~held]
                    drawn = new_value_draws(space[~held], seen, new, rng, 1.0 / resolution[new.index].to_numpy())
                    ahead, behind = (seen > 0).sum(), (seen < 0).sum()
                    for k, config in enumerate(new.index):
                        rows.append(
                            {
                                "benchmark": benchmark,
                                "axis": axis,
                                "p": float((drawn[:, k] > 0).mean()),
                                "majority": 1.0 if ahead > behind else 0.0 if behind > ahead else 0.5,
                                "share": ahead / len(seen),
                                "outcome": float(difference[config] > 0),
                            }
                        )
    return pd.DataFrame(rows)


def calibration_lines(table: pd.DataFrame, group: str) -> list[str]:
    """Brier scores per (axis, `group`) and over all, and a reliability table per axis, of `held_out_predictions`."""
    lines = [
        f"| axis | {group} | predictions | Brier: model / majority rule / share run | A ahead: predicted / observed |",
        "|---|---|---|---|---|",
    ]
    parts = [
        *table.groupby(["axis", group], sort=False),
        *(((a, "all"), t) for a, t in table.groupby("axis", sort=False)),
    ]
    for (axis, name), part in parts:
        brier = [((part[c] - part["outcome"]) ** 2).mean() for c in ("p", "majority", "share")]
        lines.append(
            f"| {axis} | {name} | {len(part)} | {brier[0]:.3f} / {brier[1]:.3f} / {brier[2]:.3f} | "
            f"{part['p'].mean():.3f} / {part['outcome'].mean():.3f} |"
        )
    lines += [
        "",
        "| axis | predicted P(A ahead) | predictions | mean predicted | observed share |",
        "|---|---|---|---|---|",
    ]
    for axis, mine in table.groupby("axis", sort=False):
        bins = pd.cut(mine["p"], np.linspace(0, 1, 6), include_lowest=True)
        for interval, part in mine.groupby(bins, observed=True):
            lines.append(
                f"| {axis} | {interval} | {len(part)} | {part['p'].mean():.3f} | {part['outcome'].mean():.3f} |"
            )
    print("\n".join(lines), flush=True)
    return lines


def settle_replicate(scenario: Scenario, space: pd.DataFrame, items: int, share: float, seed: int) -> dict:
    """One synthetic grid, `share` of its configs run at random: whether the verdict (who is ahead in more configs)
    is settled, and if not, how many more configs `configs_to_settle` says would settle it (median, 25th and 75th
    percentiles); then, for each of the three, that many more of the grid's configs in a random order, and whether
    they settled it; and whether a verdict settled is the grid's."""
    rng = np.random.default_rng(seed)
    grid = draw_grid(scenario, space, items, rng)
    resolution = pd.Series([items * (1 if d == "greedy" else SEEDS) for d in space["decoding"]], index=space.index)
    order = list(rng.permutation(space.index))
    n_run = round(share * len(space))
    differences = grid["A"] - grid["B"]
    steps = lattice_steps(space, resolution, pd.concat([grid.loc[order[:n_run], "A"], grid.loc[order[:n_run], "B"]]))
    margin = np.subtract(*leads(differences.to_numpy()[None, :]))  # the grid's verdict: 1, -1 or 0 (a tie)

    def verdict(n: int) -> tuple[bool, bool]:
        """Whether the first n configs settle the verdict, and whether it is then the grid's."""
        shares = leads(on_lattice(centred_draws(space, differences.loc[order[:n]], DRAWS, rng), steps, -1.0))
        return settled(shares, LEVEL), np.sign(shares[0] - shares[1]) == margin

    now, right = verdict(n_run)
    row = {"settled": now, "right": right if now else math.nan}
    if not now:
        counts = dict(
            zip(("median", "low", "high"), configs_to_settle(space, differences.loc[order[:n_run]], rng, steps))
        )
        row |= {f"more_{name}": count for name, count in counts.items()}
        for name, count in counts.items():
            row[f"settled_{name}"], right = verdict(n_run + int(count)) if not math.isnan(count) else (math.nan, False)
            if name == "median" and row[f"settled_{name}"] is True:
                row["right"] = right
    return row


def settle_lines(space: pd.DataFrame, items: int, share: float, replicates: int, first_seed: int) -> list[str]:
    """The table of `settle_replicate` over every scenario (the layout of docs/estimation.md's)."""
    seeds = f"{first_seed}-{first_seed + replicates - 1}"
    lines = [
        f"{replicates} replicates a scenario, {round(share * len(space))} of {len(space)} configs run at random.",
        "",
        "| scenario | seeds | verdict settled from the configs run | not settled: more configs, median of the "
        "medians (25th / 75th percentiles) | not even by every config | settled after the median / 25th / 75th "
        "percentile's count | verdicts settled that are the grid's |",
        "|---|---|---|---|---|---|---|",
    ]
    for scenario in SCENARIOS:
        rows = pd.DataFrame(settle_replicate(scenario, space, items, share, first_seed + k) for k in range(replicates))
        unsettled = rows[~rows["settled"]]
        after = [unsettled[f"settled_{name}"].dropna().astype(bool).mean() for name in ("median", "low", "high")]
        right = rows["right"].dropna().astype(bool)
        lines.append(
            f"| {scenario.name} | {seeds} | {rows['settled'].mean():.3f} | {unsettled['more_median'].median():.0f} "
            f"({unsettled['more_low'].median():.0f} / {unsettled['more_high'].median():.0f}) | "
            f"{unsettled['more_median'].isna().mean():.3f} | {' / '.join(f'{a:.3f}' for a in after)} "
            f"(of {len(unsettled)}) | {right.mean():.3f} (of {len(right)}) |"
        )
        print(lines[-1], flush=True)
    return lines


def synthetic_cells(space: pd.DataFrame, items: int, replicates: int, first_seed: int) -> pd.DataFrame:
    """Every scenario's grids, `replicates` each, as one cells table: benchmark '<scenario> #<k>'."""
    frames = []
    for scenario in SCENARIOS:
        for k in range(replicates):
            grid = draw_grid(scenario, space, items, np.random.default_rng(first_seed + k))
            long = grid.rename_axis("config_id").reset_index().melt("config_id", var_name="model", value_name="score")
            long = long.merge(space, left_on="config_id", right_index=True)
            seeds = np.where(long["decoding"] == "greedy", 1, SEEDS)
            frames.append(long.assign(benchmark=f"{scenario.name} #{k}", n_items=items, n_seeds=seeds))
    return pd.concat(frames, ignore_index=True)


def coverage_lines(
    space: pd.DataFrame, items: int, share: float, replicates: int, first_seed: int, rounds: int
) -> list[str]:
    """The coverage table: per scenario, `replicates` grids with `share` of the configs run (at random, or in rounds
    of `rounds`)."""
    lines = [
        f"{replicates} replicates a scenario, {round(share * len(space))} of {len(space)} configs run, "
        f"{items} items, 90% intervals, seeds from {first_seed}, configs chosen "
        f"{f'in rounds of {rounds}' if rounds else 'at random'}.",
        "",
        "| scenario | rho_flip covered | rho_flip interval width (median) | rho_flip error, model (median) | "
        "rho_flip error, configs run alone (median) | quantiles covered: 5 / 25 / 50 / 75 / 95% (both models) | "
        "W1, model / configs run alone / oracle (median) |",
        "|---|---|---|---|---|---|---|",
    ]
    for scenario in SCENARIOS:
        rows = pd.DataFrame(replicate(scenario, space, items, share, first_seed + k, rounds) for k in range(replicates))
        quantile_cover = [np.r_[rows[f"A_q{q}_covered"], rows[f"B_q{q}_covered"]].mean() for q in QUANTILES]
        w1 = [np.median(np.r_[rows[f"A_w1{kind}"], rows[f"B_w1{kind}"]]) for kind in ("", "_run", "_oracle")]
        lines.append(
            f"| {scenario.name} | {rows['rho_covered'].mean():.3f} | {rows['rho_width'].median():.3f} | "
            f"{rows['rho_error'].median():.3f} | {rows['rho_error_run'].median():.3f} | "
            f"{' / '.join(f'{c:.3f}' for c in quantile_cover)} | "
            f"{' / '.join(f'{w:.4f}' for w in w1)} |"
        )
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--share", type=float, default=0.25, help="share of the 48 configs run")
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--first-seed", type=int, default=0, help="replicate k draws with seed first-seed + k")
    parser.add_argument("--out", help="also write the table here (Markdown)")
    parser.add_argument("--cells", help="a full grid's cells table: measure on it instead of synthetic grids")
    parser.add_argument(
        "--item-rows", help="with --cells: the grid's items.parquet, for the item-level (PromptEval-style) fit"
    )
    parser.add_argument(
        "--held-out-axes",
        help="hold out each value of these axes (comma-separated) in turn and score the predicted P(A ahead) there "
        "(on --cells, or on --replicates synthetic grids a scenario)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=0,
        help="choose the configs in rounds of this many, as a budgeted run does (default 0: at random)",
    )
    parser.add_argument(
        "--settle",
        action="store_true",
        help="measure how many more configs settle a verdict not settled (configs_to_settle) against the grid",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="compare the W1 errors with the posterior under the grid's own generating model (posterior_floor_w1)",
    )
    args = parser.parse_args()
    space = envelope()
    if args.floor:
        lines = floor_lines(space, args.items, args.share, args.replicates, args.first_seed)
    elif args.settle:
        lines = settle_lines(space, args.items, args.share, args.replicates, args.first_seed)
    elif args.held_out_axes:
        axes = args.held_out_axes.split(",")
        if args.cells:
            lines = calibration_lines(held_out_predictions(pd.read_parquet(args.cells), axes), "benchmark")
        else:
            table = held_out_predictions(synthetic_cells(space, args.items, args.replicates, args.first_seed), axes)
            lines = calibration_lines(table.assign(scenario=table["benchmark"].str.split(" #").str[0]), "scenario")
    elif args.cells:
        items = pd.read_parquet(args.item_rows) if args.item_rows else None
        lines = real_grid(pd.read_parquet(args.cells), args.share, args.replicates, items)
    else:
        lines = coverage_lines(space, args.items, args.share, args.replicates, args.first_seed, args.rounds)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
