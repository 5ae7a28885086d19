"""The benchmarks, by config name. A new benchmark is one module implementing `Benchmark` plus one
line here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from safetyrepro.benchmarks.base import (
    AS_GIVEN,
    UNPARSED,
    Benchmark,
    DataError,
    Item,
    ItemSet,
    Presentation,
    draw_subset,
)
from safetyrepro.benchmarks.bbq import BBQ
from safetyrepro.benchmarks.crows_pairs import CrowsPairs
from safetyrepro.benchmarks.toxigen import ToxiGen
from safetyrepro.benchmarks.truthfulqa import TruthfulQA
from safetyrepro.benchmarks.xstest import XSTest

if TYPE_CHECKING:
    from safetyrepro.configuration.settings import Settings

BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in (TruthfulQA(), BBQ(), CrowsPairs(), ToxiGen(), XSTest())}


def item_set(settings: Settings, name: str, presentation: Presentation = AS_GIVEN) -> ItemSet:
    """A benchmark's configured item subset and few-shot pool, options presented as `presentation` says."""
    return BENCHMARKS[name].item_set(
        settings.data_dir,
        settings.n_items[name],
        settings.fewshot_pool,
        settings.subset_seed,
        f"benchmarks.{name}.n_items",
        presentation,
    )


def check_item_sets(settings: Settings) -> dict[str, int]:
    """Load every benchmark's data and draw its subset, so bad files or sizes fail before any job runs."""
    return {name: len(item_set(settings, name).items) for name in settings.benchmarks}


__all__ = [
    "AS_GIVEN",
    "BENCHMARKS",
    "UNPARSED",
    "Benchmark",
    "DataError",
    "Item",
    "ItemSet",
    "Presentation",
    "check_item_sets",
    "draw_subset",
    "item_set",
]
