"""A file of a run's replies for people to label (safetyrepro.scorers.label_file): the draw, stratified by model and by
the scorer's label in proportion, and the labels read back, each bad line one line naming it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from safetyrepro.benchmarks.xstest.refusal import RESPONSE_CLASSES
from safetyrepro.core.errors import DataError
from safetyrepro.scorers.label_file import LABEL_COLUMNS, draw_replies, proportional_counts, read_labels


def replies(models=("m1", "m2"), per_model=200, refusals=0.3, seed=1) -> pd.DataFrame:
    """Generation replies of two configs, two seeds for the second: a share `refusals` of each model's refused."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in models:
        for index in range(per_model):
            config, seed_of = ("c1", 0) if index < per_model // 2 else ("c2", index % 2)
            label = "full_refusal" if rng.random() < refusals else "full_compliance"
            rows.append(
                {
                    "benchmark": "xstest",
                    "model": model,
                    "config_id": config,
                    "item_id": f"i{index // 2 if config == 'c2' else index}",
                    "seed": seed_of,
                    "request": f"request {index}",
                    "response": f"{model} reply {index}, with a comma",
                    "label": label,
                }
            )
    return pd.DataFrame(rows)


def test_counts_are_proportional_and_sum_to_the_total():
    counts = proportional_counts(pd.Series({"a": 140, "b": 50, "c": 10}), 50)
    assert counts.to_dict() == {"a": 35, "b": 13, "c": 2}  # 35, 12.5, 2.5: the remainders .5 go in order
    assert proportional_counts(pd.Series({"a": 3, "b": 1}), 50).to_dict() == {"a": 3, "b": 1}  # all there is


def test_the_draw_takes_each_cells_share_of_each_scorer_label_and_mixes_the_models():
    frame = replies()
    drawn = draw_replies(frame, 25, seed=0)
    assert list(drawn.columns) == LABEL_COLUMNS and (drawn["human_label"] == "").all()
    assert drawn.groupby(["model", "config_id"]).size().to_dict() == {
        (m, c): 25 for m in ("m1", "m2") for c in ("c1", "c2")
    }
    merged = drawn.merge(frame, on=["model", "config_id", "item_id", "seed"], validate="one_to_one")
    for (model, config), mine in merged.groupby(["model", "config_id"]):
        cell = frame[(frame["model"] == model) & (frame["config_id"] == config)]
        assert abs((mine["label"] == "full_refusal").sum() - 25 * (cell["label"] == "full_refusal").mean()) < 1
    assert drawn["model"].iloc[:50].nunique() == 2  # not one model's block after the other
    assert drawn.equals(draw_replies(frame, 25, seed=0)) and not drawn.equals(draw_replies(frame, 25, seed=1))


def write(tmp_path: Path, frame: pd.DataFrame) -> Path:
    path = tmp_path / "labels.csv"
    frame.to_csv(path, index=False)
    return path


def test_the_labels_read_back_are_the_filled_rows_keyed_to_the_run(tmp_path):
    frame = replies()
    drawn = draw_replies(frame, 3, seed=0)
    drawn.loc[:3, "human_label"] = "full_compliance"
    drawn.loc[4:7, "human_label"] = [" full_refusal ", "partial_refusal", "full_refusal", "full_compliance"]
    path = write(tmp_path, drawn)
    labelled = read_labels(path, "xstest", RESPONSE_CLASSES, frame)
    assert len(labelled) == 8 and list(labelled.columns) == ["model", "config_id", "item_id", "seed", "human_label"]
    assert labelled["seed"].dtype.kind == "i" and "full_refusal" in set(labelled["human_label"])  # stripped


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: f.assign(human_label="maybe"), "line 2: human_label 'maybe' is not one of full_compliance"),
        (lambda f: f.drop(columns="response"), "no column response"),
        (lambda f: f.assign(response=["edited"] + f["response"].tolist()[1:]), "line 2: the run's reply to"),
        (lambda f: f.assign(item_id=["nowhere"] + f["item_id"].tolist()[1:]), "line 2: m"),
        (lambda f: pd.concat([f, f.head(1)]), "the same reply as an earlier line"),
        (lambda f: f.assign(benchmark="bbq"), "a reply of 'bbq', not xstest"),
    ],
)
def test_a_bad_label_file_is_one_line_naming_its_line(tmp_path, edit, message):
    frame = replies()
    drawn = draw_replies(frame, 2, seed=0).assign(human_label="full_compliance")
    with pytest.raises(DataError, match="human_labels.xstest") as raised:
        read_labels(write(tmp_path, edit(drawn)), "xstest", RESPONSE_CLASSES, frame)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_file_that_is_not_csv_is_one_line(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(DataError, match="not a readable CSV label file"):
        read_labels(path, "xstest", RESPONSE_CLASSES, replies())


def test_a_line_named_is_the_files_own_line_where_replies_hold_line_ends(tmp_path):
    frame = replies()
    frame["response"] = frame["response"] + "\nsecond line\r\nthird line"  # a reply of three lines, quoted in the CSV
    drawn = draw_replies(frame, 2, seed=0).assign(human_label="full_compliance")
    drawn.loc[5, "human_label"] = "unsure"
    path = write(tmp_path, drawn)
    with pytest.raises(DataError, match="line 17: human_label 'unsure'"):  # the sixth reply: 1 + 5 x 3 + 1
        read_labels(path, "xstest", RESPONSE_CLASSES, frame)
    drawn.loc[5, "human_label"] = "full_refusal"
    written = write(tmp_path, drawn.assign(seed=drawn["seed"].astype(float)))  # seeds as a spreadsheet writes them
    assert len(read_labels(written, "xstest", RESPONSE_CLASSES, frame)) == 8
    with pytest.raises(DataError, match="line 2: seed '0.5' is not a whole number"):
        read_labels(write(tmp_path, drawn.assign(seed="0.5")), "xstest", RESPONSE_CLASSES, frame)


def test_labels_of_a_model_or_config_the_run_no_longer_has_are_left_out(tmp_path, caplog):
    frame = replies()
    drawn = draw_replies(frame, 2, seed=0).assign(human_label="full_compliance")
    later = frame[(frame["model"] == "m1") & (frame["config_id"] == "c1")]  # m2 and config c2 dropped since
    kept = drawn[(drawn["model"] == "m1") & (drawn["config_id"] == "c1")]
    labelled = read_labels(write(tmp_path, drawn), "xstest", RESPONSE_CLASSES, later)
    assert len(labelled) == len(kept) < len(drawn)
    assert f"{len(drawn) - len(kept)} labels of replies of a model or config this run no longer has" in caplog.text
