"""A budgeted run's rounds (safetyrepro.estimation): the first round takes every axis value, later rounds go where
the verdicts are least known, they stop at the budget or the target width, and a raised budget replays the same
rounds. Their coverage on synthetic grids is measured by scripts/measure_grid_model.py --rounds (docs/estimation.md)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers.session import REPO

from safetyrepro.analysis.grid_model import space_of
from safetyrepro.benchmarks import DataError
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.estimation import budget_summary, choose_configs, estimate_of_cells, initial_design, round_record
from safetyrepro.pipeline.plan import budget_plan_line
from safetyrepro.results.markdown import budget_line

MODELS = ("qwen2.5-7b-instruct", "mistral-7b-instruct-v0.3", "yi-1.5-9b-chat")  # config/paper.yaml's


def budgeted(tmp_path, name: str = "budget.yaml", **estimate):
    """The settings of config/paper.yaml with this `estimate` section."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"extends": str(REPO / "config" / "paper.yaml"), "estimate": estimate}))
    return load_settings(path)


def scores_of(grid: pd.DataFrame, configs: list[str]) -> pd.DataFrame:
    """Cell scores (model, config_id, score, n_items, n_seeds) of these configs of a configs x models grid."""
    rows = [
        {"model": m, "config_id": c, "score": float(grid.at[c, m]), "n_items": 10, "n_seeds": 1}
        for c in configs
        for m in grid.columns
    ]
    return pd.DataFrame(rows, columns=["model", "config_id", "score", "n_items", "n_seeds"])


