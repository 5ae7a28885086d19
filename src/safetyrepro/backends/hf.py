"""Hugging Face transformers backend: fp32 / bf16 / NF4 (bitsandbytes), CPU or GPU."""

from __future__ import annotations

import copy
import gc
import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from ..envelope import Decoding
from .base import Backend, ModelLoadError, cut_at_stop
from .prompt_ids import encode_prompt, load_tokenizer, prompt_format, prompt_limit

log = logging.getLogger(__name__)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "nf4": torch.bfloat16}
SPECIAL_TOKEN_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id")
# NF4 as vLLM's bitsandbytes plugin quantises in flight (vllm_bnb_plugin 0.0.3, bitsandbytes_loader.py:
# quantize_4bit(quant_type="nf4", compress_statistics=True), i.e. double quantisation), so both
# backends run the same weights.
NF4 = {
    "load_in_4bit": True,
    "bnb_4bit_quant_type": "nf4",
    "bnb_4bit_use_double_quant": True,
    "bnb_4bit_compute_dtype": torch.bfloat16,
}


class _StopStrings(StoppingCriteria):
    """Stops a row once its generated text contains a stop string. Only the last few tokens are
    decoded per step (transformers' own stop_strings precomputes over the whole vocabulary on every
    call, which costs seconds with a 262k-token vocabulary)."""

    def __init__(self, tokenizer, stop: Sequence[str], prompt_length: int):
        self.tokenizer, self.stop, self.start = tokenizer, list(stop), prompt_length
        self.window = max(len(s) for s in stop) + 8

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        tails = self.tokenizer.batch_decode(input_ids[:, max(self.start, input_ids.shape[1] - self.window) :])
        return torch.tensor([any(s in tail for s in self.stop) for tail in tails], device=input_ids.device)


class _TemperatureTopP(LogitsProcessor):
    """Temperature, then nucleus (top-p) filtering, as transformers does it, but looking first at
    the 1,024 most likely tokens: a full sort of a 262k-token vocabulary on every step costs more
    than the model's forward pass on CPU. Rows whose nucleus is larger fall back to the full sort."""

    def __init__(self, temperature: float, top_p: float, head: int = 1024):
        self.temperature, self.top_p, self.head = temperature, top_p, head

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        scores = scores / self.temperature
        if self.top_p >= 1.0:
            return scores
        probs = torch.softmax(scores.float(), dim=-1)
        top, index = probs.topk(min(self.head, probs.shape[-1]), dim=-1)
        if (top.sum(-1) < self.top_p).any():
            top, index = probs.sort(dim=-1, descending=True)
        higher = top.cumsum(-1) - top  # mass of the strictly more likely tokens
        keep = torch.zeros_like(probs, dtype=torch.bool).scatter_(-1, index, higher < self.top_p)
        return scores.masked_fill(~keep, -float("inf"))


