"""The analysis suite the workflow runs, on a synthetic grid the size of the paper's."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml
from synthetic_cells import MODELS, synthetic_cells, synthetic_items

from safetyrepro.analysis.suite import ANALYSES, Inputs
from safetyrepro.config import load_settings
from safetyrepro.report import analysis_markdown, summary_markdown

REPO = Path(__file__).resolve().parents[1]
ENVELOPE = yaml.safe_load((REPO / "config" / "envelope.yaml").read_text())


def settings_for(data_dir, envelope=ENVELOPE, models=None):
    return load_settings(
        {
            "data_dir": str(data_dir),
            "models": models or [{"name": m, "path": f"org/{m}"} for m in MODELS],
            "benchmarks": {b: {"n_items": 300} for b in ("truthfulqa", "bbq", "toxigen", "xstest", "crows_pairs")},
            "envelope": copy.deepcopy(envelope),
            "analysis": {
                "conservative_core": ["T1-greedy-0shot-freeform", "T1-greedy-0shot-logprob"],
                "subsample": {"count": 5},
                "bootstrap": {"resamples": 200},
            },
        }
    )


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, data_dir):
    cells = synthetic_cells(0)
    path = tmp_path_factory.mktemp("items") / "items.parquet"
    synthetic_items(cells, n_items=60).to_parquet(path)
    return Inputs(settings_for(data_dir), cells, str(path))


def test_stress_values_come_from_the_envelope_tags(data_dir):
    assert settings_for(data_dir).envelope.stress_values() == [("template", "T4"), ("decoding", "t0.7")]
    envelope = copy.deepcopy(ENVELOPE)
    envelope["axes"]["shots"]["5"]["tier"] = "stress"
    assert ("shots", "5") in settings_for(data_dir, envelope).envelope.stress_values()


def test_every_analysis_runs_on_a_612_cell_grid(inputs):
    tables = {}
    for name, analysis in ANALYSES.items():
        table = analysis.run(inputs)
        assert isinstance(table, pd.DataFrame), name
        assert name == "precision" or len(table) > 0, name  # no model appears at two precisions here
        assert analysis_markdown(name, analysis.description, table).startswith(f"# {name}\n")
        tables[name] = table
    variants = set(tables["tiers"]["variant"])
    assert {"full", "core"} <= variants and len(variants) == 4
    assert set(tables["scoring_paths"]["variant"]) == {"freeform", "logprob"}
    assert set(tables["variance"]["benchmark"]) == {"truthfulqa", "bbq", "toxigen", "xstest"}
    from safetyrepro.analysis.flips import rho_flip_table

    summary = summary_markdown(rho_flip_table(inputs.cells), inputs.cells, tables)
    assert summary.count("\n| ") == 1 + 5  # header + one row per benchmark
    assert "n/a" not in summary.split("crows_pairs")[0]


def test_precision_pairs_in_the_suite(inputs, data_dir):
    cells = inputs.cells.replace({"model": {"model-a": "m-bf16", "model-b": "m-nf4"}})
    models = [
        {"name": "m-bf16", "path": "org/m", "precision": "bf16"},
        {"name": "m-nf4", "path": "org/m", "precision": "nf4"},
        {"name": "model-c", "path": "org/c"},
    ]
    table = ANALYSES["precision"].run(Inputs(settings_for(data_dir, models=models), cells, inputs.items_path))
    differences = table[table["table"] == "differences"]
    assert len(differences) == 5 and (differences["n_configs"] > 0).all()
