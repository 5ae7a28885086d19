"""The three packages of the case study, each run on the same items with the same local model.

Every driver returns one `Pick` per item: what the package chose and whether that counts as right.
Nothing reaches a hub: the model is a local directory and lm-eval reads generated task files over
local JSON lines. At bf16 all three packages' models compute their linear layers alike
(safetyrepro.backends.cpu_bf16), so the packages differ by what they do, not by a bf16 kernel.
"""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from safetyrepro.backends.cpu_bf16 import use_float32_products
from safetyrepro.backends.hf import HFBackend
from safetyrepro.benchmarks import BENCHMARKS, ItemSet
from safetyrepro.case_study.items import CaseItem
from safetyrepro.configuration.envelope import Envelope, check_parity_template
from safetyrepro.core.batching import BatchCondition
from safetyrepro.core.model_spec import ModelSpec
from safetyrepro.running.cell import run_cell

OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}
# lm-eval's own task definitions that the case study reruns over our items (shipped in its wheel).
LM_EVAL_BUILTIN = {"truthfulqa": "truthfulqa/truthfulqa_mc1.yaml", "bbq": "bbq/bbq_multiple_choice.yaml"}


def go_offline() -> None:
    """Tell transformers, datasets and huggingface_hub not to look for a hub (also when
    huggingface_hub was imported before the variables were set)."""
    os.environ.update(OFFLINE)
    import huggingface_hub.constants

    huggingface_hub.constants.HF_HUB_OFFLINE = True


@dataclass(frozen=True)
class Pick:
    """One package's answer to one item."""

    item_id: str
    choice: str
    correct: bool


@dataclass
class PackageRun:
    """One package run over one benchmark's items: its picks and how long it took."""

    picks: list[Pick]
    seconds: float

    @property
    def score(self) -> float:
        """Accuracy over the items."""
        return sum(p.correct for p in self.picks) / len(self.picks)


def load_ours(spec: ModelSpec, batch_size: int) -> HFBackend:
    """Our HF backend on CPU for the case-study model."""
    go_offline()
    return HFBackend(spec, batch_size=batch_size, device="cpu")


def run_ours_anchor(
    backend: HFBackend, envelope: Envelope, benchmark: str, items: Sequence[CaseItem], config_id: str
) -> PackageRun:
    """Our pipeline's cell for `config_id` (e.g. T1-greedy-0shot-logprob) over the items."""
    config = next(c for c in envelope.configs(benchmark) if c.config_id == config_id)
    started = time.perf_counter()
    data = ItemSet(BENCHMARKS[benchmark], [c.item for c in items], [])
    batch = BatchCondition(backend.batch_size, False)
    frame, _ = run_cell(backend.name, backend, backend, data, envelope, config, batch)
    picks = [Pick(r.item_id, r.label, bool(r.correct)) for r in frame.itertuples()]
    return PackageRun(picks, time.perf_counter() - started)


def render_parity_prompt(template: str, item: CaseItem) -> str:
    """The parity template filled with the bare question."""
    return template.format(question=item.question)


def full_answer_logliks(
    backend: HFBackend, template: str, delimiter: str, items: Sequence[CaseItem]
) -> list[list[float]]:
    """Our logprob path on full answers: per item, the summed log-likelihood of each option text
    (delimiter + text) after the parity prompt."""
    prompts = [render_parity_prompt(template, item) for item in items]
    requests = [(prompt, delimiter + option) for prompt, item in zip(prompts, items) for option in item.options]
    scores = iter(backend.loglikelihood(requests))
    return [[next(scores) for _ in item.options] for item in items]


def run_ours_parity(backend: HFBackend, template: str, delimiter: str, items: Sequence[CaseItem]) -> PackageRun:
    """Our pipeline with the parity template: argmax over full answer texts."""
    started = time.perf_counter()
    picks = argmax_picks(items, full_answer_logliks(backend, template, delimiter, items))
    return PackageRun(picks, time.perf_counter() - started)


def argmax_picks(items: Sequence[CaseItem], logliks: Sequence[Sequence[float]]) -> list[Pick]:
    """Per item, the option with the highest log-likelihood."""
    return [_pick_index(item, scores) for item, scores in zip(items, logliks)]


