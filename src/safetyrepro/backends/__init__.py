"""Backends by config name; each is imported only when used (vLLM is an optional GPU extra)."""

from __future__ import annotations

from importlib import import_module

from safetyrepro.backends.base import Backend, ModelLoadError

BACKENDS = {"hf": "safetyrepro.backends.hf:HFBackend", "vllm": "safetyrepro.backends.vllm:VLLMBackend"}


def load_backend(kind: str, spec, **options) -> Backend:
    """Load the model `spec` (a ModelSpec) with backend `kind` ("hf", ...)."""
    if kind not in BACKENDS:
        raise ModelLoadError(f"backend '{kind}' is unknown (known: {', '.join(BACKENDS)})")
    module, _, name = BACKENDS[kind].partition(":")
    return getattr(import_module(module), name)(spec, **options)


__all__ = ["BACKENDS", "Backend", "ModelLoadError", "load_backend"]
