"""Rates corrected for a scorer's errors with a sample of human labels, and the verdicts between two models they give
(docs/scorers.md, "Correcting for the scorer's errors").

A model's replies are a population of N; the scorer gives each an outcome f_i (1 where its label makes the reply
count as handled correctly, the benchmark's `is_correct`), and people label a simple random sample of n of them,
giving y_i. The rate the human labels would give all N replies is estimated by

    mean over the N of f  +  mean over the n of (y - f),

prediction-powered inference's estimator of a mean (Angelopoulos et al., Science 2023) with the labelled replies
drawn from the replies scored, which survey sampling calls the difference estimator (Cochran 1977, section 7.8):
unbiased whatever the scorer's errors, since the second term measures them where people looked. Its variance is
s^2 / n (1 - n / N), s^2 the spread of the residuals y - f (the finite population correction: the N replies are all
there is to estimate, not a draw). The 90% interval is Student's t on n - 1 degrees of freedom.

A good scorer's residuals are mostly 0, and a sample of 50 may hold no disagreement at all: its spread would be 0
and the interval a point that misses the truth. The spread is therefore that of the residuals' three values
(-1, 0, +1) with one disagreement of each sign added to their counts: the estimate is left as it is, the interval
never has zero width. One, not a half (Jeffreys'), was chosen on synthetic populations alone (the grid of
`scripts/measure_scorer_correction.py`: a half covered 0.855 at worst there, one 0.914); XSTest's labelled
completions were then measured as held out (the docs' table).

A verdict between two models compares their corrected rates, whose label samples are drawn apart: the interval of
the difference has the two variances summed (Welch's degrees of freedom); it names the model whose corrected rate is
higher where it excludes 0, and is "undecided" where it does not.

A run's own models have no human labels unless a person gives some; a benchmark's registered labels are then of other
models' replies (XSTest's: Mistral-Instruct's and Llama-2's). `transferred_verdicts` corrects each free-form config's
score by its scorer's net error on one labelled model's replies (people's rate minus the scorer's, over all of them)
and gives each model of a pair each labelled model's errors in turn. The same errors for both shift both alike and
leave every verdict as it is; different ones (the shift from one labelled model to another) move the difference by
the gap between the two net errors. A verdict is kept where it holds under every assignment, moved where every one
reverses it, undecided otherwise; rho_flip is recomputed under each assignment (`flips.signs`, its range).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import stats

from safetyrepro.analysis.flips import TIE_TOLERANCE, rho_of_signs, signs
from safetyrepro.analysis.frames import stack_named

if TYPE_CHECKING:
    from safetyrepro.analysis.suite import Inputs

LEVEL = 0.90
PSEUDO_DISAGREEMENTS = 1.0  # added to the count of each sign of disagreement, for the spread only
UNDECIDED = "undecided"
KEPT, MOVED = "kept", "moved"
OWN = "this run's replies"  # the labels' source, where people labelled the run's own replies


@dataclass(frozen=True)
class CorrectedRate:
    """A rate corrected with human labels: the scorer's own rate, the estimate, its interval and variance, and how
    many labelled replies, of how many, it came from."""

    scorer_rate: float
    estimate: float
    low: float
    high: float
    variance: float  # of the estimate
    labels: int
    replies: int


def corrected_rate(
    scorer_outcomes: Sequence[float],
    labelled: Sequence[int],
    human_outcomes: Sequence[float],
    level: float = LEVEL,
    pseudo: float = PSEUDO_DISAGREEMENTS,
) -> CorrectedRate:
    """The human rate of a model's replies estimated from the scorer's outcomes on all of them (`scorer_outcomes`,
    0/1) and people's on those at positions `labelled` (distinct, a simple random sample), with its `level`
    interval, clipped to [0, 1]; `pseudo` disagreements of each sign are added to the spread's counts."""
    f = np.asarray(scorer_outcomes, dtype=float)
    positions = np.asarray(labelled, dtype=int)
    y = np.asarray(human_outcomes, dtype=float)
    if len(positions) != len(y) or len(set(positions.tolist())) != len(positions):
        raise ValueError("give one human outcome for each labelled reply, each reply once")
    if len(positions) and not (0 <= positions.min() and positions.max() < len(f)):
        raise ValueError(f"a labelled position is not one of the {len(f)} replies")
    if len(positions) < 2:
        raise ValueError(f"at least 2 human labels are needed, {len(positions)} given")
    if not (np.isin(f, (0.0, 1.0)).all() and np.isin(y, (0.0, 1.0)).all()):
        raise ValueError("scorer and human outcomes must be 0 or 1")
    residuals = y - f[positions]
    n, size = len(positions), len(f)
    variance = residual_spread(residuals, pseudo) / n * (1 - n / size)
    estimate = float(f.mean() + residuals.mean())
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * variance**0.5
    return CorrectedRate(
        float(f.mean()), estimate, max(0.0, estimate - half), min(1.0, estimate + half), variance, n, size
    )


