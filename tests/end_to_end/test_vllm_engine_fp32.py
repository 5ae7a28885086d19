"""The real-engine checks (tests/helpers/vllm_engine_checks.py) at fp32, and a prompt over the context."""

from __future__ import annotations

import pytest
from helpers.vllm_engine_checks import *  # noqa: F403 (the checks and their fixtures, collected here)
from helpers.vllm_engine_checks import CHAT_MODEL_CONTEXT, run_probe

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def probe(chat_model, tmp_path_factory, worker_id, data_dir) -> dict:
    return run_probe("fp32", chat_model, tmp_path_factory, worker_id, data_dir)


def test_a_prompt_longer_than_the_limit_is_cut_alike_on_both(probe):
    """A prompt over the context the model's tokenizer states: both backends keep its BOS and its last
    tokens, with room for the run's longest generation (12 tokens), and the engine starts at that context."""
    long = probe["long_prompt"]
    assert long["tokens"] > CHAT_MODEL_CONTEXT and long["context"] == CHAT_MODEL_CONTEXT
    assert long["max_model_len"] == CHAT_MODEL_CONTEXT  # the longest prompt kept and the run's longest generation
    assert long["hf"] == long["vllm"]
