"""The case study's parity check on the embedded gemma-3-270m (docs/case-study.md#parity): our full-answer logprob
path against lm-eval's HF backend on real TruthfulQA items, the same prompt given to both."""

from __future__ import annotations

import pytest
from helpers.envelopes import STUDY, case_study_settings

from safetyrepro.case_study import case_items, drivers
from safetyrepro.core.model_spec import ModelSpec

PARITY_ITEMS = 6


@pytest.mark.slow
@pytest.mark.e2e  # lm-eval against our pipeline on the real model: minutes
def test_parity_our_full_answer_argmax_equals_lm_evals(data_dir, embedded_model_path, tmp_path):
    """Same prompt (the parity template), same model, full answer texts as continuations: our HF
    backend and lm-eval's HFLM pick the same option on every item and agree on every option's
    log-likelihood. At fp32 (a third of bf16's time on CPU) the two packages differ only by the
    order of floating-point sums (batch composition, padding); the case study's bf16 anchor adds
    rounding of about 0.1 nat on top."""
    settings = case_study_settings(data_dir, truthfulqa={"n_items": PARITY_ITEMS})
    items = case_items(settings, "truthfulqa", PARITY_ITEMS)
    template, delimiter = STUDY["parity"]["template"], STUDY["parity"]["target_delimiter"]
    ours = drivers.load_ours(ModelSpec("ours", str(embedded_model_path), "fp32", "off"), batch_size=8)
    ours_logliks = drivers.full_answer_logliks(ours, template, delimiter, items)  # run_ours_parity's argmax of these
    ours_picks = drivers.argmax_picks(items, ours_logliks)
    del ours
    name = drivers.write_parity_task(tmp_path, "parity_test", template, delimiter, items)
    model = drivers.load_lm_eval_model(str(embedded_model_path), "fp32", batch_size=8)
    samples = drivers.run_lm_eval(model, tmp_path, [name])[name]
    theirs = drivers.lm_eval_picks(samples, items, builtin=False)
    assert [p.item_id for p in theirs] == [i.item.item_id for i in items]
    assert [p.choice for p in ours_picks] == [p.choice for p in theirs]
    assert [p.correct for p in ours_picks] == [p.correct for p in theirs]
    theirs_logliks = [drivers.lm_eval_logliks(sample) for sample in samples]
    assert [len(options) for options in ours_logliks] == [len(options) for options in theirs_logliks]
    gaps = [abs(a - b) for mine, other in zip(ours_logliks, theirs_logliks) for a, b in zip(mine, other)]
    print(f"largest log-likelihood difference: {max(gaps):.2e} nats")
    assert max(gaps) < 1e-3
    assert len({p.choice for p in theirs}) > 1  # not a degenerate "always A"
