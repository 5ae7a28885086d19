"""Running one grid cell: render its prompts, query the backend, extract labels, score; or label the
responses of its generation twin with the cell's own scorer (a declared scorer axis)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from safetyrepro.benchmarks.base import UNPARSED
from safetyrepro.results.storage import record_summary
from safetyrepro.running.hashing import item_hash, text_sha256
from safetyrepro.running.prompts import draw_shots, render_prompt
from safetyrepro.scorers import asks_judge, scorer_labels

if TYPE_CHECKING:
    from safetyrepro.backends.base import Backend
    from safetyrepro.benchmarks.base import Benchmark, Item, ItemSet
    from safetyrepro.configuration.envelope import Envelope
    from safetyrepro.core.batching import BatchCondition
    from safetyrepro.core.config_id import Config

ITEM_COLUMNS = [
    "model",
    "benchmark",
    "config_id",
    "item_id",
    "item_hash",
    "stratum",
    "seed",
    "prompt_id",
    "prompt",
    "response",
    "logliks",
    "label",
    "parsed",
    "correct",
    "prompt_format",
    "batch_size",
    "batch_invariant",
]
OUT_OF_MEMORY = ("out of memory", "can't allocate memory", "cannot allocate memory")  # torch's, CUDA's, the OS's


class OutOfMemory(MemoryError):
    """A cell's model call ran out of memory; the message names the setting to lower."""


