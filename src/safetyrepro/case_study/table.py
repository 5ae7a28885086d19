"""The case-study tables: per package run its score and what it scores; the spread across packages."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class RunKind:
    """What one kind of run is: which package, what it scores, with which prompt."""

    package: str
    scores: str
    prompt: str
    in_spread: bool  # the package's own default; parity runs are checks, not packages


RUNS = {
    "safetyrepro:anchor": RunKind(
        "safetyrepro",
        "option letters as one-token continuations (' A', ' B', ...); argmax log-likelihood",
        "envelope config {anchor}: task-free template, question with lettered options, 'Answer:'",
        True,
    ),
    "safetyrepro:parity": RunKind(
        "safetyrepro",
        "full answer texts (' ' + option) as continuations; argmax summed log-likelihood",
        "parity template: our own QA primer in lm-eval truthfulqa_mc1's 'Q: ... / A: ...' format; options not shown",
        False,
    ),
    "lm_eval:task": RunKind(
        "lm-eval",
        "full answer texts as continuations; argmax summed log-likelihood (`acc`); BBQ: the two "
        "non-unknown answers plus ten 'unknown' paraphrases, any of which is right when the answer is unknown",
        "lm-eval's own task (truthfulqa_mc1: its QA primer + 'Q: question / A:'; bbq: 'context / Q: question / A:'); "
        "options not shown",
        True,
    ),
    "lm_eval:parity": RunKind(
        "lm-eval",
        "full answer texts (' ' + option) as continuations; argmax summed log-likelihood (`acc`)",
        "generated task with our parity template",
        False,
    ),
    "inspect_ai:task": RunKind(
        "inspect-ai",
        "generated text (greedy, up to {max_new_tokens} tokens) read for 'ANSWER: X' by the "
        "`choice` scorer; no such line counts as wrong",
        "multiple_choice solver's template: instruction, question, options as 'A) ...'; a model without a chat "
        "template gets 'user: <prompt>'",
        True,
    ),
}


def case_study_table(runs: dict, study) -> pd.DataFrame:
    """One row per (benchmark, run): score, share answered, time, and the benchmark's spread in pp
    (max - min over the packages' own runs)."""
    rows = []
    for (benchmark, run_id), run in runs.items():
        kind = RUNS[run_id]
        rows.append(
            {
                "benchmark": benchmark,
                "run": run_id,
                "package": kind.package,
                "in_spread": kind.in_spread,
                "score": run.score,
                "answered": sum(bool(p.choice) for p in run.picks) / len(run.picks),
                "n_items": len(run.picks),
                "seconds": run.seconds,
                "items_per_second": len(run.picks) / run.seconds,
                "scores": kind.scores.format(max_new_tokens=study.max_new_tokens),
                "prompt": kind.prompt.format(anchor=study.anchor_config),
                "model": study.model.path,
                "precision": study.model.precision,
            }
        )
    table = pd.DataFrame(rows)
    spread = table[table["in_spread"]].groupby("benchmark")["score"].agg(lambda s: 100 * (s.max() - s.min()))
    table["spread_pp"] = table["benchmark"].map(spread)
    return table


def items_table(runs: dict) -> pd.DataFrame:
    """Every run's per-item choice and correctness."""
    return pd.DataFrame(
        [
            {"benchmark": benchmark, "run": run_id, "item_id": p.item_id, "choice": p.choice, "correct": p.correct}
            for (benchmark, run_id), run in runs.items()
            for p in run.picks
        ]
    )


def parity_agreement(picks: pd.DataFrame, benchmark: str = "truthfulqa") -> tuple[int, int]:
    """(items where our parity argmax equals lm-eval's, items compared)."""
    wide = picks[picks["benchmark"] == benchmark].pivot(index="item_id", columns="run", values="choice")
    both = wide[["safetyrepro:parity", "lm_eval:parity"]].dropna()
    return int((both["safetyrepro:parity"] == both["lm_eval:parity"]).sum()), len(both)


def case_study_markdown(table: pd.DataFrame, picks: pd.DataFrame) -> str:
    """The case-study table, the spread per benchmark and the parity result, as Markdown."""
    lines = [
        "# Cross-package case study",
        "",
        f"Model: `{table['model'].iloc[0]}` ({table['precision'].iloc[0]}), greedy, 0-shot, CPU.",
        "",
        "| benchmark | run | score | answered | items | s | what it scores | prompt |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples():
        lines.append(
            f"| {row.benchmark} | {row.run} | {row.score:.3f} | {row.answered:.2f} | {row.n_items} | "
            f"{row.seconds:.0f} | {row.scores} | {row.prompt} |"
        )
    lines += ["", "Spread across packages (each package's own run; parity runs excluded):", ""]
    for benchmark, spread in table.groupby("benchmark")["spread_pp"].first().items():
        lines.append(f"- {benchmark}: {spread:.1f} pp")
    if {"safetyrepro:parity", "lm_eval:parity"} <= set(picks["run"]):
        agree, total = parity_agreement(picks)
        lines += ["", f"Parity (our full-answer argmax = lm-eval's, same prompt): {agree} / {total} items agree."]
    return "\n".join(lines) + "\n"
