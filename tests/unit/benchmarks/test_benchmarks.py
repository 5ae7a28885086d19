"""The benchmarks on the real shared data: loaders, item subsets, items, label extraction, prompts.

Expectations come from the raw files (read here with the csv/json modules, not through the
package) or are written by hand; nothing is copied from a run of the code under test.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.plugins import MINI, rediscovered, register
from helpers.scaling import MAX_COST_RATIO, cost_ratio
from helpers.session import REPO

from safetyrepro.benchmarks import BENCHMARKS, UNPARSED, DataError, discover
from safetyrepro.benchmarks.base import LETTERS, extract_choice
from safetyrepro.benchmarks.files import MAX_JSON_DEPTH, load_json, read_jsonl
from safetyrepro.benchmarks.subsets import draw_subset
from safetyrepro.benchmarks.xstest.refusal import RESPONSE_CLASSES
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.settings import item_set
from safetyrepro.running.prompts import render_prompt

ENVELOPE = REPO / "config" / "envelope.yaml"
NAMES = list(BENCHMARKS)
COMPLY, REFUSE, PARTIAL = "full_compliance", "full_refusal", "partial_refusal"
# Row counts stated in the data's SOURCES.md (ToxiGen is derived from its files below).
SOURCE_ROWS = {"truthfulqa": 817, "bbq": 11956, "crows_pairs": 1508, "xstest": 450}


# ------------------------------------------------------------------ raw files, read independently


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _toxigen_labels(data_dir: Path) -> dict[str, set[tuple[str, str]]]:
    """statement (stripped) -> every (group, label) it is filed under; label from the file name."""
    found: dict[str, set[tuple[str, str]]] = {}
    for path in sorted((data_dir / "toxigen").glob("*/*.txt")):
        match = re.fullmatch(r"(hate|neutral)_(.+?)(?:_sentences)?", path.stem)
        assert match, f"unexpected ToxiGen file name {path.name}"
        label = "toxic" if match.group(1) == "hate" else "benign"
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                found.setdefault(line.strip(), set()).add((match.group(2), label))
    return found


@pytest.fixture(scope="session")
def raw(data_dir):
    """The raw rows of every benchmark, keyed by benchmark name."""
    bbq = []
    for path in sorted((data_dir / "bbq").glob("*.jsonl")):
        with open(path, encoding="utf-8") as handle:
            bbq += [json.loads(line) for line in handle if line.strip()]
    return {
        "truthfulqa": _csv_rows(data_dir / "truthfulqa" / "TruthfulQA.csv"),
        "bbq": bbq,
        "crows_pairs": _csv_rows(data_dir / "crows_pairs" / "crows_pairs_anonymized.csv"),
        "xstest": _csv_rows(data_dir / "xstest" / "xstest_prompts.csv"),
        "toxigen": _toxigen_labels(data_dir),
    }


@pytest.fixture(scope="session")
def frames(data_dir):
    """Each benchmark's loaded frame, every row with its stratum as the subset draw gives it (the whole
    benchmark drawn, in the files' order; loaded once per session, never modified by the tests)."""
    return {
        name: draw_subset(frame, BENCHMARKS[name].strata, len(frame), 0, np.random.default_rng(0), "all")[0]
        for name, frame in ((name, BENCHMARKS[name].load(data_dir)) for name in NAMES)
    }


def _expected_rows(name: str, raw) -> int:
    if name == "toxigen":  # unique statements, minus those filed under both hate_ and neutral_
        return sum(len({label for _, label in places}) == 1 for places in raw["toxigen"].values())
    return SOURCE_ROWS[name]


def _expected_strata(name: str, raw) -> Counter:
    """(content key, stratum) pairs the loaded frame must hold, from the raw files."""
    rows = raw[name]
    if name == "truthfulqa":
        return Counter((r["Question"], f"{r['Type']}/{r['Category']}") for r in rows)
    if name == "bbq":
        return Counter(((r["context"], r["question"]), f"{r['context_condition']}/{r['category']}") for r in rows)
    if name == "crows_pairs":
        return Counter(((r["sent_more"], r["sent_less"]), r["bias_type"]) for r in rows)
    if name == "xstest":
        return Counter((r["prompt"], f"{r['label']}/{r['type']}") for r in rows)
    raise AssertionError(name)


def _frame_strata(name: str, frame) -> Counter:
    if name == "truthfulqa":
        keys = frame["Question"]
    elif name == "bbq":
        keys = zip(frame["context"], frame["question"])
    elif name == "crows_pairs":
        keys = zip(frame["sent_more"], frame["sent_less"])
    else:
        keys = frame["prompt"]
    return Counter(zip(keys, frame["stratum"]))


# ------------------------------------------------------------------------------------- 1. loaders


@pytest.mark.parametrize("name", NAMES)
def test_loader_row_count_and_unique_ids(name, frames, raw):
    frame = frames[name]
    assert len(frame) == _expected_rows(name, raw)
    if name in SOURCE_ROWS:
        assert len(raw[name]) == SOURCE_ROWS[name], "raw file does not match SOURCES.md"
    assert frame["item_id"].is_unique
    assert frame["item_id"].map(lambda s: isinstance(s, str) and s != "").all()


def test_toxigen_expected_count_is_not_just_the_line_count(data_dir, raw):
    """Guards the independent ToxiGen count: the files do repeat statements (SOURCES.md)."""
    lines = sum(
        1
        for p in (data_dir / "toxigen").glob("*/*.txt")
        for line in p.read_text(encoding="utf-8").splitlines()
        if line.strip()
    )
    assert _expected_rows("toxigen", raw) < lines


@pytest.mark.parametrize("name", ["truthfulqa", "bbq", "crows_pairs", "xstest"])
def test_loader_strata_match_raw_columns(name, frames, raw):
    """TruthfulQA by Type then Category, BBQ by context_condition then category, CrowS by bias_type, XSTest by
    label then type."""
    assert _frame_strata(name, frames[name]) == _expected_strata(name, raw)


def test_bbq_has_every_category_crossed_with_both_conditions(frames, raw):
    expected = {f"{c}/{r['category']}" for r in raw["bbq"] for c in ("ambig", "disambig")}
    assert len(expected) == 12
    assert set(frames["bbq"]["stratum"]) == expected


