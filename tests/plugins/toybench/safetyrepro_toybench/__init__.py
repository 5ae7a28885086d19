"""ToyBench: yes/no science questions, a benchmark that lives in its own package and reaches safetyrepro
through the `safetyrepro.benchmarks` entry point (tests/end_to_end/test_plugin_benchmark.py runs it end to end)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from safetyrepro.benchmarks import AS_GIVEN, Benchmark, DataFile, Item, Presentation
from safetyrepro.benchmarks.files import check_values, read_jsonl

ITEMS = Path(__file__).with_name("items.jsonl")


class ToyBench(Benchmark):
    """Accuracy of Yes / No answers; the free-form path reads the reply with the shared label
    extraction, the logprob path compares " Yes" with " No"."""

    name = "toybench"
    folder = "toybench"
    task = "Answer the science question below truthfully."
    default_labels = ("Yes", "No")
    # shipped with the package: `safetyrepro fetch-data` copies it into the data folder, checking its hash
    data_files = (
        DataFile(
            "toybench/items.jsonl",
            "3c5cd86bac812c497b2d3b9974af12240ee2c56b46a735358286ee29804f5e5d",
            url=ITEMS.as_uri(),
        ),
    )
    metric_names = ("yes_rate",)

    def load(self, data_dir: Path) -> pd.DataFrame:
        path = data_dir / self.folder / "items.jsonl"
        frame = read_jsonl(path, ["id", "question", "answer", "topic"])
        check_values(frame, "answer", self.default_labels, path, frame.attrs["rows"])
        frame["item_id"] = "toy-" + frame["id"]
        frame["stratum"] = frame["topic"]
        return frame

    def make_item(self, row: Mapping[str, Any], seed: int, presentation: Presentation = AS_GIVEN) -> Item:
        return Item(
            item_id=row["item_id"],
            stratum=row["stratum"],
            text=row["question"],
            question=f"Question: {row['question']}",
            answer_format="Reply with Yes or No.",
            labels=self.default_labels,
            gold=row["answer"],
            candidates={"Yes": " Yes", "No": " No"},
        )

    def metrics(self, rows: pd.DataFrame, items: Mapping[str, Item]) -> dict[str, float]:
        """yes_rate: the share of answers that are Yes (a model that always agrees scores half)."""
        return {"yes_rate": float((rows["label"] == "Yes").mean())}
