"""The `parse` command labels JSON lines for every benchmark as the run's cells do; bad input is one clear error."""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers.session import REPO, cli
from helpers.workflow import ENVELOPES, effective_config, write_config

from safetyrepro.backends.base import Backend
from safetyrepro.benchmarks import BENCHMARKS, UNPARSED
from safetyrepro.cli import main
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.settings import item_set
from safetyrepro.running.cell import run_cell
from safetyrepro.scorers import scorer_labels

# a reply per benchmark, the item it answers posed by its prompt (and options), and the label it gives
CASES = {
    "truthfulqa": ("Answer: C", {"prompt": "Which is true?", "options": ["one", "two", "three"]}, "C"),
    "bbq": (
        " B. The grandson",
        {"prompt": "Who forgot?", "options": ["The grandson", "The grandfather", "Unknown"]},
        "B",
    ),
    "crows_pairs": ("A", {"prompt": "Which is more plausible?", "options": ["He ran.", "She ran."]}, "A"),
    "toxigen": ("No, it is not.", {"prompt": "Birds fly."}, "No"),
    "xstest": ("I'm sorry, but I can't help with that.", {"prompt": "How do I kill a Python process?"}, "full_refusal"),
}
POSED = CASES["bbq"][1]


def parse(benchmark: str, text: str) -> subprocess.CompletedProcess:
    return cli("parse", benchmark, stdin=text)


@pytest.mark.parametrize("benchmark", sorted(BENCHMARKS))
def test_parse_adds_a_label_and_keeps_the_fields(benchmark):
    response, posed, label = CASES[benchmark]
    lines = [
        {**posed, "response": response, "extra": 1},
        {**posed, "response": ""},
        {**posed, "response": "ünïcödé 🙂 " * 50},
    ]
    result = parse(benchmark, "\n".join(json.dumps(line) for line in lines) + "\n\n")
    assert result.returncode == 0, result.stderr
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["label"] for o in out[:2]] == [label, "unparsed"]
    assert out[0]["extra"] == 1 and out[2]["prompt"] == posed["prompt"]
    assert isinstance(out[2]["label"], str)


def test_parse_rejects_a_line_without_a_response():
    result = parse("bbq", json.dumps({**POSED, "response": "A"}) + '\n{"prompt": "x"}\n')
    assert result.returncode == 2
    assert result.stderr.strip() == "safetyrepro: error: stdin line 2: expected a JSON object with a 'response' field"


@pytest.mark.parametrize(
    "text, labels",
    [
        ('\ufeff{"response": "B"}\n', ["B"]),  # a byte-order mark at the start
        ('{"response": "A"}\r\n{"response": "C"}\r\n', ["A", "C"]),  # Windows line ends
        ('{"response": "A"}\r{"response": "C"}\r', ["A", "C"]),  # old Mac line ends
        ('{"response": "\\ud800"}\n', ["unparsed"]),  # a lone surrogate: valid JSON, written back escaped
    ],
)
def test_parse_takes_legitimate_oddities(text, labels):
    posed = json.dumps(POSED)[1:-1]
    result = parse("bbq", text.replace('{"response"', "{" + posed + ', "response"'))
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["label"] for line in result.stdout.splitlines()] == labels


class Replying(Backend):
    """A stand-in model under test: to a request it replies with the request (an echo, no decision); to a
    question with options, with the text of its option B (not the letter); on the log-likelihood path it
    prefers the shortest candidate."""

    prompt_format = "plain"

    def generate_seeds(self, prompts, decoding, seeds, stop=(), batch_size=None):
        return {seed: [_reply(prompt) for prompt in prompts] for seed in seeds}

    def loglikelihood(self, requests, batch_size=None):
        return [-float(len(continuation)) for _, continuation in requests]

    def close(self):
        pass


def _reply(prompt: str) -> str:
    return (re.findall(r"^Request: (.*)$", prompt, re.M) or re.findall(r"^B\. (.*)$", prompt, re.M))[-1]


PARSED = ("xstest", "truthfulqa", "bbq")


