"""The run configuration: one effective config per run, checked and typed.

`load_settings` is the only way in. It resolves the layers (a complete config file, or an overlay
that names its base with `extends:`), applies `--config` overrides, checks the result against the
package's schema, fills the schema's defaults once, and returns the typed `Settings` that the
Snakefile, `safetyrepro check` and every job use. Jobs read the effective config written by the
Snakefile (`Settings.document`), so they resolve nothing again.
"""

from __future__ import annotations

import copy
import errno
import importlib.util
import itertools
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from safetyrepro.backends import discovered, registered
from safetyrepro.backends.base import OPERATIONS, BatchCondition
from safetyrepro.benchmarks import BENCHMARKS, BROKEN
from safetyrepro.benchmarks.base import DataError, regular_file
from safetyrepro.configuration.envelope import (
    AXES,
    Config,
    Envelope,
    EnvelopeError,
    check_parity_template,
    excerpt,
)
from safetyrepro.scorers import scorer_of

DATA_DIR_ENV = "SAFETYREPRO_DATA_DIR"
EMBEDDED_MODELS = {"gemma-3-270m": "gemma-3-270m"}


class ConfigError(ValueError):
    """A configuration problem, with a message naming the offending key."""


@cache
def schema(name: str) -> dict[str, Any]:
    """The packaged JSON schema `name` (config, envelope or import_mapping)."""
    return yaml.safe_load(files("safetyrepro").joinpath(f"schemas/{name}.schema.yaml").read_text())


def checked_schema(name: str) -> dict[str, Any]:
    """The schema documents are checked against: the packaged one, where a config's `backend` section
    takes the registered backends (safetyrepro.backends): backend.generate and backend.loglikelihood
    name one that serves the operation, and a plugin's own options (its `option_schema`) are keys."""
    if name != "config":
        return schema(name)
    backends = registered()
    root = copy.deepcopy(schema(name))
    keys = root["properties"]["backend"]["properties"]
    for operation in OPERATIONS:
        keys[operation]["enum"] = sorted(kind for kind, backend in backends.items() if operation in backend.serves)
    packaged = set(keys)
    for kind, backend in backends.items():
        for key, node in backend.option_schema.items():
            if key in packaged or keys.setdefault(key, dict(node)) != node:
                owner = "the package's schema" if key in packaged else "another backend, differently"
                raise ConfigError(f"backend.{key}: backend '{kind}' defines this option, as does {owner}")
    for kind, backend in backends.items():
        undefined = [key for key in backend.options if key not in keys]
        if undefined:
            raise ConfigError(f"backend.{undefined[0]}: backend '{kind}' takes this option but gives no option_schema")
    return root


MAX_YAML_VALUES = 200_000  # a config is a few thousand values; aliases must not expand it past this
MAX_YAML_DEPTH = 64  # a config nests about 8 levels deep; far deeper nesting would exhaust Python's recursion
_INT_TAG = "tag:yaml.org,2002:int"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class YAMLMisread(yaml.constructor.ConstructorError):
    """YAML that loads, but not as it reads: a key given twice, or an integer that YAML 1.1 takes as octal."""


