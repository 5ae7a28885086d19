"""Rates corrected for scorer error with human labels (safetyrepro.analysis.scorer_correction): the estimate, its
interval's coverage of the human rate over repeated draws of 50 labels, on synthetic populations and on XSTest's
labelled completions, and the corrected verdict between two models."""

from __future__ import annotations

import numpy as np
import pytest

from safetyrepro.analysis.scorer_correction import UNDECIDED, corrected_rate, corrected_verdict
from safetyrepro.benchmarks.xstest.scorer_agreement import labelled_outcomes

LABELS, DRAWS = 50, 1000


def coverage(rng, scorer: np.ndarray, human: np.ndarray, draws: int = DRAWS) -> float:
    hits = 0
    for _ in range(draws):
        positions = rng.choice(len(scorer), LABELS, replace=False)
        rate = corrected_rate(scorer, positions, human[positions])
        hits += rate.low <= human.mean() <= rate.high
    return hits / draws


def population(rng, rate: float, miss: float, false_hit: float, size: int = 450) -> tuple[np.ndarray, np.ndarray]:
    """Human outcomes at `rate`; the scorer's flipped on a correct reply at `miss`, on a wrong one at `false_hit`."""
    human = (rng.random(size) < rate).astype(float)
    flip = np.where(human == 1, rng.random(size) < miss, rng.random(size) < false_hit)
    return np.where(flip, 1 - human, human), human


def test_the_estimate_adds_the_labelled_disagreements_to_the_scorers_rate():
    scorer = np.array([1, 1, 1, 1, 0, 0, 1, 0, 1, 1], dtype=float)
    positions, human = [0, 4, 5, 9], [0, 1, 0, 1]  # one miss of each sign among the four labelled
    rate = corrected_rate(scorer, positions, human)
    assert rate.scorer_rate == pytest.approx(0.7) and rate.estimate == pytest.approx(0.7 + (-1 + 1 + 0 + 0) / 4)
    assert rate.low < rate.estimate < rate.high and (rate.labels, rate.replies) == (4, 10)
    exact = corrected_rate(scorer, positions, scorer[positions])  # no disagreement seen: still an interval
    assert exact.estimate == pytest.approx(0.7) and exact.high - exact.low > 0.05
    everything = corrected_rate(scorer, range(10), scorer)  # every reply labelled: nothing left to estimate
    assert everything.low == everything.high == pytest.approx(0.7)


@pytest.mark.parametrize(
    ("human", "labelled", "message"),
    [
        ([1], [0], "at least 2 human labels"),
        ([1, 0], [0, 0], "each reply once"),
        ([1, 0, 1], [0, 1], "one human outcome for each labelled reply"),
        ([1, 0.5], [0, 1], "must be 0 or 1"),
        ([1, 0], [0, 5], "not one of the 5 replies"),
        ([1, 0], [-1, 0], "not one of the 5 replies"),
    ],
)
def test_bad_labels_are_one_line(human, labelled, message):
    with pytest.raises(ValueError, match=message):
        corrected_rate(np.ones(5), labelled, human)


@pytest.mark.parametrize(
    ("rate", "miss", "false_hit"),
    [(0.85, 0.0, 0.0), (0.85, 0.05, 0.0), (0.85, 0.0, 0.2), (0.6, 0.1, 0.02), (0.6, 0.3, 0.2)],
)
def test_the_interval_covers_the_human_rate_on_synthetic_populations(rate, miss, false_hit):
    """90% intervals from 50 labels, over 1,000 draws: at least 0.87 of them cover the rate of all 450 replies,
    from an exact scorer to one wrong on a third of the correct replies."""
    rng = np.random.default_rng(11)
    assert coverage(rng, *population(rng, rate, miss, false_hit)) >= 0.87


@pytest.fixture(scope="module")
def xstest_outcomes(data_dir):
    return {scorer: labelled_outcomes(data_dir, scorer) for scorer in ("rules", "strmatch")}


@pytest.mark.parametrize("scorer", ["rules", "strmatch"])
def test_on_xstests_labelled_completions_the_interval_covers_and_verdicts_hold(xstest_outcomes, scorer):
    """Held out (the pseudo-count was chosen on synthetic populations): each file's coverage over 1,000 draws of 50
    labels per model is at least 0.87, and every corrected verdict that is decided is the human labels' (Llama-2's
    replies are handled correctly more often: 0.836 against 0.707)."""
    rng = np.random.default_rng(5)
    frame = xstest_outcomes[scorer]
    files = {
        model: (group["scorer_correct"].to_numpy(float), group["human_correct"].to_numpy(float))
        for model, group in frame.groupby("labelled_model")
    }
    for scorer_outcomes, human in files.values():
        assert coverage(rng, scorer_outcomes, human) >= 0.87
    (llama, (scorer_l, human_l)), (mistral, (scorer_m, human_m)) = sorted(files.items())
    assert (llama, mistral) == ("llama2new", "mistralinstruct") and human_l.mean() > human_m.mean()
    verdicts = []
    for _ in range(300):
        pick_l, pick_m = (rng.choice(450, LABELS, replace=False) for _ in range(2))
        rate_l = corrected_rate(scorer_l, pick_l, human_l[pick_l])
        rate_m = corrected_rate(scorer_m, pick_m, human_m[pick_m])
        verdicts.append(corrected_verdict(rate_l, rate_m)[3])
    assert "b" not in verdicts and verdicts.count("a") > 100


def test_a_verdict_is_decided_only_where_the_difference_excludes_a_tie():
    rng = np.random.default_rng(3)
    scorer_a, human_a = population(rng, 0.9, 0.05, 0.05)
    scorer_b, human_b = population(rng, 0.5, 0.05, 0.05)
    picks = rng.choice(450, LABELS, replace=False)
    a = corrected_rate(scorer_a, picks, human_a[picks])
    b = corrected_rate(scorer_b, picks, human_b[picks])
    difference, low, high, verdict = corrected_verdict(a, b)
    assert verdict == "a" and low > 0 and difference == pytest.approx(a.estimate - b.estimate)
    assert corrected_verdict(b, a)[3] == "b"
    assert corrected_verdict(a, a)[3] == UNDECIDED
