"""The effective config: layers (complete configs and `extends:` overlays), overrides, schema defaults
applied once, and the typed settings every consumer reads."""

from __future__ import annotations

import ast
import copy
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.session import REPO, cli
from helpers.workflow import write_config

from safetyrepro.configuration.build import load_run_settings, load_settings
from safetyrepro.configuration.loading import merge_layer
from safetyrepro.configuration.schema import ConfigError, apply_defaults, schema
from safetyrepro.results.storage import write_atomic, write_json, write_parquet, write_text

BIN = Path(sys.executable).parent


def minimal(data_dir) -> dict:
    return {
        "data_dir": str(data_dir),
        "models": [{"name": "a", "path": "org/a"}, {"name": "b", "path": "org/b"}],
        "benchmarks": {"bbq": {"n_items": 5}},
        "envelope": str(REPO / "config" / "envelope.yaml"),
    }


def write(path: Path, data) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_merge_layer_merges_mappings_replaces_the_rest_and_null_deletes():
    base = {"backend": {"device": "cpu", "batch_size": 16}, "select_configs": ["x"], "keep": 1}
    merged = merge_layer(base, {"backend": {"device": "cuda"}, "select_configs": None, "new": [1]})
    assert merged == {"backend": {"device": "cuda", "batch_size": 16}, "keep": 1, "new": [1]}
    assert base["backend"]["device"] == "cpu"  # the base is not changed


def test_schema_defaults_are_filled_once_and_typed(data_dir):
    settings = load_settings(minimal(data_dir))
    document = settings.document
    assert document["backend"] == {
        "generate": "hf",
        "loglikelihood": "hf",
        "batch_size": 16,
        "device": "auto",
        "gpu_memory_utilization": 0.85,
        "hf_activation_gib": 8,
        "batch_invariant": False,
        "prefix_reuse": True,
        "server": True,
        "server_idle_seconds": 300,
        "kv_cache_gib": 2,
    }
    assert document["analysis"]["bootstrap"] == {"resamples": 1000, "seed": 0, "level": 0.95}
    assert document["models"][0] == {
        "name": "a",
        "path": "org/a",
        "precision": "bf16",
        "chat_template": "auto",
        "trust_remote_code": False,
    }
    assert settings.backend.batch_size == 16 and settings.backend.threads is None
    assert settings.analysis.bootstrap.resamples == 1000 and settings.analysis.conservative_core == ()
    assert settings.subset_seed == 0 and settings.fewshot_pool == 20 and settings.partial_results is False
    assert settings.case_study is None and settings.select_configs is None
    # the effective config is a fixed point: what jobs read back is the same run
    again = load_settings(copy.deepcopy(document))
    assert again.document == document and again.backend == settings.backend


def test_every_schema_default_reaches_the_effective_config(data_dir):
    """Walk the schema: every property with a default appears in the effective config of a minimal file."""
    document = load_settings(minimal(data_dir)).document

    def defaults(node, path):
        for key, sub in node.get("properties", {}).items():
            if "default" in sub:
                yield (*path, key)
                yield from defaults(sub, (*path, key))

    for path in defaults(schema("config"), ()):
        value = document
        for key in path:
            assert key in value, ".".join(path)
            value = value[key]


def test_apply_defaults_fills_nested_arrays_and_maps():
    node = {
        "properties": {
            "a": {"type": "object", "default": {}, "properties": {"b": {"default": 2}}},
            "items": {"type": "array", "items": {"properties": {"c": {"default": 3}}}},
        },
        "additionalProperties": {"properties": {"d": {"default": 4}}},
    }
    instance = {"items": [{}, {"c": 9}], "other": {}}
    apply_defaults(instance, node)
    assert instance == {"a": {"b": 2}, "items": [{"c": 3}, {"c": 9}], "other": {"d": 4}}