def run_cell(
    model: str,
    generator: Backend | None,
    scorer: Backend | None,
    data: ItemSet,
    envelope: Envelope,
    config: Config,
    batch: BatchCondition,
    scorer_models: Mapping[str, Path] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Run one cell: one row per item x seed, plus the cell summary (score = mean over seeds).

    `data` holds the items presented as the config says (envelope.presentation); `batch` is how the
    serving backend batches the cell's requests, passed to it and recorded in every row;
    `scorer_models` the folders of the embedded models the config's scorer reads with (Settings.scorer_models).
    """
    benchmark, items = data.benchmark, data.items
    prompts = [
        render_prompt(envelope, config, benchmark, item, draw_shots(envelope, config, data.pool, item))
        for item in items
    ]
    rows = []
    if config.scoring == "logprob":
        requests = [(prompt, text) for prompt, item in zip(prompts, items) for text in item.candidates.values()]
        with naming_memory_settings(envelope, config, batch):
            scores = iter(scorer.loglikelihood(requests, batch.batch_size))
        backend = scorer
        for prompt, item in zip(prompts, items):
            logliks = {label: next(scores) for label in item.candidates}
            rows.append((item, envelope.seeds[0], prompt, None, json.dumps(logliks), benchmark.choose(logliks, item)))
    else:
        backend = generator
        decoding = envelope.decoding(config)
        with naming_memory_settings(envelope, config, batch):
            completions = generator.generate_seeds(
                prompts, decoding, envelope.seeds_for(config), envelope.stop_strings(config), batch.batch_size
            )
        labelled_by = envelope.scorer(config, benchmark.name)
        for seed, responses in completions.items():
            labels = scorer_labels(benchmark, labelled_by, responses, items, scorer_models)
            for item, prompt, response, label in zip(items, prompts, responses, labels):
                rows.append((item, seed, prompt, response, None, label))
    return cell_result(model, data, config, rows, backend.prompt_format, batch)


def rescore_cell(
    model: str,
    twin_rows: pd.DataFrame,
    data: ItemSet,
    envelope: Envelope,
    config: Config,
    batch: BatchCondition,
    scorer_models: Mapping[str, Path] | None = None,
    judge_backend: Backend | None = None,
) -> tuple[pd.DataFrame, dict]:
    """A cell of another scorer (a declared scorer axis): its generation twin's prompts and responses
    (`twin_rows`, that cell's item rows), labelled by this config's scorer (reading with the embedded
    models in `scorer_models`, where it needs one; asking the judge model served by `judge_backend`, where the
    scorer is a judge); the model under test is not called."""
    twin = envelope.generation_twin(config, data.benchmark.name)
    by_id = {item.item_id: item for item in data.items}
    whose = {(m, b, c) for m, b, c in zip(twin_rows["model"], twin_rows["benchmark"], twin_rows["config_id"])}
    if (
        twin is None
        or whose != {(model, data.benchmark.name, twin.config_id)}
        or set(twin_rows["item_id"]) != set(by_id)
    ):
        raise ValueError(
            f"the rows given are not those of this cell's generation twin ({model}/{data.benchmark.name}/"
            f"{twin.config_id if twin else 'none'}, on this cell's items)"
        )
    items = [by_id[item_id] for item_id in twin_rows["item_id"]]
    responses = list(twin_rows["response"])
    scorer = envelope.scorer(config, data.benchmark.name)
    if asks_judge(scorer):
        from safetyrepro.running.judge import judge_labels

        if judge_backend is None:
            raise ValueError("this cell's scorer asks a judge model: give the backend that serves it")
        phrasing = envelope.judge_phrasing(config, data.benchmark.name)
        labels = judge_labels(data.benchmark, scorer, judge_backend, responses, items, batch.batch_size, phrasing)
    else:
        labels = scorer_labels(data.benchmark, scorer, responses, items, scorer_models)
    rows = [
        (item, seed, prompt, response, None, label)
        for item, seed, prompt, response, label in zip(items, twin_rows["seed"], twin_rows["prompt"], responses, labels)
    ]
    return cell_result(model, data, config, rows, twin_rows["prompt_format"].iloc[0], batch)


def cell_result(
    model: str, data: ItemSet, config: Config, rows: list[tuple], prompt_format: str, batch: BatchCondition
) -> tuple[pd.DataFrame, dict]:
    """The item rows (one per item x seed: item, seed, prompt, response, logliks, label) and the summary."""
    benchmark, items = data.benchmark, data.items
    frame = pd.DataFrame(
        [
            {
                "model": model,
                "benchmark": benchmark.name,
                "config_id": config.config_id,
                "item_id": item.item_id,
                "item_hash": item_hash(item.text),
                "stratum": item.stratum,
                "seed": seed,
                "prompt_id": text_sha256(prompt)[:16],
                "prompt": prompt,
                "response": response,
                "logliks": logliks,
                "label": label,
                "parsed": label != UNPARSED,
                "correct": benchmark.is_correct(label, item),
                "prompt_format": prompt_format,
                "batch_size": batch.batch_size,
                "batch_invariant": batch.batch_invariant,
            }
            for item, seed, prompt, response, logliks, label in rows
        ],
        columns=ITEM_COLUMNS,
    )
    scores = summarise(frame, benchmark, items)
    clash = sorted(set(config.as_dict()) & set(scores))
    if clash:  # envelope.reserved_names keeps axes off these names; a new metric must not take an axis's column either
        raise ValueError(f"cell metric(s) {clash} have the name of an envelope axis")
    summary = {"model": model, "benchmark": benchmark.name, **config.as_dict(), **scores, **vars(batch)}
    record_summary(frame, summary)
    return frame, summary


def out_of_memory(exc: BaseException) -> str | None:
    """In a few words, the allocation that failed when an error is one (Python's MemoryError, torch's CPU
    allocator, CUDA out of memory; also as a model server reports them), or None for any other error."""
    text = str(exc)
    if not isinstance(exc, MemoryError) and not any(phrase in text.lower() for phrase in OUT_OF_MEMORY):
        return None
    size = re.search(r"allocate ([0-9.]+ ?[A-Za-z]+)", text)
    return f"it could not allocate {size[1]}" if size else "an allocation failed"


@contextmanager
def naming_memory_settings(envelope: Envelope, config: Config, batch: BatchCondition) -> Iterator[None]:
    """Make a model call that runs out of memory an `OutOfMemory` naming the setting to lower on the
    backend serving the cell: the batch size on HF, the key/value cache's memory on vLLM."""
    try:
        yield
    except Exception as exc:
        detail = out_of_memory(exc)
        if detail is None:
            raise
        if batch.batch_size is None:  # vLLM schedules its own batches in a key/value cache sized at load
            advice = "lower backend.gpu_memory_utilization (vLLM on a GPU) or backend.kv_cache_gib (vLLM on a CPU)"
        else:
            axis = envelope.setting("backend_option", config).get("batch_size")
            source = "this config's batch axis" if axis else "backend.batch_size"
            advice = f"lower the batch size ({batch.batch_size} prompts per forward pass, set by {source})"
        raise OutOfMemory(f"the model ran out of memory ({detail}); {advice}, then run the workflow again") from exc


def summarise(frame: pd.DataFrame, benchmark: Benchmark, items: Sequence[Item]) -> dict:
    """Cell score (mean over seeds of per-seed accuracy), per-seed scores, parse rate, extras."""
    per_seed = frame.groupby("seed")["correct"].mean()
    summary = {
        "score": float(per_seed.mean()),
        "seed_scores": {int(k): float(v) for k, v in per_seed.items()},
        "parse_rate": float(frame["parsed"].mean()),
        "n_items": len(items),
        "n_seeds": len(per_seed),
        "prompt_format": frame["prompt_format"].iloc[0],
    }
    metrics = benchmark.metrics(frame, {item.item_id: item for item in items})
    declared = [key for key in metrics if key in benchmark.metric_names or key.startswith(benchmark.metric_prefixes)]
    wrong = sorted(key for key in metrics if key in summary or key not in declared)
    if wrong:  # a plugin's metric must not overwrite the score or take a name the envelope does not reserve
        raise ValueError(
            f"benchmark {benchmark.name}: metric(s) {wrong} are a column of the cell table or not declared in "
            "its metric_names / metric_prefixes"
        )
    return {**summary, **metrics}
