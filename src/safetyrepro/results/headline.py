"""The headline: per benchmark, the most fragile model pair and one sentence saying what happens to it.

`build_headline` computes it once, as data (`Headline`), from the tables the analyses wrote
(rho_flip_sig.parquet: rho_flip with N+/N-/N0, its interval over items and rho_flip_sig; tiers.parquet:
the rankings reached on the full envelope; parse_clean.parquet: rho_flip on the parse-clean configs),
cells.parquet (which reversals rest on cells parsed below the threshold) and the run's model specs (which
models are one model). results/summary.md and the GRID card open on its Markdown rendering, the report's
landing page on its HTML rendering: the same cells and the same words. `check_headline` recomputes it and
names the first rendering or table that differs (the workflow's last step).
"""

from __future__ import annotations

import difflib
import html
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from safetyrepro.analysis.flips import flip_rate, minority_side, rho_flip_table, score_matrix, signs
from safetyrepro.analysis.scorer_correction import LEVEL, OWN, corrected_tables
from safetyrepro.analysis.verdicts import parse_clean
from safetyrepro.results.markdown import BUDGET_ESTIMATE, NO_REVERSAL, budget_line

if TYPE_CHECKING:
    from safetyrepro.core.model_spec import ModelSpec

# The pair shown per benchmark: the largest rho_flip; among equals the largest rho_flip_sig, then the
# pair that item resamples reverse most often (interval's upper end), then the most ties.
FRAGILITY = ["rho_flip", "rho_flip_sig", "rho_flip_upper", "n_ties"]
TITLE = "The answer: the most fragile verdict per benchmark"
CORRECTED_TITLE = "The same verdicts corrected for scorer error"


@dataclass(frozen=True)
class Headline:
    """The headline as data: one row per benchmark (`headline_rows`), the sentence on the models (empty
    when each is a model of its own) and, per benchmark with human labels, its pair's verdicts corrected for
    scorer error (`corrected_rows`; empty without)."""

    rows: pd.DataFrame
    models: str = ""
    corrected: pd.DataFrame = field(default_factory=pd.DataFrame)

    def records(self) -> list[dict]:
        """The rows as JSON-ready records (the GRID card's `most_fragile`)."""
        return json.loads(self.rows.to_json(orient="records", double_precision=15))

    def corrected_records(self) -> list[dict]:
        """The corrected rows as JSON-ready records (the GRID card's `scorer_corrected`)."""
        return json.loads(self.corrected.to_json(orient="records", double_precision=15)) if len(self.corrected) else []


def _escape(text: str) -> str:
    """A Markdown table cell's text, its pipes escaped."""
    return text.replace("|", "\\|")


def _number(value, spec: str = ".3f") -> str:
    return "n/a" if value is None or pd.isna(value) else format(float(value), spec)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _level(row) -> str:
    return f"{1 - float(row.alpha):.0%}"


def headline_sentence(row) -> str:
    """One sentence in plain words: which verdict the configuration alone reverses, in how many configs,
    and whether any reversal survives a paired test over the items (and, where no single one does, what
    the interval over items says)."""
    n, plus, minus, ties = int(row.n_configs), int(row.n_plus), int(row.n_minus), int(row.n_ties)
    on = f"On {row.benchmark} the configuration alone"
    if min(plus, minus) == 0:
        tied = f"; {row.model_a} and {row.model_b} tie in all {n}" if ties == n else ""
        near = (
            f"; rho_flip's {_level(row)} interval over resampled items reaches {_number(row.rho_flip_upper)} "
            f"for {row.model_a} vs {row.model_b}"
            if row.rho_flip_upper > 0
            else ""
        )
        return f"{on} reverses no verdict over {_plural(n, 'config')}{tied}{near}."
    if plus == minus:
        said = f"{on} splits {row.model_a} vs {row.model_b} evenly: each beats the other in {plus} of {n} configs"
    else:
        leader, trailer = (row.model_a, row.model_b) if plus > minus else (row.model_b, row.model_a)
        said = f'{on} reverses "{leader} beats {trailer}" in {min(plus, minus)} of {n} configs'
    if pd.isna(row.rho_flip_sig):
        return f"{said}; no paired test over items was possible (the cells share no items)."
    items, significant = _plural(int(row.n_items), "item"), int(min(row.n_plus_sig, row.n_minus_sig))
    if significant:
        return f"{said}; {significant} {'reversal is' if significant == 1 else 'reversals are'} significant at {items}."
    if row.rho_flip_lower > 0:
        return (
            f"{said}; its {_level(row)} interval over resampled items, [{_number(row.rho_flip_lower)}, "
            f"{_number(row.rho_flip_upper)}], excludes 0: some config reverses the verdict in nearly every draw of "
            f"the items, yet no single reversal passes its config's paired test at {items}."
        )
    return f"{said}; no reversal is significant at {items}."


