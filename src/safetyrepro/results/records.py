"""A job's record: the fingerprint of what its outputs were made from (its settings and code, the rule's
params) and the SHA-256 of each output, written by the job itself into the results folder
(`results/jobs/<its first output>.json`).

Results get copied, moved, restored from a backup and synced back from a cluster's scratch, and Snakemake's own
metadata (`.snakemake/`, keyed by path) stays behind: the workflow trusts an output only when its record says it
was made from what the config now asks and is still the file recorded (docs/reruns.md)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from safetyrepro.results.storage import write_json

JOBS = "jobs"  # the records' folder in the results folder


def fingerprint(values: dict) -> str:
    """SHA-256 of what a job's outputs depend on (JSON-serialisable values; anything else by its str)."""
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()


def _sha256(path: Path) -> str:
    from safetyrepro.running.hashing import file_sha256

    return file_sha256(Path(path))


def write_record(path: Path, fingerprint: str, outputs: Sequence[Path]) -> None:
    """Record, once the job has written its outputs, their fingerprint and each one's SHA-256 (by file name: a
    job's outputs share a folder, and the folder may be moved)."""
    write_json({"fingerprint": fingerprint, "outputs": {Path(out).name: _sha256(out) for out in outputs}}, Path(path))


def record_problem(path: Path, fingerprint: str, outputs: Sequence[Path]) -> str | None:
    """Why a job's existing outputs cannot be trusted, or None when its record vouches for them: 'no record' (the
    caller refuses such a result), or what makes them outdated (the job is redone)."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
        recorded, hashes = record["fingerprint"], record["outputs"]
    except FileNotFoundError:
        return "no record"
    except (OSError, ValueError, KeyError, TypeError):
        return f"its record {path} is unreadable"
    if recorded != fingerprint:
        return "it was made with other settings or code than this run's"
    for out in outputs:
        if hashes.get(Path(out).name) != _sha256(out):
            return f"{out} is not the file its record names (changed or replaced since it was written)"
    return None
