"""Every input of the corpus (tests/helpers/bad_input_corpus.py) gets one line, `safetyrepro: error: <message>`,
naming the file, key or row and what is wrong; exit status 2; nothing written. The legitimate oddities it
documents as accepted (each with its reason) go through."""

from __future__ import annotations

import io
import sys

import huggingface_hub.constants
import pytest
from helpers.bad_input_corpus import CASES, expected_outcome, outcome

from safetyrepro import cli

REFUSED = [case for case in CASES if not case.accepted]
ACCEPTED = [case for case in CASES if case.accepted]


def test_the_corpus_is_large_and_its_names_unique():
    assert len(REFUSED) >= 150
    assert len({case.name for case in CASES}) == len(CASES)


def run_case(case, tmp_path, data_dir, monkeypatch, capsys) -> tuple[int, str, str]:
    """The case's command in this process, from a scratch folder, offline: exit status, stderr and the
    expected message."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv, message, stdin = case.build(scratch, data_dir)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SAFETYREPRO_DATA_DIR", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # no test reaches a hub
    data = stdin.encode() if isinstance(stdin, str) else stdin or b""  # the bytes a pipe gives, not always UTF-8
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape"))
    return cli.main(argv), capsys.readouterr().err, message


@pytest.mark.parametrize("case", REFUSED, ids=lambda case: case.name)
def test_bad_input_gets_one_message(case, tmp_path, data_dir, monkeypatch, capsys):
    status, err, message = run_case(case, tmp_path, data_dir, monkeypatch, capsys)
    assert outcome(case, status, err, message) == expected_outcome(case), err[:2000]  # as the tally script judges it
    assert status == 2, err
    assert err.count("\n") == 1 and err.startswith("safetyrepro: error: "), err[:2000]
    assert message in err, err
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("case", ACCEPTED, ids=lambda case: case.name)
def test_a_documented_oddity_goes_through(case, tmp_path, data_dir, monkeypatch, capsys):
    status, err, message = run_case(case, tmp_path, data_dir, monkeypatch, capsys)
    assert outcome(case, status, err, message) == expected_outcome(case), err[:2000]
    assert status == 0, err
    assert "error" not in err, err
