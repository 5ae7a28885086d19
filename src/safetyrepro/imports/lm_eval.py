"""lm-evaluation-harness output folders: `results_<date>.json`, and `samples_<task>_<date>.jsonl` when run with
`--log_samples` (the layout lm_eval.loggers.EvaluationTracker writes, lm-eval 0.4).

Each task of a results file is one configuration: the scoring path from the task's `output_type`
(multiple_choice and loglikelihood: logprob; generate_until: freeform), shots from `n-shot`, decoding
from the task's `generation_kwargs` under the run's `gen_kwargs` (greedy for log-likelihood tasks), and the
template's identity from what renders the prompt (description, doc_to_text/choice/target, delimiters,
few-shot config, chat template and system instruction), hashed; the mapping file names it. The score
is the task's own aggregate of the chosen metric (`acc` by default); per-item correctness is the same
metric in the logged samples.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from safetyrepro.benchmarks import DataError
from safetyrepro.benchmarks.files import JSON_LINE_END, load_json, read_text
from safetyrepro.imports.mapping import ImportMapping
from safetyrepro.imports.runs import (
    ImportedRun,
    check_names,
    decoding_name,
    note_once,
    read_guarded,
    short_hash,
    source_files,
)
from safetyrepro.running.hashing import item_hash, text_sha256

SCORING = {"multiple_choice": "logprob", "loglikelihood": "logprob", "generate_until": "freeform"}
# Task-config keys that decide the rendered prompt (and the run-level keys that do).
TEMPLATE_KEYS = (
    *("description", "doc_to_text", "doc_to_choice", "doc_to_target", "target_delimiter", "fewshot_delimiter"),
    *("fewshot_config", "process_docs", "use_prompt", "gen_prefix"),
)
RUN_TEMPLATE_KEYS = ("chat_template_sha", "system_instruction_sha", "fewshot_as_multiturn")
DEFAULT_METRIC = "acc"
INVALID = "[invalid]"  # what lm-eval's regex filters give a response they cannot read


def _load_json(path: Path) -> dict:
    data = load_json(read_text(path), str(path), "not readable as JSON")
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict) or "configs" not in data:
        raise DataError(f"{path}: not an lm-evaluation-harness results file (no 'results' and 'configs')")
    return data


def _gen_kwargs(value: Any) -> dict[str, Any]:
    """The run's --gen_kwargs: a dict, or lm-eval's 'key=value,key=value' string."""
    if isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for part in str(value or "").split(","):
        key, _, raw = part.partition("=")
        if key.strip():
            out[key.strip()] = {"true": True, "false": False}.get(raw.strip().lower(), raw.strip())
    return out


def _decoding(task_config: dict, run_config: dict, scoring: str) -> str:
    """greedy, or t<temperature> when the task samples (do_sample, or a temperature above 0)."""
    if scoring == "logprob":
        return "greedy"
    kwargs = {**(task_config.get("generation_kwargs") or {}), **_gen_kwargs(run_config.get("gen_kwargs"))}
    temperature = float(kwargs.get("temperature") or 0.0)
    sampled = kwargs.get("do_sample") in (True, "True") or (kwargs.get("do_sample") is None and temperature > 0)
    return decoding_name((temperature or 1.0) if sampled else 0.0)


def template_identity(task_config: dict, results: dict) -> str:
    """'lm' + 8 hex digits of what renders the task's prompt (TEMPLATE_KEYS of the task, RUN_TEMPLATE_KEYS)."""
    parts = {key: task_config.get(key) for key in TEMPLATE_KEYS} | {key: results.get(key) for key in RUN_TEMPLATE_KEYS}
    return short_hash("lm", parts)


def _metric(path: Path, task: str, scores: dict, mapping: ImportMapping) -> tuple[str, str]:
    """(metric, filter) whose value is the score: the mapping's, else acc or the only metric, and the only filter."""
    pairs = [key.split(",", 1) for key in scores if "," in key and not key.split(",", 1)[0].endswith("_stderr")]
    metrics = list(dict.fromkeys(metric for metric, _ in pairs))
    metric = mapping.metric or (
        metrics[0] if len(metrics) == 1 else DEFAULT_METRIC if DEFAULT_METRIC in metrics else None
    )
    if metric not in metrics:
        wanted = f"metric {metric!r} is not among" if metric else "several metrics:"
        raise DataError(f"{path}: task {task}: {wanted} {', '.join(metrics) or 'none'}; name one with `metric:`")
    filters = [flt for name, flt in pairs if name == metric]
    chosen = mapping.filter or (filters[0] if len(filters) == 1 else None)
    if chosen not in filters:
        wanted = f"filter {chosen!r} is not among" if chosen else "several filters:"
        raise DataError(f"{path}: task {task}: metric {metric}: {wanted} {', '.join(filters)}; name one with `filter:`")
    return metric, chosen


