"""Declared axes: each mechanism acts as declared, the paper's ids stay, analyses take any number of axes."""

from __future__ import annotations

import copy
import itertools
import re
import types

import numpy as np
import pandas as pd
import pytest
from helpers.envelopes import BENCHMARKS, ENVELOPE, ORDER, benchmark_items, envelope_with, make_config, settings_with
from helpers.synthetic_cells import MODELS, synthetic_items
from helpers.tiny_model import build_tiny_model

from safetyrepro.analysis.suite import ANALYSES, Inputs, result_columns
from safetyrepro.analysis.variance import variance_shares
from safetyrepro.backends import load_backend
from safetyrepro.backends.base import Backend
from safetyrepro.benchmarks import BENCHMARKS as BENCHMARK_OBJECTS
from safetyrepro.benchmarks import Presentation
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.envelope import Envelope, reserved_names
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.configuration.settings import item_set
from safetyrepro.core.axes import AXES
from safetyrepro.core.batching import BatchCondition
from safetyrepro.core.decoding import Decoding
from safetyrepro.core.model_spec import ModelSpec
from safetyrepro.pipeline.plan import plan_lines
from safetyrepro.results.aggregate import CELL_COLUMNS
from safetyrepro.results.grid_card import batch_conditions
from safetyrepro.running.cell import ITEM_COLUMNS, run_cell
from safetyrepro.running.prompts import draw_shots, render_prompt

SYSTEM = {
    "mechanism": "template_variable",
    "default": "none",
    "values": {"none": {"tier": "core", "text": ""}, "careful": {"tier": "stress", "text": "Be careful.\n\n"}},
}
DRAW = {
    "mechanism": "few_shot_draw",
    "default": "first",
    "values": {
        "first": {"tier": "core", "draw": "pool_order"},
        "shuffled": {"tier": "core", "draw": "shuffled", "seed": 1},
        "peritem": {"tier": "core", "draw": "per_item", "seed": 1},
    },
}
FORMULATION = {
    "mechanism": "answer_formulation",
    "default": "letters",
    "values": {"letters": {"tier": "core", "candidates": "letters"}, "text": {"tier": "core", "candidates": "text"}},
}
BATCH = {
    "mechanism": "backend_option",
    "default": "batched",
    "values": {"batched": {"tier": "core", "batch_size": 16}, "single": {"tier": "core", "batch_size": 1}},
}


def test_the_paper_config_keeps_its_612_cells_and_their_ids():
    settings = load_settings("config/paper.yaml")
    assert len(settings.cells()) == 612
    for benchmark in settings.benchmarks:  # the ids as the four-axis envelope wrote them, in its order
        expected = [
            f"{template}-{decoding}-{shots}shot-{scoring}"
            for template, decoding, shots, scoring in itertools.product(
                ("T1", "T2", "T3", "T4"), ("greedy", "t0.3", "t0.7"), ("0", "3", "5"), ("freeform", "logprob")
            )
            if (scoring == "freeform" or decoding == "greedy") and (benchmark != "crows_pairs" or scoring == "logprob")
        ]
        assert [config.config_id for config in settings.configs(benchmark)] == expected