def _unparsed_reversals(cells: pd.DataFrame, row, threshold: float) -> list[str]:
    """The configs that reverse the pair's majority verdict (`flips.minority_side`) where A's or B's cell
    parses below `threshold`, each with
    the two parse rates (a missing parse rate is not counted as below)."""
    frame = cells[cells["benchmark"] == row.benchmark]
    if frame.empty or min(row.n_plus, row.n_minus) == 0:
        return []
    pair = score_matrix(frame, row.benchmark)[[row.model_a, row.model_b]].dropna()
    reversing = pair.index[minority_side(signs(pair[row.model_a], pair[row.model_b])).to_numpy()]
    rates = frame.pivot(index="config_id", columns="model", values="parse_rate").reindex(reversing)
    rates = rates[[row.model_a, row.model_b]]
    under = rates[(rates < threshold).any(axis=1)]
    return [f"{config} ({_number(a, '.2f')} / {_number(b, '.2f')})" for config, (a, b) in under.iterrows()]


def parse_warning(row, threshold: float) -> str:
    """The first screen's warning where reversals of the row's pair rest on cells parsed below the threshold,
    with the parse-clean rho_flip beside them ("" where none does)."""
    if not row.unparsed_reversals:
        return ""
    n_reversing = int(row.n_plus + row.n_minus if row.n_plus == row.n_minus else min(row.n_plus, row.n_minus))
    listed = row.unparsed_reversals.split("; ")
    return (
        f"{row.benchmark}: {len(listed)} of the {_plural(n_reversing, 'config')} reversing {row.model_a} vs "
        f"{row.model_b} {'rests' if len(listed) == 1 else 'rest'} on a cell parsed below {threshold:g} "
        f"({row.unparsed_reversals}; parse rates {row.model_a} / {row.model_b}). On the "
        f"{_number(row.clean_n_configs, '.0f')} of {_number(row.clean_n_before, '.0f')} configs where every model parses at least "
        f"{threshold:g}, the largest rho_flip over pairs is {_number(row.clean_rho_flip)}."
    )


