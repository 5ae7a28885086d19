"""The HF backend as the registry reads it: its declarations, without importing torch or transformers.

`HF.load` builds the transformers engine, `safetyrepro.backends.hf.HFBackend`, so
the config loader, preflight and the workflow learn what the backend needs without paying for its imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from safetyrepro.backends.base import Backend

if TYPE_CHECKING:
    from safetyrepro.configuration.settings import BackendSettings
    from safetyrepro.core.model_spec import ModelSpec


class HF(Backend):
    """Hugging Face transformers: generation and log-likelihoods, fp32 / bf16 / NF4, on a CPU or a GPU."""

    label = "HF"
    options = ("batch_size", "device", "threads", "prefix_reuse")
    result_options = ("prefix_reuse",)  # prefix reuse computes the same sums in another order: near-ties may move
    packages = ("torch", "transformers", "tokenizers", "accelerate", "bitsandbytes")

    @classmethod
    def load(cls, spec: ModelSpec, **options: Any) -> Backend:
        """The model loaded by `safetyrepro.backends.hf.HFBackend` (options: see `options`)."""
        from safetyrepro.backends.hf import HFBackend

        return HFBackend(spec, **options)

    @classmethod
    def needs_gpu(cls, backend: BackendSettings) -> bool:
        """On a CUDA device, or on "auto" where this machine has one."""
        if backend.device == "auto":
            import torch

            return torch.cuda.is_available()
        return backend.device.startswith("cuda")

    @classmethod
    def held_devices(cls, backend: BackendSettings, cuda: bool) -> list[int | str]:
        """The CUDA device it loads on (auto and cuda: the first), where the machine has one."""
        return [int(backend.device.partition(":")[2] or 0)] if cuda and backend.device != "cpu" else []
