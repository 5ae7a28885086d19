"""Free-form generation throughput of the HF backend: batched against one prompt at a time.

    python scripts/bench_generation.py [--items 32] [--batch-size 16] [--precision fp32]

Both runs use the same real prompts (TruthfulQA, template T1, 0-shot), the embedded gemma-3-270m,
greedy decoding and the same token budget, one after the other in one process; prints items/s of
each and their ratio, and checks that both produced the same completions.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from safetyrepro.backends import load_backend
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.settings import item_set
from safetyrepro.core.model_spec import ModelSpec
from safetyrepro.running.embedded_model import build_embedded_model
from safetyrepro.running.prompts import render_prompt

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "nf4"])
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    args = parser.parse_args()
    model = build_embedded_model(REPO / "resources" / "models" / "gemma-3-270m")
    settings = load_settings(
        {
            "data_dir": args.data_dir,
            "models": [{"name": "a", "path": str(model)}, {"name": "b", "path": str(model)}],
            "benchmarks": {"truthfulqa": {"n_items": args.items}},
            "envelope": str(REPO / "config" / "envelope.yaml"),
        }
    )
    config = settings.config("truthfulqa", "T1-greedy-0shot-freeform")
    data = item_set(settings, "truthfulqa")
    prompts = [render_prompt(settings.envelope, config, data.benchmark, item, []) for item in data.items]
    decoding = settings.envelope.decoding(config)
    decoding = type(decoding)(decoding.temperature, decoding.top_p, args.max_new_tokens)
    results = {}
    for label, batch_size in (("batched", args.batch_size), ("one at a time", 1)):
        backend = load_backend("hf", ModelSpec("gemma", str(model), args.precision), batch_size=batch_size)
        started = time.perf_counter()
        results[label] = (backend.generate(prompts, decoding, seed=0), time.perf_counter() - started)
        print(
            f"{label:14s} {len(prompts) / results[label][1]:6.2f} items/s ({results[label][1]:.1f} s, "
            f"batch size {batch_size})"
        )
    (batched, t_batched), (single, t_single) = results["batched"], results["one at a time"]
    same = sum(a == b for a, b in zip(batched, single))
    print(f"ratio batched / one at a time: {t_single / t_batched:.2f}x; identical completions: {same}/{len(prompts)}")


if __name__ == "__main__":
    main()