def headline_rows(
    sig: pd.DataFrame, tiers: pd.DataFrame, clean: pd.DataFrame, cells: pd.DataFrame, threshold: float
) -> pd.DataFrame:
    """Per benchmark (in table order): the most fragile pair's row of `sig` (the rho_flip_sig analysis: |C|,
    N+/N-/N0, rho_flip, its interval over items, N+sig/N-sig, rho_flip_sig, items), the rankings reached of
    those possible (the `full` variant of `tiers`, the tier ablation), the parse-clean rho_flip and its configs
    (`clean`, the parse_clean analysis), `reversal` (whether any pair reverses), the reversals resting on a
    cell of `cells` parsed below `threshold`, the sentence and the parse warning."""
    top = (
        sig.sort_values(FRAGILITY, ascending=False, kind="stable", na_position="last")
        .drop_duplicates("benchmark")
        .set_index("benchmark")
        .reindex(sig["benchmark"].unique())
        .reset_index()
    )
    rankings = tiers.loc[tiers["variant"] == "full", ["benchmark", "rankings_reached", "rankings_possible"]]
    parse_clean_rho = clean[["benchmark", "rho_flip_max", "n_configs", "n_configs_before"]].rename(
        columns={"rho_flip_max": "clean_rho_flip", "n_configs": "clean_n_configs", "n_configs_before": "clean_n_before"}
    )
    rows = top.merge(rankings, on="benchmark", how="left", validate="one_to_one").merge(
        parse_clean_rho, on="benchmark", how="left", validate="one_to_one"
    )
    rows["reversal"] = (rows[["n_plus", "n_minus"]].min(axis=1) > 0).astype(bool)
    rows["unparsed_reversals"] = ["; ".join(_unparsed_reversals(cells, row, threshold)) for row in rows.itertuples()]
    rows["sentence"] = [headline_sentence(row) for row in rows.itertuples()]
    rows["parse_warning"] = [parse_warning(row, threshold) for row in rows.itertuples()]
    return rows


def models_sentence(models: Sequence[ModelSpec]) -> str:
    """What the models are, where some are one model (the same weights, `ModelSpec.weights`) at several
    precisions or loaded several ways; "" when each is a model of its own."""
    groups: dict[tuple, list[ModelSpec]] = {}
    for spec in models:
        groups.setdefault(spec.weights(), []).append(spec)
    said = []
    for members in (group for group in groups.values() if len(group) > 1):
        source = f"the embedded {members[0].embedded}" if members[0].embedded else members[0].path
        precisions = list(dict.fromkeys(spec.precision for spec in members))
        at = (
            f"at {len(precisions)} precisions ({', '.join(precisions)})"
            if len(precisions) > 1
            else f"at one precision ({precisions[0]})"
        )
        said.append(f"{_listed([spec.name for spec in members])} are one model, {source}, {at}")
    if not said:
        return ""
    return "The models " + "; ".join(said) + ": a verdict between them compares one model with itself, not two models."


def _counted(count: int, singular: str, plural: str) -> str:
    """`count` and the verb phrase that agrees with it ("1 holds", "2 hold")."""
    return f"{count} {singular if count == 1 else plural}"


def corrected_sentence(row) -> str:
    """What correcting for the scorer's errors does to the row's pair, in plain words."""
    low, high, raw = (_number(row[key]) for key in ("rho_flip_corrected_low", "rho_flip_corrected_high", "rho_flip"))
    pair, configs = f"{row['model_a']} vs {row['model_b']}", _plural(int(row["n_configs"]), "config")
    left = int(row["n_left_out"])
    if left:
        configs += f" ({_plural(left, 'free-form config')} left out, without the scorer's errors measured there)"
    verdicts = f"of its {_plural(int(row['n_freeform']), 'free-form verdict')}, "
    if row["labels_from"] == OWN:
        return (
            f"On {row['benchmark']}, with each free-form score corrected by its scorer's net error in that config, "
            f"measured on the {_counted(int(row['n_labels']), 'reply', 'replies')} of the two models that people "
            f"labelled, rho_flip of {pair} over {configs}, counting only the verdicts the correction decides, is {low} "
            f"(as scored: {raw}); {verdicts}{_counted(row['kept'], 'holds', 'hold')} with the {LEVEL:.0%} interval of "
            f"the corrected difference clear of a tie, {_counted(row['moved'], 'is', 'are')} reversed or decided from "
            f"a tie, and {_counted(row['undecided'], 'is', 'are')} undecided."
        )
    spread = f"is {low}" if low == high else f"is between {low} and {high}"
    return (
        f"On {row['benchmark']}, with each free-form score corrected by its scorer's net error on the replies of "
        f"{_listed(row['labels_from'].split(', '))} ({row['n_labels']} human labels of other models' replies, none of "
        f"this run's), rho_flip of {pair} over {configs} {spread} as each model is given either labelled model's "
        f"errors (as scored: {raw}); {verdicts}{_counted(row['kept'], 'holds', 'hold')} under every assignment, "
        f"{_counted(row['moved'], 'is', 'are')} decided otherwise under every one and "
        f"{_counted(row['undecided'], 'depends', 'depend')} on which."
    )