def test_xstest_has_250_safe_and_200_unsafe(frames):
    assert Counter(frames["xstest"]["label"]) == {"safe": 250, "unsafe": 200}
    unsafe = frames["xstest"]["label"] == "unsafe"
    assert frames["xstest"]["type"][unsafe].str.startswith("contrast_").all()
    assert not frames["xstest"]["type"][~unsafe].str.startswith("contrast_").any()


def test_toxigen_drops_statements_filed_under_both_labels(tmp_path):
    """The shared files happen to hold no statement under both labels, so check the rule on a
    hand-made folder: repeats under one label are kept once, a statement under both is dropped."""
    (tmp_path / "toxigen" / "g").mkdir(parents=True)
    (tmp_path / "toxigen" / "g" / "hate_x.txt").write_text("bad one\n  both  \nbad one\n\n", encoding="utf-8")
    (tmp_path / "toxigen" / "g" / "hate_x_sentences.txt").write_text("bad one\nbad two\n", encoding="utf-8")
    (tmp_path / "toxigen" / "g" / "neutral_x.txt").write_text("both\nfine one\n", encoding="utf-8")
    frame = BENCHMARKS["toxigen"].load(tmp_path)
    assert sorted(frame["statement"]) == ["bad one", "bad two", "fine one"]
    assert dict(zip(frame["statement"], zip(frame["label"], frame["group"]))) == {
        "bad one": ("toxic", "x"),
        "bad two": ("toxic", "x"),
        "fine one": ("benign", "x"),
    }
    assert frame["item_id"].is_unique


def test_a_jsonl_row_may_hold_line_separators_and_the_file_a_byte_order_mark(tmp_path, data_dir):
    """A JSON line ends at \\n, \\r\\n or a lone \\r only: U+2028 and U+0085 are legal inside a JSON string
    (str.splitlines would cut the row there); a UTF-8 byte-order mark before the first row is no error."""
    shutil.copytree(data_dir / "bbq", tmp_path / "bbq")
    path = tmp_path / "bbq" / "Age.jsonl"
    first, rest = path.read_text(encoding="utf-8").split("\n", 1)
    row = json.loads(first)
    row["context"] = row["context"].replace(" ", "\u2028", 1).replace(" ", "\x85", 1)
    path.write_bytes(("\ufeff" + json.dumps(row, ensure_ascii=False) + "\r" + rest).encode())
    frame = BENCHMARKS["bbq"].load(tmp_path)
    assert frame["context"].iloc[0] == row["context"] and "\u2028" in row["context"]
    assert len(frame) == SOURCE_ROWS["bbq"]


def test_a_jsonl_files_row_names_follow_every_derived_frame_uncopied(tmp_path):
    """read_jsonl keeps each row's "line N" in attrs, which pandas deep-copies into every frame derived
    from it: the names are shared, not copied (a copy per column access was 18% of loading BBQ), and
    an empty string or a missing value is still named by its line."""
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": "x", "b": {"k": [1]}}\n\n{"a": "y", "b": {}}\n')
    frame = read_jsonl(path, ["a", "b"])
    assert list(frame.attrs["rows"]) == ["line 1", "line 3"]
    assert frame[["a"]].attrs["rows"] is frame.attrs["rows"] and frame["a"].attrs["rows"] is frame.attrs["rows"]
    for bad in ('{"a": " ", "b": {}}', '{"a": null, "b": {}}'):
        path.write_text('{"a": "x", "b": {}}\n' + bad + "\n")
        with pytest.raises(DataError, match=f"^{re.escape(str(path))}, line 2: empty value in column 'a'$"):
            read_jsonl(path, ["a", "b"])


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 100_000])
def test_json_is_read_to_its_nesting_limit_and_no_deeper(depth):
    """One reader for every JSON we are given: nesting past MAX_JSON_DEPTH, including past Python's
    recursion limit, is one DataError naming where, not a RecursionError."""
    text = "[" * depth + "]" * depth
    if depth <= MAX_JSON_DEPTH:
        value = load_json(text, "here")
        for _ in range(depth - 1):
            (value,) = value
        assert value == []
    else:
        with pytest.raises(DataError, match=f"^here: JSON nested more than {MAX_JSON_DEPTH} levels deep$"):
            load_json(text, "here")


def test_toxigen_statements_and_strata_match_files(frames, raw):
    """Every kept statement is unique, has one label across files, and its stratum is label/group
    of a file it appears in; every statement with one label is kept; each file's (label, group)
    stratum exists."""
    frame, labels = frames["toxigen"], raw["toxigen"]
    assert frame["statement"].is_unique
    expected = {s for s, places in labels.items() if len({lab for _, lab in places}) == 1}
    assert set(frame["statement"]) == expected
    for statement, stratum in zip(frame["statement"], frame["stratum"]):
        label, _, group = stratum.partition("/")
        assert (group, label) in labels[statement], statement
    assert set(frame["stratum"]) == {f"{lab}/{g}" for places in labels.values() for g, lab in places}


# --------------------------------------------------------------------------------- 2. draw_subset


def _levels(frame: pd.DataFrame, strata: tuple[str, ...]) -> list[Counter]:
    """Items per group of each level of `strata`: the first column's values, the first two's, ..."""
    keys = list(zip(*(frame[column].tolist() for column in strata)))
    return [Counter(key[:depth] for key in keys) for depth in range(1, len(strata) + 1)]


def _allocation_problems(drawn: list[Counter], population: list[Counter]) -> list[str]:
    """Problems with a draw's counts at each level of its strata (`_levels`, of the draw and of what it is
    drawn from): a largest-remainder allocation gives every group the floor or the ceiling of its quota
    (draw size x its share of the population), and within each group of the level above rounds up only
    remainders at least as large as any it rounds down."""
    n, bad = sum(drawn[0].values()), []
    for got, sizes in zip(drawn, population):
        up, down = defaultdict(list), defaultdict(list)
        for group, size in sizes.items():
            quota = n * size / sum(sizes.values())
            if not math.floor(quota) <= got[group] <= math.ceil(quota):
                bad.append(f"{'/'.join(map(str, group))}: got {got[group]} of {n}, quota {quota:.2f}")
            (up if got[group] > quota else down)[group[:-1]].append(quota % 1)
        bad += [f"{above}: rounded up {min(up[above]):.3f}, down {max(down[above]):.3f}" for above in up
                if down[above] and min(up[above]) < max(down[above]) - 1e-9]  # fmt: skip
    return bad


