"""What every reader of imported results returns, and how those runs become cells.parquet and items.parquet."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pandas as pd

from safetyrepro.analysis.suite import result_columns
from safetyrepro.benchmarks import BENCHMARKS, DataError
from safetyrepro.benchmarks.files import regular_file
from safetyrepro.configuration.envelope import reserved_names
from safetyrepro.core.axes import AXES
from safetyrepro.core.tiers import CORE, STRESS
from safetyrepro.results.aggregate import CELL_COLUMNS
from safetyrepro.running.cell import ITEM_COLUMNS

# The item rows of an imported cell: our own (safetyrepro.running.cell.ITEM_COLUMNS) without the prompt text, plus the source.
IMPORTED_ITEM_COLUMNS = [*(column for column in ITEM_COLUMNS if column != "prompt"), "source"]
# Per-item fields a reader gives (the rest come from its run).
READER_ITEM_FIELDS = ["item_id", "item_hash", "seed", "prompt_id", "response", "logliks", "label", "parsed", "correct"]
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")  # a benchmark's name goes into figure file names
MODEL_NAME = re.compile(r"^[A-Za-z0-9._/:@+-]{1,200}$")  # hub ids, local paths and Inspect's provider/model
VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+]{0,59}$")
GREEDY = "greedy"
SCORE_TOLERANCE = 1e-9
T = TypeVar("T")


@dataclass
class ImportedRun:
    """One configuration of one model on one benchmark as a harness recorded it.

    `axes` holds the four built-in axes (template, decoding, shots, scoring) and any declared ones;
    `score` is the harness's own aggregate; `items` (when the harness logged them) has READER_ITEM_FIELDS,
    one row per item and seed; `seeds` are the seeds the score covers (Inspect's epochs, lm-eval's seed).
    `raw_model` is the model's name in the harness, `harness` the settings that must agree for runs to be
    seeds of one cell, `files` what was read, `where` the file and task for messages.
    """

    file: Path
    source: str
    model: str
    benchmark: str
    axes: dict[str, str]
    score: float
    seeds: tuple[int, ...]
    items: pd.DataFrame | None = None
    prompt_format: str = "unknown"
    batch_size: int | None = None
    config_id: str | None = None
    parse_rate: float | None = None
    tier: str | None = None
    harness: dict = field(default_factory=dict)
    raw_model: str = ""
    files: tuple[Path, ...] = ()
    where: str = ""

    def __post_init__(self) -> None:
        self.where = self.where or str(self.file)

    @property
    def cell_id(self) -> str:
        """The config id: the table's own, else built from the axes as ours are
        (T1-greedy-0shot-freeform, then -axis=value per declared axis in name order)."""
        if self.config_id is not None:
            return self.config_id
        axes = self.axes
        declared = "".join(f"-{axis}={axes[axis]}" for axis in sorted(set(axes) - set(AXES)))
        return f"{axes['template']}-{axes['decoding']}-{axes['shots']}shot-{axes['scoring']}{declared}"


def check_names(run: ImportedRun, where: str) -> None:
    """Model and benchmark names fit file names and tables; axis names and values fit config ids."""
    for key, value, pattern in (("model", run.model, MODEL_NAME), ("benchmark", run.benchmark, NAME)):
        if not pattern.match(value):
            raise DataError(
                f"{run.file}: {where}: the {key} name {value!r} is not a plain name (letters, digits, . _ + -"
                f"{', / : @' if key == 'model' else ''}); "
                f"name it in the mapping file ({'models' if key == 'model' else 'tasks.<task>.benchmark'})"
            )
    for axis, value in run.axes.items():
        if axis not in AXES and (
            axis in reserved_names(BENCHMARKS, result_columns())[0] or not re.match(r"^[a-z][a-z0-9_]*$", axis)
        ):
            raise DataError(f"{run.file}: {where}: {axis!r} cannot be an axis name (a reserved or non-plain name)")
        if not VALUE.match(str(value)):
            raise DataError(
                f"{run.file}: {where}: the {axis} value {value!r} is not a plain value (letters, digits, . _ +); "
                "name it in the mapping file"
            )


def source_files(root: Path, pattern: str, what: str) -> list[Path]:
    """The files of a source: those under a folder whose names match `pattern` (at any depth; none is an
    error saying that `what` is missing), or the source itself when it is a regular file (`regular_file`)."""
    if not root.is_dir():
        return [regular_file(root, "no such file or folder")]
    files = sorted(root.rglob(pattern))
    if not files:
        raise DataError(f"{root}: no {what}")
    return files


def read_guarded(writer: str, read: Callable[..., T], path: Path, *args) -> T:
    """`read(path, *args)`, with content that is not as `writer` writes it (a missing key, a null where a
    number belongs, text where a list belongs) refused in one message naming the file."""
    try:
        return read(path, *args)
    except DataError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        detail = " ".join(str(exc).split())[:160]
        raise DataError(f"{path}: not as {writer} writes it ({type(exc).__name__}: {detail})") from None


def decoding_name(temperature: float | None) -> str:
    """Our decoding value for a sampling temperature: greedy at 0 (or none), else t<temperature>."""
    return GREEDY if not temperature else f"t{float(temperature):g}"


@dataclass
class Imported:
    """The imported tables: cells and items in our schema (plus `source`), the design the analyses read,
    the notes (what could not be mapped, what was left out), per model its sources and harness settings,
    and every file read."""

    cells: pd.DataFrame
    items: pd.DataFrame
    design: dict
    notes: list[str]
    models: dict
    files: list[Path]


def note_once(notes: list[str], note: str) -> None:
    """Add a note unless it is there already (a template identity shared by many runs is named once)."""
    if note not in notes:
        notes.append(note)


def short_hash(prefix: str, data) -> str:
    """An identity: `prefix` + 8 hex digits of the SHA-256 of `data` as sorted JSON."""
    return prefix + hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:8]


def _ambiguous(runs: Sequence[ImportedRun], why: str) -> DataError:
    first = runs[0]
    return DataError(
        f"{', '.join(dict.fromkeys(run.where for run in runs))}: both hold {first.model} / {first.benchmark} / "
        f"{first.cell_id} ({why}): ambiguous; import one of them, or import them as separate sources whose "
        "mapping files set an axis that tells them apart (tasks.<task>.axes)"
    )


def _check_seeds_of_one_configuration(runs: Sequence[ImportedRun]) -> None:
    """Several runs of one cell are accepted only as seeds of one sampled configuration: the same model
    and harness settings, the same items, different seeds."""
    seeds = [seed for run in runs for seed in run.seeds]
    if runs[0].axes.get("decoding") == GREEDY:
        raise _ambiguous(runs, "greedy decoding")
    if len(set(seeds)) < len(seeds):
        raise _ambiguous(runs, "the same seed")
    if len({run.raw_model for run in runs}) > 1:
        raise _ambiguous(runs, f"different models: {', '.join(sorted({run.raw_model for run in runs}))}")
    if len({json.dumps(run.harness, sort_keys=True, default=str) for run in runs}) > 1:
        raise _ambiguous(runs, "different harness settings")
    item_sets = {frozenset(run.items["item_id"]) for run in runs if run.items is not None}
    if len(item_sets) > 1:
        raise _ambiguous(runs, "different items")


def _seed_scores(run: ImportedRun, notes: list[str]) -> dict[int, float]:
    """Per seed, the mean correctness of its item rows; without item rows, the run's score for its seeds."""
    if run.items is not None and len(run.items):
        return {int(k): float(v) for k, v in run.items.groupby("seed")["correct"].mean().items()}
    if len(run.seeds) > 1:
        note_once(notes, f"{run.where}: no item rows: its {len(run.seeds)} seeds all get the run's score")
    return {seed: float(run.score) for seed in run.seeds}


