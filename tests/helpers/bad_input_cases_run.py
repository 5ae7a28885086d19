"""Bad inputs of what a run needs (issue 54, classes 3, 4 and 8): backend options no backend of the run reads,
values a run cannot use or afford, a `server_python` that cannot serve, a results folder another run holds
(the last two checked without --plan, as `check`, which `make run` runs first, checks this machine); a judge
no cell asks is accepted, and named."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

import yaml

from helpers.bad_input_corpus import STUDY, Case, _write, accepted_case, base_config, config_case
from helpers.session import REPO

BILLION = 10**9
JUDGE = {"judges": [{"name": "referee", "path": "org/referee"}]}
JUDGED = {"tier": "core", "scorer": "judge", "judge": "referee"}


def _vllm_only(key: str, value) -> Case:
    return config_case(
        f"backend.{key} with the HF backend alone",
        {f"backend.{key}": value},
        f"backend.{key}: only the vllm backend reads it, and this run uses none (generate: hf, loglikelihood: hf); "
        "drop the key, or set generate: vllm",
    )


def _judged_config(benchmark: str, select: list[str] | None) -> Case:
    """A judge a scorer axis names, in a run whose selected configs give it nothing to label."""

    def build(scratch: Path, data_dir: Path):
        config = base_config(data_dir, benchmark) | JUDGE
        axis = {"mechanism": "scorer", "default": "ours", "values": {"ours": {"tier": "core", "scorer": "rules"}}}
        axis["values"]["judged"] = JUDGED
        config["envelope"]["axes"]["scorer"] = axis
        if select is not None:
            config["select_configs"] = select
        path = scratch / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        return ["check", "--plan", "--configfile", str(path)], "", None

    where = f"select_configs {select}" if select else f"{benchmark} alone"
    return Case(f"a judge no cell asks ({where})", build)


def _worded(name: str, value: dict, message: str) -> Case:
    """A scorer axis with a judge and the value `value`: a wording of the judge's question it cannot have."""

    def build(scratch: Path, data_dir: Path):
        config = base_config(data_dir, "xstest") | JUDGE
        axis = {"mechanism": "scorer", "default": "ours", "values": {"ours": {"tier": "core", "scorer": "rules"}}}
        axis["values"] |= {"judged": JUDGED, "worded": value}
        config["envelope"]["axes"]["scorer"] = axis
        path = scratch / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        return ["check", "--plan", "--configfile", str(path)], message, None

    return Case(name, build)


def _guard_judge(name: str, judge: dict, message: str) -> Case:
    """XSTest's replies labelled by a guard model (Llama Guard's format) asked of the judge `judge` (its
    `chat_template` a file made in the scratch folder where it is "FILE"; `message` may name FILE's path)."""

    def build(scratch: Path, data_dir: Path):
        template = scratch / "guard.jinja"
        config = base_config(data_dir, "xstest")
        config["judges"] = [{"name": "guard", **{k: str(template) if v == "FILE" else v for k, v in judge.items()}}]
        axis = {"mechanism": "scorer", "default": "ours", "values": {"ours": {"tier": "core", "scorer": "rules"}}}
        axis["values"]["guarded"] = {"tier": "core", "scorer": "llamaguard", "judge": "guard"}
        config["envelope"]["axes"]["scorer"] = axis
        path = scratch / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        return ["check", "--plan", "--configfile", str(path)], message.replace("FILE", str(template)), None

    return Case(name, build)


def _server_python(name: str, make: callable, message: str) -> Case:
    """`backend.server_python` set to what `make(scratch)` builds (checked as `check` checks this machine)."""

    def build(scratch: Path, data_dir: Path):
        config = base_config(data_dir)
        config["backend"] = {"server_python": str(make(scratch))}
        path = scratch / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        return ["check", "--configfile", str(path)], message, None

    return Case(name, build)


def _script(scratch: Path, text: str) -> Path:
    path = _write(scratch / "python", f"#!/bin/sh\n{text}\n")
    path.chmod(0o755)
    return path


