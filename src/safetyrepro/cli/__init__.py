"""The `safetyrepro` command line."""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from pathlib import Path

from safetyrepro.backends import ModelLoadError
from safetyrepro.benchmarks import BENCHMARKS, DataError
from safetyrepro.configuration.settings import DEFAULT_CONFIGFILE, ConfigError, load_settings

log = logging.getLogger("safetyrepro")
LINE_END = re.compile(r"\r\n?|\n")  # not str.splitlines: U+2028 may stand inside a JSON string
CONFIG_HELP = f"a complete config, or an overlay naming its base with `extends:` (default {DEFAULT_CONFIGFILE})"


class CellError(RuntimeError):
    """A grid cell could not be computed (the cause is in its log)."""


def cmd_envelope(args: argparse.Namespace) -> int:
    """Print the grid's size: cells, configs per benchmark, generation runs, token budgets."""
    from safetyrepro.configuration.plan import grid_plan

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


def cmd_check(args: argparse.Namespace) -> int:
    """Check a config, its data, models and this machine, as a run would before any job; print the plan."""
    from safetyrepro.benchmarks import check_item_sets
    from safetyrepro.configuration.plan import plan_lines
    from safetyrepro.configuration.preflight import preflight

    settings = load_settings(args.configfile)
    if settings.imports:
        print("\n".join(plan_lines(settings)))
        print(f"ok: {len(settings.imports)} import source(s); `safetyrepro import` reads them")
        return 0
    counts = check_item_sets(settings)
    if not args.plan:
        preflight(settings)
    print("\n".join(plan_lines(settings)))
    print("items per benchmark: " + ", ".join(f"{name} {count}" for name, count in counts.items()))
    if settings.case_study:
        study = settings.case_study
        study.require_packages()
        print(
            f"case study: {study.model.name}, {', '.join(study.benchmarks)}, {study.n_items} items, "
            f"anchor {study.anchor_config}"
        )
    print(f"ok: {len(settings.cells())} cells for {len(settings.models)} models")
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


def cmd_parse(args: argparse.Namespace) -> int:
    """Label free-form responses read as JSON lines on stdin; write them back with `label`."""
    benchmark = BENCHMARKS[args.benchmark]
    lines = (line for chunk in sys.stdin for line in LINE_END.split(chunk.rstrip("\r\n")))  # \n, \r\n, lone \r
    for number, line in enumerate(lines, start=1):
        line = line.removeprefix("\ufeff") if number == 1 else line  # a UTF-8 byte-order mark is no error
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:  # malformed JSON, or a number past Python's digit limit
            raise DataError(f"stdin line {number}: not JSON ({' '.join(str(exc).split())[:100]})") from None
        if not isinstance(record, dict) or "response" not in record:
            raise DataError(f"stdin line {number}: expected a JSON object with a 'response' field")
        record["label"] = benchmark.extract(record["response"])
        try:
            text = json.dumps(record, ensure_ascii=False)
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (valid JSON, not UTF-8): escape it
            text = json.dumps(record)
        sys.stdout.write(text + "\n")
    return 0


def cmd_fetch_data(args: argparse.Namespace) -> int:
    """Download missing benchmark files at their pinned commits and check their hashes."""
    from safetyrepro.running.data import fetch_data

    fetched = fetch_data(Path(args.data_dir), base_url=args.base_url or None, benchmarks=args.benchmark or None)
    print(f"fetched {len(fetched)} file(s) into {args.data_dir}")
    return 0


def cmd_build_model(args: argparse.Namespace) -> int:
    """Build the embedded gemma-3-270m as a plain HF model directory."""
    from safetyrepro.running.models import build_embedded_model

    print(build_embedded_model(Path(args.out)))
    return 0


def cmd_describe_model(args: argparse.Namespace) -> int:
    """Record what a model spec points at (file hashes or hub revision) as JSON."""
    from safetyrepro.results.files import write_json
    from safetyrepro.running.models import describe_model

    write_json(describe_model(load_settings(args.configfile).model(args.model)), Path(args.out))
    return 0


