"""The `safetyrepro audit` of docs/audit.md from the root of a user's clone: the cells it runs are ordinary cells,
which a full run reuses."""

from __future__ import annotations

import json

import pytest
from helpers.tiny_model import build_tiny_model
from helpers.user_clone import VENV_BIN, run
from helpers.workflow import effective_config, planned_jobs, write_config


@pytest.mark.e2e
def test_the_readme_audit_runs_ordinary_cells_that_a_full_run_reuses(clone, tmp_path, data_dir):
    models = [
        {
            "name": f"tiny-{i}",
            "path": str(build_tiny_model(tmp_path / f"tiny-{i}", seed=i, init_std=1.0)),
            "precision": "fp32",
        }
        for i in range(2)
    ]
    configs = effective_config(write_config(clone, data_dir, models, base="readme_audit.yaml"))["select_configs"]
    command = [
        "safetyrepro",
        "audit",
        "--configfile",
        "config.yaml",
        "--pair",
        "tiny-0",
        "tiny-1",
        "--benchmark",
        "bbq",
    ]
    done = run(clone, *command, "--budget", "4", "--cores", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((clone / "results" / "audit" / "bbq" / "tiny-0_vs_tiny-1.json").read_text())
    assert done.stdout.startswith("# Audit: tiny-0 vs tiny-1 on bbq")
    ran = [r["config_id"] for r in result["runs"]]
    assert result["cells_run"] == 2 * len(ran) <= 4 and result["cells_envelope"] == 2 * len(configs)
    cells = sorted(
        p.relative_to(clone / "results" / "cells").as_posix() for p in (clone / "results" / "cells").rglob("*.parquet")
    )
    assert cells == sorted(f"{m}/bbq/{c}.parquet" for m in ("tiny-0", "tiny-1") for c in ran)
    for row in result["runs"]:
        summary = json.loads((clone / "results" / "cells" / "tiny-0" / "bbq" / f"{row['config_id']}.json").read_text())
        assert summary["score"] == row["score_a"]
    # the same audit again runs nothing; a full run plans only the cells the audit did not run
    again = run(clone, *command, "--budget", "4", "--cores", "2")
    assert again.returncode == 0 and "Nothing to be done" in again.stderr, again.stderr[-2000:]
    plan = run(clone, str(VENV_BIN / "snakemake"), "--configfile", "config.yaml", "-n", "results/cells.parquet")
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert planned_jobs(plan)["cell"] == 2 * (len(configs) - len(ran)) > 0
