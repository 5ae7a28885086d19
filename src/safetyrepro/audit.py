"""The auditor's search: run the configs of one benchmark for one model pair in an adaptive order and
stop at the first configuration that reverses the majority verdict, or when none is likely, or when
the budget is spent.

Two models, each for what it is good at (docs/audit.md):

- The majority verdict (the sign of N+ - N- over the envelope's configs, `flips.signs`: ties are their
  own outcome) and its probability rest on the configs run alone: the configs not run are modelled as
  exchangeable, each A better, B better or tied with probabilities ~ Dirichlet(CONFIG_PRIOR + the counts
  run), so their counts are Dirichlet-multinomial (`majority_posterior`). A verdict is stated once its
  probability is at least 1 - stop_probability (settled); until then it is "undecided after k of n
  configs". scripts/measure_audit_calibration.py measures its calibration on grids with known majorities, the
  adaptive order included (docs/audit.md gives the figures).
- Which config to run next is chosen with Bayesian linear regression of the pair's score difference
  d(c) = score_A(c) - score_B(c) on one-hot axis values (an intercept plus one effect per value of every
  axis), with the conjugate normal-inverse-gamma prior (Murphy 2012, *Machine Learning*, section 7.6.3):
  effects ~ N(0, sigma^2 V0), sigma^2 ~ InvGamma(a0, b0); sigma^2 is what the axes do not explain
  (`grid_model.predictive_draws`, the model the estimates from a budget use). The
  next config is the unrun one most likely to reverse the majority (the share of posterior draws on the
  reversing side: the probability of improvement, Kushner 1964, with zero as the threshold; ties go to
  the lower mean). Until the majority is settled after a reversal was seen, the next config is the unrun
  one whose predicted d is most uncertain. The same draws give the probability that any unrun config
  reverses the majority.

It stops with "reversal found" once a run config reverses a settled majority, with "no reversal likely"
once a settled majority has probability under `stop_probability` of any unrun config reversing it, with
"envelope run" once every config has run, and with "budget spent" when no config left fits the budget.
The budget counts the model cells the audit runs (`cells_to_run`): a cell already on disk, and a config
that relabels its generation twin's responses (a scorer axis) once the twin's cells are there, cost
nothing. The first config run is the envelope's first (`T1-greedy-0shot-freeform` in the paper's
envelope; with imports, the first in the table). The draws are made for the side the run configs favour,
so auditing (B, A) mirrors (A, B).

On the synthetic grids of tests/helpers/synthetic_audit.py (seeds 0-29, those used to choose the prior) this
choice needed fewer cells than Thompson sampling (one draw's most reversing config) at the same
success rate; scripts/measure_audit.py measures it against a random order on other seeds.

Every step is a pure function of the configs run so far, of the cells on disk and of (seed, step): a
rerun makes the same choices, and the cells it runs are the grid's ordinary cells. "No reversal likely"
is a statement of the additive model: a reversal confined to an interaction of axes that no run config
touches is invisible to it (the audit's report says so).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import dirichlet_multinomial

from safetyrepro.analysis.flips import minority_side, signs
from safetyrepro.analysis.grid_model import predictive_draws, search_space
from safetyrepro.analysis.significance import paired_tests
from safetyrepro.benchmarks import NAME, DataError
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.configuration.settings import AuditSettings, Settings, SignificanceSettings
from safetyrepro.core.messages import excerpt
from safetyrepro.results.aggregate import read_summary
from safetyrepro.results.storage import cell_file, read_design, read_parquet_checked

# The majority's prior: each outcome of a config (A better, B better, tie) has this Dirichlet concentration.
CONFIG_PRIOR = 1.0
CELLS_PER_CONFIG = 2  # model A's cell and model B's
# A model name that fits the audit's file names (results/audit/<benchmark>/<A>_vs_<B>.md); a run's models
# have such names (the config schema), imported ones may be renamed to one in the mapping file.
PLAIN_MODEL = NAME.pattern  # as plain as a benchmark's name (the workflow's wildcard for an imported model)
VERDICTS = {1: "A better", -1: "B better", 0: "no majority (as many configs favour A as B)"}
SIDES = {1: "A", -1: "B", 0: "tie"}  # what one config favours


@dataclass(frozen=True)
class Decision:
    """One step of the search: the config to run next (None: stop) and why, with the most probable majority
    verdict (+1: A better, -1: B better, 0: no majority), its probability, that of a reversal among the
    configs not run, and the model cells the chosen config needs run (`cells_to_run`)."""

    config_id: str | None
    reason: str
    majority: int
    p_majority: float
    p_reversal_left: float
    cells: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def observed_frame(runs: Sequence[dict]) -> pd.DataFrame:
    """The configs run, in run order, from a step record's `observed` list: config id -> score_a, score_b and
    cells_run (the model cells the audit ran for it)."""
    frame = pd.DataFrame(list(runs), columns=["config_id", "score_a", "score_b", "cells_run"])
    return frame.set_index("config_id").astype(float)


def majority_posterior(seen: pd.Series, n_configs: int) -> dict[int, float]:
    """The probability of each majority verdict over an envelope of `n_configs` (+1: N+ > N-, -1: N+ < N-,
    0: N+ = N-) given the run configs' signs `seen`: the configs not run are exchangeable, each A better,
    B better or tied with probabilities ~ Dirichlet(CONFIG_PRIOR + the counts seen), so their counts are
    Dirichlet-multinomial. It does not use the axes: it rests on the counts seen alone."""
    seen_counts = np.array([(seen > 0).sum(), (seen < 0).sum(), (seen == 0).sum()])
    left = n_configs - len(seen)
    plus, minus = (grid.ravel() for grid in np.meshgrid(np.arange(left + 1), np.arange(left + 1)))
    plus, minus = plus[plus + minus <= left], minus[plus + minus <= left]
    counts = np.stack([plus, minus, left - plus - minus], axis=1)
    probability = np.exp(dirichlet_multinomial.logpmf(counts, CONFIG_PRIOR + seen_counts, left))
    margin = np.sign(seen_counts[0] + plus - seen_counts[1] - minus)
    return {side: float(probability[margin == side].sum()) for side in (1, -1, 0)}


def leading(posterior: Mapping[int, float]) -> tuple[int, float]:
    """The most probable majority verdict and its probability (A and B equally probable: no majority)."""
    side = max(posterior, key=posterior.get)
    if side and posterior[side] == posterior[-side]:
        side = 0
    return side, posterior[side]


def generation_cells(config: str, generation: Mapping[str, str]) -> set[tuple[int, str]]:
    """The model cells a config reads, as (0: A's, 1: B's; the config that generates its responses)."""
    return {(slot, generation.get(config, config)) for slot in (0, 1)}


def cells_to_run(config: str, generation: Mapping[str, str], available: Iterable[tuple[int, str]]) -> int:
    """The model cells the audit must run for `config`: those it reads (`generation_cells`) that are not
    `available` (on disk, or run by the audit already)."""
    return len(generation_cells(config, generation) - set(available))


def reversing(seen: pd.Series, majority: int) -> pd.Series:
    """Run configs (their `flips.signs`) that reverse the majority: the other side of it, or with no
    majority (0) the minority side of each (`flips.minority_side`, both sides at N+ = N-)."""
    return seen == -majority if majority else minority_side(seen)


def model_cells(configs: Iterable[str], generation: Mapping[str, str]) -> int:
    """The cells the models run for `configs`: two per config, except that a config labelling another's
    responses (`generation`: such a config -> that twin; docs/scorers.md) runs its twin's, once."""
    return CELLS_PER_CONFIG * len({generation.get(config, config) for config in configs})


