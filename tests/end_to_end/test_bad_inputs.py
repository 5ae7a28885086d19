"""Every bad input of the table in docs/bad-inputs.md: the workflow stops with exactly that one message, before
any job, and writes nothing to results/; the messages are the page's, word for word.

Each case runs the Snakefile's own checks in this process (`workflow_error`); two cases, one per place the
Snakefile stops a run, also run Snakemake end to end and must print the same line."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.session import REPO
from helpers.tiny_model import build_tiny_model, tiny_model_entries
from helpers.workflow import snakemake, with_changes, write_config

from safetyrepro import cli
from safetyrepro.benchmarks import DataError
from safetyrepro.configuration.build import load_run_settings
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.pipeline.preflight import check_inputs, preflight

SAFETYREPRO = Path(sys.executable).parent / "safetyrepro"
PAGE = REPO / "docs" / "bad-inputs.md"
# what the page writes for the parts of a message that depend on the machine
PLACEHOLDERS = {"<dir>": ".+", "<file>": ".+", "<path>": ".+", "<envelope file>": ".+", "(...)": r"\(.+\)", "N": r"\d+"}


def page_table() -> dict[str, str]:
    """The page's first table: input -> its message cell."""
    table = PAGE.read_text(encoding="utf-8").split("| input | message |", 1)[1].split("\n\n", 1)[0]
    return dict(line[2:-2].split(" | ", 1) for line in table.splitlines()[2:])


def page_message(case: str) -> str:
    """The message the page gives for an input: its cell without the code span's backticks."""
    return re.fullmatch(r"(``?) ?(.*?) ?\1", page_table()[case]).group(2)


def page_pattern(text: str) -> re.Pattern:
    """A message as the page writes it, its placeholders standing for any path, elided part or number."""
    parts = re.split(r"(<dir>|<file>|<path>|<envelope file>|\(\.\.\.\)|\bN\b)", text)
    return re.compile("".join(PLACEHOLDERS[part] if i % 2 else re.escape(part) for i, part in enumerate(parts)))


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory) -> list[dict]:
    root = tmp_path_factory.mktemp("bad-input-models")
    return tiny_model_entries([root / f"tiny-{i}" for i in range(2)])


def copy_benchmark(data_dir: Path, target: Path, benchmark: str) -> Path:
    """A private copy of one benchmark's files (to break them without touching the shared data)."""
    shutil.copytree(data_dir / benchmark, target / benchmark)
    return target


def _csv_without_column(root: Path, data_dir: Path) -> tuple[dict, str]:
    data = copy_benchmark(data_dir, root / "data", "xstest")
    path = data / "xstest" / "xstest_prompts.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(line.replace(",type,", ",kind,", 1) for line in lines) + "\n", encoding="utf-8")
    return {"data_dir": str(data)}, f"{path}: missing column(s) type"


def _csv_with_empty_value(root: Path, data_dir: Path) -> tuple[dict, str]:
    data = copy_benchmark(data_dir, root / "data", "xstest")
    path = data / "xstest" / "xstest_prompts.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[7] = lines[7].replace(",homonyms,", ",,", 1)  # data row 7
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"data_dir": str(data)}, f"{path}, data row 7 (after the header): empty value in column 'type'"


def _jsonl_with_broken_line(root: Path, data_dir: Path) -> tuple[dict, str]:
    data = copy_benchmark(data_dir, root / "data", "bbq")
    shutil.copytree(data_dir / "xstest", data / "xstest")
    path = data / "bbq" / "Age.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2][: len(lines[2]) // 2]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    column = lines[2].rindex('"') + 1  # the cut leaves a string open
    return (
        {"data_dir": str(data), "benchmarks": {"bbq": {"n_items": 3}, "xstest": {"n_items": 3}}},
        f"{path}, line 3: malformed JSON: Unterminated string starting at (column {column})",
    )


def _not_a_model(root: Path, data_dir: Path) -> tuple[dict, str]:
    folder = root / "weights"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"not a model")
    return (
        {"models": [{"name": "a", "path": str(folder)}, {"name": "b", "path": str(folder)}]},
        f"models[0] (a).path: {folder} is not a model folder (no config.json in it)",
    )


