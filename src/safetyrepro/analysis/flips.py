"""Pure functions over the tidy tables: rho_flip, the orderings and rankings a configuration set reaches
and the total-order flip rate (two different quantities; see ``flip_rate``)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pandas as pd

RHO_COLUMNS = ["benchmark", "model_a", "model_b", "n_plus", "n_minus", "n_ties", "n_configs", "rho_flip", "ceiling"]
FLIP_RATE_COLUMNS = [
    "benchmark",
    "n_models",
    "n_configs",
    "n_tied",
    "n_strict",
    "orderings_reached",
    "rankings_reached",
    "n_pairs",
    "n_mismatched",
    "flip_rate",
    "null_flip_rate",
]
# Scores are means over items (and seeds); differences below this are float noise, i.e. ties.
TIE_TOLERANCE = 1e-9


def score_matrix(cells: pd.DataFrame, benchmark: str) -> pd.DataFrame:
    """Configs x models score table of one benchmark, models in their order of appearance."""
    frame = cells[cells["benchmark"] == benchmark]
    models = list(dict.fromkeys(frame["model"]))
    return frame.pivot(index="config_id", columns="model", values="score")[models]


def signs(a: pd.Series | pd.DataFrame, b: pd.Series | pd.DataFrame) -> pd.Series | pd.DataFrame:
    """Per config (and per column, for frames of resampled scores): +1 where A scores strictly above
    B, -1 strictly below, 0 a tie (|A - B| <= TIE_TOLERANCE); NaN where either score is missing."""
    diff = (a - b).astype(float)
    return np.sign(diff.mask(diff.abs() <= TIE_TOLERANCE, 0.0))


def rho_of_signs(sign: np.ndarray, axis: int = -1) -> np.ndarray:
    """rho_flip = min(N+, N-) / |C| along ``axis`` of `signs`' +1 / -1 / 0 (tie) arrays: ties stay in the
    denominator (the bootstrap's resamples, the grid model's draws)."""
    return np.minimum((sign > 0).sum(axis), (sign < 0).sum(axis)) / sign.shape[axis]


def minority_side(sign: pd.Series) -> pd.Series:
    """Configs that reverse the majority verdict, from `signs`: the minority side of N+ / N- (both
    sides when N+ = N-); ties reverse nothing. All False exactly when min(N+, N-) = 0."""
    above, below = sign > 0, sign < 0
    if not (above.any() and below.any()):
        return above & below
    return above if above.sum() < below.sum() else below if below.sum() < above.sum() else above | below


def sign_counts(a: pd.Series, b: pd.Series) -> tuple[int, int, int]:
    """(N+, N-, N0): configs where A scores strictly above, strictly below, equal to B."""
    sign = signs(a, b)
    return int((sign > 0).sum()), int((sign < 0).sum()), int((sign == 0).sum())


def rho_flip_table(cells: pd.DataFrame) -> pd.DataFrame:
    """rho_flip = min(N+, N-) / |C| per unordered model pair and benchmark, with N+, N-, N0 and the
    ceiling floor(|C|/2)/|C|. Only configs scored for both models count."""
    rows = []
    for benchmark in dict.fromkeys(cells["benchmark"]):
        matrix = score_matrix(cells, benchmark)
        for model_a, model_b in itertools.combinations(matrix.columns, 2):
            pair = matrix[[model_a, model_b]].dropna()
            n_plus, n_minus, n_ties = sign_counts(pair[model_a], pair[model_b])
            n = len(pair)
            rows.append(
                {
                    "benchmark": benchmark,
                    "model_a": model_a,
                    "model_b": model_b,
                    "n_plus": n_plus,
                    "n_minus": n_minus,
                    "n_ties": n_ties,
                    "n_configs": n,
                    "rho_flip": min(n_plus, n_minus) / n if n else math.nan,
                    "ceiling": (n // 2) / n if n else math.nan,
                }
            )
    return pd.DataFrame(rows, columns=RHO_COLUMNS)


def strict_ordering(scores: pd.Series) -> tuple[str, ...] | None:
    """Models from best to worst, or None when any two tie (or a score is missing)."""
    values = scores.to_numpy(dtype=float)
    order = np.argsort(-values, kind="stable")
    gaps = -np.diff(values[order])
    return tuple(scores.index.to_numpy()[order].tolist()) if (gaps > TIE_TOLERANCE).all() else None


def config_orderings(cells: pd.DataFrame, benchmark: str) -> tuple[list[tuple[str, ...] | None], int]:
    """(the strict ordering of each config scored for every model of the benchmark, None where two
    tie; the number of models k)."""
    matrix = score_matrix(cells, benchmark).dropna()
    return [strict_ordering(row) for _, row in matrix.iterrows()], matrix.shape[1]


def tolerant_ranks(scores: np.ndarray) -> tuple[int, ...]:
    """Dense ranks of one config's model scores (0 the lowest), scores within TIE_TOLERANCE of the next lower
    one tied (so float noise ties here exactly as in ``signs``): the config's ranking, ties included."""
    order = np.argsort(scores, kind="stable")
    groups = np.concatenate([[0], np.cumsum(np.diff(scores[order]) > TIE_TOLERANCE)])
    ranks = np.empty(len(scores), dtype=int)
    ranks[order] = groups
    return tuple(int(rank) for rank in ranks)


