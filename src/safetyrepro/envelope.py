"""The configuration envelope: axes, values, tiers and validity rules, all read from config."""

from __future__ import annotations

import hashlib
import itertools
import json
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

AXES = ("template", "decoding", "shots", "scoring")
TEMPLATE_FIELDS = {"task", "shots", "question", "answer_format"}
# without {question} every item gets the same prompt; without {shots} few-shot configs silently run 0-shot
TEMPLATE_REQUIRED = {"question", "shots"}
CORE, STRESS = "core", "stress"


class EnvelopeError(ValueError):
    """The envelope section of a config is inconsistent."""


@dataclass(frozen=True)
class Rule:
    """If a config matches every `when` condition it must match every `then` condition."""

    name: str
    when: Mapping[str, tuple[str, ...]]
    then: Mapping[str, tuple[str, ...]]

    def holds(self, choice: Mapping[str, str]) -> bool:
        """True when `choice` (axis or 'benchmark' -> value) satisfies the rule."""
        applies = all(choice[key] in values for key, values in self.when.items())
        return not applies or all(choice[key] in values for key, values in self.then.items())


@dataclass(frozen=True)
class Config:
    """One point of the envelope: a value on every axis."""

    template: str
    decoding: str
    shots: str
    scoring: str
    tier: str

    @property
    def config_id(self) -> str:
        """A file-name-safe identifier, e.g. ``T1-greedy-3shot-freeform``."""
        return f"{self.template}-{self.decoding}-{self.shots}shot-{self.scoring}"

    def as_dict(self) -> dict[str, str]:
        """Axis values plus id and tier, for table rows."""
        return {
            "config_id": self.config_id,
            "template": self.template,
            "decoding": self.decoding,
            "shots": self.shots,
            "scoring": self.scoring,
            "tier": self.tier,
        }


@dataclass(frozen=True)
class Decoding:
    """Generation settings of one decoding value (temperature 0 means greedy)."""

    temperature: float
    top_p: float
    max_new_tokens: int

    @property
    def greedy(self) -> bool:
        """True for deterministic argmax decoding."""
        return self.temperature == 0


