"""What a real run needs of this machine, tried once before any job: the backends it will load, the
device it names, and each model's weights (local, or in the Hugging Face cache, or fetchable once).

A dry run and `safetyrepro check --plan` skip it: they run nothing. `safetyrepro check`, `make run`
and the workflow's `onstart` run it."""

from __future__ import annotations

import importlib.util
import itertools
import logging
import os
import subprocess
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from safetyrepro.configuration.schema import ConfigError
from safetyrepro.core.conversation import Prompt
from safetyrepro.core.messages import excerpt

if TYPE_CHECKING:
    from safetyrepro.benchmarks.base import ItemSet
    from safetyrepro.configuration.settings import Settings
    from safetyrepro.core.config_id import Config
    from safetyrepro.core.model_spec import Endpoint, ModelSpec

HUB_TIMEOUT_SECONDS = 10
SERVER_MODULES = (
    "safetyrepro.cli, safetyrepro.running.server"  # what a model server runs (`python -m safetyrepro.cli serve`)
)
PROBE_SECONDS = 120  # for server_python to import it: about 1 s, longer on a cold file system
log = logging.getLogger(__name__)


def check_inputs(settings: Settings, packages: bool = True) -> dict[str, int]:
    """What the workflow checks as it loads, before any job (workflow/rules/common.smk): every
    benchmark's data and item subset, the files its scorers read (a fitted head), and, unless the
    rules' conda environments bring them (`packages` false), the packages the case study and the
    imports need.

    Returns:
        Items per benchmark.

    Raises:
        ConfigError, DataError: the first problem, named by its key or file.
    """
    from safetyrepro.benchmarks import BENCHMARKS
    from safetyrepro.configuration.settings import check_item_sets
    from safetyrepro.scorers import scorer_of

    counts = check_item_sets(settings)
    for benchmark in settings.benchmarks:
        for scorer in settings.envelope.scorers_of(benchmark):
            scorer_of(BENCHMARKS[benchmark], scorer).check_files()
    if packages:
        for needs_packages in [settings.case_study, *settings.imports]:
            if needs_packages:
                needs_packages.require_packages()
    return counts


def preflight(settings: Settings, jobs_here: bool = True) -> None:
    """Raise ConfigError naming the first thing this machine lacks for the run; where its jobs run on other
    machines (`jobs_here` false: a cluster's nodes), not what only those machines can show (a GPU, memory)."""
    if jobs_here:
        _check_device(settings.backend.device)
        _check_cpu_cache(settings)
    _check_backends(settings)
    served = settings.served_models()  # the judges the run asks, not one select_configs leaves out
    for key, specs in (("models", settings.models), ("judges", settings.judges)):
        for index, spec in enumerate(specs):
            if spec in served and spec.path and not spec.embedded and not os.path.isdir(spec.path):
                _check_hub_model(f"{key}[{index}] ({spec.name}).path", spec)
            if spec in served and spec.endpoint is not None:
                _check_endpoint(f"{key}[{index}] ({spec.name}).endpoint", spec.endpoint, jobs_here)
    _check_context(settings)


def _check_endpoint(where: str, endpoint: Endpoint, jobs_here: bool) -> None:
    """A served model's key is in the environment its `api_key_env` names, and (where the jobs run here) its server
    answers and serves the model: one line now, not a failed cell later."""
    from safetyrepro.backends.openai_server import ServerError, check_server

    if endpoint.api_key_env is not None and not os.environ.get(endpoint.api_key_env):
        raise ConfigError(f"{where}.api_key_env: the environment variable {endpoint.api_key_env} is not set here")
    if jobs_here:
        try:
            check_server(endpoint)
        except ServerError as error:
            raise ConfigError(f"{where}: {error}") from None


