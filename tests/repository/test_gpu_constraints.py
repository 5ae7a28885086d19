"""constraints-gpu.txt: its checker (scripts/gpu_constraints_check.py) on made-up reports; `make setup-gpu` installs
from it, and no later target installs the CPU pins over it. That the GPU install of docs/gpu.md resolves with it and
that it pins everything that install takes: tests/end_to_end/test_gpu_install.py (pip's resolver, the package index).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import pytest
from helpers.session import REPO, script_module

check = script_module("gpu_constraints_check")


def _report(*packages: tuple[str, str]) -> dict:
    return {"install": [{"metadata": {"name": name, "version": version}} for name, version in packages]}


def test_pin_files_parse_and_share_snakemake():
    gpu, cpu = check.read_pins(check.GPU_PINS), check.read_pins(check.CPU_PINS)
    assert gpu["vllm"][1] == "0.33.0" and gpu["vllm-bnb-plugin"][1] == "0.0.3" and gpu["torch"][1] == "2.14.0"
    assert gpu["snakemake"][1] == cpu["snakemake"][1]
    # shared packages differ only where the file's header says why (the resolver's reasons)
    differ = {key for key in gpu.keys() & cpu.keys() if gpu[key][1] != cpu[key][1]}
    assert differ <= set(check.CPU_PINS_DROPPED), differ - set(check.CPU_PINS_DROPPED)
    header = check.GPU_PINS.read_text()
    for key in differ:
        assert f"#   {cpu[key][0]} {gpu[key][1]} (constraints.txt: {cpu[key][1]})" in header, key


def test_read_pins_refuses_ranges_and_duplicates(tmp_path):
    ranged = tmp_path / "ranged.txt"
    ranged.write_text("# comment\nnumpy>=2\n")
    with pytest.raises(ValueError, match="ranged.txt:2"):
        check.read_pins(ranged)
    twice = tmp_path / "twice.txt"
    twice.write_text("Jinja2==3.1.6\njinja2==3.1.5\n")
    with pytest.raises(ValueError, match="pinned twice"):
        check.read_pins(twice)


def test_problems_finds_unpinned_wrong_version_and_snakemake_drift():
    gpu = {"snakemake": ("snakemake", "9.15.0"), "fsspec": ("fsspec", "2026.9.0")}
    cpu = {"snakemake": ("snakemake", "9.27.1")}
    report = _report(("safetyrepro", "0.1.0"), ("fsspec", "2026.6.0"), ("python_dateutil", "2.9.0.post0"))
    found = check.problems(report, gpu, cpu)
    assert any("fsspec is pinned at 2026.9.0" in line and "2026.6.0 is installed" in line for line in found)
    assert any(line.startswith("python_dateutil 2.9.0.post0 is installed but not pinned") for line in found)
    assert any("snakemake" in line and "9.15.0" in line and "9.27.1" in line for line in found)
    assert not any("safetyrepro" in line for line in found)  # the project itself is never pinned
    assert len(found) == 3
    good = {
        "snakemake": ("snakemake", "9.27.1"),
        "fsspec": ("fsspec", "2026.6.0"),
        "python-dateutil": ("python-dateutil", "2.9.0.post0"),
    }
    assert check.problems(report, good, cpu) == []


def test_after_make_setup_gpu_no_target_installs_the_cpu_pins(tmp_path):
    """docs/gpu.md: `make setup-gpu`, then `make plan CONFIG=config/paper.yaml`. The plan (and run, test-fast)
    installs nothing after the GPU install, also once constraints.txt changes (its transformers is one vLLM
    0.33 refuses), and installs from the GPU pins again when they change. .venv's Python and pip are
    stand-ins that log their calls."""
    for name in ("Makefile", "pyproject.toml", "constraints.txt", "constraints-gpu.txt"):
        shutil.copy2(REPO / name, tmp_path / name)
    venv_bin, calls = tmp_path / ".venv" / "bin", tmp_path / "calls.log"
    venv_bin.mkdir(parents=True)
    for name in ("python", "pip"):
        (venv_bin / name).write_text(f'#!/bin/sh\necho "{name} $*" >> "{calls}"\n')
        (venv_bin / name).chmod(0o755)

    def make(*args: str) -> str:
        done = subprocess.run(["make", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def pins_installed(output: str) -> set[str]:
        return {match for line in output.splitlines() if " install " in line for match in re.findall(r"-c (\S+)", line)}

    make("setup-gpu")
    assert pins_installed(calls.read_text()) == {"constraints-gpu.txt"}
    assert "pip install --quiet -c constraints-gpu.txt -e .[gpu,dev]" in calls.read_text()
    for target in ("plan", "run", "test-fast"):
        assert pins_installed(make("-n", target, "CONFIG=config/paper.yaml")) == set(), target
    later = time.time() + 10
    os.utime(tmp_path / "constraints.txt", (later, later))
    assert pins_installed(make("-n", "plan", "CONFIG=config/paper.yaml")) == set()
    os.utime(tmp_path / "constraints-gpu.txt", (later, later))
    assert pins_installed(make("-n", "plan", "CONFIG=config/paper.yaml")) == {"constraints-gpu.txt"}
