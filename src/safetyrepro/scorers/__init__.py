"""The registered scorers, by name: every entry point of the group `safetyrepro.scorers` (the built-in ones are
registered in pyproject.toml like any plugin's; docs/extending.md#a-scorer). A scorer's module is imported when
the registry is first asked, not when this package is: importing the interface (`Scorer`) loads no plugin."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import cache
from importlib.metadata import EntryPoint
from pathlib import Path
from types import ModuleType
from typing import Any

from safetyrepro.core.conversation import Prompt, is_conversation
from safetyrepro.core.decoding import Decoding
from safetyrepro.core.judge_answer import ANSWER
from safetyrepro.core.scorer_names import JUDGE, RULES, UNPARSED
from safetyrepro.plugins import PluginError, Registry, describe, load_registry, made, scorer_module
from safetyrepro.scorers.base import Labelled, Scorer

GROUP = "safetyrepro.scorers"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # a scorer's name: in config ids, paths and job names


@cache
def discovered() -> Registry[Scorer]:
    """Every scorer registered under GROUP, in name order, each as made with no arguments; apart, the error of
    each that cannot be used (it fails to load or to pass the checks below, or its name is registered twice)."""
    return load_registry(GROUP, "scorer", _load)


def registered() -> dict[str, Scorer]:
    """The scorers that loaded, by name."""
    return discovered().loaded


def asks_judge(name: str) -> bool:
    """Whether the registered scorer `name` labels by a judge model's answers (`Scorer.asks_judge`): a scorer axis
    value of it names the judge, and the pipeline serves that judge to its cells."""
    return registered()[name].asks_judge


def question_module(benchmark: Labelled, name: str) -> ModuleType:
    """The module of the question that `benchmark`'s scorer `name` (one that asks a judge) asks: its `question`
    attribute names it (the built-in judge's is made with the benchmark's `scorer_arguments`)."""
    return scorer_module(scorer_of(benchmark, name).question)


def wording(benchmark: Labelled, name: str, phrasing: str | None) -> Callable[..., Prompt]:
    """The function that words the question of `benchmark`'s scorer `name` about a reply: its module's `question`,
    or the phrasing `phrasing` of its `PHRASINGS` (answered and read alike, by the module's `read`)."""
    module = question_module(benchmark, name)
    return module.question if phrasing is None else module.PHRASINGS[phrasing]


def asks_conversation(benchmark: Labelled, name: str, phrasing: str | None = None) -> bool:
    """Whether that question (in `phrasing`) is a conversation of turns, as a guard model's is: only a judge's chat
    template can put it to the judge."""
    return is_conversation(wording(benchmark, name, phrasing)(None, "A reply.", benchmark.default_labels))


def judge_answer(benchmark: Labelled, name: str) -> Decoding:
    """How the judge answers the question of `benchmark`'s scorer `name` (one that asks a judge): greedily, in at most
    its question module's ANSWER_TOKENS new tokens (a guard model's answer of several lines), else ANSWER's (a letter
    or a word)."""
    tokens = getattr(question_module(benchmark, name), "ANSWER_TOKENS", ANSWER.max_new_tokens)
    return replace(ANSWER, max_new_tokens=tokens)


def _load(point: EntryPoint) -> Scorer:
    """The Scorer an entry point names (a class is made with no arguments), checked against its entry."""
    where = describe(point, "scorer")
    scorer = made(point, "scorer", Scorer, "safetyrepro.scorers.Scorer")
    if not isinstance(scorer.name, str) or not NAME.fullmatch(scorer.name):
        raise PluginError(
            f"{where}: its name {scorer.name!r} may use only letters, digits and . _ + -, starting with a letter "
            "or digit (it names config ids and files)"
        )
    if scorer.name != point.name:
        raise PluginError(f"{where} is named '{scorer.name}'; the entry point's name must be the scorer's")
    if not isinstance(scorer.benchmarks, tuple) or not all(isinstance(name, str) for name in scorer.benchmarks):
        raise PluginError(f"{where}: its benchmarks {scorer.benchmarks!r} must be a tuple of benchmark names")
    return scorer


# by the benchmark's identity (a plugin's may compare by value, without a hash), which it keeps alive
_MADE: dict[tuple[int, str], tuple[Labelled, Scorer]] = {}


def scorer_of(benchmark: Labelled, name: str) -> Scorer:
    """The scorer `name` as it labels `benchmark`'s replies: made with the benchmark's `scorer_arguments` for it
    (a judge's question), once a process. ValueError where the benchmark has no such scorer."""
    if name not in benchmark.scorers:
        raise ValueError(f"{benchmark.name} has no scorer {name!r} (it has: {', '.join(benchmark.scorers)})")
    key = (id(benchmark), name)
    if key not in _MADE:
        arguments = benchmark.scorer_arguments.get(name)
        _MADE[key] = benchmark, type(registered()[name])(**arguments) if arguments else registered()[name]
    return _MADE[key][1]


def scorer_labels(
    benchmark: Labelled,
    name: str,
    responses: Sequence[str],
    items: Sequence[Any],
    models: Mapping[str, Path] | None = None,
) -> list[str]:
    """One label per response by `benchmark`'s scorer `name`; `models` holds the built folder of the embedded
    model it reads with, if any."""
    scorer = scorer_of(benchmark, name)
    if scorer.asks_judge:
        raise ValueError(f"{benchmark.name}: the scorer '{name}' asks a judge model (safetyrepro.running.judge)")
    if scorer.embedded_model is not None and scorer.embedded_model not in (models or {}):
        raise ValueError(f"the {name} scorer reads replies with the embedded {scorer.embedded_model}: give its folder")
    return scorer.label(benchmark, responses, items, models or {})


__all__ = [
    "GROUP",
    "JUDGE",
    "RULES",
    "UNPARSED",
    "PluginError",
    "Scorer",
    "asks_conversation",
    "asks_judge",
    "discovered",
    "judge_answer",
    "question_module",
    "registered",
    "scorer_of",
    "wording",
]
