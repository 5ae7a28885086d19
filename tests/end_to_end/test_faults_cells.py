"""Machine faults inside a cell of the tiny workflow: its model server killed mid-call or stopped (SIGSTOP), out
of memory, and a cell's file changed or truncated after it was written. Each ends on one line that says what
happened, leaves no partial output, and a rerun gives the reference run's tables (tests/conftest.py). The runs
start from a copy of the reference run's finished cells, less the few the fault needs, and go as far as the
tables."""

from __future__ import annotations

import json
import logging
import os
import re
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import psutil
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers.faults import (
    CELL,
    ONE_JOB,
    RUN,
    UNTIL_AGGREGATE,
    bbq_cells,
    cell_outputs,
    finished_copy,
    flip_a_byte,
    last_line,
    rerun_gives_reference_tables,
    server_pid,
    start,
    stop_server_under_a_cell,
    tables,
)
from helpers.session import BIN
from helpers.workflow import snakemake

from safetyrepro.cli import main
from safetyrepro.configuration.build import load_settings
from safetyrepro.running import server

pytestmark = pytest.mark.e2e
DELETE = "delete it and run the workflow again, which writes it anew"


CAP_MARGIN = 64 * 2**20  # bytes: more than a settled model server unmaps by itself, far less than it holds


def settled_size(process: psutil.Process, still_for: float = 1.0, timeout: float = 60.0) -> int:
    """`process`'s address space once it has settled: neither it nor the CPU time it used changed for
    `still_for` seconds (a server that has just answered may still be freeing what the call held; a cap
    read before that leaves the next call room)."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        times = process.cpu_times()
        now = (process.memory_info().vms, times.user + times.system)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= still_for:
            return now[0]
        time.sleep(0.1)
    raise AssertionError(f"process {process.pid} did not settle in {timeout} s")


def truncate(path: Path) -> None:
    """The file cut short (a full disk or a copy stopped half way)."""
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def edit_with_pandas(path: Path) -> None:
    """An answer marked correct, saved with pandas (its own metadata, the checksum gone)."""
    frame = pd.read_parquet(path)
    frame.loc[0, "correct"] = not frame.loc[0, "correct"]
    frame.to_parquet(path)


def edit_keeping_metadata(path: Path) -> None:
    """An answer marked correct, saved with the file's own metadata, its recorded checksum included."""
    table = pq.read_table(path)
    column = table.schema.get_field_index("correct")
    edited = table.set_column(column, "correct", pc.invert(table["correct"]))
    pq.write_table(edited.replace_schema_metadata(table.schema.metadata), path, compression="zstd")


def edit_score(path: Path) -> None:
    """A cell's score changed in its summary, written back as it was formatted."""
    summary = json.loads(path.read_text())
    summary["score"] = 1.0 - summary["score"]
    path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


def empty(path: Path) -> None:
    """Nothing left of the file (a disk that lost it, a `> file` by mistake)."""
    path.write_bytes(b"")


CHANGED = "changed after it was written (its SHA-256 is not the one recorded then)"
TRUNCATED = "is truncated or not Parquet (it does not end in a Parquet footer)"
SUMMARY_CHANGED = "changed after it was written (its SHA-256 is not the one T2-t0.3-3shot-freeform.parquet recorded)"
DAMAGES = [  # (file, damage, what the message says of it)
    (f"{CELL}.parquet", flip_a_byte, CHANGED),
    (f"{CELL}.parquet", edit_keeping_metadata, CHANGED),
    (f"{CELL}.parquet", edit_with_pandas, "has no checksum: it was not written by safetyrepro, or was rewritten since"),
    (f"{CELL}.parquet", truncate, TRUNCATED),
    (f"{CELL}.parquet", empty, TRUNCATED),
    (f"{CELL}.json", edit_score, SUMMARY_CHANGED),
    (f"{CELL}.json", truncate, SUMMARY_CHANGED),
]


def aggregate(workdir: Path) -> int:
    """`safetyrepro aggregate` over a copy's cells in the grid's order, as the workflow's job runs it (in the
    working folder, paths under results/)."""
    grid = load_settings(workdir / "config.yaml").cells()
    summaries = [f"results/cells/{model.name}/{benchmark}/{config.config_id}.json" for model, benchmark, config in grid]
    return main(
        [
            "aggregate",
            "--configfile",
            "config.yaml",
            "--summaries",
            *summaries,
            "--items",
            *(s.removesuffix(".json") + ".parquet" for s in summaries),
            "--cells-out",
            "results/cells.parquet",
            "--items-out",
            "results/items.parquet",
        ]
    )


