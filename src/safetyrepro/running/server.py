"""One model load serves many cells: a per-model server on a local socket, started on demand.

The first cell of a model that finds no server starts one (a detached process, guarded by a file
lock), and every later cell on the same machine talks to it. The server loads the model once,
answers `generate` / `loglikelihood` calls one connection at a time, records the load in
`logs/model_loads.tsv` under the results folder, and exits after `idle_seconds` without a call.
Under Slurm each job that serves a model's cells starts its own server on its node. A server that dies
fails the call waiting on it at once; one that stays stopped (SIGSTOP, SIGTSTP) for STOPPED_LIMIT seconds
is killed by the cell waiting on it, which then fails as for a server that died.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import logging
import os
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection
from pathlib import Path

from safetyrepro.backends import Backend, ModelLoadError, load_backend, registered
from safetyrepro.configuration.settings import Settings
from safetyrepro.core.decoding import Decoding
from safetyrepro.core.messages import excerpt
from safetyrepro.core.model_spec import ModelSpec
from safetyrepro.pipeline.fingerprints import backend_modules, code_digest
from safetyrepro.running.gpu_memory import claim_gpu

log = logging.getLogger(__name__)
START_TIMEOUT = 1800  # a 9B model at NF4 from a cold disk can take minutes
# Where the servers' sockets are: fixed, not the temporary folder each process's environment names (Snakemake
# gives jobs a TMPDIR of their own; two folders were two locks and two servers of one model). Local to the
# machine, as a socket must be, and short: a socket's path holds at most 107 bytes.
SOCKET_ROOT = Path("/tmp")
# How long a cell waits on a model server that is stopped (SIGSTOP, SIGTSTP), in seconds, before it kills it: a
# stopped server never answers (a busy one runs, and is waited for however long its call takes).
STOPPED_LIMIT = 60


class ModelServerDied(ConnectionError):
    """The model server went away in the middle of a call (killed, or crashed)."""


class ModelServerHung(ModelServerDied):
    """The model server stayed stopped for STOPPED_LIMIT seconds in the middle of a call, and was killed."""


def load_backends(settings: Settings, spec: ModelSpec) -> dict[str, Backend]:
    """Backends per operation; one load when both operations use the same backend. They load in
    their `load_order` (the HF copy first: vLLM then takes its share of the GPU around it), each with
    its configured options and those it asks for at load (`Backend.load_options`). A judge only
    generates, and so does a model split over GPUs (it has no log-likelihood config: `check_parallel_models`;
    transformers would load it whole on one GPU): only the generating backend loads them."""
    loaded: dict[str, Backend] = {}
    kinds = settings.backend.kinds(spec)
    if spec in settings.judges or spec.gpus() > 1:
        kinds = {"generate": kinds["generate"]}
    for kind, backend in registered().items():
        if kind in kinds.values():
            options = {**settings.backend.options(kind), **backend.load_options(settings, loaded)}
            loaded[kind] = load_backend(kind, spec, **options)
    formats = {kind: backend.prompt_format for kind, backend in loaded.items()}
    if len(set(formats.values())) > 1:  # one model's prompts must not be chat on one backend, plain on another
        raise ModelLoadError(f"model '{spec.name}': the backends disagree on the prompt format ({formats})")
    return {op: loaded[kind] for op, kind in kinds.items()}


def exclusive_devices(settings: Settings, spec: ModelSpec) -> list[str]:
    """What this machine's server of a model's backends holds alone (`Backend.held_devices`): the
    UUIDs of the GPUs they use (a model split over GPUs: its first `spec.gpus()`), and other slots a backend
    names (vLLM on a CPU: "vllm-cpu")."""
    import torch

    cuda, kinds = torch.cuda.is_available(), set(settings.backend.kinds(spec).values())
    backends = [backend for kind, backend in registered().items() if kind in kinds]
    held = {slot for backend in backends for slot in backend.held_devices(settings.backend, cuda)}
    gpus = sorted(slot for slot in held if isinstance(slot, int))
    if gpus and spec.gpus() > 1:  # a model split over GPUs holds the first tensor x pipeline of them
        from safetyrepro.backends.vllm import require_gpus

        require_gpus(spec)  # before asking for GPUs the machine does not show
        gpus = sorted({*gpus, *range(spec.gpus())})
    others = sorted(slot for slot in held if isinstance(slot, str))
    return [str(torch.cuda.get_device_properties(i).uuid) for i in gpus] + others


def server_address(settings: Settings, spec: ModelSpec) -> Path:
    """Socket path for a model: one per model spec, backend settings and results folder, in one folder of
    this user's on the machine (SOCKET_ROOT), whatever each process's TMPDIR says; the lock that guards a
    server's start and the GPU claims are beside it."""
    # the backends' code is part of the key: a server left from before a code fix never serves the rerun
    key = json.dumps(
        [
            dataclasses.asdict(spec),  # all of it: a served model's limits too, which its server applies
            settings.backend.as_dict(),
            code_digest(*backend_modules(settings, spec)),
            str(settings.results_dir.resolve()),
            settings.longest_generation(),  # vLLM's engine is sized by it
        ],
        sort_keys=True,
    )
    folder = SOCKET_ROOT / f"safetyrepro-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        folder.chmod(0o700)  # only this user may connect: the socket is the access control
    except OSError as error:
        raise ModelLoadError(f"the model servers' socket folder {folder}: {error.strerror}") from None
    return folder / f"{spec.name[:40]}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.sock"


