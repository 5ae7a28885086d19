"""The commands the workflow's jobs run: a grid cell and its model server, the tables, the analyses, the
figures, the records and the audit's steps. Their options are the rules' inputs and outputs (safetyrepro.cli.jobs
declares them); each is a `job` (safetyrepro.pipeline.lifecycle)."""

from __future__ import annotations

import argparse
import functools
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from safetyrepro.benchmarks import BENCHMARKS, DataError
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.pipeline.lifecycle import CellError, job

if TYPE_CHECKING:
    from safetyrepro.backends import Backend
    from safetyrepro.configuration.settings import Settings
    from safetyrepro.core.model_spec import ModelSpec
log = logging.getLogger("safetyrepro")


@job("out")
def cmd_describe_model(args: argparse.Namespace) -> int:
    """Record what a model spec points at (file hashes or hub revision; a served model's server too) as JSON."""
    from safetyrepro.backends.openai_server import describe_served
    from safetyrepro.results.storage import write_json
    from safetyrepro.running.models import describe_model

    spec = load_settings(args.configfile).model(args.model)
    write_json(describe_served(spec) if spec.endpoint is not None else describe_model(spec), Path(args.out))
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
    if spec.endpoint is not None and len(settings.envelope.seeds_for(config)) > 1:
        warn_unseeded(settings, spec)
    batch = settings.batch_condition(config, spec)
    generate, loglikelihood = backends["generate"], backends.get("loglikelihood")  # a split model: generation only
    scorer_models = settings.scorer_models(args.benchmark, config)
    compute = functools.partial(
        run_cell, spec.name, generate, loglikelihood, data, settings.envelope, config, batch, scorer_models
    )
    return write_cell(args, f"{spec.name}/{args.benchmark}/{config.config_id}", compute)


def warn_unseeded(settings: Settings, spec: ModelSpec) -> None:
    """A sampled cell of a served model whose server did not honour a seed (its description, which the cell waits
    for, says so) says so in its log: asked again, it would draw other texts."""
    path = settings.results_dir / "models" / f"{spec.name}.json"
    if not json.loads(path.read_text())["endpoint"]["seeds_honoured"]:
        log.warning(
            "model %s's server did not honour seeds (%s): this sampled cell's texts are those this run kept, and a "
            "server asked again would draw others",
            spec.name,
            path,
        )


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
    phrasing = envelope.judge_phrasing(config, args.benchmark)
    log.info(
        "cell %s / %s / %s: %s labels the responses of %s",
        spec.name,
        args.benchmark,
        config.config_id,
        (f"{scorer} {judge.name}" + (f" (question phrased {phrasing})" if phrasing else "")) if judge else scorer,
        twin.config_id,
    )
    batch = settings.batch_condition(config, judge or spec)  # a judge's batches, where one labels

    def compute() -> tuple:  # the twin's rows are read here: an unreadable twin is this cell's failure
        twin_rows = pd.read_parquet(args.twin_items)
        judge_backend = serving_backends(settings, judge, Path(args.configfile))["generate"] if judge else None
        scorer_models = settings.scorer_models(args.benchmark, config)
        return rescore_cell(spec.name, twin_rows, data, envelope, config, batch, scorer_models, judge_backend)

    return write_cell(args, f"{spec.name}/{args.benchmark}/{config.config_id}", compute)