def grid_with_unsure_template(space: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Three models on a 1/10 lattice, where A leads B by 0.3 except under template T4, where they differ by a
    coin toss; C trails both by 0.3."""
    rng = np.random.default_rng(seed)
    base = rng.integers(3, 6, len(space)) / 10
    t4 = (space["template"] == "T4").to_numpy()
    a = base + np.where(t4, rng.choice([-0.1, 0.1], len(space)), 0.3)
    return pd.DataFrame({MODELS[0]: a, MODELS[1]: base, MODELS[2]: base - 0.3}, index=space.index).clip(-1, 1)


def play(settings, grid: pd.DataFrame, benchmark: str = "truthfulqa") -> list[dict]:
    """Every round of a benchmark on a known grid, as the workflow runs them."""
    records, previous = [], None
    while True:
        chosen = previous["decision"]["configs"] if previous else []
        record = round_record(settings, benchmark, len(records), previous, scores_of(grid, chosen))
        records.append(record)
        if not record["decision"]["configs"]:
            return records
        previous = record


def test_the_first_round_takes_every_axis_value_in_as_few_configs_as_it_can():
    space = space_of(load_settings(REPO / "config" / "paper.yaml").configs("truthfulqa"))
    order, covering = initial_design(space, np.random.default_rng(5))
    assert sorted(order) == sorted(space.index) and covering == 4  # four templates: no fewer configs can
    taken = space.loc[order[:covering]]
    assert all(set(taken[axis]) == set(space[axis]) for axis in space.columns)
    assert initial_design(space, np.random.default_rng(5))[0] == order  # the same order from the same seed


def test_rounds_stop_at_the_budget_and_a_raised_budget_replays_them(tmp_path):
    grid = grid_with_unsure_template(space_of(load_settings(REPO / "config" / "paper.yaml").configs("truthfulqa")), 1)
    small = play(budgeted(tmp_path, "small.yaml", budget_share=0.2, round_configs=3), grid)
    large = play(budgeted(tmp_path, "large.yaml", budget_share=0.4, round_configs=3), grid)
    run = [list(dict.fromkeys(row["config_id"] for row in r["observed"])) for r in (small[-1], large[-1])]
    assert [len(r) for r in run] == [9, 19]  # 48 configs: floor(0.2 * 48), floor(0.4 * 48)
    assert run[1][: len(run[0])] == run[0]  # every config of the smaller budget, in the same order
    assert small[-1]["decision"] == {"configs": [], "stopped": "budget"}
    assert [len(r["decision"]["configs"]) for r in small] == [4, 3, 2, 0]  # the first round covers; the last fits
    interval = small[-1]["intervals"][0]
    assert interval["low"] <= interval["rho_flip"] <= interval["high"]


def test_later_rounds_go_where_the_verdicts_are_least_known(tmp_path):
    settings = budgeted(tmp_path, budget_share=0.5, round_configs=4)
    space = space_of(settings.configs("truthfulqa"))
    grid = grid_with_unsure_template(space, 2)
    records = play(settings, grid)
    worthiest = [c for r in records[1:4] for c in r["decision"]["configs"][:2]]  # the other two are drawn at random
    assert all(space.at[c, "template"] == "T4" for c in worthiest), worthiest  # T4: a quarter of the envelope
    run = list(dict.fromkeys(row["config_id"] for row in records[3]["observed"]))
    chosen, _ = choose_configs(space, grid.loc[run], None, 30, np.random.default_rng(0), explore=10)
    assert len(chosen) == 30 and not set(chosen) & set(run)  # never a config already run


def test_rounds_stop_early_once_every_interval_is_narrow_enough(tmp_path):
    settings = budgeted(tmp_path, budget_share=1.0, round_configs=4, target_width=0.5)
    space = space_of(settings.configs("truthfulqa"))
    grid = pd.DataFrame({m: 0.9 - 0.3 * k for k, m in enumerate(MODELS)}, index=space.index)  # never a reversal
    records = play(settings, grid)
    assert records[-1]["decision"]["stopped"] == "target_width"
    assert len(records[-1]["observed"]) < len(MODELS) * len(space)
    assert max(r["high"] - r["low"] for r in records[-1]["intervals"]) <= 0.5


def test_a_round_names_a_cell_without_a_score_in_one_line(tmp_path):
    settings = budgeted(tmp_path, budget_share=0.25)
    first = round_record(settings, "truthfulqa", 0, None, scores_of(pd.DataFrame(), []))
    chosen = first["decision"]["configs"]
    grid = pd.DataFrame(0.5, index=chosen, columns=MODELS)
    scores = scores_of(grid, chosen)
    with pytest.raises(DataError, match=rf"cell {MODELS[2]}/truthfulqa/{chosen[-1]}: no score"):
        round_record(settings, "truthfulqa", 1, first, scores.iloc[:-1])


def test_the_budget_section_is_checked_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"budget_share \(0.2\) and budget_cells \(10\) both set: give one"):
        budgeted(tmp_path, budget_share=0.2, budget_cells=10)
    path = tmp_path / "selected.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "extends": str(REPO / "config" / "paper.yaml"),
                "estimate": {"budget_share": 0.5},
                "select_configs": [
                    "T1-greedy-0shot-freeform",
                    "T2-greedy-0shot-freeform",
                    "T1-greedy-0shot-logprob",
                    "T2-greedy-0shot-logprob",
                ],
            }
        )
    )
    with pytest.raises(ConfigError, match="select_configs fixes them"):
        load_settings(path)
    cells = budgeted(tmp_path, budget_cells=153)  # a quarter of the 612 cells
    assert [cells.budget_configs(b) for b in cells.benchmarks] == [12, 12, 3, 12, 12]


def test_the_budget_a_run_carries_counts_its_cells_and_names_why_each_benchmark_stopped(tmp_path):
    settings = budgeted(tmp_path, budget_share=0.25)
    records = [
        {
            "benchmark": b,
            "round": 2,
            "envelope_configs": len(settings.configs(b)),
            "observed": [{"config_id": c.config_id} for c in settings.configs(b)[:2]],
            "decision": {"configs": [], "stopped": "budget"},
        }
        for b in settings.benchmarks
    ]
    cells, budget = budget_summary(settings, records)
    assert len(cells) == budget["cells_run"] == 3 * 2 * 5 and budget["cells"] == 612
    assert budget["rule"] == "budget_share: 0.25"
    assert budget["benchmarks"]["crows_pairs"] == {
        "configs_run": 2,
        "configs": 12,
        "rounds": 2,
        "stopped": "the budget is spent",
    }
    with pytest.raises(ConfigError, match="every benchmark"):
        budget_summary(settings, records[1:])


def test_a_new_few_shot_draw_is_estimated_on_the_configs_it_changes(tmp_path):
    """A few-shot draw changes nothing at 0 shots, where B leads A; with shots, A leads B on either draw. At a new
    draw (which changes only the configs with shots) A is ahead on all of them."""
    envelope = tmp_path / "envelope.yaml"
    draw = {"first": {"tier": "core", "draw": "pool_order"}, "drawn": {"tier": "core", "draw": "shuffled", "seed": 1}}
    envelope.write_text(
        yaml.safe_dump(
            {
                "extends": str(REPO / "config" / "envelope.yaml"),
                "axes": {"shot_draw": {"mechanism": "few_shot_draw", "default": "first", "values": draw}},
            }
        )
    )
    overlay = {"extends": str(REPO / "config" / "paper.yaml"), "envelope": str(envelope)}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(overlay))
    settings = load_settings(tmp_path / "config.yaml")
    configs = settings.envelope.configs("truthfulqa")
    rows = [
        {"model": m, "benchmark": "truthfulqa", "config_id": c.config_id, "n_items": 10, "n_seeds": 1}
        | {"score": (score := 0.5 + (lead if m == MODELS[0] else 0.0)), "seed_scores": json.dumps({"0": score})}
        for c in configs
        for m in MODELS[:2]
        for lead in [-0.3 if c.shots == "0" else 0.2]
    ]
    _, _, new_values, _ = estimate_of_cells(settings, pd.DataFrame(rows), 0, tmp_path / "cells.parquet")
    (row,) = new_values[new_values["axis"] == "shot_draw"].itertuples()
    assert row.n_values == 2 and row.share_a_ahead == 1.0 and row.p_a_ahead > 0.8  # at 0 shots too: 0.67, 0.59


def test_the_budget_names_the_twin_cells_run_for_the_responses_its_rescored_configs_relabel(tmp_path):
    """XSTest's rounds chose two configs relabelling T1-greedy-0shot-freeform's responses, not that config: its
    cells run too (the rescored cells' input), outside the budget, and every table's first line says so."""
    overlay = {
        "extends": str(REPO / "config" / "paper.yaml"),
        "envelope": str(REPO / "config" / "envelope_scorers.yaml"),
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(overlay | {"estimate": {"budget_share": 0.25}}))
    settings = load_settings(tmp_path / "config.yaml")
    rescored = ["T1-greedy-0shot-freeform-scorer=strmatch", "T1-greedy-0shot-freeform-scorer=learned"]
    records = [
        {
            "benchmark": b,
            "round": 1,
            "envelope_configs": len(settings.configs(b)),
            "observed": [{"config_id": c} for c in (rescored if b == "xstest" else [settings.configs(b)[0].config_id])],
            "decision": {"configs": [], "stopped": "budget"},
        }
        for b in settings.benchmarks
    ]
    assert budget_plan_line(settings).endswith(
        "; a chosen config that relabels its twin's responses (scorer axis) runs the twin's cells too, outside the "
        "budget, where the rounds did not choose it"
    )
    assert "relabels" not in budget_plan_line(budgeted(tmp_path, budget_share=0.25))  # no scorer axis
    cells, budget = budget_summary(settings, records)
    assert len(cells) == budget["cells_run"] == 3 * (4 + 2) and budget["twin_cells"] == 3
    assert budget_line(budget) == (
        "Estimated from 18 of 828 cells (estimate: budget_share: 0.25; 3 more cells ran outside it, for the "
        "responses its rescored configs relabel)"
    )


def test_a_config_of_imports_takes_the_estimate_defaults_and_refuses_a_budget_in_one_line(tmp_path):
    """The effective config a run writes for its jobs holds the schema's defaults, `estimate` among them: a config of
    imports must load from it, as its import job does; a budget in it is refused."""
    source = {"imports": [{"kind": "table", "path": str(tmp_path / "scores.csv")}]}
    (tmp_path / "scores.csv").write_text("model,benchmark,config_id,score\n")
    effective = tmp_path / "effective.yaml"
    effective.write_text(yaml.safe_dump(source | {"estimate": {"round_configs": 4, "seed": 0}}))
    assert not load_settings(effective).budgeted
    budget = tmp_path / "budget.yaml"
    budget.write_text(yaml.safe_dump(source | {"estimate": {"budget_share": 0.5}}))
    with pytest.raises(ConfigError, match=r"^estimate.budget_share: a config with `imports` analyses results produced"):
        load_settings(budget)