def server_log(settings: Settings, spec: ModelSpec) -> Path:
    """Where the model's servers write their log (one file per model, appended to)."""
    return settings.results_dir / "logs" / "servers" / f"{spec.name}.log"


def record_load(settings: Settings, spec: ModelSpec, seconds: float) -> None:
    """Append one line per model load to <results>/logs/model_loads.tsv."""
    path = settings.results_dir / "logs" / "model_loads.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    line = "\t".join(
        [
            time.strftime("%Y-%m-%dT%H:%M:%S"),
            spec.name,
            spec.precision,
            f"{seconds:.1f}",
            socket.gethostname(),
            str(os.getpid()),
            os.environ.get("SLURM_JOB_ID", ""),
        ]
    )
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    except OSError as error:  # a failed write names no file: this one does (a full disk: the server's one line)
        raise OSError(error.errno, error.strerror, str(path)) from None


def serve(settings: Settings, spec: ModelSpec, address: Path, idle_seconds: float) -> None:
    """Load the model once and answer calls until idle for `idle_seconds`; a server on a GPU first
    has every other model server on it exit (one server per GPU at a time: safetyrepro.running.gpu_memory)."""
    claims = [
        claim_gpu(address.parent, held, address, _ask_to_exit, START_TIMEOUT)
        for held in exclusive_devices(settings, spec)
    ]
    started = time.perf_counter()
    backends = load_backends(settings, spec)
    record_load(settings, spec, time.perf_counter() - started)
    address.unlink(missing_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(address))
        listener.listen()
        listener.settimeout(idle_seconds)
        log.info("serving %s on %s", spec.name, address)
        while True:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                log.info("no call for %.0f s: server for %s exits", idle_seconds, spec.name)
                break
            client.setblocking(True)
            with Connection(client.detach()) as connection:
                try:
                    if _answer(connection, backends) == "shutdown":
                        log.info("asked to shut down: server for %s exits", spec.name)
                        break
                except OSError as exc:  # the cell was killed mid-call: its rerun will ask again
                    log.warning("a cell's connection broke (%s); serving on", exc)
    address.unlink(missing_ok=True)
    for backend in {id(b): b for b in backends.values()}.values():
        backend.close()  # the GPU memory is free before the next server may take the GPU
    for claim in claims:
        claim.close()


