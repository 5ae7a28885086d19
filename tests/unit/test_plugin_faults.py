"""Plugins that misbehave (issue 54, class 2): one that raises on import (SystemExit and SyntaxError too), names a
missing module or attribute, registers a name another package registers, or names an object of the wrong kind
is left out with one line naming it and its distribution. A command that does not need it warns once and goes
on; a config or command that names it is refused in one line (docs/extending.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.bad_input_corpus import ENVELOPE
from helpers.plugins import MINI, rediscovered, register
from helpers.workflow import with_changes, write_config

from safetyrepro.backends import GROUP as BACKENDS
from safetyrepro.backends import discovered
from safetyrepro.benchmarks import BENCHMARKS, BROKEN, discover
from safetyrepro.scorers import GROUP as SCORERS
from safetyrepro.scorers import discovered as scorers


def test_every_built_in_benchmark_backend_and_scorer_loads():
    """A plugin that cannot be used is only warned about: the project's own must never be one."""
    assert BROKEN == {} and discovered().broken == {} and scorers().broken == {}
    assert {"bbq", "crows_pairs", "toxigen", "truthfulqa", "xstest"} <= set(BENCHMARKS)
    assert {"rules", "judge", "strmatch", "learned"} <= set(scorers().loaded)


# modules named faulty_*: Python keeps an imported module, and tests/unit/benchmarks/test_benchmarks.py has its mini_* ones
CASES = ("raising", "exiting", "garbled", "absent", "renamed", "function", "class", "number")
PLUGIN = "benchmark plugin 'mini' (faulty_{case}:{attribute}, from {case}-plugin 1.0)"


@pytest.mark.parametrize(
    ("case", "code", "attribute", "problem"),
    [
        ("raising", "raise ValueError('no data_dir\\nset')", "Mini", "cannot be loaded: ValueError: no data_dir set"),
        ("exiting", "raise SystemExit(3)", "Mini", "cannot be loaded: SystemExit: 3"),
        ("garbled", "class Mini(:\n", "Mini", "cannot be loaded: SyntaxError: "),
        ("absent", None, "Mini", "cannot be loaded: ModuleNotFoundError: No module named 'faulty_absent'"),
        ("renamed", MINI, "Missing", "cannot be loaded: AttributeError: module 'faulty_renamed' has no attribute"),
        ("function", "def Mini():\n    pass\n", "Mini", "is of type function, not a safetyrepro.benchmarks.Benchmark"),
        ("class", "class Mini:\n    pass\n", "Mini", "is the class Mini, not a safetyrepro.benchmarks.Benchmark"),
        ("number", "Mini = 3\n", "Mini", "is of type int, not a safetyrepro.benchmarks.Benchmark"),
    ],
    ids=CASES,
)
def test_a_benchmark_plugin_that_cannot_be_used_is_left_out_naming_it(
    tmp_path, monkeypatch, case, code, attribute, problem
):
    source = None if code is None else code.format(name="mini", path="mini/a.csv")
    register(
        tmp_path, f"{case}-plugin", {"mini": f"faulty_{case}:{attribute}"}, {f"faulty_{case}": source} if source else {}
    )
    monkeypatch.syspath_prepend(tmp_path)
    found = discover()
    assert set(found.loaded) == set(BENCHMARKS) and list(found.broken) == ["mini"]
    assert str(found.broken["mini"]).startswith(f"{PLUGIN.format(case=case, attribute=attribute)} {problem}")
    assert "\n" not in str(found.broken["mini"])


def test_a_target_that_is_not_module_attribute_is_named(tmp_path, monkeypatch):
    register(tmp_path, "colon-plugin", {"mini": "faulty_colon:"}, {})
    monkeypatch.syspath_prepend(tmp_path)
    assert str(discover().broken["mini"]) == (
        "benchmark plugin 'mini' (faulty_colon:, from colon-plugin 1.0) names no module:attribute"
    )


def test_a_name_two_packages_register_is_left_out_naming_both(tmp_path, monkeypatch):
    for rank in ("first", "second"):
        register(
            tmp_path,
            f"{rank}-plugin",
            {"mini": f"faulty_{rank}:Mini"},
            {f"faulty_{rank}": MINI.format(name="mini", path="mini/a.csv")},
        )
    monkeypatch.syspath_prepend(tmp_path)
    found = discover()
    assert "mini" not in found.loaded and set(found.loaded) == set(BENCHMARKS)
    message = str(found.broken["mini"])
    assert message.startswith("benchmark 'mini' is registered twice: ") and message.endswith("; uninstall one")
    assert (
        "faulty_first:Mini (by first-plugin 1.0)" in message and "faulty_second:Mini (by second-plugin 1.0)" in message
    )


@pytest.mark.parametrize(
    ("module", "code", "problem"),
    [
        ("odd_exits", "raise SystemExit('no GPU')", "cannot be loaded: SystemExit: no GPU"),
        ("odd_function", "def Odd():\n    pass\n", "is not a subclass of safetyrepro.backends.Backend"),
    ],
    ids=["exits", "a function"],
)
def test_a_backend_plugin_that_cannot_be_used_is_left_out_naming_it(tmp_path, monkeypatch, module, code, problem):
    register(tmp_path, "odd-backend", {"odd": f"{module}:Odd"}, {module: code}, group=BACKENDS)
    monkeypatch.syspath_prepend(tmp_path)
    found = rediscovered(discovered)
    assert list(found.loaded) == ["hf", "openai", "vllm"] and list(found.broken) == ["odd"]
    assert str(found.broken["odd"]) == f"backend plugin 'odd' ({module}:Odd, from odd-backend 1.0) {problem}"


