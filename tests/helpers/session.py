"""What every test module may need of the session: the repository and its scripts, this environment's programs, CI,
and the temporary folder the session's pytest-xdist workers share."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # this environment's programs: snakemake, safetyrepro
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def script_module(name: str) -> ModuleType:
    """scripts/<name>.py loaded as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def session_folder(tmp_path_factory, worker_id: str) -> Path:
    """The temporary folder that every pytest-xdist worker of the session sees (each has its own below it)."""
    own = tmp_path_factory.getbasetemp()
    return own if worker_id == "master" else own.parent
