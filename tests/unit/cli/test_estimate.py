"""`safetyrepro estimate`: the grid model's estimates over a config's envelope from the cells a run has, and one
line for what it cannot read."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from helpers.session import cli

from safetyrepro.configuration.build import load_settings
from safetyrepro.results.storage import write_parquet

MODELS = ("qwen2.5-7b-instruct", "mistral-7b-instruct-v0.3", "yi-1.5-9b-chat")  # config/paper.yaml's


def paper_cells(n_configs: int, seed: int = 0) -> pd.DataFrame:
    """Cells of the paper's three models on the first `n_configs` TruthfulQA configs: 10 items, a seed per greedy
    config and five per sampled one, each seed's score a multiple of 1/10 and the cell's their mean."""
    settings = load_settings("config/paper.yaml")
    configs = settings.envelope.configs("truthfulqa")[:n_configs]
    rng = np.random.default_rng(seed)
    rows = []
    for config in configs:
        seeds = len(settings.envelope.seeds_for(config))
        for model in MODELS:
            per_seed = {str(seed): rng.integers(0, 11) / 10 for seed in range(seeds)}
            score = float(np.mean(list(per_seed.values())))
            rows.append({"model": model, "benchmark": "truthfulqa", "config_id": config.config_id, "score": score})
            rows[-1].update(n_items=10, n_seeds=seeds, seed_scores=json.dumps(per_seed))
    return pd.DataFrame(rows)


def test_estimate_states_how_many_configs_ran_and_gives_every_pair_and_quantile(tmp_path):
    path = tmp_path / "cells.parquet"
    write_parquet(paper_cells(12), path)
    result = cli("estimate", "--configfile", "config/paper.yaml", "--cells", str(path))
    assert result.returncode == 0, result.stderr
    assert "## truthfulqa\n\nEstimated from 12 of 48 configs." in result.stdout
    pairs = re.findall(r"^\| (\S+) \| (\S+) \| 12 \| ([0-9.]+) \| ([0-9.-]+) to ([0-9.-]+) \|", result.stdout, re.M)
    assert len(pairs) == 3
    assert all(0 <= float(low) <= float(rho) <= float(high) <= 24 / 48 for _, _, rho, low, high in pairs)
    quantiles = re.findall(r"^\| (\S+) \| (\d+)% \| ([0-9.]+) \| ([0-9.-]+) to ([0-9.-]+) \|", result.stdout, re.M)
    assert [(model, q) for model, q, *_ in quantiles] == [(m, q) for m in MODELS for q in ("5", "25", "50", "75", "95")]
    assert all(0 <= float(low) <= float(score) <= float(high) <= 1 for *_, score, low, high in quantiles)


def test_estimate_says_in_one_line_what_it_cannot_read(tmp_path):
    missing = cli("estimate", "--configfile", "config/paper.yaml", "--cells", str(tmp_path / "none.parquet"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert (
        missing.stderr.startswith("safetyrepro: error: --cells: no cells table at") and missing.stderr.count("\n") == 1
    )
    cells = paper_cells(4).replace({"config_id": {"T1-greedy-0shot-freeform": "T9-greedy-0shot-freeform"}})
    write_parquet(cells, tmp_path / "cells.parquet")
    outside = cli("estimate", "--configfile", "config/paper.yaml", "--cells", str(tmp_path / "cells.parquet"))
    assert outside.returncode == 2
    assert outside.stderr == (
        "safetyrepro: error: --cells: config(s) outside this config's envelope of truthfulqa: T9-greedy-0shot-freeform\n"
    )


def test_estimate_of_one_model_gives_its_quantiles(tmp_path):
    cells = paper_cells(6)
    write_parquet(cells[cells["model"] == MODELS[0]], tmp_path / "cells.parquet")
    result = cli("estimate", "--configfile", "config/paper.yaml", "--cells", str(tmp_path / "cells.parquet"))
    assert result.returncode == 0, result.stderr
    assert "Estimated from 6 of 48 configs." in result.stdout and "| A | B |" not in result.stdout
    assert len(re.findall(rf"^\| {MODELS[0]} \| \d+% \|", result.stdout, re.M)) == 5


def test_estimate_refuses_cells_it_cannot_estimate_from_in_one_line(tmp_path):
    """A config id of another benchmark's envelope, cells of a benchmark the config does not run (beside one it
    does: skipping them would hide them), and an imports config."""
    cells = paper_cells(4)
    crows = pd.concat([cells, cells.assign(benchmark="crows_pairs")])  # CrowS-Pairs: log-likelihood configs only
    write_parquet(crows, tmp_path / "crows.parquet")
    write_parquet(pd.concat([cells, cells.assign(benchmark="mmlu")]), tmp_path / "mmlu.parquet")
    (tmp_path / "imports.yaml").write_text(f"imports: [{{kind: table, path: {tmp_path / 'any.csv'}}}]\n")
    runs = {
        "crows": cli("estimate", "--configfile", "config/paper.yaml", "--cells", str(tmp_path / "crows.parquet")),
        "mmlu": cli("estimate", "--configfile", "config/paper.yaml", "--cells", str(tmp_path / "mmlu.parquet")),
        "imports": cli(
            "estimate", "--configfile", str(tmp_path / "imports.yaml"), "--cells", str(tmp_path / "crows.parquet")
        ),
    }
    for run in runs.values():
        assert run.returncode == 2 and run.stderr.startswith("safetyrepro: error: ") and run.stderr.count("\n") == 1
        assert run.stdout == ""
    assert "crows_pairs" in runs["crows"].stderr and "T1-greedy-0shot-freeform" in runs["crows"].stderr
    assert "has cells of mmlu, which this config does not run" in runs["mmlu"].stderr
    assert "imports" in runs["imports"].stderr


def test_estimate_refuses_a_negative_seed_in_one_line():
    result = cli("estimate", "--configfile", "config/paper.yaml", "--seed", "-1")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == "safetyrepro: error: --seed: give a whole number 0 or more, not -1\n"


def test_estimate_says_how_each_verdict_carries_to_a_new_template(tmp_path):
    path = tmp_path / "cells.parquet"
    write_parquet(paper_cells(48), path)
    result = cli("estimate", "--configfile", "config/paper.yaml", "--cells", str(path))
    assert result.returncode == 0, result.stderr
    rows = re.findall(
        r"^\| (\S+) \| (\S+) \| template \| 4 \| ([0-9.]+) \| ([0-9.]+) to ([0-9.]+) \|", result.stdout, re.M
    )
    assert [(a, b) for a, b, *_ in rows] == [(a, b) for i, a in enumerate(MODELS) for b in MODELS[i + 1 :]]
    assert all(float(low) <= float(share) <= float(high) for *_, share, low, high in rows)


def test_estimate_reads_the_item_rows_beside_the_cells_for_the_items_component(tmp_path):
    """Without item rows the items component is n/a; with the run's items.parquet beside the cells table, two
    models that answer every item alike differ by no chance from items; a missing --items file or a table that
    is not item rows is one line."""
    cells = paper_cells(6)
    write_parquet(cells, tmp_path / "cells.parquet")
    alone = cli("estimate", "--configfile", "config/paper.yaml", "--cells", str(tmp_path / "cells.parquet"))
    variance = alone.stdout.split("| of | configs run |")[1].strip().splitlines()[2:]
    assert len(variance) == 6 and all(line.split(" | ")[-2] == "n/a" for line in variance)  # items, before seeds
    rows = [
        {"model": m, "benchmark": "truthfulqa", "config_id": c, "item_id": i, "correct": i % 2 == 0}
        for m in MODELS
        for c in cells["config_id"].unique()
        for i in range(10)
    ]
    write_parquet(pd.DataFrame(rows), tmp_path / "items.parquet")
    paired = cli("estimate", "--configfile", "config/paper.yaml", "--cells", str(tmp_path / "cells.parquet"))
    table = paired.stdout.split("| of | configs run |")[1].strip().splitlines()[2:]
    lines = {line.split(" | ")[0][2:]: line.split(" | ") for line in table if " - " in line}
    assert len(lines) == 3 and all(cells[-2] == "0.000" for cells in lines.values())
    assert re.search(rf"^\| {MODELS[0]} \| 6 \|.* \| 0.167 \| ", paired.stdout, re.M)  # sqrt(0.25 x 10/9 / 10)
    missing = cli(
        "estimate",
        "--configfile",
        "config/paper.yaml",
        "--cells",
        str(tmp_path / "cells.parquet"),
        "--items",
        str(tmp_path / "no.parquet"),
    )
    assert (
        missing.returncode == 2
        and missing.stderr == f"safetyrepro: error: --items: no item rows at {tmp_path / 'no.parquet'}\n"
    )
    wrong = cli(
        "estimate",
        "--configfile",
        "config/paper.yaml",
        "--items",
        str(tmp_path / "cells.parquet"),
        "--cells",
        str(tmp_path / "cells.parquet"),
    )
    assert wrong.returncode != 0 and wrong.stderr.count("\n") == 1 and "no column item_id, correct" in wrong.stderr


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"n_items": 0}, "n_items is 0, not a whole number of items (1 or more)"),
        ({"seed_scores": "{bad"}, "seed_scores is '{bad', not a JSON object of seed -> score"),
        ({"seed_scores": '{"0": "high"}'}, """seed_scores is '{"0": "high"}', not a JSON object of seed -> score"""),
    ],
)
def test_estimate_names_the_first_cell_it_cannot_read_in_one_line(tmp_path, change, message):
    cells = paper_cells(4)
    cells.loc[5, list(change)] = list(change.values())
    write_parquet(cells.astype({"n_items": "Int64"}), tmp_path / "cells.parquet")
    result = cli("estimate", "--configfile", "config/paper.yaml", "--cells", str(tmp_path / "cells.parquet"))
    row = cells.loc[5]
    where = f"{tmp_path / 'cells.parquet'}: cell {row.model}/truthfulqa/{row.config_id}"
    assert result.returncode != 0 and result.stderr == f"safetyrepro: error: {where}: {message}\n"
