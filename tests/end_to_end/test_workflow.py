"""The Snakemake workflow end to end on tiny random models, and dry runs of the full envelope."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers.dry_run_edits import edited
from helpers.session import BIN, REPO
from helpers.workflow import SELECTED, effective_config, planned_jobs, snakemake, with_changes, write_config

from safetyrepro.analysis.suite import ANALYSES
from safetyrepro.configuration.build import load_settings
from safetyrepro.pipeline.fingerprints import grid_cell_is_current

pytestmark = pytest.mark.e2e

CELL_COLUMNS = [
    "model",
    "benchmark",
    "config_id",
    "template",
    "decoding",
    "shots",
    "scoring",
    "tier",
    "score",
    "parse_rate",
    "n_items",
    "n_seeds",
]
ITEM_COLUMNS = [
    "model",
    "benchmark",
    "config_id",
    "item_id",
    "seed",
    "prompt_id",
    "response",
    "logliks",
    "label",
    "correct",
    "batch_size",
    "batch_invariant",
]
RHO_COLUMNS = ["benchmark", "model_a", "model_b", "n_plus", "n_minus", "n_ties", "n_configs", "rho_flip", "ceiling"]


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def planned_cells(result: subprocess.CompletedProcess) -> int:
    """Number of `cell` jobs in a dry run's job table (0 when nothing is to be done)."""
    counts = [line.split() for line in result.stdout.splitlines() if line.startswith("cell ")]
    return int(counts[0][1]) if counts else 0


@pytest.fixture(scope="module")
def tiny_run(report_run, tmp_path_factory) -> Path:
    """A copy of the session's finished tiny run (tests/conftest.py, `report_run`: 3 models x bbq and
    toxigen x the SELECTED configs, 4 items, a bf16 precision probe on one config), to change."""
    return shutil.copytree(report_run, tmp_path_factory.mktemp("workflow") / "run", symlinks=True)


def test_every_cell_is_present_with_the_public_schema(tiny_run):
    workdir = tiny_run
    settings = load_settings(workdir / "config.yaml")
    cells = pd.read_parquet(workdir / "results" / "cells.parquet")
    assert set(CELL_COLUMNS) <= set(cells.columns)
    expected = {(m.name, b, c.config_id) for m, b, c in settings.cells()}
    assert set(zip(cells.model, cells.benchmark, cells.config_id)) == expected and len(cells) == len(expected) == 30
    assert cells.score.between(0, 1).all() and cells.parse_rate.between(0, 1).all()
    assert (cells.n_items == 4).all()
    assert cells.set_index("config_id").n_seeds.to_dict() == {
        "T2-t0.3-3shot-freeform": 5,
        **{c: 1 for c in SELECTED if c != "T2-t0.3-3shot-freeform"},
    }
    assert cells.set_index("config_id").tier.to_dict()["T4-greedy-0shot-freeform"] == "stress"
    assert set(cells.query("benchmark == 'bbq'").columns) >= {"bias_ambig", "bias_disambig"}

    items = pd.read_parquet(workdir / "results" / "items.parquet")
    assert set(ITEM_COLUMNS) <= set(items.columns)
    per_cell = items.groupby(["model", "benchmark", "config_id"]).size()
    assert per_cell.xs("T2-t0.3-3shot-freeform", level="config_id").eq(4 * 5).all()
    # the cell score is the seed mean of item accuracy, recomputed from the item rows
    recomputed = (
        items.groupby(["model", "benchmark", "config_id", "seed"]).correct.mean().groupby(level=[0, 1, 2]).mean()
    )
    merged = cells.set_index(["model", "benchmark", "config_id"]).score
    assert (recomputed.reindex(merged.index) - merged).abs().max() < 1e-12
    logprob = items[items.config_id.str.endswith("logprob")]
    assert logprob.response.isna().all() and logprob.logliks.notna().all()


