"""The backend interface: batched generation and batched log-likelihoods."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from safetyrepro.configuration.envelope import Decoding

log = logging.getLogger(__name__)


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

    def generate(
        self,
        prompts: Sequence[str],
        decoding: Decoding,
        seed: int,
        stop: Sequence[str] = (),
        batch_size: int | None = None,
    ) -> list[str]:
        """One completion per prompt for one seed (see `generate_seeds`)."""
        return self.generate_seeds(prompts, decoding, [seed], stop, batch_size)[seed]

    @abstractmethod
    def generate_seeds(
        self,
        prompts: Sequence[str],
        decoding: Decoding,
        seeds: Sequence[int],
        stop: Sequence[str] = (),
        batch_size: int | None = None,
    ) -> dict[int, list[str]]:
        """One completion per prompt and seed; each text is cut at the first stop string. `batch_size`,
        where given, overrides the backend's prompts per forward pass (a backend that schedules its
        own batches refuses it)."""

    @abstractmethod
    def loglikelihood(self, requests: Sequence[tuple[str, str]], batch_size: int | None = None) -> list[float]:
        """Summed log-probability of each continuation given its context (`batch_size` as in `generate`)."""

    @abstractmethod
    def close(self) -> None:
        """Free what the backend holds now (a model server frees its GPU before another takes it)."""


def completion_text(tokenizer, token_ids: Sequence[int], stop: Sequence[str]) -> str:
    """A completion's stored text, the same on every backend: its new token ids decoded alone
    (special tokens dropped), cut at the first stop string. vLLM's own text is decoded with the
    prompt as context (" Yes" where this gives "Yes"), so it is not used."""
    return cut_at_stop(tokenizer.decode(list(token_ids), skip_special_tokens=True), stop)


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """Text up to (not including) the earliest stop string."""
    positions = [text.find(s) for s in stop if s and s in text]
    return text[: min(positions)] if positions else text