def cmd_run_cell(args: argparse.Namespace) -> int:
    """Run one grid cell and write its item rows (Parquet) and summary (JSON)."""
    from safetyrepro.benchmarks import item_set
    from safetyrepro.results.files import write_json, write_parquet
    from safetyrepro.running.cell import run_cell
    from safetyrepro.running.server import connect, load_backends

    settings = load_settings(args.configfile)
    spec = settings.model(args.model)
    config = settings.config(args.benchmark, args.config_id)
    data = item_set(settings, args.benchmark, settings.envelope.presentation(config, args.benchmark))
    if settings.backend.server:
        backends = connect(settings, spec, Path(args.configfile), settings.backend.server_idle_seconds)
    else:
        backends = load_backends(settings, spec)
    log.info(
        "cell %s / %s / %s: %d items, %s prompts",
        spec.name,
        args.benchmark,
        config.config_id,
        len(data.items),
        backends["generate"].prompt_format,
    )
    try:
        items, summary = run_cell(
            spec.name,
            backends["generate"],
            backends["loglikelihood"],
            data,
            settings.envelope,
            config,
            settings.batch_condition(config),
        )
    except Exception as exc:  # model errors, out of memory, bad generations: this cell fails, with its id
        log.error("cell failed", exc_info=True)
        raise CellError(
            f"cell {spec.name}/{args.benchmark}/{config.config_id} failed: {type(exc).__name__}: {exc}"
        ) from None
    write_parquet(items, Path(args.items))
    write_json(summary, Path(args.summary))
    log.info("cell done: score %.3f, parse rate %.3f", summary["score"], summary["parse_rate"])
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve one model to the cells on this machine until idle."""
    from safetyrepro.running.server import serve

    settings = load_settings(args.configfile)
    serve(settings, settings.model(args.model), Path(args.address), args.idle_seconds)
    return 0


def cmd_stop_servers(args: argparse.Namespace) -> int:
    """Shut down the model servers of a run."""
    from safetyrepro.running.server import stop_servers

    print(f"stopped {stop_servers(load_settings(args.configfile))} model server(s)")
    return 0


def cmd_aggregate(args: argparse.Namespace) -> int:
    """Gather cell outputs into cells.parquet and items.parquet (and the precision probe's cells into their
    own table); refuse an incomplete grid unless --partial. Each table lists only its own missing cells."""
    from safetyrepro.results.aggregate import cells_table, items_table, missing_cells
    from safetyrepro.results.files import write_parquet

    settings = load_settings(args.configfile)
    if not args.summaries:
        raise DataError("no cell has finished: nothing to aggregate")
    cells = cells_table(Path(p) for p in args.summaries)
    probe = cells_table(Path(p) for p in args.probe_summaries) if args.probe_summaries else cells.iloc[:0]
    expected = {"grid": settings.cells(), "precision probe": settings.probe_cells() if args.probe_out else []}
    missing = {
        part: missing_cells(((m.name, b, c.config_id) for m, b, c in wanted), cells if part == "grid" else probe)
        for part, wanted in expected.items()
    }
    for part, absent in missing.items():
        if absent and not args.partial:
            raise DataError(
                f"incomplete {part}: {len(absent)} of {len(expected[part])} cells have no output "
                f"({', '.join(absent[:5])}{', ...' if len(absent) > 5 else ''}); rerun them, or set "
                "partial_results: true to analyse the finished cells"
            )
        if absent:
            log.warning("partial results: %d %s cell(s) missing: %s", len(absent), part, ", ".join(absent))
    write_parquet(cells, Path(args.cells_out), missing["grid"])
    write_parquet(items_table(Path(p) for p in args.items), Path(args.items_out), missing["grid"])
    if args.probe_out:
        write_parquet(probe, Path(args.probe_out), missing["precision probe"])
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Read results produced elsewhere (the config's `imports`, or the source options) into --out-dir:
    cells.parquet, items.parquet, an empty precision_probe.parquet and the import record provenance.json."""
    from safetyrepro.imports import import_sources
    from safetyrepro.imports.record import import_record
    from safetyrepro.results.files import write_json, write_parquet

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


def cmd_rho_flip(args: argparse.Namespace) -> int:
    """rho_flip per model pair and benchmark, as Parquet and Markdown."""
    import pandas as pd

    from safetyrepro.analysis.flips import rho_flip_table
    from safetyrepro.results.files import missing_cells, write_parquet, write_text
    from safetyrepro.results.markdown import partial_notice, rho_flip_markdown

    cells = pd.read_parquet(args.cells)
    rho = rho_flip_table(cells)
    missing = missing_cells(Path(args.cells))
    write_parquet(rho, Path(args.out), missing)
    write_text(partial_notice(missing) + rho_flip_markdown(rho, cells), Path(args.markdown))
    return 0


