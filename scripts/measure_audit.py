"""The auditor's search against a random order on synthetic grids with known answers:

    python scripts/measure_audit.py [--seeds 100] [--first-seed 1000] [--budget 96]

One model pair on the paper's 48 TruthfulQA configs (tests/helpers/synthetic_audit.py): a planted reversing
region of k configs under additive axis effects (k = 0: none), and a region only an interaction of two
axes makes. Per family: the share of audits that found a planted reversal, the mean cells they ran,
the mean cells a random order runs up to its first reversing config (20 orders per grid), their
ratio, and why the audits stopped. Seeds 0-29 were used to choose the prior; the default seeds are
held out.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from helpers.synthetic_audit import additive_grid, audit_options, audit_outcome, compare, conjunction_grid, paper_space  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--budget", type=int, default=96, help="cells per audit (96: the whole envelope)")
    args = parser.parse_args()
    space, seeds = paper_space(), range(args.first_seed, args.first_seed + args.seeds)
    families = {f"additive k={k}": [additive_grid(space, k, s) for s in seeds] for k in (1, 2, 3, 4, 6, 8)}
    families["interaction of two axes"] = [conjunction_grid(space, s) for s in seeds]
    print(f"{args.seeds} grids per row, seeds {seeds.start}-{seeds.stop - 1}, budget {args.budget} cells\n")
    print("| grids | found (audit) | found (random, same budget) | cells (audit) | cells (random) | ratio | stops |")
    print("|---|---|---|---|---|---|---|")
    for name, grids in families.items():
        r = compare(space, grids, audit_options(args.budget))
        stops = ", ".join(f"{reason} {n}" for reason, n in r["reasons"].items())
        print(
            f"| {name} (k mean {sum(len(g.reversing) for g in grids) / len(grids):.1f}) | {r['found']:.2f} | "
            f"{r['random_found_within_audit_budget']:.2f} | {r['audit_cells']:.1f} | {r['random_cells']:.1f} | "
            f"{r['audit_cells'] / r['random_cells']:.2f} | {stops} |"
        )
    none = [audit_outcome(space, additive_grid(space, 0, s), audit_options(args.budget)) for s in seeds]
    stops = Counter(reason for _, _, reason in none)
    cells = sum(n for _, n, _ in none) / len(none)
    print(f"\nno reversal planted (k=0): mean cells {cells:.1f} of {2 * len(space)}; stops: {dict(stops)}")


if __name__ == "__main__":
    main()
