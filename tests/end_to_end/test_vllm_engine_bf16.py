"""The real-engine checks (tests/helpers/vllm_engine_checks.py) at bf16."""

from __future__ import annotations

import pytest
from helpers.vllm_engine_checks import *  # noqa: F403 (the checks and their fixtures, collected here)
from helpers.vllm_engine_checks import run_probe

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def probe(chat_model, tmp_path_factory, worker_id, data_dir) -> dict:
    return run_probe("bf16", chat_model, tmp_path_factory, worker_id, data_dir)