def _binary(value: Any) -> bool | None:
    """A per-item metric value as right/wrong; None when it is not 0/1."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return bool(number) if number in (0.0, 1.0) else None


def _choice(arguments: dict, index: int) -> str:
    return str(arguments[f"gen_args_{index}"]["arg_1"]).strip()


def _item_rows(
    path: Path, metric: str, filter_name: str, seed: int, scoring: str, mapping: ImportMapping, notes: list[str]
) -> pd.DataFrame | None:
    """Per-item rows from the task's samples file, or None (with a note) when they cannot be read."""
    rows = []
    text_fields_missing = False
    for number, line in enumerate(JSON_LINE_END.split(read_text(path)), 1):
        if not line.strip():
            continue
        sample = load_json(line, f"{path}, line {number}")
        if not isinstance(sample, dict):
            raise DataError(f"{path}, line {number}: not a JSON object")
        if sample.get("filter") != filter_name:
            continue
        doc, arguments = sample["doc"], sample["arguments"]
        correct = _binary(sample.get(metric))
        if correct is None:
            notes.append(f"{path}: metric {metric} is not 0/1 per item: the cell is imported without item rows")
            return None
        if mapping.item_id is not None and mapping.item_id not in doc:
            raise DataError(f"{path}, line {number}: the doc has no field {mapping.item_id!r} (mapping item_id)")
        texts = [str(doc[key]) for key in mapping.item_text if key in doc]
        text_fields_missing |= not texts
        prompt = str(arguments["gen_args_0"]["arg_0"])
        if scoring == "logprob":
            logliks = [float(resp[0] if isinstance(resp, list) else resp) for resp in sample["filtered_resps"]]
            label, response = _choice(arguments, max(range(len(logliks)), key=logliks.__getitem__)), None
        else:
            logliks, response = None, str(sample["resps"][0][0] if sample["resps"] else "")
            label = str(sample["filtered_resps"][0] if sample["filtered_resps"] else "")
        rows.append(
            {
                "item_id": str(doc[mapping.item_id]) if mapping.item_id else str(sample["doc_id"]),
                "item_hash": item_hash("\n\n".join(texts)) if texts else None,
                "seed": seed,
                "prompt_id": text_sha256(prompt)[:16],
                "response": response,
                "logliks": json.dumps(logliks) if logliks is not None else None,
                "label": label,
                "parsed": label != INVALID,
                "correct": correct,
            }
        )
    if not rows:
        notes.append(f"{path}: no sample with filter {filter_name!r}: the cell is imported without item rows")
        return None
    if text_fields_missing:
        notes.append(
            f"{path}: the docs lack the item-text field(s) {', '.join(mapping.item_text)}: those items have no "
            "item_hash (name the fields with `item_text:` in the mapping file)"
        )
    return pd.DataFrame(rows)


def read_results_file(path: Path, root: Path, mapping: ImportMapping, notes: list[str]) -> list[ImportedRun]:
    """The runs (one per task) of one lm-eval results file."""
    results = _load_json(path)
    run_config = results.get("config") or {}
    date_id = path.stem.removeprefix("results_")
    groups = {name for name, subtasks in (results.get("group_subtasks") or {}).items() if subtasks}
    model_name = str(results.get("model_name") or run_config.get("model_args") or run_config.get("model") or "")
    seed = int(run_config.get("torch_seed") or run_config.get("random_seed") or 0)
    runs = []
    for task, scores in results["results"].items():
        if task in groups:
            notes.append(f"{path}: {task} is a group of tasks: its subtasks are imported, its aggregate is not")
            continue
        task_config = results["configs"].get(task)
        if not isinstance(task_config, dict):
            raise DataError(f"{path}: task {task} has results but no entry under 'configs'")
        output_type = task_config.get("output_type")
        if output_type not in SCORING:
            notes.append(f"{path}: task {task}: output type {output_type!r} gives no verdict (not imported)")
            continue
        metric, filter_name = _metric(path, task, scores, mapping)
        if not (results.get("higher_is_better", {}).get(task, {}).get(metric, True)):
            raise DataError(f"{path}: task {task}: for metric {metric} lower is better; name a higher-is-better one")
        scoring = SCORING[output_type]
        entry = mapping.task(task)
        identity = template_identity(task_config, results)
        template = mapping.template(task, identity)
        if template == identity:
            note_once(
                notes, f"task {task}: a template is named by its identity {identity} (name it under `templates:`)"
            )
        shots = results.get("n-shot", {}).get(task, task_config.get("num_fewshot") or 0)
        axes = {
            "template": template,
            "decoding": _decoding(task_config, run_config, scoring),
            "shots": str(int(shots)),
            "scoring": scoring,
            **{axis: str(value) for axis, value in entry.get("axes", {}).items()},
        }
        samples = path.with_name(f"samples_{task}_{date_id}.jsonl")
        items = None
        if os.path.lexists(samples):  # read, and refused when it is not a regular file
            items = read_guarded(
                "lm-evaluation-harness", _item_rows, samples, metric, filter_name, seed, scoring, mapping, notes
            )
        else:
            notes.append(f"{path}: task {task}: no {samples.name} (run without --log_samples): no item rows")
        run = ImportedRun(
            file=path,
            source=f"lm_eval:{path.relative_to(root) if path.is_relative_to(root) else path}:{task}",
            model=mapping.model(model_name),
            benchmark=entry.get("benchmark", task),
            axes=axes,
            score=float(scores[f"{metric},{filter_name}"]),
            seeds=(seed,),
            items=items,
            prompt_format="chat" if results.get("chat_template_sha") else "plain",
            batch_size=int(run_config["batch_size"]) if str(run_config.get("batch_size", "")).isdigit() else None,
            harness={"model_args": run_config.get("model_args"), "limit": run_config.get("limit")},
            raw_model=model_name,
            files=(path, samples) if items is not None else (path,),
            where=f"{path} (task {task!r})",
        )
        check_names(run, f"task {task!r}")
        runs.append(run)
    return runs


def read_lm_eval(root: Path, mapping: ImportMapping, notes: list[str]) -> list[ImportedRun]:
    """Every run under an lm-eval output folder (results_*.json at any depth), or of one results file."""
    files = source_files(root, "results_*.json", "lm-evaluation-harness results_*.json file")
    folder = root if root.is_dir() else root.parent
    return [
        run
        for path in files
        for run in read_guarded("lm-evaluation-harness", read_results_file, path, folder, mapping, notes)
    ]
