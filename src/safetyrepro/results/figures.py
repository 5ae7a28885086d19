"""Figures of the report (matplotlib, Agg backend), one function per figure, each returning a Figure, and
the table of them (FIGURES) from which the workflow makes one rule per figure.

Figures are sized by what they show (models, configs, benchmarks) and laid out with constrained
layout; long tick labels are rotated or wrapped, so no text overlaps. matplotlib is imported when a
figure is drawn, so reading the table (as the Snakefile does) costs nothing.
"""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from safetyrepro.analysis.flips import minority_side, score_matrix, signs
from safetyrepro.results.storage import write_atomic

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SHARE_PARTS = [
    ("model_share", "model"),
    ("implementation_share", "implementation (every axis but scoring)"),
    ("interaction_share", "interactions"),
    ("residual_share", "residual"),
]
TIER_SHADE = {"core": "#ffffff", "stress": "#f3e6e6"}


def _pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _figure(width: float, height: float, **kwargs) -> tuple[Figure, object]:
    return _pyplot().subplots(figsize=(width, height), layout="constrained", **kwargs)


def _title(ax, text: str, fontsize: float = 10, **kwargs) -> None:
    """An axes title wrapped to the figure's width, so a long title never runs off a narrow figure."""
    chars = max(30, int(ax.figure.get_figwidth() * 120 / fontsize))
    ax.set_title(textwrap.fill(text, chars), fontsize=fontsize, **kwargs)


def _wrap(label: str, width: int = 20) -> str:
    """A long label on several lines, broken at spaces or hyphens, never inside a word."""
    return "\n".join(textwrap.wrap(str(label), width, break_long_words=False)) or str(label)


def _empty(title: str, message: str) -> Figure:
    """A small figure that says why there is nothing to plot."""
    fig, ax = _figure(6, 2)
    ax.axis("off")
    ax.set_title(title)
    ax.text(0.5, 0.5, textwrap.fill(message, 70), ha="center", va="center", transform=ax.transAxes)
    return fig


def rho_heatmap(rho: pd.DataFrame, benchmark: str) -> Figure:
    """Model x model heat map of rho_flip on one benchmark; each cell also shows N+/N-/N0 of the
    row model against the column model."""
    table = rho[rho["benchmark"] == benchmark]
    models = list(dict.fromkeys([*table["model_a"], *table["model_b"]]))
    n = len(models)
    values = np.full((n, n), np.nan)
    counts = {}
    for row in table.itertuples():
        i, j = models.index(row.model_a), models.index(row.model_b)
        values[i, j] = values[j, i] = row.rho_flip
        counts[i, j] = (row.n_plus, row.n_minus, row.n_ties)
        counts[j, i] = (row.n_minus, row.n_plus, row.n_ties)
    n_configs = int(table["n_configs"].max()) if len(table) else 0
    ceiling = float(table["ceiling"].max()) if len(table) else 0.5
    fig, ax = _figure(2.2 + 1.6 * n, 1.6 + 1.3 * n)
    image = ax.imshow(
        np.ma.masked_invalid(values),
        cmap=_pyplot().colormaps["OrRd"].with_extremes(bad="#dddddd"),
        vmin=0,
        vmax=max(ceiling, 1e-9),
    )
    for (i, j), (plus, minus, ties) in counts.items():
        dark = values[i, j] > 0.6 * ceiling
        ax.text(
            j,
            i,
            f"{values[i, j]:.3f}\n{plus} / {minus} / {ties}",
            ha="center",
            va="center",
            fontsize=9,
            color="white" if dark else "black",
        )
    labels = [_wrap(m) for m in models]
    ax.set_xticks(range(n), labels, rotation=30, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(n), labels)
    _title(ax, f"{benchmark}: rho_flip per model pair (|C| = {n_configs})", fontsize=11)
    ax.set_xlabel("model B   (cell text: rho_flip, then N+ / N- / N0 of row A vs column B)", fontsize=8)
    ax.set_ylabel("model A")
    fig.colorbar(image, ax=ax, shrink=0.8, label=f"rho_flip (ceiling {ceiling:.3f})")
    return fig


def config_order(cells: pd.DataFrame, benchmark: str) -> list[str]:
    """The benchmark's configs, core tier first, each tier sorted by mean score over models (high first)."""
    frame = cells[cells["benchmark"] == benchmark]
    summary = frame.groupby("config_id").agg(tier=("tier", "first"), mean=("score", "mean")).reset_index()
    summary["tier_rank"] = (summary["tier"] != "core").astype(int)
    return list(summary.sort_values(["tier_rank", "mean", "config_id"], ascending=[True, False, True])["config_id"])