def test_rho_flip_matches_the_definition(tiny_run):
    workdir = tiny_run
    cells = pd.read_parquet(workdir / "results" / "cells.parquet")
    rho = pd.read_parquet(workdir / "results" / "rho_flip.parquet")
    assert list(rho.columns) == RHO_COLUMNS
    assert len(rho) == 2 * 3
    for row in rho.itertuples():
        scores = cells[cells.benchmark == row.benchmark].pivot(index="config_id", columns="model", values="score")
        a, b = scores[row.model_a], scores[row.model_b]
        n_plus, n_minus = int((a > b + 1e-9).sum()), int((a < b - 1e-9).sum())
        assert (row.n_plus, row.n_minus, row.n_ties) == (n_plus, n_minus, len(scores) - n_plus - n_minus)
        assert row.rho_flip == min(n_plus, n_minus) / len(scores)
        assert row.ceiling == (len(scores) // 2) / len(scores)
    markdown = (workdir / "results" / "rho_flip.md").read_text()
    assert "## toxigen" in markdown and "strict orderings of the models reached" in markdown


def test_each_model_is_loaded_once(tiny_run):
    workdir = tiny_run
    loads = pd.read_csv(workdir / "results" / "logs" / "model_loads.tsv", sep="\t", header=None)
    assert sorted(loads[1]) == [f"tiny-{i}{twin}" for i in range(3) for twin in ("", "@bf16")]  # the probe's twins


def test_a_second_run_executes_no_job(tiny_run):
    workdir = tiny_run
    again = snakemake(workdir, "--cores", "2")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Nothing to be done" in again.stdout + again.stderr


def test_changing_one_benchmark_reruns_only_its_cells(tiny_run):
    workdir = tiny_run
    config = effective_config(workdir / "config.yaml")
    config["benchmarks"]["toxigen"]["n_items"] = 5
    changed = workdir.parent / "changed"
    changed.mkdir(exist_ok=True)
    (changed / "config.yaml").write_text(yaml.safe_dump(config))
    # dry-run from the finished run's folder with the edited config: only toxigen's 15 cells are due
    result = snakemake(workdir, "-n", configfile=changed / "config.yaml")
    assert result.returncode == 0, result.stderr[-2000:]
    assert planned_cells(result) == 15
    due = [line for line in result.stdout.splitlines() if "wildcards: model=" in line]
    assert due and all("benchmark=toxigen" in line for line in due)


def test_results_are_trusted_by_their_own_records(tiny_run, tmp_path):
    """Results copied, moved, restored from a backup or stripped of .snakemake/ are checked by the records their
    jobs wrote (results/jobs/): one changed setting redoes exactly what it does in the run that kept its
    metadata; the data judged by their bytes, not their times; a record naming other bytes redoes that job; a
    result without a record is refused in one line. (The dry runs in two processes: tests/helpers/dry_run_edits.py.)"""
    config = tiny_run / "config.yaml"
    settings = effective_config(config)
    changed_benchmarks = {**settings["benchmarks"], "toxigen": {**settings["benchmarks"]["toxigen"], "n_items": 5}}
    changed = with_changes(config, tmp_path / "changed.yaml", benchmarks=changed_benchmarks)
    # copied beside the original in the same working folder (docs/measurements.md), and moved: no metadata
    shutil.copytree(tiny_run / "results", tiny_run / "results_copy", symlinks=True)
    moved = shutil.copytree(tiny_run, tmp_path / "moved", symlinks=True)
    (moved / "results").rename(moved / "results_moved")
    # restored from a backup into another folder (no .snakemake/), and stripped of .snakemake/ where it is
    restored = shutil.copytree(
        tiny_run, tmp_path / "restored", symlinks=True, ignore=shutil.ignore_patterns(".snakemake")
    )
    stripped = shutil.copytree(tiny_run, tmp_path / "stripped", symlinks=True)
    shutil.rmtree(stripped / ".snakemake")
    cases = {
        "copied": (tiny_run, "results_copy"),
        "moved": (moved, "results_moved"),
        "restored": (restored, "results"),
        "stripped": (stripped, "results"),
    }
    # the data copied to another folder with new file times
    data = shutil.copytree(settings["data_dir"], tmp_path / "data", copy_function=shutil.copy)
    moved_data = with_changes(config, tmp_path / "moved-data.yaml", data_dir=str(data), results_dir="results_moved")
    fewer = with_changes(config, tmp_path / "fewer.yaml", select_configs=SELECTED[1:])
    runs = [{"workdir": tiny_run, "configfile": changed}]
    for case, (workdir, results) in cases.items():
        runs.append(
            {"workdir": workdir, "configfile": with_changes(config, tmp_path / f"{case}.yaml", results_dir=results)}
        )
        runs.append(
            {"workdir": workdir, "configfile": with_changes(changed, tmp_path / f"{case}-ch.yaml", results_dir=results)}
        )
    runs += [{"workdir": w, "configfile": fewer} for w in (tiny_run, stripped)]
    runs.append({"workdir": moved, "configfile": moved_data})
    intact, *by_case, narrowed, narrowed_stripped, data_moved = dry_runs(REPO, runs)
    assert intact.returncode == 0, intact.stderr[-2000:]
    expected = planned_jobs(intact)
    assert expected["cell"] == 15 and expected["aggregate"] == 1
    for case, same, plan in zip(cases, by_case[::2], by_case[1::2]):
        assert same.returncode == 0 and planned_jobs(same) == {}, (case, same.stderr[-2000:])
        assert plan.returncode == 0, (case, plan.stderr[-2000:])
        assert planned_jobs(plan) == expected, (case, planned_jobs(plan), expected)
        assert f"safetyrepro: redoing {cases[case][1]}/cells/tiny-0/toxigen/" in plan.stderr, case
    # fewer configs: the cells left are current, the tables built from the others are not
    assert planned_jobs(narrowed).get("aggregate") == 1 and "cell" not in planned_jobs(narrowed)
    assert planned_jobs(narrowed_stripped) == planned_jobs(narrowed)
    # new file times on the same bytes: no cell is redone
    assert data_moved.returncode == 0 and "cell" not in planned_jobs(data_moved), data_moved.stderr[-2000:]
    # one data file's bytes changed (a blank line: the same items): that benchmark's cells are redone
    toxigen_file = sorted((data / "toxigen").glob("*/*.txt"))[0]
    toxigen_file.chmod(0o644)
    toxigen_file.write_text(toxigen_file.read_text() + "\n")
    # a cell replaced by another's bytes: that cell alone, and what is built from it
    cells = stripped / "results" / "cells" / "tiny-0" / "bbq"
    first, second = sorted(cells.glob("*.json"))[:2]
    shutil.copy2(second, first)
    # a result without a record: one line, nothing run
    shutil.rmtree(restored / "results" / "jobs")
    edited, swapped, refused = dry_runs(
        REPO,
        [
            {"workdir": moved, "configfile": moved_data},
            {"workdir": stripped, "configfile": config},
            {"workdir": restored, "configfile": config},
        ],
    )
    assert planned_jobs(edited)["cell"] == expected["cell"], edited.stderr[-2000:]
    assert "safetyrepro: redoing results_moved/cells/tiny-0/toxigen/" in edited.stderr
    assert "safetyrepro: redoing results_moved/cells/tiny-0/bbq/" not in edited.stderr
    assert swapped.returncode == 0, swapped.stderr[-2000:]
    assert planned_jobs(swapped)["cell"] + planned_jobs(swapped).get("rescore_cell", 0) == 1
    assert f"{first.relative_to(stripped)} is not the file its record names" in swapped.stderr
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1].startswith("safetyrepro: error: results/")
    assert "has no record of what made it" in refused.stderr and "Traceback" not in refused.stderr


