"""The functions the workflow's rules call (safetyrepro.pipeline.schedule, .outdated, .lifecycle), in-process: no
Snakemake run. What they plan as a whole is checked by the dry runs of tests/end_to_end/test_workflow.py."""

from __future__ import annotations

import json
import os
import shlex
import time

import pytest
import yaml
from helpers.session import REPO

from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.pipeline.lifecycle import run_config_file
from safetyrepro.pipeline.outdated import mark_current, mark_outdated, outdated_problem, record_options
from safetyrepro.pipeline.schedule import (
    PROBE,
    Priorities,
    audit_last_step,
    cell_ids,
    figure_report,
    finished_cell_paths,
    judge_agreement_input,
    report_outputs,
    rescored_configs,
    round_group,
)
from safetyrepro.results.figures import FIGURES
from safetyrepro.results.records import write_record

CELLS = [("a", "bbq", "c1"), ("b", "bbq", "c1"), ("a", "bbq", "c2"), ("b", "bbq", "c2")]


def test_on_the_accelerator_a_models_jobs_run_together_model_by_model():
    """One server at a time: a model's describe_model, then its cells, then the next model's; a judge's rescored
    cells and its agreement job after the models', with its own priority."""
    priority = Priorities.of(["a", "b", "judge"], CELLS, on_gpu=True)
    order = [
        priority.describe("a"),
        priority.cell("a", "bbq", "c2"),
        priority.describe("b"),
        priority.cell("b", "bbq", "c1"),
        priority.rescore("judge"),
    ]
    assert order == sorted(order, reverse=True) and len(set(order)) == len(order)
    assert priority.cell("a", "bbq", "c1") == priority.cell("a", "bbq", "c2")
    assert priority.judge_agreement("judge") == priority.rescore("judge") > priority.rescore(None) == priority.build()


def test_on_cpu_every_model_is_described_before_any_cell_and_the_kth_cells_run_together():
    """On CPU the k-th cell of each model shares a priority (the cells running together ask different servers);
    every describe_model job and embedded model's build comes before any cell."""
    priority = Priorities.of(["a", "b"], CELLS, on_gpu=False)
    cells = {cell: priority.cell(*cell) for cell in CELLS}
    assert cells[("a", "bbq", "c1")] == cells[("b", "bbq", "c1")] > cells[("a", "bbq", "c2")]
    assert priority.describe("b") == priority.build() > max(cells.values())
    assert priority.rescore("b") == priority.judge_agreement("b") == 0


def test_a_partial_run_aggregates_only_the_cells_that_finished(tmp_path):
    """A cell counts as finished with both its item rows and its summary; a run that is not partial names every
    cell, finished or not; the precision probe's cells are in their own folder."""
    results = str(tmp_path)
    for kind, suffix in (("items", "parquet"), ("summary", "json")):
        (tmp_path / "cells" / "a" / "bbq").mkdir(parents=True, exist_ok=True)
        (tmp_path / "cells" / "a" / "bbq" / f"c1.{suffix}").write_text(kind)
    (tmp_path / "cells" / "b" / "bbq").mkdir(parents=True)
    (tmp_path / "cells" / "b" / "bbq" / "c1.parquet").write_text("items only")
    assert finished_cell_paths(results, CELLS, "summary", partial=True) == [f"{results}/cells/a/bbq/c1.json"]
    assert finished_cell_paths(results, CELLS, "items", partial=True) == [f"{results}/cells/a/bbq/c1.parquet"]
    assert len(finished_cell_paths(results, CELLS, "items", partial=False)) == len(CELLS)
    assert finished_cell_paths(results, CELLS[:1], "items", partial=False, folder=PROBE) == [
        f"{results}/precision_probe/a/bbq/c1.parquet"
    ]


def test_a_partial_run_reads_the_judges_tables_that_finished(tmp_path):
    results = str(tmp_path)
    judges = {"xstest": ["j1", "j2"]}
    (tmp_path / "judges" / "xstest").mkdir(parents=True)
    (tmp_path / "judges" / "xstest" / "j2.parquet").write_text("")
    every = [f"{results}/judges/xstest/j1.parquet", f"{results}/judges/xstest/j2.parquet"]
    assert judge_agreement_input(results, judges, partial=False) == every
    assert judge_agreement_input(results, judges, partial=True) == every[1:]


def test_the_report_asks_each_figure_once_or_once_per_benchmark():
    outputs, budgeted = report_outputs("r", ["bbq", "xstest"]), report_outputs("r", ["bbq", "xstest"], budgeted=True)
    for name, figure in FIGURES.items():
        per = [f"r/figures/{name}_bbq.png", f"r/figures/{name}_xstest.png"]
        expected = per if figure.per_benchmark else [f"r/figures/{name}.png"]
        assert [p for p in budgeted if p in per or p == f"r/figures/{name}.png"] == expected
        assert [p for p in outputs if p in per or p == f"r/figures/{name}.png"] == ([] if figure.budgeted else expected)
        assert ("subcategory" in figure_report(name)) == figure.per_benchmark
    assert set(budgeted) - set(outputs) == {"r/figures/rho_estimate_bbq.png", "r/figures/rho_estimate_xstest.png"}
    assert {"r/provenance.json", "r/grid_card.json", "r/headline_check.txt"} <= set(outputs)