def residual_spread(residuals: np.ndarray, pseudo: float = PSEUDO_DISAGREEMENTS) -> float:
    """The sample variance of human-minus-scorer residuals (-1, 0, +1) with `pseudo` disagreements of each sign
    added to their counts (never 0: 50 labels without a disagreement do not make a scorer exact)."""
    residuals = np.asarray(residuals, dtype=float)
    counts = np.array([(residuals < 0).sum(), (residuals == 0).sum(), (residuals > 0).sum()], dtype=float)
    counts += (pseudo, 0.0, pseudo)
    shares, values = counts / counts.sum(), np.array([-1.0, 0.0, 1.0])
    n = len(residuals)
    return float(shares @ values**2 - (shares @ values) ** 2) * n / (n - 1)


def corrected_verdict(a: CorrectedRate, b: CorrectedRate, level: float = LEVEL) -> tuple[float, float, float, str]:
    """The difference of two corrected rates (a - b), its `level` interval (Welch-Satterthwaite degrees of
    freedom) and the verdict: "a" or "b" for the model ahead where the interval excludes 0 (beyond rho_flip's tie
    tolerance: exact rates that tie, up to rounding, stay a tie), else UNDECIDED."""
    difference, variance = a.estimate - b.estimate, a.variance + b.variance
    parts = [a.variance**2 / (a.labels - 1), b.variance**2 / (b.labels - 1)]
    freedom = variance**2 / sum(parts) if sum(parts) > 0 else float(min(a.labels, b.labels) - 1)
    half = float(stats.t.ppf(0.5 + level / 2, freedom)) * variance**0.5
    low, high = difference - half, difference + half
    return difference, low, high, "a" if low > TIE_TOLERANCE else "b" if high < -TIE_TOLERANCE else UNDECIDED


def net_errors(agreement: pd.DataFrame, key: str) -> pd.DataFrame:
    """Per labelled model and scorer (its value in column `key` of `agreement`, a `HumanLabels.scorer_agreement`
    or the scorers analysis's human table): people's rate minus the scorer's over that model's labelled replies
    (`net_error`) and how many there are."""
    frame = agreement.dropna(subset=["scorer_over", "scorer_under"])
    return pd.DataFrame(
        {
            "labelled_model": frame["labelled_model"],
            "scorer": frame[key],
            "net_error": (frame["scorer_under"] - frame["scorer_over"]) / frame["n_answers"],
            "n_labels": frame["n_answers"].astype(int),
        }
    ).reset_index(drop=True)


def statuses(raw: np.ndarray, decided: np.ndarray) -> np.ndarray:
    """Per verdict, from its sign as scored (+1, -1, 0 a tie) and corrected (0 where undecided): KEPT where the
    correction decides it the same way, MOVED where it decides it otherwise (a tie included), else UNDECIDED."""
    return np.where(decided == 0, UNDECIDED, np.where(decided == raw, KEPT, MOVED))


