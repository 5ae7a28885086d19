"""A synthetic cells table the shape of the full study: 612 cells, reusable by any analysis test."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pandas as pd
import yaml

from helpers.session import REPO
from safetyrepro.benchmarks import BENCHMARKS
from safetyrepro.configuration.envelope import Envelope
from safetyrepro.configuration.schema import apply_defaults, schema

MODELS = ("model-a", "model-b", "model-c")
FREEFORM_BENCHMARKS = ("truthfulqa", "bbq", "toxigen", "xstest")
LOGPROB_ONLY_BENCHMARKS = ("crows_pairs",)
TEMPLATES = ("T1", "T2", "T3", "T4")
DECODINGS = ("greedy", "t0.3", "t0.7")
SHOTS = ("0", "3", "5")
STRESS = (("template", "T4"), ("decoding", "t0.7"))
N_ITEMS = 200
ENVELOPE_FILE = REPO / "config" / "envelope.yaml"


def synthetic_configs(benchmark: str) -> list[dict[str, str]]:
    """36 freeform (T1-T4 x greedy/t0.3/t0.7 x 0/3/5 shots) + 12 logprob (greedy) configs, or only
    the 12 logprob ones for a logprob-only benchmark; tier stress when template T4 or decoding t0.7."""
    grid = []
    if benchmark not in LOGPROB_ONLY_BENCHMARKS:
        grid += [(t, d, s, "freeform") for t, d, s in itertools.product(TEMPLATES, DECODINGS, SHOTS)]
    grid += [(t, "greedy", s, "logprob") for t, s in itertools.product(TEMPLATES, SHOTS)]
    return [
        {
            "config_id": f"{t}-{d}-{s}shot-{sc}",
            "template": t,
            "decoding": d,
            "shots": s,
            "scoring": sc,
            "tier": "stress" if t == "T4" or d == "t0.7" else "core",
        }
        for t, d, s, sc in grid
    ]


def synthetic_cells(seed: int = 0) -> pd.DataFrame:
    """612 cells (5 benchmarks, 3 models; 48 configs each, 12 for crows_pairs) with scores from a
    seeded numpy generator: a per-model, per-benchmark level plus per-config noise, as accuracies over
    N_ITEMS items (so exact ties can occur); freeform parse rates between 0.85 and 1, logprob 1."""
    rng = np.random.default_rng(seed)
    rows = []
    for benchmark in (*FREEFORM_BENCHMARKS, *LOGPROB_ONLY_BENCHMARKS):
        levels = rng.uniform(0.5, 0.7, size=len(MODELS))
        for config in synthetic_configs(benchmark):
            freeform = config["scoring"] == "freeform"
            n_seeds = 3 if config["decoding"] != "greedy" else 1
            for model, level in zip(MODELS, levels):
                score = np.clip(level + rng.normal(0, 0.08), 0, 1)
                rows.append(
                    {
                        "model": model,
                        "benchmark": benchmark,
                        **config,
                        "score": round(score * N_ITEMS) / N_ITEMS,
                        "parse_rate": float(rng.uniform(0.85, 1.0)) if freeform else 1.0,
                        "n_items": N_ITEMS,
                        "n_seeds": n_seeds,
                    }
                )
    return pd.DataFrame(rows)


def synthetic_items(cells: pd.DataFrame, n_items: int = 300, n_strata: int = 9, seed: int = 0) -> pd.DataFrame:
    """Item rows for a cells table: `n_items` items per benchmark in `n_strata` strata, five seeds for
    sampled decodings (one otherwise), each item correct with probability equal to the cell's score."""
    rng = np.random.default_rng(seed)
    frames = []
    for cell in cells.itertuples():
        seeds = 5 if cell.decoding != "greedy" else 1
        frames.append(
            pd.DataFrame(
                {
                    "model": cell.model,
                    "benchmark": cell.benchmark,
                    "config_id": cell.config_id,
                    "item_id": np.tile([f"{cell.benchmark}-{i:03d}" for i in range(n_items)], seeds),
                    "stratum": np.tile([f"s{i % n_strata}" for i in range(n_items)], seeds),
                    "seed": np.repeat(np.arange(seeds), n_items),
                    "label": "A",
                    "parsed": True,
                    "correct": rng.random(n_items * seeds) < cell.score,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def envelope_configs(benchmark: str) -> list[dict[str, str]]:
    """The benchmark's configs in the repository's envelope (config/envelope.yaml, its validity rules
    and tier tags applied by safetyrepro.configuration.envelope): config_id, the four axes and tier."""
    raw = yaml.safe_load(ENVELOPE_FILE.read_text())
    apply_defaults(raw, schema("envelope"))
    envelope = Envelope.from_dict(raw, BENCHMARKS)
    return [config.as_dict() for config in envelope.configs(benchmark)]


def cells_from_orderings(
    benchmark: str,
    ordering_of: Callable[[dict[str, str]], tuple[str, ...]],
    parse_rate_of: Callable[[str, dict[str, str]], float] = lambda model, config: 1.0,
) -> pd.DataFrame:
    """Cells of `benchmark` on the real envelope in which each config's models score in the strict
    order ordering_of(config) gives, best first (scores 0.7, 0.6, 0.5, ...); parse_rate_of(model,
    config) gives each cell's parse rate (default 1). Rows come in model-name order, so the model
    pairs are (model-a, model-b), ... whatever the first config's ordering."""
    rows = []
    for config in envelope_configs(benchmark):
        ordering = ordering_of(config)
        for model in sorted(ordering):
            rank = ordering.index(model)
            rows.append(
                {
                    "model": model,
                    "benchmark": benchmark,
                    **config,
                    "score": 0.7 - 0.1 * rank,
                    "parse_rate": parse_rate_of(model, config),
                    "n_items": N_ITEMS,
                    "n_seeds": 1 if config["decoding"] == "greedy" else 5,
                }
            )
    return pd.DataFrame(rows)