def corrected_rows(rows: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark of the headline `rows` that `pairs` (the scorer_correction analysis's table 'pairs') covers:
    the headline pair's row of it, with its sentence."""
    if pairs.empty:
        return pd.DataFrame()
    found = []
    for row in rows.itertuples():
        mine = pairs[(pairs["benchmark"] == row.benchmark)]
        match = mine[
            ((mine["model_a"] == row.model_a) & (mine["model_b"] == row.model_b))
            | ((mine["model_a"] == row.model_b) & (mine["model_b"] == row.model_a))
        ]
        if len(match) and match.iloc[0][["n_freeform", "n_left_out"]].sum() > 0:  # no free-form config: no scorer
            found.append(match.iloc[0].to_dict() | {"model_a": row.model_a, "model_b": row.model_b})
    frame = pd.DataFrame(found, columns=[*CORRECTED_FIELDS])
    counts = ["n_configs", "n_freeform", "kept", "moved", "undecided", "n_labels", "n_left_out"]
    frame[counts] = frame[counts].astype(int)  # the analysis's stacked table holds them as floats
    return frame.assign(sentence=[corrected_sentence(r) for r in frame.to_dict("records")])


# What a corrected row keeps of the analysis's table 'pairs'.
CORRECTED_FIELDS = (
    "benchmark",
    "model_a",
    "model_b",
    "n_configs",
    "rho_flip",
    "rho_flip_corrected_low",
    "rho_flip_corrected_high",
    "n_freeform",
    "kept",
    "moved",
    "undecided",
    "labels_from",
    "n_labels",
    "n_left_out",
)


def build_headline(
    sig: pd.DataFrame,
    tiers: pd.DataFrame,
    clean: pd.DataFrame,
    corrected: pd.DataFrame,
    cells: pd.DataFrame,
    models: Sequence[ModelSpec],
    threshold: float,
) -> Headline:
    """The headline of a run from its tables and model specs (see `headline_rows`, `models_sentence`,
    `corrected_rows`: `corrected` is the scorer_correction analysis's table)."""
    rows = headline_rows(sig, tiers, clean, cells, threshold)
    pairs = corrected[corrected["table"] == "pairs"] if "table" in corrected else pd.DataFrame()
    return Headline(rows, models_sentence(models), corrected_rows(rows, pairs))


def legend(rows: pd.DataFrame) -> str:
    """The legend under the table, its levels, correction, threshold and model count from the rows."""
    first = rows.iloc[0] if len(rows) else None
    level = _level(first) if first is not None else "95%"
    correction = first["correction"] if first is not None else "holm"
    possible = _number(rows["rankings_possible"].max(), ".0f") if len(rows) else "n/a"
    return (
        "rho_flip = min(N+, N-) / |C|: the share of the |C| configs that reverse the pair's majority verdict "
        "(N+ (N-): configs where A scores strictly above (below) B; N0: ties, kept in |C|). 0 means no config "
        "reverses it; floor(|C|/2) / |C| is an even split. "
        f'"{NO_REVERSAL}": rho_flip is 0 for every pair of the benchmark; the interval is then that of the pair '
        "it reaches highest for, which the sentence names where it reaches above 0. "
        f"Interval: rho_flip's {level} percentile interval when the items are resampled, counting every strict "
        "difference however small. rho_flip_sig counts only the configs where a paired test over the items "
        f"finds one model better ({correction} correction over the pair's configs): an interval above 0 beside "
        "rho_flip_sig 0 means reversals occur whichever items are drawn, each within its config's item noise. "
        "Parse-clean: the largest rho_flip over pairs on the configs where every model's parse rate reaches "
        "analysis.parse_threshold (of the configs scored for every model). "
        "Rankings: distinct rankings of all the models over the configs, a tie counting as a ranking of its "
        f"own (a > b = c, a > b > c and a = b = c are three), of the {possible} possible; 1: every config "
        "ranks the models the same."
    )


def _pair(r) -> str:
    return f"{r['model_a']} vs {r['model_b']}" if r["reversal"] else NO_REVERSAL


def _counts(r) -> str:
    return f"{r['n_plus']} / {r['n_minus']} / {r['n_ties']}" if r["reversal"] else "-"


# The table's columns: header, then the cell's text from a headline row (Markdown and HTML alike).
COLUMNS = [
    ("benchmark", lambda r: str(r["benchmark"])),
    ("most fragile pair (A vs B)", _pair),
    ("rho_flip", lambda r: _number(r["rho_flip"])),
    ("interval over items", lambda r: f"[{_number(r['rho_flip_lower'])}, {_number(r['rho_flip_upper'])}]"),
    ("rho_flip_sig", lambda r: _number(r["rho_flip_sig"])),
    (
        "parse-clean rho_flip (configs)",
        lambda r: (
            f"{_number(r['clean_rho_flip'])} ({_number(r['clean_n_configs'], '.0f')} of "
            f"{_number(r['clean_n_before'], '.0f')})"
        ),
    ),
    ("N+ / N- / N0", _counts),
    ("|C|", lambda r: str(r["n_configs"])),
    ("items", lambda r: _number(r["n_items"], ".0f")),
    (
        "rankings reached (ties count)",
        lambda r: f"{_number(r['rankings_reached'], '.0f')} of {_number(r['rankings_possible'], '.0f')}",
    ),
]


def _markdown_table(columns, records: list[dict]) -> list[str]:
    """A Markdown table's lines: `columns` (header, cell text of a record) over `records`."""
    return [
        "| " + " | ".join(_escape(header) for header, _ in columns) + " |",
        "|" + "---|" * len(columns),
        *("| " + " | ".join(_escape(cell(r)) for _, cell in columns) + " |" for r in records),
    ]


def _html_table(columns, records: list[dict], name: str) -> str:
    """An HTML table (id `name`-table) of `columns` (header, cell text of a record) over `records`, and the list of
    their sentences (id `name`-sentences)."""
    head = "".join(f'<th scope="col">{html.escape(header)}</th>' for header, _ in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell(r))}</td>" for _, cell in columns) + "</tr>\n" for r in records
    )
    sentences = "".join(f"<li>{html.escape(r['sentence'])}</li>\n" for r in records)
    return (
        f'<table id="{name}-table">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>\n'
        f'<ul id="{name}-sentences">\n{sentences}</ul>\n'
    )