def decide(
    space: pd.DataFrame,
    observed: pd.DataFrame,
    options: AuditSettings,
    generation: Mapping[str, str] | None = None,
    on_disk: Iterable[tuple[int, str]] = (),
) -> Decision:
    """The next step given the configs run so far (`observed`: config id -> score_a, score_b, cells_run, in
    run order); `generation` maps the configs that label another's responses to it (`generation_twins`);
    `on_disk`: the model cells already there (`generation_cells`' form). The budget counts the cells the
    audit runs (`cells_to_run`)."""
    generation = generation or {}
    available = set(on_disk).union(*(generation_cells(c, generation) for c in observed.index))
    if observed.empty:
        first = str(space.index[0])
        return Decision(first, "reference", 0, math.nan, math.nan, cells_to_run(first, generation, available))
    seen = signs(observed["score_a"], observed["score_b"])
    majority, p_majority = leading(majority_posterior(seen, len(space)))
    # the draws are made for the side the run configs favour, so auditing (B, A) mirrors (A, B)
    orient = int(np.sign(seen.sum())) or 1
    rng = np.random.default_rng([options.seed, len(observed)])
    diff = observed["score_a"] - observed["score_b"]
    drawn = orient * predictive_draws(space, orient * diff, options.draws, rng)
    drawn_signs = signs(pd.DataFrame(drawn), 0.0).to_numpy()
    unrun = ~space.index.isin(observed.index)
    reversals = bool(reversing(seen, majority).any())
    p_left = float((drawn_signs[:, unrun] == -majority).any(axis=1).mean()) if majority and unrun.any() else 0.0
    settled = majority != 0 and p_majority >= 1 - options.stop_probability
    costs = np.array([cells_to_run(c, generation, available) for c in space.index])

    def decision(index: int | None, reason: str) -> Decision:
        config, cells = (None, 0) if index is None else (str(space.index[index]), int(costs[index]))
        return Decision(config, reason, majority, p_majority, p_left, cells)

    if settled and reversals:
        return decision(None, "reversal found")
    if not unrun.any():  # every config run: the verdict and its reversals are exact
        return decision(None, "envelope run")
    if settled and p_left < options.stop_probability:
        return decision(None, "no reversal likely")
    affordable = unrun & (observed["cells_run"].sum() + costs <= options.budget)
    if not affordable.any():
        return decision(None, "budget spent")
    candidates = np.flatnonzero(affordable)
    if reversals:  # a reversal seen, the majority not settled: learn most where the model knows least
        return decision(candidates[np.argmax(drawn[:, affordable].var(axis=0))], "confirm majority")
    toward = (majority or orient) * drawn[:, affordable]  # below zero: the draw reverses the verdict there
    best = np.lexsort((toward.mean(axis=0), -(toward < 0).mean(axis=0)))[0]
    return decision(candidates[best], "most likely to reverse")


