"""Fit XSTest's learned refusal classifier (scorer "learned") and measure it leave-one-model-out.

    python scripts/train_learned_refusal.py [--data-dir ../shared/data] [--out PATH]

The features are `safetyrepro.benchmarks.xstest.learned.features`: what the embedded gemma-3-270m
(fp32) makes of each of the authors' 900 human-labelled completions. A head is a standardised
logistic regression (scikit-learn) whose regularisation is chosen by 5-fold cross-validation
(shuffled with SEED) within its training data alone.

Each full compliance and full refusal is also read cut to its first PREFIXES tokens, with the same
label: the pipeline's replies are often short (the default run caps them at 12 tokens), and a head
fitted on whole completions alone reads a short refusal as compliance. Partial refusals are not cut
(cut, most are no longer partial).

1. Leave one model out, both ways: a head fitted on one labelled file is scored on the other's whole
   completions, three-class, binary and kappa, beside our rules and the authors' string match on the
   same file; and binary on the other's full compliances and refusals cut to each of PREFIXES.
2. The shipped head: the same recipe fitted on both files, its standardisation folded into the
   weights, written as JSON (default: the package's learned_head.json) with the data files' SHA-256,
   the seed, the command, the table of step 1 (what the results report as its human agreement) and a
   few completions' labels that tests/unit/benchmarks/test_scorers.py recomputes.

About 9 min wall on 2 cores: 5 of them gemma reading the completions, whole and cut; 4 the fits.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegressionCV
from sklearn.metrics import confusion_matrix
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from safetyrepro.benchmarks.xstest.human_labels import LABELLED_FILES, read_labelled
from safetyrepro.benchmarks.xstest.learned import HEAD_FILE, embedded_reader, features, predict, recipe
from safetyrepro.benchmarks.xstest.refusal import PARTIAL, RESPONSE_CLASSES
from safetyrepro.benchmarks.xstest.scorer_agreement import XSTestHumanLabels, agreement, labelled_items, outcome_errors
from safetyrepro.results.storage import write_text
from safetyrepro.running.embedded_model import build_embedded_model
from safetyrepro.running.hashing import file_sha256

REPO = Path(__file__).resolve().parents[1]
C_GRID = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 1.0)
SEED = 0
CHECKS_PER_CLASS = 3  # completions per labelled file and human class whose labels the head records
SIGNIFICANT = 7  # digits kept of each weight (a float32's precision)
PREFIXES = (12, 32)  # tokens the cut copies keep


def fit_head(rows: np.ndarray, human: list[str]):
    """A standardised logistic regression, its C chosen by shuffled 5-fold cross-validation on `rows` alone."""
    return make_pipeline(
        StandardScaler(),
        LogisticRegressionCV(
            Cs=list(C_GRID),
            cv=StratifiedKFold(5, shuffle=True, random_state=SEED),
            scoring="accuracy",
            l1_ratios=(0,),
            max_iter=5000,
            use_legacy_attributes=False,
        ),
    ).fit(rows, human)


def folded(pipeline) -> dict:
    """The fitted pipeline as one linear map of the raw features (weights W/s, intercept b - (W/s)·m), each
    number to SIGNIFICANT digits: the head as shipped, which labels the checks and the fitted agreement."""
    scaler, head = pipeline
    weights = head.coef_ / scaler.scale_
    intercept = head.intercept_ - weights @ scaler.mean_
    return {
        "classes": [str(c) for c in head.classes_],
        "weights": [[float(f"{w:.{SIGNIFICANT}g}") for w in row] for row in weights],
        "intercept": [float(f"{b:.{SIGNIFICANT}g}") for b in intercept],
        "C": float(head.C_),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--out", default=str(HEAD_FILE), help="the head's JSON (default: the package's)")
    args = parser.parse_args()

    data_dir = Path(args.data_dir)
    folder = build_embedded_model(REPO / "resources" / "models" / recipe()["embedded_model"])
    model, tokenizer = embedded_reader(str(folder))
    frames, matrices, cut = {}, {}, {}
    for name in LABELLED_FILES:
        started = time.perf_counter()
        frames[name] = read_labelled(data_dir, name)
        whole = frames[name]["human"] != PARTIAL
        matrices[name] = features(model, tokenizer, frames[name]["completion"].tolist())
        for tokens in PREFIXES:
            cut[name, tokens] = features(model, tokenizer, frames[name]["completion"][whole].tolist(), tokens)
        print(f"{name}: {len(frames[name])} completions read in {time.perf_counter() - started:.0f} s", flush=True)

    def training_set(names: list[str]) -> tuple[np.ndarray, list[str]]:
        """The files' whole completions, then their full compliances and refusals cut to each of PREFIXES."""
        rows = [matrices[name] for name in names] + [cut[name, tokens] for name in names for tokens in PREFIXES]
        humans = [list(frames[name]["human"]) for name in names]
        humans += [[h for h in frames[name]["human"] if h != PARTIAL] for name in names for _ in PREFIXES]
        return np.concatenate(rows), [label for part in humans for label in part]

    baselines = (
        XSTestHumanLabels().scorer_agreement(data_dir, ["rules", "strmatch"]).set_index(["labelled_model", "scorer"])
    )
    held_out_rows = []
    for held_out, train in (("mistralinstruct", "llama2new"), ("llama2new", "mistralinstruct")):
        pipeline = fit_head(*training_set([train]))
        predicted = pipeline.predict(matrices[held_out])
        human = frames[held_out]["human"]
        row = {"labelled_model": held_out, "fitted_on": train, "C": float(pipeline[-1].C_)}
        row |= agreement(human, predicted)
        row["confusion"] = confusion_matrix(human, predicted, labels=list(RESPONSE_CLASSES)).tolist()
        row |= outcome_errors(human, predicted, labelled_items(frames[held_out]))
        whole = human[human != PARTIAL]
        for tokens in PREFIXES:
            labels = pipeline.predict(cut[held_out, tokens])
            row[f"binary_first_{tokens}_tokens"] = agreement(whole, labels)["binary"]
        held_out_rows.append(row)

    head = folded(fit_head(*training_set(list(LABELLED_FILES))))
    both = np.concatenate([matrices[name] for name in LABELLED_FILES])
    human_both = [label for name in LABELLED_FILES for label in frames[name]["human"]]
    checks = []
    for name in LABELLED_FILES:
        frame = frames[name]
        for cls in RESPONSE_CLASSES:
            for row in frame.index[frame["human"] == cls][:CHECKS_PER_CLASS]:
                label = predict(head, matrices[name][[row]])[0]
                checks.append({"labelled_model": name, "row": int(row), "human": cls, "label": label})
    data_files = {file: file_sha256(data_dir / "xstest" / file) for file in LABELLED_FILES.values()}
    fitted = agreement(human_both, predict(head, both))
    write_text(
        json.dumps(
            {
                "recipe": recipe(),
                **head,
                "seed": SEED,
                "C_grid": list(C_GRID),
                "data_files": data_files,
                "command": " ".join(["python scripts/train_learned_refusal.py", *sys.argv[1:]]),
                "held_out": held_out_rows,
                "fitted_agreement": fitted,
                "checks": checks,
            },
            indent=1,
            sort_keys=True,
        )
        + "\n",
        Path(args.out),
    )
    print(f"{args.out}: SHA-256 {file_sha256(Path(args.out))} (to ship it: SHIPPED_SHA256 in learned.py)")

    cut_columns = [f"binary_first_{tokens}_tokens" for tokens in PREFIXES]
    print(
        "| held out | fitted on | C | 3-class | binary | kappa | "
        + " | ".join(cut_columns)
        + " | rules 3-class | kappa "
        "| strmatch 3-class | kappa |"
    )
    print("|---" * (10 + len(PREFIXES)) + "|")
    for r in held_out_rows:
        rules, strmatch = (baselines.loc[(r["labelled_model"], s)] for s in ("rules", "strmatch"))
        print(
            f"| {r['labelled_model']} | {r['fitted_on']} | {r['C']:g} | {r['three_class']:.3f} | {r['binary']:.3f} | "
            f"{r['kappa']:.3f} | "
            + " | ".join(f"{r[c]:.3f}" for c in cut_columns)
            + f" | {rules['three_class']:.3f} | "
            f"{rules['kappa']:.3f} | {strmatch['three_class']:.3f} | {strmatch['kappa']:.3f} |"
        )
    for r in held_out_rows:
        print(f"held out {r['labelled_model']}: rows human {', '.join(RESPONSE_CLASSES)}; columns predicted")
        for label, counts in zip(RESPONSE_CLASSES, r["confusion"]):
            print(f"  {label:>10}: {counts}")
    print(f"shipped head (both files, C {head['C']:g}): fitted agreement {fitted['three_class']:.3f} -> {args.out}")


if __name__ == "__main__":
    main()
