"""Fault injection on the tiny workflow (tests/end_to_end/test_faults*.py): starting and stopping runs and
their model servers, copies of the session's reference run, and its tables to compare with."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import psutil
import yaml

from helpers.session import BIN, REPO
from helpers.workflow import effective_config, snakemake

RUN = ("--cores", "2", "--resources", "gpu=1")


def tables(results: Path) -> dict[str, pd.DataFrame]:
    """Every Parquet table of a finished run except the per-cell files, by relative path."""
    return {
        str(p.relative_to(results)): pd.read_parquet(p)
        for p in sorted(results.rglob("*.parquet"))
        if "cells" not in p.relative_to(results).parts[:1]
    }


def cell_outputs(results: Path) -> dict[str, float]:
    """Cells with both outputs written, and the modification time of their item file."""
    return {
        str(p.relative_to(results)): p.stat().st_mtime_ns
        for p in (results / "cells").rglob("*.parquet")
        if p.with_suffix(".json").is_file()
    }


def start(workdir: Path, stderr: Path, *args: str) -> subprocess.Popen:
    """Snakemake on the workflow in `workdir`, in a process group of its own (so a test can signal it and every
    job it started), writing its stderr to `stderr`."""
    with stderr.open("w") as sink:
        return subprocess.Popen(
            [
                str(BIN / "snakemake"),
                "--snakefile",
                str(REPO / "Snakefile"),
                "--directory",
                str(workdir),
                "--configfile",
                str(workdir / "config.yaml"),
                *args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
            start_new_session=True,
        )


def cells_in_progress(results: Path) -> list[Path]:
    """Cells whose job has started (its log exists) but whose summary is not written yet."""
    logs = results / "logs" / "cells"
    return (
        [
            log
            for log in logs.rglob("*.log")
            if not (results / "cells" / log.relative_to(logs)).with_suffix(".json").is_file()
        ]
        if logs.is_dir()
        else []
    )


UNTIL_AGGREGATE = ("--until", "aggregate")  # cells.parquet, items.parquet and precision_probe.parquet


ONE_JOB = ("--cores", "1", "--resources", "gpu=1")  # one cell at a time: the run ends with the one the fault hit


# what a copy of the reference run takes: the cells and model descriptions, their jobs' records and Snakemake's
KEPT = ("results/cells", "results/models", "results/jobs", ".snakemake/metadata")


WAITING_ON_SOCKET = "unix_stream_read_generic"  # /proc/PID/wchan of a process blocked reading a Unix socket


def finished_copy(reference_run: Path, workdir: Path, without: Iterable[str] = ()) -> Path:
    """The reference run's config, finished cells and model records in `workdir`, with their times and
    Snakemake's records of them, less the cells `without` ("model/benchmark/config_id")."""
    workdir.mkdir(parents=True)
    shutil.copy(reference_run / "config.yaml", workdir / "config.yaml")
    for part in KEPT:
        shutil.copytree(reference_run / part, workdir / part)
    for cell in without:
        for suffix in (".parquet", ".json"):
            (workdir / "results" / "cells" / f"{cell}{suffix}").unlink()
    return workdir


def bbq_cells(reference_run: Path, model: str) -> list[str]:
    """The reference run's bbq cells of `model`."""
    configs = effective_config(reference_run / "config.yaml")["select_configs"]
    return [f"{model}/bbq/{config}" for config in configs]


def last_line(results: Path, cell: str) -> str:
    """The line a cell's log ends on."""
    return (results / "logs" / "cells" / f"{cell}.log").read_text().strip().splitlines()[-1]


def server_pid(results: Path, model: str) -> int | None:
    """The process id of the model's latest server, from the run's record of model loads."""
    loads = results / "logs" / "model_loads.tsv"
    rows = [line.split("\t") for line in loads.read_text().splitlines()] if loads.is_file() else []
    return next((int(row[5]) for row in reversed(rows) if row[1] == model), None)


def rerun_gives_reference_tables(
    workdir: Path, reference_run: Path, failed: Iterable[str] = (), redone: Iterable[str] = ()
) -> str:
    """Nothing partial is left (no temporary file, no table, no output of the `failed` cells); the rerun
    computes what is missing, redoes the `redone` cells, keeps the other finished cells and gives the reference
    run's tables, bit for bit. Returns what the rerun wrote on stderr."""
    results = workdir / "results"
    assert not list(results.rglob("*.tmp")) and not (results / "cells.parquet").exists()
    for cell in failed:
        assert not list((results / "cells").glob(f"{cell}.*"))
    finished = cell_outputs(results)
    outdated = {f"cells/{cell}.parquet": finished.pop(f"cells/{cell}.parquet") for cell in redone}
    rerun = snakemake(workdir, *RUN, *UNTIL_AGGREGATE)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = cell_outputs(results)
    assert len(after) == 12 and {k: after[k] for k in finished} == finished
    assert all(after[cell] != time for cell, time in outdated.items())
    got, expected = tables(results), tables(reference_run / "results")
    assert set(got) == {"cells.parquet", "items.parquet", "precision_probe.parquet"}
    for name, frame in got.items():
        pd.testing.assert_frame_equal(frame, expected[name], check_exact=True, obj=name)
    return rerun.stderr