def search(
    space: pd.DataFrame,
    observe: Callable[[str], tuple[float, float]],
    options: AuditSettings,
    generation: Mapping[str, str] | None = None,
    on_disk: Iterable[tuple[int, str]] = (),
) -> tuple[pd.DataFrame, list[Decision]]:
    """The whole search with `observe` giving a config's (score_a, score_b): the configs run and every step."""
    observed, on_disk = observed_frame([]), set(on_disk)
    steps = [decide(space, observed, options, generation, on_disk)]
    while steps[-1].config_id is not None:
        observed.loc[steps[-1].config_id] = (*observe(steps[-1].config_id), steps[-1].cells)
        steps.append(decide(space, observed, options, generation, on_disk))
    return observed, steps


def smallest_change(space: pd.DataFrame, observed: pd.DataFrame, majority: int) -> dict | None:
    """The run pair (a config with the majority verdict, a config reversing it) that differ on the fewest
    axes (ties: the larger reversal), with the axes changed; None without both kinds run."""
    seen = signs(observed["score_a"], observed["score_b"])
    keep, flip = seen.index[seen == majority], seen.index[seen == -majority]
    if not majority or keep.empty or flip.empty:
        return None
    diff = (observed["score_a"] - observed["score_b"]).abs()
    pairs = [
        (int((space.loc[k] != space.loc[f]).sum()), -float(diff[f]), order, k, f)
        for order, (k, f) in enumerate((k, f) for f in flip for k in keep)
    ]
    n_axes, _, _, kept, flipped = min(pairs)
    changed = space.columns[space.loc[kept] != space.loc[flipped]]
    return {
        "from": kept,
        "to": flipped,
        "n_axes": n_axes,
        "changes": {axis: [space.at[kept, axis], space.at[flipped, axis]] for axis in changed},
    }


