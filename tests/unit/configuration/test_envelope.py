"""Envelope and config: counts, validity rules, tiers, and one clear error per config mistake."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from helpers.envelopes import BENCHMARKS, ENVELOPE, make_config
from helpers.session import cli

from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.schema import ConfigError


def test_paper_config_describes_the_612_cell_grid():
    result = cli("envelope", "--configfile", "config/paper.yaml", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["cells"] == 612
    assert summary["configs_per_benchmark"] == {
        "truthfulqa": 48,
        "bbq": 48,
        "toxigen": 48,
        "xstest": 48,
        "crows_pairs": 12,
    }
    # per model and free-form benchmark: 4 templates x 3 shots x (greedy + 5 seeds x 2 sampled) + 12 logprob
    per_benchmark = 4 * 3 * (1 + 5 * 2) + 12
    assert summary["generation_runs"] == 3 * (4 * per_benchmark + 12)
    # core: T1-T3 x 3 shots x (2 free-form decodings + logprob); CrowS T1-T3 x 3 shots
    assert summary["core_cells"] == 3 * (4 * 3 * 3 * 3 + 3 * 3)


def test_every_config_obeys_the_rules(data_dir):
    settings = load_settings(make_config(data_dir))
    for benchmark in BENCHMARKS:
        for config in settings.configs(benchmark):
            assert config.scoring == "freeform" or config.decoding == "greedy"
            assert benchmark != "crows_pairs" or config.scoring == "logprob"
    ids = {c.config_id for c in settings.configs("bbq")}
    assert "T1-greedy-0shot-logprob" in ids and "T1-t0.3-0shot-logprob" not in ids
    assert "T1-greedy-0shot-freeform" not in {c.config_id for c in settings.configs("crows_pairs")}


def test_dropping_a_rule_adds_exactly_its_configs(data_dir):
    envelope = copy.deepcopy(ENVELOPE)
    envelope["rules"] = [r for r in envelope["rules"] if r["name"] != "crows_pairs_is_logprob_only"]
    settings = load_settings(make_config(data_dir, envelope=envelope))
    assert len(settings.configs("bbq")) == 48
    assert len(settings.configs("crows_pairs")) == 48


def test_without_the_greedy_rule_logprob_configs_would_repeat_a_cell(data_dir):
    """Decoding does not act on a log-likelihood cell: without logprob_only_under_greedy, each sampled
    decoding's logprob config would be the greedy one's cell again, counted twice in rho_flip."""
    envelope = copy.deepcopy(ENVELOPE)
    envelope["rules"] = [r for r in envelope["rules"] if r["name"] != "logprob_only_under_greedy"]
    with pytest.raises(ConfigError, match="configs T1-greedy-0shot-logprob and T1-t0.3-0shot-logprob run the same"):
        load_settings(make_config(data_dir, envelope=envelope))


def test_tiers_come_from_the_value_tags(data_dir):
    settings = load_settings(make_config(data_dir))
    for config in settings.configs("xstest"):
        stress = config.template == "T4" or config.decoding == "t0.7"
        assert config.tier == ("stress" if stress else "core")
    envelope = copy.deepcopy(ENVELOPE)
    envelope["axes"]["template"]["T4"]["tier"] = "core"
    settings = load_settings(make_config(data_dir, envelope=envelope))
    assert {c.tier for c in settings.configs("xstest") if c.decoding != "t0.7"} == {"core"}


def test_seeds_and_decoding_parameters(data_dir):
    settings = load_settings(make_config(data_dir))
    envelope = settings.envelope
    assert envelope.seeds_for(settings.config("bbq", "T2-t0.7-3shot-freeform")) == [0, 1, 2, 3, 4]
    assert envelope.seeds_for(settings.config("bbq", "T2-greedy-3shot-freeform")) == [0]
    assert envelope.seeds_for(settings.config("bbq", "T2-greedy-3shot-logprob")) == [0]
    t4 = envelope.decoding(settings.config("bbq", "T4-t0.3-0shot-freeform"))
    assert (t4.temperature, t4.top_p, t4.max_new_tokens) == (0.3, 0.95, 256)
    assert envelope.decoding(settings.config("bbq", "T1-greedy-0shot-freeform")).max_new_tokens == 32
    assert envelope.stop_strings(settings.config("bbq", "T4-greedy-0shot-freeform")) == []


def test_envelope_digest_changes_with_the_envelope(data_dir):
    base = load_settings(make_config(data_dir)).envelope.digest()
    envelope = copy.deepcopy(ENVELOPE)
    envelope["axes"]["decoding"]["t0.7"]["top_p"] = 0.9
    assert load_settings(make_config(data_dir, envelope=envelope)).envelope.digest() != base
    assert load_settings(make_config(data_dir)).envelope.digest() == base


def test_select_configs_restricts_the_grid(data_dir):
    settings = load_settings(
        make_config(data_dir, select_configs=["T1-greedy-0shot-logprob", "T2-t0.3-5shot-freeform"])
    )
    assert [c.config_id for c in settings.configs("bbq")] == ["T1-greedy-0shot-logprob", "T2-t0.3-5shot-freeform"]
    assert [c.config_id for c in settings.configs("crows_pairs")] == ["T1-greedy-0shot-logprob"]


def _rule(name, when, then):
    return {"name": name, "if": when, "then": then}


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda c: c["envelope"]["rules"].append(_rule("r", {"temperature": ["x"]}, {"scoring": ["logprob"]})),
            "envelope.rules[2] (r).if.temperature: unknown axis 'temperature'",
        ),
        (
            lambda c: c["envelope"]["rules"].append(_rule("r", {"scoring": ["logprob"]}, {"decoding": ["t0.9"]})),
            "envelope.rules[2] (r).then.decoding: unknown value(s) ['t0.9'] for axis 'decoding'",
        ),
        (lambda c: c["models"][0].pop("path"), "models[0] (a): give exactly one of 'path'"),
        (lambda c: c["models"].append({"name": "a", "path": "org/x"}), "models[2] (a).name: duplicate model name 'a'"),
        (lambda c: c.update(models=c["models"][:1]), "models: needs at least 2 entries, got 1"),
        (lambda c: c["benchmarks"].update(mmlu={"n_items": 3}), "benchmarks.mmlu: unknown benchmark"),
        (
            lambda c: c["benchmarks"]["bbq"].update(n_items="ten"),
            "benchmarks.bbq.n_items: expected integer, got str 'ten'",
        ),
        (
            lambda c: c["envelope"]["axes"]["template"]["T1"].update(tier="edge"),
            "envelope.axes.template.T1.tier: 'edge' is not one of core, stress",
        ),
        (
            lambda c: c["envelope"]["axes"]["template"]["T1"].update(text="{question} {persona}"),
            "envelope.axes.template.T1.text: unknown placeholder(s) ['persona']",
        ),
        (lambda c: c["envelope"]["axes"].update(shots={}), "envelope.axes.shots: needs at least 1 entry, got 0"),
        (lambda c: c.update(colour="blue"), "(top level): unknown key(s) 'colour'"),
        (
            lambda c: c.update(select_configs=["T9-greedy-0shot-freeform"]),
            "select_configs: 'T9-greedy-0shot-freeform' is not a valid config",
        ),
    ],
)
def test_config_mistakes_name_the_key(data_dir, change, message):
    config = make_config(data_dir)
    change(config)
    with pytest.raises(ConfigError) as error:
        load_settings(config)
    assert message in str(error.value)


def test_benchmark_without_data_is_named(tmp_path, data_dir):
    (tmp_path / "bbq").mkdir()
    with pytest.raises(ConfigError, match=r"benchmarks.truthfulqa: no data in .*truthfulqa"):
        load_settings(make_config(tmp_path))
    with pytest.raises(ConfigError, match=r"benchmarks.bbq: no data in"):
        load_settings(make_config(tmp_path, benchmarks={"bbq": {"n_items": 3}}))


def test_data_dir_environment_variable_overrides_the_config(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv("SAFETYREPRO_DATA_DIR", str(data_dir))
    assert load_settings(make_config(tmp_path / "nowhere")).data_dir == data_dir


def test_cli_reports_config_errors_in_one_line(tmp_path, data_dir):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [a, b\n")
    result = cli("envelope", "--configfile", str(bad))
    assert result.returncode == 2
    assert (
        result.stderr
        == f"safetyrepro: error: {bad}, line 2, column 1: YAML syntax error: did not find expected ',' or ']'\n"
    )
    assert "Traceback" not in result.stderr
    config = make_config(data_dir)
    config["models"][1]["precision"] = "int3"
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    result = cli("envelope", "--configfile", str(tmp_path / "c.yaml"))
    assert (
        result.returncode == 2
        and result.stderr == "safetyrepro: error: models[1].precision: 'int3' is not one of fp32, bf16, nf4\n"
    )
