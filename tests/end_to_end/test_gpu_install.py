"""The GPU install of docs/gpu.md resolves with constraints-gpu.txt, and the file pins everything that install takes.

The test runs the install as a pip dry run (scripts/gpu_constraints_check.py) against the package index: about a
minute, most of it pip fetching the wheels' metadata. Without the index it is skipped, except under CI (CI=true),
where it fails. The checker itself is checked on made-up reports in tests/repository/test_gpu_constraints.py.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest
from helpers.session import in_ci, script_module

check = script_module("gpu_constraints_check")

INDEX = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/")


def index_unreachable() -> str | None:
    """Why the package index cannot be read (None: it can)."""
    try:
        with urllib.request.urlopen(INDEX.rstrip("/") + "/pip/", timeout=10) as response:
            response.read(1)
    except OSError as error:
        return f"{INDEX} is unreachable ({error})"
    return None


@pytest.mark.e2e
def test_gpu_install_dry_run_resolves_and_is_fully_pinned():
    reason = index_unreachable()
    if reason:
        if in_ci():
            pytest.fail(reason + " and CI is set: the GPU dry run must run in CI")
        pytest.skip(reason)
    # constraints-gpu.txt is resolved for CPython 3.11 on Linux x86_64; elsewhere pip would resolve differently
    assert sys.version_info[:2] == (3, 11) and platform.machine() == "x86_64" and sys.platform == "linux", (
        f"the GPU dry run needs Python 3.11 on Linux x86_64, not {platform.python_version()} on {sys.platform} {platform.machine()}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "report.json"
        result = check.dry_run(check.GPU_PINS, report_path)
        assert result.returncode == 0, result.stdout + result.stderr
        report = json.loads(report_path.read_text())
    gpu, cpu = check.read_pins(check.GPU_PINS), check.read_pins(check.CPU_PINS)
    installed = check.installed(report)
    assert installed["vllm"][1] == "0.33.0" and installed["torch"][1] == "2.14.0"
    assert check.problems(report, gpu, cpu) == []
    # and every pin is used: the file holds nothing the install does not take
    assert set(gpu) == set(installed), set(gpu) ^ set(installed)
