"""A benchmark and a scorer added as a package of its own (tests/plugins/toybench), with no edit of src/:
installed beside the project, fetched and run through a tiny grid by the user's commands, the scorer labelling
the free-form replies again as a value of a scorer axis."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers.session import REPO
from helpers.tiny_model import tiny_model_entries
from helpers.workflow import TEST_CONFIGS, effective_config, snakemake, write_config

from safetyrepro.benchmarks import BENCHMARKS

pytestmark = pytest.mark.e2e
PLUGIN = REPO / "tests" / "plugins" / "toybench"
BIN = Path(sys.executable).parent
KEYWORD = "T1-greedy-0shot-freeform-scorer=keyword"  # the plugin scorer's config: it relabels the first one's replies
CONFIGS = effective_config(TEST_CONFIGS / "toybench.yaml")["select_configs"]


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
        envelope = TEST_CONFIGS / "envelopes" / "toybench_scorer.yaml"
        write_config(root / "run", root / "data", models, base="toybench.yaml", envelope=envelope)
        # the grid, its verdicts and the scorers analysis, not the report
        targets = ("results/cells.parquet", "results/rho_flip.parquet", "results/analysis/scorers.parquet")
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


def test_the_plugin_scorer_relabels_the_replies_and_is_compared(toy_run):
    """The keyword scorer's cells are rescored: the replies of their generation twin, labelled by the plugin's
    class; the scorers analysis compares its labels with the rules' on those replies."""
    sys.path.insert(0, str(toy_run / "site"))
    try:
        from safetyrepro_toybench.keyword import Keyword
    finally:
        sys.path.remove(str(toy_run / "site"))
    results = toy_run / "run" / "results"
    items = pd.read_parquet(results / "items.parquet")
    rescored = items[items["config_id"] == KEYWORD].sort_values(["model", "item_id", "seed"], ignore_index=True)
    twin = items[items["config_id"] == CONFIGS[0]].sort_values(["model", "item_id", "seed"], ignore_index=True)
    assert len(rescored) == len(twin) == 12 and rescored["response"].tolist() == twin["response"].tolist()
    assert rescored["label"].tolist() == Keyword().label(None, rescored["response"].tolist(), [], {})
    for model in ("tiny-0", "tiny-1"):  # made by rescore_cell jobs, which read the twin's rows (their record says)
        record = json.loads((results / "jobs" / "cells" / model / "toybench" / f"{KEYWORD}.parquet.json").read_text())
        assert f"cells/{model}/toybench/{CONFIGS[0]}.parquet" in record["inputs"]
    scorers = pd.read_parquet(results / "analysis" / "scorers.parquet")
    agreement = scorers[scorers["table"] == "agreement"]
    assert len(agreement) == 1 and agreement["benchmark"].iloc[0] == "toybench"
    both = rescored["label"] == twin["label"]
    assert agreement["agreement"].iloc[0] == pytest.approx(both.mean())