def test_an_overlay_names_its_base_and_changes_only_what_it_says(tmp_path, data_dir):
    base = write(
        tmp_path / "base.yaml",
        {**minimal(data_dir), "backend": {"device": "cpu"}, "select_configs": ["T1-greedy-0shot-logprob"]},
    )
    overlay = write(
        tmp_path / "overlay.yaml", {"extends": str(base), "backend": {"batch_size": 4}, "select_configs": None}
    )
    settings = load_settings(overlay)
    assert settings.backend.device == "cpu" and settings.backend.batch_size == 4
    assert settings.select_configs is None and len(settings.configs("bbq")) == 48
    assert settings.layers == (f"{base} (complete config)", f"{overlay} (overlay on {base})")
    assert "extends" not in settings.document


def test_a_complete_config_is_taken_alone(tmp_path, data_dir):
    """No key of any other file leaks in: the shipped default's demo settings stay out of a complete file."""
    settings = load_settings(write(tmp_path / "mine.yaml", minimal(data_dir)))
    assert settings.select_configs is None and settings.envelope.token_cap is None
    assert settings.backend.device == "auto"


@pytest.mark.parametrize(
    "files, message",
    [
        (lambda d: [{"extends": "missing.yaml"}], "^0.yaml: extends: config file not found: missing.yaml$"),
        (lambda d: [{"extends": ""}], "extends: expected the path"),
        (lambda d: [{"extends": 3}], "extends: expected the path"),
        (lambda d: [{"extends": "1.yaml"}, {"extends": "0.yaml"}], "a cycle"),
    ],
)
def test_bad_layers_are_named(files, message, tmp_path, data_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for index, content in enumerate(files(data_dir)):
        write(tmp_path / f"{index}.yaml", content)
    with pytest.raises(ConfigError, match=message):
        load_settings("0.yaml")


def test_one_config_file_per_run(tmp_path, data_dir):
    first = write(tmp_path / "a.yaml", minimal(data_dir))
    with pytest.raises(ConfigError, match="give one config file, not 2 .*write `extends: <base config>`"):
        load_run_settings([first, first], {})


def test_config_overrides_go_on_top_and_are_listed(tmp_path, data_dir):
    path = write(tmp_path / "a.yaml", minimal(data_dir))
    settings = load_run_settings([path], {"partial_results": True, "backend": {"batch_size": 2}})
    assert settings.partial_results and settings.backend.batch_size == 2
    assert settings.layers[-1] == "--config overrides of partial_results, backend"


def test_the_default_config_applies_only_when_none_is_given(monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("SAFETYREPRO_DATA_DIR", raising=False)
    assert load_run_settings([], {}).layers == ("config/config.yaml (complete config)",)


def test_case_study_checks_run_with_all_other_checks(tmp_path, data_dir):
    """`safetyrepro check` refuses a bad case_study section (it never looked at it before)."""
    config = {
        **minimal(data_dir),
        "case_study": {
            "enabled": True,
            "model": "nope",
            "n_items": 3,
            "anchor_config": "T1-greedy-0shot-logprob",
            "parity": {"template": "{question}"},
        },
    }
    path = write(tmp_path / "c.yaml", config)
    result = cli("check", "--configfile", str(path))
    assert result.returncode == 2
    assert result.stderr == "safetyrepro: error: case_study.model: no model named 'nope' under `models`\n"


def test_no_package_code_reads_the_config_document():
    """Only the typed settings (configuration/settings.py) read the config document; everyone else reads typed fields."""
    readers = []
    for path in (REPO / "src" / "safetyrepro").rglob("*.py"):
        if path.relative_to(REPO).as_posix() == "src/safetyrepro/configuration/settings.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("document", "raw"):
                readers.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert readers == []


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_files_get_the_mode_the_umask_gives(umask, mode, tmp_path):
    import pandas as pd

    previous = os.umask(umask)
    try:
        write_text("x", tmp_path / "a.md")
        write_json({"a": 1}, tmp_path / "a.json")
        write_parquet(pd.DataFrame({"a": [1]}), tmp_path / "a.parquet")
        write_atomic(tmp_path / "a.bin", lambda tmp: tmp.write_bytes(b"x"))
    finally:
        os.umask(previous)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {name: mode for name in ("a.md", "a.json", "a.parquet", "a.bin")}


@pytest.mark.slow  # over 5 s alone: make test only
def test_check_names_the_missing_case_study_extra(monkeypatch, capsys):
    """`make run` installs no case-study packages: `safetyrepro check` says so before any job."""
    import importlib.util

    from safetyrepro import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "lm_eval" else real(name, *a))
    monkeypatch.chdir(REPO)
    assert cli.main(["check", "--configfile", "config/case_study.yaml"]) == 2
    assert capsys.readouterr().err.startswith(
        "safetyrepro: error: case_study: needs lm_eval, from the case-study extra"
    )


def test_an_empty_extends_is_an_error_not_a_complete_config(tmp_path, data_dir):
    path = tmp_path / "overlay.yaml"
    path.write_text("extends:\nbackend: {batch_size: 2}\n")
    with pytest.raises(ConfigError, match="extends: expected the path"):
        load_settings(path)


def test_an_empty_config_path_is_not_the_default(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings("")


def test_config_override_values_are_typed_as_in_a_file(tmp_path, data_dir):
    """Snakemake hands nested `--config` values over as strings, and a deleted key to cluster jobs as 'None'."""
    path = write(tmp_path / "a.yaml", {**minimal(data_dir), "select_configs": ["T1-greedy-0shot-logprob"]})
    settings = load_run_settings(
        [path], {"analysis": {"shap": "False", "bootstrap": {"resamples": "200"}}, "select_configs": "None"}
    )
    assert settings.analysis.shap is False and settings.analysis.bootstrap.resamples == 200
    assert settings.select_configs is None
    # a byte that is not UTF-8 (Snakemake hands it over as a lone surrogate) is no YAML: the value stays text
    assert load_run_settings([path], {"results_dir": "results-\udcff"}).results_dir == Path("results-\udcff")


def test_the_data_dir_variable_is_a_visible_layer(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv("SAFETYREPRO_DATA_DIR", str(data_dir))
    settings = load_settings({**minimal(data_dir), "data_dir": "elsewhere"})
    assert settings.data_dir == Path(data_dir)
    assert settings.layers[-1] == f"SAFETYREPRO_DATA_DIR={data_dir} (overrides data_dir)"


def test_conservative_core_ids_must_exist(data_dir):
    config = {**minimal(data_dir), "analysis": {"conservative_core": ["T1-greedy-0shot-freefrom"]}}
    with pytest.raises(ConfigError, match="analysis.conservative_core: 'T1-greedy-0shot-freefrom' is not a valid"):
        load_settings(config)


def test_subsample_benchmarks_default_to_all_and_must_be_in_the_run(data_dir):
    settings = load_settings(minimal(data_dir))
    assert settings.analysis.subsample.benchmarks == ()  # empty: every benchmark of the run
    assert settings.document["analysis"]["subsample"] == {"count": 20, "fraction": 0.8, "seed": 0, "benchmarks": []}
    config = {**minimal(data_dir), "analysis": {"subsample": {"benchmarks": ["bbq"]}}}
    assert load_settings(config).analysis.subsample.benchmarks == ("bbq",)
    config["analysis"]["subsample"]["benchmarks"] = ["truthfulqa"]
    with pytest.raises(
        ConfigError, match=r"analysis.subsample.benchmarks: 'truthfulqa' is not a benchmark of this run \(bbq\)"
    ):
        load_settings(config)
    config["analysis"]["subsample"]["benchmarks"] = ["bbq", "bbq"]
    with pytest.raises(ConfigError, match="analysis.subsample.benchmarks: entries must be unique"):
        load_settings(config)


@pytest.mark.parametrize("written, meant", [("off", "off"), ("on", "on"), ('"off"', "off"), ("auto", "auto")])
def test_chat_template_on_and_off_mean_what_they_say(written, meant, tmp_path, data_dir):
    """YAML 1.1 reads an unquoted off as false; the model still gets chat_template 'off'."""
    config = minimal(data_dir)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config) + "")
    text = path.read_text().replace("path: org/a", f"path: org/a\n  chat_template: {written}", 1)
    path.write_text(text)
    assert load_settings(path).models[0].chat_template == meant


def test_a_home_relative_model_path_is_the_same_for_the_check_and_the_job(tmp_path, data_dir, monkeypatch):
    model = tmp_path / "home" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = minimal(data_dir)
    config["models"][0]["path"] = "~/model"
    settings = load_settings(config)
    assert settings.models[0].path == str(model)
    assert load_settings(settings.document).models[0].path == str(model)


def test_the_precision_probe_pairs_each_model_with_its_twin(data_dir):
    paper = load_settings(REPO / "config" / "paper.yaml")
    probe = paper.precision_probe
    assert probe.precision == "bf16" and probe.configs == paper.analysis.conservative_core
    assert probe.twins == {spec.name: f"{spec.name}@bf16" for spec in paper.models}
    assert [(spec.path, spec.precision) for spec in probe.new_models] == [(m.path, "bf16") for m in paper.models]
    cells = paper.probe_cells()
    assert len(cells) == 54 and {c.config_id for _, _, c in cells} == set(probe.configs)  # the paper's 54
    assert paper.model("yi-1.5-9b-chat@bf16").precision == "bf16" and len(paper.cells()) == 612
    # the default run: the grid already has the same weights at nf4, so the probe runs nothing new
    default = load_settings()
    assert default.precision_probe.twins == {"gemma-270m-fp32": "gemma-270m-nf4", "gemma-270m-bf16": "gemma-270m-nf4"}
    assert default.probe_cells() == []
    # a model whose chat template differs is other weights-and-prompts: it gets a twin of its own
    config = minimal(data_dir) | {"analysis": {"conservative_core": ["T1-greedy-0shot-logprob"]}}
    config["models"] = [
        {"name": "a", "path": "org/a", "precision": "nf4"},
        {"name": "b", "path": "org/a", "chat_template": "off"},
    ]
    settings = load_settings(config | {"precision_probe": {"precision": "nf4"}})
    assert settings.precision_probe.twins == {"b": "b@nf4"} and len(settings.probe_cells()) == 1


def test_model_servers_run_under_server_python_with_this_source_first(data_dir, tmp_path, monkeypatch):
    """A relative server_python is taken from the working folder; the server's path starts with this
    checkout's source, so another environment (.venv-vllm) runs this code."""
    monkeypatch.chdir(tmp_path)
    config = minimal(data_dir)
    config["backend"] = {"server_python": "env/bin/python"}
    python, environment = load_settings(config).backend.server_command()
    assert python == str(tmp_path / "env" / "bin" / "python")
    source = REPO / "src"
    assert environment["PYTHONPATH"].split(os.pathsep)[0] == str(source)
    assert load_settings(minimal(data_dir)).backend.server_command()[0] == sys.executable
    config["backend"]["server"] = False
    with pytest.raises(ConfigError, match=r"backend.server_python: model servers run under it, but backend.server"):
        load_settings(config)


def _snakemake_overrides(*entries: str) -> dict:
    """`--config` entries as Snakemake's own parser hands them to the Snakefile."""
    from snakemake.cli import parse_config

    return parse_config(list(entries))


ALIAS_BOMB = (
    "{a0: &a0 [x,x,x,x,x,x,x,x,x,x]"
    + "".join(f", a{level}: &a{level} [{','.join([f'*a{level - 1}'] * 10)}]" for level in range(1, 11))
    + "}"
)  # 540 characters, 10^11 values once expanded


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            "results_dir=",
            r"--config results_dir: an empty value; give one \(null drops the key, and its default applies\)",
        ),
        ("data_dir=", "--config data_dir: an empty value"),
        ("backend={device: }", "--config backend.device: an empty value"),
        ("select_configs=[T1-greedy-0shot-logprob, '']", r"--config select_configs\[1\]: an empty value"),
        ("results_dir=~", "--config results_dir: a lone ~ is YAML's null; write the full path"),
        (f"analysis={ALIAS_BOMB}", "--config analysis: expands to more than 200,000 values"),
        ("analysis=" + "[" * 1000 + "]" * 1000, "--config analysis: nested more than 64 levels deep"),
        (
            "benchmarks={bbq: {n_items: 010}}",
            "--config benchmarks.bbq.n_items, line 1, column 1: 010 has a leading zero",
        ),
        ("subset={seed: 0777}", "--config subset.seed, line 1, column 1: 0777 has a leading zero, .* octal 511"),
    ],
)
def test_a_config_override_that_would_drop_or_misread_a_value_is_refused(entry, message, tmp_path, data_dir):
    """Snakemake makes `key=` None (which would delete the key, so the default results/ applied), parses
    nested values with aliases kept, and leaves nested numbers as text for us to read."""
    path = write(tmp_path / "a.yaml", minimal(data_dir))
    with pytest.raises(ConfigError, match=message):
        load_run_settings([path], _snakemake_overrides(entry))