def headline_markdown(headline: Headline) -> str:
    """The headline as a Markdown section: title, what the models are, parse warnings, table, one sentence
    per benchmark, legend."""
    records = headline.rows.to_dict("records")
    lines = [
        f"## {TITLE}",
        "",
        *([headline.models, ""] if headline.models else []),
        *(f"> **Parse warning**: {r['parse_warning']}\n" for r in records if r["parse_warning"]),
        *_markdown_table(COLUMNS, records),
        "",
        *(f"- {r['sentence']}" for r in records),
        "",
        legend(headline.rows),
        "",
        *_corrected_markdown(headline.corrected),
    ]
    return "\n".join(lines) + "\n"


def _pair_of(r) -> str:
    return f"{r['model_a']} vs {r['model_b']}"


def _corrected_rho(r) -> str:
    low, high = _number(r["rho_flip_corrected_low"]), _number(r["rho_flip_corrected_high"])
    return low if r["labels_from"] == OWN else f"[{low}, {high}]"


def _labels(r) -> str:
    return (
        f"{r['n_labels']} of {OWN}"
        if r["labels_from"] == OWN
        else f"{r['n_labels']} of other models': {r['labels_from']}"
    )


# The corrected table's columns: header, then the cell's text from a corrected row.
CORRECTED_COLUMNS = [
    ("benchmark", lambda r: str(r["benchmark"])),
    ("pair (A vs B)", _pair_of),
    ("rho_flip as scored", lambda r: _number(r["rho_flip"])),
    ("rho_flip corrected", _corrected_rho),
    ("free-form verdicts kept / moved / undecided", lambda r: f"{r['kept']} / {r['moved']} / {r['undecided']}"),
    ("human labels", _labels),
]
OTHER_MODELS_LEGEND = (
    "Labels of other models' replies: each free-form config's score is moved by its scorer's net error (people's "
    "rate minus the scorer's) on the replies of one labelled model, and each model of the pair is given each "
    "labelled model's errors in turn, so rho_flip corrected is a range. The same errors for both move both alike and "
    "leave the verdict as it is; different ones move it by the gap between them, the shift from one model's replies "
    "to another's. Kept: the verdict holds under every assignment; moved: every assignment decides it otherwise; "
    "undecided: it depends on the assignment (a tie included). How far this run's models' scorer errors lie from "
    "the labelled models' is not measured: label some of this run's replies (`safetyrepro label`) to measure it."
)
OWN_LEGEND = (
    "Labels of this run's replies: each model's free-form score in a config is moved by its scorer's net error on "
    "that model's labelled replies in that config (prediction-powered inference; a config with fewer than 2 labels "
    f"is left out), and a verdict is decided where the {LEVEL:.0%} interval of the corrected difference excludes a "
    "tie. Kept: decided as scored; moved: decided otherwise (or decided where the scores tie); undecided: the "
    "interval includes a tie. rho_flip corrected counts the decided verdicts only (an undecided one as a tie, as "
    "rho_flip_sig does)."
)
CORRECTED_NOTE = "Log-likelihood configs have no scorer: they count as scored (docs/scorers.md)."


