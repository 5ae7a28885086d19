"""A model of the grid: rho_flip and each model's score quantiles over an envelope, from some of its cells, with
intervals (docs/estimation.md).

A config's score is modelled as additive in its axis values: y(c) = intercept + one effect per (axis, value) of c
+ noise, by Bayesian linear regression with the conjugate normal-inverse-gamma prior (Murphy 2012, *Machine
Learning*, section 7.6.3): effects ~ N(0, sigma^2 g I), sigma^2 ~ InvGamma(a0, b0); sigma^2 is what the axes do not
explain (interactions, items, seeds). The estimates average over g (EFFECT_VARIANCES, weighed by their evidence)
and fit the values less the mean of the configs run. The posterior is in closed form, so draws cost a matrix
product (numpy) and no sampler. A pair's verdicts are modelled on the score difference d(c) = score_A(c) - score_B(c), fitted on the
configs both models ran: the model-by-axis interactions that move a verdict are the difference's own axis
effects. A model's score quantiles are modelled on its own scores.

Each posterior draw fills in the configs not run (the configs run keep their scores, which are exact for this
envelope's items and seeds) and rounds the filled-in values to the scores' lattice where the scores have one (a
mean over n items of 0/1 outcomes and s seeds is a multiple of 1/(n s)), so a drawn config can tie as a run one
can. rho_flip and the quantiles are computed on every draw; the estimate is the draws' median and the interval
their central `level` share. The finite population is the envelope's configs: with every config run, the
interval is the exact value.

The audit (safetyrepro.audit) chooses its next config with `predictive_draws` at one scale (PRIOR_EFFECT_VARIANCE),
uncentred, as its calibration was measured.
"""

from __future__ import annotations

import itertools
import json
import math
import zlib
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from safetyrepro.analysis.flips import rho_of_signs, score_matrix, signs
from safetyrepro.core.config_id import Config

# The prior, on the 0-1 score scale: residual sd about 0.07 a priori (b0 / (a0 - 1) = 0.005), effects
# and intercept with twice the residual's sd.
PRIOR_SHAPE, PRIOR_RATE, PRIOR_EFFECT_VARIANCE = 2.0, 0.005, 4.0
# The estimates average over the effects' scale (g = effect variance / residual variance): effects from a quarter of
# the residual's sd to 16 times it.
EFFECT_VARIANCES = tuple(4.0**k for k in range(-2, 5))
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
LEVEL = 0.90
DRAWS = 2000
# configs_to_settle: the posterior futures it draws, and the draws of each refit (a share near (1 + LEVEL) / 2 is
# known to about 0.01 from 400)
SETTLE_FUTURES, SETTLE_DRAWS = 100, 400
RHO_ESTIMATE_COLUMNS = [
    "benchmark",
    "model_a",
    "model_b",
    "n_run",
    "n_configs",
    "rho_flip",
    "rho_flip_low",
    "rho_flip_high",
    "rho_flip_run",
    "p_a_leads",
    "p_b_leads",
    "configs_to_settle",
    "configs_to_settle_low",
    "configs_to_settle_high",
]
NEW_VALUE = "(new)"  # a value of an axis that no config ran (`new_value_draws`): no value can be named so
NEW_VALUE_COLUMNS = [
    "benchmark",
    "model_a",
    "model_b",
    "axis",
    "n_values",
    "share_a_ahead",
    "share_a_ahead_low",
    "share_a_ahead_high",
    "p_a_ahead",
    "p_b_ahead",
]
INTERACTIONS = "interactions"  # axis_variances: what the additive axes leave
VARIANCE_COLUMNS = ["benchmark", "of", "n_run", "component", "variance", "low", "high"]
QUANTILE_ESTIMATE_COLUMNS = ["benchmark", "model", "quantile", "n_run", "n_configs", "score", "low", "high", "run"]


def search_space(rows: pd.DataFrame, axes: Sequence[str]) -> pd.DataFrame:
    """The configs of cell rows, in order (the audit's first is its reference): config id -> one column per axis."""
    return rows.drop_duplicates("config_id").set_index("config_id")[list(axes)].astype(str)