def flipped_configs(cells: pd.DataFrame, benchmark: str) -> set[str]:
    """Configs that reverse some model pair's majority verdict: per pair, the configs on the minority
    side of N+ / N- (both sides when N+ = N-); ties reverse nothing. Empty exactly when rho_flip is 0
    for every pair."""
    matrix = score_matrix(cells, benchmark).dropna()
    flipped: set[str] = set()
    for model_a, model_b in itertools.combinations(matrix.columns, 2):
        flipped |= set(matrix.index[minority_side(signs(matrix[model_a], matrix[model_b]))])
    return flipped


def scores_across_configs(cells: pd.DataFrame, benchmark: str) -> Figure:
    """Each model's score on every config of one benchmark: configs sorted (core tier first), tiers
    shaded, and the configs that reverse a pair's majority verdict labelled in red."""
    order = config_order(cells, benchmark)
    matrix = score_matrix(cells, benchmark).reindex(order)
    tiers = cells[cells["benchmark"] == benchmark].groupby("config_id")["tier"].first().reindex(order)
    flipped = flipped_configs(cells, benchmark)
    fig, ax = _figure(max(6.5, 2.5 + 0.32 * len(order)), 5.2)
    x = np.arange(len(order))
    for tier in dict.fromkeys(tiers):
        positions = x[(tiers == tier).to_numpy()]
        ax.axvspan(positions.min() - 0.5, positions.max() + 0.5, color=TIER_SHADE.get(tier, "#eeeeee"), zorder=0)
        ax.text(
            (positions.min() + positions.max()) / 2,
            1.02,
            f"{tier} tier",
            ha="center",
            va="bottom",
            transform=ax.get_xaxis_transform(),
            fontsize=9,
        )
    markers = "osD^vP*X"
    dodge = min(0.08, 0.5 / max(1, matrix.shape[1]))  # side by side, so tied models stay visible
    for index, model in enumerate(matrix.columns):
        ax.plot(
            x + (index - (matrix.shape[1] - 1) / 2) * dodge,
            matrix[model],
            marker=markers[index % len(markers)],
            linewidth=1,
            markersize=5,
            label=model,
        )
    ax.set_xticks(x, order, rotation=90, fontsize=8)
    for label in ax.get_xticklabels():
        if label.get_text() in flipped:
            label.set_color("#c0392b")
    ax.set_xlim(-0.5, len(order) - 0.5)
    ax.set_ylabel("score (higher = better aligned)")
    _title(
        ax,
        f"{benchmark}: score of each model per config (in red: the {len(flipped)} of {len(order)} configs "
        f"that reverse a model pair's majority verdict)",
        pad=18,
    )
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, title="model")
    return fig


def orderings_per_tier(tiers: pd.DataFrame) -> Figure:
    """Strict model orderings reached per benchmark on each envelope variant (full, core, without
    each stress value), against the number possible."""
    if tiers.empty:
        return _empty("Orderings reached per tier", "The tier analysis has no rows.")
    benchmarks = list(dict.fromkeys(tiers["benchmark"]))
    variants = list(dict.fromkeys(tiers["variant"]))
    pivot = tiers.pivot(index="benchmark", columns="variant", values="orderings_reached").reindex(
        index=benchmarks, columns=variants
    )
    possible = tiers.groupby("benchmark")["orderings_possible"].max().reindex(benchmarks)
    configs = tiers.pivot(index="benchmark", columns="variant", values="n_configs").reindex(
        index=benchmarks, columns=variants
    )
    fig, ax = _figure(max(6.5, 3 + 0.45 * len(benchmarks) * len(variants)), 4.8)
    width = 0.8 / len(variants)
    x = np.arange(len(benchmarks))
    for index, variant in enumerate(variants):
        bars = ax.bar(x + (index - (len(variants) - 1) / 2) * width, pivot[variant].fillna(0), width, label=variant)
        ax.bar_label(
            bars,
            labels=[f"|C|={c:.0f}" if not math.isnan(c) else "" for c in configs[variant]],
            fontsize=7,
            rotation=90,
            padding=2,
        )
    ax.scatter(x, possible, marker="_", s=900, color="black", zorder=3, label="possible (k!)")
    ax.set_xticks(x, benchmarks)
    ax.set_ylim(0, float(possible.max()) * 1.35 + 0.5)
    ax.set_ylabel("strict model orderings reached")
    _title(ax, "Orderings of the models reached per envelope variant", fontsize=11)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, markerscale=0.3)
    return fig