def _answer(connection: Connection, backends: dict[str, Backend]) -> str | None:
    while True:
        try:
            operation, args = connection.recv()
        except EOFError:
            return None
        if operation == "shutdown":
            connection.send(("ok", None, None))
            return operation
        try:
            prefill = None  # a model call's prompt tokens, computed and requested, go back to the cell's log
            if operation == "info":
                result = {op: backend.prompt_format for op, backend in backends.items()}
            elif operation == "generate_seeds":
                result = backends["generate"].generate_seeds(*args)
                prefill = backends["generate"].prefill
            elif operation == "loglikelihood":
                result = backends["loglikelihood"].loglikelihood(*args)
                prefill = backends["loglikelihood"].prefill
            else:
                raise ValueError(f"unknown operation {operation!r}")
            connection.send(("ok", result, prefill))
        except Exception as exc:  # the cell that asked gets the error (first: out of memory, a log may fail too)
            connection.send(("error", f"{type(exc).__name__}: {exc}", None))
            log.exception("call %s failed", operation)  # and the server keeps serving


def _is_stopped(pid: int) -> bool:
    """Whether process `pid` is stopped by a signal (SIGSTOP, SIGTSTP); False once it is gone."""
    import psutil  # a dependency of Snakemake

    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return False


@contextlib.contextmanager
def _killed_if_stopped(pid: int | None) -> Iterator[threading.Event]:
    """While the block waits on the model server `pid`, kill it (its process group: vLLM's workers with it) once
    it has stayed stopped for STOPPED_LIMIT seconds, which ends the block's wait: its socket closes. The event
    yielded is set when it was killed."""
    killed, done = threading.Event(), threading.Event()

    def watch() -> None:
        since = None
        while not done.wait(1.0):
            if not _is_stopped(pid):
                since = None
            elif time.monotonic() - (since := since or time.monotonic()) >= STOPPED_LIMIT:
                killed.set()
                with contextlib.suppress(ProcessLookupError):
                    if os.getpgid(pid) == pid:  # a session of its own, as _start starts it
                        os.killpg(pid, signal.SIGKILL)
                    else:
                        os.kill(pid, signal.SIGKILL)
                return

    watcher = threading.Thread(target=watch, daemon=True) if pid is not None else None
    if watcher is not None:
        watcher.start()
    try:
        yield killed
    finally:
        done.set()
        if watcher is not None:
            watcher.join()