def _check_backends(settings: Settings) -> None:
    """The Python the model servers run under exists, and the modules each backend serving a config
    requires (`Backend.requires`: vLLM's vllm) import there."""
    from safetyrepro.backends import registered

    backend = settings.backend
    python = backend.server_python
    interpreter, environment = backend.server_command()
    if python is not None and not (os.path.isfile(interpreter) and os.access(interpreter, os.X_OK)):
        raise ConfigError(
            f"backend.server_python: '{python}' is not an executable file (`make setup-vllm` makes .venv-vllm/bin/python)"
        )
    if python is not None:
        _probe_server_python(python, interpreter, environment)
    for operation, kind in sorted(_serving(settings)):
        serving = registered()[kind]
        for module in serving.requires:
            if python is None:
                missing = importlib.util.find_spec(module) is None
            else:
                probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
                missing = subprocess.run([interpreter, "-c", probe], capture_output=True, env=environment).returncode
            if missing:
                where = f"under backend.server_python ({python})" if python else "here"
                raise ConfigError(
                    f"backend.{operation}: {module} is not installed {where}: {serving.install_hint}; "
                    f"or set {operation}: {backend.default_kind(operation)}"
                )


def _serving(settings: Settings) -> dict[tuple[str, str], None]:
    """Each (operation, backend) some cell of the run uses (a served model's own among them)."""
    backend = settings.backend
    return {(backend.operation(c.scoring), backend.serving(c.scoring, m)): None for m, _, c in settings.cells()}


def _probe_server_python(python: str, interpreter: str, environment: dict[str, str]) -> None:
    """`server_python` imports the model server's module (so it is a Python, and has the packages the server
    needs), asked once; nothing loads."""
    command = [interpreter, "-c", f"import {SERVER_MODULES}; print('ok')"]
    fix = "install safetyrepro's dependencies there (`make setup-vllm` makes .venv-vllm/bin/python), or drop the key"
    try:
        result = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=PROBE_SECONDS)
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"backend.server_python: '{python}' did not import the model server within {PROBE_SECONDS} s; {fix}"
        ) from None
    if result.stdout.strip() != "ok":
        lines = result.stderr.strip().splitlines()
        said = f"said {excerpt(lines[-1], 160)}" if lines else "said nothing: is it a Python?"
        raise ConfigError(
            f"backend.server_python: '{python}' cannot run the model server (asked to import it, it exited with "
            f"status {result.returncode} and {said}); {fix}"
        )


def _check_cpu_cache(settings: Settings) -> None:
    """vLLM on a CPU holds `kv_cache_gib` of key/value cache in this machine's memory: no more than it has."""
    backend = settings.backend
    if "vllm" not in {kind for _, kind in _serving(settings)} or backend.device.startswith("cuda"):
        return
    import psutil  # a dependency of Snakemake
    import torch

    memory = psutil.virtual_memory().total / 2**30
    if backend.kv_cache_gib >= memory and not (backend.device == "auto" and torch.cuda.is_available()):
        raise ConfigError(
            f"backend.kv_cache_gib: {backend.kv_cache_gib:g} GiB of key/value cache for vLLM on this machine's CPU, "
            f"which has {memory:.1f} GiB of memory in all (the engine would fail as it starts); lower it "
            "(the default 2 serves models up to a few billion parameters)"
        )


