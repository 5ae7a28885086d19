"""The commands a user types: check a config, size its grid, fetch data, import results, audit a pair,
compare run records, ..."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from safetyrepro.benchmarks import BENCHMARKS, BROKEN, RULES, DataError
from safetyrepro.cli.command import add_command, refuse_broken
from safetyrepro.cli.parse import cmd_parse
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.loading import DEFAULT_CONFIGFILE
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.pipeline.lifecycle import job

CONFIG_HELP = f"a complete config, or an overlay naming its base with `extends:` (default {DEFAULT_CONFIGFILE})"


def cmd_check(args: argparse.Namespace) -> int:
    """Check a config, its data, models and this machine, as a run would before any job; print the plan."""
    from safetyrepro.pipeline.lifecycle import check_results_free
    from safetyrepro.pipeline.plan import plan_lines
    from safetyrepro.pipeline.preflight import check_inputs, preflight
    from safetyrepro.results.provenance import scorer_files

    settings = load_settings(args.configfile)
    if settings.imports:
        print("\n".join(plan_lines(settings)))
        print(f"ok: {len(settings.imports)} import source(s); `safetyrepro import` reads them")
        return 0
    counts = check_inputs(settings)
    if not args.plan:
        check_results_free(settings.results_dir)
        preflight(settings)
    print("\n".join(plan_lines(settings)))
    print("items per benchmark: " + ", ".join(f"{name} {count}" for name, count in counts.items()))
    for name, entry in scorer_files(settings).items():
        if not entry["shipped"]:
            print(
                f"note: {name} is not the file as shipped ({entry['path']}, SHA-256 {entry['sha256'][:12]}): its labels are this one's"
            )
    if settings.case_study:
        study = settings.case_study
        print(
            f"case study: {study.model.name}, {', '.join(study.benchmarks)}, {study.n_items} items, "
            f"anchor {study.anchor_config}"
        )
    budget = " (a budget: the rounds choose which run)" if settings.budgeted else ""
    print(f"ok: {len(settings.cells())} cells for {len(settings.models)} models{budget}")
    return 0


def cmd_results_dir(args: argparse.Namespace) -> int:
    """Print the effective config's results folder, where a run writes every output (`make run`'s report too)."""
    print(load_settings(args.configfile).results_dir)
    return 0


def cmd_envelope(args: argparse.Namespace) -> int:
    """Print the grid's size: cells, configs per benchmark, generation runs, token budgets."""
    from safetyrepro.pipeline.plan import grid_plan

    settings = load_settings(args.configfile)
    if settings.imports:
        raise ConfigError("imports: this config runs no grid; `safetyrepro import` reads its results")
    plan = grid_plan(settings)
    if args.json:
        print(json.dumps(plan, indent=2))
    else:
        for key, value in plan.items():
            print(f"{key}: {value}")
    return 0


def cmd_fetch_data(args: argparse.Namespace) -> int:
    """Download missing benchmark files at their pinned commits and check their hashes."""
    from safetyrepro.running.data import fetch_data

    refuse_broken(args.benchmark or [], "--benchmark: ")
    fetched = fetch_data(Path(args.data_dir), base_url=args.base_url or None, benchmarks=args.benchmark or None)
    print(f"fetched {len(fetched)} file(s) into {args.data_dir}")
    return 0


@job("out", recorded=False)
def cmd_build_model(args: argparse.Namespace) -> int:
    """Build the embedded gemma-3-270m as a plain HF model directory."""
    from safetyrepro.running.embedded_model import build_embedded_model

    print(build_embedded_model(Path(args.out)))
    return 0


def cmd_config_reference(args: argparse.Namespace) -> int:
    """Write the config reference generated from the schemas, or (--check FILE) say whether FILE is current."""
    from safetyrepro.configuration.reference import render

    page = render()
    if args.check:
        current = Path(args.check).is_file() and Path(args.check).read_text(encoding="utf-8") == page
        stale = f"stale (safetyrepro config-reference --out {args.check})"
        print(f"{args.check}: {'up to date' if current else stale}")
        return 0 if current else 1
    if args.out:
        Path(args.out).write_text(page, encoding="utf-8")
    else:
        print(page, end="")
    return 0