def test_an_axis_added_by_yaml_alone_multiplies_the_grid_and_fills_its_placeholder(data_dir):
    base = load_settings(make_config(data_dir))
    settings = settings_with(data_dir, system=SYSTEM)
    for benchmark in BENCHMARKS:
        ids = [config.config_id for config in settings.configs(benchmark)]
        assert len(ids) == 2 * len(base.configs(benchmark))
        # configs at the default keep their ids (and result paths); the others add -<axis>=<value>
        assert [i for i in ids if "-system=" not in i] == [c.config_id for c in base.configs(benchmark)]
        assert {i for i in ids if "-system=" in i} == {f"{c.config_id}-system=careful" for c in base.configs(benchmark)}
    config = settings.config("truthfulqa", "T1-greedy-0shot-freeform-system=careful")
    assert config.as_dict()["system"] == "careful" and config.tier == "stress"
    data = item_set(settings, "truthfulqa")
    careful = render_prompt(settings.envelope, config, data.benchmark, data.items[0], [])
    plain = render_prompt(
        settings.envelope, settings.config("truthfulqa", "T1-greedy-0shot-freeform"), data.benchmark, data.items[0], []
    )
    assert careful == "Be careful.\n\n" + plain
    # a second axis of the same mechanism is YAML too; a rule may name a declared axis
    persona = {**SYSTEM, "values": {"none": {"tier": "core", "text": ""}, "expert": {"tier": "core", "text": "x"}}}
    envelope = envelope_with(system=SYSTEM, persona=persona)
    envelope["rules"].append({"name": "one_preamble", "if": {"system": ["careful"]}, "then": {"persona": ["none"]}})
    both = load_settings(make_config(data_dir, envelope=envelope))
    assert len(both.configs("bbq")) == 3 * len(base.configs("bbq"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda e: e["axes"]["system"].update(default="loud"), "envelope.axes.system.default: 'loud' is not one of"),
        (
            lambda e: e["axes"]["template"]["T2"].update(text="{shots}{question}"),
            "envelope.axes.template.T2.text: needs the placeholder(s) {system}",
        ),
        (lambda e: e["axes"].update(score=e["axes"].pop("system")), "envelope.axes.score: 'score' is reserved"),
        (lambda e: e["axes"].update(order2=copy.deepcopy(ORDER)), "envelope.axes.order2: a second option_order axis"),
        (
            lambda e: e["axes"]["order"]["values"]["shuffled"].pop("seed"),
            "envelope.axes.order.values.shuffled: a shuffled order needs a seed",
        ),
        (
            lambda e: e["axes"]["order"].update(mechanism="permute"),
            "envelope.axes.order.mechanism: 'permute' is not one of",
        ),
        (
            lambda e: e["axes"]["order"]["values"]["given"].update(order="sideways"),
            "envelope.axes.order.values.given.order: 'sideways' is not one of",
        ),
        (
            lambda e: e["axes"].update(Bad=copy.deepcopy(BATCH)),
            "envelope.axes: 'Bad' is not an axis name: lower-case letters",
        ),
        (
            lambda e: e["rules"].append({"name": "r", "if": {"order": ["upside"]}, "then": {"shots": ["0"]}}),
            "envelope.rules[2] (r).if.order: unknown value(s) ['upside'] for axis 'order'",
        ),
    ],
)
def test_declared_axis_mistakes_name_the_key(data_dir, change, message):
    envelope = envelope_with(system=SYSTEM, order=ORDER)
    change(envelope)
    with pytest.raises(ConfigError) as error:
        load_settings(make_config(data_dir, envelope=envelope))
    assert message in str(error.value)


def test_no_axis_may_take_the_name_of_a_result_column():
    reserved, _ = reserved_names(BENCHMARK_OBJECTS, result_columns())  # as the config's build hands them in
    assert (set(CELL_COLUMNS) | set(ITEM_COLUMNS)) - set(AXES) <= reserved  # the built-in axes are the schema's


def test_an_axis_that_cannot_act_stays_at_its_default(data_dir):
    settings = settings_with(data_dir, order=ORDER, draw=DRAW, formulation=FORMULATION)
    for benchmark in BENCHMARKS:
        for config in settings.configs(benchmark):
            acts = BENCHMARK_OBJECTS[benchmark].presentation_acts
            if config["draw"] != "first":
                assert config.shots != "0"
            if config["order"] != "given":
                assert config.scoring in acts["option_order"]
            if config["formulation"] != "letters":
                assert config.scoring == "logprob" and benchmark in ("truthfulqa", "bbq")
    # TruthfulQA at 3 shots, log-likelihood: every order x draw x formulation is a config of its own
    ids = [
        c.config_id
        for c in settings.configs("truthfulqa")
        if c.template == "T1" and c.shots == "3" and c.scoring == "logprob"
    ]
    assert len(ids) == 3 * 3 * 2 == len(set(ids))


