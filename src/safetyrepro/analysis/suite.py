"""The analyses the workflow runs, by name: each turns the tidy tables into one tidy table.

An entry names the function that computes it (in this package, taking `Inputs`) and the `analysis`
options it reads; its module is the code its job's outputs depend on (safetyrepro.fingerprints).
Modules are imported only when an analysis runs, so listing them is cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from ..config import Settings


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
            self._items = pd.read_parquet(
                self.items_path, columns=["model", "benchmark", "config_id", "item_id", "stratum", "seed", "correct"]
            )
        return self._items


@dataclass(frozen=True)
class Analysis:
    """One analysis: what it reports, the function computing it ("module:function"), the options it reads."""

    description: str
    function: str
    options: tuple[str, ...] = ()

    @property
    def module(self) -> str:
        """The module that computes it, e.g. safetyrepro.analysis.variance."""
        return f"{__package__}.{self.function.partition(':')[0]}"

    def run(self, inputs: Inputs) -> pd.DataFrame:
        """Compute the table."""
        return getattr(import_module(self.module), self.function.partition(":")[2])(inputs)


ANALYSES: dict[str, Analysis] = {
    "proposition1": Analysis(
        "Proposition 1 per pair and benchmark: D1 (no strict reversal), D2 (a single sign verdict), and whether "
        "rho_flip sits at its ceiling for that |C| (saturated).",
        "verdicts:proposition1_table",
    ),
    "tiers": Analysis(
        "Tier ablation: rho_flip max and orderings reached on the full envelope, the core tier, and the envelope "
        "without each stress value (tiers from the envelope's tags).",
        "verdicts:tiers_table",
    ),
    "scoring_paths": Analysis(
        "Scoring-path slices: the same on free-form-only and logprob-only configs, with |C|.",
        "verdicts:scoring_paths_table",
    ),
    "parse_clean": Analysis(
        "Parse-clean recomputation: configs where every model's parse rate reaches the threshold.",
        "verdicts:parse_clean_table",
        ("parse_threshold",),
    ),
    "kendall_tau": Analysis(
        "Kendall tau_R: mean Kendall tau between the model rankings of every two configs.", "verdicts:kendall_tau_table"
    ),
    "variance": Analysis(
        "Variance attribution: Type II ANOVA shares of score (free-form slice) for model, implementation axes, "
        "interactions and residual; rho = implementation share / model share.",
        "variance:variance_table",
    ),
    "subsample": Analysis(
        "Item-subsample stability: stratified subsamples of the items re-scored from items.parquet; per-cell score "
        "range and whether any config's model ordering changes.",
        "stability:subsample_table",
        ("subsample",),
    ),
    "bootstrap": Analysis(
        "Bootstrap over configs: percentile interval of rho_flip per pair and benchmark (uncertainty over the "
        "envelope's configs, not over items).",
        "verdicts:bootstrap_table",
        ("bootstrap",),
    ),
    "conservative_core": Analysis(
        "Conservative core sub-envelope (analysis.conservative_core): rho_flip and orderings.",
        "verdicts:conservative_core_table",
        ("conservative_core",),
    ),
    "shap": Analysis(
        "Surrogate attribution: LightGBM on the axes (+ model) and SHAP mean |value| per axis. A surrogate that "
        "localises which axis moves scores, not the headline.",
        "attribution:shap_table",
        ("shap", "shap_seed"),
    ),
    "precision": Analysis(
        "Precision comparison: the same model at two precisions, paired per-config score differences and how "
        "often the model ordering matches.",
        "precision:precision_table",
    ),
}