@pytest.mark.parametrize("name", NAMES)
def test_subset_and_pool_keep_every_stratum_and_level_within_one_item(name, frames):
    """At every size from 1 to 60, and the paper's 300, each stratum and each top-level group (XSTest's safe
    and unsafe prompts, BBQ's ambiguous and disambiguated contexts, ...) gives its share of the subset
    within one item, and so of the pool drawn from the rest; the two are disjoint items of the benchmark."""
    frame, strata = frames[name], BENCHMARKS[name].strata
    population = _levels(frame, strata)
    for n_items in [*range(1, 61), 300]:
        evaluated, pool = draw_subset(frame, strata, n_items, 20, np.random.default_rng(n_items), "here")
        assert (len(evaluated), len(pool)) == (n_items, 20)
        drawn = _levels(evaluated, strata)
        assert _allocation_problems(drawn, population) == [], n_items
        assert not set(evaluated["item_id"]) & set(pool["item_id"])
        rest = [sizes - taken for sizes, taken in zip(population, drawn)]
        assert _allocation_problems(_levels(pool, strata), rest) == [], n_items
    drawn = pd.concat([evaluated, pool]).set_index("item_id")
    pd.testing.assert_frame_equal(drawn, frame.set_index("item_id").loc[drawn.index])  # the rows as loaded


def test_xstest_subset_keeps_its_safe_share_and_draws_types_and_prompts_by_the_seed(data_dir, frames):
    """XSTest is 250 safe and 200 unsafe prompts, 25 of each of its 18 types. Its 10-item subset keeps 5 or 6 safe
    ones at every seed (it was 2, with all eight unsafe types: equal remainders went alphabetically); which types
    give an item differs between seeds, and the prompts within a type are not those at one position in each."""
    position = frames["xstest"].groupby("type").cumcount().set_axis(frames["xstest"]["item_id"])
    drawn = [BENCHMARKS["xstest"].subset(data_dir, 10, 10, seed, "here")[0] for seed in [*range(6), 20240917]]
    assert all(Counter(subset["label"])["safe"] in (5, 6) for subset in drawn)
    assert len({frozenset(subset["type"]) for subset in drawn}) > 1
    assert all(position[subset["item_id"]].nunique() > 1 for subset in drawn)


@pytest.mark.parametrize("name", NAMES)
def test_subset_is_the_seeds_and_another_seed_draws_another(name, data_dir):
    """The draw depends on the seed: drawn again (in a fresh process, here a cleared cache) with the same seed
    it is the same, with another it differs, in the subset and in the pool."""
    from safetyrepro.benchmarks.subsets import drawn as _drawn

    benchmark = BENCHMARKS[name]
    first = benchmark.subset(data_dir, 40, 20, 3, "here")
    _drawn.cache_clear()
    again, other = (benchmark.subset(data_dir, 40, 20, seed, "here") for seed in (3, 4))
    assert again[0] is not first[0]
    for drawn, same, different in zip(first, again, other):
        pd.testing.assert_frame_equal(drawn, same)
        assert set(drawn["item_id"]) != set(different["item_id"])


@pytest.mark.parametrize("name", NAMES)
def test_subset_exactly_fits_and_too_large_raises_naming_where(name, frames):
    frame, strata, rng = frames[name], BENCHMARKS[name].strata, np.random.default_rng(0)
    evaluated, pool = draw_subset(frame, strata, len(frame) - 20, 20, rng, "fits")
    assert len(evaluated) + len(pool) == len(frame)

    where = f"benchmarks.{name}.n_items"
    with pytest.raises(DataError, match=re.escape(where)):
        draw_subset(frame, strata, len(frame) - 19, 20, rng, where)
    with pytest.raises(DataError, match=re.escape(where)):
        draw_subset(frame, strata, len(frame) + 1, 0, rng, where)


def test_a_benchmark_stratified_by_a_column_its_items_lack_is_named(data_dir):
    """A benchmark whose strata name a column that its `load` leaves out, or leaves empty for some items, is
    refused in one line naming it and the column (not stratified by "nan")."""

    class Flavoured(type(BENCHMARKS["xstest"])):
        strata = ("label", "flavour")

        def load(self, data_dir):
            return super().load(data_dir).assign(flavour=lambda frame: frame["type"].where(frame.index > 0))

    with pytest.raises(DataError, match=r"xstest's items need a value in column 'flavour', one of its strata"):
        Flavoured().subset(data_dir, 10, 0, 0, "here")
    Flavoured.strata = ("label", "colour")
    with pytest.raises(DataError, match=r"xstest's items need a value in column 'colour', one of its strata"):
        Flavoured().subset(data_dir, 10, 0, 0, "here")


# ----------------------------------------------------------------------------------- 3. make_item


def _records(frame):
    return frame.to_dict("records")


def test_truthfulqa_options_gold_and_shuffle(frames, raw):
    tqa = BENCHMARKS["truthfulqa"]
    by_question = {r["Question"]: r for r in raw["truthfulqa"]}
    gold_letters, reordered, many_options = Counter(), 0, 0
    for row in _records(frames["truthfulqa"]):
        source = by_question[row["Question"]]
        wrong = [a.strip().rstrip(";").strip() for a in source["Incorrect Answers"].split("; ")]
        expected = sorted([source["Best Answer"].strip(), *[a for a in wrong if a]])

        item = tqa.make_item(row, seed=5)
        options = item.meta["options"]
        assert item.labels == tuple(LETTERS[: len(expected)])
        assert list(options) == list(item.labels)
        assert sorted(options.values()) == expected
        assert options[item.gold] == source["Best Answer"].strip()
        assert source["Question"] in item.question
        for label, text in options.items():
            assert f"{label}. {text}" in item.question

        assert tqa.make_item(row, seed=5) == item  # stable for the same seed
        gold_letters[item.gold] += 1
        if len(expected) >= 4:
            many_options += 1
            reordered += list(tqa.make_item(row, seed=6).meta["options"].values()) != list(options.values())
    # shuffled: the best answer is not parked in one slot, and another seed gives another order
    assert gold_letters.most_common(1)[0][1] < 0.5 * sum(gold_letters.values())
    assert reordered > 0.8 * many_options


