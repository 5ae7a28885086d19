"""The typed settings of a run: what `configuration.build.load_settings` returns, section by section."""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetyrepro.benchmarks import BENCHMARKS
from safetyrepro.benchmarks.base import AS_GIVEN
from safetyrepro.configuration.schema import ConfigError, schema
from safetyrepro.core.batching import BatchCondition
from safetyrepro.core.model_spec import SERVED_BY, ModelSpec
from safetyrepro.core.operations import OPERATIONS

if TYPE_CHECKING:
    from safetyrepro.benchmarks.base import ItemSet, Presentation
    from safetyrepro.configuration.envelope import Envelope
    from safetyrepro.core.config_id import Config

DATA_DIR_ENV = "SAFETYREPRO_DATA_DIR"


EMBEDDED_MODELS = {"gemma-3-270m": "gemma-3-270m"}


@dataclass(frozen=True)
class BackendSettings:
    """The `backend` section: which backend serves each operation, and how models are loaded."""

    generate: str
    loglikelihood: str
    batch_size: int
    device: str
    gpu_memory_utilization: float
    hf_activation_gib: float
    batch_invariant: bool
    prefix_reuse: bool
    server: bool
    server_idle_seconds: float
    kv_cache_gib: float
    threads: int | None = None  # absent: torch's own choice
    server_python: str | None = None  # absent: the interpreter running the cells
    extra: Mapping[str, Any] = field(default_factory=dict)  # plugin backends' own options (their option_schema)
    # the registered backend classes by name (safetyrepro.backends.registered()), handed in by the builder
    backends: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_section(cls, section: Mapping[str, Any], backends: Mapping[str, Any]) -> BackendSettings:
        """Typed settings of a checked `backend` section, read by the registered `backends`; keys that are no
        field go to `extra`."""
        fields = set(cls.__dataclass_fields__) - {"extra", "backends"}
        return cls(
            **{key: value for key, value in section.items() if key in fields},
            extra={key: value for key, value in section.items() if key not in fields},
            backends=backends,
        )

    def as_dict(self) -> dict[str, Any]:
        """The section's settings by key, as given (the registered backends that read them left out)."""
        return {key: getattr(self, key) for key, spec in self.__dataclass_fields__.items() if spec.compare}

    def result_settings(self) -> dict[str, Any]:
        """The settings that change what a cell computes, those its fingerprint holds
        (safetyrepro.pipeline.fingerprints): the backend of each operation, the batch condition's keys,
        `server_python` and every registered backend's `result_options`. The others (`device`, `threads`,
        the servers' lifetime, memory shares) change how a run runs, not its results."""
        declared = (b.result_options for b in self.backends.values())
        keys = (*OPERATIONS, *BatchCondition.__dataclass_fields__, "server_python", *itertools.chain(*declared))
        return {key: self.option(key) for key in dict.fromkeys(keys)}

    def server_command(self) -> tuple[str, dict[str, str]]:
        """The Python the model servers run under (`server_python`, a relative path taken from the
        working folder; else this one) and its environment: where this package runs from a source
        checkout, that source first on its path, so a server under another environment (.venv-vllm)
        runs the code the cells run."""
        python = str(Path(self.server_python).expanduser().absolute()) if self.server_python else sys.executable
        environment = dict(os.environ)
        source = Path(__file__).resolve().parents[2]
        if source.name == "src" and (source.parent / "pyproject.toml").is_file():
            environment["PYTHONPATH"] = os.pathsep.join(p for p in (str(source), environment.get("PYTHONPATH")) if p)
        return python, environment

    def kinds(self, spec: ModelSpec | None = None) -> dict[str, str]:
        """Backend name per operation ("generate", "loglikelihood"): the section's, or for a model behind a
        server (`spec.endpoint`) the backend that talks to it (SERVED_BY) for both."""
        if spec is not None and spec.endpoint is not None:
            return dict.fromkeys(("generate", "loglikelihood"), SERVED_BY)
        return {"generate": self.generate, "loglikelihood": self.loglikelihood}

    def uses_gpu(self, spec: ModelSpec | None = None) -> bool:
        """Whether the model servers (of `spec`, else of the models of weights) need the machine's one
        accelerator slot (`gpu=1`): whether one of the backends in use needs it (`Backend.needs_gpu`;
        safetyrepro.running.server.exclusive_devices). A model behind a server needs none here."""
        backends, kinds = self.backends, self.kinds(spec).values()
        return any(backends[kind].needs_gpu(self) for kind in backends if kind in kinds)

    def gpus(self, spec: ModelSpec, elsewhere: bool = False) -> int:
        """The GPUs a cell of `spec` asks the scheduler for (Snakemake's `gpu` resource, Slurm's --gpus): none where
        its backends need no accelerator, else the model's own (`ModelSpec.gpus`: 1, or tensor x pipeline).
        `elsewhere`: the cells run on other machines (a cluster's nodes), whose GPUs this one cannot see, so a
        backend on device auto counts as on a GPU."""
        backend = replace(self, device="cuda") if elsewhere and self.device == "auto" else self
        return spec.gpus() if backend.uses_gpu(spec) else 0

    @staticmethod
    def default_kind(operation: str) -> str:
        """The backend that serves `operation` where the config names none (the schema's default)."""
        return schema("config")["properties"]["backend"]["properties"][operation]["default"]

    @staticmethod
    def operation(scoring: str) -> str:
        """The operation a config's scoring path asks of its backend ("generate", "loglikelihood")."""
        return "loglikelihood" if scoring == "logprob" else "generate"

    def serving(self, scoring: str, spec: ModelSpec | None = None) -> str:
        """The backend that serves a config's scoring path (to `spec`, where given)."""
        return self.kinds(spec)[self.operation(scoring)]

    def option(self, key: str) -> Any:
        """The value of option `key` of the section (a plugin's own from `extra`; None when not given)."""
        return getattr(self, key) if key in self.__dataclass_fields__ else self.extra.get(key)

    def options(self, kind: str) -> dict[str, Any]:
        """Constructor options of backend `kind`: the values of the options it declares (a plugin's
        own only when given)."""
        declared = self.backends[kind].options
        return {key: self.option(key) for key in declared if key in self.__dataclass_fields__ or key in self.extra}

    def batch_condition(self, scoring: str, batch_size: int | None, spec: ModelSpec | None = None) -> BatchCondition:
        """How a cell on this scoring path (of `spec`, where given) is batched, as its backend says
        (`Backend.batch_condition`): prompts per pass (`batch_size`, a config's batch axis, else
        backend.batch_size), or the backend's own scheduling."""
        return self.backends[self.serving(scoring, spec)].batch_condition(self, batch_size)


