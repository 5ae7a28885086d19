"""Rates corrected for scorer error with human labels (safetyrepro.analysis.scorer_correction): the estimate, its
interval's coverage of the human rate over repeated draws of 50 labels, on synthetic populations and on XSTest's
labelled completions, and the corrected verdict between two models."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from safetyrepro.analysis.scorer_correction import (
    KEPT,
    MOVED,
    OWN,
    UNDECIDED,
    corrected_rate,
    corrected_verdict,
    own_label_errors,
    own_verdicts,
    transferred_verdicts,
)
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


def transfer_cells(scores: dict[str, list[float]]) -> pd.DataFrame:
    """Two free-form configs labelled by `rules` and `strmatch`, a log-likelihood one and one of a judge."""
    configs = [
        ("c-rules", "freeform", "rules"),
        ("c-strmatch", "freeform", "strmatch"),
        ("c-logprob", "logprob", "rules"),
    ]
    configs.append(("c-judge", "freeform", "judge"))
    return pd.DataFrame(
        [
            {"model": model, "config_id": config, "scoring": scoring, "scorer": scorer, "score": score}
            for model, values in scores.items()
            for (config, scoring, scorer), score in zip(configs, values)
        ]
    )


# The net errors of two labelled models' replies: rules undercounts both by different amounts, strmatch alike.
ERRORS = pd.DataFrame(
    {
        "labelled_model": ["m1", "m1", "m2", "m2"],
        "scorer": ["rules", "strmatch", "rules", "strmatch"],
        "net_error": [0.10, 0.05, 0.02, 0.05],
        "n_labels": [450, 450, 450, 450],
    }
)


def test_labels_of_other_models_move_a_verdict_only_by_the_gap_between_their_errors():
    cells = transfer_cells({"a": [0.60, 0.50, 0.40, 0.9], "b": [0.55, 0.60, 0.30, 0.1]})
    pairs, verdicts = transferred_verdicts(cells, ERRORS)
    by_config = verdicts.set_index("config_id")
    # rules: a leads by 0.05; giving a m2's errors (+0.02) and b m1's (+0.10) puts b ahead by 0.03
    assert by_config.loc["c-rules", "status"] == UNDECIDED
    assert by_config.loc["c-rules", ["corrected_low", "corrected_high"]].tolist() == pytest.approx([-0.03, 0.13])
    # strmatch errs alike on both labelled models: the verdict is kept, the difference exactly the raw one
    assert by_config.loc["c-strmatch", "status"] == KEPT
    assert by_config.loc["c-strmatch", ["corrected_low", "corrected_high"]].tolist() == pytest.approx([-0.1, -0.1])
    # the log-likelihood config has no scorer (counted as scored, not listed); the judge has no errors measured
    assert set(by_config.index) == {"c-rules", "c-strmatch"}
    pair = pairs.iloc[0]
    assert (pair["n_configs"], pair["n_freeform"], pair[KEPT], pair[MOVED], pair[UNDECIDED]) == (3, 2, 1, 0, 1)
    # as scored: a ahead on rules and logprob, b on strmatch (1 of 3); b given the larger errors leads on rules and
    # strmatch, a on logprob (1 of 3 again)
    assert pair["rho_flip"] == pytest.approx(1 / 3)
    assert (pair["rho_flip_corrected_low"], pair["rho_flip_corrected_high"]) == pytest.approx((1 / 3, 1 / 3))
    assert (pair["labels_from"], pair["n_labels"]) == ("m1, m2", 900)


def test_the_same_errors_for_both_never_move_a_verdict_and_rho_flip_takes_each_assignments_range():
    errors = ERRORS.assign(net_error=[0.30, 0.0, 0.0, 0.0])
    cells = transfer_cells({"a": [0.50, 0.50, 0.50, 0.5], "b": [0.45, 0.40, 0.40, 0.5]})
    pairs, verdicts = transferred_verdicts(cells, errors)
    assert verdicts.set_index("config_id").loc["c-rules", "status"] == UNDECIDED  # b + 0.30 against a + 0: b ahead
    assert MOVED not in set(verdicts["status"])  # the same errors for both always keep the verdict as scored
    pair = pairs.iloc[0]
    assert pair["rho_flip"] == 0 and pair["rho_flip_corrected_high"] == pytest.approx(1 / 3)


def own_replies(models=("a", "b"), configs=("c1", "c2"), items=100) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"model": m, "config_id": c, "item_id": f"i{i}", "seed": 0}
            for m in models
            for c in configs
            for i in range(items)
        ]
    )


def test_labels_of_the_runs_own_replies_estimate_each_configs_net_error_from_its_own_labels():
    rng = np.random.default_rng(0)
    replies = own_replies()
    human = rng.random(len(replies)) < 0.6
    # the scorer misses a fifth of a's correct replies in c1 only, and none of b's
    misses = ((replies["model"] == "a") & (replies["config_id"] == "c1")).to_numpy() & (rng.random(len(replies)) < 0.2)
    scored = replies.assign(cell_config=replies["config_id"], scorer="rules", correct=(human & ~misses).astype(float))
    drawn = np.concatenate([rng.choice(np.flatnonzero(replies["model"] == m), 50, replace=False) for m in "ab"])
    labelled = replies.iloc[drawn].assign(human_correct=human[drawn])
    errors = own_label_errors(replies, scored, labelled).set_index(["labelled_model", "config_id"])
    assert set(errors.index) == {(m, c) for m in "ab" for c in ("c1", "c2")}
    residual = pd.Series(human.astype(float) - scored["correct"].to_numpy())
    truth = residual.groupby([replies["model"], replies["config_id"]]).mean()
    assert truth[("a", "c1")] > 0.05 and truth[("a", "c2")] == 0
    for key in truth.index:  # each config's own estimate, within its interval of the truth
        half = 1.7 * errors.loc[key, "variance"] ** 0.5
        assert abs(errors.loc[key, "net_error"] - truth[key]) <= half
    sizes = labelled.groupby(["model", "config_id"]).size()
    assert errors["n_labels"].to_dict() == sizes.to_dict() and (errors["n_replies"] == 100).all()


def test_a_config_whose_replies_are_all_labelled_gets_its_own_net_error_exactly():
    replies = own_replies(items=20)
    # the scorer is right on every reply of c1 and misses every correct reply of c2 (net error 0 there, 1 there)
    human = np.ones(len(replies), dtype=bool)
    correct = (replies["config_id"] == "c1").to_numpy().astype(float)
    scored = replies.assign(cell_config=replies["config_id"], scorer="rules", correct=correct)
    labelled = replies.assign(human_correct=human)  # every reply labelled
    errors = own_label_errors(replies, scored, labelled).set_index(["labelled_model", "config_id"])
    assert errors["net_error"].to_dict() == {("a", "c1"): 0.0, ("a", "c2"): 1.0, ("b", "c1"): 0.0, ("b", "c2"): 1.0}
    assert (errors["variance"] == 0).all()
    one = labelled[(labelled["config_id"] == "c1") | (labelled.index.isin([20]))]  # c2: a single label of a's
    assert set(own_label_errors(replies, scored, one)["config_id"]) == {"c1"}  # under 2 labels: not corrected
    only_some = scored[scored["config_id"] == "c1"]  # a scorer that labels the replies of one config only
    assert set(own_label_errors(replies, only_some, labelled)["config_id"]) == {"c1"}


def test_own_labels_keep_move_or_leave_undecided_each_verdict():
    cells = transfer_cells({"a": [0.50, 0.50, 0.40, 0.6], "b": [0.45, 0.30, 0.40, 0.6]})
    errors = pd.DataFrame(
        {
            "labelled_model": ["a", "a", "b", "b"],
            "scorer": ["rules", "strmatch", "rules", "strmatch"],
            "config_id": ["c-rules", "c-strmatch", "c-rules", "c-strmatch"],
            "net_error": [0.0, 0.0, 0.10, 0.0],  # the rules undercount b by 10 points
            "variance": [1e-4, 1e-4, 1e-4, 1e-4],
            "n_labels": [50, 50, 50, 50],
        }
    )
    pairs, verdicts = own_verdicts(cells, errors)
    status = verdicts.set_index("config_id")["status"]
    assert status["c-rules"] == MOVED  # a ahead by 0.05 as scored; b ahead by 0.05 corrected, the interval +-0.023
    assert status["c-strmatch"] == KEPT  # a ahead by 0.20 either way
    pair = pairs.iloc[0]
    assert (pair[KEPT], pair[MOVED], pair[UNDECIDED], pair["n_freeform"], pair["labels_from"]) == (1, 1, 0, 2, OWN)
    assert pair["rho_flip"] == 0 and pair["rho_flip_corrected_low"] == pytest.approx(1 / 3)  # logprob: a tie
    assert (pair["n_configs"], pair["n_left_out"], pair["n_labels"]) == (3, 1, 100)  # the judge's: no errors
    wide = own_verdicts(cells, errors.assign(variance=0.004))
    assert wide[1].set_index("config_id")["status"].to_dict() == {"c-rules": UNDECIDED, "c-strmatch": KEPT}
    assert wide[0].iloc[0]["rho_flip_corrected_low"] == 0  # the undecided verdict counts as a tie


def test_each_configs_corrected_rate_covers_its_human_rate_where_the_scorers_errors_differ_by_config():
    """Two models, six configs of 60 items, the scorer missing 0-20% of their correct replies by config in opposite
    orders (what pooling one net error over a model's configs gets wrong); label files of 50 replies a model and config
    drawn as `safetyrepro label` draws them, 20 from each of 3 runs."""
    from scipy import stats

    from safetyrepro.scorers.label_file import KEY, draw_replies

    rng = np.random.default_rng(11)
    rates = {"a": (0.80, 0.75, 0.70, 0.65, 0.60, 0.55), "b": (0.76, 0.74, 0.72, 0.66, 0.62, 0.50)}
    misses = {"a": np.linspace(0.0, 0.2, 6), "b": np.linspace(0.2, 0.0, 6)}
    covered, seen, decided, right = 0, 0, 0, 0
    for _ in range(3):
        rows = []
        for model in rates:
            for index, (rate, miss) in enumerate(zip(rates[model], misses[model])):
                human = rng.random(60) < rate
                correct = human & ~(rng.random(60) < miss)
                rows += [(model, f"c{index}", f"i{i}", 0, h, float(f)) for i, (h, f) in enumerate(zip(human, correct))]
        replies = pd.DataFrame(rows, columns=[*KEY, "human", "correct"])
        cells = replies.groupby(["model", "config_id"], as_index=False).agg(
            score=("correct", "mean"), human=("human", "mean")
        )
        cells = cells.assign(scoring="freeform", scorer="rules")
        truth = cells.pivot(index="config_id", columns="model", values="human")
        scored = replies[[*KEY, "correct"]].assign(cell_config=replies["config_id"], scorer="rules")
        source = replies.assign(label=replies["correct"].map({1.0: "right", 0.0: "wrong"}), request="", response="")
        for _ in range(20):
            drawn = draw_replies(source.assign(benchmark="xstest"), 50, int(rng.integers(2**32)))
            labelled = drawn[KEY].merge(replies[[*KEY, "human"]], on=KEY).rename(columns={"human": "human_correct"})
            errors = own_label_errors(replies[KEY], scored, labelled)
            rated = cells.merge(errors.rename(columns={"labelled_model": "model"}), on=["model", "config_id"])
            half = stats.t.ppf(0.95, rated["n_labels"] - 1) * rated["variance"] ** 0.5
            estimate = rated["score"] + rated["net_error"]
            covered += int(((estimate - half <= rated["human"]) & (rated["human"] <= estimate + half)).sum())
            seen += len(rated)
            verdicts = own_verdicts(cells, errors)[1].set_index("config_id")
            sure = verdicts[verdicts["status"] != UNDECIDED]
            decided += len(sure)
            ahead = np.sign(sure["corrected_low"] + sure["corrected_high"])
            right += int((ahead == np.sign(truth["a"] - truth["b"]).reindex(sure.index)).sum())
    assert covered / seen >= 0.87
    assert decided > 0 and right / decided >= 0.87