def test_bbq_gold_and_bias_letters_agree_with_answer_info(frames):
    bbq = BENCHMARKS["bbq"]
    for row in _records(frames["bbq"]):
        item = bbq.make_item(row, seed=0)
        info = [row["answer_info"][f"ans{i}"] for i in range(3)]
        groups = {g.lower() for g in row["additional_metadata"]["stereotyped_groups"]}
        assert item.labels == ("A", "B", "C")
        assert item.gold == "ABC"[int(row["label"])]
        assert item.meta["options"] == {"A": row["ans0"], "B": row["ans1"], "C": row["ans2"]}
        assert [item.meta["unknown"]] == ["ABC"[i] for i in range(3) if info[i][1] == "unknown"]
        named = ["ABC"[i] for i in range(3) if info[i][1] != "unknown" and {s.lower() for s in info[i]} & groups]
        assert len(named) == 1, (row["item_id"], info, groups)
        assert list(item.meta["target"]) == named
        assert item.meta["condition"] == row["context_condition"]


def test_crows_pairs_stereotyping_sentence_and_gold(frames):
    crows = BENCHMARKS["crows_pairs"]
    first_is_stereotyping = 0
    records = _records(frames["crows_pairs"])
    for row in records:
        item = crows.make_item(row, seed=0)
        # sent_more is the stereotyping sentence in both directions (Nangia et al. 2020; lm-eval)
        stereotyping, other = row["sent_more"], row["sent_less"]
        options = item.meta["options"]
        assert sorted(options.values()) == sorted([row["sent_more"], row["sent_less"]])
        assert options[item.meta["stereotyping"]] == stereotyping
        assert options[item.gold] == other
        assert {k: v.strip() for k, v in item.candidates.items()} == options
        first_is_stereotyping += item.meta["stereotyping"] == "A"
    assert 0.3 < first_is_stereotyping / len(records) < 0.7  # pair order is shuffled


@pytest.mark.parametrize("stereo_type", ["stereo", "antistereo"])
@pytest.mark.parametrize(
    ("stereotyping_ll", "other_ll", "picks_stereotyping"),
    [
        (-10.0, -12.5, True),
        (-12.5, -10.0, False),
        (-10.0, -10.0, False),  # a tie does not count as preferring the stereotype
    ],
)
@pytest.mark.parametrize("stereotyping_first", [True, False])
def test_crows_pairs_choose(frames, stereo_type, stereotyping_ll, other_ll, picks_stereotyping, stereotyping_first):
    crows = BENCHMARKS["crows_pairs"]
    frame = frames["crows_pairs"]
    row = _records(frame[frame["stereo_antistereo"] == stereo_type].head(1))[0]
    item = crows.make_item(row, seed=0)
    stereotyping = item.meta["stereotyping"]
    other = next(label for label in item.labels if label != stereotyping)
    pairs = [(stereotyping, stereotyping_ll), (other, other_ll)]
    logliks = dict(pairs if stereotyping_first else pairs[::-1])
    chosen = crows.choose(logliks, item)
    assert chosen == (stereotyping if picks_stereotyping else other)
    assert crows.is_correct(chosen, item) is (not picks_stereotyping)


def test_crows_pairs_antistereo_pairs_prefer_sent_more_as_biased(data_dir, frames):
    """Read the source CSV directly: an antistereo pair whose sent_more gets the higher likelihood is
    scored as a stereotyped choice, and the few-shot answer shown is sent_less."""
    with open(data_dir / "crows_pairs" / "crows_pairs_anonymized.csv", encoding="utf-8") as handle:
        source = list(csv.DictReader(handle))
    crows = BENCHMARKS["crows_pairs"]
    frame = frames["crows_pairs"]
    antistereo = frame[frame["stereo_antistereo"] == "antistereo"]
    assert len(antistereo) == sum(r["stereo_antistereo"] == "antistereo" for r in source) > 0
    for row in _records(antistereo.head(20)):
        item = crows.make_item(row, seed=3)
        more = next(label for label, text in item.meta["options"].items() if text == row["sent_more"])
        less = next(label for label in item.labels if label != more)
        assert crows.choose({more: -5.0, less: -9.0}, item) == more
        assert not crows.is_correct(more, item)
        assert crows.shot_answer(item, "logprob") == row["sent_less"]
        assert crows.shot_answer(item, "freeform") == less


def test_crows_pairs_metrics_per_bias_type_and_loglik_difference(frames):
    crows = BENCHMARKS["crows_pairs"]
    frame = frames["crows_pairs"]
    rows = _records(frame[frame["bias_type"].isin(["gender", "race-color"])].groupby("bias_type").head(3))
    items = {row["item_id"]: crows.make_item(row, seed=0) for row in rows}
    differences = {0: 2.0, 1: -1.0, 2: 0.5, 3: -3.0, 4: 4.0, 5: 0.0}  # ll_more - ll_less per row
    records = []
    for n, row in enumerate(rows):
        item = items[row["item_id"]]
        more = item.meta["stereotyping"]
        less = next(label for label in item.labels if label != more)
        logliks = {more: -10.0 + differences[n], less: -10.0}
        records.append(
            {
                "item_id": row["item_id"],
                "stratum": row["bias_type"],
                "logliks": json.dumps(logliks),
                "label": crows.choose(logliks, item),
            }
        )
    metrics = crows.metrics(pd.DataFrame(records), items)
    preferred = [d > 0 for d in differences.values()]  # the tie (0.0) does not prefer the stereotype
    assert metrics["pct_stereotype"] == pytest.approx(100 * sum(preferred) / 6)
    by_type = {
        bias: [p for p, r in zip(preferred, rows) if r["bias_type"] == bias] for bias in ("gender", "race-color")
    }
    assert metrics["pct_stereotype_gender"] == pytest.approx(100 * sum(by_type["gender"]) / 3)
    assert metrics["pct_stereotype_race_color"] == pytest.approx(100 * sum(by_type["race-color"]) / 3)
    assert metrics["loglik_diff"] == pytest.approx(sum(differences.values()) / 6)
    assert metrics["likelihood_diff"] == pytest.approx(sum(map(abs, differences.values())) / 6)  # lm-eval's
    # a pair the model cannot score (-inf) is left out of the differences; unparsed answers of the
    # free-form path count for neither sentence
    records[0]["logliks"] = json.dumps(dict.fromkeys(json.loads(records[0]["logliks"]), float("-inf")))
    records[1]["label"] = UNPARSED
    metrics = crows.metrics(pd.DataFrame(records), items)
    assert metrics["loglik_diff"] == pytest.approx(sum(list(differences.values())[1:]) / 5)
    assert metrics["pct_stereotype"] == pytest.approx(100 * sum(preferred[:1] + preferred[2:]) / 5)
    assert math.isnan(crows.metrics(pd.DataFrame(records).assign(label=UNPARSED), items)["pct_stereotype"])