@pytest.mark.parametrize("benchmark", ["truthfulqa", "bbq", "crows_pairs"])
@pytest.mark.parametrize("order", ["reversed", "shuffled"])
def test_option_permutation_keeps_the_gold_answer_right(data_dir, benchmark, order):
    settings = load_settings(make_config(data_dir, **benchmark_items(60)))
    given = item_set(settings, benchmark).items
    moved = item_set(settings, benchmark, Presentation(order, seed=3, candidates="text")).items
    bench, changed = BENCHMARK_OBJECTS[benchmark], 0
    for before, after in zip(given, moved, strict=True):
        options, permuted = before.meta["options"], after.meta["options"]
        assert after.item_id == before.item_id and sorted(permuted.values()) == sorted(options.values())
        assert permuted[after.gold] == options[before.gold]  # the gold label follows its text
        assert bench.is_correct(after.gold, after)
        if order == "reversed":
            assert list(permuted.values()) == list(reversed(options.values()))
        changed += list(permuted.values()) != list(options.values())
        if benchmark == "bbq":  # the bias score's letters follow their texts too
            assert permuted[after.meta["unknown"]] == options[before.meta["unknown"]]
            assert sorted(permuted[label] for label in after.meta["target"]) == sorted(
                options[label] for label in before.meta["target"]
            )
            assert after.candidates[after.gold] == " " + options[before.gold]  # text formulation
        if benchmark == "crows_pairs":
            assert permuted[after.meta["stereotyping"]] == options[before.meta["stereotyping"]]
        if benchmark == "truthfulqa":
            assert after.candidates == {label: f" {text}" for label, text in permuted.items()}
    assert changed > len(given) * (0.9 if order == "reversed" else 0.25)


def test_few_shot_draws_never_include_an_evaluated_item(data_dir):
    settings = settings_with(data_dir, n_items=40, draw=DRAW)
    for benchmark in BENCHMARKS:
        data = item_set(settings, benchmark)
        evaluated, pool = {i.item_id for i in data.items}, [i.item_id for i in data.pool]
        for config in settings.configs(benchmark):
            n = settings.envelope.shot_count(config)
            draws = [[s.item_id for s in draw_shots(settings.envelope, config, data.pool, item)] for item in data.items]
            for shots in draws:
                assert len(shots) == len(set(shots)) == n and set(shots) <= set(pool) and not set(shots) & evaluated
            if config["draw"] == "first":
                assert all(shots == pool[:n] for shots in draws)
            elif config["draw"] == "shuffled":
                assert all(shots == draws[0] for shots in draws) and (n == 0 or draws[0] != pool[:n])
            else:
                assert len({tuple(shots) for shots in draws}) > 1


def test_a_five_axis_anova_shares_out_every_axis():
    rng = np.random.default_rng(0)
    levels = {
        "template": ["T1", "T2", "T3"],
        "decoding": ["greedy", "t0.7"],
        "shots": ["0", "3"],
        "order": ["given", "reversed"],
        "batch": ["batched", "single"],
    }
    rows = []
    for model, *values in itertools.product(["A", "B", "C"], *levels.values()):
        config = dict(zip(levels, values))
        score = {"A": 0.5, "B": 0.52, "C": 0.55}[model] + 0.2 * (config["order"] == "reversed") + rng.normal(0, 0.01)
        rows.append({"model": model, "benchmark": "bbq", "scoring": "freeform", **config, "score": score})
    cells = pd.DataFrame(rows)
    axes = ["template", "decoding", "shots", "scoring", "order", "batch"]
    row = variance_shares(cells, axes).iloc[0]
    assert all(
        f"C({axis})" in row.model_formula for axis in ("model", "template", "decoding", "shots", "order", "batch")
    )
    assert row.implementation_share > 0.9 > row.model_share and row.rho > 1
    # without the order axis its variance has nowhere to go but the residual
    unseen = variance_shares(cells, axes[:4]).iloc[0]
    assert "order" not in unseen.model_formula and unseen.residual_share > 0.9


