"""Cross-package case study (paper app. U): one anchor configuration through our pipeline,
lm-evaluation-harness and Inspect AI on the same items and model; plus the parity check of our
full-answer logprob path against lm-eval's."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from ..config import ConfigError, ModelSpec, Settings
from . import drivers
from .items import CaseItem, case_items
from .table import RUNS, case_study_table, items_table

log = logging.getLogger(__name__)
PARITY_BENCHMARK = "truthfulqa"


@dataclass(frozen=True)
class CaseStudySettings:
    """The `case_study` config section, checked against the run's models and envelope."""

    model: ModelSpec
    benchmarks: list[str]
    n_items: int
    anchor_config: str
    batch_size: int
    max_new_tokens: int
    parity_template: str
    target_delimiter: str


def case_study_settings(settings: Settings) -> CaseStudySettings | None:
    """The case study's settings, or None when the section is absent or `enabled` is false."""
    raw: Mapping[str, Any] = settings.raw.get("case_study") or {}
    if not raw.get("enabled", False):
        return None
    spec = settings.model(raw["model"])
    if spec.precision == "nf4":
        raise ConfigError("case_study.model: lm-eval and Inspect AI load fp32 or bf16 here, not nf4")
    benchmarks = list(raw.get("benchmarks", ["truthfulqa", "bbq"]))
    for benchmark in benchmarks:
        if benchmark not in settings.benchmarks:
            raise ConfigError(f"case_study.benchmarks: '{benchmark}' is not under `benchmarks` of this config")
        ids = {c.config_id for c in settings.envelope.configs(benchmark)}
        if raw["anchor_config"] not in ids:
            raise ConfigError(f"case_study.anchor_config: '{raw['anchor_config']}' is no valid config of {benchmark}")
    parity = raw["parity"]
    return CaseStudySettings(spec, benchmarks, int(raw["n_items"]), raw["anchor_config"],
                             int(raw.get("batch_size", 16)), int(raw.get("max_new_tokens", 32)),
                             parity["template"], parity.get("target_delimiter", " "))


def run_case_study(settings: Settings, study: CaseStudySettings, work_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run every package on every benchmark of the study; returns (summary table, per-item picks)."""
    work_dir = Path(work_dir)
    items = {b: case_items(settings, b, study.n_items) for b in study.benchmarks}
    runs: dict[tuple[str, str], drivers.PackageRun] = {}

    ours = drivers.load_ours(study.model, study.batch_size)
    for benchmark, subset in items.items():
        runs[benchmark, "safetyrepro:anchor"] = drivers.run_ours_anchor(ours, settings.envelope, benchmark, subset,
                                                                        study.anchor_config)
    if PARITY_BENCHMARK in items:
        plain = drivers.load_ours(ModelSpec(**{**study.model.__dict__, "chat_template": "off"}), study.batch_size)
        runs[PARITY_BENCHMARK, "safetyrepro:parity"] = drivers.run_ours_parity(
            plain, study.parity_template, study.target_delimiter, items[PARITY_BENCHMARK])
        del plain
    del ours
    log.info("case study: our pipeline done")

    task_dir = work_dir / "lm_eval_tasks"
    task_dir.mkdir(parents=True, exist_ok=True)
    tasks = {(b, "lm_eval:task"): drivers.write_builtin_task(task_dir, b, subset) for b, subset in items.items()}
    if PARITY_BENCHMARK in items:
        tasks[PARITY_BENCHMARK, "lm_eval:parity"] = drivers.write_parity_task(
            task_dir, "safetyrepro_truthfulqa_parity", study.parity_template, study.target_delimiter,
            items[PARITY_BENCHMARK])
    model = drivers.load_lm_eval_model(study.model.path, study.model.precision, study.batch_size)
    for (benchmark, run), name in tasks.items():
        runs[benchmark, run] = drivers.run_lm_eval_task(model, task_dir, name, items[benchmark],
                                                        builtin=run == "lm_eval:task")
    del model
    log.info("case study: lm-eval done")

    for benchmark, subset in items.items():
        runs[benchmark, "inspect_ai:task"] = drivers.run_inspect(study.model.path, study.model.precision,
                                                                 study.batch_size, study.max_new_tokens, subset,
                                                                 work_dir / "inspect_logs")
    log.info("case study: Inspect AI done")
    return case_study_table(runs, study), items_table(runs)


__all__ = ["RUNS", "CaseItem", "CaseStudySettings", "case_items", "case_study_settings", "run_case_study"]