def _check_context(settings: Settings) -> None:
    """Each local model's context (as vLLM derives it) holds the run: room for a prompt and the run's
    longest generation, and every free-form prompt within its prompt limit (`prompt_limit`: the
    context less the config's new tokens, at most MAX_PROMPT_TOKENS). The backends would cut a longer
    prompt to its BOS and last tokens, and the cell would ask a question with its instructions or
    first examples missing; so the run is refused here, naming the longest prompt. A judge's context
    holds, the same way, each question it is asked about a cell's reply (its benchmark's judge question
    about the item, with room for a reply of the cell's new tokens) and its answer's tokens, and each question its
    judge_agreement jobs ask about a human-labelled reply (as the jobs read it), in each wording asked."""
    from safetyrepro.backends.prompt_ids import CONVERSATION_NEEDS_TEMPLATE, prompt_limit
    from safetyrepro.core.conversation import is_conversation

    longest, cells, prompts = settings.longest_generation(), None, None
    for index, spec, tokenizer, context, fmt in _local_models(enumerate(settings.run_models())):
        if context is not None and context <= longest:
            raise ConfigError(
                f"envelope max_new_tokens: {longest} new tokens leave no room for a prompt in model "
                f"'{spec.name}', whose context is {context} tokens"
            )
        cells = _free_form_cells(settings) if cells is None else cells
        prompts = _free_form_prompts(settings, cells) if prompts is None else prompts
        where = f"models[{index}] ({spec.name})"
        measured = (
            (
                _rendered_length(where, tokenizer, prompt, fmt),
                prompt_limit(context, tokens),
                (benchmark, config_id, item_id),
            )
            for prompt, (benchmark, config_id, item_id, tokens) in prompts.items()
        )
        if found := _longest_over(measured):
            count, (length, limit, (benchmark, config_id, item_id)) = found
            raise ConfigError(
                f"models[{index}] ({spec.name}): {count} free-form prompt(s) are longer than the "
                f"{limit} tokens it keeps (context {context or 'not stated'}, less the new tokens); the "
                f"longest, {benchmark} {config_id} item {item_id}, has {length}: use fewer shots, fewer "
                "max_new_tokens, or a model with a longer context"
            )
    used = settings.used_judges()
    judges = ((index, judge) for index, judge in enumerate(settings.judges) if judge in used)
    for index, judge, tokenizer, context, fmt in _local_models(judges, once_a_folder=False):
        where = f"judges[{index}] ({judge.name})"
        answer = settings.judge_answer_tokens(judge.name)
        if context is not None and context <= answer:
            raise ConfigError(f"{where}: its context of {context} tokens leaves no room for a question and its answer")
        limit = prompt_limit(context, answer)
        cells = _free_form_cells(settings) if cells is None else cells
        questions = _judge_questions(settings, cells, judge)
        agreement = _agreement_questions(settings, judge)
        if fmt != "chat" and any(map(is_conversation, [*questions, *agreement])):
            raise ConfigError(f"{where}: {CONVERSATION_NEEDS_TEMPLATE}")
        measured = (
            (_rendered_length(where, tokenizer, question, fmt) + reply, limit, (reply, benchmark, config_id, item_id))
            for question, (benchmark, config_id, item_id, reply) in questions.items()
        )
        if found := _longest_over(measured):
            count, (length, _, (reply, benchmark, config_id, item_id)) = found
            raise ConfigError(
                f"{where}: {count} of its questions are longer than the {limit} tokens it keeps (context "
                f"{context or 'not stated'}, less its {answer} answer tokens); the longest, about "
                f"a reply to {benchmark} {config_id} item {item_id}, has {length} with the reply's {reply}: use a "
                "judge with a longer context, or fewer max_new_tokens"
            )
        measured = (
            (_rendered_length(where, tokenizer, question, fmt), limit, about) for question, about in agreement.items()
        )
        if found := _longest_over(measured):
            count, (length, _, (benchmark, labelled, item_id)) = found
            raise ConfigError(
                f"{where}: {count} of the {len(agreement)} questions its judge_agreement jobs ask about "
                f"{', '.join(sorted({b for b, _, _ in agreement.values()}))}'s human-labelled replies are longer than the "
                f"{limit} tokens it keeps (context {context or 'not stated'}, less its {answer} "
                f"answer tokens); the longest, about {benchmark}'s labelled {labelled} reply to item {item_id}, has "
                f"{length}: use a judge with a longer context"
            )