def _server_process(connection: Connection, address: Path) -> int | None:
    """The process id of the model server at the other end of `connection`: the process that listens on the
    socket, where its command line says it serves `address` (a server of this package's); else None (and where
    the system does not say it, as Linux does: a stopped server is then waited for)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    with socket.socket(fileno=os.dup(connection.fileno())) as peer:
        credentials = peer.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid = struct.unpack("3i", credentials)[0]
    import psutil  # a dependency of Snakemake

    try:
        command = psutil.Process(pid).cmdline()
    except psutil.Error:
        return None
    return pid if "serve" in command and str(address) in command else None


class RemoteBackend(Backend):
    """A Backend whose calls go to the model server (one connection per cell); `server` names it in errors,
    `pid` is its process (None: not known, and a server that stays stopped is waited for)."""

    def __init__(self, connection: Connection, operation: str, prompt_format: str, server: str, pid: int | None):
        self.connection, self.operation, self.prompt_format = connection, operation, prompt_format
        self.server, self.pid = server, pid

    def _call(self, operation: str, *args):
        with _killed_if_stopped(self.pid) as killed:
            try:
                self.connection.send((operation, args))
                status, result, prefill = self.connection.recv()
            except (EOFError, OSError) as exc:  # its end of the socket closed: the process is gone
                if killed.is_set():
                    raise ModelServerHung(
                        f"{self.server} was stopped (process {self.pid} in state T, by SIGSTOP or SIGTSTP) and "
                        f"did not answer for {STOPPED_LIMIT} s, so it was killed; run the workflow again to resume: "
                        "finished cells are kept and a new server starts"
                    ) from exc
                raise ModelServerDied(
                    f"{self.server} died during the call (killed, e.g. by the out-of-memory killer, or crashed); "
                    "run the workflow again to resume: finished cells are kept and a new server starts"
                ) from exc
        if status != "ok":
            raise RuntimeError(f"model server: {result}")
        if prefill is not None:
            self.record_prefill(**prefill)
        return result

    def generate_seeds(
        self,
        prompts: Sequence[str],
        decoding: Decoding,
        seeds: Sequence[int],
        stop: Sequence[str] = (),
        batch_size: int | None = None,
    ) -> dict[int, list[str]]:
        return self._call("generate_seeds", list(prompts), decoding, list(seeds), list(stop), batch_size)

    def loglikelihood(self, requests: Sequence[tuple[str, str]], batch_size: int | None = None) -> list[float]:
        return self._call("loglikelihood", list(requests), batch_size)

    def close(self) -> None:
        self.connection.close()


def connect(settings: Settings, spec: ModelSpec, configfile: Path, idle_seconds: float) -> dict[str, Backend]:
    """Backends per operation served by the model's server, starting the server if none runs."""
    address = server_address(settings, spec)
    server = f"the model server for '{spec.name}' (log: {server_log(settings, spec)})"
    for _attempt in range(2):  # a server that was just timing out drops the call: start another
        connection = _try_connect(address)
        if connection is None:
            with open(address.with_suffix(".lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                connection = _try_connect(address) or _start(settings, spec, configfile, address, idle_seconds)
        pid = _server_process(connection, address)
        try:
            formats = RemoteBackend(connection, "info", "", server, pid)._call("info")
        except ModelServerDied:  # or stopped, and killed
            connection.close()
            address.unlink(missing_ok=True)
            continue
        return {op: RemoteBackend(connection, op, fmt, server, pid) for op, fmt in formats.items()}
    raise ModelLoadError(f"model server for '{spec.name}' closed the connection twice")


def _try_connect(address: Path) -> Connection | None:
    if not address.exists():
        return None
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(str(address))
    except OSError:
        client.close()
        return None
    return Connection(client.detach())


def _start(settings: Settings, spec: ModelSpec, configfile: Path, address: Path, idle_seconds: float) -> Connection:
    log_path = server_log(settings, spec)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    python, environment = settings.backend.server_command()
    command = [
        python,
        "-m",
        "safetyrepro.cli",
        "-v",
        "serve",
        "--configfile",
        str(configfile),
        "--model",
        spec.name,
        "--address",
        str(address),
        "--idle-seconds",
        str(idle_seconds),
    ]
    process = None
    try:  # from the start: SIGTERM may stop the cell (JobStopped) as soon as the server is started
        with open(log_path, "a", encoding="utf-8") as out:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=environment,
            )
        log.info("started model server for %s (pid %d, log %s)", spec.name, process.pid, log_path)
        return _wait_until_serving(process, spec, address, log_path)
    except BaseException:  # it did not start in time, or SIGTERM stopped the cell that waits (JobStopped):
        # a server still loading has no socket that the run's stop_servers could ask to exit
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # its own session: vLLM's workers with it
            process.wait()
        raise


def _wait_until_serving(process: subprocess.Popen, spec: ModelSpec, address: Path, log_path: Path) -> Connection:
    """A connection to the server `process` once it listens at `address`."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:  # one line: the cell's log and Snakemake end on it
            status = process.returncode
            how = (
                f"was killed by signal {-status} ({signal.strsignal(-status)})"
                if status < 0
                else f"exited with status {status}"
            )
            last = (log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines() or ["(empty)"])[-1]
            raise ModelLoadError(
                f"model server for '{spec.name}' {how} before it served; the last line of {log_path}: "
                f"{excerpt(last.strip(), 160)}"
            )
        connection = _try_connect(address)
        if connection is not None:
            return connection
        time.sleep(0.2)
    raise ModelLoadError(f"model server for '{spec.name}' did not start within {START_TIMEOUT} s (see {log_path})")


def _ask_to_exit(address: Path) -> bool:
    """Ask the server at `address` to exit (after the call it is answering); False when none answers."""
    connection = _try_connect(address)
    if connection is None:
        return False
    with connection:
        server = f"the model server at {address}"
        try:
            RemoteBackend(connection, "shutdown", "", server, _server_process(connection, address))._call("shutdown")
        except ModelServerDied:  # it was exiting already (idle, or asked by another server), or stopped and killed
            return False
    return True


def stop_servers(settings: Settings) -> int:
    """Ask every running server of this run's models and judges to exit; returns how many were stopped."""
    return sum(_ask_to_exit(server_address(settings, spec)) for spec in settings.served_models())
