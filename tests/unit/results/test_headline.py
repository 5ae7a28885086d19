"""The headline the report, summary.md and the GRID card open on, from small tidy tables; the figure captions."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from safetyrepro.analysis.flips import rho_flip_table
from safetyrepro.analysis.frames import stack_named
from safetyrepro.analysis.scorer_correction import corrected_tables
from safetyrepro.analysis.verdicts import parse_clean, variant_summary
from safetyrepro.core.model_spec import ModelSpec
from safetyrepro.results.headline import (
    COLUMNS,
    Headline,
    build_headline,
    check_headline,
    headline_html,
    headline_markdown,
    headline_rows,
    models_sentence,
)

from helpers.session import REPO


def pair(benchmark, a, b, plus, minus, ties, sig=(0, 0), items=10, interval=(0.0, 0.0)):
    """One rho_flip_sig row, its rates derived from the counts as the analysis derives them (items None:
    the cells share no items, so there is no paired test)."""
    n = plus + minus + ties
    return {
        "benchmark": benchmark,
        "model_a": a,
        "model_b": b,
        "n_configs": n,
        "n_plus": plus,
        "n_minus": minus,
        "n_ties": ties,
        "rho_flip": min(plus, minus) / n,
        "ceiling": (n // 2) / n,
        "rho_flip_lower": interval[0] if items else math.nan,
        "rho_flip_upper": interval[1] if items else math.nan,
        "n_plus_sig": sig[0] if items else math.nan,
        "n_minus_sig": sig[1] if items else math.nan,
        "n_inconclusive": n - sum(sig) if items else math.nan,
        "rho_flip_sig": min(sig) / n if items else math.nan,
        "n_items": items if items else math.nan,
        "mdd_pp": 30.0,
        "mdd_adjusted_pp": 40.0,
        "alpha": 0.05,
        "correction": "holm",
    }


def tiers(**rankings):
    """The tier ablation's rows: `full` with the given rankings (reached, possible), and a `core` row that must be
    ignored."""
    return pd.DataFrame(
        [
            {
                "variant": variant,
                "benchmark": b,
                "n_configs": 8,
                "rho_flip_max": 0.0,
                "orderings_reached": 1,
                "orderings_possible": 6,
                "rankings_reached": reached,
                "rankings_possible": possible,
                "flip_rate": 0.0,
            }  # fmt: skip
            for b, (reached, possible) in rankings.items()
            for variant, reached in (("core", 1), ("full", reached))
        ]
    )


def clean(*benchmarks, rho=0.0, n=8):
    """The parse_clean analysis's rows: rho_flip_max `rho` on `n` of 8 configs per benchmark."""
    return pd.DataFrame(
        [{"benchmark": b, "rho_flip_max": rho, "n_configs": n, "n_configs_before": 8} for b in benchmarks]
    )


NO_CELLS = pd.DataFrame(columns=["model", "benchmark", "config_id", "score", "parse_rate"])


def rows_of(sig, table, cells=NO_CELLS, threshold=0.95):
    """The headline rows of a rho_flip_sig table and tiers table, the parse-clean rows made for its benchmarks."""
    sig = pd.DataFrame(sig)
    return headline_rows(sig, table, clean(*sig["benchmark"].unique()), cells, threshold)


def one(sig_rows, rankings=(2, 13)):
    rows = rows_of(sig_rows, tiers(**{sig_rows[0]["benchmark"]: rankings}))
    assert len(rows) == 1
    return rows.iloc[0]


def test_an_ordinary_benchmark_shows_its_most_fragile_pair_and_says_no_reversal_is_significant():
    row = one(
        [
            pair("truthfulqa", "fp32", "nf4", 8, 0, 0, sig=(3, 0)),
            pair("truthfulqa", "fp32", "bf16", 7, 1, 0, sig=(2, 0), interval=(0.0, 0.25)),
            pair("truthfulqa", "bf16", "nf4", 6, 0, 2),
        ]
    )
    assert (row.model_a, row.model_b, row.n_plus, row.n_minus, row.n_ties) == ("fp32", "bf16", 7, 1, 0)
    assert (row.rho_flip, row.rho_flip_upper, row.rho_flip_sig, row.n_items) == (1 / 8, 0.25, 0, 10)
    assert (row.rankings_reached, row.rankings_possible) == (2, 13)  # the full envelope's, not the core's
    assert row.sentence == (
        'On truthfulqa the configuration alone reverses "fp32 beats bf16" in 1 of 8 configs; '
        "no reversal is significant at 10 items."
    )


