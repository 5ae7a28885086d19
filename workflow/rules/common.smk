# Shared setup: the checked settings, the cell list, and the functions the rules call with their wildcards
# (their work is in safetyrepro.pipeline).
import os
import re
import sys
from pathlib import Path

from safetyrepro.benchmarks import DataError
from safetyrepro.cli.command import plugin_warnings
from safetyrepro.core.messages import ERROR_PREFIX
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.configuration.build import load_run_settings, load_settings
from safetyrepro.pipeline import schedule
from safetyrepro.pipeline.fingerprints import (
    JOB_CODE,
    cell_dependencies,
    describe_dependencies,
    changed_model_files,
    code_digest,
    data_digests,
    judge_agreement_fingerprint,
)
from safetyrepro.pipeline.lifecycle import drop_damaged_snakemake_records, run_config_file
from safetyrepro.pipeline.outdated import (
    mark_current,
    mark_outdated,
    marker_of,
    markers_folder,
    outdated_problem,
    record_options,
)
from safetyrepro.pipeline.plan import plan_lines
from safetyrepro.pipeline.preflight import check_inputs, preflight
from safetyrepro.pipeline.schedule import Priorities, cell_ids, human_judges, rescored_configs
from safetyrepro.results.figures import FIGURES
from safetyrepro.results.records import fingerprint, record_of
from safetyrepro.running.data import manifest
from safetyrepro.running.server import stop_servers
from snakemake.io import apply_wildcards

# Every input problem (config, data, model paths, subset sizes, case-study packages) stops the run
# here, before any job. A job that Snakemake runs in a process of its own (a cluster job) takes the
# effective config its main process wrote, so a config file edited mid-run changes nothing.
INHERITED_CONFIG = os.environ.get("SAFETYREPRO_RUN_CONFIG", "")
try:
    if not workflow.is_main_process and Path(INHERITED_CONFIG).is_file():
        SETTINGS = load_settings(INHERITED_CONFIG)
    else:
        SETTINGS = load_run_settings(workflow.config_settings.configfiles, workflow.config_settings.config)
    # the case study's and the imports' packages, unless the rules' conda envs have them
    check_inputs(SETTINGS, packages=not workflow.deployment_settings.deployment_method)
except (ConfigError, DataError) as error:
    sys.exit(f"{ERROR_PREFIX}{error}")
config.clear()
config.update(SETTINGS.document)
print("\n".join([*(f"safetyrepro: {line}" for line in plan_lines(SETTINGS)), *plugin_warnings()]), file=sys.stderr)

RESULTS = str(SETTINGS.results_dir)
CELLS = cell_ids(SETTINGS.cells())
PROBE_CELLS = cell_ids(SETTINGS.probe_cells())  # outside the headline tables
MODELS = {m.name: m for m in SETTINGS.served_models()}  # the judges too: each has its describe_model and server
RESCORED = rescored_configs(SETTINGS)  # a config of a declared scorer axis -> its generation twin's
HUMAN_JUDGES = human_judges(SETTINGS)
PROBE_MODELS = [m.name for m in SETTINGS.precision_probe.new_models] if SETTINGS.precision_probe else []
ON_GPU = SETTINGS.backend.uses_gpu()
PRIORITY = Priorities.of(list(MODELS), CELLS + PROBE_CELLS, ON_GPU)

# Jobs read the effective config from a file named by its content, named to them in the environment; each rule's
# `record` param names exactly what its outputs depend on.
RUN_CONFIG = run_config_file(SETTINGS.document, Path(".snakemake/safetyrepro"))
os.environ["SAFETYREPRO_RUN_CONFIG"] = str(RUN_CONFIG.resolve())
if workflow.is_main_process:  # before Snakemake reads its records: a damaged one would stop it
    for line in drop_damaged_snakemake_records(Path(".snakemake/metadata")):
        print(f"safetyrepro: {line}", file=sys.stderr)


envvars:
    "SAFETYREPRO_RUN_CONFIG",


IMPORTS = bool(SETTINGS.imports)  # results produced elsewhere: no model runs (workflow/rules/imports.smk)


