"""Check (or regenerate) constraints-gpu.txt, the pins of the GPU install (docs/gpu.md), with pip's resolver.

The check runs that install as a dry run from the repository root,

    python -m pip install --dry-run --ignore-installed --quiet --report REPORT -c constraints-gpu.txt -e ".[gpu,dev]"

and requires that it resolves, that every package it would install is pinned in constraints-gpu.txt
at exactly that version, and that snakemake is pinned as in constraints.txt (the CPU pins).
tests/end_to_end/test_gpu_install.py runs it. It needs the package index (PyPI), Python 3.11 on Linux x86_64.

--regenerate rewrites constraints-gpu.txt from pip's report for a seed of pins: constraints.txt's,
less the ones vLLM 0.33.0 cannot share (CPU_PINS_DROPPED), plus vLLM's own pins and the current
file's pins of the packages constraints.txt does not have (drop a line to let pip choose again).

Usage:
    python scripts/gpu_constraints_check.py               # check; exit status 1 on a problem
    python scripts/gpu_constraints_check.py --regenerate  # rewrite constraints-gpu.txt, then check
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GPU_PINS = REPO / "constraints-gpu.txt"
CPU_PINS = REPO / "constraints.txt"
INSTALL_TARGET = ".[gpu,dev]"
PROJECT = "safetyrepro"  # installed editable from the working tree, never pinned
# What the GPU install adds to the seed: vLLM with the NF4 plugin, and the torch vLLM 0.33.0 is built for.
GPU_SEED = {"vllm": "0.33.0", "vllm-bnb-plugin": "0.0.3", "torch": "2.14.0"}
# constraints.txt pins that the GPU install cannot share on Python 3.11, and why (pip's conflict reports).
CPU_PINS_DROPPED = {
    "torch": "vllm 0.33.0 depends on torch==2.14.0",
    "transformers": "vllm 0.33.0 depends on transformers<5.21.0",
    "numba": "vllm 0.33.0 depends on numba==0.65.0",
    "llvmlite": "numba 0.65.0 depends on llvmlite 0.47.*",
    "fastapi": "vllm 0.33.0 depends on fastapi[standard]<0.137.0",
    "numpy": "mistral-common (vLLM: >=1.11.6, each release since) depends on numpy<2.4 on Python <= 3.12",
    "snakemake-executor-plugin-slurm": "numpy < 2.4, and its 2.7.0 and 2.8.0 depend on numpy>=2.4.5",
    "pandas": "snakemake-executor-plugin-slurm 2.6.1 depends on pandas<3",
}
HEADER = """\
# GPU lock (vLLM extra), resolved by pip for Python 3.11 on linux x86_64 (vLLM 0.33.0 needs Python 3.11 to
# 3.14; on 3.12+ it also needs setuptools<81, so re-resolve there):
#   pip install -c constraints-gpu.txt -e ".[gpu,dev]"
# Every package that install takes, pinned from pip's own resolution (`pip install --dry-run --ignore-installed
# --report` for constraints.txt's pins, vllm==0.33.0, vllm-bnb-plugin==0.0.3, torch==2.14.0 and this file's
# earlier GPU-only pins): `python scripts/gpu_constraints_check.py --regenerate` (pip {pip}). CI checks the dry
# run and that every installed package is pinned here (tests/end_to_end/test_gpu_install.py). Same versions as
# constraints.txt (CPU) except where vLLM 0.33.0 on Python 3.11 does not allow them:
{dropped}
"""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path) -> dict[str, tuple[str, str]]:
    """canonical name -> (name as written, version) for every `name==version` line; other lines are refused."""
    pins: dict[str, tuple[str, str]] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        if match is None:
            raise ValueError(f"{path.name}:{number}: not a `name==version` pin: {raw!r}")
        name, version = match.groups()
        if canonical(name) in pins:
            raise ValueError(f"{path.name}:{number}: {name} is pinned twice")
        pins[canonical(name)] = (name, version)
    return pins


def dry_run(
    constraints: Path, report: Path, python: str = sys.executable, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """The GPU install (docs/gpu.md) as a pip dry run from the repository root, its report written to `report`.

    Exact pins resolve in about a minute; conflicting ones can send pip backtracking for far longer
    (the timeout raises subprocess.TimeoutExpired)."""
    command = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
    command += ["--report", str(report), "-c", str(constraints), "-e", INSTALL_TARGET]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def installed(report: dict) -> dict[str, tuple[str, str]]:
    """canonical name -> (name, version) of what the report's install list holds, the project itself left out."""
    found = {
        canonical(item["metadata"]["name"]): (item["metadata"]["name"], item["metadata"]["version"])
        for item in report["install"]
    }
    found.pop(PROJECT, None)
    return found