def cmd_analyse(args: argparse.Namespace) -> int:
    """Run one analysis over cells.parquet (and items.parquet) and write Parquet + Markdown."""
    import pandas as pd

    from safetyrepro.analysis.suite import ANALYSES, Inputs
    from safetyrepro.results.files import missing_cells, read_design, write_parquet, write_text
    from safetyrepro.results.markdown import analysis_markdown, partial_notice

    analysis = ANALYSES[args.name]
    settings, cells = load_settings(args.configfile), pd.read_parquet(args.cells)
    table = analysis.run(Inputs(settings, cells, args.items, args.probe, read_design(Path(args.cells))))
    missing = missing_cells(Path(args.cells))
    write_parquet(table, Path(args.out), missing)
    write_text(partial_notice(missing) + analysis_markdown(args.name, analysis.description, table), Path(args.markdown))
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    """Gather the headline numbers into summary.md, opening on the headline."""
    import pandas as pd

    from safetyrepro.analysis.suite import ANALYSES
    from safetyrepro.results.files import missing_cells, write_text
    from safetyrepro.results.headline import headline_markdown, headline_rows
    from safetyrepro.results.markdown import partial_notice, summary_markdown

    folder = Path(args.analysis_dir)  # the suite's tables only: not a stale one of an analysis since removed
    tables = {name: pd.read_parquet(folder / f"{name}.parquet") for name in ANALYSES}
    rows = headline_rows(tables["rho_flip_sig"], tables["tiers"])
    fragile = {row.benchmark: (row.model_a, row.model_b) for row in rows.itertuples()}
    rho, cells = pd.read_parquet(args.rho), pd.read_parquet(args.cells)
    summary = summary_markdown(rho, cells, tables, headline_markdown(rows), fragile)
    write_text(partial_notice(missing_cells(Path(args.cells))) + summary, Path(args.out))
    return 0


def cmd_headline(args: argparse.Namespace) -> int:
    """Write the headline as the HTML fragment the report's landing page embeds."""
    import pandas as pd

    from safetyrepro.results.files import missing_cells, write_text
    from safetyrepro.results.headline import headline_html, headline_rows

    rows = headline_rows(pd.read_parquet(args.sig), pd.read_parquet(args.tiers))
    write_text(headline_html(rows, missing_cells(Path(args.sig))), Path(args.out))
    return 0


def cmd_provenance(args: argparse.Namespace) -> int:
    """Write the run record (results/provenance.json): seal, packages, models, data, items, seeds, hardware."""
    import pandas as pd

    from safetyrepro.results.files import write_json
    from safetyrepro.results.provenance import run_record

    models = [json.loads(Path(path).read_text()) for path in args.models]
    items = pd.read_parquet(args.items, columns=["benchmark", "item_id"])
    write_json(run_record(load_settings(args.configfile), models, items), Path(args.out))
    return 0


def cmd_provenance_diff(args: argparse.Namespace) -> int:
    """Name what differs between two run records (or GRID cards): exit status 1 when anything does, 2 on an error."""
    from safetyrepro.results.provenance import compare_records

    changes = compare_records(_read_record(args.old), _read_record(args.new))
    print("\n".join(changes) if changes else "no difference (times ignored)")
    return 1 if changes else 0


RECORD_MAX_BYTES = 64 << 20


def _read_record(path: str) -> dict:
    """A run record or GRID card: a regular JSON file holding an object, of sane size."""
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{path}: {'not a regular file' if file.exists() else 'no such file'}")
    if file.stat().st_size > RECORD_MAX_BYTES:
        raise DataError(f"{path}: {file.stat().st_size:,} bytes, too large for a run record")
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path}: not a JSON run record ({' '.join(str(exc).split())[:120]})") from None
    if not isinstance(record, dict):
        raise DataError(f"{path}: not a JSON run record (a {type(record).__name__}, not an object)")
    return record


def cmd_grid_card(args: argparse.Namespace) -> int:
    """Write the GRID card (JSON and Markdown) from the run record and the result tables."""
    import pandas as pd

    from safetyrepro.results.files import missing_cells, write_json, write_text
    from safetyrepro.results.grid_card import grid_card, grid_card_markdown

    card = grid_card(
        load_settings(args.configfile),
        json.loads(Path(args.provenance).read_text()),
        pd.read_parquet(args.cells),
        pd.read_parquet(args.rho),
        pd.read_parquet(args.tiers),
        missing_cells(Path(args.cells)),
    )
    write_json(card, Path(args.json_out))
    write_text(grid_card_markdown(card), Path(args.markdown_out))
    return 0


def cmd_figure(args: argparse.Namespace) -> int:
    """Draw one report figure from its table as PNG."""
    import pandas as pd

    from safetyrepro.results.figures import draw, save

    save(draw(args.name, pd.read_parquet(args.table), args.benchmark), Path(args.out))