def transferred_verdicts(cells: pd.DataFrame, errors: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One benchmark's verdicts corrected with the net errors of scorers on other models' replies.

    Args:
        cells: the benchmark's cells: model, config_id, scoring, score and scorer (the key of `errors` whose
            errors a free-form config's score carries; a log-likelihood config's is not corrected).
        errors: `net_errors`: labelled_model, scorer, net_error, n_labels.

    Returns:
        ('pairs', 'verdicts'): per model pair, rho_flip over the configs whose scorer has errors measured (or none
        to correct), its range when each model is given each labelled model's errors, and how many free-form
        verdicts are kept, moved and undecided; per pair and free-form config, A's score minus B's and its range
        corrected, and the verdict's status.
    """
    configs = cells.drop_duplicates("config_id").set_index("config_id")
    free = configs["scoring"] == "freeform"
    files = list(dict.fromkeys(errors["labelled_model"]))
    shifts = pd.DataFrame(
        {
            f: configs["scorer"].map(errors[errors["labelled_model"] == f].set_index("scorer")["net_error"])
            for f in files
        }
    )
    shifts.loc[~free] = 0.0
    measured = shifts.notna().all(axis=1)  # a free-form config whose scorer has no errors measured is left out
    every = cells.pivot(index="config_id", columns="model", values="score").reindex(configs.index)
    shifts, scores = shifts[measured], every[measured]
    models = list(dict.fromkeys(cells["model"]))
    pairs, verdicts = [], []
    source = (", ".join(files), int(errors.drop_duplicates("labelled_model")["n_labels"].sum()))
    for a, b in itertools.combinations(models, 2):
        both = scores[[a, b]].notna().all(axis=1)
        raw = scores.loc[both, a] - scores.loc[both, b]
        corrected = np.array(
            [raw + shifts.loc[both, fa] - shifts.loc[both, fb] for fa, fb in itertools.product(files, files)]
        )
        assigned = signs(pd.DataFrame(corrected.T, index=raw.index), 0.0).to_numpy().T
        decided = np.where((assigned == assigned[0]).all(axis=0), assigned[0], 0)  # 0: the assignments differ
        pair, rows = _pair_tables(
            (a, b), configs, raw, (corrected.min(axis=0), corrected.max(axis=0)), assigned, decided, source
        )
        pairs.append(pair | {"n_left_out": int((every[[a, b]].notna().all(axis=1) & ~measured).sum())})
        verdicts.append(rows)
    verdicts = pd.concat(verdicts, ignore_index=True) if verdicts else pd.DataFrame()
    return pd.DataFrame(pairs), verdicts


def own_label_errors(
    replies: pd.DataFrame, scored: pd.DataFrame, labelled: pd.DataFrame, level: float = LEVEL
) -> pd.DataFrame:
    """Per model, scorer and config, the scorer's net error on the model's replies there, from people's labels of
    the replies drawn there: `corrected_rate` on the config's replies alone (the difference estimator with its own
    spread, finite population correction and Student t on the config's labels). A config's own labels only: pooling
    them with the model's other configs narrowed the interval exactly where a scorer errs in one config and not in
    the others (a review's finding: a pooled net error covered 0.33 there, a partially pooled one 0.53).

    Args:
        replies: the benchmark's generation replies (`label_file.generation_replies`): model, config_id, item_id, seed.
        scored: each scorer's outcome on the replies it labels: their key, `cell_config` (the config of the cell
            that labelled it: the generation config, or its twin of another scorer), `scorer` and `correct`.
        labelled: the labelled replies: the key and `human_correct` (whether the human label counts the reply as
            handled correctly).

    Returns:
        labelled_model (the model), scorer, config_id (the cell's config), `net_error` (the corrected rate minus the
        scorer's), its `variance`, `n_labels` and `n_replies` (the config's). A config with fewer than 2 labelled
        replies gives no row: it is not corrected.
    """
    from safetyrepro.scorers.label_file import KEY

    mine = replies[KEY].merge(scored, on=KEY, validate="one_to_many")
    mine = mine.merge(labelled, on=KEY, how="left", validate="many_to_one")
    rows = []
    for (model, scorer, config), cell in mine.groupby(["model", "scorer", "cell_config"], sort=False):
        cell = cell.reset_index(drop=True)
        positions = cell.index[cell["human_correct"].notna()]
        if len(positions) < 2:
            continue
        rate = corrected_rate(
            cell["correct"].astype(float), positions, cell.loc[positions, "human_correct"].astype(float), level
        )
        rows.append(
            {
                "labelled_model": model,
                "scorer": scorer,
                "config_id": config,
                "net_error": rate.estimate - rate.scorer_rate,
                "variance": rate.variance,
                "n_labels": rate.labels,
                "n_replies": rate.replies,
            }
        )
    return pd.DataFrame(rows)


def own_verdicts(cells: pd.DataFrame, errors: pd.DataFrame, level: float = LEVEL) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One benchmark's verdicts corrected with labels of the run's own replies: each model's free-form score in a
    config moved by its scorer's net error there (`own_label_errors`), the verdict between two models decided by
    `corrected_verdict` on the two corrected rates; the tables of `transferred_verdicts`, the verdicts' corrected
    range being the difference's interval at `level` and rho_flip that of the verdicts decided (an undecided one
    counts as a tie, as rho_flip_sig counts). A free-form config where a model's scorer has no net error measured
    (fewer than 2 labels there) is left out of the pair's (counted: n_left_out)."""
    configs = cells.drop_duplicates("config_id").set_index("config_id")
    free = configs["scoring"] == "freeform"
    measured = errors.set_index(["labelled_model", "config_id"])
    # the labels a model's corrections used: those of its scorer that used most (a config with fewer than 2 used none)
    labels = errors.groupby(["labelled_model", "scorer"])["n_labels"].sum().groupby(level=0).max()
    models = list(dict.fromkeys(cells["model"]))
    scores = cells.pivot(index="config_id", columns="model", values="score").reindex(configs.index)
    pairs, verdicts = [], []
    for a, b in itertools.combinations(models, 2):
        both = scores[[a, b]].notna().all(axis=1)
        measured_for = {m: pd.Series([(m, c) in measured.index for c in scores.index], scores.index) for m in (a, b)}
        corrected = both & (~free | (measured_for[a] & measured_for[b]))
        rows = []
        for config in scores.index[corrected]:
            rates = []
            for model in (a, b):
                score = float(scores.loc[config, model])
                if free[config]:
                    error = measured.loc[(model, config)]
                    shift, variance, n = error["net_error"], error["variance"], int(error["n_labels"])
                else:  # a log-likelihood config has no scorer: as scored, exactly
                    shift, variance, n = 0.0, 0.0, 2
                rates.append(CorrectedRate(score, score + shift, np.nan, np.nan, variance, n, n))
            difference, low, high, verdict = corrected_verdict(*rates, level)
            raw = float(scores.loc[config, a] - scores.loc[config, b])
            rows.append((config, raw, difference, low, high, {"a": 1, "b": -1}.get(verdict, 0)))
        frame = pd.DataFrame(rows, columns=["config_id", "raw", "difference", "low", "high", "decided"])
        frame = frame.set_index("config_id")
        pair, rows = _pair_tables(
            (a, b),
            configs,
            frame["raw"],
            (frame["low"].to_numpy(), frame["high"].to_numpy()),
            frame["decided"].to_numpy()[None, :],  # rho_flip of the verdicts decided (undecided: a tie)
            frame["decided"].to_numpy(),
            (OWN, int(labels.get(a, 0) + labels.get(b, 0))),
        )
        pairs.append(pair | {"n_left_out": int((both & ~corrected).sum())})
        verdicts.append(rows)
    verdicts = pd.concat(verdicts, ignore_index=True) if verdicts else pd.DataFrame()
    return pd.DataFrame(pairs), verdicts