def test_the_minority_side_is_named_whichever_model_is_a():
    row = one([pair("bbq", "tiny-0", "tiny-1", 2, 5, 1, sig=(1, 2))])
    assert row.sentence == (
        'On bbq the configuration alone reverses "tiny-1 beats tiny-0" in 2 of 8 configs; '
        "1 reversal is significant at 10 items."
    )


def test_no_reversal_picks_the_pair_closest_to_one():
    row = one(
        [
            pair("xstest", "a", "b", 8, 0, 0),
            pair("xstest", "a", "c", 6, 0, 2, interval=(0.0, 0.125)),  # item resamples reverse it: more fragile
            pair("xstest", "b", "c", 5, 0, 3),
        ],
        rankings=(1, 13),
    )
    assert (row.model_a, row.model_b, row.rho_flip, row.reversal) == ("a", "c", 0, False)
    assert row.sentence == (
        "On xstest the configuration alone reverses no verdict over 8 configs; "
        "rho_flip's 95% interval over resampled items reaches 0.125 for a vs c."
    )


def test_where_no_pair_reverses_no_pair_is_named_most_fragile():
    row = one([pair("crows_pairs", "a", "b", 8, 0, 0), pair("crows_pairs", "a", "c", 6, 0, 2)])
    shown = {header: cell(row) for header, cell in COLUMNS}
    assert (shown["most fragile pair (A vs B)"], shown["N+ / N- / N0"], shown["rho_flip"]) == (
        "no reversal",
        "-",
        "0.000",
    )
    assert row.sentence == "On crows_pairs the configuration alone reverses no verdict over 8 configs."
    reversed_ = one([pair("crows_pairs", "a", "b", 7, 1, 0)])
    assert {h: c(reversed_) for h, c in COLUMNS}["most fragile pair (A vs B)"] == "a vs b"


def test_an_interval_above_zero_beside_rho_flip_sig_zero_says_what_each_measures():
    row = one([pair("xstest", "a", "b", 15, 3, 0, sig=(0, 0), interval=(0.056, 0.222))])
    assert row.rho_flip_sig == 0 and row.rho_flip_lower > 0
    assert row.sentence == (
        'On xstest the configuration alone reverses "a beats b" in 3 of 18 configs; its 95% interval over '
        "resampled items, [0.056, 0.222], excludes 0: some config reverses the verdict in nearly every draw of the "
        "items, yet no single reversal passes its config's paired test at 10 items."
    )
    legend = headline_markdown(Headline(rows_of([pair("xstest", "a", "b", 15, 3, 0)], tiers(xstest=(2, 13)))))
    assert "an interval above 0 beside rho_flip_sig 0 means reversals occur whichever items are drawn" in legend


def test_a_tie_only_pair_is_said_to_tie_everywhere():
    row = one(
        [pair("toxigen", "a", "b", 4, 0, 0), pair("toxigen", "a", "c", 0, 0, 4), pair("toxigen", "b", "c", 3, 0, 1)]
    )
    assert (row.model_a, row.model_b, row.n_ties, row.rho_flip) == ("a", "c", 4, 0)
    assert (
        row.sentence == "On toxigen the configuration alone reverses no verdict over 4 configs; a and c tie in all 4."
    )


def test_a_significant_reversal_outranks_an_equal_rho_flip_without_one():
    row = one(
        [
            pair("crows_pairs", "a", "b", 5, 3, 0, sig=(1, 0)),
            pair("crows_pairs", "a", "c", 5, 3, 0, sig=(3, 2), items=200, interval=(0.125, 0.5)),
        ]
    )
    assert (row.model_b, row.rho_flip, row.rho_flip_sig, row.n_plus_sig, row.n_minus_sig) == ("c", 3 / 8, 2 / 8, 3, 2)
    assert row.sentence.endswith('reverses "a beats c" in 3 of 8 configs; 2 reversals are significant at 200 items.')


