"""vLLM backend request building, checked on CPU with a stand-in `vllm` module (vllm itself is a
GPU-only optional extra and is never imported at module import time)."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest
from tiny_model import build_tiny_model

from safetyrepro.backends import ModelLoadError, load_backend
from safetyrepro.config import ModelSpec
from safetyrepro.envelope import Decoding


class FakeOutput:
    def __init__(self, text):
        self.outputs = [types.SimpleNamespace(text=text, token_ids=list(range(len(text.split()))))]


@pytest.fixture
def fake_vllm(monkeypatch, tmp_path):
    """A stand-in `vllm` recording engine options, sampling params and prompts."""
    from transformers import AutoTokenizer

    calls = {"engine": [], "generate": []}
    chat_model = build_tiny_model(tmp_path / "chat", chat=True)

    class LLM:
        def __init__(self, **options):
            calls["engine"].append(options)

        def get_tokenizer(self):
            return AutoTokenizer.from_pretrained(chat_model)

        def generate(self, prompts, params, use_tqdm=True):
            calls["generate"].append((list(prompts), list(params)))
            return [FakeOutput(f"seed {p.seed}: {prompt[-12:]}") for prompt, p in zip(prompts, params)]

    class SamplingParams:
        def __init__(self, **options):
            self.__dict__.update(options)

    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = LLM, SamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    return calls, chat_model


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
    load_backend("vllm", ModelSpec("m", str(path), "bf16", trust_remote_code=True, revision="abc"))
    nf4, bf16 = calls["engine"]
    assert (nf4["quantization"], nf4["dtype"], nf4["gpu_memory_utilization"]) == ("bitsandbytes", "bfloat16", 0.3)
    assert nf4["enable_prefix_caching"] is True and nf4["trust_remote_code"] is False
    assert "quantization" not in bf16 and bf16["dtype"] == "bfloat16"
    assert (bf16["trust_remote_code"], bf16["revision"]) == (True, "abc")


def test_all_seeds_of_a_cell_go_in_one_batch_with_their_own_seeds(fake_vllm):
    calls, path = fake_vllm
    backend = load_backend("vllm", ModelSpec("m", str(path), "bf16"))
    prompts = ["Question one?", "Question two?", "Question three?"]
    out = backend.generate_seeds(prompts, Decoding(0.7, 0.95, 20), [0, 1, 2, 3, 4], stop=["\n\n"])
    assert len(calls["generate"]) == 1
    sent, params = calls["generate"][0]
    assert len(sent) == len(params) == 15
    assert [p.seed for p in params] == [s for s in range(5) for _ in prompts]
    assert {(p.temperature, p.top_p, p.max_tokens, tuple(p.stop)) for p in params} == {(0.7, 0.95, 20, ("\n\n",))}
    assert list(out) == [0, 1, 2, 3, 4]
    for seed, texts in out.items():
        assert len(texts) == 3 and all(t.startswith(f"seed {seed}:") for t in texts)


def test_chat_template_wraps_each_prompt_and_greedy_has_temperature_zero(fake_vllm):
    calls, path = fake_vllm
    backend = load_backend("vllm", ModelSpec("m", str(path), "bf16"))
    assert backend.prompt_format == "chat"
    backend.generate(["hello"], Decoding(0.0, 1.0, 8), seed=0)
    sent, params = calls["generate"][0]
    assert sent == ["<|user|>hello\n<|assistant|>"]
    assert (params[0].temperature, params[0].top_p) == (0.0, 1.0)
    plain = load_backend("vllm", ModelSpec("m", str(path), "bf16", chat_template="off"))
    plain.generate(["hello"], Decoding(0.0, 1.0, 8), seed=0)
    assert calls["generate"][1][0] == ["hello"]


def test_loglikelihood_points_to_the_hf_backend(fake_vllm):
    _, path = fake_vllm
    with pytest.raises(ModelLoadError, match="backend.loglikelihood: hf"):
        load_backend("vllm", ModelSpec("m", str(path), "bf16")).loglikelihood([("a", " b")])
