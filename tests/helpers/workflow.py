"""Running the workflow in a test: Snakemake on a run's folder, a run's config written there, a dry run's
job table; the shared runs' targets and configs (tests/conftest.py) and the Slurm profiles' arguments."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import yaml

from helpers.session import BIN, REPO
from safetyrepro.configuration.loading import read_document, read_yaml, with_bases

TEST_CONFIGS = REPO / "tests" / "configs"  # the configs the tests run (tiny.yaml and overlays on it)
ENVELOPES = TEST_CONFIGS / "envelopes"  # the envelopes of some of them (overlays on config/envelope.yaml)
ENVELOPE = REPO / "config" / "envelope.yaml"  # the repository's envelope, the runs' unless they name another
REPORT_CONFIG = read_yaml(TEST_CONFIGS / "report.yaml")
SELECTED = REPORT_CONFIG["select_configs"]


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


def write_config(
    workdir: Path,
    data_dir: Path,
    models: list[dict] | None = None,
    *,
    base: str,
    envelope: Path = ENVELOPE,
    results_dir: Path | None = None,
    resources_dir: Path | None = None,
    judges: list[dict] | None = None,
    server_python: Path | None = None,
) -> Path:
    """The run's config in `workdir`: an overlay on `base` (a file of tests/configs, which holds what the run is)
    adding only what depends on the machine: the data folder, the envelope file, and where given the models and
    judges built for the test (else the base's own), folders and the model servers' Python in its temporary
    paths."""
    machine = {
        "data_dir": data_dir,
        "envelope": envelope,
        "results_dir": results_dir,
        "resources_dir": resources_dir,
        "models": models,
        "judges": judges,
        "backend": None if server_python is None else {"server_python": str(server_python)},
    }
    config = {"extends": str(TEST_CONFIGS / base)}
    config |= {
        key: str(value) if isinstance(value, Path) else value for key, value in machine.items() if value is not None
    }
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return workdir / "config.yaml"


def with_changes(config: Path, out: Path, **changes) -> Path:
    """A copy of a run's config at `out` (or the file itself changed in place) with top-level keys of its own
    replaced: the input a test changes on purpose (a bad value, the one setting changed between two runs). The
    keys of an overlay's base still merge under it."""
    out.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), **changes}, sort_keys=False))
    return out


def effective_config(path: Path) -> dict:
    """A run's config file with the files it extends merged under it (as the workflow reads it, before its
    defaults): what a test reads of a run's config, or changes and writes whole."""
    return with_bases(read_document(str(path)), str(path), str(path.parent))[0]


def planned_jobs(result: subprocess.CompletedProcess) -> dict[str, int]:
    """A dry run's job table without `all` (empty when nothing is to be done)."""
    if "Job stats:" not in result.stdout:
        return {}
    table = result.stdout.split("Job stats:", 1)[1].split("total", 1)[0]
    jobs = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}
    jobs.pop("all", None)
    return jobs


# what the reference run and the runs compared with it make: every table, the run record and the GRID card
# (targets go between options that take one value: --configfile and --resources take every word after them)
REFERENCE_TARGETS = ("results/summary.md", "results/grid_card.json", "results/grid_card.md")


# the report run's benchmarks and precision probe (tests/end_to_end/test_report.py)
BENCHMARKS, PROBE = REPORT_CONFIG["benchmarks"], REPORT_CONFIG["precision_probe"]


PROFILE_ARGS = (
    "--profile",
    str(REPO / "profiles" / "slurm"),
    "--workflow-profile",
    str(REPO / "profiles" / "slurm-local"),
)


SUBMITTED = re.compile(r"submitted with SLURM jobid (\d+) \(log: (\S+?)\)?\.?$", re.MULTILINE)


def served_run(workdir: Path, config: Path) -> tuple:
    """A finished run's cells table, its GRID card's text, and the host:port of its config's first model's endpoint
    (the served one, as the card names it)."""
    import pandas as pd

    results = workdir / "results"
    host = yaml.safe_load(config.read_text())["models"][0]["endpoint"]["url"].split("/")[2]
    return pd.read_parquet(results / "cells.parquet"), (results / "grid_card.md").read_text(), host
