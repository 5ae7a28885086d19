"""The registered benchmarks, by config name: every entry point of the group `safetyrepro.benchmarks`
(the built-in ones are registered in pyproject.toml like any plugin's; docs/extending.md)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Mapping
from functools import cache
from importlib.metadata import EntryPoint
from pathlib import Path
from types import ModuleType

from safetyrepro.benchmarks.base import (
    AS_GIVEN,
    JUDGE,
    RULES,
    UNPARSED,
    Benchmark,
    DataError,
    DataFile,
    Item,
    ItemSet,
    Presentation,
    draw_subset,
)
from safetyrepro.plugins import PluginError, Registry, describe, load_registry, reason

GROUP = "safetyrepro.benchmarks"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # a benchmark's name and folder: in paths and job names


def scorer_module(name: str) -> ModuleType:
    """A module that `Benchmark.scorer_modules` names: relative to this package, or a plugin's by its full name."""
    own = Path(__file__).resolve().parents[1].joinpath(*name.split("."))
    in_package = own.with_suffix(".py").is_file() or (own / "__init__.py").is_file()
    return importlib.import_module(f"safetyrepro.{name}" if in_package else name)


JUDGE_API = ("question", "read")  # what the module of a benchmark's scorer_modules["judge"] defines
HUMAN_LABELS_API = ("human_agreement", "judge_agreement")  # what a `Benchmark.human_labels` module defines


def with_human_labels(names: Iterable[str]) -> list[str]:
    """Those of the benchmarks `names` whose replies have human labels to measure scorers against."""
    return [name for name in names if _registry().loaded[name].human_labels]


def discover() -> Registry[Benchmark]:
    """Every benchmark registered under GROUP, in name order; apart, the error of each that cannot be used (it
    fails to load or to pass the checks below, or its name is registered twice), naming it and its package."""
    return load_registry(GROUP, "benchmark", _load)


def _load(point: EntryPoint) -> Benchmark:
    """The Benchmark an entry point names (a class is instantiated), checked against its entry."""
    where = describe(point, "benchmark")
    target = point.load()
    benchmark = target() if isinstance(target, type) and issubclass(target, Benchmark) else target
    if not isinstance(benchmark, Benchmark):
        what = f"the class {target.__name__}" if isinstance(target, type) else f"of type {type(target).__name__}"
        raise PluginError(f"{where} is {what}, not a safetyrepro.benchmarks.Benchmark")
    for what, value in (("name", benchmark.name), ("folder", benchmark.folder)):
        if not isinstance(value, str) or not NAME.fullmatch(value):
            raise PluginError(
                f"{where}: its {what} {value!r} may use only letters, digits and . _ + -, starting with a letter "
                "or digit (it names files, folders and jobs)"
            )
    scorers = benchmark.scorers
    if not isinstance(scorers, tuple) or scorers[:1] != (RULES,) or len(set(scorers)) != len(scorers):
        raise PluginError(
            f"{where}: its scorers {scorers!r} must be a tuple of distinct names, '{RULES}' (extract) first"
        )
    apart = getattr(benchmark, "scorer_modules", None)
    if not isinstance(apart, Mapping) or not set(apart) - {JUDGE} <= set(scorers[1:]):
        raise PluginError(
            f"{where}: its scorer_modules {apart!r} must map some of its scorers other than '{RULES}' to modules"
        )
    # read where a judge's cell, its agreement job or the scorers analysis runs: checked here, before any runs
    if JUDGE in scorers:
        _check_module(where, "judge question", apart.get(JUDGE), JUDGE_API, f"its scorer_modules['{JUDGE}']")
    if benchmark.human_labels is not None:
        _check_module(where, "human_labels", benchmark.human_labels, HUMAN_LABELS_API, "its human_labels")
    if benchmark.name != point.name:
        raise PluginError(f"{where} is named '{benchmark.name}'; the entry point's name must be the benchmark's")
    strata = benchmark.strata
    if not isinstance(strata, tuple) or not strata or not all(isinstance(column, str) for column in strata):
        raise PluginError(f"{where}: its strata {strata!r} must be a non-empty tuple of column names of its items")
    outside = [entry.path for entry in benchmark.data_files if not entry.path.startswith(f"{benchmark.folder}/")]
    if outside:
        raise PluginError(f"{where}: data file {outside[0]} lies outside its folder '{benchmark.folder}/'")
    return benchmark


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
def _registry() -> Registry[Benchmark]:
    """The registered benchmarks, discovered once, at the first use of BENCHMARKS or BROKEN."""
    return discover()


def __getattr__(name: str) -> dict:
    """BENCHMARKS (the benchmarks that loaded, by name) and BROKEN (a benchmark plugin that cannot be used: named
    only to refuse it), read at first use: importing the interface (benchmarks.base) loads no plugin."""
    if name == "BENCHMARKS":
        return _registry().loaded
    if name == "BROKEN":
        return _registry().broken
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
    "draw_subset",
]
