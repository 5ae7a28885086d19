"""Measures the scorer-corrected rates (safetyrepro.analysis.scorer_correction): how often their 90% intervals cover
the rate the human labels give, and how often the corrected verdict between two models is the human labels' where
its interval excludes a tie.

    python scripts/measure_scorer_correction.py --draws 2000 --labels 50 --out scorer_correction.md

On XSTest's labelled completions (450 Mistral-Instruct and 450 Llama-2 replies, each with a human label), for each
scorer: each draw takes --labels replies per model at random as the human-labelled sample; the truth is the human
rate of all 450. Then on synthetic populations of 450 replies with known scorer errors, from none to 30%, the same
for each model or different for the two (the scorer misreads one model's replies more), to see the interval where
the real scorers do not reach. `--learned` adds the learned scorer (it reads the 900 replies with the embedded
gemma-3-270m, built under --resources-dir first: about a minute).
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
import pandas as pd

from safetyrepro.analysis.scorer_correction import (
    PSEUDO_DISAGREEMENTS,
    CorrectedRate,
    corrected_rate,
    corrected_verdict,
)
from safetyrepro.benchmarks.xstest.scorer_agreement import labelled_outcomes

SYNTHETIC = {  # name: (human rate of model a, of model b; scorer error on a correct reply, on a wrong one, per model)
    "exact scorer": (0.80, 0.70, ((0.0, 0.0), (0.0, 0.0))),
    "1-2% errors": (0.80, 0.70, ((0.01, 0.02), (0.01, 0.02))),
    "5-10% errors": (0.80, 0.70, ((0.05, 0.10), (0.05, 0.10))),
    "20-30% errors": (0.80, 0.70, ((0.20, 0.30), (0.20, 0.30))),
    "errors on b only": (0.80, 0.70, ((0.0, 0.0), (0.25, 0.05))),
    "close models, scorer biased against b": (0.75, 0.72, ((0.02, 0.02), (0.20, 0.0))),
}
GRID = {"rate": (0.6, 0.85), "miss": (0.0, 0.02, 0.05, 0.1), "false hit": (0.0, 0.02, 0.05, 0.2)}  # one model's


def draw(
    rng: np.random.Generator, scorer: np.ndarray, human: np.ndarray, labels: int, pseudo: float = PSEUDO_DISAGREEMENTS
) -> tuple[CorrectedRate, bool]:
    """One draw of `labels` human labels: the corrected rate, and whether its interval covers the human rate."""
    positions = rng.choice(len(scorer), labels, replace=False)
    rate = corrected_rate(scorer, positions, human[positions], pseudo=pseudo)
    return rate, rate.low <= human.mean() <= rate.high


def population(rng: np.random.Generator, rate: float, miss: float, false_hit: float, size: int) -> tuple:
    """Scorer and human outcomes of `size` replies: human ones at `rate`, the scorer's flipped on a correct reply at
    `miss` and on a wrong one at `false_hit`."""
    human = (rng.random(size) < rate).astype(float)
    flip = np.where(human == 1, rng.random(size) < miss, rng.random(size) < false_hit)
    return np.where(flip, 1 - human, human), human


def measure(
    rng: np.random.Generator, populations: dict[str, tuple[np.ndarray, np.ndarray]], draws: int, labels: int
) -> dict:
    """Coverage per model, and the corrected verdicts between the two (a, b) against the human verdict."""
    (a, (scorer_a, human_a)), (b, (scorer_b, human_b)) = populations.items()
    truth = "a" if human_a.mean() > human_b.mean() else "b" if human_a.mean() < human_b.mean() else "tie"
    covered, decided, agreeing, widths = {a: 0, b: 0}, 0, 0, []
    for _ in range(draws):
        rate_a, in_a = draw(rng, scorer_a, human_a, labels)
        rate_b, in_b = draw(rng, scorer_b, human_b, labels)
        covered[a] += in_a
        covered[b] += in_b
        widths.append(rate_a.high - rate_a.low)
        verdict = corrected_verdict(rate_a, rate_b)[3]
        if verdict != "undecided":
            decided += 1
            agreeing += verdict == truth
    raw = "a" if scorer_a.mean() > scorer_b.mean() else "b"
    return {
        f"human {a}": human_a.mean(),
        f"scorer {a}": scorer_a.mean(),
        f"human {b}": human_b.mean(),
        f"scorer {b}": scorer_b.mean(),
        f"coverage {a}": covered[a] / draws,
        f"coverage {b}": covered[b] / draws,
        "width": float(np.mean(widths)),
        "raw verdict is human's": raw == truth,
        "decided": decided / draws,
        "decided = human's": agreeing / decided if decided else float("nan"),
    }


def synthetic(rng: np.random.Generator, size: int) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Populations of `size` replies per scenario: human outcomes at the scenario's rate, scorer outcomes flipped at
    its error rates."""
    scenarios = {}
    for name, (rate_a, rate_b, errors) in SYNTHETIC.items():
        scenarios[name] = {
            model: population(rng, rate, miss, false_hit, size)
            for model, rate, (miss, false_hit) in (("a", rate_a, errors[0]), ("b", rate_b, errors[1]))
        }
    return scenarios


