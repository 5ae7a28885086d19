"""The commands the workflow's jobs run: a grid cell and its model server, the tables, the analyses, the
figures, the records and the audit's steps. Their options are the rules' inputs and outputs. Last, what the
workflow's main process does around its jobs (the Snakefile's onstart and onerror): it holds the results
folder, stops its jobs on SIGTERM and repeats the one line a failed job ended on."""

from __future__ import annotations

import argparse
import base64
import contextlib
import errno
import fcntl
import functools
import json
import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from safetyrepro.benchmarks import BENCHMARKS, DataError, scorer_module, with_human_labels
from safetyrepro.cli.command import ERROR_PREFIX, add_command
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.schema import ConfigError

if TYPE_CHECKING:
    from safetyrepro.backends import Backend
    from safetyrepro.configuration.settings import Settings
    from safetyrepro.core.model_spec import ModelSpec

log = logging.getLogger("safetyrepro")
DISK_FULL = "disk full: "  # how a job's or the run's line on a full disk begins
CANNOT_WRITE = "cannot write in "  # how the line begins where the results folder turned read-only
NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)  # a file system remounted read-only, permissions taken
FULL_BELOW = 1024**2  # bytes free under which the results' file system counts as full (a job could not log why)


class CellError(RuntimeError):
    """A job could not finish: its grid cell failed, its disk is full or it was stopped (the cause is in its log;
    the command line prints it as one line)."""


class Stopped(BaseException):
    """SIGTERM reached a job (Snakemake stopping its jobs, scancel, a Slurm time limit). Not an Exception, so a
    cell's `except Exception` lets it through, and every write in progress removes its temporary file."""


def _stop(signum: int, frame) -> None:
    raise Stopped


# Where a run's main process marks that SIGTERM stopped it (stop_jobs_on_sigterm), named to its jobs in the
# environment they inherit.
RUN_STOPPED = "SAFETYREPRO_RUN_STOPPED"


def _size(count: float) -> str:
    """A number of bytes in the largest binary unit that keeps it at least 1."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024:
            return f"{count:.0f} {unit}"
        count /= 1024
    return f"{count:.0f} TiB"


def free_space(path: Path) -> str:
    """The space left on the file system holding `path` (it need not exist yet) and where it is mounted."""
    folder = Path(path).absolute()
    while not folder.exists():
        folder = folder.parent
    mount = folder
    while not os.path.ismount(mount):
        mount = mount.parent
    return f"{_size(shutil.disk_usage(folder).free)} free on {mount}"


def disk_full(code: int, paths: list[str]) -> str:
    """The line a job ends on when its disk is full (or its quota used up): what it was writing, and where."""
    return (
        f"{DISK_FULL}{os.strerror(code).lower()} writing {', '.join(paths)} ({free_space(Path(paths[0]))}); "
        "free some space there, then run the workflow again"
    )


def cannot_write(code: int, folder: Path) -> str:
    """The line a job ends on when the folder it writes in is no longer writable (a file system remounted
    read-only, permissions taken away mid-run)."""
    return (
        f"{CANNOT_WRITE}{folder}: {os.strerror(code).lower()}; make it writable again, then run the workflow again "
        "(finished jobs are kept)"
    )


def _write_error(folder: Path) -> int | None:
    """The error number of writing a file in `folder` now (None: it can be written)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as error:
        return error.errno


def _no_longer_writable(code: int, named: list[str], outputs: list[str]) -> str | None:
    """The line for a job whose write of `named` failed with `code` because its folder can no longer be written,
    or None: the folder as the job's `outputs` there name it (a temporary file's name is absolute). A permission
    error counts only in a folder of its outputs (else it may be a file it could not read)."""
    folder = Path(named[0]).parent if named else None
    as_named = (Path(out).parent for out in outputs if folder and Path(out).parent.resolve() == folder.resolve())
    shown = next(as_named, folder if code == errno.EROFS else None)
    return cannot_write(code, shown) if shown and _write_error(folder) in NOT_WRITABLE else None