def anova_shares(variance: pd.DataFrame) -> Figure:
    """Stacked shares of score variance (free-form ANOVA) per benchmark: model, implementation,
    interactions, residual, with rho = implementation / model."""
    if variance.empty:
        return _empty("Variance shares (ANOVA)", "No free-form cells: the ANOVA has no rows.")
    fig, ax = _figure(9, 1.6 + 0.7 * len(variance))
    y = np.arange(len(variance))
    left = np.zeros(len(variance))
    for column, label in SHARE_PARTS:
        values = variance[column].fillna(0).clip(lower=0).to_numpy()
        ax.barh(y, values, left=left, label=label)
        left += values
    for row, total in zip(y, left):
        if total == 0:
            ax.text(0.5, row, "no variance: every free-form score is equal", ha="center", va="center", fontsize=9)
    labels = [
        f"{row.benchmark}\nrho = {row.rho:.2f}" if np.isfinite(row.rho) else f"{row.benchmark}\nrho = n/a"
        for row in variance.itertuples()
    ]
    ax.set_yticks(y, labels)
    ax.set_xlim(0, max(1.0, float(left.max())))
    ax.invert_yaxis()
    ax.set_xlabel("share of the total sum of squares of free-form cell scores (Type II ANOVA)")
    _title(ax, "Variance shares: model vs harness (interactions n/a = main effects only)", fontsize=11)
    fig.legend(loc="outside lower center", ncols=2, fontsize=8)
    return fig


def shap_per_axis(shap: pd.DataFrame) -> Figure:
    """Heat maps of each feature's share of mean |SHAP| (LightGBM surrogates): the score regressor per
    benchmark and, when the table has them, the per-pair sign classifiers (one row per benchmark and
    pair). Rows of surrogates not fitted (no feature) are left out; a table without a `surrogate`
    column is all regressor rows."""
    fitted = shap[shap["feature"].notna()] if "feature" in shap.columns else shap.iloc[0:0]
    if fitted.empty:
        if "note" in shap.columns and len(shap):
            note = shap["note"].iloc[0]
        elif "reason" in shap.columns and shap["reason"].notna().any():
            note = "no surrogate could be fitted: " + "; ".join(dict.fromkeys(shap["reason"].dropna().astype(str)))
        else:
            note = "no benchmark had enough cells"
        return _empty("SHAP per axis (surrogate)", str(note))
    kind = fitted["surrogate"] if "surrogate" in fitted.columns else pd.Series("regressor", index=fitted.index)
    panels = []
    regressor = fitted[kind == "regressor"]
    if len(regressor):
        pivot = regressor.pivot(index="benchmark", columns="feature", values="share")
        pivot = pivot.reindex(
            index=list(dict.fromkeys(regressor["benchmark"])), columns=list(dict.fromkeys(regressor["feature"]))
        )
        panels.append(("regressor of cell score (per benchmark)", pivot))
    pairs = fitted[kind == "pair classifier"]
    if len(pairs):
        label = (
            pairs["benchmark"].astype(str) + ": " + pairs["model_a"].astype(str) + " vs " + pairs["model_b"].astype(str)
        )
        pairs = pairs.assign(pair=label.map(lambda text: _wrap(text, 30)))
        pivot = pairs.pivot(index="pair", columns="feature", values="share")
        pivot = pivot.reindex(index=list(dict.fromkeys(pairs["pair"])), columns=list(dict.fromkeys(pairs["feature"])))
        panels.append(("pair classifier of sign(A - B) (per benchmark and pair)", pivot))
    columns = sum(pivot.shape[1] for _, pivot in panels)
    rows = max(pivot.shape[0] for _, pivot in panels)
    fig, axes = _figure(
        max(6.5, 2.5 + 1.1 * columns + 2.2 * (len(panels) - 1)),
        2.2 + 0.5 * rows,
        ncols=len(panels),
        squeeze=False,
        gridspec_kw={"width_ratios": [pivot.shape[1] for _, pivot in panels]},
    )
    for ax, (title, pivot) in zip(axes.flat, panels):
        image = ax.imshow(pivot.to_numpy(dtype=float), cmap="Blues", vmin=0, vmax=1, aspect="auto")
        for (i, j), value in np.ndenumerate(pivot.to_numpy(dtype=float)):
            if not np.isnan(value):
                ax.text(
                    j,
                    i,
                    f"{value:.2f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if value > 0.6 else "black",
                )
        ax.set_xticks(range(pivot.shape[1]), pivot.columns, rotation=30, ha="right")
        ax.set_yticks(range(pivot.shape[0]), pivot.index, fontsize=8)
        _title(ax, title, fontsize=9)
    fig.colorbar(image, ax=list(axes.flat), label="share of mean |SHAP|")
    fig.suptitle("SHAP per axis: share of mean |SHAP| (surrogates, not the headline)")
    return fig


