"""Speed checks as ratios measured side by side (never absolute times): hostile inputs must cost about as much
as small ones of the same shape, which catastrophic backtracking or a full scan of a megabyte would not."""

from __future__ import annotations

import time
from collections.abc import Callable

# A megabyte may cost at most this many times a 10 kB input of the same shape (bounded scan windows
# make it ~1x; a linear scan would be ~100x, backtracking far more).
MAX_COST_RATIO = 20


def _best_time(func: Callable[[str], object], text: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        func(text)
        best = min(best, time.perf_counter() - start)
    return best


def cost_ratio(func: Callable[[str], object], big: str, small_chars: int = 10_000, repeats: int = 7) -> float:
    """Best-of-`repeats` time of `func(big)` over that of `func` on the first `small_chars` characters."""
    return _best_time(func, big, repeats) / max(_best_time(func, big[:small_chars], repeats), 1e-6)