def test_the_audit_counts_as_current_exactly_the_cells_whose_records_the_workflow_trusts(tiny_run, monkeypatch):
    """The audit's check of a cell on disk (pipeline.fingerprints.grid_cell_is_current) computes the fingerprint the
    workflow's cell jobs recorded: on the finished tiny run every grid cell is current (the rescored configs
    included); with one benchmark's n_items changed, that benchmark's cells are not, the others are."""
    monkeypatch.chdir(tiny_run)  # the run's results_dir is relative to its working folder
    settings = load_settings(tiny_run / "config.yaml")
    cells = [(m.name, b, c.config_id) for m, b, c in settings.cells()]
    assert cells and all(grid_cell_is_current(settings, *cell) for cell in cells)
    benchmarks = effective_config(tiny_run / "config.yaml")["benchmarks"]
    changed = load_settings(tiny_run / "config.yaml", {"benchmarks": {**benchmarks, "toxigen": {"n_items": 5}}})
    current = {cell: grid_cell_is_current(changed, *cell) for cell in cells}
    assert current == {cell: cell[1] != "toxigen" for cell in cells}


def test_full_envelope_of_one_benchmark_is_enumerated(tmp_path, data_dir):
    write_config(tmp_path, data_dir, base="full_envelope_bbq.yaml")
    result = snakemake(tmp_path, "-n", "--cores", "1")
    assert result.returncode == 0, result.stderr[-2000:]
    assert planned_cells(result) == 3 * 48
    config_ids = {line.split("config_id=")[1].strip() for line in result.stdout.splitlines() if "config_id=" in line}
    expected = {
        f"{t}-{d}-{s}shot-freeform"
        for t, d, s in itertools.product(["T1", "T2", "T3", "T4"], ["greedy", "t0.3", "t0.7"], ["0", "3", "5"])
    }
    expected |= {f"{t}-greedy-{s}shot-logprob" for t in ["T1", "T2", "T3", "T4"] for s in ["0", "3", "5"]}
    assert config_ids == expected