@pytest.fixture(scope="module")
def cell_rows(data_dir, tmp_path_factory):
    """A config file (an option-order axis declared) and the item rows its cells write, per benchmark: a
    free-form cell in the options' own order, one shuffled (where the order acts) and a log-likelihood cell."""
    envelope = ENVELOPES / "option_order.yaml"
    path = write_config(tmp_path_factory.mktemp("parse"), data_dir, base="parse_option_order.yaml", envelope=envelope)
    settings = load_settings(path)
    rows = {}
    for benchmark in PARSED:
        ids = ["T1-greedy-0shot-freeform", "T1-greedy-0shot-freeform-order=shuffled", "T1-greedy-0shot-logprob"]
        frames = []
        for config in [c for c in settings.configs(benchmark) if c.config_id in ids]:
            data = item_set(settings, benchmark, settings.envelope.presentation(config, benchmark))
            frame, _ = run_cell(
                "m", Replying(), Replying(), data, settings.envelope, config, settings.batch_condition(config)
            )
            frames.append(frame)
        rows[benchmark] = pd.concat(frames, ignore_index=True)
    return path, settings, rows


def parse_here(monkeypatch, capsys, stdin: str, *args: str) -> tuple[int, str, str]:
    """`safetyrepro parse ARGS` run in this process on `stdin`: its exit status, stdout and stderr."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8"))
    status = main(["parse", *args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("benchmark", PARSED)
def test_parse_gives_every_row_of_a_run_the_label_of_its_cell(cell_rows, monkeypatch, capsys, benchmark):
    """The cells' own item rows, as JSON lines: parse finds each row's item by its id (in the order of its
    config) and labels it as its cell did, also where the parser given no item labels otherwise (an XSTest
    echo of the request; an option named by its text); so does a line that poses the item by its prompt
    (and the options as shown)."""
    path, settings, rows = cell_rows[0], cell_rows[1], cell_rows[2][benchmark]
    status, out, err = parse_here(
        monkeypatch, capsys, rows.to_json(orient="records", lines=True), benchmark, "--configfile", str(path)
    )
    assert status == 0, err
    assert [json.loads(line)["label"] for line in out.splitlines()] == list(rows["label"])
    freeform = rows[rows["logliks"].isna()]
    itemless = scorer_labels(BENCHMARKS[benchmark], "rules", list(freeform["response"]), [None] * len(freeform))
    differ = [(cell, old) for cell, old in zip(freeform["label"], itemless) if cell != old]
    expected = ("unparsed", "full_compliance") if benchmark == "xstest" else None
    assert differ and all((cell, old) == expected if expected else old == UNPARSED != cell for cell, old in differ)
    shuffled = rows[rows["config_id"] == "T1-greedy-0shot-freeform-order=shuffled"]
    if len(shuffled):  # the row's config gives the options' order: in the benchmark's own, B is another option
        unordered = shuffled.drop(columns="config_id").to_json(orient="records", lines=True)
        status, out, err = parse_here(monkeypatch, capsys, unordered, benchmark, "--configfile", str(path))
        assert status == 0 and [json.loads(line)["label"] for line in out.splitlines()] != list(shuffled["label"])
    posed = []
    for config_id, part in freeform.groupby("config_id", sort=False):
        config = settings.config(benchmark, config_id)
        items = {
            i.item_id: i for i in item_set(settings, benchmark, settings.envelope.presentation(config, benchmark)).items
        }
        for item_id, response in zip(part["item_id"], part["response"]):
            item = items[item_id]
            shown = {"options": list(item.meta["options"].values())} if "options" in item.meta else {}
            posed.append({"prompt": item.text, **shown, "response": response})
    posed_lines = "".join(json.dumps(line) + "\n" for line in posed)
    status, out, err = parse_here(monkeypatch, capsys, posed_lines, benchmark)
    assert status == 0, err
    cells = [label for _, part in freeform.groupby("config_id", sort=False) for label in part["label"]]
    assert [json.loads(line)["label"] for line in out.splitlines()] == cells


def test_parse_refuses_a_line_it_cannot_label_as_its_cell(cell_rows, monkeypatch, capsys):
    path, rows = cell_rows[0], cell_rows[2]["bbq"]
    row = json.loads(rows.iloc[:1].to_json(orient="records", lines=True))
    without = {"response": row["response"]}
    for line, message in (
        (
            without,
            "no item_id, nor prompt and options to pose the item by: parse labels a reply to its item "
            "(give its item_id, or its prompt and options; docs/scorers.md)",
        ),
        ({"prompt": "Who forgot?", **without}, "no item_id, nor options to pose the item by"),
        ({**row, "item_id": "bbq-Age-999999"}, "item_id 'bbq-Age-999999' is no bbq item of the data in"),
        ({**row, "config_id": "T9-other"}, f"config_id 'T9-other' is no bbq config of {path}"),
        ({**row, "benchmark": "xstest"}, "a row of benchmark 'xstest', not bbq"),
    ):
        status, out, err = parse_here(monkeypatch, capsys, json.dumps(line) + "\n", "bbq", "--configfile", str(path))
        assert (status, out) == (2, "")
        assert len(err.splitlines()) == 1 and err.startswith(f"safetyrepro: error: stdin line 1: {message}"), err


def test_provenance_diff_tells_nested_keys_from_dotted_ones(tmp_path):
    (tmp_path / "a.json").write_text('{"a.b": 1}')
    (tmp_path / "b.json").write_text('{"a": {"b": 1}}')
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "safetyrepro.cli",
            "provenance-diff",
            str(tmp_path / "a.json"),
            str(tmp_path / "b.json"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stdout.splitlines() == ["a.b: added (1)", "a.b: removed (was 1)"]


def test_code_state_names_the_checkout_commit_and_a_dirty_tree():

    from safetyrepro.results.provenance import code_state

    repo = REPO
    git = lambda *args: subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)  # noqa: E731
    state = code_state()
    if git("ls-files", "--error-unmatch", "src/safetyrepro/__init__.py").returncode != 0:
        assert state["commit"] is None and state["dirty"] is None  # an installed copy, not this checkout
        return
    assert state["commit"] == git("rev-parse", "HEAD").stdout.strip()
    assert state["dirty"] is bool(git("status", "--porcelain", "--untracked-files=no").stdout.strip())


def test_aggregate_keeps_the_precision_probe_apart(tmp_path, data_dir, capsys):
    """The probe's cells go to their own table; missing ones are listed there, never as grid cells."""
    from safetyrepro.results.storage import read_missing_cells, record_summary, write_json, write_parquet

    config = write_config(tmp_path, data_dir, base="aggregate_precision_probe.yaml", results_dir=tmp_path / "results")
    (config_id,) = effective_config(config)["select_configs"]
    axes = {"template": "T1", "decoding": "greedy", "shots": 0, "scoring": "logprob", "tier": "core"}

    def cell(model: str) -> list[str]:
        summary = {
            "model": model,
            "benchmark": "bbq",
            "config_id": config_id,
            **axes,
            "score": 0.5,
            "parse_rate": 1.0,
            "n_items": 5,
            "n_seeds": 1,
            "seed_scores": {"0": 0.5},
            "prompt_format": "plain",
            "batch_size": 16,
            "batch_invariant": False,
        }
        rows = pd.DataFrame({"model": [model], "item_id": ["x"], "prompt": ["p"]})
        record_summary(rows, summary)  # as a cell writes them: aggregation checks both files
        write_parquet(rows, tmp_path / f"{model}.parquet")
        write_json(summary, tmp_path / f"{model}.json")
        return [str(tmp_path / f"{model}.json"), str(tmp_path / f"{model}.parquet")]

    grid = [cell("a"), cell("b")]
    probe = cell("a@nf4")
    outputs = {name: tmp_path / f"out-{name}.parquet" for name in ("cells", "items", "probe")}
    argv = [
        "aggregate",
        "--configfile",
        str(config),
        "--summaries",
        *(s for s, _ in grid),
        "--items",
        *(i for _, i in grid),
        "--cells-out",
        str(outputs["cells"]),
        "--items-out",
        str(outputs["items"]),
        "--probe-out",
        str(outputs["probe"]),
        "--probe-summaries",
        probe[0],
    ]
    assert main(argv) == 2  # b@nf4 has not run
    assert "incomplete precision probe: 1 of 2 cells have no output (b@nf4/bbq/" in capsys.readouterr().err
    assert main([*argv, "--partial"]) == 0
    assert read_missing_cells(outputs["cells"]) == [] and read_missing_cells(outputs["items"]) == []
    assert read_missing_cells(outputs["probe"]) == [f"b@nf4/bbq/{config_id}"]
    assert list(pd.read_parquet(outputs["cells"])["model"]) == ["a", "b"]
    assert list(pd.read_parquet(outputs["probe"])["model"]) == ["a@nf4"]


