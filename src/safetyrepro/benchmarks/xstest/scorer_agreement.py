"""XSTest's scorers against the human labels of the authors' labelled completions (Röttger et al., 2024;
`safetyrepro.benchmarks.xstest.human_labels`).

Agreement is measured three-class (full compliance, full refusal, partial refusal), binary (compliance
vs. either refusal) and as Cohen's kappa on the three classes (scikit-learn). A scorer's "unparsed"
counts as a disagreement. `developed_on` names the file a scorer's rules were written against (ours:
the Llama-2 file; the Mistral file was held out); the authors' string match was fitted on neither.
The learned classifier's head is fitted on both files, so it is given its agreement leave-one-model-
out, recorded with the head: on each file, that of the same recipe fitted on the other file alone
(`fitted_on`). A judge model is asked about every labelled completion by a job of its own, which
serves it (`judge_agreement`; the scorers analysis reads its table). `XSTestHumanLabels` is registered as
XSTest's human labels (pyproject.toml, group `safetyrepro.human_labels`); no cell's code imports this module,
so it reads the learned scorer's head without making it code of every XSTest cell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from safetyrepro.benchmarks.base import UNPARSED, Item
from safetyrepro.benchmarks.xstest import XSTest
from safetyrepro.benchmarks.xstest.human_labels import LABELLED_FILES, read_labelled
from safetyrepro.benchmarks.xstest.learned import LEARNED, read_head
from safetyrepro.benchmarks.xstest.refusal import COMPLY, RESPONSE_CLASSES
from safetyrepro.core.scorer_names import RULES
from safetyrepro.scorers import scorer_labels, scorer_of
from safetyrepro.scorers.human_labels import HumanLabels

DEVELOPED_ON = {RULES: "llama2new"}
# What a scorer's row gives of its agreement and errors (a learned scorer's read from its head's held-out record).
MEASURED = ("three_class", "binary", "kappa", "n_answers", "scorer_over", "scorer_under")


def agreement(human: Sequence[str], labels: Sequence[str]) -> dict[str, float]:
    """Three-class and binary agreement and three-class kappa of `labels` with `human`."""
    from sklearn.metrics import cohen_kappa_score

    human, labels = pd.Series(list(human)), pd.Series(list(labels))
    return {
        "three_class": float((human == labels).mean()),
        "binary": float(((human == COMPLY) == (labels == COMPLY)).mean()),
        "kappa": float(cohen_kappa_score(human, labels)),
        "n_answers": len(human),
    }


def outcome_errors(human: Sequence[str], labels: Sequence[str], items: Sequence[Item]) -> dict[str, int]:
    """How often `labels` count a reply to `items` as handled correctly (XSTest's score) where the human label does
    not (`scorer_over`), and the other way round (`scorer_under`): the scorer's errors in the rate it gives."""
    xstest = XSTest()
    human_correct = [xstest.is_correct(h, item) for h, item in zip(human, items)]
    scorer_correct = [xstest.is_correct(label, item) for label, item in zip(labels, items)]
    pairs = list(zip(human_correct, scorer_correct))
    return {"scorer_over": pairs.count((False, True)), "scorer_under": pairs.count((True, False))}


def labelled_items(frame: pd.DataFrame) -> list[Item]:
    """The requests of a labelled file's completions as XSTest items (what a judge is shown of each)."""
    xstest = XSTest()
    return [
        xstest.make_item(
            {
                "item_id": f"labelled-{index}",
                "stratum": kind,
                "prompt": prompt,
                "label": "unsafe" if kind.startswith("contrast_") else "safe",
            },
            0,
        )
        for index, (prompt, kind) in enumerate(zip(frame["prompt"], frame["type"]))
    ]


def labelled_outcomes(data_dir: Path, scorer: str, models: Mapping[str, Path] | None = None) -> pd.DataFrame:
    """Per labelled completion: `labelled_model`, whether the human label counts it as handled correctly
    (`human_correct`: XSTest's score, compliance on a safe request and refusal on an unsafe one) and whether the
    scorer's label does (`scorer_correct`; its "unparsed" does not); `models` holds the embedded model's folder for a
    scorer that reads with it."""
    from safetyrepro.benchmarks import BENCHMARKS

    xstest, frames = BENCHMARKS["xstest"], []
    for model in LABELLED_FILES:
        frame = read_labelled(data_dir, model)
        items = labelled_items(frame)
        labels = scorer_labels(xstest, scorer, frame["completion"].tolist(), items, models)
        frames.append(
            pd.DataFrame(
                {
                    "labelled_model": model,
                    "human_correct": [xstest.is_correct(h, item) for h, item in zip(frame["human"], items)],
                    "scorer_correct": [xstest.is_correct(label, item) for label, item in zip(labels, items)],
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


class XSTestHumanLabels(HumanLabels):
    """The XSTest authors' labelled completions: 450 Llama-2 and 450 Mistral-Instruct replies."""

    classes = RESPONSE_CLASSES

    def scorer_agreement(self, data_dir: Path, scorers: Sequence[str]) -> pd.DataFrame:
        """Per labelled file and scorer (of XSTest's): agreement with the human labels, and whether the scorer
        was developed on that file."""
        from safetyrepro.benchmarks import BENCHMARKS

        xstest, rows = BENCHMARKS["xstest"], []
        for model in LABELLED_FILES:
            frame = read_labelled(data_dir, model)
            for scorer in scorers:
                row = {"labelled_model": model, "scorer": scorer}
                if scorer == LEARNED:
                    head = scorer_of(xstest, LEARNED).head_file
                    held_out = next(r for r in read_head(head)["held_out"] if r["labelled_model"] == model)
                    row |= {key: held_out[key] for key in (*MEASURED, "fitted_on")}
                else:
                    labels = scorer_labels(xstest, scorer, frame["completion"].tolist(), [None] * len(frame))
                    row |= agreement(frame["human"], labels) | {"fitted_on": None}
                    row |= outcome_errors(frame["human"], labels, labelled_items(frame))
                rows.append(row | {"developed_on": DEVELOPED_ON.get(scorer) == model})
        return pd.DataFrame(rows)

    def judge_agreement(self, data_dir: Path, label: Callable[[list[str], list[Item]], list[str]]) -> pd.DataFrame:
        """Per labelled file: a judge's agreement with the human labels (`label` gives its labels of replies to
        items) and the share of its labels that parse (an unparsed one counts as a disagreement)."""
        rows = []
        for model in LABELLED_FILES:
            frame = read_labelled(data_dir, model)
            labels = label(frame["completion"].tolist(), labelled_items(frame))
            parsed = sum(label != UNPARSED for label in labels) / len(labels)
            errors = outcome_errors(frame["human"], labels, labelled_items(frame))
            rows.append({"labelled_model": model, **agreement(frame["human"], labels), **errors, "parse_rate": parsed})
        return pd.DataFrame(rows)
