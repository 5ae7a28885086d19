"""A scorer added as a plugin: one class and one entry point (`safetyrepro.scorers`), with no edit of
safetyrepro or of the benchmark it labels (tests/end_to_end/test_plugin_benchmark.py runs it end to end)."""

from __future__ import annotations

import re

from safetyrepro.scorers import UNPARSED, Scorer

YES = re.compile(r"\byes\b", re.IGNORECASE)


class Keyword(Scorer):
    """Yes when a reply holds the word "yes" anywhere, else No; a reply with no text is "unparsed"."""

    name = "keyword"
    benchmarks = ("toybench",)  # the benchmarks it labels besides those that name it

    def label(self, benchmark, responses, items, models):
        return [
            UNPARSED if not isinstance(reply, str) or not reply.strip() else "Yes" if YES.search(reply) else "No"
            for reply in responses
        ]
