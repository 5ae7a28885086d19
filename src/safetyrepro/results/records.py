"""A job's record: the fingerprint of what its outputs were made from (its settings and code, the rule's
params), the SHA-256 of each output and of each input it read from the results folder, written by the job
itself into the results folder (`results/jobs/<its first output>.json`).

Results get copied, moved, restored from a backup and synced back from a cluster's scratch, and Snakemake's own
metadata (`.snakemake/`, keyed by path) stays behind: the workflow trusts an output only when its record says it
was made from what the config now asks, from the inputs now in the results folder, and is still the file
recorded (docs/reruns.md)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from safetyrepro.results.storage import write_json

JOBS = "jobs"  # the records' folder in the results folder
NO_RECORD = "no record"


def record_of(first_output: str, results_dir: str) -> str:
    """The record of the job whose first output is this path (or pattern) in the results folder:
    `<results>/jobs/<that path>.json`."""
    return f"{results_dir}/{JOBS}/{first_output.removeprefix(f'{results_dir}/')}.json"


def fingerprint(values: dict) -> str:
    """SHA-256 of what a job's outputs depend on (JSON-serialisable values; anything else by its str)."""
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()


@cache
def _stated_sha256(path: str, size: int, mtime_ns: int, inode: int) -> str:
    from safetyrepro.running.hashing import file_sha256

    return file_sha256(Path(path))


def same_file_sha256(path: Path) -> str:
    """A file's SHA-256, read once a process while it stays the same file (its inode, size and time): a plan
    reads each output, and again as the next job's input."""
    status = os.stat(path)
    return _stated_sha256(str(Path(path).resolve()), status.st_size, status.st_mtime_ns, status.st_ino)


def _within(results_dir: Path, inputs: Sequence[Path]) -> dict[str, Path]:
    """The inputs that lie in the results folder, by their path in it."""
    root = Path(results_dir).resolve()
    found = {}
    for path in inputs:
        resolved = Path(path).resolve()
        if resolved.is_relative_to(root) and resolved.is_file():
            found[resolved.relative_to(root).as_posix()] = Path(path)
    return found


def write_record(
    path: Path, fingerprint: str, outputs: Sequence[Path], inputs: Sequence[Path] = (), results_dir: Path = Path()
) -> None:
    """Record, once the job has written its outputs, their fingerprint, each output's SHA-256 (by file name: a
    job's outputs share a folder, and the folder may be moved) and that of each input read from the results
    folder (by its path there)."""
    record = {
        "fingerprint": fingerprint,
        "outputs": {Path(out).name: same_file_sha256(out) for out in outputs},
        "inputs": {name: same_file_sha256(read) for name, read in _within(results_dir, inputs).items()},
    }
    write_json(record, Path(path))


def record_problem(path: Path, fingerprint: str, outputs: Sequence[Path], results_dir: Path) -> str | None:
    """Why a job's existing outputs cannot be trusted, or None when its record vouches for them: NO_RECORD (the
    caller refuses such a result), or what makes them outdated (the job is redone)."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
        recorded, hashes, read = record["fingerprint"], record["outputs"], record["inputs"]
    except FileNotFoundError:
        return NO_RECORD
    except (OSError, ValueError, KeyError, TypeError):
        return f"its record {path} is unreadable"
    if recorded != fingerprint:
        return "it was made with other settings or code than this run's"
    for out in outputs:
        if hashes.get(Path(out).name) != same_file_sha256(out):
            return f"{out} is not the file its record names (changed or replaced since it was written)"
    for name, digest in read.items():
        now = Path(results_dir) / name
        if now.is_file() and same_file_sha256(now) != digest:  # one missing is made again, and this job after it
            return f"it was made from another {now} than the one there now"
    return None