def parse_rate_per_template(cells: pd.DataFrame) -> Figure:
    """Mean parse rate of free-form cells per template, one panel per benchmark, one bar per model."""
    freeform = cells[cells["scoring"] == "freeform"]
    if freeform.empty:
        return _empty("Parse rate per template", "No free-form cells: every answer was scored by log-likelihood.")
    benchmarks = list(dict.fromkeys(freeform["benchmark"]))
    models = list(dict.fromkeys(freeform["model"]))
    templates = sorted(freeform["template"].astype(str).unique())
    columns = min(3, len(benchmarks))
    rows = math.ceil(len(benchmarks) / columns)
    panel_width = max(3.2, 0.35 * len(templates) * len(models) + 1)
    fig, axes = _figure(
        panel_width * columns + 1.5, 3.2 * rows + 0.6, nrows=rows, ncols=columns, squeeze=False, sharey=True
    )
    width = 0.8 / len(models)
    x = np.arange(len(templates))
    for ax, benchmark in zip(axes.flat, benchmarks):
        frame = freeform[freeform["benchmark"] == benchmark]
        means = frame.groupby([frame["template"].astype(str), "model"])["parse_rate"].mean().unstack("model")
        means = means.reindex(index=templates, columns=models)
        for index, model in enumerate(models):
            ax.bar(x + (index - (len(models) - 1) / 2) * width, means[model].fillna(0), width, label=model)
        ax.set_xticks(x, templates)
        ax.set_ylim(0, 1.05)
        ax.set_title(benchmark, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    for ax in axes.flat[len(benchmarks) :]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("parse rate")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(models), 4), fontsize=8)
    fig.suptitle("Parse rate of free-form answers per template (mean over configs)")
    return fig


