"""The registered backends, by config name: every entry point of the group `safetyrepro.backends` (the
built-in ones are registered in pyproject.toml like any plugin's; docs/extending.md). A backend's
module is imported when the registry is first asked; its engine (torch, vLLM) only when a model loads."""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint
from typing import Any

from safetyrepro.backends.base import Backend, ModelLoadError
from safetyrepro.core.batching import BatchCondition
from safetyrepro.core.operations import OPERATIONS
from safetyrepro.plugins import PluginError, Registry, describe, load_registry

GROUP = "safetyrepro.backends"


@cache
def discovered() -> Registry[type[Backend]]:
    """Every backend registered under GROUP, in load order (then name order); apart, the error of each that
    cannot be used (it fails to load or to pass the checks below, or its name is registered twice), naming
    it and its package."""
    found = load_registry(GROUP, "backend", _load)
    return Registry(dict(sorted(found.loaded.items(), key=lambda item: item[1].load_order)), found.broken)


def registered() -> dict[str, type[Backend]]:
    """The backend classes that loaded, by name, in load order."""
    return discovered().loaded


def _load(point: EntryPoint) -> type[Backend]:
    """The Backend class an entry point names, checked."""
    target = point.load()
    where = describe(point, "backend")
    if not (isinstance(target, type) and issubclass(target, Backend)):
        raise PluginError(f"{where} is not a subclass of safetyrepro.backends.Backend")
    unknown = [operation for operation in target.serves if operation not in OPERATIONS]
    if unknown or not target.serves:
        raise PluginError(f"{where} serves {list(target.serves)}; a backend serves one or both of {OPERATIONS}")
    if not isinstance(target.load_order, int):
        raise PluginError(f"{where}: its load_order {target.load_order!r} must be an integer")
    return target


def load_backend(kind: str, spec, **options: Any) -> Backend:
    """Load the model `spec` (a ModelSpec) with registered backend `kind`, passing it `options`
    (ModelLoadError naming the registered ones when `kind` is none of them)."""
    backends = registered()
    if kind not in backends:
        raise ModelLoadError(f"backend '{kind}' is unknown (known: {', '.join(sorted(backends))})")
    return backends[kind].load(spec, **options)


def describe_batches(kind: str, batch_size: int | None, batch_invariant: bool) -> str:
    """A batch condition of registered backend `kind` (as a plan or a GRID card holds it) in its words."""
    return registered()[kind].describe_batches(BatchCondition(batch_size, batch_invariant))


__all__ = [
    "GROUP",
    "Backend",
    "ModelLoadError",
    "PluginError",
    "describe_batches",
    "discovered",
    "load_backend",
    "registered",
]
