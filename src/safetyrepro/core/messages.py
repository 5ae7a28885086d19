"""Pieces of the one-line messages the package gives."""

from __future__ import annotations

from typing import Any

ERROR_PREFIX = "safetyrepro: error: "  # how a handled error is printed: the one line a user gets (cli.main)


def excerpt(value: Any, limit: int = 80) -> str:
    """repr() of a value, cut to `limit` characters: messages stay one short line whatever the input."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 15]}... ({len(text)} chars)"
