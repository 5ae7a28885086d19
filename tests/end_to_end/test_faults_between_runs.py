"""Machine faults between two runs of the tiny workflow: a model's weights replaced after some of its cells ran,
Snakemake's `.snakemake/` folder damaged, the clock moved back. Each starts from a copy of the reference run's
finished cells (tests/end_to_end/test_faults_cells.py, `finished_copy`); the rerun keeps what is current, redoes what is
not, and gives the reference run's tables (tests/conftest.py). `.snakemake/` deleted outright is
tests/end_to_end/test_workflow.py's `stripped` case: the same config plans nothing, a changed one what the intact run plans."""

from __future__ import annotations

import base64
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from helpers.faults import (
    CELL,
    RUN,
    UNTIL_TABLES,
    assert_reference_tables,
    finished_copy,
    flip_a_byte,
    rerun_gives_reference_tables,
)
from helpers.workflow import effective_config, planned_jobs, snakemake

pytestmark = pytest.mark.e2e
HOUR = 3600 * 10**9  # ns


def test_weights_replaced_after_some_cells_redo_that_models_cells(tmp_path, reference_run):
    """tiny-1's folder first holds tiny-0's weights, and one cell runs on them; then its weights are replaced by
    tiny-1's own (the same config and tokenizer files). The rerun describes the model anew and redoes that cell
    with the rest of the model's: no table mixes the two weights."""
    config = effective_config(reference_run / "config.yaml")
    tiny_1 = [f"tiny-1/{benchmark}/{c}" for benchmark in config["benchmarks"] for c in config["select_configs"]]
    workdir = finished_copy(reference_run, tmp_path / "run", tiny_1)
    paths = {model["name"]: Path(model["path"]) for model in config["models"]}
    folder = shutil.copytree(paths["tiny-0"], tmp_path / "tiny 1 weights")
    config["models"][1]["path"] = str(folder)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    stale = tiny_1[0]
    first = snakemake(workdir, "--cores", "2", f"results/cells/{stale}.parquet", "--resources", "gpu=1")
    assert first.returncode == 0, first.stderr[-3000:]

    shutil.copy(paths["tiny-1"] / "model.safetensors", folder / "model.safetensors")
    said = rerun_gives_reference_tables(workdir, reference_run, redone=[stale])
    assert (
        f"safetyrepro: redoing results/models/tiny-1.json: the files of {folder} changed since it was written "
        "(model.safetensors)"
    ) in said.splitlines()


def test_snakemake_folder_damaged_then_rerun(tmp_path, reference_run):
    """Between two runs, Snakemake's record of a finished cell's output turns to damaged bytes (no UTF-8 text:
    Snakemake stopped on it with a traceback) and the effective config the jobs read is cut short (its `subset`
    gone: a cell run on it took other items); one cell is left to compute. The rerun says which record it
    removed, keeps that cell (its record in the results vouches for it), writes the config anew and gives the
    reference run's tables."""
    victim = "tiny-1/bbq/T1-greedy-0shot-freeform"
    workdir = finished_copy(reference_run, tmp_path / "run", [victim])
    shutil.copytree(reference_run / ".snakemake" / "safetyrepro", workdir / ".snakemake" / "safetyrepro")
    shutil.copytree(reference_run / ".snakemake" / "incomplete", workdir / ".snakemake" / "incomplete")
    (run_config,) = (workdir / ".snakemake" / "safetyrepro").glob("run-config-*.yaml")
    text = run_config.read_text()
    run_config.write_text(text[: text.index("subset:")])
    damaged = "results/cells/tiny-0/bbq/T1-greedy-0shot-freeform.parquet"
    record = Path(".snakemake/metadata") / base64.urlsafe_b64encode(damaged.encode()).decode()
    (workdir / record).write_bytes(b"\x00\xff damaged")

    said = rerun_gives_reference_tables(workdir, reference_run, [victim])
    assert (
        f"safetyrepro: removed Snakemake's damaged record of {damaged} ({record}); the record its job wrote in the "
        "results judges it"
    ) in said.splitlines()
    assert run_config.read_text() == text


def test_clock_moved_back_an_hour_then_rerun(tmp_path, reference_run):
    """The clock moved back an hour since the run: every file it wrote (results, Snakemake's records, the
    markers) is an hour ahead of it. A test cannot move the clock: setting every time an hour ahead (os.utime) is
    the equivalent. One cell's file is damaged as bit rot leaves it, its time kept. The rerun sets the times to
    now (Snakemake failed every job that read a file ahead of the clock), redoes the damaged cell alone (its
    record says it is not the file written) and what is built from it, and gives the reference run's tables; a
    dry run after it plans nothing."""
    workdir = finished_copy(reference_run, tmp_path / "run")
    for path in [*(workdir / "results").rglob("*"), *(workdir / ".snakemake").rglob("*")]:
        status = path.lstat()
        os.utime(path, ns=(status.st_atime_ns + HOUR, status.st_mtime_ns + HOUR), follow_symlinks=False)
    damaged, status = workdir / f"{CELL}.parquet", (workdir / f"{CELL}.parquet").stat()
    flip_a_byte(damaged)
    os.utime(damaged, ns=(status.st_atime_ns, status.st_mtime_ns))
    cells = {path: path.stat().st_ino for path in (workdir / "results" / "cells").rglob("*.*")}

    rerun = snakemake(workdir, *RUN, *UNTIL_TABLES)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert re.search(
        r"^safetyrepro: \d+ files of results, \.snakemake/\S+ had times up to \d+ (?:min|s) ahead of this machine's clock "
        r"\(it was moved back since they were written\): set to now; what they hold is checked by their records$",
        rerun.stderr,
        re.MULTILINE,
    ), rerun.stderr[-3000:]
    assert f"safetyrepro: redoing {CELL}.parquet: {CELL}.parquet is not the file its record names" in rerun.stderr
    rewritten = {path for path, inode in cells.items() if path.stat().st_ino != inode}  # kept: the same file
    assert rewritten == {damaged, damaged.with_suffix(".json")}
    assert_reference_tables(workdir / "results", reference_run)
    again = snakemake(workdir, *RUN, *UNTIL_TABLES, "-n")
    assert again.returncode == 0 and planned_jobs(again) == {}, again.stdout[-3000:]