def _check_run(run: ImportedRun) -> None:
    """A score in [0, 1]; item rows with one row per item and seed."""
    if not 0 <= run.score <= 1:  # NaN fails too
        raise DataError(f"{run.where}: score {run.score!r} is not in [0, 1] (a verdict needs an accuracy-like score)")
    if run.items is not None:
        twice = run.items.duplicated(["item_id", "seed"])
        if twice.any():
            row = run.items[twice].iloc[0]
            raise DataError(f"{run.where}: item {row['item_id']!r} appears twice for seed {row['seed']}")


def _merge(runs: Sequence[ImportedRun], notes: list[str]) -> tuple[ImportedRun, dict[int, float], pd.DataFrame | None]:
    """The cell of one or more runs: its first run, its per-seed scores and its item rows (None when
    any run logged none)."""
    for run in runs:
        _check_run(run)
    if len(runs) > 1:
        _check_seeds_of_one_configuration(runs)
    per_seed = {seed: score for run in runs for seed, score in _seed_scores(run, notes).items()}
    logged = [run.items for run in runs if run.items is not None]
    if logged and len(logged) < len(runs):
        notes.append(f"{runs[0].where}: some seeds of this cell have no item rows: the cell has none")
    items = pd.concat(logged, ignore_index=True) if logged and len(logged) == len(runs) else None
    return runs[0], per_seed, items


