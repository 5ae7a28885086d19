"""The headline the report, summary.md and the GRID card open on, from small tidy tables; the figure captions."""

from __future__ import annotations

import html
import math
from pathlib import Path

import pandas as pd
import pytest

from safetyrepro.results.headline import COLUMNS, headline_html, headline_markdown, headline_rows

REPO = Path(__file__).resolve().parents[1]


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


def tiers(**orderings):
    """The tier ablation's rows: `full` with the given (reached, possible), and a `core` row that must be ignored."""
    return pd.DataFrame(
        [
            {
                "variant": variant,
                "benchmark": b,
                "n_configs": 8,
                "rho_flip_max": 0.0,
                "orderings_reached": reached,
                "orderings_possible": possible,
                "flip_rate": 0.0,
            }  # fmt: skip
            for b, (reached, possible) in orderings.items()
            for variant, reached in (("core", 1), ("full", reached))
        ]
    )


def one(sig_rows, orderings=(2, 6)):
    rows = headline_rows(pd.DataFrame(sig_rows), tiers(**{sig_rows[0]["benchmark"]: orderings}))
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
    assert (row.orderings_reached, row.orderings_possible) == (2, 6)  # the full envelope's, not the core's
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
        orderings=(1, 6),
    )
    assert (row.model_a, row.model_b, row.rho_flip) == ("a", "c", 0)
    assert row.sentence == "On xstest the configuration alone reverses no verdict over 8 configs."


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
    rows = headline_rows(sig, tiers(bbq=(2, 2), xstest=(1, 2)))
    assert list(rows["benchmark"]) == ["xstest", "bbq"]
    markdown, page = headline_markdown(rows), headline_html(rows)
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


def test_the_report_fragment_names_the_cells_a_partial_run_lacks():
    rows = headline_rows(pd.DataFrame([pair("bbq", "a", "b", 3, 1, 0)]), tiers(bbq=(2, 2)))
    assert "Partial results" not in headline_html(rows)
    partial = headline_html(rows, ["c/bbq/T1-greedy-0shot-logprob", "c/bbq/T2-greedy-0shot-logprob"])
    assert "computed without 2 missing cell(s) of the grid: c/bbq/T1-greedy-0shot-logprob, c/bbq/T2" in partial
    assert partial.index("Partial results") < partial.index('<table id="headline-table">')


def test_the_headline_command_writes_the_fragment_of_its_tables(tmp_path):
    from safetyrepro.cli import main
    from safetyrepro.results.storage import write_parquet

    sig, table = pd.DataFrame([pair("bbq", "a", "b", 3, 1, 0), pair("bbq", "a", "c", 2, 2, 0)]), tiers(bbq=(2, 6))
    missing = ["c/bbq/T1-greedy-0shot-logprob"]
    write_parquet(sig, tmp_path / "sig.parquet", missing)
    write_parquet(table, tmp_path / "tiers.parquet", missing)
    out = tmp_path / "headline.html"
    argv = ["headline", "--sig", str(tmp_path / "sig.parquet"), "--tiers", str(tmp_path / "tiers.parquet")]
    assert main([*argv, "--out", str(out)]) == 0
    assert out.read_text() == headline_html(headline_rows(sig, table), missing)
    assert "a vs c" in out.read_text() and "Partial results" in out.read_text()


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
