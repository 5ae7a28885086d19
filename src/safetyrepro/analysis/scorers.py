"""How the free-form scorer alone moves labels and verdicts (a declared scorer axis, docs/scorers.md).

Configs that differ only in their scorer share one generation: the cells of the other scorers label
their twin's responses. Table 'reversals': per benchmark, model pair and pair of scorers, over the
twins both scorers label, the verdicts "A beats B" (`flips.signs`, as rho_flip decides them) that
the scorer choice alone reverses (one scorer has A above B, the other B above A) or changes (ties
included). Table 'by_value': rho_flip per benchmark and model pair over the free-form configs of each value of
the axis (a judge asked in two wordings of its question is two values). Table 'agreement': per benchmark and pair of scorers, the share of the run's item rows
(model, twin, item, seed) given the same label, and Cohen's kappa. Table 'human': for each benchmark
of the run with human-labelled replies (its registered `HumanLabels`: XSTest's labelled completions,
`safetyrepro.benchmarks.xstest.scorer_agreement`), each of its scorers on the axis against the human
labels; a judge's, in each value's wording of its question, as that value's judge_agreement job measured it, with
the share of its answers that parse.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from sklearn.metrics import cohen_kappa_score

from safetyrepro.analysis.flips import RHO_COLUMNS, rho_flip_table, signs
from safetyrepro.analysis.frames import stack_named
from safetyrepro.core.scorer_names import RULES
from safetyrepro.scorers.human_labels import human_labels_of, with_human_labels

if TYPE_CHECKING:
    from safetyrepro.analysis.suite import Inputs


def scorer_reversals(cells: pd.DataFrame, axis: str, twin_axes: list[str], values: list[str]) -> pd.DataFrame:
    """Per benchmark, model pair and pair of `values` (the axis's, in this order): twins labelled by both,
    verdicts reversed and changed."""
    rows = []
    for benchmark, frame in cells.groupby("benchmark", sort=False):
        scores = frame.pivot_table(index=twin_axes, columns=["model", axis], values="score")
        models = list(dict.fromkeys(frame["model"]))
        for (a, b), (s, t) in itertools.product(itertools.combinations(models, 2), itertools.combinations(values, 2)):
            if not {(a, s), (a, t), (b, s), (b, t)} <= set(scores.columns):
                continue
            first, second = signs(scores[(a, s)], scores[(b, s)]), signs(scores[(a, t)], scores[(b, t)])
            both = first.notna() & second.notna()
            first, second = first[both], second[both]
            rows.append(
                {
                    "benchmark": benchmark,
                    "model_a": a,
                    "model_b": b,
                    "scorer_a": s,
                    "scorer_b": t,
                    "n_twins": int(both.sum()),
                    "reversed": int((first * second < 0).sum()),
                    "changed": int((first != second).sum()),
                }
            )
    return pd.DataFrame(rows)


def rho_flip_by_value(cells: pd.DataFrame, axis: str, values: list[str]) -> pd.DataFrame:
    """rho_flip (`flips.rho_flip_table`) per benchmark and model pair over the free-form configs that each of
    `values` (the axis's) labels, the value in column `scorer_value`: a judge in each wording of its question, side
    by side."""
    frames = [rho_flip_table(cells[cells[axis] == value]).assign(scorer_value=value) for value in values]
    frames = [frame for frame in frames if not frame.empty]  # a value with no pair of models scored: no row
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*RHO_COLUMNS, "scorer_value"])


def label_agreement(items: pd.DataFrame, axis: str, twin_axes: list[str], values: list[str]) -> pd.DataFrame:
    """Per benchmark and pair of `values`: item rows labelled by both, the share given the same label, kappa."""
    rows = []
    for benchmark, frame in items.groupby("benchmark", sort=False):
        labels = frame.pivot_table(
            index=["model", *twin_axes, "item_id", "seed"], columns=axis, values="label", aggfunc="first"
        )
        for s, t in itertools.combinations([v for v in values if v in labels.columns], 2):
            pair = labels[[s, t]].dropna()
            if pair.empty:
                continue
            same = float((pair[s] == pair[t]).mean())
            kappa = float(cohen_kappa_score(pair[s], pair[t])) if pair.stack().nunique() > 1 else float("nan")
            rows.append(
                {
                    "benchmark": benchmark,
                    "scorer_a": s,
                    "scorer_b": t,
                    "n_rows": len(pair),
                    "agreement": same,
                    "kappa": kappa,
                }
            )
    return pd.DataFrame(rows)


def judge_agreement_path(results_dir: Path, benchmark: str, value: str) -> Path:
    """Where the judge_agreement job writes the agreement with a benchmark's human labels of the judge that a
    scorer axis value asks (in its wording of the question)."""
    return results_dir / "judges" / benchmark / f"{value}.parquet"


def scorer_table(inputs: Inputs) -> pd.DataFrame:
    """The suite's entry: its tables stacked, or a note when the run declares no scorer axis."""
    envelope = inputs.settings.envelope  # None for imported results
    axis = envelope.scorer_axis if envelope is not None else None
    if axis is None or axis not in inputs.cells.columns:
        return pd.DataFrame({"note": ["no scorer axis in this run (declare one: docs/scorers.md)"]})
    twin_axes = [name for name in inputs.design.axis_names if name != axis]
    values = [envelope.defaults[axis], *(v for v in envelope.axes[axis] if v != envelope.defaults[axis])]
    free_form = inputs.cells[inputs.cells["scoring"] == "freeform"]
    configs = free_form[["benchmark", "config_id", *twin_axes, axis]].drop_duplicates(["benchmark", "config_id"])
    items = inputs.items.merge(configs, on=["benchmark", "config_id"])
    tables = {
        "reversals": scorer_reversals(free_form, axis, twin_axes, values),
        "by_value": rho_flip_by_value(free_form, axis, values),
        "agreement": label_agreement(items, axis, twin_axes, values),
    }
    human = [human_agreement(inputs, axis, benchmark) for benchmark in with_human_labels(inputs.settings.benchmarks)]
    if human:
        tables["human"] = pd.concat(human, ignore_index=True)
    return stack_named(tables, "table")


def human_agreement(inputs: Inputs, axis: str | None, benchmark: str) -> pd.DataFrame:
    """A benchmark's scorers of the axis against its human labels, as its `HumanLabels` measure them,
    and its judges' agreement as their judge_agreement jobs measured it (scorer_name "<scorer> <judge>", e.g.
    "judge gemma-judge", and its question's phrasing where a value words it: "judge gemma-judge, question brief"); the
    column
    named `axis` holds the axis's value that gives each. Without a scorer axis: the benchmark's own scorer (RULES),
    its value RULES in a column "scorer"."""
    envelope = inputs.settings.envelope
    if axis is None:
        human = human_labels_of(benchmark).scorer_agreement(inputs.settings.data_dir, [RULES])
        return human.assign(scorer_name=RULES, benchmark=benchmark)
    scorers = {params["scorer"]: value for value, params in envelope.axes[axis].items() if "judge" not in params}
    by_scorer = {name: value for name, value in scorers.items() if name in envelope.scorers[benchmark]}
    human = human_labels_of(benchmark).scorer_agreement(inputs.settings.data_dir, list(by_scorer))
    human = human.rename(columns={"scorer": "scorer_name"})  # the axis's own column may be called scorer
    human = human.assign(**{axis: human["scorer_name"].map(by_scorer)})
    return pd.concat([human, *_judged(inputs, axis, benchmark)], ignore_index=True).assign(benchmark=benchmark)


def _judged(inputs: Inputs, axis: str, benchmark: str) -> list[pd.DataFrame]:
    """The human-label agreement of the judge of each value of the axis that asks one about the benchmark's
    answers, in the value's wording of its question, as its judge_agreement job measured it. A partial run leaves
    out a value whose job did not finish."""
    from safetyrepro.results.storage import read_parquet_checked

    settings = inputs.settings
    frames = []
    for value in settings.judge_values(benchmark):
        path = judge_agreement_path(settings.results_dir, benchmark, value)
        if settings.partial_results and not path.is_file():
            continue
        scorer, judge, phrasing = settings.envelope.labelling(value, benchmark)
        name = f"{scorer} {judge}" + (f", question {phrasing}" if phrasing else "")
        measured = read_parquet_checked(path).drop(columns=["judge", "question"], errors="ignore")
        frames.append(measured.assign(scorer_name=name, fitted_on=None, developed_on=False, **{axis: value}))
    return frames
