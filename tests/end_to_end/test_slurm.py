"""The tiny workflow on a one-node Slurm cluster (tests/cluster/local_slurm.sh) through profiles/slurm,
against the session's local reference run of the same config (tests/conftest.py).

The cluster is the session's (`local_slurm` in tests/conftest.py). Without Slurm installed the module is
skipped, except under CI (CI=true), where it fails.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers.session import REPO
from helpers.tiny_model import build_tiny_model
from helpers.workflow import PROFILE_ARGS, SUBMITTED, effective_config, snakemake, write_config

from safetyrepro.configuration.build import load_settings

pytestmark = pytest.mark.e2e

# a cell executed inside the job (not just listed in the group's plan)
CELL_RUN = re.compile(
    r"^localrule cell:\n(?:.*\n){0,8}?\s+wildcards: model=(\S+), benchmark=(\S+), config_id=(\S+)$", re.MULTILINE
)
TABLES = {
    "cells.parquet": ["model", "benchmark", "config_id"],
    "items.parquet": ["model", "benchmark", "config_id", "item_id", "seed"],
    "rho_flip.parquet": ["benchmark", "model_a", "model_b"],
}


@pytest.fixture(scope="module")
def runs(local_slurm, tmp_path_factory, reference_run):
    """The reference run's two-model config, run locally (the reference run) and through the Slurm profile
    (with its timing)."""
    root = tmp_path_factory.mktemp("slurm")
    (root / "slurm").mkdir()
    shutil.copy(reference_run / "config.yaml", root / "slurm" / "config.yaml")
    started = time.perf_counter()
    on_slurm = snakemake(root / "slurm", *PROFILE_ARGS)
    seconds = time.perf_counter() - started
    assert on_slurm.returncode == 0, on_slurm.stderr[-5000:]
    jobs = {int(job_id): Path(log) for job_id, log in SUBMITTED.findall(on_slurm.stdout + on_slurm.stderr)}
    print(f"\nSlurm run of the tiny workflow: {seconds:.0f} s, {len(jobs)} Slurm jobs")
    return reference_run, root / "slurm", jobs


def cells_by_job(jobs: dict[int, Path]) -> dict[int, set[tuple[str, str, str]]]:
    """The cells each Slurm job executed, read from its Slurm log."""
    return {job_id: set(CELL_RUN.findall(log.read_text())) for job_id, log in jobs.items()}


def test_results_equal_a_local_run(runs):
    local, on_slurm, _ = runs
    for name, key in TABLES.items():
        expected = pd.read_parquet(local / "results" / name).sort_values(key).reset_index(drop=True)
        actual = pd.read_parquet(on_slurm / "results" / name).sort_values(key).reset_index(drop=True)
        assert len(actual) > 0
        pd.testing.assert_frame_equal(actual, expected, obj=name)
    assert (on_slurm / "results" / "summary.md").is_file()


def test_every_cell_ran_in_its_models_slurm_job(runs):
    _, on_slurm, jobs = runs
    settings = load_settings(on_slurm / "config.yaml")
    expected = {(m.name, b, c.config_id) for m, b, c in settings.cells()}
    assert len(expected) == 2 * 2 * 3  # models x benchmarks x configs
    assert all(log.name == f"{job_id}.log" and log.is_file() for job_id, log in jobs.items())
    executed = cells_by_job(jobs)
    ran = [cell for cells in executed.values() for cell in cells]
    assert sorted(ran) == sorted(expected)  # every cell once, each in a submitted Slurm job
    # one Slurm job per model, holding all of that model's cells, in the model's group
    with_cells = {job_id: cells for job_id, cells in executed.items() if cells}
    assert len(with_cells) == 2 and len(jobs) == 2  # the tables and what follows are local rules: no job
    for job_id, cells in with_cells.items():
        (model,) = {cell[0] for cell in cells}
        assert cells == {cell for cell in expected if cell[0] == model}
        assert jobs[job_id].parent.name.startswith(f"group_model-{model}_")


def test_one_model_load_per_slurm_job(runs):
    _, on_slurm, jobs = runs
    loads = pd.read_csv(
        on_slurm / "results" / "logs" / "model_loads.tsv",
        sep="\t",
        header=None,
        names=["time", "model", "precision", "seconds", "host", "pid", "slurm_job"],
    )
    assert (loads.host == socket.gethostname()).all()
    job_of_model = {next(iter(cells))[0]: job_id for job_id, cells in cells_by_job(jobs).items() if cells}
    # each model loaded exactly once, by the Slurm job that ran its cells (6 cells per load)
    assert sorted(zip(loads.model, loads.slurm_job)) == sorted(job_of_model.items())


def test_a_second_submission_submits_nothing(runs):
    _, on_slurm, _ = runs
    again = snakemake(on_slurm, *PROFILE_ARGS)
    assert again.returncode == 0, again.stderr[-3000:]
    output = again.stdout + again.stderr
    assert "Nothing to be done" in output
    assert not SUBMITTED.search(output)


def test_the_cluster_profile_asks_one_cells_resources_per_model_job(local_slurm, tmp_path, data_dir):
    """profiles/slurm alone: a model's job asks for one cell's memory, CPUs and GPU, and the runtimes summed.

    The test cluster has no partition "gpu", so sbatch refuses the job; its command line is what is checked. The
    config asks for CUDA, as one for a GPU cluster does: the run's start does not judge the GPU from this node,
    which has none (the jobs run on the cluster's).
    """
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    default, cell = profile["default-resources"], profile["set-resources"]["cell"]
    assert profile["set-resources"]["probe_cell"] == cell  # the precision probe's cells join their model's job
    # local models: a real run first checks that every model's weights are there (safetyrepro.pipeline.preflight)
    models = [{"name": n, "path": str(build_tiny_model(tmp_path / f"model-{n}", seed=i))} for i, n in enumerate("ab")]
    config = write_config(tmp_path, data_dir, models, base="slurm_gpu_jobs.yaml")
    configs = effective_config(config)["select_configs"]
    result = snakemake(
        tmp_path,
        "--verbose",
        "--profile",
        str(REPO / "profiles" / "slurm"),
        "--retries",
        "0",
        "--slurm-init-seconds-before-status-checks",
        "1",
    )
    calls = re.findall(r"sbatch call: (sbatch .*)", result.stdout + result.stderr)
    group_calls = [call for call in calls if "/group_model-" in call]
    assert len(group_calls) == 2, calls
    for call in group_calls:
        assert f" -p {default['slurm_partition']} " in call
        assert f" -t {default['runtime'] + len(configs) * cell['runtime']} " in call  # describe_model, then the cells
        assert f" --mem {cell['mem_mb']} " in call and f" --cpus-per-task={cell['cpus_per_task']} " in call
        assert " --gpus=1 " in call  # the model's one GPU, from the cell rule (the profile sets none)


def test_a_budgeted_run_runs_each_rounds_cells_in_their_own_slurm_jobs(local_slurm, tmp_path, data_dir):
    """A budgeted run (tests/configs/budget.yaml) through the profile: its rounds add cells while others run,
    and each round's cells of a model are a group of their own, so the run ends with the estimate the rounds'
    cells give, not a job started before its input (one group's describe_model running as round 0 added cells
    to it once made Snakemake run `provenance` before `aggregate`)."""
    models = [
        {"name": f"tiny-{i}", "path": str(build_tiny_model(tmp_path / f"tiny-{i}", seed=i)), "precision": "fp32"}
        for i in range(2)
    ]
    write_config(tmp_path, data_dir, models, base="budget.yaml")
    done = snakemake(tmp_path, *PROFILE_ARGS)
    assert done.returncode == 0, done.stderr[-5000:]
    results = tmp_path / "results"
    rounds = [json.loads((results / "estimate" / "bbq" / f"round-{n}.json").read_text()) for n in range(3)]
    chosen = [c for r in rounds for c in r["decision"]["configs"]]
    assert [len(r["decision"]["configs"]) for r in rounds] == [4, 2, 0]
    ran = sorted(p.relative_to(results / "cells").as_posix() for p in (results / "cells").rglob("*.json"))
    assert ran == sorted(f"{m['name']}/bbq/{c}.json" for m in models for c in chosen)
    assert "Estimated from 6 of 48 configs." in (results / "estimate.md").read_text()
    groups = {Path(log).parent.name for _, log in SUBMITTED.findall(done.stdout + done.stderr)}
    assert {f"group_model-tiny-{i}-bbq-round-{n}_cell" for i in range(2) for n in range(2)} <= groups