class _StrictLoader(yaml.SafeLoader):
    """The safe loader, refusing (YAMLMisread) what it would read otherwise than it looks: a mapping's key
    given twice (the last would win) and an integer with a leading zero (octal: 010 is 8). Messages name
    the value's dotted key within the document."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.paths: dict[yaml.Node, str] = {}  # a node -> its dotted key in the document

    def _path(self, parent: yaml.Node, part: str) -> str:
        above = self.paths.get(parent)
        return part if above is None else f"{above}{part}" if part.startswith("[") else f"{above}.{part}"

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                continue  # keys merged in with `<<:` may be overridden
            key = self.construct_object(key_node)
            if key in first_line:
                raise YAMLMisread(
                    None,
                    None,
                    f"key {excerpt(self._path(node, str(key)), 60)} given twice (first on line {first_line[key]}); "
                    "YAML would keep only the last",
                    key_node.start_mark,
                )
            first_line[key] = key_node.start_mark.line + 1
            self.paths[value_node] = self._path(node, str(key))
        return super().construct_mapping(node, deep)

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> list[Any]:
        for index, item in enumerate(node.value):
            self.paths[item] = self._path(node, f"[{index}]")
        return super().construct_sequence(node, deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        value = super().construct_yaml_int(node)
        sign, digits = ("-" if node.value.startswith("-") else ""), node.value.lstrip("+-").replace("_", "")
        if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
            key = self.paths.get(node)
            raise YAMLMisread(
                None,
                None,
                f"{'' if key is None else f'{key[:60]}: '}{node.value} has a leading zero, so YAML 1.1 reads it as "
                f"the octal {value}; write {sign}{digits.lstrip('0') or '0'} (or quote it, if it is text)",
                node.start_mark,
            )
        return value


_StrictLoader.add_constructor(_INT_TAG, _StrictLoader.construct_yaml_int)


def _check_shape(data: Any, where: str) -> None:
    """Refuse data that, with every YAML alias expanded, holds more than MAX_YAML_VALUES values or nests
    deeper than MAX_YAML_DEPTH (a ConfigError naming `where`; stops counting early)."""
    stack, count = [(data, 1)], 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_YAML_VALUES:
            raise ConfigError(f"{where}: expands to more than {MAX_YAML_VALUES:,} values (YAML aliases?)")
        if depth > MAX_YAML_DEPTH:
            raise ConfigError(f"{where}: nested more than {MAX_YAML_DEPTH} levels deep")
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children)


def _strict_load(stream: Any, where: str) -> Any:
    """Load YAML text or a stream with `_StrictLoader`, checked by `_check_shape`: a misread, too deep a nesting
    or an alias bomb as a ConfigError naming `where`; a syntax error raises yaml.YAMLError."""
    loader = _StrictLoader(stream)  # a SafeLoader: no tag builds a Python object
    try:
        data = loader.get_single_data()
    except YAMLMisread as exc:
        raise ConfigError(f"{where}{_position(exc)}: {exc.problem}") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested more than {MAX_YAML_DEPTH} levels deep") from None
    finally:
        loader.dispose()
    _check_shape(data, where)
    return data


def _position(exc: yaml.YAMLError) -> str:
    """', line L, column C' of a YAML error, where it has one."""
    mark = getattr(exc, "problem_mark", None)
    return f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def read_yaml(path: str | os.PathLike) -> Any:
    """Load a YAML file strictly (`_strict_load`), turning every problem into a ConfigError with the position."""
    if os.path.lexists(path) and not os.path.isdir(path):
        try:
            regular_file(Path(path), "config file not found")  # a named pipe would block, a device never end
        except DataError as exc:
            raise ConfigError(str(exc)) from None
    try:
        with open(path, encoding="utf-8") as handle:
            return _strict_load(handle, str(path))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a YAML file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:  # no permission, or a file the kernel refuses to give (/proc/self/mem)
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{_position(exc)}: YAML syntax error: {problem}") from None


def _schema_message(error: jsonschema.ValidationError) -> str:
    """One line for a schema violation: what is wrong, without echoing whole sub-documents."""
    value, rule = error.instance, error.validator_value
    if error.validator == "additionalProperties":
        extra = sorted(set(value) - set(error.schema.get("properties", {})))
        return f"unknown key(s) {', '.join(excerpt(key, 40) for key in extra[:5])}{', ...' if len(extra) > 5 else ''}"
    if error.validator in ("minItems", "minProperties"):
        return f"needs at least {rule} entr{'y' if rule == 1 else 'ies'}, got {len(value)}"
    if error.validator == "type":
        return f"expected {rule}, got {type(value).__name__} {excerpt(value)}"
    if error.validator == "required":
        missing = [key for key in rule if key not in value]
        return f"missing required key(s) {', '.join(map(repr, missing))}"
    if error.validator == "enum":
        return f"{excerpt(value)} is not one of {', '.join(map(str, rule))}"
    if error.validator == "pattern" and "description" in error.schema:
        return f"{excerpt(value)} is not {error.schema['description']}"
    if error.validator == "pattern":
        allowed = "letters, digits and ." + (" _ + -" if "_" in rule else "")
        return f"{excerpt(value)} may use only {allowed}, starting with a letter or digit (it names files and jobs)"
    if error.validator == "minLength":
        return "must not be empty" if rule == 1 else f"needs at least {rule} characters"
    if error.validator == "uniqueItems":
        return "entries must be unique"
    message = error.message
    return message if len(message) <= 200 else f"{message[:185]}... ({len(message)} chars)"


# JSON Schema counts 10.0 as an integer; a count or seed written as a float is a mistake here.
_STRICT_TYPES = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
)
_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_STRICT_TYPES)


def check_schema(data: Any, name: str, prefix: str = "") -> None:
    """Validate `data` against the packaged schema `name`; the first error, named by its key, as a ConfigError."""
    validator = _Validator(checked_schema(name))
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
        key = (prefix + path).rstrip(". :")  # "envelope." or "<file>: " with nothing after it
        raise ConfigError(f"{key or '(top level)'}: {_schema_message(error)}")


HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


def _check_model_path(where: str, path: str) -> None:
    """A local model must be a folder with config.json; anything shaped like `org/name` may be a hub id."""
    local = Path(path).expanduser()
    if local.exists():
        if not (local / "config.json").is_file():
            raise ConfigError(f"{where}.path: {path} is not a model folder (no config.json in it)")
    elif not HUB_ID.fullmatch(path):
        raise ConfigError(f"{where}.path: {path} does not exist (and is not a hub id of the form org/name)")


# -------------------------------------------------------------------------------- layers and defaults
DEFAULT_CONFIGFILE = "config/config.yaml"


def merge_layer(base: Mapping[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    """`layer` over `base`: mappings merge key by key, anything else replaces; a null value deletes the key."""
    merged = copy.deepcopy(dict(base))
    for key, value in layer.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_layer(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _read_document(path: str) -> dict[str, Any]:
    """A config file's own mapping of keys (its `extends`, if any, not yet followed)."""
    document = read_yaml(path)
    if document is None:
        raise ConfigError(f"{path}: the file is empty")
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: expected a YAML mapping of config keys, got {type(document).__name__}")
    return document


def _with_bases(document: dict[str, Any], origin: str, folder: str) -> tuple[dict[str, Any], list[str]]:
    """A complete config as it is; an overlay (`extends: <base>`, relative to `folder`, the overlay's own) merged
    over its base, which may itself be an overlay; and a line per layer, base first. The chain is followed in a
    loop, however long."""
    overlays, read = [], set()
    while "extends" in document:
        if os.path.isfile(origin):
            read.add(os.path.realpath(origin))
        document = dict(document)
        base = document.pop("extends")
        if not isinstance(base, str) or not base.strip():
            raise ConfigError(f"{origin}: extends: expected the path of the config file this overlay changes")
        path = os.path.join(folder, os.path.expanduser(base))
        if os.path.realpath(path) in read:
            raise ConfigError(f"{origin}: extends: {base} is already a layer of this config (a cycle)")
        overlays.append((document, f"{origin} (overlay on {path})"))
        try:
            document = _read_document(path)
        except ConfigError as exc:
            raise ConfigError(f"{origin}: extends: {exc}") from None
        origin, folder = path, os.path.dirname(path)
    merged, layers = document, [f"{origin} (complete config)"]
    for overlay, layer in reversed(overlays):
        merged = merge_layer(merged, overlay)
        layers.append(layer)
    return merged, layers