def test_a_changed_or_truncated_cell_file_stops_the_aggregation(tmp_path, reference_run, monkeypatch, capsys):
    """Aggregation over copies of the reference run's cells: whole files give its tables; each damaged one is
    one line naming the file, and nothing is written."""
    workdir = finished_copy(reference_run, tmp_path / "whole")
    monkeypatch.chdir(workdir)
    assert aggregate(workdir) == 0, capsys.readouterr().err
    capsys.readouterr()
    for name in ("cells.parquet", "items.parquet"):
        expected = pd.read_parquet(reference_run / "results" / name)
        pd.testing.assert_frame_equal(pd.read_parquet(workdir / "results" / name), expected, check_exact=True)

    for number, (relative, damage, what) in enumerate(DAMAGES):
        workdir = finished_copy(reference_run, tmp_path / f"damaged-{number}")
        monkeypatch.chdir(workdir)
        damage(workdir / relative)
        assert aggregate(workdir) == 2
        assert capsys.readouterr().err == f"safetyrepro: error: results file {relative} {what}: {DELETE}\n", relative
        assert not list((workdir / "results").glob("*.parquet"))


@pytest.mark.parametrize("damage, what", [(flip_a_byte, CHANGED), (truncate, TRUNCATED)], ids=["changed", "truncated"])
def test_the_steps_after_the_cells_check_the_tables_they_read(
    tmp_path, reference_run, monkeypatch, capsys, damage, what
):
    """rho_flip, as every step after the aggregation, reads its tables checked: a damaged cells.parquet is
    one line naming it, and nothing is written."""
    shutil.copytree(reference_run / "results", tmp_path / "results", ignore=shutil.ignore_patterns("cells", "logs"))
    monkeypatch.chdir(tmp_path)
    damage(tmp_path / "results" / "cells.parquet")
    argv = ["rho-flip", "--cells", "results/cells.parquet", "--out", "rho.parquet", "--markdown", "rho.md"]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"safetyrepro: error: results file results/cells.parquet {what}: {DELETE}\n"
    assert not list(tmp_path.glob("rho.*"))


def test_a_truncated_cell_file_is_redone_as_its_record_says(tmp_path, reference_run):
    """A cell file cut short after its job wrote it is not the file its record names (results/jobs/): the run
    says so in one line, computes that cell again, keeps the others and gives the reference run's tables."""
    workdir = finished_copy(reference_run, tmp_path / "run")
    truncate(workdir / f"{CELL}.parquet")
    damaged = f"{CELL}.parquet".removeprefix("results/")
    finished = {cell: time for cell, time in cell_outputs(workdir / "results").items() if cell != damaged}
    rerun = snakemake(workdir, *RUN, *UNTIL_AGGREGATE)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    line = (
        f"safetyrepro: redoing {CELL}.parquet: {CELL}.parquet is not the file its record names (changed or "
        "replaced since it was written)"
    )
    assert line in rerun.stderr.splitlines(), rerun.stderr[-3000:]
    after = cell_outputs(workdir / "results")
    assert {cell: after[cell] for cell in finished} == finished
    got, expected = tables(workdir / "results"), tables(reference_run / "results")
    assert set(got) == {"cells.parquet", "items.parquet", "precision_probe.parquet"}
    for name, frame in got.items():
        pd.testing.assert_frame_equal(frame, expected[name], check_exact=True, obj=name)


def test_model_server_killed_mid_cell_then_rerun(tmp_path, reference_run):
    """SIGKILL of the model server (the out-of-memory killer's way) while a cell waits for its answer."""
    cells = bbq_cells(reference_run, "tiny-1")
    workdir = finished_copy(reference_run, tmp_path / "run", cells)
    results = workdir / "results"
    process = start(workdir, tmp_path / "stderr", *ONE_JOB, *UNTIL_AGGREGATE)
    victim, pid = stop_server_under_a_cell(workdir, "tiny-1", cells, process)
    os.kill(pid, signal.SIGKILL)
    assert process.wait(timeout=300) != 0
    line = (
        f"safetyrepro: error: cell {victim} failed: ModelServerDied: the model server for 'tiny-1' (log: "
        "results/logs/servers/tiny-1.log) died during the call (killed, e.g. by the out-of-memory killer, or "
        "crashed); run the workflow again to resume: finished cells are kept and a new server starts"
    )
    assert last_line(results, victim) == line
    assert line in (tmp_path / "stderr").read_text().splitlines()
    rerun_gives_reference_tables(workdir, reference_run, [victim])


