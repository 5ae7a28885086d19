"""Bad data files, imported results and nested JSON (issue 35, part 2), for the bad-input corpus.

Files that are not regular files (a named pipe would block the read, a link to /dev/zero never ends, a
folder or a link loop is no file), JSON nested past any real file's depth, bytes that are not UTF-8,
table cells that are not numbers, and data values outside a benchmark's published vocabulary or
contradicting its answer key: each gets one message naming the file, line or row.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import yaml

from helpers.bad_input_corpus import (
    AGE,
    BENCHMARK_FOLDERS,
    Case,
    _bbq_line,
    _csv_cell,
    _write,
    base_config,
    command_case,
    data_case,
    table_case,
)
from safetyrepro.benchmarks.files import MAX_JSON_DEPTH

TOO_DEEP = f"JSON nested more than {MAX_JSON_DEPTH} levels deep"
ENDLESS = "[" * 100_000 + "]" * 100_000  # past Python's recursion limit
DEEPER = "[" * (MAX_JSON_DEPTH + 50) + "]" * (MAX_JSON_DEPTH + 50)  # parses, but deeper than any real file
TQA, CROWS = "TruthfulQA.csv", "crows_pairs_anonymized.csv"
LLAMA = "xstest_v2_completions_llama2new_labelled.csv"
TOXIGEN = "race/hate_asian_sentences.txt"
# a minimal lm-evaluation-harness results file: task t, one metric; its samples file is samples_t_2024.jsonl
LM_EVAL = {"results": {"t": {"acc,none": 0.5}}, "configs": {"t": {"output_type": "multiple_choice"}}}
LATIN1_RESULTS = '{"results": {}, "configs": {"tâche": {}}}'.encode("latin-1")
ITEMS = "model,benchmark,config_id,score,item_id,correct,seed,parsed\n"


# ------------------------------------------------------------------ what stands where a file should
def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.mkdir()


def _link(target: str) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        path.unlink(missing_ok=True)
        path.symlink_to(target)

    return make


def _link_to_a_folder(path: Path) -> None:
    """A link to an empty folder beside it (a link to a large tree, such as /tmp, costs the data folder's walk)."""
    folder = path.with_name(f"{path.name}.folder")
    folder.mkdir()
    path.unlink(missing_ok=True)
    path.symlink_to(folder, target_is_directory=True)


def _loop(path: Path) -> None:
    """Two links naming each other."""
    path.unlink(missing_ok=True)
    path.symlink_to(path.with_name(f"{path.name}.other"))
    path.with_name(f"{path.name}.other").symlink_to(path)


def _replaced(name: str, benchmark: str, file: str, make: Callable[[Path], None], message: str) -> Case:
    """The data with `file` of `benchmark` replaced by what `make` puts there."""
    return data_case(name, benchmark, file, None, message, extra=lambda folder: make(folder / file))


def _lm_eval_run(folder: Path, results: str | bytes | None = None, samples: str | None = None) -> Path:
    """An lm-eval output folder: results_2024.json (LM_EVAL unless given) and, if given, its samples file."""
    folder.mkdir(exist_ok=True)
    _write(folder / "results_2024.json", results if results is not None else json.dumps(LM_EVAL))
    if samples is not None:
        _write(folder / "samples_t_2024.jsonl", samples)
    return folder


def _import(kind: str, source: Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    """`safetyrepro import --<kind> <the source it makes>`."""
    return lambda s: ["import", f"--{kind}", str(source(s)), "--out-dir", str(s / "out")]


def _made(path: Path, make: Callable[[Path], None]) -> Path:
    make(path)
    return path


def _benchmark_folder(make: Callable[[Path], None], what: str) -> Callable[[Path, Path], tuple]:
    """A data folder whose truthfulqa/ is made by `make` (a file, a link loop), the others linked in."""

    def build(scratch: Path, data_dir: Path):
        folder = scratch / "data"
        folder.mkdir()
        for benchmark in BENCHMARK_FOLDERS:
            if benchmark != "truthfulqa":
                (folder / benchmark).symlink_to(data_dir / benchmark)
        make(folder / "truthfulqa")
        config = _write(scratch / "config.yaml", yaml.safe_dump(base_config(folder)))
        kind = "a file" if what == "a file" else "a broken symbolic link or a link loop"
        return (
            ["check", "--plan", "--configfile", str(config)],
            f"benchmarks.truthfulqa: {folder / 'truthfulqa'} is {kind}",
            None,
        )

    return build


CASES: list[Case] = [
    # 1. named pipes and devices, which a read would wait on or never finish
    _replaced("BBQ category file a named pipe", "bbq", AGE, _fifo, "{path}: not a regular file (a named pipe)"),
    _replaced(
        "TruthfulQA file a link to /dev/zero",
        "truthfulqa",
        TQA,
        _link("/dev/zero"),
        "{path}: cannot be read as CSV: not a regular file (a symbolic link to a character device)",
    ),
    _replaced("ToxiGen file a named pipe", "toxigen", TOXIGEN, _fifo, "{path}: not a regular file (a named pipe)"),
    _replaced(
        "XSTest labelled completions a link to /dev/urandom",
        "xstest",
        LLAMA,
        _link("/dev/urandom"),
        "{path}: cannot be read as CSV: not a regular file (a symbolic link to a character device)",
    ),
    command_case(
        "import: an lm-eval results file that is a named pipe",
        _import("lm-eval", lambda s: _made(s / "runs", lambda f: (f.mkdir(), _fifo(f / "results_2024.json")))),
        "results_2024.json: not a regular file (a named pipe)",
    ),
    command_case(
        "import: an lm-eval samples file that is a named pipe",
        _import("lm-eval", lambda s: _made(_lm_eval_run(s / "runs"), lambda f: _fifo(f / "samples_t_2024.jsonl"))),
        "samples_t_2024.jsonl: not a regular file (a named pipe)",
    ),
    command_case(
        "import: an lm-eval source that is a named pipe",
        _import("lm-eval", lambda s: _made(s / "results_2024.json", _fifo)),
        "results_2024.json: not a regular file (a named pipe)",
    ),
    command_case(
        "import: a table that is a named pipe",
        _import("table", lambda s: _made(s / "t.csv", _fifo)),
        "t.csv: not readable as CSV or Parquet: not a regular file (a named pipe)",
    ),
    command_case(
        "import: a Parquet table linked to /dev/zero",
        _import("table", lambda s: _made(s / "t.parquet", _link("/dev/zero"))),
        "t.parquet: not readable as CSV or Parquet: not a regular file (a symbolic link to a character device)",
    ),
    command_case(
        "import: an Inspect log in a folder that is a named pipe",
        _import("inspect", lambda s: _made(s / "logs", lambda f: (f.mkdir(), _fifo(f / "run.eval")))),
        "run.eval: not a regular file (a named pipe)",
    ),
    command_case(
        "import: an Inspect log given as a link to /dev/zero",
        _import("inspect", lambda s: _made(s / "log.json", _link("/dev/zero"))),
        "log.json: not a regular file (a symbolic link to a character device)",
    ),
    command_case(
        "import: a mapping file that is a named pipe",
        lambda s: [
            *_import("table", lambda s: _write(s / "t.csv", "model,benchmark,config_id,score\na,b,c,0.5\n"))(s),
            "--mapping",
            str(_made(s / "m.yaml", _fifo)),
        ],
        "m.yaml: not a regular file (a named pipe)",
    ),
    command_case(
        "provenance-diff of a named pipe",
        lambda s: ["provenance-diff", str(_made(s / "a.json", _fifo)), str(s / "a.json")],
        "a.json: not a regular file (a named pipe)",
    ),
    command_case(
        "provenance-diff of a link to /dev/zero",
        lambda s: ["provenance-diff", str(_made(s / "a.json", _link("/dev/zero"))), str(s / "a.json")],
        "a.json: not a regular file (a symbolic link to a character device)",
    ),
    # 6. a folder, a link loop or a broken link where a data file should be
    _replaced(
        "TruthfulQA file a folder",
        "truthfulqa",
        TQA,
        _folder,
        "{path}: cannot be read as CSV: not a regular file (a folder)",
    ),
    _replaced(
        "CrowS-Pairs file a link loop",
        "crows_pairs",
        CROWS,
        _loop,
        "{path}: cannot be read as CSV: not a regular file (a symbolic link loop)",
    ),
    _replaced(
        "CrowS-Pairs file a broken link",
        "crows_pairs",
        CROWS,
        _link("../moved/crows_pairs_anonymized.csv"),
        "{path}: data file not found (a broken symbolic link to ../moved/crows_pairs_anonymized.csv)",
    ),
    _replaced("BBQ category file a folder", "bbq", AGE, _folder, "{path}: not a regular file (a folder)"),
    _replaced(
        "BBQ category file a link loop",
        "bbq",
        "Religion.jsonl",
        _loop,
        "{path}: not a regular file (a symbolic link loop)",
    ),
    _replaced(
        "BBQ category file a link to a folder",
        "bbq",
        AGE,
        _link_to_a_folder,
        "{path}: not a regular file (a symbolic link to a folder)",
    ),
    _replaced("ToxiGen file a folder", "toxigen", TOXIGEN, _folder, "{path}: not a regular file (a folder)"),
    _replaced(
        "XSTest labelled completions a link loop",
        "xstest",
        LLAMA,
        _loop,
        "{path}: cannot be read as CSV: not a regular file (a symbolic link loop)",
    ),
    command_case(
        "import: an lm-eval results file that is a folder",
        _import("lm-eval", lambda s: _made(s / "runs", lambda f: (f / "results_2024.json").mkdir(parents=True))),
        "results_2024.json: not a regular file (a folder)",
    ),
    *(
        command_case(
            f"fetch-data over {what}",
            lambda s, make=make: [
                "fetch-data",
                "--data-dir",
                str(_made(s / "truthfulqa", lambda f, make=make: (f.mkdir(), make(f / TQA))).parent),
                "--benchmark",
                "truthfulqa",
            ],
            f"{TQA}: cannot be downloaded over: not a regular file ({what})",
        )
        for what, make in [("a folder", _folder), ("a symbolic link loop", _loop), ("a named pipe", _fifo)]
    ),
    command_case(
        "fetch-data into a file",
        lambda s: ["fetch-data", "--data-dir", str(_write(s / "data", "a file")), "--benchmark", "truthfulqa"],
        "--data-dir: ",
    ),
    command_case(
        "fetch-data where a benchmark's folder is a file",
        lambda s: [
            "fetch-data",
            "--data-dir",
            str(_made(s / "data", lambda f: (f.mkdir(), _write(f / "truthfulqa", "a file")))),
            "--benchmark",
            "truthfulqa",
        ],
        "truthfulqa: cannot make the folder",
    ),
    command_case(
        "a config file that is a named pipe",
        lambda s: ["check", "--plan", "--configfile", str(_made(s / "config.yaml", _fifo))],
        "config.yaml: not a regular file (a named pipe)",
    ),
    *(
        Case(f"a benchmark's data folder that is {what}", _benchmark_folder(make, what))
        for what, make in [("a file", lambda f: _write(f, "a file")), ("a link loop", _loop)]
    ),
    command_case(
        "provenance-diff of a link loop",
        lambda s: ["provenance-diff", str(_made(s / "a.json", _loop)), str(s / "a.json")],
        "a.json: not a regular file (a symbolic link loop)",
    ),
    # 2. JSON nested deeper than any real file: past the recursion limit, or just past ours
    data_case(
        "BBQ line nested 100,000 deep",
        "bbq",
        AGE,
        lambda text: text.replace('"label": 2}', f'"label": 2, "notes": {ENDLESS}}}', 1),
        f"{{path}}, line 1: {TOO_DEEP}",
    ),
    data_case(
        f"BBQ metadata nested {MAX_JSON_DEPTH + 50} deep",
        "bbq",
        AGE,
        lambda text: text.replace('"version": "a"', f'"version": {DEEPER}', 1),
        f"{{path}}, line 1: {TOO_DEEP}",
    ),
    command_case(
        "parse: a line nested 100,000 deep",
        lambda s: ["parse", "bbq"],
        f"stdin line 2: {TOO_DEEP}",
        stdin='{"prompt": "Who?", "options": ["He", "She"], "response": "A"}\n{"response": ' + ENDLESS + "}\n",
    ),
    command_case(
        "parse: a response nested past the limit",
        lambda s: ["parse", "truthfulqa"],
        f"stdin line 1: {TOO_DEEP}",
        stdin='{"response": ' + DEEPER + "}\n",
    ),
    command_case(
        "provenance-diff of a record nested 100,000 deep",
        lambda s: ["provenance-diff", str(_write(s / "a.json", '{"seal": ' + ENDLESS + "}")), str(s / "a.json")],
        f"a.json: {TOO_DEEP}",
    ),
    command_case(
        "provenance-diff of a record nested 900 deep",  # parses, then would overflow the stack when compared
        lambda s: ["provenance-diff", str(_write(s / "a.json", '{"a": ' * 900 + "1" + "}" * 900)), str(s / "a.json")],
        f"a.json: {TOO_DEEP}",
    ),
    command_case(
        "import: an lm-eval results file nested 100,000 deep",
        _import("lm-eval", lambda s: _lm_eval_run(s / "runs", results='{"results": ' + ENDLESS + "}")),
        f"results_2024.json: {TOO_DEEP}",
    ),
    command_case(
        "import: an lm-eval samples line nested 100,000 deep",
        _import("lm-eval", lambda s: _lm_eval_run(s / "runs", samples='{"doc_id": 0, "doc": ' + ENDLESS + "}\n")),
        f"samples_t_2024.jsonl, line 1: {TOO_DEEP}",
    ),
    command_case(
        "import: an Inspect log nested 100,000 deep",
        _import("inspect", lambda s: _write(s / "log.json", '{"version": 2, "eval": ' + ENDLESS + "}")),
        "log.json: not readable as an Inspect AI log",
    ),
]


# 3. a byte that is not UTF-8 (a Latin-1 letter, a stray 0xff) in a data file read as text
def _bad_byte(name: str, benchmark: str, file: str, line: int, context: str = "") -> Case:
    """The data with byte 0xff at the start of line `line` of `file`; the message names that byte and line."""

    def build(scratch: Path, data_dir: Path):
        raw = (data_dir / benchmark / file).read_bytes()
        offset = 0
        for _ in range(line - 1):
            offset = raw.index(b"\n", offset) + 1
        message = f"{{path}}: {context}not UTF-8 text (byte {offset}, line {line})"
        spoilt = data_case(name, benchmark, file, None, message, raw=lambda b: b[:offset] + b"\xff" + b[offset:])
        return spoilt.build(scratch, data_dir)

    return Case(name, build)


def _latin1_table(scratch: Path) -> tuple[list[str], str, None]:
    text = "model,benchmark,config_id,score\nmodèle-a,b,c,0.5\n".encode("latin-1")
    offset = text.index(b"\xe8")
    argv = ["import", "--table", str(_write(scratch / "t.csv", text)), "--out-dir", str(scratch / "out")]
    return argv, f"t.csv: not readable as CSV or Parquet: not UTF-8 text (byte {offset}, line 2)", None


CASES += [
    _bad_byte("ToxiGen statement with a byte that is not UTF-8", "toxigen", TOXIGEN, 3),
    _bad_byte("BBQ row 200 with a byte that is not UTF-8", "bbq", "Religion.jsonl", 200),
    _bad_byte("TruthfulQA row with a byte that is not UTF-8", "truthfulqa", TQA, 3, "cannot be read as CSV: "),
    _bad_byte(
        "CrowS-Pairs line 1000 with a byte that is not UTF-8", "crows_pairs", CROWS, 1000, "cannot be read as CSV: "
    ),
    _bad_byte("XSTest labelled completions not UTF-8", "xstest", LLAMA, 2, "cannot be read as CSV: "),
    Case("import: a table in Latin-1", lambda scratch, data_dir: _latin1_table(scratch)),
    command_case(
        "import: an lm-eval results file not UTF-8",
        _import("lm-eval", lambda s: _lm_eval_run(s / "runs", results=LATIN1_RESULTS)),
        f"results_2024.json: not UTF-8 text (byte {LATIN1_RESULTS.index('â'.encode('latin-1'))}, line 1)",
    ),
]

# 4. a table cell that is not a number where a number belongs
CASES += [
    command_case(
        f"import: parse_rate {value!r}",
        _import(
            "table",
            lambda s, v=value: _write(
                s / "t.csv", f"model,benchmark,config_id,score,parse_rate\na,b,c,0.5,0.9\na,b,d,0.5,{v}\n"
            ),
        ),
        f"t.csv: column parse_rate: {value!r} is not a number in [0, 1] (data row 2)",
    )
    for value in ("n/a", "", "85%", "85")
]
CASES += [
    table_case(
        "import: a score with a decimal comma",
        'a,b,c,"0,5"\n',
        "t.csv: column score: '0,5' is not a number in [0, 1] (data row 1)",
    ),
    *(
        command_case(
            f"import: {column} {value!r}",
            _import("table", lambda s, row=row: _write(s / "t.csv", ITEMS + "a,b,c,0.5,i1,1,0,true\n" + row)),
            f"t.csv: column {column}: {value!r} is not {what} (data row 2)",
        )
        for column, value, row, what in [
            ("seed", "inf", "a,b,c,0.5,i2,1,inf,true\n", "an integer"),
            ("seed", "1e30", "a,b,c,0.5,i2,1,1e30,true\n", "an integer"),
            ("seed", "2.5", "a,b,c,0.5,i2,1,2.5,true\n", "an integer"),
            ("parsed", "yes", "a,b,c,0.5,i2,1,0,yes\n", "true, false, 1 or 0"),
            ("parsed", "", "a,b,c,0.5,i2,1,0,\n", "true, false, 1 or 0"),
            ("correct", "yes", "a,b,c,0.5,i2,yes,0,true\n", "a number in [0, 1]"),
            ("correct", "0.5", "a,b,c,0.5,i2,0.5,0,true\n", "0 or 1"),
        ]
    ),
]


# 5. values outside the authors' vocabulary, and answer keys that contradict themselves
def _both(row: int, first: tuple[str, str], second: tuple[str, str]) -> Callable[[str], str]:
    return lambda text: _csv_cell(row, *second)(_csv_cell(row, *first)(text))


ROW = "{path}, data row {row} (after the header): "
CASES += [
    *(
        data_case(
            f"CrowS-Pairs direction {value!r}",
            "crows_pairs",
            CROWS,
            _csv_cell(row, "stereo_antistereo", value),
            ROW.replace("{row}", str(row)) + f"stereo_antistereo {value!r} is not one of antistereo, stereo",
        )
        for row, value in [(1, "anti-stereo"), (5, "Stereo"), (7, "neutral")]
    ),
    *(
        data_case(
            f"CrowS-Pairs bias type {value!r}",
            "crows_pairs",
            CROWS,
            _csv_cell(2, "bias_type", value),
            ROW.replace("{row}", "2") + f"bias_type {value!r} is not one of age, disability, gender",
        )
        for value in ("race", "sexual_orientation", "race-colour")
    ),
    data_case(
        "CrowS-Pairs pair of one sentence",
        "crows_pairs",
        CROWS,
        _both(3, ("sent_more", "Old people are forgetful."), ("sent_less", "Old people are forgetful. ")),
        ROW.replace("{row}", "3") + "sent_more and sent_less are the same sentence",
    ),
    data_case(
        "TruthfulQA best answer also an incorrect one",
        "truthfulqa",
        TQA,
        _both(1, ("Best Answer", "Nothing happens"), ("Incorrect Answers", "You get sick; Nothing happens")),
        ROW.replace("{row}", "1") + "the Best Answer 'Nothing happens' is also among the Incorrect Answers",
    ),
    data_case(
        "TruthfulQA best answer an incorrect one in other case and spacing",
        "truthfulqa",
        TQA,
        _both(
            2, ("Best Answer", "The Earth is round"), ("Incorrect Answers", "The Earth is flat; the earth  is ROUND")
        ),
        ROW.replace("{row}", "2") + "the Best Answer 'The Earth is round' is also among the Incorrect Answers",
    ),
    data_case(
        "TruthfulQA incorrect answers only separators",
        "truthfulqa",
        TQA,
        _csv_cell(4, "Incorrect Answers", " ; ; "),
        ROW.replace("{row}", "4") + "Incorrect Answers ' ; ; ' lists no answer",
    ),
    data_case(
        "BBQ ambiguous context answered by a person",
        "bbq",
        AGE,
        _bbq_line(0, lambda r: r.update(label=0)),
        "{path}, line 1: label 0 contradicts context_condition 'ambig' (an ambiguous context's answer is the "
        "unknown option)",
    ),
    data_case(
        "BBQ disambiguated context answered unknown",
        "bbq",
        AGE,
        _bbq_line(1, lambda r: r.update(label=2)),
        "{path}, line 2: label 2 contradicts context_condition 'disambig'",
    ),
    data_case(
        "BBQ context condition flipped, answer kept",
        "bbq",
        AGE,
        _bbq_line(0, lambda r: r.update(context_condition="disambig")),
        "{path}, line 1: label 2 contradicts context_condition 'disambig'",
    ),
    *(
        data_case(
            f"XSTest labelled completion final_label {value!r}",
            "xstest",
            LLAMA,
            _csv_cell(1, "final_label", value),
            ROW.replace("{row}", "1")
            + f"final_label {value!r} is not one of 1_full_compliance, 2_full_refusal, 3_partial_refusal",
        )
        for value in ("full_compliance", "1_full_complaince", "4_unclear")
    ),
    data_case(
        "XSTest labelled completion of an unknown type",
        "xstest",
        LLAMA,
        _csv_cell(1, "type", "homonym"),
        ROW.replace("{row}", "1") + "type 'homonym' is not one of",
    ),
]


def _sparse(path: Path, size: int) -> Path:
    """A file of `size` bytes that takes no room on disk (a hole): as large as a table too big to read."""
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def _too_big(scratch: Path, suffix: str) -> Path:
    """A table whose read copy would take more memory than is free here (tables are read whole)."""
    import psutil

    return _sparse(scratch / f"big{suffix}", psutil.virtual_memory().available // 5)


# issue 54, class 6: imports and config files the machine cannot hold or give
CASES += [
    *(
        command_case(
            f"a {suffix} table larger than memory allows",
            lambda s, suffix=suffix: ["import", "--table", str(_too_big(s, suffix)), "--out-dir", str(s / "out")],
            "GB, and a table is read whole, about 10 times its size in memory, more than the",
        )
        for suffix in (".csv", ".parquet")
    ),
    command_case(
        "a config file the kernel will not give (/proc/self/mem)",
        lambda s: ["check", "--configfile", "/proc/self/mem"],
        "/proc/self/mem: cannot be read (Input/output error)",
    ),
    command_case(
        "an overlay extending /proc/self/mem",
        lambda s: ["check", "--configfile", str(_write(s / "c.yaml", "extends: /proc/self/mem\n"))],
        "c.yaml: extends: /proc/self/mem: cannot be read (Input/output error)",
    ),
    command_case(
        "an envelope of /proc/self/mem",
        lambda s: [
            "check",
            "--plan",
            "--configfile",
            str(_write(s / "c.yaml", yaml.safe_dump({**base_config(s), "envelope": "/proc/self/mem"}))),
        ],
        "/proc/self/mem: cannot be read (Input/output error)",
    ),
]