def problems(report: dict, gpu_pins: dict[str, tuple[str, str]], cpu_pins: dict[str, tuple[str, str]]) -> list[str]:
    """What is wrong with the GPU pins against a dry run's report and the CPU pins (empty: nothing)."""
    found = []
    for key, (name, version) in sorted(installed(report).items()):
        if key not in gpu_pins:
            found.append(f"{name} {version} is installed but not pinned in {GPU_PINS.name}")
        elif gpu_pins[key][1] != version:
            found.append(f"{name} is pinned at {gpu_pins[key][1]} in {GPU_PINS.name} but {version} is installed")
    cpu, gpu = cpu_pins.get("snakemake"), gpu_pins.get("snakemake")
    if cpu is None or gpu is None or cpu[1] != gpu[1]:
        found.append(f"snakemake: {GPU_PINS.name} pins {gpu and gpu[1]}, {CPU_PINS.name} pins {cpu and cpu[1]}")
    return found


def check(python: str = sys.executable) -> list[str]:
    """Run the dry run for constraints-gpu.txt and return its problems (empty: the pins are complete and exact)."""
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "report.json"
        result = dry_run(GPU_PINS, report_path, python)
        if result.returncode != 0:
            return [f"the dry run exited {result.returncode}:\n{result.stdout}{result.stderr}"]
        report = json.loads(report_path.read_text())
    return problems(report, read_pins(GPU_PINS), read_pins(CPU_PINS))


def regenerate(python: str = sys.executable) -> None:
    """Rewrite constraints-gpu.txt from pip's resolution of the seed (see the module docstring)."""
    cpu_pins, old_gpu_pins = read_pins(CPU_PINS), read_pins(GPU_PINS)
    seed = {key: pin for key, pin in cpu_pins.items() if key not in CPU_PINS_DROPPED}
    seed.update({key: pin for key, pin in old_gpu_pins.items() if key not in cpu_pins})
    seed.update({key: (key, version) for key, version in GPU_SEED.items()})
    with tempfile.TemporaryDirectory() as tmp:
        seed_path, report_path = Path(tmp) / "seed.txt", Path(tmp) / "report.json"
        seed_path.write_text("".join(f"{name}=={version}\n" for name, version in seed.values()))
        result = dry_run(seed_path, report_path, python)
        if result.returncode != 0:
            raise SystemExit(f"pip could not resolve the seed:\n{result.stdout}{result.stderr}")
        report = json.loads(report_path.read_text())
    pins = installed(report)
    dropped = "\n".join(
        f"#   {cpu_pins[key][0]} {pins[key][1]} (constraints.txt: {cpu_pins[key][1]}): {why}"
        for key, why in CPU_PINS_DROPPED.items()
        if key in pins and pins[key][1] != cpu_pins[key][1]
    )
    header = HEADER.format(pip=report["pip_version"], dropped=dropped)
    body = "".join(f"{name}=={version}\n" for _, (name, version) in sorted(pins.items()))
    GPU_PINS.write_text(header + body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regenerate", action="store_true", help="rewrite constraints-gpu.txt first")
    args = parser.parse_args()
    start = time.monotonic()
    if args.regenerate:
        regenerate()
    found = check()
    for problem in found:
        print(problem, file=sys.stderr)
    print(f"{GPU_PINS.name}: {'FAILED' if found else 'ok'} ({time.monotonic() - start:.0f} s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
