"""How often the audit's majority verdict is the full grid's, against the probability it states:

    python scripts/measure_audit_calibration.py [--grids 200] [--first-seed 2000]

Grids whose true majority is known (tests/helpers/synthetic_audit.py), on the default run's 8 TruthfulQA configs
and on the paper's 48: ones the majority model fits (`exchangeable`) and ones it does not (axis effects
rounded to 10 items: a clear majority, a near 50/50 split, many ties; the default run's TruthfulQA pair's
counts, 1 / 2 / 5, placed at random). Each grid is searched to its end; an audit with a budget of 2k cells
stops at the search's k-th config (or earlier, at the search's own stop), so every step is one audit, and
each is counted with the verdict it would print: the most probable majority and its probability, stated
from 1 - stop_probability (0.95) on and "undecided" below. Per band of that probability: how many audits,
their mean probability and the share whose most probable majority is the full grid's (a 95% Clopper-Pearson
interval); per family: the share that state a verdict, and of those the share stating the opposite of the
full grid's majority or any other wrong verdict.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import beta

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from helpers.synthetic_audit import (  # noqa: E402
    arranged_grid,
    audit_options,
    default_space,
    exchangeable_grid,
    paper_space,
    rounded_grid,
    true_majority,
)

from safetyrepro.audit import CELLS_PER_CONFIG, search  # noqa: E402

BANDS = [0.0, 0.5, 0.8, 0.95, 0.99, 1.0, 1.01]  # the last band: every config run (exact)


def families(space: pd.DataFrame, seeds: range) -> dict[str, list]:
    """The grids of each family on `space`."""
    rng = np.random.default_rng(seeds.start)
    return {
        "exchangeable (the model's own prior)": [exchangeable_grid(space, s) for s in seeds],
        "axis effects, a clear majority": [
            rounded_grid(space, s, rng.choice([-1, 1]) * rng.uniform(0.05, 0.15), 0.05, 0.05) for s in seeds
        ],
        "axis effects, a near 50/50 split": [rounded_grid(space, s, 0.0, 0.1, 0.05) for s in seeds],
        "axis effects, many ties": [rounded_grid(space, s, rng.uniform(-0.03, 0.03), 0.02, 0.02) for s in seeds],
        "counts 1 / 2 / 5 per 8, placed at random": [
            arranged_grid(space, tuple(n * len(space) // 8 for n in (1, 2, 5)), s) for s in seeds
        ],
    }


def audits(space: pd.DataFrame, grid, options) -> list[dict]:
    """The verdict of the audit stopped at each step of the search of `grid` (budget: 2 cells per step)."""
    truth = true_majority(grid)
    observed, steps = search(space, grid.observe, options)
    return [
        {"configs": k, "majority": step.majority, "p": step.p_majority, "right": step.majority == truth, "truth": truth}
        for k, step in enumerate(steps[1:], start=1)
    ]


def interval(right: int, n: int) -> str:
    """95% Clopper-Pearson interval of a share."""
    low = beta.ppf(0.025, right, n - right + 1) if right else 0.0
    high = beta.ppf(0.975, right + 1, n - right) if right < n else 1.0
    return f"[{low:.2f}, {high:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grids", type=int, default=200, help="grids per family and envelope")
    parser.add_argument("--first-seed", type=int, default=2000)
    args = parser.parse_args()
    seeds = range(args.first_seed, args.first_seed + args.grids)
    rows = []
    for envelope, space in {"8 configs": default_space(), "48 configs": paper_space()}.items():
        options = audit_options(CELLS_PER_CONFIG * len(space))
        for family, grids in families(space, seeds).items():
            for grid in grids:
                for audit in audits(space, grid, options):
                    rows.append({"envelope": envelope, "family": family, "n": len(space), **audit})
    table = pd.DataFrame(rows)
    threshold = 1 - options.stop_probability
    table["exact"] = table["configs"] == table["n"]
    table["band"] = pd.cut(table["p"].where(~table["exact"], 1.0), BANDS, right=False)
    print(f"{args.grids} grids per family and envelope, seeds {seeds.start}-{seeds.stop - 1}; {len(table)} audits\n")
    print("| stated probability | audits | mean probability | most probable majority is the grid's (95% interval) |")
    print("|---|---|---|---|")
    for band, group in table.groupby("band", observed=True):
        name = "every config run" if band.left == 1.0 else f"[{band.left:.2f}, {band.right:.2f})"
        right = int(group["right"].sum())
        print(
            f"| {name} | {len(group)} | {group['p'].mean():.3f} | {right / len(group):.3f} {interval(right, len(group))} |"
        )
    print("\n| envelope | grids | audits | verdict stated | stated and wrong | of them the opposite majority |")
    print("|---|---|---|---|---|---|")
    for (envelope, family), group in table.groupby(["envelope", "family"], sort=False):
        stated = group[(group["p"] >= threshold) & ~group["exact"]]
        wrong = stated[~stated["right"]]
        opposite = wrong[(wrong["majority"] != 0) & (wrong["majority"] == -wrong["truth"])]
        print(
            f"| {envelope}: {family} | {args.grids} | {len(group)} | {len(stated) / len(group):.2f} | "
            f"{len(wrong)} of {len(stated)} {interval(len(wrong), len(stated)) if len(stated) else ''} | {len(opposite)} |"
        )


if __name__ == "__main__":
    main()
