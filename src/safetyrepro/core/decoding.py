"""How a free-form cell decodes: its generation settings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Decoding:
    """Generation settings of one decoding value (temperature 0 means greedy)."""

    temperature: float
    top_p: float
    max_new_tokens: int

    @property
    def greedy(self) -> bool:
        """True for deterministic argmax decoding."""
        return self.temperature == 0
