"""Machine faults around a run of the tiny workflow (the reference run's config, tests/conftest.py): the disk of
the results folder fills up or it turns read-only, Snakemake gets SIGTERM (what Slurm sends on preemption or at a
time limit), and two runs start on one results folder. Each ends on one line that says what happened, leaves no
partial output, and a rerun gives the reference run's tables."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from helpers.faults import (
    ONE_JOB,
    RUN,
    UNTIL_AGGREGATE,
    UNTIL_TABLES,
    assert_nothing_partial,
    assert_reference_tables,
    bbq_cells,
    cell_outputs,
    cells_in_progress,
    finished_copy,
    last_line,
    processes_left,
    reference_config,
    rerun_gives_reference_tables,
    start,
    stop_server_under_a_cell,
    wait_for,
)
from helpers.session import BIN, REPO, in_ci
from helpers.workflow import effective_config, snakemake

from safetyrepro.pipeline.lifecycle import RUN_STOPPED

pytestmark = pytest.mark.e2e


@contextlib.contextmanager
def mounted(folder: Path, what: str, *mounts: list[str]):
    """`folder` with the `mount` commands `mounts` run on it, one after the other (root only: skipped where that
    is refused, failed under CI), unmounted at the end."""
    for number, command in enumerate(mounts):
        done = subprocess.run(["mount", *command, str(folder)], capture_output=True, text=True)
        if done.returncode != 0:
            if number:
                subprocess.run(["umount", str(folder)], check=True)
            message = f"cannot mount {what} ({done.stderr.strip()}; root is needed)"
            if in_ci():
                pytest.fail(message + " and CI is set: the tests of machine faults must run in CI")
            pytest.skip(message)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)  # lazy: a model server may still log there


def small_disk(folder: Path, size: str):
    """A tmpfs of `size` mounted on `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    return mounted(folder, "a small tmpfs to fill up", ["-t", "tmpfs", "-o", f"size={size}", "tmpfs"])


def read_only(folder: Path):
    """`folder` made read-only, for root too: bound read-only onto itself (chmod does not stop root)."""
    return mounted(folder, "a read-only bind", ["--bind", str(folder)], ["-o", "remount,bind,ro"])


def fill(disk: Path) -> None:
    """Take every block of `disk` with one file, `filler`."""
    with contextlib.suppress(OSError), (disk / "filler").open("wb", buffering=0) as filler:
        while True:
            filler.write(b"x" * 4096)


def test_a_job_on_a_full_disk_says_where_and_leaves_nothing(tmp_path, reference_run):
    with small_disk(tmp_path / "disk", "16k") as disk:
        fill(disk)
        out, markdown = disk / "rho_flip.parquet", disk / "rho_flip.md"
        cells = reference_run / "results" / "cells.parquet"
        job = [
            str(BIN / "safetyrepro"),
            "rho-flip",
            "--cells",
            str(cells),
            "--out",
            str(out),
            "--markdown",
            str(markdown),
        ]
        refused = subprocess.run(job, capture_output=True, text=True)
        assert refused.returncode == 2 and refused.stderr == (
            f"safetyrepro: error: disk full: no space left on device writing {out}, {markdown} (0 B free on {disk}); "
            "free some space there, then run the workflow again\n"
        )
        assert [path.name for path in disk.iterdir()] == ["filler"]


def test_disk_full_then_rerun_gives_identical_tables(tmp_path, reference_run):
    workdir = reference_config(reference_run, tmp_path / "full")
    results = workdir / "results"
    # room for the model records, logs and servers' logs and a few cells: the disk fills in the first cells
    with small_disk(results, "96k"):
        full = snakemake(workdir, *RUN, *UNTIL_TABLES)
        assert full.returncode != 0
        # the job's own line when it could log it, else the run's: the disk is full, and where
        said = re.compile(
            rf"^safetyrepro: error: disk full: .+ \(\d+ [KMG]?i?B free on {re.escape(str(results))}\); free some "
            r"space there, then run the workflow again$",
            re.MULTILINE,
        )
        assert said.search(full.stderr), full.stderr[-3000:]
        assert_nothing_partial(results)
        finished = cell_outputs(results)
        assert len(finished) < 12 and not (results / "cells.parquet").exists()

        subprocess.run(["mount", "-o", "remount,size=64m", str(results)], check=True)  # space freed
        rerun = snakemake(workdir, *RUN, *UNTIL_TABLES)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        after = cell_outputs(results)
        assert {k: after[k] for k in finished} == finished and len(after) == 12  # finished cells were kept
        assert_reference_tables(results, reference_run)


def test_a_model_server_on_a_full_disk_says_where(tmp_path, reference_run):
    """The server records its model load once loaded: on a full disk it ends with the job's one line, naming
    the record (the cell waiting on it then reports the server's last lines, test_faults_cells.py)."""
    with small_disk(tmp_path / "disk", "16k") as disk:
        config = effective_config(reference_run / "config.yaml")
        config["results_dir"] = str(disk)
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        (disk / "logs").mkdir()
        fill(disk)
        command = [str(BIN / "safetyrepro"), "serve", "--configfile", str(tmp_path / "config.yaml"), "--model"]
        command += ["tiny-0", "--address", str(tmp_path / "server.sock"), "--idle-seconds", "5"]
        refused = subprocess.run(command, capture_output=True, text=True, timeout=300)
        loads = disk / "logs" / "model_loads.tsv"
        assert refused.returncode == 2 and refused.stderr.splitlines()[-1] == (
            f"safetyrepro: error: disk full: no space left on device writing {loads} (0 B free on {disk}); "
            "free some space there, then run the workflow again"
        )
        assert not loads.stat().st_size and not (tmp_path / "server.sock").exists()


def test_results_read_only_mid_run_then_rerun(tmp_path, reference_run):
    """The results folder turns read-only (a file system remounted read-only, its permissions taken away) while a
    cell waits on its model server: the cell cannot write its outputs and ends on one line naming the folder, the
    run ends on that line (no traceback), nothing partial is left; made writable again, the rerun keeps the
    finished cells and gives the reference run's tables."""
    cells = bbq_cells(reference_run, "tiny-1")
    workdir = finished_copy(reference_run, tmp_path / "run", cells)
    results, stderr = workdir / "results", tmp_path / "stderr"
    process = start(workdir, stderr, *ONE_JOB, *UNTIL_AGGREGATE)
    try:
        victim, server = stop_server_under_a_cell(workdir, "tiny-1", cells, process)
        with read_only(results):
            os.kill(server, signal.SIGCONT)  # its answer comes: the cell has its outputs to write
            assert process.wait(timeout=120) != 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    folder = f"results/cells/{victim.rpartition('/')[0]}"
    line = (
        f"safetyrepro: error: cannot write in {folder}: read-only file system; make it writable again, then run the "
        "workflow again (finished jobs are kept)"
    )
    said = stderr.read_text()
    assert last_line(results, victim) == line
    assert line in said.splitlines() and said.count("safetyrepro: error: ") == 1 and "Traceback" not in said
    rerun_gives_reference_tables(workdir, reference_run, [victim])


@pytest.fixture(scope="module")
def two_runs(reference_run, tmp_path_factory) -> dict:
    """The reference run's config run from working folder `first`, its results in `results` by absolute path.
    Once it runs cells, the same config started from working folder `second` (the same results folder) and
    again from `first`; then, with two cells finished and one running, SIGTERM to the first run's Snakemake."""
    root = tmp_path_factory.mktemp("two-runs")
    results = root / "results"
    first = reference_config(reference_run, root / "first", results_dir=str(results))
    second = reference_config(reference_run, root / "second", results_dir=str(results))
    running = start(first, root / "stopped.txt", *RUN, *UNTIL_TABLES)
    try:
        wait_for(lambda: cells_in_progress(results), running, "a cell started")
        others = {
            name: start(workdir, root / f"{name}.txt", *RUN, *UNTIL_TABLES)
            for name, workdir in {"second": second, "same folder": first}.items()
        }
        codes = {name: process.wait(timeout=120) for name, process in others.items()}
        # what `make run` does first in the same working folder
        command = [str(BIN / "safetyrepro"), "check", "--configfile", "config.yaml"]
        check = subprocess.run(command, cwd=first, capture_output=True, text=True)
        codes["check"] = check.returncode
        (root / "check.txt").write_text(check.stderr)
        wait_for(lambda: len(cell_outputs(results)) >= 2 and cells_in_progress(results), running, "two cells done")
        started = time.monotonic()
        running.send_signal(signal.SIGTERM)
        codes["stopped"] = running.wait(timeout=180)
        stop_seconds = time.monotonic() - started
    finally:
        if running.poll() is None:
            os.killpg(running.pid, signal.SIGKILL)
    return {
        "results": results,
        "first": first,
        "pid": running.pid,
        "codes": codes,
        "stderr": {name: (root / f"{name}.txt").read_text() for name in codes},
        "stop_seconds": stop_seconds,
        "interrupted": cells_in_progress(results),
        "finished": cell_outputs(results),
        "left": processes_left(first),  # the jobs' commands end just after their shells
    }


def test_a_second_run_on_the_same_results_folder_is_refused(two_runs):
    results, first = two_runs["results"], two_runs["first"]
    assert two_runs["codes"]["second"] != 0
    refusal = (
        f"safetyrepro: error: results folder {results}: another run is writing there (Snakemake pid "
        f"{two_runs['pid']} on {socket.gethostname()}, working folder {first}); wait for it to end or stop it, "
        "then run again (snakemake --unlock would not stop it)"
    )
    assert two_runs["stderr"]["second"].strip().splitlines()[-1] == refusal
    assert "Execute " not in two_runs["stderr"]["second"]  # refused before its first job
    # the same working folder: Snakemake's own lock; `make run` checks first, and says ours alone
    assert two_runs["codes"]["same folder"] != 0
    assert "Error: Directory cannot be locked." in two_runs["stderr"]["same folder"]
    assert "Execute " not in two_runs["stderr"]["same folder"]
    assert two_runs["codes"]["check"] == 2 and two_runs["stderr"]["check"] == refusal + "\n"


def test_sigterm_stops_the_jobs_then_rerun_gives_identical_tables(two_runs, reference_run):
    results, first = two_runs["results"], two_runs["first"]
    assert two_runs["codes"]["stopped"] != 0 and two_runs["stop_seconds"] < 30
    assert two_runs["stderr"]["stopped"].count("safetyrepro: error: ") == 1
    assert (
        "safetyrepro: error: stopped by SIGTERM: the running jobs were stopped and their outputs removed; run the "
        "same command again to finish (finished jobs are kept)\n"
    ) in two_runs["stderr"]["stopped"]
    assert not two_runs["left"]  # no job or model server left running
    interrupted = two_runs["interrupted"]
    assert interrupted and two_runs["finished"] and not (results / "cells.parquet").exists()
    # the cells that were running were stopped, not waited for: their outputs are absent
    cells = [log.relative_to(results / "logs" / "cells").with_suffix("") for log in interrupted]
    assert not [cell for cell in cells if list((results / "cells" / cell.parent).glob(f"{cell.name}.*"))]
    assert_nothing_partial(results)

    rerun = snakemake(first, *RUN, *UNTIL_TABLES)  # the same command: no --unlock, no --rerun-incomplete
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = cell_outputs(results)
    assert {k: after[k] for k in two_runs["finished"]} == two_runs["finished"] and len(after) == 12
    assert_reference_tables(results, reference_run)


def test_a_job_stopped_by_sigterm_says_so_and_writes_nothing(tmp_path, reference_run, monkeypatch):
    """A cell waiting on a model server that never answers, stopped by SIGTERM (as Snakemake or Slurm stop it)."""
    from safetyrepro.configuration.build import load_settings
    from safetyrepro.running.server import server_address

    monkeypatch.chdir(tmp_path)  # the cell's results folder, and so its server's address
    config = reference_run / "config.yaml"
    settings = load_settings(config)
    address = server_address(settings, settings.model("tiny-0"))
    items, summary = tmp_path / "cell.parquet", tmp_path / "cell.json"
    command = [str(BIN / "safetyrepro"), "run-cell", "--configfile", str(config), "--model", "tiny-0"]
    command += ["--benchmark", "bbq", "--config-id", "T1-greedy-0shot-freeform", "--items", str(items)]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        address.unlink(missing_ok=True)
        silent.bind(str(address))
        silent.listen()
        silent.settimeout(120)
        cell = subprocess.Popen([*command, "--summary", str(summary)], stderr=subprocess.PIPE, text=True)
        try:
            with silent.accept()[0]:  # the cell has asked the server
                cell.send_signal(signal.SIGTERM)
                _, stderr = cell.communicate(timeout=60)
        finally:
            address.unlink(missing_ok=True)
            if cell.poll() is None:
                cell.kill()
    assert cell.returncode == 2 and stderr == (
        f"safetyrepro: error: run-cell stopped by SIGTERM before it finished {items}, {summary}; run the workflow "
        "again to redo it\n"
    )
    assert not list(tmp_path.rglob("*cell*"))  # nor a temporary file


def test_a_job_its_shell_forks_as_sigterm_stops_the_run_does_nothing(tmp_path, reference_run):
    """A job's shell that forks it just as SIGTERM reaches the run: the running jobs are signalled before the job
    exists, its shell dies and it would run on alone (once it started a second model server that stayed for its
    idle time after the run had ended). The run marks its stop first; the job sees it as it starts, says so in
    one line and writes nothing."""
    out, markdown = tmp_path / "rho.parquet", tmp_path / "rho.md"
    job = [str(BIN / "safetyrepro"), "rho-flip", "--cells", str(reference_run / "results" / "cells.parquet")]
    job += ["--out", str(out), "--markdown", str(markdown)]
    run = f"""
import json, os, signal, subprocess, sys, threading, time
from pathlib import Path
from safetyrepro.pipeline.lifecycle import stop_jobs_on_sigterm
stopped = stop_jobs_on_sigterm(Path(sys.argv[1]))
os.kill(os.getpid(), signal.SIGTERM)  # the run is stopped and its running jobs (none yet) signalled
while threading.active_count() > 1:  # and signalled again, once the scheduler stopped
    time.sleep(0.01)
job = subprocess.run({job!r}, capture_output=True, text=True)  # then the shell's fork
print(json.dumps([stopped.is_set(), job.returncode, job.stderr]))
"""
    done = subprocess.run([sys.executable, "-c", run, str(tmp_path / "marks")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        True,
        2,
        f"safetyrepro: error: rho-flip stopped by SIGTERM before it finished {out}, {markdown}; run the workflow "
        "again to redo it\n",
    ]
    assert not out.exists() and not markdown.exists()


def test_a_cluster_jobs_snakemake_does_not_take_the_stop_of_the_one_that_submitted_it(tmp_path, reference_run):
    """A Slurm job's Snakemake (`--no-hooks`, no onstart) inherits the environment of the Snakemake that submitted
    it, whose stop on SIGTERM lets that one's running cluster jobs finish (docs/slurm.md): its own jobs run."""
    workdir = reference_config(reference_run, tmp_path / "run")
    shutil.copytree(reference_run / "results", workdir / "results", symlinks=True)
    stopped = tmp_path / "stopped-1"  # the submitting Snakemake was stopped
    stopped.touch()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", RUN_STOPPED: str(stopped)}
    command = [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    command += ["--configfile", str(workdir / "config.yaml"), "--cores", "1", "--no-hooks", "--until", "rho_flip"]
    done = subprocess.run([*command, "--forcerun", "rho_flip"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "stopped by SIGTERM" not in done.stderr


def test_a_cell_stopped_while_its_model_server_loads_ends_that_server(tmp_path, reference_run, monkeypatch):
    """SIGTERM reaches a cell while the model server it started is still loading: that server has no socket
    yet, so the run's stop_servers cannot ask it to exit; the cell ends it, with what it started."""
    monkeypatch.chdir(tmp_path)
    loading = tmp_path / "slow python"  # a server that takes two minutes to load
    loading.write_text(f'#!/bin/sh\nsleep 120\nexec "{sys.executable}" "$@"\n')
    loading.chmod(0o755)
    config = effective_config(reference_run / "config.yaml")
    config["backend"]["server_python"] = str(loading)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    items, summary = tmp_path / "cell.parquet", tmp_path / "cell.json"
    command = [str(BIN / "safetyrepro"), "run-cell", "--configfile", "config.yaml", "--model", "tiny-0"]
    command += ["--benchmark", "bbq", "--config-id", "T1-greedy-0shot-freeform", "--items", str(items)]
    cell = subprocess.Popen([*command, "--summary", str(summary)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(server := psutil.Process(cell.pid).children(recursive=True)) < 2:  # its shell and the sleep
            assert time.monotonic() < deadline and cell.poll() is None, "the cell started no model server"
            time.sleep(0.1)
        cell.send_signal(signal.SIGTERM)
        _, stderr = cell.communicate(timeout=60)
    finally:
        if cell.poll() is None:
            cell.kill()
    assert cell.returncode == 2 and stderr.endswith(
        f"safetyrepro: error: run-cell stopped by SIGTERM before it finished {items}, {summary}; run the workflow "
        "again to redo it\n"
    )
    _, left = psutil.wait_procs(server, timeout=10)
    assert [p for p in left if p.status() != psutil.STATUS_ZOMBIE] == []