# ------------------------------------------------------------------ the commands, in a process that finds them
@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, str]:
    """The environment of a process that finds five broken plugins: a benchmark whose import exits, one whose
    module has a syntax error, one that takes CrowS-Pairs' name (which the shipped envelope's rules name), a
    backend that is a function, and a scorer whose import raises."""
    root = tmp_path_factory.mktemp("broken-plugins")
    register(root, "exiting-plugin", {"exiting": "mini_exits:Mini"}, {"mini_exits": "raise SystemExit(1)\n"})
    register(root, "garbled-plugin", {"garbled": "mini_garbles:Mini"}, {"mini_garbles": "def (\n"})
    rival = MINI.format(name="crows_pairs", path="mini/a.csv")
    register(root, "rival-plugin", {"crows_pairs": "mini_rivals:Mini"}, {"mini_rivals": rival})
    register(root, "odd-backend", {"odd": "odd_backend:Odd"}, {"odd_backend": "def Odd():\n    pass\n"}, BACKENDS)
    register(root, "loud-scorer", {"loud": "loud_scorer:Loud"}, {"loud_scorer": "1 / 0\n"}, SCORERS)
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}


def safetyrepro(environment: dict[str, str], folder: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """`safetyrepro ARGS` in a process of its own, run in `folder`."""
    return subprocess.run(
        [sys.executable, "-m", "safetyrepro.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=environment,
        cwd=folder,
    )


def test_a_command_that_needs_none_of_them_warns_once_per_plugin_and_goes_on(installed, tmp_path, data_dir):
    posed = '{"prompt": "Who?", "options": ["He", "She"], "response": "B"}\n'
    parsed = safetyrepro(installed, tmp_path, "parse", "bbq", stdin=posed)
    assert parsed.returncode == 0 and parsed.stdout.endswith('"label": "B"}\n'), parsed.stderr
    config = write_config(tmp_path, data_dir, base="full_envelope_bbq.yaml")  # BBQ: no broken plugin touches it
    checked = safetyrepro(installed, tmp_path, "check", "--plan", "--configfile", str(config))
    assert checked.returncode == 0 and "ok: " in checked.stdout, checked.stderr  # the rule naming crows_pairs too
    for done in (parsed, checked):
        lines = done.stderr.splitlines()
        assert len(lines) == 5 and all(line.startswith("safetyrepro: warning: ") for line in lines), done.stderr
        assert all(line.endswith("(left out: only a config or command that names it is refused)") for line in lines)
        for part in (
            "benchmark plugin 'exiting' (mini_exits:Mini, from exiting-plugin 1.0) cannot be loaded: SystemExit: 1",
            "benchmark plugin 'garbled' (mini_garbles:Mini, from garbled-plugin 1.0) cannot be loaded: SyntaxError: ",
            "benchmark 'crows_pairs' is registered twice: ",
            "backend plugin 'odd' (odd_backend:Odd, from odd-backend 1.0) is not a subclass",
            "scorer plugin 'loud' (loud_scorer:Loud, from loud-scorer 1.0) cannot be loaded: ZeroDivisionError: ",
        ):
            assert sum(part in line for line in lines) == 1, part


LOUD = {"rules": {"tier": "core", "scorer": "rules"}, "loud": {"tier": "core", "scorer": "loud"}}
LOUD_AXIS = {"scorer": {"mechanism": "scorer", "default": "rules", "values": LOUD}}  # an axis naming the broken scorer


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["parse", "exiting"], "benchmark plugin 'exiting' (mini_exits:Mini, from exiting-plugin 1.0) cannot be"),
        (["fetch-data", "--data-dir", "data", "--benchmark", "garbled"], "--benchmark: benchmark plugin 'garbled'"),
        (
            {"benchmarks": {"crows_pairs": {"n_items": 5}}},
            "benchmarks.crows_pairs: benchmark 'crows_pairs' is registered",
        ),
        ({"backend": {"generate": "odd"}}, "backend.generate: backend plugin 'odd' (odd_backend:Odd, from odd-backend"),
        (
            {"envelope": {**ENVELOPE, "axes": {**ENVELOPE["axes"], **LOUD_AXIS}}},
            "envelope.axes.scorer.values.loud.scorer: scorer plugin 'loud' (loud_scorer:Loud, from loud-scorer 1.0)",
        ),
    ],
    ids=["parse", "fetch-data", "a config's benchmark", "a config's backend", "a config's scorer"],
)
def test_what_names_one_is_refused_in_one_line(installed, tmp_path, data_dir, command, message):
    if isinstance(command, dict):
        config = write_config(tmp_path, data_dir, base="full_envelope_bbq.yaml")  # BBQ: no broken plugin touches it
        command = ["check", "--plan", "--configfile", str(with_changes(config, config, **command))]
    refused = safetyrepro(installed, tmp_path, *command)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith(f"safetyrepro: error: {message}") and refused.stderr.count("\n") == 1, (
        refused.stderr
    )
    assert not (tmp_path / "data").exists()