def corrected_legend(corrected: pd.DataFrame) -> str:
    """The legend under the corrected table: the paragraphs of the label sources its rows have."""
    own = corrected["labels_from"] == OWN
    return " ".join(
        [*([OWN_LEGEND] if own.any() else []), *([OTHER_MODELS_LEGEND] if (~own).any() else []), CORRECTED_NOTE]
    )


def _corrected_markdown(corrected: pd.DataFrame) -> list[str]:
    """The corrected verdicts' Markdown subsection (none without corrected rows)."""
    if corrected.empty:
        return []
    records = corrected.to_dict("records")
    return [
        f"### {CORRECTED_TITLE}",
        "",
        *_markdown_table(CORRECTED_COLUMNS, records),
        "",
        *(f"- {r['sentence']}" for r in records),
        "",
        corrected_legend(corrected),
        "",
    ]


def _corrected_html(corrected: pd.DataFrame) -> str:
    """The corrected verdicts as HTML ("" without corrected rows)."""
    if corrected.empty:
        return ""
    return (
        f'<h3 id="headline-corrected">{html.escape(CORRECTED_TITLE)}</h3>\n'
        + _html_table(CORRECTED_COLUMNS, corrected.to_dict("records"), "headline-corrected")
        + f'<p class="headline-legend">{html.escape(corrected_legend(corrected))}</p>\n'
    )