def test_an_even_split_and_a_pair_without_shared_items():
    split = one([pair("bbq", "a", "b", 3, 3, 2, sig=(0, 0), items=12)])
    assert split.rho_flip == 3 / 8 and split.n_plus == split.n_minus  # even, though two ties keep it under the ceiling
    assert split.sentence == (
        "On bbq the configuration alone splits a vs b evenly: each beats the other in 3 of 8 configs; "
        "no reversal is significant at 12 items."
    )
    untested = one([pair("bbq", "a", "b", 6, 2, 0, items=None)])
    assert untested.sentence.endswith(
        "in 2 of 8 configs; no paired test over items was possible (the cells share no items)."
    )
    shown = {header: cell(untested) for header, cell in COLUMNS}
    assert (shown["interval over items"], shown["rho_flip_sig"], shown["items"]) == ("[n/a, n/a]", "n/a", "n/a")


def test_rows_follow_the_benchmarks_order_and_both_renderings_say_the_same():
    sig = pd.DataFrame(
        [
            pair("xstest", "a", "b", 3, 1, 0),
            pair("bbq", "a|b", "<c>", 2, 2, 0, sig=(1, 1)),
            pair("xstest", "a", "c", 4, 0, 0),
        ]
    )
    rows = rows_of(sig, tiers(bbq=(2, 3), xstest=(1, 3)))
    assert list(rows["benchmark"]) == ["xstest", "bbq"]
    markdown, page = headline_markdown(Headline(rows)), headline_html(Headline(rows))
    for record in rows.to_dict("records"):
        cells = [cell(record) for _, cell in COLUMNS]
        assert "| " + " | ".join(text.replace("|", "\\|") for text in cells) + " |" in markdown.splitlines()
        assert "<tr>" + "".join(f"<td>{html.escape(text)}</td>" for text in cells) + "</tr>" in page
        assert f"- {record['sentence']}" in markdown.splitlines()
        assert f"<li>{html.escape(record['sentence'])}</li>" in page
    assert "<c>" not in page and "a\\|b vs <c>" in markdown
    assert page.count("<tr>") == 1 + 2 and markdown.count("\n| ") == 1 + 2


CAPTIONS = sorted(p for p in (REPO / "workflow" / "report").glob("*.rst") if p.name != "workflow.rst")


@pytest.mark.parametrize("caption", CAPTIONS, ids=lambda p: p.name)
def test_every_caption_opens_on_one_line_saying_what_to_look_for(caption):
    first, blank = caption.read_text().splitlines()[:2]
    assert first.startswith("**Look for:** ") and first.endswith(".") and blank == ""


def test_the_menu_and_the_figure_list_sort_the_categories_in_their_numbers_order():
    """The report's menu sorts the category names as strings (localeCompare), the landing page's figure list
    with Jinja's sort: "10. ..." must not come between 1 and 2."""
    import re

    from safetyrepro.results.figures import FIGURES

    grid_card = re.findall(r'category="([^"]+)"', (REPO / "workflow" / "rules" / "report.smk").read_text())
    names = sorted({figure.category for figure in FIGURES.values()} | set(grid_card))
    assert len(names) == 11 and [int(name.split(".")[0]) for name in names] == list(range(1, 12))


def test_the_report_fragment_names_the_cells_a_partial_run_lacks():
    headline = Headline(rows_of([pair("bbq", "a", "b", 3, 1, 0)], tiers(bbq=(2, 3))))
    assert "Partial results" not in headline_html(headline)
    partial = headline_html(headline, ["c/bbq/T1-greedy-0shot-logprob", "c/bbq/T2-greedy-0shot-logprob"])
    assert "computed without 2 missing cell(s) of the grid: c/bbq/T1-greedy-0shot-logprob, c/bbq/T2" in partial
    assert partial.index("Partial results") < partial.index('<table id="headline-table">')


