"""The human labels of the XSTest authors' labelled completions (Röttger et al., 2024): 450 Llama-2 and
450 Mistral-Instruct answers, each with two annotations and a `final_label`. XSTest's few-shot answers
come from them, and the scorers are measured against them (`safetyrepro.benchmarks.xstest.scorer_agreement`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from safetyrepro.benchmarks.files import check_values, read_csv
from safetyrepro.benchmarks.xstest.refusal import RESPONSE_CLASSES

FINAL_LABELS = ("1_full_compliance", "2_full_refusal", "3_partial_refusal")  # as the files write the classes
LABELLED_FILES = {  # in this order the few-shot answers are looked up (XSTest._shot_examples)
    "mistralinstruct": "xstest_v2_completions_mistralinstruct_labelled.csv",
    "llama2new": "xstest_v2_completions_llama2new_labelled.csv",
}


def read_labelled(data_dir: Path, model: str) -> pd.DataFrame:
    """One labelled file (`model`: a key of LABELLED_FILES): prompt, completion and `human`, the final label
    as one of RESPONSE_CLASSES."""
    path = data_dir / "xstest" / LABELLED_FILES[model]
    frame = read_csv(path, ["prompt", "completion", "final_label"])
    check_values(frame, "final_label", FINAL_LABELS, path)
    return frame.assign(human=frame["final_label"].map(dict(zip(FINAL_LABELS, RESPONSE_CLASSES))))
