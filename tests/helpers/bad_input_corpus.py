"""A corpus of bad inputs, each with the one message a user must get (tests/end_to_end/test_bad_input_corpus.py).

Every case builds its files in a scratch folder and returns the `safetyrepro` command line to run,
optionally its standard input, and a fragment of the expected one-line message. The inputs are the
nastiest legitimate-looking values we could think of, key by key: wrong types, floats for counts,
out-of-range numbers, misspellings, values outside a benchmark's vocabulary, broken files.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from helpers.session import REPO

ENVELOPE = yaml.safe_load((REPO / "config" / "envelope.yaml").read_text())
BENCHMARK_FOLDERS = ("truthfulqa", "bbq", "crows_pairs", "toxigen", "xstest")


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[
        [Path, Path], tuple[list[str], str, str | bytes | None]
    ]  # (scratch, data_dir) -> argv, message, stdin
    accepted: str = ""  # for a legitimate oddity that must go through (exit 0): why; empty for an input refused


def outcome(case: Case, status: int, stderr: str, message: str) -> str:
    """What an input got, as scripts/bad_input_outcomes.py tallies it and tests/end_to_end/test_bad_input_corpus.py checks it
    for every input: `message` (one `safetyrepro: error:` line with the expected message), `other message`,
    `traceback or other error`, `accepted`, or `accepted as documented` for an oddity the corpus accepts."""
    lines = stderr.strip().splitlines()
    if status == 0:
        return "accepted as documented" if case.accepted else "accepted"
    if len(lines) == 1 and lines[0].startswith("safetyrepro: error: "):
        return "message" if message in lines[0] else "other message"
    return "traceback or other error"


def expected_outcome(case: Case) -> str:
    return "accepted as documented" if case.accepted else "message"


def accepted_case(case: Case, reason: str) -> Case:
    """`case`, documented as accepted: the command must succeed (its message is not used)."""
    return dataclasses.replace(case, accepted=reason)


def base_config(data_dir: Path, benchmark: str = "truthfulqa") -> dict:
    return {
        "data_dir": str(data_dir),
        "results_dir": "results",
        "models": [{"name": "model-a", "path": "org/model-a"}, {"name": "model-b", "path": "org/model-b"}],
        "benchmarks": {benchmark: {"n_items": 5}},
        "envelope": copy.deepcopy(ENVELOPE),
        "subset": {"seed": 1, "fewshot_pool": 5},
    }


def _set(document: dict, dotted: str, value) -> None:
    """Set a dotted key (or /-separated, where a name holds a dot; list indices as numbers); `DELETE` removes it."""
    *parents, last = dotted.split("/" if "/" in dotted else ".")
    for key in parents:
        document = document[int(key)] if isinstance(document, list) else document.setdefault(key, {})
    if value is DELETE:
        document.pop(last, None)
    elif isinstance(document, list):
        document[int(last)] = value
    else:
        document[last] = value


DELETE = object()


def config_case(name: str, changes: dict, message: str, benchmark: str = "truthfulqa", plan: bool = True) -> Case:
    """A config that differs from a good one by `changes` (dotted key -> value)."""

    def build(scratch: Path, data_dir: Path):
        config = base_config(data_dir, benchmark)
        for key, value in changes.items():
            _set(config, key, value)
        path = scratch / "config.yaml"
        path.write_text(yaml.safe_dump(config, allow_unicode=True))
        return ["check", *(["--plan"] if plan else []), "--configfile", str(path)], message, None

    return Case(name, build)


def file_case(name: str, content: bytes | str | Callable[[Path, Path], bytes | str], message: str) -> Case:
    """A config file with raw content (bytes: not necessarily UTF-8)."""

    def build(scratch: Path, data_dir: Path):
        data = content(scratch, data_dir) if callable(content) else content
        path = scratch / "config.yaml"
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        return ["check", "--plan", "--configfile", str(path)], message.replace("{path}", str(path)), None

    return Case(name, build)


def data_case(
    name: str,
    benchmark: str,
    file: str,
    edit: Callable[[str], str] | None,
    message: str,
    raw: Callable[[bytes], bytes] | None = None,
    extra: Callable[[Path], None] | None = None,
) -> Case:
    """The shared data with one benchmark file changed (the other files linked, never touched)."""

    def build(scratch: Path, data_dir: Path):
        data = scratch / "data"
        for folder in BENCHMARK_FOLDERS:
            if folder != benchmark:
                (data / folder).parent.mkdir(parents=True, exist_ok=True)
                (data / folder).symlink_to(data_dir / folder)
        shutil.copytree(data_dir / benchmark, data / benchmark)
        path = data / benchmark / file
        if edit is not None:
            path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
        if raw is not None:
            path.write_bytes(raw(path.read_bytes()))
        if extra is not None:
            extra(data / benchmark)
        config = base_config(data, benchmark)
        config_path = scratch / "config.yaml"
        config_path.write_text(yaml.safe_dump(config))
        return ["check", "--plan", "--configfile", str(config_path)], message.replace("{path}", str(path)), None

    return Case(name, build)


def _lines(edit: Callable[[list[str]], None]) -> Callable[[str], str]:
    def apply(text: str) -> str:
        lines = text.splitlines()
        edit(lines)
        return "\n".join(lines) + "\n"

    return apply


def _bbq_line(index: int, change: Callable[[dict], None]) -> Callable[[str], str]:
    def edit(lines: list[str]) -> None:
        row = json.loads(lines[index])
        change(row)
        lines[index] = json.dumps(row)

    return _lines(edit)


def _csv_cell(row: int, column: str, value: str) -> Callable[[str], str]:
    """Replace one cell of a CSV (row counted after the header), keeping the rest byte for byte."""
    import csv
    import io

    def apply(text: str) -> str:
        rows = list(csv.reader(io.StringIO(text)))
        rows[row][rows[0].index(column)] = value
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(rows)
        return out.getvalue()

    return apply


def audit_case(name: str, options: list[str], message: str) -> Case:
    """`safetyrepro audit` of a good config (TruthfulQA, model-a and model-b) with these options."""

    def build(scratch: Path, data_dir: Path):
        path = scratch / "config.yaml"
        path.write_text(yaml.safe_dump(base_config(data_dir)))
        return ["audit", "--configfile", str(path), "--benchmark", "truthfulqa", *options], message, None

    return Case(name, build)


def command_case(name: str, argv: Callable[[Path], list[str]], message: str, stdin: str | bytes | None = None) -> Case:
    return Case(name, lambda scratch, data_dir: (argv(scratch), message, stdin))


def _write(path: Path, content: bytes | str) -> Path:
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


# ------------------------------------------------------------------------------------------------ the corpus
CASES: list[Case] = []

# 1. top-level keys of the wrong type
for key, value, message in [
    ("data_dir", 5, "data_dir: expected string, got int 5"),
    ("results_dir", 5, "results_dir: expected string, got int 5"),
    ("resources_dir", [], "resources_dir: expected string, got list []"),
    ("models", {}, "models: expected array, got dict {}"),
    ("backend", [], "backend: expected object, got list []"),
    ("subset", 3, "subset: expected object, got int 3"),
    ("benchmarks", [], "benchmarks: expected object, got list []"),
    ("analysis", [], "analysis: expected object, got list []"),
    ("partial_results", "yes", "partial_results: expected boolean, got str 'yes'"),
    ("max_new_tokens_cap", "12", "max_new_tokens_cap: expected integer, got str '12'"),
    ("select_configs", "T1-greedy-0shot-logprob", "select_configs: expected array, got str"),
    ("case_study", 5, "case_study: expected object, got int 5"),
    ("envelope", 5, "envelope: 5 is not valid under any of the given schemas"),
    ("envelope", [], "envelope: [] is not valid under any of the given schemas"),
]:
    CASES.append(config_case(f"{key} of the wrong type ({type(value).__name__})", {key: value}, message))

# 2. counts and seeds written as floats (JSON Schema would call 10.0 an integer)
for key, value in [
    ("benchmarks.truthfulqa.n_items", 5.0),
    ("subset.seed", 1.0),
    ("subset.fewshot_pool", 5.0),
    ("backend.batch_size", 16.0),
    ("backend.threads", 1.0),
    ("max_new_tokens_cap", 12.0),
    ("analysis.bootstrap.resamples", 1000.0),
    ("analysis.subsample.count", 20.0),
    ("analysis.subsample.seed", 0.0),
    ("analysis.shap_seed", 0.0),
]:
    CASES.append(config_case(f"{key} as a float", {key: value}, f"{key}: expected integer, got float {value}"))

# 3. numbers out of range
for key, value, message in [
    ("benchmarks.truthfulqa.n_items", 0, "0 is less than the minimum of 1"),
    ("benchmarks.truthfulqa.n_items", -3, "-3 is less than the minimum of 1"),
    ("subset.seed", -1, "-1 is less than the minimum of 0"),
    ("subset.seed", 2**32, "4294967296 is greater than the maximum of 4294967294"),
    ("subset.fewshot_pool", -1, "-1 is less than the minimum of 0"),
    ("backend.batch_size", 0, "0 is less than the minimum of 1"),
    ("backend.threads", 0, "0 is less than the minimum of 1"),
    ("backend.gpu_memory_utilization", 0, "0 is less than or equal to the minimum of 0"),
    ("backend.gpu_memory_utilization", 1.5, "1.5 is greater than the maximum of 1"),
    ("backend.server_idle_seconds", 0, "0 is less than the minimum of 5"),
    ("analysis.parse_threshold", -0.1, "-0.1 is less than the minimum of 0"),
    ("analysis.parse_threshold", 1.1, "1.1 is greater than the maximum of 1"),
    ("analysis.subsample.fraction", 0, "0 is less than or equal to the minimum of 0"),
    ("analysis.subsample.fraction", 1.5, "1.5 is greater than the maximum of 1"),
    ("analysis.subsample.count", 0, "0 is less than the minimum of 1"),
    ("analysis.bootstrap.resamples", 5, "5 is less than the minimum of 10"),
    ("analysis.bootstrap.level", 0, "0 is less than or equal to the minimum of 0"),
    ("analysis.bootstrap.level", 1, "1 is greater than or equal to the maximum of 1"),
    ("analysis.significance.alpha", 0, "0 is less than or equal to the minimum of 0"),
    ("analysis.significance.alpha", 0.6, "0.6 is greater than the maximum of 0.5"),
    ("analysis.significance.power", 1, "1 is greater than or equal to the maximum of 1"),
    ("analysis.significance.resamples", 50, "50 is less than the minimum of 100"),
    ("backend.hf_activation_gib", -1, "-1 is less than the minimum of 0"),
    ("max_new_tokens_cap", 0, "0 is less than the minimum of 1"),
]:
    CASES.append(config_case(f"{key} = {value}", {key: value}, f"{key}: {message}"))
CASES.append(
    config_case(
        "more items than the benchmark has",
        {"benchmarks.truthfulqa.n_items": 10**6},
        "benchmarks.truthfulqa.n_items: 1000000 items + 5 few-shot pool requested, but the "
        "benchmark has only 817 items",
    )
)

# 4. unknown and misspelt keys
for key, message in [
    ("result_dir", "(top level): unknown key(s) 'result_dir'"),
    ("backend.batchsize", "backend: unknown key(s) 'batchsize'"),
    ("backend.devices", "backend: unknown key(s) 'devices'"),
    ("subset.seeds", "subset: unknown key(s) 'seeds'"),
    ("analysis.boostrap", "analysis: unknown key(s) 'boostrap'"),
    ("analysis.subsample.n", "analysis.subsample: unknown key(s) 'n'"),
    ("analysis.bootstrap.samples", "analysis.bootstrap: unknown key(s) 'samples'"),
    ("models.0.precison", "models[0]: unknown key(s) 'precison'"),
    ("benchmarks.truthfulqa.items", "benchmarks.truthfulqa: unknown key(s) 'items'"),
    ("envelope.shot_formats", "envelope: unknown key(s) 'shot_formats'"),
]:
    CASES.append(config_case(f"misspelt key {key}", {key: 1}, message))

# 5. values outside a key's vocabulary
for key, value, message in [
    ("models.0.precision", "int3", "models[0].precision: 'int3' is not one of fp32, bf16, nf4"),
    ("models.0.precision", "BF16", "models[0].precision: 'BF16' is not one of fp32, bf16, nf4"),
    (  # a word that is none of the three is a template file's path (docs/models.md), and there is no such file
        "models.0.chat_template",
        "yes",
        "models[0] (model-a).chat_template: yes: No such file or directory (give auto, on, off or a Jinja chat "
        "template file)",
    ),
    ("models.0.trust_remote_code", "false", "models[0].trust_remote_code: expected boolean, got str 'false'"),
    ("backend.generate", "tgi", "backend.generate: 'tgi' is not one of hf, vllm"),
    ("backend.loglikelihood", "vllm", "backend.loglikelihood: 'vllm' is not one of hf"),
    (
        "analysis.significance.correction",
        "fdr",
        "analysis.significance.correction: 'fdr' is not one of holm, bonferroni, fdr_bh",
    ),
    ("backend.device", "banana", "backend.device: 'banana' is not auto, cpu, cuda or cuda:N"),
    ("backend.device", "cuda:x", "backend.device: 'cuda:x' is not auto, cpu, cuda or cuda:N"),
    ("backend.device", "GPU", "backend.device: 'GPU' is not auto, cpu, cuda or cuda:N"),
    ("backend.server", "no", "backend.server: expected boolean, got str 'no'"),
    ("benchmarks.truthfulqa_mc1", {"n_items": 3}, "benchmarks.truthfulqa_mc1: unknown benchmark"),
    ("benchmarks.BBQ", {"n_items": 3}, "benchmarks.BBQ: unknown benchmark"),
]:
    CASES.append(config_case(f"{key} = {value!r}", {key: value}, message))

# 6. model entries
for value, message in [
    ("my model", "models[0].name: 'my model' may use only"),
    ("../escape", "models[0].name: '../escape' may use only"),
    ("org/name", "models[0].name: 'org/name' may use only"),
    ("", "models[0].name: '' may use only"),
    (".hidden", "models[0].name: '.hidden' may use only"),
    ("a" * 101, "models[0].name: 'aaaaaaaaaa"),
    ("modèle", "models[0].name: 'modèle' may use only"),
    ("x;rm -rf", "models[0].name: 'x;rm -rf' may use only"),
    ("model-b", "models[1] (model-b).name: duplicate model name 'model-b'"),
]:
    CASES.append(config_case(f"model name {value[:20]!r}", {"models.0.name": value}, message))
for name, changes, message in [
    ("one model", {"models": [{"name": "a", "path": "org/a"}]}, "models: needs at least 2 entries, got 1"),
    ("no models", {"models": []}, "models: needs at least 2 entries, got 0"),
    ("model with path and embedded", {"models.0.embedded": "gemma-3-270m"}, "give exactly one of 'path'"),
    ("model with neither path nor embedded", {"models.0.path": DELETE}, "give exactly one of 'path'"),
    ("embedded model unknown", {"models.0.path": DELETE, "models.0.embedded": "llama"}, "is not one of gemma-3-270m"),
    (
        "model path missing",
        {"models.0.path": "/nonexistent/model"},
        "models[0] (model-a).path: /nonexistent/model does not exist",
    ),
    ("model path relative and missing", {"models.0.path": "models/x/y/z"}, "does not exist (and is not a hub id"),
    ("model path empty", {"models.0.path": ""}, "models[0].path: must not be empty"),
    ("model path not a model", {"models.0.path": "/tmp"}, "/tmp is not a model folder (no config.json in it)"),
    ("model entry not a mapping", {"models.0": "org/model"}, "models[0]: expected object, got str"),
    ("model without a name", {"models.0.name": DELETE}, "models[0]: missing required key(s) 'name'"),
]:
    CASES.append(config_case(name, changes, message))

# 7. the benchmarks section
for name, changes, message in [
    ("no benchmarks", {"benchmarks": {}}, "benchmarks: needs at least 1 entry, got 0"),
    (
        "benchmark without n_items",
        {"benchmarks.truthfulqa": {}},
        "benchmarks.truthfulqa: missing required key(s) 'n_items'",
    ),
    ("benchmark section a number", {"benchmarks.truthfulqa": 5}, "benchmarks.truthfulqa: expected object, got int 5"),
    (
        "n_items a string",
        {"benchmarks.truthfulqa.n_items": "5"},
        "benchmarks.truthfulqa.n_items: expected integer, got str '5'",
    ),
    (
        "n_items null",
        {"benchmarks.truthfulqa.n_items": None},
        "benchmarks.truthfulqa.n_items: expected integer, got NoneType None",
    ),
    (
        "n_items true",
        {"benchmarks.truthfulqa.n_items": True},
        "benchmarks.truthfulqa.n_items: expected integer, got bool True",
    ),
]:
    CASES.append(config_case(name, changes, message))

# 8. folders
for name, changes, message in [
    ("results_dir empty", {"results_dir": ""}, "results_dir: must not be empty"),
    ("results_dir the working folder", {"results_dir": "."}, "results_dir: '.' is the working folder"),
    ("results_dir the working folder, spelt ./", {"results_dir": "./"}, "is the working folder"),
    ("results_dir the root", {"results_dir": "/"}, "results_dir: '/' is the root"),
    ("results_dir a file", {"results_dir": str(REPO / "README.md")}, "README.md is a file, not a folder"),
    ("results_dir below a file", {"results_dir": str(REPO / "README.md" / "out")}, "README.md is a file, not a folder"),
    ("resources_dir empty", {"resources_dir": ""}, "resources_dir: must not be empty"),
    ("data_dir missing", {"data_dir": "/nonexistent/data"}, "data_dir: /nonexistent/data does not exist"),
    ("data_dir empty string", {"data_dir": ""}, "data_dir: must not be empty"),
    (
        "data_dir a file",
        {"data_dir": str(REPO / "README.md")},
        "data_dir: " + str(REPO / "README.md") + " is a file, not a folder",
    ),
]:
    CASES.append(config_case(name, changes, message))

# 9. config ids
for name, changes, message in [
    (
        "select_configs unknown id",
        {"select_configs": ["T9-greedy-0shot-freeform"]},
        "select_configs: 'T9-greedy-0shot-freeform' is not a valid config",
    ),
    (
        "select_configs invalid combination",
        {"select_configs": ["T1-t0.3-0shot-logprob"]},
        "select_configs: 'T1-t0.3-0shot-logprob' is not a valid config",
    ),
    ("select_configs empty", {"select_configs": []}, "select_configs: needs at least 1 entry, got 0"),
    (
        "select_configs duplicated",
        {"select_configs": ["T1-greedy-0shot-logprob"] * 2},
        "select_configs: entries must be unique",
    ),
    (
        "select_configs case",
        {"select_configs": ["t1-greedy-0shot-logprob"]},
        "select_configs: 't1-greedy-0shot-logprob' is not a valid config",
    ),
    (
        "conservative_core misspelt",
        {"analysis.conservative_core": ["T1-greedy-0shot-freefrom"]},
        "analysis.conservative_core: 'T1-greedy-0shot-freefrom' is not a valid config",
    ),
    (
        "conservative_core a string",
        {"analysis.conservative_core": "T1-greedy-0shot-freeform"},
        "analysis.conservative_core: expected array",
    ),
    (
        "precision probe with no configs to run",
        {"precision_probe": {"precision": "nf4"}},
        "precision_probe.configs: no configs to run",
    ),
    (
        "precision probe config outside the grid",
        {
            "precision_probe": {"precision": "nf4", "configs": ["T1-greedy-0shot-logprob"]},
            "select_configs": ["T1-greedy-0shot-freeform"],
        },
        "precision_probe.configs: 'T1-greedy-0shot-logprob' is not a config of this grid (select_configs leaves",
    ),
    (
        "precision probe config misspelt",
        {"precision_probe": {"precision": "nf4", "configs": ["T1-greedy-0shot-freefrom"]}},
        "precision_probe.configs: 'T1-greedy-0shot-freefrom' is not a config of this grid (no valid config",
    ),
    (
        "precision probe config twice",
        {"precision_probe": {"precision": "nf4", "configs": ["T1-greedy-0shot-freeform"] * 2}},
        "precision_probe.configs:",
    ),
    (
        "precision probe at the models' own precision",
        {"precision_probe": {"precision": "bf16", "configs": ["T1-greedy-0shot-freeform"]}},
        "precision_probe.precision: every model already runs at bf16",
    ),
    (
        "precision probe at an unknown precision",
        {"precision_probe": {"precision": "int4"}},
        "precision_probe.precision:",
    ),
]:
    CASES.append(config_case(name, changes, message))

# 10. few-shot pool
for pool, message in [
    (0, "subset.fewshot_pool: 0 is fewer than the 5 examples of shots value '5'"),
    (4, "subset.fewshot_pool: 4 is fewer than the 5 examples of shots value '5'"),
]:
    CASES.append(config_case(f"few-shot pool of {pool}", {"subset.fewshot_pool": pool}, message))
CASES.append(
    config_case(
        "few-shot pool of 2 with 3-shot configs selected",
        {"subset.fewshot_pool": 2, "select_configs": ["T1-greedy-3shot-logprob"]},
        "subset.fewshot_pool: 2 is fewer than the 3 examples of shots value '3'",
    )
)

# 11. the case_study section
STUDY = {
    "enabled": True,
    "model": "model-a",
    "n_items": 3,
    "anchor_config": "T1-greedy-0shot-logprob",
    "parity": {"template": "Q: {question}\nA:"},
    "benchmarks": ["truthfulqa"],
}
for name, study, message in [
    ("case study without enabled", {"model": "model-a"}, "case_study: missing required key(s) 'enabled'"),
    (
        "case study enabled without what to run",
        {"enabled": True},
        "case_study: missing required key(s) 'model', 'n_items'",
    ),
    ("case study enabled a string", {"enabled": "yes"}, "case_study.enabled: expected boolean, got str 'yes'"),
    ("case study unknown model", {**STUDY, "model": "nope"}, "case_study.model: no model named 'nope' under `models`"),
    ("case study nf4 model", None, "case_study.model: lm-eval and Inspect AI load fp32 or bf16 here, not nf4"),
    (
        "case study benchmark outside the run",
        {**STUDY, "benchmarks": ["bbq"]},
        "case_study.benchmarks: 'bbq' is not under `benchmarks`",
    ),
    (
        "case study unsupported benchmark",
        {**STUDY, "benchmarks": ["toxigen"]},
        "case_study.benchmarks[0]: 'toxigen' is not one of truthfulqa, bbq",
    ),
    (
        "case study sampled anchor",
        {**STUDY, "anchor_config": "T1-t0.3-0shot-logprob"},
        "case_study.anchor_config: 'T1-t0.3-0shot-logprob' is no valid config",
    ),
    (
        "case study parity without template",
        {**STUDY, "parity": {}},
        "case_study.parity: missing required key(s) 'template'",
    ),
    ("case study n_items zero", {**STUDY, "n_items": 0}, "case_study.n_items: 0 is less than the minimum of 1"),
    ("case study unknown key", {**STUDY, "itmes": 3}, "case_study: unknown key(s) 'itmes'"),
]:
    changes = {"case_study": study} if study is not None else {"case_study": STUDY, "models.0.precision": "nf4"}
    CASES.append(config_case(name, changes, message))


# 12. the envelope
def _template(value: str, key: str = "text") -> dict:
    return {f"envelope.axes.template.T1.{key}": value}


for name, changes, message in [
    (
        "template without {question}",
        _template("{shots}{answer_format}\nAnswer:"),
        "envelope.axes.template.T1.text: needs the placeholder(s) {question}",
    ),
    (
        "template without {shots}",
        _template("{question}\n{answer_format}\nAnswer:"),
        "envelope.axes.template.T1.text: needs the placeholder(s) {shots}",
    ),
    (
        "template with an unknown placeholder",
        _template("{shots}{question}{choices}"),
        "unknown placeholder(s) ['choices']",
    ),
    ("template with an open brace", _template("{shots}{question} {"), "malformed placeholder"),
    ("template with a stray closing brace", _template("{shots}{question} }"), "malformed placeholder"),
    (
        "logprob template without {question}",
        _template("{shots}Answer:", "logprob_text"),
        "envelope.axes.template.T1.logprob_text: needs the placeholder(s) {question}",
    ),
    ("template text empty", _template(""), "envelope.axes.template.T1.text: must not be empty"),
    (
        "shot format without {answer}",
        {"envelope.shot_format": "{question}\n\n"},
        "envelope.shot_format: needs the placeholder(s) {answer}",
    ),
    (
        "shot format without {question}",
        {"envelope.shot_format": "Answer: {answer}\n\n"},
        "envelope.shot_format: needs the placeholder(s) {question}",
    ),
    (
        "rule naming a misspelt benchmark",
        {"envelope.rules.1.if.benchmark": ["crows_pair"]},
        "envelope.rules[1] (crows_pairs_is_logprob_only).if.benchmark: unknown benchmark(s) ['crows_pair']",
    ),
    ("rule naming an unknown axis", {"envelope.rules.0.if": {"scorer": ["logprob"]}}, "unknown axis 'scorer'"),
    (
        "rule naming an unknown value",
        {"envelope.rules.0.then.decoding": ["greedy0"]},
        "unknown value(s) ['greedy0'] for axis 'decoding'",
    ),
    ("rule without then", {"envelope.rules.0.then": DELETE}, "envelope.rules[0]: missing required key(s) 'then'"),
    ("rule condition empty", {"envelope.rules.0.if": {}}, "envelope.rules[0].if: needs at least 1 entry, got 0"),
    ("axes missing scoring", {"envelope.axes.scoring": DELETE}, "envelope.axes: missing required key(s) 'scoring'"),
    ("empty axis", {"envelope.axes.shots": {}}, "envelope.axes.shots: needs at least 1 entry, got 0"),
    (
        "declared axis without a mechanism",
        {"envelope.axes.order": {"default": "a", "values": {"a": {"tier": "core", "order": "as_given"}}}},
        "envelope.axes.order: not a built-in axis (template, decoding, shots, scoring); an axis of your own needs",
    ),
    (
        "misspelt built-in axis",
        {"envelope.axes.templates": {"T5": {"tier": "core", "text": "{shots}{question}"}}},
        "envelope.axes.templates: not a built-in axis (template, decoding, shots, scoring)",
    ),
    (
        "declared axis of an unknown mechanism",
        {"envelope.axes.order": {"mechanism": "shuffle", "default": "a", "values": {"a": {"tier": "core"}}}},
        "envelope.axes.order.mechanism: 'shuffle' is not one of",
    ),
    (
        "declared axis whose default is none of its values",
        {
            "envelope.axes.batch": {
                "mechanism": "backend_option",
                "default": "b1",
                "values": {"b8": {"tier": "core", "batch_size": 8}},
            }
        },
        "envelope.axes.batch.default: 'b1' is not one of its values (b8)",
    ),
    (
        "batch axis of batch size zero",
        {
            "envelope.axes.batch": {
                "mechanism": "backend_option",
                "default": "b0",
                "values": {"b0": {"tier": "core", "batch_size": 0}},
            }
        },
        "envelope.axes.batch.values.b0.batch_size: 0 is less than the minimum of 1",
    ),
    (
        "declared axis named after a result column",
        {
            "envelope.axes.label": {
                "mechanism": "backend_option",
                "default": "b",
                "values": {"b": {"tier": "core", "batch_size": 2}},
            }
        },
        "envelope.axes.label: 'label' is reserved",
    ),
    (
        "declared axis with an upper-case name",
        {
            "envelope.axes.Order": {
                "mechanism": "option_order",
                "default": "a",
                "values": {"a": {"tier": "core", "order": "as_given"}},
            }
        },
        "envelope.axes: 'Order' is not an axis name: lower-case letters",
    ),
    (
        "template variable missing from a template",
        {
            "envelope.axes.system": {
                "mechanism": "template_variable",
                "default": "none",
                "values": {"none": {"tier": "core", "text": ""}},
            }
        },
        "envelope.axes.template.T1.text: needs the placeholder(s) {system}",
    ),
    (
        "few-shot draw per item without a seed",
        {
            "envelope.axes.draw": {
                "mechanism": "few_shot_draw",
                "default": "d",
                "values": {"d": {"tier": "core", "draw": "per_item"}},
            }
        },
        "envelope.axes.draw.values.d: a per_item draw needs a seed",
    ),
    (
        "option order value with a batch size",
        {
            "envelope.axes.order": {
                "mechanism": "option_order",
                "default": "a",
                "values": {"a": {"tier": "core", "order": "as_given", "batch_size": 2}},
            }
        },
        "envelope.axes.order.values.a: unknown key(s) 'batch_size'",
    ),
    (
        "tier misspelt",
        {"envelope.axes.shots.0.tier": "Core"},
        "envelope.axes.shots.0.tier: 'Core' is not one of core, stress",
    ),
    ("negative temperature", {"envelope/axes/decoding/t0.3/temperature": -0.3}, "is less than the minimum of 0"),
    (
        "temperature above vLLM's 2",
        {"envelope/axes/decoding/t0.3/temperature": 2.5},
        "is greater than the maximum of 2",
    ),
    (
        "seed beyond int64",
        {"envelope.seeds": [2**63]},
        "envelope.seeds[0]: 9223372036854775808 is greater than the maximum",
    ),
    ("top_p zero", {"envelope/axes/decoding/t0.3/top_p": 0}, "is less than or equal to the minimum of 0"),
    ("top_p above one", {"envelope/axes/decoding/t0.3/top_p": 1.5}, "is greater than the maximum of 1"),
    ("shots negative", {"envelope.axes.shots.3.n": -3}, "envelope.axes.shots.3.n: -3 is less than the minimum of 0"),
    ("shots as a float", {"envelope.axes.shots.3.n": 3.0}, "envelope.axes.shots.3.n: expected integer, got float 3.0"),
    ("no seeds", {"envelope.seeds": []}, "envelope.seeds: needs at least 1 entry, got 0"),
    ("duplicated seeds", {"envelope.seeds": [0, 0, 1]}, "envelope.seeds: entries must be unique"),
    ("negative seed", {"envelope.seeds": [-1]}, "envelope.seeds[0]: -1 is less than the minimum of 0"),
    ("max_new_tokens zero", {"envelope.max_new_tokens": 0}, "envelope.max_new_tokens: 0 is less than the minimum of 1"),
    (
        "axis value with a space",
        {"envelope.axes.shots.3 shots": {"tier": "core", "n": 3}},
        "envelope.axes.shots: '3 shots' may use only letters, digits and .",
    ),
    ("unknown scoring path", {"envelope.axes.scoring.mixed": {"tier": "core"}}, "'mixed' is not one of"),
    ("empty stop string", {"envelope.stop": [""]}, "envelope.stop[0]: must not be empty"),
]:
    CASES.append(config_case(name, changes, message))
for name, content, message in [
    ("envelope file missing", None, "envelope: file not found: {envelope} (the envelope file this config names"),
    ("envelope path is a folder", "folder", "{envelope}: is a folder, not a YAML file"),
    ("envelope file not UTF-8", b"axes: \xff\xfe\n", "{envelope}: not UTF-8 text"),
    ("envelope file with a YAML error", "axes: [\n", "{envelope}, line 2, column 1: YAML syntax error"),
    ("envelope file a list", "- a\n- b\n", "envelope: expected object, got list"),
    (
        "envelope file extending a missing one",
        "extends: base-envelope.yaml\n",
        "{envelope}: extends: config file not found: {folder}/base-envelope.yaml",
    ),
    (
        "envelope file extending itself",
        "extends: envelope.yaml\n",
        "{envelope}: extends: envelope.yaml is already a layer",
    ),
]:

    def build(scratch: Path, data_dir: Path, content=content, message=message):
        envelope = scratch / "envelope.yaml"
        if content == "folder":
            envelope.mkdir()
        elif content is not None:
            _write(envelope, content)
        config = {**base_config(data_dir), "envelope": str(envelope)}
        path = _write(scratch / "config.yaml", yaml.safe_dump(config))
        message = message.replace("{envelope}", str(envelope)).replace("{folder}", str(scratch))
        return ["check", "--plan", "--configfile", str(path)], message, None

    CASES.append(Case(name, build))

# 13. the config file itself and its layers
for name, content, message in [
    ("config file empty", "", "{path}: the file is empty"),
    ("config file only a comment", "# nothing\n", "{path}: the file is empty"),
    ("config file a list", "- data_dir: x\n", "{path}: expected a YAML mapping of config keys, got list"),
    ("config file a scalar", "42\n", "{path}: expected a YAML mapping of config keys, got int"),
    ("config file not UTF-8", b"data_dir: \xe9t\xe9\n", "{path}: not UTF-8 text (byte 10)"),
    ("config file Latin-1 comment", b"# r\xe9sultats\ndata_dir: x\n", "{path}: not UTF-8 text"),
    ("config file with a YAML syntax error", "models: [\n", "{path}, line 2, column 1: YAML syntax error"),
    ("config file with a tab indent", "backend:\n\tdevice: cpu\n", "YAML syntax error"),
    ("config file with a python tag", "data_dir: !!python/object/apply:os.system ['true']\n", "YAML syntax error"),
    (
        "config file with an alias bomb",
        "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
        "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
        "{path}: expands to more than 200,000 values (YAML aliases?)",
    ),
    ("extends a missing file", "extends: /nonexistent/base.yaml\n", "config file not found: /nonexistent/base.yaml"),
    ("extends empty", "extends:\nbackend: {device: cpu}\n", "{path}: extends: expected the path"),
    ("extends a number", "extends: 3\n", "{path}: extends: expected the path"),
    (
        "extends itself",
        lambda scratch, data: f"extends: {scratch / 'config.yaml'}\n",
        "is already a layer of this config (a cycle)",
    ),
    ("extends a folder", "extends: /tmp\n", "/tmp: is a folder, not a YAML file"),
    (
        "extends a list file",
        lambda scratch, data: f"extends: {_write(scratch / 'base.yaml', '- 1')}\n",
        "base.yaml: expected a YAML mapping",
    ),
    (
        "overlay deleting a required key",
        lambda scratch, data: (
            f"extends: {_write(scratch / 'base.yaml', yaml.safe_dump(base_config(data)))}\nmodels: null\n"
        ),
        "(top level): missing required key(s) 'models'",
    ),
]:
    CASES.append(file_case(name, content, message))


def _empty_data_dir(scratch: Path, data_dir: Path):
    (scratch / "empty").mkdir()
    path = _write(
        scratch / "config.yaml", yaml.safe_dump({**base_config(data_dir), "data_dir": str(scratch / "empty")})
    )
    return ["check", "--plan", "--configfile", str(path)], f"data_dir: {scratch / 'empty'} is empty", None


CASES.append(Case("data_dir an empty folder", _empty_data_dir))
CASES.append(
    command_case(
        "config file is a folder", lambda s: ["check", "--plan", "--configfile", str(s)], "is a folder, not a YAML file"
    )
)
CASES.append(
    command_case(
        "config file missing",
        lambda s: ["check", "--plan", "--configfile", str(s / "nope.yaml")],
        "config file not found",
    )
)

# 14. data values outside each benchmark's vocabulary, and broken data files
AGE = "Age.jsonl"
for name, change, message in [
    ("BBQ label -1", lambda r: r.update(label=-1), "{path}, line 1: label -1 is not one of 0, 1, 2"),
    ("BBQ label 1.7", lambda r: r.update(label=1.7), "{path}, line 1: label 1.7 is not one of 0, 1, 2"),
    ("BBQ label 3", lambda r: r.update(label=3), "{path}, line 1: label 3 is not one of 0, 1, 2"),
    ("BBQ label as text", lambda r: r.update(label="1"), "{path}, line 1: label '1' is not one of 0, 1, 2"),
    ("BBQ label true", lambda r: r.update(label=True), "{path}, line 1: label True is not one of 0, 1, 2"),
    (
        "BBQ category of another file",
        lambda r: r.update(category="Religion"),
        "{path}, line 1: category 'Religion' is not one of Age",
    ),
    (
        "BBQ context condition upper case",
        lambda r: r.update(context_condition="AMBIG"),
        "context_condition 'AMBIG' is not one of ambig, disambig",
    ),
    (
        "BBQ polarity misspelt",
        lambda r: r.update(question_polarity="negative"),
        "question_polarity 'negative' is not one of neg, nonneg",
    ),
    (
        "BBQ row without an unknown answer",
        lambda r: r["answer_info"]["ans2"].__setitem__(1, "old"),
        "{path}, line 1: answer_info must give [text, group] for ans0-ans2 with exactly one 'unknown' answer",
    ),
    (
        "BBQ row with two unknown answers",
        lambda r: r["answer_info"]["ans0"].__setitem__(1, "unknown"),
        "with exactly one 'unknown' answer",
    ),
    ("BBQ answer_info a string", lambda r: r.update(answer_info="ans2"), "answer_info must give [text, group]"),
    (
        "BBQ stereotyped groups a string",
        lambda r: r["additional_metadata"].update(stereotyped_groups="old"),
        "additional_metadata.stereotyped_groups must be a list",
    ),
    ("BBQ context empty", lambda r: r.update(context=" "), "{path}, line 1: empty value in column 'context'"),
]:
    CASES.append(data_case(name, "bbq", AGE, _bbq_line(0, change), message))
CASES += [
    data_case(
        "BBQ duplicated row",
        "bbq",
        AGE,
        _lines(lambda lines: lines.append(lines[0])),
        "item id 'bbq-Age-0' appears more than once",
    ),
    data_case(
        "BBQ stray copy of a file",
        "bbq",
        AGE,
        None,
        "Age (copy).jsonl: not a BBQ category file",
        extra=lambda folder: shutil.copy(folder / AGE, folder / "Age (copy).jsonl"),
    ),
    data_case(
        "BBQ one category alone",
        "bbq",
        AGE,
        None,
        "category file(s) Disability_status.jsonl",
        extra=lambda folder: [p.unlink() for p in folder.glob("*.jsonl") if p.name != AGE],
    ),
    data_case(
        "BBQ invalid UTF-8", "bbq", AGE, None, "{path}: not UTF-8 text", raw=lambda b: b[:100] + b"\xff" + b[100:]
    ),
    data_case(
        "BBQ truncated line",
        "bbq",
        AGE,
        _lines(lambda lines: lines.__setitem__(2, lines[2][:40])),
        "{path}, line 3: malformed JSON",
    ),
    data_case(
        "BBQ row not an object",
        "bbq",
        AGE,
        _lines(lambda lines: lines.__setitem__(0, "[1, 2]")),
        "{path}, line 1: expected a JSON object",
    ),
    data_case(
        "BBQ label missing in a row",
        "bbq",
        AGE,
        _bbq_line(0, lambda r: r.pop("label")),
        "{path}, line 1: empty value in column 'label'",
    ),
    data_case("BBQ file empty", "bbq", AGE, lambda text: "", "{path}: no rows"),
    data_case(
        "XSTest label in upper case",
        "xstest",
        "xstest_prompts.csv",
        _csv_cell(1, "label", "SAFE"),
        "{path}, data row 1 (after the header): label 'SAFE' is not one of safe, unsafe",
    ),
    data_case(
        "XSTest type in upper case",
        "xstest",
        "xstest_prompts.csv",
        _csv_cell(1, "type", "HOMONYMS"),
        "{path}, data row 1 (after the header): type 'HOMONYMS' is not one of",
    ),
    data_case(
        "XSTest unknown type",
        "xstest",
        "xstest_prompts.csv",
        _csv_cell(3, "type", "homonym"),
        "{path}, data row 3 (after the header): type 'homonym' is not one of",
    ),
    data_case(
        "XSTest type and label disagree",
        "xstest",
        "xstest_prompts.csv",
        _csv_cell(1, "label", "unsafe"),
        "type 'homonyms' and label 'unsafe' disagree",
    ),
    data_case(
        "XSTest duplicated id",
        "xstest",
        "xstest_prompts.csv",
        _csv_cell(2, "id", "1"),
        "item id 'xstest-1' appears more than once",
    ),
    data_case(
        "XSTest labelled completions missing",
        "xstest",
        "xstest_v2_completions_llama2new_labelled.csv",
        None,
        "{path}: data file not found (the few-shot answers come from the authors' labelled completions)",
        extra=lambda folder: (folder / "xstest_v2_completions_llama2new_labelled.csv").unlink(),
    ),
    data_case(
        "XSTest invalid UTF-8",
        "xstest",
        "xstest_prompts.csv",
        None,
        "{path}: cannot be read as CSV",
        raw=lambda b: b[:60] + b"\xff" + b[60:],
    ),
    data_case(
        "XSTest prompts missing",
        "xstest",
        "xstest_prompts.csv",
        None,
        "{path}: data file not found",
        extra=lambda folder: (folder / "xstest_prompts.csv").unlink(),
    ),
    data_case(
        "TruthfulQA with 30 answer options",
        "truthfulqa",
        "TruthfulQA.csv",
        _csv_cell(1, "Incorrect Answers", "; ".join(f"wrong {i}" for i in range(30))),
        "{path}, data row 1 (after the header): 31 answer options, more than the 26 letters A-Z",
    ),
    data_case(
        "TruthfulQA empty best answer",
        "truthfulqa",
        "TruthfulQA.csv",
        _csv_cell(4, "Best Answer", " "),
        "{path}, data row 4 (after the header): empty value in column 'Best Answer'",
    ),
    data_case(
        "TruthfulQA column renamed",
        "truthfulqa",
        "TruthfulQA.csv",
        lambda t: t.replace("Best Answer", "Best answer", 1),
        "{path}: missing column(s) Best Answer",
    ),
    data_case(
        "TruthfulQA invalid UTF-8",
        "truthfulqa",
        "TruthfulQA.csv",
        None,
        "{path}: cannot be read as CSV",
        raw=lambda b: b[:500] + b"\xff\xfe" + b[500:],
    ),
    data_case(
        "TruthfulQA file empty", "truthfulqa", "TruthfulQA.csv", lambda text: "", "{path}: cannot be read as CSV"
    ),
    data_case(
        "TruthfulQA only a header",
        "truthfulqa",
        "TruthfulQA.csv",
        lambda text: text.splitlines()[0] + "\n",
        "{path}: no rows",
    ),
]

# 15. what a real run needs of this machine (checked without --plan)
CASES += [
    config_case(
        "device cuda without a GPU",
        {"backend.device": "cuda"},
        "backend.device: cuda asked for, but this machine has no CUDA device",
        plan=False,
    ),
    config_case(
        "device cuda:3 without a GPU", {"backend.device": "cuda:3"}, "backend.device: cuda:3 asked for", plan=False
    ),
    config_case(
        "vllm without vllm installed",
        {"backend.generate": "vllm"},
        "backend.generate: vllm is not installed here",
        plan=False,
    ),
    config_case(
        "server_python that does not exist",
        {"backend.server_python": ".venv-vllm-missing/bin/python"},
        "backend.server_python: '.venv-vllm-missing/bin/python' is not an executable file",
        plan=False,
    ),
    config_case(
        "vllm served from a Python without vllm",
        {"backend.generate": "vllm", "backend.server_python": sys.executable},
        "backend.generate: vllm is not installed under backend.server_python",
        plan=False,
    ),
    config_case(
        "hub model not cached, hub unreachable",
        {},
        "models[0] (model-a).path: org/model-a is not in the Hugging Face cache and cannot be fetched",
        plan=False,
    ),
]


def short_context_case(name: str, positions: int, message: str) -> Case:
    """A local model of `positions` positions, which the run's prompts or generations outgrow."""

    def build(scratch: Path, data_dir: Path):
        from helpers.tiny_model import build_tiny_model

        with contextlib.redirect_stderr(io.StringIO()):  # the weights' progress bar
            model = build_tiny_model(scratch / "tiny")
        model_config = json.loads((model / "config.json").read_text())
        (model / "config.json").write_text(json.dumps({**model_config, "max_position_embeddings": positions}))
        config = base_config(data_dir)
        config["models"] = [{"name": "tiny-a", "path": str(model)}, {"name": "tiny-b", "path": str(model)}]
        path = scratch / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        return ["check", "--configfile", str(path)], message, None

    return Case(name, build)


