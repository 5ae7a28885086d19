"""Building a run's settings: `load_settings` is the only way in.

It resolves the layers (a complete config file, or an overlay that names its base with `extends:`), applies
`--config` overrides, checks the result against the package's schema, fills the schema's defaults once, and
returns the typed `Settings` that the Snakefile, `safetyrepro check` and every job use. Jobs read the effective
config written by the Snakefile (`Settings.document`), so they resolve nothing again. `_settings` reads as the
order of the build."""

from __future__ import annotations

import copy
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from safetyrepro.analysis.suite import result_columns
from safetyrepro.backends import registered
from safetyrepro.benchmarks import BENCHMARKS, BROKEN
from safetyrepro.configuration.checks import (
    check_apart,
    check_backend_keys_read,
    check_batch_axis,
    check_budget,
    check_data_dir,
    check_declared_axis_names,
    check_every_benchmark_has_configs,
    check_fewshot_pool,
    check_human_labels,
    check_judges,
    check_model_path,
    check_parallel_models,
    check_results_dir,
    check_schema,
    check_served_models,
    check_server_python,
    check_writable_folder,
    checked_schema,
    refuse_broken_backends,
)
from safetyrepro.configuration.envelope import Envelope, EnvelopeError, check_parity_template
from safetyrepro.configuration.loading import (
    DEFAULT_CONFIGFILE,
    check_shape,
    merge_layer,
    read_document,
    read_yaml,
    typed_override,
    with_bases,
)
from safetyrepro.configuration.schema import ConfigError, apply_defaults, schema
from safetyrepro.configuration.settings import (
    DATA_DIR_ENV,
    AnalysisSettings,
    BackendSettings,
    BootstrapSettings,
    CaseStudySettings,
    ImportSource,
    PrecisionProbe,
    Settings,
    SignificanceSettings,
    SubsampleSettings,
    embedded_folder,
)
from safetyrepro.core.model_spec import CHAT_TEMPLATE_WORDS, Endpoint, ModelSpec


def load_settings(
    source: str | os.PathLike | Mapping[str, Any] | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """The checked settings of a run: a config file (default config/config.yaml), or a mapping, with its
    `extends` layers and `--config` overrides; validated, defaults filled from the schema."""
    if isinstance(source, Mapping):
        document, layers = with_bases(dict(source), "(config mapping)", "")
    else:
        path = str(DEFAULT_CONFIGFILE if source is None else source)
        document, layers = with_bases(read_document(path), path, os.path.dirname(path))
    if overrides:
        document = merge_layer(document, overrides)
        layers.append(f"--config overrides of {', '.join(map(str, overrides))}")
    return _settings(document, tuple(layers))


def load_run_settings(configfiles: Sequence[str | os.PathLike], overrides: Mapping[str, Any]) -> Settings:
    """The settings of a Snakemake run from its `--configfile` list and `--config` overrides (each checked
    for alias bombs and deep nesting, `check_shape`, before anything walks it)."""
    for key, value in overrides.items():
        check_shape(value, f"--config {key}")
    overrides = {key: typed_override(value, key) for key, value in overrides.items()}
    if len(configfiles) > 1:
        raise ConfigError(
            f"give one config file, not {len(configfiles)} ({', '.join(map(str, configfiles))}); "
            "to layer files, write `extends: <base config>` in the overlay (docs/configuration.md)"
        )
    return load_settings(os.path.relpath(configfiles[0]) if configfiles else None, overrides)


def _settings(raw: dict[str, Any], layers: tuple[str, ...]) -> Settings:
    """Check a merged config, fill in the defaults and build the typed settings, step by step: the document
    (schema, defaults, the envelope's file), the envelope, the models, the configs selected, the backend, the
    settings, and last the checks across them."""
    raw = _chat_template_words(copy.deepcopy(raw))
    if "imports" in raw:
        return _import_settings(raw, layers)
    raw, layers = _effective_document(raw, layers)
    envelope = _envelope(raw)
    resources_dir = Path(raw["resources_dir"])
    models = _models(raw["models"], resources_dir)
    judges = _models(raw.get("judges", []), resources_dir, "judges")  # no default: an imports config has none
    check_judges(envelope, models, judges)
    data_dir = Path(raw["data_dir"])
    check_data_dir(data_dir, raw["benchmarks"])
    select = _selected_configs(raw, envelope)
    backend = _backend(raw["backend"], [*models, *judges])
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
        analysis=_analysis(raw["analysis"], list(raw["benchmarks"])),
        select_configs=tuple(select) if select is not None else None,
        partial_results=raw["partial_results"],
        judges=tuple(judges),
    )
    settings.case_study = _case_study(raw.get("case_study"), settings)
    settings.precision_probe = _precision_probe(raw.get("precision_probe"), settings)
    _check_across(settings)
    return settings