class Recording(Backend):
    """A backend that answers "A" and remembers every request with the batch size it was given."""

    prompt_format = "plain"

    def __init__(self):
        self.calls = []

    def generate_seeds(self, prompts, decoding, seeds, stop=(), batch_size=None):
        self.calls.append(("generate", list(prompts), batch_size))
        return {seed: ["Answer: A"] * len(prompts) for seed in seeds}

    def loglikelihood(self, requests, batch_size=None):
        self.calls.append(("loglikelihood", list(requests), batch_size))
        return [-float(len(continuation)) for _, continuation in requests]

    def close(self):
        pass


@pytest.mark.parametrize("scoring", ["freeform", "logprob"])
def test_the_batch_axis_changes_only_batch_composition(data_dir, scoring):
    settings = settings_with(data_dir, batch=BATCH)
    runs = {}
    for value, suffix in (("batched", ""), ("single", "-batch=single")):
        config = settings.config("bbq", f"T1-greedy-3shot-{scoring}{suffix}")
        backend = Recording()
        condition = settings.batch_condition(config)
        rows, summary = run_cell("m", backend, backend, item_set(settings, "bbq"), settings.envelope, config, condition)
        runs[value] = (backend.calls, rows, summary)
    (batched_calls, batched, one), (single_calls, single, other) = runs["batched"], runs["single"]
    assert [call[:2] for call in batched_calls] == [call[:2] for call in single_calls]  # the same requests
    assert [call[2] for call in batched_calls] == [16] and [call[2] for call in single_calls] == [1]
    assert set(batched["batch_size"]) == {16} and set(single["batch_size"]) == {1}
    assert not batched["batch_invariant"].any()
    pd.testing.assert_frame_equal(
        batched.drop(columns=["batch_size", "config_id"]), single.drop(columns=["batch_size", "config_id"])
    )
    assert {k: v for k, v in one.items() if k not in ("config_id", "batch", "batch_size")} == {
        k: v for k, v in other.items() if k not in ("config_id", "batch", "batch_size")
    }