def rankings_possible(k: int) -> int:
    """How many rankings of k models there are when ties count (weak orderings: the ordered Bell number,
    1, 3, 13, 75 for k = 1..4)."""
    counts = [1]
    for n in range(1, k + 1):
        counts.append(sum(math.comb(n, i) * counts[n - i] for i in range(1, n + 1)))
    return counts[k]


def orderings_reached(cells: pd.DataFrame, benchmark: str) -> tuple[int, int]:
    """(distinct strict model orderings over the benchmark's configs, number possible = k!)."""
    orderings, k = config_orderings(cells, benchmark)
    return len(set(orderings) - {None}), math.factorial(k)


def flip_rate(cells: pd.DataFrame) -> pd.DataFrame:
    """Total-order flip rate per benchmark (the paper's "flip rate", §4): NOT rho_flip.

    Over the configs scored for every model of the benchmark, each config's strict total ordering of
    the models (``strict_ordering``) is taken; configs where any two models tie have none and are left
    out (counted in ``n_tied``). Over all ``n_pairs`` = n_strict (n_strict - 1) / 2 unordered pairs of
    distinct remaining configs, ``flip_rate`` = n_mismatched / n_pairs, the share of pairs whose two
    orderings differ (NaN with fewer than two strict configs). If each config's ordering were drawn
    uniformly from the k! orderings, a pair would match with probability 1/k!, so the expected flip
    rate is ``null_flip_rate`` = 1 - 1/k! (5/6 for three models). rho_flip, by contrast, is the
    minority strict-sign mass of ONE model pair (``rho_flip_table``). ``orderings_reached`` counts the
    distinct strict orderings, as ``orderings_reached`` does; ``rankings_reached`` the distinct rankings of
    all ``n_configs``, ties included (``tolerant_ranks``: a > b = c, a > b > c and a = b = c are three).
    """
    rows = []
    for benchmark in dict.fromkeys(cells["benchmark"]):
        orderings, k = config_orderings(cells, benchmark)
        rankings = {tolerant_ranks(row) for row in score_matrix(cells, benchmark).dropna().to_numpy(dtype=float)}
        counts = Counter(ordering for ordering in orderings if ordering is not None)
        n = sum(counts.values())
        n_pairs = n * (n - 1) // 2
        same = sum(c * (c - 1) // 2 for c in counts.values())
        rows.append(
            {
                "benchmark": benchmark,
                "n_models": k,
                "n_configs": len(orderings),
                "n_tied": len(orderings) - n,
                "n_strict": n,
                "orderings_reached": len(counts),
                "rankings_reached": len(rankings),
                "n_pairs": n_pairs,
                "n_mismatched": n_pairs - same,
                "flip_rate": (n_pairs - same) / n_pairs if n_pairs else math.nan,
                "null_flip_rate": 1 - 1 / math.factorial(k),
            }
        )
    return pd.DataFrame(rows, columns=FLIP_RATE_COLUMNS)
