"""Loading and checking a run configuration (YAML, validated against the package's schemas)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any, Mapping

import jsonschema
import yaml

from .benchmarks import BENCHMARKS
from .envelope import Config, Envelope, EnvelopeError

DATA_DIR_ENV = "SAFETYREPRO_DATA_DIR"
EMBEDDED_MODELS = {"gemma-3-270m": "gemma-3-270m"}


class ConfigError(ValueError):
    """A configuration problem, with a message naming the offending key."""


@cache
def schema(name: str) -> dict[str, Any]:
    """The packaged JSON schema `name` (config or envelope)."""
    return yaml.safe_load(files("safetyrepro").joinpath(f"schemas/{name}.schema.yaml").read_text())


def read_yaml(path: str | os.PathLike) -> Any:
    """Safe-load a YAML file, turning syntax errors into a ConfigError with the position."""
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{where}: YAML syntax error: {problem}") from None


def _schema_message(error: jsonschema.ValidationError) -> str:
    """One line for a schema violation: what is wrong, without echoing whole sub-documents."""
    value, rule = error.instance, error.validator_value
    if error.validator == "additionalProperties":
        extra = sorted(set(value) - set(error.schema.get("properties", {})))
        return f"unknown key(s) {', '.join(map(repr, extra))}"
    if error.validator in ("minItems", "minProperties"):
        return f"needs at least {rule} entr{'y' if rule == 1 else 'ies'}, got {len(value)}"
    if error.validator == "type":
        return f"expected {rule}, got {type(value).__name__} {value!r}"
    if error.validator == "required":
        missing = [key for key in rule if key not in value]
        return f"missing required key(s) {', '.join(map(repr, missing))}"
    if error.validator == "enum":
        return f"{value!r} is not one of {', '.join(map(str, rule))}"
    if error.validator == "pattern":
        allowed = "letters, digits and ." + (" _ + -" if "_" in rule else "")
        return f"{value!r} may use only {allowed}, starting with a letter or digit (it names files and jobs)"
    if error.validator == "uniqueItems":
        return "entries must be unique"
    return error.message


def _check_schema(data: Any, name: str, prefix: str = "") -> None:
    validator = jsonschema.Draft202012Validator(schema(name))
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        key = prefix + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
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


@dataclass
class Settings:
    """A checked run configuration."""

    raw: dict[str, Any]
    data_dir: Path
    results_dir: Path
    resources_dir: Path
    models: list[ModelSpec]
    benchmarks: dict[str, dict[str, Any]]
    envelope: Envelope
    subset_seed: int
    fewshot_pool: int
    backend: dict[str, Any]
    select_configs: list[str] | None

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

    def cells(self) -> list[tuple[ModelSpec, str, Config]]:
        """Every (model, benchmark, config) cell of the grid."""
        return [(m, b, c) for m in self.models for b in self.benchmarks for c in self.configs(b)]

    def model(self, name: str) -> ModelSpec:
        """The model spec called `name`."""
        for spec in self.models:
            if spec.name == name:
                return spec
        raise ConfigError(f"models: no model named '{name}'")


def load_settings(source: str | os.PathLike | Mapping[str, Any]) -> Settings:
    """Read a config file (or an already-loaded mapping), validate it and resolve paths."""
    raw = dict(read_yaml(source) if not isinstance(source, Mapping) else source)
    if not isinstance(raw, dict):
        raise ConfigError("the config must be a YAML mapping")
    _check_schema(raw, "config")
    envelope_raw = raw["envelope"]
    if isinstance(envelope_raw, str):
        envelope_raw = read_yaml(envelope_raw)
    _check_schema(envelope_raw, "envelope", "envelope.")

    unknown = sorted(set(raw["benchmarks"]) - set(BENCHMARKS))
    if unknown:
        raise ConfigError(f"benchmarks.{unknown[0]}: unknown benchmark (known: {', '.join(BENCHMARKS)})")
    try:
        envelope = Envelope.from_dict(envelope_raw, list(raw["benchmarks"]))
    except EnvelopeError as exc:
        raise ConfigError(str(exc)) from None

    resources_dir = Path(raw.get("resources_dir", "resources"))
    models, seen = [], set()
    for index, entry in enumerate(raw["models"]):
        where = f"models[{index}] ({entry['name']})"
        if entry["name"] in seen:
            raise ConfigError(f"{where}.name: duplicate model name '{entry['name']}'")
        seen.add(entry["name"])
        if ("path" in entry) == ("embedded" in entry):
            raise ConfigError(f"{where}: give exactly one of 'path' (HF id or local directory) or 'embedded'")
        if "path" in entry:
            _check_model_path(where, entry["path"])
        path = entry.get("path") or str(resources_dir / "models" / EMBEDDED_MODELS[entry["embedded"]])
        models.append(ModelSpec(entry["name"], path, entry.get("precision", "bf16"),
                                entry.get("chat_template", "auto"), entry.get("trust_remote_code", False),
                                entry.get("revision"), entry.get("embedded")))

    data_dir = Path(os.environ.get(DATA_DIR_ENV) or raw["data_dir"])
    fetch_hint = f"`safetyrepro fetch-data --data-dir {data_dir}` downloads the pinned files"
    if not data_dir.is_dir():
        raise ConfigError(f"data_dir: {data_dir} does not exist (set data_dir or {DATA_DIR_ENV}; {fetch_hint})")
    if not any(data_dir.iterdir()):
        raise ConfigError(f"data_dir: {data_dir} is empty ({fetch_hint})")
    for name in raw["benchmarks"]:
        folder = data_dir / BENCHMARKS[name].folder
        if not folder.is_dir() or not any(folder.iterdir()):
            raise ConfigError(f"benchmarks.{name}: no data in {folder} ({fetch_hint})")

    select = raw.get("select_configs")
    if select is not None:
        known = {c.config_id for b in raw["benchmarks"] for c in envelope.configs(b)}
        missing = [cid for cid in select if cid not in known]
        if missing:
            raise ConfigError(f"select_configs: '{missing[0]}' is not a valid config of any benchmark")

    envelope.token_cap = raw.get("max_new_tokens_cap")
    subset = raw.get("subset", {})
    return Settings(raw, data_dir, Path(raw.get("results_dir", "results")), resources_dir, models,
                    {k: dict(v) for k, v in raw["benchmarks"].items()}, envelope,
                    int(subset.get("seed", 0)), int(subset.get("fewshot_pool", 20)),
                    dict(raw.get("backend", {})), select)
