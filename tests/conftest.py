"""Shared fixtures: the embedded model (built once under resources/), the session's shared runs and Slurm cluster.
Their helpers are in tests/helpers/ (on sys.path through pyproject's `pythonpath`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers.session import REPO, SEARCH_PATH, in_ci, session_folder
from helpers.workflow import REFERENCE_TARGETS

# Parallel workers (pytest-xdist) share the cores: each takes its share of torch's threads, set before
# torch is imported (oversubscribed OpenMP threads spin and slow every worker down).
if workers := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")):
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // workers)))


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker per core, and one more where the end-to-end tests run, so that a worker waiting on
    Slurm or a model server leaves no core idle. The cores are busy throughout a full run (docs/measurements.md:
    198% of 200%, counting the model servers that time(1) misses), so a further worker gains nothing; the real
    vLLM engines take turns (tests/helpers/vllm_engine_checks.py). `make test-fast` leaves them out ("not e2e"):
    its tests rarely wait, and the extra worker would only collect every test module once more."""
    cores = len(os.sched_getaffinity(0))
    return cores if "not e2e" in (config.getoption("markexpr") or "") else cores + 1


SHARED_RUNS: list[str] = []  # the session's shared workflow runs: fixtures declared with @shared_run (below)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The order pytest-xdist hands out whole files in (--no-loadscope-reorder), each group in collection
    order: first the first file to use each shared run (it makes the run while the other workers start);
    then the files on the test Slurm cluster, which mostly wait (on the reference run, then on the
    cluster's jobs and on status checks that come 10 s further apart each time no job has ended), so that
    their waits overlap the CPU-bound runs; then files with a slow end-to-end test (the real engine,
    lm-eval); then files with a slow or an end-to-end test; then the other users of a shared run (by then
    made: no worker waits on it), the files with the most such tests first; then the rest. So the longest
    start first and no worker is left alone with one at the end."""
    rank: dict[Path, int] = {}
    makers: dict[str, Path] = {}
    users: dict[Path, int] = {}  # a file's tests that use a shared run: the other users go most first
    for item in items:
        marks = {mark.name for mark in item.iter_markers()}
        uses = set(getattr(item, "fixturenames", ()))
        own = 1 if "local_slurm" in uses else 2 if {"slow", "e2e"} <= marks else 3 if marks & {"slow", "e2e"} else 5
        for run in set(SHARED_RUNS) & uses:
            if makers.setdefault(run, item.path) == item.path:
                own = 0
            else:
                users[item.path] = users.get(item.path, 0) + 1
        rank[item.path] = min(rank.get(item.path, 5), own)
    items.sort(
        key=lambda item: (4, -users[item.path]) if rank[item.path] > 1 and item.path in users else (rank[item.path], 0)
    )


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    """The embedded gemma-3-270m as a plain HF directory (built from the GGUF package on first use)."""
    from safetyrepro.running.embedded_model import build_embedded_model

    return build_embedded_model(REPO / "resources" / "models" / "gemma-3-270m")


# --- benchmark data (tests/unit/benchmarks/test_benchmarks.py) ---------------------------------------------------
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
    """A user's clone of the working tree with shared/data beside it (tests/helpers/user_clone.py)."""
    from helpers.user_clone import make_clone

    return make_clone(tmp_path_factory.mktemp("user"), data_dir)


def made_once(tmp_path_factory, worker_id: str, name: str, make) -> Path:
    """The folder `name`, filled by `make(folder)` once per session by whichever pytest-xdist worker asks
    first (a file lock in the session's temporary folder); the others wait for it. Read-only: a test
    that changes a run works on a copy. A `make` that failed leaves no mark, so the next caller tries
    again and fails with its own message."""
    from filelock import FileLock

    root = session_folder(tmp_path_factory, worker_id) / name
    with FileLock(f"{root}.lock"):
        if not (root / "finished").is_file():
            shutil.rmtree(root, ignore_errors=True)
            make(root)
            (root / "finished").touch()
    return root


def shared_run(fixture):
    """A session fixture that returns a run made once (`made_once`): the collection order knows it by name."""
    SHARED_RUNS.append(fixture.__name__)
    return pytest.fixture(scope="session")(fixture)


@shared_run
def reference_run(tmp_path_factory, worker_id, data_dir) -> Path:
    """An undisturbed local run of two tiny models (tests/configs/reference.yaml), up to every table, the run
    record and the GRID card (REFERENCE_TARGETS), for the tests that compare another run of its config with it
    (tests/end_to_end/test_faults.py, tests/end_to_end/test_slurm.py): a test that runs its config again copies config.yaml. The models' folder names hold spaces, quotes and shell
    syntax, which must never reach a shell."""
    from helpers.tiny_model import tiny_model_entries
    from helpers.workflow import snakemake, write_config

    def make(root: Path) -> None:
        models = tiny_model_entries([root / "models" / f"tiny {i} 'q' $(touch PWNED);" for i in range(2)])
        write_config(root / "run", data_dir, models, base="reference.yaml")
        result = snakemake(root / "run", "--cores", "2", *REFERENCE_TARGETS, "--resources", "gpu=1")
        assert result.returncode == 0, result.stderr[-3000:]

    return made_once(tmp_path_factory, worker_id, "reference-run", make) / "run"


@shared_run
def report_run(tmp_path_factory, worker_id, data_dir) -> Path:
    """The tiny three-model workflow with a precision probe (tests/configs/report.yaml), run as `make run` does: everything, then
    results/report.html (tests/end_to_end/test_report.py; tests/end_to_end/test_workflow.py works on a copy). That a second
    run of a config gives the same GRID card is tests/end_to_end/test_faults.py's, on the reference run."""
    from helpers.tiny_model import tiny_model_entries
    from helpers.workflow import snakemake, write_config

    def make(root: Path) -> None:
        models = tiny_model_entries([root / f"tiny-{i}" for i in range(3)])
        write_config(root / "run", data_dir, models, base="report.yaml")
        run = snakemake(
            root / "run",
            "--cores",
            "2",
            "--resources",
            "gpu=1",
            "--report",
            "results/report.html",
            "--report-after-run",
        )
        assert run.returncode == 0, run.stderr[-3000:]

    return made_once(tmp_path_factory, worker_id, "report-run", make) / "run"


@shared_run
def harness(tmp_path_factory, worker_id, data_dir) -> tuple:
    """Real lm-evaluation-harness and Inspect AI runs of two tiny models, with the mappings naming them
    (tests/helpers/harness_runs.py's make_imported_runs), for the import tests (tests/unit/imports/test_imports.py,
    tests/end_to_end/test_imported_results.py): made once, kept as a pickle of what the maker returned."""
    import pickle

    from helpers.harness_runs import make_imported_runs

    def make(root: Path) -> None:
        root.mkdir(parents=True)
        (root / "runs.pickle").write_bytes(pickle.dumps(make_imported_runs(root, data_dir)))

    return pickle.loads((made_once(tmp_path_factory, worker_id, "harness-runs", make) / "runs.pickle").read_bytes())


# --- the session's one-node Slurm cluster (tests/cluster/local_slurm.sh) ------------------------------
SLURM_PROGRAMS = ("sbatch", "squeue", "srun", "slurmctld", "slurmd", "munged")


@pytest.fixture(scope="session")
def local_slurm(tmp_path_factory, worker_id):
    """A running one-node Slurm cluster, shared by the session's workers: the first to need it starts it
    (unless it was already up) and the last still using it stops it (a count of users under a file lock),
    so no worker stops it under another's run."""
    import json
    import subprocess

    from filelock import FileLock

    missing = [name for name in SLURM_PROGRAMS if shutil.which(name, path=SEARCH_PATH) is None]
    if missing:
        message = f"Slurm is not installed (missing {', '.join(missing)}; apt-get install slurm-wlm munge)"
        if in_ci():
            pytest.fail(message + " and CI is set: the Slurm tests must run in CI")
        pytest.skip(message)
    script, env = REPO / "tests" / "cluster" / "local_slurm.sh", {**os.environ, "PATH": SEARCH_PATH}
    users = session_folder(tmp_path_factory, worker_id) / "slurm-users.json"

    def cluster(action: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(script), action], env=env, capture_output=True, text=True, timeout=180)

    with FileLock(f"{users}.lock"):
        state = json.loads(users.read_text()) if users.is_file() else {"users": 0, "ours": False}
        if state["users"] == 0:
            state["ours"] = cluster("status").returncode != 0
            started = cluster("start")
            assert started.returncode == 0, started.stdout + started.stderr
        state["users"] += 1
        users.write_text(json.dumps(state))
    yield
    with FileLock(f"{users}.lock"):
        state = json.loads(users.read_text())
        state["users"] -= 1
        users.write_text(json.dumps(state))
        if state["users"] == 0 and state["ours"]:
            stopped = cluster("stop")
            assert stopped.returncode == 0, stopped.stdout + stopped.stderr