def apply_defaults(instance: Any, node: Mapping[str, Any]) -> None:
    """Fill the schema's `default`s into a schema-valid instance, in place (nested objects and arrays too)."""
    if isinstance(instance, dict):
        for key, sub in node.get("properties", {}).items():
            if key not in instance and "default" in sub:
                instance[key] = copy.deepcopy(sub["default"])
            if key in instance:
                apply_defaults(instance[key], sub)
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key in set(instance) - set(node.get("properties", {})):
                apply_defaults(instance[key], extra)
    elif isinstance(instance, list) and isinstance(node.get("items"), Mapping):
        for entry in instance:
            apply_defaults(entry, node["items"])


# -------------------------------------------------------------------------------- typed settings
@dataclass(frozen=True)
class ModelSpec:
    """A model of the grid: a name, where its weights are, and how to load them."""

    name: str
    path: str
    precision: str = "bf16"
    chat_template: str = "auto"
    trust_remote_code: bool = False
    revision: str | None = None
    embedded: str | None = None

    def weights(self) -> tuple:
        """What makes two entries the same model at any precision: its files (a local folder by its real path),
        revision, prompts."""
        path = os.path.realpath(self.path) if os.path.isdir(self.path) else self.path
        return path, self.revision, self.chat_template, self.trust_remote_code


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

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> BackendSettings:
        """Typed settings of a checked `backend` section; keys that are no field go to `extra`."""
        fields = set(cls.__dataclass_fields__) - {"extra"}
        return cls(
            **{key: value for key, value in section.items() if key in fields},
            extra={key: value for key, value in section.items() if key not in fields},
        )

    def result_settings(self) -> dict[str, Any]:
        """The settings that change what a cell computes, those its fingerprint holds
        (safetyrepro.configuration.fingerprints): the backend of each operation, the batch condition's keys,
        `server_python` and every registered backend's `result_options`. The others (`device`, `threads`,
        the servers' lifetime, memory shares) change how a run runs, not its results."""
        declared = (b.result_options for b in registered().values())
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

    def kinds(self) -> dict[str, str]:
        """Backend name per operation ("generate", "loglikelihood")."""
        return {"generate": self.generate, "loglikelihood": self.loglikelihood}

    def uses_gpu(self) -> bool:
        """Whether the model servers need the machine's one accelerator slot (`gpu=1`): whether one of
        the backends in use needs it (`Backend.needs_gpu`; safetyrepro.running.server.exclusive_devices)."""
        backends = registered()
        return any(backends[kind].needs_gpu(self) for kind in backends if kind in self.kinds().values())

    @staticmethod
    def default_kind(operation: str) -> str:
        """The backend that serves `operation` where the config names none (the schema's default)."""
        return schema("config")["properties"]["backend"]["properties"][operation]["default"]

    @staticmethod
    def operation(scoring: str) -> str:
        """The operation a config's scoring path asks of its backend ("generate", "loglikelihood")."""
        return "loglikelihood" if scoring == "logprob" else "generate"

    def serving(self, scoring: str) -> str:
        """The backend that serves a config's scoring path."""
        return self.kinds()[self.operation(scoring)]

    def option(self, key: str) -> Any:
        """The value of option `key` of the section (a plugin's own from `extra`; None when not given)."""
        return getattr(self, key) if key in self.__dataclass_fields__ else self.extra.get(key)

    def options(self, kind: str) -> dict[str, Any]:
        """Constructor options of backend `kind`: the values of the options it declares (a plugin's
        own only when given)."""
        declared = registered()[kind].options
        return {key: self.option(key) for key in declared if key in self.__dataclass_fields__ or key in self.extra}

    def batch_condition(self, scoring: str, batch_size: int | None) -> BatchCondition:
        """How a cell on this scoring path is batched, as its backend says (`Backend.batch_condition`):
        prompts per pass (`batch_size`, a config's batch axis, else backend.batch_size), or the
        backend's own scheduling."""
        return registered()[self.serving(scoring)].batch_condition(self, batch_size)


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

    def batch_condition(self, config: Config) -> BatchCondition:
        """How a config's cells are batched: the batch axis's size on HF, else the backend's own."""
        size = self.envelope.setting("backend_option", config).get("batch_size")
        return self.backend.batch_condition(config.scoring, size)

    def cells(self) -> list[tuple[ModelSpec, str, Config]]:
        """Every (model, benchmark, config) cell of the grid."""
        return [(m, b, c) for m in self.models for b in self.benchmarks for c in self.configs(b)]

    def longest_generation(self) -> int:
        """The most new tokens any free-form config of the run, or a judge's answer, asks for (vLLM sizes its
        context by it)."""
        from safetyrepro.running.judge import ANSWER

        asked = [
            self.envelope.decoding(c).max_new_tokens
            for b in self.benchmarks
            for c in self.configs(b)
            if c.scoring == "freeform"
        ]
        return max([*asked, ANSWER.max_new_tokens] if self.used_judges() else asked, default=1)

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
        benchmarks = self.benchmarks if benchmark is None else [benchmark] if benchmark in self.benchmarks else []
        used = {self.envelope.judge_name(c, b) for b in benchmarks for c in self.configs(b) if c.scoring == "freeform"}
        return [spec for spec in self.judges if spec.name in used]

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