def _longest_over(measured: Iterable[tuple[int, int, tuple]]) -> tuple[int, tuple[int, int, tuple]] | None:
    """Of (length, limit, what it is) triples, how many are over their limit and the one most over it (ties: the
    longest, then by what it is); None when none is."""
    over = [(length - limit, length, limit, about) for length, limit, about in measured if length > limit]
    return (len(over), max(over)[1:]) if over else None


def _rendered_length(where: str, tokenizer: Any, prompt: Prompt, fmt: str) -> int:
    """The token count of a prompt as the model (`where` in the config) is sent it; a chat template that cannot
    render it (a template file's syntax, or a guard's template asked a one-turn question) is refused, naming it."""
    from jinja2 import TemplateError

    from safetyrepro.backends.prompt_ids import encode_prompt

    try:
        return len(encode_prompt(tokenizer, prompt, fmt))
    except (TemplateError, TypeError, ValueError) as error:  # a template's own errors, and its operations' on values
        raise ConfigError(f"{where}: its chat template cannot render a prompt it is sent ({error})") from None


def _local_models(
    specs: Iterable[tuple[int, ModelSpec]], once_a_folder: bool = True
) -> Iterator[tuple[int, ModelSpec, Any, int | None, str]]:
    """Of the models `specs` (index in their config list, spec), those here whose context can be read: index, spec,
    tokenizer, context (None: not stated) and prompt format. With `once_a_folder`, each folder once a chat template
    (models of one folder are sent the same prompts; judges each their own questions)."""
    from safetyrepro.backends.base import ModelLoadError
    from safetyrepro.backends.prompt_ids import context_length, load_config, load_tokenizer, prompt_format

    seen = set()
    for index, spec in specs:
        if (spec.path, spec.chat_template) in seen or not os.path.isfile(os.path.join(spec.path, "config.json")):
            continue  # checked already, a hub model (checked above) or an embedded one not built yet
        if once_a_folder:
            seen.add((spec.path, spec.chat_template))  # one folder under two chat templates renders two ways
        try:
            tokenizer = load_tokenizer(spec)
            context, fmt = context_length(load_config(spec), tokenizer), prompt_format(tokenizer, spec)
        except (ModelLoadError, ImportError) as exc:  # the server's environment may load it; its load says why not
            log.warning("model '%s': context not checked here (%s)", spec.name, exc)
            continue
        yield index, spec, tokenizer, context, fmt


def _free_form_cells(settings: Settings) -> list[tuple[str, Config, ItemSet]]:
    """Every free-form config of the run, by benchmark, with the item set its cells ask about (as it presents
    the items)."""
    from safetyrepro.configuration.settings import item_set

    envelope, sets, cells = settings.envelope, {}, []
    for benchmark in settings.benchmarks:
        for config in settings.configs(benchmark):
            if config.scoring != "freeform":
                continue
            presentation = envelope.presentation(config, benchmark)
            if (benchmark, presentation) not in sets:
                sets[benchmark, presentation] = item_set(settings, benchmark, presentation)
            cells.append((benchmark, config, sets[benchmark, presentation]))
    return cells


def _free_form_prompts(
    settings: Settings, cells: list[tuple[str, Config, ItemSet]]
) -> dict[str, tuple[str, str, str, int]]:
    """Every distinct free-form prompt of the run, with the benchmark, config id and item id of one
    cell that sends it, and the most new tokens any of its cells asks for."""
    from safetyrepro.running.prompts import draw_shots, render_prompt

    envelope, prompts = settings.envelope, {}
    for benchmark, config, data in cells:
        tokens = envelope.decoding(config).max_new_tokens
        for item in data.items:
            shots = draw_shots(envelope, config, data.pool, item)
            prompt = render_prompt(envelope, config, data.benchmark, item, shots)
            if prompt not in prompts or prompts[prompt][3] < tokens:
                prompts[prompt] = (benchmark, config.config_id, item.item_id, tokens)
    return prompts


