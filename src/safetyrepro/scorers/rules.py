"""The scorer "rules": a benchmark's own label extraction (`Benchmark.extract`), which every benchmark has."""

from __future__ import annotations

from safetyrepro.core.scorer_names import RULES
from safetyrepro.scorers.base import Scorer


class Rules(Scorer):
    """The label the benchmark's `extract` reads off each reply; its code is the benchmark's."""

    name = RULES

    def label(self, benchmark, responses, items, models):
        return [benchmark.extract(response, item) for response, item in zip(responses, items)]
