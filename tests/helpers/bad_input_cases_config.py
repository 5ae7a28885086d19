"""Bad inputs in config files, their paths and layers (issue 35, part 1), each with the one message a user
must get: folders that overlap, YAML that loads otherwise than it reads (a key given twice, octal
integers, nesting too deep), seeds beyond what their consumers hold, overlays whose base is missing, and
benchmarks left without a config. (`--config` overrides reach no `safetyrepro` command: tests/unit/configuration/test_settings.py
covers them, through Snakemake's own parser.)"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import yaml

from helpers.bad_input_corpus import ENVELOPE, REPO, Case, _write, base_config, config_case, file_case

INT64_MAX = 2**63 - 1
EMBEDDED = {"name": "gemma-270m", "embedded": "gemma-3-270m"}


def _check(scratch: Path, config: dict | str) -> list[str]:
    """`safetyrepro check --plan` of a config written to scratch/config.yaml (a mapping, or raw YAML text)."""
    text = config if isinstance(config, str) else yaml.safe_dump(config, allow_unicode=True)
    return ["check", "--plan", "--configfile", str(_write(scratch / "config.yaml", text))]


def folder_case(name: str, edit: Callable[[dict, Path, Path], str]) -> Case:
    """A good config changed by `edit(config, scratch, data_dir)`, which returns the expected message."""

    def build(scratch: Path, data_dir: Path):
        config = base_config(data_dir)
        message = edit(config, scratch, data_dir)
        return _check(scratch, config), message, None

    return Case(name, build)


def _own_data(scratch: Path, data_dir: Path, folder: str) -> Path:
    """A copy of the TruthfulQA data (the only benchmark of the base config) at scratch/folder."""
    shutil.copytree(data_dir / "truthfulqa", scratch / folder / "truthfulqa")
    return scratch / folder


def _results_is_data(config: dict, scratch: Path, data_dir: Path) -> str:
    config["results_dir"] = str(data_dir)
    return f"results_dir: '{data_dir}' is the same folder as data_dir ('{data_dir}')"


def _results_is_data_with_a_slash(config: dict, scratch: Path, data_dir: Path) -> str:
    config["results_dir"] = f"{data_dir}/"
    return f"results_dir: '{data_dir}' is the same folder as data_dir"


def _results_inside_data(config: dict, scratch: Path, data_dir: Path) -> str:
    config["results_dir"] = str(data_dir / "results")
    return f"results_dir: '{data_dir / 'results'}' is inside data_dir ('{data_dir}')"


def _results_inside_data_through_a_link(config: dict, scratch: Path, data_dir: Path) -> str:
    (scratch / "benchmarks").symlink_to(data_dir)
    config["results_dir"] = str(scratch / "benchmarks" / "run1")
    return f"results_dir: '{scratch / 'benchmarks' / 'run1'}' is inside data_dir"


def _results_hold_data(config: dict, scratch: Path, data_dir: Path) -> str:
    config["data_dir"] = str(_own_data(scratch, data_dir, "work/data"))
    config["results_dir"] = str(scratch / "work")
    return f"results_dir: '{scratch / 'work'}' holds data_dir ('{scratch / 'work' / 'data'}')"


def _results_hold_data_relatively(config: dict, scratch: Path, data_dir: Path) -> str:
    config["data_dir"] = str(_own_data(scratch, data_dir, "data"))
    config["results_dir"] = str(scratch / "data" / "..")
    return "holds data_dir"


def _data_dir_loop(config: dict, scratch: Path, data_dir: Path) -> str:
    (scratch / "a").symlink_to(scratch / "b")
    (scratch / "b").symlink_to(scratch / "a")
    config["data_dir"] = str(scratch / "a")
    return f"data_dir: {scratch / 'a'} is a symbolic link that leads back to itself"


def _resources(value: Callable[[Path, Path], str], message: str) -> Callable[[dict, Path, Path], str]:
    """An edit: a run with an embedded model (built into resources_dir) and resources_dir `value(scratch, data)`."""

    def edit(config: dict, scratch: Path, data_dir: Path) -> str:
        config["models"][1] = dict(EMBEDDED)
        config["resources_dir"] = value(scratch, data_dir)
        return message.replace("{scratch}", str(scratch)).replace("{data}", str(data_dir))

    return edit


CASES: list[Case] = [
    # results_dir, data_dir and resources_dir: one folder each
    folder_case("results_dir the data folder", _results_is_data),
    folder_case("results_dir the data folder, with a slash", _results_is_data_with_a_slash),
    folder_case("results_dir inside the data folder", _results_inside_data),
    folder_case("results_dir inside the data folder through a link", _results_inside_data_through_a_link),
    folder_case("results_dir holding the data folder", _results_hold_data),
    folder_case("results_dir holding the data folder, spelt with ..", _results_hold_data_relatively),
    folder_case(
        "results_dir with a wildcard's braces",
        lambda c, s, d: (
            c.update(results_dir="results/{model}")
            or "results_dir: 'results/{model}' holds a brace, which Snakemake reads as a wildcard in every output path"
        ),
    ),
    folder_case(
        "results_dir inside the package's own folder",
        lambda c, s, d: (
            c.update(results_dir=str(REPO / "src" / "safetyrepro" / "runs"))
            or f"results_dir: '{REPO / 'src' / 'safetyrepro' / 'runs'}' is inside the safetyrepro package"
        ),
    ),
    folder_case(
        "results_dir under /proc",
        lambda c, s, d: (
            c.update(results_dir="/proc/safetyrepro-results")
            or "results_dir: '/proc/safetyrepro-results' is on a file system that holds no files (/proc: proc)"
        ),
    ),
    folder_case("data_dir a symbolic link that leads back to itself", _data_dir_loop),
    folder_case(
        "data_dir a symbolic link to nothing",
        lambda c, s, d: (
            (s / "data").symlink_to(s / "gone")
            or c.update(data_dir=str(s / "data"))
            or f"data_dir: {s / 'data'} is a symbolic link to {s / 'gone'}, which does not exist"
        ),
    ),
    folder_case(
        "resources_dir a file",
        _resources(
            lambda s, d: str(REPO / "README.md"), f"resources_dir: {REPO / 'README.md'} is a file, not a folder"
        ),
    ),
    folder_case(
        "resources_dir below a file",
        _resources(lambda s, d: str(REPO / "README.md" / "built"), "README.md is a file, not a folder"),
    ),
    folder_case(
        "resources_dir the results folder",
        _resources(lambda s, d: "results", "results_dir: 'results' is the same folder as resources_dir ('results')"),
    ),
    folder_case(
        "resources_dir inside the results folder",
        _resources(lambda s, d: "results/built", "results_dir: 'results' holds resources_dir ('results/built')"),
    ),
    folder_case(
        "resources_dir inside the data folder",
        _resources(lambda s, d: f"{d}/models", "resources_dir: '{data}/models' is inside data_dir ('{data}')"),
    ),
    # YAML nested too deeply (Python's recursion), or referring to itself
    file_case(
        "config file nested 5000 lists deep",
        "models: " + "[" * 5000 + "]" * 5000 + "\n",
        "{path}: nested more than 64 levels deep",
    ),
    file_case(
        "config file nested 100 mappings deep",
        "analysis:\n" + "".join(f"{'  ' * (level + 1)}k{level}:\n" for level in range(100)) + "  " * 101 + "x: 1\n",
        "{path}: nested more than 64 levels deep",
    ),
    file_case(
        "config file with a self-referring alias",
        "select_configs: &ids [T1-greedy-0shot-logprob, *ids]\n",
        "{path}: nested more than 64 levels deep",
    ),
]


def _raw(name: str, text: Callable[[dict], str], message: str) -> Case:
    """A config file written by hand: `text(good config)` (a key given twice or an octal number cannot be
    written by yaml.safe_dump)."""
    return file_case(name, lambda scratch, data_dir: text(base_config(data_dir)), message)


def _dump(config: dict) -> str:
    return yaml.safe_dump(config, allow_unicode=True, sort_keys=False)


def _without(config: dict, *keys: str) -> dict:
    return {key: value for key, value in config.items() if key not in keys}


# a key given twice in one mapping: YAML keeps the last, quietly
CASES += [
    _raw(
        "models given twice",
        lambda c: (
            _dump(c) + "models:\n  - {name: model-c, path: org/model-c}\n  - {name: model-d, path: org/model-d}\n"
        ),
        "key 'models' given twice (first on line 3); YAML would keep only the last",
    ),
    _raw(
        "partial_results given twice, once quoted",
        lambda c: _dump(c) + 'partial_results: true\n"partial_results": false\n',
        "key 'partial_results' given twice",
    ),
    _raw(
        "a benchmark given twice",
        lambda c: (
            _dump(_without(c, "benchmarks")) + "benchmarks:\n  truthfulqa: {n_items: 5}\n  truthfulqa: {n_items: 50}\n"
        ),
        "key 'benchmarks.truthfulqa' given twice",
    ),
    _raw(
        "backend device twice in a flow mapping",
        lambda c: _dump(c) + "backend: {device: cpu, batch_size: 4, device: cuda}\n",
        "key 'backend.device' given twice (first on line",
    ),
    _raw(
        "tier twice in an inline envelope",
        lambda c: _dump(c).replace("        tier: core\n", "        tier: core\n        tier: stress\n", 1),
        "key 'envelope.axes.template.T1.tier' given twice",
    ),
    _raw(
        "a model's precision twice",
        lambda c: _dump(c).replace(
            "path: org/model-a\n", "path: org/model-a\n  precision: fp32\n  precision: nf4\n", 1
        ),
        "key 'models[0].precision' given twice",
    ),
]

# integers with a leading zero: YAML 1.1 reads them as octal
CASES += [
    _raw(
        "n_items 010",
        lambda c: _dump(c).replace("n_items: 5", "n_items: 010"),
        "benchmarks.truthfulqa.n_items: 010 has a leading zero, so YAML 1.1 reads it as the octal 8; write 10",
    ),
    _raw(
        "subset seed 0777", lambda c: _dump(c).replace("seed: 1", "seed: 0777"), "subset.seed: 0777 has a leading zero"
    ),
    _raw(
        "fewshot_pool 05",
        lambda c: _dump(c).replace("fewshot_pool: 5", "fewshot_pool: 05"),
        "subset.fewshot_pool: 05 has a leading zero, so YAML 1.1 reads it as the octal 5; write 5",
    ),
    _raw(
        "an envelope seed 042",
        lambda c: _dump(c).replace("  seeds:\n  - 0\n", "  seeds:\n  - 042\n", 1),
        "envelope.seeds[0]: 042 has a leading zero, so YAML 1.1 reads it as the octal 34",
    ),
    _raw(
        "a digit-only revision with a leading zero",
        lambda c: _dump(c).replace("path: org/model-a\n", "path: org/model-a\n  revision: 0123456\n", 1),
        "models[0].revision: 0123456 has a leading zero, so YAML 1.1 reads it as the octal 42798",
    ),
    _raw(
        "a negative octal batch size",
        lambda c: _dump(c) + "backend: {batch_size: -010}\n",
        "backend.batch_size: -010 has a leading zero",
    ),
]

# a budget that cannot run as given (docs/estimation.md)
CASES += [
    config_case(
        "a budget as a share and as a count",
        {"estimate": {"budget_share": 0.25, "budget_cells": 40}},
        "estimate: budget_share (0.25) and budget_cells (40) both set: give one",
    ),
    config_case(
        "a budget of no configs",
        {"estimate.budget_share": 0},
        "estimate.budget_share: 0 is less than or equal to the minimum of 0",
    ),
    config_case(
        "a budget of more than the grid",
        {"estimate.budget_share": 1.5},
        "estimate.budget_share: 1.5 is greater than the maximum of 1",
    ),
    config_case(
        "a budget of fewer cells than one config of each benchmark for every model",
        {"estimate.budget_cells": 1},
        "estimate.budget_cells: 1 is fewer than one config of every benchmark for every model (2 cells: 2 models x "
        "1 benchmark): give at least 2",
    ),
    config_case(
        "a budget beside partial_results",
        {"estimate.budget_share": 0.25, "partial_results": True},
        "estimate: a budget's rounds read every cell they chose, so partial_results cannot analyse the cells "
        "finished so far: drop partial_results (or the budget)",
    ),
    config_case(
        "a budget beside select_configs",
        {
            "estimate.budget_cells": 8,
            "select_configs": [
                "T1-greedy-0shot-freeform",
                "T1-greedy-3shot-freeform",
                "T1-greedy-0shot-logprob",
                "T2-greedy-3shot-logprob",
            ],
        },
        "estimate: a budget chooses which of the envelope's configs run, and select_configs fixes them: drop "
        "select_configs (narrow the envelope with its rules instead), or drop budget_share/budget_cells",
    ),
]

# seeds past what their consumers hold: LightGBM's is a 32-bit integer, the others 64-bit
for key, value, message in [
    ("analysis.subsample.seed", 2**63, f"9223372036854775808 is greater than the maximum of {INT64_MAX}"),
    ("analysis.subsample.seed", -1, "-1 is less than the minimum of 0"),
    ("analysis.bootstrap.seed", 2**64, f"18446744073709551616 is greater than the maximum of {INT64_MAX}"),
    ("analysis.bootstrap.seed", -7, "-7 is less than the minimum of 0"),
    ("analysis.significance.seed", 2**63, f"9223372036854775808 is greater than the maximum of {INT64_MAX}"),
    ("analysis.shap_seed", 2**31, "2147483648 is greater than the maximum of 2147483647"),
    ("analysis.shap_seed", -1, "-1 is less than the minimum of 0"),
    ("audit.seed", 2**63, f"9223372036854775808 is greater than the maximum of {INT64_MAX}"),
    ("estimate.seed", 2**63, f"9223372036854775808 is greater than the maximum of {INT64_MAX}"),
    ("subset.seed", 2**63, "9223372036854775808 is greater than the maximum of 4294967294"),
]:
    CASES.append(config_case(f"seed {key} of {value}", {key: value}, f"{key}: {message}"))
CASES.append(
    config_case(
        "a few-shot draw seed of 2^63",
        {
            "envelope/axes/draw": {
                "mechanism": "few_shot_draw",
                "default": "first",
                "values": {
                    "first": {"tier": "core", "draw": "pool_order"},
                    "drawn": {"tier": "stress", "draw": "shuffled", "seed": 2**63},
                },
            }
        },
        f"envelope.axes.draw.values.drawn.seed: 9223372036854775808 is greater than the maximum of {INT64_MAX}",
    )
)
CASES.append(
    config_case(
        "an option-order seed of 2^64",
        {
            "envelope/axes/order": {
                "mechanism": "option_order",
                "default": "given",
                "values": {
                    "given": {"tier": "core", "order": "as_given"},
                    "shuffled": {"tier": "stress", "order": "shuffled", "seed": 2**64},
                },
            }
        },
        "envelope.axes.order.values.shuffled.seed: 18446744073709551616 is greater than the maximum",
    )
)


def layered_case(name: str, files: Callable[[Path, Path], dict[str, str]], message: str) -> Case:
    """Config files written in scratch (relative name -> text); the check runs on the first, `{scratch}` in the
    message stands for the scratch folder."""

    def build(scratch: Path, data_dir: Path):
        written = files(scratch, data_dir)
        for relative, text in written.items():
            (scratch / relative).parent.mkdir(parents=True, exist_ok=True)
            _write(scratch / relative, text)
        first = scratch / next(iter(written))
        return ["check", "--plan", "--configfile", str(first)], message.replace("{scratch}", str(scratch)), None

    return Case(name, build)


# extends: relative to the overlay that says it; a missing base names the overlay and extends
CASES += [
    layered_case(
        "extends ../ of a base that is not there",
        lambda s, d: {"overlays/gpu.yaml": "extends: ../base.yaml\nbackend: {device: cuda}\n"},
        "{scratch}/overlays/gpu.yaml: extends: config file not found: {scratch}/overlays/../base.yaml",
    ),
    layered_case(
        "extends a base beside the working folder, not beside the overlay",
        lambda s, d: {
            "overlays/gpu.yaml": "extends: base.yaml\nbackend: {device: cuda}\n",
            "base.yaml": _dump(base_config(d)),
        },
        "{scratch}/overlays/gpu.yaml: extends: config file not found: {scratch}/overlays/base.yaml",
    ),
    layered_case(
        "extends a base with a YAML error",
        lambda s, d: {"over.yaml": "extends: base.yaml\n", "base.yaml": "models: [\n"},
        "{scratch}/over.yaml: extends: {scratch}/base.yaml, line 2, column 1: YAML syntax error",
    ),
    layered_case(
        "extends a base that gives a key twice",
        lambda s, d: {"over.yaml": "extends: base.yaml\n", "base.yaml": _dump(base_config(d)) + "subset: {seed: 2}\n"},
        "{scratch}/over.yaml: extends: {scratch}/base.yaml, line ",
    ),
    layered_case(
        "an overlay with an octal seed",
        lambda s, d: {"over.yaml": "extends: base.yaml\nsubset: {seed: 012}\n", "base.yaml": _dump(base_config(d))},
        "{scratch}/over.yaml, line 2, column 16: subset.seed: 012 has a leading zero",
    ),
    layered_case(
        "two overlays extending each other by relative paths",
        lambda s, d: {"a/one.yaml": "extends: ../b/two.yaml\n", "b/two.yaml": "extends: ../a/./one.yaml\n"},
        "extends: ../a/./one.yaml is already a layer of this config (a cycle)",
    ),
    layered_case(
        "the third of three overlays missing",
        lambda s, d: {
            "top.yaml": "extends: middle.yaml\nbackend: {batch_size: 2}\n",
            "middle.yaml": "extends: lower.yaml\n",
            "lower.yaml": "extends: sub/base.yaml\n",
        },
        "{scratch}/lower.yaml: extends: config file not found: {scratch}/sub/base.yaml",
    ),
]


def _with_crows_pairs(config: dict) -> None:
    config["benchmarks"]["crows_pairs"] = {"n_items": 5}


def _benchmark_case(name: str, changes: dict, message: str) -> Case:
    """A config of TruthfulQA and CrowS-Pairs (log-likelihood only, by the envelope's rule) with `changes`."""

    def build(scratch: Path, data_dir: Path):
        config = base_config(data_dir)
        _with_crows_pairs(config)
        config.update(changes)
        return _check(scratch, config), message, None

    return Case(name, build)


# a benchmark left with no config by select_configs or the envelope's rules
CASES += [
    _benchmark_case(
        "select_configs of free-form configs only, with CrowS-Pairs",
        {"select_configs": ["T1-greedy-0shot-freeform", "T2-t0.3-0shot-freeform"]},
        "select_configs: keeps none of the 12 valid configs of benchmark crows_pairs (e.g. T1-greedy-0shot-logprob)",
    ),
    _benchmark_case(
        "a rule contradicting CrowS-Pairs' log-likelihood rule",
        {
            "envelope": {
                **ENVELOPE,
                "rules": [
                    *ENVELOPE["rules"],
                    {
                        "name": "crows_pairs_free_form",
                        "if": {"benchmark": ["crows_pairs"]},
                        "then": {"scoring": ["freeform"]},
                    },
                ],
            }
        },
        "benchmarks.crows_pairs: the envelope's rules (",
    ),
    _benchmark_case(
        "a rule keeping TruthfulQA to a template it excludes",
        {
            "envelope": {
                **ENVELOPE,
                "rules": [
                    *ENVELOPE["rules"],
                    {"name": "t4_is_stress_only", "if": {"template": ["T4"]}, "then": {"benchmark": ["bbq"]}},
                    {"name": "truthfulqa_reasons", "if": {"benchmark": ["truthfulqa"]}, "then": {"template": ["T4"]}},
                ],
            }
        },
        "benchmarks.truthfulqa: the envelope's rules (t4_is_stress_only, truthfulqa_reasons) leave it no valid config",
    ),
]

# a model behind a server (docs/served.md): what its entry cannot be, and what this machine cannot reach
SERVED = {"name": "served", "endpoint": {"url": "http://127.0.0.1:9/v1", "model": "m"}}
FREEFORM_ONLY = {"select_configs": ["T1-greedy-0shot-freeform", "T3-t0.7-0shot-freeform"]}
CASES += [
    config_case(
        "a served model's URL with its key in it",
        {"models.0": {**SERVED, "endpoint": {"url": "https://user:sk-123@api.example.com/v1", "model": "m"}}},
        "models[0] (served).endpoint.url: holds credentials; give the server's URL without them, and name the "
        "environment variable that holds the key in api_key_env",
    ),
    config_case(
        "a served model's URL that is no http URL",
        {"models.0": {**SERVED, "endpoint": {"url": "127.0.0.1:8000/v1", "model": "m"}}},
        "models[0].endpoint.url: '127.0.0.1:8000/v1' is not an http or https URL without a query",
    ),
    config_case(
        "a served model's key variable with a dollar sign",
        {"models.0": {**SERVED, "endpoint": {**SERVED["endpoint"], "api_key_env": "$OPENAI_API_KEY"}}},
        "models[0].endpoint.api_key_env: '$OPENAI_API_KEY' is not the name of an environment variable",
    ),
    config_case(
        "log-likelihood configs for a model served through the chat API",
        {"models.0": {**SERVED, "endpoint": {**SERVED["endpoint"], "api": "chat"}}},
        "models[0] (served).endpoint: serves generation only (chat API), and the run has "
        "log-likelihood configs (T1-greedy-0shot-logprob of truthfulqa)",
    ),
    config_case(
        "a served model whose key variable is not set",
        {"models.0": {**SERVED, "endpoint": {**SERVED["endpoint"], "api_key_env": "SAFETYREPRO_NO_SUCH_KEY"}}}
        | FREEFORM_ONLY,
        "models[0] (served).endpoint.api_key_env: the environment variable SAFETYREPRO_NO_SUCH_KEY is not set here",
        plan=False,
    ),
    config_case(
        "a served model whose server does not answer",
        {"models.0": SERVED} | FREEFORM_ONLY,
        "models[0] (served).endpoint: no server answers at http://127.0.0.1:9/v1 (ConnectError",
        plan=False,
    ),
]

# a model split over GPUs (docs/gpu.md, "A model larger than one GPU"): what its entry cannot be
SPLIT = {"name": "split", "embedded": "gemma-3-270m", "parallel": {"tensor": 2}}
CASES += [
    config_case(
        "a model split over GPUs on the transformers backend",
        {"models.0": SPLIT} | FREEFORM_ONLY,
        "models[0] (split).parallel: tensor 2 x pipeline 1 GPUs is the offline vLLM engine's split, and "
        "backend.generate is hf; set backend.generate: vllm",
    ),
    config_case(
        "log-likelihood configs for a model split over GPUs",
        {"models.0": SPLIT, "backend.generate": "vllm"},
        "models[0] (split).parallel: tensor 2 x pipeline 1 GPUs on vLLM, which scores no log-likelihoods, and the "
        "run has log-likelihood configs (T1-greedy-0shot-logprob of truthfulqa)",
    ),
    config_case(
        "a served model split over GPUs here",
        {"models.0": {**SERVED, "parallel": {"pipeline": 2}}} | FREEFORM_ONLY,
        "models[0] (served): gives both 'endpoint' and 'parallel'; a served model's server splits it over its own GPUs",
    ),
    config_case(
        "a model split over more GPUs than a node has",
        {"models.0": {**SPLIT, "parallel": {"tensor": 64, "pipeline": 64}}, "backend.generate": "vllm"} | FREEFORM_ONLY,
        "models[0] (split).parallel: tensor 64 x pipeline 64 is 4096 GPUs, more than one node has (64 at most)",
    ),
    config_case(
        "a model split over GPUs on the CPU",
        {"models.0": SPLIT, "backend.generate": "vllm", "backend.device": "cpu"} | FREEFORM_ONLY,
        "models[0] (split).parallel: tensor 2 x pipeline 1 GPUs, and backend.device is cpu; use auto or cuda",
    ),
    config_case(
        "a model split over zero GPUs",
        {"models.0": {**SPLIT, "parallel": {"tensor": 0}}},
        "models[0].parallel.tensor: 0 is less than the minimum of 1",
    ),
]

# a run's own human labels (docs/scorers.md, "Labelling a run's replies"): what `human_labels` cannot name
CASES += [
    config_case(
        "human labels for a benchmark the run does not have",
        {"human_labels": {"xstest": "labels.csv"}},
        "human_labels.xstest: not a benchmark of this run (truthfulqa)",
    ),
    config_case(
        "human labels for a benchmark whose replies have none to correct with",
        {"human_labels": {"truthfulqa": "labels.csv"}},
        "human_labels.truthfulqa: truthfulqa has no human labels of replies to correct with",
    ),
    config_case(
        "human labels in a file that is not there",
        {"human_labels": {"xstest": "no-such-labels.csv"}},
        "human_labels.xstest: no-such-labels.csv: no such file (`safetyrepro label` draws the replies to label)",
        benchmark="xstest",
    ),
    config_case(
        "human labels named by an empty path",
        {"human_labels": {"xstest": ""}},
        "human_labels.xstest: must not be empty",
        benchmark="xstest",
    ),
]