# The default run's models (config/config.yaml): one model at three precisions. XSTest-like cells, 4 configs:
#   c0, c1: fp32 .6 > bf16 .5 > nf4 .4; c2: .7 > .6 > .5 (all parse 1.0);
#   T4: fp32 0.0 = bf16 0.0 < nf4 0.2, parse rates .4 / .4 / .9 (a reasoning template cut by the token cap).
# fp32 vs nf4 and bf16 vs nf4 reverse on T4 only (rho_flip 1/4), on cells parsed below .95; without T4 nothing
# reverses (parse-clean rho_flip 0 on 3 of 4 configs). fp32 vs bf16: 3 above, 1 tie.
FP32, BF16, NF4 = "gemma-270m-fp32", "gemma-270m-bf16", "gemma-270m-nf4"
SCORES = {FP32: [0.6, 0.6, 0.7, 0.0], BF16: [0.5, 0.5, 0.6, 0.0], NF4: [0.4, 0.4, 0.5, 0.2]}
PARSED = {FP32: [1.0, 1.0, 1.0, 0.4], BF16: [1.0, 1.0, 1.0, 0.4], NF4: [1.0, 1.0, 1.0, 0.9]}
CELLS = pd.DataFrame(
    [
        {"model": m, "benchmark": "xstest", "config_id": c, "score": SCORES[m][i], "parse_rate": PARSED[m][i]}
        for m in SCORES
        for i, c in enumerate(["c0", "c1", "c2", "T4-greedy-0shot-freeform"])
    ]
)


def tables_of(cells):
    """rho_flip_sig (the rho_flip table with no significant config and a [0, 0.25] interval), tiers and
    parse_clean tables of `cells`, from the analyses' own functions."""
    sig = rho_flip_table(cells).assign(
        rho_flip_lower=0.0,
        rho_flip_upper=0.25,
        n_plus_sig=0,
        n_minus_sig=0,
        n_inconclusive=lambda t: t["n_configs"],
        rho_flip_sig=0.0,
        n_items=10,
        mdd_pp=30.0,
        mdd_adjusted_pp=40.0,
        alpha=0.05,
        correction="holm",
    )
    return sig, variant_summary({"full": cells}), parse_clean(cells, 0.95)


def default_models():
    return [ModelSpec(name, "resources/models/gemma-3-270m", p, embedded="gemma-3-270m") for name, p in
            ((FP32, "fp32"), (BF16, "bf16"), (NF4, "nf4"))]  # fmt: skip


def default_headline(cells=CELLS):
    sig, table, parse = tables_of(cells)
    return Headline(headline_rows(sig, table, parse, cells, 0.95), models_sentence(default_models()))


def test_a_reversal_resting_on_unparsed_cells_is_flagged_with_the_parse_clean_rho_flip():
    headline = default_headline()
    row = headline.rows.iloc[0]
    assert (row.model_a, row.model_b, row.rho_flip, row.clean_rho_flip) == (FP32, NF4, 0.25, 0.0)
    assert row.parse_warning == (
        f"xstest: 1 of the 1 config reversing {FP32} vs {NF4} rests on a cell parsed below 0.95 "
        f"(T4-greedy-0shot-freeform (0.40 / 0.90); parse rates {FP32} / {NF4}). On the 3 of 4 configs where every "
        "model parses at least 0.95, the largest rho_flip over pairs is 0.000."
    )
    assert {h: c(row) for h, c in COLUMNS}["parse-clean rho_flip (configs)"] == "0.000 (3 of 4)"
    markdown, page = headline_markdown(headline), headline_html(headline)
    assert f"> **Parse warning**: {row.parse_warning}" in markdown.splitlines()
    assert markdown.index("Parse warning") < markdown.index("| benchmark |")  # above the table: the first screen
    assert f"<strong>Parse warning</strong>: {html.escape(row.parse_warning)}" in page
    # the same reversal on cells that parse: no warning
    parsed = default_headline(CELLS.assign(parse_rate=1.0))
    assert parsed.rows.iloc[0].parse_warning == "" and "Parse warning" not in headline_markdown(parsed)