def space_of(configs: list[Config]) -> pd.DataFrame:
    """An envelope's configs as the model reads them: config id -> one column per axis that takes more than one
    value."""
    rows = pd.DataFrame([{"config_id": c.config_id, **dict(c.values)} for c in configs])
    return search_space(rows, [axis for axis in rows.columns[1:] if rows[axis].nunique() > 1])


def indicators(space: pd.DataFrame) -> pd.DataFrame:
    """One 0/1 column per (axis, value) of `space`'s configs, named (axis, value), values in sorted order: the
    features after the intercept."""
    return pd.concat({axis: pd.get_dummies(space[axis], dtype=float) for axis in space.columns}, axis=1)


def features(space: pd.DataFrame) -> np.ndarray:
    """Intercept plus one indicator per (axis, value): configs x features (the intercept alone without axes)."""
    intercept = np.ones((len(space), 1))
    return np.hstack([intercept, indicators(space).to_numpy()]) if len(space.columns) else intercept


def _posterior(x_run: np.ndarray, y: np.ndarray, effect_variance: float) -> tuple:
    """The normal-inverse-gamma posterior (mean, covariance, shape, rate) with effects ~ N(0, sigma^2 g I), g =
    `effect_variance`, and the log evidence of y under it (Murphy 2012, equation 7.73)."""
    precision = np.eye(x_run.shape[1]) / effect_variance + x_run.T @ x_run
    covariance = np.linalg.inv(precision)
    mean = covariance @ x_run.T @ y
    shape = PRIOR_SHAPE + len(y) / 2
    rate = PRIOR_RATE + 0.5 * max(float(y @ y - mean @ precision @ mean), 0.0)
    log_evidence = (
        0.5 * np.linalg.slogdet(covariance)[1]
        - 0.5 * x_run.shape[1] * math.log(effect_variance)
        + PRIOR_SHAPE * math.log(PRIOR_RATE)
        - shape * math.log(rate)
        + math.lgamma(shape)
        - math.lgamma(PRIOR_SHAPE)
    )
    return mean, covariance, shape, rate, log_evidence


def predictive_draws(
    space: pd.DataFrame,
    observed: pd.Series,
    draws: int,
    rng: np.random.Generator,
    effect_variances: tuple[float, ...] = (PRIOR_EFFECT_VARIANCE,),
) -> np.ndarray:
    """Draws of every config's observed value (draws x configs) from the posterior given `observed` (config id ->
    value); run configs keep their observed value. With several `effect_variances` (g, the effects' variance over
    the residual's), g is drawn too, from its posterior under a uniform prior over the values given (Bayesian model
    averaging: the data say how large the axes' effects are)."""
    x, run, y, fits, chosen = _fits(space, observed, draws, rng, effect_variances)
    predicted = np.empty((draws, len(space)))
    for rows, variance, effects in _parameter_draws(fits, chosen, rng):
        noise = np.sqrt(variance)[:, None] * rng.standard_normal((len(rows), len(space)))
        predicted[rows] = effects @ x.T + noise
    predicted[:, run] = y
    return predicted


def _fits(space: pd.DataFrame, observed: pd.Series, draws: int, rng: np.random.Generator, effect_variances) -> tuple:
    """The features, the configs run's rows, their values, the posterior at each g of `effect_variances`, and which
    g each draw takes (drawn by the evidence with more than one)."""
    x = features(space)
    run = space.index.get_indexer(observed.index)
    if (run < 0).any():
        raise ValueError(f"config(s) run outside the space searched: {list(observed.index[run < 0])}")
    x_run, y = x[run], observed.to_numpy(float)
    fits = [_posterior(x_run, y, g) for g in effect_variances]
    if len(fits) == 1:
        return x, run, y, fits, np.zeros(draws, dtype=int)
    evidence = np.array([fit[4] for fit in fits])
    weights = np.exp(evidence - evidence.max())
    return x, run, y, fits, rng.choice(len(fits), size=draws, p=weights / weights.sum())


