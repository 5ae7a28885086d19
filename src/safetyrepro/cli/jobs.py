"""The commands the workflow's jobs run, as the command line declares them (their work is in
safetyrepro.pipeline.jobs): their options are the rules' inputs and outputs."""

from __future__ import annotations

from safetyrepro.benchmarks import BENCHMARKS
from safetyrepro.cli.command import add_command
from safetyrepro.pipeline.jobs import (
    cmd_aggregate,
    cmd_analyse,
    cmd_audit_report,
    cmd_audit_step,
    cmd_check_headline,
    cmd_describe_model,
    cmd_estimate_grid,
    cmd_estimate_round,
    cmd_figure,
    cmd_grid_card,
    cmd_headline,
    cmd_judge_agreement,
    cmd_provenance,
    cmd_rescore_cell,
    cmd_rho_flip,
    cmd_run_cell,
    cmd_serve,
    cmd_summary,
)
from safetyrepro.scorers.human_labels import with_human_labels


def add_commands(commands) -> None:
    """Add the jobs' commands to `commands` (the subparsers action), in the order of a run."""
    add_command(
        commands,
        "describe-model",
        cmd_describe_model,
        "record a model's file hashes or hub revision",
        ("configfile", "model", "out"),
    )
    server = add_command(
        commands, "serve", cmd_serve, "serve one model to cells over a local socket", ("configfile", "model", "address")
    )
    server.add_argument("--idle-seconds", type=float, default=300)
    cell = add_command(
        commands,
        "run-cell",
        cmd_run_cell,
        "run one grid cell (writes --items Parquet, --summary JSON)",
        ("configfile", "model", "config-id", "items", "summary"),
    )
    cell.add_argument("--benchmark", required=True, choices=sorted(BENCHMARKS))
    rescore = add_command(
        commands,
        "rescore-cell",
        cmd_rescore_cell,
        "label a cell's generation twin's responses with the cell's scorer (writes --items, --summary)",
        ("configfile", "model", "config-id", "twin-items", "items", "summary"),
    )
    rescore.add_argument("--benchmark", required=True, choices=sorted(BENCHMARKS))
    judged = add_command(
        commands,
        "judge-agreement",
        cmd_judge_agreement,
        "the agreement with a benchmark's human labels of the judge a scorer axis value asks, in its wording of "
        "the question (writes --out Parquet)",
        ("configfile", "value", "out"),
    )
    judged.add_argument("--benchmark", required=True, choices=with_human_labels(sorted(BENCHMARKS)))
    aggregate = add_command(
        commands,
        "aggregate",
        cmd_aggregate,
        "cells.parquet and items.parquet from cell outputs",
        ("configfile", "cells-out", "items-out"),
    )
    aggregate.add_argument("--summaries", nargs="*", default=[])
    aggregate.add_argument("--items", nargs="*", default=[])
    aggregate.add_argument("--partial", action="store_true", help="accept an incomplete grid (missing cells listed)")
    aggregate.add_argument("--probe-summaries", nargs="*", default=[], help="the precision probe's cell summaries")
    aggregate.add_argument("--probe-out", help="precision_probe.parquet: the probe's cells (none: not written)")
    aggregate.add_argument("--rounds", nargs="*", default=[], help="a budgeted run: each benchmark's last round record")
    add_command(commands, "rho-flip", cmd_rho_flip, "rho_flip table from cells.parquet", ("cells", "out", "markdown"))
    analyse = add_command(
        commands,
        "analyse",
        cmd_analyse,
        "run one analysis (see safetyrepro.analysis.suite)",
        ("configfile", "cells", "items", "out", "markdown"),
    )
    analyse.add_argument("name")
    analyse.add_argument("--probe", help="precision_probe.parquet (the precision analysis reads it)")
    add_command(
        commands,
        "summary",
        cmd_summary,
        "headline numbers as results/summary.md",
        ("configfile", "rho", "cells", "analysis-dir", "out"),
    ).add_argument(
        "--estimate",
        nargs="*",
        default=[],
        help="a budgeted run: the estimate's rho_flip table (estimate/rho_flip.parquet)",
    )
    add_command(
        commands,
        "headline",
        cmd_headline,
        "the report's opening table: per benchmark the most fragile pair (HTML fragment)",
        ("configfile", "sig", "tiers", "parse-clean", "scorer-correction", "cells", "out"),
    )
    add_command(
        commands,
        "check-headline",
        cmd_check_headline,
        "recompute the headline from its tables and check the report's, summary.md's and the GRID card's",
        (
            "configfile",
            "sig",
            "tiers",
            "parse-clean",
            "scorer-correction",
            "cells",
            "html",
            "summary",
            "grid-json",
            "grid-md",
            "out",
        ),
    )
    add_command(
        commands,
        "provenance",
        cmd_provenance,
        "write the run record (results/provenance.json)",
        ("configfile", "items", "out"),
    ).add_argument("--models", nargs="+", required=True)
    add_command(
        commands,
        "grid-card",
        cmd_grid_card,
        "write the GRID card (JSON + Markdown)",
        (
            "configfile",
            "provenance",
            "cells",
            "rho",
            "tiers",
            "parse-clean",
            "scorer-correction",
            "json-out",
            "markdown-out",
        ),
    )
    figure = add_command(commands, "figure", cmd_figure, "draw one report figure (PNG)", ("table", "out"))
    figure.add_argument("name", help="a figure of safetyrepro.results.figures.FIGURES")
    figure.add_argument("--benchmark", help="the benchmark of a per-benchmark figure")
    rounds = add_command(
        commands,
        "estimate-round",
        cmd_estimate_round,
        "one round of a budgeted run's benchmark (the workflow's estimate_round job)",
        ("configfile", "out"),
    )
    rounds.add_argument("--benchmark", required=True, choices=sorted(BENCHMARKS))
    rounds.add_argument("--round", type=int, required=True, help="the round's number, from 0")
    rounds.add_argument("--previous", nargs="*", default=[], help="the previous round's record (none at round 0)")
    rounds.add_argument("--cells", nargs="*", default=[], help="cell summaries of the configs it chose")
    add_command(
        commands,
        "estimate-grid",
        cmd_estimate_grid,
        "rho_flip and score quantiles over the envelope from a budgeted run's cells (the workflow's estimate job)",
        ("configfile", "cells", "items", "rho-out", "quantiles-out", "new-values-out", "variance-out", "markdown"),
    )
    step = add_command(
        commands,
        "audit-step",
        cmd_audit_step,
        "one step of the audit (the workflow's audit_step job)",
        ("configfile", "benchmark", "step", "out"),
    )
    step.add_argument("--pair", nargs=2, required=True, metavar=("A", "B"))
    step.add_argument("--previous", nargs="*", default=[], help="the previous step's record (none at step 0)")
    step.add_argument("--cells", nargs="*", default=[], help="cell summaries of the config it chose, or cells.parquet")
    report = add_command(
        commands,
        "audit-report",
        cmd_audit_report,
        "the audit's answer (the workflow's audit job)",
        ("configfile", "step", "json", "markdown"),
    )
    report.add_argument("--items", nargs="*", default=[], help="item rows of the configs run, or items.parquet")
    report.add_argument("--cells", nargs="*", default=[], help="with imports: cells.parquet")
