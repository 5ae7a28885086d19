"""GPU smoke test: a reduced paper grid on one GPU through every backend path, in minutes.

    python scripts/gpu_smoke.py                 # the paper's three models (local HF cache), NF4
    python scripts/gpu_smoke.py --model qwen=/models/Qwen2.5-7B-Instruct --model mistral=...
    python scripts/gpu_smoke.py --dry-run       # write the config and plan the jobs only (works on CPU)

Runs 3 configs x 5 benchmarks (CrowS-Pairs: the logprob one) on 8 items per model: vLLM greedy,
vLLM sampled with five per-request seeds, and HF logprob at the models' precision (NF4 by
default). Prints the jobs' throughput (prompts/s and generated tokens/s from the model servers'
logs), the model-load count, and the rho_flip table.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PAPER_MODELS = {
    "qwen2.5-7b-instruct": "Qwen/Qwen2.5-7B-Instruct",
    "mistral-7b-instruct-v0.3": "mistralai/Mistral-7B-Instruct-v0.3",
    "yi-1.5-9b-chat": "01-ai/Yi-1.5-9B-Chat",
}
CONFIGS = ["T1-greedy-0shot-freeform", "T2-t0.7-0shot-freeform", "T1-greedy-0shot-logprob"]
THROUGHPUT = re.compile(r"generate \S+: (\d+) requests, ([\d.]+) tokens/s")


def smoke_config(models: dict[str, str], precision: str, results: Path, data_dir: str) -> dict:
    """The reduced paper config: given models, three configs, eight items per benchmark."""
    return {
        "data_dir": data_dir,
        "results_dir": str(results),
        "resources_dir": "resources",
        "models": [{"name": name, "path": path, "precision": precision} for name, path in models.items()],
        "backend": {
            "generate": "vllm",
            "loglikelihood": "hf",
            "device": "cuda",
            "batch_size": 16,
        },
        "subset": {"seed": 20240917, "fewshot_pool": 5},
        "benchmarks": {b: {"n_items": 8} for b in ("truthfulqa", "bbq", "crows_pairs", "toxigen", "xstest")},
        "envelope": str(REPO / "config" / "envelope.yaml"),
        "select_configs": CONFIGS,
        "analysis": {"shap": False},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--precision", default="nf4", choices=["fp32", "bf16", "nf4"])
    parser.add_argument("--results", default="results/gpu_smoke")
    parser.add_argument("--data-dir", default=os.environ.get("SAFETYREPRO_DATA_DIR", "../shared/data"))
    parser.add_argument("--dry-run", action="store_true", help="write the config and plan the jobs only")
    args = parser.parse_args()
    models = dict(m.split("=", 1) for m in args.model) if args.model else PAPER_MODELS
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    configfile = results / "smoke_config.yaml"
    configfile.write_text(yaml.safe_dump(smoke_config(models, args.precision, results, args.data_dir)))
    command = [
        str(Path(sys.executable).parent / "snakemake"),
        "--configfile",
        str(configfile),
        "--cores",
        "8",
        "--resources",
        "gpu=1",
        *(["-n"] if args.dry_run else []),
    ]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    started = time.perf_counter()
    status = subprocess.run(command, cwd=REPO, env=env).returncode
    print(f"snakemake exit status {status} after {time.perf_counter() - started:.1f} s")
    if args.dry_run or status:
        return status
    requests = tokens_per_s = 0.0
    for log in sorted((results / "logs" / "servers").glob("*.log")):
        for count, rate in THROUGHPUT.findall(log.read_text()):
            requests, tokens_per_s = requests + int(count), max(tokens_per_s, float(rate))
    loads = (results / "logs" / "model_loads.tsv").read_text().splitlines()
    cells = len(list((results / "cells").glob("*/*/*.json")))
    print(
        f"cells: {cells}; generation requests: {int(requests)}; prompts/s over the run: "
        f"{requests / (time.perf_counter() - started):.1f}; peak generated tokens/s: {tokens_per_s:.0f}"
    )
    print(f"model loads: {len(loads)} for {len(models)} models (each server loads vLLM and HF once)")
    for line in loads:
        print("  " + line)
    print((results / "rho_flip.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