wildcard_constraints:
    model="|".join(map(re.escape, MODELS)),
    benchmark=r"[A-Za-z0-9][A-Za-z0-9._+-]*" if IMPORTS else "|".join(SETTINGS.benchmarks),
    config_id=r"[A-Za-z0-9.]+-[A-Za-z0-9.]+-[A-Za-z0-9.]+shot-(freeform|logprob)(-[a-z][a-z0-9_]*=[A-Za-z0-9.]+)*",


def code(job):
    """Digest of the code that decides a job's outputs (safetyrepro.pipeline.fingerprints.JOB_CODE)."""
    return code_digest(*JOB_CODE[job])


# What the rules read and how their jobs are scheduled: safetyrepro.pipeline.schedule, given the wildcards.
def cell_priority(wildcards):
    return PRIORITY.cell(wildcards.model, wildcards.benchmark, wildcards.config_id)


def describe_priority(wildcards):
    return PRIORITY.describe(wildcards.model)


def build_priority(wildcards):
    return PRIORITY.build()


def judge_of(wildcards):
    """The judge model (a ModelSpec) that labels a cell's responses, or None."""
    return schedule.judge_of(SETTINGS, wildcards.benchmark, wildcards.config_id)


def rescore_priority(wildcards):
    return PRIORITY.rescore(getattr(judge_of(wildcards), "name", None))


def asked_judge(wildcards):
    """The name of the judge model that a judge_agreement job's scorer axis value asks about its benchmark."""
    return SETTINGS.envelope.labelling(wildcards.value, wildcards.benchmark)[1]


def judge_priority(wildcards):
    return PRIORITY.judge_agreement(asked_judge(wildcards))


def model_gpus(wildcards):
    """The GPUs this model's cells ask for: 0 where its server needs none (a model behind a server), else 1, or a
    model split over GPUs its tensor x pipeline; on a cluster the nodes' GPUs, not this host's, decide."""
    return SETTINGS.backend.gpus(SETTINGS.model(wildcards.model), elsewhere=workflow.non_local_exec)


def rescore_gpus(wildcards):
    """The GPUs a rescored cell asks for: its judge's (none without a judge)."""
    judge = judge_of(wildcards)
    return 0 if judge is None else SETTINGS.backend.gpus(judge, elsewhere=workflow.non_local_exec)


def judge_gpus(wildcards):
    """The GPUs a judge's agreement job asks for: the judge's."""
    return SETTINGS.backend.gpus(SETTINGS.model(asked_judge(wildcards)), elsewhere=workflow.non_local_exec)


def cell_group(wildcards):
    """A cell's group: its model's (on a cluster, a model's cells form one job: one load), by round in a budgeted
    run (budget_group)."""
    return budget_group(f"model-{wildcards.model}", wildcards)


def rescore_group(wildcards):
    return budget_group(schedule.rescore_group(wildcards.model, judge_of(wildcards)), wildcards)


def budget_group(group, wildcards):
    """`group` as it is; in a budgeted run, the part of it that the round choosing the cell's config runs."""
    if not BUDGETED:
        return group
    record = lambda n: ROUND.format(benchmark=wildcards.benchmark, n=n)
    return schedule.round_group(group, wildcards.benchmark, wildcards.config_id, record)


def finished_cell_paths(kind, folder=schedule.GRID):
    """The grid's cells to aggregate (folder PROBE: the precision probe's own)."""
    cells = PROBE_CELLS if folder == schedule.PROBE else CELLS
    return schedule.finished_cell_paths(RESULTS, cells, kind, SETTINGS.partial_results, folder)


def data_files(benchmark):
    """The benchmark's data files (never fetched during a run: `safetyrepro fetch-data` does that), marked
    ancient: a job that reads them has their contents in its record (fingerprints.data_digests), not their times."""
    return [ancient(str(SETTINGS.data_dir / entry.path)) for entry in manifest([benchmark])]


