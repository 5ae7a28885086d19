"""The registered backends, by config name: every entry point of the group `safetyrepro.backends` (the
built-in ones are registered in pyproject.toml like any plugin's; docs/extending.md). A backend's
module is imported when the registry is first asked; its engine (torch, vLLM) only when a model loads."""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint
from typing import Any

from safetyrepro.backends.base import OPERATIONS, Backend, ModelLoadError
from safetyrepro.plugins import PluginError, describe, load_point, registered_points

GROUP = "safetyrepro.backends"


@cache
def registered() -> dict[str, type[Backend]]:
    """Every backend registered under GROUP, in load order (then name order).

    Returns:
        Backend classes by name.

    Raises:
        PluginError: a name registered twice with two targets, or a plugin that fails to load (naming it).
    """
    classes = {name: _load(point) for name, point in registered_points(GROUP, "backend").items()}
    return dict(sorted(classes.items(), key=lambda item: item[1].load_order))


def _load(point: EntryPoint) -> type[Backend]:
    """The Backend class an entry point names, checked."""
    target = load_point(point, "backend")
    where = describe(point, "backend")
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
