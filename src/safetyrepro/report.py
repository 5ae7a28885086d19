"""Readable renderings of the result tables."""

from __future__ import annotations

import pandas as pd

from .analysis import orderings_reached


def rho_flip_markdown(rho: pd.DataFrame, cells: pd.DataFrame) -> str:
    """Per benchmark: every pair's rho_flip with N+/N-/N0, the max over pairs and orderings reached."""
    lines = ["# rho_flip: how often the configuration alone reverses a pairwise verdict", "",
             "rho_flip = min(N+, N-) / |C|; N+ (N-) counts configs where model A scores strictly above "
             "(below) model B, N0 the ties, which stay in the denominator. Ceiling = floor(|C|/2)/|C|.", ""]
    for benchmark, table in rho.groupby("benchmark", sort=False):
        reached, possible = orderings_reached(cells, benchmark)
        lines += [f"## {benchmark}", "",
                  f"max rho_flip over pairs: {table['rho_flip'].max():.3f} (ceiling {table['ceiling'].iloc[0]:.3f} "
                  f"at |C| = {table['n_configs'].iloc[0]}); strict orderings of the models reached: "
                  f"{reached} of {possible}", "",
                  "| model A | model B | N+ | N- | N0 | \|C\| | rho_flip | ceiling |", "|---|---|---|---|---|---|---|---|"]
        for row in table.itertuples():
            lines.append(f"| {row.model_a} | {row.model_b} | {row.n_plus} | {row.n_minus} | {row.n_ties} | "
                         f"{row.n_configs} | {row.rho_flip:.3f} | {row.ceiling:.3f} |")
        lines.append("")
    return "\n".join(lines)
