"""Running one grid cell: render its prompts, query the backend, extract labels, score."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from safetyrepro.benchmarks.base import UNPARSED
from safetyrepro.running.hashing import item_hash, text_sha256
from safetyrepro.running.prompts import draw_shots, render_prompt

if TYPE_CHECKING:
    from safetyrepro.backends.base import Backend, BatchCondition
    from safetyrepro.benchmarks.base import Benchmark, Item, ItemSet
    from safetyrepro.configuration.envelope import Config, Envelope

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


def run_cell(
    model: str,
    generator: Backend | None,
    scorer: Backend | None,
    data: ItemSet,
    envelope: Envelope,
    config: Config,
    batch: BatchCondition,
) -> tuple[pd.DataFrame, dict]:
    """Run one cell: one row per item x seed, plus the cell summary (score = mean over seeds).

    `data` holds the items presented as the config says (envelope.presentation); `batch` is how the
    serving backend batches the cell's requests, passed to it and recorded in every row.
    """
    benchmark, items = data.benchmark, data.items
    prompts = [
        render_prompt(envelope, config, benchmark, item, draw_shots(envelope, config, data.pool, item))
        for item in items
    ]
    rows = []
    if config.scoring == "logprob":
        requests = [(prompt, text) for prompt, item in zip(prompts, items) for text in item.candidates.values()]
        scores = iter(scorer.loglikelihood(requests, batch.batch_size))
        backend = scorer
        for prompt, item in zip(prompts, items):
            logliks = {label: next(scores) for label in item.candidates}
            rows.append((item, envelope.seeds[0], prompt, None, json.dumps(logliks), benchmark.choose(logliks, item)))
    else:
        backend = generator
        decoding = envelope.decoding(config)
        completions = generator.generate_seeds(
            prompts, decoding, envelope.seeds_for(config), envelope.stop_strings(config), batch.batch_size
        )
        for seed, responses in completions.items():
            for prompt, item, response in zip(prompts, items, responses):
                rows.append((item, seed, prompt, response, None, benchmark.extract(response, item)))
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
                "prompt_format": backend.prompt_format,
                "batch_size": batch.batch_size,
                "batch_invariant": batch.batch_invariant,
            }
            for item, seed, prompt, response, logliks, label in rows
        ],
        columns=ITEM_COLUMNS,
    )
    scores = summarise(frame, benchmark, items)
    clash = sorted(set(config.as_dict()) & set(scores))
    if clash:  # envelope.RESERVED keeps axes off these names; a new metric must not take an axis's column either
        raise ValueError(f"cell metric(s) {clash} have the name of an envelope axis")
    summary = {"model": model, "benchmark": benchmark.name, **config.as_dict(), **scores, **vars(batch)}
    return frame, summary


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
