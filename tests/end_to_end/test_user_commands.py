"""The commands of the README, docs/quick-start.md and docs/configuration.md, run as a user runs them: from
the root of a copy of this working tree, with ../shared/data beside it, for every shipped config."""

from __future__ import annotations

import re

import pytest
import yaml
from helpers.user_clone import VENV_BIN, run

pytestmark = pytest.mark.e2e

# (config file or None for the default, cells, generation runs, token budgets line, device, extra jobs,
# the precision probe's line: its own cells come on top of the grid's)
SHIPPED = {
    "config/paper.yaml": (
        612,
        1764,
        "32 for 324 cells, 256 for 108 cells (no cap)",
        "cuda",
        {},
        "3 models paired with their bf16 twin on 4 configs; 54 cells of its own (outside the headline tables)",
    ),
    None: (
        135,
        201,
        "12 for 60 cells (capped at 12 by max_new_tokens_cap)",
        "cpu",
        {},
        "2 models paired with their nf4 twin on 4 configs; 0 cells of its own (outside the headline tables)",
    ),
    "config/extended.yaml": (
        48,
        48,
        "12 for 16 cells (capped at 12 by max_new_tokens_cap)",
        "cpu",
        {},
        "1 model paired with their nf4 twin on 2 configs; 0 cells of its own (outside the headline tables)",
    ),
    "config/case_study.yaml": (
        135,
        201,
        "12 for 60 cells (capped at 12 by max_new_tokens_cap)",
        "cpu",
        {"case_study": 1},
        "2 models paired with their nf4 twin on 4 configs; 0 cells of its own (outside the headline tables)",
    ),
}


def planned_jobs(stdout: str) -> dict[str, int]:
    """The job table of a dry run: rule -> count."""
    table = stdout.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}


def plan_lines(output: str) -> list[str]:
    return [
        line.removeprefix("safetyrepro: ")
        for line in output.splitlines()
        if re.match(
            r"(safetyrepro: )?(config|grid|configs per benchmark|max new tokens[^:]*|backend|batch conditions|data|"
            r"precision probe):",
            line,
        )
    ]


