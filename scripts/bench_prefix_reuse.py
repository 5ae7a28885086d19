"""The HF backend's fast paths against the paths they replace, side by side in one process.

    python scripts/bench_prefix_reuse.py [--items 10] [--rounds 2] [--precision fp32] [--max-new-tokens 12]
        [--compare prefix-reuse|bf16-products]

The embedded gemma-3-270m is loaded twice, the same backend (batch 16) but for one thing:
`prefix_reuse` on and off (`--compare prefix-reuse`), or, at bf16 or NF4, its linear layers as
float32 products rounded to bf16 once against torch's own bf16 kernel (`--compare bf16-products`,
both with prefix reuse; safetyrepro.backends.cpu_bf16). Both run the same TruthfulQA cells, taking
turns for `--rounds` rounds so that machine load hits both alike: sampled free-form cells (five
seeds; 0 shots at both temperatures, 3 and 5 shots), 5-shot log-likelihood cells (option letters)
and a greedy 3-shot free-form cell. Prints each path's seconds, their ratio, the prompt tokens the
new path computed, and whether the outputs agree (text equal; log-likelihoods' largest difference).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from unittest import mock

from safetyrepro.backends import load_backend
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.settings import item_set
from safetyrepro.core.decoding import Decoding
from safetyrepro.core.model_spec import ModelSpec
from safetyrepro.running.embedded_model import build_embedded_model
from safetyrepro.running.prompts import render_prompt

REPO = Path(__file__).resolve().parents[1]
CELLS = [
    "T1-greedy-3shot-freeform",
    "T2-t0.3-0shot-freeform",
    "T3-t0.7-0shot-freeform",
    "T1-t0.3-3shot-freeform",
    "T1-t0.7-5shot-freeform",
    "T3-greedy-5shot-logprob",
    "T1-greedy-5shot-logprob",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "nf4"])
    parser.add_argument("--max-new-tokens", type=int, default=12, help="the default run's cap")
    parser.add_argument("--cells", default=",".join(CELLS))
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--compare", default="prefix-reuse", choices=["prefix-reuse", "bf16-products"])
    args = parser.parse_args()
    if args.compare == "bf16-products" and args.precision == "fp32":
        parser.error("--compare bf16-products needs --precision bf16 or nf4")
    model = build_embedded_model(REPO / "resources" / "models" / "gemma-3-270m")
    settings = load_settings(
        {
            "data_dir": args.data_dir,
            "models": [{"name": "a", "path": str(model)}, {"name": "b", "path": str(model)}],
            "benchmarks": {"truthfulqa": {"n_items": args.items}},
            "envelope": str(REPO / "config" / "envelope.yaml"),
        }
    )
    envelope, data = settings.envelope, item_set(settings, "truthfulqa")
    spec = ModelSpec("gemma", str(model), args.precision)
    if args.compare == "prefix-reuse":
        paths = {
            "reuse": load_backend("hf", spec, prefix_reuse=True),
            "no reuse": load_backend("hf", spec, prefix_reuse=False),
        }
    else:
        paths = {"float32 products": load_backend("hf", spec)}
        with mock.patch("safetyrepro.backends.hf.use_float32_products", return_value=0):
            paths["torch bf16"] = load_backend("hf", spec)
    new, old = paths
    print(f"{args.items} TruthfulQA items, {args.precision}, batch 16, {args.rounds} rounds, CPU: {new} vs {old}")
    for config_id in args.cells.split(","):
        config = settings.config("truthfulqa", config_id)
        shots = data.pool[: envelope.shot_count(config)]
        prompts = [render_prompt(envelope, config, data.benchmark, item, shots) for item in data.items]
        if config.scoring == "logprob":
            requests = [(p, text) for p, item in zip(prompts, data.items) for text in item.candidates.values()]

            def call(backend, requests=requests):
                return backend.loglikelihood(requests)

        else:
            base = envelope.decoding(config)
            decoding = Decoding(base.temperature, base.top_p, min(base.max_new_tokens, args.max_new_tokens))
            seeds, stop = envelope.seeds_for(config), envelope.stop_strings(config)

            def call(backend, prompts=prompts, decoding=decoding, seeds=seeds, stop=stop):
                return backend.generate_seeds(prompts, decoding, seeds, stop)

        seconds, outputs = dict.fromkeys(paths, 0.0), {}
        for _ in range(args.rounds):
            for name, backend in paths.items():
                started = time.perf_counter()
                outputs[name] = call(backend)
                seconds[name] += time.perf_counter() - started
        fast, reference = outputs[new], outputs[old]
        if config.scoring == "logprob":
            agreement = f"largest log-likelihood difference {max(abs(a - b) for a, b in zip(fast, reference)):.2e}"
        else:
            same = sum(a == b for seed in fast for a, b in zip(fast[seed], reference[seed]))
            agreement = f"same text {same}/{sum(len(texts) for texts in fast.values())}"
        tokens = paths[new].prefill
        print(
            f"{config_id:26s} {new} {seconds[new] / args.rounds:6.1f} s, {old} "
            f"{seconds[old] / args.rounds:6.1f} s: {seconds[old] / seconds[new]:.2f}x; "
            f"prompt tokens computed {tokens['computed']} of {tokens['requested']}; {agreement}"
        )


if __name__ == "__main__":
    main()