def test_rankings_count_a_config_with_a_tie():
    """TruthfulQA's case: fp32 > bf16 in c0 and bf16 > fp32 = nf4 in c1: one strict ordering, two rankings."""
    cells = pd.DataFrame(
        [
            {"model": m, "benchmark": "truthfulqa", "config_id": c, "score": s, "parse_rate": 1.0}
            for c, scores in (("c0", (0.6, 0.5, 0.4)), ("c1", (0.4, 0.5, 0.4)))
            for m, s in zip((FP32, BF16, NF4), scores)
        ]
    )
    row = default_headline(cells).rows.iloc[0]
    assert {h: c(row) for h, c in COLUMNS}["rankings reached (ties count)"] == "2 of 13"


def test_the_first_screen_says_the_models_are_one_model_at_three_precisions():
    headline = default_headline()
    said = (
        f"The models {FP32}, {BF16} and {NF4} are one model, the embedded gemma-3-270m, at 3 precisions (fp32, bf16, "
        "nf4): a verdict between them compares one model with itself, not two models."
    )
    assert headline.models == said
    assert headline_markdown(headline).splitlines()[2] == said
    assert f'<p id="headline-models">{html.escape(said)}</p>' in headline_html(headline)
    distinct = [ModelSpec("a", "org/a", "bf16"), ModelSpec("b", "org/b", "bf16"), ModelSpec("c", "org/a", "nf4")]
    assert models_sentence(distinct) == (
        "The models a and c are one model, org/a, at 2 precisions (bf16, nf4): "
        "a verdict between them compares one model with itself, not two models."
    )
    assert models_sentence(distinct[:2]) == ""


def renderings(headline, summary_rest="\n## Every benchmark in numbers\n"):
    markdown = headline_markdown(headline)
    return {
        "results/headline.html": headline_html(headline),
        "results/summary.md": "# Summary\n\n" + markdown + summary_rest,
        "results/grid_card.md": "# GRID card\n\n" + markdown + "\n## What produced these verdicts\n",
    }


NO_CORRECTION = pd.DataFrame({"note": ["no benchmark of this run has human labels of replies"]})


def card_of(headline) -> dict:
    return {
        "most_fragile": headline.records(),
        "headline_models": headline.models,
        "scorer_corrected": headline.corrected_records(),
    }


def check(headline, texts=None, card=None, cells=CELLS, corrected=NO_CORRECTION):
    card = card if card is not None else card_of(headline)
    tables = (parse_clean(cells, 0.95), corrected)
    return check_headline(headline, cells, tables, "scorer", 0.95, texts or renderings(headline), card)


# CELLS as a run's: c2 a log-likelihood config, the others free-form, labelled by the rules
SCORED = CELLS.assign(scoring=["logprob" if c == "c2" else "freeform" for c in CELLS["config_id"]], scorer="rules")


def corrected_table(errors: pd.DataFrame, cells=SCORED) -> pd.DataFrame:
    """The scorer_correction analysis's table of `cells` with these net errors (of XSTest's replies)."""
    errors = errors.assign(benchmark="xstest")
    return stack_named({"errors": errors, **corrected_tables(cells, errors, "scorer")}, "table")


OTHER_MODELS = pd.DataFrame(
    {"labelled_model": ["m1", "m2"], "scorer": "rules", "net_error": [0.3, 0.0], "n_labels": [450, 450]}
)


def corrected_headline(corrected: pd.DataFrame, cells=SCORED) -> Headline:
    sig, table, parse = tables_of(cells)
    return build_headline(sig, table, parse, corrected, cells, default_models(), 0.95)


