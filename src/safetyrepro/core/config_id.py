"""One point of the envelope: its axis values, tier and config id."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """One point of the envelope: a value on every axis, its tier and its id.

    The id is ``T1-greedy-3shot-freeform`` for the four axes every envelope has, followed by
    ``-<axis>=<value>`` for each declared axis (in name order) whose value is not its default: adding
    an axis keeps the ids (and result paths) of the configs at its default.
    """

    values: tuple[tuple[str, str], ...]  # (axis, value) in envelope order
    tier: str
    config_id: str

    def __getitem__(self, axis: str) -> str:
        return dict(self.values)[axis]

    @property
    def template(self) -> str:
        return self["template"]

    @property
    def decoding(self) -> str:
        return self["decoding"]

    @property
    def shots(self) -> str:
        return self["shots"]

    @property
    def scoring(self) -> str:
        return self["scoring"]

    def as_dict(self) -> dict[str, str]:
        """Axis values plus id and tier, for table rows."""
        return {"config_id": self.config_id, **dict(self.values), "tier": self.tier}
