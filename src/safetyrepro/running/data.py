"""Fetch the benchmark data from pinned upstream commits, checking every file's SHA-256.

The manifest is every registered benchmark's `data_files`: each pins a file to a commit of its
public repository (or to its own URL) and to the hash of the reference copy (see SOURCES.md in the
shared data folder). Downloads go through urllib, so ``base_url`` may point at any mirror laid out
like raw.githubusercontent.com, including a local ``file://`` folder.
"""

from __future__ import annotations

import hashlib
import os
import urllib.request
from collections.abc import Iterable
from http.client import HTTPException
from pathlib import Path

from safetyrepro.benchmarks import BENCHMARKS, DataError, DataFile
from safetyrepro.benchmarks.files import regular_file
from safetyrepro.running.hashing import file_sha256

RAW_GITHUB_URL = "https://raw.githubusercontent.com"


class DataIntegrityError(DataError):
    """A downloaded file does not have the pinned SHA-256."""


class DownloadError(DataError):
    """A file could not be downloaded (one line for the user, as every DataError)."""


MANIFEST: tuple[DataFile, ...] = tuple(entry for benchmark in BENCHMARKS.values() for entry in benchmark.data_files)


def url_for(entry: DataFile, base_url: str | None = None) -> str:
    """The download URL of ``entry``: its own URL, else raw.githubusercontent.com or a mirror with its layout."""
    if entry.url:
        return entry.url
    base = (base_url or RAW_GITHUB_URL).rstrip("/")
    return f"{base}/{entry.repo}/{entry.commit}/{entry.upstream_path}"


def manifest(benchmarks: Iterable[str] | None = None) -> list[DataFile]:
    """The pinned files of ``benchmarks`` (by name; all registered ones when None), in manifest order."""
    if benchmarks is None:
        return list(MANIFEST)
    wanted = set(benchmarks)
    if unknown := wanted.difference(BENCHMARKS):
        raise ValueError(f"unknown benchmark(s) {sorted(unknown)}; known: {list(BENCHMARKS)}")
    return [entry for name, benchmark in BENCHMARKS.items() if name in wanted for entry in benchmark.data_files]


def _download(entry: DataFile, target: Path, url: str) -> None:
    """Download ``url`` to a temporary file next to ``target``, check it, then move it in place."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file where a folder goes, or no permission
        raise DataError(f"{target.parent}: cannot make the folder ({exc.strerror})") from None
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        digest = hashlib.sha256()
        try:
            with urllib.request.urlopen(url, timeout=60) as response, tmp.open("wb") as out:
                for chunk in iter(lambda: response.read(1 << 20), b""):
                    out.write(chunk)
                    digest.update(chunk)
        except (OSError, HTTPException) as exc:
            raise DownloadError(f"could not download {url}: {exc}") from exc
        if digest.hexdigest() != entry.sha256:
            raise DataIntegrityError(
                f"{entry.path}: SHA-256 mismatch for {url}: expected {entry.sha256}, got {digest.hexdigest()}"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def fetch_data(
    data_dir: str | os.PathLike, base_url: str | None = None, benchmarks: Iterable[str] | None = None
) -> list[Path]:
    """Download the manifest's files (optionally only ``benchmarks``) into ``data_dir``.

    Files already present with the pinned hash are left alone. Returns the paths that were
    downloaded. Raises DataIntegrityError on a hash mismatch and DownloadError when a
    download fails; neither leaves a partial file behind. Something other than a regular file
    where a file goes (a folder, a link loop, a pipe) is a DataError naming it.
    """
    if os.path.lexists(data_dir) and not os.path.isdir(data_dir):
        raise DataError(f"--data-dir: {data_dir} is not a folder")
    downloaded = []
    for entry in manifest(benchmarks):
        target = Path(data_dir) / entry.path
        if os.path.lexists(target):  # a folder, link loop, pipe or device in the way is named, not replaced
            regular_file(target, "cannot be downloaded over", "cannot be downloaded over: ")
            if file_sha256(target) == entry.sha256:
                continue
        _download(entry, target, url_for(entry, base_url))
        downloaded.append(target)
    return downloaded


def verify_data(data_dir: str | os.PathLike, benchmarks: Iterable[str] | None = None) -> list[str]:
    """Check the manifest's files (optionally only ``benchmarks``) in ``data_dir``.

    Returns one message per file that is missing, not a regular file (saying what it is) or has another
    hash; an empty list means all is well.
    """
    problems = []
    for entry in manifest(benchmarks):
        path = Path(data_dir) / entry.path
        try:
            regular_file(path, "missing")
        except DataError as exc:
            problems.append(str(exc))
            continue
        if (actual := file_sha256(path)) != entry.sha256:
            problems.append(f"hash mismatch: {path}: expected {entry.sha256}, got {actual}")
    return problems
