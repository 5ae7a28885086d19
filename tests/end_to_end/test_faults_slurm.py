"""A model's Slurm job cancelled in the middle of a cell (scancel) on the one-node test cluster
(tests/cluster/local_slurm.sh, the session's `local_slurm` fixture, tests/conftest.py), then the same command again:
its tables equal the session's local reference run (tests/conftest.py)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from helpers.faults import (
    UNTIL_TABLES,
    assert_nothing_partial,
    assert_reference_tables,
    cell_outputs,
    cells_in_progress,
    processes_left,
    reference_config,
    start,
    wait_for,
)
from helpers.session import SEARCH_PATH
from helpers.workflow import PROFILE_ARGS, SUBMITTED, snakemake

pytestmark = pytest.mark.e2e


def test_scancel_mid_cell_then_resubmit_gives_identical_tables(local_slurm, tmp_path, reference_run):
    workdir = reference_config(reference_run, tmp_path / "slurm")
    results, stderr = workdir / "results", tmp_path / "stderr.txt"
    running = start(workdir, stderr, *PROFILE_ARGS, *UNTIL_TABLES)
    try:
        # late in both models' jobs, so that the other one ends soon after: Snakemake waits for it
        wait_for(lambda: len(cell_outputs(results)) >= 4 and cells_in_progress(results), running, "a cell running")
        cell = cells_in_progress(results)[0].relative_to(results / "logs" / "cells").with_suffix("")
        model = cell.parts[0]
        jobs = {Path(log).parent.name: job for job, log in SUBMITTED.findall(stderr.read_text())}
        (job,) = [job for group, job in jobs.items() if group.startswith(f"group_model-{model}_")]
        assert subprocess.run(["scancel", job], env={**os.environ, "PATH": SEARCH_PATH}).returncode == 0
        code = running.wait(timeout=120)
    finally:
        if running.poll() is None:
            os.killpg(running.pid, signal.SIGKILL)
    said = stderr.read_text()
    assert code != 0 and f"Error in group model-{model}" in said
    logs = [log.read_text().strip().splitlines() for log in (results / "logs" / "cells" / model).rglob("*.log")]
    stopped = [lines[-1] for lines in logs if lines and lines[-1].startswith("safetyrepro: error: ")]
    assert all(
        line.startswith("safetyrepro: error: run-cell stopped by SIGTERM before it finished ") for line in stopped
    )
    assert all(f"\n{line}\n" in said for line in stopped)  # repeated below Snakemake's report
    assert_nothing_partial(results)
    assert not list(results.glob(f"cells/{cell}.*"))  # the cell cancelled midway was not kept
    assert not processes_left(workdir)  # no cell or model server left running
    finished = cell_outputs(results)  # the other model's: the cells the cancelled job finished went with it
    assert len(finished) == 6 and not list(results.glob(f"cells/{model}/*/*"))

    again = snakemake(workdir, *PROFILE_ARGS, *UNTIL_TABLES)
    assert again.returncode == 0, again.stderr[-3000:]
    after = cell_outputs(results)
    assert {k: after[k] for k in finished} == finished and len(after) == 12
    assert_reference_tables(results, reference_run)