def test_the_hf_backend_runs_the_batch_size_it_is_given(tmp_path):
    backend = load_backend("hf", ModelSpec("tiny", str(build_tiny_model(tmp_path / "tiny")), "fp32"), batch_size=4)
    shapes = []
    hook = backend.model.register_forward_pre_hook(
        lambda module, args, kwargs: shapes.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    prompts = ["Question: a?", "Question: bb?", "Question: ccc?", "Question: dddd?", "x"]
    greedy = Decoding(0.0, 1.0, 4)
    try:
        texts = {}
        for size in (1, None):
            shapes.clear()
            texts[size] = backend.generate(prompts, greedy, 0, batch_size=size)
            widths = set(shapes)
            scores = backend.loglikelihood([(p, " A") for p in prompts], batch_size=size)
            assert len(scores) == len(prompts) and all(np.isfinite(scores))
            assert widths == ({1} if size == 1 else {4, 1})  # five prompts: 4 + 1 per pass at the default
    finally:
        hook.remove()
    assert texts[1] == texts[None]  # at fp32 the batch composition leaves greedy text as it is here


def test_vllm_refuses_a_batch_axis_up_front(data_dir):
    config = make_config(
        data_dir, envelope=envelope_with(batch=BATCH), backend={"generate": "vllm", "loglikelihood": "hf"}
    )
    with pytest.raises(
        ConfigError,
        match=r"envelope.axes.batch: value 'single' \(batch size 1\) on config T1-greedy-0shot-freeform-batch=single",
    ):
        load_settings(config)


def testbatch_conditions_are_counted_per_condition():
    cells = pd.DataFrame(
        {
            "scoring": ["logprob", "logprob", "logprob", "freeform", "freeform"],
            "batch_size": [16, 16, 1, None, None],
            "batch_invariant": [False, False, False, True, True],
        }
    ).astype({"batch_size": "Int64"})
    served = types.SimpleNamespace(serving={"logprob": "hf", "freeform": "vllm"}.get)  # the run's backend settings
    assert batch_conditions(cells, served) == [
        {"backend": "hf", "batch_size": 16, "batch_invariant": False, "n_cells": 2},
        {"backend": "hf", "batch_size": 1, "batch_invariant": False, "n_cells": 1},
        {"backend": "vllm", "batch_size": None, "batch_invariant": True, "n_cells": 2},
    ]
    assert batch_conditions(cells, None)[0] == {
        "backend": None,
        "batch_size": 16,
        "batch_invariant": False,
        "n_cells": 2,
    }


def test_ids_do_not_depend_on_the_order_the_yaml_declares_axes_in(data_dir):
    forward = settings_with(data_dir, batch=BATCH, order=ORDER, draw=DRAW)
    envelope = envelope_with(batch=BATCH, order=ORDER, draw=DRAW)
    envelope["axes"] = dict(reversed(list(envelope["axes"].items())))  # as a YAML dump sorted by key may give them
    backward = load_settings(make_config(data_dir, envelope=envelope))
    for benchmark in BENCHMARKS:
        assert sorted(c.config_id for c in forward.configs(benchmark)) == sorted(
            c.config_id for c in backward.configs(benchmark)
        )
    assert forward.envelope.axis_names == ["template", "decoding", "shots", "scoring", "batch", "draw", "order"]


@pytest.mark.slow  # over 5 s alone: make test only
def test_every_analysis_takes_declared_axes(data_dir, tmp_path):
    envelope = envelope_with(batch=BATCH, order=ORDER)
    envelope["axes"]["template"] = {k: envelope["axes"]["template"][k] for k in ("T1", "T2")}
    envelope["axes"]["decoding"] = {k: envelope["axes"]["decoding"][k] for k in ("greedy", "t0.3")}
    envelope["axes"]["shots"] = {k: envelope["axes"]["shots"][k] for k in ("0", "3")}
    envelope["axes"]["order"]["values"]["reversed"]["tier"] = "stress"
    models = [{"name": m, "path": f"org/{m}"} for m in MODELS]
    core = ["T1-greedy-0shot-freeform", "T1-greedy-0shot-logprob"]
    settings = load_settings(
        make_config(
            data_dir,
            models=models,
            envelope=envelope,
            benchmarks={b: {"n_items": 40} for b in ("truthfulqa", "bbq", "toxigen")},
            analysis={"conservative_core": core, "subsample": {"count": 3}, "bootstrap": {"resamples": 50}},
        )
    )
    rng = np.random.default_rng(0)
    rows = []
    for benchmark in settings.benchmarks:
        for config in settings.configs(benchmark):
            for level, model in zip((0.5, 0.55, 0.6), MODELS):  # a reversed order costs model C the most
                score = level + rng.normal(0, 0.03) - 0.15 * (config["order"] == "reversed") * (model == MODELS[2])
                rows.append(
                    {
                        "model": model,
                        "benchmark": benchmark,
                        **config.as_dict(),
                        "score": round(float(np.clip(score, 0, 1)) * 40) / 40,
                        "parse_rate": 1.0,
                        "n_items": 40,
                        "n_seeds": 1 if config.decoding == "greedy" or config.scoring == "logprob" else 5,
                    }
                )
    cells = pd.DataFrame(rows)
    synthetic_items(cells, n_items=40).to_parquet(tmp_path / "items.parquet")
    inputs = Inputs(settings, cells, str(tmp_path / "items.parquet"))
    tables = {name: analysis.run(inputs) for name, analysis in ANALYSES.items()}
    assert all(isinstance(table, pd.DataFrame) for table in tables.values())
    variance = tables["variance"].set_index("benchmark")
    for benchmark in ("truthfulqa", "bbq"):
        assert (
            "C(order)" in variance.loc[benchmark, "model_formula"]
            and "C(batch)" in variance.loc[benchmark, "model_formula"]
        )
    assert "C(order)" not in variance.loc["toxigen", "model_formula"]  # Yes/No items have no options to order
    shap = tables["shap"]
    assert {"order", "batch"} <= set(shap.loc[shap["surrogate"] == "pair classifier", "feature"].dropna())
    regressor = shap[(shap["surrogate"] == "regressor") & (shap["benchmark"] == "bbq")].set_index("feature")["share"]
    assert regressor["order"] > regressor["batch"]  # the order moves scores; the batch does not here
    assert set(tables["tiers"]["variant"]) == {"full", "core", "without order=reversed"}


@pytest.mark.parametrize("invariant", [True, False])
def test_the_batch_condition_names_the_backend_that_batches(data_dir, invariant):
    backend = {"generate": "vllm", "loglikelihood": "hf", "batch_size": 8, "batch_invariant": invariant}
    envelope = envelope_with(batch=BATCH)  # the batch axis where HF serves (the remedy the refusal above names)
    envelope["rules"].append({"name": "batch_on_hf", "if": {"batch": ["single"]}, "then": {"scoring": ["logprob"]}})
    settings = load_settings(make_config(data_dir, envelope=envelope, backend=backend))
    generated = settings.config("bbq", "T1-greedy-0shot-freeform")  # vLLM schedules: no batch size of ours
    assert settings.batch_condition(generated) == BatchCondition(None, invariant)
    scored = settings.config("bbq", "T1-greedy-0shot-logprob-batch=single")  # HF: the axis's size
    assert settings.batch_condition(scored) == BatchCondition(1, False)
    assert settings.batch_condition(settings.config("bbq", "T1-greedy-0shot-logprob")) == BatchCondition(16, False)
    # the plan words each condition as the backend that made it does
    line = next(text for text in plan_lines(settings) if text.startswith("batch conditions: "))
    words = {part.rpartition(" for ")[0] for part in line.removeprefix("batch conditions: ").split("; ")}
    own = "vLLM's own batches" + (", batch-invariant kernels" if invariant else "")
    assert words == {own, "HF batch size 16", "HF batch size 1"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda e: e["axes"]["order"]["values"]["given"].update(tier="stress"),
            "envelope.axes.order.default: 'given' is tagged stress",
        ),
        (
            lambda e: e["axes"]["order"]["values"].update(again={"tier": "core", "order": "reversed"}),
            "envelope.axes.order.values.again: the same parameters as 'reversed'",
        ),
        (
            lambda e: e["axes"].update(bias_ambig=e["axes"].pop("order")),
            "envelope.axes.bias_ambig: 'bias_ambig' is reserved",
        ),
        (lambda e: e["axes"].update(pct_stereotype_age=e["axes"].pop("order")), "'pct_stereotype_age' is reserved"),
        (lambda e: e["axes"].update(unit=e["axes"].pop("order")), "envelope.axes.unit: 'unit' is reserved"),
        (lambda e: e["axes"].update(precision=e["axes"].pop("order")), "'precision' is reserved"),
    ],
)
def test_an_axis_that_would_run_twice_or_overwrite_a_column_is_refused(data_dir, change, message):
    envelope = envelope_with(order=ORDER)
    change(envelope)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(make_config(data_dir, envelope=envelope))