def _judge_questions(
    settings: Settings, cells: list[tuple[str, Config, ItemSet]], judge: ModelSpec
) -> dict[str, tuple[str, str, str, int]]:
    """Every distinct question `judge` is asked about the run's replies, without the reply, with the benchmark,
    config id and item id of one cell that asks it, and the most new tokens a reply it is asked about may have."""
    from safetyrepro.scorers import wording

    questions = {}
    for benchmark, config, data in cells:
        asks = settings.judge_model(benchmark, config)
        if asks is None or asks.name != judge.name:
            continue
        scorer = settings.labelling_scorer(benchmark, config)
        ask = wording(data.benchmark, scorer, settings.envelope.judge_phrasing(config, benchmark))
        tokens = settings.envelope.decoding(config).max_new_tokens
        for item in data.items:
            question = ask(item, "", data.benchmark.default_labels)
            if question not in questions or questions[question][3] < tokens:
                questions[question] = (benchmark, config.config_id, item.item_id, tokens)
    return questions


def _agreement_questions(settings: Settings, judge: ModelSpec) -> dict[str, tuple[str, str, str]]:
    """Every distinct question `judge`'s judge_agreement jobs ask: about each human-labelled reply with text of
    each benchmark of the run that has human labels, in the wording of each scorer axis value that asks `judge`
    about it (as the workflow's HUMAN_JUDGES), the reply as the judge reads it; with the benchmark, the labelled
    file (`labelled_model`) and the item id. The benchmark's `judge_agreement` is run with a `label` that records
    what it is given and labels nothing."""
    from safetyrepro.benchmarks import BENCHMARKS, UNPARSED
    from safetyrepro.running.judge import question_about
    from safetyrepro.scorers.human_labels import human_labels_of, with_human_labels

    questions = {}
    for name in with_human_labels(settings.benchmarks):
        askers = [settings.envelope.labelling(value, name) for value in settings.judge_values(name)]
        askers = list(dict.fromkeys((scorer, phrasing) for scorer, asked, phrasing in askers if asked == judge.name))
        if not askers:
            continue
        benchmark, asked = BENCHMARKS[name], []

        def capture(replies: list[str], items: list, asked: list = asked) -> list[str]:
            asked.append(list(zip(replies, items)))
            return [UNPARSED] * len(replies)

        measured = human_labels_of(name).judge_agreement(settings.data_dir, capture)
        files = list(measured["labelled_model"]) if "labelled_model" in measured else []
        for call, pairs in enumerate(asked):
            labelled = files[call] if len(files) == len(asked) else f"#{call + 1}"
            for (reply, item), (scorer, phrasing) in itertools.product(pairs, askers):
                if (question := question_about(benchmark, scorer, reply, item, phrasing)) is not None:  # else not asked
                    questions.setdefault(question, (name, labelled, getattr(item, "item_id", "(no item)")))
    return questions


def _check_device(device: str) -> None:
    if not device.startswith("cuda"):
        return
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.partition(":")[2] or 0)
    if index >= count:
        found = f"{count} CUDA device(s)" if count else "no CUDA device"
        raise ConfigError(
            f"backend.device: {device} asked for, but this machine has {found} "
            f"(torch {torch.__version__}, CUDA build {torch.version.cuda}); use cpu or auto"
        )


def _check_hub_model(where: str, spec: ModelSpec) -> None:
    """A hub model must be in the local cache, or its config fetchable now (once, not in every cell)."""
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(spec.path, "config.json", revision=spec.revision), str):
        return
    try:
        hf_hub_download(spec.path, "config.json", revision=spec.revision, etag_timeout=HUB_TIMEOUT_SECONDS)
    except Exception as exc:  # offline, unknown repository, gated, no network: all end the same way
        reason = " ".join(str(exc).split())[:160]
        raise ConfigError(
            f"{where}: {spec.path} is not in the Hugging Face cache and cannot be fetched "
            f"({type(exc).__name__}: {reason}); download it first or give a local folder"
        ) from None
