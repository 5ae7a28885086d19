"""Running the workflow in a test: Snakemake on a run's folder, a run's config written there, a dry run's
job table; the shared runs' targets and configs (tests/conftest.py) and the Slurm profiles' arguments."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import yaml

from helpers.session import BIN, REPO

SELECTED = [
    "T1-greedy-0shot-freeform",
    "T2-t0.3-3shot-freeform",
    "T4-greedy-0shot-freeform",
    "T1-greedy-0shot-logprob",
    "T3-greedy-5shot-logprob",
]


def snakemake(workdir: Path, *args: str, configfile: Path | None = None, source: Path = REPO):
    """Snakemake on the workflow of `source` (a scratch copy: its package too) in `workdir`."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    if source != REPO:
        env["PYTHONPATH"] = str(source / "src")
    return subprocess.run(
        [
            str(BIN / "snakemake"),
            "--snakefile",
            str(source / "Snakefile"),
            "--directory",
            str(workdir),
            "--configfile",
            str(configfile or workdir / "config.yaml"),
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )


def write_config(workdir: Path, data_dir: Path, models: list[dict], benchmarks: dict, **extra) -> Path:
    config = {
        "data_dir": str(data_dir),
        "results_dir": "results",
        "resources_dir": "resources",
        "models": models,
        "benchmarks": benchmarks,
        "envelope": str(REPO / "config" / "envelope.yaml"),
        "subset": {"seed": 3, "fewshot_pool": 5},
        "backend": {"batch_size": 4, "device": "cpu", "threads": 1, "server_idle_seconds": 120},
        **extra,
    }
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return workdir / "config.yaml"


def planned_jobs(result: subprocess.CompletedProcess) -> dict[str, int]:
    """A dry run's job table without `all` (empty when nothing is to be done)."""
    if "Job stats:" not in result.stdout:
        return {}
    table = result.stdout.split("Job stats:", 1)[1].split("total", 1)[0]
    jobs = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}
    jobs.pop("all", None)
    return jobs


REFERENCE_CONFIGS = ["T1-greedy-0shot-freeform", "T2-t0.3-3shot-freeform", "T1-greedy-0shot-logprob"]


# what the reference run and the runs compared with it make: every table, the run record and the GRID card
# (targets go between options that take one value: --configfile and --resources take every word after them)
REFERENCE_TARGETS = ("results/summary.md", "results/grid_card.json", "results/grid_card.md")


BENCHMARKS = {"toxigen": {"n_items": 4}, "bbq": {"n_items": 4}}


# each tiny model once more at bf16, on one config: a twin of its own per model (6 cells)
PROBE = {"precision": "bf16", "configs": ["T1-greedy-0shot-logprob"]}


PROFILE_ARGS = (
    "--profile",
    str(REPO / "profiles" / "slurm"),
    "--workflow-profile",
    str(REPO / "profiles" / "slurm-local"),
)


SUBMITTED = re.compile(r"submitted with SLURM jobid (\d+) \(log: (\S+?)\)?\.?$", re.MULTILINE)
