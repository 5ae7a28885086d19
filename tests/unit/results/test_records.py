"""A job's record (safetyrepro.results.records): what makes a result current, and what makes it outdated."""

from __future__ import annotations

import os

from safetyrepro.results.records import NO_RECORD, fingerprint, record_problem, write_record


def recorded_job(root):
    """A results folder with one job's input, its two outputs and its record."""
    results = root / "results"
    (results / "cells").mkdir(parents=True)
    (results / "cells" / "a.json").write_text('{"score": 0.5}')
    outputs = [results / "table.parquet", results / "table.md"]
    for out in outputs:
        out.write_text(out.name)
    record = results / "jobs" / "table.parquet.json"
    inputs = [results / "cells" / "a.json", root / "data.csv"]
    inputs[1].write_text("outside the results: not recorded")
    write_record(record, fingerprint({"code": "x"}), outputs, inputs, results)
    return results, record, outputs


def test_a_record_vouches_for_its_outputs_wherever_the_folder_goes(tmp_path):
    results, record, outputs = recorded_job(tmp_path)
    assert record_problem(record, fingerprint({"code": "x"}), outputs, results) is None
    moved = tmp_path / "elsewhere"
    results.rename(moved)
    assert (
        record_problem(
            moved / "jobs" / "table.parquet.json",
            fingerprint({"code": "x"}),
            [moved / "table.parquet", moved / "table.md"],
            moved,
        )
        is None
    )


def test_other_settings_other_bytes_or_another_input_make_a_result_outdated(tmp_path):
    results, record, outputs = recorded_job(tmp_path)
    assert "other settings" in record_problem(record, fingerprint({"code": "y"}), outputs, results)
    (results / "cells" / "a.json").write_text('{"score": 0.75}')
    assert "made from another" in record_problem(record, fingerprint({"code": "x"}), outputs, results)
    (results / "cells" / "a.json").write_text('{"score": 0.5}')
    assert record_problem(record, fingerprint({"code": "x"}), outputs, results) is None
    outputs[1].write_text("edited by hand")
    os.utime(outputs[1], (0, 0))  # however old it looks
    assert "is not the file its record names" in record_problem(record, fingerprint({"code": "x"}), outputs, results)


def test_a_result_without_a_record_or_with_a_broken_one_is_named(tmp_path):
    results, record, outputs = recorded_job(tmp_path)
    record.write_text("{")
    assert "unreadable" in record_problem(record, fingerprint({"code": "x"}), outputs, results)
    record.unlink()
    assert record_problem(record, fingerprint({"code": "x"}), outputs, results) == NO_RECORD