# (case, config changes -> (overrides, message)); the cases and messages of docs/bad-inputs.md's table.
CASES = {
    "envelope file with a YAML syntax error": lambda root, data: (
        {"envelope": str(_write(root / "envelope.yaml", "axes: [T1,\n"))},
        f"{root / 'envelope.yaml'}, line 2, column 1: YAML syntax error: did not find expected node content",
    ),
    "value of the wrong type": lambda root, data: (
        {"benchmarks": {"xstest": {"n_items": "ten"}}},
        "benchmarks.xstest.n_items: expected integer, got str 'ten'",
    ),
    "unknown key": lambda root, data: ({"colour": "blue"}, "(top level): unknown key(s) 'colour'"),
    "misspelt key inside a section": lambda root, data: (
        {"backend": {"batchsize": 4}},
        "backend: unknown key(s) 'batchsize'",
    ),
    "empty axis": lambda root, data: (
        {"envelope": _without_shots()},
        "envelope.axes.shots: needs at least 1 entry, got 0",
    ),
    "duplicate model names": lambda root, data: (
        {"models": "duplicate"},
        "models[1] (tiny-0).name: duplicate model name 'tiny-0'",
    ),
    "fewer than two models": lambda root, data: ({"models": "one"}, "models: needs at least 2 entries, got 1"),
    "model name with spaces, quotes or shell metacharacters": lambda root, data: (
        {"models": "metachar-name"},
        "models[0].name: 'a b;$(rm -rf x)' may use only letters, digits and . _ + -, starting with a letter or digit "
        "(it names files and jobs)",
    ),
    "data path missing": lambda root, data: (
        {"data_dir": str(root / "nowhere")},
        f"data_dir: {root / 'nowhere'} does not exist (set data_dir or SAFETYREPRO_DATA_DIR; "
        f"`safetyrepro fetch-data --data-dir {root / 'nowhere'}` downloads the pinned files)",
    ),
    "data path empty": lambda root, data: (
        {"data_dir": str(_mkdir(root / "empty"))},
        f"data_dir: {root / 'empty'} is empty (`safetyrepro fetch-data --data-dir {root / 'empty'}` downloads the "
        "pinned files)",
    ),
    "a benchmark's folder missing": lambda root, data: (
        {"data_dir": str(copy_benchmark(data, root / "data", "bbq"))},
        f"benchmarks.xstest: no data in {root / 'data' / 'xstest'} (`safetyrepro fetch-data --data-dir "
        f"{root / 'data'}` downloads the pinned files)",
    ),
    "data file with a missing column": _csv_without_column,
    "data file with an empty value": _csv_with_empty_value,
    "data file with a malformed row": _jsonl_with_broken_line,
    "model path that does not exist": lambda root, data: (
        {"models": [{"name": "a", "path": str(root / "no-such-model")}, {"name": "b", "path": "org/b"}]},
        f"models[0] (a).path: {root / 'no-such-model'} does not exist (and is not a hub id of the form org/name)",
    ),
    "model path that is not a model": _not_a_model,
    "item subset larger than the benchmark": lambda root, data: (
        {"benchmarks": {"xstest": {"n_items": 5000}}},
        "benchmarks.xstest.n_items: 5000 items + 5 few-shot pool requested, but the benchmark has only 450 items",
    ),
}


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


def _without_shots() -> dict:
    envelope = yaml.safe_load((REPO / "config" / "envelope.yaml").read_text())
    envelope["axes"]["shots"] = {}
    return envelope


def _models(option, models: list[dict]) -> list[dict]:
    if option == "duplicate":
        return [models[0], models[0]]
    if option == "one":
        return models[:1]
    if option == "metachar-name":
        return [{**models[0], "name": "a b;$(rm -rf x)"}, models[1]]
    return option


def workflow_error(workdir: Path) -> str:
    """The line the Snakefile stops a run in `workdir` with (its checks in workflow/rules/common.smk: check_inputs; then
    onstart's preflight), called as Snakemake calls them; "" when they pass."""
    with contextlib.chdir(workdir):
        try:
            settings = load_run_settings([str(workdir / "config.yaml")], {})
            check_inputs(settings)
        except (ConfigError, DataError) as error:
            return f"safetyrepro: error: {error}"
        try:
            preflight(settings)
        except ConfigError as error:
            return f"safetyrepro: error: {error}"
    return ""


