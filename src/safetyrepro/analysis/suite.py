"""The analyses the workflow runs, by name: each turns the tidy tables into one tidy table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from ..config import Settings
from . import attribution, flips, precision, stability, variance, verdicts


@dataclass
class Inputs:
    """What an analysis may read: the checked settings, cells.parquet and (lazily) items.parquet."""

    settings: Settings
    cells: pd.DataFrame
    items_path: str

    @property
    def items(self) -> pd.DataFrame:
        """items.parquet, read on first use (only the subsample analysis needs it)."""
        if not hasattr(self, "_items"):
            self._items = pd.read_parquet(self.items_path, columns=["model", "benchmark", "config_id", "item_id",
                                                                    "stratum", "seed", "correct"])
        return self._items

    @property
    def options(self) -> dict:
        """The config's `analysis` section."""
        return self.settings.raw.get("analysis", {})


def _parts(parts: dict[str, pd.DataFrame], key: str) -> pd.DataFrame:
    """Stack named frames into one, the name in a first column `key`."""
    frames = [frame.assign(**{key: name}) for name, frame in parts.items() if len(frame)]
    if not frames:
        return pd.DataFrame(columns=[key])
    stacked = pd.concat(frames, ignore_index=True)
    return stacked[[key] + [c for c in stacked.columns if c != key]]


def stress_values(settings: Settings) -> list[tuple[str, str]]:
    """(axis, value) of every value the envelope tags `stress`."""
    return [(axis, value) for axis, values in settings.envelope.axes.items()
            for value, params in values.items() if params["tier"] == "stress"]


def analysis_seeds(options: dict) -> dict[str, int]:
    """The random seeds the analyses use, from the config's `analysis` section (SHAP's is fixed)."""
    return {"subsample": options.get("subsample", {}).get("seed", 0),
            "bootstrap": options.get("bootstrap", {}).get("seed", 0), "shap": 0}


def _tiers(inputs: Inputs) -> pd.DataFrame:
    variants = verdicts.envelope_variants(inputs.cells, stress_values(inputs.settings))
    return verdicts.variant_summary(variants)


def _subsample(inputs: Inputs) -> pd.DataFrame:
    options = inputs.options.get("subsample", {})
    per_cell, per_benchmark = stability.subsample_stability(
        inputs.items, inputs.cells, n_subsamples=options.get("count", 20), fraction=options.get("fraction", 0.8),
        seed=analysis_seeds(inputs.options)["subsample"])
    return per_benchmark


def _bootstrap(inputs: Inputs) -> pd.DataFrame:
    options = inputs.options.get("bootstrap", {})
    return verdicts.bootstrap_rho(inputs.cells, n_boot=options.get("resamples", 1000),
                                  seed=analysis_seeds(inputs.options)["bootstrap"], level=options.get("level", 0.95))


def _conservative_core(inputs: Inputs) -> pd.DataFrame:
    core = inputs.options.get("conservative_core") or []
    result = verdicts.subenvelope(inputs.cells, core)
    return _parts(result, "table") if isinstance(result, dict) else result


def _shap(inputs: Inputs) -> pd.DataFrame:
    if not inputs.options.get("shap", True):
        return pd.DataFrame({"note": ["SHAP attribution switched off (analysis.shap: false)"]})
    return attribution.shap_attribution(inputs.cells, seed=analysis_seeds(inputs.options)["shap"])


def _precision(inputs: Inputs) -> pd.DataFrame:
    differences, orderings = precision.precision_pairs(inputs.cells, inputs.settings.raw["models"])
    return _parts({"differences": differences, "orderings": orderings}, "table")


ANALYSES: dict[str, tuple[str, Callable[[Inputs], pd.DataFrame]]] = {
    "proposition1": ("Proposition 1 per pair and benchmark: D1 (no strict reversal), D2 (a single sign verdict), "
                     "and whether rho_flip sits at its ceiling for that |C| (saturated).",
                     lambda i: verdicts.proposition1(flips.rho_flip_table(i.cells))),
    "tiers": ("Tier ablation: rho_flip max and orderings reached on the full envelope, the core tier, and the "
              "envelope without each stress value (tiers from the envelope's tags).", _tiers),
    "scoring_paths": ("Scoring-path slices: the same on free-form-only and logprob-only configs, with |C|.",
                      lambda i: verdicts.variant_summary(verdicts.scoring_slices(i.cells))),
    "parse_clean": ("Parse-clean recomputation: configs where every model's parse rate reaches the threshold.",
                    lambda i: verdicts.parse_clean(i.cells, i.options.get("parse_threshold", 0.95))),
    "kendall_tau": ("Kendall tau_R: mean Kendall tau between the model rankings of every two configs.",
                    lambda i: verdicts.kendall_tau(i.cells)),
    "variance": ("Variance attribution: Type II ANOVA shares of score (free-form slice) for model, implementation "
                 "axes, interactions and residual; rho = implementation share / model share.",
                 lambda i: variance.variance_shares(i.cells)),
    "subsample": ("Item-subsample stability: stratified subsamples of the items re-scored from items.parquet; "
                  "per-cell score range and whether any config's model ordering changes.", _subsample),
    "bootstrap": ("Bootstrap over configs: percentile interval of rho_flip per pair and benchmark (uncertainty "
                  "over the envelope's configs, not over items).", _bootstrap),
    "conservative_core": ("Conservative core sub-envelope (analysis.conservative_core): rho_flip and orderings.",
                          _conservative_core),
    "shap": ("Surrogate attribution: LightGBM on the axes (+ model) and SHAP mean |value| per axis. A surrogate "
             "that localises which axis moves scores, not the headline.", _shap),
    "precision": ("Precision comparison: the same model at two precisions, paired per-config score differences "
                  "and how often the model ordering matches.", _precision),
}
