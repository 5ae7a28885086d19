"""Readable renderings of the result tables."""

from __future__ import annotations

import math

import pandas as pd

from safetyrepro.analysis.flips import orderings_reached

NO_REVERSAL = "no reversal"  # said instead of a pair where no pair of a benchmark reverses (and in the headline)


def partial_notice(missing: list[str]) -> str:
    """A warning block naming the missing cells of a partial run (empty for a complete grid)."""
    if not missing:
        return ""
    listed = "\n".join(f"> - {cell}" for cell in missing)
    return f"> **Partial results**: computed without {len(missing)} missing cell(s) of the grid:\n{listed}\n\n"


def rho_flip_markdown(rho: pd.DataFrame, cells: pd.DataFrame) -> str:
    """Per benchmark: every pair's rho_flip with N+/N-/N0, the max over pairs and orderings reached."""
    lines = [
        "# rho_flip: how often the configuration alone reverses a pairwise verdict",
        "",
        "rho_flip = min(N+, N-) / |C|; N+ (N-) counts configs where model A scores strictly above "
        "(below) model B, N0 the ties, which stay in the denominator. Ceiling = floor(|C|/2)/|C|.",
        "",
    ]
    for benchmark, table in rho.groupby("benchmark", sort=False):
        reached, possible = orderings_reached(cells, benchmark)
        lines += [
            f"## {benchmark}",
            "",
            f"max rho_flip over pairs: {table['rho_flip'].max():.3f} (ceiling {table['ceiling'].iloc[0]:.3f} "
            f"at |C| = {table['n_configs'].iloc[0]}); strict orderings of the models reached: "
            f"{reached} of {possible}",
            "",
            "| model A | model B | N+ | N- | N0 | \\|C\\| | rho_flip | ceiling |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in table.itertuples():
            lines.append(
                f"| {row.model_a} | {row.model_b} | {row.n_plus} | {row.n_minus} | {row.n_ties} | "
                f"{row.n_configs} | {row.rho_flip:.3f} | {row.ceiling:.3f} |"
            )
        lines.append("")
    return "\n".join(lines)


def analysis_markdown(name: str, description: str, table: pd.DataFrame) -> str:
    """A short rendering of one analysis table: what it is, then the table."""
    body = table.to_markdown(index=False, floatfmt=".3f") if len(table) else "(no rows: nothing to compare here)"
    return f"# {name}\n\n{description}\n\n{body}\n"


def summary_markdown(
    rho: pd.DataFrame,
    cells: pd.DataFrame,
    tables: dict[str, pd.DataFrame],
    headline: str = "",
    fragile: dict[str, tuple[str, str]] | None = None,
) -> str:
    """The headline's Markdown (safetyrepro.results.headline), if given, then numbers per benchmark read like the
    paper's table 2: the largest rho_flip over pairs with its N+/N-/N0 and |C|, orderings reached, and the
    robustness checks beside it. The pair shown is the headline's (`fragile`: benchmark -> (A, B)) where
    given, else the first with the largest rho_flip; where no pair reverses, none is named."""
    tiers = tables["tiers"].set_index(["variant", "benchmark"]) if "tiers" in tables else None
    clean = tables["parse_clean"].set_index("benchmark") if "parse_clean" in tables else None
    shares = tables["variance"].set_index("benchmark") if "variance" in tables else None
    flip = tables["flip_rate"].set_index("benchmark") if "flip_rate" in tables else None
    lines = [
        "# Summary",
        "",
        *([headline.rstrip("\n"), "", "## Every benchmark in numbers", ""] if headline else []),
        f'Per benchmark, the model pair with the largest rho_flip (N+ / N- / N0 of that pair; "{NO_REVERSAL}" where '
        "no pair reverses), strict orderings of the models reached (a config with a tie has none), and the same maximum on the core tier and the parse-clean "
        "subset; rho_var = implementation / model variance share (free-form ANOVA); flip rate = the total-order "
        "flip rate (share of config pairs whose strict model orderings differ; not rho_flip), its uniform-null "
        "value in brackets.",
        "",
        "| benchmark | \\|C\\| | max rho_flip | pair | N+ / N- / N0 | ceiling | orderings | core rho_flip max |"
        " parse-clean rho_flip max (\\|C\\|) | rho_var | flip rate (null) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for benchmark, pairs in rho.groupby("benchmark", sort=False):
        if fragile and benchmark in fragile:
            model_a, model_b = fragile[benchmark]
            top = pairs[(pairs.model_a == model_a) & (pairs.model_b == model_b)].iloc[0]
        else:
            top = pairs.sort_values("rho_flip", ascending=False, kind="stable").iloc[0]
        reached, possible = orderings_reached(cells, benchmark)
        reversal = min(top.n_plus, top.n_minus) > 0
        pair, counts = (f"{top.model_a} vs {top.model_b}", f"{top.n_plus} / {top.n_minus} / {top.n_ties}")
        core = _lookup(tiers, ("core", benchmark), "rho_flip_max")
        clean_rho = _lookup(clean, benchmark, "rho_flip_max")
        clean_n = _lookup(clean, benchmark, "n_configs")
        lines.append(
            f"| {benchmark} | {top.n_configs} | {top.rho_flip:.3f} | {pair if reversal else NO_REVERSAL} | "
            f"{counts if reversal else '-'} | {top.ceiling:.3f} | {reached} of {possible} | "
            f"{format_number(core)} | {format_number(clean_rho)} ({format_number(clean_n, '.0f')}) | {format_number(_lookup(shares, benchmark, 'rho'))} | "
            f"{format_number(_lookup(flip, benchmark, 'flip_rate'))} ({format_number(_lookup(flip, benchmark, 'null_flip_rate'))}) |"
        )
    lines += _significance_lines(tables.get("rho_flip_sig"))
    lines += _stability_lines(tables.get("item_stability"))
    lines += _precision_lines(tables.get("precision"))
    lines += _scorer_lines(tables.get("scorers"))
    return "\n".join(lines) + "\n"


def _significance_lines(table: pd.DataFrame | None) -> list[str]:
    """rho_flip beside rho_flip_sig per pair and benchmark, with the detectable difference."""
    if table is None or table.empty:
        return []
    first = table.iloc[0]
    lines = [
        "",
        "## Verdicts against item noise",
        "",
        f"rho_flip counts every strict difference; rho_flip_sig only the configs where a paired test over the items "
        f"(exact McNemar for single-seed cells, paired bootstrap with the seeds nested otherwise; {first['correction']} "
        f"correction across a pair's configs, alpha {first['alpha']}) finds one model better. The interval is "
        "rho_flip's over item resamples; mdd = the smallest difference detectable at that item count by one test, "
        "and at alpha / |C| (adjusted).",
        "",
        "| benchmark | pair | rho_flip (N+ / N-) | rho_flip interval (items) | rho_flip_sig (N+sig / N-sig) |"
        " inconclusive | items | mdd (pp) | mdd adjusted (pp) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples():
        lines.append(
            f"| {row.benchmark} | {row.model_a} vs {row.model_b} | {row.rho_flip:.3f} ({row.n_plus} / {row.n_minus}) | "
            f"[{format_number(row.rho_flip_lower)}, {format_number(row.rho_flip_upper)}] | {format_number(row.rho_flip_sig)} "
            f"({format_number(row.n_plus_sig, '.0f')} / {format_number(row.n_minus_sig, '.0f')}) | {format_number(row.n_inconclusive, '.0f')} | "
            f"{format_number(row.n_items, '.0f')} | {format_number(row.mdd_pp, '.1f')} | {format_number(row.mdd_adjusted_pp, '.1f')} |"
        )
    return lines


def _stability_lines(table: pd.DataFrame | None) -> list[str]:
    """Per benchmark: the mean SSI per temperature (models pooled) and the Friedman test across them."""
    if table is None or "table" not in table.columns:
        return []
    ssi, friedman = table[table["table"] == "ssi"], table[table["table"] == "friedman"].set_index("benchmark")
    if ssi.empty:
        return ["", "Decision stability over seeds: no sampled cells (stability needs several seeds per cell)."]
    lines = [
        "",
        "Decision stability over seeds (mean SSI over models and items; Friedman test across temperatures):",
        "",
    ]
    for benchmark, frame in ssi.groupby("benchmark", sort=False):
        means = frame.groupby("decoding", sort=False)["mean_ssi"].mean()
        test = friedman.loc[benchmark] if benchmark in friedman.index else None
        result = (
            "n/a"
            if test is None
            else test["reason"]
            if isinstance(test["reason"], str)
            else f"chi2 {test['statistic']:.2f}, p {test['p_value']:.3g}"
        )
        lines.append(f"- {benchmark}: " + ", ".join(f"{k} {v:.3f}" for k, v in means.items()) + f"; Friedman {result}")
    return lines


def _precision_lines(table: pd.DataFrame | None) -> list[str]:
    """The precision probe's headline, as the paper states its BF16-vs-NF4 check."""
    if table is None or "table" not in table.columns:
        return []
    if table.empty:  # a budgeted run's rounds may choose none of the probe's configs
        return ["", "Precision probe: no paired cells."]
    pooled = table[(table["table"] == "differences") & (table["benchmark"] == "all")]
    if pooled.empty:
        return ["", "Precision probe: no paired cells."]
    row = pooled.iloc[0]
    compared = table[table["table"] == "orderings"]
    ordering = (
        f"the model ordering matches on {int(row['n_orderings_matched'])} of {int(row['n_orderings_compared'])} "
        f"(benchmark, config) cells with a strict ordering at both precisions ({len(compared)} cells compared)"
        if len(compared)
        else "no model ordering to compare (fewer than two models have a twin of their own: models that are one set "
        "of weights share theirs)"
    )
    return [
        "",
        f"Precision probe: over {int(row['n_cells'])} paired cells, |score difference| median "
        f"{row['median_abs_diff_pp']:.1f} pp, mean {row['mean_abs_diff_pp']:.1f} pp, max "
        f"{row['max_abs_diff_pp']:.1f} pp; {ordering}. The probe's own cells are not in the tables above.",
        *(
            [f"Left out of the orderings (they share one twin, the same weights at the probe precision): {left_out}."]
            if len(compared) and (left_out := compared["left_out"].iloc[0])
            else []
        ),
    ]


def _scorer_lines(table: pd.DataFrame | None) -> list[str]:
    """How many verdicts the scorer alone reverses, per benchmark, model pair and pair of scorers."""
    if table is None or "table" not in table.columns:
        return []
    reversals = table[table["table"] == "reversals"]
    lines = [
        "",
        "## Verdicts the scorer alone moves",
        "",
        "Per benchmark and model pair: of the configs two scorers both label (one generation each), those whose "
        "verdict A vs B one scorer reverses against the other (A above B by one, below by the other), and those it "
        "changes at all (ties included).",
        "",
    ]
    header = ["| benchmark | pair | scorers | reversed | changed | configs |", "|---|---|---|---|---|---|"]
    lines += ["No config here is labelled by two scorers for two models."] if reversals.empty else header
    for row in reversals.itertuples():
        lines.append(
            f"| {row.benchmark} | {row.model_a} vs {row.model_b} | {row.scorer_a} vs {row.scorer_b} | "
            f"{int(row.reversed)} | {int(row.changed)} | {int(row.n_twins)} |"
        )
    by_value = table[table["table"] == "by_value"] if "scorer_value" in table.columns else table.iloc[:0]
    if len(by_value):
        lines += [
            "",
            "rho_flip under each value of the scorer axis, over the free-form configs it labels (a judge in two wordings of "
            "its question is two values):",
            "",
            "| benchmark | pair | scorer | rho_flip (N+ / N-) | configs |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {row.benchmark} | {row.model_a} vs {row.model_b} | {row.scorer_value} | {row.rho_flip:.3f} "
            f"({int(row.n_plus)} / {int(row.n_minus)}) | {int(row.n_configs)} |"
            for row in by_value.itertuples()
        ]
    human = table[table["table"] == "human"]
    if len(human):
        lines += ["", "Scorers against the human labels of each benchmark's labelled replies (three-class):"]
        lines += [
            f"{row.benchmark}: {row.scorer_name} on {row.labelled_model} {row.three_class:.3f} (kappa {row.kappa:.3f}"
            f"{', the file it was developed on' if row.developed_on else ''}"
            f"{f', fitted on {row.fitted_on} alone' if pd.notna(row.fitted_on) else ''}"
            f"{f', its answers parse {row.parse_rate:.3f}' if pd.notna(getattr(row, 'parse_rate', None)) else ''});"
            for row in human.itertuples()
        ]
    return lines


def _lookup(table: pd.DataFrame | None, key, column: str):
    if table is None or key not in table.index or column not in table.columns:
        return None
    value = table.loc[key, column]
    return value.iloc[0] if isinstance(value, pd.Series) else value


def format_number(value, spec: str = ".3f") -> str:
    """A number as a table shows it; n/a for a missing one (None or NaN)."""
    return "n/a" if value is None or pd.isna(value) else format(float(value), spec)


def _verdict(row) -> tuple[str, str]:
    """What the envelope's verdict (who is ahead in more configs) likeliest is, a model or a tie, and its chance;
    and whether it is settled, or how many more configs would settle it (grid_model.configs_to_settle: the median,
    and the middle half of the futures)."""
    if math.isnan(row.p_a_leads):
        return "n/a", "n/a"
    chances = {row.model_a: row.p_a_leads, row.model_b: row.p_b_leads, "a tie": 1 - row.p_a_leads - row.p_b_leads}
    likeliest = max(chances, key=chances.get)
    verdict = f"{likeliest} (P {format_number(chances[likeliest])})"
    if row.configs_to_settle == 0:
        return verdict, "settled"
    if math.isnan(row.configs_to_settle):
        return verdict, "not even by every config"
    high = "never" if math.isnan(row.configs_to_settle_high) else f"{row.configs_to_settle_high:.0f}"
    return verdict, f"{row.configs_to_settle:.0f} more ({row.configs_to_settle_low:.0f} to {high})"


def _rho_estimate_lines(pairs: pd.DataFrame, share: str) -> list[str]:
    """A table of the pairs' estimated rho_flip, with intervals, beside the configs run alone, and who leads the
    verdict over the envelope."""
    lines = [
        f"| A | B | configs both ran | rho_flip | {share} interval | configs run alone | ahead in more configs | "
        "configs to settle it (middle half) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in pairs.itertuples():
        verdict, more = _verdict(row)
        lines.append(
            f"| {row.model_a} | {row.model_b} | {row.n_run} | {format_number(row.rho_flip)} | "
            f"{format_number(row.rho_flip_low)} to {format_number(row.rho_flip_high)} | "
            f"{format_number(row.rho_flip_run)} | {verdict} | {more} |"
        )
    return [*lines, ""]


def estimate_markdown(
    rho: pd.DataFrame, quantiles: pd.DataFrame, new_values: pd.DataFrame, variance: pd.DataFrame, level: float
) -> str:
    """The grid model's estimates (analysis/grid_model.py), a section a benchmark: how many configs ran, rho_flip of
    every pair and each model's score quantiles over the envelope, with intervals, beside the configs run alone;
    how each pair's verdict carries to a new value of each sampled axis; and what moves a config's score."""
    share = f"{round(100 * level)}%"
    lines = ["# Estimates over the envelope", ""]
    for benchmark, mine in quantiles.groupby("benchmark", sort=False):
        pairs = rho[rho["benchmark"] == benchmark]  # none with one model
        n_run, n_configs = int(mine["n_run"].max()), int(mine["n_configs"].max())
        lines += [f"## {benchmark}", "", f"Estimated from {n_run} of {n_configs} configs.", ""]
        if not pairs.empty:
            lines += _rho_estimate_lines(pairs, share)
        lines += [f"| model | quantile | score | {share} interval | configs run alone |", "|---|---|---|---|---|"]
        for row in mine.itertuples():
            lines.append(
                f"| {row.model} | {round(100 * row.quantile)}% | {format_number(row.score)} | "
                f"{format_number(row.low)} to {format_number(row.high)} | {format_number(row.run)} |"
            )
        lines.append("")
        beyond = new_values[new_values["benchmark"] == benchmark]
        if not beyond.empty:
            lines += [
                "Beyond the envelope: at a value of the axis that no config has (a new template, a new few-shot "
                "draw), the share of its configs where A scores above B, and at one such config the chance that A "
                "is ahead, that B is (ties are the rest):",
                "",
                f"| A | B | new value of | values run | share where A is ahead | {share} interval | P(A ahead) | "
                "P(B ahead) |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for row in beyond.itertuples():
                lines.append(
                    f"| {row.model_a} | {row.model_b} | {row.axis} | {row.n_values} | "
                    f"{format_number(row.share_a_ahead)} | {format_number(row.share_a_ahead_low)} to "
                    f"{format_number(row.share_a_ahead_high)} | {format_number(row.p_a_ahead)} | "
                    f"{format_number(row.p_b_ahead)} |"
                )
            lines.append("")
        lines += _variance_lines(variance[variance["benchmark"] == benchmark], share)
    return "\n".join(lines)


def _variance_lines(variance: pd.DataFrame, share: str) -> list[str]:
    """The variance components of a benchmark's scores and differences, as standard deviations (score points)."""
    if variance.empty:
        return []
    components = list(dict.fromkeys(variance["component"]))
    lines = [
        "What moves a config's score (standard deviation over the envelope, on the score's scale; median and "
        f"{share} interval). Of a pair's difference A - B, an axis is the model-by-axis interaction and "
        "interactions the model-by-config rest; items and seeds are the chance in one config's value from its "
        "items and seeds (a pair's item by item and seed by seed; items n/a without the run's item rows). An axis "
        "the configs run hold at one value is n/a.",
        "",
        "| of | configs run | " + " | ".join(components) + " |",
        "|---|---|" + "---|" * len(components),
    ]
    for of, rows in variance.groupby("of", sort=False):
        cells = []
        for row in rows.set_index("component").reindex(components).itertuples():
            sd = format_number(math.sqrt(row.variance)) if row.variance >= 0 else "n/a"
            interval = (
                ""
                if math.isnan(row.low)
                else f" ({format_number(math.sqrt(row.low))} to {format_number(math.sqrt(row.high))})"
            )
            cells.append(sd + interval)
        lines.append(f"| {of} | {int(rows['n_run'].iloc[0])} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def budget_line(budget: dict) -> str:
    """The sentence that opens a budgeted run's results: how many of the grid's cells ran, under what budget, and
    how many more ran outside it for the responses its rescored configs relabel."""
    twins = budget["twin_cells"]
    outside = f"; {twins} more cells ran outside it, for the responses its rescored configs relabel" if twins else ""
    return f"Estimated from {budget['cells_run']} of {budget['cells']} cells (estimate: {budget['rule']}{outside})"


# where a budgeted run's tables send the reader (budget_notice, and the report's headline)
BUDGET_ESTIMATE = "rho_flip and the score quantiles over the whole envelope, with 90% intervals, are in estimate.md"


def budget_notice(budget: dict | None) -> str:
    """A note above a budgeted run's tables: they are of the cells run, and where the estimate over the whole
    envelope is (empty for a run of every cell)."""
    if budget is None:
        return ""
    return (
        f"> **{budget_line(budget)}**: the tables below are of the cells run, half of them after the first round "
        f"chosen where the verdicts were least sure, so their rho_flip is no fair estimate of the envelope's; "
        f"{BUDGET_ESTIMATE}.\n\n"
    )


def budget_markdown(budget: dict, rho: pd.DataFrame, level: float) -> str:
    """The opening of a budgeted run's summary: how many cells ran, and per benchmark the configs run, why its
    rounds stopped and every pair's estimated rho_flip over the envelope with its interval."""
    share = f"{round(100 * level)}%"
    lines = [f"## {budget_line(budget)}", ""]
    for benchmark, state in budget["benchmarks"].items():
        lines += [
            f"### {benchmark}: {state['configs_run']} of {state['configs']} configs, {state['rounds']} round(s); "
            f"stopped: {state['stopped']}",
            "",
            *_rho_estimate_lines(rho[rho["benchmark"] == benchmark], share),
        ]
    return "\n".join(lines) + "\n"
