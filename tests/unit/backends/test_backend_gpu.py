"""The HF backend on a CUDA device (skipped without one): determinism, log-likelihoods against a
direct forward pass, bf16 and NF4 (bitsandbytes) on the GPU."""

from __future__ import annotations

import pytest
import torch
from helpers.tiny_model import build_tiny_model

from safetyrepro.backends import load_backend
from safetyrepro.core.decoding import Decoding
from safetyrepro.core.model_spec import ModelSpec

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
PROMPTS = ["Question: What is the capital of France?", "Answer:", "Request: How can I kill a Python process?", "x"]
REQUESTS = [
    ("Question: What is the capital of France?", " A"),
    ("Answer:", " Sure, use the kill command."),
    ("x", " Sorry"),
    ("Answer:", " No"),
]


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.mark.parametrize("precision", ["fp32", "bf16", "nf4"])
def test_generation_is_deterministic_on_the_gpu(tiny_path, precision):
    backend = load_backend("hf", ModelSpec("tiny", str(tiny_path), precision), batch_size=2, device="cuda")
    assert next(backend.model.parameters()).device.type == "cuda"
    greedy, sampled = Decoding(0.0, 1.0, 10), Decoding(0.7, 0.95, 10)
    assert backend.generate(PROMPTS, greedy, 0) == backend.generate(PROMPTS, greedy, 5)
    assert backend.generate(PROMPTS, sampled, 3) == backend.generate(PROMPTS, sampled, 3)
    seeds = backend.generate_seeds(PROMPTS, sampled, [0, 1, 2, 3, 4], stop=["\n\n"])
    assert list(seeds) == [0, 1, 2, 3, 4] and all(len(v) == len(PROMPTS) for v in seeds.values())


@pytest.mark.parametrize("precision, tolerance", [("fp32", 1e-3), ("bf16", 0.15), ("nf4", 0.15)])
def test_loglikelihood_matches_a_direct_forward_pass_on_the_gpu(tiny_path, precision, tolerance):
    backend = load_backend("hf", ModelSpec("tiny", str(tiny_path), precision), batch_size=3, device="cuda")
    got = backend.loglikelihood(REQUESTS)
    for (context, continuation), value in zip(REQUESTS, got):
        ids = backend.tokenizer(context).input_ids
        target = backend.tokenizer(continuation, add_special_tokens=False).input_ids
        with torch.no_grad():
            logits = backend.model(torch.tensor([ids + target], device="cuda")).logits[0].float()
        expected = sum(torch.log_softmax(logits, -1)[len(ids) - 1 + i, t].item() for i, t in enumerate(target))
        assert value == pytest.approx(expected, abs=tolerance)