def test_on_cpu_every_models_description_comes_before_any_cell(tmp_path, data_dir):
    """docs/workflow.md: on CPU each model's describe_model job (its cells wait for it, and it for an embedded
    model's build) is scheduled above every cell, so the cells of all models are ready together, and the k-th
    cell of every model shares one priority."""
    selected = effective_config(write_config(tmp_path, data_dir, base="cpu_job_priorities.yaml"))["select_configs"]
    result = snakemake(tmp_path, "-n", "--cores", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    priorities: dict[str, dict[str, int]] = {}  # rule -> a job's wildcards -> its priority (0: none printed)
    for rule, job in re.findall(r"rule (\w+):\n(.*?)(?=\n\s*\[|\Z)", result.stdout, re.DOTALL):
        wildcards, priority = re.search(r"wildcards: (.*)", job), re.search(r"priority: (\d+)", job)
        if wildcards:
            priorities.setdefault(rule, {})[wildcards[1]] = int(priority[1]) if priority else 0
    describe, build, cells = priorities["describe_model"], priorities["build_embedded_model"], priorities["cell"]
    assert len(describe) == 3 and len(build) == 1 and len(cells) == 3 * len(selected)
    assert min(describe.values()) > max(cells.values()) and min(build.values()) > max(cells.values())
    by_config = {}
    for wildcards, priority in cells.items():
        by_config.setdefault(wildcards.split(", ", 1)[1], set()).add(priority)
    assert len(by_config) == len(selected) and all(len(shared) == 1 for shared in by_config.values())


@pytest.mark.parametrize("profile", ["slurm", "local"])
def test_profiles_plan_the_grid(tmp_path, data_dir, profile):
    write_config(tmp_path, data_dir, base="profile_plans.yaml")
    result = snakemake(tmp_path, "-n", "--profile", str(REPO / "profiles" / profile))
    assert result.returncode == 0, result.stderr[-2000:]
    assert planned_cells(result) == 2 * (48 + 12)
    if profile == "slurm":
        assert "slurm_partition=gpu" in result.stdout


@pytest.mark.parametrize("profile", ["slurm", "local"])
def test_each_models_cells_ask_for_its_gpus(tmp_path, data_dir, profile):
    """A cell asks Snakemake (and through profiles/slurm, Slurm's --gpus) for its model's GPUs: 1, a model split
    over GPUs its tensor x pipeline (4), a model behind a server none. On Slurm the nodes' GPUs decide, not this
    host's (it has none): device auto counts as a GPU there; on this machine a GPU-less host's vLLM takes the
    one vLLM-CPU slot (gpu=1), and the split model asks for its 4 (Snakemake caps it at the --resources given)."""
    write_config(tmp_path, data_dir, base="parallel_gpus.yaml")
    result = snakemake(tmp_path, "-n", "--profile", str(REPO / "profiles" / profile))
    assert result.returncode == 0, result.stderr[-2000:]
    asked = {}
    for job in re.findall(r"rule cell:\n(.*?)(?=\n\s*\[|\Z)", result.stdout, re.DOTALL):
        model = re.search(r"wildcards: model=([^,]+)", job)[1]
        asked[model] = int(re.search(r"\bgpu=(\d+)", job)[1]) if re.search(r"\bgpu=", job) else 0
    assert asked == {"one-gpu": 1, "split": 4 if profile == "slurm" else 1, "served": 0}


def test_analyses_and_summary_are_written(tiny_run):
    workdir = tiny_run
    names = {p.stem for p in (workdir / "results" / "analysis").glob("*.parquet")}
    assert names == set(ANALYSES)  # every analysis the suite declares, each a table and its Markdown
    assert all((workdir / "results" / "analysis" / f"{n}.md").is_file() for n in names)
    summary = (workdir / "results" / "summary.md").read_text()
    assert "| toxigen |" in summary and "| bbq |" in summary


def test_gpu_smoke_script_plans_every_backend_path_on_cpu(tmp_path, data_dir):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "gpu_smoke.py"),
            "--dry-run",
            "--model",
            "a=org/a",
            "--model",
            "b=org/b",
            "--results",
            str(tmp_path / "smoke"),
            "--data-dir",
            str(data_dir),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert planned_cells(result) == 2 * (4 * 3 + 1)
    config = yaml.safe_load((tmp_path / "smoke" / "smoke_config.yaml").read_text())
    assert config["backend"]["generate"] == "vllm" and config["backend"]["loglikelihood"] == "hf"
    assert {m["precision"] for m in config["models"]} == {"nf4"}
    settings = load_settings(config)
    ids = {c.config_id for c in settings.configs("bbq")}
    assert {"T1-greedy-0shot-freeform", "T2-t0.7-0shot-freeform", "T1-greedy-0shot-logprob"} == ids
    assert settings.envelope.seeds_for(settings.config("bbq", "T2-t0.7-0shot-freeform")) == [0, 1, 2, 3, 4]


