"""A model of the grid, as the config names it."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    """A model of the grid: a name, where its weights are, and how to load them."""

    name: str
    path: str
    precision: str = "bf16"
    chat_template: str = "auto"
    trust_remote_code: bool = False
    revision: str | None = None
    embedded: str | None = None

    def weights(self) -> tuple:
        """What makes two entries the same model at any precision: its files (a local folder by its real path),
        revision, prompts."""
        path = os.path.realpath(self.path) if os.path.isdir(self.path) else self.path
        return path, self.revision, self.chat_template, self.trust_remote_code