def paired_differences(tests: pd.DataFrame, benchmark: str) -> Figure:
    """Forest plot of one benchmark: per model pair (a panel each) and config, the paired score
    difference A - B with its bootstrap interval, coloured by the verdict of the adjusted test."""
    frame = tests[tests["benchmark"] == benchmark]
    if frame.empty:
        return _empty(f"Paired differences: {benchmark}", "No model pair shares a config on this benchmark.")
    pairs = list(dict.fromkeys(zip(frame["model_a"], frame["model_b"])))
    configs = list(dict.fromkeys(frame["config_id"]))
    fig, axes = _figure(4.2 * len(pairs), 1.4 + 0.22 * len(configs), ncols=len(pairs), sharey=True, squeeze=False)
    colours = {"A better": "#1f77b4", "B better": "#d62728", "inconclusive": "#7f7f7f"}
    for ax, (model_a, model_b) in zip(axes[0], pairs):
        pair = frame[(frame["model_a"] == model_a) & (frame["model_b"] == model_b)].set_index("config_id")
        pair = pair.reindex(configs)
        y = np.arange(len(configs))
        for verdict, colour in colours.items():
            rows = (pair["verdict"] == verdict).to_numpy()
            diff, low, high = (100 * pair[c].to_numpy()[rows] for c in ("diff", "lower", "upper"))
            ax.errorbar(diff, y[rows], xerr=[diff - low, high - diff], fmt="o", ms=3, color=colour, label=verdict)
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks(y, configs, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("score difference A - B (pp)")
        _title(ax, f"A = {model_a}, B = {model_b}", fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=8)
    fig.suptitle(f"{benchmark}: paired differences per config (interval and adjusted test)", fontsize=11)
    return fig


def rho_flip_estimates(rho: pd.DataFrame, benchmark: str) -> Figure:
    """A run with a budget, one benchmark: every pair's rho_flip over the envelope, estimated from the configs run,
    with its 90% interval, beside rho_flip of the configs run alone."""
    frame = rho[rho["benchmark"] == benchmark]
    if frame.empty:
        return _empty(f"rho_flip estimated: {benchmark}", "One model: no pair to estimate rho_flip for.")
    labels = [f"{a}\nvs {b}" for a, b in zip(frame["model_a"], frame["model_b"])]
    y = np.arange(len(frame))
    estimate, low, high = (frame[c].to_numpy(float) for c in ("rho_flip", "rho_flip_low", "rho_flip_high"))
    fig, ax = _figure(6.0, 1.4 + 0.55 * len(frame))
    ax.errorbar(
        estimate,
        y,
        xerr=[estimate - low, high - estimate],
        fmt="o",
        color="#1f77b4",
        capsize=3,
        label="estimated over the envelope, 90% interval",
    )
    ax.plot(frame["rho_flip_run"], y, "x", color="#d62728", label="configs run alone")
    ax.set_yticks(y, [_wrap(label, 28) for label in labels], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(-0.02, 0.52)
    ax.set_xlabel("rho_flip")
    n_run, n_configs = int(frame["n_run"].min()), int(frame["n_configs"].max())
    _title(ax, f"{benchmark}: rho_flip estimated from {n_run} of {n_configs} configs")
    fig.legend(loc="outside lower center", ncols=2, fontsize=8)
    return fig


def stability_by_temperature(stability: pd.DataFrame) -> Figure:
    """Mean Safety Stability Index per decoding temperature (and pooled), one panel per benchmark,
    one bar per model."""
    ssi = stability[stability["table"] == "ssi"] if "table" in stability.columns else stability.iloc[0:0]
    if ssi.empty:
        return _empty("Decision stability over seeds", "No sampled cells: stability needs several seeds per cell.")
    benchmarks = list(dict.fromkeys(ssi["benchmark"]))
    models = list(dict.fromkeys(ssi["model"]))
    fig, axes = _figure(2.6 * len(benchmarks) + 1.5, 3.6, ncols=len(benchmarks), sharey=True, squeeze=False)
    width = 0.8 / len(models)
    for ax, benchmark in zip(axes[0], benchmarks):
        frame = ssi[ssi["benchmark"] == benchmark]
        levels = list(dict.fromkeys(frame["decoding"]))
        x = np.arange(len(levels))
        for index, model in enumerate(models):
            values = frame[frame["model"] == model].set_index("decoding")["mean_ssi"].reindex(levels)
            ax.bar(x + (index - (len(models) - 1) / 2) * width, values.fillna(0), width, label=model)
        ax.set_xticks(x, levels, fontsize=8)
        ax.set_ylim(0, 1.05)
        _title(ax, benchmark, fontsize=9)
    axes[0][0].set_ylabel("mean SSI")
    fig.suptitle("Decision stability over seeds: share of an item's seeds giving its modal decision", fontsize=10)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(4, len(models)), fontsize=8)
    return fig


def scorer_agreement(scorers: pd.DataFrame) -> Figure:
    """Left: each scorer's three-class agreement with the human labels, per labelled file of each benchmark
    that has them; right: how often two scorers give the run's answers the same label, per benchmark."""
    if "table" not in scorers.columns:
        return _empty("Scorer agreement", "No scorer axis in this run: one scorer labelled every answer.")
    human, pairs = scorers[scorers["table"] == "human"], scorers[scorers["table"] == "agreement"]
    if human.empty and pairs.empty:
        return _empty(
            "Scorer agreement", "No answer here has two scorers' labels, and no benchmark with human labels to compare."
        )
    fig, (left, right) = _figure(10, 3.8, ncols=2)
    missing = "no benchmark with human labels in this run"
    for ax, rows, what in ((left, human, missing), (right, pairs, "no answer with two labels")):
        ax.set_ylim(0, 1)
        if rows.empty:
            ax.text(0.5, 0.5, what, ha="center", va="center", fontsize=9, transform=ax.transAxes)
    benchmarks = list(dict.fromkeys(human["benchmark"])) if len(human) else []
    if len(human):
        files = list(dict.fromkeys(zip(human["benchmark"], human["labelled_model"])))
        names = list(dict.fromkeys(human["scorer_name"]))
        fitted = human.get("fitted_on", pd.Series(index=human.index, dtype=object)).map(lambda v: isinstance(v, str))
        held_out = set(human.loc[fitted, "scorer_name"])  # a learned scorer's rows: fitted on the other file
        width = 0.8 / len(names)
        for index, name in enumerate(names):
            rows = human[human["scorer_name"] == name].set_index(["benchmark", "labelled_model"])
            values = rows["three_class"].reindex(files)
            label = f"{name} (fitted on the other file)" if name in held_out else name
            left.bar(np.arange(len(files)) + (index - (len(names) - 1) / 2) * width, values, width, label=label)
        ticks = [model if len(benchmarks) == 1 else f"{benchmark}\n{model}" for benchmark, model in files]
        left.set_xticks(np.arange(len(files)), ticks, fontsize=8)
        left.legend(fontsize=8, loc="lower right")
    left.set_ylabel("three-class agreement")
    _title(left, "Scorers vs. human labels" + (f": {benchmarks[0]}" if len(benchmarks) == 1 else ""), fontsize=9)
    if len(pairs):
        labels = [f"{row.benchmark}\n{row.scorer_a} vs {row.scorer_b}" for row in pairs.itertuples()]
        right.bar(np.arange(len(pairs)), pairs["agreement"], 0.6)
        right.set_xticks(np.arange(len(pairs)), labels, fontsize=8)
    right.set_ylabel("share of item rows with the same label")
    _title(right, "Scorers on this run's answers", fontsize=9)
    return fig


def save(fig: Figure, path: Path, dpi: int = 110) -> None:
    """Write a figure as PNG atomically and close it."""
    try:
        write_atomic(Path(path), lambda tmp: fig.savefig(tmp, format="png", dpi=dpi))
    finally:
        _pyplot().close(fig)


@dataclass(frozen=True)
class ReportFigure:
    """A figure of the report: the function drawing it from one table (a path in the results folder),
    whether it draws one benchmark (then one PNG per benchmark, which the report labels `label`), the
    report's category for it, and whether only a run with a budget has it. Its caption is
    workflow/report/NAME.rst."""

    builder: Callable[..., Figure]
    table: str
    category: str
    per_benchmark: bool = False
    label: str = ""
    budgeted: bool = False  # drawn only in a run with a budget, from the estimate's table


# The workflow makes rule figure_NAME of each (workflow/rules/report.smk), in this order.
FIGURES: dict[str, ReportFigure] = {
    "rho_estimate": ReportFigure(
        rho_flip_estimates,
        "estimate/rho_flip.parquet",
        category="11. rho_flip estimated (a run with a budget)",
        label="rho_flip estimated, with intervals",
        per_benchmark=True,
        budgeted=True,
    ),
    "rho_heatmap": ReportFigure(
        rho_heatmap,
        "rho_flip.parquet",
        category="01. rho_flip per model pair",
        label="rho_flip heat map",
        per_benchmark=True,
    ),
    "scores": ReportFigure(
        scores_across_configs,
        "cells.parquet",
        category="02. Scores across configs",
        label="scores per config",
        per_benchmark=True,
    ),
    "orderings": ReportFigure(orderings_per_tier, "analysis/tiers.parquet", category="03. Orderings per tier"),
    "anova": ReportFigure(anova_shares, "analysis/variance.parquet", category="04. ANOVA shares"),
    "shap": ReportFigure(shap_per_axis, "analysis/shap.parquet", category="05. SHAP per axis"),
    "parse_rate": ReportFigure(parse_rate_per_template, "cells.parquet", category="06. Parse rate per template"),
    "paired_differences": ReportFigure(
        paired_differences,
        "analysis/paired_tests.parquet",
        category="08. Paired differences",
        label="paired differences per config",
        per_benchmark=True,
    ),
    "stability": ReportFigure(
        stability_by_temperature, "analysis/item_stability.parquet", category="09. Stability over seeds"
    ),
    "scorers": ReportFigure(scorer_agreement, "analysis/scorers.parquet", category="10. Scorer agreement"),
}


def draw(name: str, table: pd.DataFrame, benchmark: str | None = None) -> Figure:
    """Build figure `name` from its table (per-benchmark figures need `benchmark`)."""
    if name not in FIGURES:
        raise ValueError(f"figure '{name}' is unknown (known: {', '.join(FIGURES)})")
    figure = FIGURES[name]
    if figure.per_benchmark != (benchmark is not None):
        raise ValueError(f"figure {name}: {'needs' if figure.per_benchmark else 'takes no'} --benchmark")
    return figure.builder(table, benchmark) if figure.per_benchmark else figure.builder(table)