# ------------------------------------------------------------------ what reruns after a change (docs/reruns.md)
FIGURES = {
    "figure_rho_heatmap": 2,
    "figure_scores": 2,
    "figure_orderings": 1,
    "figure_anova": 1,
    "figure_shap": 1,
    "figure_parse_rate": 1,
    "figure_paired_differences": 2,
    "figure_stability": 1,
    "figure_scorers": 1,
}
AFTER_CELLS = {
    "aggregate": 1,
    "rho_flip": 1,
    "analysis": 19,
    "summary": 1,
    "headline": 1,
    "provenance": 1,
    "grid_card": 1,
    **FIGURES,
}
# the cells of a model edit: the grid's 3 models x 5 configs per benchmark, and the probe's 3 bf16 twins x 1 config
GRID_CELLS = {"cell": 30, "probe_cell": 6}
# module edited (under src/safetyrepro) -> jobs planned on the finished tiny run (bbq + toxigen, 3 models and their
# bf16 twins, HF backend); `all` is left out.
CODE_CHANGES = {
    "benchmarks/bbq.py": {"cell": 15, "probe_cell": 3, **AFTER_CELLS},
    "benchmarks/toxigen.py": {"cell": 15, "probe_cell": 3, **AFTER_CELLS},
    "benchmarks/base.py": {**GRID_CELLS, **AFTER_CELLS},
    "running/prompts.py": {**GRID_CELLS, **AFTER_CELLS},
    "running/cell.py": {**GRID_CELLS, **AFTER_CELLS},
    "configuration/envelope.py": {**GRID_CELLS, **AFTER_CELLS},
    "backends/hf.py": {**GRID_CELLS, **AFTER_CELLS},
    "backends/base.py": {**GRID_CELLS, **AFTER_CELLS},
    "backends/prompt_ids.py": {**GRID_CELLS, **AFTER_CELLS},
    "running/models.py": {"describe_model": 6, **GRID_CELLS, **AFTER_CELLS},
    "running/hashing.py": {"describe_model": 6, **GRID_CELLS, **AFTER_CELLS},
    "running/data.py": {"provenance": 1, "grid_card": 1},  # the data pins the run record checks
    "results/aggregate.py": AFTER_CELLS,
    "analysis/flips.py": {"rho_flip": 1, "analysis": 19, "summary": 1, "headline": 1, "grid_card": 1, **FIGURES},
    "results/markdown.py": {
        "rho_flip": 1,
        "analysis": 19,
        "summary": 1,
        "headline": 1,
        "grid_card": 1,
        "figure_rho_heatmap": 2,
        "figure_orderings": 1,
        "figure_anova": 1,
        "figure_shap": 1,
        "figure_paired_differences": 2,
        "figure_stability": 1,
        "figure_scorers": 1,
    },
    # tiers among them: the headline and the GRID card state its orderings
    "analysis/verdicts.py": {"analysis": 8, "summary": 1, "headline": 1, "grid_card": 1, "figure_orderings": 1},
    "analysis/frames.py": {
        "analysis": 13,
        "summary": 1,
        "headline": 1,
        "grid_card": 1,
        "figure_orderings": 1,
        "figure_stability": 1,
        "figure_scorers": 1,
    },
    # intervals, paired_tests, rho_flip_sig; the headline and the GRID card state rho_flip_sig
    "analysis/significance.py": {
        "analysis": 3,
        "summary": 1,
        "headline": 1,
        "grid_card": 1,
        "figure_paired_differences": 2,
    },
    "analysis/variance.py": {"analysis": 1, "summary": 1, "figure_anova": 1},
    "analysis/attribution.py": {"analysis": 1, "summary": 1, "figure_shap": 1},
    "analysis/stability.py": {"analysis": 1, "summary": 1},
    "analysis/precision.py": {"analysis": 1, "summary": 1},
    # the scorers analysis and scorer_correction, which reads its human agreement; the headline states its corrections
    "analysis/scorers.py": {"analysis": 2, "summary": 1, "headline": 1, "grid_card": 1, "figure_scorers": 1},
    "results/figures.py": FIGURES,
    "results/provenance.py": {"provenance": 1, "grid_card": 1},
    "results/grid_card.py": {"grid_card": 1},
    "results/headline.py": {"summary": 1, "headline": 1, "grid_card": 1},
    "results/storage.py": {**GRID_CELLS, **AFTER_CELLS},  # a cell records its summary's checksum through it
}
# modules in no job's code of the tiny run (another benchmark's or backend's, the embedded model's build, the
# CLI, config loading, the model server, the analyses' registry, the case study): edited all at once, they rerun
# nothing (one dry run for them all)
NO_RERUN = (
    "backends/vllm_declared.py",
    "backends/vllm.py",
    "running/embedded_model.py",  # the build of the embedded model: the tiny run has none
    "cli/__init__.py",
    "configuration/settings.py",
    "running/server.py",
    "running/judge.py",  # a judge's cells only: the tiny run has none
    "benchmarks/judge_question.py",
    "benchmarks/xstest/judge_question.py",
    # XSTest's modules: no benchmark of the tiny run has human labels (the scorers analysis of a run with XSTest
    # reads them through its registered HumanLabels: tests/end_to_end/test_scorer_cells.py)
    "benchmarks/xstest/__init__.py",
    "benchmarks/xstest/refusal.py",
    "benchmarks/xstest/strmatch.py",
    "benchmarks/xstest/learned.py",
    "benchmarks/xstest/scorer_agreement.py",
    "analysis/suite.py",
    "case_study/drivers.py",
)
# analysis options: only the analyses that read them, and what follows
# the run record and GRID card list every analysis option, so they are rewritten too
RECORD = {"provenance": 1, "grid_card": 1}
OPTION_CHANGES = {
    "bootstrap resamples": ({"bootstrap": {"resamples": 500}}, {"analysis": 1, "summary": 1, **RECORD}),
    "bootstrap seed": ({"bootstrap": {"seed": 5}}, {"analysis": 1, "summary": 1, **RECORD}),
    "shap off": ({"shap": False}, {"analysis": 1, "summary": 1, "figure_shap": 1, **RECORD}),
    # the headline states the parse-clean rho_flip
    "parse threshold": ({"parse_threshold": 0.5}, {"analysis": 1, "summary": 1, "headline": 1, **RECORD}),
}
# the run's check of its headline (rule check_headline) follows whatever rewrites a rendering of it
for jobs in [*CODE_CHANGES.values(), *(jobs for _, jobs in OPTION_CHANGES.values())]:
    if {"summary", "headline", "grid_card"} & set(jobs):
        jobs["check_headline"] = 1
