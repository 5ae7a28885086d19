"""XSTest's scorers against the human labels of the authors' labelled completions (Röttger et al., 2024):
450 Llama-2 and 450 Mistral-Instruct answers, each with two annotations and a `final_label`.

Agreement is measured three-class (full compliance, full refusal, partial refusal), binary (compliance
vs. either refusal) and as Cohen's kappa on the three classes (scikit-learn). A scorer's "unparsed"
counts as a disagreement. `developed_on` names the file a scorer's rules were written against (ours:
the Llama-2 file; the Mistral file was held out); the authors' string match was fitted on neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from safetyrepro.benchmarks.base import RULES, check_values, read_csv
from safetyrepro.benchmarks.xstest.refusal import COMPLY, RESPONSE_CLASSES

FINAL_LABELS = ("1_full_compliance", "2_full_refusal", "3_partial_refusal")  # as the files write the classes
LABELLED_FILES = {  # in this order the few-shot answers are looked up (XSTest._shot_examples)
    "mistralinstruct": "xstest_v2_completions_mistralinstruct_labelled.csv",
    "llama2new": "xstest_v2_completions_llama2new_labelled.csv",
}
DEVELOPED_ON = {RULES: "llama2new"}


def read_labelled(data_dir: Path, model: str) -> pd.DataFrame:
    """One labelled file (`model`: a key of LABELLED_FILES): prompt, completion and `human`, the final label
    as one of RESPONSE_CLASSES."""
    path = data_dir / "xstest" / LABELLED_FILES[model]
    frame = read_csv(path, ["prompt", "completion", "final_label"])
    check_values(frame, "final_label", FINAL_LABELS, path)
    return frame.assign(human=frame["final_label"].map(dict(zip(FINAL_LABELS, RESPONSE_CLASSES))))


def agreement(human: Sequence[str], labels: Sequence[str]) -> dict[str, float]:
    """Three-class and binary agreement and three-class kappa of `labels` with `human`."""
    from sklearn.metrics import cohen_kappa_score  # here, not at the top: every job imports this module

    human, labels = pd.Series(list(human)), pd.Series(list(labels))
    return {
        "three_class": float((human == labels).mean()),
        "binary": float(((human == COMPLY) == (labels == COMPLY)).mean()),
        "kappa": float(cohen_kappa_score(human, labels)),
        "n_answers": len(human),
    }


def human_agreement(data_dir: Path, scorers: Sequence[str]) -> pd.DataFrame:
    """Per labelled file and scorer (of XSTest's): agreement with the human labels, and whether the scorer
    was developed on that file."""
    from safetyrepro.benchmarks.xstest import XSTest  # imported here: that module imports this one

    xstest, rows = XSTest(), []
    for model in LABELLED_FILES:
        frame = read_labelled(data_dir, model)
        for scorer in scorers:
            labels = xstest.label(scorer, frame["completion"].tolist(), [None] * len(frame))
            developed = DEVELOPED_ON.get(scorer) == model
            rows.append(
                {
                    "labelled_model": model,
                    "scorer": scorer,
                    **agreement(frame["human"], labels),
                    "developed_on": developed,
                }
            )
    return pd.DataFrame(rows)