def check_names(settings: Settings, benchmark: str, pair: Sequence[str]) -> None:
    """Refuse a benchmark or pair whose audit files (results/audit/<benchmark>/<A>_vs_<B>.md) the workflow
    cannot read back as that benchmark and pair. The workflow matches a run's model names one by one, so a
    name holding '_vs_' is refused only where two of the run's models give the same file name; it matches
    an imported name by a pattern (PLAIN_MODEL), which such a name must fit, without '_vs_'."""
    if not NAME.fullmatch(benchmark):
        raise ConfigError(f"--benchmark: {excerpt(benchmark)} is not a benchmark name (letters, digits, . _ + -)")
    if settings.imports:
        odd = [name for name in pair if not re.fullmatch(PLAIN_MODEL, name) or "_vs_" in name]
        if odd:
            how = (
                "rename it in the `models` of the import's mapping file"
                if any(source.mapping for source in settings.imports)
                else "give its source under `imports` a mapping file (`mapping:`) whose `models` renames it"
            )
            raise ConfigError(
                f"--pair: the imported model name {excerpt(odd[0])} cannot name the audit's files (letters, digits, "
                f". _ + -, no '_vs_'); {how} (docs/importing.md)"
            )
        return
    stem, names = f"{pair[0]}_vs_{pair[1]}", {model.name for model in settings.run_models()}
    splits = [(stem[:i], stem[i + 4 :]) for i in range(len(stem)) if stem.startswith("_vs_", i)]
    other = next((split for split in splits if split != tuple(pair) and set(split) <= names), None)
    if other:
        raise ConfigError(
            f"--pair: the audit of {pair[0]} and {pair[1]} and that of {other[0]} and {other[1]} would share the file "
            f"{stem}.md; rename one of these models under `models` (a name without '_vs_')"
        )


def check_request(settings: Settings, benchmark: str, pair: Sequence[str]) -> None:
    """What `safetyrepro audit` checks before it runs the workflow: the benchmark and pair against the run's,
    or with imports against the imported results, read here (the workflow's import job reads them again),
    so that a mistake is one message rather than the log of a failed job."""
    if not settings.imports:
        searched_space(settings, benchmark, pair, None)
        return
    from safetyrepro.imports import import_sources

    check_names(settings, benchmark, pair)  # before the sources are read
    for source in settings.imports:
        source.require_packages()
    imported = import_sources(settings.imports)
    searched_space(settings, benchmark, pair, (imported.cells, imported.design["axes"]))


def generation_twins(settings: Settings, benchmark: str, space: pd.DataFrame, table: Path | None) -> dict[str, str]:
    """The configs of `space` that label their generation twin's responses (a scorer axis off its default),
    each to that twin; none for imported cells (`table`), which the audit reads and does not run."""
    if table is not None:
        return {}
    twins = {}
    for config in settings.configs(benchmark):
        twin = settings.envelope.generation_twin(config, benchmark) if config.config_id in space.index else None
        if twin is not None:
            twins[config.config_id] = twin.config_id
    return twins


def pair_space(settings: Settings, benchmark: str, pair: Sequence[str], table: Path | None) -> pd.DataFrame:
    """The configs an audit of `pair` on `benchmark` searches (`searched_space`); `table`: the imported cells
    table, None for a run's cells."""
    imported = None if table is None else (read_parquet_checked(table), read_design(table)["axes"])
    return searched_space(settings, benchmark, pair, imported)