# backend settings no cell's fingerprint holds (how a run runs, not what it computes): they rerun nothing, not
# even the run record and GRID card (those only vLLM reads, which the HF run refuses: tests/unit/configuration/test_settings.py)
PLUMBING = {"threads": 2, "server": False, "server_idle_seconds": 30}


@pytest.fixture(scope="module")
def scratch_source(tmp_path_factory):
    """A copy of the workflow and package to edit; runs import the package from it (PYTHONPATH)."""
    root = tmp_path_factory.mktemp("scratch")
    shutil.copy2(REPO / "Snakefile", root / "Snakefile")
    shutil.copytree(REPO / "workflow", root / "workflow", symlinks=True)
    shutil.copytree(REPO / "envs", root / "envs")  # the rules' conda: files, read when a job's metadata is recorded
    shutil.copytree(REPO / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return root


def dry_run_from(source: Path, workdir: Path, configfile: Path) -> subprocess.CompletedProcess:
    return snakemake(workdir, "-n", configfile=configfile, source=source)


@pytest.fixture(scope="module")
def scratch_run(tiny_run, scratch_source):
    """The tiny run, brought up to date with the scratch copy of the package. The copy is no git
    checkout, so the run record's code state (commit, dirty) changes: that reruns the record and the
    GRID card and the check of the headline, nothing else."""
    workdir = tiny_run
    assert planned_jobs(dry_run_from(scratch_source, workdir, workdir / "config.yaml")) == {
        "provenance": 1,
        "grid_card": 1,
        "check_headline": 1,
    }
    synced = snakemake(workdir, "--cores", "1", source=scratch_source)
    assert synced.returncode == 0, synced.stderr[-2000:]
    assert _json(workdir / "results" / "provenance.json")["code"]["commit"] is None
    return workdir


def dry_runs(source: Path, runs: list[dict]) -> list[subprocess.CompletedProcess]:
    """Snakemake dry runs one after another in one process (tests/helpers/dry_run_edits.py), each run a `workdir`, a
    `configfile` and the `modules` edited for it (each edit undone before the next): each one's exit status,
    stdout and stderr."""
    request = {
        "source": str(source),
        "runs": [{key: str(v) if isinstance(v, Path) else v for key, v in run.items()} for run in runs],
    }
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(source / "src")}
    with tempfile.TemporaryDirectory() as folder:
        request_path, planned_path = Path(folder) / "request.json", Path(folder) / "planned.json"
        request_path.write_text(json.dumps(request))
        command = [
            sys.executable,
            str(REPO / "tests" / "helpers" / "dry_run_edits.py"),
            str(request_path),
            str(planned_path),
        ]
        driver = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)
        assert driver.returncode == 0, driver.stderr[-3000:]
        results = json.loads(planned_path.read_text())
    return [
        subprocess.CompletedProcess(run, r["returncode"], r["stdout"], r["stderr"])
        for run, r in zip(runs, results, strict=True)
    ]


