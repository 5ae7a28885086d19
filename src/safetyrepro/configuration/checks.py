"""The checks of a run's config: against the packaged schema as the registered backends extend it
(`checked_schema`), and those a schema cannot make, against the registered backends and benchmarks, the file
system, the envelope and each other. Each raises a ConfigError naming the key."""

from __future__ import annotations

import copy
import errno
import itertools
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetyrepro.backends import discovered, registered
from safetyrepro.benchmarks import BENCHMARKS
from safetyrepro.configuration.schema import ConfigError, StrictValidator, schema, schema_message
from safetyrepro.configuration.settings import DATA_DIR_ENV, BackendSettings
from safetyrepro.core.axes import AXES
from safetyrepro.core.messages import excerpt
from safetyrepro.core.model_spec import SERVED_BY
from safetyrepro.core.operations import OPERATIONS

if TYPE_CHECKING:
    from safetyrepro.configuration.envelope import Envelope
    from safetyrepro.configuration.settings import Settings
    from safetyrepro.core.model_spec import ModelSpec


def checked_schema(name: str) -> dict[str, Any]:
    """The schema documents are checked against: the packaged one, where a config's `backend` section
    takes the registered backends (safetyrepro.backends): backend.generate and backend.loglikelihood
    name one that serves the operation (not SERVED_BY, which a served model's `endpoint` chooses), and a plugin's
    own options (its `option_schema`) are keys."""
    if name != "config":
        return schema(name)
    backends = registered()
    root = copy.deepcopy(schema(name))
    keys = root["properties"]["backend"]["properties"]
    for operation in OPERATIONS:
        keys[operation]["enum"] = sorted(
            kind for kind, backend in backends.items() if operation in backend.serves and kind != SERVED_BY
        )
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


def check_schema(data: Any, name: str, prefix: str = "") -> None:
    """Validate `data` against the packaged schema `name`; the first error, named by its key, as a ConfigError."""
    validator = StrictValidator(checked_schema(name))
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
        key = (prefix + path).rstrip(". :")  # "envelope." or "<file>: " with nothing after it
        raise ConfigError(f"{key or '(top level)'}: {schema_message(error)}")


HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


def check_model_path(where: str, path: str) -> None:
    """A local model must be a folder with config.json; anything shaped like `org/name` may be a hub id."""
    local = Path(path).expanduser()
    if local.exists():
        if not (local / "config.json").is_file():
            raise ConfigError(f"{where}.path: {path} is not a model folder (no config.json in it)")
    elif not HUB_ID.fullmatch(path):
        raise ConfigError(f"{where}.path: {path} does not exist (and is not a hub id of the form org/name)")


def refuse_broken_backends(section: Any) -> None:
    """A ConfigError where the backend of an operation (the config's, else the default) is a plugin that cannot
    be used, with its error (docs/extending.md); a config that uses none of those goes on without them."""
    broken = discovered().broken
    for operation in OPERATIONS:
        kind = section.get(operation) if isinstance(section, dict) else None
        kind = BackendSettings.default_kind(operation) if kind is None else kind
        if isinstance(kind, str) and kind in broken:
            raise ConfigError(f"backend.{operation}: {broken[kind]}")


def check_declared_axis_names(envelope: Any) -> None:
    """An axis beside the four built-in ones without a mechanism is most likely a misspelt built-in one: say so."""
    axes = envelope.get("axes") if isinstance(envelope, dict) else None
    for axis, body in (axes if isinstance(axes, dict) else {}).items():
        if axis not in AXES and isinstance(body, dict) and "mechanism" not in body:
            raise ConfigError(
                f"envelope.axes.{axis}: not a built-in axis ({', '.join(AXES)}); an axis of your own needs "
                "`mechanism`, `default` and `values` (docs/envelope.md, Declared axes)"
            )


def check_data_dir(data_dir: Path, benchmarks: Mapping[str, Any]) -> None:
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


def check_judges(envelope: Envelope, models: list[ModelSpec], judges: list[ModelSpec]) -> None:
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
    for axis in envelope.declared("scorer"):
        for value, params in envelope.axes[axis].items():
            if "judge" in params and _asks_conversation(params["scorer"], params.get("question")):
                index = known.index(params["judge"])
                _check_renders_conversations(f"envelope.axes.{axis}.values.{value}", params, index, judges[index])


