"""Configs and envelopes built in memory for the tests that load settings without running them: the
repository's envelope with more axes, the case study's section, the scorer axis."""

from __future__ import annotations

import copy

import yaml

from helpers.session import REPO
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.loading import read_yaml

ENVELOPE = yaml.safe_load((REPO / "config" / "envelope.yaml").read_text())


BENCHMARKS = ["truthfulqa", "bbq", "crows_pairs", "toxigen", "xstest"]


def make_config(data_dir, **changes) -> dict:
    config = {
        "data_dir": str(data_dir),
        "models": [{"name": "a", "path": "org/a"}, {"name": "b", "path": "org/b"}],
        "benchmarks": {b: {"n_items": 10} for b in BENCHMARKS},
        "envelope": copy.deepcopy(ENVELOPE),
    }
    config.update(changes)
    return config


ORDER = {
    "mechanism": "option_order",
    "default": "given",
    "values": {
        "given": {"tier": "core", "order": "as_given"},
        "reversed": {"tier": "core", "order": "reversed"},
        "shuffled": {"tier": "core", "order": "shuffled", "seed": 3},
    },
}


def envelope_with(**declared) -> dict:
    """The repository's envelope with more axes; a template variable's placeholder goes at the head
    of every template text."""
    envelope = copy.deepcopy(ENVELOPE)
    for name, axis in declared.items():
        envelope["axes"][name] = copy.deepcopy(axis)
        if axis["mechanism"] == "template_variable":
            for template in envelope["axes"]["template"].values():
                for key in ("text", "logprob_text"):
                    if key in template:
                        template[key] = "{" + name + "}" + template[key]
    return envelope


def settings_with(data_dir, n_items=10, **declared):
    return load_settings(make_config(data_dir, envelope=envelope_with(**declared), **benchmark_items(n_items)))


def benchmark_items(n_items):
    return {"benchmarks": {b: {"n_items": n_items} for b in BENCHMARKS}}


STUDY = read_yaml(REPO / "config" / "case_study.yaml")["case_study"]


SCORER = {
    "mechanism": "scorer",
    "default": "ours",
    "values": {"ours": {"tier": "core", "scorer": "rules"}, "authors": {"tier": "core", "scorer": "strmatch"}},
}


GENERATED, RESCORED = "T1-greedy-0shot-freeform", "T1-greedy-0shot-freeform-scorer=authors"


def edit_code(monkeypatch, module: str) -> None:
    """Have the code digests read `module` (under the package) as edited, until `monkeypatch.undo()`."""
    from safetyrepro.pipeline import fingerprints

    code_of, edited = fingerprints._code_of, f"{fingerprints.PACKAGE}.{module}"
    monkeypatch.setattr(fingerprints, "_code_of", lambda name: code_of(name) + ("#" if name == edited else ""))