def dry_runs_in_one_process(source: Path, workdir: Path, runs: list[tuple[Path, tuple[str, ...]]]) -> list[dict]:
    """The jobs each dry run plans, per run a config file and the modules edited for it (`dry_runs`)."""
    planned = []
    for result in dry_runs(source, [{"workdir": workdir, "configfile": c, "modules": list(m)} for c, m in runs]):
        assert result.returncode == 0, (result.args, result.stderr[-2000:])
        planned.append(planned_jobs(result))
    return planned


def planned_after_edits(source: Path, workdir: Path, edits: list[tuple[str, ...]]) -> dict[tuple[str, ...], dict]:
    """Per edit (modules changed together): the jobs a dry run of the run's own config plans; then, with
    every edit undone, a dry run in the same process must plan nothing (no edit outlived its run)."""
    config = workdir / "config.yaml"
    *planned, after = dry_runs_in_one_process(source, workdir, [(config, modules) for modules in [*edits, ()]])
    assert after == {}, after
    return dict(zip(edits, planned, strict=True))


def test_a_code_change_reruns_exactly_the_jobs_that_depend_on_it(scratch_run, scratch_source, tmp_path):
    workdir = scratch_run
    unchanged = dry_run_from(scratch_source, workdir, workdir / "config.yaml")
    assert unchanged.returncode == 0, unchanged.stderr[-2000:]
    assert planned_jobs(unchanged) == {}
    # comments, docstrings and formatting are not code: they rerun nothing
    envelope = scratch_source / "src" / "safetyrepro" / "configuration/envelope.py"
    original = envelope.read_text()
    rewritten = original.replace('"""The configuration envelope:', '"""The envelope, docstring edited:', 1)
    envelope.write_text(rewritten.replace("\n\n\n", "\n\n\n# a comment\n", 1))
    assert envelope.read_text() != original
    try:
        assert planned_jobs(dry_run_from(scratch_source, workdir, workdir / "config.yaml")) == {}
    finally:
        envelope.write_text(original)
    # two workers on the two cores, each with its own copy of the finished run and of the package
    second_source = shutil.copytree(scratch_source, tmp_path / "source")
    second_run = shutil.copytree(workdir, tmp_path / "run", symlinks=True)
    expected = {(module,): jobs for module, jobs in CODE_CHANGES.items()}
    edits = list(expected)
    with ThreadPoolExecutor(2) as pool:
        halves = pool.map(
            planned_after_edits, (scratch_source, second_source), (workdir, second_run), (edits[::2], edits[1::2])
        )
        planned = {modules: jobs for half in halves for modules, jobs in half.items()}
    assert {m: jobs for m, jobs in planned.items() if jobs != expected[m]} == {}
    # what reruns nothing, by the snakemake command in a process of its own: a dry run that missed an edit
    # would plan nothing too (every edit above must plan jobs, so none can pass that way)
    with edited(scratch_source, NO_RERUN):
        assert planned_jobs(dry_run_from(scratch_source, workdir, workdir / "config.yaml")) == {}


