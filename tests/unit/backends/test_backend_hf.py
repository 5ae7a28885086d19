"""HF backend: determinism, log-likelihood correctness, prefix reuse, chat vs plain prompts, loading errors."""

from __future__ import annotations

import math
import os

import pytest
import torch
from helpers.session import REPO
from helpers.tiny_model import build_tiny_model

from safetyrepro.backends import ModelLoadError, load_backend
from safetyrepro.core.decoding import Decoding
from safetyrepro.core.model_spec import ModelSpec

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


@pytest.fixture(scope="module")
def gemma(embedded_model_path):
    """The embedded gemma-3-270m at fp32 with the shared prefix reused, loaded once for the module's slow tests."""
    return load_backend("hf", ModelSpec("gemma", str(embedded_model_path), "fp32"), batch_size=4)


@pytest.fixture(scope="module")
def no_reuse(tiny_path):
    return load_backend("hf", ModelSpec("tiny", str(tiny_path), "fp32"), batch_size=2, prefix_reuse=False)


SHOTS = "Question: What is the capital of France? A. Paris B. London Answer: A\n\n" * 2
FEW_SHOT = [SHOTS + p for p in PROMPTS]  # a cell's prompts: a shared prefix, then each item


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


def test_prefix_reuse_gives_what_the_path_without_it_gives(backend, no_reuse):
    """Greedy and sampled text equal, log-likelihoods within 1e-4 (fp32), with a shared few-shot prefix,
    more prompts x seeds than a batch, and prompts of different lengths."""
    for decoding in (GREEDY, SAMPLED):
        assert backend.generate_seeds(FEW_SHOT, decoding, [0, 1, 2]) == no_reuse.generate_seeds(
            FEW_SHOT, decoding, [0, 1, 2]
        )
    requests = [(p, c) for p in FEW_SHOT for c in (" A", " B", " Sure, use the kill command.")]
    assert backend.loglikelihood(requests) == pytest.approx(no_reuse.loglikelihood(requests), abs=1e-4)


def sampled_rows(backend, monkeypatch, prompts: list[str], seeds: list[int]) -> tuple[dict, list[list[dict]]]:
    """The texts of `backend.generate_seeds`, and every sampled row's steps: its generator's state before the
    step, its scores and the token taken."""
    from safetyrepro.backends.hf import _SeededSampling

    batches: dict[_SeededSampling, list[list[dict]]] = {}  # a batch's sampler (kept alive) -> its rows' steps
    original = _SeededSampling.__call__

    def recording(sampler, input_ids, scores):
        rows = batches.setdefault(sampler, [[] for _ in sampler.generators])
        states = [g.get_state() for g in sampler.generators]
        chosen = original(sampler, input_ids, scores)
        for steps, state, row_scores, pick in zip(rows, states, scores, chosen.argmax(-1).tolist()):
            steps.append({"state": state, "scores": row_scores.clone(), "pick": pick})
        return chosen

    with monkeypatch.context() as patched:
        patched.setattr(_SeededSampling, "__call__", recording)
        texts = backend.generate_seeds(prompts, SAMPLED, seeds)
    return texts, [row for rows in batches.values() for row in rows]


def draw(step: dict) -> float:
    """The number a row drew at a recorded step (read off a copy of its generator)."""
    return torch.rand(1, generator=torch.Generator().set_state(step["state"]), dtype=torch.float64).item()


def replayed_pick(step: dict) -> int:
    """The token a one-row sampler takes from a recorded step's scores with the same draw."""
    from safetyrepro.backends.hf import _SeededSampling

    alone = _SeededSampling(SAMPLED.temperature, SAMPLED.top_p, [torch.Generator().set_state(step["state"])])
    return int(alone(None, step["scores"][None]).argmax(-1))


