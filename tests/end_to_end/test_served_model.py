"""A model behind a real OpenAI-compatible server: vLLM's own (`python -m vllm.entrypoints.openai.api_server`
from .venv-vllm, on a loopback port, started as `safetyrepro serve-embedded` starts it, with a key it demands),
serving the embedded gemma-3-270m at fp32. Its texts are the offline vLLM backend's, its log-likelihoods the HF
backend's, and a run through it works, keeps the key out of every file, and reruns a sampled cell to the same
texts. Skipped where .venv-vllm is absent, never under CI=true."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers.session import REPO, free_port
from helpers.vllm_engine_checks import ENGINE_ENV, engine_slot, vllm_python
from helpers.workflow import served_run, write_config

from safetyrepro.backends import load_backend
from safetyrepro.backends.openai_server import OpenAIServerBackend, ServerError
from safetyrepro.configuration.build import load_settings
from safetyrepro.core.decoding import Decoding
from safetyrepro.core.model_spec import ModelSpec
from safetyrepro.running.vllm_serve import server_command, stop_server, wait_until_serving

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

KEY = "sk-served-test-5b1d9c"  # the key the server demands: it must show in no file of a run
KEY_ENV = "SAFETYREPRO_TEST_SERVED_KEY"
LOGLIKELIHOOD_TOLERANCE = 2e-3  # nats, each continuation: both fp32 on this CPU (measured: about 1e-5)


@pytest.fixture(scope="module")
def run_config(tmp_path_factory, data_dir, embedded_model_path) -> tuple[Path, Path]:
    """A run folder whose config has the served model (the embedded model's tokenizer, fp32) against the same
    model at bf16 on HF: TruthfulQA and BBQ, 2 items, a greedy and a sampled free-form config and a log-likelihood
    one."""
    workdir = tmp_path_factory.mktemp("served-run")
    endpoint = {"url": f"http://127.0.0.1:{free_port()}/v1", "model": "gemma-served", "api_key_env": KEY_ENV}
    models = [
        {"name": "gemma-served", "path": str(embedded_model_path), "precision": "fp32", "endpoint": endpoint},
        {"name": "gemma-bf16", "path": str(embedded_model_path), "precision": "bf16"},
    ]
    return workdir, write_config(workdir, data_dir, models, base="served_grid.yaml")


@pytest.fixture(scope="module")
def offline_texts(run_config, tmp_path_factory, worker_id, embedded_model_path) -> dict:
    """The offline vLLM backend's texts of every free-form cell of the run's config (tests/helpers/
    vllm_offline_texts.py), before the server starts."""
    workdir, config = run_config
    out = workdir / "offline.json"
    script = REPO / "tests" / "helpers" / "vllm_offline_texts.py"
    env = {**os.environ, **ENGINE_ENV, "PYTHONPATH": str(REPO / "src")}
    with engine_slot(tmp_path_factory, worker_id):
        result = subprocess.run(
            [str(vllm_python()), str(script), "--model", str(embedded_model_path), "--config", str(config)]
            + ["--out", str(out)],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
            cwd=workdir,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out.read_text())


class Served:
    """vLLM's server of the served model, as serve-embedded starts it, demanding KEY: the run's settings, the
    model's spec, and the server's process (`start` starts it again after a test killed it)."""

    def __init__(self, settings, spec, log_path: Path):
        self.settings, self.spec, self.log_path = settings, spec, log_path
        self.command = server_command(settings, spec, str(vllm_python())) + ["--api-key", KEY]
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        env = {**os.environ, **ENGINE_ENV, KEY_ENV: KEY}
        with open(self.log_path, "ab") as out:
            self.process = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        wait_until_serving(self.process, self.spec, self.log_path)


@pytest.fixture(scope="module")
def server(run_config, offline_texts, tmp_path_factory, worker_id):
    workdir, config = run_config
    settings = load_settings(config)
    served = Served(settings, settings.model("gemma-served"), workdir / "vllm-serve.log")
    with engine_slot(tmp_path_factory, worker_id):
        os.environ[KEY_ENV] = KEY
        try:
            served.start()
            yield served
        finally:
            os.environ.pop(KEY_ENV, None)
            if served.process is not None:
                stop_server(served.process)


def test_served_texts_are_the_offline_engines_and_loglikelihoods_the_hf_backends(server, offline_texts, tmp_path):
    """Every free-form cell's texts (greedy and sampled, every seed) through the server equal the offline vLLM
    backend's; the log-likelihoods of a BBQ cell's options are the HF backend's at fp32 within the tolerance. The
    time of each cell through the server is printed beside the offline engine's."""
    backend = OpenAIServerBackend(server.spec, str(tmp_path / "responses"))
    for cell in offline_texts["cells"]:
        started = time.perf_counter()
        served = backend.generate_seeds(cell["prompts"], Decoding(**cell["decoding"]), cell["seeds"], cell["stop"])
        seconds = time.perf_counter() - started
        for seed in cell["seeds"]:
            assert served[seed] == cell["texts"][str(seed)], (cell["benchmark"], cell["config_id"], seed)
        print(f"{cell['benchmark']} {cell['config_id']}: served {seconds:.2f} s, offline {cell['seconds']:.2f} s")
    requests = [
        ("Question: Who was in the room?\nA. the nurse\nB. the doctor\nAnswer:", option) for option in (" A", " B")
    ] + [("The capital of France is", " Paris, a city on the Seine.")]
    hf = load_backend("hf", ModelSpec("hf", server.spec.path, "fp32"), batch_size=4, device="cpu")
    expected, got = hf.loglikelihood(requests), backend.loglikelihood(requests)
    assert max(abs(a - b) for a, b in zip(expected, got)) < LOGLIKELIHOOD_TOLERANCE, (expected, got)
    print(f"log-likelihoods, HF / served: {expected} / {got}")
    # without the tokenizer: plain text prompts, the continuation found among the echoed tokens (vLLM echoes its
    # BOS as "<bos>", which its offsets count), against the HF backend on plain prompts
    as_text = OpenAIServerBackend(dataclasses.replace(server.spec, path=""), str(tmp_path / "as-text"))
    plain = load_backend("hf", ModelSpec("hf", server.spec.path, "fp32", chat_template="off"), device="cpu")
    expected, got = plain.loglikelihood(requests), as_text.loglikelihood(requests)
    assert max(abs(a - b) for a, b in zip(expected, got)) < LOGLIKELIHOOD_TOLERANCE, (expected, got)
    print(f"log-likelihoods of text prompts, HF / served: {expected} / {got}")


def test_a_wrong_key_is_one_line_naming_its_variable(server, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-wrong")
    with pytest.raises(ServerError, match=rf"refused the key in {KEY_ENV} \(401") as error:
        OpenAIServerBackend(server.spec, str(tmp_path))
    assert "sk-wrong" not in str(error.value) and "\n" not in str(error.value)


def test_a_run_through_the_server_keeps_its_key_out_of_every_file_and_reruns_alike(server, run_config):
    """The run ends green with the served model's cells and the GRID card naming the server (not the key); no
    file the run wrote holds the key; a sampled cell run again with its kept responses gone gets the same texts
    (the server honours the seeds)."""
    workdir, config = run_config
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, **ENGINE_ENV, KEY_ENV: KEY, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    snakemake = [str(bin_dir / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    snakemake += ["--configfile", str(config), "--cores", "2", "--resources", "gpu=1"]
    result = subprocess.run(snakemake, capture_output=True, text=True, env=env, timeout=1800)
    assert result.returncode == 0, result.stderr[-4000:]
    results = workdir / "results"
    cells, card, host = served_run(workdir, config)
    assert set(cells.model) == {"gemma-served", "gemma-bf16"} and len(cells) == 2 * 2 * 3
    assert f"served: gemma-served at {host} (completions API, vllm 0.32.0); seeds honoured; tokenizer" in card
    for path in workdir.rglob("*"):
        if path.is_file() and path.name != "vllm-serve.log":
            assert KEY.encode() not in path.read_bytes(), path
    assert list((results / "responses" / "gemma-served").rglob("*.json"))

    sampled = next(results.glob("cells/gemma-served/truthfulqa/T3-t0.7-0shot-freeform*.parquet"))
    before = pd.read_parquet(sampled)
    shutil.rmtree(results / "responses")
    again = subprocess.run(
        [*snakemake, "--forcerun", str(sampled.relative_to(workdir))],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    assert again.returncode == 0, again.stderr[-4000:]
    after = pd.read_parquet(sampled)
    assert after.response.tolist() == before.response.tolist() and before.seed.nunique() == 5


def test_a_server_killed_in_the_middle_of_a_cell_fails_it_in_one_line_and_its_rerun_loses_nothing(
    server, offline_texts, tmp_path
):
    """The server killed (SIGKILL) while a sampled cell's requests go one at a time: the call fails in one line
    once its retries are spent; with the server back, the call again sends only what was not answered before, and
    its texts are the offline engine's."""
    cell = next(c for c in offline_texts["cells"] if c["config_id"] == "T3-t0.7-0shot-freeform")
    spec = dataclasses.replace(
        server.spec, endpoint=dataclasses.replace(server.spec.endpoint, max_in_flight=1, retries=1)
    )
    call = (cell["prompts"], Decoding(**cell["decoding"]), cell["seeds"], cell["stop"])
    cache = tmp_path / "responses"
    backend = OpenAIServerBackend(spec, str(cache))
    failure: list[BaseException] = []

    def run() -> None:
        try:
            backend.generate_seeds(*call)
        except ServerError as error:
            failure.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    while len(list(cache.rglob("*.json"))) < 2 and thread.is_alive():
        time.sleep(0.05)
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()
    thread.join(120)
    kept = len(list(cache.rglob("*.json")))
    total = len(cell["prompts"]) * len(cell["seeds"])
    assert failure and 2 <= kept < total, (failure, kept)
    message = str(failure[0])
    assert "\n" not in message and message.startswith("model 'gemma-served': a request to the server at 127.0.0.1:")
    assert "failed 2 times; the last: " in message
    server.start()
    again = OpenAIServerBackend(spec, str(cache))
    texts = again.generate_seeds(*call)
    assert again.sent == total - kept
    assert all(texts[seed] == cell["texts"][str(seed)] for seed in cell["seeds"])