def flip_a_byte(path: Path) -> None:
    """One byte of the data pages changed (a stray write, bit rot)."""
    content = bytearray(path.read_bytes())
    content[100] ^= 0xFF
    path.write_bytes(bytes(content))


CELL = "results/cells/tiny-0/bbq/T2-t0.3-3shot-freeform"


def cells_waiting_on_server(workdir: Path) -> set[str]:
    """The running cells ("model/benchmark/config_id") blocked reading their model server's socket."""
    waiting = set()
    for process in psutil.process_iter(["cwd"]):
        if process.info["cwd"] != str(workdir):  # Snakemake runs its jobs in the working folder
            continue
        try:
            args = process.cmdline()
            blocked = Path(f"/proc/{process.pid}/wchan").read_text() == WAITING_ON_SOCKET
        except (psutil.Error, OSError):  # it ended
            continue
        if "run-cell" in args and blocked:
            waiting.add("/".join(args[args.index(option) + 1] for option in ("--model", "--benchmark", "--config-id")))
    return waiting


def stop_server_under_a_cell(workdir: Path, model: str, cells: list[str], process: subprocess.Popen) -> tuple[str, int]:
    """Stop (SIGSTOP) `model`'s server while one of `cells`, run by `process` in `workdir`, waits on it for its
    model call; returns that cell and the server's process id, the server left stopped. The server is stopped as
    soon as a cell's log says the server answered its `info` (the cell's model call comes next), and left stopped
    once the cell is seen waiting on it (else continued)."""
    results = workdir / "results"
    connected: set[str] = set()
    deadline = time.monotonic() + 300
    while True:
        assert process.poll() is None and time.monotonic() < deadline, "no cell was seen waiting on its server"
        logs = {cell: results / "logs" / "cells" / f"{cell}.log" for cell in cells if cell not in connected}
        fresh = {cell for cell, log in logs.items() if log.is_file() and " items, " in log.read_text()}
        pid = server_pid(results, model)
        if fresh and pid is not None:
            connected |= fresh
            os.kill(pid, signal.SIGSTOP)  # it cannot answer now: a cell still waiting after a while has no answer
            time.sleep(0.2)
            if waiting := fresh & cells_waiting_on_server(workdir):
                return next(iter(waiting)), pid
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.005)


# The cells, then the tables every analysis is computed from (cells, items, precision_probe) and rho_flip.
UNTIL_TABLES = ("--until", "rho_flip")


TABLE_NAMES = {"cells.parquet", "items.parquet", "precision_probe.parquet", "rho_flip.parquet"}


def reference_config(reference_run: Path, workdir: Path, **changes) -> Path:
    """The reference run's config in `workdir`, with `changes`."""
    config = {**effective_config(reference_run / "config.yaml"), **changes}
    workdir.mkdir(parents=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return workdir


def assert_reference_tables(results: Path, reference_run: Path) -> None:
    """The run's tables equal the reference run's, bit for bit."""
    got, expected = tables(results), tables(reference_run / "results")
    assert set(got) == TABLE_NAMES
    for name, frame in got.items():
        pd.testing.assert_frame_equal(frame, expected[name], check_exact=True, obj=name)


def assert_nothing_partial(results: Path) -> None:
    """No temporary file left, every cell with both outputs or neither, every table and record readable."""
    assert not list(results.rglob("*.tmp"))
    cells = results / "cells"
    assert {p.with_suffix("") for p in cells.rglob("*.parquet")} == {p.with_suffix("") for p in cells.rglob("*.json")}
    for path in results.rglob("*.parquet"):
        pd.read_parquet(path)
    for path in results.rglob("*.json"):
        json.loads(path.read_text())


def wait_for(condition, process: subprocess.Popen, what: str, seconds: float = 300) -> None:
    """Poll `condition` until it holds; fail when `process` ends first or time runs out."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        time.sleep(0.1)


def processes_left(workdir: Path, seconds: float = 10) -> list[psutil.Process]:
    """Processes still working in `workdir` (Snakemake's jobs and the model servers they start run there) after
    up to `seconds` for them to end."""
    deadline = time.monotonic() + seconds
    while (left := [p for p in psutil.process_iter(["cwd"]) if p.info["cwd"] == str(workdir)]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)
    return left
