"""The backend interface: batched generation and batched log-likelihoods."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence

from ..envelope import Decoding

log = logging.getLogger(__name__)


class ModelLoadError(RuntimeError):
    """A configured model could not be loaded."""


class Backend(ABC):
    """A loaded model that can generate text and score continuations.

    `prompt_format` is "chat" when the model's chat template wraps each prompt as one user turn,
    "plain" when prompts go in as raw text (base models).
    """

    prompt_format: str
    prefill = {"computed": 0, "requested": 0}  # prompt tokens of the last call: run through the model, and asked for

    def record_prefill(self, computed: int, requested: int) -> None:
        """Note (and log) how many prompt tokens the last call computed of those it was asked for."""
        self.prefill = {"computed": computed, "requested": requested}
        log.info(
            "prefill: %d of %d prompt tokens computed (%.0f%%)", computed, requested, 100 * computed / max(requested, 1)
        )

    @abstractmethod
    def generate(self, prompts: Sequence[str], decoding: Decoding, seed: int, stop: Sequence[str] = ()) -> list[str]:
        """One completion per prompt; the text is cut at the first stop string."""

    def generate_seeds(
        self, prompts: Sequence[str], decoding: Decoding, seeds: Sequence[int], stop: Sequence[str] = ()
    ) -> dict[int, list[str]]:
        """Completions for every seed of a cell; backends that batch seeds together override this."""
        return {seed: self.generate(prompts, decoding, seed, stop) for seed in seeds}

    @abstractmethod
    def loglikelihood(self, requests: Sequence[tuple[str, str]]) -> list[float]:
        """Summed log-probability of each continuation given its context."""

    @abstractmethod
    def close(self) -> None:
        """Free what the backend holds now (a model server frees its GPU before another takes it)."""


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """Text up to (not including) the earliest stop string."""
    positions = [text.find(s) for s in stop if s and s in text]
    return text[: min(positions)] if positions else text