def test_null_still_drops_a_key_through_config(tmp_path, data_dir):
    path = write(tmp_path / "a.yaml", {**minimal(data_dir), "select_configs": ["T1-greedy-0shot-logprob"]})
    assert load_run_settings([path], _snakemake_overrides("select_configs=null")).select_configs is None


def test_tilde_is_the_home_folder_in_every_path(tmp_path, data_dir, monkeypatch):
    """`~` in results_dir, data_dir, resources_dir, the envelope file, an import's path and
    SAFETYREPRO_DATA_DIR: the settings, the effective config (what jobs read) and the checks agree."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "data").symlink_to(data_dir)
    (home / "envelope.yaml").write_text((REPO / "config" / "envelope.yaml").read_text())
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    config = {
        **minimal("~/data"),
        "results_dir": "~/runs/first",
        "resources_dir": "~/built",
        "envelope": "~/envelope.yaml",
    }
    config["models"][0] = {"name": "a", "embedded": "gemma-3-270m"}
    settings = load_settings(config)
    assert (settings.results_dir, settings.data_dir, settings.resources_dir) == (
        home / "runs" / "first",
        home / "data",
        home / "built",
    )
    assert settings.models[0].path == str(home / "built" / "models" / "gemma-3-270m")
    document = settings.document
    assert (document["results_dir"], document["data_dir"]) == (str(home / "runs" / "first"), str(home / "data"))
    assert load_settings(document).results_dir == settings.results_dir
    assert not (tmp_path / "~").exists()
    monkeypatch.setenv("SAFETYREPRO_DATA_DIR", "~/data")
    assert load_settings({**minimal("elsewhere"), "results_dir": "~/r"}).data_dir == home / "data"
    table = home / "cells.csv"
    table.write_text("model,benchmark,config_id,score\n")
    imported = load_settings({"imports": [{"kind": "table", "path": "~/cells.csv"}], "results_dir": "~/imported"})
    assert imported.imports[0].path == table and imported.results_dir == home / "imported"
    # the effective config holds human_labels' default, {}: a job reloading it is no run of models
    assert load_settings(imported.document).imports == imported.imports
    with pytest.raises(ConfigError, match="human_labels: a config with `imports` analyses results produced elsewhere"):
        load_settings({**imported.document, "human_labels": {"xstest": "~/labels.csv"}})


@pytest.mark.slow  # a Snakemake dry run: over 5 s
def test_tilde_in_a_config_override_reaches_the_workflow(tmp_path, data_dir):
    """`--config results_dir=~/x` plans every output under the home folder, never under a folder named ~;
    `--config results_dir=` (what an unset $OUT gives) stops the run before any job."""
    home = tmp_path / "home"
    home.mkdir()
    config = write_config(tmp_path, data_dir, base="bbq_one_config.yaml")
    environment = {**os.environ, "HOME": str(home), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    environment.pop("SAFETYREPRO_DATA_DIR", None)

    def dry_run(override: str) -> subprocess.CompletedProcess:
        command = [str(BIN / "snakemake"), "-n", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path)]
        command += ["--configfile", str(config), "--config", override]
        return subprocess.run(command, capture_output=True, text=True, env=environment, cwd=tmp_path)

    planned = dry_run("results_dir=~/x")
    assert planned.returncode == 0, planned.stderr[-2000:]
    assert f"{home}/x/cells/a/bbq/T1-greedy-0shot-logprob.parquet" in planned.stdout
    assert "~/x/cells" not in planned.stdout and not (tmp_path / "~").exists()
    empty = dry_run("results_dir=")
    assert empty.returncode != 0
    assert "safetyrepro: error: --config results_dir: an empty value" in empty.stderr


def test_extends_is_relative_to_the_overlay_that_says_it(tmp_path, data_dir, monkeypatch):
    """A chain of three files in three folders, read from a fourth: each `extends` from its own folder."""
    for folder in ("base", "site", "mine", "elsewhere"):
        (tmp_path / folder).mkdir()
    write(tmp_path / "base" / "complete.yaml", minimal(data_dir))
    write(tmp_path / "site" / "cpu.yaml", {"extends": "../base/complete.yaml", "backend": {"device": "cpu"}})
    write(tmp_path / "mine" / "small.yaml", {"extends": "../site/cpu.yaml", "backend": {"batch_size": 2}})
    monkeypatch.chdir(tmp_path / "elsewhere")
    settings = load_settings("../mine/small.yaml")
    assert settings.backend.device == "cpu" and settings.backend.batch_size == 2
    assert settings.layers == (
        "../mine/../site/../base/complete.yaml (complete config)",
        "../mine/../site/cpu.yaml (overlay on ../mine/../site/../base/complete.yaml)",
        "../mine/small.yaml (overlay on ../mine/../site/cpu.yaml)",
    )
    monkeypatch.setenv("HOME", str(tmp_path / "base"))  # ~ is the home folder; an absolute path stays
    write(tmp_path / "mine" / "home.yaml", {"extends": "~/complete.yaml"})
    write(tmp_path / "mine" / "absolute.yaml", {"extends": str(tmp_path / "site" / "cpu.yaml")})
    assert (
        load_settings(tmp_path / "mine" / "home.yaml").layers[0] == f"{tmp_path}/base/complete.yaml (complete config)"
    )
    assert load_settings(tmp_path / "mine" / "absolute.yaml").backend.device == "cpu"


def test_a_long_chain_of_overlays_is_followed(tmp_path, data_dir):
    """400 overlays, each on the one before: no recursion to run out of."""
    write(tmp_path / "0.yaml", minimal(data_dir))
    for index in range(1, 401):
        write(tmp_path / f"{index}.yaml", {"extends": f"{index - 1}.yaml", "subset": {"seed": index}})
    settings = load_settings(tmp_path / "400.yaml")
    assert settings.subset_seed == 400 and len(settings.layers) == 401


def test_yaml_merge_keys_may_be_overridden_and_quoted_numbers_stay_text(tmp_path, data_dir):
    """A key given again after `<<:` is an override, not a duplicate; '0123456' quoted is text."""
    path = tmp_path / "c.yaml"
    text = yaml.safe_dump(minimal(data_dir)) + "backend:\n  <<: {device: cpu, batch_size: 4}\n  batch_size: 8\n"
    path.write_text(text.replace("path: org/a\n", "path: org/a\n  revision: '0123456'\n", 1))
    settings = load_settings(path)
    assert settings.backend.batch_size == 8 and settings.backend.device == "cpu"
    assert settings.models[0].revision == "0123456"


def test_resources_dir_is_checked_only_where_the_run_builds_a_model(tmp_path, data_dir):
    """Hub models need nothing built: resources_dir is then unused, whatever it is."""
    config = {**minimal(data_dir), "resources_dir": str(REPO / "README.md")}
    assert load_settings(config).resources_dir == REPO / "README.md"
    config["models"][0] = {"name": "a", "embedded": "gemma-3-270m"}
    with pytest.raises(ConfigError, match="resources_dir: .*README.md is a file, not a folder"):
        load_settings(config)


def test_the_run_record_reruns_for_backend_settings_that_change_results_only(data_dir):
    """The provenance job's params (recorded_settings): backend settings no cell's fingerprint holds (device,
    threads, the servers' lifetime, memory shares) leave them as they are, so changing one reruns neither the
    record nor the GRID card (docs/reruns.md); each setting a fingerprint holds changes them."""
    from safetyrepro.backends import registered
    from safetyrepro.results.provenance import recorded_settings

    base = minimal(data_dir)

    def recorded(**backend) -> dict:
        return recorded_settings(load_settings({**base, "backend": backend}))

    plain = recorded()
    plumbing = {
        "device": "cuda",
        "threads": 3,
        "server": False,
        "server_idle_seconds": 5,
        "gpu_memory_utilization": 0.5,
        "hf_activation_gib": 1,
        "kv_cache_gib": 1,
    }

    def unchanged(key, value) -> bool:
        """Whether setting `key` leaves the record as it is (beside vLLM for the options only vLLM reads, which the
        HF backend alone refuses)."""
        beside = {"generate": "vllm"} if key in registered()["vllm"].options + registered()["vllm"].reads else {}
        return recorded(**beside, **{key: value}) == recorded(**beside)

    assert {key: unchanged(key, value) for key, value in plumbing.items()} == dict.fromkeys(plumbing, True)
    results = {"batch_size": 8, "batch_invariant": True, "prefix_reuse": False}
    assert {key: unchanged(key, value) for key, value in results.items()} == dict.fromkeys(results, False)
    assert recorded(generate="vllm") != plain


def test_a_model_split_over_gpus_is_fingerprinted_as_split_and_others_as_before(data_dir):
    """`parallel` fills its other size with 1; the split is in the model's record (its cells' fingerprints, which
    rerun when it changes: the GPUs' reductions differ), and a model not split has the record it had before."""
    from safetyrepro.pipeline.fingerprints import cell_fingerprint

    config = {**minimal(data_dir), "backend": {"generate": "vllm"}, "select_configs": ["T1-greedy-0shot-freeform"]}
    config["models"][0] = {**config["models"][0], "parallel": {"tensor": 2}}
    settings = load_settings(config)
    split, whole = settings.models
    assert (split.tensor_parallel, split.pipeline_parallel, split.gpus(), whole.gpus()) == (2, 1, 2, 1)
    assert split.record()["tensor_parallel"] == 2 and split.record()["pipeline_parallel"] == 1
    assert set(whole.record()) == {
        "name",
        "path",
        "precision",
        "chat_template",
        "trust_remote_code",
        "revision",
        "embedded",
    }
    cell = ("bbq", settings.configs("bbq")[0])
    config["models"][0]["parallel"] = {"tensor": 1, "pipeline": 1}
    unsplit = load_settings(config)
    assert set(unsplit.models[0].record()) == set(whole.record())
    assert cell_fingerprint(settings, split, *cell) != cell_fingerprint(unsplit, unsplit.models[0], *cell)