def cmd_case_study(args: argparse.Namespace) -> int:
    """Run the cross-package case study (config section `case_study`) and write its tables."""
    from dataclasses import replace

    from safetyrepro.case_study import run_case_study
    from safetyrepro.case_study.table import case_study_markdown
    from safetyrepro.results.files import write_parquet, write_text

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


def _audit_settings(args: argparse.Namespace):
    """The settings of an audit job and the imported cells table it searches (None for a run's cells)."""
    settings = load_settings(args.configfile)
    table = next((Path(p) for p in args.cells if p.endswith(".parquet")), None) if settings.imports else None
    return settings, table


def cmd_audit_step(args: argparse.Namespace) -> int:
    """One step of the auditor's search: the configs run so far and the next one (or why it stops)."""
    from safetyrepro.audit import pair_space, read_scores, step_record
    from safetyrepro.results.files import write_json

    settings, table = _audit_settings(args)
    space = pair_space(settings, args.benchmark, args.pair, table)
    previous = json.loads(Path(args.previous[0]).read_text()) if args.previous else None
    scores = read_scores([Path(p) for p in args.cells])
    record = step_record(space, args.benchmark, args.pair, previous, scores, settings.audit)
    if record["step"] != int(args.step):
        raise ConfigError(f"--step: step {args.step} follows {record['step']} configs run")
    write_json(record, Path(args.out))
    return 0


def cmd_audit_report(args: argparse.Namespace) -> int:
    """The audit's answer from its last step and the item rows of the configs it ran."""
    import pandas as pd

    from safetyrepro.audit import audit_markdown, audit_result, pair_space
    from safetyrepro.results.files import write_json, write_text

    settings, table = _audit_settings(args)
    step = json.loads(Path(args.step).read_text())
    space = pair_space(settings, step["benchmark"], (step["model_a"], step["model_b"]), table)
    items = pd.concat([pd.read_parquet(path) for path in args.items], ignore_index=True)
    result = audit_result(space, step, items, settings.audit, settings.analysis.significance)
    write_json(result, Path(args.json))
    write_text(audit_markdown(result), Path(args.markdown))
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    """Run the audit target with Snakemake (from the repository root) and print its answer."""
    import os
    import subprocess
    from dataclasses import asdict

    from safetyrepro.audit import check_pair_names, pair_space

    overrides = {"audit": {"budget": args.budget}} if args.budget is not None else None
    settings = load_settings(args.configfile, overrides)
    if settings.imports:  # the pair and benchmark are checked by the audit's jobs, once imported
        check_pair_names(args.pair)
    else:
        pair_space(settings, args.benchmark, args.pair, None)
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