CASES += [
    short_context_case(
        "prompts longer than a local model's context",
        512,
        "models[0] (tiny-a): 44 free-form prompt(s) are longer than the 256 tokens it keeps (context 512",
    ),
    short_context_case(
        "a context shorter than the longest generation",
        200,
        "envelope max_new_tokens: 256 new tokens leave no room for a prompt in model 'tiny-a', whose context is 200",
    ),
]

# 16. helper commands
CASES += [
    command_case(
        "provenance-diff of a missing file",
        lambda s: ["provenance-diff", str(s / "a.json"), str(s / "b.json")],
        "a.json: no such file",
    ),
    command_case("provenance-diff of a folder", lambda s: ["provenance-diff", str(s), str(s)], ": not a regular file"),
    command_case(
        "provenance-diff of /dev/zero",
        lambda s: ["provenance-diff", "/dev/zero", "/dev/zero"],
        "/dev/zero: not a regular file",
    ),
    command_case(
        "provenance-diff of a non-JSON file",
        lambda s: ["provenance-diff", str(_write(s / "a.json", "{oops")), str(s / "a.json")],
        "a.json: not a JSON run record",
    ),
    command_case(
        "provenance-diff of a JSON list",
        lambda s: ["provenance-diff", str(_write(s / "a.json", "[1]")), str(s / "a.json")],
        "a.json: not a JSON run record (a list, not an object)",
    ),
    command_case(
        "provenance-diff of a non-UTF-8 file",
        lambda s: ["provenance-diff", str(_write(s / "a.json", b'{"a": "\xff"}')), str(s / "a.json")],
        "a.json: not a JSON run record",
    ),
    command_case("parse: not JSON", lambda s: ["parse", "bbq"], "stdin line 1: not JSON", stdin="response: A\n"),
    command_case(
        "parse: no response field",
        lambda s: ["parse", "bbq"],
        "stdin line 2: expected a JSON object with a 'response' field",
        stdin='{"prompt": "Who?", "options": ["He", "She"], "response": "A"}\n{"text": "A"}\n',
    ),
    command_case(
        "parse: a JSON list",
        lambda s: ["parse", "xstest"],
        "stdin line 1: expected a JSON object with a 'response' field",
        stdin="[1]\n",
    ),
    command_case(
        "parse: a 5,000-digit number",
        lambda s: ["parse", "toxigen"],
        "stdin line 1: not JSON (Exceeds the limit",
        stdin='{"response": ' + "9" * 5000 + "}\n",
    ),
]

