"""Real lm-evaluation-harness and Inspect AI runs with two tiny local models over our TruthfulQA items.

The outputs are whatever the tools themselves write (lm-eval's `results_*.json` and `samples_*.jsonl`,
Inspect's `.eval` logs), for tests of importers that read them. Nothing reaches a hub: the models are
built locally (tests/helpers/tiny_model.py) and the items are written out as local JSON lines.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import yaml

from helpers.session import REPO
from helpers.tiny_model import build_tiny_model
from safetyrepro.case_study.drivers import go_offline
from safetyrepro.case_study.items import CaseItem, case_items
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.settings import Settings

TASK = "sr_truthfulqa"  # the same lm-eval task name under every template: only the task config tells them apart
N_ITEMS = 6
N_FEWSHOT_POOL = 3
MODEL_SEEDS = {"tiny_a": 0, "tiny_b": 1}
INIT_STD = 1.0  # peaked random models: their answers differ by model, template and shots
# lm-eval `doc_to_text` (Jinja), one include folder per template
LM_EVAL_TEMPLATES = {"qa": "Q: {{question}}\nA:", "question": "Question: {{question}}\nAnswer:"}
LM_EVAL_SHOTS = (0, 2)
# Inspect multiple_choice templates: None is the solver's default
INSPECT_TEMPLATES: dict[str, str | None] = {
    "default": None,
    "terse": "Pick the true answer ({letters}).\n\n{question}\n\n{choices}\n\nANSWER:",
}
INSPECT_EPOCHS = 2
INSPECT_SEED = 1234
INSPECT_TEMPERATURE = 0.7
INSPECT_MAX_TOKENS = 8


@dataclass
class HarnessRuns:
    """What `make_runs` made: model directories by name, the evaluated and few-shot items, lm-eval
    output folders (one per run, results under a model-named subfolder) and Inspect `.eval` logs."""

    models: dict[str, Path]
    items: list[CaseItem]
    fewshot_items: list[CaseItem]
    lm_eval_runs: list[Path] = field(default_factory=list)
    inspect_logs: list[Path] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def truthfulqa_items(
    settings: Settings, n_items: int = N_ITEMS, n_fewshot: int = N_FEWSHOT_POOL
) -> tuple[list[CaseItem], list[CaseItem]]:
    """The case study's first `n_items` TruthfulQA items, and `n_fewshot` other items for few-shot examples
    (from the subset of `n_items + n_fewshot`, which holds at least `n_fewshot` items outside the first)."""
    items = case_items(settings, "truthfulqa", n_items)
    evaluated = {i.item.item_id for i in items}
    larger = case_items(settings, "truthfulqa", n_items + n_fewshot)
    return items, [i for i in larger if i.item.item_id not in evaluated][:n_fewshot]


def build_models(model_dir: Path, seeds: Mapping[str, int] = MODEL_SEEDS) -> dict[str, Path]:
    """One tiny random Llama per seed, in `model_dir/<name>`."""
    return {name: build_tiny_model(model_dir / name, seed, init_std=INIT_STD) for name, seed in seeds.items()}


# --- lm-evaluation-harness ---------------------------------------------------------------------


def _mc_rows(items: Sequence[CaseItem]) -> str:
    rows = [
        {"item_id": i.item.item_id, "question": i.question, "choices": list(i.options), "gold": i.gold_index}
        for i in items
    ]
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def write_lm_eval_tasks(
    task_root: Path, items: Sequence[CaseItem], fewshot_items: Sequence[CaseItem], templates: Mapping[str, str]
) -> dict[str, Path]:
    """Write the items (`test` split) and few-shot items (`train` split) as JSON lines, and per template a
    folder holding task `sr_truthfulqa` with that `doc_to_text`; returns the folders by template name."""
    data = {"test": task_root / "data" / "test.jsonl", "train": task_root / "data" / "train.jsonl"}
    data["test"].parent.mkdir(parents=True, exist_ok=True)
    data["test"].write_text(_mc_rows(items), encoding="utf-8")
    data["train"].write_text(_mc_rows(fewshot_items), encoding="utf-8")
    folders = {}
    for name, doc_to_text in templates.items():
        config = {
            "task": TASK,
            "dataset_path": "json",
            "dataset_name": None,
            "dataset_kwargs": {
                "data_files": {split: str(path.resolve()) for split, path in data.items()},
                "cache_dir": str((task_root / "hf_datasets").resolve()),  # not the user's ~/.cache
            },
            "test_split": "test",
            "fewshot_split": "train",
            "output_type": "multiple_choice",
            "doc_to_text": doc_to_text,
            "doc_to_choice": "choices",
            "doc_to_target": "gold",
            "metric_list": [  # acc_norm: a random model's acc mostly picks the shortest option, the same everywhere
                {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
                {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True},
            ],
            "metadata": {"version": 1.0},
        }
        folders[name] = task_root / name
        folders[name].mkdir(parents=True, exist_ok=True)
        (folders[name] / f"{TASK}.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return folders


def lm_eval_cli(argv: Sequence[str]) -> None:
    """Run lm-eval's command line (`lm-eval run ...`, the console script's own entry point) in this process.

    One change: its task manager indexes only --include_path, not lm-eval's ~14,000 built-in task YAMLs
    (about 14 s a run on 2 cores). Our task is not among them, so what runs and what is written is the same.
    """
    from lm_eval import tasks
    from lm_eval.__main__ import cli_evaluate

    class IncludedTasksOnly(tasks.TaskManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "include_defaults": False})

    with (
        mock.patch.object(sys, "argv", ["lm-eval", "run", *argv]),
        mock.patch.object(tasks, "TaskManager", IncludedTasksOnly),
    ):
        cli_evaluate()


def run_lm_eval(
    out_dir: Path,
    models: Mapping[str, Path],
    items: Sequence[CaseItem],
    fewshot_items: Sequence[CaseItem],
    templates: Mapping[str, str] = LM_EVAL_TEMPLATES,
    shots: Sequence[int] = LM_EVAL_SHOTS,
) -> list[Path]:
    """One lm-eval CLI run (with --log_samples) per model x template x shot count; returns each run's
    output folder `out_dir/<model>-<template>-<shots>shot` (lm-eval writes under a subfolder named after
    the sanitised model path)."""
    go_offline()
    folders = write_lm_eval_tasks(out_dir / "tasks", items, fewshot_items, templates)
    runs = []
    for model, path in models.items():
        for template, folder in folders.items():
            for n in shots:
                run = out_dir / f"{model}-{template}-{n}shot"
                lm_eval_cli(
                    ["--model", "hf", "--model_args", f"pretrained={path.resolve()},dtype=float32"]
                    + ["--device", "cpu", "--tasks", TASK, "--include_path", str(folder), "--num_fewshot", str(n)]
                    + ["--output_path", str(run), "--log_samples", "--batch_size", "4"]
                )
                runs.append(run)
    return runs


# --- Inspect AI --------------------------------------------------------------------------------


def run_inspect(
    log_dir: Path,
    models: Mapping[str, Path],
    items: Sequence[CaseItem],
    templates: Mapping[str, str | None] = INSPECT_TEMPLATES,
) -> list[Path]:
    """One Inspect eval per model x template: multiple_choice (the template passed as the task argument
    `template`, None for the solver's default) and the choice scorer, sampled at temperature 0.7 with a
    fixed seed over `INSPECT_EPOCHS` epochs; returns the `.eval` logs in `log_dir`."""
    go_offline()
    from inspect_ai import Task, task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import GenerateConfig, get_model
    from inspect_ai.scorer import includes
    from inspect_ai.solver import multiple_choice

    @task(name=TASK)
    def truthfulqa_mc(template: str | None = None) -> Task:
        samples = [
            Sample(input=i.question, choices=list(i.options), target=i.item.gold, id=i.item.item_id) for i in items
        ]
        return Task(dataset=MemoryDataset(samples), solver=multiple_choice(template=template), scorer=includes())

    generate = GenerateConfig(
        temperature=INSPECT_TEMPERATURE,
        seed=INSPECT_SEED,
        max_tokens=INSPECT_MAX_TOKENS,
        max_connections=len(items) * INSPECT_EPOCHS,  # the HF provider's batch: all samples at once, no wait
    )
    logs = []
    for name, path in models.items():
        for template in templates.values():
            # a fresh model per eval: the HF provider seeds torch when it is built
            model = get_model(f"hf/{path.resolve()}", config=generate, memoize=False, device="cpu")
            log = inspect_eval(
                truthfulqa_mc(template=template),
                model=model,
                epochs=INSPECT_EPOCHS,
                log_dir=str(log_dir),
                display="none",
                **generate.model_dump(exclude_none=True),
            )[0]
            if log.status != "success":
                raise RuntimeError(f"Inspect eval of {name} failed: {log.status}: {log.error}")
            logs.append(Path(log.location))
    return logs


def make_runs(root: Path, settings: Settings) -> HarnessRuns:
    """Build the two tiny models, then make every lm-eval run and Inspect eval under `root`."""
    models = build_models(root / "models")
    items, fewshot_items = truthfulqa_items(settings)
    runs = HarnessRuns(models, items, fewshot_items)
    started = time.perf_counter()
    runs.lm_eval_runs = run_lm_eval(root / "lm_eval", models, items, fewshot_items)
    runs.seconds["lm_eval"] = time.perf_counter() - started
    started = time.perf_counter()
    runs.inspect_logs = run_inspect(root / "inspect", models, items)
    runs.seconds["inspect"] = time.perf_counter() - started
    return runs


def make_imported_runs(root: Path, data_dir: Path) -> tuple[HarnessRuns, dict[str, Path]]:
    """Two tiny models x two templates x two shot counts in lm-eval, x two templates x two epochs in Inspect, under
    `root`, and each harness's mapping (an `imports` source's `mapping`) naming the models."""
    settings = load_settings(
        {
            "data_dir": str(data_dir),
            "models": [{"name": "a", "path": "org/a"}, {"name": "b", "path": "org/b"}],
            "benchmarks": {"truthfulqa": {"n_items": N_ITEMS}},
            "envelope": str(REPO / "config" / "envelope.yaml"),
            "subset": {"seed": 7, "fewshot_pool": 5},
        }
    )
    runs = make_runs(root, settings)
    names = {str(path.resolve()): name for name, path in runs.models.items()}
    # lm-eval's length-normalised accuracy: these random models' summed log-likelihoods pick the shortest option
    lm_eval = root / "lm_eval.yaml"
    lm_eval.write_text(json.dumps({"models": names, "metric": "acc_norm"}))
    inspect = root / "inspect.yaml"
    inspect.write_text(json.dumps({"models": {f"hf/{path}": name for path, name in names.items()}}))
    return runs, {"lm_eval": lm_eval, "inspect": inspect}