def bad_input_run(case: str, root: Path, data_dir: Path, tiny_models: list[dict]) -> tuple[Path, str]:
    """The case's config written to `root`/run (tests/configs/bad_inputs.yaml with the case's changes), and the
    message the page gives for it."""
    overrides, message = CASES[case](root, data_dir)
    models = _models(overrides.pop("models", tiny_models), tiny_models)
    config = write_config(root / "run", overrides.pop("data_dir", data_dir), models, base="bad_inputs.yaml")
    with_changes(config, config, **overrides)
    return config.parent, message


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_gets_one_message_and_writes_nothing(case, tmp_path, data_dir, tiny_models, capsys):
    workdir, message = bad_input_run(case, tmp_path, data_dir, tiny_models)
    assert workflow_error(workdir) == f"safetyrepro: error: {message}"
    capsys.readouterr()
    with contextlib.chdir(workdir):
        status = cli.main(["check", "--configfile", str(workdir / "config.yaml")])
    assert status == 2 and capsys.readouterr().err.strip() == f"safetyrepro: error: {message}"
    assert not (workdir / "results").exists()
    assert page_pattern(page_message(case)).fullmatch(message), (page_message(case), message)


# one case stopped by workflow/rules/common.smk, one by the Snakefile's onstart (preflight)
@pytest.mark.e2e
@pytest.mark.parametrize("case", ["data file with a malformed row", "model path that does not exist"])
def test_snakemake_stops_with_the_same_message(case, tmp_path, data_dir, tiny_models):
    workdir, message = bad_input_run(case, tmp_path, data_dir, tiny_models)
    result = snakemake(workdir, "--cores", "1")
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == f"safetyrepro: error: {message}", result.stderr[-2000:]
    assert not (workdir / "results").exists()
    checked = subprocess.run(
        [str(SAFETYREPRO), "check", "--configfile", str(workdir / "config.yaml")],
        capture_output=True,
        text=True,
        cwd=workdir,
    )
    assert checked.returncode == 2 and checked.stderr.strip() == f"safetyrepro: error: {message}"


def test_the_page_lists_exactly_the_tested_inputs():
    assert set(page_table()) == set(CASES) | {"config file with a YAML syntax error"}
    assert page_pattern("<file>, line N: malformed JSON (...)").fullmatch("/d/a.jsonl, line 3: malformed JSON (x)")
    assert not page_pattern("<file>: missing column(s) type").fullmatch("/d/a.csv: missing column(s) label")


def test_config_file_with_a_yaml_syntax_error(tmp_path):
    """Snakemake reads --configfile itself and gives its own message; `safetyrepro check` (and `make run`,
    which checks first) name the line and column."""
    config = _write(tmp_path / "config.yaml", "data_dir: /data\nmodels: [a,\nbenchmarks: {}\n")
    result = snakemake(tmp_path, "--cores", "1")
    assert result.returncode != 0 and "Config file is not valid JSON or YAML" in result.stderr
    assert not (tmp_path / "results").exists()
    checked = subprocess.run([str(SAFETYREPRO), "check", "--configfile", str(config)], capture_output=True, text=True)
    assert checked.returncode == 2
    assert checked.stderr.strip() == (
        f"safetyrepro: error: {config}, line 4, column 1: YAML syntax error: did not find expected ',' or ']'"
    )
    cell = page_table()["config file with a YAML syntax error"]
    assert "`Config file is not valid JSON or YAML...`" in cell
    shown = re.findall(r"`([^`]*)`", cell)[-1]  # what `make run` and `safetyrepro check` print first
    assert page_pattern(shown).fullmatch(checked.stderr.strip().removeprefix("safetyrepro: error: "))


@pytest.mark.e2e
def test_model_path_with_shell_metacharacters_reaches_no_shell(tmp_path, data_dir):
    """A model folder whose name has spaces, quotes, `$( )` and `;` plans and passes the checks: the path is
    never put on a command line (cells get the model's name), and nothing in it is executed."""
    folder = build_tiny_model(tmp_path / "models" / 'it\'s a "model" $(touch PWNED); `touch PWNED2`', seed=0)
    models = [{"name": "a", "path": str(folder)}, {"name": "b", "path": str(folder)}]
    workdir = tmp_path / "run"
    write_config(workdir, data_dir, models, base="model_path_metacharacters.yaml")
    result = snakemake(workdir, "--cores", "1", "--until", "describe_model")
    assert result.returncode == 0, result.stderr[-2000:]
    described = [yaml.safe_load((workdir / "results" / "models" / f"{m}.json").read_text()) for m in "ab"]
    assert all(d["path"] == str(folder) for d in described)
    assert not list(tmp_path.rglob("PWNED*"))
