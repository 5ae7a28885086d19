"""Time the whole analysis stage on a synthetic grid the size of the paper's (612 cells, 300 items).

    python scripts/bench_analysis.py [--with-shap] [--only NAME,NAME,...]

Prints the seconds each analysis takes and the total; the synthetic tables come from
tests/helpers/synthetic_cells.py (scores from a seeded generator), so no model or data is needed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from helpers.synthetic_cells import MODELS, synthetic_cells, synthetic_items  # noqa: E402

from safetyrepro.analysis.suite import ANALYSES, Inputs  # noqa: E402
from safetyrepro.configuration.build import load_settings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--with-shap", action="store_true", help="include the LightGBM + SHAP surrogate")
    parser.add_argument("--only", help="comma-separated analyses to time (default: all)")
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    args = parser.parse_args()
    cells = synthetic_cells(0)
    settings = load_settings(
        {
            "data_dir": args.data_dir,
            "models": [{"name": m, "path": f"org/{m}"} for m in MODELS],
            "benchmarks": {b: {"n_items": 300} for b in cells["benchmark"].unique()},
            "envelope": str(REPO / "config" / "envelope.yaml"),
            "analysis": {
                "conservative_core": [
                    "T1-greedy-0shot-freeform",
                    "T2-greedy-0shot-freeform",
                    "T1-greedy-0shot-logprob",
                    "T2-greedy-0shot-logprob",
                ]
            },
        }
    )
    with tempfile.TemporaryDirectory() as scratch:
        items_path = Path(scratch) / "items.parquet"
        synthetic_items(cells).to_parquet(items_path)
        inputs = Inputs(settings, cells, str(items_path))
        total = 0.0
        names = args.only.split(",") if args.only else [n for n in ANALYSES if n != "shap" or args.with_shap]
        for name in names:
            analysis = ANALYSES[name]
            started = time.perf_counter()
            table = analysis.run(inputs)
            seconds = time.perf_counter() - started
            total += seconds
            print(f"{name:18s} {seconds:7.2f} s  ({len(table)} rows)")
    print(f"{'total':18s} {total:7.2f} s  ({len(cells)} cells; {', '.join(names)})")


if __name__ == "__main__":
    main()