def worst_on_grid(rng: np.random.Generator, pseudo: float, draws: int, labels: int, size: int = 450) -> tuple:
    """The lowest coverage of one model's interval over GRID (three populations a point) with `pseudo`
    disagreements of each sign added, and where: how the pseudo-count was chosen, on synthetic populations alone."""
    worst = (2.0, ())
    for rate, miss, false_hit in itertools.product(*GRID.values()):
        for _ in range(3):
            scorer, human = population(rng, rate, miss, false_hit, size)
            coverage = np.mean([draw(rng, scorer, human, labels, pseudo)[1] for _ in range(draws)])
            worst = min(worst, (float(coverage), (rate, miss, false_hit)))
    return worst


def xstest(data_dir: Path, scorers: list[str], models: dict[str, Path]) -> dict[str, dict]:
    """Per scorer, the two labelled files' scorer and human outcomes."""
    scenarios = {}
    for scorer in scorers:
        outcomes = labelled_outcomes(data_dir, scorer, models)
        scenarios[scorer] = {
            model: (group["scorer_correct"].to_numpy(float), group["human_correct"].to_numpy(float))
            for model, group in outcomes.groupby("labelled_model", sort=False)
        }
    return scenarios


# A run's shape for --per-config: two models, six free-form configs of 60 items; per model, its human rate in each
# config and its scorer's miss rate (a correct reply read as wrong) in each: the same in every config, or not.
CONFIG_RATES = {"a": (0.80, 0.75, 0.70, 0.65, 0.60, 0.55), "b": (0.76, 0.74, 0.72, 0.66, 0.62, 0.50)}
PER_CONFIG = {  # name: the scorer's miss rate per config, for a and for b
    "exact scorer": ((0.0,) * 6, (0.0,) * 6),
    "b missed 15% in every config": ((0.0,) * 6, (0.15,) * 6),
    "b missed 0-30% by config (misspecified)": ((0.0,) * 6, (0.0, 0.06, 0.12, 0.18, 0.24, 0.30)),
    "both missed 0-20% by config, in opposite orders (misspecified)": (
        (0.0, 0.04, 0.08, 0.12, 0.16, 0.20),
        (0.20, 0.16, 0.12, 0.08, 0.04, 0.0),
    ),
    "a missed 40% in one config alone": ((0.4, 0.0, 0.0, 0.0, 0.0, 0.0), (0.0,) * 6),
}


def run_population(rng: np.random.Generator, misses: tuple, items: int = 60) -> pd.DataFrame:
    """One run's free-form replies of the two models (CONFIG_RATES), each with its human and scorer outcome."""
    rows = []
    for model, miss in zip(CONFIG_RATES, misses):
        for index, (rate, missed) in enumerate(zip(CONFIG_RATES[model], miss)):
            human = rng.random(items) < rate
            scorer = human & ~(rng.random(items) < missed)
            rows += [
                {"model": model, "config_id": f"c{index}", "item_id": f"i{i}", "seed": 0, "human": h, "correct": f}
                for i, (h, f) in enumerate(zip(human, scorer.astype(float)))
            ]
    return pd.DataFrame(rows)


