"""The benchmarks, by config name. A new benchmark is one module implementing `Benchmark` plus one
line here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import UNPARSED, Benchmark, DataError, Item, ItemSet, draw_subset
from .bbq import BBQ
from .crows_pairs import CrowsPairs
from .toxigen import ToxiGen
from .truthfulqa import TruthfulQA
from .xstest import XSTest

if TYPE_CHECKING:
    from ..config import Settings

BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in (TruthfulQA(), BBQ(), CrowsPairs(), ToxiGen(), XSTest())}


def item_set(settings: Settings, name: str) -> ItemSet:
    """A benchmark's configured item subset and few-shot pool."""
    return BENCHMARKS[name].item_set(
        settings.data_dir,
        settings.n_items[name],
        settings.fewshot_pool,
        settings.subset_seed,
        where=f"benchmarks.{name}.n_items",
    )


def check_item_sets(settings: Settings) -> dict[str, int]:
    """Load every benchmark's data and draw its subset, so bad files or sizes fail before any job runs."""
    return {name: len(item_set(settings, name).items) for name in settings.benchmarks}


__all__ = [
    "BENCHMARKS",
    "UNPARSED",
    "Benchmark",
    "DataError",
    "Item",
    "ItemSet",
    "check_item_sets",
    "draw_subset",
    "item_set",
]