def test_a_seeds_sample_depends_on_neither_the_other_seeds_nor_its_batch(backend, tiny_path, monkeypatch):
    """A row draws from its own generator (the seed and the prompt's ids): the same draws whatever else is in its
    batch, so the same text where the model gives the row the same scores. Alone, a row's scores may differ from
    those it gets in a batch by rounding (MKL's AVX-512 kernels sum a lone row otherwise): where the texts part,
    the row drew the same number, its scores differed by rounding only, and each side's token is what the
    sampler takes from that side's scores alone."""
    every_seed = backend.generate_seeds(FEW_SHOT, SAMPLED, [0, 1, 2])
    assert len({tuple(texts) for texts in every_seed.values()}) == 3  # the seeds differ
    assert backend.generate_seeds(FEW_SHOT, SAMPLED, [1]) == {1: every_seed[1]}
    assert backend.generate_seeds(FEW_SHOT[::-1], SAMPLED, [2, 0])[2] == every_seed[2][::-1]
    # recorded in the same batches as `every_seed` (a batch of other rows may round a row's scores otherwise)
    together, batched = sampled_rows(backend, monkeypatch, FEW_SHOT, [0, 1, 2])
    assert together == every_seed and len(batched) == 3 * len(FEW_SHOT)
    one_at_a_time = load_backend("hf", ModelSpec("tiny", str(tiny_path), "fp32"), batch_size=1)
    for i, prompt in enumerate(FEW_SHOT):
        text, (alone,) = sampled_rows(one_at_a_time, monkeypatch, [prompt], [0])
        same_draw = [row for row in batched if draw(row[0]) == draw(alone[0])]
        assert len(same_draw) == 1, f"prompt {i}: no row of the batch drew its first number"
        in_batch = same_draw[0]
        assert all(draw(a) == draw(b) for a, b in zip(alone, in_batch))  # the same draws, step by step
        parted = next((n for n, (a, b) in enumerate(zip(alone, in_batch)) if a["pick"] != b["pick"]), None)
        assert (text[0][0] == every_seed[0][i]) == (parted is None)
        if parted is not None:
            a, b = alone[parted], in_batch[parted]
            assert not torch.equal(a["scores"], b["scores"]), (i, parted)  # equal scores must give one token
            assert torch.allclose(a["scores"], b["scores"], rtol=1e-6, atol=1e-6), (i, parted)
            assert (replayed_pick(a), replayed_pick(b)) == (a["pick"], b["pick"]), (i, parted)


def test_no_prompts_give_no_completions_on_either_path(backend, no_reuse):
    for path in (backend, no_reuse):
        assert path.generate_seeds([], SAMPLED, [0, 1]) == {0: [], 1: []} and path.loglikelihood([]) == []


