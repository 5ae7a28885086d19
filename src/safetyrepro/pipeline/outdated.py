"""The check of a job's existing outputs against the record its job wrote (safetyrepro.results.records), before a
run trusts them, and the marker by which the workflow redoes an outdated one (workflow/rules/common.smk,
`outdated`; docs/reruns.md)."""

from __future__ import annotations

import hashlib
import os
import shlex
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from safetyrepro.configuration.schema import ConfigError
from safetyrepro.results.records import NO_RECORD, record_problem
from safetyrepro.results.storage import write_text


def record_options(
    job_record: str, fingerprint: str, results: str, outputs: Sequence[str], inputs: Iterable[str]
) -> str:
    """A job's `record` param, its rerun trigger: the options by which it records its outputs (the `job`
    decorator of safetyrepro.pipeline.lifecycle), `fingerprint` the hash of what they depend on; of its inputs,
    those in the results folder (what its record hashes)."""
    read = [path for path in inputs if Path(path).is_relative_to(results)]
    values = ["--job-record", job_record, "--fingerprint", fingerprint, "--results-dir", results]
    return shlex.join([*values, "--outputs", *outputs, "--inputs", *read])


def markers_folder(scratch: Path, results: str) -> Path:
    """Where the jobs' markers of an outdated result are: in the working folder's own scratch (a dry run writes
    nothing in the results), under the results folder as the config names it."""
    return scratch / "outdated" / hashlib.sha256(results.encode()).hexdigest()[:16]


def marker_of(markers: Path, results: str, first_output: str) -> Path:
    """A job's marker, by its first output: a folder of its own, since Snakemake lists a folder once a run, so a
    marker written after a sibling's was looked up would be taken for missing."""
    return markers / first_output.removeprefix(f"{results}/") / "marker"


def outdated_problem(
    record: str,
    outputs: Sequence[str],
    expected: Callable[[], str],
    results_dir: Path,
    current: Callable[[], str | None] | None = None,
) -> str | None:
    """Why a job's outputs, all there, are outdated: their record (`record`) names another fingerprint than
    `expected()` or other bytes, or `current()` (a rule's own check beyond the record) says why; None where they
    are current or not all there. Outputs without a record are a ConfigError: they are refused, not redone."""
    if not all(Path(path).exists() for path in outputs):
        return None
    problem = record_problem(Path(record), expected(), [Path(p) for p in outputs], results_dir)
    if problem is None and current is not None:
        problem = current()
    if problem == NO_RECORD:
        raise ConfigError(
            f"{outputs[0]} has no record of what made it ({record} is missing): it was made "
            "by an older version of safetyrepro, copied without the results' jobs/ folder, or its job was "
            "killed as it finished; delete it (results made before job records: the whole results folder) "
            "and run again"
        )
    return problem


def mark_current(marker: Path) -> None:
    """Date a job's marker at the epoch, older than any output (also after a dry run of another config wrote it)."""
    if not marker.is_file():
        write_text("", marker)
    os.utime(marker, (0, 0))


def mark_outdated(marker: Path, problem: str, written: Iterable[str]) -> None:
    """Write a job's marker anew (its content never the same twice), newer than what it `written` (its outputs and
    record), so that Snakemake redoes the job as after any updated input, whatever metadata it kept: also where
    their times lie ahead of the clock (moved back since they were written; the run's onstart then sets both to
    now: safetyrepro.pipeline.lifecycle.settle_future_times)."""
    write_text(f"{time.time_ns()} {problem}\n", marker)
    newest = max(os.stat(path).st_mtime_ns for path in written if os.path.exists(path))
    if newest >= marker.stat().st_mtime_ns:
        os.utime(marker, ns=(newest + 10**9, newest + 10**9))