def _pair_tables(
    pair: tuple[str, str],
    configs: pd.DataFrame,
    raw: pd.Series,
    corrected: tuple[np.ndarray, np.ndarray],
    assigned: np.ndarray,
    decided: np.ndarray,
    source: tuple[str, int],
) -> tuple[dict, pd.DataFrame]:
    """A model pair's row of 'pairs' and its rows of 'verdicts': `raw` is A's score minus B's per config (by config
    id, `configs` giving each its scoring and scorer), `corrected` the low and high ends of its corrected range,
    `assigned` the corrected verdicts' signs (a row per assignment of errors: rho_flip's range), `decided` the sign
    each verdict is decided for (0: undecided), `source` whose labels (labels_from) and how many."""
    on_free = (configs["scoring"] == "freeform").reindex(raw.index).to_numpy()
    status = statuses(signs(raw, 0.0).to_numpy(), decided)
    rho = rho_of_signs(assigned, axis=1)
    row = {
        "model_a": pair[0],
        "model_b": pair[1],
        "n_configs": len(raw),
        "rho_flip": float(rho_of_signs(signs(raw, 0.0).to_numpy())),
        "rho_flip_corrected_low": float(rho.min()),
        "rho_flip_corrected_high": float(rho.max()),
        "n_freeform": int(on_free.sum()),
        **{name: int((status[on_free] == name).sum()) for name in (KEPT, MOVED, UNDECIDED)},
        "labels_from": source[0],
        "n_labels": source[1],
    }
    rows = pd.DataFrame(
        {
            "model_a": pair[0],
            "model_b": pair[1],
            "config_id": raw.index,
            "scorer": configs["scorer"].reindex(raw.index).to_numpy(),
            "raw_difference": raw.to_numpy(),
            "corrected_low": corrected[0],
            "corrected_high": corrected[1],
            "status": status,
        }
    )
    return row, rows[on_free].reset_index(drop=True)