def searched_space(
    settings: Settings, benchmark: str, pair: Sequence[str], imported: tuple[pd.DataFrame, Sequence[str]] | None
) -> pd.DataFrame:
    """The configs an audit of `pair` on `benchmark` searches: the benchmark's configs of the run (after
    `select_configs`), or with imports (`imported`: the cells and the axes of their design) those of the
    imported cells both models have. Refuses a pair or benchmark the run does not have, with the option named."""
    model_a, model_b = pair
    if model_a == model_b:
        raise ConfigError(f"--pair: give two different models, not {excerpt(model_a)} twice")
    if imported is None:
        if benchmark not in settings.benchmarks:
            raise ConfigError(
                f"--benchmark: {excerpt(benchmark)} is not a benchmark of the run ({', '.join(settings.benchmarks)})"
            )
        names = [m.name for m in settings.models]
        rows = pd.DataFrame([c.as_dict() for c in settings.configs(benchmark)])
        axes = settings.envelope.axis_names
    else:
        cells, axes = imported
        names = list(dict.fromkeys(cells.loc[cells["benchmark"] == benchmark, "model"]))
        if not names:
            known = ", ".join(dict.fromkeys(cells["benchmark"]))
            raise ConfigError(f"--benchmark: the imported results have no benchmark {excerpt(benchmark)} ({known})")
        mine = cells[(cells["benchmark"] == benchmark) & cells["model"].isin(pair)]
        both = mine.groupby("config_id", sort=False)["model"].nunique() == 2
        rows = mine[mine["config_id"].isin(both.index[both])]
    unknown = [name for name in pair if name not in names]
    if unknown:
        raise ConfigError(f"--pair: no model named {excerpt(unknown[0])} on {benchmark} (models: {', '.join(names)})")
    check_names(settings, benchmark, pair)
    if rows.empty:
        raise ConfigError(f"--pair: {model_a} and {model_b} share no config on {benchmark}")
    return search_space(rows, axes)