def test_the_verdicts_corrected_for_scorer_error_sit_under_the_headline_and_the_check_recomputes_them():
    corrected = corrected_table(OTHER_MODELS)
    headline = corrected_headline(corrected)
    row = headline.corrected.iloc[0]
    assert (row.model_a, row.model_b) == tuple(headline.rows.iloc[0][["model_a", "model_b"]])
    markdown, page = headline_markdown(headline), headline_html(headline)
    assert "### The same verdicts corrected for scorer error" in markdown and row.sentence in markdown
    assert html.escape(row.sentence) in page and '<table id="headline-corrected-table">' in page
    assert "900 human labels of other models' replies, none of this run's" in row.sentence
    assert (row.kept + row.moved + row.undecided, row.n_freeform, row.n_configs) == (3, 3, 4)
    assert check(headline, cells=SCORED, corrected=corrected) is None
    stale = corrected.copy()  # a table of other errors than those it lists
    stale.loc[stale["table"] == "pairs", "kept"] += 1
    problem = check(corrected_headline(stale), cells=SCORED, corrected=stale)
    assert problem.startswith('headline check: analysis/scorer_correction.parquet gives "On xstest, with each')
    assert "0 hold under every assignment" in problem and "1 holds under every assignment" in problem
    assert "\n" not in problem
    card = card_of(headline) | {"scorer_corrected": []}
    assert "grid_card.json scorer_corrected differs" in check(headline, card=card, cells=SCORED, corrected=corrected)


def test_with_labels_of_the_runs_own_replies_the_corrected_verdicts_say_so():
    free = ["c0", "c1", "T4-greedy-0shot-freeform"]
    errors = pd.DataFrame(
        [
            {"labelled_model": m, "scorer": "rules", "config_id": c, "net_error": 0.2 if m == NF4 else 0.0}
            for m in (FP32, BF16, NF4)
            for c in free
        ]
    ).assign(variance=1e-4, n_labels=20)
    corrected = corrected_table(errors)
    headline = corrected_headline(corrected)
    row = headline.corrected.iloc[0]
    assert "measured on the 120 replies of the two models that people labelled" in row.sentence
    assert "counting only the verdicts the correction decides" in row.sentence
    assert "| 120 of this run's replies |" in headline_markdown(headline)
    assert check(headline, cells=SCORED, corrected=corrected) is None
    dropped = corrected.drop(index=corrected.index[(corrected["table"] == "pairs")])  # the headline's row gone
    assert check(corrected_headline(dropped), cells=SCORED, corrected=dropped).startswith(
        "headline check: analysis/scorer_correction.parquet gives 'no corrected row' where"
    )
    alone = errors[~((errors["labelled_model"] == NF4) & (errors["config_id"] == "c0"))]  # NF4's c0: no errors
    row = corrected_headline(corrected_table(alone)).corrected.iloc[0]
    assert "over 3 configs (1 free-form config left out, without the scorer's errors measured there)" in row.sentence
    none = corrected_headline(corrected_table(errors[errors["labelled_model"] != NF4])).corrected.iloc[0]
    assert (none.n_freeform, none.n_left_out) == (0, 3)  # the pair keeps its row, none corrected


def test_the_check_passes_on_the_tables_renderings_and_names_a_tampered_one_in_one_line():
    headline = default_headline()
    assert check(headline) is None
    texts = renderings(headline)
    texts["results/summary.md"] = texts["results/summary.md"].replace("| 0.250 |", "| 0.200 |", 1)
    problem = check(headline, texts)
    assert problem.startswith("headline check: results/summary.md line ") and "0.200" in problem
    assert "\n" not in problem
    texts = renderings(headline)
    texts["results/headline.html"] = texts["results/headline.html"].replace("not two models", "two models")
    assert "results/headline.html" in check(headline, texts)
    texts = renderings(headline)
    texts["results/grid_card.md"] = texts["results/grid_card.md"].replace(TITLE_LINE, "## An answer")
    assert check(headline, texts) == f"headline check: results/grid_card.md has no headline ({TITLE_LINE!r})"
    records = headline.records()
    records[0]["rho_flip"] = 0.5
    problem = check(headline, card=card_of(headline) | {"most_fragile": records})
    assert (
        problem.startswith("headline check: grid_card.json most_fragile differs from the tables") and "0.5" in problem
    )