def job(*outputs: str, sigterm: bool = True, recorded: bool = True) -> Callable:
    """A job's command (decorator): a full disk, a folder that is no longer writable or SIGTERM ends it with one
    line (CellError) once the writes in progress have removed their temporary files; once it has written its
    outputs, its record (`--job-record`:
    the workflow's fingerprint of what they depend on and their SHA-256, safetyrepro.results.records). `outputs`
    are the options naming the files it writes; `sigterm=False` leaves SIGTERM as it is (the model server, which
    SIGTERM simply ends); `recorded=False`: a command no rule records (the server, the model build)."""

    def decorate(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @functools.wraps(command)
        def run(args: argparse.Namespace) -> int:
            paths = [str(path) for path in (getattr(args, name) for name in outputs) if path]
            previous = signal.signal(signal.SIGTERM, _stop) if sigterm else None
            try:
                if sigterm and os.path.exists(os.environ.get(RUN_STOPPED, "")):
                    raise Stopped  # started after its run was stopped (forked as SIGTERM came): no signal reached it
                status = command(args)
                if status == 0 and getattr(args, "job_record", None):
                    from safetyrepro.results.records import write_record

                    record = Path(args.job_record)
                    written = [Path(out) for out in args.outputs if Path(out) != record]
                    write_record(record, args.fingerprint, written, args.inputs, Path(args.results_dir))
                return status
            except Stopped:
                raise CellError(
                    f"{args.command} stopped by SIGTERM before it finished {', '.join(paths)}; "
                    "run the workflow again to redo it"
                ) from None
            except OSError as error:
                named = [str(error.filename)] if error.filename else paths
                if error.errno in NOT_WRITABLE and (line := _no_longer_writable(error.errno, named, paths)):
                    raise CellError(line) from None
                if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                raise CellError(disk_full(error.errno, named)) from None
            finally:
                if sigterm:
                    signal.signal(signal.SIGTERM, previous)  # as it was (a job called in-process, by a test)

        run.recorded = recorded  # its parser takes --job-record (add_record_options)
        return run

    return decorate


def add_record_options(parser: argparse.ArgumentParser) -> None:
    """The options by which the workflow has a job record what it wrote (the `job` decorator)."""
    group = parser.add_argument_group("the job's record (the workflow passes these)")
    group.add_argument("--job-record", help="where to write the record, results/jobs/<first output>.json")
    group.add_argument("--fingerprint", help="what the outputs depend on, hashed by the workflow")
    group.add_argument("--results-dir", default=".", help="the results folder (inputs read from it are recorded)")
    group.add_argument("--inputs", nargs="*", default=[], help="the files the job reads")
    group.add_argument(
        "--outputs",
        nargs="*",
        default=[],
        help="the files the job writes (the record among them or not), to hash into the record",
    )


@job("out")
def cmd_describe_model(args: argparse.Namespace) -> int:
    """Record what a model spec points at (file hashes or hub revision) as JSON."""
    from safetyrepro.results.storage import write_json
    from safetyrepro.running.models import describe_model

    write_json(describe_model(load_settings(args.configfile).model(args.model)), Path(args.out))
    return 0


@job("items", "summary")
def cmd_run_cell(args: argparse.Namespace) -> int:
    """Run one grid cell and write its item rows (Parquet) and summary (JSON)."""
    from safetyrepro.configuration.settings import item_set
    from safetyrepro.running.cell import run_cell

    settings = load_settings(args.configfile)
    spec = settings.model(args.model)
    config = settings.config(args.benchmark, args.config_id)
    data = item_set(settings, args.benchmark, settings.envelope.presentation(config, args.benchmark))
    backends = serving_backends(settings, spec, Path(args.configfile))
    log.info(
        "cell %s / %s / %s: %d items, %s prompts",
        spec.name,
        args.benchmark,
        config.config_id,
        len(data.items),
        backends["generate"].prompt_format,
    )
    batch = settings.batch_condition(config)
    generate, loglikelihood = backends["generate"], backends["loglikelihood"]
    scorer_models = settings.scorer_models(args.benchmark, config)
    compute = functools.partial(
        run_cell, spec.name, generate, loglikelihood, data, settings.envelope, config, batch, scorer_models
    )
    return write_cell(args, f"{spec.name}/{args.benchmark}/{config.config_id}", compute)


def serving_backends(settings: Settings, spec: ModelSpec, configfile: Path) -> dict[str, Backend]:
    """The backends per operation that serve a model (or a judge) to a cell: its model server's (started
    when none runs), or loaded in this process when the run uses no servers."""
    from safetyrepro.running.server import connect, load_backends

    if settings.backend.server:
        return connect(settings, spec, configfile, settings.backend.server_idle_seconds)
    return load_backends(settings, spec)


def write_cell(args: argparse.Namespace, cell: str, compute: Callable[[], tuple]) -> int:
    """Compute a cell (`compute` returns its item rows and summary) and write them to --items and --summary; any
    failure there (a model error, out of memory, a bad generation, an unreadable twin) is this cell's, with its id."""
    from safetyrepro.results.storage import write_json, write_parquet

    try:
        items, summary = compute()
    except Exception as exc:
        log.error("cell failed", exc_info=True)
        raise CellError(f"cell {cell} failed: {type(exc).__name__}: {exc}") from None
    write_parquet(items, Path(args.items))
    write_json(summary, Path(args.summary))
    log.info("cell done: score %.3f, parse rate %.3f", summary["score"], summary["parse_rate"])
    return 0


@job("items", "summary")
def cmd_rescore_cell(args: argparse.Namespace) -> int:
    """Label a cell's generation twin's responses (--twin-items) with the cell's scorer; the model under test
    does not run (a scorer may read with the embedded model: Settings.scorer_models)."""
    import pandas as pd

    from safetyrepro.configuration.settings import item_set
    from safetyrepro.running.cell import rescore_cell

    settings = load_settings(args.configfile)
    spec = settings.model(args.model)
    config = settings.config(args.benchmark, args.config_id)
    envelope = settings.envelope
    twin = envelope.generation_twin(config, args.benchmark)
    if twin is None:
        raise ConfigError(f"config {config.config_id} runs its own {args.benchmark} cell: it has no generation twin")
    data = item_set(settings, args.benchmark, envelope.presentation(config, args.benchmark))
    scorer, judge = envelope.scorer(config, args.benchmark), settings.judge_model(args.benchmark, config)
    log.info(
        "cell %s / %s / %s: %s labels the responses of %s",
        spec.name,
        args.benchmark,
        config.config_id,
        f"{scorer} {judge.name}" if judge else scorer,
        twin.config_id,
    )
    batch = settings.batch_condition(config)

    def compute() -> tuple:  # the twin's rows are read here: an unreadable twin is this cell's failure
        twin_rows = pd.read_parquet(args.twin_items)
        judge_backend = serving_backends(settings, judge, Path(args.configfile))["generate"] if judge else None
        scorer_models = settings.scorer_models(args.benchmark, config)
        return rescore_cell(spec.name, twin_rows, data, envelope, config, batch, scorer_models, judge_backend)

    return write_cell(args, f"{spec.name}/{args.benchmark}/{config.config_id}", compute)


@job("out")
def cmd_judge_agreement(args: argparse.Namespace) -> int:
    """Ask a judge (--judge, through its model server) about a benchmark's human-labelled replies (its
    `human_labels` module's); write its agreement with the human labels per file (the scorers analysis reads it)."""
    from safetyrepro.results.storage import write_parquet
    from safetyrepro.running.judge import judge_labels

    settings = load_settings(args.configfile)
    judge, benchmark = settings.model(args.judge), BENCHMARKS[args.benchmark]
    log.info("judge %s: asked about the labelled replies of %s", judge.name, benchmark.name)
    judge_backend = serving_backends(settings, judge, Path(args.configfile))["generate"]
    batch_size = settings.backend.batch_condition("freeform", None).batch_size

    def label(replies: list[str], items: list) -> list[str]:
        return judge_labels(benchmark, judge_backend, replies, items, batch_size)

    measured = scorer_module(benchmark.human_labels).judge_agreement(settings.data_dir, label)
    write_parquet(measured.assign(judge=judge.name), Path(args.out))
    return 0


@job("address", sigterm=False, recorded=False)
def cmd_serve(args: argparse.Namespace) -> int:
    """Serve one model to the cells on this machine until idle."""
    from safetyrepro.running.server import serve

    settings = load_settings(args.configfile)
    serve(settings, settings.model(args.model), Path(args.address), args.idle_seconds)
    return 0


@job("cells_out", "items_out", "probe_out")
def cmd_aggregate(args: argparse.Namespace) -> int:
    """Gather cell outputs into cells.parquet and items.parquet (and the precision probe's cells into their
    own table); refuse an incomplete grid unless --partial. Each table lists only its own missing cells."""
    from safetyrepro.results.aggregate import cells_table, items_table, missing_cells
    from safetyrepro.results.storage import write_parquet

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


@job("out", "markdown")
def cmd_rho_flip(args: argparse.Namespace) -> int:
    """rho_flip per model pair and benchmark, as Parquet and Markdown."""
    from safetyrepro.analysis.flips import rho_flip_table
    from safetyrepro.results.markdown import partial_notice, rho_flip_markdown
    from safetyrepro.results.storage import read_missing_cells, read_parquet_checked, write_parquet, write_text

    cells = read_parquet_checked(args.cells)
    rho = rho_flip_table(cells)
    missing = read_missing_cells(Path(args.cells))
    write_parquet(rho, Path(args.out), missing)
    write_text(partial_notice(missing) + rho_flip_markdown(rho, cells), Path(args.markdown))
    return 0


@job("out", "markdown")
def cmd_analyse(args: argparse.Namespace) -> int:
    """Run one analysis over cells.parquet (and items.parquet) and write Parquet + Markdown."""
    from safetyrepro.analysis.suite import ANALYSES, Inputs
    from safetyrepro.results.markdown import analysis_markdown, partial_notice
    from safetyrepro.results.storage import (
        read_design,
        read_missing_cells,
        read_parquet_checked,
        write_parquet,
        write_text,
    )

    analysis = ANALYSES[args.name]
    settings, cells = load_settings(args.configfile), read_parquet_checked(args.cells)
    table = analysis.run(Inputs(settings, cells, args.items, args.probe, read_design(Path(args.cells))))
    missing = read_missing_cells(Path(args.cells))
    write_parquet(table, Path(args.out), missing)
    write_text(partial_notice(missing) + analysis_markdown(args.name, analysis.description, table), Path(args.markdown))
    return 0


def _headline(settings: Settings, sig: Path, tiers: Path, clean: Path, cells):
    """The run's headline (`results.headline.build_headline`) from its tables and model specs."""
    from safetyrepro.results.headline import build_headline
    from safetyrepro.results.storage import read_parquet_checked

    tables = (read_parquet_checked(path) for path in (sig, tiers, clean))
    return build_headline(*tables, cells, settings.models, settings.analysis.parse_threshold)


@job("out")
def cmd_summary(args: argparse.Namespace) -> int:
    """Gather the headline numbers into summary.md, opening on the headline."""
    from safetyrepro.analysis.suite import ANALYSES
    from safetyrepro.results.headline import headline_markdown
    from safetyrepro.results.markdown import partial_notice, summary_markdown
    from safetyrepro.results.storage import read_missing_cells, read_parquet_checked, write_text

    folder = Path(args.analysis_dir)  # the suite's tables only: not a stale one of an analysis since removed
    tables = {name: read_parquet_checked(folder / f"{name}.parquet") for name in ANALYSES}
    rho, cells = read_parquet_checked(args.rho), read_parquet_checked(args.cells)
    paths = (folder / f"{name}.parquet" for name in ("rho_flip_sig", "tiers", "parse_clean"))
    headline = _headline(load_settings(args.configfile), *paths, cells)
    fragile = {row.benchmark: (row.model_a, row.model_b) for row in headline.rows.itertuples()}
    summary = summary_markdown(rho, cells, tables, headline_markdown(headline), fragile)
    write_text(partial_notice(read_missing_cells(Path(args.cells))) + summary, Path(args.out))
    return 0


@job("out")
def cmd_headline(args: argparse.Namespace) -> int:
    """Write the headline as the HTML fragment the report's landing page embeds."""
    from safetyrepro.results.headline import headline_html
    from safetyrepro.results.storage import read_missing_cells, read_parquet_checked, write_text

    settings, cells = load_settings(args.configfile), read_parquet_checked(args.cells)
    headline = _headline(settings, Path(args.sig), Path(args.tiers), Path(args.parse_clean), cells)
    write_text(headline_html(headline, read_missing_cells(Path(args.sig))), Path(args.out))
    return 0


@job("out")
def cmd_check_headline(args: argparse.Namespace) -> int:
    """Recompute the headline from the tables it cites and check every rendering of it (the report's
    fragment, summary.md, the GRID card); one line names the first mismatch."""
    from safetyrepro.results.headline import check_headline
    from safetyrepro.results.storage import read_missing_cells, read_parquet_checked, write_text

    settings, cells = load_settings(args.configfile), read_parquet_checked(args.cells)
    headline = _headline(settings, Path(args.sig), Path(args.tiers), Path(args.parse_clean), cells)
    renderings = {path: Path(path).read_text(encoding="utf-8") for path in (args.html, args.summary, args.grid_md)}
    problem = check_headline(
        headline,
        cells,
        read_parquet_checked(args.parse_clean),
        settings.analysis.parse_threshold,
        renderings,
        json.loads(Path(args.grid_json).read_text(encoding="utf-8")),
        read_missing_cells(Path(args.sig)),
    )
    if problem:
        raise DataError(
            f"{problem}; the code that writes it disagrees with the tables (a rendering changed by hand is "
            "redone before this check): please report it as a bug of safetyrepro, with that file"
        )
    write_text(f"the headline of {', '.join(renderings)} and {args.grid_json} matches its tables\n", Path(args.out))
    return 0


@job("out")
def cmd_provenance(args: argparse.Namespace) -> int:
    """Write the run record (results/provenance.json): seal, packages, models, data, items, seeds, hardware."""
    from safetyrepro.results.provenance import run_record
    from safetyrepro.results.storage import read_parquet_checked, write_json

    models = [json.loads(Path(path).read_text()) for path in args.models]
    items = read_parquet_checked(args.items)[["benchmark", "item_id"]]
    write_json(run_record(load_settings(args.configfile), models, items), Path(args.out))
    return 0


@job("json_out", "markdown_out")
def cmd_grid_card(args: argparse.Namespace) -> int:
    """Write the GRID card (JSON and Markdown) from the run record and the result tables."""
    from safetyrepro.results.grid_card import grid_card, grid_card_markdown
    from safetyrepro.results.storage import read_missing_cells, read_parquet_checked, write_json, write_text

    settings, cells = load_settings(args.configfile), read_parquet_checked(args.cells)
    card = grid_card(
        settings,
        json.loads(Path(args.provenance).read_text()),
        cells,
        read_parquet_checked(args.rho),
        _headline(settings, Path(args.rho), Path(args.tiers), Path(args.parse_clean), cells),
        read_missing_cells(Path(args.cells)),
    )
    write_json(card, Path(args.json_out))
    write_text(grid_card_markdown(card), Path(args.markdown_out))
    return 0


@job("out")
def cmd_figure(args: argparse.Namespace) -> int:
    """Draw one report figure from its table as PNG."""
    from safetyrepro.results.figures import draw, save
    from safetyrepro.results.storage import read_parquet_checked

    save(draw(args.name, read_parquet_checked(args.table), args.benchmark), Path(args.out))
    return 0


def _audit_space(args: argparse.Namespace, benchmark: str, pair: Sequence[str]):
    """An audit job's settings, the configs it searches (`audit.pair_space`: a run's, or with imports the
    imported cells table's) and their generation twins (`audit.generation_twins`)."""
    from safetyrepro.audit import generation_twins, pair_space

    settings = load_settings(args.configfile)
    table = next((Path(p) for p in args.cells if p.endswith(".parquet")), None) if settings.imports else None
    space = pair_space(settings, benchmark, pair, table)
    return settings, space, generation_twins(settings, benchmark, space, table)


@job("out")
def cmd_audit_step(args: argparse.Namespace) -> int:
    """One step of the auditor's search: the configs run so far and the next one (or why it stops)."""
    from safetyrepro.audit import cells_on_disk, cells_run_since, read_scores, step_record
    from safetyrepro.configuration.fingerprints import grid_cell_is_current
    from safetyrepro.results.storage import write_json

    settings, space, twins = _audit_space(args, args.benchmark, args.pair)
    previous = json.loads(Path(args.previous[0]).read_text()) if args.previous else None
    scores = read_scores([Path(p) for p in args.cells])
    ran = None  # the cells run for the config the previous step chose: those written since it chose it
    if previous and not settings.imports:
        since = Path(args.previous[0]).stat().st_mtime
        ran = cells_run_since(settings, args.benchmark, args.pair, previous["decision"]["config_id"], twins, since)
    current = functools.partial(grid_cell_is_current, settings)
    on_disk = cells_on_disk(settings, args.benchmark, args.pair, space, twins, current)
    record = step_record(space, args.benchmark, args.pair, previous, scores, settings.audit, twins, on_disk, ran)
    if record["step"] != int(args.step):
        raise ConfigError(f"--step: step {args.step} follows {record['step']} configs run")
    write_json(record, Path(args.out))
    return 0


@job("json", "markdown")
def cmd_audit_report(args: argparse.Namespace) -> int:
    """The audit's answer from its last step and the item rows of the configs it ran."""
    import pandas as pd

    from safetyrepro.audit import audit_markdown, audit_result
    from safetyrepro.results.storage import read_parquet_checked, write_json, write_text

    step = json.loads(Path(args.step).read_text())
    settings, space, twins = _audit_space(args, step["benchmark"], (step["model_a"], step["model_b"]))
    items = pd.concat([read_parquet_checked(path) for path in args.items], ignore_index=True)
    significance = settings.analysis.significance
    result = audit_result(space, step, items, settings.audit, significance, twins, bool(settings.imports))
    write_json(result, Path(args.json))
    write_text(audit_markdown(result), Path(args.markdown))
    return 0


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
        "a judge's agreement with a benchmark's human labels (writes --out Parquet)",
        ("configfile", "judge", "out"),
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
    )
    add_command(
        commands,
        "headline",
        cmd_headline,
        "the report's opening table: per benchmark the most fragile pair (HTML fragment)",
        ("configfile", "sig", "tiers", "parse-clean", "cells", "out"),
    )
    add_command(
        commands,
        "check-headline",
        cmd_check_headline,
        "recompute the headline from its tables and check the report's, summary.md's and the GRID card's",
        ("configfile", "sig", "tiers", "parse-clean", "cells", "html", "summary", "grid-json", "grid-md", "out"),
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
        ("configfile", "provenance", "cells", "rho", "tiers", "parse-clean", "json-out", "markdown-out"),
    )
    figure = add_command(commands, "figure", cmd_figure, "draw one report figure (PNG)", ("table", "out"))
    figure.add_argument("name", help="a figure of safetyrepro.results.figures.FIGURES")
    figure.add_argument("--benchmark", help="the benchmark of a per-benchmark figure")
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