@dataclass(frozen=True)
class SubsampleSettings:
    """The `analysis.subsample` section; `benchmarks` empty means every benchmark of the run."""

    count: int
    fraction: float
    seed: int
    benchmarks: tuple[str, ...] = ()

    @classmethod
    def from_section(cls, section: Mapping[str, Any], run_benchmarks: Sequence[str]) -> SubsampleSettings:
        """Typed settings; each listed benchmark must be one of the run's."""
        outside = [name for name in section["benchmarks"] if name not in run_benchmarks]
        if outside:
            raise ConfigError(
                f"analysis.subsample.benchmarks: '{outside[0]}' is not a benchmark of this run "
                f"({', '.join(run_benchmarks)})"
            )
        return cls(section["count"], section["fraction"], section["seed"], tuple(section["benchmarks"]))


@dataclass(frozen=True)
class BootstrapSettings:
    resamples: int
    seed: int
    level: float


@dataclass(frozen=True)
class SignificanceSettings:
    """`analysis.significance`: the paired tests, intervals and detectable difference (analysis.significance)."""

    alpha: float
    power: float
    correction: str
    resamples: int
    seed: int


@dataclass(frozen=True)
class AuditSettings:
    """`audit`: the auditor's search (safetyrepro.audit)."""

    budget: int
    stop_probability: float
    seed: int
    draws: int