def _parameter_draws(fits: list[tuple], chosen: np.ndarray, rng: np.random.Generator) -> Iterator[tuple]:
    """Per g drawn: the draws' rows, sigma^2 ~ InvGamma(shape, rate) and the effects given sigma^2."""
    for k, (mean, covariance, shape, rate, _) in enumerate(fits):
        rows = np.flatnonzero(chosen == k)
        if not len(rows):
            continue
        variance = rate / rng.gamma(shape, size=len(rows))
        root = np.linalg.cholesky(covariance + 1e-12 * np.eye(len(covariance)))
        yield rows, variance, mean + np.sqrt(variance)[:, None] * (rng.standard_normal((len(rows), len(mean))) @ root.T)


def centred_draws(space: pd.DataFrame, observed: pd.Series, draws: int, rng: np.random.Generator) -> np.ndarray:
    """`predictive_draws` averaged over the effects' scale (EFFECT_VARIANCES), of the values less their mean (added
    back): the prior shrinks effects toward the configs run, not toward a score of 0."""
    centre = float(observed.mean())
    return centre + predictive_draws(space, observed - centre, draws, rng, EFFECT_VARIANCES)


def lattice_steps(space: pd.DataFrame, resolution: pd.Series | None, run: pd.Series) -> np.ndarray | None:
    """Each config's lattice step, 1 / resolution (`resolution`: config id -> items x seeds), where every score
    run (`run`: config id -> score) times its config's resolution is a whole number; None otherwise (a continuous
    metric, or no resolution given)."""
    if resolution is None:
        return None
    units = resolution.reindex(space.index).to_numpy(float)
    counts = run.to_numpy(float) * resolution.reindex(run.index).to_numpy(float)
    if np.isnan(units).any() or not np.allclose(counts, np.round(counts), atol=1e-6):
        return None
    return 1.0 / units


def on_lattice(draws: np.ndarray, steps: np.ndarray | None, lowest: float = 0.0) -> np.ndarray:
    """Draws (draws x configs) rounded to each config's lattice step and kept within what a share of counts can be
    (`lowest` to 1: 0 for a score, -1 for the difference of two); unchanged without steps."""
    return draws if steps is None else np.clip(np.round(draws / steps) * steps, lowest, 1.0)


def draw_signs(differences: np.ndarray) -> np.ndarray:
    """+1 / -1 / 0 (a tie) of each score difference (draws x configs): A ahead, B ahead, as `flips.signs` decides."""
    return signs(pd.DataFrame(differences), 0.0).to_numpy()


def rho_flips(differences: np.ndarray) -> np.ndarray:
    """rho_flip = min(N+, N-) / |C| of each row of score differences (draws x configs), ties as
    `flips.signs` has them."""
    return rho_of_signs(draw_signs(differences))


def pair_differences(
    matrix: pd.DataFrame, space: pd.DataFrame, resolution: pd.Series | None
) -> Iterator[tuple[str, str, pd.Series, np.ndarray | None]]:
    """Every model pair of a score matrix (config id -> one column per model): A, B, A's score less B's on the
    configs both ran, and the lattice steps over `space` of both models' scores run (their difference is on it)."""
    for model_a, model_b in itertools.combinations(matrix.columns, 2):
        pair = matrix[[model_a, model_b]].dropna()
        steps = lattice_steps(space, resolution, pd.concat([pair[model_a], pair[model_b]]))
        yield model_a, model_b, pair[model_a] - pair[model_b], steps


def central(values: np.ndarray, level: float) -> tuple[float, float, float]:
    """(median, low, high) of draws: the central `level` share."""
    low, median, high = np.quantile(values, [(1 - level) / 2, 0.5, (1 + level) / 2], axis=0)
    return float(median), float(low), float(high)


def leads(differences: np.ndarray) -> tuple[float, float]:
    """The share of draws (rows of score differences, draws x configs) where A is ahead in more configs than B is
    (A leads the envelope's verdict), and where B is."""
    margin = draw_signs(differences).sum(axis=1)
    return float((margin > 0).mean()), float((margin < 0).mean())


def settled(shares: tuple[float, float], level: float) -> bool:
    """Whether `leads`' shares settle which model leads: one does in a share (1 + level) / 2 of the draws or more
    (the `level` interval of the margin excludes a tie)."""
    return max(shares) >= (1 + level) / 2