# --- the workflow's main process around its jobs (the Snakefile's onstart and onerror) ---------------------------
RESULTS_LOCK = ".safetyrepro.lock"  # in the results folder: held by the run writing there


def hold_results(folder: Path) -> IO[str]:
    """Lock the results folder for as long as this process keeps the returned file open, so that a second run
    writing there, from this working folder or another, stops at once. The lock ends with the process, even a
    killed one: nothing to unlock by hand."""
    folder.mkdir(parents=True, exist_ok=True)
    handle = _locked(folder)
    with contextlib.suppress(OSError):  # a full disk is the jobs' to report: this note only names the holder
        handle.truncate(0)
        handle.write(f"Snakemake pid {os.getpid()} on {socket.gethostname()}, working folder {Path.cwd()}")
        handle.flush()
    return handle


def check_results_free(folder: Path) -> None:
    """The ConfigError `hold_results` would raise if a live run holds `folder`, without holding it: `make run`
    checks first, so that ours comes before Snakemake's own lock message, which advises --unlock."""
    if (folder / RESULTS_LOCK).is_file():
        _locked(folder).close()


def _locked(folder: Path) -> IO[str]:
    """The results folder's lock file, locked by this process; ConfigError naming the run that holds it."""
    handle = open(folder / RESULTS_LOCK, "a+", encoding="utf-8")  # noqa: SIM115 (held until the run ends)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "its process did not say which"
        handle.close()
        raise ConfigError(
            f"results folder {folder}: another run is writing there ({holder}); wait for it to end or stop it, "
            "then run again (snakemake --unlock would not stop it)"
        ) from None
    return handle