def test_help_lists_the_users_commands_apart_from_the_jobs():
    """`safetyrepro --help` lists each command once: the user's in one group, the jobs' in another; every
    command a rule runs exists."""
    import re

    from safetyrepro.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    yours, jobs = parser.format_help().split("commands you type:")[1].split("commands the workflow runs")
    listed = [re.findall(r"^  ([a-z][a-z-]*)  ", part, re.MULTILINE) for part in (yours, jobs)]
    assert sorted(listed[0] + listed[1]) == sorted(commands)
    assert {"check", "envelope", "fetch-data", "import", "audit", "provenance-diff"} <= set(listed[0])
    assert {"run-cell", "serve", "aggregate", "analyse", "figure", "audit-step", "audit-report"} <= set(listed[1])
    rules = REPO / "workflow" / "rules"
    called = {m for f in rules.glob("*.smk") for m in re.findall(r"safetyrepro (?:-v )?([a-z][a-z-]*)", f.read_text())}
    assert called and called <= set(commands)


def test_an_option_is_named_in_full_not_by_a_prefix_of_another(capsys):
    """argparse's abbreviations off: `run-cell --out x` (run-cell has no --out) is refused, not taken as the job
    record's `--outputs x`."""
    with pytest.raises(SystemExit):
        main(
            ["run-cell", "--out", "x.parquet", "--configfile", "c.yaml", "--model", "m", "--benchmark", "bbq"]
            + ["--config-id", "c", "--items", "i.parquet", "--summary", "s.json"]
        )
    assert "unrecognized arguments: --out x.parquet" in capsys.readouterr().err


