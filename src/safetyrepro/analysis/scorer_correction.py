"""Rates corrected for a scorer's errors with a sample of human labels, and the verdicts between two models they give
(docs/scorers.md, "Correcting for the scorer's errors").

A model's replies are a population of N; the scorer gives each an outcome f_i (1 where its label makes the reply
count as handled correctly, the benchmark's `is_correct`), and people label a simple random sample of n of them,
giving y_i. The rate the human labels would give all N replies is estimated by

    mean over the N of f  +  mean over the n of (y - f),

prediction-powered inference's estimator of a mean (Angelopoulos et al., Science 2023) with the labelled replies
drawn from the replies scored, which survey sampling calls the difference estimator (Cochran 1977, section 7.8):
unbiased whatever the scorer's errors, since the second term measures them where people looked. Its variance is
s^2 / n (1 - n / N), s^2 the spread of the residuals y - f (the finite population correction: the N replies are all
there is to estimate, not a draw). The 90% interval is Student's t on n - 1 degrees of freedom.

A good scorer's residuals are mostly 0, and a sample of 50 may hold no disagreement at all: its spread would be 0
and the interval a point that misses the truth. The spread is therefore that of the residuals' three values
(-1, 0, +1) with one disagreement of each sign added to their counts: the estimate is left as it is, the interval
never has zero width. One, not a half (Jeffreys'), was chosen on synthetic populations alone (the grid of
`scripts/measure_scorer_correction.py`: a half covered 0.855 at worst there, one 0.914); XSTest's labelled
completions were then measured as held out (the docs' table).

A verdict between two models compares their corrected rates, whose label samples are drawn apart: the interval of
the difference has the two variances summed (Welch's degrees of freedom); it names the model whose corrected rate is
higher where it excludes 0, and is "undecided" where it does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

LEVEL = 0.90
PSEUDO_DISAGREEMENTS = 1.0  # added to the count of each sign of disagreement, for the spread only
UNDECIDED = "undecided"


@dataclass(frozen=True)
class CorrectedRate:
    """A rate corrected with human labels: the scorer's own rate, the estimate, its interval and variance, and how
    many labelled replies, of how many, it came from."""

    scorer_rate: float
    estimate: float
    low: float
    high: float
    variance: float  # of the estimate
    labels: int
    replies: int


def corrected_rate(
    scorer_outcomes: Sequence[float],
    labelled: Sequence[int],
    human_outcomes: Sequence[float],
    level: float = LEVEL,
    pseudo: float = PSEUDO_DISAGREEMENTS,
) -> CorrectedRate:
    """The human rate of a model's replies estimated from the scorer's outcomes on all of them (`scorer_outcomes`,
    0/1) and people's on those at positions `labelled` (distinct, a simple random sample), with its `level`
    interval, clipped to [0, 1]; `pseudo` disagreements of each sign are added to the spread's counts."""
    f = np.asarray(scorer_outcomes, dtype=float)
    positions = np.asarray(labelled, dtype=int)
    y = np.asarray(human_outcomes, dtype=float)
    if len(positions) != len(y) or len(set(positions.tolist())) != len(positions):
        raise ValueError("give one human outcome for each labelled reply, each reply once")
    if len(positions) and not (0 <= positions.min() and positions.max() < len(f)):
        raise ValueError(f"a labelled position is not one of the {len(f)} replies")
    if len(positions) < 2:
        raise ValueError(f"at least 2 human labels are needed, {len(positions)} given")
    if not (np.isin(f, (0.0, 1.0)).all() and np.isin(y, (0.0, 1.0)).all()):
        raise ValueError("scorer and human outcomes must be 0 or 1")
    residuals = y - f[positions]
    n, size = len(positions), len(f)
    counts = np.array([(residuals < 0).sum(), (residuals == 0).sum(), (residuals > 0).sum()], dtype=float)
    counts += (pseudo, 0.0, pseudo)
    shares, values = counts / counts.sum(), np.array([-1.0, 0.0, 1.0])
    spread = float(shares @ values**2 - (shares @ values) ** 2) * n / (n - 1)
    variance = spread / n * (1 - n / size)
    estimate = float(f.mean() + residuals.mean())
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * variance**0.5
    return CorrectedRate(
        float(f.mean()), estimate, max(0.0, estimate - half), min(1.0, estimate + half), variance, n, size
    )


def corrected_verdict(a: CorrectedRate, b: CorrectedRate, level: float = LEVEL) -> tuple[float, float, float, str]:
    """The difference of two corrected rates (a - b), its `level` interval (Welch-Satterthwaite degrees of
    freedom) and the verdict: "a" or "b" for the model ahead where the interval excludes 0, else UNDECIDED."""
    difference, variance = a.estimate - b.estimate, a.variance + b.variance
    parts = [a.variance**2 / (a.labels - 1), b.variance**2 / (b.labels - 1)]
    freedom = variance**2 / sum(parts) if sum(parts) > 0 else float(min(a.labels, b.labels) - 1)
    half = float(stats.t.ppf(0.5 + level / 2, freedom)) * variance**0.5
    low, high = difference - half, difference + half
    return difference, low, high, "a" if low > 0 else "b" if high < 0 else UNDECIDED