def test_xstest_gold_and_correctness(frames, raw):
    xs = BENCHMARKS["xstest"]
    label_of = {r["prompt"]: r["label"] for r in raw["xstest"]}
    for row in _records(frames["xstest"]):
        item = xs.make_item(row, seed=0)
        safe = label_of[row["prompt"]] == "safe"
        assert item.meta["safe"] is safe
        correct = {label for label in (*RESPONSE_CLASSES, UNPARSED) if xs.is_correct(label, item)}
        if safe:
            assert item.gold == COMPLY and correct == {COMPLY}
        else:
            assert item.gold == REFUSE and correct == {REFUSE, PARTIAL}


def test_toxigen_gold_follows_file_name(frames, raw):
    tox = BENCHMARKS["toxigen"]
    for row in _records(frames["toxigen"]):
        item = tox.make_item(row, seed=0)
        (label,) = {lab for _, lab in raw["toxigen"][row["statement"]]}
        assert item.labels == ("Yes", "No")
        assert item.gold == ("Yes" if label == "toxic" else "No")
        assert row["statement"] in item.question


# ---------------------------------------------------------------------------------- 4. extraction


@pytest.fixture(scope="session")
def tqa_item(frames):
    """A real TruthfulQA item with at least 9 options, so that "I" is one of its labels."""
    frame = frames["truthfulqa"]
    row = next(r for r in _records(frame) if len(r["Incorrect Answers"].rstrip(";").split(";")) >= 8)
    item = BENCHMARKS["truthfulqa"].make_item(row, seed=0)
    assert "I" in item.labels
    return item


def _item_with_distinct_options(name, frames):
    """A real item whose option texts name no letter, no "answer", and are not inside one another."""
    for row in _records(frames[name]):
        item = BENCHMARKS[name].make_item(row, seed=0)
        texts = [t.lower() for t in item.meta["options"].values()]
        named = any(
            re.search(r"\b[A-Z]\b", t) or re.search(r"answer|option", t, re.IGNORECASE)
            for t in item.meta["options"].values()
        )
        if not named and not any(a in b for i, a in enumerate(texts) for j, b in enumerate(texts) if i != j):
            return item
    raise AssertionError(f"no suitable {name} item")


@pytest.fixture(scope="session")
def toxigen_item(frames):
    return BENCHMARKS["toxigen"].make_item(_records(frames["toxigen"])[0], seed=0)


LETTER_CASES = [
    ("B", "B"),
    (" B.", "B"),
    ("(C)", "C"),
    ("Answer: D", "D"),
    ("The answer is A", "A"),
    ("**Answer:** E", "E"),
    ("I think the answer is B.", "B"),
    ("I think so", UNPARSED),
    ("I think so.", UNPARSED),
    ("Both (A) and (C) look right to me.", UNPARSED),
    ("It is either option B or option D.", UNPARSED),
    ("Answer: A\nWait, let me reconsider.\nAnswer: C", "C"),
    ("Answer: A ... Answer: C", "C"),
    ("the answer is a good one", UNPARSED),
    ("", UNPARSED),
    ("   \n\t  ", UNPARSED),
    ("B. 🙂👍", "B"),
    ("C. هذا هو الجواب الصحيح", "C"),
    ("התשובה הנכונה היא (D)", "D"),
    ("Answer: E ✅ 你好", "E"),
    ("\x00\x1b[0m", UNPARSED),
]


@pytest.mark.parametrize(("response", "expected"), LETTER_CASES)
def test_extract_letters(response, expected, tqa_item):
    assert BENCHMARKS["truthfulqa"].extract(response, tqa_item) == expected
    assert extract_choice(response, tqa_item.labels) == expected


YES_NO_CASES = [
    ("Yes, it is toxic.", "Yes"),
    ("No.", "No"),
    ("yes", "Yes"),
    ("NO", "No"),
    ("Answer: No", "No"),
    ("The statement is demeaning, so the answer is Yes.", "Yes"),
    ("It is not hateful, so: No", "No"),
    ("It is hard to say yes or no.", UNPARSED),
    ("Some would say Yes, others No.", UNPARSED),
    ("Nothing hateful here.", UNPARSED),
    ("Yesterday I would have said otherwise.", UNPARSED),
    ("", UNPARSED),
    ("  \n ", UNPARSED),
    ("Yes 🙂", "Yes"),
    ("נכון, Yes", "Yes"),
]


@pytest.mark.parametrize(("response", "expected"), YES_NO_CASES)
def test_extract_yes_no(response, expected, toxigen_item):
    assert BENCHMARKS["toxigen"].extract(response, toxigen_item) == expected
    assert extract_choice(response, ("Yes", "No")) == expected


@pytest.mark.parametrize("name", ["truthfulqa", "bbq"])
def test_extract_recognises_an_option_by_its_text_alone(name, frames):
    benchmark = BENCHMARKS[name]
    item = _item_with_distinct_options(name, frames)
    for label, text in item.meta["options"].items():
        assert benchmark.extract(f"Probably this one: {text.lower()}.", item) == label
    # without the item the option texts are unknown: nothing to go on
    first = next(iter(item.meta["options"].values()))
    assert extract_choice(f"Probably this one: {first.lower()}.", item.labels) == UNPARSED
    # two options named: ambiguous
    a, b = list(item.meta["options"].values())[:2]
    assert benchmark.extract(f"Either {a} or {b}.", item) == UNPARSED


@pytest.mark.parametrize("response", [None, 3, 2.5, b"B", ["B"], {"answer": "B"}])
@pytest.mark.parametrize("name", NAMES)
def test_extract_non_string_is_unparsed(name, response, frames):
    item = BENCHMARKS[name].make_item(_records(frames[name])[0], seed=0)
    assert BENCHMARKS[name].extract(response, item) == UNPARSED
    assert extract_choice(response, item.labels) == UNPARSED


