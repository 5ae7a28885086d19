"""The analyses the workflow runs, by name: each turns the tidy tables into one tidy table.

An entry names the function that computes it (in this package, taking `Inputs`) and the `analysis`
options it reads; its module is the code its job's outputs depend on (safetyrepro.pipeline.fingerprints).
Modules are imported only when an analysis runs, so listing them is cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING

import pandas as pd

from safetyrepro.results.aggregate import CELL_COLUMNS
from safetyrepro.running.cell import ITEM_COLUMNS

if TYPE_CHECKING:
    from safetyrepro.configuration.envelope import Envelope
    from safetyrepro.configuration.settings import Settings


@dataclass(frozen=True)
class Design:
    """What the analyses need to know of the grid's design: its axes (built-in first), the (axis, value)
    pairs tagged stress, and the decodings that are greedy. A run's comes from its envelope; imported
    results carry theirs in cells.parquet (safetyrepro.results.storage.read_design)."""

    axis_names: list[str]
    stress_values: list[tuple[str, str]]
    greedy: list[str]

    @classmethod
    def of_envelope(cls, envelope: Envelope) -> Design:
        """The design of a run's envelope (greedy: the decodings at temperature 0)."""
        greedy = [name for name, params in envelope.axes["decoding"].items() if float(params["temperature"]) == 0]
        return cls(envelope.axis_names, envelope.stress_values(), greedy)

    @classmethod
    def imported(cls, design: dict) -> Design:
        """The design written with imported cells."""
        return cls(list(design["axes"]), [tuple(pair) for pair in design["stress_values"]], list(design["greedy"]))


@dataclass
class Inputs:
    """What an analysis may read.

    Attributes:
        settings: the run's checked settings.
        cells: cells.parquet, one row per cell.
        items_path: items.parquet, read on first use (`items`).
        probe_path: precision_probe.parquet, or None without a precision probe (`probe_cells`).
        imported_design: the design of imported cells; None for a run's, whose design is its envelope's (`design`).
    """

    settings: Settings
    cells: pd.DataFrame
    items_path: str
    probe_path: str | None = None
    imported_design: dict | None = None

    @property
    def design(self) -> Design:
        """The grid's design: the imported one, else the envelope's."""
        if self.imported_design is not None:
            return Design.imported(self.imported_design)
        return Design.of_envelope(self.settings.envelope)

    @property
    def items(self) -> pd.DataFrame:
        """items.parquet, read on first use (by the analyses of items)."""
        if not hasattr(self, "_items"):
            self._items = pd.read_parquet(
                self.items_path,
                columns=["model", "benchmark", "config_id", "item_id", "stratum", "seed", "correct", "label"],
            )
        return self._items

    @property
    def probe_cells(self) -> pd.DataFrame:
        """precision_probe.parquet: the cells of the precision probe's own models (none without one)."""
        if self.probe_path is None:
            return pd.DataFrame(columns=["model", "benchmark", "config_id", "score"])
        return pd.read_parquet(self.probe_path)


@dataclass(frozen=True)
class Analysis:
    """One analysis, a pure function of the tidy tables; its job reruns when any of these changes.

    Attributes:
        description: what it reports (the report and docs/analyses.md show it).
        function: the function computing it, "module:function" within `safetyrepro.analysis`; it takes an
            `Inputs` and returns a tidy table.
        options: the keys of the config's `analysis` section it reads.
        sections: the other top-level config sections it reads.
        human_labels: whether it reads the human labels of the run's benchmarks that have them
            (their registered `HumanLabels`: its code is the analysis's too).
        label_files: whether it reads the files of the run's replies that people labelled (`human_labels`: it
            reruns when their bytes change).
        columns: the columns it adds to the item rows it reads or writes in its table, beside the cell and item
            tables' (no declared axis, itself a column beside them, may take these names: `result_columns`).
    """

    description: str
    function: str
    options: tuple[str, ...] = ()
    sections: tuple[str, ...] = ()
    human_labels: bool = False
    label_files: bool = False
    columns: tuple[str, ...] = ()

    @property
    def module(self) -> str:
        """The module that computes it, e.g. safetyrepro.analysis.variance."""
        return f"{__package__}.{self.function.partition(':')[0]}"

    def run(self, inputs: Inputs) -> pd.DataFrame:
        """Compute the analysis.

        Args:
            inputs: the settings and the tidy tables (cells.parquet; items.parquet read on first use).

        Returns:
            The analysis's tidy table, written as results/analysis/<name>.parquet and rendered as Markdown.
        """
        return getattr(import_module(self.module), self.function.partition(":")[2])(inputs)


