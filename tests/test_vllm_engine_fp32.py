"""The real-engine checks (tests/vllm_engine_checks.py) at fp32, and a prompt over the context."""

from __future__ import annotations

import pytest
from vllm_engine_checks import *  # noqa: F403 (the checks and their fixtures, collected here)
from vllm_engine_checks import run_probe

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def probe(chat_model, tmp_path_factory, worker_id, data_dir) -> dict:
    return run_probe("fp32", chat_model, tmp_path_factory, worker_id, data_dir)


def test_a_prompt_longer_than_the_limit_is_cut_alike_on_both(probe):
    long = probe["long_prompt"]
    assert long["tokens"] > 4096 and long["context"] == 32768
    assert long["max_model_len"] == 4096 + 12  # the longest prompt kept and the run's longest generation
    assert long["hf"] == long["vllm"]
