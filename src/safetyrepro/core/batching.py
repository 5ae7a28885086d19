"""How a cell's requests are batched."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BatchCondition:
    """How a cell's requests are batched: prompts per forward pass (HF), or None where the backend
    schedules its own batches (vLLM), with or without batch-invariant kernels. The backend that made it
    words it (`Backend.describe_batches`)."""

    batch_size: int | None
    batch_invariant: bool