def model_input(wildcards):
    """An embedded model's built directory; nothing for hub ids and local models."""
    spec = MODELS[wildcards.model]
    return [spec.path] if spec.embedded else []


def scorer_model_input(wildcards):
    return schedule.scorer_model_input(SETTINGS, wildcards.benchmark, wildcards.config_id)


def judge_input(wildcards):
    return schedule.judge_input(RESULTS, judge_of(wildcards))


def judge_agreement_input(wildcards):
    """The judges' agreement tables, for an analysis that reads human labels."""
    if not ANALYSES[wildcards.name].human_labels:
        return []
    return schedule.judge_agreement_input(RESULTS, HUMAN_JUDGES, SETTINGS.partial_results)


def human_label_input(wildcards):
    """The files of the run's replies that people labelled (`human_labels`) by benchmark, for an analysis that reads
    them."""
    if not ANALYSES[wildcards.name].label_files:
        return {}
    return {name: str(path) for name, path in SETTINGS.human_label_files.items()}


def imported_benchmarks():
    """The benchmarks of the imported cells (after the import job has run)."""
    import pandas as pd

    cells = checkpoints.import_results.get().output.cells
    return list(dict.fromkeys(pd.read_parquet(cells, columns=["benchmark"])["benchmark"]))


def report_outputs(wildcards):
    """What `all` asks of the report (workflow/rules/report.smk): per benchmark, the run's or those imported."""
    return schedule.report_outputs(RESULTS, imported_benchmarks() if IMPORTS else SETTINGS.benchmarks, BUDGETED)


# A budgeted run's rounds (workflow/rules/estimate.smk): the inputs of a round, and the cells the rounds chose.
BUDGETED = SETTINGS.budgeted


def round_record(benchmark, n):
    """Round n's record of a benchmark (a checkpoint: Snakemake runs it first when it is missing)."""
    return checkpoints.estimate_round.get(benchmark=benchmark, n=n).output.record


def estimate_round_input(wildcards):
    """Round n's inputs: the previous round's record and every model's cells of the configs it chose."""
    n = int(wildcards.n)
    if n == 0:
        return {"previous": [], "cells": []}
    previous = round_record(wildcards.benchmark, n - 1)
    chosen = [(m, wildcards.benchmark, c) for c in schedule.round_choice(previous) for m in MODELS_RUN]
    return {"previous": previous, "cells": schedule.cell_paths(RESULTS, chosen, "summary")}


def last_rounds():
    """Each benchmark's last round record."""
    return {b: schedule.last_round(lambda n, b=b: round_record(b, n)) for b in SETTINGS.benchmarks}


def grid_cell_paths(kind):
    """The grid's cells to aggregate: a budgeted run's, those its rounds chose (an input function); else
    finished_cell_paths'."""
    if BUDGETED:
        return lambda wildcards: schedule.budget_cells(RESULTS, MODELS_RUN, last_rounds(), kind)
    return finished_cell_paths(kind)


MODELS_RUN = [m.name for m in SETTINGS.models]


# The auditor's search (workflow/rules/audit.smk): its paths and the inputs of its steps.
AUDIT = f"{RESULTS}/audit/{{benchmark}}/{{model_a}}_vs_{{model_b}}"
AUDIT_MODEL = schedule.audit_model(SETTINGS, IMPORTS)


def audit_space(wildcards):
    return schedule.audit_space(SETTINGS, wildcards.benchmark, IMPORTS)


def audit_step_record(wildcards, n):
    """Step n's record (a checkpoint: Snakemake runs it first when it is missing)."""
    pair = {"model_a": wildcards.model_a, "model_b": wildcards.model_b}
    return checkpoints.audit_step.get(benchmark=wildcards.benchmark, **pair, n=n).output.step


def audit_cells(wildcards, config_ids, kind):
    """The pair's cells of these configs: summaries or item rows (with imports: the imported tables)."""
    if IMPORTS:
        return [getattr(checkpoints.import_results.get().output, "cells" if kind == "summary" else "rows")]
    pair = (wildcards.model_a, wildcards.model_b)
    return schedule.cell_paths(RESULTS, [(m, wildcards.benchmark, c) for c in config_ids for m in pair], kind)


