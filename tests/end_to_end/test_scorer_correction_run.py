"""A run's verdicts corrected for scorer error, as a user gets them: first with the human labels of other models'
replies (XSTest's labelled completions), then with labels of the run's own replies drawn by `safetyrepro label`,
filled in and named in the config (`human_labels`); the headline says which, and the run checks it."""

from __future__ import annotations

import re
import subprocess

import pandas as pd
import pytest
import yaml
from helpers.session import BIN
from helpers.tiny_model import tiny_model_entries
from helpers.workflow import ENVELOPES, snakemake, write_config

from safetyrepro.benchmarks.xstest.strmatch import strmatch_label

TARGET = "results/headline_check.txt"
GENERATION = ["T1-greedy-0shot-freeform", "T2-t0.3-0shot-freeform"]  # 6 replies a model, then 6 x 5 seeds
RESCORED = [f"{config}-scorer=authors" for config in GENERATION]


def label(workdir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "safetyrepro"), "label", "--configfile", "config.yaml", "--benchmark", "xstest", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
    )


@pytest.mark.slow
@pytest.mark.e2e
def test_a_runs_own_labels_correct_its_verdicts_and_the_headline_says_whose_labels(tmp_path, data_dir):
    workdir = tmp_path / "run"
    models = tiny_model_entries([tmp_path / "models" / f"tiny-{i}" for i in range(2)])
    config = write_config(
        workdir, data_dir, models, base="scorer_correction.yaml", envelope=ENVELOPES / "authors_scorer.yaml"
    )
    done = snakemake(workdir, "--cores", "2", TARGET)
    assert done.returncode == 0, done.stderr[-3000:]
    results = workdir / "results"
    table = pd.read_parquet(results / "analysis" / "scorer_correction.parquet")
    assert set(table.query("table == 'errors'")["labelled_model"]) == {"mistralinstruct", "llama2new"}
    summary = (results / "summary.md").read_text()
    assert "### The same verdicts corrected for scorer error" in summary and "900 of other models'" in summary

    drawn = label(workdir, "--per-config", "5", "--out", "labels.csv")
    assert drawn.returncode == 0, drawn.stderr
    assert "20 replies of xstest to label (tiny-0 10, tiny-1 10)" in drawn.stdout
    frame = pd.read_csv(workdir / "labels.csv", keep_default_na=False)
    assert (frame["human_label"] == "").all() and set(frame["config_id"]) <= set(GENERATION)
    again = label(workdir, "--per-config", "5", "--out", "labels.csv")  # a file being labelled is never overwritten
    assert again.returncode != 0 and "labels.csv exists" in again.stderr and len(again.stderr.splitlines()) == 1

    # A person's labels, stood in for by the authors' string match: its own net error is then 0 on each model
    frame["human_label"] = [strmatch_label(reply) for reply in frame["response"]]
    frame.to_csv(workdir / "labels.csv", index=False)
    overlay = yaml.safe_load(config.read_text()) | {"human_labels": {"xstest": "labels.csv"}}
    config.write_text(yaml.safe_dump(overlay))
    done = snakemake(workdir, "--cores", "2", TARGET)
    assert done.returncode == 0, done.stderr[-3000:]
    ran = done.stdout + done.stderr
    assert not re.search(r"rule (rescore_)?cell:", ran) and "rule analysis:" in ran  # the correction, no cell
    table = pd.read_parquet(results / "analysis" / "scorer_correction.parquet")
    errors = table.query("table == 'errors'")
    drawn_in = frame.groupby(["model", "config_id"]).size()  # 5 labels a model and config
    corrected = set(drawn_in.index)
    assert set(zip(errors["labelled_model"], errors["config_id"])) == {
        (m, f"{c}{suffix}") for m, c in corrected for suffix in ("", "-scorer=authors")
    }
    assert (errors.query("scorer == 'authors'")["net_error"] == 0).all()  # the labels are its own
    mine = errors.set_index(["labelled_model", "config_id"])
    assert all(mine.loc[key, "n_labels"] == drawn_in[key] for key in corrected)
    assert {int(mine.loc[key, "n_replies"]) for key in corrected} <= {6, 30}  # 6 items, x 5 seeds sampled
    summary = (results / "summary.md").read_text()
    used = sum(drawn_in[key] for key in corrected)
    assert f"{used} of this run's replies" in summary and f"{used} replies of the two models that people" in summary
    assert (results / "headline_check.txt").is_file()

    frame.loc[0, "human_label"] = (
        "partial_refusal" if frame.loc[0, "human_label"] != "partial_refusal" else "full_compliance"
    )
    frame.to_csv(workdir / "labels.csv", index=False)
    redone = snakemake(workdir, "--cores", "2", TARGET)
    assert redone.returncode == 0 and "rule analysis:" in redone.stdout + redone.stderr  # a label changed: redone
    nothing = snakemake(workdir, "--cores", "2", TARGET, "--dry-run")
    assert "Nothing to be done" in nothing.stdout + nothing.stderr

    frame.loc[frame.duplicated(["model", "config_id"]), "human_label"] = ""  # one label a model and config
    frame.to_csv(workdir / "labels.csv", index=False)
    short = snakemake(workdir, "--cores", "2", TARGET)
    log = (results / "logs" / "analysis" / "scorer_correction.log").read_text()
    assert short.returncode != 0 and "no config has 2 labels of one model, so nothing can be corrected" in log