def _asks_conversation(scorer: str, phrasing: str | None) -> bool:
    """Whether a judge-asking scorer asks some benchmark that has it (in `phrasing`) a conversation of turns."""
    from safetyrepro.plugins import scorer_module
    from safetyrepro.scorers import asks_conversation, scorer_of

    return any(
        asks_conversation(benchmark, scorer, phrasing)
        for benchmark in BENCHMARKS.values()
        if scorer in benchmark.scorers
        and (
            phrasing is None
            or phrasing in getattr(scorer_module(scorer_of(benchmark, scorer).question), "PHRASINGS", {})
        )
    )


def _check_renders_conversations(where: str, params: Mapping[str, Any], index: int, judge: ModelSpec) -> None:
    """A judge asked a conversation (a guard model's request and reply) has a chat template to put it in: not
    `chat_template: off`, and a served one either on the chat API (its server's template) or with its tokenizer."""
    asked = f"{where}: scorer '{params['scorer']}' asks judge '{judge.name}' the request and the reply as two turns"
    if judge.chat_template == "off" and (judge.endpoint is None or judge.endpoint.api == "completions"):
        raise ConfigError(
            f"{asked}, which only its chat template can render, and judges[{index}] has chat_template: off (give its "
            "input format as a Jinja file: chat_template: <file>)"
        )
    if judge.endpoint is not None and judge.endpoint.api == "completions" and not judge.path:
        raise ConfigError(
            f"{asked}; on the completions API the run renders them with the judge's tokenizer, and judges[{index}] "
            "names none: give its 'path' (or 'embedded'), or serve it on the chat API (api: chat)"
        )


