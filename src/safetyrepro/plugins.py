"""Finding what packages register under an entry-point group (benchmarks, backends): one loader, one
error for a clash or a plugin that fails to load (docs/extending.md)."""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any


class PluginError(RuntimeError):
    """A registered plugin cannot be loaded, is not what its group takes, or clashes with another."""


def registered_points(group: str, kind: str) -> dict[str, EntryPoint]:
    """The entry points of `group` by name, in name order.

    Args:
        group: the entry-point group, e.g. "safetyrepro.benchmarks".
        kind: what the group holds, for messages ("benchmark", "backend").

    Returns:
        One entry point per name (a package installed twice registers the same target twice).

    Raises:
        PluginError: a name registered with two different targets (naming both and their packages).
    """
    points: dict[str, EntryPoint] = {}
    for point in entry_points(group=group):
        first = points.setdefault(point.name, point)
        if first.value != point.value:
            raise PluginError(
                f"{kind} '{point.name}' is registered twice: {first.value} (by {origin(first)}) and "
                f"{point.value} (by {origin(point)}); uninstall one"
            )
    return dict(sorted(points.items()))


def origin(point: EntryPoint) -> str:
    """The distribution that registers `point`, with its version."""
    return f"{point.dist.name} {point.dist.version}" if point.dist else "an unknown distribution"


def describe(point: EntryPoint, kind: str) -> str:
    """How messages name a plugin: "<kind> plugin 'name' (module:attr, from dist version)"."""
    return f"{kind} plugin '{point.name}' ({point.value}, from {origin(point)})"


def load_point(point: EntryPoint, kind: str) -> Any:
    """What an entry point names, imported; PluginError naming the plugin when that fails."""
    try:
        return point.load()
    except Exception as exc:
        raise PluginError(f"{describe(point, kind)} cannot be loaded: {type(exc).__name__}: {exc}") from exc
