"""vLLM backend request building, checked on CPU with a stand-in `vllm` module (vllm itself is a
GPU-only optional extra and is never imported at module import time)."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from tiny_model import build_tiny_model

from safetyrepro.backends import ModelLoadError, load_backend
from safetyrepro.backends.prompt_ids import MAX_PROMPT_TOKENS
from safetyrepro.config import ModelSpec
from safetyrepro.envelope import Decoding

API = json.loads((Path(__file__).parent / "data" / "vllm_api.json").read_text())  # scripts/vllm_api_snapshot.py


BLOCK = 16  # vLLM caches prompt prefixes in whole blocks (vllm/config/cache.py block_size)


def _fields_of(where: str, known, **fields):
    _refuse_unknown(where, fields, known)
    return types.SimpleNamespace(**fields)


def _cached_tokens(ids: list[int], computed: list[list[int]]) -> int:
    """Prefix-cache hits as vLLM 0.33 counts them: whole blocks of `ids` that an earlier request (of
    this batch or an earlier one: blocks are cached when scheduled) holds, never the last token (it
    must run to give the first new token)."""
    longest = max((len(os.path.commonprefix([ids, other])) for other in computed), default=0)
    return min(longest, len(ids) - 1) // BLOCK * BLOCK


def _refuse_unknown(where: str, given, known) -> None:
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise TypeError(f"{where}() got unexpected keyword argument(s) {unknown} (not in vLLM {API['vllm']})")


@pytest.fixture
def fake_vllm(monkeypatch, tmp_path):
    """A strict stand-in for `vllm` 0.33.0: it records engine options, sampling params and prompts, and
    refuses any argument, prompt key or quantization method outside the snapshot of the real wheels."""
    calls = {"engine": [], "generate": [], "shutdown": 0, "computed": []}
    chat_model = build_tiny_model(tmp_path / "chat", chat=True)
    methods = list(API["quantization"])  # vllm.model_executor.layers.quantization.QUANTIZATION_METHODS

    def load_general_plugins():  # the installed plugin registers its method, as its entry point does
        if sys.modules.get("vllm_bnb_plugin") is not None and API["plugin_entry_point"]:
            methods.extend(m for m in API["quantization_with_plugin"] if m not in methods)

    class EngineCore:
        def shutdown(self, **options):
            _refuse_unknown("EngineCoreClient.shutdown", options, API["EngineCoreClient.shutdown"])
            calls["shutdown"] += 1

    class LLM:
        def __init__(self, model, **options):
            _refuse_unknown("LLM", options, API["LLM.__init__"] + API["EngineArgs"])
            if options.get("quantization") not in (None, *methods):
                raise ValueError(f"Unknown quantization method: {options['quantization']}")
            if options.get("tokenizer_mode", "auto") not in API["tokenizer_modes"]:
                raise ValueError(f"unknown tokenizer_mode {options['tokenizer_mode']}")
            assert "llm_engine" in API["LLM.attributes"] and "engine_core" in API["LLMEngine.attributes"]
            self.llm_engine = types.SimpleNamespace(engine_core=EngineCore())
            calls["engine"].append({"model": model, **options})

        def generate(self, prompts, sampling_params=None, **options):
            _refuse_unknown("LLM.generate", options, API["LLM.generate"])
            for prompt in prompts:
                if not isinstance(prompt, dict) or "prompt_token_ids" not in prompt:
                    raise TypeError(f"expected a TokensPrompt, got {type(prompt).__name__}")
                _refuse_unknown("TokensPrompt", prompt, API["TokensPrompt"])
                assert all(isinstance(i, int) for i in prompt["prompt_token_ids"])
            calls["generate"].append((list(prompts), list(sampling_params)))
            outputs = []
            for index, (prompt, p) in enumerate(zip(prompts, sampling_params)):
                ids, text = (
                    prompt["prompt_token_ids"],
                    f"seed {getattr(p, 'seed', None)}: {prompt['prompt_token_ids'][-3:]}",
                )
                completion = _fields_of("CompletionOutput", API["CompletionOutput"], text=text, token_ids=[0] * 3)
                outputs.append(
                    _fields_of(
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
                )
                calls["computed"].append(ids)
            return outputs

    class SamplingParams:
        def __init__(self, **options):
            _refuse_unknown("SamplingParams", options, API["SamplingParams"])
            self.__dict__.update(options)

    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = LLM, SamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    for name, attributes in (
        ("vllm.plugins", {"load_general_plugins": load_general_plugins}),
        ("vllm.model_executor.layers.quantization", {"QUANTIZATION_METHODS": methods}),
    ):
        assert set(attributes) <= set(API[name])  # only what the real module has
        submodule = types.ModuleType(name)
        submodule.__dict__.update(attributes)
        monkeypatch.setitem(sys.modules, name, submodule)
    for parent in ("vllm.model_executor", "vllm.model_executor.layers"):
        monkeypatch.setitem(sys.modules, parent, types.ModuleType(parent))
    plugin = types.ModuleType("vllm_bnb_plugin")
    plugin.__spec__ = importlib.machinery.ModuleSpec("vllm_bnb_plugin", None)
    monkeypatch.setitem(sys.modules, "vllm_bnb_plugin", plugin)
    return calls, chat_model


def test_the_snapshot_is_of_the_pinned_vllm():
    constraints = (Path(__file__).resolve().parents[1] / "constraints-gpu.txt").read_text()
    assert f"vllm=={API['vllm']}" in constraints and f"vllm-bnb-plugin=={API['vllm_bnb_plugin']}" in constraints
    assert "bitsandbytes" not in API["quantization"] and API["quantization_with_plugin"] == ["bitsandbytes"]


def test_module_import_does_not_import_vllm():
    code = "import sys, safetyrepro.backends.vllm, safetyrepro.server; print('vllm' in sys.modules)"
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
        assert "max_model_len" not in options  # vLLM takes the model's own limit
        assert (options["tokenizer_mode"], options["generation_config"]) == ("hf", "vllm")


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
    sys.modules["vllm_bnb_plugin"] = None
    with pytest.raises(ValueError, match="Unknown quantization method: bitsandbytes"):
        vllm.LLM("m", quantization="bitsandbytes")


def test_all_seeds_of_a_cell_go_in_one_batch_with_their_own_seeds(fake_vllm):
    calls, path = fake_vllm
    backend = load_backend("vllm", ModelSpec("m", str(path), "bf16"))
    prompts = ["Question one?", "Question two?", "Question three?"]
    out = backend.generate_seeds(prompts, Decoding(0.7, 0.95, 20), [0, 1, 2, 3, 4], stop=["\n\n"])
    sent, params = calls["generate"][-1]
    assert len(sent) == len(params) == 15
    assert [p.seed for p in params] == [s for s in range(5) for _ in prompts]
    assert {(p.temperature, p.top_p, p.max_tokens, tuple(p.stop)) for p in params} == {(0.7, 0.95, 20, ("\n\n",))}
    assert list(out) == [0, 1, 2, 3, 4]
    for seed, texts in out.items():
        assert len(texts) == 3 and all(t.startswith(f"seed {seed}:") for t in texts)


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
    from safetyrepro.config import load_settings

    return load_settings(
        {
            "data_dir": str(data_dir),
            "models": [{"name": n, "path": str(path), "precision": precision} for n in "mn"],
            "benchmarks": {"bbq": {"n_items": 5}},
            "envelope": str(Path(__file__).resolve().parents[1] / "config" / "envelope.yaml"),
            "backend": {"generate": "vllm", "loglikelihood": "hf", **backend},
        }
    )


def test_the_backends_of_one_model_must_agree_on_the_prompt_format(fake_vllm, monkeypatch, data_dir):
    from safetyrepro.server import load_backends

    _, path = fake_vllm
    settings = _vllm_settings(data_dir, path, device="cpu")
    monkeypatch.setattr("torch.cuda.mem_get_info", lambda device: (40 * 2**30, 80 * 2**30))
    backends = load_backends(settings, settings.model("m"))
    assert backends["generate"].prompt_format == backends["loglikelihood"].prompt_format == "chat"
    monkeypatch.setattr("safetyrepro.backends.vllm.prompt_format", lambda tokenizer, spec: "plain")
    with pytest.raises(ModelLoadError, match="disagree on the prompt format"):
        load_backends(settings, settings.model("m"))


def test_vllm_takes_its_share_after_the_hf_copy_loaded(fake_vllm, monkeypatch, data_dir):
    import torch

    from safetyrepro import server

    calls, path = fake_vllm
    settings = _vllm_settings(data_dir, path, device="cpu", gpu_memory_utilization=0.9)
    order, load = [], server.load_backend
    monkeypatch.setattr(
        server, "load_backend", lambda kind, spec, **options: (order.append(kind), load(kind, spec, **options))[1]
    )
    monkeypatch.setattr(
        torch.cuda, "mem_get_info", lambda device: (order.append("measured"), (40 * 2**30, 80 * 2**30))[1]
    )
    server.load_backends(settings, settings.model("m"))
    assert order == ["hf", "measured", "vllm"]
    assert (
        calls["engine"][-1]["gpu_memory_utilization"] == 0.481
    )  # all that is free but vLLM's context: HF is on the CPU
    on_gpu = types.SimpleNamespace(device="cuda:0")  # an HF copy on the GPU keeps hf_activation_gib free
    assert server._vllm_share(_vllm_settings(data_dir, path, hf_activation_gib=10), on_gpu) == 0.356


def test_a_server_claims_the_gpus_its_backends_use(fake_vllm, monkeypatch, data_dir):
    import torch

    from safetyrepro.server import gpus_used

    _, path = fake_vllm

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(uuid=f"GPU-{i}"))
    assert gpus_used(_vllm_settings(data_dir, path, device="cuda:1")) == ["GPU-0", "GPU-1"]
    assert gpus_used(_vllm_settings(data_dir, path, device="cpu")) == ["GPU-0"]
    assert gpus_used(_vllm_settings(data_dir, path, device="cpu", generate="hf")) == []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpus_used(_vllm_settings(data_dir, path, device="auto")) == []


def test_long_prompts_keep_their_bos_and_leave_room_for_new_tokens(fake_vllm):
    from safetyrepro.backends.prompt_ids import encode_prompt, load_tokenizer, prompt_limit

    _, path = fake_vllm
    assert prompt_limit(types.SimpleNamespace(max_position_embeddings=4096), 32) == 4096 - 32  # Yi-1.5-9B-Chat
    assert (
        prompt_limit(types.SimpleNamespace(text_config=types.SimpleNamespace(max_position_embeddings=8192)), 32)
        == MAX_PROMPT_TOKENS
    )
    with pytest.raises(ModelLoadError, match="no room"):
        prompt_limit(types.SimpleNamespace(max_position_embeddings=16), 16)
    tokenizer = load_tokenizer(ModelSpec("m", str(path), "bf16"))
    full = encode_prompt(tokenizer, "word " * 200, "plain")
    cut = encode_prompt(tokenizer, "word " * 200, "plain", 10)
    assert full[0] == tokenizer.bos_token_id and cut == [full[0], *full[-9:]]


def test_batch_invariance_is_refused_for_nf4_models_on_vllm(fake_vllm, data_dir):
    from safetyrepro.config import ConfigError

    _, path = fake_vllm
    with pytest.raises(ConfigError, match=r"backend.batch_invariant: .* model 'm' would not be batch-invariant"):
        _vllm_settings(data_dir, path, "nf4", batch_invariant=True)
    assert _vllm_settings(data_dir, path, "bf16", batch_invariant=True).backend.batch_invariant