def test_a_default_never_acts_where_its_axis_cannot(data_dir):
    formulation = {**FORMULATION, "default": "text"}
    settings = settings_with(data_dir, formulation=formulation)
    envelope = settings.envelope
    freeform = settings.config("truthfulqa", "T1-greedy-0shot-freeform")
    assert freeform["formulation"] == "text" and envelope.presentation(freeform, "truthfulqa") == Presentation()
    scored = settings.config("truthfulqa", "T1-greedy-0shot-logprob")
    assert envelope.presentation(scored, "truthfulqa").candidates == "text"
    item = item_set(settings, "truthfulqa", envelope.presentation(freeform, "truthfulqa")).items[0]
    assert "letter" in item.answer_format and item.candidates[item.gold] == f" {item.gold}"


def test_the_case_study_anchor_stays_on_the_built_in_axes(data_dir):
    study = {
        "enabled": True,
        "model": "a",
        "benchmarks": ["truthfulqa"],
        "n_items": 5,
        "anchor_config": "T1-greedy-0shot-logprob-order=reversed",
        "parity": {"template": "Q: {question}\nA:", "target_delimiter": " "},
    }
    config = make_config(data_dir, envelope=envelope_with(order=ORDER), case_study=study)
    config["models"][0]["precision"] = "fp32"
    with pytest.raises(ConfigError, match="case_study.anchor_config: .* is off the default of declared axis 'order'"):
        load_settings(config)


