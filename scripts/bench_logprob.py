"""Log-likelihood scoring speed: our HF backend against lm-eval's HF backend (HFLM).

    python scripts/bench_logprob.py [--items 24] [--rounds 2] [--batch-size 16] [--precision bf16] [--scoring full]
                                    [--config T3-greedy-5shot-logprob]

Both score the same requests with the same model (the embedded gemma-3-270m, CPU, one process):
`--scoring full` is the parity setup (TruthfulQA, our QA-primer template from
config/case_study.yaml, every option's full text as continuation, as lm-eval's truthfulqa_mc1
does); `--scoring letters` is the anchor config T1-greedy-0shot-logprob (one-token option letters), or the
logprob config `--config` names, few-shot examples included.
The two backends take turns for `--rounds` rounds, so machine load hits both alike; prints items/s
of each (total items / total seconds), their ratio, and how many items get the same argmax.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from safetyrepro.benchmarks import BENCHMARKS
from safetyrepro.case_study import case_items, drivers
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.loading import read_yaml
from safetyrepro.configuration.settings import item_set
from safetyrepro.core.model_spec import ModelSpec
from safetyrepro.running.embedded_model import build_embedded_model
from safetyrepro.running.prompts import render_prompt

REPO = Path(__file__).resolve().parents[1]


def requests_for(settings, items, scoring: str, config_id: str) -> tuple[list[tuple[str, str]], list[int]]:
    """The (context, continuation) requests of the items and each item's number of candidates."""
    if scoring == "full":
        study = settings.case_study
        template, delimiter = study.parity_template, study.target_delimiter
        pairs = [[(drivers.render_parity_prompt(template, i), delimiter + o) for o in i.options] for i in items]
    else:
        config = settings.config("truthfulqa", config_id)
        shots = item_set(settings, "truthfulqa").pool[: settings.envelope.shot_count(config)]
        pairs = [
            [
                (render_prompt(settings.envelope, config, BENCHMARKS["truthfulqa"], i.item, shots), text)
                for text in i.item.candidates.values()
            ]
            for i in items
        ]
    return [p for group in pairs for p in group], [len(group) for group in pairs]


def argmaxes(scores: list[float], sizes: list[int]) -> list[int]:
    """Per item, the index of its best candidate."""
    out, start = [], 0
    for size in sizes:
        chunk = scores[start : start + size]
        out.append(max(range(size), key=chunk.__getitem__))
        start += size
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    parser.add_argument("--scoring", default="full", choices=["full", "letters"])
    parser.add_argument("--config", help="with --scoring letters: a TruthfulQA logprob config (default the anchor)")
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    args = parser.parse_args()
    drivers.go_offline()
    model = build_embedded_model(REPO / "resources" / "models" / "gemma-3-270m")
    study = read_yaml(REPO / "config" / "case_study.yaml")["case_study"]  # its template and anchor config
    settings = load_settings(
        {
            "data_dir": args.data_dir,
            "models": [{"name": "a", "path": str(model)}, {"name": "b", "path": str(model)}],
            "benchmarks": {"truthfulqa": {"n_items": args.items}},
            "envelope": str(REPO / "config" / "envelope.yaml"),
            "case_study": {**study, "model": "a", "benchmarks": ["truthfulqa"]},
        }
    )
    items = case_items(settings, "truthfulqa", args.items)
    requests, sizes = requests_for(settings, items, args.scoring, args.config or settings.case_study.anchor_config)

    from lm_eval.api.instance import Instance

    ours = drivers.load_ours(ModelSpec("ours", str(model), args.precision, "off"), args.batch_size)
    theirs = drivers.load_lm_eval_model(str(model), args.precision, args.batch_size)
    instances = [Instance("loglikelihood", {}, pair, index) for index, pair in enumerate(requests)]
    backends = {
        "safetyrepro": lambda: ours.loglikelihood(requests),
        "lm-eval HFLM": lambda: [ll for ll, _ in theirs.loglikelihood(instances, disable_tqdm=True)],
    }
    for run in backends.values():  # warm-up: first-call allocations, kernel selection
        run()
    seconds = dict.fromkeys(backends, 0.0)
    scores = {}
    for _ in range(args.rounds):
        for name, run in backends.items():
            started = time.perf_counter()
            scores[name] = run()
            seconds[name] += time.perf_counter() - started
    total = args.items * args.rounds
    print(
        f"{args.items} TruthfulQA items x {args.rounds} rounds, {len(requests)} requests per round, "
        f"scoring={args.scoring}, {args.precision}, batch {args.batch_size}, CPU"
    )
    for name in backends:
        print(f"{name:>14}: {total / seconds[name]:.2f} items/s ({seconds[name]:.1f} s)")
    print(f"ratio safetyrepro / lm-eval: {seconds['lm-eval HFLM'] / seconds['safetyrepro']:.2f}x")
    ours_pick, their_pick = (argmaxes(scores[n], sizes) for n in backends)
    print(f"same argmax: {sum(a == b for a, b in zip(ours_pick, their_pick))} / {len(items)} items")


if __name__ == "__main__":
    main()