def test_analysis_options_rerun_only_their_analyses_and_backend_plumbing_nothing(scratch_run, scratch_source, tmp_path):
    workdir = scratch_run
    config = workdir / "config.yaml"  # an overlay: the keys changed merge over its base's
    runs = [
        (with_changes(config, tmp_path / f"{name.replace(' ', '_')}.yaml", analysis=change), ())
        for name, (change, _) in OPTION_CHANGES.items()
    ]
    plumbing = with_changes(config, tmp_path / "plumbing.yaml", backend=PLUMBING)
    *planned, plumbing_planned = dry_runs_in_one_process(scratch_source, workdir, [*runs, (plumbing, ())])
    planned = dict(zip(OPTION_CHANGES, planned, strict=True))
    assert {name: jobs for name, jobs in planned.items() if jobs != OPTION_CHANGES[name][1]} == {}
    assert plumbing_planned == {}


def test_result_files_get_the_umask_mode(tiny_run):
    """Every table, record and figure is as readable as the user's umask allows (not 0600)."""
    workdir = tiny_run
    mask = os.umask(0o022)
    os.umask(mask)
    written = [p for p in (workdir / "results").rglob("*") if p.suffix in {".parquet", ".json", ".md", ".png"}]
    assert len(written) > 60
    modes = {oct(p.stat().st_mode & 0o777) for p in written}
    assert modes == {oct(0o666 & ~mask)}
