"""Finding what packages register under an entry-point group (benchmarks, backends): one loader, which keeps
apart each plugin that cannot be used (it fails to load, is not what its group takes, or its name is
registered twice) with the one-line error naming it and its distribution (docs/extending.md)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Generic, TypeVar

Plugin = TypeVar("Plugin")


class PluginError(RuntimeError):
    """A registered plugin cannot be loaded, is not what its group takes, or clashes with another."""


@dataclass(frozen=True)
class Registry(Generic[Plugin]):
    """What a group's entry points give: the plugins that loaded, by name, and the error of each name that did
    not. Only what names a broken one is refused (with its error); the rest goes on without it."""

    loaded: dict[str, Plugin]
    broken: dict[str, PluginError]


def load_registry(group: str, kind: str, load: Callable[[EntryPoint], Plugin]) -> Registry[Plugin]:
    """Every plugin registered under `group`, loaded and checked by `load`.

    Args:
        group: the entry-point group, e.g. "safetyrepro.benchmarks".
        kind: what the group holds, for messages ("benchmark", "backend").
        load: the plugin an entry point names, checked (a PluginError naming it where it is not one).

    Returns:
        The plugins by name, in name order; the broken names apart, each with its error: a name registered with
        two targets (naming both and their distributions; a package installed twice registers one target twice,
        which is no clash), a target that is not `module:attribute`, and any exception (SystemExit included)
        that importing or checking the target raises.
    """
    points: dict[str, EntryPoint] = {}
    broken: dict[str, PluginError] = {}
    for point in entry_points(group=group):
        first = points.setdefault(point.name, point)
        if first.value != point.value:
            broken[point.name] = PluginError(
                f"{kind} '{point.name}' is registered twice: {first.value} (by {origin(first)}) and "
                f"{point.value} (by {origin(point)}); uninstall one"
            )
    loaded = {}
    for name, point in sorted(points.items()):
        if name in broken:
            continue
        if point.pattern.match(point.value) is None:
            broken[name] = PluginError(f"{describe(point, kind)} names no module:attribute")
            continue
        try:
            loaded[name] = load(point)
        except PluginError as exc:
            broken[name] = exc
        except (Exception, SystemExit) as exc:  # a plugin's import may raise anything, or exit
            broken[name] = PluginError(f"{describe(point, kind)} cannot be loaded: {reason(exc)}")
    return Registry(loaded, dict(sorted(broken.items())))


def made(point: EntryPoint, kind: str, interface: type[Plugin], named: str) -> Plugin:
    """What an entry point names as an `interface` (`named`, as messages name it): an instance of it, or a subclass
    made with no arguments; a PluginError naming the plugin otherwise."""
    target = point.load()
    if isinstance(target, type) and issubclass(target, interface):
        return target()
    if not isinstance(target, interface):
        what = f"the class {target.__name__}" if isinstance(target, type) else f"of type {type(target).__name__}"
        raise PluginError(f"{describe(point, kind)} is {what}, not a {named}")
    return target


def reason(exc: BaseException) -> str:
    """An exception as one line: its type and message."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def origin(point: EntryPoint) -> str:
    """The distribution that registers `point`, with its version."""
    return f"{point.dist.name} {point.dist.version}" if point.dist else "an unknown distribution"


def describe(point: EntryPoint, kind: str) -> str:
    """How messages name a plugin: "<kind> plugin 'name' (module:attr, from dist version)"."""
    return f"{kind} plugin '{point.name}' ({point.value}, from {origin(point)})"


@cache
def scorer_module(name: str) -> ModuleType:
    """A module that a judge's question names: relative to this package, or a plugin's by its full name (found
    once a process: a judge's cells and agreement jobs ask for it at every reply)."""
    own = Path(__file__).resolve().parent.joinpath(*name.split("."))
    in_package = own.with_suffix(".py").is_file() or (own / "__init__.py").is_file()
    return importlib.import_module(f"safetyrepro.{name}" if in_package else name)