@dataclass(frozen=True)
class EstimateSettings:
    """`estimate`: the answer from a budget (safetyrepro.estimation); a budget of None runs every cell."""

    budget_share: float | None
    budget_cells: int | None
    round_configs: int
    target_width: float | None
    seed: int

    @property
    def budget(self) -> str:
        """The budget as the config gives it: 'budget_share: 0.25' or 'budget_cells: 150'."""
        return (
            f"budget_share: {self.budget_share}" if self.budget_cells is None else f"budget_cells: {self.budget_cells}"
        )


@dataclass(frozen=True, kw_only=True)
class AnalysisSettings:
    """The `analysis` section."""

    parse_threshold: float
    subsample: SubsampleSettings
    bootstrap: BootstrapSettings
    significance: SignificanceSettings
    conservative_core: tuple[str, ...]
    shap: bool
    shap_seed: int
    section: Mapping[str, Any] = field(repr=False, compare=False)

    def seeds(self) -> dict[str, int]:
        """The random seeds the analyses use."""
        return {
            "subsample": self.subsample.seed,
            "bootstrap": self.bootstrap.seed,
            "significance": self.significance.seed,
            "shap": self.shap_seed,
        }

    def options(self, keys: Sequence[str]) -> dict[str, Any]:
        """The named options as written in the effective config (an analysis job's rerun trigger)."""
        return {key: self.section[key] for key in keys}


@dataclass(frozen=True)
class ImportSource:
    """One entry of `imports`: results of another harness (kind lm_eval, inspect or table) at `path`, with
    an optional mapping file (safetyrepro.imports)."""

    kind: str
    path: Path
    mapping: Path | None = None

    def require_packages(self) -> None:
        """Refuse Inspect AI logs when this Python cannot read them (inspect_ai, of the case-study extra)."""
        if self.kind == "inspect" and importlib.util.find_spec("inspect_ai") is None:
            raise ConfigError(
                f"imports: reading Inspect AI logs ({self.path}) needs inspect-ai, from the case-study extra: "
                "`.venv/bin/pip install -c constraints.txt -e '.[case-study]'`"
            )


@dataclass(frozen=True)
class CaseStudySettings:
    """The `case_study` section, checked against the run's models and envelope."""

    model: ModelSpec
    benchmarks: tuple[str, ...]
    n_items: int
    anchor_config: str
    batch_size: int
    max_new_tokens: int
    parity_template: str
    target_delimiter: str
    section: Mapping[str, Any] = field(repr=False, compare=False)

    PACKAGES = ("lm_eval", "inspect_ai")

    def require_packages(self) -> None:
        """Refuse to plan the study when this Python lacks the packages of the `case-study` extra."""
        missing = [name for name in self.PACKAGES if importlib.util.find_spec(name) is None]
        if missing:
            raise ConfigError(
                f"case_study: needs {', '.join(missing)}, from the case-study extra: "
                "`.venv/bin/pip install -c constraints.txt -e '.[case-study]'` (make test installs it)"
            )


@dataclass(frozen=True)
class PrecisionProbe:
    """The `precision_probe` section: every model once more at `precision`, on `configs` only.

    `twins` maps each model whose precision differs to its twin's name: a grid model that already is
    the same weights at that precision (nothing new to run), or one of `new_models`, named
    "<model>@<precision>" (a name no grid model can have), whose cells stay out of the headline tables.
    """

    precision: str
    configs: tuple[str, ...]
    twins: Mapping[str, str]
    new_models: tuple[ModelSpec, ...]

    def disclosed(self) -> dict[str, Any]:
        """The probe as the run record and GRID card state it."""
        return {"precision": self.precision, "configs": list(self.configs), "twins": dict(self.twins)}