# -------------------------------------------------------------------------------- loading
def load_settings(
    source: str | os.PathLike | Mapping[str, Any] | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """The checked settings of a run: a config file (default config/config.yaml), or a mapping, with its
    `extends` layers and `--config` overrides; validated, defaults filled from the schema."""
    if isinstance(source, Mapping):
        document, layers = _with_bases(dict(source), "(config mapping)", "")
    else:
        path = str(DEFAULT_CONFIGFILE if source is None else source)
        document, layers = _with_bases(_read_document(path), path, os.path.dirname(path))
    if overrides:
        document = merge_layer(document, overrides)
        layers.append(f"--config overrides of {', '.join(map(str, overrides))}")
    return _settings(document, tuple(layers))


def _typed(value: Any, key: str) -> Any:
    """A `--config` value (of dotted `key`) as a YAML file would give it, read strictly (`_strict_load`):
    Snakemake leaves nested values as strings, and hands a deleted key to cluster jobs as 'None'. An empty
    value (Snakemake's None for `key=`) or a lone ~ would drop the key, so that its default applied: refused."""
    if isinstance(value, Mapping):
        return {name: _typed(item, f"{key}.{name}") for name, item in value.items()}
    if isinstance(value, list):
        return [_typed(item, f"{key}[{index}]") for index, item in enumerate(value)]
    if value is None or value == "":
        raise ConfigError(f"--config {key}: an empty value; give one (null drops the key, and its default applies)")
    if value == "~":
        raise ConfigError(f"--config {key}: a lone ~ is YAML's null; write the full path (or null, to drop the key)")
    if value == "None":
        return None
    if isinstance(value, str):
        try:
            return _strict_load(value, f"--config {key}")
        except yaml.YAMLError:
            return value
    return value


def load_run_settings(configfiles: Sequence[str | os.PathLike], overrides: Mapping[str, Any]) -> Settings:
    """The settings of a Snakemake run from its `--configfile` list and `--config` overrides (each checked
    for alias bombs and deep nesting, `_check_shape`, before anything walks it)."""
    for key, value in overrides.items():
        _check_shape(value, f"--config {key}")
    overrides = {key: _typed(value, key) for key, value in overrides.items()}
    if len(configfiles) > 1:
        raise ConfigError(
            f"give one config file, not {len(configfiles)} ({', '.join(map(str, configfiles))}); "
            "to layer files, write `extends: <base config>` in the overlay (docs/configuration.md)"
        )
    return load_settings(os.path.relpath(configfiles[0]) if configfiles else None, overrides)


def _refuse_broken_backends(section: Any) -> None:
    """A ConfigError where the backend of an operation (the config's, else the default) is a plugin that cannot
    be used, with its error (docs/extending.md); a config that uses none of those goes on without them."""
    broken = discovered().broken
    for operation in OPERATIONS:
        kind = section.get(operation) if isinstance(section, dict) else None
        kind = BackendSettings.default_kind(operation) if kind is None else kind
        if isinstance(kind, str) and kind in broken:
            raise ConfigError(f"backend.{operation}: {broken[kind]}")


def _settings(raw: dict[str, Any], layers: tuple[str, ...]) -> Settings:
    """Check a merged config, fill in the defaults and build the typed settings."""
    raw = copy.deepcopy(raw)
    entries = [entry for key in ("models", "judges") if isinstance(raw.get(key), list) for entry in raw[key]]
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("chat_template"), bool):  # YAML 1.1: on/off are booleans
            entry["chat_template"] = "on" if entry["chat_template"] else "off"
    if "imports" in raw:
        return _import_settings(raw, layers)
    _refuse_broken_backends(raw.get("backend"))
    check_schema(raw, "config")
    _expand_home(raw)
    envelope_raw = raw["envelope"]
    if isinstance(envelope_raw, str):
        if not os.path.lexists(envelope_raw):
            raise ConfigError(
                f"envelope: file not found: {envelope_raw} (the envelope file this config names; a relative path is "
                "from the working folder)"
            )
        path, envelope_raw = envelope_raw, read_yaml(envelope_raw)
        if isinstance(envelope_raw, dict) and "extends" in envelope_raw:  # as a config overlay extends its base
            envelope_raw, _ = _with_bases(envelope_raw, path, os.path.dirname(path))
    _check_declared_axis_names(envelope_raw)
    check_schema(envelope_raw, "envelope", "envelope.")
    apply_defaults(raw, checked_schema("config"))  # raw (and an inline envelope in it) is this function's own copy
    apply_defaults(envelope_raw, schema("envelope"))
    raw["envelope"] = envelope_raw
    data_dir_variable = os.path.expanduser(os.environ.get(DATA_DIR_ENV, ""))
    if data_dir_variable and data_dir_variable != raw["data_dir"]:
        raw["data_dir"] = data_dir_variable
        layers = (*layers, f"{DATA_DIR_ENV}={raw['data_dir']} (overrides data_dir)")

    for name in raw["benchmarks"]:
        if name in BROKEN:
            raise ConfigError(f"benchmarks.{name}: {BROKEN[name]}")
    unknown = sorted(set(raw["benchmarks"]) - set(BENCHMARKS))
    if unknown:
        raise ConfigError(f"benchmarks.{unknown[0]}: unknown benchmark (known: {', '.join(BENCHMARKS)})")
    try:
        envelope = Envelope.from_dict(envelope_raw, BENCHMARKS, unavailable=BROKEN)
        envelope.token_cap = raw.get("max_new_tokens_cap")
        for name in raw["benchmarks"]:  # the run's benchmarks, as its cells will run them (the token cap applied)
            envelope.check_distinct_cells(name, BENCHMARKS[name].task)
            for config in envelope.configs(name):  # a config of another scorer labels its twin's responses
                envelope.generation_twin(config, name)
    except EnvelopeError as exc:
        raise ConfigError(str(exc)) from None

    resources_dir = Path(raw["resources_dir"])
    models = _models(raw["models"], resources_dir)
    judges = _models(raw.get("judges", []), resources_dir, "judges")  # no default: an imports config has none
    _check_judges(envelope, models, judges)
    data_dir = Path(raw["data_dir"])
    _check_data_dir(data_dir, raw["benchmarks"])

    known = {c.config_id for b in raw["benchmarks"] for c in envelope.configs(b)}
    select = raw.get("select_configs")
    for key, ids in (
        ("select_configs", select or []),
        ("analysis.conservative_core", raw["analysis"]["conservative_core"]),
    ):
        missing = [cid for cid in ids if cid not in known]
        if missing:
            raise ConfigError(f"{key}: '{missing[0]}' is not a valid config of any benchmark")
    _check_every_benchmark_has_configs(envelope, list(raw["benchmarks"]), select)
    for name in raw["benchmarks"] if select is not None else ():
        for config in (c for c in envelope.configs(name) if c.config_id in select):
            twin = envelope.generation_twin(config, name)
            if twin is not None and twin.config_id not in select:
                raise ConfigError(
                    f"select_configs: '{config.config_id}' labels the {name} responses of '{twin.config_id}' "
                    "with another scorer; select that config too"
                )

    backend = BackendSettings.from_section(raw["backend"])
    _check_server_python(backend)
    _check_backend_keys_read(backend, raw["backend"])
    for kind in dict.fromkeys(backend.kinds().values()):
        problem = registered()[kind].check(backend, [*models, *judges])
        if problem:
            raise ConfigError(problem)
    analysis = _analysis(raw["analysis"], list(raw["benchmarks"]))
    settings = Settings(
        document=raw,
        layers=layers,
        data_dir=data_dir,
        results_dir=Path(raw["results_dir"]),
        resources_dir=resources_dir,
        models=models,
        n_items={name: spec["n_items"] for name, spec in raw["benchmarks"].items()},
        envelope=envelope,
        subset_seed=raw["subset"]["seed"],
        fewshot_pool=raw["subset"]["fewshot_pool"],
        backend=backend,
        analysis=analysis,
        select_configs=tuple(select) if select is not None else None,
        partial_results=raw["partial_results"],
        judges=tuple(judges),
    )
    settings.case_study = _case_study(raw.get("case_study"), settings)
    settings.precision_probe = _precision_probe(raw.get("precision_probe"), settings)
    _check_fewshot_pool(settings)
    _check_batch_axis(settings)
    _check_results_dir(settings.results_dir)
    builds = settings.builds_models()
    if builds:
        check_writable_folder("resources_dir", resources_dir)
    _check_apart(
        {
            "results_dir": settings.results_dir,
            **({"resources_dir": resources_dir} if builds else {}),
            "data_dir": data_dir,
        }
    )
    return settings


