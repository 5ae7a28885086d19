"""Small table helpers shared by the analyses."""

from __future__ import annotations

import pandas as pd


def stack_named(parts: dict[str, pd.DataFrame], key: str) -> pd.DataFrame:
    """Stack named frames into one, the name in a first column `key`."""
    frames = [frame.assign(**{key: name}) for name, frame in parts.items() if len(frame)]
    if not frames:
        return pd.DataFrame(columns=[key])
    stacked = pd.concat(frames, ignore_index=True)
    return stacked[[key] + [c for c in stacked.columns if c != key]]