def stop_jobs_on_sigterm(marks: Path) -> threading.Event:
    """Make SIGTERM (a `kill`, or Slurm preempting or timing out the allocation Snakemake runs in) stop the
    running jobs as well: Snakemake's own handler, run in a thread, only stops scheduling new ones and waits
    for them. A job whose shell forked it just as the signal came is no child yet when the running ones are
    signalled, and outlives its shell: the stop is first marked in a file under `marks` that every job looks
    for as it starts (RUN_STOPPED). The event returned is set once that happened."""
    import psutil  # a dependency of Snakemake

    scheduler = signal.getsignal(signal.SIGTERM)
    stopped = threading.Event()
    marker = Path(marks).resolve() / f"stopped-{os.getpid()}"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    os.environ[RUN_STOPPED] = str(marker)

    def stop_children() -> None:
        for process in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                process.terminate()

    def stop_scheduling(signum: int, frame) -> None:
        if callable(scheduler):
            scheduler(signum, frame)
        stop_children()  # a job started before the scheduler stopped

    def stop(signum: int, frame) -> None:
        stopped.set()
        marker.touch()
        stop_children()
        # Snakemake's handler takes its scheduler's lock (a threading.Lock): run here, in the signal handler,
        # it would wait forever whenever the signal came while the main thread held that lock
        threading.Thread(target=stop_scheduling, args=(signum, frame), daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    return stopped


def failure_report(results: Path, since: float, stopped: bool) -> list[str]:
    """What a failed run ended on, one line each: that SIGTERM stopped it; or else the line the log of each job
    that failed since `since` (seconds since the epoch) ended on, and that the results folder's disk is full, or
    that it cannot be written, when it is so and no job could say so (a job's log is there too)."""
    if stopped:
        return [
            f"{ERROR_PREFIX}stopped by SIGTERM: the running jobs were stopped and their outputs removed; run the "
            "same command again to finish (finished jobs are kept)"
        ]
    lines = []
    for path in sorted((results / "logs").rglob("*.log")):
        if path.stat().st_mtime >= since:
            last = (path.read_text(encoding="utf-8", errors="replace").strip().splitlines() or [""])[-1]
            lines += [last] if last.startswith(ERROR_PREFIX) else []
    said = any(line.startswith(ERROR_PREFIX + DISK_FULL) for line in lines)
    if shutil.disk_usage(results).free < FULL_BELOW and not said:
        lines.append(
            f"{ERROR_PREFIX}{DISK_FULL}the file system of the results folder {results} is full "
            f"({free_space(results)}); free some space there, then run the workflow again"
        )
    code = _write_error(results)
    if code in NOT_WRITABLE and not any(line.startswith(ERROR_PREFIX + CANNOT_WRITE) for line in lines):
        lines.append(ERROR_PREFIX + cannot_write(code, results))
    return list(dict.fromkeys(lines))


def survive_unwritable_cleanup(dag) -> None:
    """After a failed job, Snakemake removes the empty folders of the outputs it lacks (`DAG.cleanup_workdir`,
    Snakemake 9.27) before the Snakefile's `onerror`; in a results folder that turned read-only that raised, and
    the run ended on a traceback instead of its line (failure_report). Those empty folders are left there."""
    cleanup = dag.cleanup_workdir

    def leaving_what_cannot_be_removed() -> None:
        try:
            cleanup()
        except OSError as error:
            if error.errno not in NOT_WRITABLE:
                raise

    dag.cleanup_workdir = leaving_what_cannot_be_removed


def drop_damaged_snakemake_records(metadata: Path) -> list[str]:
    """Remove the damaged records among Snakemake's records of the outputs it made (`metadata`:
    `.snakemake/metadata/`, a JSON file each, named by the output's path in base64) that would stop it: Snakemake
    9.27 ignores a record that is not JSON (one being written may be cut short), but one that is not UTF-8 text
    (damaged bytes) or holds JSON that is no record stopped it with a traceback before any job. Such an output
    is then judged as after .snakemake/ was deleted: by its times and by the record its job wrote in the results
    folder (docs/reruns.md). Returns a line per record removed."""
    from pydantic import ValidationError
    from snakemake.persistence import MetadataRecord

    lines = []
    for path in sorted(p for p in metadata.rglob("*") if p.is_file()):
        try:
            if record := json.loads(path.read_bytes().decode("utf-8")):  # as Snakemake reads it: an empty one is none
                MetadataRecord.model_validate(record)
        except json.JSONDecodeError:
            continue
        except (UnicodeDecodeError, ValidationError):
            parts = [part.removeprefix("@") for part in path.relative_to(metadata).parts]
            try:
                output = base64.urlsafe_b64decode("".join(parts)).decode("utf-8")
            except ValueError:
                output = "an output"
            path.unlink()
            lines.append(
                f"removed Snakemake's damaged record of {output} ({path}); the record its job wrote in the results "
                "judges it"
            )
    return lines


AHEAD = 10**9  # ns a file's time may lie ahead of the clock without counting (a file server's clock runs ahead)


def settle_future_times(folders: Sequence[Path]) -> str | None:
    """Set the times of the files in `folders` that lie ahead of this machine's clock (it was moved back since
    they were written) to now: Snakemake takes a job whose output is older than one of its inputs for a clock
    skew and fails it, so every job reading such a file would fail until the clock caught up. What they hold
    is judged by their records (results/jobs/), not their times. Returns the line that says so, or None."""
    now = time.time_ns()
    ahead = [
        (path, status.st_mtime_ns)
        for folder in folders
        if folder.is_dir()
        for path in (folder, *folder.rglob("*"))
        if (status := path.lstat()).st_mtime_ns > now + AHEAD
    ]
    for path, _ in ahead:
        os.utime(path, ns=(now, now), follow_symlinks=False)
    if not ahead:
        return None
    most = (max(mtime for _, mtime in ahead) - now) / 1e9
    return (
        f"{len(ahead)} files of {', '.join(map(str, folders))} had times up to "
        f"{f'{most / 60:.0f} min' if most >= 60 else f'{most:.0f} s'} ahead of this machine's clock (it was moved "
        "back since they were written): set to now; what they hold is checked by their records"
    )
