"""Tally what each input of the bad-input corpus (tests/helpers/bad_input_corpus.py) gets from a given source tree:

    python scripts/bad_input_outcomes.py [--src PATH/TO/src] [--timeout 10] [--no-plan-flag]

Each case runs `safetyrepro` in its own process (PYTHONPATH=--src, default this checkout's src), offline,
from a scratch folder; the outcome is judged as tests/end_to_end/test_bad_input_corpus.py judges every input in CI
(`bad_input_corpus.outcome`). Outcomes: `message` (exit 2, one line, the expected message), `other message`
(one `safetyrepro: error:` line naming something else), `traceback or other error` (anything else
non-zero), `accepted` (exit 0: the input went through), `hang` (past the timeout). An input the corpus
documents as accepted is `accepted as documented` when it goes through, with its reason.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from helpers.bad_input_corpus import CASES, outcome  # noqa: E402


def run_in_process_of_its_own(src: Path, data_dir: Path, case, timeout: float, plan_flag: bool) -> str:
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder) / "scratch"
        scratch.mkdir()
        argv, message, stdin = case.build(scratch, data_dir)
        argv = argv if plan_flag else [arg for arg in argv if arg != "--plan"]
        env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
        env.pop("SAFETYREPRO_DATA_DIR", None)
        command = [sys.executable, "-c", "import sys; from safetyrepro.cli import main; sys.exit(main())", *argv]
        data = stdin.encode() if isinstance(stdin, str) else stdin or b""  # bytes: not always UTF-8
        try:
            result = subprocess.run(command, input=data, capture_output=True, env=env, cwd=folder, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "hang"
    return outcome(case, result.returncode, result.stderr.decode(errors="replace"), message)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(REPO / "src"))
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--timeout", type=float, default=10, help="seconds before an input counts as a hang")
    parser.add_argument("--no-plan-flag", action="store_true", help="for a version whose `check` has no --plan")
    args = parser.parse_args()
    counts = collections.Counter()
    for case in CASES:
        result = run_in_process_of_its_own(
            Path(args.src), Path(args.data_dir), case, args.timeout, not args.no_plan_flag
        )
        counts[result] += 1
        reason = f" ({case.accepted})" if result == "accepted as documented" else ""
        print(f"{result:26} {case.name}{reason}", flush=True)
    print(f"{len(CASES)} inputs: " + ", ".join(f"{name} {count}" for name, count in counts.most_common()))


if __name__ == "__main__":
    main()