def _analysis(section: dict[str, Any], run_benchmarks: Sequence[str]) -> AnalysisSettings:
    """The typed `analysis` section (defaults filled)."""
    return AnalysisSettings(
        parse_threshold=section["parse_threshold"],
        subsample=SubsampleSettings.from_section(section["subsample"], run_benchmarks),
        bootstrap=BootstrapSettings(**section["bootstrap"]),
        significance=SignificanceSettings(**section["significance"]),
        conservative_core=tuple(section["conservative_core"]),
        shap=section["shap"],
        shap_seed=section["shap_seed"],
        section=section,
    )


# Sections of a config that runs models; a config that imports results has none of them.
RUN_SECTIONS = (
    "models",
    "judges",
    "benchmarks",
    "envelope",
    "select_configs",
    "precision_probe",
    "case_study",
    "max_new_tokens_cap",
)


def _import_settings(raw: dict[str, Any], layers: tuple[str, ...]) -> Settings:
    """Settings of a config that analyses imported results (`imports`): no models, benchmarks or envelope."""
    present = [key for key in RUN_SECTIONS if raw.get(key) is not None]
    if present:
        raise ConfigError(
            f"{present[0]}: a config with `imports` analyses results produced elsewhere and runs no models; "
            f"remove `{present[0]}` (or `imports`)"
        )
    check_schema(raw, "config")
    _expand_home(raw)
    apply_defaults(raw, checked_schema("config"))
    sources = []
    for index, entry in enumerate(raw["imports"]):
        for key in ("path", "mapping"):
            if key in entry and not os.path.lexists(entry[key]):  # a link loop gets the reader's own message
                raise ConfigError(f"imports[{index}].{key}: {entry[key]}: no such file or folder")
        sources.append(
            ImportSource(entry["kind"], Path(entry["path"]), Path(entry["mapping"]) if "mapping" in entry else None)
        )
    settings = Settings(
        document=raw,
        layers=layers,
        data_dir=Path(raw.get("data_dir", ".")),
        results_dir=Path(raw["results_dir"]),
        resources_dir=Path(raw["resources_dir"]),
        models=[],
        n_items={},
        envelope=None,
        subset_seed=raw["subset"]["seed"],
        fewshot_pool=raw["subset"]["fewshot_pool"],
        backend=BackendSettings.from_section(raw["backend"]),
        analysis=_analysis(raw["analysis"], raw["analysis"]["subsample"]["benchmarks"]),
        select_configs=None,
        partial_results=raw["partial_results"],
        imports=tuple(sources),
    )
    _check_results_dir(settings.results_dir)
    return settings