@dataclass
class Envelope:
    """Axes with their values' parameters, validity rules and seeds."""

    axes: dict[str, dict[str, dict[str, Any]]]
    rules: list[Rule]
    seeds: list[int]
    max_new_tokens: int
    shot_format: str
    stop: list[str]
    source: dict[str, Any] = field(repr=False, default_factory=dict)
    token_cap: int | None = None  # a run may cap generation length (CPU demos); not part of the seal

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], benchmarks: list[str]) -> Envelope:
        """Build an envelope from its schema-valid config section, defaults filled in; check placeholders and
        rule references (`benchmarks`: every benchmark name a rule may use)."""
        axes = {axis: dict(data["axes"][axis]) for axis in AXES}
        for name, params in axes["template"].items():
            for key in ("text", "logprob_text"):
                if key in params:
                    where = f"envelope.axes.template.{name}.{key}"
                    _check_fields(params[key], TEMPLATE_FIELDS, where, TEMPLATE_REQUIRED)
        _check_fields(data["shot_format"], {"question", "answer"}, "envelope.shot_format", {"question", "answer"})
        known = {**{axis: set(values) for axis, values in axes.items()}, "benchmark": set(benchmarks)}
        rules = []
        for index, raw in enumerate(data["rules"]):
            for part in ("if", "then"):
                for key, values in raw[part].items():
                    where = f"envelope.rules[{index}] ({raw['name']}).{part}.{key}"
                    if key not in known:
                        raise EnvelopeError(f"{where}: unknown axis '{key}' (axes: {', '.join([*AXES, 'benchmark'])})")
                    unknown = sorted(set(values) - known[key])
                    if unknown:
                        what = (
                            f"benchmark(s) {unknown}" if key == "benchmark" else f"value(s) {unknown} for axis '{key}'"
                        )
                        raise EnvelopeError(f"{where}: unknown {what} (known: {', '.join(sorted(known[key]))})")
            rules.append(
                Rule(
                    raw["name"],
                    {k: tuple(v) for k, v in raw["if"].items()},
                    {k: tuple(v) for k, v in raw["then"].items()},
                )
            )
        return cls(
            axes,
            rules,
            list(data["seeds"]),
            int(data["max_new_tokens"]),
            data["shot_format"],
            list(data["stop"]),
            dict(data),
        )

    def is_valid(self, config: Config, benchmark: str) -> bool:
        """True when every rule holds for this config on this benchmark."""
        choice = {axis: getattr(config, axis) for axis in AXES} | {"benchmark": benchmark}
        return all(rule.holds(choice) for rule in self.rules)

    def tier_of(self, values: Mapping[str, str]) -> str:
        """``core`` when every axis value is tagged core, else ``stress``."""
        tiers = {self.axes[axis][values[axis]]["tier"] for axis in AXES}
        return CORE if tiers == {CORE} else STRESS

    def stress_values(self) -> list[tuple[str, str]]:
        """(axis, value) of every value tagged `stress`."""
        return [
            (axis, value)
            for axis, values in self.axes.items()
            for value, params in values.items()
            if params["tier"] == STRESS
        ]

    def all_configs(self) -> list[Config]:
        """Every combination of axis values, valid or not, in config order."""
        out = []
        for combo in itertools.product(*(self.axes[axis] for axis in AXES)):
            values = dict(zip(AXES, combo))
            out.append(Config(**values, tier=self.tier_of(values)))
        return out

    def configs(self, benchmark: str) -> list[Config]:
        """The valid configs of one benchmark."""
        return [c for c in self.all_configs() if self.is_valid(c, benchmark)]

    def decoding(self, config: Config) -> Decoding:
        """Decoding parameters for a config (template value may raise max_new_tokens)."""
        params = self.axes["decoding"][config.decoding]
        tokens = max(
            self.max_new_tokens,
            params.get("max_new_tokens", 0),
            self.axes["template"][config.template].get("max_new_tokens", 0),
        )
        if self.token_cap is not None:
            tokens = min(tokens, self.token_cap)
        return Decoding(float(params["temperature"]), float(params.get("top_p", 1.0)), tokens)

    def seeds_for(self, config: Config) -> list[int]:
        """Every seed for sampled free-form configs; greedy and logprob configs run the first only."""
        sampled = config.scoring == "freeform" and not self.decoding(config).greedy
        return list(self.seeds) if sampled else self.seeds[:1]

    def shot_count(self, config: Config) -> int:
        """Number of few-shot examples of a config."""
        return int(self.axes["shots"][config.shots]["n"])

    def stop_strings(self, config: Config) -> list[str]:
        """Where free-form generation stops: the template's own list, else the envelope's."""
        return list(self.axes["template"][config.template].get("stop", self.stop))

    def template_text(self, config: Config) -> str:
        """Template text for the config's scoring path."""
        params = self.axes["template"][config.template]
        return params.get("logprob_text", params["text"]) if config.scoring == "logprob" else params["text"]

    def digest(self) -> str:
        """SHA-256 of the canonical JSON form: the envelope's seal."""
        return hashlib.sha256(json.dumps(self.source, sort_keys=True).encode()).hexdigest()


def _check_fields(text: str, allowed: set[str], where: str, required: set[str] = frozenset()) -> None:
    try:
        used = {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError as exc:
        raise EnvelopeError(f"{where}: malformed placeholder ({exc}); write a literal brace as {{{{ or }}}}") from None
    unknown = sorted(used - allowed)
    if unknown:
        raise EnvelopeError(f"{where}: unknown placeholder(s) {unknown} (allowed: {sorted(allowed)})")
    missing = sorted(required - used)
    if missing:
        raise EnvelopeError(f"{where}: needs the placeholder(s) {', '.join('{' + m + '}' for m in missing)}")
