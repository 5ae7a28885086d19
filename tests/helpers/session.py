"""What every test module may need of the session: the repository and its scripts, this environment's programs, CI,
and the temporary folder the session's pytest-xdist workers share."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from unittest import mock

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # this environment's programs: snakemake, safetyrepro
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def script_module(name: str) -> ModuleType:
    """scripts/<name>.py loaded as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # where a dataclass of the script looks itself up
    spec.loader.exec_module(module)
    return module


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def free_port() -> int:
    """A loopback TCP port free now (for a server a test starts)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment_python(python: Path, what: str, target: str) -> Path:
    """The interpreter of an environment a make target builds (`python`): skipped where it is missing, a failure
    under CI, whose .ci/run builds it."""
    import pytest

    if not python.is_file():
        if in_ci():
            pytest.fail(f"CI runs {what}: {python.parent.parent.name} is missing (`make {target}`, as .ci/run does)")
        pytest.skip(f"{python.parent.parent.name} is missing (`make {target}`)")
    return python


def session_folder(tmp_path_factory, worker_id: str) -> Path:
    """The temporary folder that every pytest-xdist worker of the session sees (each has its own below it)."""
    own = tmp_path_factory.getbasetemp()
    return own if worker_id == "master" else own.parent


def cli(*args: str, stdin: str = "", cwd: Path = REPO) -> subprocess.CompletedProcess:
    """`safetyrepro ARGS` with `stdin` on its standard input, run in this process from `cwd` (its exit status,
    standard output and error, as a subprocess would give them, without a second Python's start: half a second
    a command). A test of the console script itself, or of a command that needs another environment, runs it."""
    stdin_stream = io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.object(sys, "stdin", stdin_stream),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        contextlib.chdir(cwd),
    ):
        from safetyrepro import cli as command_line

        try:
            status = command_line.main(list(args))
        except SystemExit as exc:  # argparse's refusals and --help
            status = exc.code
    return subprocess.CompletedProcess(["safetyrepro", *args], status, out.getvalue(), err.getvalue())
