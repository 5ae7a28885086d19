"""A budgeted run (config section `estimate`, docs/estimation.md) from the root of a user's clone: it runs only the
cells its rounds choose, says so on the first screen of every result, is done when run again, and a raised budget
runs only the cells it adds."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess

import pandas as pd
import pytest
import yaml
from helpers.faults import cell_outputs, cells_in_progress, wait_for
from helpers.tiny_model import build_tiny_model
from helpers.user_clone import VENV_BIN, run, user_env
from helpers.workflow import write_config


def cell_files(clone) -> dict[str, bytes]:
    """Every cell summary of the run, by its path in results/cells: its bytes."""
    folder = clone / "results" / "cells"
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*.json"))}


@pytest.mark.e2e
def test_a_budgeted_run_runs_its_rounds_cells_and_a_raised_budget_reuses_them(clone, tmp_path, data_dir):
    models = [
        {"name": f"tiny-{i}", "path": str(build_tiny_model(tmp_path / f"tiny-{i}", seed=i)), "precision": "fp32"}
        for i in range(2)
    ]
    config = write_config(clone, data_dir, models, base="budget.yaml")
    snakemake = [str(VENV_BIN / "snakemake"), "--cores", "2", "--configfile", "config.yaml"]
    results = clone / "results"
    # stopped as Slurm stops a run (SIGTERM) with round 0's cells half run, then run again: it goes on from there
    with (tmp_path / "stopped.txt").open("w") as sink:
        stopped = subprocess.Popen(
            snakemake, cwd=clone, env=user_env(), stderr=sink, stdout=subprocess.DEVNULL, start_new_session=True
        )
    try:
        wait_for(lambda: len(cell_outputs(results)) >= 2 and cells_in_progress(results), stopped, "two cells done")
        stopped.send_signal(signal.SIGTERM)
        assert stopped.wait(timeout=180) != 0
    finally:
        if stopped.poll() is None:
            os.killpg(stopped.pid, signal.SIGKILL)
    assert "safetyrepro: error: stopped by SIGTERM" in (tmp_path / "stopped.txt").read_text()
    assert not (results / "estimate" / "bbq" / "round-1.json").exists()
    done = run(clone, *snakemake)  # every target, as `make run` asks
    assert done.returncode == 0, done.stderr[-3000:]
    assert "budget (budget_cells: 12): at most 12 of the grid's 96 cells" in done.stderr
    first = cell_files(clone)
    rounds = [json.loads((results / "estimate" / "bbq" / f"round-{n}.json").read_text()) for n in range(3)]
    chosen = [c for r in rounds for c in r["decision"]["configs"]]
    assert [len(r["decision"]["configs"]) for r in rounds] == [4, 2, 0]  # every axis value, then a round of 2
    assert rounds[-1]["decision"]["stopped"] == "budget"
    assert sorted(first) == sorted(f"{m['name']}/bbq/{c}.json" for m in models for c in chosen)
    summary = (results / "summary.md").read_text()
    assert summary.startswith("## Estimated from 12 of 96 cells (estimate: budget_cells: 12)\n")
    assert "### bbq: 6 of 48 configs, 2 round(s); stopped: the budget is spent" in summary
    estimate = (results / "estimate.md").read_text()
    assert "Estimated from 6 of 48 configs." in estimate
    assert "| tiny-0 | tiny-1 | template | 4 |" in estimate  # a new template, from the four the rounds ran
    assert re.search(
        r"^\| tiny-0 \| tiny-1 \| 6 \|.*\| (settled|\d+ more|not even by every config) \|$", estimate, re.M
    )
    components = pd.read_parquet(results / "estimate" / "variance.parquet")
    assert set(components["of"]) == {"tiny-0", "tiny-1", "tiny-0 - tiny-1"}
    assert "| tiny-0 - tiny-1 | 6 |" in estimate  # what moves the verdict's difference, axis by axis
    assert "Estimated from 12 of 96 cells" in (results / "headline.html").read_text()
    assert json.loads((results / "grid_card.json").read_text())["budget"]["cells_run"] == 12
    assert (results / "rho_flip.md").read_text().startswith("> **Estimated from 12 of 96 cells")
    assert (results / "figures" / "rho_estimate_bbq.png").stat().st_size > 10_000  # the report's figure of it

    again = run(clone, *snakemake)
    assert again.returncode == 0 and "Nothing to be done" in again.stderr, again.stderr[-2000:]

    raised = yaml.safe_load(config.read_text()) | {"estimate": {"budget_cells": 16, "round_configs": 2}}
    config.write_text(yaml.safe_dump(raised))
    more = run(clone, str(VENV_BIN / "snakemake"), "results/estimate.md", *snakemake[1:])
    assert more.returncode == 0, more.stderr[-3000:]
    after = cell_files(clone)
    assert {path: after[path] for path in first} == first  # every cell already run, reused as it was
    assert len(after) == 16
    assert "Estimated from 8 of 48 configs." in (results / "estimate.md").read_text()