def _check_declared_axis_names(envelope: Any) -> None:
    """An axis beside the four built-in ones without a mechanism is most likely a misspelt built-in one: say so."""
    axes = envelope.get("axes") if isinstance(envelope, dict) else None
    for axis, body in (axes if isinstance(axes, dict) else {}).items():
        if axis not in AXES and isinstance(body, dict) and "mechanism" not in body:
            raise ConfigError(
                f"envelope.axes.{axis}: not a built-in axis ({', '.join(AXES)}); an axis of your own needs "
                "`mechanism`, `default` and `values` (docs/envelope.md, Declared axes)"
            )


def _check_fewshot_pool(settings: Settings) -> None:
    """Every few-shot config must get all of its examples (a smaller pool would quietly show fewer)."""
    envelope = settings.envelope
    configs = (c for benchmark in settings.benchmarks for c in settings.configs(benchmark))
    needed = max(((envelope.shot_count(c), c.shots) for c in configs), default=(0, ""))
    if settings.fewshot_pool < needed[0]:
        raise ConfigError(
            f"subset.fewshot_pool: {settings.fewshot_pool} is fewer than the {needed[0]} examples of "
            f"shots value '{needed[1]}' (raise the pool, or drop those configs with select_configs)"
        )


def _check_batch_axis(settings: Settings) -> None:
    """A batch-size axis needs a backend that takes a batch size on every path it acts on: one whose
    batch condition has none (vLLM) schedules its own batches."""
    envelope, backend = settings.envelope, settings.backend
    own_batches = (
        c
        for b in settings.benchmarks
        for c in settings.configs(b)
        if backend.batch_condition(c.scoring, None).batch_size is None
    )
    for config in own_batches:
        for axis in envelope.declared("backend_option"):
            if config[axis] != envelope.defaults[axis]:
                size = envelope.axes[axis][config[axis]]["batch_size"]
                operation, kind = backend.operation(config.scoring), backend.serving(config.scoring)
                raise ConfigError(
                    f"envelope.axes.{axis}: value '{config[axis]}' (batch size {size}) on config "
                    f"{config.config_id}, which {registered()[kind].label or kind} serves (backend.{operation}: "
                    f"{kind}) with batches of its own making; keep the axis to log-likelihood cells with a rule "
                    f"(if {{{axis}: [{config[axis]}]}} then {{scoring: [logprob]}}), or {operation} with {backend.default_kind(operation)}"
                )


def _check_server_python(backend: BackendSettings) -> None:
    """`backend.server_python` needs model servers to run it (whether it exists is preflight's)."""
    if backend.server_python is not None and not backend.server:
        raise ConfigError(
            "backend.server_python: model servers run under it, but backend.server is false "
            "(each cell then loads its model itself); set server: true"
        )


def _check_backend_keys_read(backend: BackendSettings, section: Mapping[str, Any]) -> None:
    """A key of the `backend` section set to other than its default (so also in an effective config, whose
    defaults are filled in) that only backends this run does not use read would be ignored."""
    defaults = {
        key: spec.get("default") for key, spec in schema("config")["properties"]["backend"]["properties"].items()
    }
    given = [key for key, value in section.items() if key not in defaults or value != defaults[key]]
    kinds = backend.kinds()
    readers: dict[str, list[str]] = {}
    for kind, declared in registered().items():
        for key in (*declared.options, *declared.reads):
            readers.setdefault(key, []).append(kind)
    for key in given:
        if key in readers and not set(readers[key]) & set(kinds.values()):
            using = ", ".join(f"{operation}: {kind}" for operation, kind in kinds.items())
            operation = registered()[readers[key][0]].serves[0]
            raise ConfigError(
                f"backend.{key}: only the {' and '.join(readers[key])} backend reads it, and this run uses none "
                f"({using}); drop the key, or set {operation}: {readers[key][0]}"
            )


def _expand_home(raw: dict[str, Any]) -> None:
    """`~` is the home folder in every path of a schema-valid config, as in a shell: the effective config holds
    the expanded paths, so the checks, the workflow and every job use one folder. (A model's path and
    backend.server_python are expanded where they are used.)"""
    for key in ("data_dir", "results_dir", "resources_dir", "envelope"):
        if isinstance(raw.get(key), str):
            raw[key] = os.path.expanduser(raw[key])
    for entry in raw.get("imports", ()):
        for key in ("path", "mapping"):
            if key in entry:
                entry[key] = os.path.expanduser(entry[key])


def _check_results_dir(path: Path) -> None:
    """The results folder: no braces (Snakemake would read a wildcard in every output), not the working folder,
    the file system root or inside this package, a folder (or creatable), writable, on a file system that holds
    files (not /proc or /sys)."""
    if any(brace in str(path) for brace in "{}"):
        raise ConfigError(
            f"results_dir: '{path}' holds a brace, which Snakemake reads as a wildcard in every output path; "
            "name a folder without { or }"
        )
    resolved = path.resolve()
    if resolved in (Path.cwd().resolve(), Path(resolved.anchor)):
        raise ConfigError(
            f"results_dir: '{path}' is {'the working folder' if resolved == Path.cwd().resolve() else 'the root'}; "
            "name a folder of its own (e.g. results)"
        )
    package = Path(__file__).resolve().parents[1]
    if resolved.is_relative_to(package):
        raise ConfigError(
            f"results_dir: '{path}' is inside the safetyrepro package ({package}); name a folder outside it"
        )
    existing = check_writable_folder("results_dir", path)
    kind = _file_system(existing)
    if kind in KERNEL_FILE_SYSTEMS:
        raise ConfigError(
            f"results_dir: '{path}' is on a file system that holds no files ({existing}: {kind}); "
            "name a folder on a disk"
        )