def configs_to_settle(
    space: pd.DataFrame,
    difference: pd.Series,
    rng: np.random.Generator,
    steps: np.ndarray | None = None,
    level: float = LEVEL,
    futures: int = SETTLE_FUTURES,
    draws: int = SETTLE_DRAWS,
) -> tuple[float, float, float]:
    """How many more configs, chosen at random among those not run, settle a pair's verdict (`settled`) that is not
    settled now: the median over `futures`, and the 25th and 75th percentiles. A future is a posterior draw of the
    configs not run, taken as their truth, an order to run them in, and the random numbers of its fits; its count
    is the least number of its configs that settles the verdict, by bisection (infinite where its truth is a tie:
    then no number does). A percentile that falls on an infinite count is NaN."""
    rest = np.flatnonzero(~space.index.isin(difference.index))
    truths = on_lattice(centred_draws(space, difference, futures, rng), steps, lowest=-1.0)
    counts = []
    orders, seeds = [rng.permutation(rest) for _ in truths], rng.integers(2**63, size=futures)
    for truth, order, seed in zip(truths, orders, seeds, strict=True):

        def settles(k: int, truth=truth, order=order, seed=seed) -> bool:
            observed = pd.concat([difference, pd.Series(truth[order[:k]], index=space.index[order[:k]])])
            drawn = on_lattice(centred_draws(space, observed, draws, np.random.default_rng(seed)), steps, -1.0)
            return settled(leads(drawn), level)

        if max(leads(truth[None, :])) == 0:  # every config run leaves a tie
            counts.append(math.inf)
            continue
        low, high = 0, len(rest)
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if settles(middle) else (middle, high)
        counts.append(high)
    quartiles = np.quantile(counts, [0.5, 0.25, 0.75], method="inverted_cdf")
    return tuple(float(q) if np.isfinite(q) else math.nan for q in quartiles)


def estimate_pair(
    space: pd.DataFrame,
    difference: pd.Series,
    rng: np.random.Generator,
    steps: np.ndarray | None = None,
    draws: int = DRAWS,
    level: float = LEVEL,
) -> dict:
    """rho_flip over `space`'s configs from the score differences of the configs run (config id -> d), with its
    interval, and rho_flip of the configs run alone (the naive estimate); and the chance that A leads the
    envelope's verdict (ahead in more configs), and that B does; all n/a (NaN) where no config ran."""
    if difference.empty:
        return {"n_run": 0, "n_configs": len(space)} | dict.fromkeys(
            ["rho_flip", "rho_flip_low", "rho_flip_high", "rho_flip_run", "p_a_leads", "p_b_leads"], math.nan
        )
    drawn = on_lattice(centred_draws(space, difference, draws, rng), steps, lowest=-1.0)
    estimate, low, high = central(rho_flips(drawn), level)
    a_leads, b_leads = leads(drawn)
    return {
        "n_run": len(difference),
        "n_configs": len(space),
        "rho_flip": estimate,
        "rho_flip_low": low,
        "rho_flip_high": high,
        "rho_flip_run": float(rho_flips(difference.to_numpy(float)[None, :])[0]),
        "p_a_leads": a_leads,
        "p_b_leads": b_leads,
    }


def estimate_quantiles(
    space: pd.DataFrame,
    scores: pd.Series,
    rng: np.random.Generator,
    steps: np.ndarray | None = None,
    draws: int = DRAWS,
    level: float = LEVEL,
) -> list[dict]:
    """A model's score quantiles (QUANTILES) over `space`'s configs from the scores of the configs run, with
    intervals, and the quantiles of the configs run alone (the naive estimate); n/a (NaN) where no config ran."""
    if scores.empty:
        return [{"quantile": q} | dict.fromkeys(QUANTILE_ESTIMATE_COLUMNS[5:], math.nan) for q in QUANTILES]
    drawn = on_lattice(centred_draws(space, scores, draws, rng), steps)
    over_configs = np.quantile(drawn, QUANTILES, axis=1)  # quantiles x draws
    run = np.quantile(scores.to_numpy(float), QUANTILES)
    rows = []
    for q, values, naive in zip(QUANTILES, over_configs, run, strict=True):
        estimate, low, high = central(values, level)
        rows.append({"quantile": q, "score": estimate, "low": low, "high": high, "run": float(naive)})
    return rows


