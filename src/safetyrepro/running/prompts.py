"""Rendering a prompt: one item under one config, its few-shot examples drawn and included."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from safetyrepro.benchmarks.base import item_rng

if TYPE_CHECKING:
    from safetyrepro.benchmarks.base import Benchmark, Item
    from safetyrepro.configuration.envelope import Envelope
    from safetyrepro.core.config_id import Config


def draw_shots(envelope: Envelope, config: Config, pool: Sequence[Item], item: Item) -> list[Item]:
    """The config's few-shot examples for `item`, all from the few-shot pool (disjoint from the
    evaluated items): the pool's first n, or n drawn by the few-shot-draw axis's seed, once per cell
    (`shuffled`) or for each item (`per_item`)."""
    n, draw = envelope.shot_count(config), envelope.setting("few_shot_draw", config)
    if draw.get("draw", "pool_order") == "pool_order":
        return list(pool[:n])
    rng = random.Random(draw["seed"]) if draw["draw"] == "shuffled" else item_rng(draw["seed"], f"shots:{item.item_id}")
    return rng.sample(list(pool), n)


def render_prompt(envelope: Envelope, config: Config, benchmark: Benchmark, item: Item, shots: Sequence[Item]) -> str:
    """The full prompt of one item under one config (few-shot examples included)."""

    def fields(it: Item) -> dict[str, str]:
        values = {"question": it.question, "answer_format": it.answer_format}
        return values | dict(it.logprob_fields) if config.scoring == "logprob" else values

    shot_text = "".join(
        envelope.shot_format.format(question=fields(s)["question"], answer=benchmark.shot_answer(s, config.scoring))
        for s in shots
    )
    return envelope.template_text(config).format(
        task=benchmark.task, shots=shot_text, **fields(item), **envelope.template_variables(config)
    )