@job("out_dir")
def cmd_import(args: argparse.Namespace) -> int:
    """Read results produced elsewhere (the config's `imports`, or the source options) into --out-dir:
    cells.parquet, items.parquet, an empty precision_probe.parquet and the import record provenance.json."""
    from safetyrepro.imports import import_sources
    from safetyrepro.imports.record import import_record
    from safetyrepro.results.storage import write_json, write_parquet

    flags = [(kind, path) for kind in ("lm_eval", "inspect", "table") for path in getattr(args, kind) or []]
    if bool(flags) == bool(args.configfile):
        raise ConfigError("import: give --configfile (a config with `imports`) or source options (--lm-eval, ...), one")
    if args.mapping and args.configfile:
        raise ConfigError("import: --mapping goes with source options; a config names a mapping per source")
    out = Path(args.out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out-dir {out}: a file, not a folder")
    if args.configfile:
        settings = load_settings(args.configfile)
    else:
        mapping = {"mapping": args.mapping} if args.mapping else {}
        settings = load_settings({"imports": [{"kind": kind, "path": path, **mapping} for kind, path in flags]})
    if not settings.imports:
        raise ConfigError(f"{args.configfile}: imports: the config imports nothing (it runs models)")
    imported = import_sources(settings.imports)
    per_benchmark = imported.cells.groupby("benchmark")["model"].nunique()
    if args.configfile and (per_benchmark < 2).any():
        lone = per_benchmark[per_benchmark < 2].index[0]
        raise DataError(
            f"{args.configfile}: imports: benchmark {lone!r} has results of one model only; a verdict compares two "
            "or more (`safetyrepro import` with source options still converts them)"
        )
    write_parquet(imported.cells, out / "cells.parquet", design=imported.design)
    write_parquet(imported.items, out / "items.parquet")
    write_parquet(imported.cells.iloc[:0], out / "precision_probe.parquet")
    write_json(import_record(settings, imported), out / "provenance.json")
    cells = imported.cells
    print(
        f"imported {len(cells)} cells: {cells['model'].nunique()} models, {cells['benchmark'].nunique()} "
        f"benchmark(s), {cells['config_id'].nunique()} configs; {len(imported.items)} item rows -> {out}"
    )
    if imported.notes:
        print("notes: what could not be mapped or was left out (docs/importing.md):")
        print("\n".join(f"  - {note}" for note in imported.notes))
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    """Run the audit target with Snakemake (from the repository root) and print its answer."""
    import os
    import subprocess
    from dataclasses import asdict

    from safetyrepro.audit import check_request

    overrides = {"audit": {"budget": args.budget}} if args.budget is not None else None
    settings = load_settings(args.configfile, overrides)
    check_request(settings, args.benchmark, args.pair)
    if not Path("Snakefile").is_file():
        raise ConfigError("safetyrepro audit runs the workflow: run it from the repository root (no Snakefile here)")
    target = settings.results_dir / "audit" / args.benchmark / f"{args.pair[0]}_vs_{args.pair[1]}.md"
    command = [  # the target first: --resources and --config take every word after them
        sys.executable, "-m", "snakemake", str(target), "--cores", str(args.cores), "--rerun-incomplete",
        *(["--configfile", args.configfile] if args.configfile else []),
        "--resources", "gpu=1", "--config", f"audit={json.dumps(asdict(settings.audit))}",
    ]  # fmt: skip
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if subprocess.run(command, env=env).returncode != 0:
        return 1
    print(target.read_text(), end="")
    return 0


def cmd_estimate(args: argparse.Namespace) -> int:
    """rho_flip and the score quantiles over the envelope's configs, from the cells a run has (docs/estimation.md)."""
    from safetyrepro.analysis.grid_model import LEVEL
    from safetyrepro.estimation import estimate_of_cells, read_item_outcomes
    from safetyrepro.results.markdown import estimate_markdown
    from safetyrepro.results.storage import read_parquet_checked

    if args.seed < 0:
        raise ConfigError(f"--seed: give a whole number 0 or more, not {args.seed}")
    settings = load_settings(args.configfile)
    if settings.imports:
        raise ConfigError(
            f"{args.configfile}: imports: estimate fills in a run's envelope, and imported results have none: "
            "give the configfile of a run"
        )
    cells_path = Path(args.cells) if args.cells else settings.results_dir / "cells.parquet"
    if not cells_path.is_file():
        raise ConfigError(f"--cells: no cells table at {cells_path} (run the workflow up to results/cells.parquet)")
    items_path = Path(args.items) if args.items else cells_path.parent / "items.parquet"
    if args.items and not items_path.is_file():
        raise ConfigError(f"--items: no item rows at {items_path}")
    items = read_item_outcomes(items_path) if items_path.is_file() else None
    tables = estimate_of_cells(settings, read_parquet_checked(cells_path), args.seed, cells_path, items)
    print(estimate_markdown(*tables, LEVEL), end="")
    return 0


@job("out", "markdown")
def cmd_case_study(args: argparse.Namespace) -> int:
    """Run the cross-package case study (config section `case_study`) and write its tables."""
    from dataclasses import replace

    from safetyrepro.case_study import run_case_study
    from safetyrepro.case_study.table import case_study_markdown
    from safetyrepro.results.storage import write_parquet, write_text

    settings = load_settings(args.configfile)
    study = settings.case_study
    if study is None:
        raise ConfigError("case_study: the section is absent or has `enabled: false`")
    if args.n_items:
        study = replace(study, n_items=args.n_items)
    table, picks = run_case_study(settings, study, Path(args.work_dir))
    write_parquet(picks, Path(args.work_dir) / "items.parquet")
    write_parquet(table, Path(args.out))
    write_text(case_study_markdown(table, picks), Path(args.markdown))
    return 0


def cmd_provenance_diff(args: argparse.Namespace) -> int:
    """Name what differs between two run records (or GRID cards): exit status 1 when anything does, 2 on an error."""
    from safetyrepro.results.provenance import compare_records

    changes = compare_records(_read_record(args.old), _read_record(args.new))
    print("\n".join(changes) if changes else "no difference (times ignored)")
    return 1 if changes else 0


RECORD_MAX_BYTES = 64 << 20


def _read_record(path: str) -> dict:
    """A run record or GRID card: a regular JSON file holding an object, of sane size, in standard JSON (no NaN,
    no key given twice), no key empty."""
    from safetyrepro.benchmarks.files import json_nodes, json_path, load_json, read_text, regular_file

    file = regular_file(Path(path))
    if file.stat().st_size > RECORD_MAX_BYTES:
        raise DataError(f"{path}: {file.stat().st_size:,} bytes, too large for a run record")
    text = read_text(file, context="not a JSON run record: ")
    record = load_json(text, path, "not a JSON run record", standard=True)
    if not isinstance(record, dict):
        raise DataError(f"{path}: not a JSON run record (a {type(record).__name__}, not an object)")
    for keys, node in json_nodes(record):
        if isinstance(node, dict) and "" in node:
            where = f"in {json_path(keys)}" if keys else "at the top level"
            raise DataError(f"{path}: an empty key ({where}); provenance-diff names each value by its keys")
    return record


def cmd_stop_servers(args: argparse.Namespace) -> int:
    """Shut down the model servers of a run."""
    from safetyrepro.running.server import stop_servers

    print(f"stopped {stop_servers(load_settings(args.configfile))} model server(s)")
    return 0


def cmd_serve_embedded(args: argparse.Namespace) -> int:
    """Serve a config's served models that are the embedded model on this machine with vLLM's server while a
    command runs (`make run-served`); the command's exit status."""
    from safetyrepro.running.vllm_serve import run_while_serving

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise ConfigError("serve-embedded: give the command to run while serving, after --")
    return run_while_serving(load_settings(args.configfile), args.python, command)


def cmd_label(args: argparse.Namespace) -> int:
    """Draw replies of a run for people to label (a CSV): per model and free-form generation config, stratified by the
    default scorer's label."""
    from safetyrepro.results.storage import read_parquet_checked, write_text
    from safetyrepro.scorers.human_labels import human_labels_of, with_human_labels
    from safetyrepro.scorers.label_file import KEY, draw_replies, generation_replies

    settings = load_settings(args.configfile)
    if args.benchmark not in settings.benchmarks or not with_human_labels([args.benchmark]):
        able = with_human_labels(settings.benchmarks)
        raise ConfigError(
            f"label: --benchmark {args.benchmark}: give a benchmark of this run whose replies have human labels"
            f" ({', '.join(able) or 'none here'})"
        )
    if args.per_config < 2:
        raise ConfigError(f"label: --per-config {args.per_config}: the correction needs at least 2 labels a config")
    out = Path(args.out)
    if out.exists():
        raise ConfigError(f"label: {out} exists: a file being labelled is never overwritten; give another --out")
    cells_path, items_path = settings.results_dir / "cells.parquet", settings.results_dir / "items.parquet"
    if not (cells_path.is_file() and items_path.is_file()):
        raise ConfigError(f"label: {settings.results_dir} holds no run's cells and items: run the config first")
    cells = read_parquet_checked(cells_path)
    items = read_parquet_checked(items_path)[["benchmark", *KEY, "response", "label"]]
    axis = settings.envelope.scorer_axis if settings.envelope is not None else None
    default = settings.envelope.defaults[axis] if axis else None
    replies = generation_replies(items, cells, args.benchmark, axis, default)
    found = BENCHMARKS[args.benchmark].items_by_id(settings.data_dir, set(replies["item_id"]), settings.subset_seed)
    replies["request"] = [found[item].text for item in replies["item_id"]]
    drawn = draw_replies(replies, args.per_config, args.seed)
    write_text(drawn.to_csv(index=False), out)
    counts = drawn["model"].value_counts().reindex(list(dict.fromkeys(cells["model"])), fill_value=0)
    print(
        f"{out}: {len(drawn)} replies of {args.benchmark} to label ("
        + ", ".join(f"{model} {count}" for model, count in counts.items())
        + f"). Fill human_label with one of {', '.join(human_labels_of(args.benchmark).classes)} (empty: not"
        f" labelled), then add `human_labels: {{{args.benchmark}: {out}}}` to the config and run it again."
    )
    return 0


def add_commands(commands) -> None:
    """Add the user's commands to `commands` (the subparsers action), in the order `--help` lists them."""
    check = add_command(commands, "check", cmd_check, "check a config and its inputs without running anything")
    check.add_argument("--configfile", help=CONFIG_HELP)
    check.add_argument(
        "--plan",
        action="store_true",
        help="only what a dry run checks: not this machine's device, backends or model weights",
    )

    results = add_command(
        commands, "results-dir", cmd_results_dir, "print a config's results folder, where a run writes all it makes"
    )
    results.add_argument("--configfile", help=CONFIG_HELP)

    envelope = add_command(commands, "envelope", cmd_envelope, "size of the grid a config describes")
    envelope.add_argument("--configfile", help=CONFIG_HELP)
    envelope.add_argument("--json", action="store_true", help="one JSON object")

    fetch = add_command(
        commands, "fetch-data", cmd_fetch_data, "download benchmark files (pinned, hash-checked)", ("data-dir",)
    )
    fetch.add_argument("--base-url", help="mirror laid out like raw.githubusercontent.com (empty: the default)")
    fetch.add_argument("--benchmark", action="append", choices=sorted([*BENCHMARKS, *BROKEN]))

    build = add_command(commands, "build-model", cmd_build_model, "build the embedded gemma-3-270m HF directory")
    build.add_argument("--out", default="resources/models/gemma-3-270m")

    serve = add_command(
        commands,
        "serve-embedded",
        cmd_serve_embedded,
        "serve a config's served models that are the embedded model with vLLM's server while a command runs",
    )
    serve.add_argument("--configfile", help=CONFIG_HELP)
    serve.add_argument("--python", default=".venv-vllm/bin/python", help="the Python of the vLLM environment")
    serve.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")

    reference = add_command(
        commands, "config-reference", cmd_config_reference, "the config reference (Markdown) from the schemas"
    )
    reference.add_argument("--out", help="write it here (docs/config-reference.md) instead of to stdout")
    reference.add_argument("--check", metavar="FILE", help="write nothing; exit 1 unless FILE is the current page")

    parse = add_command(
        commands, "parse", cmd_parse, "label JSON-lines replies from stdin as their cells do (docs/scorers.md)"
    )
    parse.add_argument("benchmark", choices=sorted([*BENCHMARKS, *BROKEN]))
    parse.add_argument(
        "--scorer",
        help="which of the benchmark's scorers labels every line (default: each line's config's scorer; "
        f"{RULES} for a line that names no config)",
    )
    parse.add_argument(
        "--resources-dir",
        help="the folder holding, or to hold, the embedded model a scorer reads with (XSTest's learned scorer): "
        "a run's resources_dir (default: resources, as that key's default)",
    )
    parse.add_argument(
        "--configfile",
        help="the config of the run the lines come from: its data, subset seed and configs make each line's item "
        f"(default {DEFAULT_CONFIGFILE}); with --scorer judge, the config whose `judges` the judge is one of",
    )
    parse.add_argument("--judge", help="with --scorer judge: the judge's name (default: the config's only judge)")

    imports = add_command(
        commands,
        "import",
        cmd_import,
        "cells.parquet and items.parquet from lm-eval, Inspect AI or table results (docs/importing.md)",
        ("out-dir",),
    )
    imports.add_argument("--configfile", help="a config with `imports` (else give the sources as options)")
    imports.add_argument("--lm-eval", dest="lm_eval", action="append", help="an lm-eval output folder or results file")
    imports.add_argument("--inspect", action="append", help="a folder of Inspect AI logs, or one log")
    imports.add_argument("--table", action="append", help="a CSV or Parquet table of results")
    imports.add_argument("--mapping", help="a mapping file for the sources given as options")

    audit = add_command(
        commands,
        "audit",
        cmd_audit,
        "search the configs for one that reverses a pair's majority verdict, on a budget (docs/audit.md)",
        ("benchmark",),
    )
    audit.add_argument("--configfile", help=CONFIG_HELP)
    audit.add_argument("--pair", nargs=2, required=True, metavar=("A", "B"))
    audit.add_argument(
        "--budget",
        type=int,
        help="cells the audit may run; cells on disk cost nothing (default: the config's audit.budget)",
    )
    audit.add_argument("--cores", default="all", help="Snakemake's --cores (default all)")

    estimate = add_command(
        commands,
        "estimate",
        cmd_estimate,
        "rho_flip and score quantiles over the envelope from the configs run, with 90% intervals (docs/estimation.md)",
    )
    estimate.add_argument("--configfile", help=CONFIG_HELP)
    estimate.add_argument("--cells", help="the run's cells table (default: <results_dir>/cells.parquet)")
    estimate.add_argument(
        "--items",
        help="the run's item rows, for the items variance component (default: items.parquet beside the cells table; "
        "without it the component is n/a)",
    )
    estimate.add_argument("--seed", type=int, default=0, help="the posterior draws' seed (default 0)")

    study = add_command(
        commands,
        "case-study",
        cmd_case_study,
        "our pipeline, lm-eval and Inspect AI on the same items (config section case_study)",
        ("configfile", "out", "markdown", "work-dir"),
    )
    study.add_argument("--n-items", type=int, help="override case_study.n_items")

    label = add_command(
        commands,
        "label",
        cmd_label,
        "draw a run's replies for people to label (CSV); the run then corrects its verdicts for scorer error",
        ("benchmark", "out"),
    )
    label.add_argument("--configfile", help=CONFIG_HELP)
    label.add_argument(
        "--per-config", type=int, default=20, help="replies drawn per model and free-form config (default 20)"
    )
    label.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")

    diff = add_command(
        commands,
        "provenance-diff",
        cmd_provenance_diff,
        "what differs between two run records or GRID cards (exit 1 if anything)",
    )
    diff.add_argument("old")
    diff.add_argument("new")

    add_command(
        commands,
        "stop-servers",
        cmd_stop_servers,
        "shut down the model servers of a run (an interrupted run leaves them until idle)",
        ("configfile",),
    )
