"""HF backend: determinism, log-likelihood correctness, chat vs plain prompts, loading errors."""

from __future__ import annotations

import math

import pytest
import torch
from tiny_model import build_tiny_model

from safetyrepro.backends import ModelLoadError, load_backend
from safetyrepro.config import ModelSpec
from safetyrepro.envelope import Decoding

PROMPTS = [
    "Question: What is the capital of France?",
    "Answer:",
    "Request: How can I kill a Python process?",
    "Statement: people are kind. Is this statement toxic?",
    "x",
]
GREEDY = Decoding(temperature=0.0, top_p=1.0, max_new_tokens=12)
SAMPLED = Decoding(temperature=0.7, top_p=0.95, max_new_tokens=12)


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def backend(tiny_path):
    return load_backend("hf", ModelSpec("tiny", str(tiny_path), "fp32"), batch_size=2)


def test_greedy_is_identical_across_reruns_and_batch_sizes(backend, tiny_path):
    first = backend.generate(PROMPTS, GREEDY, seed=0)
    assert backend.generate(PROMPTS, GREEDY, seed=123) == first  # greedy ignores the seed
    alone = load_backend("hf", ModelSpec("tiny", str(tiny_path), "fp32"), batch_size=1)
    assert alone.generate(PROMPTS, GREEDY, seed=0) == first
    assert all(isinstance(text, str) for text in first) and any(first)


def test_sampling_repeats_with_its_seed_and_changes_with_another(backend):
    one = backend.generate(PROMPTS, SAMPLED, seed=7)
    assert backend.generate(PROMPTS, SAMPLED, seed=7) == one
    assert backend.generate(PROMPTS, SAMPLED, seed=8) != one


def test_stop_strings_cut_the_completion(backend):
    free = backend.generate(PROMPTS, GREEDY, seed=0)
    stop = next(text[2:4] for text in free if len(text) > 6)
    cut = backend.generate(PROMPTS, GREEDY, seed=0, stop=[stop])
    for full, short in zip(free, cut):
        assert stop not in short
        assert full.startswith(short)
        assert short == full.split(stop)[0]


def _direct_loglikelihood(backend, context: str, continuation: str) -> float:
    """Reference: one unpadded forward pass over context + continuation."""
    context_ids = backend.tokenizer(context).input_ids
    target = backend.tokenizer(continuation, add_special_tokens=False).input_ids
    ids = torch.tensor([context_ids + target])
    with torch.no_grad():
        logprobs = torch.log_softmax(backend.model(ids).logits[0].float(), dim=-1)
    return sum(logprobs[len(context_ids) - 1 + i, token].item() for i, token in enumerate(target))


def test_loglikelihood_agrees_with_a_direct_forward_pass(backend):
    requests = [
        ("Question: What is the capital of France?", " A"),
        ("Question: What is the capital of France?", " B"),
        ("Answer:", " Sure, use the kill command."),
        ("x", " Sorry"),
        ("Request: How can I kill a Python process?", " A"),
        ("Answer:", " No"),
    ]
    got = backend.loglikelihood(requests)
    assert len(got) == len(requests)
    for (context, continuation), value in zip(requests, got):
        assert value == pytest.approx(_direct_loglikelihood(backend, context, continuation), abs=1e-4)
        assert value < 0 and math.isfinite(value)


def test_chat_template_is_applied_only_to_chat_models(tmp_path):
    chat = load_backend("hf", ModelSpec("c", str(build_tiny_model(tmp_path / "chat", chat=True)), "fp32"))
    assert chat.prompt_format == "chat"
    text = chat.tokenizer.decode(chat.encode_prompt("hello"))
    assert "<|user|>hello" in text and text.endswith("<|assistant|>")
    off = load_backend("hf", ModelSpec("c", str(tmp_path / "chat"), "fp32", chat_template="off"))
    assert off.prompt_format == "plain"
    assert off.tokenizer.decode(off.encode_prompt("hello")) == "<bos>hello"


def test_chat_template_on_without_a_template_fails(tiny_path):
    with pytest.raises(ModelLoadError, match="chat_template is 'on'"):
        load_backend("hf", ModelSpec("t", str(tiny_path), "fp32", chat_template="on"))


def test_bf16_precision_loads_bf16_weights(tiny_path):
    backend = load_backend("hf", ModelSpec("t", str(tiny_path), "bf16"))
    assert backend.model.dtype == torch.bfloat16
    assert len(backend.generate(PROMPTS[:2], GREEDY, seed=0)) == 2


@pytest.mark.parametrize("path", ["./no/such/model", "/tmp"])
def test_missing_or_non_model_directory_is_a_clear_error(path):
    with pytest.raises(ModelLoadError, match="not a model directory"):
        load_backend("hf", ModelSpec("m", path, "fp32"))


def test_unknown_backend_is_named():
    with pytest.raises(ModelLoadError, match="backend 'nope' is unknown"):
        load_backend("nope", ModelSpec("m", "x"))


def test_multi_token_continuations_of_one_context_share_it(backend):
    """Several full-answer continuations of one context (more than a batch of 2: the shared cache is repeated
    per chunk), of different lengths, each equal to its own unpadded forward pass."""
    context = "Question: How can I kill a Python process?"
    continuations = [
        " Sure, use the kill command.",
        " Sorry, I cannot help.",
        " Answer: A",
        " Think it through step by step.",
        " No",
    ]
    got = backend.loglikelihood([(context, c) for c in continuations])
    for continuation, value in zip(continuations, got):
        assert value == pytest.approx(_direct_loglikelihood(backend, context, continuation), abs=1e-4)


@pytest.mark.slow
def test_embedded_model_shares_a_long_context_across_full_answers(embedded_model_path):
    """gemma-3 mixes sliding-window and global attention layers: a context longer than the 512-token window,
    scored once and shared, gives each full answer the log-likelihood of its own forward pass."""
    backend = load_backend("hf", ModelSpec("gemma", str(embedded_model_path), "fp32"), batch_size=2)
    context = "Q: What is the capital of France?\nA: Paris.\n" * 60 + "Q: What is the largest planet?\nA:"
    assert len(backend.tokenizer(context).input_ids) > 512
    answers = [" Jupiter.", " Saturn, the ringed planet.", " The Sun.", " Earth is the largest planet."]
    got = backend.loglikelihood([(context, a) for a in answers])
    for answer, value in zip(answers, got):
        assert value == pytest.approx(_direct_loglikelihood(backend, context, answer), abs=2e-3)
    assert max(zip(got, answers))[1] == " Jupiter."


@pytest.mark.slow
def test_embedded_model_knows_the_capital_of_france(embedded_model_path):
    assert (embedded_model_path / "model.safetensors").is_file()  # a plain HF directory, not the GGUF
    assert not list(embedded_model_path.glob("*.gguf"))
    backend = load_backend("hf", ModelSpec("gemma", str(embedded_model_path), "fp32"))
    assert backend.prompt_format == "plain"  # gemma-3-270m is a base model without a chat template
    paris, london = backend.loglikelihood(
        [("The capital of France is", " Paris"), ("The capital of France is", " London")]
    )
    assert paris > london + 1.0


@pytest.mark.slow
def test_embedded_model_runs_at_nf4(embedded_model_path):
    backend = load_backend("hf", ModelSpec("gemma", str(embedded_model_path), "nf4"))
    assert "Linear4bit" in {type(m).__name__ for m in backend.model.modules()}
    paris, london = backend.loglikelihood(
        [("The capital of France is", " Paris"), ("The capital of France is", " London")]
    )
    assert paris > london
