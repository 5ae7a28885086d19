"""Reading a benchmark's data files: regular files, UTF-8 text, JSON (standard or not), JSON lines and CSV,
each problem a DataError naming the file (and its line or row); and checking a column's values."""

from __future__ import annotations

import errno
import io
import json
import os
import re
import stat
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from safetyrepro.core.errors import DataError

# Where a line of JSON lines ends: \n, \r\n or a lone \r (not str.splitlines: U+2028 may stand inside a JSON string).
JSON_LINE_END = re.compile(r"\r\n?|\n")
# JSON nested deeper than this is refused: far beyond any file we read, far below the stack's limit.
MAX_JSON_DEPTH = 100
# What a path is when it is not a regular file, by the file type of its mode.
FILE_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a named pipe",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def regular_file(path: Path, missing: str = "no such file", context: str = "") -> Path:
    """`path`, when it is a regular file once links are followed. Anything else is a DataError saying
    what it is: `missing` when nothing is there (a broken link said so), else a folder, a link loop, or a
    named pipe or device (reading one would block or never end). `context` comes before what is wrong."""
    try:
        kind = stat.S_IFMT(path.stat().st_mode)
    except (FileNotFoundError, NotADirectoryError):
        broken = f" (a broken symbolic link to {os.readlink(path)})" if os.path.islink(path) else ""
        raise DataError(f"{path}: {missing}{broken}") from None
    except OSError as exc:
        loop = exc.errno == errno.ELOOP
        problem = "not a regular file (a symbolic link loop)" if loop else f"cannot be read ({exc.strerror})"
        raise DataError(f"{path}: {context}{problem}") from None
    if kind != stat.S_IFREG:
        link = "a symbolic link to " if os.path.islink(path) else ""
        raise DataError(f"{path}: {context}not a regular file ({link}{FILE_KINDS.get(kind, 'a special file')})")
    return path


def read_text(path: Path, missing: str = "no such file", context: str = "") -> str:
    """The text of a regular file (`regular_file`): UTF-8, a leading byte-order mark dropped; a byte
    that is not UTF-8 is a DataError naming its offset and line."""
    try:
        data = regular_file(path, missing, context).read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: {context}cannot be read ({exc.strerror})") from None
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataError(f"{path}: {context}not UTF-8 text (byte {exc.start}, line {line})") from None


def load_json(text: str, where: str, malformed: str = "malformed JSON", standard: bool = False) -> Any:
    """Parse JSON text. Malformed text (`malformed`, with the parser's reason) and nesting deeper than
    MAX_JSON_DEPTH (which would exhaust the stack here or in whatever walks the value later) are a
    DataError naming `where`. With `standard`, so is what JSON's standard (RFC 8259) leaves out and Python's
    reader takes: NaN or Infinity (named by its key path), and a key given twice (a reader keeps the last)."""
    hooks = {"object_pairs_hook": _unique_keys, "parse_constant": _Constant} if standard else {}
    try:
        value = json.loads(text, **hooks)
        # each level opens a bracket: text with no more of them than the limit needs no walk
        too_deep = text.count("[") + text.count("{") > MAX_JSON_DEPTH and _json_depth(value) > MAX_JSON_DEPTH
    except RecursionError:
        too_deep = True
    except json.JSONDecodeError as exc:
        position = f"line {exc.lineno}, column {exc.colno}" if "\n" in text else f"column {exc.colno}"
        raise DataError(f"{where}: {malformed}: {exc.msg} ({position})") from None
    except _TwiceGiven as exc:
        raise DataError(f"{where}: {exc}") from None
    except ValueError as exc:  # a number past Python's digit limit
        raise DataError(f"{where}: {malformed} ({' '.join(str(exc).split())[:100]})") from None
    if too_deep:
        raise DataError(f"{where}: JSON nested more than {MAX_JSON_DEPTH} levels deep")
    if standard and ("NaN" in text or "Infinity" in text):  # no constant was read without its name in the text
        for path, node in json_nodes(value):
            if isinstance(node, _Constant):
                at = f"{json_path(path)}: " if path else ""
                raise DataError(
                    f"{where}: {at}{node} is not JSON (JSON has no NaN or Infinity: write null, or a number)"
                )
    return value