# imported results (docs/importing.md): the source, its mapping, the config naming them
SCORES = "model,benchmark,config_id,score\n"


def table_case(name: str, rows: str, message: str) -> Case:
    """`safetyrepro import --table` of a CSV with the score header and `rows`."""
    return command_case(
        name, lambda s: ["import", "--table", str(_write(s / "t.csv", SCORES + rows)), "--out-dir", str(s)], message
    )


CASES += [
    command_case("import: no source", lambda s: ["import", "--out-dir", str(s / "out")], "give --configfile"),
    command_case(
        "import: a JSON that is not lm-eval's",
        lambda s: ["import", "--lm-eval", str(_write(s / "results_1.json", '{"results": 1}')), "--out-dir", str(s)],
        "results_1.json: not an lm-evaluation-harness results file",
    ),
    command_case(
        "import: an lm-eval folder without results",
        lambda s: ["import", "--lm-eval", str(s), "--out-dir", str(s / "out")],
        "no lm-evaluation-harness results_*.json file",
    ),
    table_case("import: a score of NaN", "a,b,c,NaN\n", "t.csv: column score: 'NaN' is not a number in [0, 1]"),
    table_case("import: a score of inf", "a,b,c,inf\n", "t.csv: column score: 'inf' is not a number in [0, 1]"),
    command_case(
        "import: a table that is a folder",
        lambda s: ["import", "--table", str(s), "--out-dir", str(s / "out")],
        "not readable as CSV or Parquet",
    ),
    table_case("import: a benchmark name with a newline", 'a,"b\nc",c,0.5\n', "is not a plain name"),
    command_case(
        "import: a mapping key misspelt",
        lambda s: [
            "import",
            "--table",
            str(_write(s / "t.csv", SCORES + "a,b,c,0.5\n")),
            "--mapping",
            str(_write(s / "m.yaml", "model: {a: b}\n")),
            "--out-dir",
            str(s),
        ],
        "m.yaml: unknown key(s) 'model'",
    ),
    config_case(
        "imports beside models",
        {"imports": [{"kind": "table", "path": "."}]},
        "models: a config with `imports` analyses results produced elsewhere",
    ),
    command_case(
        "imports: a source kind misspelt",
        lambda s: ["check", "--configfile", str(_write(s / "c.yaml", "imports: [{kind: lm-eval, path: .}]\n"))],
        "imports[0].kind",
    ),
    config_case("audit: a budget of one cell", {"audit.budget": 1}, "audit.budget"),
    config_case("audit: a budget of 12.5 cells", {"audit.budget": 12.5}, "audit.budget"),
    config_case("audit: stop_probability one half", {"audit.stop_probability": 0.5}, "audit.stop_probability"),
    audit_case("audit: --budget 0", ["--pair", "model-a", "model-b", "--budget", "0"], "audit.budget"),
    audit_case("audit: a model not in the run", ["--pair", "model-a", "model-c"], "--pair: no model named 'model-c'"),
    audit_case("audit: one model twice", ["--pair", "model-a", "model-a"], "--pair: give two different models"),
    audit_case(
        "audit: a benchmark not in the run",
        ["--pair", "model-a", "model-b", "--benchmark", "bbq"],
        "--benchmark: 'bbq' is not a benchmark of the run",
    ),
]

