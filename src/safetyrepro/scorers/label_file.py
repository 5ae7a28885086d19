"""A file of a run's replies for people to label, and the labels read back from it (docs/scorers.md, "Labelling a
run's replies").

`draw_replies` draws, for each model and free-form generation config of a benchmark, replies of its cell (each reply
once: a config of another scorer labels its generation twin's replies again), stratified by the scorer's label with
proportional allocation: each label's share of a cell's sample is its share of the cell's replies, rounded by
largest remainders, so the sample weighs every reply alike and `analysis.scorer_correction.corrected_rate` treats it
as the simple random sample it nearly is. The file is CSV, one reply a row (LABEL_COLUMNS); a person fills `human_label`
with one of the benchmark's classes and leaves it empty for a reply left unlabelled. Labels from elsewhere come in
the same file: the columns of KEY name the reply, and `response` must be the reply the run holds (a reply run again
since it was labelled is refused, not corrected with a label of another text).
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from safetyrepro.core.errors import DataError

log = logging.getLogger(__name__)
KEY = ["model", "config_id", "item_id", "seed"]
# `request`: the item's own text (no template, instructions or shots). No scorer's label: people label blind.
LABEL_COLUMNS = ["benchmark", *KEY, "request", "response", "human_label"]


def generation_replies(
    items: pd.DataFrame, cells: pd.DataFrame, benchmark: str, axis: str | None, default: str | None
) -> pd.DataFrame:
    """The item rows of `benchmark`'s free-form generation cells: those of its configs at the scorer axis `axis`'s
    `default` (every free-form config's without an axis)."""
    free = cells[(cells["benchmark"] == benchmark) & (cells["scoring"] == "freeform")]
    if axis is not None:
        free = free[free[axis] == default]
    rows = items[(items["benchmark"] == benchmark) & items["config_id"].isin(set(free["config_id"]))]
    return rows.reset_index(drop=True)


def proportional_counts(sizes: pd.Series, total: int) -> pd.Series:
    """`total` split over the strata of `sizes` in proportion to them, rounded by largest remainders (none above its
    stratum's size)."""
    total = min(total, int(sizes.sum()))
    exact = sizes / sizes.sum() * total
    counts = np.floor(exact).astype(int)
    order = (exact - counts).sort_values(ascending=False, kind="stable").index
    counts[order[: total - int(counts.sum())]] += 1
    return counts


def draw_replies(replies: pd.DataFrame, per_config: int, seed: int) -> pd.DataFrame:
    """From `replies` (`generation_replies` with each item's `request`), `per_config` replies of each model in each
    config (all of them where it has fewer), stratified by the scorer's `label` with proportional allocation
    (`proportional_counts`), as the rows of a label file (LABEL_COLUMNS, `human_label` empty), in an order drawn at
    random (models and configs mixed, so a labeller's drift falls on all alike)."""
    rng = np.random.default_rng(seed)
    drawn = []
    for _, mine in replies.groupby(["model", "config_id"], sort=False):
        counts = proportional_counts(mine.groupby("label").size(), per_config)
        for label, count in counts.items():
            stratum = mine[mine["label"] == label]
            drawn.append(stratum.iloc[np.sort(rng.choice(len(stratum), count, replace=False))])
    frame = pd.concat(drawn, ignore_index=True) if drawn else replies.head(0)
    frame = frame.iloc[rng.permutation(len(frame))].assign(human_label="")
    return frame[LABEL_COLUMNS].reset_index(drop=True)


def read_labels(path: Path, benchmark: str, classes: Sequence[str], replies: pd.DataFrame) -> pd.DataFrame:
    """The labelled rows of a label file of `benchmark` (KEY and `human_label`), checked against the run's
    `replies` (`generation_replies`): every column there, every label one of `classes` or empty, every reply one
    of the run's, its text the run's, none twice. The labels of a model or config the run no longer has are left
    out (a log line says how many).

    Raises:
        DataError: in one line, naming the file and the first row (its line) that fails.
    """
    where = f"{path} (human_labels.{benchmark})"
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise DataError(f"{where}: not a readable CSV label file: {str(error).splitlines()[0]}") from None
    missing = [column for column in LABEL_COLUMNS if column not in frame.columns]
    if missing:
        raise DataError(
            f"{where}: no column {', '.join(missing)} (`safetyrepro label` writes {', '.join(LABEL_COLUMNS)})"
        )
    frame["human_label"] = frame["human_label"].str.strip()
    labelled = frame[frame["human_label"] != ""]
    starts = record_lines(path)
    line = lambda index: starts[index + 1]  # noqa: E731  (the header is record 0)
    wrong = labelled[~labelled["human_label"].isin(classes)]
    if len(wrong):
        index, label = wrong.index[0], wrong["human_label"].iloc[0]
        raise DataError(f"{where}: line {line(index)}: human_label {label!r} is not one of {', '.join(classes)}")
    other = labelled[labelled["benchmark"] != benchmark]
    if len(other):
        raise DataError(
            f"{where}: line {line(other.index[0])}: a reply of {other['benchmark'].iloc[0]!r}, not {benchmark}"
        )
    seeds = pd.to_numeric(labelled["seed"], errors="coerce")
    if (seeds.isna() | (seeds % 1 != 0)).any():
        index = labelled.index[(seeds.isna() | (seeds % 1 != 0)).to_numpy()][0]
        raise DataError(f"{where}: line {line(index)}: seed {labelled.loc[index, 'seed']!r} is not a whole number")
    labelled = labelled.assign(seed=seeds.astype(int))
    twice = labelled[labelled.duplicated(KEY)]
    if len(twice):
        raise DataError(f"{where}: line {line(twice.index[0])}: the same reply as an earlier line")
    held = replies.set_index(KEY)["response"]
    gone = ~labelled["model"].isin(set(replies["model"])) | ~labelled["config_id"].isin(set(replies["config_id"]))
    if gone.any():  # the run no longer has that model or config: the other labels are still a random draw of its own
        log.warning(
            "%s: %d labels of replies of a model or config this run no longer has are not used",
            where,
            int(gone.sum()),
        )
        labelled = labelled[~gone]
    keys = pd.MultiIndex.from_frame(labelled[KEY])
    found = keys.isin(held.index)
    if not found.all():
        index = labelled.index[~found][0]
        row = labelled.loc[index]
        raise DataError(
            f"{where}: line {line(index)}: {row['model']}'s reply to {row['item_id']} (config {row['config_id']}, "
            f"seed {row['seed']}) is not one of this run's free-form replies"
        )
    changed = held.reindex(keys).to_numpy() != labelled["response"].to_numpy()
    if changed.any():
        index = labelled.index[changed][0]
        raise DataError(
            f"{where}: line {line(index)}: the run's reply to {labelled.loc[index, 'item_id']} is not the text in the "
            "file (the cell ran again since, or a program changed it: a spreadsheet trims, converts and cuts cells at "
            "32,767 characters); label replies drawn from these results, the file opened as text"
        )
    return labelled[[*KEY, "human_label"]].reset_index(drop=True)


def record_lines(path: Path) -> list[int]:
    """The line of the file each CSV record starts on (a reply may hold line ends, quoted), the header's first."""
    starts, end = [], 0
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        for row in reader:
            if row:  # a blank line is no record (pandas skips it too)
                starts.append(end + 1)
            end = reader.line_num
    return starts