def effect_draws(space: pd.DataFrame, observed: pd.Series, draws: int, rng: np.random.Generator) -> tuple:
    """Posterior draws of the effects (draws x features of `features(space)`) and of sigma^2 (draws), fitted as
    `centred_draws` fits (over EFFECT_VARIANCES, on the values less their mean)."""
    _, _, _, fits, chosen = _fits(space, observed - float(observed.mean()), draws, rng, EFFECT_VARIANCES)
    effects, variance = np.empty((draws, len(fits[0][0]))), np.empty(draws)
    for rows, sigma2, drawn in _parameter_draws(fits, chosen, rng):
        effects[rows], variance[rows] = drawn, sigma2
    return effects, variance


def axis_variances(
    space: pd.DataFrame, observed: pd.Series, rng: np.random.Generator, draws: int = DRAWS, level: float = LEVEL
) -> list[dict]:
    """How much each axis moves a value over `space`'s configs, from the values of the configs run (config id ->
    value: a model's score, or a pair's difference, whose axis effects are the model-by-axis interactions): the
    variance over the envelope's configs of the axis's effect, and sigma^2, the variance the axes leave (their
    interactions), each the posterior median with its `level` interval. An axis the configs run take one value of
    is n/a (NaN): only the prior would speak for it. With every config run, the least-squares split of the
    envelope's values, exact."""
    if len(observed) == len(space):
        x, y = features(space), observed.reindex(space.index).to_numpy(float)
        fit = np.linalg.lstsq(x, y, rcond=None)[0]
        effects, sigma2 = fit[None, :], np.array([np.mean((y - x @ fit) ** 2)])
    else:
        effects, sigma2 = effect_draws(space, observed, draws, rng)
    keys = ("component", "variance", "low", "high")
    columns = indicators(space)
    of_axis = columns.columns.get_level_values(0)
    rows = []
    for axis in space.columns:
        if space.loc[observed.index, axis].nunique() < 2:
            rows.append(dict(zip(keys, (axis, math.nan, math.nan, math.nan))))
            continue
        mine = of_axis == axis
        per_config = effects[:, 1:][:, mine] @ columns.loc[:, mine].to_numpy().T  # draws x configs
        rows.append(dict(zip(keys, (axis, *central(per_config.var(axis=1), level)))))
    return [*rows, dict(zip(keys, (INTERACTIONS, *central(sigma2, level))))]


def sampling_variances(
    weights: dict[str, float], configs: Sequence[str], seed_scores: pd.Series, items: pd.DataFrame | None
) -> dict[str, float]:
    """What chance gives a config's value, averaged over `configs`: the value is the sum of `weights` (model ->
    weight: {A: 1} for a model's score, {A: 1, B: -1} for a pair's difference) times the models' scores, paired
    item by item and seed by seed. items: the variance over the config's items of an item's value (each model's
    outcome at it, averaged over seeds) over their number, how far another draw of as many items would move the
    value (NaN without item rows: `items`, with model, config_id, item_id and correct); seeds: the variance over
    seeds of a seed's value over their number, on configs of two seeds or more (NaN with none), from
    `seed_scores` (model and config_id -> seed -> score)."""
    seeds = []
    for config in configs:
        per_model = [seed_scores[(model, config)] for model in weights]
        shared = sorted(set.intersection(*map(set, per_model)))
        if len(shared) > 1:
            values = [sum(w * scores[s] for w, scores in zip(weights.values(), per_model)) for s in shared]
            seeds.append(np.var(values, ddof=1) / len(shared))
    chance = {"items": math.nan, "seeds": float(np.mean(seeds)) if seeds else math.nan}
    if items is not None:
        mine = items[items["model"].isin(list(weights)) & items["config_id"].isin(configs)]
        outcomes = mine.groupby(["config_id", "item_id", "model"])["correct"].mean().unstack("model")
        value = sum(w * outcomes[model] for model, w in weights.items()).dropna()
        per_config = [np.var(v, ddof=1) / len(v) for _, v in value.groupby(level="config_id") if len(v) > 1]
        chance["items"] = float(np.mean(per_config)) if per_config else math.nan
    return chance