def _command(commands, name: str, func, help: str, required: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """A subcommand with its required `--option` arguments."""
    parser = commands.add_parser(name, help=help)
    for option in required:
        parser.add_argument(f"--{option}", required=True)
    parser.set_defaults(func=func)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one subcommand per task."""
    parser = argparse.ArgumentParser(prog="safetyrepro", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    commands = parser.add_subparsers(dest="command", required=True)

    envelope = _command(commands, "envelope", cmd_envelope, "size of the grid a config describes")
    envelope.add_argument("--configfile", help=CONFIG_HELP)
    envelope.add_argument("--json", action="store_true", help="one JSON object")

    check = _command(commands, "check", cmd_check, "check a config and its inputs without running anything")
    check.add_argument("--configfile", help=CONFIG_HELP)
    check.add_argument(
        "--plan",
        action="store_true",
        help="only what a dry run checks: not this machine's device, backends or model weights",
    )

    reference = _command(
        commands, "config-reference", cmd_config_reference, "the config reference (Markdown) from the schemas"
    )
    reference.add_argument("--out", help="write it here (docs/config-reference.md) instead of to stdout")
    reference.add_argument("--check", metavar="FILE", help="write nothing; exit 1 unless FILE is the current page")

    parse = _command(commands, "parse", cmd_parse, "label JSON-lines responses from stdin")
    parse.add_argument("benchmark", choices=sorted(BENCHMARKS))

    fetch = _command(
        commands, "fetch-data", cmd_fetch_data, "download benchmark files (pinned, hash-checked)", ("data-dir",)
    )
    fetch.add_argument("--base-url", help="mirror laid out like raw.githubusercontent.com (empty: the default)")
    fetch.add_argument("--benchmark", action="append", choices=sorted(BENCHMARKS))

    build = _command(commands, "build-model", cmd_build_model, "build the embedded gemma-3-270m HF directory")
    build.add_argument("--out", default="resources/models/gemma-3-270m")

    _command(
        commands,
        "describe-model",
        cmd_describe_model,
        "record a model's file hashes or hub revision",
        ("configfile", "model", "out"),
    )
    cell = _command(
        commands,
        "run-cell",
        cmd_run_cell,
        "run one grid cell (writes --items Parquet, --summary JSON)",
        ("configfile", "model", "config-id", "items", "summary"),
    )
    cell.add_argument("--benchmark", required=True, choices=sorted(BENCHMARKS))
    server = _command(
        commands, "serve", cmd_serve, "serve one model to cells over a local socket", ("configfile", "model", "address")
    )
    server.add_argument("--idle-seconds", type=float, default=300)
    _command(commands, "stop-servers", cmd_stop_servers, "shut down the model servers of a run", ("configfile",))
    aggregate = _command(
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
    imports = _command(
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
    _command(commands, "rho-flip", cmd_rho_flip, "rho_flip table from cells.parquet", ("cells", "out", "markdown"))
    analyse = _command(
        commands,
        "analyse",
        cmd_analyse,
        "run one analysis (see safetyrepro.analysis.suite)",
        ("configfile", "cells", "items", "out", "markdown"),
    )
    analyse.add_argument("name")
    analyse.add_argument("--probe", help="precision_probe.parquet (the precision analysis reads it)")
    _command(
        commands,
        "summary",
        cmd_summary,
        "headline numbers as results/summary.md",
        ("rho", "cells", "analysis-dir", "out"),
    )
    _command(
        commands,
        "headline",
        cmd_headline,
        "the report's opening table: per benchmark the most fragile pair (HTML fragment)",
        ("sig", "tiers", "out"),
    )
    _command(
        commands,
        "provenance",
        cmd_provenance,
        "write the run record (results/provenance.json)",
        ("configfile", "items", "out"),
    ).add_argument("--models", nargs="+", required=True)
    diff = _command(
        commands,
        "provenance-diff",
        cmd_provenance_diff,
        "what differs between two run records or GRID cards (exit 1 if anything)",
    )
    diff.add_argument("old")
    diff.add_argument("new")
    _command(
        commands,
        "grid-card",
        cmd_grid_card,
        "write the GRID card (JSON + Markdown)",
        ("configfile", "provenance", "cells", "rho", "tiers", "json-out", "markdown-out"),
    )
    figure = _command(commands, "figure", cmd_figure, "draw one report figure (PNG)", ("table", "out"))
    figure.add_argument("name", help="a figure of safetyrepro.results.figures.FIGURES")
    figure.add_argument("--benchmark", help="the benchmark of a per-benchmark figure")
    study = _command(
        commands,
        "case-study",
        cmd_case_study,
        "our pipeline, lm-eval and Inspect AI on the same items (config section case_study)",
        ("configfile", "out", "markdown", "work-dir"),
    )
    study.add_argument("--n-items", type=int, help="override case_study.n_items")
    audit = _command(
        commands,
        "audit",
        cmd_audit,
        "search the configs for one that reverses a pair's majority verdict, on a budget (docs/audit.md)",
        ("benchmark",),
    )
    audit.add_argument("--configfile", help=CONFIG_HELP)
    audit.add_argument("--pair", nargs=2, required=True, metavar=("A", "B"))
    audit.add_argument("--budget", type=int, help="cells the search may run (default: the config's audit.budget)")
    audit.add_argument("--cores", default="all", help="Snakemake's --cores (default all)")
    step = _command(
        commands,
        "audit-step",
        cmd_audit_step,
        "one step of the audit (the workflow's audit_step job)",
        ("configfile", "benchmark", "step", "out"),
    )
    step.add_argument("--pair", nargs=2, required=True, metavar=("A", "B"))
    step.add_argument("--previous", nargs="*", default=[], help="the previous step's record (none at step 0)")
    step.add_argument("--cells", nargs="*", default=[], help="cell summaries of the config it chose, or cells.parquet")
    report = _command(
        commands,
        "audit-report",
        cmd_audit_report,
        "the audit's answer (the workflow's audit job)",
        ("configfile", "step", "json", "markdown"),
    )
    report.add_argument("--items", nargs="*", default=[], help="item rows of the configs run, or items.parquet")
    report.add_argument("--cells", nargs="*", default=[], help="with imports: cells.parquet")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; errors become one line on stderr and exit status 2."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return args.func(args)
    except (ConfigError, DataError, ModelLoadError, CellError) as exc:
        print(f"safetyrepro: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
