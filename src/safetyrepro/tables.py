"""Writing result files atomically (temporary file in the same folder, then rename)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import pandas as pd


def _atomic(path: Path, write: Callable[[Path], None]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        write(Path(temporary))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_parquet(frame: pd.DataFrame, path: Path) -> None:
    """Write a table as zstd-compressed Parquet, atomically."""
    _atomic(path, lambda tmp: frame.to_parquet(tmp, index=False, compression="zstd"))


def write_json(data: Any, path: Path) -> None:
    """Write JSON (sorted keys, indented), atomically."""
    _atomic(path, lambda tmp: tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"))


def write_text(text: str, path: Path) -> None:
    """Write a text file, atomically."""
    _atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
