"""A benchmark added as a package of its own (tests/plugins/toybench), with no edit of src/: installed
beside the project, fetched and run through a tiny grid by the user's commands."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers.session import REPO
from helpers.tiny_model import tiny_model_entries
from helpers.workflow import snakemake, write_config

from safetyrepro.benchmarks import BENCHMARKS

pytestmark = pytest.mark.e2e
PLUGIN = REPO / "tests" / "plugins" / "toybench"
BIN = Path(sys.executable).parent
CONFIGS = ["T1-greedy-0shot-freeform", "T1-greedy-0shot-logprob", "T3-greedy-5shot-logprob"]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("plugin")
    shutil.copytree(PLUGIN, root / "toybench")  # pip may write build files next to the sources: not in the tree
    subprocess.run(
        [
            BIN / "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            root / "site",
            root / "toybench",
        ],
        check=True,
        capture_output=True,
    )
    with pytest.MonkeyPatch.context() as patch:  # the commands below, and the jobs they start, see the plugin
        patch.setenv("PYTHONPATH", str(root / "site"), prepend=os.pathsep)
        fetch = subprocess.run(
            [BIN / "safetyrepro", "fetch-data", "--data-dir", root / "data", "--benchmark", "toybench"],
            capture_output=True,
            text=True,
        )
        assert fetch.returncode == 0, fetch.stderr
        models = tiny_model_entries([root / f"tiny-{i}" for i in range(2)])
        write_config(
            root / "run",
            root / "data",
            models,
            {"toybench": {"n_items": 6}},
            select_configs=CONFIGS,
            max_new_tokens_cap=4,
        )
        targets = ("results/cells.parquet", "results/rho_flip.parquet")  # the grid and its verdicts, not the report
        result = snakemake(root / "run", "--cores", "2", *targets, "--resources", "gpu=1")
    assert result.returncode == 0, result.stderr[-3000:]
    return root


def test_the_plugin_is_not_installed_in_the_project_environment():
    assert "toybench" not in BENCHMARKS  # what the run below finds, it finds through the --target install


def test_fetch_copies_the_pinned_file(toy_run):
    copied = toy_run / "data" / "toybench" / "items.jsonl"
    assert copied.read_bytes() == (PLUGIN / "safetyrepro_toybench" / "items.jsonl").read_bytes()


def test_the_toy_cells_are_in_the_results(toy_run):
    results = toy_run / "run" / "results"
    cells = pd.read_parquet(results / "cells.parquet")
    assert set(cells["benchmark"]) == {"toybench"}
    assert set(zip(cells["model"], cells["config_id"])) == {(f"tiny-{i}", c) for i in range(2) for c in CONFIGS}
    assert (cells["n_items"] == 6).all() and cells["yes_rate"].between(0, 1).all()
    items = pd.concat(pd.read_parquet(path) for path in (results / "cells").glob("*/toybench/*.parquet"))
    assert items["item_id"].str.startswith("toy-").all() and items["label"].isin(["Yes", "No", "unparsed"]).all()
    logprob = items[items["config_id"].str.endswith("logprob")]
    assert logprob["label"].isin(["Yes", "No"]).all() and (logprob["logliks"] != "").all()
    rho = pd.read_parquet(results / "rho_flip.parquet")
    pair = rho[rho["benchmark"] == "toybench"]
    assert len(pair) == 1 and pair["n_configs"].iloc[0] == len(CONFIGS)
    assert pair["n_plus"].iloc[0] + pair["n_minus"].iloc[0] + pair["n_ties"].iloc[0] == len(CONFIGS)