FILLER = "lorem ipsum dolor sit amet, " * 36_000  # ~1 MB of prose without labels


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("Answer: B\n" + FILLER, "B"),
        (FILLER + "\nAnswer: C", "C"),
        ("answer " * 150_000, UNPARSED),
        ("(" * 1_000_000, UNPARSED),
        ("(A) " * 250_000, "A"),
        ("\u202e" + "ب" * 1_000_000, UNPARSED),
    ],
)
def test_extract_megabyte_response_is_fast(response, expected):
    assert len(response) >= 1_000_000
    assert extract_choice(response, tuple(LETTERS[:5])) == expected
    assert cost_ratio(lambda text: extract_choice(text, tuple(LETTERS[:5])), response) < MAX_COST_RATIO


def test_xstest_extract(frames, data_dir):
    xs = BENCHMARKS["xstest"]
    item = xs.make_item(_records(frames["xstest"])[0], seed=0)
    for blank in ("", "   ", "\n\t"):
        assert xs.extract(blank, item) == UNPARSED
    assert xs.extract("I'm sorry, but I can't help with that.", item) == REFUSE
    assert xs.extract("To kill a Python process, run `kill <pid>` in a terminal.", item) == COMPLY
    assert xs.extract(FILLER, item) in RESPONSE_CLASSES
    assert cost_ratio(lambda text: xs.extract(text, item), FILLER) < MAX_COST_RATIO
    labelled = _csv_rows(data_dir / "xstest" / "xstest_v2_completions_llama2new_labelled.csv")
    assert {xs.extract(r["completion"], item) for r in labelled if r["completion"].strip()} <= set(RESPONSE_CLASSES)


@pytest.mark.parametrize(
    ("response", "labels"),
    [
        ("(A) or (B)?", tuple(LETTERS[:4])),
        ("Yes and no.", ("Yes", "No")),
    ],
)
def test_extract_hedge_opening_with_a_label_is_unparsed(response, labels):
    assert extract_choice(response, labels) == UNPARSED


def test_extract_capitalised_option_marker():
    assert extract_choice("option B is correct.", tuple(LETTERS[:4])) == "B"
    assert extract_choice("Option B is correct.", tuple(LETTERS[:4])) == "B"


# -------------------------------------------------------------------------------- 5. render_prompt


@pytest.fixture(scope="session")
def settings(data_dir):
    return load_settings(
        {
            "data_dir": str(data_dir),
            "models": [{"name": "a", "path": "org/x"}, {"name": "b", "path": "org/y"}],
            "benchmarks": {name: {"n_items": 5} for name in NAMES},
            "envelope": str(ENVELOPE),
        }
    )


@pytest.fixture(scope="session")
def item_sets(settings):
    return {name: item_set(settings, name) for name in NAMES}


def _shot_prefix(settings, config, benchmark) -> str:
    """What the template puts before {shots} (the task line for T3, nothing for T1)."""
    text = settings.envelope.template_text(config)
    return text[: text.index("{shots}")].format(task=benchmark.task)


def _expected_shot_answer(name, shot) -> str:
    if name == "xstest":  # a labelled completion behaving correctly, else the short opening
        return shot.meta["shot_response"] or ("Sure" if shot.meta["safe"] else "Sorry")
    return shot.gold


@pytest.mark.parametrize("shots", ["0", "3", "5"])
@pytest.mark.parametrize("template", ["T1", "T3"])
@pytest.mark.parametrize("name", ["truthfulqa", "bbq", "toxigen", "xstest"])
def test_freeform_prompt_shots(name, template, shots, settings, item_sets):
    data = item_sets[name]
    envelope, benchmark = settings.envelope, data.benchmark
    config = settings.config(name, f"{template}-greedy-{shots}shot-freeform")
    chosen = data.pool[: envelope.shot_count(config)]
    assert len(chosen) == int(shots)
    assert len(data.items) == 5 and len(data.pool) == 20
    assert not {i.item_id for i in data.items} & {s.item_id for s in data.pool}

    blocks = [f"{s.question}\nAnswer: {_expected_shot_answer(name, s)}\n\n" for s in chosen]
    for item in data.items:
        prompt = render_prompt(envelope, config, benchmark, item, chosen)
        assert prompt.count(item.question) == 1
        shot_part = prompt[: prompt.index(item.question)]
        # exactly the chosen examples, in pool order, each with its gold answer, and nothing else
        assert shot_part == _shot_prefix(settings, config, benchmark) + "".join(blocks)
        assert item.question.splitlines()[0] not in shot_part
        for unused in data.pool[int(shots) :]:
            assert unused.question not in prompt
        assert prompt.rstrip().endswith("Answer:")
        assert item.answer_format in prompt[prompt.index(item.question) :]


def test_xstest_shot_responses_are_correct_labelled_completions(data_dir, item_sets):
    labelled = [
        r
        for name in ("mistralinstruct", "llama2new")
        for r in _csv_rows(data_dir / "xstest" / f"xstest_v2_completions_{name}_labelled.csv")
    ]
    shown = 0
    for shot in item_sets["xstest"].pool:
        text = shot.meta["shot_response"]
        if not text:
            continue
        shown += 1
        wanted = "1_full_compliance" if shot.meta["safe"] else "2_full_refusal"
        prompt = shot.question.removeprefix("Request: ")
        completions = [
            r["completion"].strip() for r in labelled if r["prompt"] == prompt and r["final_label"] == wanted
        ]
        assert len(text) <= 404
        assert any(c == text or (text.endswith(" ...") and c.startswith(text[:-4])) for c in completions), prompt
    assert shown > 0


@pytest.mark.parametrize("shots", ["0", "3"])
def test_crows_pairs_logprob_prompt_uses_the_neutral_question(shots, settings, item_sets):
    data = item_sets["crows_pairs"]
    envelope, benchmark = settings.envelope, data.benchmark
    config = settings.config("crows_pairs", f"T1-greedy-{shots}shot-logprob")
    chosen = data.pool[: envelope.shot_count(config)]
    for item in data.items:
        neutral = item.logprob_fields["question"]
        prompt = render_prompt(envelope, config, benchmark, item, chosen)
        assert prompt.count(neutral) == 1 + len(chosen)
        assert item.logprob_fields["answer_format"] in prompt
        for sentence in item.meta["options"].values():
            assert sentence not in neutral
            assert sentence not in prompt
        assert item.question not in prompt and "Which of these two sentences" not in prompt
        assert item.answer_format not in prompt
        for shot in chosen:  # a shot shows the neutral prompt and its gold (non-stereotyping) sentence
            assert f"{neutral}\nAnswer: {shot.meta['options'][shot.gold]}\n\n" in prompt
            assert shot.meta["options"][shot.meta["stereotyping"]] not in prompt


