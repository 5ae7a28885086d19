"""The commands a user types: check a config, size its grid, fetch data, import results, audit a pair,
compare run records, ..."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from safetyrepro.benchmarks import AS_GIVEN, BENCHMARKS, BROKEN, JUDGE, RULES, DataError
from safetyrepro.benchmarks.base import LETTERS
from safetyrepro.cli.command import add_command
from safetyrepro.cli.jobs import job
from safetyrepro.configuration.settings import DEFAULT_CONFIGFILE, ConfigError, load_settings, schema

JUDGED_LINES = 64  # stdin lines a judge is asked about at once (its batch; identical questions asked once)
NOT_UTF8 = re.compile("[\udc80-\udcff]")  # what a byte that is not UTF-8 decodes to with surrogateescape

if TYPE_CHECKING:
    from safetyrepro.backends import Backend
    from safetyrepro.benchmarks import Benchmark, Item, Presentation
    from safetyrepro.configuration.envelope import Config
    from safetyrepro.configuration.settings import ModelSpec, Settings

CONFIG_HELP = f"a complete config, or an overlay naming its base with `extends:` (default {DEFAULT_CONFIGFILE})"


def cmd_check(args: argparse.Namespace) -> int:
    """Check a config, its data, models and this machine, as a run would before any job; print the plan."""
    from safetyrepro.cli.jobs import check_results_free
    from safetyrepro.configuration.plan import plan_lines
    from safetyrepro.configuration.preflight import check_inputs, preflight
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
    print(f"ok: {len(settings.cells())} cells for {len(settings.models)} models")
    return 0


def cmd_results_dir(args: argparse.Namespace) -> int:
    """Print the effective config's results folder, where a run writes every output (`make run`'s report too)."""
    print(load_settings(args.configfile).results_dir)
    return 0


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


def cmd_fetch_data(args: argparse.Namespace) -> int:
    """Download missing benchmark files at their pinned commits and check their hashes."""
    from safetyrepro.running.data import fetch_data

    _refuse_broken(args.benchmark or [], "--benchmark: ")
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


def cmd_parse(args: argparse.Namespace) -> int:
    """Label the replies read as JSON lines on stdin as their cells label them, each with its item (by its
    `item_id`, or posed by its prompt and options) and its config's scorer (or --scorer); write them back with
    `label`. A line whose item is not known is refused (docs/scorers.md)."""
    from safetyrepro.benchmarks.base import JSON_LINE_END, load_json

    _refuse_broken([args.benchmark])
    benchmark = BENCHMARKS[args.benchmark]
    if args.scorer is not None and args.scorer not in benchmark.scorers:
        raise ConfigError(
            f"--scorer: {args.benchmark} has no scorer {args.scorer!r} (it has: {', '.join(benchmark.scorers)})"
        )
    if args.judge is not None and args.scorer != JUDGE:
        raise ConfigError("--judge: only for --scorer judge")
    if args.scorer == JUDGE and args.configfile is None:
        raise ConfigError("--configfile: the scorer judge asks one of a config's judges; give that config")
    replies = _Replies(benchmark, args)
    if args.scorer == JUDGE:  # the judge asked: its server started (or refused) first
        replies.named_judge = replies.judge(_parse_judge(replies.settings, args))
    elif args.scorer is not None:  # the embedded model the scorer reads with, if any: built (or refused) first
        replies.scorer_models(args.scorer)
    records: list[dict] = []
    pieces = (piece.decode("utf-8", "surrogateescape") for piece in sys.stdin.buffer)  # bytes: not always UTF-8
    lines = (line for piece in pieces for line in JSON_LINE_END.split(piece.rstrip("\r\n")))
    for number, line in enumerate(lines, start=1):
        line = line.removeprefix("\ufeff") if number == 1 else line  # a UTF-8 byte-order mark is no error
        if not line.strip():
            continue
        if escaped := NOT_UTF8.search(line):
            byte = ord(escaped.group()) - 0xDC00
            raise DataError(f"stdin line {number}: not UTF-8 text (byte {byte:#04x}, column {escaped.start() + 1})")
        record = load_json(line, f"stdin line {number}", "not JSON", standard=True)
        if not isinstance(record, dict) or "response" not in record:
            raise DataError(f"stdin line {number}: expected a JSON object with a 'response' field")
        records.append((record, *replies.resolve(record, f"stdin line {number}")))
        # a judge answers a batch of lines at once; any other line is written as soon as it is read
        if len(records) == JUDGED_LINES or not _asks_a_judge(records[-1]):
            _write_labelled(records, replies.labels)
            records = []
    _write_labelled(records, replies.labels)
    return 0


def _refuse_broken(names: list[str], key: str = "") -> None:
    """A ConfigError, with the plugin's error, where `names` holds a benchmark plugin that cannot be used (argparse
    offers their names, so that naming one says why it is left out; docs/extending.md)."""
    for name in names:
        if name in BROKEN:
            raise ConfigError(f"{key}{BROKEN[name]}")


class _Replies:
    """The item and the labelling of each line `parse` reads, as the cell of the line's config has them: the
    config's settings (--configfile, else the default config; read at the first line that needs them) give
    its data, subset seed, option order and scorer."""

    def __init__(self, benchmark: Benchmark, args: argparse.Namespace):
        self.benchmark, self.args = benchmark, args
        self._settings: Settings | None = None
        self._judges: dict[str, Backend] = {}  # the judges asked, by name: their servers, started once
        self.named_judge: str | None = None  # the judge --scorer judge asks about every line
        self._configs: dict[str, Config] = {}
        self._items: dict[tuple[str, Presentation], Item] = {}
        self._models: dict[str, dict[str, Path]] = {}

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.args.configfile or DEFAULT_CONFIGFILE)
        return self._settings

    def judge(self, spec: ModelSpec) -> str:
        """A judge's name, its server started (once) as a run's cells ask it."""
        if spec.name not in self._judges:
            configfile = Path(self.args.configfile or DEFAULT_CONFIGFILE)
            self._judges[spec.name] = _judge_backend(self.settings, spec, configfile)
        return spec.name

    def resolve(self, record: dict, where: str) -> tuple[Item, tuple[str, str | None] | dict]:
        """The line's item and what labels it, (scorer, judge's name or None), or on the log-likelihood path the
        line's `logliks` that choose its label; a line whose item or labelling is not known, or whose response a
        scorer would read is not text, is a DataError naming `where`."""
        name = self.benchmark.name
        if record.get("benchmark", name) != name:
            raise DataError(f"{where}: a row of benchmark {record['benchmark']!r}, not {name}")
        config = self._config(record.get("config_id"), where)
        item_id = record.get("item_id")
        item = self._posed(record, where) if item_id is None else self._item(item_id, config, where)
        if config is not None and config.scoring == "logprob":
            if item_id is None:
                raise DataError(
                    f"{where}: config {config.config_id} chooses its label by log-likelihood: give the item_id"
                )
            return item, self._logliks(record, item, where)
        if not isinstance(record["response"], str):  # read by a scorer (a log-likelihood row's may be null)
            given = json.dumps(record["response"])
            raise DataError(
                f"{where}: response: expected the reply's text (a string), got "
                + (given if len(given) <= 40 else f"{given[:37]}...")
            )
        scorer = self.args.scorer or (RULES if config is None else self.settings.labelling_scorer(name, config))
        if scorer != JUDGE:
            return item, (scorer, None)
        if item_id is None:
            raise DataError(f"{where}: a judge is asked about the item as a cell shows it: give the item_id")
        return item, (scorer, self.named_judge or self.judge(self.settings.judge_model(name, config)))

    def _config(self, config_id: object, where: str) -> Config | None:
        if config_id is None:
            return None
        name = self.benchmark.name
        if isinstance(config_id, str) and config_id not in self._configs:
            with contextlib.suppress(ConfigError):  # a config of another run or envelope: refused below
                self._configs[config_id] = self.settings.config(name, config_id)
        if not isinstance(config_id, str) or config_id not in self._configs:
            raise DataError(
                f"{where}: config_id {config_id!r} is no {name} config of "
                f"{self.args.configfile or DEFAULT_CONFIGFILE} (give the --configfile of the run it comes from)"
            )
        return self._configs[config_id]

    def _item(self, item_id: object, config: Config | None, where: str) -> Item:
        """The item a cell of `config` evaluates (options in the config's order; the benchmark's own without one)."""
        name, settings = self.benchmark.name, self.settings
        presentation = AS_GIVEN if config is None else settings.envelope.presentation(config, name)
        key = (item_id, presentation) if isinstance(item_id, str) else None
        if key is not None and key not in self._items:
            made = self.benchmark.items_by_id(settings.data_dir, [item_id], settings.subset_seed, presentation)
            self._items.update(((made_id, presentation), item) for made_id, item in made.items())
        if key not in self._items:
            raise DataError(f"{where}: item_id {item_id!r} is no {name} item of the data in {settings.data_dir}")
        return self._items[key]

    def _posed(self, record: dict, where: str) -> Item:
        """The item the line poses by its prompt (and options, where the benchmark's items show them)."""
        fields = self.benchmark.posed_fields
        missing = [field for field in fields if record.get(field) in (None, "", [])]
        if missing:
            raise DataError(
                f"{where}: no item_id, nor {' and '.join(missing)} to pose the item by: parse labels a reply to its "
                f"item (give its item_id, or its {' and '.join(fields)}; docs/scorers.md)"
            )
        prompt, options = record["prompt"], record.get("options", []) if "options" in fields else []
        if not isinstance(prompt, str):
            raise DataError(f"{where}: prompt must be the item's text (a string)")
        if not isinstance(options, list) or len(options) > len(LETTERS) or not all(isinstance(o, str) for o in options):
            raise DataError(f"{where}: options must be a list of the options' texts, in the order shown (A, B, ...)")
        return self.benchmark.posed_item(prompt, options)

    def labels(self, resolved: list[tuple[dict, Item, tuple[str, str | None] | dict]]) -> list[str]:
        """The label of each resolved line, each scorer (and judge) asked once about its lines."""
        labels = [self.benchmark.choose(how, item) if isinstance(how, dict) else "" for _, item, how in resolved]
        for scorer in dict.fromkeys(how for _, _, how in resolved if isinstance(how, tuple)):
            at = [i for i, (_, _, how) in enumerate(resolved) if how == scorer]
            replies, items = [resolved[i][0]["response"] for i in at], [resolved[i][1] for i in at]
            for i, label in zip(at, self._scored(*scorer, replies, items)):
                labels[i] = label
        return labels

    def _scored(self, scorer: str, judge: str | None, replies: list, items: list[Item]) -> list[str]:
        from safetyrepro.scorers import scorer_labels

        if scorer == JUDGE:
            from safetyrepro.running.judge import judge_labels

            batch_size = self.settings.backend.batch_size
            return judge_labels(self.benchmark, self._judges[judge], replies, items, batch_size)
        return scorer_labels(self.benchmark, scorer, replies, items, self.scorer_models(scorer))

    @staticmethod
    def _logliks(record: dict, item: Item, where: str) -> dict:
        """A log-likelihood line's `logliks` (an object, or its JSON text as an items table holds it), checked."""
        from safetyrepro.benchmarks.base import load_json

        logliks = record.get("logliks")
        logliks = load_json(logliks, f"{where}: logliks", standard=True) if isinstance(logliks, str) else logliks
        numbers = isinstance(logliks, dict) and all(isinstance(v, int | float) for v in logliks.values())
        if not numbers or set(logliks) != set(item.candidates):
            raise DataError(
                f"{where}: logliks must give the log-likelihood of each of {', '.join(item.candidates)} "
                "(a log-likelihood row's label is chosen from them)"
            )
        return logliks

    def scorer_models(self, scorer: str) -> dict[str, Path]:
        """The built folder of the embedded model `scorer` reads with (under --resources-dir; built there first,
        once the scorer's own files are found good)."""
        from safetyrepro.scorers import scorer_of

        labelling = scorer_of(self.benchmark, scorer)
        labelling.check_files()
        name = labelling.embedded_model
        if name is None:
            return {}
        if name not in self._models:
            from safetyrepro.configuration.settings import check_writable_folder, embedded_folder
            from safetyrepro.running.embedded_model import build_embedded_model

            resources = Path(self.args.resources_dir or schema("config")["properties"]["resources_dir"]["default"])
            folder = embedded_folder(resources.expanduser(), name)
            if not (folder / "config.json").is_file():  # not built there yet: it is built there first
                check_writable_folder("--resources-dir", folder)
            try:
                self._models[name] = {name: build_embedded_model(folder)}
            except OSError as exc:
                raise ConfigError(f"--resources-dir: cannot build the embedded {name} in {folder}: {exc}") from None
        return self._models[name]


def _asks_a_judge(resolved: tuple) -> bool:
    """Whether a resolved line is labelled by a judge model (its labelling is (JUDGE, the judge's name))."""
    how = resolved[-1]
    return isinstance(how, tuple) and how[0] == JUDGE


def _write_labelled(resolved: list[tuple], labels: Callable[[list], list[str]]) -> None:
    """Write the records (the first of each resolved line) to stdout as JSON lines, each with its `label`."""
    for (record, *_), label in zip(resolved, labels(resolved) if resolved else ()):
        record["label"] = label
        try:
            text = json.dumps(record, ensure_ascii=False)
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (valid JSON, not UTF-8): escape it
            text = json.dumps(record)
        sys.stdout.write(text + "\n")


def _parse_judge(settings: Settings, args: argparse.Namespace) -> ModelSpec:
    """The judge --scorer judge asks: --judge, or the only one of --configfile's judges."""
    names = [spec.name for spec in settings.judges]
    if not names:
        raise ConfigError(f"--configfile: {args.configfile} has no judges (its `judges` section; docs/scorers.md)")
    name = args.judge if args.judge is not None else (names[0] if len(names) == 1 else None)
    if name not in names:
        raise ConfigError(
            f"--judge: {'name' if name is None else f'no judge named {name!r}; name'} one of {', '.join(names)}"
        )
    return settings.model(name)


def _judge_backend(settings: Settings, spec: ModelSpec, configfile: Path) -> Backend:
    """The backend serving a judge of `configfile`: its model server, as a run's cells ask it (started when none
    runs; under backend.server_python if set)."""
    from safetyrepro.cli.jobs import serving_backends
    from safetyrepro.running.embedded_model import build_embedded_model

    if spec.embedded:  # built into the config's resources_dir first, as a run would
        try:
            build_embedded_model(Path(spec.path))
        except OSError as exc:
            raise ConfigError(
                f"resources_dir: cannot build the embedded {spec.embedded} in {spec.path}: {exc}"
            ) from None
    return serving_backends(settings, spec, configfile)["generate"]


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
    from safetyrepro.benchmarks.base import json_nodes, json_path, load_json, read_text, regular_file

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

    study = add_command(
        commands,
        "case-study",
        cmd_case_study,
        "our pipeline, lm-eval and Inspect AI on the same items (config section case_study)",
        ("configfile", "out", "markdown", "work-dir"),
    )
    study.add_argument("--n-items", type=int, help="override case_study.n_items")

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