@dataclass(kw_only=True)
class Settings:
    """A checked run configuration. `document` is the effective config itself, for writing and recording.
    A config with `imports` runs no models: it has no models, benchmarks or envelope (None). The case study
    and the precision probe read the settings, so they are set after construction."""

    document: dict[str, Any]
    layers: tuple[str, ...]
    data_dir: Path
    results_dir: Path
    resources_dir: Path
    models: list[ModelSpec]
    n_items: dict[str, int]
    envelope: Envelope | None
    subset_seed: int
    fewshot_pool: int
    backend: BackendSettings
    analysis: AnalysisSettings
    select_configs: tuple[str, ...] | None
    partial_results: bool
    case_study: CaseStudySettings | None = None
    precision_probe: PrecisionProbe | None = None
    imports: tuple[ImportSource, ...] = ()
    judges: tuple[ModelSpec, ...] = ()

    @property
    def audit(self) -> AuditSettings:
        """The `audit` section (defaults filled)."""
        return AuditSettings(**self.document["audit"])

    @property
    def estimate(self) -> EstimateSettings:
        """The `estimate` section (defaults filled)."""
        unset = dict.fromkeys(("budget_share", "budget_cells", "target_width"))  # the keys without a default
        return EstimateSettings(**unset | self.document["estimate"])

    @property
    def human_label_files(self) -> dict[str, Path]:
        """Per benchmark, the file of this run's replies that people labelled (`human_labels`; none by default)."""
        return {name: Path(path) for name, path in self.document.get("human_labels", {}).items()}

    @property
    def budgeted(self) -> bool:
        """Whether the run has a budget: only the configs its rounds choose run (safetyrepro.estimation)."""
        return not self.imports and (self.estimate.budget_share, self.estimate.budget_cells) != (None, None)

    def budget_configs(self, benchmark: str) -> int:
        """How many of a benchmark's configs a budgeted run may run: its share of them, rounded down, at least one
        (`budget_cells` is the share of the grid's cells it names)."""
        configs = len(self.configs(benchmark))
        share = self.estimate.budget_share
        if share is None:
            share = self.estimate.budget_cells / len(self.cells())
        return min(configs, max(1, math.floor(share * configs + 1e-9)))

    @property
    def benchmarks(self) -> list[str]:
        """The benchmarks of the grid, in config order."""
        return list(self.n_items)

    def configs(self, benchmark: str) -> list[Config]:
        """Valid configs of a benchmark, restricted to `select_configs` when given."""
        configs = self.envelope.configs(benchmark)
        if self.select_configs is not None:
            configs = [c for c in configs if c.config_id in self.select_configs]
        return configs

    def config(self, benchmark: str, config_id: str) -> Config:
        """Look up one config of a benchmark by id."""
        for config in self.configs(benchmark):
            if config.config_id == config_id:
                return config
        raise ConfigError(f"config '{config_id}' is not in the envelope of benchmark '{benchmark}'")

    def batch_condition(self, config: Config, spec: ModelSpec | None = None) -> BatchCondition:
        """How a config's cells (of `spec`, where given) are batched: the batch axis's size on HF, else the
        backend's own."""
        size = self.envelope.setting("backend_option", config).get("batch_size")
        return self.backend.batch_condition(config.scoring, size, spec)

    def cells(self) -> list[tuple[ModelSpec, str, Config]]:
        """Every (model, benchmark, config) cell of the grid."""
        return [(m, b, c) for m in self.models for b in self.benchmarks for c in self.configs(b)]

    def longest_generation(self) -> int:
        """The most new tokens any free-form config of the run, or a judge's answer, asks for (vLLM sizes its
        context by it)."""
        asked = [
            self.envelope.decoding(c).max_new_tokens
            for b in self.benchmarks
            for c in self.configs(b)
            if c.scoring == "freeform"
        ]
        return max([*asked, self.judge_answer_tokens()] if self.used_judges() else asked, default=1)

    def judge_answer_tokens(self, judge: str | None = None) -> int:
        """The most new tokens a judge's answer takes in this run (judge `judge`'s alone, where given): that of each
        question asked (safetyrepro.scorers.judge_answer), at least a letter's."""
        from safetyrepro.benchmarks import BENCHMARKS
        from safetyrepro.core.judge_answer import ANSWER
        from safetyrepro.scorers import judge_answer

        asked = (self.envelope.labelling(value, b) + (b,) for b in self.benchmarks for value in self.judge_values(b))
        tokens = [
            judge_answer(BENCHMARKS[b], scorer).max_new_tokens for scorer, name, _, b in asked if judge in (None, name)
        ]
        return max([ANSWER.max_new_tokens, *tokens])

    def probe_cells(self) -> list[tuple[ModelSpec, str, Config]]:
        """The precision probe's own cells: its new twins on the probe configs of each benchmark."""
        probe = self.precision_probe
        if probe is None:
            return []
        return [
            (m, b, c)
            for m in probe.new_models
            for b in self.benchmarks
            for c in self.configs(b)
            if c.config_id in probe.configs
        ]

    def run_models(self) -> list[ModelSpec]:
        """Every model the run loads: the grid's, then the precision probe's own."""
        return [*self.models, *(self.precision_probe.new_models if self.precision_probe else ())]

    def used_judges(self, benchmark: str | None = None) -> list[ModelSpec]:
        """The judges that label some cell of the run, or of `benchmark` (`select_configs` may leave a judge's
        configs out)."""
        benchmarks = self.benchmarks if benchmark is None else [benchmark]
        used = {self.envelope.labelling(v, b)[1] for b in benchmarks for v in self.judge_values(b)}
        return [spec for spec in self.judges if spec.name in used]

    def judge_values(self, benchmark: str) -> list[str]:
        """The values of the scorer axis that ask a judge about some free-form reply of `benchmark` in this run (a
        judge, in a wording of its question: on a benchmark with human labels, each has its judge_agreement job), in the axis's order."""
        axis = self.envelope.scorer_axis
        if axis is None or benchmark not in self.benchmarks:
            return []
        used = {c[axis] for c in self.configs(benchmark) if c.scoring == "freeform"}
        return [v for v in self.envelope.axes[axis] if v in used and self.envelope.labelling(v, benchmark)[1]]

    def served_models(self) -> list[ModelSpec]:
        """Every model a model server may load in this run: the run's, then the judges it asks."""
        return [*self.run_models(), *self.used_judges()]

    def model(self, name: str) -> ModelSpec:
        """The model spec called `name` (a grid model, one of the precision probe's own, or a judge)."""
        for spec in [*self.run_models(), *self.judges]:
            if spec.name == name:
                return spec
        raise ConfigError(f"models: no model named '{name}'")

    def judge_model(self, benchmark: str, config: Config) -> ModelSpec | None:
        """The judge model that labels the config's free-form answers on `benchmark`, or None."""
        name = self.envelope.judge_name(config, benchmark) if config.scoring == "freeform" else None
        return None if name is None else self.model(name)

    def labelling_scorer(self, benchmark: str, config: Config) -> str | None:
        """The scorer that labels the config's free-form answers on `benchmark`; None on the log-likelihood
        path, where no scorer labels (its cells depend on none)."""
        return self.envelope.scorer(config, benchmark) if config.scoring == "freeform" else None

    def scorer_models(self, benchmark: str, config: Config) -> dict[str, Path]:
        """The built folder of the embedded model the config's scorer reads replies with, by name (most
        scorers read with none: empty)."""
        from safetyrepro.scorers import scorer_of

        scorer = self.labelling_scorer(benchmark, config)
        name = scorer_of(BENCHMARKS[benchmark], scorer).embedded_model if scorer else None
        return {name: embedded_folder(self.resources_dir, name)} if name else {}

    def builds_models(self) -> bool:
        """Whether the run builds an embedded model into resources_dir: a model's, or a scorer's."""
        return any(spec.embedded for spec in self.served_models()) or any(
            self.scorer_models(benchmark, config) for benchmark in self.benchmarks for config in self.configs(benchmark)
        )


def embedded_folder(resources_dir: Path, name: str) -> Path:
    """Where the run builds the embedded model `name` (a key of EMBEDDED_MODELS)."""
    return resources_dir / "models" / EMBEDDED_MODELS[name]


def item_set(settings: Settings, name: str, presentation: Presentation = AS_GIVEN) -> ItemSet:
    """A benchmark's configured item subset and few-shot pool, options presented as `presentation` says."""
    return BENCHMARKS[name].item_set(
        settings.data_dir,
        settings.n_items[name],
        settings.fewshot_pool,
        settings.subset_seed,
        f"benchmarks.{name}.n_items",
        presentation,
    )


def check_item_sets(settings: Settings) -> dict[str, int]:
    """Load every benchmark's data and draw its subset, so bad files or sizes fail before any job runs."""
    return {name: len(item_set(settings, name).items) for name in settings.benchmarks}