class HFBackend(Backend):
    """A transformers causal LM; batches are length-sorted to keep padding small."""

    def __init__(self, spec, batch_size: int = 16, device: str = "auto", threads: int | None = None):
        from transformers import AutoModelForCausalLM, BitsAndBytesConfig, GenerationConfig

        if threads:
            torch.set_num_threads(threads)
        self.name, self.batch_size = spec.name, batch_size
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        local = Path(spec.path)
        if (spec.path.startswith((".", "/")) or local.exists()) and not (local / "config.json").is_file():
            raise ModelLoadError(f"model '{spec.name}': {spec.path} is not a model directory (no config.json)")
        options = {"revision": spec.revision, "trust_remote_code": spec.trust_remote_code}
        started = time.perf_counter()
        try:
            self.tokenizer = load_tokenizer(spec)
            quantization = None
            if spec.precision == "nf4":
                quantization = BitsAndBytesConfig(**NF4)
            self.model = AutoModelForCausalLM.from_pretrained(
                spec.path,
                dtype=DTYPES[spec.precision],
                quantization_config=quantization,
                device_map=self.device,
                **options,
            ).eval()
        except (OSError, ValueError, ImportError) as exc:
            raise ModelLoadError(f"model '{spec.name}': cannot load {spec.path}: {exc}") from exc
        self.load_seconds = time.perf_counter() - started
        # The envelope's decoding is the whole truth: of the model's generation_config (e.g. Qwen2.5's
        # repetition_penalty 1.05) only the special-token ids stay, as vLLM's generation_config="vllm"
        source = self.model.generation_config
        self.model.generation_config = GenerationConfig(
            **{key: getattr(source, key) for key in SPECIAL_TOKEN_KEYS if getattr(source, key, None) is not None}
        )
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"  # generation batches; log-likelihoods pad by hand
        self.prompt_format = prompt_format(self.tokenizer, spec)
        log.info(
            "loaded model %s (%s, %s, %s prompts) in %.1f s",
            spec.name,
            spec.precision,
            self.device,
            self.prompt_format,
            self.load_seconds,
        )

    def encode_prompt(self, prompt: str, max_tokens: int | None = None) -> list[int]:
        """Token ids of a prompt (safetyrepro.backends.prompt_ids.encode_prompt)."""
        return encode_prompt(self.tokenizer, prompt, self.prompt_format, max_tokens)

    def close(self) -> None:
        del self.model
        gc.collect()
        if str(self.device).startswith("cuda"):
            torch.cuda.empty_cache()

    def _batches(self, sequences: list[list[int]]):
        order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
        for start in range(0, len(order), self.batch_size):
            yield order[start : start + self.batch_size]

    @torch.inference_mode()
    def generate(self, prompts: Sequence[str], decoding: Decoding, seed: int, stop: Sequence[str] = ()) -> list[str]:
        limit = prompt_limit(self.model.config, decoding.max_new_tokens)
        encoded = [self.encode_prompt(p, limit) for p in prompts]
        outputs: list[str] = [""] * len(prompts)
        sampling = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        if not decoding.greedy:
            sampling = {
                "do_sample": True,
                "temperature": 1.0,
                "top_p": 1.0,
                "top_k": 0,
                "logits_processor": LogitsProcessorList([_TemperatureTopP(decoding.temperature, decoding.top_p)]),
            }
        torch.manual_seed(seed)
        started, done, new_tokens = time.perf_counter(), 0, 0
        for batch in self._batches(encoded):
            padded = self.tokenizer.pad({"input_ids": [encoded[i] for i in batch]}, return_tensors="pt").to(self.device)
            criteria = StoppingCriteriaList(
                [_StopStrings(self.tokenizer, stop, padded["input_ids"].shape[1])] if stop else []
            )
            generated = self.model.generate(
                **padded,
                max_new_tokens=decoding.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                stopping_criteria=criteria,
                **sampling,
            )
            fresh = generated[:, padded["input_ids"].shape[1] :]
            for row, index in enumerate(batch):
                tokens = fresh[row][fresh[row] != self.tokenizer.pad_token_id]
                new_tokens += len(tokens)
                outputs[index] = cut_at_stop(self.tokenizer.decode(tokens, skip_special_tokens=True), stop)
            done += len(batch)
            elapsed = time.perf_counter() - started
            log.info("generate %s: %d/%d prompts, %.1f tokens/s", self.name, done, len(prompts), new_tokens / elapsed)
        return outputs

    @torch.inference_mode()
    def loglikelihood(self, requests: Sequence[tuple[str, str]]) -> list[float]:
        """Summed continuation log-probabilities. Each distinct context runs once: its last position
        serves every single-token continuation (e.g. option letters), and its key/value cache is
        shared by all its multi-token continuations (e.g. full answer texts)."""
        contexts: dict[str, list[int]] = {}
        targets = []
        for context, continuation in requests:
            if context not in contexts:
                contexts[context] = self.encode_prompt(context)
            if self.prompt_format == "chat":
                continuation = continuation.lstrip()
            target = self.tokenizer(continuation, add_special_tokens=False).input_ids
            if not target:
                raise ValueError(f"empty continuation after tokenisation: {continuation!r}")
            targets.append(target)
        scores: list[float] = [math.nan] * len(requests)
        single, multi = [], {}  # request indices: one-token targets; multi-token ones per context
        for i, (context, _) in enumerate(requests):
            if len(targets[i]) == 1:
                single.append(i)
            else:
                multi.setdefault(context, []).append(i)
        keys = list(dict.fromkeys(tuple(contexts[requests[i][0]]) for i in single))
        lasts = {}
        for batch in self._batches([list(k) for k in keys]):
            for index, logprobs in zip(batch, self._last_logprobs([keys[i] for i in batch])):
                lasts[keys[index]] = logprobs
        for i in single:
            scores[i] = lasts[tuple(contexts[requests[i][0]])][targets[i][0]].item()
        for context, indices in multi.items():
            for i, score in zip(indices, self._continuation_scores(contexts[context], [targets[i] for i in indices])):
                scores[i] = score
        return scores

    @torch.inference_mode()
    def _continuation_scores(self, context: list[int], targets: list[list[int]]) -> list[float]:
        """Summed log-probabilities of multi-token continuations of one context: the context runs once,
        then its cache is repeated for the continuations, which run together (right-padded)."""
        out = self.model(input_ids=torch.tensor([context], device=self.device), use_cache=True, logits_to_keep=1)
        first = torch.log_softmax(out.logits[0, -1].float(), dim=-1).cpu()
        scores = []
        for start in range(0, len(targets), self.batch_size):
            chunk = targets[start : start + self.batch_size]
            cache = copy.deepcopy(out.cache)
            cache.batch_repeat_interleave(len(chunk))
            width = max(len(t) for t in chunk) - 1  # each target's tokens but the last predict the next ones
            ids = torch.full((len(chunk), width), self.tokenizer.pad_token_id)
            mask = torch.zeros((len(chunk), len(context) + width), dtype=torch.long)
            mask[:, : len(context)] = 1
            for row, target in enumerate(chunk):
                ids[row, : len(target) - 1] = torch.tensor(target[:-1])
                mask[row, len(context) : len(context) + len(target) - 1] = 1
            positions = (len(context) + torch.arange(width)).expand(len(chunk), width)
            logits = self.model(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                position_ids=positions.to(self.device),
                cache=cache,
            ).logits
            logprobs = torch.log_softmax(logits.float(), dim=-1).cpu()
            for row, target in enumerate(chunk):
                rest = logprobs[row, torch.arange(len(target) - 1), torch.tensor(target[1:])].sum()
                scores.append((first[target[0]] + rest).item())
        return scores

    def _last_logprobs(self, sequences: list[tuple[int, ...]]) -> list[torch.Tensor]:
        """Next-token log-probabilities after each sequence. Left padding lines the ends up, so only
        the last position goes through the output layer."""
        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), self.tokenizer.pad_token_id)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, seq in enumerate(sequences):
            ids[row, width - len(seq) :] = torch.tensor(seq)
            mask[row, width - len(seq) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = self.model(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=positions.to(self.device),
            logits_to_keep=1,
        ).logits
        return [torch.log_softmax(logits[row, -1].float(), dim=-1).cpu() for row in range(len(sequences))]
