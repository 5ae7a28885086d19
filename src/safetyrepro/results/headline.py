"""The headline: per benchmark, the most fragile model pair and one sentence saying what happens to it.

One function (`headline_rows`) builds the rows and sentences from the tidy tables the analyses wrote
(rho_flip_sig.parquet: rho_flip with N+/N-/N0, its interval over items and rho_flip_sig; tiers.parquet:
the orderings reached on the full envelope). results/summary.md and the GRID card open on its Markdown
rendering, the report's landing page on its HTML rendering: the same cells and the same words.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd

# The pair shown per benchmark: the largest rho_flip; among equals the largest rho_flip_sig, then the
# pair that item resamples reverse most often (interval's upper end), then the most ties.
FRAGILITY = ["rho_flip", "rho_flip_sig", "rho_flip_upper", "n_ties"]
TITLE = "The answer: the most fragile verdict per benchmark"
LEGEND = (
    "rho_flip = min(N+, N-) / |C|: the share of the |C| configs that reverse the pair's majority verdict "
    "(N+ (N-): configs where A scores strictly above (below) B; N0: ties, kept in |C|). 0 means no config "
    "reverses it; floor(|C|/2) / |C| is an even split. The interval is rho_flip's over resampled items; "
    "rho_flip_sig counts only the configs where a paired test over the items finds one model better. "
    "Orderings: distinct strict orderings of all the models reached over the configs, of k! possible."
)


def _number(value, spec: str = ".3f") -> str:
    return "n/a" if pd.isna(value) else format(float(value), spec)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def headline_sentence(row) -> str:
    """One sentence in plain words: which verdict the configuration alone reverses, in how many configs,
    and whether any reversal survives a paired test over the items."""
    n, plus, minus, ties = int(row.n_configs), int(row.n_plus), int(row.n_minus), int(row.n_ties)
    on = f"On {row.benchmark} the configuration alone"
    if min(plus, minus) == 0:
        tied = f"; {row.model_a} and {row.model_b} tie in all {n}" if ties == n else ""
        return f"{on} reverses no verdict over {_plural(n, 'config')}{tied}."
    if plus == minus:
        said = f"{on} splits {row.model_a} vs {row.model_b} evenly: each beats the other in {plus} of {n} configs"
    else:
        leader, trailer = (row.model_a, row.model_b) if plus > minus else (row.model_b, row.model_a)
        said = f'{on} reverses "{leader} beats {trailer}" in {min(plus, minus)} of {n} configs'
    if pd.isna(row.rho_flip_sig):
        return f"{said}; no paired test over items was possible (the cells share no items)."
    items, significant = _plural(int(row.n_items), "item"), int(min(row.n_plus_sig, row.n_minus_sig))
    if significant == 0:
        return f"{said}; no reversal is significant at {items}."
    return f"{said}; {significant} {'reversal is' if significant == 1 else 'reversals are'} significant at {items}."


def headline_rows(sig: pd.DataFrame, tiers: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark (in table order): the most fragile pair's row of `sig` (the rho_flip_sig analysis: |C|,
    N+/N-/N0, rho_flip, its interval over items, N+sig/N-sig, rho_flip_sig, items), the orderings reached of
    those possible (the `full` variant of `tiers`, the tier ablation), and the sentence."""
    top = (
        sig.sort_values(FRAGILITY, ascending=False, kind="stable", na_position="last")
        .drop_duplicates("benchmark")
        .set_index("benchmark")
        .reindex(sig["benchmark"].unique())
        .reset_index()
    )
    orderings = tiers.loc[tiers["variant"] == "full", ["benchmark", "orderings_reached", "orderings_possible"]]
    rows = top.merge(orderings, on="benchmark", how="left", validate="one_to_one")
    return rows.assign(sentence=[headline_sentence(row) for row in rows.itertuples()])


# The table's columns: header, then the cell's text from a headline row (Markdown and HTML alike).
COLUMNS = [
    ("benchmark", lambda r: str(r["benchmark"])),
    ("most fragile pair (A vs B)", lambda r: f"{r['model_a']} vs {r['model_b']}"),
    ("rho_flip", lambda r: _number(r["rho_flip"])),
    ("interval over items", lambda r: f"[{_number(r['rho_flip_lower'])}, {_number(r['rho_flip_upper'])}]"),
    ("rho_flip_sig", lambda r: _number(r["rho_flip_sig"])),
    ("N+ / N- / N0", lambda r: f"{r['n_plus']} / {r['n_minus']} / {r['n_ties']}"),
    ("|C|", lambda r: str(r["n_configs"])),
    ("items", lambda r: _number(r["n_items"], ".0f")),
    (
        "orderings reached",
        lambda r: f"{_number(r['orderings_reached'], '.0f')} of {_number(r['orderings_possible'], '.0f')}",
    ),
]


def headline_markdown(rows: pd.DataFrame) -> str:
    """The headline as a Markdown section: title, table, one sentence per benchmark, legend."""
    escape = lambda text: text.replace("|", "\\|")  # noqa: E731
    records = rows.to_dict("records")
    lines = [
        f"## {TITLE}",
        "",
        "| " + " | ".join(escape(header) for header, _ in COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
        *("| " + " | ".join(escape(cell(r)) for _, cell in COLUMNS) + " |" for r in records),
        "",
        *(f"- {r['sentence']}" for r in records),
        "",
        LEGEND,
        "",
    ]
    return "\n".join(lines) + "\n"


def headline_html(rows: pd.DataFrame, missing_cells: Sequence[str] = ()) -> str:
    """The headline as an HTML fragment for the report's landing page: the same table, sentences and legend,
    after a warning naming the cells a partial run lacks (model/benchmark/config_id)."""
    records = rows.to_dict("records")
    partial = (
        f'<p id="headline-partial"><strong>Partial results</strong>: computed without {len(missing_cells)} missing '
        f"cell(s) of the grid: {html.escape(', '.join(missing_cells))}.</p>\n"
        if missing_cells
        else ""
    )
    head = "".join(f'<th scope="col">{html.escape(header)}</th>' for header, _ in COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell(r))}</td>" for _, cell in COLUMNS) + "</tr>\n" for r in records
    )
    sentences = "".join(f"<li>{html.escape(r['sentence'])}</li>\n" for r in records)
    return (
        f'<section id="headline">\n<h2>{html.escape(TITLE)}</h2>\n{partial}'
        f'<table id="headline-table">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>\n'
        f'<ul id="headline-sentences">\n{sentences}</ul>\n<p class="headline-legend">{html.escape(LEGEND)}</p>\n'
        "</section>\n"
    )
