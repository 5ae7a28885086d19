"""Agreement of our refusal classifier and XSTest's string match with human labels, per direction.

Usage: python scripts/xstest_agreement.py --data-dir /work/shared/data

The authors label the completions of two models (mistralinstruct, llama2new). Each direction
builds on one file and reports on the other, the held-out file. Three classifiers are compared
with the human labels of the held-out file:

* ours: `safetyrepro.benchmarks.xstest.refusal.decide`, the rules the pipeline uses. They are not trained; they
  were designed on llama2new (RULES_DESIGNED_ON), so only the direction that holds out
  mistralinstruct measures them on a model they were not built on. The other direction is
  printed for completeness and marked as such.
* strmatch: the authors' string match (`strmatch_label`), which never says partial refusal.
* learned: TF-IDF word 1-2-grams + logistic regression trained on the build file only (fixed
  settings, nothing tuned on the held-out file), the learned alternative the rules were
  compared with.

Printed per classifier: three-class agreement, Cohen's kappa, binary agreement (any refusal
vs compliance), refusals called compliance and partial refusals called full refusals, plus the
confusion matrices (human rows, predicted columns) of ours and strmatch and how often ours says
"unparsed" on these complete completions (it should not).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import cohen_kappa_score
from sklearn.pipeline import make_pipeline

from safetyrepro.benchmarks.xstest.refusal import RESPONSE_CLASSES, UNPARSED, decide

MODELS = ("mistralinstruct", "llama2new")
RULES_DESIGNED_ON = "llama2new"
INSTRUCTION = "Respond to the request."  # XSTest's answer format, as the pipeline shows it
COMPLY, REFUSE, PARTIAL = RESPONSE_CLASSES


def load(data_dir: Path, model: str) -> pd.DataFrame:
    """One labelled file: its completions, prompts and labels (stripped of their "1_" style prefix)."""
    df = pd.read_csv(data_dir / "xstest" / f"xstest_v2_completions_{model}_labelled.csv")
    completions = df["completion"].fillna("")
    return pd.DataFrame(
        {
            "completion": completions,
            "human": df["final_label"].str.split("_", n=1).str[1],
            "strmatch": df["strmatch_label"].str.split("_", n=1).str[1],
            "ours": [decide(c, p, echoes=(INSTRUCTION,)) for c, p in zip(completions, df["prompt"])],
        }
    )


def learned(train: pd.DataFrame, test: pd.DataFrame) -> pd.Series:
    """Labels of `test` from a TF-IDF + logistic regression classifier trained on `train` alone."""
    model = make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2),
        LogisticRegression(C=10.0, max_iter=5000),
    )
    model.fit(train["completion"], train["human"])
    return pd.Series(model.predict(test["completion"]), index=test.index)


def scores(human: pd.Series, predicted: pd.Series) -> dict[str, float]:
    """Agreement figures of one classifier with the human labels."""
    refused = human != COMPLY
    return {
        "three_class": float((predicted == human).mean()),
        "kappa": float(cohen_kappa_score(human, predicted, labels=list(RESPONSE_CLASSES))),
        "binary": float(((predicted != COMPLY) == refused).mean()),
        "refusal_called_compliance": int((refused & (predicted == COMPLY)).sum()),
        "partial_called_full": int(((human == PARTIAL) & (predicted == REFUSE)).sum()),
    }


def confusion(human: pd.Series, predicted: pd.Series, name: str) -> str:
    columns = (*RESPONSE_CLASSES, UNPARSED) if (predicted == UNPARSED).any() else RESPONSE_CLASSES
    table = pd.crosstab(human, predicted).reindex(index=RESPONSE_CLASSES, columns=columns, fill_value=0)
    table.index.name, table.columns.name = "human", name
    return table.to_string()


def direction(frames: dict[str, pd.DataFrame], built_on: str, held_out: str) -> dict[str, dict[str, float]]:
    """Print and return the held-out figures of one direction."""
    test = frames[held_out]
    note = "" if held_out != RULES_DESIGNED_ON else f"  [ours: rules designed on {held_out}, not held out]"
    print(f"== built on {built_on} / held out {held_out} (n={len(test)}){note}")
    predictions = {"ours": test["ours"], "strmatch": test["strmatch"], "learned": learned(frames[built_on], test)}
    results = {}
    for name, predicted in predictions.items():
        results[name] = s = scores(test["human"], predicted)
        print(
            f"  {name:<9} 3-class {s['three_class']:.4f}  kappa {s['kappa']:.4f}  binary {s['binary']:.4f}"
            f"  refusals called compliance {s['refusal_called_compliance']:>3}"
            f"  partial called full {s['partial_called_full']:>3}"
        )
    print(f"  ours unparsed on these complete completions: {(test['ours'] == UNPARSED).mean():.4f}")
    for name in ("ours", "strmatch"):
        print("\n" + confusion(test["human"], predictions[name], name))
    print()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    args = parser.parse_args()
    frames = {model: load(args.data_dir, model) for model in MODELS}
    summary = {}
    for built_on in MODELS:
        held_out = next(m for m in MODELS if m != built_on)
        summary[held_out] = direction(frames, built_on, held_out)
    print("Summary (3-class agreement on the held-out file):")
    for held_out, results in summary.items():
        figures = "  ".join(f"{name} {r['three_class']:.4f}" for name, r in results.items())
        flag = " (ours not held out)" if held_out == RULES_DESIGNED_ON else ""
        print(f"  held out {held_out:<16} {figures}{flag}")


if __name__ == "__main__":
    main()
