"""Shared fixtures: the embedded model (built once under resources/) and test helpers on sys.path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
# Parallel workers (pytest-xdist) share the cores: each takes its share of torch's threads, set before
# torch is imported (oversubscribed OpenMP threads spin and slow every worker down).
if workers := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")):
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // workers)))


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    """The embedded gemma-3-270m as a plain HF directory (built from the GGUF package on first use)."""
    from safetyrepro.running.models import build_embedded_model

    return build_embedded_model(REPO / "resources" / "models" / "gemma-3-270m")


# --- benchmark data (tests/test_benchmarks.py) ---------------------------------------------------
DATA_DIR_ENV = "SAFETYREPRO_DATA_DIR"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared benchmark data folder: $SAFETYREPRO_DATA_DIR, else ../shared/data next to the repo.

    Tests that need it are skipped (not failed) only when the folder does not exist at all; a folder
    that exists but has missing or broken files makes them fail.
    """
    path = Path(os.environ.get(DATA_DIR_ENV) or REPO.parent / "shared" / "data")
    if not path.is_dir():
        pytest.skip(f"benchmark data folder {path} is absent (set {DATA_DIR_ENV} to the shared data folder)")
    return path


@pytest.fixture(scope="module")
def clone(tmp_path_factory, data_dir) -> Path:
    """A user's clone of the working tree with shared/data beside it (tests/user_clone.py)."""
    from user_clone import make_clone

    return make_clone(tmp_path_factory.mktemp("user"), data_dir)
