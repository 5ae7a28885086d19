"""The registered benchmarks, by config name: every entry point of the group `safetyrepro.benchmarks`
(the built-in ones are registered in pyproject.toml like any plugin's; docs/extending.md). They are loaded when
`BENCHMARKS` or `BROKEN` is first asked for, not when this package is: importing the interface
(`safetyrepro.benchmarks.base`) loads no plugin."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib.metadata import EntryPoint
from typing import Any

from safetyrepro.benchmarks.base import AS_GIVEN, UNPARSED, Benchmark, DataFile, Item, ItemSet, Presentation
from safetyrepro.core.errors import DataError
from safetyrepro.core.scorer_names import JUDGE, RULES
from safetyrepro.plugins import PluginError, Registry, describe, load_registry, made, reason, scorer_module

GROUP = "safetyrepro.benchmarks"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # a benchmark's name and folder: in paths and job names


JUDGE_API = ("question", "read")  # what the module of a judge's question defines


def discover() -> Registry[Benchmark]:
    """Every benchmark registered under GROUP, in name order; apart, the error of each that cannot be used (it
    fails to load or to pass the checks below, or its name is registered twice), naming it and its package."""
    return load_registry(GROUP, "benchmark", _load)


def _load(point: EntryPoint) -> Benchmark:
    """The Benchmark an entry point names (a class is instantiated), checked against its entry."""
    where = describe(point, "benchmark")
    benchmark = made(point, "benchmark", Benchmark, "safetyrepro.benchmarks.Benchmark")
    for what, value in (("name", benchmark.name), ("folder", benchmark.folder)):
        if not isinstance(value, str) or not NAME.fullmatch(value):
            raise PluginError(
                f"{where}: its {what} {value!r} may use only letters, digits and . _ + -, starting with a letter "
                "or digit (it names files, folders and jobs)"
            )
    _check_scorers(where, benchmark)
    if benchmark.name != point.name:
        raise PluginError(f"{where} is named '{benchmark.name}'; the entry point's name must be the benchmark's")
    strata = benchmark.strata
    if not isinstance(strata, tuple) or not strata or not all(isinstance(column, str) for column in strata):
        raise PluginError(f"{where}: its strata {strata!r} must be a non-empty tuple of column names of its items")
    outside = [entry.path for entry in benchmark.data_files if not entry.path.startswith(f"{benchmark.folder}/")]
    if outside:
        raise PluginError(f"{where}: data file {outside[0]} lies outside its folder '{benchmark.folder}/'")
    return benchmark


def _check_scorers(where: str, benchmark: Benchmark) -> None:
    """A PluginError unless the benchmark's `scorers` are distinct registered scorers, "rules" first, and its
    `scorer_arguments` make them (a judge's question a module with JUDGE_API). The registered scorers that
    declare the benchmark among theirs are added to its `scorers`, in name order."""
    from safetyrepro.scorers import discovered, scorer_of

    scorers, found = benchmark.scorers, discovered()
    if not isinstance(scorers, tuple) or scorers[:1] != (RULES,) or len(set(scorers)) != len(scorers):
        raise PluginError(
            f"{where}: its scorers {scorers!r} must be a tuple of distinct names, '{RULES}' (extract) first"
        )
    for name in scorers:
        if name in found.broken:
            raise PluginError(f"{where}: its scorer {name!r} cannot be used: {found.broken[name]}")
        if name not in found.loaded:
            raise PluginError(f"{where}: its scorer {name!r} is not registered (registered: {', '.join(found.loaded)})")
    arguments = benchmark.scorer_arguments
    if not isinstance(arguments, Mapping) or not set(arguments) <= set(scorers):
        raise PluginError(f"{where}: its scorer_arguments {arguments!r} must map some of its scorers to arguments")
    added = [name for name, scorer in found.loaded.items() if benchmark.name in scorer.benchmarks]
    benchmark.scorers = (*scorers, *(name for name in added if name not in scorers))
    for name in benchmark.scorers:
        try:
            scorer = scorer_of(benchmark, name)
        except (Exception, SystemExit) as exc:
            raise PluginError(f"{where}: its scorer {name!r} cannot be made: {reason(exc)}") from exc
        if scorer.asks_judge:
            key = f"its scorer_arguments['{name}']['question']"
            _check_module(where, "judge question", getattr(scorer, "question", None), JUDGE_API, key)
            phrasings = getattr(scorer_module(scorer.question), "PHRASINGS", {})
            if not isinstance(phrasings, Mapping) or not all(
                isinstance(phrasing, str) and NAME.fullmatch(phrasing) and callable(function)
                for phrasing, function in phrasings.items()
            ):
                raise PluginError(
                    f"{where}: the PHRASINGS of its judge question {scorer.question} must map names (letters, digits "
                    "and . _ + -) to functions such as its `question` (docs/extending.md)"
                )


def _check_module(where: str, what: str, name: object, functions: tuple[str, ...], key: str) -> None:
    """A PluginError unless `name` names a module (as `scorer_module` finds it) that defines `functions`."""
    try:
        module = scorer_module(name) if isinstance(name, str) else None
    except (Exception, SystemExit) as exc:  # its import may raise anything, or exit
        raise PluginError(f"{where}: its {what} module {name!r} cannot be imported: {reason(exc)}") from exc
    if module is None or not all(callable(getattr(module, function, None)) for function in functions):
        raise PluginError(
            f"{where}: {key} must name a module with functions {' and '.join(functions)} (docs/extending.md)"
        )


@cache
def registered() -> Registry[Benchmark]:
    """The registry, discovered once a process: `BENCHMARKS` its benchmarks, `BROKEN` the error of each that cannot
    be used (named only to refuse it)."""
    return discover()


def __getattr__(name: str) -> Any:
    """BENCHMARKS and BROKEN (the registry, discovered when first asked for)."""
    if name == "BENCHMARKS":
        return registered().loaded
    if name == "BROKEN":
        return registered().broken
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AS_GIVEN",
    "BENCHMARKS",
    "BROKEN",
    "GROUP",
    "JUDGE",
    "UNPARSED",
    "Benchmark",
    "DataError",
    "DataFile",
    "Item",
    "ItemSet",
    "PluginError",
    "Presentation",
    "RULES",
]
