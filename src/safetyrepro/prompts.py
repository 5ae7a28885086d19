"""Rendering a prompt: one item under one config, few-shot examples included."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .benchmarks.base import Benchmark, Item
    from .envelope import Config, Envelope


def render_prompt(envelope: Envelope, config: Config, benchmark: Benchmark, item: Item, shots: Sequence[Item]) -> str:
    """The full prompt of one item under one config (few-shot examples included)."""

    def fields(it: Item) -> dict[str, str]:
        values = {"question": it.question, "answer_format": it.answer_format}
        return values | dict(it.logprob_fields) if config.scoring == "logprob" else values

    shot_text = "".join(
        envelope.shot_format.format(question=fields(s)["question"], answer=benchmark.shot_answer(s, config.scoring))
        for s in shots
    )
    return envelope.template_text(config).format(task=benchmark.task, shots=shot_text, **fields(item))
