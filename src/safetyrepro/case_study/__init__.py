"""Cross-package case study (paper app. U): one anchor configuration through our pipeline,
lm-evaluation-harness and Inspect AI on the same items and model; plus the parity check of our
full-answer logprob path against lm-eval's."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from safetyrepro.case_study import drivers
from safetyrepro.case_study.items import CaseItem, case_items
from safetyrepro.case_study.table import RUNS, case_study_table, items_table
from safetyrepro.configuration.settings import CaseStudySettings, Settings
from safetyrepro.core.model_spec import ModelSpec

log = logging.getLogger(__name__)
PARITY_BENCHMARK = "truthfulqa"


def run_case_study(settings: Settings, study: CaseStudySettings, work_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run every package on every benchmark of the study; returns (summary table, per-item picks)."""
    work_dir = Path(work_dir)
    items = {b: case_items(settings, b, study.n_items) for b in study.benchmarks}
    runs: dict[tuple[str, str], drivers.PackageRun] = {}

    ours = drivers.load_ours(study.model, study.batch_size)
    for benchmark, subset in items.items():
        runs[benchmark, "safetyrepro:anchor"] = drivers.run_ours_anchor(
            ours, settings.envelope, benchmark, subset, study.anchor_config
        )
    if PARITY_BENCHMARK in items:
        plain = drivers.load_ours(ModelSpec(**{**study.model.__dict__, "chat_template": "off"}), study.batch_size)
        runs[PARITY_BENCHMARK, "safetyrepro:parity"] = drivers.run_ours_parity(
            plain, study.parity_template, study.target_delimiter, items[PARITY_BENCHMARK]
        )
        del plain
    del ours
    log.info("case study: our pipeline done")

    task_dir = work_dir / "lm_eval_tasks"
    task_dir.mkdir(parents=True, exist_ok=True)
    tasks = {(b, "lm_eval:task"): drivers.write_builtin_task(task_dir, b, subset) for b, subset in items.items()}
    if PARITY_BENCHMARK in items:
        tasks[PARITY_BENCHMARK, "lm_eval:parity"] = drivers.write_parity_task(
            task_dir,
            "safetyrepro_truthfulqa_parity",
            study.parity_template,
            study.target_delimiter,
            items[PARITY_BENCHMARK],
        )
    model = drivers.load_lm_eval_model(study.model.path, study.model.precision, study.batch_size)
    for (benchmark, run), name in tasks.items():
        runs[benchmark, run] = drivers.run_lm_eval_task(
            model, task_dir, name, items[benchmark], builtin=run == "lm_eval:task", output_dir=work_dir / "lm_eval_runs"
        )
    del model
    log.info("case study: lm-eval done")

    for benchmark, subset in items.items():
        runs[benchmark, "inspect_ai:task"] = drivers.run_inspect(
            study.model.path,
            study.model.precision,
            study.batch_size,
            study.max_new_tokens,
            subset,
            work_dir / "inspect_logs",
            f"safetyrepro_{benchmark}_inspect",
        )
    log.info("case study: Inspect AI done")
    return case_study_table(runs, study), items_table(runs)


__all__ = ["RUNS", "CaseItem", "case_items", "run_case_study"]