@job("out")
def cmd_judge_agreement(args: argparse.Namespace) -> int:
    """Ask the judge of a scorer axis value (--value, through the judge's model server) about a benchmark's
    human-labelled replies (its registered `HumanLabels`), in that value's wording of its question; write its
    agreement with the human labels per file (the scorers analysis reads it)."""
    from safetyrepro.results.storage import write_parquet
    from safetyrepro.running.judge import judge_labels
    from safetyrepro.scorers.human_labels import human_labels_of

    settings = load_settings(args.configfile)
    benchmark = BENCHMARKS[args.benchmark]
    values = settings.judge_values(benchmark.name)
    if args.value not in values:
        asking = ", ".join(values) or "none"
        raise ConfigError(f"--value: {args.value} asks no judge about {benchmark.name} (the values that do: {asking})")
    scorer, name, phrasing = settings.envelope.labelling(args.value, benchmark.name)
    judge = settings.model(name)
    log.info(
        "judge %s (scorer %s, question %s): asked about the labelled replies of %s",
        judge.name,
        scorer,
        phrasing or "as its module words it",
        benchmark.name,
    )
    judge_backend = serving_backends(settings, judge, Path(args.configfile))["generate"]
    batch_size = settings.backend.batch_condition("freeform", None, judge).batch_size

    def label(replies: list[str], items: list) -> list[str]:
        return judge_labels(benchmark, scorer, judge_backend, replies, items, batch_size, phrasing)

    measured = human_labels_of(benchmark.name).judge_agreement(settings.data_dir, label)
    write_parquet(measured.assign(judge=judge.name, question=phrasing), Path(args.out))
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
    from safetyrepro.estimation import budget_summary
    from safetyrepro.results.aggregate import cells_table, items_table, missing_cells
    from safetyrepro.results.storage import write_parquet

    settings = load_settings(args.configfile)
    if not args.summaries:
        raise DataError("no cell has finished: nothing to aggregate")
    cells = cells_table(Path(p) for p in args.summaries)
    probe = cells_table(Path(p) for p in args.probe_summaries) if args.probe_summaries else cells.iloc[:0]
    grid, budget = [(m.name, b, c.config_id) for m, b, c in settings.cells()], None
    if args.rounds:  # a budgeted run: the grid is the cells its rounds chose
        grid, budget = budget_summary(settings, [json.loads(Path(p).read_text()) for p in args.rounds])
    probe_cells = [(m.name, b, c.config_id) for m, b, c in settings.probe_cells()] if args.probe_out else []
    expected = {"grid": grid, "precision probe": probe_cells}
    missing = {part: missing_cells(wanted, cells if part == "grid" else probe) for part, wanted in expected.items()}
    for part, absent in missing.items():
        if absent and not args.partial:
            raise DataError(
                f"incomplete {part}: {len(absent)} of {len(expected[part])} cells have no output "
                f"({', '.join(absent[:5])}{', ...' if len(absent) > 5 else ''}); rerun them, or set "
                "partial_results: true to analyse the finished cells"
            )
        if absent:
            log.warning("partial results: %d %s cell(s) missing: %s", len(absent), part, ", ".join(absent))
    write_parquet(cells, Path(args.cells_out), missing["grid"], budget=budget)
    write_parquet(items_table(Path(p) for p in args.items), Path(args.items_out), missing["grid"], budget=budget)
    if args.probe_out:
        write_parquet(probe, Path(args.probe_out), missing["precision probe"])
    return 0


@job("out", "markdown")
def cmd_rho_flip(args: argparse.Namespace) -> int:
    """rho_flip per model pair and benchmark, as Parquet and Markdown."""
    from safetyrepro.analysis.flips import rho_flip_table
    from safetyrepro.results.markdown import budget_notice, partial_notice, rho_flip_markdown
    from safetyrepro.results.storage import (
        read_budget,
        read_missing_cells,
        read_parquet_checked,
        write_parquet,
        write_text,
    )

    cells = read_parquet_checked(args.cells)
    rho = rho_flip_table(cells)
    missing, budget = read_missing_cells(Path(args.cells)), read_budget(Path(args.cells))
    write_parquet(rho, Path(args.out), missing)
    write_text(budget_notice(budget) + partial_notice(missing) + rho_flip_markdown(rho, cells), Path(args.markdown))
    return 0