def measure_per_config(rng: np.random.Generator, draws: int, labels: int, per_run: int = 25) -> dict[str, dict]:
    """Per PER_CONFIG scenario, over `draws` label files drawn as `safetyrepro label` draws them (`labels` a model and
    config, stratified by the scorer's label), `per_run` from each of draws / per_run runs drawn anew: how often each (model,
    config)'s corrected rate's 90% interval covers its human rate, and the corrected verdicts per config against the
    human rates' (a tie of the human rates counts as no verdict: decided there is wrong)."""
    from scipy import stats

    from safetyrepro.analysis.scorer_correction import own_label_errors, own_verdicts
    from safetyrepro.scorers.label_file import KEY, draw_replies

    rows = {}
    for name, misses in PER_CONFIG.items():
        hits, cells_seen, widths, decided, agreeing, raw_right, verdicts_seen = {}, {}, [], 0, 0, 0, 0
        for _ in range(max(1, draws // per_run)):
            replies = run_population(rng, misses)
            cells = replies.groupby(["model", "config_id"], as_index=False).agg(
                score=("correct", "mean"), human=("human", "mean")
            )
            cells = cells.assign(benchmark="b", scoring="freeform", scorer="rules")
            truth = cells.pivot(index="config_id", columns="model", values="human")
            human_sign = np.sign(truth["a"] - truth["b"])
            scores = cells.pivot(index="config_id", columns="model", values="score")
            raw_right += int((np.sign(scores["a"] - scores["b"]) == human_sign).sum())
            scored = replies[[*KEY, "correct"]].assign(cell_config=replies["config_id"], scorer="rules")
            source = replies.assign(
                label=np.where(replies["correct"] == 1, "correct", "wrong"), request="", response="", benchmark="b"
            )
            for _ in range(per_run):
                drawn = draw_replies(source, labels, int(rng.integers(2**32)))
                labelled = drawn[KEY].merge(replies[[*KEY, "human"]], on=KEY)
                errors = own_label_errors(replies[KEY], scored, labelled.rename(columns={"human": "human_correct"}))
                rates = cells.merge(
                    errors.rename(columns={"labelled_model": "model"}), on=["model", "config_id"], validate="one_to_one"
                )
                half = stats.t.ppf(0.95, rates["n_labels"] - 1) * rates["variance"] ** 0.5
                estimate = rates["score"] + rates["net_error"]
                inside = (estimate - half <= rates["human"]) & (rates["human"] <= estimate + half)
                for key, hit in zip(zip(rates["model"], rates["config_id"]), inside):
                    hits[key], cells_seen[key] = hits.get(key, 0) + int(hit), cells_seen.get(key, 0) + 1
                widths.append(float((2 * half).mean()))
                verdicts = own_verdicts(cells, errors)[1].set_index("config_id")
                decided_here = verdicts["status"] != "undecided"
                sign = np.sign(verdicts["corrected_low"] + verdicts["corrected_high"])
                decided += int(decided_here.sum())
                agreeing += int((decided_here & (sign == human_sign.reindex(verdicts.index))).sum())
                verdicts_seen += len(verdicts)
        coverage = {key: hits[key] / cells_seen[key] for key in hits}
        rows[name] = {
            "coverage, mean over cells": sum(hits.values()) / sum(cells_seen.values()),
            "coverage, worst cell": min(coverage.values()),
            "cells corrected": sum(cells_seen.values()) / (max(1, draws // per_run) * per_run * 12),
            "interval width": float(np.mean(widths)),
            "verdicts decided": decided / verdicts_seen,
            "decided = human's": agreeing / decided if decided else float("nan"),
            "raw verdicts = human's": raw_right / (max(1, draws // per_run) * 6),
        }
    return rows


def table(rows: dict[str, dict]) -> str:
    frame = pd.DataFrame(rows).T
    return frame.to_markdown(floatfmt=".3f")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--labels", type=int, default=50, help="human labels drawn per model")
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--learned", action="store_true", help="also the learned scorer (reads with gemma-3-270m)")
    parser.add_argument("--resources-dir", type=Path, default=Path("resources"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pseudo-counts", type=float, nargs="*", default=[0.5, 1.0], help="for the grid's table")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--per-config", type=int, default=0, help="also this many label files of a synthetic run (per-config rates)"
    )
    parser.add_argument("--config-labels", type=int, default=20, help="their labels per model and config")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    scorers, models = ["rules", "strmatch"], {}
    if args.learned:
        from safetyrepro.running.embedded_model import build_embedded_model

        models = {"gemma-3-270m": build_embedded_model(args.resources_dir / "models" / "gemma-3-270m")}
        scorers.append("learned")
    real = {
        name: measure(rng, pops, args.draws, args.labels)
        for name, pops in xstest(args.data_dir, scorers, models).items()
    }
    made = {name: measure(rng, pops, args.draws, args.labels) for name, pops in synthetic(rng, 450).items()}
    chosen = {pseudo: worst_on_grid(rng, pseudo, args.draws // 2, args.labels) for pseudo in args.pseudo_counts}
    choice = "\n".join(
        f"- {pseudo} per sign: {coverage:.3f} at worst (rate, miss, false hit = {where})"
        for pseudo, (coverage, where) in chosen.items()
    )
    text = (
        f"{args.labels} human labels per model, {args.draws} draws, 90% intervals\n\n"
        f"XSTest's labelled completions, by scorer:\n\n{table(real)}\n\n"
        f"Synthetic populations of 450 replies per model:\n\n{table(made)}\n\n"
        f"One model's coverage over the grid {GRID}, by pseudo-count:\n\n{choice}\n"
    )
    if args.per_config:
        text += (
            f"\nSynthetic runs (2 models, 6 configs of 60 items), {args.per_config} label files of {args.config_labels}"
            " replies a model and config drawn as `safetyrepro label` draws them, 25 from each run:\n\n"
            f"{table(measure_per_config(rng, args.per_config, args.config_labels))}\n"
        )
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
