"""A run whose scorer cells (string match, learned head, judge) label their generation twins' responses: no model
of theirs runs, and the scorers analysis compares them and sets them against the human labels."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest
from helpers.envelopes import GENERATED, LEARNED_CELL, RESCORED
from helpers.tiny_model import tiny_model_entries
from helpers.workflow import ENVELOPES, snakemake, write_config

from safetyrepro.benchmarks import BENCHMARKS
from safetyrepro.benchmarks.xstest import LABELLED_FILES
from safetyrepro.benchmarks.xstest.learned import learned_labels, read_head
from safetyrepro.benchmarks.xstest.strmatch import strmatch_label
from safetyrepro.configuration.build import load_settings
from safetyrepro.results.markdown import _scorer_lines


@pytest.mark.slow
@pytest.mark.e2e
def test_a_scorer_cell_labels_its_twins_responses_without_a_model(tmp_path, data_dir, embedded_model_path, monkeypatch):
    """Two tiny models on XSTest and BBQ: the string-match and learned cells (XSTest's only) hold their twins'
    prompts and responses, labelled by the authors' rule and by the learned head (reading with the embedded
    model, from the run's resources_dir), and their logs name no model server. The judge cells (both
    benchmarks) ask a third tiny model as the judge, in two wordings of each benchmark's question (values judged
    and brief; fast enough to be asked about XSTest's 900 labelled completions too, in each; the embedded model
    as a judge: test_judge.py), loaded once by its server for all of them, and give the labels its answers give
    in this process; a second run has nothing to do."""
    from safetyrepro.configuration.settings import item_set
    from safetyrepro.running.judge import judge_labels
    from safetyrepro.running.server import load_backends

    workdir = tmp_path / "run"
    *models, judge_entry = tiny_model_entries([tmp_path / "models" / f"tiny-{i}" for i in range(3)])
    judge_cell = "T1-greedy-0shot-freeform-scorer=judged"
    brief_cell = "T1-greedy-0shot-freeform-scorer=brief"
    config = write_config(
        workdir,
        data_dir,
        models,
        base="scorer_cells.yaml",
        envelope=ENVELOPES / "learned_and_judge_scorers.yaml",
        resources_dir=embedded_model_path.parents[1],
        judges=[{**judge_entry, "name": "referee"}],
    )
    targets = ("results/rho_flip.parquet", "results/analysis/scorers.parquet")
    done = snakemake(workdir, "--cores", "2", *targets, "--resources", "gpu=1")  # between one-value options
    assert done.returncode == 0, done.stderr[-3000:]
    results = workdir / "results"
    items = pd.read_parquet(results / "items.parquet")
    loads = pd.read_csv(results / "logs" / "model_loads.tsv", sep="\t", header=None)[1].tolist()
    assert loads.count("referee") == 1  # one load of the judge serves its eight cells
    monkeypatch.chdir(workdir)
    settings = load_settings(config)
    judge = load_backends(settings, settings.model("referee"))["generate"]
    for model, benchmark in itertools.product(("tiny-0", "tiny-1"), ("xstest", "bbq")):
        rows = items[(items.model == model) & (items.benchmark == benchmark)]
        twin = rows[rows.config_id == GENERATED]
        by_id = {item.item_id: item for item in item_set(settings, benchmark).items}
        replies, cell_items = twin["response"].tolist(), [by_id[i] for i in twin["item_id"]]
        for cell, phrasing, named in (
            (judge_cell, None, "referee"),
            (brief_cell, "brief", "referee (question phrased brief)"),
        ):
            asked = rows[rows.config_id == cell]
            assert asked["response"].tolist() == twin["response"].tolist()
            batch = settings.backend.batch_size
            expected = judge_labels(BENCHMARKS[benchmark], "judge", judge, replies, cell_items, batch, phrasing)
            assert asked["label"].tolist() == expected
            log = (results / "logs" / "cells" / model / benchmark / f"{cell}.log").read_text()
            assert f"judge {named} labels the responses of {GENERATED}" in log
            no_text = sum(not (isinstance(reply, str) and reply.strip()) for reply in replies)
            counts = f"judge: {len(replies)} replies; {no_text} without text (unparsed, not asked); "
            assert counts in log and f"; {expected.count('unparsed') - no_text} replies unparsed, their answer" in log
    again = snakemake(workdir, "--cores", "2", *targets, "--resources", "gpu=1", "--dry-run")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    for model in ("tiny-0", "tiny-1"):
        rows = items[(items.model == model) & (items.benchmark == "xstest")].set_index(["item_id", "seed"])
        twin = rows[rows.config_id == GENERATED]
        expected = {
            RESCORED: ("strmatch", [strmatch_label(r) for r in twin["response"]]),
            LEARNED_CELL: ("learned", learned_labels(twin["response"].tolist(), embedded_model_path)),
        }
        for config_id, (scorer, labels) in expected.items():
            rescored = rows[rows.config_id == config_id]
            assert len(twin) == len(rescored) == 6
            rescored = rescored.loc[twin.index]
            assert rescored["response"].tolist() == twin["response"].tolist()
            assert rescored["prompt_id"].tolist() == twin["prompt_id"].tolist()
            assert rescored["label"].tolist() == labels
            log = (results / "logs" / "cells" / model / "xstest" / f"{config_id}.log").read_text()
            assert f"{scorer} labels the responses of {GENERATED}" in log and "server" not in log
    cells = pd.read_parquet(results / "cells.parquet")
    assert set(cells[cells.benchmark == "bbq"].config_id) == {
        GENERATED,
        judge_cell,
        brief_cell,
        "T1-greedy-0shot-logprob",
    }
    rho = pd.read_parquet(results / "rho_flip.parquet")
    assert set(rho.benchmark) == {"xstest", "bbq"}
    assert rho[rho.benchmark == "xstest"]["n_configs"].iloc[0] == 6
    scorers = pd.read_parquet(results / "analysis" / "scorers.parquet")
    reversals = scorers[scorers.table == "reversals"]
    values = ["ours", "authors", "brief", "judged", "learned"]  # the default, then the others by name
    pairs = [list(pair) for pair in itertools.combinations(values, 2)]
    assert reversals[["benchmark", "scorer_a", "scorer_b", "n_twins"]].values.tolist() == [
        *(["bbq", *pair, 1] for pair in (["ours", "brief"], ["ours", "judged"], ["brief", "judged"])),
        *(["xstest", *pair, 1] for pair in pairs),
    ]
    agreement = scorers[scorers.table == "agreement"]
    assert agreement["n_rows"].tolist() == [8] * 3 + [12] * 10  # 2 models x 4 or 6 items, one seed, per pair
    by_value = scorers[scorers.table == "by_value"].set_index(["benchmark", "scorer_value"])
    for (benchmark, value), row in by_value.iterrows():  # rho_flip over each value's configs: one config here
        scores = cells[(cells.benchmark == benchmark) & (cells.scorer == value) & (cells.scoring == "freeform")]
        assert row["n_configs"] == 1 and row["rho_flip"] == 0 and len(scores) == 2, (benchmark, value)
    assert sorted(by_value.loc["bbq"].index) == ["brief", "judged", "ours"] and len(by_value.loc["xstest"]) == 5
    for value, name in (("judged", "judge referee"), ("brief", "judge referee, question brief")):
        judged = scorers[(scorers.table == "human") & (scorers.scorer == value)].set_index("labelled_model")
        measured = pd.read_parquet(results / "judges" / "xstest" / f"{value}.parquet").set_index("labelled_model")
        assert judged["scorer_name"].tolist() == [name] * 2 and set(judged.index) == set(LABELLED_FILES)
        for column in ("three_class", "kappa", "n_answers", "parse_rate"):  # its own job asked the judge, 900 times
            assert judged[column].tolist() == measured.loc[judged.index, column].tolist()
        assert measured["n_answers"].tolist() == [450, 450] and measured["parse_rate"].between(0, 1).all()
        assert measured["question"].tolist() == [None if value == "judged" else "brief"] * 2
    human = scorers[scorers.table == "human"].set_index(["labelled_model", "scorer"])
    assert human.loc[("mistralinstruct", "ours"), "three_class"] == pytest.approx(0.860)
    assert human.loc[("mistralinstruct", "authors"), "three_class"] == pytest.approx(383 / 450)
    assert human.loc[("mistralinstruct", "authors"), "scorer_name"] == "strmatch"
    for row in read_head()["held_out"]:  # the learned head's agreement is its recipe's, fitted on the other file
        learned = human.loc[(row["labelled_model"], "learned")]
        assert (learned["three_class"], learned["kappa"], learned["fitted_on"]) == (
            row["three_class"],
            row["kappa"],
            row["fitted_on"],
        )
    human_lines = [line for line in _scorer_lines(scorers) if line.startswith("xstest: learned on ")]  # summary.md's
    assert human_lines[1].startswith(f"xstest: learned on llama2new {read_head()['held_out'][1]['three_class']:.3f}")
    assert human_lines[1].endswith("fitted on mistralinstruct alone);")