def _bare_python(scratch: Path) -> Path:
    """A Python of its own with no packages installed (as a system Python without numpy is)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(scratch / "bare")], check=True)
    return scratch / "bare" / "bin" / "python"


HELD: list = []  # the lock files the cases below hold, as a live run does, until the test process ends


def _held_results(scratch: Path, data_dir: Path):
    """A results folder whose lock a live run holds (this process), as the config names it."""
    from safetyrepro.pipeline.lifecycle import RESULTS_LOCK

    folder = scratch / "held"
    folder.mkdir()
    handle = open(folder / RESULTS_LOCK, "a+", encoding="utf-8")  # noqa: SIM115 (held for the process's life)
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    handle.write("Snakemake pid 4242 on node1, working folder /home/me/run1")
    handle.flush()
    HELD.append(handle)
    config = base_config(data_dir) | {"results_dir": str(folder)}
    path = scratch / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    message = (
        f"results folder {folder}: another run is writing there (Snakemake pid 4242 on node1, working folder "
        "/home/me/run1); wait for it to end or stop it, then run again (snakemake --unlock would not stop it)"
    )
    return ["check", "--configfile", str(path)], message, None


SERVE_FIX = "install safetyrepro's dependencies there (`make setup-vllm` makes .venv-vllm/bin/python), or drop the key"

CASES: list[Case] = [
    # 4. options the chosen backend ignores, and values a run cannot use or afford
    *(_vllm_only(key, value) for key, value in [("kv_cache_gib", 4), ("gpu_memory_utilization", 0.5)]),
    *(_vllm_only(key, value) for key, value in [("batch_invariant", True), ("hf_activation_gib", 2)]),
    config_case(
        "a server idle time of a millisecond",
        {"backend.server_idle_seconds": 0.001},
        "backend.server_idle_seconds: 0.001 is less than the minimum of 5",
    ),
    config_case(
        "a billion new tokens",
        {"envelope.max_new_tokens": BILLION},
        f"envelope.max_new_tokens: {BILLION} is greater than the maximum of 32768",
    ),
    config_case(
        "a decoding value raising new tokens to a billion",
        {"envelope.axes.decoding.greedy.max_new_tokens": BILLION},
        f"envelope.axes.decoding.greedy.max_new_tokens: {BILLION} is greater than the maximum of 32768",
    ),
    config_case(
        "a token cap of a billion",
        {"max_new_tokens_cap": BILLION},
        f"max_new_tokens_cap: {BILLION} is greater than the maximum of 32768",
    ),
    config_case(
        "a billion bootstrap resamples",
        {"analysis.bootstrap.resamples": BILLION},
        f"analysis.bootstrap.resamples: {BILLION} is greater than the maximum of 100000",
    ),
    config_case(
        "a billion item-bootstrap resamples",
        {"analysis.significance.resamples": BILLION},
        f"analysis.significance.resamples: {BILLION} is greater than the maximum of 100000",
    ),
    config_case(
        "a billion subsamples",
        {"analysis.subsample.count": BILLION},
        f"analysis.subsample.count: {BILLION} is greater than the maximum of 10000",
    ),
    config_case(
        "a million torch threads",
        {"backend.threads": 10**6},
        "backend.threads: 1000000 is greater than the maximum of 4096",
    ),
    config_case(
        "Inspect AI asked for a billion new tokens",
        {"case_study": {**STUDY, "max_new_tokens": BILLION}},
        f"case_study.max_new_tokens: {BILLION} is greater than the maximum of 32768",
    ),
    *(
        accepted_case(_judged_config(*run), "a part of the grid may leave a judge out: `check` names it, unserved")
        for run in [("truthfulqa", ["T1-greedy-0shot-logprob"]), ("crows_pairs", None)]
    ),
    # the judge's question in a wording it cannot have (docs/scorers.md, "A judge model")
    _worded(
        "a judge asked in a wording no benchmark's question has",
        {**JUDGED, "question": "terse"},
        "envelope.axes.scorer.values.worded.question: no benchmark's judge question has a phrasing 'terse' "
        "(phrasings by benchmark: bbq: brief; crows_pairs: brief; toxigen: brief; truthfulqa: brief; xstest: brief; "
        "docs/scorers.md)",
    ),
    _worded(
        "a wording of the question on a value that asks no judge",
        {"tier": "core", "scorer": "strmatch", "question": "brief"},
        "envelope.axes.scorer.values.worded.question: scorer 'strmatch' asks no judge model; only a value whose "
        "scorer asks one names its question's phrasing",
    ),
    # a guard model's input format (docs/scorers.md, "Guard models")
    _guard_judge(
        "a guard's chat template file that is not there",
        {"path": "org/guard", "chat_template": "FILE"},
        "judges[0] (guard).chat_template: FILE: No such file or directory (give auto, on, off or a Jinja chat "
        "template file)",
    ),
    _guard_judge(
        "a guard behind the chat API given a chat template file",
        {
            "path": "org/guard",
            "chat_template": str(REPO / "config" / "guards" / "llama_guard.jinja"),
            "endpoint": {"url": "http://127.0.0.1:9/v1", "model": "guard", "api": "chat"},
        },
        "judges[0] (guard).chat_template: a template file needs the completions API and the model's tokenizer "
        "('path' or 'embedded'); on the chat API the server applies its own (vllm serve --chat-template <file>)",
    ),
    _worded(
        "a guard model asked in a wording of the judge's question",
        {"tier": "core", "scorer": "llamaguard", "judge": "referee", "question": "brief"},
        "envelope.axes.scorer.values.worded.question: no benchmark's llamaguard question has a phrasing 'brief' "
        "(phrasings by benchmark: xstest: none; docs/scorers.md)",
    ),
    # 3. servers that cannot serve (asked as `check` asks this machine: without --plan)
    _server_python(
        "a server_python that exits at once",
        lambda scratch: _script(scratch, "exit 1"),
        "cannot run the model server (asked to import it, it exited with status 1 and said nothing: is it a Python?)",
    ),
    _server_python(
        "a server_python that says all is well and does nothing",
        lambda scratch: _script(scratch, "echo fine; exit 0"),
        "cannot run the model server (asked to import it, it exited with status 0 and said nothing",
    ),
    _server_python(
        "a server_python without the packages the server needs",
        _bare_python,
        f'cannot run the model server (asked to import it, it exited with status 1 and said "ModuleNotFoundError: '
        f"No module named 'jsonschema'\"); {SERVE_FIX}",
    ),
    config_case(
        "a vLLM key/value cache larger than this machine's memory",
        {"backend.generate": "vllm", "backend.device": "cpu", "backend.kv_cache_gib": 10**6},
        "backend.kv_cache_gib: 1e+06 GiB of key/value cache for vLLM on this machine's CPU, which has",
        plan=False,
    ),
    # 8. a second `make run` while a run writes to the results folder: `check`, which make run runs first
    Case("a results folder another run holds", _held_results),
]