def new_value_draws(
    space: pd.DataFrame,
    observed: pd.Series,
    new: pd.DataFrame,
    rng: np.random.Generator,
    steps: np.ndarray | None = None,
    lowest: float = -1.0,
    draws: int = DRAWS,
) -> np.ndarray:
    """Posterior draws (draws x configs of `new`) of the value at configs that take a value of an axis that no config
    of `space` takes (`new`: config id -> axis values, like `space`'s), fitted on `observed` (config id -> value, of
    configs of `space`). The new value's effect is drawn from the effects' prior, N(0, sigma^2 g), with sigma^2 and
    g from their posterior: the axis's values are taken as draws from one population (a template's wording, a
    few-shot draw), and the new value as one more. `steps` puts the draws on `new`'s lattice."""
    drawn = centred_draws(pd.concat([space, new]), observed, draws, rng)[:, len(space) :]
    return on_lattice(drawn, steps, lowest)


def estimate_new_value(
    space: pd.DataFrame,
    difference: pd.Series,
    axis: str,
    rng: np.random.Generator,
    steps: pd.Series | None = None,
    draws: int = DRAWS,
    level: float = LEVEL,
    acting: Sequence[str] | None = None,
) -> dict:
    """How a pair's verdict carries to a value of `axis` never run (a new template, a new few-shot draw): the share
    of the new value's configs (those of the axis's value with the most configs among `acting`, the configs where
    the axis changes anything (all where None), the axis set to the new value) where A scores above B, its
    posterior median and interval, and P(A ahead), P(B ahead) at one such config, from the score differences of
    the configs run (config id -> d), and how many of the axis's values they take where it acts; `steps` (config
    id -> lattice step)."""
    acts = space if acting is None else space[space.index.isin(acting)]
    like = acts[acts[axis] == acts[axis].value_counts().index[0]]
    new = like.assign(**{axis: NEW_VALUE}).set_axis([f"{c}@{NEW_VALUE}" for c in like.index])
    units = None if steps is None else steps.reindex(like.index).to_numpy(float)
    ahead = draw_signs(new_value_draws(space, difference, new, rng, units, draws=draws))
    estimate, low, high = central((ahead > 0).mean(axis=1), level)
    return {
        "axis": axis,
        "n_values": int(acts.loc[acts.index.intersection(difference.index), axis].nunique()),
        "share_a_ahead": estimate,
        "share_a_ahead_low": low,
        "share_a_ahead_high": high,
        "p_a_ahead": float((ahead > 0).mean()),
        "p_b_ahead": float((ahead < 0).mean()),
    }


def _generator(seed: int, *names: str) -> np.random.Generator:
    """The draws' generator of one estimate, named by its benchmark and models: the same in any process, and a
    model's estimates do not change when another model joins the table."""
    return np.random.default_rng([seed, *(zlib.crc32(name.encode()) for name in names)])