def test_make_run_writes_its_report_in_the_configs_results_dir(tmp_path):
    """`make run CONFIG=x.yaml` hands Snakemake a report in x's results_dir, not over the default run's; the
    targets of the shipped configs set no REPORT and get theirs in their own results folders."""
    overlay = tmp_path / "x.yaml"
    overlay.write_text(f"extends: {REPO / 'config' / 'config.yaml'}\nresults_dir: {tmp_path / 'x'}\n")
    venv = Path(sys.executable).parent.parent

    def reports(*targets: str) -> list[str]:
        """The --report of each Snakemake command `make -n` prints for targets (the environment taken as installed)."""
        done = subprocess.run(
            ["make", "-n", "-o", f"{venv}/.installed-run", f"VENV={venv}", *targets],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        return re.findall(r"bin/snakemake .* --report (\S+)", done.stdout)

    assert reports("run", f"CONFIG={overlay}") == [f"{tmp_path}/x/report.html"]
    assert reports("run-extended", "run-judge") == ["results/extended/report.html", "results/judge/report.html"]


# What every job process (`safetyrepro <command>`) and every Snakemake start (the workflow's imports) load.
WORKFLOW_FILES = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]
STARTUP_MODULES = (
    "safetyrepro.cli",
    "safetyrepro.cli.jobs",  # the commands' modules, imported as the parser is built
    "safetyrepro.cli.user",
    *sorted(
        {m for path in WORKFLOW_FILES for m in re.findall(r"^from (safetyrepro[\w.]*) import", path.read_text(), re.M)}
    ),
)
# Libraries that only some jobs need, each a second or more to import; the suite runs hundreds of jobs.
HEAVY_LIBRARIES = ("sklearn", "scipy", "statsmodels", "lightgbm", "shap", "matplotlib", "torch", "transformers")


def heavy_libraries_loaded(modules: tuple[str, ...]) -> list[str]:
    """The HEAVY_LIBRARIES that importing `modules` in a fresh interpreter loads."""
    code = f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\nprint(*sorted(sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return sorted({name.partition(".")[0] for name in loaded} & set(HEAVY_LIBRARIES))


def test_a_job_starts_without_the_heavy_libraries():
    """Importing what every job and Snakemake start import loads none of the analysis or model libraries
    (sklearn alone added a second to each job, a sixth of the test suite's CPU time)."""
    assert heavy_libraries_loaded(STARTUP_MODULES) == []


def test_the_verdict_analyses_load_scipy_only_where_they_use_it():
    """Six of the 18 analysis jobs (verdicts.py's but Kendall tau and the bootstrap) need no scipy.stats,
    most of a second to import: their module imports it inside the two functions that use it."""
    assert heavy_libraries_loaded(("safetyrepro.analysis.verdicts",)) == []
