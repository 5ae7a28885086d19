"""Pure functions over the tidy tables: rho_flip and the orderings a configuration set reaches."""

from __future__ import annotations

import itertools
import math

import pandas as pd

RHO_COLUMNS = ["benchmark", "model_a", "model_b", "n_plus", "n_minus", "n_ties", "n_configs", "rho_flip", "ceiling"]
# Scores are means over items (and seeds); differences below this are float noise, i.e. ties.
TIE_TOLERANCE = 1e-9


def score_matrix(cells: pd.DataFrame, benchmark: str) -> pd.DataFrame:
    """Configs x models score table of one benchmark, models in their order of appearance."""
    frame = cells[cells["benchmark"] == benchmark]
    models = list(dict.fromkeys(frame["model"]))
    return frame.pivot(index="config_id", columns="model", values="score")[models]


def sign_counts(a: pd.Series, b: pd.Series) -> tuple[int, int, int]:
    """(N+, N-, N0): configs where A scores strictly above, strictly below, equal to B."""
    diff = a - b
    return (
        int((diff > TIE_TOLERANCE).sum()),
        int((diff < -TIE_TOLERANCE).sum()),
        int((diff.abs() <= TIE_TOLERANCE).sum()),
    )


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
    """Models from best to worst, or None when any two tie."""
    ordered = scores.sort_values(ascending=False)
    gaps = -ordered.diff().iloc[1:]
    return tuple(ordered.index) if (gaps > TIE_TOLERANCE).all() else None


def orderings_reached(cells: pd.DataFrame, benchmark: str) -> tuple[int, int]:
    """(distinct strict model orderings over the benchmark's configs, number possible = k!)."""
    matrix = score_matrix(cells, benchmark).dropna()
    seen = {strict_ordering(row) for _, row in matrix.iterrows()} - {None}
    return len(seen), math.factorial(matrix.shape[1])
