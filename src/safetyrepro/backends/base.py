"""The backend interface: batched generation and batched log-likelihoods."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from safetyrepro.core.batching import BatchCondition
from safetyrepro.core.conversation import Prompt
from safetyrepro.core.decoding import Decoding
from safetyrepro.core.operations import OPERATIONS

if TYPE_CHECKING:
    from safetyrepro.configuration.settings import BackendSettings, Settings
    from safetyrepro.core.model_spec import ModelSpec

log = logging.getLogger(__name__)


class ModelLoadError(RuntimeError):
    """A configured model could not be loaded."""


class Backend(ABC):
    """A loaded model that can generate text and score continuations.

    `prompt_format` is "chat" when the model's chat template wraps each prompt as one user turn (a
    conversation as its turns), "plain" when prompts go in as raw text (base models).

    A backend class also declares, as class attributes and class methods, what the rest of the
    package asks of it before any model loads: the registry (`safetyrepro.backends`), the config
    loader, preflight, the fingerprints, the model server and the GRID card read them from the
    class, so its module must import without its engine (import that inside `load` or `__init__`).
    """

    label: ClassVar[str] = ""  # how messages name it ("vLLM"); empty: its registered name
    serves: ClassVar[tuple[str, ...]] = OPERATIONS  # the operations it can serve
    options: ClassVar[tuple[str, ...]] = ()  # keys of the config's `backend` section its constructor takes
    reads: ClassVar[tuple[str, ...]] = ()  # keys of that section its `load_options` reads besides
    # JSON schema of each option the package's config schema lacks (a plugin's own keys of `backend`)
    option_schema: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    result_options: ClassVar[tuple[str, ...]] = ()  # options that change a cell's results: in its fingerprint
    requires: ClassVar[tuple[str, ...]] = ()  # modules that must import where the model servers run
    install_hint: ClassVar[str] = ""  # how to install them, for preflight's message
    packages: ClassVar[tuple[str, ...]] = ()  # distributions the GRID card's package table shows
    load_order: ClassVar[int] = 0  # one model's backends load lowest first

    prompt_format: str
    prefill = {"computed": 0, "requested": 0}  # prompt tokens of the last call: run through the model, and asked for

    def record_prefill(self, computed: int, requested: int) -> None:
        """Note (and log) how many prompt tokens the last call computed of those it was asked for.

        Args:
            computed: prompt tokens run through the model (a reused prefix is not).
            requested: prompt tokens the call's prompts hold in all.
        """
        self.prefill = {"computed": computed, "requested": requested}
        log.info(
            "prefill: %d of %d prompt tokens computed (%.0f%%)", computed, requested, 100 * computed / max(requested, 1)
        )

    def generate(
        self,
        prompts: Sequence[Prompt],
        decoding: Decoding,
        seed: int,
        stop: Sequence[str] = (),
        batch_size: int | None = None,
    ) -> list[str]:
        """One completion per prompt for one seed.

        Args:
            prompts: the rendered prompts.
            decoding: temperature, top-p and the number of new tokens.
            seed: the sampling seed.
            stop: stop strings, as in `generate_seeds`.
            batch_size: as in `generate_seeds`.

        Returns:
            The completions in prompt order.
        """
        return self.generate_seeds(prompts, decoding, [seed], stop, batch_size)[seed]

    @abstractmethod
    def generate_seeds(
        self,
        prompts: Sequence[Prompt],
        decoding: Decoding,
        seeds: Sequence[int],
        stop: Sequence[str] = (),
        batch_size: int | None = None,
    ) -> dict[int, list[str]]:
        """One completion per prompt and seed.

        Args:
            prompts: the rendered prompts, each one user turn, or a conversation of turns (a guard model's
                request and reply: safetyrepro.core.conversation), which the model's chat template renders.
            decoding: temperature, top-p and the number of new tokens.
            seeds: the sampling seeds (greedy decoding gives each the same text).
            stop: stop strings; each text is cut at the first.
            batch_size: prompts per forward pass, overriding the backend's own (a backend that
                schedules its own batches refuses it).

        Returns:
            Per seed, the completions in prompt order (the new tokens decoded alone).
        """

    @abstractmethod
    def loglikelihood(self, requests: Sequence[tuple[str, str]], batch_size: int | None = None) -> list[float]:
        """Score continuations.

        Args:
            requests: (context, continuation) pairs.
            batch_size: as in `generate_seeds`.

        Returns:
            The summed log-probability of each continuation given its context, in request order.
        """

    @abstractmethod
    def close(self) -> None:
        """Free what the backend holds now (a model server frees its GPU before another takes it).

        The caller uses the backend no more after it, and closes it once.
        """

    @classmethod
    def load(cls, spec: ModelSpec, **options: Any) -> Backend:
        """Load a model.

        Args:
            spec: the model (a `ModelSpec`).
            **options: the constructor options: the configured `options`, then `load_options`.

        Returns:
            The loaded backend (here `cls(spec, **options)`; a class whose engine lives in another
            module builds that module's class).
        """
        return cls(spec, **options)

    @classmethod
    def load_options(cls, settings: Settings, loaded: Mapping[str, Backend]) -> dict[str, Any]:
        """Constructor options known only when the model loads, over the configured ones.

        Args:
            settings: the run's settings.
            loaded: the backends of the same model loaded before this one (lower `load_order`), by name.

        Returns:
            Options to add or replace (here none).
        """
        return {}

    @classmethod
    def needs_gpu(cls, backend: BackendSettings) -> bool:
        """Whether a model server using this backend takes the machine's one accelerator slot (`gpu=1`).

        Args:
            backend: the config's `backend` section.

        Returns:
            True when it does (here never).
        """
        return False

    @classmethod
    def held_devices(cls, backend: BackendSettings, cuda: bool) -> list[int | str]:
        """What a model server using this backend holds alone on this machine (one server at a time).

        Args:
            backend: the config's `backend` section.
            cuda: whether this machine has a CUDA GPU.

        Returns:
            CUDA device indices, and names of other slots of this machine (here none).
        """
        return []

    @classmethod
    def batch_condition(cls, backend: BackendSettings, batch_size: int | None) -> BatchCondition:
        """How a cell it serves is batched; a condition without a batch size means the backend
        schedules its own batches, so a batch-size axis cannot act on it.

        Args:
            backend: the config's `backend` section.
            batch_size: the config's batch axis value, or None.

        Returns:
            The batch condition (here `batch_size`, else backend.batch_size, prompts per forward pass).
        """
        return BatchCondition(batch_size or backend.batch_size, False)

    @classmethod
    def describe_batches(cls, condition: BatchCondition) -> str:
        """A batch condition it made, in words, for the plan and the GRID card.

        Args:
            condition: what its `batch_condition` returned.

        Returns:
            The words (here its label and the batch size: "HF batch size 16").
        """
        return " ".join(filter(None, (cls.label, f"batch size {condition.batch_size}")))

    @classmethod
    def check(cls, backend: BackendSettings, models: Sequence[ModelSpec]) -> str | None:
        """A reason these settings cannot run on this backend, for the config loader to raise.

        Args:
            backend: the config's `backend` section.
            models: the run's models.

        Returns:
            The message (naming the offending key), or None when they can (here always).
        """
        return None


def completion_text(tokenizer, token_ids: Sequence[int], stop: Sequence[str]) -> str:
    """A completion's stored text, the same on every backend: its new token ids decoded alone
    (special tokens dropped), cut at the first stop string. vLLM's own text is decoded with the
    prompt as context (" Yes" where this gives "Yes"), so it is not used."""
    return cut_at_stop(tokenizer.decode(list(token_ids), skip_special_tokens=True), stop)


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """Text up to (not including) the earliest stop string."""
    positions = [text.find(s) for s in stop if s and s in text]
    return text[: min(positions)] if positions else text