class _Constant(str):
    """NaN, Infinity or -Infinity as `load_json(standard=True)` reads them: found by their key path, then refused."""


class _TwiceGiven(ValueError):
    """A JSON object that gives a key twice."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict; a key given twice is a _TwiceGiven naming it."""
    value = dict(pairs)
    if len(value) < len(pairs):
        twice = next(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
        raise _TwiceGiven(f"key {twice!r} given twice; a JSON reader keeps only the last")
    return value


def json_nodes(value: Any) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Every value within a parsed JSON value, with its key path (object keys and list indices), walked without
    recursion, the value itself first (its path empty)."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        yield path, node
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        stack.extend(((*path, key), child) for key, child in reversed(list(children)))


def json_path(path: Sequence[str | int]) -> str:
    """A key path as messages name it: keys joined by dots, list indices in brackets (a.b[2])."""
    return "".join(
        f"[{key}]" if isinstance(key, int) else f".{key}" if index else key for index, key in enumerate(path)
    )


def _json_depth(value: Any) -> int:
    """How many arrays and objects lie within each other in a parsed JSON value."""
    return max((len(path) + 1 for path, node in json_nodes(value) if isinstance(node, dict | list)), default=0)


def read_csv(path: Path, columns: Sequence[str], missing: str = "data file not found") -> pd.DataFrame:
    """Read a benchmark CSV, failing with the file (and row) when it is missing or malformed."""
    text = read_text(path, missing, "cannot be read as CSV: ")
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except ValueError as exc:  # pandas' ParserError and EmptyDataError among them
        raise DataError(f"{path}: cannot be read as CSV: {' '.join(str(exc).split())}") from None
    _require(frame, columns, path, [f"data row {n} (after the header)" for n in range(1, len(frame) + 1)])
    return frame


def read_jsonl(path: Path, columns: Sequence[str]) -> pd.DataFrame:
    """Read a JSON-lines file, failing with the file and line number on a malformed row."""
    rows, numbers = [], []
    for number, line in enumerate(JSON_LINE_END.split(read_text(path, "data file not found")), start=1):
        if not line.strip():
            continue
        row = load_json(line, f"{path}, line {number}")
        if not isinstance(row, dict):
            raise DataError(f"{path}, line {number}: expected a JSON object")
        rows.append(row)
        numbers.append(f"line {number}")
    frame = pd.DataFrame(rows, dtype=object)  # values as written: 1.7 stays a float among integer labels
    _require(frame, columns, path, numbers)
    frame.attrs["rows"] = RowNames(numbers)  # "line N" per row, for messages about values
    return frame


class RowNames(tuple):
    """A data file's row names ("line N") kept in a frame's attrs: pandas deep-copies attrs into every
    frame derived from it, and these never change, so a copy is the same object."""

    def __deepcopy__(self, memo: dict) -> RowNames:
        return self


def _require(frame: pd.DataFrame, columns: Sequence[str], path: Path, row_names: Sequence[str]) -> None:
    """Every column present, at least one row, no empty value (the first one is named by its row)."""
    if len(frame) == 0:
        raise DataError(f"{path}: no rows")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}")
    values = frame[list(columns)]
    empty = values.isna() | values.map(lambda value: isinstance(value, str) and not value.strip())
    if empty.any(axis=None):
        row, column = next((r, c) for r, c in zip(*empty.to_numpy().nonzero()))
        raise DataError(f"{path}, {row_names[row]}: empty value in column '{columns[column]}'")


def check_values(
    frame: pd.DataFrame, column: str, allowed: Collection[Any], path: Path, row_names: Sequence[str] | None = None
) -> None:
    """Every value of `column` is in the benchmark's vocabulary; the first one that is not is named with its row."""
    bad = [i for i, value in enumerate(frame[column]) if value not in allowed or isinstance(value, bool | float)]
    if bad:
        row = row_names[bad[0]] if row_names else f"data row {bad[0] + 1} (after the header)"
        shown = sorted(map(str, allowed))
        raise DataError(
            f"{path}, {row}: {column} {frame[column].iloc[bad[0]]!r:.60} is not one of "
            f"{', '.join(shown[:8])}{', ...' if len(shown) > 8 else ''}"
        )