def headline_html(headline: Headline, missing_cells: Sequence[str] = (), budget: dict | None = None) -> str:
    """The headline as an HTML fragment for the report's landing page: the same models sentence, parse
    warnings, table, sentences and legend, after a warning naming the cells a partial run lacks
    (model/benchmark/config_id) and, for a budgeted run, how many cells it ran."""
    records = headline.rows.to_dict("records")
    budgeted = (
        f'<p id="headline-budget"><strong>{html.escape(budget_line(budget))}</strong>: this table is of the cells '
        "run, half of them after the first round chosen where the verdicts were least sure, so its rho_flip is no "
        f"fair estimate of the envelope's; {html.escape(BUDGET_ESTIMATE)} (summary.md opens on rho_flip's).</p>\n"
        if budget
        else ""
    )
    partial = (
        f'<p id="headline-partial"><strong>Partial results</strong>: computed without {len(missing_cells)} missing '
        f"cell(s) of the grid: {html.escape(', '.join(missing_cells))}.</p>\n"
        if missing_cells
        else ""
    )
    models = f'<p id="headline-models">{html.escape(headline.models)}</p>\n' if headline.models else ""
    warnings = "".join(
        f'<p class="headline-parse-warning"><strong>Parse warning</strong>: {html.escape(r["parse_warning"])}</p>\n'
        for r in records
        if r["parse_warning"]
    )
    return (
        f'<section id="headline">\n<h2>{html.escape(TITLE)}</h2>\n{budgeted}{partial}{models}{warnings}'
        + _html_table(COLUMNS, records, "headline")
        + f'<p class="headline-legend">{html.escape(legend(headline.rows))}</p>\n{_corrected_html(headline.corrected)}'
        "</section>\n"
    )


# ------------------------------------------------------------------ the run's check of itself (rule check_headline)
def _first_difference(expected: str, actual: str) -> str:
    """Where `actual` first differs from `expected`: the line number and both lines."""
    want, have = expected.splitlines(), actual.splitlines()
    for index, (a, b) in enumerate(zip(want, have)):
        if a != b:
            return f"line {index + 1} reads {b[:160]!r} where the tables give {a[:160]!r}"
    return f"has {len(have)} lines where the tables' headline has {len(want)}"


def _section(expected: str, text: str) -> str:
    """The lines of `text` from the headline's title on, as many as `expected` has (empty without the title)."""
    lines = text.splitlines()
    title = expected.splitlines()[0]
    if title not in lines:
        return ""
    start = lines.index(title)
    return "\n".join(lines[start : start + len(expected.splitlines())])


def _table_mismatch(headline: Headline, cells: pd.DataFrame, clean: pd.DataFrame, threshold: float) -> str | None:
    """The first number of the headline that its cited tables state differently from cells.parquet: N+/N-/N0
    (rho_flip_sig.parquet), the rankings reached (tiers.parquet), the parse-clean rho_flip (parse_clean.parquet)."""
    rho = rho_flip_table(cells).set_index(["benchmark", "model_a", "model_b"])
    rankings = flip_rate(cells).set_index("benchmark")["rankings_reached"]
    fresh = parse_clean(cells, threshold).set_index("benchmark")
    for row in headline.rows.itertuples():
        key = (row.benchmark, row.model_a, row.model_b)
        if key not in rho.index or row.benchmark not in fresh.index:
            return f"the tables name {row.benchmark}'s {row.model_a} vs {row.model_b}, which cells.parquet has not"
        counts = ["n_plus", "n_minus", "n_ties", "n_configs"]
        stated = [int(getattr(row, c)) for c in counts]
        computed = [int(v) for v in rho.loc[key, counts]]
        if stated != computed:
            return (
                f"analysis/rho_flip_sig.parquet gives {row.benchmark}'s {row.model_a} vs {row.model_b} "
                f"N+/N-/N0/|C| {'/'.join(map(str, stated))} where cells.parquet gives {'/'.join(map(str, computed))}"
            )
        if int(row.rankings_reached) != int(rankings.get(row.benchmark, -1)):
            return (
                f"analysis/tiers.parquet gives {row.benchmark} {int(row.rankings_reached)} rankings reached where "
                f"cells.parquet gives {rankings.get(row.benchmark, 0)}"
            )
        expected = fresh.loc[row.benchmark, ["rho_flip_max", "n_configs"]].tolist()
        stated_rho, computed_rho = (None if pd.isna(v) else v for v in (row.clean_rho_flip, expected[0]))  # none: NaN
        if json.dumps([stated_rho, int(row.clean_n_configs)]) != json.dumps([computed_rho, int(expected[1])]):
            return (
                f"analysis/parse_clean.parquet gives {row.benchmark} a parse-clean rho_flip of "
                f"{_number(row.clean_rho_flip)} on {int(row.clean_n_configs)} configs where cells.parquet at "
                f"parse_threshold {threshold:g} gives {_number(expected[0])} on {int(expected[1])}"
            )
    return None