def audit_step_input(wildcards):
    """Step n's inputs: the previous step's record and the cells of the config it chose."""
    n = int(wildcards.n)
    if n == 0:
        return {"previous": [], "cells": audit_cells(wildcards, [], "summary")}
    previous = audit_step_record(wildcards, n - 1)
    return {"previous": previous, "cells": audit_cells(wildcards, [schedule.audit_choice(previous)], "summary")}


def audit_report_input(wildcards):
    """The last step's record and the item rows of every config the search ran."""
    last, run = schedule.audit_last_step(lambda n: audit_step_record(wildcards, n))
    return {"step": last, "rows": audit_cells(wildcards, run, "items"), "cells": audit_cells(wildcards, [], "summary")}


# Every job records what its outputs were made from (safetyrepro.results.records): its rule's fingerprint, a
# hash of what the outputs depend on (DEPENDS[rule], a function of the wildcards; the rule's only rerun
# trigger besides its inputs), and their SHA-256, in results/jobs/. Results copied, moved, restored or stripped
# of .snakemake/ are checked by that record, not by Snakemake's metadata: an output whose record names other
# settings or other bytes is redone, and so is everything built from it; an output without a record is refused
# (docs/reruns.md; safetyrepro.pipeline.outdated).
DEPENDS = {}
# A check of a rule's existing outputs beyond their record, as CURRENT[rule](wildcards, outputs): why they are
# outdated, or None
CURRENT = {}
OUTDATED = markers_folder(RUN_CONFIG.parent, RESULTS)
REDONE = set()
MADE_OF = {}  # made_of's fingerprints, by job


def in_results(paths):
    """Paths in the results folder as a record names them: relative to it, so a copy or a move keeps them."""
    return [path.removeprefix(f"{RESULTS}/") for path in paths]


def job_record(first_output):
    """The record of the job whose first output has this pattern: results/jobs/<that path>.json."""
    return record_of(first_output, RESULTS)


def made_of(rule, wildcards):
    """The fingerprint of what a job's outputs depend on (DEPENDS[rule]), once a plan per job: its params and
    the check of its record both ask."""
    key = (rule, tuple(wildcards.items()))
    if key not in MADE_OF:
        MADE_OF[key] = fingerprint(DEPENDS[rule](wildcards))
    return MADE_OF[key]


def record_args(rule):
    """A rule's `record` param, its rerun trigger: the options by which its job records its outputs."""

    def args(wildcards, input, output):
        return record_options(output.job_record, made_of(rule, wildcards), RESULTS, list(output), input)

    return args


def outdated(rule):
    """An input function: the job's marker, always the same path (its set of inputs never changes). The main
    process checks the job's outputs against their record first (and CURRENT[rule]'s check): an outdated one gets
    its marker anew, newer than the outputs, so that Snakemake redoes the job; else the marker is dated at the
    epoch. Outputs that exist without a record stop the run with one line."""

    def check(wildcards):
        patterns = workflow.get_rule(rule).output
        record = apply_wildcards(str(patterns.job_record), dict(wildcards.items()))
        outputs = [apply_wildcards(str(p), dict(wildcards.items())) for p in patterns if p is not patterns.job_record]
        marker = marker_of(OUTDATED, RESULTS, outputs[0])
        if not workflow.is_main_process:
            return [str(marker)]
        current = (lambda: CURRENT[rule](wildcards, outputs)) if rule in CURRENT else None
        try:
            problem = outdated_problem(
                record, outputs, lambda: made_of(rule, wildcards), SETTINGS.results_dir, current
            )
        except ConfigError as error:
            sys.exit(f"{ERROR_PREFIX}{error}")
        if problem is None:
            mark_current(marker)
        elif outputs[0] not in REDONE:
            REDONE.add(outputs[0])
            print(f"safetyrepro: redoing {outputs[0]}: {problem}", file=sys.stderr)
            mark_outdated(marker, problem, [*outputs, record])
        return [str(marker)]

    return check
