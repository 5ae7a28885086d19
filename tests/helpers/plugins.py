"""Throwaway installed distributions that register plugins under an entry point, and a minimal benchmark."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from safetyrepro.benchmarks import GROUP
from safetyrepro.plugins import Registry


def register(
    root: Path, distribution: str, entries: dict[str, str], modules: dict[str, str], group: str = GROUP
) -> None:
    """A throwaway installed distribution under `root`: its metadata, entry points (under `group`) and modules. Its
    folder is named as installers name it (`-` in the name as `_`: importlib.metadata reads the name up to the first
    `-` of the folder's, and keeps one distribution per name)."""
    info = root / f"{distribution.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}")
    for module, code in modules.items():
        (root / f"{module}.py").write_text(code)


MINI = """
from safetyrepro.benchmarks import Benchmark, DataFile


class Mini(Benchmark):
    name = "{name}"
    folder = "mini"
    task = "t"
    data_files = (DataFile("{path}", "0" * 64, url="file:///nowhere/mini.csv"),)

    def load(self, data_dir):
        raise NotImplementedError

    def make_item(self, row, seed, presentation=None):
        raise NotImplementedError
"""


def rediscovered(discovered: Callable[[], Registry]) -> Registry:
    """A registry read afresh (the throwaway plugins on sys.path found), its cache cleared again after, so that
    the next reader finds only what is installed."""
    discovered.cache_clear()
    try:
        return discovered()
    finally:
        discovered.cache_clear()
