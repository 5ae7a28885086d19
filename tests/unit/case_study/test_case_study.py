"""Cross-package case study: config section, generated lm-eval tasks, the table, the workflow's plan. The parity of
our full-answer logprob path with lm-eval's HF backend on the real model: tests/end_to_end/test_case_study_parity.py."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pytest
import yaml
from helpers.envelopes import STUDY, case_study_settings

from safetyrepro.case_study import case_items, drivers
from safetyrepro.case_study.drivers import PackageRun, Pick
from safetyrepro.case_study.table import case_study_markdown, case_study_table, items_table, parity_agreement
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.core.model_spec import ModelSpec


def test_case_study_is_off_unless_the_section_enables_it(data_dir):
    assert case_study_settings(data_dir).case_study is None
    assert case_study_settings(data_dir, {"enabled": False}).case_study is None
    study = case_study_settings(data_dir, {**STUDY, "model": "bf16"}).case_study
    assert study.model.name == "bf16" and study.n_items == STUDY["n_items"]
    assert study.benchmarks == ("truthfulqa", "bbq") and study.anchor_config == "T1-greedy-0shot-logprob"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model": "missing"}, "no model named 'missing'"),
        ({"model": "nf4"}, "not nf4"),
        ({"model": "bf16", "anchor_config": "T1-t0.3-0shot-logprob"}, "no valid config"),
    ],
)
def test_case_study_section_errors_name_the_key(data_dir, change, message):
    with pytest.raises(ConfigError, match=message):
        case_study_settings(data_dir, {**STUDY, **change})


def test_enabled_section_must_say_what_to_run(data_dir):
    with pytest.raises(ConfigError, match=r"case_study: .*'parity'"):
        case_study_settings(data_dir, {"enabled": True, "model": "bf16", "n_items": 3, "anchor_config": "x"})


def test_a_benchmark_outside_the_run_is_refused(data_dir):
    with pytest.raises(ConfigError, match="'bbq' is not under `benchmarks`"):
        case_study_settings(data_dir, {**STUDY, "model": "bf16"}, truthfulqa={"n_items": 5})


def test_case_items_are_the_grid_subset_with_bare_questions(data_dir):
    settings = case_study_settings(data_dir)
    from safetyrepro.configuration.settings import item_set

    grid = item_set(settings, "truthfulqa").items
    items = case_items(settings, "truthfulqa", 5)
    assert [i.item for i in items] == grid
    for case in items:
        assert case.question in case.item.question and not case.question.startswith("Question:")
        assert case.options[case.gold_index] == case.item.meta["options"][case.item.gold]
    bbq = case_items(settings, "bbq", 5)
    assert all(c.question == f"{c.record['context']}\n\n{c.record['question']}" for c in bbq)


def test_generated_parity_task_renders_the_prompt_our_pipeline_renders(data_dir, tmp_path):
    items = case_items(case_study_settings(data_dir), "truthfulqa", 5)
    # literal text, Jinja-looking or not, must stay literal ({{ is a brace in str.format)
    template = STUDY["parity"]["template"] + " {{% if x %}} {{{{ braces }}}}"
    name = drivers.write_parity_task(tmp_path, "parity", template, " ", items)
    task = yaml.safe_load((tmp_path / f"{name}.yaml").read_text())
    docs = [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
    prompt = jinja2.Template(task["doc_to_text"])
    for item, doc in zip(items, docs):
        expected = drivers.render_parity_prompt(template, item)
        assert prompt.render(**doc) == expected
        assert expected.endswith(f"Q: {item.question}\nA: {{% if x %}} {{{{ braces }}}}")
        assert doc["choices"][doc["gold"]] == item.item.meta["options"][item.item.gold]
    assert task["dataset_path"] == "json" and task["target_delimiter"] == " "


def test_builtin_task_wraps_lm_evals_own_definition_over_local_items(data_dir, tmp_path):
    settings = case_study_settings(data_dir)
    for benchmark, builtin in (("truthfulqa", "truthfulqa_mc1.yaml"), ("bbq", "bbq_multiple_choice.yaml")):
        items = case_items(settings, benchmark, 5)
        name = drivers.write_builtin_task(tmp_path, benchmark, items)
        task = yaml.safe_load((tmp_path / f"{name}.yaml").read_text())
        assert Path(task["include"]).name == builtin and Path(task["include"]).is_file()
        rows = [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
        assert [r["item_id"] for r in rows] == [i.item.item_id for i in items]
        if benchmark == "truthfulqa":  # lm-eval's mc1 target is the first choice
            for row, item in zip(rows, items):
                assert row["mc1_targets"]["choices"][0] == item.options[item.gold_index]
                assert sorted(row["mc1_targets"]["choices"]) == sorted(item.options)
        else:
            assert all(r["context"] == i.record["context"] for r, i in zip(rows, items))


def _run(*correct: bool, choice: str = "A") -> PackageRun:
    return PackageRun([Pick(f"i{k}", choice if c is not None else "", bool(c)) for k, c in enumerate(correct)], 2.0)


def test_table_spread_covers_package_defaults_only():
    study = type(
        "Study",
        (),
        {"max_new_tokens": 32, "anchor_config": "T1-greedy-0shot-logprob", "model": ModelSpec("m", "/m", "bf16")},
    )()
    runs = {
        ("truthfulqa", "safetyrepro:anchor"): _run(True, True, False, False),
        ("truthfulqa", "lm_eval:task"): _run(True, False, False, False),
        ("truthfulqa", "inspect_ai:task"): _run(False, False, False, False, choice=""),
        ("truthfulqa", "safetyrepro:parity"): _run(True, True, True, True),
        ("truthfulqa", "lm_eval:parity"): _run(True, True, True, True),
    }
    table = case_study_table(runs, study)
    assert table["spread_pp"].unique().tolist() == [50.0]  # 0.50 - 0.00; the parity runs (1.00) stay out
    inspect = table[table["run"] == "inspect_ai:task"].iloc[0]
    assert inspect["answered"] == 0 and inspect["items_per_second"] == 2.0
    picks = items_table(runs)
    assert parity_agreement(picks) == (4, 4)
    assert "4 / 4 items agree" in case_study_markdown(table, picks)


@pytest.mark.parametrize(
    "template", ["Q: no field", "Q: {question} {question}", "{question} {answer}", "{question} {{% endraw %}}"]
)
def test_parity_templates_that_cannot_become_a_task_are_refused(template):
    with pytest.raises(ValueError):
        drivers.parity_doc_to_text(template)


@pytest.mark.slow  # over 5 s alone: make test only
@pytest.mark.parametrize(
    "section, planned", [(None, False), ({"enabled": False}, False), ({**STUDY, "model": "a"}, True)]
)
def test_workflow_plans_the_case_study_only_when_enabled(tmp_path, data_dir, section, planned):
    from helpers.workflow import snakemake, with_changes, write_config

    config = write_config(tmp_path, data_dir, base="case_study_plan.yaml")
    if section is not None:
        with_changes(config, config, case_study=section)
    result = snakemake(tmp_path, "-n", "--cores", "1")
    assert result.returncode == 0, result.stderr[-2000:]
    jobs = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
    assert ("case_study" in jobs) == planned and "cell" in jobs


def test_lm_evals_bf16_model_computes_its_linear_layers_as_ours(tmp_path):
    """The case study compares harnesses, not bf16 kernels: lm-eval's model gets our arithmetic."""
    import torch
    from helpers.tiny_model import build_tiny_model

    from safetyrepro.backends.cpu_bf16 import Float32ProductLinear

    model = drivers.load_lm_eval_model(str(build_tiny_model(tmp_path / "tiny")), "bf16", batch_size=2).model
    assert model.dtype == torch.bfloat16
    assert not any(isinstance(m, torch.nn.Linear) for m in model.modules())
    assert any(isinstance(m, Float32ProductLinear) for m in model.modules())
