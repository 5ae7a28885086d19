"""The auditor's search (safetyrepro.audit): on synthetic grids with a planted reversing region, against
a random order; its stopping rules, budget and report; its steps as the workflow runs them; refusals. The
`safetyrepro audit` of docs/audit.md from the root of a clone: tests/end_to_end/test_audit_run.py."""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from helpers.synthetic_audit import (
    REPO,
    Grid,
    additive_grid,
    arranged_grid,
    audit_options,
    compare,
    conjunction_grid,
    default_space,
    paper_space,
    random_order_cells,
    rounded_grid,
    true_majority,
)
from helpers.workflow import write_config

from safetyrepro.audit import (
    CELLS_PER_CONFIG,
    VERDICTS,
    audit_markdown,
    audit_result,
    generation_twins,
    majority_posterior,
    model_cells,
    pair_space,
    search,
    smallest_change,
    step_record,
)
from safetyrepro.cli import main
from safetyrepro.configuration.build import load_settings
from safetyrepro.pipeline.fingerprints import cell_dependencies
from safetyrepro.results.records import fingerprint, record_of, write_record
from safetyrepro.results.storage import cell_file, write_parquet

SPACE = paper_space()
HELD_OUT = range(1000, 1010)
SIGNIFICANCE = load_settings(
    REPO / "config" / "config.yaml"
).analysis.significance  # the prior and rules were chosen on seeds 0-29


DEFAULT_TRUTHFULQA = default_space()


