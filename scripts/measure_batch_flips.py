"""Label changes from batch condition alone: each item run at batch size 1 and batched, greedy.

    python scripts/measure_batch_flips.py [--items 30] [--batch-size 16] [--precision fp32 bf16 nf4]

The protocol of ../shared/paper/004 on the embedded gemma-3-270m: the same cells (template T1,
0-shot, greedy; free-form and log-likelihood) run twice through the pipeline's own cell runner, once
with every prompt alone in its forward pass and once in batches, nothing else changed. Prints, per
precision, benchmark and scoring path, how many item labels and how many correct/incorrect verdicts
differ, and the safety benchmarks pooled against the capability control (TruthfulQA). Writes the
table as CSV with --out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
import torch

from safetyrepro.backends import load_backend
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.settings import item_set
from safetyrepro.core.batching import BatchCondition
from safetyrepro.core.model_spec import ModelSpec
from safetyrepro.running.cell import run_cell
from safetyrepro.running.embedded_model import build_embedded_model

REPO = Path(__file__).resolve().parents[1]
CAPABILITY = "truthfulqa"
CONFIGS = ("T1-greedy-0shot-freeform", "T1-greedy-0shot-logprob")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16", "nf4"], choices=["fp32", "bf16", "nf4"])
    parser.add_argument("--max-new-tokens", type=int, default=12)
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = build_embedded_model(REPO / "resources" / "models" / "gemma-3-270m")
    settings = load_settings(
        {
            "data_dir": args.data_dir,
            "models": [{"name": "a", "path": str(model)}, {"name": "b", "path": str(model)}],
            "benchmarks": {
                name: {"n_items": args.items} for name in ("truthfulqa", "bbq", "crows_pairs", "toxigen", "xstest")
            },
            "envelope": str(REPO / "config" / "envelope.yaml"),
            "max_new_tokens_cap": args.max_new_tokens,
        }
    )
    rows = []
    for precision in args.precision:
        backend = load_backend(
            "hf", ModelSpec(precision, str(model), precision), batch_size=args.batch_size, device="cpu"
        )
        for benchmark in settings.benchmarks:
            data = item_set(settings, benchmark)
            for config in (c for c in settings.configs(benchmark) if c.config_id in CONFIGS):
                runs = [
                    run_cell(precision, backend, backend, data, settings.envelope, config, BatchCondition(size, False))[
                        0
                    ]
                    for size in (1, args.batch_size)
                ]
                alone, batched = (run.set_index("item_id") for run in runs)
                assert (alone["prompt"] == batched["prompt"]).all()  # only the batch differs
                rows.append(
                    {
                        "precision": precision,
                        "benchmark": benchmark,
                        "kind": "capability" if benchmark == CAPABILITY else "safety",
                        "scoring": config.scoring,
                        "n_items": len(alone),
                        "label_changes": int((alone["label"] != batched["label"]).sum()),
                        "verdict_changes": int((alone["correct"] != batched["correct"]).sum()),
                    }
                )
                print(rows[-1], flush=True)
        backend.close()
    table = pd.DataFrame(rows)
    pooled = table.groupby(["precision", "kind"])[["n_items", "label_changes", "verdict_changes"]].sum()
    pooled["label_change_rate"] = pooled["label_changes"] / pooled["n_items"]
    print(table.to_string(index=False))
    print(pooled.to_string())
    if args.out:
        table.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
