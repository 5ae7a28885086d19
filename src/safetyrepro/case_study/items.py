"""The case study's items: one fixed subset per benchmark, seen by every package in the same form."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from safetyrepro.benchmarks import BENCHMARKS, Item
from safetyrepro.configuration.settings import Settings


@dataclass(frozen=True)
class CaseItem:
    """One evaluated item as each package needs it.

    `item` is our pipeline's item (letters over shuffled options). `question` is the bare question,
    the item's own text (BBQ: context, blank line, question), `options` the option texts in the item's
    letter order, and `record` the raw data row, written out for lm-eval's own task definitions.
    """

    item: Item
    question: str
    options: tuple[str, ...]
    record: Mapping[str, Any]

    @property
    def gold_index(self) -> int:
        """Position of the right option in `options`."""
        return self.item.labels.index(self.item.gold)


def case_items(settings: Settings, benchmark: str, n_items: int) -> list[CaseItem]:
    """The benchmark's stratified subset drawn at `n_items` (same seed and few-shot pool as the grid, so
    with equal counts the grid's items and these are the same)."""
    bench = BENCHMARKS[benchmark]
    evaluated, _ = bench.subset(
        settings.data_dir, n_items, settings.fewshot_pool, settings.subset_seed, where="case_study.n_items"
    )
    out = []
    for row in evaluated.to_dict("records"):
        item = bench.make_item(row, settings.subset_seed)
        options = tuple(item.meta["options"][label] for label in item.labels)
        out.append(CaseItem(item, item.text, options, row))
    return out