@job("out", "markdown")
def cmd_analyse(args: argparse.Namespace) -> int:
    """Run one analysis over cells.parquet (and items.parquet) and write Parquet + Markdown."""
    from safetyrepro.analysis.suite import ANALYSES, Inputs
    from safetyrepro.results.markdown import analysis_markdown, budget_notice, partial_notice
    from safetyrepro.results.storage import (
        read_budget,
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
    notice = budget_notice(read_budget(Path(args.cells))) + partial_notice(missing)
    write_text(notice + analysis_markdown(args.name, analysis.description, table), Path(args.markdown))
    return 0


def _headline(settings: Settings, sig: Path, tiers: Path, clean: Path, corrected: Path, cells):
    """The run's headline (`results.headline.build_headline`) from its tables and model specs."""
    from safetyrepro.results.headline import build_headline
    from safetyrepro.results.storage import read_parquet_checked

    tables = (read_parquet_checked(path) for path in (sig, tiers, clean, corrected))
    return build_headline(*tables, cells, settings.models, settings.analysis.parse_threshold)


@job("out")
def cmd_summary(args: argparse.Namespace) -> int:
    """Gather the headline numbers into summary.md, opening on the headline."""
    from safetyrepro.analysis.grid_model import LEVEL
    from safetyrepro.analysis.suite import ANALYSES
    from safetyrepro.results.headline import headline_markdown
    from safetyrepro.results.markdown import budget_markdown, partial_notice, summary_markdown
    from safetyrepro.results.storage import read_budget, read_missing_cells, read_parquet_checked, write_text

    folder = Path(args.analysis_dir)  # the suite's tables only: not a stale one of an analysis since removed
    tables = {name: read_parquet_checked(folder / f"{name}.parquet") for name in ANALYSES}
    rho, cells = read_parquet_checked(args.rho), read_parquet_checked(args.cells)
    paths = (folder / f"{name}.parquet" for name in ("rho_flip_sig", "tiers", "parse_clean", "scorer_correction"))
    headline = _headline(load_settings(args.configfile), *paths, cells)
    fragile = {row.benchmark: (row.model_a, row.model_b) for row in headline.rows.itertuples()}
    summary = summary_markdown(rho, cells, tables, headline_markdown(headline), fragile)
    budget = read_budget(Path(args.cells))
    if (budget is None) != (not args.estimate):
        raise ConfigError("--estimate: give the estimate's rho_flip table exactly when the cells are a budgeted run's")
    opening = budget_markdown(budget, read_parquet_checked(args.estimate[0]), LEVEL) + "\n" if budget else ""
    write_text(opening + partial_notice(read_missing_cells(Path(args.cells))) + summary, Path(args.out))
    return 0


@job("out")
def cmd_headline(args: argparse.Namespace) -> int:
    """Write the headline as the HTML fragment the report's landing page embeds."""
    from safetyrepro.results.headline import headline_html
    from safetyrepro.results.storage import read_budget, read_missing_cells, read_parquet_checked, write_text

    settings, cells = load_settings(args.configfile), read_parquet_checked(args.cells)
    headline = _headline(
        settings, Path(args.sig), Path(args.tiers), Path(args.parse_clean), Path(args.scorer_correction), cells
    )
    html = headline_html(headline, read_missing_cells(Path(args.sig)), read_budget(Path(args.cells)))
    write_text(html, Path(args.out))
    return 0


@job("out")
def cmd_check_headline(args: argparse.Namespace) -> int:
    """Recompute the headline from the tables it cites and check every rendering of it (the report's
    fragment, summary.md, the GRID card); one line names the first mismatch."""
    from safetyrepro.results.headline import check_headline
    from safetyrepro.results.storage import read_budget, read_missing_cells, read_parquet_checked, write_text

    settings, cells = load_settings(args.configfile), read_parquet_checked(args.cells)
    headline = _headline(
        settings, Path(args.sig), Path(args.tiers), Path(args.parse_clean), Path(args.scorer_correction), cells
    )
    renderings = {path: Path(path).read_text(encoding="utf-8") for path in (args.html, args.summary, args.grid_md)}
    problem = check_headline(
        headline,
        cells,
        (read_parquet_checked(args.parse_clean), read_parquet_checked(args.scorer_correction)),
        settings.envelope.scorer_axis if settings.envelope is not None else None,
        settings.analysis.parse_threshold,
        renderings,
        json.loads(Path(args.grid_json).read_text(encoding="utf-8")),
        read_missing_cells(Path(args.sig)),
        read_budget(Path(args.cells)),
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
    from safetyrepro.results.storage import (
        read_budget,
        read_missing_cells,
        read_parquet_checked,
        write_json,
        write_text,
    )

    settings, cells = load_settings(args.configfile), read_parquet_checked(args.cells)
    card = grid_card(
        settings,
        json.loads(Path(args.provenance).read_text()),
        cells,
        read_parquet_checked(args.rho),
        _headline(
            settings, Path(args.rho), Path(args.tiers), Path(args.parse_clean), Path(args.scorer_correction), cells
        ),
        read_missing_cells(Path(args.cells)),
        read_budget(Path(args.cells)),
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
    from safetyrepro.pipeline.fingerprints import grid_cell_is_current
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


@job("out")
def cmd_estimate_round(args: argparse.Namespace) -> int:
    """One round of a budgeted run's benchmark: the configs run so far and those to run next (or why it stops)."""
    from safetyrepro.estimation import read_cell_scores, round_record
    from safetyrepro.results.storage import write_json

    settings = load_settings(args.configfile)
    previous = json.loads(Path(args.previous[0]).read_text()) if args.previous else None
    if (previous is None) != (args.round == 0):
        raise ConfigError(f"--previous: round {args.round} reads {'no' if args.round == 0 else 'the'} previous record")
    scores = read_cell_scores([Path(p) for p in args.cells])
    write_json(round_record(settings, args.benchmark, args.round, previous, scores), Path(args.out))
    return 0


@job("rho_out", "quantiles_out", "new_values_out", "variance_out", "markdown")
def cmd_estimate_grid(args: argparse.Namespace) -> int:
    """rho_flip and the score quantiles over the envelope, estimated from the cells a budgeted run ran."""
    from safetyrepro.analysis.grid_model import LEVEL
    from safetyrepro.estimation import estimate_of_cells, read_item_outcomes
    from safetyrepro.results.markdown import estimate_markdown
    from safetyrepro.results.storage import read_parquet_checked, write_parquet, write_text

    settings = load_settings(args.configfile)
    cells = read_parquet_checked(args.cells)
    items = read_item_outcomes(Path(args.items))
    tables = estimate_of_cells(settings, cells, settings.estimate.seed, Path(args.cells), items)
    for table, out in zip(tables, (args.rho_out, args.quantiles_out, args.new_values_out, args.variance_out)):
        write_parquet(table, Path(out))
    write_text(estimate_markdown(*tables, LEVEL), Path(args.markdown))
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