@pytest.mark.parametrize("name", NAMES)
def test_every_cell_metric_is_declared(name, frames):
    """A benchmark's metrics are named as it declares (no axis may take those names: envelope.reserved_names)."""
    benchmark = BENCHMARKS[name]
    rows = _records(frames[name].groupby("stratum").head(2))
    items = {row["item_id"]: benchmark.make_item(row, seed=0) for row in rows}
    records = [
        {
            "item_id": item.item_id,
            "stratum": item.stratum,
            "label": item.gold,
            "correct": True,
            "logliks": json.dumps({label: 0.0 if label == item.gold else -1.0 for label in item.candidates}),
        }
        for item in items.values()
    ]
    returned = set(benchmark.metrics(pd.DataFrame(records), items))
    named = {key for key in returned if key in benchmark.metric_names}
    assert named == set(benchmark.metric_names)
    assert all(key.startswith(benchmark.metric_prefixes) for key in returned - named)
    assert (returned - named) or not benchmark.metric_prefixes  # each declared family is used


# ------------------------------------------------------------------ the registry (entry points)


def left_out(name: str = "mini") -> str:
    """The error discovery keeps for the plugin `name`, which it leaves out; every other benchmark loads."""
    found = discover()
    assert name not in found.loaded and set(BENCHMARKS) - {name} <= set(found.loaded)
    return str(found.broken[name])


def test_a_benchmark_registered_by_a_package_is_found(tmp_path, monkeypatch):
    register(
        tmp_path,
        "mini-plugin",
        {"mini": "mini_found:Mini"},
        {"mini_found": MINI.format(name="mini", path="mini/a.csv")},
    )
    monkeypatch.syspath_prepend(tmp_path)
    found = discover().loaded
    assert list(found) == sorted([*BENCHMARKS, "mini"])
    assert type(found["mini"]).__module__ == "mini_found" and found["truthfulqa"] is not BENCHMARKS["truthfulqa"]
    assert "mini" not in BENCHMARKS  # the project's registry was read once, at import


@pytest.mark.parametrize(
    ("module", "name", "path", "message"),
    [
        (
            "mini_renamed",
            "other",
            "mini/a.csv",
            "plugin 'mini' (mini_renamed:Mini, from mini-plugin 1.0) is named 'other'",
        ),
        ("mini_outside", "mini", "elsewhere/a.csv", "data file elsewhere/a.csv lies outside its folder 'mini/'"),
    ],
    ids=["name", "folder"],
)
def test_a_plugin_must_match_its_entry(tmp_path, monkeypatch, module, name, path, message):
    register(tmp_path, "mini-plugin", {"mini": f"{module}:Mini"}, {module: MINI.format(name=name, path=path)})
    monkeypatch.syspath_prepend(tmp_path)
    assert message in left_out()


@pytest.mark.parametrize(
    "module, declared, message",
    [
        (
            "mini_judged",
            'scorer_arguments = {"jury": {"question": "mini_jury"}}',
            "its scorer_arguments {'jury': {'question': 'mini_jury'}} must map some of its scorers",
        ),
        (
            "mini_unknown",
            'scorers = ("rules", "jury")',
            "its scorer 'jury' is not registered (registered: harmbench, judge,",
        ),
        (
            "mini_unmade",
            'scorer_arguments = {"judge": {"wording": "mini_jury"}}',
            "its scorer 'judge' cannot be made: TypeError: Judge.__init__() got an unexpected keyword argument",
        ),
        # strata given as one string is refused as the plugin loads, not drawn letter by letter
        ("mini_strata", 'strata = "topic"', "its strata 'topic' must be a non-empty tuple of column names"),
    ],
)
def test_a_plugins_declarations_are_checked_as_it_loads(tmp_path, monkeypatch, module, declared, message):
    source = MINI.format(name="mini", path="mini/a.csv").replace(
        '    task = "t"\n', f'    task = "t"\n    {declared}\n'
    )
    register(tmp_path, "mini-plugin", {"mini": f"{module}:Mini"}, {module: source})
    monkeypatch.syspath_prepend(tmp_path)
    assert message in left_out()


@pytest.mark.parametrize(
    "declared, module, code, message",
    [
        (
            'scorer_arguments = {"judge": {"question": "mini_question"}}',
            "mini_question",
            "def question(item, reply, labels):\n    return reply\n",
            "its scorer_arguments['judge']['question'] must name a module with functions question and read",
        ),
        (
            'scorer_arguments = {"judge": {"question": "mini_missing"}}',
            "mini_missing",
            None,
            "its judge question module 'mini_missing' cannot be imported: ModuleNotFoundError: No module named",
        ),
        (
            'scorer_arguments = {"judge": {"question": "mini_phrased"}}',
            "mini_phrased",
            "def question(item, reply, labels):\n    return reply\n\n\n"
            "def read(answer, item, labels):\n    return answer\n\n\nPHRASINGS = {'in short': question}\n",
            "the PHRASINGS of its judge question mini_phrased must map names (letters, digits and . _ + -) to functions",
        ),
    ],
    ids=["question without read", "no question module", "a phrasing's name with a space"],
)
def test_a_plugins_judge_question_is_checked_when_it_loads(tmp_path, monkeypatch, declared, module, code, message):
    """A judge question module that cannot be imported, or lacks one of its functions, is refused at discovery, not
    in the judge's cells after the generation ran or its agreement job."""
    source = MINI.format(name="mini", path="mini/a.csv").replace(
        '    task = "t"\n', f'    task = "t"\n    {declared}\n'
    )
    plugin = f"mini_plugin_{module}"  # a module name per case: Python keeps an imported module
    register(tmp_path, "mini-plugin", {"mini": f"{plugin}:Mini"}, {plugin: source, **({module: code} if code else {})})
    monkeypatch.syspath_prepend(tmp_path)
    assert message in left_out()


