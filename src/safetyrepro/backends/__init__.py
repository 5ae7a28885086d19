"""The registered backends, by config name: every entry point of the group `safetyrepro.backends` (the
built-in ones are registered in pyproject.toml like any plugin's; docs/extending.md). A backend's
module is imported when the registry is first asked; its engine (torch, vLLM) only when a model loads."""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from safetyrepro.backends.base import OPERATIONS, Backend, ModelLoadError

GROUP = "safetyrepro.backends"


class PluginError(RuntimeError):
    """A registered backend cannot be loaded, is not a Backend class, or clashes with another."""


@cache
def registered() -> dict[str, type[Backend]]:
    """Every backend registered under GROUP, in load order (then name order).

    Returns:
        Backend classes by name.

    Raises:
        PluginError: a name registered twice with two targets, or a plugin that fails to load (naming it).
    """
    points: dict[str, EntryPoint] = {}
    for point in entry_points(group=GROUP):
        first = points.setdefault(point.name, point)
        if first.value != point.value:
            raise PluginError(
                f"backend '{point.name}' is registered twice: {first.value} (by {_origin(first)}) and "
                f"{point.value} (by {_origin(point)}); uninstall one"
            )
    classes = {name: _load(points[name]) for name in sorted(points)}
    return dict(sorted(classes.items(), key=lambda item: item[1].load_order))


def _origin(point: EntryPoint) -> str:
    """The distribution that registers `point`, with its version."""
    return f"{point.dist.name} {point.dist.version}" if point.dist else "an unknown distribution"


def _load(point: EntryPoint) -> type[Backend]:
    """The Backend class an entry point names, checked."""
    where = f"backend plugin '{point.name}' ({point.value}, from {_origin(point)})"
    try:
        target = point.load()
    except Exception as exc:
        raise PluginError(f"{where} cannot be loaded: {type(exc).__name__}: {exc}") from exc
    if not (isinstance(target, type) and issubclass(target, Backend)):
        raise PluginError(f"{where} is not a subclass of safetyrepro.backends.Backend")
    unknown = [operation for operation in target.serves if operation not in OPERATIONS]
    if unknown or not target.serves:
        raise PluginError(f"{where} serves {list(target.serves)}; a backend serves one or both of {OPERATIONS}")
    return target


def load_backend(kind: str, spec, **options: Any) -> Backend:
    """Load the model `spec` (a ModelSpec) with registered backend `kind`, passing it `options`
    (ModelLoadError naming the registered ones when `kind` is none of them)."""
    backends = registered()
    if kind not in backends:
        raise ModelLoadError(f"backend '{kind}' is unknown (known: {', '.join(sorted(backends))})")
    return backends[kind].load(spec, **options)


__all__ = ["GROUP", "Backend", "ModelLoadError", "PluginError", "load_backend", "registered"]
