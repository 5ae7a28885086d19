"""The benchmarks, by config name. A new benchmark is one module implementing `Benchmark` plus one
line here."""

from .base import UNPARSED, Benchmark, DataError, Item, draw_subset
from .bbq import BBQ
from .crows_pairs import CrowsPairs
from .toxigen import ToxiGen
from .truthfulqa import TruthfulQA
from .xstest import XSTest

BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in (TruthfulQA(), BBQ(), CrowsPairs(), ToxiGen(), XSTest())}

__all__ = ["BENCHMARKS", "UNPARSED", "Benchmark", "DataError", "Item", "draw_subset"]