def _check_config_ids(cells: pd.DataFrame, axes: Sequence[str], runs: dict) -> None:
    """One config id, one set of axis values, whichever model it belongs to."""
    for (benchmark, config_id), frame in cells.groupby(["benchmark", "config_id"], sort=False):
        values = frame[list(axes)].astype(str).drop_duplicates()
        if len(values) > 1:
            first, other = values.iloc[0].to_dict(), values.iloc[1].to_dict()
            differ = {axis: (first[axis], other[axis]) for axis in axes if first[axis] != other[axis]}
            raise DataError(
                f"{runs[benchmark, config_id]}: config {config_id!r} of {benchmark!r} has different axis values "
                f"for different models ({', '.join(f'{a}: {x} / {y}' for a, (x, y) in differ.items())})"
            )


def build_tables(runs: Sequence[ImportedRun], stress: Sequence[tuple[str, str]], notes: list[str]) -> Imported:
    """Our cells and items tables from imported runs (one cell per model, benchmark and config)."""
    if not runs:
        raise DataError(f"nothing to import: the sources hold no run{' (' + notes[0] + ')' if notes else ''}")
    groups: dict[tuple[str, str, str], list[ImportedRun]] = {}
    for run in runs:
        groups.setdefault((run.model, run.benchmark, run.cell_id), []).append(run)
    declared = sorted({axis for run in runs for axis in run.axes} - set(AXES))
    stress_set = {(axis, str(value)) for axis, value in stress}
    unknown = sorted({axis for axis, _ in stress_set} - {*AXES, *declared})
    if unknown:
        raise DataError(
            f"mapping stress: {unknown[0]!r} is no axis of the imported runs ({', '.join([*AXES, *declared])})"
        )
    cells, items = [], []
    for (model, benchmark, config_id), group in groups.items():
        run, per_seed, rows = _merge(group, notes)
        mean = sum(per_seed.values()) / len(per_seed)
        if rows is not None and abs(mean - run.score) > SCORE_TOLERANCE and len(group) == 1:
            notes.append(
                f"{run.where}: {model} / {benchmark} / {config_id}: the harness's score {run.score:.6f} is not the "
                f"mean of its logged items ({mean:.6f}); the score is kept"
            )
        tier = run.tier or (STRESS if any((a, str(v)) in stress_set for a, v in run.axes.items()) else CORE)
        parse_rate = run.parse_rate if run.parse_rate is not None or rows is None else float(rows["parsed"].mean())
        sources = " + ".join(r.source for r in group)
        cells.append(
            {
                "model": model,
                "benchmark": benchmark,
                "config_id": config_id,
                **{axis: str(value) for axis, value in run.axes.items()},
                "tier": tier,
                "score": float(sum(r.score * len(r.seeds) for r in group) / sum(len(r.seeds) for r in group)),
                "parse_rate": parse_rate,
                "n_items": int(rows["item_id"].nunique()) if rows is not None else None,
                "n_seeds": len(per_seed),
                "seed_scores": json.dumps({str(k): v for k, v in sorted(per_seed.items())}, sort_keys=True),
                "prompt_format": run.prompt_format,
                "batch_size": run.batch_size,
                "batch_invariant": False,
                "source": sources,
            }
        )
        if rows is not None:
            rows = rows[READER_ITEM_FIELDS].assign(
                model=model,
                benchmark=benchmark,
                config_id=config_id,
                stratum="all",
                prompt_format=run.prompt_format,
                batch_size=run.batch_size,
                batch_invariant=False,
                source=sources,
            )
            items.append(rows[IMPORTED_ITEM_COLUMNS])
    cells_frame = pd.DataFrame(cells)
    cells_frame = cells_frame[[*CELL_COLUMNS, *declared, "source"]].astype({"n_items": "Int64"})
    _check_config_ids(cells_frame, [*AXES, *declared], {(r.benchmark, r.cell_id): r.where for r in runs})
    items_frame = pd.concat(items, ignore_index=True) if items else pd.DataFrame(columns=IMPORTED_ITEM_COLUMNS)
    if not items:
        notes.append("no source logged per-item results: the item-level analyses have no rows")
    design = {"axes": [*AXES, *declared], "stress_values": sorted(stress_set), "greedy": [GREEDY]}
    models: dict[str, dict] = {}
    for run in runs:
        entry = models.setdefault(run.model, {"sources": [], "harness": []})
        kind = run.source.split(":", 1)[0]
        if kind not in entry["sources"]:
            entry["sources"].append(kind)
        setting = {"name": run.raw_model, **run.harness}
        if setting not in entry["harness"]:
            entry["harness"].append(setting)
    files = sorted({file for run in runs for file in run.files})
    return Imported(cells_frame, items_frame.astype({"correct": bool, "parsed": bool}), design, notes, models, files)