def estimate_grid(
    cells: pd.DataFrame,
    spaces: dict[str, pd.DataFrame],
    resolutions: dict[str, pd.Series] | None = None,
    seed: int = 0,
    draws: int = DRAWS,
    level: float = LEVEL,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per benchmark of `spaces` (benchmark -> its envelope's configs: config id -> one column per axis), rho_flip
    for every model pair, who leads its verdict and how many more configs would settle it, and each model's score
    quantiles, from the cells run (`cells`: the cells table's
    columns model, benchmark, config_id, score); `resolutions` (benchmark -> config id -> items x seeds) puts the
    filled-in scores on the lattice of the scores run."""
    rho_rows, quantile_rows = [], []
    for benchmark, space in spaces.items():
        resolution = (resolutions or {}).get(benchmark)
        matrix = score_matrix(cells, benchmark)  # models in their order of appearance
        for model in matrix.columns:
            scores = matrix[model].dropna()
            steps = lattice_steps(space, resolution, scores)
            rng = _generator(seed, benchmark, model)
            for row in estimate_quantiles(space, scores, rng, steps, draws, level):
                quantile_rows.append(
                    {"benchmark": benchmark, "model": model, "n_run": len(scores), "n_configs": len(space), **row}
                )
        for model_a, model_b, difference, steps in pair_differences(matrix, space, resolution):
            rng = _generator(seed, benchmark, model_a, model_b)
            estimate = estimate_pair(space, difference, rng, steps, draws, level)
            shares = estimate["p_a_leads"], estimate["p_b_leads"]
            more = (
                (math.nan,) * 3
                if difference.empty
                else (0.0,) * 3
                if settled(shares, level)
                else configs_to_settle(space, difference, rng, steps, level)
            )
            settle = dict(zip(RHO_ESTIMATE_COLUMNS[-3:], more, strict=True))
            rho_rows.append({"benchmark": benchmark, "model_a": model_a, "model_b": model_b, **estimate, **settle})
    return (
        pd.DataFrame(rho_rows, columns=RHO_ESTIMATE_COLUMNS),
        pd.DataFrame(quantile_rows, columns=QUANTILE_ESTIMATE_COLUMNS),
    )


def estimate_new_values(
    cells: pd.DataFrame,
    spaces: dict[str, pd.DataFrame],
    axes: dict[str, dict[str, Sequence[str]]],
    resolutions: dict[str, pd.Series | None] | None = None,
    seed: int = 0,
    draws: int = DRAWS,
    level: float = LEVEL,
) -> pd.DataFrame:
    """Per benchmark of `spaces`, every model pair and axis of `axes` (benchmark -> each axis whose values are draws
    from a population -> the configs where it changes anything) with two values or more among the configs run
    where it acts: `estimate_new_value`, from the cells run."""
    rows = []
    for benchmark, space in spaces.items():
        matrix = score_matrix(cells, benchmark)
        resolution = (resolutions or {}).get(benchmark)
        for model_a, model_b, difference, steps in pair_differences(matrix, space, resolution):
            run = space.loc[difference.index]
            units = None if steps is None else pd.Series(steps, index=space.index)
            for axis, acting in axes.get(benchmark, {}).items():
                if axis not in space or run.loc[run.index.isin(acting), axis].nunique() < 2:
                    continue
                rng = _generator(seed, benchmark, model_a, model_b, axis)
                estimate = estimate_new_value(space, difference, axis, rng, units, draws, level, acting)
                rows.append({"benchmark": benchmark, "model_a": model_a, "model_b": model_b, **estimate})
    return pd.DataFrame(rows, columns=NEW_VALUE_COLUMNS)


def variance_components(
    cells: pd.DataFrame,
    spaces: dict[str, pd.DataFrame],
    items: pd.DataFrame | None = None,
    seed: int = 0,
    draws: int = DRAWS,
    level: float = LEVEL,
) -> pd.DataFrame:
    """Per benchmark of `spaces`, for each model's score and each pair's difference ("A - B": the model-by-config
    part), the variance each axis, their interactions, items and seeds give a config's value, from the cells run
    (the cells table's model, benchmark, config_id, score, seed_scores) and their item rows (`items`: model,
    benchmark, config_id, item_id, correct; without them, items are n/a): `axis_variances` and
    `sampling_variances`."""
    rows = []
    for benchmark, space in spaces.items():
        seed_scores = cells[cells["benchmark"] == benchmark].set_index(["model", "config_id"])["seed_scores"]
        seed_scores = seed_scores.map(json.loads)
        rows_of = None if items is None else items[items["benchmark"] == benchmark]
        matrix = score_matrix(cells, benchmark)
        values = [(model, {model: 1.0}, matrix[model].dropna()) for model in matrix.columns]
        values += [(f"{a} - {b}", {a: 1.0, b: -1.0}, d) for a, b, d, _ in pair_differences(matrix, space, None)]
        for of, weights, observed in values:
            if observed.empty:
                continue
            rng = _generator(seed, benchmark, "(variance)", *weights)  # no model has this name
            chance = sampling_variances(weights, list(observed.index), seed_scores, rows_of)
            parts = axis_variances(space, observed, rng, draws, level) + [
                {"component": name, "variance": variance, "low": math.nan, "high": math.nan}
                for name, variance in chance.items()
            ]
            rows += [{"benchmark": benchmark, "of": of, "n_run": len(observed), **part} for part in parts]
    return pd.DataFrame(rows, columns=VARIANCE_COLUMNS)