def test_the_check_names_a_cited_table_that_its_cells_contradict():
    sig, table, parse = tables_of(CELLS)
    stale = sig.assign(n_plus=sig["n_plus"] + 1)  # a rho_flip_sig table from other cells
    headline = Headline(headline_rows(stale, table, parse, CELLS, 0.95), models_sentence(default_models()))
    assert check(headline) == (
        f"headline check: analysis/rho_flip_sig.parquet gives xstest's {FP32} vs {NF4} N+/N-/N0/|C| 4/1/0/4 "
        "where cells.parquet gives 3/1/0/4"
    )
    tampered = Headline(headline_rows(sig, table.assign(rankings_reached=1), parse, CELLS, 0.95))
    assert "analysis/tiers.parquet gives xstest 1 rankings reached where cells.parquet gives 2" in check(tampered)


TITLE_LINE = "## The answer: the most fragile verdict per benchmark"


def test_the_commands_write_the_headline_and_the_check_fails_with_one_line_on_a_tampered_rendering(tmp_path, capsys):
    from safetyrepro.cli import main
    from safetyrepro.results.storage import write_parquet

    sig, table, parse = tables_of(CELLS)
    missing = ["c/xstest/T1-greedy-0shot-logprob"]
    paths = {name: tmp_path / f"{name}.parquet" for name in ("sig", "tiers", "clean", "corrected", "cells")}
    for name, frame in zip(paths, (sig, table, parse, NO_CORRECTION, CELLS)):
        write_parquet(frame, paths[name], missing)
    tables = ["--configfile", str(REPO / "config" / "config.yaml"), "--sig", str(paths["sig"])]
    tables += ["--tiers", str(paths["tiers"]), "--parse-clean", str(paths["clean"]), "--cells", str(paths["cells"])]
    tables += ["--scorer-correction", str(paths["corrected"])]
    page = tmp_path / "headline.html"
    assert main(["headline", *tables, "--out", str(page)]) == 0
    headline = default_headline()
    assert page.read_text() == headline_html(headline, missing)
    texts = renderings(headline)
    for name in ("summary.md", "grid_card.md"):
        (tmp_path / name).write_text(texts[f"results/{name}"])
    card = tmp_path / "grid_card.json"
    card.write_text(json.dumps(card_of(headline)))
    rendered = ["--html", str(page), "--summary", str(tmp_path / "summary.md"), "--grid-json", str(card)]
    rendered += ["--grid-md", str(tmp_path / "grid_card.md"), "--out", str(tmp_path / "check.txt")]
    assert main(["check-headline", *tables, *rendered]) == 0
    page.write_text(page.read_text().replace("0.250", "0.125", 1))
    assert main(["check-headline", *tables, *rendered]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"headline check: {page} line " in error


def test_the_summary_table_names_the_headlines_pair_where_pairs_tie_on_rho_flip():
    """a-b and a-c both reverse in 3 of 8 configs (b and c tie in all 8); the headline picks a-c on
    rho_flip_sig, and the summary's numbers name the same pair (without a choice: the first)."""
    from safetyrepro.analysis.flips import rho_flip_table
    from safetyrepro.results.markdown import summary_markdown

    a = [0.5] * 8
    other = [0.4] * 5 + [0.6] * 3
    cells = pd.DataFrame(
        [
            {"model": m, "benchmark": "bbq", "config_id": f"c{i}", "score": s}
            for m, scores in (("a", a), ("b", other), ("c", other))
            for i, s in enumerate(scores)
        ]
    )
    rho = rho_flip_table(cells)
    sig = [pair("bbq", "a", "b", 5, 3, 0, sig=(1, 0)), pair("bbq", "a", "c", 5, 3, 0, sig=(2, 1), items=200)]
    row = one(sig)
    fragile = {"bbq": (row.model_a, row.model_b)}

    def shown(summary: str) -> str:
        return next(line for line in summary.splitlines() if line.startswith("| bbq |")).split("|")[4].strip()

    assert fragile == {"bbq": ("a", "c")}
    assert shown(summary_markdown(rho, cells, {}, "", fragile)) == "a vs c"
    assert shown(summary_markdown(rho, cells, {})) == "a vs b"