@pytest.mark.parametrize("configfile", list(SHIPPED), ids=lambda c: c or "default")
def test_dry_run_plans_exactly_what_the_config_says(clone, configfile):
    cells, generation_runs, budgets, device, extra, probe = SHIPPED[configfile]
    args = ["--configfile", configfile] if configfile else []
    dry = run(clone, "snakemake", "-n", *args)
    assert dry.returncode == 0, dry.stderr[-3000:]
    jobs = planned_jobs(dry.stdout)
    probe_cells = int(re.search(r"; (\d+) cells of its own", probe).group(1))
    relabelled = re.search(r"; (\d+) cells relabel their twin's responses", dry.stderr)
    assert jobs.get("rescore_cell", 0) == (int(relabelled[1]) if relabelled else 0)
    if configfile in (None, "config/case_study.yaml"):  # XSTest's 5 free-form configs x 3 models, x 2 other scorers
        assert jobs["rescore_cell"] == 30
    assert jobs["cell"] + jobs.get("rescore_cell", 0) == cells and jobs.get("probe_cell", 0) == probe_cells
    for rule, count in extra.items():
        assert jobs[rule] == count
    assert "case_study" in jobs if "case_study" in extra else "case_study" not in jobs
    lines = plan_lines(dry.stderr)
    assert f"= {cells} cells" in lines[1] and f"{generation_runs} generation runs" in lines[1]
    assert lines[3] == f"max new tokens (free-form cells): {budgets}"
    assert f"device {device}," in lines[4]
    assert lines[-1] == f"precision probe: {probe}"
    if configfile == "config/paper.yaml":  # the probe's cells: 3 models at bf16 x the conservative core's 18
        probe_jobs = re.findall(r"output: results/precision_probe/([^/]+@bf16)/(\w+)/([^/]+)\.parquet", dry.stdout)
        core = yaml.safe_load((clone / configfile).read_text())["analysis"]["conservative_core"]
        assert len(set(probe_jobs)) == 54 and {config for *_, config in probe_jobs} == set(core)
    if configfile == "config/extended.yaml":  # its batch axis: size 1 on the configs at batch=single
        assert lines[5] == "batch conditions: HF batch size 16 for 36 cells; HF batch size 1 for 12 cells"
    layers = lines[0]
    if configfile in ("config/case_study.yaml", "config/extended.yaml"):
        assert layers == (f"config: config/config.yaml (complete config); {configfile} (overlay on config/config.yaml)")
    else:
        assert layers == f"config: {configfile or 'config/config.yaml'} (complete config)"

    # `safetyrepro check` prints the same plan, and `make plan CONFIG=...` plans the same jobs
    check = run(clone, "safetyrepro", "check", "--plan", *args)
    assert check.returncode == 0, check.stderr
    assert plan_lines(check.stdout) == lines
    make = run(
        clone,
        "make",
        "plan",
        f"VENV={VENV_BIN.parent}",
        "-o",
        f"{VENV_BIN.parent}/.installed-run",
        *([f"CONFIG={configfile}"] if configfile else []),
    )
    assert make.returncode == 0, make.stderr[-3000:]
    assert planned_jobs(make.stdout) == jobs and plan_lines(make.stderr) == lines
    # and `make run` hands Snakemake the same config (nothing else)
    dry_make = run(
        clone, "make", "-n", "run", f"VENV={VENV_BIN.parent}", *([f"CONFIG={configfile}"] if configfile else [])
    )
    snakemake_line = next(line for line in dry_make.stdout.splitlines() if "bin/snakemake" in line)
    assert re.findall(r"--configfile (\S+)", snakemake_line) == ([configfile] if configfile else [])


def test_the_jobs_read_the_effective_config(clone):
    """The config file each job is handed (named in its environment) is the checked, defaulted one."""
    from safetyrepro.configuration.build import load_settings

    assert run(clone, "snakemake", "-n", "--configfile", "config/paper.yaml").returncode == 0
    written = sorted((clone / ".snakemake" / "safetyrepro").glob("run-config-*.yaml"))
    paper = [path for path in written if "qwen2.5-7b-instruct" in path.read_text()]
    assert len(paper) == 1
    settings = load_settings(paper[0])
    assert len(settings.cells()) == 612 and settings.envelope.token_cap is None
    assert settings.backend.device == "cuda" and settings.select_configs is None
    assert {settings.envelope.decoding(c).max_new_tokens for _, _, c in settings.cells() if c.template == "T4"} == {256}


def test_two_config_files_are_refused_with_the_way_to_layer(clone):
    result = run(clone, "snakemake", "-n", "--configfile", "config/config.yaml", "config/paper.yaml")
    assert result.returncode != 0
    assert "safetyrepro: error: give one config file, not 2" in result.stderr


def test_a_model_name_with_a_plus_plans_its_cells(clone):
    """`+` is allowed in model names; the wildcard pattern escapes it."""
    dry = run(clone, "snakemake", "-n", "--configfile", "tests/configs/model_names_with_plus.yaml")
    assert dry.returncode == 0, dry.stderr[-2000:]
    # 70 grid cells, and 18 of the precision probe (rule probe_cell): both entries are one set of weights, so they share
    # one nf4 twin (named after the first), run on the 4 conservative-core configs (2 on CrowS-Pairs)
    assert planned_jobs(dry.stdout)["cell"] == 70 and planned_jobs(dry.stdout)["probe_cell"] == 18
    assert "precision probe: 2 models paired with their nf4 twin on 4 configs; 18 cells of its own" in dry.stderr
    assert "results/precision_probe/gemma+fp32@nf4/crows_pairs/T1-greedy-0shot-logprob.json" in dry.stdout
