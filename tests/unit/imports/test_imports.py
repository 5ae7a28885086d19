"""Importing results produced elsewhere: real lm-evaluation-harness and Inspect AI runs (tests/helpers/harness_runs.py),
plain tables, and the refusals of ambiguous input. Imported results through the workflow:
tests/end_to_end/test_imported_results.py."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers.harness_runs import INSPECT_EPOCHS, LM_EVAL_SHOTS, LM_EVAL_TEMPLATES, N_ITEMS, TASK

from safetyrepro.analysis.flips import rho_flip_table
from safetyrepro.benchmarks import DataError
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.configuration.settings import ImportSource
from safetyrepro.imports import READERS, import_sources
from safetyrepro.imports.runs import ImportedRun, build_tables
from safetyrepro.imports.table import UNKNOWN
from safetyrepro.running.hashing import item_hash


def hand_rho_flip(scores: dict[tuple[str, str], float]) -> float:
    """min(N+, N-) / |C| of tiny_a against tiny_b from {(model, config): score}."""
    configs = {config for _, config in scores}
    diffs = [scores["tiny_a", c] - scores["tiny_b", c] for c in configs]
    return min(sum(d > 1e-9 for d in diffs), sum(d < -1e-9 for d in diffs)) / len(configs)


def test_the_config_schema_lists_every_reader():
    from safetyrepro.configuration.schema import schema

    assert set(schema("config")["properties"]["imports"]["items"]["properties"]["kind"]["enum"]) == set(READERS)


@pytest.mark.slow  # the harness runs take over 20 s: make test only
def test_lm_eval_runs_import_with_their_own_scores(harness):
    runs, mappings = harness
    imported = import_sources([ImportSource("lm_eval", runs.lm_eval_runs[0].parent, mappings["lm_eval"])])
    cells = imported.cells
    assert len(cells) == 2 * len(LM_EVAL_TEMPLATES) * len(LM_EVAL_SHOTS) and set(cells["model"]) == {"tiny_a", "tiny_b"}
    assert set(cells["benchmark"]) == {TASK} and set(cells["scoring"]) == {"logprob"}
    assert set(cells["shots"]) == {str(n) for n in LM_EVAL_SHOTS}
    # the two templates share the task's name: their identities come from the task configs
    assert cells["template"].nunique() == len(LM_EVAL_TEMPLATES)
    # lm-eval's own aggregate, per run, keyed by the rendered doc_to_text and n-shot
    own = {}
    for path in runs.lm_eval_runs:
        results = json.loads(next(path.rglob("results_*.json")).read_text())
        model = "tiny_a" if "tiny_a" in results["model_name"] else "tiny_b"
        config = (results["configs"][TASK]["doc_to_text"], results["n-shot"][TASK])
        own[model, config] = results["results"][TASK]["acc_norm,none"]
    assert len(set(own.values())) > 1  # the runs disagree, so the verdict can flip
    assert sorted(cells["score"]) == sorted(own.values())
    assert rho_flip_table(cells)["rho_flip"].item() == pytest.approx(hand_rho_flip(own))
    # every logged sample is an item row, scored as lm-eval scored it
    items = imported.items
    assert len(items) == len(cells) * N_ITEMS
    means = items.groupby(["model", "config_id"])["correct"].mean()
    assert means.to_dict() == pytest.approx(cells.set_index(["model", "config_id"])["score"].to_dict())


@pytest.mark.slow  # the harness runs take over 20 s: make test only
def test_inspect_logs_import_with_epochs_as_seeds(harness):
    from inspect_ai.log import read_eval_log

    runs, mappings = harness
    imported = import_sources([ImportSource("inspect", runs.inspect_logs[0].parent, mappings["inspect"])])
    cells = imported.cells
    assert len(cells) == 4 and set(cells["decoding"]) == {"t0.7"} and set(cells["n_seeds"]) == {INSPECT_EPOCHS}
    own = {}
    for path in runs.inspect_logs:
        log = read_eval_log(str(path))
        model = "tiny_a" if log.eval.model.endswith("tiny_a") else "tiny_b"
        own[model, json.dumps(log.eval.task_args)] = log.results.scores[0].metrics["accuracy"].value
    assert sorted(cells["score"]) == pytest.approx(sorted(own.values()))
    assert rho_flip_table(cells)["rho_flip"].item() == pytest.approx(hand_rho_flip(own))
    assert len(imported.items) == 4 * N_ITEMS * INSPECT_EPOCHS
    assert set(imported.items["seed"]) == set(range(1, INSPECT_EPOCHS + 1))
    per_epoch = imported.items.groupby(["model", "config_id", "seed"])["correct"].mean()
    for row in cells.itertuples():
        assert json.loads(row.seed_scores) == pytest.approx(
            {str(seed): per_epoch[row.model, row.config_id, seed] for seed in range(1, INSPECT_EPOCHS + 1)}
        )


@pytest.mark.slow  # the harness runs take over 20 s: make test only
def test_items_join_across_harnesses_and_our_pipeline(harness):
    runs, mappings = harness
    imported = import_sources(
        [
            ImportSource("lm_eval", runs.lm_eval_runs[0].parent, mappings["lm_eval"]),
            ImportSource("inspect", runs.inspect_logs[0].parent, mappings["inspect"]),
        ]
    )
    items = imported.items.assign(harness=imported.items["source"].str.split(":").str[0])
    ours = {item_hash(i.item.text) for i in runs.items}
    by_harness = items.groupby("harness")["item_hash"].agg(set)
    assert by_harness["lm_eval"] == by_harness["inspect"] == ours and len(ours) == N_ITEMS
    # prompt_id is the head of lm-eval's own prompt_hash of the same prompt
    sample = json.loads(next(runs.lm_eval_runs[0].rglob("samples_*.jsonl")).read_text().splitlines()[0])
    assert sample["prompt_hash"][:16] in set(items["prompt_id"])
    # one benchmark, both harnesses' configs: a verdict across harnesses
    assert len(imported.cells) == 12 and rho_flip_table(imported.cells)["n_configs"].item() == 6


def test_a_table_with_item_rows_imports_with_axes_from_our_ids(tmp_path):
    rows = []
    for model, bias in (("m1", 0), ("m2", 1)):
        for config in ("T1-greedy-0shot-freeform", "T2-greedy-3shot-logprob-option_order=reversed"):
            for k in range(4):
                rows.append(
                    {
                        "model": model,
                        "benchmark": "b",
                        "config_id": config,
                        "item_id": f"i{k}",
                        "correct": int((k + bias) % 2 == 0 or config.startswith("T2") and model == "m2"),
                        "item_text": f"item {k}",
                    }
                )
    frame = pd.DataFrame(rows)
    frame["score"] = frame.groupby(["model", "config_id"])["correct"].transform("mean")
    frame.to_csv(tmp_path / "results.csv", index=False)
    imported = import_sources([ImportSource("table", tmp_path / "results.csv")])
    cells = imported.cells.set_index(["model", "config_id"])
    assert cells.loc[
        ("m2", "T2-greedy-3shot-logprob-option_order=reversed"), ["template", "shots", "scoring", "option_order"]
    ].tolist() == ["T2", "3", "logprob", "reversed"]
    assert cells["score"].to_dict() == {
        ("m1", "T1-greedy-0shot-freeform"): 0.5,
        ("m1", "T2-greedy-3shot-logprob-option_order=reversed"): 0.5,
        ("m2", "T1-greedy-0shot-freeform"): 0.5,
        ("m2", "T2-greedy-3shot-logprob-option_order=reversed"): 1.0,
    }
    assert imported.design["axes"] == ["template", "decoding", "shots", "scoring", "option_order"]
    assert set(imported.items["item_hash"]) == {item_hash(f"item {k}") for k in range(4)}


def test_seeds_parse_flags_and_parse_rates_are_read_as_written_in_csv_and_parquet(tmp_path):
    """The optional numeric columns, in the spellings a spreadsheet or a typed Parquet file gives them."""
    header = "model,benchmark,config_id,score,parse_rate,item_id,correct,seed,parsed\n"
    rows = (
        "a,b,c,0.5,0.75,i1,1,0,TRUE\na,b,c,0.5,0.75,i2,0,0,0\na,b,c,0.5,0.75,i1,0,1,1.0\na,b,c,0.5,0.75,i2,1,1,false\n"
    )
    csv_table = _write(tmp_path / "t.csv", "\ufeff" + header + rows)  # a spreadsheet's byte-order mark
    typed = pd.DataFrame(
        {
            "model": "a",
            "benchmark": "b",
            "config_id": "c",
            "score": 0.5,
            "parse_rate": 0.75,
            "item_id": ["i1", "i2", "i1", "i2"],
            "correct": [1, 0, 0, 1],
            "seed": [0, 0, 1, 1],
            "parsed": [True, False, True, False],
        }
    )
    typed.to_parquet(tmp_path / "t.parquet")
    for path in (csv_table, tmp_path / "t.parquet"):
        imported = import_sources([ImportSource("table", path)])
        items = imported.items.sort_values(["seed", "item_id"])
        assert items["seed"].tolist() == [0, 0, 1, 1], path
        assert items["parsed"].tolist() == [True, False, True, False], path
        assert imported.cells["parse_rate"].item() == 0.75
        assert json.loads(imported.cells["seed_scores"].item()) == {"0": 0.5, "1": 0.5}


def test_a_bare_table_gets_unknown_axes_and_says_so(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_text("model,benchmark,config_id,score\na,b,cfg1,0.5\nb,b,cfg1,0.25\na,b,cfg2,0.1\nb,b,cfg2,0.3\n")
    imported = import_sources([ImportSource("table", path)])
    assert set(imported.cells["template"]) == {UNKNOWN} and rho_flip_table(imported.cells)["rho_flip"].item() == 0.5
    assert any("no column template" in note for note in imported.notes)
    assert any("no parse_rate or parsed column" in note for note in imported.notes)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model,benchmark,score\na,b,0.5\n", "missing column(s) config_id"),
        ("model,benchmark,config_id,score\na,b,c,1.5\n", "column score: '1.5' is not a number in [0, 1]"),
        ("model,benchmark,config_id,score,item_id\na,b,c,0.5,i1\n", "per-item rows need both item_id and correct"),
        (
            "model,benchmark,config_id,score,item_id,correct\na,b,c,0.5,i1,0.5\n",
            "column correct: '0.5' is not 0 or 1 (data row 1)",
        ),
        (
            "model,benchmark,config_id,score,temperature\na,b,c,0.5,hot\na,b,c,0.5,cold\n",
            "column temperature takes several values",
        ),
        ("model,benchmark,config_id,score\na,b/c,c,0.5\n", "the benchmark name 'b/c' is not a plain name"),
        ("model,benchmark,config_id,score,tier\na,b,c,0.5,extreme\n", "column tier: 'extreme' is not core or stress"),
    ],
)
def test_a_bad_table_is_refused_naming_the_file(tmp_path, text, message):
    path = _write(tmp_path / "t.csv", text)
    with pytest.raises(DataError) as error:
        import_sources([ImportSource("table", path)])
    assert str(error.value).startswith(str(path)) and message in str(error.value)


@pytest.mark.slow  # the harness runs take over 20 s: make test only
def test_two_lm_eval_runs_of_one_greedy_cell_are_refused_as_ambiguous(harness, tmp_path):
    runs, mappings = harness
    copy = tmp_path / "again"
    shutil.copytree(runs.lm_eval_runs[0], copy / "first")
    shutil.copytree(runs.lm_eval_runs[0], copy / "second")
    with pytest.raises(
        DataError,
        match=r"results_.*\.json \(task 'sr_truthfulqa'\), .*results_.*\.json .*: both hold tiny_a / sr_truthfulqa / .*greedy",
    ):
        import_sources([ImportSource("lm_eval", copy, mappings["lm_eval"])])


@pytest.mark.slow  # the harness runs take over 20 s: make test only
@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ("metric: exact_match\n", "metric 'exact_match' is not among acc, acc_norm; name one with `metric:`"),
        ("tasks: {sr_truthfulqa: {template: 'a b'}}\n", "tasks.sr_truthfulqa.template"),
        ("colour: blue\n", "colour"),
    ],
)
def test_a_mapping_that_does_not_fit_is_refused(harness, tmp_path, mapping, message):
    runs, _ = harness
    path = _write(tmp_path / "mapping.yaml", mapping)
    with pytest.raises((DataError, ConfigError), match=message):
        import_sources([ImportSource("lm_eval", runs.lm_eval_runs[0], path)])


def test_a_file_that_is_not_a_harness_output_is_named(tmp_path):
    bogus = _write(tmp_path / "runs" / "results_x.json", json.dumps({"hello": 1}))
    with pytest.raises(DataError, match=f"{bogus}: not an lm-evaluation-harness results file"):
        import_sources([ImportSource("lm_eval", tmp_path / "runs")])
    log = _write(tmp_path / "logs" / "broken.eval", "not a zip")
    with pytest.raises(DataError, match=f"{log}: not readable as an Inspect AI log"):
        import_sources([ImportSource("inspect", tmp_path / "logs")])


def test_an_import_config_names_no_models_and_existing_sources(tmp_path):
    with pytest.raises(ConfigError, match=r"imports\[0\]\.path: .*nowhere: no such file or folder"):
        load_settings({"imports": [{"kind": "table", "path": str(tmp_path / "nowhere")}]})
    table = _write(tmp_path / "t.csv", "model,benchmark,config_id,score\n")
    with pytest.raises(ConfigError, match="models: a config with `imports`"):
        load_settings({"imports": [{"kind": "table", "path": str(table)}], "models": [{"name": "a"}]})
    with pytest.raises(ConfigError, match="kind"):
        load_settings({"imports": [{"kind": "helm", "path": str(table)}]})


def _edited_run(harness, tmp_path, edit) -> Path:
    """A copy of one lm-eval run with its results JSON edited."""
    runs, _ = harness
    copy = shutil.copytree(runs.lm_eval_runs[0], tmp_path / "run")
    path = next(copy.rglob("results_*.json"))
    results = json.loads(path.read_text())
    edit(results)
    path.write_text(json.dumps(results))
    return copy


@pytest.mark.slow  # the harness runs take over 20 s: make test only
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["results"][TASK].update({"acc,none": 1.5}), "score 1.5 is not in [0, 1]"),
        (lambda r: r["results"][TASK].update({"acc,none": float("nan")}), "score nan is not in [0, 1]"),
        (lambda r: r["results"][TASK].update({"acc,none": None}), "not as lm-evaluation-harness writes it (TypeError"),
        (lambda r: r["n-shot"].update({TASK: "many"}), "not as lm-evaluation-harness writes it (ValueError"),
    ],
)
def test_an_lm_eval_result_out_of_shape_is_refused_naming_the_file(harness, tmp_path, edit, message):
    run = _edited_run(harness, tmp_path, edit)
    with pytest.raises(DataError, match=r"results_.*\.json.*" + re.escape(message)):
        import_sources([ImportSource("lm_eval", run)])


def _sampled_run(file: str, raw_model: str, seed: int) -> ImportedRun:
    axes = {"template": "T1", "decoding": "t0.7", "shots": "0", "scoring": "freeform"}
    return ImportedRun(Path(file), "lm_eval:x", "same", "b", axes, 0.5, (seed,), raw_model=raw_model)


def test_runs_of_one_sampled_config_are_seeds_only_when_nothing_else_differs():
    cells = build_tables([_sampled_run("a.json", "org/a", 1), _sampled_run("b.json", "org/a", 2)], [], []).cells
    assert cells["n_seeds"].item() == 2 and json.loads(cells["seed_scores"].item()) == {"1": 0.5, "2": 0.5}
    with pytest.raises(
        DataError, match="a.json, b.json: both hold same / b / T1-t0.7-0shot-freeform .different models"
    ):
        build_tables([_sampled_run("a.json", "org/a", 1), _sampled_run("b.json", "org/b", 2)], [], [])
    with pytest.raises(DataError, match="the same seed"):
        build_tables([_sampled_run("a.json", "org/a", 1), _sampled_run("b.json", "org/a", 1)], [], [])


def test_a_table_is_refused_for_duplicate_items_and_inconsistent_config_ids(tmp_path):
    header = "model,benchmark,config_id,score,item_id,correct\n"
    twice = _write(tmp_path / "twice.csv", header + "a,b,c,0.5,i1,1\na,b,c,0.5,i1,0\n")
    with pytest.raises(DataError, match=r"twice.csv \(cell 'a/b/c'\): item 'i1' appears twice for seed 0"):
        import_sources([ImportSource("table", twice)])
    mixed = _write(tmp_path / "mixed.csv", "model,benchmark,config_id,score,template\na,b,c1,0.5,T1\nz,b,c1,0.5,T2\n")
    with pytest.raises(DataError, match="config 'c1' of 'b' has different axis values for different models"):
        import_sources([ImportSource("table", mixed)])
    contradicts = _write(
        tmp_path / "c.csv", "model,benchmark,config_id,score,template\na,b,T1-greedy-0shot-freeform,0.5,T9\n"
    )
    with pytest.raises(DataError, match="column template is 'T9', the id says 'T1'"):
        import_sources([ImportSource("table", contradicts)])


def test_the_workflow_refuses_imports_with_one_model_on_a_benchmark(tmp_path, capsys):
    from safetyrepro import cli

    table = _write(
        tmp_path / "t.csv", "model,benchmark,config_id,score\na,b,c1,0.5\na,b,c2,0.4\nz,y,c1,0.1\nq,y,c1,0.2\n"
    )
    config = _write(tmp_path / "c.yaml", f"imports: [{{kind: table, path: {table}}}]\nresults_dir: {tmp_path}/r\n")
    assert cli.main(["import", "--configfile", str(config), "--out-dir", str(tmp_path / "r")]) == 2
    assert "benchmark 'b' has results of one model only" in capsys.readouterr().err
    assert cli.main(["import", "--table", str(table), "--out-dir", str(tmp_path / "converted")]) == 0
