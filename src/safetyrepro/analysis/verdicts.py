"""How stable "A beats B" verdicts are: Proposition 1 checks, envelope variants (tier ablation,
scoring-path slices, parse-clean subset, conservative core), the total-order flip rate, Kendall tau
between config rankings and a config bootstrap of rho_flip. Pure functions over the cells table
built on ``flips``."""

from __future__ import annotations

import itertools
import math
import zlib
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from safetyrepro.analysis.flips import (
    RHO_COLUMNS,
    flip_rate,
    rankings_possible,
    rho_flip_table,
    rho_of_signs,
    score_matrix,
    signs,
    tolerant_ranks,
)
from safetyrepro.analysis.frames import stack_named

if TYPE_CHECKING:
    from safetyrepro.analysis.suite import Inputs

SUMMARY_COLUMNS = [
    "variant",
    "benchmark",
    "n_configs",
    "rho_flip_max",
    "orderings_reached",
    "orderings_possible",
    "rankings_reached",
    "rankings_possible",
    "flip_rate",
]
TAU_COLUMNS = ["benchmark", "n_configs", "n_undefined", "n_pairs", "mean_tau"]
BOOT_COLUMNS = ["benchmark", "model_a", "model_b", "rho_flip", "low", "high", "n_boot"]


def proposition1(rho: pd.DataFrame) -> pd.DataFrame:
    """The rho_flip table plus ``d1`` (no strict reversal: N+ = 0 or N- = 0), ``d2`` (one sign verdict
    over the envelope: exactly one of N+, N-, N0 non-zero; implies d1) and ``saturated`` (rho_flip at
    its ceiling floor(|C|/2)/|C| and > 0). A pair with no configs is vacuously d1, not d2."""
    out = rho.copy()
    n_plus, n_minus, n_ties = (out[column].astype(int) for column in ("n_plus", "n_minus", "n_ties"))
    reversals = np.minimum(n_plus, n_minus)
    out["d1"] = (reversals == 0).astype(bool)
    out["d2"] = ((n_plus > 0).astype(int) + (n_minus > 0).astype(int) + (n_ties > 0).astype(int) == 1).astype(bool)
    # compared as counts, not floats: rho == ceiling  <=>  min(N+, N-) == floor(|C| / 2)
    out["saturated"] = ((reversals == out["n_configs"].astype(int) // 2) & (reversals > 0)).astype(bool)
    return out


def envelope_variants(cells: pd.DataFrame, stress_values: list[tuple[str, str]]) -> dict[str, pd.DataFrame]:
    """Subsets of ``cells`` for the tier ablation: ``full``, ``core`` (tier == core) and one
    ``without <axis>=<value>`` per stress value given by the caller (values compared as strings, so
    ``("shots", "5")`` matches an integer column too; a value absent from the table leaves the full set)."""
    variants = {"full": cells, "core": cells[cells["tier"] == "core"]}
    for axis, value in stress_values:
        variants[f"without {axis}={value}"] = cells[cells[axis].astype(str) != str(value)]
    return variants


def scoring_slices(cells: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """One subset per scoring path present (``freeform``, ``logprob``), in order of appearance; a
    benchmark with no config on a path is simply absent from that slice."""
    return {value: cells[cells["scoring"] == value] for value in dict.fromkeys(cells["scoring"])}


def variant_summary(variants: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per variant and benchmark: n_configs (configs scored for every model of the benchmark),
    the largest rho_flip over model pairs, the strict orderings reached / possible (k!), the rankings
    reached / possible with ties counted (``flips.rankings_possible``: a config with a tie counts too) and the
    total-order flip rate (``flips.flip_rate``: share of config pairs whose strict orderings differ;
    a different quantity from rho_flip)."""
    rows = []
    for name, frame in variants.items():
        rho_max = rho_flip_table(frame).groupby("benchmark", sort=False)["rho_flip"].max()
        for rate in flip_rate(frame).itertuples():  # one row per benchmark, with the orderings reached
            rows.append(
                {
                    "variant": name,
                    "benchmark": rate.benchmark,
                    "n_configs": rate.n_configs,
                    "rho_flip_max": rho_max.get(rate.benchmark, math.nan),
                    "orderings_reached": rate.orderings_reached,
                    "orderings_possible": math.factorial(rate.n_models),
                    "rankings_reached": rate.rankings_reached,
                    "rankings_possible": rankings_possible(rate.n_models),
                    "flip_rate": rate.flip_rate,
                }
            )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def parse_clean(cells: pd.DataFrame, threshold: float = 0.95) -> pd.DataFrame:
    """``variant_summary`` of the configs (per benchmark) where every model's parse_rate >= threshold
    (a missing parse rate fails), plus ``n_configs_before``. A benchmark losing every config stays,
    with n_configs 0, rho_flip_max NaN and no orderings reached."""
    name = f"parse_rate >= {threshold:g}"
    passes = (cells["parse_rate"] >= threshold).groupby([cells["benchmark"], cells["config_id"]]).transform("all")
    possible = ["orderings_possible", "rankings_possible"]
    after = variant_summary({name: cells[passes]}).drop(columns=possible)
    before = variant_summary({name: cells})[["variant", "benchmark", "n_configs", *possible]]
    out = before.rename(columns={"n_configs": "n_configs_before"}).merge(after, on=["variant", "benchmark"], how="left")
    counts = {"n_configs": 0, "orderings_reached": 0, "rankings_reached": 0}
    out = out.fillna(counts).astype(dict.fromkeys(counts, int))
    return out[[*SUMMARY_COLUMNS, "n_configs_before"]]


def kendall_tau(cells: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark, the mean Kendall tau-b (``scipy.stats.kendalltau``) between the model rankings of
    every pair of configs scored for every model. Configs whose models all tie (tau undefined) are
    left out and counted in ``n_undefined``; n_pairs counts the pairs of the remaining configs."""
    from scipy.stats import kendalltau  # here, not at the top: importing scipy.stats takes most of a second

    rows = []
    for benchmark in dict.fromkeys(cells["benchmark"]):
        matrix = score_matrix(cells, benchmark).dropna()
        ranks = [tolerant_ranks(row) for row in matrix.to_numpy(dtype=float)]
        defined = [r for r in ranks if len(set(r)) > 1]
        taus: dict[tuple, float] = {}  # few distinct rankings: compute each pair of patterns once
        values = []
        for x, y in itertools.combinations(defined, 2):
            key = (x, y) if x <= y else (y, x)
            if key not in taus:
                taus[key] = float(kendalltau(*key).statistic)
            values.append(taus[key])
        rows.append(
            {
                "benchmark": benchmark,
                "n_configs": len(ranks),
                "n_undefined": len(ranks) - len(defined),
                "n_pairs": len(values),
                "mean_tau": float(np.mean(values)) if values else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=TAU_COLUMNS)


def bootstrap_rho(cells: pd.DataFrame, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """rho_flip per pair with a percentile bootstrap interval (``scipy.stats.bootstrap``): the configs
    scored for both models are resampled with replacement, one set of resamples per benchmark shared by
    all pairs with the same configs (all pairs, when no cell is missing). Each benchmark draws from its
    own ``numpy`` Generator seeded by (seed, crc32 of its name), so its intervals do not depend on the
    other benchmarks in the table. With fewer than two configs the interval is the point estimate
    (NaN with none). A percentile interval need not contain the point estimate in general (rho_flip
    is a minimum, biased down under resampling near its ceiling when |C| is large)."""
    from scipy.stats import bootstrap  # here, not at the top, as in kendall_tau

    point = rho_flip_table(cells)
    bounds = []
    for benchmark in dict.fromkeys(cells["benchmark"]):
        matrix = score_matrix(cells, benchmark)
        pairs = list(itertools.combinations(matrix.columns, 2))
        if not pairs:
            continue
        pair_signs = np.stack([signs(matrix[a], matrix[b]).to_numpy(dtype=float) for a, b in pairs])
        scored = ~np.isnan(pair_signs)
        rng = np.random.default_rng([seed, zlib.crc32(str(benchmark).encode())])
        low, high = np.full(len(pairs), np.nan), np.full(len(pairs), np.nan)
        groups: dict[bytes, list[int]] = {}  # pairs scored on the same configs
        for index, mask in enumerate(scored):
            groups.setdefault(mask.tobytes(), []).append(index)
        for members in groups.values():
            sample = pair_signs[np.ix_(members, scored[members[0]])]
            if sample.shape[1] >= 2:
                result = bootstrap(
                    (sample,),
                    rho_of_signs,
                    n_resamples=n_boot,
                    vectorized=True,
                    axis=-1,
                    method="percentile",
                    confidence_level=level,
                    rng=rng,
                )
                low[members], high[members] = result.confidence_interval
            elif sample.shape[1] == 1:
                low[members] = high[members] = rho_of_signs(sample)
        bounds += [
            {"benchmark": benchmark, "model_a": a, "model_b": b, "low": float(lo), "high": float(hi)}
            for (a, b), lo, hi in zip(pairs, low, high)
        ]
    out = point.merge(
        pd.DataFrame(bounds, columns=["benchmark", "model_a", "model_b", "low", "high"]),
        on=["benchmark", "model_a", "model_b"],
        how="left",
    )
    out["n_boot"] = n_boot
    return out[BOOT_COLUMNS]


def subenvelope(cells: pd.DataFrame, config_ids: list[str]) -> dict[str, pd.DataFrame]:
    """The analysis restricted to the given configs (e.g. the conservative core). Returns a dict:
    ``summary`` (``variant_summary`` row per benchmark, variant ``subenvelope``) and ``rho`` (the
    rho_flip table of the subset with ``proposition1`` columns). Ids absent from a benchmark simply
    do not count; n_configs says how many were found."""
    subset = cells[cells["config_id"].isin(list(config_ids))]
    return {
        "summary": variant_summary({"subenvelope": subset}),
        "rho": proposition1(rho_flip_table(subset))[[*RHO_COLUMNS, "d1", "d2", "saturated"]],
    }


# ------------------------------------------------------------------ the suite's entries (safetyrepro.analysis.suite)
def proposition1_table(inputs: Inputs) -> pd.DataFrame:
    return proposition1(rho_flip_table(inputs.cells))


def tiers_table(inputs: Inputs) -> pd.DataFrame:
    return variant_summary(envelope_variants(inputs.cells, inputs.design.stress_values))


def scoring_paths_table(inputs: Inputs) -> pd.DataFrame:
    return variant_summary(scoring_slices(inputs.cells))


def parse_clean_table(inputs: Inputs) -> pd.DataFrame:
    return parse_clean(inputs.cells, inputs.settings.analysis.parse_threshold)


def flip_rate_table(inputs: Inputs) -> pd.DataFrame:
    return flip_rate(inputs.cells)


def kendall_tau_table(inputs: Inputs) -> pd.DataFrame:
    return kendall_tau(inputs.cells)


def bootstrap_table(inputs: Inputs) -> pd.DataFrame:
    options = inputs.settings.analysis.bootstrap
    return bootstrap_rho(inputs.cells, n_boot=options.resamples, seed=options.seed, level=options.level)


def conservative_core_table(inputs: Inputs) -> pd.DataFrame:
    result = subenvelope(inputs.cells, list(inputs.settings.analysis.conservative_core))
    return stack_named(result, "table") if isinstance(result, dict) else result