def corrected_tables(cells: pd.DataFrame, errors: pd.DataFrame, axis: str | None) -> dict[str, pd.DataFrame]:
    """'pairs' and 'verdicts' of each benchmark in `errors` (with a column `benchmark`), from its `cells`:
    `own_verdicts` where its errors are `own_label_errors` (with a variance), else `transferred_verdicts` (`net_errors`
    of other models' replies); the scorer of a config is its value on the scorer axis `axis` (RULES without one).
    The analysis's tables, and what the headline's check recomputes them from."""
    from safetyrepro.core.scorer_names import RULES

    tables: dict[str, list[pd.DataFrame]] = {"pairs": [], "verdicts": []}
    for benchmark, measured in errors.groupby("benchmark", sort=False):
        frame = cells[cells["benchmark"] == benchmark]
        frame = frame.assign(scorer=frame[axis] if axis else RULES)
        own = "variance" in measured and measured["variance"].notna().all()
        for name, table in zip(tables, (own_verdicts if own else transferred_verdicts)(frame, measured)):
            tables[name].append(table.assign(benchmark=benchmark))
    return {name: pd.concat(frames, ignore_index=True) for name, frames in tables.items() if frames}


def scorer_correction_table(inputs: Inputs) -> pd.DataFrame:
    """The suite's entry: for each benchmark of the run with human labels, table 'errors', each scorer's net error
    per labelled model of other models' replies (`net_errors`) or, where `human_labels` names a file of the run's
    own labelled replies, per model, scorer and config from it (`_own_errors`), and `corrected_tables`' 'pairs' and
    'verdicts'; a note where the run has none."""
    from safetyrepro.analysis.scorers import human_agreement
    from safetyrepro.scorers.human_labels import with_human_labels

    envelope = inputs.settings.envelope
    benchmarks = [b for b in with_human_labels(inputs.settings.benchmarks) if b in set(inputs.cells["benchmark"])]
    if envelope is None or not benchmarks:
        return pd.DataFrame({"note": ["no benchmark of this run has human labels of replies (docs/scorers.md)"]})
    axis, files = envelope.scorer_axis, inputs.settings.human_label_files
    errors = pd.concat(
        [
            _own_errors(inputs, b, axis, files[b])
            if b in files
            else net_errors(human_agreement(inputs, axis, b), axis or "scorer")
            for b in benchmarks
        ],
        keys=benchmarks,
        names=["benchmark", None],
    ).reset_index(level=0)
    return stack_named({"errors": errors, **corrected_tables(inputs.cells, errors, axis)}, "table")


def _own_errors(inputs: Inputs, benchmark: str, axis: str | None, path) -> pd.DataFrame:
    """`own_label_errors` of a benchmark whose replies people labelled in the file at `path` (`human_labels`)."""
    from safetyrepro.benchmarks import BENCHMARKS
    from safetyrepro.core.errors import DataError
    from safetyrepro.core.scorer_names import RULES
    from safetyrepro.scorers.human_labels import human_labels_of
    from safetyrepro.scorers.label_file import KEY, generation_replies, read_labels

    settings, benchmark_of = inputs.settings, BENCHMARKS[benchmark]
    items = pd.read_parquet(
        inputs.items_path,
        columns=["benchmark", *KEY, "response", "correct", "label"],
        filters=[("benchmark", "==", benchmark)],
    )
    cells = inputs.cells[(inputs.cells["benchmark"] == benchmark) & (inputs.cells["scoring"] == "freeform")]
    default = settings.envelope.defaults[axis] if axis else None
    replies = generation_replies(items, cells, benchmark, axis, default)
    labelled = read_labels(path, benchmark, human_labels_of(benchmark).classes, replies)
    found = benchmark_of.items_by_id(settings.data_dir, set(labelled["item_id"]), settings.subset_seed)
    labelled["human_correct"] = [
        benchmark_of.is_correct(label, found[item]) for label, item in zip(labelled["human_label"], labelled["item_id"])
    ]
    configs = cells.drop_duplicates("config_id")
    twin, scorer = {}, {}  # each free-form config: the config whose replies it labels, and its scorer axis value
    for config_id, value in zip(configs["config_id"], configs[axis] if axis else [RULES] * len(configs)):
        generated = settings.envelope.generation_twin(settings.config(benchmark, config_id), benchmark)
        twin[config_id], scorer[config_id] = generated.config_id if generated else config_id, value
    scored = items[items["config_id"].isin(twin)]
    scored = scored.assign(
        scorer=scored["config_id"].map(scorer), cell_config=scored["config_id"], config_id=scored["config_id"].map(twin)
    )
    columns = [*KEY, "cell_config", "scorer", "correct"]
    errors = own_label_errors(replies, scored[columns], labelled[[*KEY, "human_correct"]])
    if errors.empty:
        raise DataError(
            f"{path} (human_labels.{benchmark}): no config has 2 labels of one model, so nothing can be corrected; "
            "draw them with `safetyrepro label` (20 a model and config by default)"
        )
    return errors
