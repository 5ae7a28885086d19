"""Bad input of the helper commands (issue 54, class 7): `parse` lines whose response is no text, JSON that
standard readers disagree on (a key given twice, NaN or Infinity), bytes that are not UTF-8; `provenance-diff`
records with the same, or with an empty key. Each gets one line naming the stdin line, or the file and key."""

from __future__ import annotations

import yaml

from helpers.bad_input_corpus import Case, _write, accepted_case, base_config, command_case

POSED = '"prompt": "Who?", "options": ["He", "She"]'  # a BBQ item posed by its prompt and options
GOOD = "{" + POSED + ', "response": "A"}\n'  # a line parse labels


def parse_case(name: str, stdin: str | bytes, message: str) -> Case:
    """`safetyrepro parse bbq` of `stdin` (bytes: not necessarily UTF-8)."""
    return command_case(name, lambda s: ["parse", "bbq"], message, stdin=stdin)


def diff_case(name: str, record: str | bytes, message: str) -> Case:
    """`safetyrepro provenance-diff` of a record file with `record` against itself."""
    return command_case(
        name, lambda s: ["provenance-diff", str(_write(s / "a.json", record)), str(s / "a.json")], message
    )


STANDARD = "JSON has no NaN or Infinity: write null, or a number"

CASES: list[Case] = [
    *(
        parse_case(
            f"parse: a response that is {what}",
            GOOD + "{" + POSED + f', "response": {value}}}\n',
            f"stdin line 2: response: expected the reply's text (a string), got {value}",
        )
        for what, value in [("null", "null"), ("a number", "7"), ("a list", '["A"]'), ("an object", '{"text": "A"}')]
    ),
    parse_case(
        "parse: a response given twice",
        "{" + POSED + ', "response": "A", "response": "B"}\n',
        "stdin line 1: key 'response' given twice; a JSON reader keeps only the last",
    ),
    parse_case(
        "parse: a NaN beside the response",
        GOOD + GOOD.replace("}", ', "score": NaN}'),
        f"stdin line 2: score: NaN is not JSON ({STANDARD})",
    ),
    parse_case(
        "parse: -Infinity in a list",
        "{" + POSED + ', "response": "A", "meta": {"logliks": [0, -Infinity]}}\n',
        f"stdin line 1: meta.logliks[1]: -Infinity is not JSON ({STANDARD})",
    ),
    parse_case(
        "parse: a byte that is not UTF-8",
        GOOD.encode() + b"{" + POSED.encode() + b', "response": "caf\xe9"}\n',
        "stdin line 2: not UTF-8 text (byte 0xe9, column 62)",
    ),
    parse_case(
        "parse: a UTF-8 sequence cut short after a Windows line end",
        GOOD.replace("\n", "\r\n").encode() + GOOD.encode()[:-3] + b"\xe2\x80\n",
        "stdin line 2: not UTF-8 text (byte 0xe2, column 60)",
    ),
    diff_case(
        "provenance-diff of a record with NaN",
        '{\n  "analysis": {\n    "parse_threshold": NaN\n  }\n}\n',
        f"a.json: analysis.parse_threshold: NaN is not JSON ({STANDARD})",
    ),
    diff_case(
        "provenance-diff of a record with Infinity in a list",
        '{"seeds": [0, 1, Infinity]}',
        f"a.json: seeds[2]: Infinity is not JSON ({STANDARD})",
    ),
    diff_case(
        "provenance-diff of a record with an empty key",
        '{"seal": "x", "": {}}',
        "a.json: an empty key (at the top level); provenance-diff names each value by its keys",
    ),
    diff_case(
        "provenance-diff of a record with an empty key inside",
        '{"models": {"m1": {"": 1}}}',
        "a.json: an empty key (in models.m1); provenance-diff names each value by its keys",
    ),
    diff_case(
        "provenance-diff of a record with a key given twice",
        '{"packages": {"numpy": "2.4.6", "numpy": "2.4.7"}}',
        "a.json: key 'numpy' given twice; a JSON reader keeps only the last",
    ),
    # documented as accepted (docs/bad-inputs.md): each must go through
    accepted_case(
        parse_case("parse: a byte-order mark and Windows line ends", "\ufeff" + GOOD.replace("\n", "\r\n") * 2, ""),
        "editors on some systems write them; the mark is dropped and any line end ends a line",
    ),
    accepted_case(
        parse_case("parse: old Mac line ends", GOOD.replace("\n", "\r") * 2, ""),
        "a lone carriage return ends a line, as the JSON-lines readers of the data files take it",
    ),
]


def label_case(name: str, argv: list[str], message: str) -> Case:
    """`safetyrepro label` of a good config of XSTest, run or not."""

    def build(scratch, data_dir):
        config = _write(scratch / "config.yaml", yaml.safe_dump(base_config(data_dir, "xstest")))
        return ["label", "--configfile", str(config), *argv, "--out", str(scratch / "l.csv")], message, None

    return Case(name, build)


CASES += [
    label_case(
        "label: a benchmark whose replies have no human labels",
        ["--benchmark", "bbq"],
        "label: --benchmark bbq: give a benchmark of this run whose replies have human labels (xstest)",
    ),
    label_case(
        "label: one reply a config",
        ["--benchmark", "xstest", "--per-config", "1"],
        "label: --per-config 1: the correction needs at least 2 labels a config",
    ),
    label_case(
        "label: a config not run yet",
        ["--benchmark", "xstest"],
        "label: results holds no run's cells and items: run the config first",
    ),
]
