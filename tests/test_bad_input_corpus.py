"""Every input of the corpus (tests/bad_input_corpus.py) gets one line, `safetyrepro: error: <message>`,
naming the file, key or row and what is wrong; exit status 2; nothing written."""

from __future__ import annotations

import io
import sys

import huggingface_hub.constants
import pytest
from bad_input_corpus import CASES

from safetyrepro import cli


def test_the_corpus_is_large_and_its_names_unique():
    assert len(CASES) >= 150
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_bad_input_gets_one_message(case, tmp_path, data_dir, monkeypatch, capsys):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv, message, stdin = case.build(scratch, data_dir)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SAFETYREPRO_DATA_DIR", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # no test reaches a hub
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin or ""))
    status = cli.main(argv)
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and err.startswith("safetyrepro: error: "), err[:2000]
    assert message in err, err
    assert not (tmp_path / "results").exists()
