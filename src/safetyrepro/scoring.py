"""Running one grid cell: render prompts, query the backend, extract labels, score."""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from dataclasses import dataclass
from functools import cache
from typing import Sequence

import pandas as pd

from .backends import Backend
from .benchmarks import BENCHMARKS, UNPARSED, Benchmark, Item, draw_subset
from .config import ModelSpec, Settings
from .envelope import Config, Envelope

ITEM_COLUMNS = ["model", "benchmark", "config_id", "item_id", "stratum", "seed", "prompt_id", "prompt", "response",
                "logliks", "label", "parsed", "correct", "prompt_format"]


@dataclass
class ItemSet:
    """A benchmark's fixed evaluated items and its disjoint few-shot pool."""

    benchmark: Benchmark
    items: list[Item]
    pool: list[Item]


def item_set(settings: Settings, name: str) -> ItemSet:
    """Load a benchmark's data and draw its configured item subset and few-shot pool."""
    benchmark = BENCHMARKS[name]
    frame = benchmark.load(settings.data_dir)
    evaluated, pool = draw_subset(frame, settings.benchmarks[name]["n_items"], settings.fewshot_pool,
                                  settings.subset_seed, where=f"benchmarks.{name}.n_items")
    make = lambda rows: [benchmark.make_item(r, settings.subset_seed) for r in rows.to_dict("records")]
    return ItemSet(benchmark, make(evaluated), make(pool))


def check_item_sets(settings: Settings) -> dict[str, int]:
    """Load every benchmark's data and draw its subset, so bad files or sizes fail before any job runs."""
    return {name: len(item_set(settings, name).items) for name in settings.benchmarks}


def render_prompt(envelope: Envelope, config: Config, benchmark: Benchmark, item: Item, shots: Sequence[Item]) -> str:
    """The full prompt of one item under one config (few-shot examples included)."""
    def fields(it: Item) -> dict[str, str]:
        values = {"question": it.question, "answer_format": it.answer_format}
        return values | dict(it.logprob_fields) if config.scoring == "logprob" else values

    shot_text = "".join(envelope.shot_format.format(question=fields(s)["question"],
                                                    answer=benchmark.shot_answer(s, config.scoring)) for s in shots)
    return envelope.template_text(config).format(task=benchmark.task, shots=shot_text, **fields(item))


def run_cell(model: str, generator: Backend | None, scorer: Backend | None, data: ItemSet,
             envelope: Envelope, config: Config) -> tuple[pd.DataFrame, dict]:
    """Run one cell: one row per item x seed, plus the cell summary (score = mean over seeds)."""
    benchmark, items = data.benchmark, data.items
    shots = data.pool[: envelope.shot_count(config)]
    prompts = [render_prompt(envelope, config, benchmark, item, shots) for item in items]
    rows = []
    if config.scoring == "logprob":
        requests = [(prompt, text) for prompt, item in zip(prompts, items) for text in item.candidates.values()]
        scores = iter(scorer.loglikelihood(requests))
        backend = scorer
        for prompt, item in zip(prompts, items):
            logliks = {label: next(scores) for label in item.candidates}
            rows.append((item, envelope.seeds[0], prompt, None, json.dumps(logliks), benchmark.choose(logliks, item)))
    else:
        backend = generator
        decoding = envelope.decoding(config)
        completions = generator.generate_seeds(prompts, decoding, envelope.seeds_for(config), envelope.stop_strings(config))
        for seed, responses in completions.items():
            for prompt, item, response in zip(prompts, items, responses):
                rows.append((item, seed, prompt, response, None, benchmark.extract(response, item)))
    frame = pd.DataFrame(
        [{"model": model, "benchmark": benchmark.name, "config_id": config.config_id, "item_id": item.item_id,
          "stratum": item.stratum, "seed": seed, "prompt_id": hashlib.sha256(prompt.encode()).hexdigest()[:16],
          "prompt": prompt, "response": response, "logliks": logliks,
          "label": label, "parsed": label != UNPARSED, "correct": benchmark.is_correct(label, item),
          "prompt_format": backend.prompt_format}
         for item, seed, prompt, response, logliks, label in rows], columns=ITEM_COLUMNS)
    summary = {"model": model, "benchmark": benchmark.name, **config.as_dict(), **summarise(frame, benchmark, items)}
    return frame, summary


def summarise(frame: pd.DataFrame, benchmark: Benchmark, items: Sequence[Item]) -> dict:
    """Cell score (mean over seeds of per-seed accuracy), per-seed scores, parse rate, extras."""
    per_seed = frame.groupby("seed")["correct"].mean()
    return {"score": float(per_seed.mean()), "seed_scores": {int(k): float(v) for k, v in per_seed.items()},
            "parse_rate": float(frame["parsed"].mean()), "n_items": len(items), "n_seeds": len(per_seed),
            "prompt_format": frame["prompt_format"].iloc[0],
            **benchmark.metrics(frame, {item.item_id: item for item in items})}


@cache
def code_digest(name: str) -> str:
    """SHA-256 over the source of a benchmark's module and the package modules it uses, so that
    editing one benchmark's parser changes only that benchmark's digest (computed once per
    benchmark, not once per cell)."""
    module = sys.modules[type(BENCHMARKS[name]).__module__]
    used = {module} | {sys.modules[value.__module__] for value in vars(module).values()
                       if getattr(value, "__module__", "").startswith("safetyrepro.")}
    digest = hashlib.sha256()
    for name in sorted(m.__name__ for m in used):
        digest.update(inspect.getsource(sys.modules[name]).encode())
    return digest.hexdigest()


def cell_fingerprint(settings: Settings, spec: ModelSpec, benchmark: str, config: Config) -> str:
    """Everything a cell's result depends on, hashed; a change reruns exactly the affected cells."""
    envelope = settings.envelope
    params = {
        "model": spec.__dict__, "backend": {k: settings.backend.get(k) for k in ("generate", "loglikelihood")},
        "benchmark": settings.benchmarks[benchmark], "subset_seed": settings.subset_seed,
        "fewshot_pool": settings.fewshot_pool, "config": config.as_dict(),
        "values": {axis: envelope.axes[axis][getattr(config, axis)] for axis in ("template", "decoding", "shots", "scoring")},
        "seeds": envelope.seeds_for(config), "decoding": envelope.decoding(config).__dict__,
        "stop": envelope.stop_strings(config), "shot_format": envelope.shot_format,
        "code": code_digest(benchmark),
    }
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()