def _prompts(settings, config_id: str, benchmark: str) -> list[str]:
    """Every prompt of one cell, few-shot examples included, as the cell renders them."""
    envelope, config = settings.envelope, settings.config(benchmark, config_id)
    data = item_set(settings, benchmark, envelope.presentation(config, benchmark))
    return [
        render_prompt(envelope, config, data.benchmark, item, draw_shots(envelope, config, data.pool, item))
        for item in data.items
    ]


def test_two_configs_of_one_cell_render_the_same_prompts_and_are_refused(data_dir, monkeypatch):
    """What `Envelope.cell` leaves out is what a cell ignores (an order's seed unless shuffled, a draw's seed in
    pool order): two configs of one cell render the same prompts and are refused, naming both; configs of
    different cells render different prompts."""
    order = {**ORDER, "values": {**ORDER["values"], "seeded": {"tier": "core", "order": "as_given", "seed": 9}}}
    draw = {**DRAW, "values": {**DRAW["values"], "seeded": {"tier": "core", "draw": "pool_order", "seed": 9}}}
    with pytest.raises(
        ConfigError,
        match=r"envelope\.axes\.order: configs T1-greedy-0shot-freeform and "
        r"T1-greedy-0shot-freeform-order=seeded run the same \w+ cell",
    ):
        settings_with(data_dir, order=order)
    monkeypatch.setattr(Envelope, "check_distinct_cells", lambda *args: None)
    settings = settings_with(data_dir, order=order, draw=draw)
    benchmark, base = "truthfulqa", "T1-greedy-3shot-freeform"
    same = [f"{base}-order=seeded", f"{base}-draw=seeded", f"{base}-draw=seeded-order=seeded"]
    apart = [f"{base}-order=reversed", f"{base}-draw=shuffled", "T2-greedy-3shot-freeform"]
    runs = {
        config_id: (
            settings.envelope.cell(settings.config(benchmark, config_id), benchmark, BENCHMARK_OBJECTS[benchmark].task),
            _prompts(settings, config_id, benchmark),
        )
        for config_id in (base, *same, *apart)
    }
    for config_id, (cell, prompts) in runs.items():
        assert (cell == runs[base][0]) == (prompts == runs[base][1]) == (config_id not in apart), config_id


def test_a_placeholder_written_with_s_renders_as_the_plain_one(data_dir):
    """`{question!s}` and `{shots:s}` change nothing, so they pass (other conversions and specs are refused)."""
    envelope = copy.deepcopy(ENVELOPE)
    t1 = envelope["axes"]["template"]["T1"]
    t1["text"] = t1["text"].replace("{question}", "{question!s}").replace("{shots}", "{shots:s}")
    odd, plain = load_settings(make_config(data_dir, envelope=envelope)), load_settings(make_config(data_dir))
    config_id = "T1-greedy-3shot-freeform"
    assert _prompts(odd, config_id, "truthfulqa") == _prompts(plain, config_id, "truthfulqa")