def _pick_index(item: CaseItem, scores: Sequence[float]) -> Pick:
    best = max(range(len(scores)), key=scores.__getitem__)
    return Pick(item.item.item_id, item.item.labels[best], best == item.gold_index)


# --- lm-evaluation-harness ---------------------------------------------------------------------


def parity_doc_to_text(template: str) -> str:
    """Our parity template (str.format syntax, one {question}; checked as the config loads) as an lm-eval
    Jinja prompt: its literal text in raw blocks around {{question}}."""
    literals = check_parity_template(template, "case_study.parity.template")
    raw = ["{% raw %}" + text + "{% endraw %}" if text else "" for text in literals]
    return raw[0] + "{{question}}" + raw[1]


def _write_jsonl(rows: Sequence[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")


def write_parity_task(task_dir: Path, name: str, template: str, delimiter: str, items: Sequence[CaseItem]) -> str:
    """Generate an lm-eval multiple-choice task over the items with our parity template: options in
    the items' letter order, the gold option's index as target, `delimiter` before each option."""
    data = task_dir / f"{name}.jsonl"
    _write_jsonl(
        [
            {"item_id": i.item.item_id, "question": i.question, "choices": list(i.options), "gold": i.gold_index}
            for i in items
        ],
        data,
    )
    task = {
        "task": name,
        "dataset_path": "json",
        "dataset_name": None,
        "dataset_kwargs": {"data_files": {"test": str(data.resolve())}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": parity_doc_to_text(template),
        "doc_to_choice": "choices",
        "doc_to_target": "gold",
        "target_delimiter": delimiter,
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
    }
    (task_dir / f"{name}.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    return name


def _builtin_record(benchmark: str, item: CaseItem) -> dict:
    if benchmark == "truthfulqa":  # the hub's multiple_choice layout: the best answer first
        options = [item.options[item.gold_index]] + [o for k, o in enumerate(item.options) if k != item.gold_index]
        return {
            "item_id": item.item.item_id,
            "question": item.question,
            "mc1_targets": {"choices": options, "labels": [1] + [0] * (len(options) - 1)},
        }
    return {"item_id": item.item.item_id, **{k: v for k, v in item.record.items() if k not in ("item_id", "stratum")}}


def write_builtin_task(task_dir: Path, benchmark: str, items: Sequence[CaseItem]) -> str:
    """Generate an lm-eval task that includes lm-eval's own task definition for the benchmark
    (prompt, choices, metric) and only swaps its hub dataset for our items as local JSON lines."""
    import lm_eval

    name = f"safetyrepro_{benchmark}_lm_eval"
    data = task_dir / f"{name}.jsonl"
    _write_jsonl([_builtin_record(benchmark, i) for i in items], data)
    builtin = Path(lm_eval.__file__).parent / "tasks" / LM_EVAL_BUILTIN[benchmark]
    split = "validation_split" if benchmark == "truthfulqa" else "test_split"
    split_name = split.removesuffix("_split")
    task = {
        "include": str(builtin),
        "task": name,
        "tag": [],
        "dataset_path": "json",
        "dataset_name": None,
        "dataset_kwargs": {"data_files": {split_name: str(data.resolve())}},
        split: split_name,
    }
    (task_dir / f"{name}.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    return name


def load_lm_eval_model(model_path: str, precision: str, batch_size: int):
    """lm-eval's HF backend (HFLM) on CPU for a local model directory."""
    go_offline()
    from lm_eval.models.huggingface import HFLM

    model = HFLM(pretrained=model_path, dtype=TORCH_DTYPES[precision], device="cpu", batch_size=batch_size)
    use_float32_products(model.model)
    return model


def run_lm_eval(model, task_dir: Path, names: Sequence[str], output_dir: Path | None = None) -> dict[str, list[dict]]:
    """Evaluate generated tasks with lm-eval (0-shot, no chat template); per task, the logged
    samples (doc, per-choice log-likelihoods, metrics). With `output_dir`, lm-eval also writes its
    output folder there as its command line does with --log_samples (results_*.json, samples_*.jsonl),
    named after the model directory: what `safetyrepro import --lm-eval` reads."""
    go_offline()
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(task_dir), include_defaults=False)
    tracker = EvaluationTracker(output_path=str(output_dir)) if output_dir is not None else None
    out = simple_evaluate(
        model=model,
        tasks=list(names),
        task_manager=manager,
        num_fewshot=0,
        log_samples=True,
        apply_chat_template=False,
        evaluation_tracker=tracker,
    )
    samples = {name: sorted(out["samples"][name], key=lambda s: s["doc_id"]) for name in names}
    if tracker is not None:
        config = tracker.general_config_tracker
        config.model_name = Path(str(model.model.config._name_or_path)).name
        config.model_name_sanitized = config.model_name
        saved = copy.deepcopy(out.pop("samples"))  # lm-eval's writer rewrites the samples it saves
        tracker.save_results_aggregated(results=out, samples=saved)
        for name in names:
            tracker.save_results_samples(task_name=name, samples=saved[name])
    return samples


def run_lm_eval_task(
    model, task_dir: Path, name: str, items: Sequence[CaseItem], builtin: bool, output_dir: Path | None = None
) -> PackageRun:
    """One generated lm-eval task over the items, timed; `builtin` when it wraps lm-eval's own task."""
    started = time.perf_counter()
    samples = run_lm_eval(model, task_dir, [name], output_dir)[name]
    return PackageRun(lm_eval_picks(samples, items, builtin), time.perf_counter() - started)


def lm_eval_logliks(sample: dict) -> list[float]:
    """Per-choice log-likelihoods of one logged lm-eval sample."""
    return [float(r[0] if isinstance(r, (list, tuple)) else r) for r in sample["filtered_resps"]]


def lm_eval_picks(samples: Sequence[dict], items: Sequence[CaseItem], builtin: bool) -> list[Pick]:
    """What lm-eval chose per item: our letter when the choices are the item's options (parity
    task), else the chosen choice text; correctness is lm-eval's own `acc`."""
    by_id = {i.item.item_id: i for i in items}
    picks = []
    for sample in samples:
        item = by_id[sample["doc"]["item_id"]]
        scores = lm_eval_logliks(sample)
        best = max(range(len(scores)), key=scores.__getitem__)
        if builtin:
            choice = sample["arguments"][best][1].strip()
        else:
            choice = item.item.labels[best]
        picks.append(Pick(item.item.item_id, choice, bool(sample["acc"])))
    return picks


# --- Inspect AI --------------------------------------------------------------------------------


def run_inspect(
    model_path: str,
    precision: str,
    batch_size: int,
    max_tokens: int,
    items: Sequence[CaseItem],
    log_dir: Path,
    task_name: str = "task",
) -> PackageRun:
    """Inspect AI's multiple_choice solver and choice scorer on the items (options in the items'
    letter order, not shuffled), through its HF provider, greedy; the task (and its log) named `task_name`."""
    go_offline()
    import torch
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import GenerateConfig, get_model
    from inspect_ai.scorer import choice
    from inspect_ai.solver import multiple_choice

    samples = [Sample(input=i.question, choices=list(i.options), target=i.item.gold, id=i.item.item_id) for i in items]
    # the model's name is its directory, so nothing is looked up on a hub
    model = get_model(
        f"hf/{Path(model_path).resolve()}",
        device="cpu",
        dtype=getattr(torch, TORCH_DTYPES[precision]),
        do_sample=False,
        batch_size=batch_size,
        config=GenerateConfig(max_tokens=max_tokens),
    )
    use_float32_products(model.api.model)
    task = Task(dataset=MemoryDataset(samples), solver=multiple_choice(), scorer=choice(), name=task_name)
    started = time.perf_counter()
    log = inspect_eval(task, model=model, log_dir=str(log_dir), display="none", max_tokens=max_tokens)[0]
    seconds = time.perf_counter() - started
    if log.status != "success":
        raise RuntimeError(f"Inspect AI eval failed: {log.status}: {log.error}")
    scores = {sample.id: sample.scores["choice"] for sample in log.samples}
    picks = [
        Pick(i.item.item_id, scores[i.item.item_id].answer or "", scores[i.item.item_id].value == "C") for i in items
    ]
    return PackageRun(picks, seconds)