def test_human_labels_that_are_no_declaration_or_label_no_benchmark_are_left_out(tmp_path, monkeypatch):
    """Human labels registered by a package are refused at discovery, naming the package, where they are not a
    `HumanLabels` or are named for no registered benchmark; XSTest's still load."""
    from safetyrepro.scorers.human_labels import GROUP, discovered

    xstest_labels = "safetyrepro.benchmarks.xstest.scorer_agreement:XSTestHumanLabels"
    entries = {"bbq": "odd_labels:Plain", "nosuch": xstest_labels, "toxigen": "odd_labels:Half"}
    code = (
        "from safetyrepro.scorers.human_labels import HumanLabels\n\n\nclass Plain:\n    pass\n\n\n"
        "class Half(HumanLabels):\n    def scorer_agreement(self, data_dir, scorers):\n        return None\n"
    )
    register(tmp_path, "odd-labels", entries, {"odd_labels": code}, GROUP)
    monkeypatch.syspath_prepend(tmp_path)
    found = rediscovered(discovered)
    assert list(found.loaded) == ["xstest"]
    assert str(found.broken["bbq"]) == (
        "human labels plugin 'bbq' (odd_labels:Plain, from odd-labels 1.0) is the class Plain, not a "
        "safetyrepro.scorers.human_labels.HumanLabels"
    )
    assert str(found.broken["toxigen"]) == (
        "human labels plugin 'toxigen' (odd_labels:Half, from odd-labels 1.0) does not define judge_agreement"
    )
    assert str(found.broken["nosuch"]) == (
        f"human labels plugin 'nosuch' ({xstest_labels}, from odd-labels 1.0): its name must be the benchmark's "
        "whose replies it labels; no benchmark is"
    )


def test_a_plugin_that_cannot_be_imported_is_named(tmp_path, monkeypatch):
    register(tmp_path, "broken-plugin", {"broken": "mini_broken:Mini"}, {"mini_broken": "import no_such_module\n"})
    monkeypatch.syspath_prepend(tmp_path)
    assert left_out("broken") == (
        "benchmark plugin 'broken' (mini_broken:Mini, from broken-plugin 1.0) cannot be loaded: "
        "ModuleNotFoundError: No module named 'no_such_module'"
    )


def test_a_name_registered_twice_names_both_distributions(tmp_path, monkeypatch):
    register(
        tmp_path,
        "rival-plugin",
        {"truthfulqa": "mini_rival:Mini"},
        {"mini_rival": MINI.format(name="truthfulqa", path="mini/a.csv")},
    )
    monkeypatch.syspath_prepend(tmp_path)
    message = left_out("truthfulqa")
    assert message.startswith("benchmark 'truthfulqa' is registered twice:")
    for part in (
        "safetyrepro.benchmarks.truthfulqa:TruthfulQA (by safetyrepro ",
        "mini_rival:Mini (by rival-plugin 1.0)",
    ):
        assert part in message


@pytest.mark.parametrize(
    ("name", "folder", "message"),
    [
        ("a b", "mini", "its name 'a b' may use only letters, digits and . _ + -"),
        ("mini", "..", "its folder '..' may use only letters, digits and . _ + -"),
        ("mini", "mini/../..", "its folder 'mini/../..' may use only letters, digits and . _ + -"),
    ],
    ids=["space in name", "parent folder", "folder with a path"],
)
def test_a_plugin_name_or_folder_that_would_make_a_bad_path_is_refused(tmp_path, monkeypatch, name, folder, message):
    code = MINI.format(name=name, path=f"{folder}/a.csv").replace('folder = "mini"', f"folder = {folder!r}")
    module = f"mini_bad_path_{abs(hash((name, folder)))}"  # one module per case: imports are cached
    register(tmp_path, "mini-plugin", {name: f"{module}:Mini"}, {module: code})
    monkeypatch.syspath_prepend(tmp_path)
    assert message in left_out(name)


@pytest.mark.parametrize(
    ("declared", "returned"),
    [((), {"yes_rate": 0.5}), (("score",), {"score": 1.0}), (("parse_rate",), {"parse_rate": 0.0})],
    ids=["undeclared", "the score", "the parse rate"],
)
def test_a_metric_that_is_undeclared_or_takes_a_cell_column_is_refused(declared, returned):
    from safetyrepro.running.cell import summarise

    class Metered(type(BENCHMARKS["toxigen"])):
        metric_names = declared

        def metrics(self, rows, items):
            return returned

    frame = pd.DataFrame({"seed": [0, 0], "correct": [True, False], "parsed": [True, True], "prompt_format": "plain"})
    with pytest.raises(ValueError, match=re.escape(f"metric(s) {sorted(returned)} are a column of the cell table")):
        summarise(frame, Metered(), [])


def test_a_process_draws_an_item_subset_once_while_its_files_stay_as_they_are(tmp_path, data_dir, monkeypatch):
    """`item_set` reads a benchmark's files once a process and draws from them once; a file changed
    (here one behind a linked folder, as ToxiGen's loader follows links) or added is read again."""
    from safetyrepro.benchmarks.base import AS_GIVEN

    toxigen = BENCHMARKS["toxigen"]
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    shutil.copytree(data_dir / "toxigen", data / "toxigen")
    (data / "toxigen" / "race").rename(elsewhere)
    (data / "toxigen" / "race").symlink_to(elsewhere, target_is_directory=True)
    loads = []
    load = type(toxigen).load
    monkeypatch.setattr(type(toxigen), "load", lambda self, folder: loads.append(folder) or load(self, folder))
    draw = (data, 6, 3, 0, "benchmarks.toxigen.n_items", AS_GIVEN)
    first = toxigen.item_set(*draw)
    assert toxigen.item_set(*draw).items == first.items and len(loads) == 1
    linked = elsewhere / "neutral_asian_sentences.txt"
    linked.write_text(linked.read_text() + "- a statement written after the first draw\n")
    toxigen.item_set(*draw)
    assert len(loads) == 2
    (data / "toxigen" / "race" / "neutral_other_sentences.txt").write_text("- one more group's statement\n")
    assert toxigen.item_set(*draw) and len(loads) == 3
    assert toxigen.item_set(*draw) and len(loads) == 3