def final_results(space: pd.DataFrame, grid: Grid, budgets: Sequence[int]) -> list[dict]:
    """The audit's result with each budget (cells): the search's state after as many configs as it affords."""
    options = audit_options(max(budgets))
    observed, steps = search(space, grid.observe, options)
    results = []
    for budget in budgets:
        k = min(budget // CELLS_PER_CONFIG, len(observed))
        record = {"benchmark": "truthfulqa", "model_a": "A", "model_b": "B", "decision": steps[k].as_dict()}
        record["observed"] = observed.iloc[:k].reset_index().to_dict("records")
        items = pd.DataFrame(columns=["model", "benchmark", "config_id", "item_id", "correct"])
        results.append(audit_result(space, record, items, options, SIGNIFICANCE))
    return results


def test_the_default_runs_truthfulqa_counts_on_six_cells_give_no_verdict_against_the_grid():
    """The default run's TruthfulQA pair (N+ 1, N- 2, N0 5: the grid says B better) audited with --budget 6,
    wherever its A-better config is: 3 configs cannot settle it, so the audit says undecided (it said "A better
    (posterior probability 0.79)"); with the whole envelope as budget it finds B better."""
    for seed in range(4):
        grid = arranged_grid(DEFAULT_TRUTHFULQA, (1, 2, 5), seed)
        few, everything = final_results(DEFAULT_TRUTHFULQA, grid, [6, 16])
        assert few["majority"] == "undecided" and few["configs_run"] == 3, few
        assert "**undecided** after 3 of 8 configs" in audit_markdown(few)
        assert everything["majority"] == "B better"


def test_with_few_configs_and_many_ties_the_stated_probability_is_not_above_its_coverage():
    """On grids of many ties (differences of 0 to 0.05 rounded to 10 items), audits of 2 to 4 configs mostly
    say undecided (they stated a verdict at any probability, 0.40 included), state one only at 0.95 or more,
    and then as often right as they claim: the mean stated probability is within the 95% Clopper-Pearson band
    of the share right (scripts/measure_audit_calibration.py measures it at length)."""
    results = []
    for seed in range(3000, 3024):
        grid = rounded_grid(DEFAULT_TRUTHFULQA, seed, 0.01 * (seed % 5 - 2), 0.02, 0.02)
        truth = VERDICTS[true_majority(grid)]
        results += [(r, truth) for r in final_results(DEFAULT_TRUTHFULQA, grid, [4, 6, 8])]
    stated = [(r["p_majority"], r["majority"] == truth) for r, truth in results if r["majority"] != "undecided"]
    right = sum(hit for _, hit in stated)
    assert 1 <= len(stated) < len(results) / 2 and min(p for p, _ in stated) >= 0.95
    upper = scipy.stats.beta.ppf(0.975, right + 1, len(stated) - right) if right < len(stated) else 1.0
    assert np.mean([p for p, _ in stated]) <= upper, (right, len(stated))


def test_the_majority_posterior_is_exact_once_every_config_has_run_and_symmetric():
    assert majority_posterior(pd.Series([1, 1, -1, 0]), 4) == {1: 1.0, -1: 0.0, 0: 0.0}
    assert majority_posterior(pd.Series([1, -1]), 2) == {1: 0.0, -1: 0.0, 0: 1.0}
    forward, backward = majority_posterior(pd.Series([1, 0, 0]), 8), majority_posterior(pd.Series([-1, 0, 0]), 8)
    assert forward[1] == pytest.approx(backward[-1]) and sum(forward.values()) == pytest.approx(1.0)
    # one config A better and two ties of eight leave the grid open: no verdict at 0.95
    assert max(forward.values()) < 0.95


@pytest.mark.parametrize("k", [1, 2])
def test_a_planted_reversal_is_found_in_fewer_cells_than_a_random_order_needs(k):
    grids = [additive_grid(SPACE, k, seed) for seed in HELD_OUT]
    result = compare(SPACE, grids, audit_options(CELLS_PER_CONFIG * len(SPACE)))
    assert result["found"] == 1.0 == result["random_found_within_audit_budget"]
    assert result["audit_cells"] < 0.7 * result["random_cells"], result


def test_without_a_reversal_it_stops_early_and_claims_none():
    options = audit_options(CELLS_PER_CONFIG * len(SPACE))
    outcomes = [search(SPACE, additive_grid(SPACE, 0, seed).observe, options) for seed in HELD_OUT[:6]]
    for observed, steps in outcomes:
        assert steps[-1].reason == "no reversal likely", steps[-1]
        assert steps[-1].p_reversal_left < options.stop_probability
        assert steps[-1].p_majority >= 1 - options.stop_probability
        assert len(observed) < len(SPACE) // 2


def test_a_reversal_only_an_interaction_of_axes_makes_is_still_found_mostly():
    """No single axis points at a conjunction region; the additive model finds most of them, and says
    "no reversal likely" (a miss, stated as a model-based claim in its report) for the rest."""
    grids = [conjunction_grid(SPACE, seed) for seed in HELD_OUT]
    result = compare(SPACE, grids, audit_options(CELLS_PER_CONFIG * len(SPACE)))
    assert result["found"] >= 0.6 and set(result["reasons"]) <= {"reversal found", "no reversal likely"}


def test_the_budget_is_never_exceeded():
    grid = additive_grid(SPACE, 1, 7)
    for budget in (2, 3, 7, 10):
        observed, steps = search(SPACE, grid.observe, audit_options(budget))
        assert CELLS_PER_CONFIG * len(observed) <= budget
        assert steps[-1].reason in {"budget spent", "reversal found"}
    observed, steps = search(SPACE, grid.observe, audit_options(2))
    assert list(observed.index) == [SPACE.index[0]] and steps[-1].reason == "budget spent"


def test_a_config_relabelling_a_run_twin_costs_no_cells():
    """Configs that label the first config's responses (a scorer axis) cost nothing once it has run: on a
    budget of one config the search goes on among them, where without twins it stops after the first."""
    grid = additive_grid(SPACE, 1, 7)
    relabelling = list(SPACE.index[1:5])
    twins = dict.fromkeys(relabelling, SPACE.index[0])
    observed, steps = search(SPACE, grid.observe, audit_options(2), twins)
    assert len(observed) > 1 and set(observed.index) <= {SPACE.index[0], *relabelling}
    assert model_cells(observed.index, twins) == 2 and steps[-1].reason != "envelope run"
    # a relabelling config whose twin has not run costs the twin's two cells
    assert model_cells([SPACE.index[5], relabelling[0]], twins) == 4 == model_cells(SPACE.index[4:6], {})
    result = audit_result(
        SPACE,
        step_record(SPACE, "bbq", ("A", "B"), None, pd.DataFrame(), audit_options(2)),
        pd.DataFrame(columns=["benchmark", "model", "config_id"]),
        audit_options(2),
        load_settings(REPO / "config" / "config.yaml").analysis.significance,
        twins,
    )
    assert result["cells_envelope"] == 2 * (len(SPACE) - len(relabelling))


def test_the_default_runs_scorer_configs_are_the_audits_twins():
    """On the default run (config/config.yaml: a scorer axis), XSTest's string-match and learned configs map
    to their generation twins at `rules`, every other config to none; BBQ's configs have no twin."""
    settings = load_settings(REPO / "config" / "config.yaml")
    pair = [model.name for model in settings.models[:2]]
    space = pair_space(settings, "xstest", pair, None)
    twins = generation_twins(settings, "xstest", space, None)
    assert twins and {c.rsplit("-scorer=", 1)[1] for c in twins} == {"strmatch", "learned"}
    assert {twin for twin in twins.values()} <= set(space.index) and not set(twins.values()) & set(twins)
    assert {c.rsplit("-scorer=", 1)[0] for c in twins} == set(twins.values())
    assert generation_twins(settings, "bbq", pair_space(settings, "bbq", pair, None), None) == {}


def audit_jobs(
    tmp_path: Path, data_dir: Path, benchmark: str, on_disk: bool = False, stale: bool = False
) -> tuple[list[str], dict, str]:
    """The audit-step jobs chained as the workflow chains them, then the audit-report job, on the default config
    with a budget of 2 (tests/configs/default_run_audit.yaml; results under tmp_path) with A scoring 0.6 and B 0.4
    everywhere: the configs run, the audit's JSON and its Markdown. A chosen config's cell is written after the step that chose it, as the cell job writes it, with
    its job record; `on_disk`: every cell of the benchmark is there before the audit starts, and `stale`: their
    records name other settings (as after a change of the config)."""
    envelope = REPO / "config" / "envelope_scorers.yaml"  # the default run's
    write_config(tmp_path, data_dir, base="default_run_audit.yaml", envelope=envelope, results_dir=tmp_path / "results")
    settings = load_settings(tmp_path / "config.yaml")
    pair = [model.name for model in settings.models[:2]]

    def write_cells(configs: Iterable[str], when: float, made_with: str | None = None) -> None:
        for model, config_id in itertools.product(pair, configs):
            paths = [
                cell_file(settings.results_dir, model, benchmark, config_id, kind) for kind in ("items", "summary")
            ]
            if stale or not paths[1].exists():  # a stale cell on disk is redone
                for path in paths:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text("{}")
                    os.utime(path, (when, when))
                spec, config = settings.model(model), settings.config(benchmark, config_id)
                made_of = made_with or fingerprint(cell_dependencies(settings, spec, benchmark, config))
                write_record(Path(record_of(str(paths[0]), str(settings.results_dir))), made_of, paths)

    clock = time.time() - 3600  # each step's record at clock, the cells of the config it chose a second later
    if on_disk:
        write_cells([c.config_id for c in settings.configs(benchmark)], clock - 60, "other settings" if stale else None)
    common = ["--configfile", str(tmp_path / "config.yaml"), "--benchmark", benchmark, "--pair", *pair]
    records, scores = [], []
    for step in range(len(settings.configs(benchmark)) + 1):
        out = tmp_path / f"step-{step}.json"
        previous = ["--previous", str(records[-1])] if records else []
        cells = ["--cells", str(scores[-1])] if scores else []
        assert main(["audit-step", *common, "--step", str(step), *previous, *cells, "--out", str(out)]) == 0
        records.append(out)
        chosen = json.loads(out.read_text())["decision"]["config_id"]
        if chosen is None:
            break
        os.utime(out, (clock, clock))
        write_cells([chosen], clock + 1)
        clock += 2
        table = pd.DataFrame(
            [{"model": m, "benchmark": benchmark, "config_id": chosen, "score": s} for m, s in zip(pair, (0.6, 0.4))]
        )
        write_parquet(table, tmp_path / f"cells-{step}.parquet")
        scores.append(tmp_path / f"cells-{step}.parquet")
    ran = [row["config_id"] for row in json.loads(records[-1].read_text())["observed"]]
    report = ["audit-report", "--configfile", str(tmp_path / "config.yaml"), "--step", str(records[-1])]
    write_parquet(pd.DataFrame(columns=["benchmark", "model", "config_id"]), tmp_path / "items.parquet")
    report += ["--items", str(tmp_path / "items.parquet")]
    report += ["--json", str(tmp_path / "audit.json"), "--markdown", str(tmp_path / "audit.md")]
    assert main(report) == 0
    return ran, json.loads((tmp_path / "audit.json").read_text()), (tmp_path / "audit.md").read_text()


def test_the_audit_jobs_count_the_default_runs_relabelling_as_free(tmp_path, data_dir, monkeypatch):
    """The audit-step and audit-report jobs on the default run's XSTest (a scorer axis) with a budget of
    one config: after T1, they choose T1's string-match and learned relabellings (their twin has run) and
    count 2 cells."""
    monkeypatch.chdir(REPO)  # the default config's resources_dir is relative to the repository root
    ran, result, _ = audit_jobs(tmp_path, data_dir, "xstest")
    assert ran[0] == "T1-greedy-0shot-freeform"
    assert sorted(ran[1:]) == ["T1-greedy-0shot-freeform-scorer=learned", "T1-greedy-0shot-freeform-scorer=strmatch"]
    assert result["stopped"] == "budget spent"
    generating = [
        c for c in load_settings(REPO / "config" / "config.yaml").configs("xstest") if "-scorer=" not in c.config_id
    ]
    assert result["cells_run"] == 2 == result["cells_read"] and result["cells_envelope"] == 2 * len(generating)


def test_cells_already_on_disk_cost_the_budget_nothing_as_a_relabelling_does(tmp_path, data_dir, monkeypatch):
    """The budget counts the cells the audit runs: on a finished run (every cell on disk) a budget of one
    config does not stop the audit after one config ("budget spent after 6 of 16 cells" before), and the
    printed line says how many cells it read, ran and found."""
    monkeypatch.chdir(REPO)
    ran, result, markdown = audit_jobs(tmp_path, data_dir, "truthfulqa", on_disk=True)
    assert len(ran) > 1 and result["stopped"] != "budget spent"
    assert result["cells_run"] == 0 and result["cells_read"] == 2 * len(ran)
    assert (
        f"which read {2 * len(ran)} of the envelope's 16 model cells: 0 run by the audit (budget 2), {2 * len(ran)} already on disk"
        in markdown
    )
    # the same audit with nothing on disk runs its cells, within the budget
    ran, result, markdown = audit_jobs(tmp_path / "fresh", data_dir, "truthfulqa")
    assert ran == ["T1-greedy-0shot-freeform"] and result["stopped"] == "budget spent" and result["cells_run"] == 2
    assert "which read 2 of the envelope's 16 model cells: 2 run by the audit (budget 2), 0 already on disk" in markdown
    # cells on disk whose records name other settings are redone by the run: they cost as if absent
    stale = audit_jobs(tmp_path / "stale", data_dir, "truthfulqa", on_disk=True, stale=True)
    assert stale[0] == ran and stale[1]["cells_run"] == 2 and stale[1]["stopped"] == "budget spent"


def test_the_workflows_steps_make_the_searchs_choices():
    """Step records chained as the audit_step jobs chain them (each reading the previous record and
    the chosen config's cells) choose exactly what the in-process search chooses."""
    grid = additive_grid(SPACE, 2, 3)
    options = audit_options(40)
    observed, steps = search(SPACE, grid.observe, options)
    record, records = None, []
    while record is None or record["decision"]["config_id"]:
        chosen = record["decision"]["config_id"] if record else None
        scores = pd.DataFrame(
            [
                {"model": m, "benchmark": "truthfulqa", "config_id": chosen, "score": s}
                for m, s in zip("AB", grid.observe(chosen))
            ]
            if chosen
            else [],
            columns=["model", "benchmark", "config_id", "score"],
        )
        record = step_record(SPACE, "truthfulqa", ("A", "B"), record, scores, options)
        records.append(json.loads(json.dumps(record)))  # as written to and read from disk
    assert [r["decision"]["config_id"] for r in records] == [s.config_id for s in steps]
    assert [r["config_id"] for r in records[-1]["observed"]] == list(observed.index)


def test_smallest_change_is_the_run_pair_apart_on_fewest_axes():
    space = SPACE.loc[
        ["T1-greedy-0shot-freeform", "T2-t0.7-5shot-freeform", "T3-greedy-0shot-logprob", "T1-greedy-0shot-logprob"]
    ]
    observed = pd.DataFrame(
        {"score_a": [0.6, 0.6, 0.4, 0.5], "score_b": [0.5, 0.5, 0.5, 0.55]}, index=space.index
    )  # A better on the first two; B better on the last two
    change = smallest_change(space, observed, majority=1)
    assert change == {
        "from": "T1-greedy-0shot-freeform",
        "to": "T1-greedy-0shot-logprob",
        "n_axes": 1,
        "changes": {"scoring": ["freeform", "logprob"]},
    }
    assert smallest_change(space.iloc[:2], observed.iloc[:2], majority=1) is None


def test_auditing_b_against_a_runs_the_same_configs():
    for seed in HELD_OUT[:4]:
        grid = additive_grid(SPACE, 2, seed)
        forward, _ = search(SPACE, grid.observe, audit_options(96))
        backward, _ = search(SPACE, lambda c, grid=grid: grid.observe(c)[::-1], audit_options(96))
        assert list(forward.index) == list(backward.index)


def test_a_split_envelope_has_no_majority_and_every_strict_config_reverses():
    """N+ = N- over the whole envelope: "envelope run", no majority, both sides listed as reversing (as the
    figures do); an axis named like a report field stays under `axes`."""
    space = SPACE.iloc[:5].rename(columns={"shots": "score_a"})
    diff = dict(zip(space.index, [0.1, -0.1, 0.1, -0.1, 0.0]))
    observed, steps = search(space, lambda c: (0.5 + diff[c], 0.5), audit_options(96))
    assert len(observed) == 5 and steps[-1].reason == "envelope run" and steps[-1].majority == 0
    record = {"benchmark": "truthfulqa", "model_a": "A", "model_b": "B", "decision": steps[-1].as_dict()}
    record["observed"] = observed.reset_index().to_dict("records")
    items = pd.DataFrame(columns=["model", "benchmark", "config_id", "item_id", "correct"])
    result = audit_result(
        space, record, items, audit_options(96), load_settings(REPO / "config" / "config.yaml").analysis.significance
    )
    assert sorted(row["config_id"] for row in result["reversing"]) == sorted(space.index[:4])
    assert {row["score_a"] for row in result["reversing"]} == {0.6, 0.4} and "score_a" in result["reversing"][0]["axes"]
    assert "no majority" in audit_markdown(result)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--pair", "gemma-270m-fp32", "gemma-270m-fp32", "--benchmark", "bbq"], "--pair: give two different models"),
        (["--pair", "gemma-270m-fp32", "gpt-4", "--benchmark", "bbq"], "--pair: no model named 'gpt-4'"),
        (
            ["--pair", "gemma-270m-fp32", "gemma-270m-bf16", "--benchmark", "mmlu"],
            "--benchmark: 'mmlu' is not a benchmark",
        ),
    ],
)
def test_an_audit_of_a_pair_or_benchmark_the_run_lacks_is_refused(argv, message, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert main(["audit", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_random_order_cells_is_the_rank_of_the_first_reversing_config():
    grid = additive_grid(SPACE, 3, 0)
    rng = np.random.default_rng(0)
    expected = CELLS_PER_CONFIG * (len(SPACE) + 1) / (len(grid.reversing) + 1)
    assert np.mean([random_order_cells(grid, rng) for _ in range(4000)]) == pytest.approx(expected, rel=0.05)
