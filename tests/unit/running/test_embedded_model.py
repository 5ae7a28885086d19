"""Building the embedded model: concurrent builds (two runs, parallel test workers) build it once; what its
description lists."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from safetyrepro.core.model_spec import ModelSpec
from safetyrepro.running import embedded_model
from safetyrepro.running.models import describe_model


def _slow_build(target: Path, builds) -> None:
    with builds.get_lock():
        builds.value += 1
    time.sleep(0.5)  # long enough for every other process to reach the lock
    target.mkdir()
    (target / "config.json").write_text("{}")


def _build_with(target: Path, builds) -> None:
    embedded_model._build = lambda path: _slow_build(path, builds)
    assert embedded_model.build_embedded_model(target) == target


def test_concurrent_builds_build_the_model_once(tmp_path):
    context = multiprocessing.get_context("fork")
    builds = context.Value("i", 0)
    target = tmp_path / "models" / "gemma-3-270m"
    processes = [context.Process(target=_build_with, args=(target, builds)) for _ in range(4)]
    try:
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=60)
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
    assert [process.exitcode for process in processes] == [0] * 4
    assert builds.value == 1
    assert sorted(path.name for path in target.parent.iterdir()) == ["gemma-3-270m"]  # no lock file left


def test_a_built_models_description_lists_its_files_not_snakemakes_timestamp(tmp_path):
    """The embedded model's folder is a directory() output, where Snakemake keeps a `.snakemake_timestamp`:
    the description (and so the GRID card's files column) lists the model's own files only."""
    folder = tmp_path / "gemma-3-270m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / ".snakemake_timestamp").touch()
    spec = ModelSpec(name="gemma", path=str(folder), embedded="gemma-3-270m")
    assert list(describe_model(spec)["files"]) == ["config.json"]
