# SafetyRepro: models x benchmarks x configs -> tidy Parquet tables -> rho_flip (or, with `imports`,
# results produced by another harness -> the same tables -> the same analyses).
# From the repository root: `snakemake --cores all --resources gpu=1` runs config/config.yaml;
# `--configfile FILE` runs FILE alone (a complete config, or an overlay that names its base with
# `extends:`), never merged with the default. See docs/configuration.md.
import os
import time

from snakemake.utils import min_version

from safetyrepro.core.messages import ERROR_PREFIX
from safetyrepro.pipeline.lifecycle import (
    RUN_STOPPED,
    failure_report,
    hold_results,
    settle_future_times,
    stop_jobs_on_sigterm,
    survive_unwritable_cleanup,
)

min_version("9.27")  # a function as a rule priority (inference.smk); 9.15 refuses it
# Each run names its own stop to its jobs (onstart, below). The Snakemake inside a cluster job runs no hooks: its
# jobs must not take the stop of the Snakemake that submitted it for theirs.
os.environ.pop(RUN_STOPPED, None)


# The effective config (safetyrepro.configuration.build.load_settings: layers, overrides, schema defaults, every
# check) is built once here, before anything reads it; `config` then holds exactly that.
include: "workflow/rules/common.smk"


# A config with `imports` analyses results produced elsewhere: one import job instead of the cells.
if IMPORTS:

    include: "workflow/rules/imports.smk"

else:

    include: "workflow/rules/inference.smk"


# The tables, analyses, figures, run record and GRID card are small jobs marked `localrule`: on a
# cluster they run beside Snakemake, not as a Slurm job each (docs/slurm.md).
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/case_study.smk"
include: "workflow/rules/audit.smk"
include: "workflow/rules/estimate.smk"


# Before the first job of a real run (not a dry run): what the run needs of this machine; then the run holds
# its results folder (a second run writing there stops), brings back to now the times a clock moved back left
# ahead of it, and SIGTERM stops its running jobs (docs/reruns.md).
onstart:
    global HELD, STARTED, STOPPED
    try:
        if not IMPORTS:
            preflight(SETTINGS, jobs_here=workflow.local_exec)
        HELD = hold_results(SETTINGS.results_dir)
    except ConfigError as error:
        sys.exit(f"{ERROR_PREFIX}{error}")
    if settled := settle_future_times([SETTINGS.results_dir, OUTDATED]):
        print(f"safetyrepro: {settled}", file=sys.stderr)
    STARTED = time.time()  # after: a log set to now is no log of this run's (failure_report)
    STOPPED = stop_jobs_on_sigterm(RUN_CONFIG.parent)
    survive_unwritable_cleanup(workflow.dag)


onsuccess:
    stop_servers(SETTINGS)


# After a failure, the line that says what happened, below Snakemake's own report.
onerror:
    stop_servers(SETTINGS)
    for line in failure_report(SETTINGS.results_dir, STARTED, STOPPED.is_set()):
        print(line, file=sys.stderr)


rule all:
    input:
        f"{RESULTS}/cells.parquet",
        f"{RESULTS}/items.parquet",
        f"{RESULTS}/rho_flip.parquet",
        f"{RESULTS}/rho_flip.md",
        expand(f"{RESULTS}/analysis/{{name}}.md", name=ANALYSES),
        f"{RESULTS}/summary.md",
        [f"{RESULTS}/estimate.md"] if BUDGETED else [],
        report_outputs,
        CASE_STUDY_OUTPUTS,
