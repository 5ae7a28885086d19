"""Configs and envelopes built in memory for the tests that load settings without running them: the
repository's envelope with more axes, the case study's section, the scorer and option-order axes (read from the
envelope files of the runs, tests/configs/envelopes)."""

from __future__ import annotations

import copy

import yaml

from helpers.session import REPO
from helpers.workflow import ENVELOPES
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.loading import read_yaml, with_bases

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


def envelope_axis(file: str, name: str) -> dict:
    """An axis of an envelope file of tests/configs/envelopes (the runs' own), as its layers (`extends`) give it."""
    path = ENVELOPES / file
    return with_bases(read_yaml(path), str(path), str(path.parent))[0]["axes"][name]


ORDER = envelope_axis("option_order.yaml", "order")


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


def case_study_settings(data_dir, study=None, **benchmarks):
    """Settings of two hub models (bf16, nf4) on TruthfulQA and BBQ (or `benchmarks`), with the case study's
    section `study` if given."""
    raw = {
        "data_dir": str(data_dir),
        "models": [
            {"name": "bf16", "path": "org/a", "precision": "bf16"},
            {"name": "nf4", "path": "org/b", "precision": "nf4"},
        ],
        "benchmarks": benchmarks or {"truthfulqa": {"n_items": 5}, "bbq": {"n_items": 5}},
        "envelope": str(REPO / "config" / "envelope.yaml"),
        "subset": {"seed": 7, "fewshot_pool": 5},
    }
    if study is not None:
        raw["case_study"] = study
    return load_settings(raw)


SCORER = envelope_axis("authors_scorer.yaml", "scorer")


GENERATED, RESCORED = "T1-greedy-0shot-freeform", "T1-greedy-0shot-freeform-scorer=authors"
LEARNED_CELL = "T1-greedy-0shot-freeform-scorer=learned"


def edit_code(monkeypatch, module: str) -> None:
    """Have the code digests read `module` (under the package) as edited, until `monkeypatch.undo()`."""
    from safetyrepro.pipeline import fingerprints

    code_of, edited = fingerprints._code_of, f"{fingerprints.PACKAGE}.{module}"
    monkeypatch.setattr(fingerprints, "_code_of", lambda name: code_of(name) + ("#" if name == edited else ""))