def test_cell_out_of_memory_names_the_batch_size_then_rerun(tmp_path, reference_run, monkeypatch):
    """The model server's address space capped (RLIMIT_AS, as `ulimit -v` does) below what it holds once it
    has served the cell: the workflow's run of that cell cannot map anything new. Allocations of 64 KiB and
    more are their own mappings (MALLOC_MMAP_THRESHOLD_), so the first one fails at once, inside torch; the
    call's smaller ones (the tokenizer's) find the room the same call left in the heap. One malloc arena
    (MALLOC_ARENA_MAX): glibc retries a failed allocation in another arena, and a thread's arena grows inside
    the 64 MiB it reserved at its start (mprotect, which RLIMIT_AS does not count), so with several arenas the
    call ran under the cap in CI. The cap sits CAP_MARGIN below the server's size: a cap at its size left the
    call the room of whatever the server unmapped after it was read (5 MB once in CI)."""
    victim = bbq_cells(reference_run, "tiny-1")[0]
    workdir = finished_copy(reference_run, tmp_path / "run", [victim])
    results = workdir / "results"
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", str(64 * 1024))
    monkeypatch.setenv("MALLOC_ARENA_MAX", "1")
    model, benchmark, config_id = victim.split("/")
    cell = ["--configfile", "config.yaml", "--model", model, "--benchmark", benchmark, "--config-id", config_id]
    outputs = ["--items", str(tmp_path / "warm.parquet"), "--summary", str(tmp_path / "warm.json")]
    warm = subprocess.run([BIN / "safetyrepro", "run-cell", *cell, *outputs], cwd=workdir, capture_output=True)
    assert warm.returncode == 0, warm.stderr[-3000:]  # it started the server that the workflow's cell finds
    server = psutil.Process(server_pid(results, model))
    cap = settled_size(server) - CAP_MARGIN
    resource.prlimit(server.pid, resource.RLIMIT_AS, (cap, resource.RLIM_INFINITY))

    failed = snakemake(workdir, *RUN, *UNTIL_AGGREGATE)
    assert failed.returncode != 0, (
        f"the cell ran under a cap of {cap} bytes; the server now maps {server.memory_info().vms}"
    )
    line = last_line(results, victim)
    assert re.fullmatch(
        rf"safetyrepro: error: cell {re.escape(victim)} failed: OutOfMemory: the model ran out of memory \(it could "
        r"not allocate \d+ bytes\); lower the batch size \(4 prompts per forward pass, set by backend.batch_size\), "
        r"then run the workflow again",
        line,
    )
    assert line in failed.stderr.splitlines()
    server.wait(timeout=60)  # the failed run asked it to exit: the rerun starts a server of its own
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    rerun_gives_reference_tables(workdir, reference_run, [victim])


def test_model_server_stopped_is_killed_within_the_stated_time_then_rerun(
    tmp_path, reference_run, monkeypatch, capsys, caplog
):
    """A model server that hangs instead of dying: SIGSTOP, which no socket sees. A cell waiting on it kills it
    once it has stayed stopped for server.STOPPED_LIMIT seconds (60; 2 here): one stopped before the cell
    connects is replaced by a new server, one stopped under the cell's model call fails the cell in one line.
    The cell runs in this process (the limit lowered), its server stopped as it logs its items (its `info` call
    answered, its model call next)."""
    victim = bbq_cells(reference_run, "tiny-1")[0]
    workdir = finished_copy(reference_run, tmp_path / "run", [victim])
    results = workdir / "results"
    monkeypatch.chdir(workdir)
    monkeypatch.setattr(server, "STOPPED_LIMIT", 2)
    settings = load_settings(workdir / "config.yaml")
    for backend in server.connect(settings, settings.model("tiny-1"), Path("config.yaml"), 120).values():
        backend.close()
    first = psutil.Process(server_pid(results, "tiny-1"))
    first.suspend()  # SIGSTOP
    stopped = [(first, time.monotonic())]

    def stop_the_new_server(record: logging.LogRecord) -> bool:
        if " items, " in record.getMessage():
            stopped.append((psutil.Process(server_pid(results, "tiny-1")), time.monotonic()))
            stopped[-1][0].suspend()
        return True

    caplog.set_level(logging.INFO, logger="safetyrepro")
    logging.getLogger("safetyrepro").addFilter(stop_the_new_server)
    model, benchmark, config_id = victim.split("/")
    cell = ["--configfile", "config.yaml", "--model", model, "--benchmark", benchmark, "--config-id", config_id]
    outputs = ["--items", f"results/cells/{victim}.parquet", "--summary", f"results/cells/{victim}.json"]
    try:
        status = main(["run-cell", *cell, *outputs])
    finally:
        logging.getLogger("safetyrepro").removeFilter(stop_the_new_server)
        for left in psutil.wait_procs([process for process, _ in stopped], timeout=10)[1]:
            left.kill()  # a server still stopped (before the fix: waited on for ever) goes with the test
    assert len(stopped) == 2, "the cell had no answer to its `info` call: no server replaced the stopped one"
    (_, _), (second, since) = stopped
    assert status == 2 and time.monotonic() - since < 2 + 5
    assert capsys.readouterr().err == (
        f"safetyrepro: error: cell {victim} failed: ModelServerHung: the model server for 'tiny-1' (log: "
        f"results/logs/servers/tiny-1.log) was stopped (process {second.pid} in state T, by SIGSTOP or SIGTSTP) "
        "and did not answer for 2 s, so it was killed; run the workflow again to resume: finished cells are kept "
        "and a new server starts\n"
    )
    assert first.pid != second.pid and not first.is_running() and not second.is_running()  # both killed
    rerun_gives_reference_tables(workdir, reference_run, [victim])