def test_the_audit_report_reads_the_step_where_the_search_stopped(tmp_path):
    """Steps are asked for in order until one chooses no config; the configs run are that step's."""
    choices = ["c1", "c2", None]
    for n, choice in enumerate(choices):
        observed = [{"config_id": c} for c in choices[:n]]
        step = {"decision": {"config_id": choice}, "observed": observed}
        (tmp_path / f"step-{n}.json").write_text(json.dumps(step))
    asked = []

    def step_record(n: int) -> str:
        asked.append(n)
        return str(tmp_path / f"step-{n}.json")

    assert audit_last_step(step_record) == (str(tmp_path / "step-2.json"), ["c1", "c2"])
    assert asked == [0, 1, 2]


def test_a_budgeted_runs_cells_are_grouped_by_the_round_that_chose_them(tmp_path):
    """Each round's cells of a model are a group of their own (no group gains jobs once submitted); a cell no
    round chose (a rescored config's twin) is one alone; rounds not written yet are not read."""
    for n, chosen in enumerate([["c1", "c2"], ["c3"]]):
        (tmp_path / f"round-{n}.json").write_text(json.dumps({"decision": {"configs": chosen}}))

    def round_record(n: int) -> str:
        return str(tmp_path / f"round-{n}.json")

    groups = {c: round_group("model-a", "bbq", c, round_record) for c in ("c1", "c2", "c3", "twin")}
    assert groups == {
        "c1": "model-a-bbq-round-0",
        "c2": "model-a-bbq-round-0",
        "c3": "model-a-bbq-round-1",
        "twin": "model-a-bbq-twin",
    }


def test_a_job_records_only_the_inputs_it_read_from_the_results_folder(tmp_path):
    options = record_options(
        "r/jobs/x.json", "f1", "r", ["r/x.parquet", "r/jobs/x.json"], ["r/cells/a b.json", "data/bbq.jsonl"]
    )
    words = shlex.split(options)
    assert words[words.index("--inputs") + 1 :] == ["r/cells/a b.json"]
    assert words[words.index("--outputs") + 1 : words.index("--inputs")] == ["r/x.parquet", "r/jobs/x.json"]
    assert words[:4] == ["--job-record", "r/jobs/x.json", "--fingerprint", "f1"]


def test_outputs_are_judged_by_their_record(tmp_path):
    """Not all there: nothing to judge; a record of other settings or a rule's own check: outdated; no record:
    refused with a line naming the output."""
    output, record = tmp_path / "x.parquet", tmp_path / "jobs" / "x.parquet.json"
    outputs = [str(output)]
    assert outdated_problem(str(record), outputs, lambda: "f1", tmp_path) is None
    output.write_text("rows")
    with pytest.raises(ConfigError, match=f"{output} has no record of what made it"):
        outdated_problem(str(record), outputs, lambda: "f1", tmp_path)
    write_record(record, "f1", [output], results_dir=tmp_path)
    assert outdated_problem(str(record), outputs, lambda: "f1", tmp_path) is None
    assert outdated_problem(str(record), outputs, lambda: "f2", tmp_path) is not None
    assert outdated_problem(str(record), outputs, lambda: "f1", tmp_path, lambda: "weights replaced") == (
        "weights replaced"
    )


def test_an_outdated_jobs_marker_is_newer_than_its_outputs_even_ahead_of_the_clock(tmp_path):
    output, marker = tmp_path / "x.parquet", tmp_path / "markers" / "x" / "marker"
    output.write_text("rows")
    ahead = time.time_ns() + 3600 * 10**9
    os.utime(output, ns=(ahead, ahead))
    mark_outdated(marker, "another fingerprint", [str(output), str(tmp_path / "missing.json")])
    assert marker.stat().st_mtime_ns > output.stat().st_mtime_ns
    assert "another fingerprint" in marker.read_text()
    mark_current(marker)
    assert marker.stat().st_mtime_ns == 0


def test_the_jobs_config_file_is_named_by_its_content_and_mended(tmp_path):
    """Two configs get two files; a file damaged since it was written is written anew."""
    first = run_config_file({"results_dir": "a"}, tmp_path)
    assert yaml.safe_load(first.read_text()) == {"results_dir": "a"}
    assert run_config_file({"results_dir": "b"}, tmp_path) != first
    first.write_text("results_dir: elsewhere\n")
    assert run_config_file({"results_dir": "a"}, tmp_path) == first
    assert yaml.safe_load(first.read_text()) == {"results_dir": "a"}


def test_a_rescored_config_names_its_generation_twin():
    """The shipped config's scorer axis: each config of another scorer relabels the config it is, scorer aside."""
    settings = load_settings(REPO / "config" / "config.yaml")
    rescored = rescored_configs(settings)
    assert rescored and all(config.rsplit("-scorer=", 1)[0] == twin for config, twin in rescored.items())
    assert set(rescored) <= {config for _, _, config in cell_ids(settings.cells())}
