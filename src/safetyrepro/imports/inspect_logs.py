"""Inspect AI logs (`.eval`, or `.json`), read through `inspect_ai.log.read_eval_log` (the format is versioned).

A `.json` log is read when named as a file. One log is one configuration: epochs are its seeds, the generate config (the plan's, over the model's)
its decoding, the solver plan (solvers and their parameters, hashed) its template identity, and shots
come from a task argument the mapping names (`task_args: {n_shots: shots}`) or the mapping's
`tasks.<task>.shots`; other task arguments become axes when the mapping names them. The score is the
scorer's own aggregate (`accuracy` by default); per-item correctness is the scorer's value per sample
and epoch, read with Inspect's `value_to_float` (C = 1, I = 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from safetyrepro.benchmarks import DataError
from safetyrepro.benchmarks.files import regular_file
from safetyrepro.imports.mapping import ImportMapping
from safetyrepro.imports.runs import (
    VALUE,
    ImportedRun,
    check_names,
    decoding_name,
    note_once,
    read_guarded,
    short_hash,
    source_files,
)
from safetyrepro.running.hashing import item_hash, text_sha256

DEFAULT_METRIC = "accuracy"


def _read(path: Path):
    from inspect_ai.log import read_eval_log

    try:
        return read_eval_log(str(path))
    except Exception as exc:  # noqa: BLE001 - any failure to read is this file's problem, named with it
        raise DataError(f"{path}: not readable as an Inspect AI log ({type(exc).__name__}: {str(exc)[:160]})") from None


def template_identity(log) -> str:
    """'in' + 8 hex digits of the solver plan (each step's solver and parameters)."""
    return short_hash("in", [[step.solver, step.params] for step in log.plan.steps])


def _decoding(log) -> str | None:
    """greedy or t<temperature> from the generate config (the plan's, else the model's); None if unrecorded."""
    for config in (log.plan.config, log.eval.model_generate_config):
        if config.temperature is not None:
            return decoding_name(config.temperature)
    if log.eval.model_args.get("do_sample") is False:
        return decoding_name(0.0)
    return None


def _plain(value: Any) -> str:
    """A task argument's value as an axis value: itself when plain, else 'v' + 8 hex digits of it."""
    text = str(value)
    return text if VALUE.match(text) else short_hash("v", text)


def _scorer(path: Path, log, mapping: ImportMapping) -> tuple[str, str]:
    """(scorer, metric): the mapping's, else the only scorer and accuracy or its only metric."""
    scores = {score.name: score for score in (log.results.scores if log.results else [])}
    name = mapping.scorer or (next(iter(scores)) if len(scores) == 1 else None)
    if name not in scores:
        wanted = f"scorer {name!r} is not among" if name else "several scorers:"
        raise DataError(f"{path}: {wanted} {', '.join(scores) or 'none'}; name one with `scorer:` in the mapping")
    metrics = list(scores[name].metrics)
    metric = mapping.metric or (
        DEFAULT_METRIC if DEFAULT_METRIC in metrics else metrics[0] if len(metrics) == 1 else None
    )
    if metric not in metrics:
        raise DataError(f"{path}: scorer {name}: no single metric among {', '.join(metrics)}; name one with `metric:`")
    return name, metric


def _text(content) -> str:
    return content if isinstance(content, str) else "\n\n".join(message.text for message in content)


def _item_rows(path: Path, log, scorer: str, notes: list[str]) -> pd.DataFrame | None:
    """One row per sample and epoch, or None (with a note) when the scorer's values are not right/wrong."""
    from inspect_ai.scorer import value_to_float

    to_float = value_to_float()
    rows = []
    for sample in log.samples or []:
        score = (sample.scores or {}).get(scorer)
        value = to_float(score.value) if score is not None else None
        if value not in (0.0, 1.0):
            notes.append(
                f"{path}: scorer {scorer} gives sample {sample.id} the value {score and score.value!r}, "
                "not right/wrong: the cell is imported without item rows"
            )
            return None
        shown = []
        for message in sample.messages:
            if message.role == "assistant":
                break
            shown.append(message.text)
        completion = sample.output.completion if sample.output else ""
        rows.append(
            {
                "item_id": str(sample.id),
                "item_hash": item_hash(_text(sample.input)),
                "seed": int(sample.epoch),
                "prompt_id": text_sha256("\n\n".join(shown))[:16],
                "response": completion,
                "logliks": None,
                "label": score.answer if score.answer is not None else completion,
                "parsed": bool(score.answer) if score.answer is not None else True,
                "correct": bool(value),
            }
        )
    return pd.DataFrame(rows) if rows else None


def read_log(path: Path, root: Path, mapping: ImportMapping, notes: list[str]) -> ImportedRun | None:
    """The run of one Inspect log; None (with a note) for a log that did not finish."""
    log = _read(regular_file(path))
    if log.status != "success":
        notes.append(f"{path}: status {log.status}, not success: not imported")
        return None
    task = log.eval.task
    entry = mapping.task(task)
    scorer, metric = _scorer(path, log, mapping)
    identity = template_identity(log)
    axes: dict[str, str] = {"template": mapping.template(task, identity)}
    for argument, value in log.eval.task_args.items():
        axis = mapping.task_args.get(argument)
        if axis is not None:
            axes[axis] = mapping.templates.get(str(value), _plain(value)) if axis == "template" else _plain(value)
    if axes["template"] == identity:
        note_once(notes, f"task {task}: a template is named by its identity {identity} (name it under `templates:`)")
    if "shots" not in axes:
        if "shots" not in entry:
            note_once(
                notes,
                f"task {task}: Inspect logs record no few-shot count: shots taken as 0 "
                "(map a task argument to shots, or set tasks.<task>.shots)",
            )
        axes["shots"] = str(entry.get("shots", 0))
    decoding = _decoding(log)
    if decoding is None:
        note_once(notes, f"task {task}: a log records no temperature: decoding named 'default' (the provider's)")
    axes.update(decoding=decoding or "default", scoring="freeform")
    axes.update({axis: str(value) for axis, value in entry.get("axes", {}).items()})
    items = _item_rows(path, log, scorer, notes)
    epochs = sorted(items["seed"].unique()) if items is not None else list(range(1, (log.eval.config.epochs or 1) + 1))
    run = ImportedRun(
        file=path,
        source=f"inspect:{path.relative_to(root) if path.is_relative_to(root) else path.name}",
        model=mapping.model(log.eval.model),
        benchmark=entry.get("benchmark", task),
        axes={key: axes[key] for key in ("template", "decoding", "shots", "scoring")} | axes,
        score=float(next(s for s in log.results.scores if s.name == scorer).metrics[metric].value),
        seeds=tuple(int(epoch) for epoch in epochs),
        items=items,
        prompt_format="chat",
        harness={"model_args": log.eval.model_args, "task_args": log.eval.task_args},
        raw_model=log.eval.model,
        files=(path,),
    )
    check_names(run, f"task {task!r}")
    return run


def read_inspect(root: Path, mapping: ImportMapping, notes: list[str]) -> list[ImportedRun]:
    """Every finished run among the Inspect logs of a folder (*.eval at any depth), or of one log file
    (.eval or .json)."""
    files = source_files(root, "*.eval", "Inspect AI log (*.eval)")
    folder = root if root.is_dir() else root.parent
    runs = [read_guarded("Inspect AI", read_log, path, folder, mapping, notes) for path in files]
    return [run for run in runs if run is not None]
