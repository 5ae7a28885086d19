"""Hashes: files (data pins, model files, the run record), prompts and item texts."""

from __future__ import annotations

import hashlib
import unicodedata
from pathlib import Path


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def text_sha256(text: str) -> str:
    """SHA-256 (hex) of a text's UTF-8 bytes: lm-evaluation-harness's `hash_string`, so a prompt_id is
    the first 16 digits of lm-eval's `prompt_hash` of the same prompt."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def item_hash(text: str) -> str:
    """A stable identity of an item's own text (question and context, no options, template or shots),
    the same whichever harness showed it: 16 hex digits of the SHA-256 of the text in Unicode NFC with
    every run of whitespace made one space and the ends stripped."""
    return text_sha256(" ".join(unicodedata.normalize("NFC", text).split()))[:16]
