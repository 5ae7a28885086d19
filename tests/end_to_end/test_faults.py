"""Fault injection on the tiny workflow: SIGKILL in the middle of a cell, and a model that raises; the
undisturbed run to compare with is the session's reference run (tests/conftest.py)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers.faults import RUN, cell_outputs, cells_in_progress, start, tables
from helpers.tiny_model import build_tiny_model
from helpers.workflow import REFERENCE_TARGETS, snakemake, write_config

from safetyrepro.analysis.suite import ANALYSES
from safetyrepro.results.provenance import compare_records
from safetyrepro.results.storage import read_missing_cells

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent


def recorded_by_snakemake(workdir: Path, relative: str) -> bool:
    """Whether Snakemake recorded the job of an output as finished (its metadata record is written when the job
    ends; a job killed after writing its files but before that counts as incomplete and reruns)."""
    key = base64.b64encode(f"results/{relative}".encode()).decode()
    return (workdir / ".snakemake" / "metadata" / key).is_file()


@pytest.fixture(scope="module")
def models(reference_run) -> list[dict]:
    """The reference run's two tiny models (folder names with spaces, quotes and shell syntax)."""
    return yaml.safe_load((reference_run / "config.yaml").read_text())["models"]


def test_sigkill_mid_cell_then_rerun_gives_identical_tables(tmp_path, reference_run):
    (tmp_path / "killed").mkdir()
    shutil.copy(reference_run / "config.yaml", tmp_path / "killed" / "config.yaml")  # the reference run's config
    results = tmp_path / "killed" / "results"
    process = start(tmp_path / "killed", tmp_path / "stderr.txt", *RUN)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None:
        if len(cell_outputs(results)) >= 2 and cells_in_progress(results):
            break
        time.sleep(0.1)
    assert process.poll() is None, "the workflow ended before a cell could be interrupted"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    finished = {k: v for k, v in cell_outputs(results).items() if recorded_by_snakemake(tmp_path / "killed", k)}
    interrupted = cells_in_progress(results)
    assert finished and interrupted and not (results / "cells.parquet").exists()
    for path in (results / "cells").rglob("*.parquet"):  # whatever was written is whole
        pd.read_parquet(path)

    assert snakemake(tmp_path / "killed", "--unlock").returncode == 0
    rerun = snakemake(
        tmp_path / "killed", "--cores", "2", *REFERENCE_TARGETS, "--resources", "gpu=1", "--rerun-incomplete"
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = cell_outputs(results)
    assert {k: after[k] for k in finished} == finished  # finished cells were kept, not recomputed
    assert len(after) == 2 * 2 * 3

    expected = tables(reference_run / "results")
    got = tables(results)
    assert set(got) == set(expected) and {"cells.parquet", "items.parquet", "rho_flip.parquet"} <= set(got)
    for name, frame in expected.items():
        pd.testing.assert_frame_equal(got[name], frame, check_exact=True, obj=name)
    assert not list(tmp_path.rglob("PWNED*")) and not list(reference_run.parent.rglob("PWNED*"))
    same_record_and_card(reference_run / "results", results)


def same_record_and_card(expected: Path, got: Path) -> None:
    """A second run of a config gives the same run record and GRID card (its creation time aside), and
    `safetyrepro provenance-diff` says so with exit status 0."""
    for name in ("grid_card.json", "provenance.json"):
        assert compare_records(*(json.loads((run / name).read_text()) for run in (expected, got))) == [], name
    cards = [
        [line for line in (run / "grid_card.md").read_text().splitlines() if not line.startswith("- created:")]
        for run in (expected, got)
    ]
    assert cards[0] == cards[1]
    diff = subprocess.run(
        [str(BIN / "safetyrepro"), "provenance-diff", str(expected / "grid_card.json"), str(got / "grid_card.json")],
        capture_output=True,
        text=True,
    )
    assert diff.returncode == 0 and "no difference" in diff.stdout, diff.stdout + diff.stderr


def test_failing_cell_keep_going_then_partial_results(tmp_path, data_dir, models):
    broken = {
        "name": "broken",
        "path": str(build_tiny_model(tmp_path / "broken", seed=7, model_vocab=8)),
        "precision": "fp32",
    }
    workdir = tmp_path / "run"
    write_config(workdir, data_dir, [*models, broken], base="failing_cell.yaml")
    failed = snakemake(workdir, *RUN, "--keep-going")
    assert failed.returncode != 0
    results = workdir / "results"
    assert len(cell_outputs(results)) == 4 and not (results / "cells.parquet").exists()
    missing = ["broken/xstest/T1-greedy-0shot-freeform", "broken/xstest/T1-greedy-0shot-logprob"]
    for cell in missing:
        log = (results / "logs" / "cells" / cell).with_suffix(".log").read_text()
        assert log.strip().splitlines()[-1] == (
            f"safetyrepro: error: cell {cell} failed: RuntimeError: model server: IndexError: index out of range in self"
        )

    refused = subprocess.run(
        [
            str(BIN / "safetyrepro"),
            "aggregate",
            "--configfile",
            str(workdir / "config.yaml"),
            "--summaries",
            *map(str, (results / "cells").rglob("*.json")),
            "--cells-out",
            str(tmp_path / "c.parquet"),
            "--items-out",
            str(tmp_path / "i.parquet"),
        ],
        capture_output=True,
        text=True,
        cwd=workdir,
    )
    assert refused.returncode == 2 and refused.stderr == (
        f"safetyrepro: error: incomplete grid: 2 of 6 cells have no output ({', '.join(missing)}); rerun them, or "
        "set partial_results: true to analyse the finished cells\n"
    )
    assert not (tmp_path / "c.parquet").exists()

    partial = snakemake(workdir, *RUN, "--config", "partial_results=True")
    assert partial.returncode == 0, partial.stderr[-3000:]
    parquet = [p for p in results.rglob("*.parquet") if "cells" not in p.relative_to(results).parts[:1]]
    probe = results / "precision_probe.parquet"  # no probe in this run: its table lists no missing cell
    assert len(parquet) == 4 + len(ANALYSES) and probe in parquet  # cells, items, probe, rho_flip and the analyses
    assert read_missing_cells(probe) == [] and all(read_missing_cells(p) == missing for p in parquet if p != probe)
    markdown = [results / "rho_flip.md", results / "summary.md", *(results / "analysis").glob("*.md")]
    assert len(markdown) == 2 + len(ANALYSES)
    for path in markdown:
        text = path.read_text()
        assert text.startswith("> **Partial results**: computed without 2 missing cell(s)")
        assert all(f"> - {cell}\n" in text for cell in missing)
    assert set(pd.read_parquet(results / "cells.parquet").model) == {"tiny-0", "tiny-1"}