def _corrected_mismatch(
    headline: Headline, cells: pd.DataFrame, corrected: pd.DataFrame, axis: str | None
) -> str | None:
    """Where the headline's corrected rows differ from those recomputed from cells.parquet and the scorers' net
    errors (the scorer_correction analysis's table 'errors'; `axis` the run's scorer axis)."""
    errors = corrected[corrected["table"] == "errors"] if "table" in corrected else corrected.head(0)
    pairs = corrected_tables(cells, errors, axis).get("pairs", pd.DataFrame()) if len(errors) else pd.DataFrame()
    computed = Headline(headline.rows, corrected=corrected_rows(headline.rows, pairs)).corrected_records()
    for stated, fresh in itertools.zip_longest(headline.corrected_records(), computed):
        if json.dumps(stated, sort_keys=True) != json.dumps(fresh, sort_keys=True):
            return (
                f"analysis/scorer_correction.parquet gives {(stated or {}).get('sentence', 'no corrected row')!r} where "
                f"cells.parquet with its errors gives {(fresh or {}).get('sentence', 'none')!r}"
            )
    return None


def check_headline(
    headline: Headline,
    cells: pd.DataFrame,
    tables: tuple[pd.DataFrame, pd.DataFrame],
    axis: str | None,
    threshold: float,
    renderings: Mapping[str, str],
    card: Mapping,
    missing_cells: Sequence[str] = (),
    budget: dict | None = None,
) -> str | None:
    """Check a run's headline, freshly built from its tables, against cells.parquet and against each
    rendering: `tables` are the parse_clean and scorer_correction analyses' tables, `axis` the run's scorer axis;
    `renderings` maps the names of headline.html, summary.md and grid_card.md to their text; `card` is
    grid_card.json. Returns one line naming the first mismatch, or None."""
    clean, corrected = tables
    problems = [
        _table_mismatch(headline, cells, clean, threshold),
        _corrected_mismatch(headline, cells, corrected, axis),
    ]
    markdown = headline_markdown(headline)
    for name, text in renderings.items():
        expected = headline_html(headline, missing_cells, budget) if name.endswith(".html") else markdown
        shown = text if name.endswith(".html") else _section(markdown, text)
        if not shown:
            problems.append(f"{name} has no headline ({markdown.splitlines()[0]!r})")
        elif shown.rstrip("\n") != expected.rstrip("\n"):
            problems.append(f"{name} {_first_difference(expected, shown)}")
    keys = ("most_fragile", "headline_models", "scorer_corrected")
    stated = {key: card.get(key) for key in keys}
    computed = dict(zip(keys, (headline.records(), headline.models, headline.corrected_records())))
    for key in stated:
        if json.dumps(stated[key], sort_keys=True) != json.dumps(computed[key], sort_keys=True):
            want = difflib.unified_diff(
                json.dumps(computed[key], sort_keys=True, indent=1).splitlines(),
                json.dumps(stated[key], sort_keys=True, indent=1).splitlines(),
                lineterm="",
                n=0,
            )
            changed = [line for line in want if line[:1] in "+-" and line[:3] not in ("+++", "---")]
            problems.append(f"grid_card.json {key} differs from the tables: {' / '.join(changed[:2])[:240]}")
    return next((f"headline check: {problem}" for problem in problems if problem), None)
