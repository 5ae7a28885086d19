"""The `parse` command: label the replies read as JSON lines on stdin as their cells label them (docs/scorers.md)."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from safetyrepro.benchmarks import AS_GIVEN, BENCHMARKS, RULES, DataError
from safetyrepro.benchmarks.base import LETTERS
from safetyrepro.cli.command import refuse_broken
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.loading import DEFAULT_CONFIGFILE
from safetyrepro.configuration.schema import ConfigError, schema
from safetyrepro.scorers import asks_judge

JUDGED_LINES = 64  # stdin lines a judge is asked about at once (its batch; identical questions asked once)
NOT_UTF8 = re.compile("[\udc80-\udcff]")  # what a byte that is not UTF-8 decodes to with surrogateescape

if TYPE_CHECKING:
    from safetyrepro.backends import Backend
    from safetyrepro.benchmarks import Benchmark, Item, Presentation
    from safetyrepro.configuration.settings import Settings
    from safetyrepro.core.config_id import Config
    from safetyrepro.core.model_spec import ModelSpec


def cmd_parse(args: argparse.Namespace) -> int:
    """Label the replies read as JSON lines on stdin as their cells label them, each with its item (by its
    `item_id`, or posed by its prompt and options) and its config's scorer (or --scorer); write them back with
    `label`. A line whose item is not known is refused (docs/scorers.md)."""
    from safetyrepro.benchmarks.files import JSON_LINE_END, load_json

    refuse_broken([args.benchmark])
    benchmark = BENCHMARKS[args.benchmark]
    if args.scorer is not None and args.scorer not in benchmark.scorers:
        raise ConfigError(
            f"--scorer: {args.benchmark} has no scorer {args.scorer!r} (it has: {', '.join(benchmark.scorers)})"
        )
    judged = args.scorer is not None and asks_judge(args.scorer)
    if args.judge is not None and not judged:
        asks_none = f" ({args.scorer} asks none)" if args.scorer else ""
        raise ConfigError(f"--judge: only with a --scorer that asks a judge model{asks_none}")
    if judged and args.configfile is None:
        raise ConfigError(f"--configfile: the scorer {args.scorer} asks one of a config's judges; give that config")
    replies = _Replies(benchmark, args)
    if judged:  # the judge asked: its server started (or refused) first
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

    def resolve(self, record: dict, where: str) -> tuple[Item, tuple[str, str | None, str | None] | dict]:
        """The line's item and what labels it, (scorer, judge's name or None, the phrasing of the judge's question
        or None: its own wording), or on the log-likelihood path the
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
        if not asks_judge(scorer):
            return item, (scorer, None, None)
        if item_id is None:
            raise DataError(f"{where}: a judge is asked about the item as a cell shows it: give the item_id")
        if self.named_judge is not None:  # --scorer judge: its question as its module words it
            return item, (scorer, self.named_judge, None)
        judge = self.judge(self.settings.judge_model(name, config))
        return item, (scorer, judge, self.settings.envelope.judge_phrasing(config, name))

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

    def labels(self, resolved: list[tuple[dict, Item, tuple[str, str | None, str | None] | dict]]) -> list[str]:
        """The label of each resolved line, each scorer (and judge) asked once about its lines."""
        labels = [self.benchmark.choose(how, item) if isinstance(how, dict) else "" for _, item, how in resolved]
        for scorer in dict.fromkeys(how for _, _, how in resolved if isinstance(how, tuple)):
            at = [i for i, (_, _, how) in enumerate(resolved) if how == scorer]
            replies, items = [resolved[i][0]["response"] for i in at], [resolved[i][1] for i in at]
            for i, label in zip(at, self._scored(*scorer, replies, items)):
                labels[i] = label
        return labels

    def _scored(
        self, scorer: str, judge: str | None, phrasing: str | None, replies: list, items: list[Item]
    ) -> list[str]:
        from safetyrepro.scorers import scorer_labels

        if judge is not None:
            from safetyrepro.running.judge import judge_labels

            batch_size = self.settings.backend.batch_size
            return judge_labels(self.benchmark, scorer, self._judges[judge], replies, items, batch_size, phrasing)
        return scorer_labels(self.benchmark, scorer, replies, items, self.scorer_models(scorer))

    @staticmethod
    def _logliks(record: dict, item: Item, where: str) -> dict:
        """A log-likelihood line's `logliks` (an object, or its JSON text as an items table holds it), checked."""
        from safetyrepro.benchmarks.files import load_json

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
            from safetyrepro.configuration.checks import check_writable_folder
            from safetyrepro.configuration.settings import embedded_folder
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
    """Whether a resolved line is labelled by a judge model (its labelling is (scorer, the judge's name, phrasing))."""
    how = resolved[-1]
    return isinstance(how, tuple) and how[1] is not None


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
    from safetyrepro.pipeline.jobs import serving_backends
    from safetyrepro.running.embedded_model import build_embedded_model

    if spec.embedded:  # built into the config's resources_dir first, as a run would
        try:
            build_embedded_model(Path(spec.path))
        except OSError as exc:
            raise ConfigError(
                f"resources_dir: cannot build the embedded {spec.embedded} in {spec.path}: {exc}"
            ) from None
    return serving_backends(settings, spec, configfile)["generate"]