# File systems the kernel shows its state through, where no run can keep its results.
KERNEL_FILE_SYSTEMS = frozenset(
    {"proc", "sysfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "configfs", "bpf", "pstore"}
)


def _file_system(folder: Path) -> str | None:
    """The type of the file system `folder` is on, from the mount table (the last mount of the longest mount
    point holding it); None where there is none."""
    import psutil  # a dependency of Snakemake

    mounts = [mount for mount in psutil.disk_partitions(all=True) if folder.is_relative_to(mount.mountpoint)]
    return max(reversed(mounts), key=lambda mount: len(mount.mountpoint)).fstype if mounts else None


def check_writable_folder(key: str, path: Path) -> Path:
    """A folder the run writes into (config key `key`): a folder, or one it can create; writable by this user.
    Returns the folder, or the nearest one above it that exists."""
    resolved = path.resolve()
    existing = next(p for p in (resolved, *resolved.parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"{key}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{key}: {existing} is not writable by this user")
    return existing


def _check_apart(folders: Mapping[str, Path]) -> None:
    """No two of the run's folders (config key -> path) are one, or one inside the other: the run would write
    into the benchmark data, or put what it builds among its results."""
    resolved = {key: path.resolve() for key, path in folders.items()}
    for first, second in itertools.combinations(folders, 2):
        if resolved[first] == resolved[second]:
            relation = "is the same folder as"
        elif resolved[first].is_relative_to(resolved[second]):
            relation = "is inside"
        elif resolved[second].is_relative_to(resolved[first]):
            relation = "holds"
        else:
            continue
        raise ConfigError(
            f"{first}: '{folders[first]}' {relation} {second} ('{folders[second]}'); give each a folder of its own"
        )


def _check_every_benchmark_has_configs(
    envelope: Envelope, benchmarks: Sequence[str], select: Sequence[str] | None
) -> None:
    """Every benchmark of the run keeps a config: the envelope's rules and select_configs must leave it one."""
    for name in benchmarks:
        valid = envelope.configs(name)
        if not valid:  # name the rules that alone exclude a config (else every rule that excludes one)
            choices = [dict(c.values) | {"benchmark": name} for c in envelope.all_configs()]
            failing = [[rule.name for rule in envelope.rules if not rule.holds(choice)] for choice in choices]
            alone = {names[0] for names in failing if len(names) == 1}
            blamed = alone or {rule for names in failing for rule in names}
            rules = [rule.name for rule in envelope.rules if rule.name in blamed]
            raise ConfigError(
                f"benchmarks.{name}: the envelope's rules ({', '.join(rules)}) leave it no valid config; "
                "change a rule, or drop the benchmark"
            )
        if select is not None and not any(c.config_id in select for c in valid):
            raise ConfigError(
                f"select_configs: keeps none of the {len(valid)} valid configs of benchmark {name} "
                f"(e.g. {valid[0].config_id}); add one, or drop the benchmark"
            )


def _models(entries: list[dict[str, Any]], resources_dir: Path, key: str = "models") -> list[ModelSpec]:
    """The specs of the `models` (or `judges`) section's entries."""
    models, seen = [], set()
    for index, entry in enumerate(entries):
        where = f"{key}[{index}] ({entry['name']})"
        if entry["name"] in seen:
            raise ConfigError(f"{where}.name: duplicate model name '{entry['name']}'")
        seen.add(entry["name"])
        if ("path" in entry) == ("embedded" in entry):
            raise ConfigError(f"{where}: give exactly one of 'path' (HF id or local directory) or 'embedded'")
        if "path" in entry:
            _check_model_path(where, entry["path"])
        path = (
            os.path.expanduser(entry["path"])
            if "path" in entry
            else str(embedded_folder(resources_dir, entry["embedded"]))
        )
        models.append(
            ModelSpec(
                entry["name"],
                path,
                entry["precision"],
                entry["chat_template"],
                entry["trust_remote_code"],
                entry.get("revision"),
                entry.get("embedded"),
            )
        )
    return models


def _check_judges(envelope: Envelope, models: list[ModelSpec], judges: list[ModelSpec]) -> None:
    """A judge's name is no grid model's (both name a model server and its files), and every judge a
    scorer axis names is one of the config's judges."""
    names = {spec.name for spec in models}
    for index, spec in enumerate(judges):
        if spec.name in names:
            raise ConfigError(
                f"judges[{index}] ({spec.name}).name: a model of the grid has that name; give the judge another"
            )
    known = [spec.name for spec in judges]
    named = {params.get("judge") for axis in envelope.declared("scorer") for params in envelope.axes[axis].values()}
    for axis in envelope.declared("scorer"):
        for value, params in envelope.axes[axis].items():
            if "judge" in params and params["judge"] not in known:
                raise ConfigError(
                    f"envelope.axes.{axis}.values.{value}.judge: no judge named {excerpt(params['judge'])} "
                    f"(the config's judges: {', '.join(known) or 'none; add a `judges` section'})"
                )
    for index, spec in enumerate(judges):
        if spec.name not in named:
            raise ConfigError(
                f"judges[{index}] ({spec.name}): no value of a scorer axis names it (a value "
                f"{{scorer: judge, judge: {spec.name}}} does: docs/scorers.md)"
            )


def _check_data_dir(data_dir: Path, benchmarks: Mapping[str, Any]) -> None:
    fetch_hint = f"`safetyrepro fetch-data --data-dir {data_dir}` downloads the pinned files"
    if data_dir.exists() and not data_dir.is_dir():
        raise ConfigError(f"data_dir: {data_dir} is a file, not a folder")
    if not data_dir.is_dir() and os.path.islink(data_dir):
        try:
            os.stat(data_dir)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ConfigError(
                    f"data_dir: {data_dir} is a symbolic link that leads back to itself; point it at the benchmark data"
                ) from None
        raise ConfigError(f"data_dir: {data_dir} is a symbolic link to {os.readlink(data_dir)}, which does not exist")
    if not data_dir.is_dir():
        raise ConfigError(f"data_dir: {data_dir} does not exist (set data_dir or {DATA_DIR_ENV}; {fetch_hint})")
    if not any(data_dir.iterdir()):
        raise ConfigError(f"data_dir: {data_dir} is empty ({fetch_hint})")
    for name in benchmarks:
        folder = data_dir / BENCHMARKS[name].folder
        if os.path.lexists(folder) and not folder.is_dir():
            what = "a broken symbolic link or a link loop" if os.path.islink(folder) else "a file"
            raise ConfigError(f"benchmarks.{name}: {folder} is {what}, not a folder of data ({fetch_hint})")
        if not folder.is_dir() or not any(folder.iterdir()):
            raise ConfigError(f"benchmarks.{name}: no data in {folder} ({fetch_hint})")


def _case_study(section: Mapping[str, Any] | None, settings: Settings) -> CaseStudySettings | None:
    """The case study's settings, checked against the grid; None when absent or not enabled."""
    if not section or not section["enabled"]:
        return None
    spec = next((m for m in settings.run_models() if m.name == section["model"]), None)
    if spec is None:
        raise ConfigError(f"case_study.model: no model named '{section['model']}' under `models`")
    if spec.precision == "nf4":
        raise ConfigError("case_study.model: lm-eval and Inspect AI load fp32 or bf16 here, not nf4")
    for benchmark in section["benchmarks"]:
        if benchmark not in settings.n_items:
            raise ConfigError(f"case_study.benchmarks: '{benchmark}' is not under `benchmarks` of this config")
        anchor = {c.config_id: c for c in settings.envelope.configs(benchmark)}.get(section["anchor_config"])
        if anchor is None:
            raise ConfigError(
                f"case_study.anchor_config: '{section['anchor_config']}' is no valid config of {benchmark}"
            )
        off = [axis for axis, default in settings.envelope.defaults.items() if anchor[axis] != default]
        if off:  # the case study builds its own items and batches: only the built-in axes carry over
            raise ConfigError(
                f"case_study.anchor_config: '{section['anchor_config']}' is off the default of declared axis "
                f"'{off[0]}'; the case study compares harnesses on the four built-in axes only"
            )
    parity = section["parity"]
    try:
        check_parity_template(parity["template"], "case_study.parity.template")
    except EnvelopeError as exc:
        raise ConfigError(str(exc)) from None
    return CaseStudySettings(
        spec,
        tuple(section["benchmarks"]),
        section["n_items"],
        section["anchor_config"],
        section["batch_size"],
        section["max_new_tokens"],
        parity["template"],
        parity["target_delimiter"],
        section,
    )


def _precision_probe(section: Mapping[str, Any] | None, settings: Settings) -> PrecisionProbe | None:
    """The probe's settings: its configs checked against the grid, a twin per model at the probe precision."""
    if not section:
        return None
    configs = tuple(section.get("configs") or settings.analysis.conservative_core)
    if not configs:
        raise ConfigError("precision_probe.configs: no configs to run (name them, or set analysis.conservative_core)")
    grid = {c.config_id for b in settings.benchmarks for c in settings.configs(b)}
    outside = [cid for cid in configs if cid not in grid]
    if outside:
        key = (
            "precision_probe.configs" if section.get("configs") else "analysis.conservative_core (the probe's configs)"
        )
        valid = any(c.config_id == outside[0] for b in settings.benchmarks for c in settings.envelope.configs(b))
        why = "select_configs leaves it out" if valid else "no valid config of the envelope has that id"
        raise ConfigError(f"{key}: '{outside[0]}' is not a config of this grid ({why})")
    rescored = [
        c.config_id
        for b in settings.benchmarks
        for c in settings.configs(b)
        if c.config_id in configs and settings.envelope.generation_twin(c, b) is not None
    ]
    if rescored:
        raise ConfigError(
            f"precision_probe.configs: '{rescored[0]}' only labels another config's responses with another scorer "
            "(the probe compares generations: name the config at the scorer axis's default)"
        )
    precision = section["precision"]

    at_precision = {spec.weights(): spec.name for spec in settings.models if spec.precision == precision}
    twins, new_models = {}, []
    for spec in settings.models:
        if spec.precision == precision:
            continue
        if spec.weights() not in at_precision:
            at_precision[spec.weights()] = f"{spec.name}@{precision}"
            new_models.append(replace(spec, name=at_precision[spec.weights()], precision=precision))
        twins[spec.name] = at_precision[spec.weights()]
    if not twins:
        raise ConfigError(f"precision_probe.precision: every model already runs at {precision}; name another precision")
    return PrecisionProbe(precision, configs, twins, tuple(new_models))