def read_scores(paths: Sequence[Path]) -> pd.DataFrame:
    """Cell scores (model, benchmark, config_id, score) from cell summaries (.json) or a cells table."""
    columns = ["model", "benchmark", "config_id", "score"]
    frames = [  # each file checked against the checksum recorded when it was written
        read_parquet_checked(path)[columns]
        if path.suffix == ".parquet"
        else pd.json_normalize(read_summary(path))[columns]
        for path in paths
    ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def cells_on_disk(
    settings: Settings,
    benchmark: str,
    pair: Sequence[str],
    space: pd.DataFrame,
    generation: Mapping[str, str],
    is_current: Callable[[str, str, str], bool],
) -> set[tuple[int, str]]:
    """The pair's model cells in the run's cells folder that `is_current(model, benchmark, config_id)` vouches
    for (the workflow's job records: made with what this run asks; a stale cell is redone, and costs its cell),
    in `generation_cells`' form; none with imports, whose cells the audit reads as if it ran them."""
    if settings.imports:
        return set()
    wanted = set().union(*(generation_cells(c, generation) for c in space.index))
    return {(slot, config) for slot, config in wanted if is_current(pair[slot], benchmark, config)}


def cells_run_since(
    settings: Settings, benchmark: str, pair: Sequence[str], config: str, generation: Mapping[str, str], since: float
) -> int:
    """The model cells that `config` reads (`generation_cells`) written after `since` (a file time: when the
    step that chose it was written), i.e. run for the audit, a cell found on disk but rerun included."""
    paths = [
        cell_file(settings.results_dir, pair[s], benchmark, c, "summary")
        for s, c in generation_cells(config, generation)
    ]
    return sum(path.stat().st_mtime > since for path in paths)


def step_record(
    space: pd.DataFrame,
    benchmark: str,
    pair: Sequence[str],
    previous: dict | None,
    scores: pd.DataFrame,
    options: AuditSettings,
    generation: Mapping[str, str] | None = None,
    on_disk: Iterable[tuple[int, str]] = (),
    cells_run: int | None = None,
) -> dict:
    """Step n of the search: the configs run so far (the previous step's, plus the config it chose, scored
    from `scores`, with `cells_run` the model cells run for it: by default what the previous step expected)
    and the decision (`generation` and `on_disk` as for `decide`)."""
    observed = observed_frame(previous["observed"] if previous else [])
    if previous is not None:
        chosen = previous["decision"]["config_id"]
        mine = scores[(scores["benchmark"] == benchmark) & (scores["config_id"] == chosen)].set_index("model")["score"]
        missing = [model for model in pair if not np.isfinite(mine.get(model, math.nan))]
        if missing:
            raise DataError(f"cell {missing[0]}/{benchmark}/{chosen}: no score for the audit to read")
        ran = previous["decision"]["cells"] if cells_run is None else cells_run
        observed.loc[chosen] = float(mine[pair[0]]), float(mine[pair[1]]), ran
    return {
        "benchmark": benchmark,
        "model_a": pair[0],
        "model_b": pair[1],
        "step": len(observed),
        "observed": [
            {"config_id": c, "score_a": a, "score_b": b, "cells_run": int(n)} for c, (a, b, n) in observed.iterrows()
        ],
        "decision": decide(space, observed, options, generation, on_disk).as_dict(),
    }


def audit_result(
    space: pd.DataFrame,
    last_step: dict,
    items: pd.DataFrame,
    options: AuditSettings,
    significance: SignificanceSettings,
    generation: Mapping[str, str] | None = None,
    imported: bool = False,
) -> dict:
    """What an audit found: the majority verdict, stated where its probability is at least 1 -
    stop_probability (else undecided), the configs reversing it with their paired tests (Holm across the
    configs run, `analysis.significance`), the smallest change, and the cells it read and ran
    (`generation` as for `decide`; `imported`: the cells were read from imported results)."""
    pair, benchmark = (last_step["model_a"], last_step["model_b"]), last_step["benchmark"]
    observed = observed_frame(last_step["observed"])
    decision = last_step["decision"]
    seen = signs(observed["score_a"], observed["score_b"])
    posterior = majority_posterior(seen, len(space))
    majority, p_majority = leading(posterior)
    stated = p_majority >= 1 - options.stop_probability
    cells = pd.DataFrame(
        [
            {"model": model, "benchmark": benchmark, "config_id": config, "score": row[column]}
            for config, row in observed.iterrows()
            for model, column in zip(pair, ("score_a", "score_b"))
        ]
    )
    mine = items[
        (items["benchmark"] == benchmark) & items["model"].isin(pair) & items["config_id"].isin(observed.index)
    ]
    tests = paired_tests(cells, mine, significance).set_index("config_id") if len(mine) else None
    reversals = []
    for config in seen.index[reversing(seen, majority)] if stated else []:
        row = {"config_id": config, **observed.loc[config, ["score_a", "score_b"]].to_dict()}
        row["axes"] = space.loc[config].to_dict()
        if tests is not None and config in tests.index:
            row.update(p_adjusted=float(tests.at[config, "p_adjusted"]), verdict=tests.at[config, "verdict"])
            row["significant"] = row["verdict"] == VERDICTS[int(seen[config])]  # the paired test agrees
        reversals.append(row)
    return {
        "benchmark": benchmark,
        "model_a": pair[0],
        "model_b": pair[1],
        "majority": VERDICTS[majority] if stated else "undecided",
        "p_majority": p_majority,
        "posterior": {VERDICTS[side]: p for side, p in posterior.items()},
        "counts": {"N+": int((seen > 0).sum()), "N-": int((seen < 0).sum()), "N0": int((seen == 0).sum())},
        "configs_run": len(observed),
        "configs_envelope": len(space),
        "stopped": decision["reason"],
        "p_reversal_left": decision["p_reversal_left"],
        "reversing": reversals,
        "smallest_change": smallest_change(space, observed, majority) if stated else None,
        "cells_read": model_cells(observed.index, generation or {}),
        "cells_run": int(observed["cells_run"].sum()),
        "cells_envelope": model_cells(space.index, generation or {}),
        "imported": imported,
        "budget": options.budget,
        "stop_probability": options.stop_probability,
        "runs": last_step["observed"],
        "significance": None if tests is None else {"alpha": significance.alpha, "correction": significance.correction},
    }


def audit_markdown(result: dict) -> str:
    """The audit as Markdown: the answer first, then every config run in order."""
    a, b = result["model_a"], result["model_b"]
    counts = ", ".join(f"{key} {n}" for key, n in result["counts"].items())
    run_of = f"{result['configs_run']} of {result['configs_envelope']} configs"
    read = f"which read {result['cells_read']} of the envelope's {result['cells_envelope']}"
    if result["imported"]:
        cells = (
            f"{read} cells from the imported results (budget {result['budget']}: with imports every cell read counts)"
        )
    else:
        found = result["cells_read"] - result["cells_run"]
        cells = f"{read} model cells: {result['cells_run']} run by the audit (budget {result['budget']}), {found} already on disk"
    lines = [
        f"# Audit: {a} vs {b} on {result['benchmark']}",
        "",
        f"- stopped: **{result['stopped']}** after {run_of}, {cells}",
    ]
    if result["majority"] == "undecided":
        odds = ", ".join(f"{verdict.split(' (')[0]} {p:.2f}" for verdict, p in result["posterior"].items())
        lines.append(
            f"- majority verdict: **undecided** after {run_of} ({counts}; posterior {odds}; a verdict needs "
            f"{1 - result['stop_probability']:.2f})"
        )
    else:
        rests = (
            "exact: every config run"
            if result["configs_run"] == result["configs_envelope"]
            else "the configs not run taken as exchangeable with those run: docs/audit.md gives its calibration"
        )
        lines.append(
            f"- majority verdict: {result['majority']} (posterior probability {result['p_majority']:.2f}; {counts} "
            f"in the {run_of}; {rests})"
        )
    if result["stopped"] == "no reversal likely":
        lines.append(
            f"- probability that a config not run reverses it: {result['p_reversal_left']:.3f} (under the additive "
            "model of axis effects; a reversal confined to an untried combination of axes can escape it)"
        )
    change = result["smallest_change"]
    if change:
        moves = ", ".join(f"{axis} {old} -> {new}" for axis, (old, new) in change["changes"].items())
        lines.append(f"- smallest change that reverses it: {change['from']} -> {change['to']} ({moves})")
    for row in result["reversing"]:
        sig = (
            f"; paired test p_adjusted {row['p_adjusted']:.3g} ({'significant' if row['significant'] else 'not significant'})"
            if "p_adjusted" in row
            else "; no item rows, no paired test"
        )
        lines.append(f"- reverses: {row['config_id']} (A {row['score_a']:.3f}, B {row['score_b']:.3f}{sig})")
    if result["reversing"] and result["significance"]:
        lines.append(
            f"- paired tests at alpha {result['significance']['alpha']}, {result['significance']['correction']} across "
            f"the {len(result['runs'])} configs run (analysis/paired_tests.md corrects across the whole envelope)"
        )
    lines += ["", f"| step | config | {a} | {b} | favours | cells run | |", "|---|---|---|---|---|---|---|"]
    reversing = {row["config_id"] for row in result["reversing"]}
    for step, run in enumerate(result["runs"], start=1):
        mark = "reverses" if run["config_id"] in reversing else ""
        side = SIDES[int(signs(pd.Series([run["score_a"]]), pd.Series([run["score_b"]])).iloc[0])]
        lines.append(
            f"| {step} | {run['config_id']} | {run['score_a']:.3f} | {run['score_b']:.3f} | {side} | "
            f"{run['cells_run']} | {mark} |"
        )
    return "\n".join(lines) + "\n"