ANALYSES: dict[str, Analysis] = {
    "proposition1": Analysis(
        "Proposition 1 per pair and benchmark: D1 (no strict reversal), D2 (a single sign verdict), and whether "
        "rho_flip sits at its ceiling for that |C| (saturated).",
        "verdicts:proposition1_table",
    ),
    "flip_rate": Analysis(
        "Total-order flip rate (the paper's 'flip rate', §4; NOT rho_flip, the rank-flip rate of one pair): per "
        "benchmark, over all unordered pairs of distinct configs that have a strict ordering of all the models, "
        "the share of pairs whose orderings differ. Configs with any tie have no strict ordering: left out and "
        "counted (n_tied). null_flip_rate = 1 - 1/k! is its expectation under orderings drawn uniformly at random "
        "(5/6 for three models).",
        "verdicts:flip_rate_table",
    ),
    "tiers": Analysis(
        "Tier ablation: rho_flip max, orderings reached and the total-order flip rate on the full envelope, the "
        "core tier, and the envelope without each stress value (tiers from the envelope's tags).",
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
        "Item-subsample stability: stratified subsamples of the items (analysis.subsample: count, fraction; "
        "benchmarks, default all) re-scored from items.parquet. table 'per_benchmark': median and maximum per-cell "
        "score range in pp (a max - min over the draws: it grows with the count), and configs whose strict model "
        "ordering changes, over all configs and over the conservative core (analysis.conservative_core); table "
        "'per_cell': each cell's range.",
        "stability:subsample_table",
        ("subsample", "conservative_core"),
    ),
    "bootstrap": Analysis(
        "Bootstrap over configs: percentile interval of rho_flip per pair and benchmark (uncertainty over the "
        "envelope's configs, not over items).",
        "verdicts:bootstrap_table",
        ("bootstrap",),
    ),
    "intervals": Analysis(
        "Score intervals per cell at 1 - analysis.significance.alpha, on the cell's own items: Wilson's interval "
        "for single-seed cells, a bootstrap over the items (seeds nested in their item) for sampled cells; the "
        "spread of the per-seed scores (seed_sd, seed_range).",
        "significance:intervals_table",
        ("significance",),
    ),
    "paired_tests": Analysis(
        "Paired test per model pair, benchmark and config on the shared items: exact McNemar for single-seed cells, "
        "a paired bootstrap over items with the seeds nested otherwise; p-values adjusted across the pair's configs "
        "of a benchmark (analysis.significance.correction, Holm by default); verdict A better / B better / "
        "inconclusive at alpha, with the difference's bootstrap interval.",
        "significance:paired_tests_table",
        ("significance",),
    ),
    "rho_flip_sig": Analysis(
        "rho_flip_sig = min(N+sig, N-sig) / |C| beside rho_flip per pair and benchmark (verdicts of paired_tests), "
        "rho_flip's interval over item resamples (items drawn jointly for all models and configs), and the minimum "
        "detectable difference at the benchmark's item count for one test (mdd_pp) and at alpha / |C| "
        "(mdd_adjusted_pp), with power analysis.significance.power.",
        "significance:rho_flip_sig_table",
        ("significance",),
    ),
    "item_stability": Analysis(
        "Decisions per item over seeds (after Larsen 2025's Safety Stability Index; XSTest decisions are its labels, "
        "elsewhere correct / wrong): table 'ssi', the mean share of an item's seeds giving its most frequent "
        "decision per model, benchmark and temperature (and pooled over temperatures); 'single_seed_agreement', how "
        "often the first seed alone gives the other seeds' majority decision; 'friedman', SSI across temperatures, "
        "one block per item (greedy: one seed, SSI 1); 'items', in how many configs each item is answered correctly; 'item_flips', per model pair "
        "the configs where only A or only B answers the item.",
        "item_stability:item_stability_table",
        sections=("envelope",),
        columns=("unit", "decision", "ssi", "agrees", "majority_correct", "agreement", "table"),
    ),
    "multi_prompt": Analysis(
        "Multi-prompt summaries per model and benchmark over the configs (Mizrahi et al. 2024): MaxP (best config), "
        "AvgP (mean), CPS = (1 - (MaxP - AvgP)) x MaxP, worst config, spread = best - worst.",
        "multi_prompt:multi_prompt_table",
        columns=("pair", "rank"),
    ),
    "conservative_core": Analysis(
        "Conservative core sub-envelope (analysis.conservative_core): rho_flip and orderings.",
        "verdicts:conservative_core_table",
        ("conservative_core",),
    ),
    "shap": Analysis(
        "Surrogate attribution, SHAP mean |value| per axis (column surrogate): a LightGBM regressor of cell score on "
        "the axes (+ model) per benchmark, and a LightGBM classifier per benchmark and model pair of the strict sign "
        "of A - B per config on the axes (tied configs left out, n_ties; a pair with fewer than 10 strict configs or "
        "one sign only gets a row with its reason instead). Surrogates that localise which axis moves scores or "
        "verdicts, not the headline.",
        "attribution:shap_table",
        ("shap", "shap_seed"),
    ),
    "precision": Analysis(
        "Precision probe (precision_probe): every model paired with the same weights at a second precision on the "
        "probe's configs; score differences in pp per benchmark and pooled (benchmark 'all'), and per config "
        "whether the model ordering is the same at both precisions.",
        "precision:precision_table",
        ("conservative_core",),
        ("models", "precision_probe"),
        columns=("precision", "twin", "table"),
    ),
    "scorers": Analysis(
        "Scorer axis (a declared axis of mechanism scorer: docs/scorers.md): table 'reversals', per benchmark, model "
        "pair and pair of scorers, how many of the configs both scorers label (n_twins: one generation each) have the "
        "verdict A vs B reversed (strictly, as rho_flip counts) or changed (ties included) by the scorer alone; "
        "'by_value', rho_flip per benchmark and model pair over the free-form configs each value of the axis labels "
        "(a judge asked in two wordings of its question is two values: docs/scorers.md); 'agreement', the share of item rows both scorers give the same label, with Cohen's kappa; 'human', for each "
        "benchmark with human-labelled replies (XSTest: the authors' labelled completions), each scorer of the axis "
        "against the human labels (three-class, binary, kappa; developed_on: the file its rules were written "
        "against; a learned scorer's, leave-one-model-out: fitted_on the other file alone) and each judge's in each "
        "wording of its question, with the share of its answers that parse.",
        "scorers:scorer_table",
        sections=("envelope",),
        human_labels=True,
        columns=(
            "table",
            "scorer_a",
            "scorer_b",
            "scorer_name",
            "labelled_model",
            "three_class",
            "binary",
            "kappa",
            "n_answers",
            "developed_on",
            "fitted_on",
            "n_twins",
            "reversed",
            "changed",
            "n_rows",
            "agreement",
            "scorer_over",
            "scorer_under",
            "scorer_value",
            "n_plus",
            "n_minus",
            "n_ties",
            "n_configs",
            "rho_flip",
            "ceiling",
        ),
    ),
    "scorer_correction": Analysis(
        "Verdicts corrected for scorer error (docs/scorers.md), for each benchmark with human labels of replies: table "
        "'errors', each scorer's net error (people's rate minus the scorer's) on each labelled model's replies: per "
        "model and config with its variance where people labelled some of the run's own replies (human_labels), else "
        "the two other models' of XSTest's labelled completions; 'pairs', per model pair rho_flip with each free-form score moved by "
        "those errors (with other models' labels, its range when each model is given each labelled model's errors in "
        "turn; with own labels, of the decided verdicts, an undecided one a tie; configs without errors measured left out "
        "and counted, n_left_out), and how many free-form verdicts the correction keeps, moves or leaves undecided; 'verdicts', per pair "
        "and free-form config, A's score minus B's as scored and its corrected range (own labels: its 90% interval).",
        "scorer_correction:scorer_correction_table",
        sections=("envelope",),
        label_files=True,
        human_labels=True,
        columns=(
            "table",
            "labelled_model",
            "net_error",
            "n_labels",
            "n_freeform",
            "kept",
            "moved",
            "undecided",
            "labels_from",
            "rho_flip_corrected_low",
            "rho_flip_corrected_high",
            "raw_difference",
            "corrected_low",
            "corrected_high",
            "status",
            "variance",
            "n_replies",
            "n_left_out",
        ),
    ),
}


def result_columns() -> set[str]:
    """The columns of cells.parquet and items.parquet (an imported run's item rows also name their source) and
    those the analyses add (each entry's `columns`): a declared axis, itself a column beside them, may take none
    of these names (configuration.envelope.reserved_names)."""
    added = (column for analysis in ANALYSES.values() for column in analysis.columns)
    return {*CELL_COLUMNS, *ITEM_COLUMNS, "source", *added}
