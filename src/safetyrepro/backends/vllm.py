"""vLLM backend for free-form generation on a GPU (optional extra: `pip install .[gpu]`).

vllm is imported when the backend is built, never at module import, so CPU machines without it can
import (and test) everything here. Log-likelihood cells stay on the HF backend, as the design
asks: configure `backend.loglikelihood: hf`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from ..envelope import Decoding
from .base import Backend, ModelLoadError

log = logging.getLogger(__name__)


def engine_options(spec, gpu_memory_utilization: float = 0.85, max_model_len: int = 8192) -> dict[str, Any]:
    """Keyword arguments for `vllm.LLM`: dtype and quantisation from the precision, prefix caching on."""
    options = {
        "model": spec.path,
        "revision": spec.revision,
        "trust_remote_code": spec.trust_remote_code,
        "enable_prefix_caching": True,
        "gpu_memory_utilization": gpu_memory_utilization,
        "max_model_len": max_model_len,
        "seed": 0,
    }
    if spec.precision == "nf4":
        options.update(dtype="bfloat16", quantization="bitsandbytes")
    else:
        options["dtype"] = {"fp32": "float32", "bf16": "bfloat16"}[spec.precision]
    return options


def sampling_options(decoding: Decoding, seed: int, stop: Sequence[str]) -> dict[str, Any]:
    """Keyword arguments for one request's `vllm.SamplingParams` (greedy = temperature 0)."""
    options = {
        "max_tokens": decoding.max_new_tokens,
        "stop": list(stop),
        "seed": seed,
        "temperature": decoding.temperature,
        "top_p": decoding.top_p if not decoding.greedy else 1.0,
    }
    if decoding.greedy:
        options["temperature"] = 0.0
    return options


class VLLMBackend(Backend):
    """Batched generation through one vLLM engine per model; every seed of a sampled cell goes into
    the same batch as its own request (per-request seeds), so shared prompt prefixes are cached."""

    def __init__(self, spec, gpu_memory_utilization: float = 0.85):
        try:
            import vllm
        except ImportError as exc:
            raise ModelLoadError(
                "backend 'vllm' needs the GPU extra: pip install -e '.[gpu]' (with -c constraints-gpu.txt)"
            ) from exc
        self.vllm, self.name = vllm, spec.name
        started = time.perf_counter()
        self.engine = vllm.LLM(**engine_options(spec, gpu_memory_utilization))
        self.tokenizer = self.engine.get_tokenizer()
        self.load_seconds = time.perf_counter() - started
        has_template = bool(getattr(self.tokenizer, "chat_template", None))
        if spec.chat_template == "on" and not has_template:
            raise ModelLoadError(f"model '{spec.name}': chat_template is 'on' but the tokenizer has none")
        self.prompt_format = "chat" if has_template and spec.chat_template != "off" else "plain"
        log.info(
            "loaded model %s with vLLM (%s, %s prompts) in %.1f s",
            spec.name,
            spec.precision,
            self.prompt_format,
            self.load_seconds,
        )

    def render(self, prompt: str) -> str:
        """The text vLLM receives: the chat template's user turn, or the plain prompt."""
        if self.prompt_format == "chat":
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
        return prompt

    def generate(self, prompts: Sequence[str], decoding: Decoding, seed: int, stop: Sequence[str] = ()) -> list[str]:
        return self.generate_seeds(prompts, decoding, [seed], stop)[seed]

    def generate_seeds(
        self, prompts: Sequence[str], decoding: Decoding, seeds: Sequence[int], stop: Sequence[str] = ()
    ) -> dict[int, list[str]]:
        texts = [self.render(p) for p in prompts]
        requests = [(seed, text) for seed in seeds for text in texts]
        params = [self.vllm.SamplingParams(**sampling_options(decoding, seed, stop)) for seed, _ in requests]
        started = time.perf_counter()
        outputs = self.engine.generate([text for _, text in requests], params, use_tqdm=False)
        tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
        log.info(
            "generate %s: %d requests, %.1f tokens/s",
            self.name,
            len(requests),
            tokens / max(time.perf_counter() - started, 1e-9),
        )
        completions = [o.outputs[0].text for o in outputs]
        return {seed: completions[i * len(texts) : (i + 1) * len(texts)] for i, seed in enumerate(seeds)}

    def loglikelihood(self, requests: Sequence[tuple[str, str]]) -> list[float]:
        raise ModelLoadError("the vLLM backend does generation only; set backend.loglikelihood: hf")