def check_every_benchmark_has_configs(
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


def check_server_python(backend: BackendSettings) -> None:
    """`backend.server_python` needs model servers to run it (whether it exists is preflight's)."""
    if backend.server_python is not None and not backend.server:
        raise ConfigError(
            "backend.server_python: model servers run under it, but backend.server is false "
            "(each cell then loads its model itself); set server: true"
        )


def check_backend_keys_read(backend: BackendSettings, section: Mapping[str, Any]) -> None:
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


def check_fewshot_pool(settings: Settings) -> None:
    """Every few-shot config must get all of its examples (a smaller pool would quietly show fewer)."""
    envelope = settings.envelope
    configs = (c for benchmark in settings.benchmarks for c in settings.configs(benchmark))
    needed = max(((envelope.shot_count(c), c.shots) for c in configs), default=(0, ""))
    if settings.fewshot_pool < needed[0]:
        raise ConfigError(
            f"subset.fewshot_pool: {settings.fewshot_pool} is fewer than the {needed[0]} examples of "
            f"shots value '{needed[1]}' (raise the pool, or drop those configs with select_configs)"
        )


def check_human_labels(settings: Settings) -> None:
    """Each file of `human_labels` is of a benchmark of the run that has human labels of replies, and is there."""
    from safetyrepro.scorers.human_labels import with_human_labels

    for benchmark, path in settings.human_label_files.items():
        if benchmark not in settings.benchmarks:
            raise ConfigError(
                f"human_labels.{benchmark}: not a benchmark of this run ({', '.join(settings.benchmarks)})"
            )
        if not with_human_labels([benchmark]):
            raise ConfigError(f"human_labels.{benchmark}: {benchmark} has no human labels of replies to correct with")
        if not path.is_file():
            raise ConfigError(
                f"human_labels.{benchmark}: {path}: no such file (`safetyrepro label` draws the replies to label)"
            )


def check_budget(settings: Settings) -> None:
    """A budget (`estimate`) is a share or a count of cells, not both, a count of at least one config of every
    benchmark for every model, and chooses the configs itself, each of whose cells its next round reads (no
    partial results)."""
    estimate = settings.estimate
    if estimate.budget_share is not None and estimate.budget_cells is not None:
        raise ConfigError(
            f"estimate: budget_share ({estimate.budget_share}) and budget_cells ({estimate.budget_cells}) both set: "
            "give one"
        )
    least = len(settings.models) * len(settings.benchmarks)  # a budget runs at least one config of each benchmark
    if estimate.budget_cells is not None and estimate.budget_cells < least:
        raise ConfigError(
            f"estimate.budget_cells: {estimate.budget_cells} is fewer than one config of every benchmark for every "
            f"model ({least} cells: {len(settings.models)} models x {len(settings.benchmarks)} benchmark"
            f"{'s' if len(settings.benchmarks) > 1 else ''}): give at least {least}"
        )
    if settings.budgeted and settings.partial_results:
        raise ConfigError(
            "estimate: a budget's rounds read every cell they chose, so partial_results cannot analyse the cells "
            "finished so far: drop partial_results (or the budget)"
        )
    if settings.budgeted and settings.select_configs is not None:
        raise ConfigError(
            "estimate: a budget chooses which of the envelope's configs run, and select_configs fixes them: drop "
            "select_configs (narrow the envelope with its rules instead), or drop budget_share/budget_cells"
        )


def check_batch_axis(settings: Settings) -> None:
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


def check_served_models(settings: Settings) -> None:
    """A model behind a server (`endpoint`) runs only what its server can: no log-likelihood config where it serves
    generation only (`openai_server.served_operations`), and no batch-size axis (its server makes the batches)."""
    from safetyrepro.backends.openai_server import served_operations

    envelope = settings.envelope
    for key, specs in (("models", settings.models), ("judges", settings.judges)):
        for index, spec in enumerate(specs):
            if spec.endpoint is None:
                continue
            where = f"{key}[{index}] ({spec.name}).endpoint"
            cells = [(b, c) for b in settings.benchmarks for c in settings.configs(b)] if key == "models" else []
            if "loglikelihood" not in served_operations(spec):
                logprob = next(((b, c) for b, c in cells if c.scoring == "logprob"), None)
                if logprob is not None:
                    raise ConfigError(
                        f"{where}: serves generation only ({spec.endpoint.api} API), and the run has log-likelihood "
                        f"configs ({logprob[1].config_id} of {logprob[0]}); use api: completions, or leave them "
                        "out (envelope rules or select_configs)"
                    )
            for benchmark, config in cells:
                for axis in envelope.declared("backend_option"):
                    if config[axis] != envelope.defaults[axis]:
                        raise ConfigError(
                            f"envelope.axes.{axis}: value '{config[axis]}' on config {config.config_id} of {benchmark}, "
                            f"and model '{spec.name}' is served: its server makes its own batches"
                        )


MAX_NODE_GPUS = 64  # a split model's tensor x pipeline: the GPUs of one node, which vLLM's offline engine spans


def check_parallel_models(settings: Settings) -> None:
    """A model split over GPUs (`parallel`) runs on the offline vLLM engine, which takes its parallel sizes: its
    free-form cells need backend.generate: vllm, and it has no log-likelihood config (the transformers backend that
    runs them would load it whole on one GPU)."""
    for key, specs in (("models", settings.models), ("judges", settings.judges)):
        for index, spec in enumerate(specs):
            if spec.gpus() == 1:
                continue
            where = f"{key}[{index}] ({spec.name}).parallel"
            split = f"tensor {spec.tensor_parallel} x pipeline {spec.pipeline_parallel}"
            if spec.gpus() > MAX_NODE_GPUS:
                raise ConfigError(
                    f"{where}: {split} is {spec.gpus()} GPUs, more than one node has ({MAX_NODE_GPUS} at most); "
                    "serve a model across nodes with vllm serve and point an 'endpoint' at it"
                )
            if settings.backend.device == "cpu":
                raise ConfigError(f"{where}: {split} GPUs, and backend.device is cpu; use auto or cuda")
            if settings.backend.generate != "vllm":
                raise ConfigError(
                    f"{where}: {split} GPUs is the offline vLLM engine's split, and backend.generate is "
                    f"{settings.backend.generate}; set backend.generate: vllm"
                )
            logprob = next(
                ((b, c) for b in settings.benchmarks for c in settings.configs(b) if c.scoring == "logprob"), None
            )
            if key == "models" and logprob is not None:
                raise ConfigError(
                    f"{where}: {split} GPUs on vLLM, which scores no log-likelihoods, and the run has log-likelihood "
                    f"configs ({logprob[1].config_id} of {logprob[0]}), which transformers would run on one GPU; "
                    "serve the model (vllm serve, then 'endpoint': its log-likelihoods come through the server), "
                    "or leave them out (envelope rules or select_configs)"
                )


def check_results_dir(path: Path) -> None:
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


def check_apart(folders: Mapping[str, Path]) -> None:
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
