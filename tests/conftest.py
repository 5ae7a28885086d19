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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with a slow end-to-end test (the real engine, lm-eval) first, then files with an end-to-end
    test, then the rest, each group in collection order: pytest-xdist hands out whole files in this order
    (--no-loadscope-reorder), so the longest start first and no worker is left alone with one at the end."""
    rank: dict[Path, int] = {}
    for item in items:
        marks = {mark.name for mark in item.iter_markers()}
        own = 0 if {"slow", "e2e"} <= marks else 1 if "e2e" in marks else 2
        rank[item.path] = min(rank.get(item.path, 2), own)
    items.sort(key=lambda item: rank[item.path])


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


# --- the tiny reference run (tests/test_faults.py, tests/test_slurm.py) ---------------------------
REFERENCE_CONFIGS = ["T1-greedy-0shot-freeform", "T2-t0.3-3shot-freeform", "T1-greedy-0shot-logprob"]


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory, worker_id, data_dir) -> Path:
    """An undisturbed local run of two tiny models, up to summary.md (every table), for the tests that
    compare another run of its config with it; made once per session, whichever worker asks first (a
    file lock in the session's temporary folder, shared by the pytest-xdist workers). Read-only: a test
    that runs its config again copies config.yaml. The models' folder names hold spaces, quotes and
    shell syntax, which must never reach a shell."""
    from filelock import FileLock
    from test_workflow import snakemake, write_config
    from tiny_model import build_tiny_model

    shared = tmp_path_factory.getbasetemp()
    root = (shared if worker_id == "master" else shared.parent) / "reference-run"
    with FileLock(f"{root}.lock"):
        if not (root / "finished").is_file():
            models = [
                {
                    "name": f"tiny-{i}",
                    "path": str(build_tiny_model(root / "models" / f"tiny {i} 'q' $(touch PWNED);", seed=i)),
                    "precision": "fp32",
                }
                for i in range(2)
            ]
            write_config(
                root / "run",
                data_dir,
                models,
                {"bbq": {"n_items": 4}, "toxigen": {"n_items": 4}},
                select_configs=REFERENCE_CONFIGS,
                max_new_tokens_cap=6,
                analysis={"subsample": {"count": 5}, "bootstrap": {"resamples": 50}},
            )
            result = snakemake(root / "run", "--cores", "2", "--resources", "gpu=1", "--until", "summary")
            assert result.returncode == 0, result.stderr[-3000:]
            (root / "finished").touch()
    return root / "run"