def test_prefill_counts_what_reuse_saves(backend, no_reuse):
    encoded = [backend.encode_prompt(p) for p in FEW_SHOT]
    shared = len(os.path.commonprefix(encoded))
    assert shared > len(backend.encode_prompt(SHOTS)) - 2
    requested = 3 * sum(len(ids) for ids in encoded)
    backend.generate_seeds(FEW_SHOT, SAMPLED, [0, 1, 2])
    # the prefix once, each prompt's own tokens once, the last token once per seed (its first new token)
    own = sum(len(ids) - shared - 1 for ids in encoded)
    assert backend.prefill == {"computed": shared + own + 3 * len(encoded), "requested": requested}
    no_reuse.generate_seeds(FEW_SHOT, SAMPLED, [0, 1, 2])
    assert no_reuse.prefill == {"computed": requested, "requested": requested}
    requests = [(p, c) for p in FEW_SHOT for c in (" A", " B")]
    backend.loglikelihood(requests)
    assert backend.prefill == {"computed": shared + own + len(encoded), "requested": 2 * requested // 3}


def _direct_loglikelihood(backend, context: str, continuation: str) -> float:
    """Reference: one unpadded forward pass over context + continuation, its logits kept from the last
    context token on (the ones that predict the continuation: gemma's 262k-token head over the whole
    context would be most of the work)."""
    context_ids = backend.tokenizer(context).input_ids
    target = backend.tokenizer(continuation, add_special_tokens=False).input_ids
    ids = torch.tensor([context_ids + target])
    with torch.no_grad():
        logits = backend.model(ids, logits_to_keep=len(target) + 1).logits[0]
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    return sum(logprobs[i, token].item() for i, token in enumerate(target))


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
def test_embedded_model_shares_a_long_context_across_full_answers(gemma):
    """gemma-3 mixes sliding-window and global attention layers: a context longer than the 512-token window,
    scored once and shared, gives each full answer the log-likelihood of its own forward pass."""
    backend = gemma
    context = "Q: What is the capital of France?\nA: Paris.\n" * 60 + "Q: What is the largest planet?\nA:"
    assert len(backend.tokenizer(context).input_ids) > 512
    answers = [" Jupiter.", " Saturn, the ringed planet.", " The Sun.", " Earth is the largest planet."]
    got = backend.loglikelihood([(context, a) for a in answers])
    for answer, value in zip(answers, got):
        assert value == pytest.approx(_direct_loglikelihood(backend, context, answer), abs=2e-3)
    assert max(zip(got, answers))[1] == " Jupiter."


@pytest.mark.slow
def test_embedded_model_knows_the_capital_of_france(embedded_model_path, gemma):
    assert (embedded_model_path / "model.safetensors").is_file()  # a plain HF directory, not the GGUF
    assert not list(embedded_model_path.glob("*.gguf"))
    backend = gemma
    assert backend.prompt_format == "plain"  # gemma-3-270m is a base model without a chat template
    paris, london = backend.loglikelihood(
        [("The capital of France is", " Paris"), ("The capital of France is", " London")]
    )
    assert paris > london + 1.0


@pytest.mark.slow
def test_embedded_model_runs_at_nf4(embedded_model_path):
    backend = load_backend("hf", ModelSpec("gemma", str(embedded_model_path), "nf4"))
    weight = backend.model.model.layers[0].self_attn.q_proj.weight  # on CPU dequantised once at load
    assert all(len(block.unique()) <= 16 for block in weight.reshape(-1, 64))  # 16 NF4 levels x a block scale
    paris, london = backend.loglikelihood(
        [("The capital of France is", " Paris"), ("The capital of France is", " London")]
    )
    assert paris > london


def _five_shot_prompts(data_dir, model_path, config_id: str, n_items: int) -> list[str]:
    from safetyrepro.configuration.build import load_settings
    from safetyrepro.configuration.settings import item_set
    from safetyrepro.running.prompts import render_prompt

    settings = load_settings(
        {
            "data_dir": str(data_dir),
            "models": [{"name": "a", "path": str(model_path)}, {"name": "b", "path": str(model_path)}],
            "benchmarks": {"truthfulqa": {"n_items": n_items}},
            "subset": {"seed": 3},  # its 4 items' 5-shot prompts are all longer than gemma-3's 512-token window
            "envelope": str(REPO / "config" / "envelope.yaml"),
        }
    )
    config = settings.config("truthfulqa", config_id)
    data = item_set(settings, "truthfulqa")
    shots = data.pool[: settings.envelope.shot_count(config)]
    return [render_prompt(settings.envelope, config, data.benchmark, item, shots) for item in data.items]


@pytest.mark.slow
def test_embedded_model_reuses_a_five_shot_prefix_exactly(embedded_model_path, gemma, data_dir):
    """Real 5-shot TruthfulQA prompts, longer than gemma-3's 512-token sliding window: with the shared
    prefix computed once, greedy text is the same and log-likelihoods agree within 1e-4 (fp32)."""
    reuse = gemma
    plain = load_backend("hf", ModelSpec("gemma", str(embedded_model_path), "fp32"), batch_size=4, prefix_reuse=False)
    scored = _five_shot_prompts(data_dir, embedded_model_path, "T1-greedy-5shot-logprob", 4)
    assert min(len(reuse.encode_prompt(p)) for p in scored) > 512
    requests = [(p, letter) for p in scored for letter in (" A", " B", " C", " D")]
    assert reuse.loglikelihood(requests) == pytest.approx(plain.loglikelihood(requests), abs=1e-4)
    assert reuse.prefill["computed"] < reuse.prefill["requested"] / 4
    prompts = _five_shot_prompts(data_dir, embedded_model_path, "T1-greedy-5shot-freeform", 3)
    decoding = Decoding(temperature=0.0, top_p=1.0, max_new_tokens=16)
    assert reuse.generate(prompts, decoding, seed=0, stop=["\n\n"]) == plain.generate(prompts, decoding, 0, ["\n\n"])


def _nucleus_pick(scores: torch.Tensor, temperature: float, top_p: float, draw: float) -> int:
    """One row's pick by the definition: the whole vocabulary sorted (equal probabilities in token-id
    order), the nucleus kept, the draw placed."""
    probs, index = torch.softmax(scores.float() / temperature, dim=-1).sort(descending=True, stable=True)
    probs = probs.double()
    cdf = probs.masked_fill(probs.cumsum(-1) - probs >= top_p, 0.0).cumsum(-1)
    return int(index[min(int(torch.searchsorted(cdf, draw * cdf[-1], right=True)), len(cdf) - 1)])


def test_sampling_takes_each_row_its_own_way_and_matches_a_full_sort(monkeypatch):
    """Rows whose nucleus fits the 1,024 most likely tokens, the 16,384 most likely, or only the whole
    sorted vocabulary: each goes only as far as it needs and picks what a full sort picks, alone or in
    any batch, also among tied probabilities (logits rounded to bf16, as a bf16 model gives them)."""
    from safetyrepro.backends.hf import _SeededSampling, row_generator

    vocabulary, temperature, top_p, steps = 262_144, 0.7, 0.95, 8
    noise = torch.randn(3, vocabulary, generator=torch.Generator().manual_seed(7))
    scores = (noise * torch.tensor([[4.0], [2.5], [1.0]])).bfloat16().float()  # nuclei of ~150, ~8,000, ~150,000
    sizes = [int((p.cumsum(-1) < top_p).sum()) + 1 for p in torch.softmax(scores / temperature, -1).sort(-1, True)[0]]
    assert sizes[0] <= 1024 < sizes[1] <= 16_384 < sizes[2]
    ids = [[1, 2], [3], [4, 5, 6]]
    expected = []
    for r in range(3):
        draws = row_generator(0, ids[r])
        uniforms = [float(torch.rand(1, generator=draws, dtype=torch.float64)) for _ in range(steps)]
        expected.append([_nucleus_pick(scores[r], temperature, top_p, u) for u in uniforms])
    calls = []
    for method in ("topk", "sort"):
        original = getattr(torch.Tensor, method)

        def recording(tensor, *args, _original=original, _name=method, **kwargs):
            calls.append((_name, tuple(tensor.shape), args[0] if args and _name == "topk" else None))
            return _original(tensor, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, method, recording)

    def picks(rows: list[int]) -> list[list[int]]:
        sampler = _SeededSampling(temperature, top_p, [row_generator(0, ids[r]) for r in rows])
        per_step = [sampler(None, scores[rows]).argmax(-1).tolist() for _ in range(steps)]
        return [[step[i] for step in per_step] for i in range(len(rows))]

    calls.clear()
    assert picks([0, 1, 2]) == expected
    wide = {(name, shape[0], k) for name, shape, k in calls if shape[-1] == vocabulary}
    assert wide == {("topk", 3, 1024), ("topk", 2, 16_384), ("sort", 1, None)}  # each row only as far as it needs
    for r in range(3):
        assert picks([r]) == [expected[r]]
    assert picks([2, 0, 1]) == [expected[2], expected[0], expected[1]]


def test_context_is_the_smallest_length_the_model_states():
    """As vLLM reads a context (any of its keys, a text sub-config first), and stricter: a config's own
    model_max_length is one more bound, the tokenizer's too unless it is transformers' "unset" 1e30."""
    from types import SimpleNamespace

    from safetyrepro.backends.prompt_ids import context_length

    unset = SimpleNamespace(model_max_length=int(1e30))
    assert context_length(SimpleNamespace(max_position_embeddings=4096), unset) == 4096
    assert context_length(SimpleNamespace(max_position_embeddings=4096, seq_length=2048), unset) == 2048
    assert context_length(SimpleNamespace(max_position_embeddings=2048, model_max_length=8192), unset) == 2048
    nested = SimpleNamespace(text_config=SimpleNamespace(n_positions=1024), max_position_embeddings=9999)
    assert context_length(nested, SimpleNamespace(model_max_length=512)) == 512
    assert context_length(SimpleNamespace(), unset) is None


def test_generation_stops_at_the_tokenizers_eos_and_generation_configs():
    from types import SimpleNamespace

    from safetyrepro.backends.hf import stop_token_ids

    tokenizer = SimpleNamespace(eos_token_id=7)
    assert stop_token_ids(SimpleNamespace(eos_token_id=2), tokenizer) == [2, 7]  # Yi-1.5: 2 and <|im_end|>
    assert stop_token_ids(SimpleNamespace(eos_token_id=[1, 7]), tokenizer) == [1, 7]
    assert stop_token_ids(SimpleNamespace(eos_token_id=None), tokenizer) == [7]
    assert stop_token_ids(SimpleNamespace(eos_token_id=None), SimpleNamespace(eos_token_id=None)) == []