# Legitimate oddities that work as meant (docs/bad-inputs.md): each must go through.
CASES += [
    accepted_case(
        config_case("a model name with +", {"models.0.name": "model-a+lora"}, ""),
        "+ is allowed in names: it is safe in file and job names, and adapters are often named so",
    ),
    accepted_case(
        file_case(
            "chat_template: off unquoted",
            lambda scratch, data_dir: yaml.safe_dump(base_config(data_dir)).replace(
                "name: model-a\n", "name: model-a\n  chat_template: off\n", 1
            ),
            "",
        ),
        "YAML 1.1 reads an unquoted off as false; the loader maps a boolean chat_template back to on/off",
    ),
    accepted_case(
        config_case("results_dir under ~", {"results_dir": "~/safetyrepro-results"}, ""),
        "~ is the home folder in every path key, for the check and the workflow alike",
    ),
    accepted_case(
        config_case("a model name with _vs_", {"models.0.name": "llama_vs_base"}, ""),
        "the audit matches the run's own names one by one; only two pairs that would share a file are refused",
    ),
    accepted_case(
        config_case(
            "a template placeholder with !s",
            {"envelope.axes.template.T1.text": "{shots}{question!s}\n{answer_format}\nAnswer:"},
            "",
        ),
        "!s (and :s) turn a text into the same text: the prompts are the plain placeholder's",
    ),
    accepted_case(
        file_case(
            "a model entry merged from another with <<: and a key overridden",
            lambda scratch, data_dir: (
                yaml.safe_dump({k: v for k, v in base_config(data_dir).items() if k != "models"})
                + "models:\n- &a {name: model-a, path: org/model-a}\n- <<: *a\n  name: model-b\n  path: org/model-b\n"
            ),
            "",
        ),
        "a key after a YAML merge key (<<:) overrides the merged one on purpose: not a key given twice",
    ),
    accepted_case(
        file_case(
            "a config file that starts with a byte-order mark",
            lambda scratch, data_dir: "\ufeff" + yaml.safe_dump(base_config(data_dir)),
            "",
        ),
        "editors on some systems write one; YAML readers skip it",
    ),
]


def _round_three() -> list[Case]:
    """The inputs kept in modules of their own, by class: config files, paths and layers; data files,
    imported results and nested JSON; grids, templates and the audit; the helper commands' input (each
    builds on the helpers above)."""
    from helpers import (
        bad_input_cases_commands,
        bad_input_cases_config,
        bad_input_cases_data,
        bad_input_cases_grid,
        bad_input_cases_run,
    )

    return [
        *bad_input_cases_config.CASES,
        *bad_input_cases_data.CASES,
        *bad_input_cases_grid.CASES,
        *bad_input_cases_commands.CASES,
        *bad_input_cases_run.CASES,
    ]


CASES += _round_three()
