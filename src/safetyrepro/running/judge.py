"""Judging replies: a judge model (one of the config's `judges`, served by the run's backends as a model
under test is) is asked its benchmark's question about each reply, greedily, as the scorer axis value asking it
words it (its `question`: a phrasing of the question's module; else the module's own `question`), and its answer
is read into the benchmark's labels (by the module's `read`). An answer that names no label is "unparsed", as is a
reply with no text (nothing is asked). Each distinct question is asked once per cell. A guard model's question is
a conversation (the request and the reply as turns), which its chat template formats, and its answer may be longer
than a letter (`safetyrepro.scorers.judge_answer`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from safetyrepro.benchmarks import UNPARSED
from safetyrepro.core.conversation import Prompt
from safetyrepro.core.messages import excerpt
from safetyrepro.scorers import judge_answer, question_module, wording

if TYPE_CHECKING:
    from safetyrepro.backends.base import Backend
    from safetyrepro.benchmarks.base import Benchmark, Item

log = logging.getLogger(__name__)
REPLY_CHARS = 2000  # the judge reads at most this much of a reply: its opening and its end, halves of it
SHOWN = 5  # unparsed answers quoted in the cell's log


def question_about(
    benchmark: Benchmark, scorer: str, reply: str, item: Item | None, phrasing: str | None = None
) -> Prompt | None:
    """The question a judge is asked about one reply to an item (the question of `scorer`, a scorer of the benchmark
    that asks a judge, in its `phrasing` (None: the question module's own), the reply cut to what the judge reads),
    or None for a reply without text, which is not asked."""
    if not (isinstance(reply, str) and reply.strip()):
        return None
    return wording(benchmark, scorer, phrasing)(item, shortened(reply), benchmark.default_labels)


def judge_labels(
    benchmark: Benchmark,
    scorer: str,
    judge_backend: Backend,
    replies: Sequence[str],
    items: Sequence[Item | None],
    batch_size: int | None,
    phrasing: str | None = None,
) -> list[str]:
    """One label per reply: the judge's answer to `scorer`'s question about it (in its `phrasing`), read into a
    label."""
    module = question_module(benchmark, scorer)
    labels = benchmark.default_labels
    questions = [question_about(benchmark, scorer, reply, item, phrasing) for reply, item in zip(replies, items)]
    distinct = list(dict.fromkeys(q for q in questions if q is not None))
    answers = {}
    if distinct:
        decoding = judge_answer(benchmark, scorer)
        answers = dict(zip(distinct, judge_backend.generate_seeds(distinct, decoding, [0], (), batch_size)[0]))
    read = [module.read(answers[q], item, labels) if q is not None else UNPARSED for q, item in zip(questions, items)]
    unread = [answers[q] for q, label in zip(questions, read) if q is not None and label == UNPARSED]
    log.info(
        "judge: %d replies; %d without text (unparsed, not asked); %d distinct questions asked; %d replies "
        "unparsed, their answer naming no label",
        len(replies),
        questions.count(None),
        len(distinct),
        len(unread),
    )
    for answer in list(dict.fromkeys(unread))[:SHOWN]:
        log.info("judge answer naming no label: %s", excerpt(answer))
    return read


def shortened(reply: str) -> str:
    """A reply as the judge reads it: whole, or its first and last REPLY_CHARS / 2 characters (a long
    reasoning's decision is at its end)."""
    if len(reply) <= REPLY_CHARS:
        return reply
    half = REPLY_CHARS // 2
    return f"{reply[:half]} [...] {reply[-half:]}"
