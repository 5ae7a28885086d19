"""How a cell's requests are batched."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BatchCondition:
    """How a cell's requests are batched: the HF backend's prompts per forward pass, or None where
    vLLM schedules its own batches, with or without its batch-invariant kernels."""

    batch_size: int | None
    batch_invariant: bool

    def describe(self) -> str:
        """In words, e.g. "HF batch size 16" or "vLLM's own batches, batch-invariant kernels"."""
        made = f"HF batch size {self.batch_size}" if self.batch_size is not None else "vLLM's own batches"
        return made + (", batch-invariant kernels" if self.batch_invariant else "")