def _chat_template_words(raw: dict[str, Any]) -> dict[str, Any]:
    """A model's or judge's chat_template given as on/off, which YAML 1.1 reads as booleans, as the words."""
    entries = [entry for key in ("models", "judges") if isinstance(raw.get(key), list) for entry in raw[key]]
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("chat_template"), bool):  # YAML 1.1: on/off are booleans
            entry["chat_template"] = "on" if entry["chat_template"] else "off"
    return raw


def _effective_document(raw: dict[str, Any], layers: tuple[str, ...]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The config checked against the schema, `~` expanded, the envelope's file (and its layers) read in, the
    defaults filled and data_dir from the environment variable where it is set; with a line for that layer."""
    refuse_broken_backends(raw.get("backend"))
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
            envelope_raw, _ = with_bases(envelope_raw, path, os.path.dirname(path))
    check_declared_axis_names(envelope_raw)
    check_schema(envelope_raw, "envelope", "envelope.")
    apply_defaults(raw, checked_schema("config"))  # raw (and an inline envelope in it) is this function's own copy
    apply_defaults(envelope_raw, schema("envelope"))
    raw["envelope"] = envelope_raw
    data_dir_variable = os.path.expanduser(os.environ.get(DATA_DIR_ENV, ""))
    if data_dir_variable and data_dir_variable != raw["data_dir"]:
        raw["data_dir"] = data_dir_variable
        layers = (*layers, f"{DATA_DIR_ENV}={raw['data_dir']} (overrides data_dir)")
    return raw, layers


def _envelope(raw: dict[str, Any]) -> Envelope:
    """The envelope of the run's benchmarks (each registered and usable), checked as its cells will run: the token
    cap applied, no two configs running one cell, each rescoring config's twin kept."""
    for name in raw["benchmarks"]:
        if name in BROKEN:
            raise ConfigError(f"benchmarks.{name}: {BROKEN[name]}")
    unknown = sorted(set(raw["benchmarks"]) - set(BENCHMARKS))
    if unknown:
        raise ConfigError(f"benchmarks.{unknown[0]}: unknown benchmark (known: {', '.join(BENCHMARKS)})")
    try:
        envelope = Envelope.from_dict(raw["envelope"], BENCHMARKS, BROKEN, result_columns())
        envelope.token_cap = raw.get("max_new_tokens_cap")
        for name in raw["benchmarks"]:  # the run's benchmarks, as its cells will run them (the token cap applied)
            envelope.check_distinct_cells(name, BENCHMARKS[name].task)
            for config in envelope.configs(name):  # a config of another scorer labels its twin's responses
                envelope.generation_twin(config, name)
    except EnvelopeError as exc:
        raise ConfigError(str(exc)) from None
    return envelope


def _selected_configs(raw: dict[str, Any], envelope: Envelope) -> list[str] | None:
    """`select_configs` (None: every valid config), each id in it and in analysis.conservative_core a valid config,
    every benchmark left a config, and each selected config that rescores another's responses with that one."""
    known = {c.config_id for b in raw["benchmarks"] for c in envelope.configs(b)}
    select = raw.get("select_configs")
    for key, ids in (
        ("select_configs", select or []),
        ("analysis.conservative_core", raw["analysis"]["conservative_core"]),
    ):
        missing = [cid for cid in ids if cid not in known]
        if missing:
            raise ConfigError(f"{key}: '{missing[0]}' is not a valid config of any benchmark")
    check_every_benchmark_has_configs(envelope, list(raw["benchmarks"]), select)
    for name in raw["benchmarks"] if select is not None else ():
        for config in (c for c in envelope.configs(name) if c.config_id in select):
            twin = envelope.generation_twin(config, name)
            if twin is not None and twin.config_id not in select:
                raise ConfigError(
                    f"select_configs: '{config.config_id}' labels the {name} responses of '{twin.config_id}' "
                    "with another scorer; select that config too"
                )
    return select


def _backend(section: Mapping[str, Any], models: Sequence[ModelSpec]) -> BackendSettings:
    """The typed `backend` section, checked by this package and by each backend in use (for `models`)."""
    backend = BackendSettings.from_section(section, registered())
    check_server_python(backend)
    check_backend_keys_read(backend, section)
    for kind in dict.fromkeys(backend.kinds().values()):  # the models it runs: a served model's server runs it
        problem = registered()[kind].check(backend, [spec for spec in models if spec.endpoint is None])
        if problem:
            raise ConfigError(problem)
    return backend


def _check_across(settings: Settings) -> None:
    """The checks of the settings as a whole: the few-shot pool, a batch axis, and the run's folders."""
    check_fewshot_pool(settings)
    check_batch_axis(settings)
    check_served_models(settings)
    check_parallel_models(settings)
    check_budget(settings)
    check_human_labels(settings)
    check_results_dir(settings.results_dir)
    builds = settings.builds_models()
    if builds:
        check_writable_folder("resources_dir", settings.resources_dir)
    check_apart(
        {
            "results_dir": settings.results_dir,
            **({"resources_dir": settings.resources_dir} if builds else {}),
            "data_dir": settings.data_dir,
        }
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
    labels = raw.get("human_labels")
    if isinstance(labels, dict):
        raw["human_labels"] = {name: os.path.expanduser(path) for name, path in labels.items()}


def _models(entries: list[dict[str, Any]], resources_dir: Path, key: str = "models") -> list[ModelSpec]:
    """The specs of the `models` (or `judges`) section's entries."""
    models, seen = [], set()
    for index, entry in enumerate(entries):
        where = f"{key}[{index}] ({entry['name']})"
        if entry["name"] in seen:
            raise ConfigError(f"{where}.name: duplicate model name '{entry['name']}'")
        seen.add(entry["name"])
        endpoint = _endpoint(where, entry.get("endpoint"))
        if ("path" in entry and "embedded" in entry) or (
            endpoint is None and "path" not in entry and "embedded" not in entry
        ):
            served = "" if endpoint is not None else " (or an 'endpoint': a model behind a server)"
            raise ConfigError(f"{where}: give exactly one of 'path' (HF id or local directory) or 'embedded'{served}")
        if "path" in entry:
            check_model_path(where, entry["path"])
        path = (
            os.path.expanduser(entry["path"])
            if "path" in entry
            else str(embedded_folder(resources_dir, entry["embedded"]))
            if "embedded" in entry
            else ""
        )
        parallel = entry.get("parallel", {"tensor": 1, "pipeline": 1})
        if endpoint is not None and parallel["tensor"] * parallel["pipeline"] > 1:
            raise ConfigError(
                f"{where}: gives both 'endpoint' and 'parallel'; a served model's server splits it over its own GPUs "
                "(vllm serve --tensor-parallel-size): leave 'parallel' out"
            )
        template, template_sha256 = _chat_template(where, entry, endpoint)
        models.append(
            ModelSpec(
                entry["name"],
                path,
                entry["precision"],
                template,
                entry["trust_remote_code"],
                entry.get("revision"),
                entry.get("embedded"),
                endpoint,
                parallel["tensor"],
                parallel["pipeline"],
                template_sha256,
            )
        )
    return models


def _chat_template(where: str, entry: dict[str, Any], endpoint: Endpoint | None) -> tuple[str, str | None]:
    """A model entry's chat_template: auto, on or off, or a Jinja file (its path, `~` expanded), which must be a
    readable file and a template the tokenizer applies: not on the chat API, whose server applies its own; with the
    SHA-256 of the file's text as it is read here (None for a word)."""
    value = entry["chat_template"]
    if value in CHAT_TEMPLATE_WORDS:
        return value, None
    path = os.path.expanduser(value)
    try:
        text = Path(path).read_bytes()
        text.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else "not a readable text file"
        raise ConfigError(
            f"{where}.chat_template: {value}: {reason} (give auto, on, off or a Jinja chat template file)"
        ) from None
    if endpoint is not None and (endpoint.api == "chat" or not ("path" in entry or "embedded" in entry)):
        raise ConfigError(
            f"{where}.chat_template: a template file needs the completions API and the model's tokenizer ('path' or "
            "'embedded'); on the chat API the server applies its own (vllm serve --chat-template <file>)"
        )
    return path, hashlib.sha256(text).hexdigest()


def _endpoint(where: str, section: dict[str, Any] | None) -> Endpoint | None:
    """A model entry's `endpoint` (schema-checked, defaults filled in); a URL with credentials in it is refused:
    a key goes in the environment variable `api_key_env` names, never in a config."""
    if section is None:
        return None
    import httpx

    try:
        parts = urlsplit(section["url"])
        parts.port  # noqa: B018 (raises on a port that is no number, or out of range)
        httpx.URL(section["url"])
    except (ValueError, httpx.InvalidURL) as error:
        raise ConfigError(f"{where}.endpoint.url: not a URL a client can ask ({error})") from None
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            f"{where}.endpoint.url: holds credentials; give the server's URL without them, and name the environment "
            "variable that holds the key in api_key_env"
        )
    return Endpoint(**section)


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

    # a served model has no twin: its precision is its server's, not this run's to choose
    local = [spec for spec in settings.models if spec.endpoint is None]
    at_precision = {spec.weights(): spec.name for spec in local if spec.precision == precision}
    twins, new_models = {}, []
    for spec in local:
        if spec.precision == precision:
            continue
        if spec.weights() not in at_precision:
            at_precision[spec.weights()] = f"{spec.name}@{precision}"
            new_models.append(replace(spec, name=at_precision[spec.weights()], precision=precision))
        twins[spec.name] = at_precision[spec.weights()]
    if not twins:
        served = " or is served (its precision is its server's)" if len(local) < len(settings.models) else ""
        raise ConfigError(
            f"precision_probe.precision: every model already runs at {precision}{served}; name another precision"
        )
    return PrecisionProbe(precision, configs, twins, tuple(new_models))


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
    "human_labels",
)


def _import_settings(raw: dict[str, Any], layers: tuple[str, ...]) -> Settings:
    """Settings of a config that analyses imported results (`imports`): no models, benchmarks or envelope."""
    defaults = schema("config")["properties"]
    # a section at its schema default is none (human_labels' {} is in every effective config, which imports reload)
    present = [key for key in RUN_SECTIONS if raw.get(key) not in (None, defaults[key].get("default"))]
    estimate = raw.get("estimate")  # its defaults are no run section: the effective config of imports has them
    present += [
        f"estimate.{key}" for key in ("budget_share", "budget_cells") if isinstance(estimate, dict) and key in estimate
    ]
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
        backend=BackendSettings.from_section(raw["backend"], registered()),
        analysis=_analysis(raw["analysis"], raw["analysis"]["subsample"]["benchmarks"]),
        select_configs=None,
        partial_results=raw["partial_results"],
        imports=tuple(sources),
    )
    check_results_dir(settings.results_dir)
    return settings
