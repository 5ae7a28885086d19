"""Security properties: safe YAML, no eval/exec or shells on config strings, remote code off by default, and no
download during a run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers.session import REPO
from helpers.tiny_model import build_tiny_model

from safetyrepro.backends import load_backend
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.loading import read_yaml
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.core.model_spec import ModelSpec

SOURCES = sorted((REPO / "src" / "safetyrepro").rglob("*.py"))
WORKFLOW = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]


def _calls(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            yield node


def _name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return f"{getattr(func.value, 'id', '?')}.{func.attr}"
    return getattr(func, "id", "?")


def test_package_never_evaluates_strings_or_loads_yaml_unsafely():
    assert len(SOURCES) > 20
    found = []
    for path in SOURCES:
        for call in _calls(path):
            name = _name(call)
            if name in {
                "eval",
                "exec",
                "compile",
                "yaml.load",
                "yaml.unsafe_load",
                "yaml.full_load",
                "os.system",
                "os.popen",
            } or any(k.arg == "shell" for k in call.keywords):
                found.append(f"{path.name}:{call.lineno} {name}")
            if any(
                k.arg == "trust_remote_code" and isinstance(k.value, ast.Constant) and k.value.value
                for k in call.keywords
            ):
                found.append(f"{path.name}:{call.lineno} trust_remote_code=True")
    assert found == []


def test_yaml_tags_that_build_python_objects_are_refused(tmp_path):
    hostile = tmp_path / "config.yaml"
    hostile.write_text("data_dir: !!python/object/apply:os.system ['touch PWNED']\n")
    with pytest.raises(ConfigError, match="YAML syntax error: could not determine a constructor"):
        read_yaml(hostile)
    assert not (tmp_path / "PWNED").exists()


def test_trust_remote_code_is_off_unless_set_per_model(tmp_path, data_dir, monkeypatch):
    import transformers

    config = {
        "data_dir": str(data_dir),
        "envelope": str(REPO / "config" / "envelope.yaml"),
        "benchmarks": {"xstest": {"n_items": 2}},
        "models": [{"name": "a", "path": "org/a"}, {"name": "b", "path": "org/b", "trust_remote_code": True}],
    }
    settings = load_settings(config)
    assert [m.trust_remote_code for m in settings.models] == [False, True]

    seen = []
    for auto in (transformers.AutoTokenizer, transformers.AutoModelForCausalLM):
        original = auto.from_pretrained.__func__

        def spy(cls, path, *args, _original=original, **kwargs):
            seen.append((cls.__name__, kwargs["trust_remote_code"]))
            return _original(cls, path, *args, **kwargs)

        monkeypatch.setattr(auto, "from_pretrained", classmethod(spy))
    folder = build_tiny_model(tmp_path / "tiny")
    load_backend("hf", ModelSpec("tiny", str(folder), "fp32"), device="cpu")
    assert seen == [("AutoTokenizer", False), ("AutoModelForCausalLM", False)]


def test_the_workflow_downloads_nothing_but_models():
    """Data is fetched only by an explicit `safetyrepro fetch-data`; a run checks the files and stops if absent."""
    text = "\n".join(path.read_text(encoding="utf-8") for path in WORKFLOW)
    assert "safetyrepro fetch-data --" not in text and "fetch_data(" not in text
