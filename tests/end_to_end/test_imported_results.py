"""Imported results through the workflow (docs/importing.md): the analysis half on real lm-evaluation-harness and
Inspect AI runs (the shared `harness`, tests/helpers/harness_runs.py) in a user's clone, then the audit on them;
and a table of scores alone, with no item rows, up to its checked headline."""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest
from helpers.harness_runs import TASK
from helpers.user_clone import VENV_BIN, run

from safetyrepro.analysis.flips import rho_flip_table


@pytest.mark.e2e
def test_the_workflow_runs_the_analysis_half_on_imported_results(harness, clone):
    """docs/importing.md: the runs under runs/, then `make run CONFIG=config/imported.yaml`."""
    runs, mappings = harness
    for kind, sources in (("lm_eval", runs.lm_eval_runs), ("inspect", runs.inspect_logs)):
        for source in sources:
            (clone / "runs" / kind).mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, clone / "runs" / kind / source.name)
            else:
                shutil.copy(source, clone / "runs" / kind)
        shutil.copy(mappings[kind], clone / "runs" / f"{kind}_mapping.yaml")
    report = "results/imported/report.html"  # in the config's results_dir, with no REPORT given
    done = run(
        clone,
        "make",
        "run",
        f"VENV={VENV_BIN.parent}",
        "-o",
        f"{VENV_BIN.parent}/.installed-run",
        "CONFIG=config/imported.yaml",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = clone / "results" / "imported"
    cells = pd.read_parquet(results / "cells.parquet")
    assert len(cells) == 12 and not (clone / "results" / "cells").exists()  # no model ran
    rho = pd.read_parquet(results / "rho_flip.parquet")
    assert rho["rho_flip"].item() == pytest.approx(rho_flip_table(cells)["rho_flip"].item())
    card = json.loads((results / "grid_card.json").read_text())
    assert [source["kind"] for source in card["run"]["imports"]] == ["lm_eval", "inspect"]
    assert (
        len(card["data"]) == len(runs.lm_eval_runs) * 2 + len(runs.inspect_logs) + 2
    )  # results, samples, logs, mappings
    for name in ("summary.md", "grid_card.md", f"figures/rho_heatmap_{TASK}.png", "analysis/paired_tests.md"):
        assert (results / name).stat().st_size > 0, name
    assert (clone / report).stat().st_size > 0
    # docs/audit.md, on the imported cells: no model runs
    audit = run(clone, "safetyrepro", "audit", "--configfile", "config/imported.yaml", "--pair", "tiny_a", "tiny_b",
                "--benchmark", TASK, "--budget", "6", "--cores", "2")  # fmt: skip
    assert audit.returncode == 0, audit.stderr[-3000:]
    result = json.loads((results / "audit" / TASK / "tiny_a_vs_tiny_b.json").read_text())
    assert result["cells_envelope"] == len(cells) and 2 <= result["cells_run"] <= 6
    scores = cells.set_index(["model", "config_id"])["score"]
    for row in result["runs"]:
        assert (row["score_a"], row["score_b"]) == (
            scores["tiny_a", row["config_id"]],
            scores["tiny_b", row["config_id"]],
        )
    assert all("p_adjusted" in row for row in result["reversing"])  # lm-eval and Inspect logged the items
    assert not (clone / "results" / "cells").exists()


@pytest.mark.slow
@pytest.mark.e2e
def test_a_table_of_scores_alone_runs_through_the_workflow_to_a_checked_headline(tmp_path):
    """Scores with no item rows: nothing item-level can be computed (the interval over items, N+sig, the
    minimum detectable difference, a parse-clean rho_flip), and the GRID card and the headline check say n/a
    there rather than stop; rho_flip itself is the table's."""
    from helpers.workflow import TEST_CONFIGS, snakemake

    scores = {(model, k): round(((k + 1) * (3 + 2 * m)) % 7 / 7, 3) for m, model in enumerate("abc") for k in range(6)}
    rows = "".join(f"{model},bench,cfg{k},{score}\n" for (model, k), score in scores.items())
    (tmp_path / "scores.csv").write_text("model,benchmark,config_id,score\n" + rows)
    config = TEST_CONFIGS / "scores_table_import.yaml"  # scores.csv relative to the run's folder
    done = snakemake(tmp_path, "--cores", "2", "results/headline_check.txt", configfile=config)
    assert done.returncode == 0, done.stderr[-3000:]
    results = tmp_path / "results"
    assert (results / "headline_check.txt").read_text().endswith("matches its tables\n")
    card = (results / "grid_card.md").read_text()
    rho = rho_flip_table(pd.read_parquet(results / "cells.parquet")).set_index(["model_a", "model_b"])["rho_flip"]
    for (model_a, model_b), value in rho.items():
        assert re.search(
            rf"\| {model_a} \| {model_b} \| .* \| {value:.3f} \| .* \| \[n/a, n/a\] \| n/a / n/a \| n/a \|", card
        )
    assert "differences under" not in card  # no minimum detectable difference without items
