"""The fetch step, run against a file:// mirror built from the shared reference data."""

import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest
from helpers.session import REPO

from safetyrepro.benchmarks import BENCHMARKS, DataFile
from safetyrepro.running.data import (
    MANIFEST,
    DataIntegrityError,
    DownloadError,
    fetch_data,
    manifest,
    url_for,
    verify_data,
)

SHARED_DATA = Path(os.environ.get("SAFETYREPRO_DATA_DIR", REPO.parent / "shared" / "data"))

pytestmark = pytest.mark.skipif(
    not SHARED_DATA.is_dir(), reason=f"shared reference data not found at {SHARED_DATA} (set SAFETYREPRO_DATA_DIR)"
)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def mirror(tmp_path):
    """A raw.githubusercontent-like mirror: {root}/{repo}/{commit}/{upstream_path}."""
    root = tmp_path / "mirror"
    for entry in MANIFEST:
        dst = root / entry.repo / entry.commit / entry.upstream_path
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHARED_DATA / entry.path, dst)
    return root


def mirror_file(root: Path, entry) -> Path:
    return root / entry.repo / entry.commit / entry.upstream_path


def test_manifest_pins_the_shared_data():
    shared = {p.relative_to(SHARED_DATA).as_posix() for p in SHARED_DATA.rglob("*") if p.is_file()}
    paths = [entry.path for entry in MANIFEST]
    assert len(paths) == len(set(paths)) == 41
    assert set(paths) == shared - {"SOURCES.md"}
    for entry in MANIFEST:
        assert entry.sha256 == sha256(SHARED_DATA / entry.path), entry.path
    sources = (SHARED_DATA / "SOURCES.md").read_text(encoding="utf-8")
    assert all(entry.commit in sources for entry in MANIFEST)


def test_url_for():
    entry = next(e for e in MANIFEST if e.path == "bbq/Age.jsonl")
    commit = "bea11bd97d79217245b5871acd247b9d6eb24598"
    assert url_for(entry) == f"https://raw.githubusercontent.com/nyu-mll/BBQ/{commit}/data/Age.jsonl"
    assert url_for(entry, "file:///m/") == f"file:///m/nyu-mll/BBQ/{commit}/data/Age.jsonl"


def test_fetch_verifies_and_is_idempotent(mirror, tmp_path):
    data_dir = tmp_path / "data"
    fetched = fetch_data(data_dir, base_url=mirror.as_uri())
    assert sorted(fetched) == sorted(data_dir / entry.path for entry in MANIFEST)
    for entry in MANIFEST:
        assert sha256(data_dir / entry.path) == entry.sha256, entry.path
    assert verify_data(data_dir) == []
    assert not list(data_dir.rglob("*.part"))

    mtimes = {p: p.stat().st_mtime_ns for p in fetched}
    assert fetch_data(data_dir, base_url=mirror.as_uri()) == []
    assert {p: p.stat().st_mtime_ns for p in fetched} == mtimes


def test_only_named_benchmarks(mirror, tmp_path):
    data_dir = tmp_path / "data"
    fetched = fetch_data(data_dir, base_url=mirror.as_uri(), benchmarks=["xstest"])
    assert {p.relative_to(data_dir).parts[0] for p in fetched} == {"xstest"}
    assert len(fetched) == 3
    assert verify_data(data_dir, benchmarks=["xstest"]) == []
    assert len(verify_data(data_dir)) == len(MANIFEST) - 3
    with pytest.raises(ValueError, match="unknown benchmark"):
        fetch_data(data_dir, base_url=mirror.as_uri(), benchmarks=["xstset"])


def test_changed_local_file_is_reported_and_replaced(mirror, tmp_path):
    data_dir = tmp_path / "data"
    fetch_data(data_dir, base_url=mirror.as_uri(), benchmarks=["crows_pairs"])
    target = data_dir / "crows_pairs" / "crows_pairs_anonymized.csv"
    target.write_text("edited\n")
    [problem] = verify_data(data_dir, benchmarks=["crows_pairs"])
    assert "hash mismatch" in problem and str(target) in problem
    assert fetch_data(data_dir, base_url=mirror.as_uri(), benchmarks=["crows_pairs"]) == [target]
    assert verify_data(data_dir, benchmarks=["crows_pairs"]) == []


def test_tampered_mirror_file_is_rejected(mirror, tmp_path):
    entry = next(e for e in MANIFEST if e.path == "truthfulqa/TruthfulQA.csv")
    with mirror_file(mirror, entry).open("a") as f:
        f.write("tampered\n")
    data_dir = tmp_path / "data"
    with pytest.raises(DataIntegrityError) as info:
        fetch_data(data_dir, base_url=mirror.as_uri(), benchmarks=["truthfulqa"])
    message = str(info.value)
    for part in (entry.path, url_for(entry, mirror.as_uri()), entry.sha256, sha256(mirror_file(mirror, entry))):
        assert part in message
    assert isinstance(info.value, ValueError)
    assert list((data_dir / "truthfulqa").iterdir()) == []  # neither the file nor a temp file


def test_missing_mirror_file_names_the_url(mirror, tmp_path):
    entry = next(e for e in MANIFEST if e.path == "xstest/xstest_prompts.csv")
    mirror_file(mirror, entry).unlink()
    data_dir = tmp_path / "data"
    with pytest.raises(DownloadError, match=re.escape(url_for(entry, mirror.as_uri()))):
        fetch_data(data_dir, base_url=mirror.as_uri(), benchmarks=["xstest"])
    assert not (data_dir / entry.path).exists()
    assert not list(data_dir.rglob("*.part"))


def test_the_manifest_is_the_registered_benchmarks_files():
    assert MANIFEST == tuple(entry for benchmark in BENCHMARKS.values() for entry in benchmark.data_files)
    assert manifest(["xstest", "bbq"]) == [*BENCHMARKS["bbq"].data_files, *BENCHMARKS["xstest"].data_files]


def test_a_file_with_its_own_url_ignores_the_mirror(tmp_path, monkeypatch):
    source = tmp_path / "upstream" / "items.jsonl"
    source.parent.mkdir()
    source.write_text('{"id": "1"}\n')
    entry = DataFile("xstest/extra.jsonl", sha256(source), url=source.as_uri())
    assert url_for(entry, "file:///m/") == source.as_uri() and entry.source == source.as_uri()
    monkeypatch.setattr(BENCHMARKS["xstest"], "data_files", (entry,))
    data_dir = tmp_path / "data"
    assert fetch_data(data_dir, base_url="file:///m/", benchmarks=["xstest"]) == [data_dir / entry.path]
    assert verify_data(data_dir, benchmarks=["xstest"]) == []


@pytest.mark.parametrize(
    "where", [{}, {"repo": "a/b", "commit": "c", "upstream_path": "f", "url": "file:///f"}, {"repo": "a/b"}]
)
def test_a_data_file_has_one_source(where):
    with pytest.raises(ValueError, match="give either repo, commit and upstream_path, or url"):
        DataFile("xstest/f.csv", "0" * 64, **where)
