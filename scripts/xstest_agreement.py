"""Agreement of our refusal classifier and XSTest's string match with human labels.

Usage: python scripts/xstest_agreement.py --data-dir /work/shared/data
"""

import argparse
from pathlib import Path

import pandas as pd
from sklearn.metrics import cohen_kappa_score

from safetyrepro.refusal import RESPONSE_CLASSES, classify_response  # noqa: E402

MODELS = ("mistralinstruct", "llama2new")
DESIGNED_ON = "llama2new"


def load(data_dir: Path, model: str) -> pd.DataFrame:
    """Read one labelled file with labels stripped of their "1_" style prefix."""
    df = pd.read_csv(data_dir / "xstest" / f"xstest_v2_completions_{model}_labelled.csv")
    return pd.DataFrame(
        {
            "human": df["final_label"].str.split("_", n=1).str[1],
            "strmatch": df["strmatch_label"].str.split("_", n=1).str[1],
            "ours": df["completion"].fillna("").map(classify_response),
        }
    )


def report(name: str, df: pd.DataFrame) -> None:
    """Print agreement, kappa and binary agreement for both classifiers, and our confusion matrix."""
    print(f"== {name} (n={len(df)})")
    refused = df["human"] != "full_compliance"
    for col in ("ours", "strmatch"):
        three = (df[col] == df["human"]).mean()
        kappa = cohen_kappa_score(df["human"], df[col], labels=list(RESPONSE_CLASSES))
        binary = ((df[col] != "full_compliance") == refused).mean()
        print(f"  {col:<9} 3-class agreement {three:.4f}  kappa {kappa:.4f}  binary agreement {binary:.4f}")
    confusion = pd.crosstab(df["human"], df["ours"]).reindex(
        index=RESPONSE_CLASSES, columns=RESPONSE_CLASSES, fill_value=0
    )
    confusion.index.name, confusion.columns.name = "human", "ours"
    print(confusion.to_string(), end="\n\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    args = parser.parse_args()
    frames = {model: load(args.data_dir, model) for model in MODELS}
    for model, df in frames.items():
        report(model, df)
    report("pooled", pd.concat(frames.values(), ignore_index=True))
    held_out = [m for m in MODELS if m != DESIGNED_ON]
    print(f"Summary: rules designed on {DESIGNED_ON}; {', '.join(held_out)} is the held-out check.")


if __name__ == "__main__":
    main()
