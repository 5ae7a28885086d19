"""The configuration envelope: axes, values, tiers and validity rules, all read from config."""

from __future__ import annotations

import hashlib
import itertools
import json
import keyword
import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from safetyrepro.benchmarks.base import Presentation
from safetyrepro.core.axes import AXES
from safetyrepro.core.config_id import Config
from safetyrepro.core.decoding import Decoding
from safetyrepro.core.messages import excerpt
from safetyrepro.core.scorer_names import RULES
from safetyrepro.core.tiers import CORE, STRESS
from safetyrepro.scorers import asks_judge
from safetyrepro.scorers import discovered as scorer_plugins

# How a declared axis's value acts (docs/envelope.md, Declared axes): a template variable fills {<axis>}
# in every template; option_order and answer_formulation change how an item's options are shown and
# scored; few_shot_draw picks the examples; backend_option sets how requests are batched; scorer picks what labels
# free-form responses (a config of another scorer rescores its twin's responses: no model runs again).
MECHANISMS = ("template_variable", "option_order", "answer_formulation", "few_shot_draw", "backend_option", "scorer")
# The mechanisms whose values are draws from a population of equally reasonable choices (a wording, a few-shot
# draw, an order of the options), not levels of a setting: a new value is one more draw (docs/estimation.md).
SAMPLED_MECHANISMS = ("template_variable", "few_shot_draw", "option_order")
TEMPLATE_FIELDS = {"task", "shots", "question", "answer_format"}
# without {question} every item gets the same prompt; without {shots} few-shot configs silently run 0-shot
TEMPLATE_REQUIRED = {"question", "shots"}
# what ends a Jinja raw block (jinja2's lexer): lm-eval's copy of the parity template quotes its text in one
JINJA_ENDRAW = re.compile(r"\{%[-+]?\s*endraw\s*[-+]?%\}")


class EnvelopeError(ValueError):
    """The envelope section of a config is inconsistent."""


def _check_judge(
    axis: str, value: str, params: Mapping[str, Any], default: str, phrasings: Mapping[str, Mapping[str, tuple]]
) -> None:
    """A value of a scorer axis names a judge model exactly when its scorer asks one (`Scorer.asks_judge`), and
    the default's does not (the default's cells generate the replies that the others label); a value's `question`
    is a phrasing that some benchmark's question of its scorer has (`phrasings`: by benchmark and scorer)."""
    where, scorer = f"envelope.axes.{axis}.values.{value}", params["scorer"]
    judged = asks_judge(scorer)
    if judged and "judge" not in params:
        raise EnvelopeError(
            f"{where}.judge: name the judge model that scorer '{scorer}' asks (one of the config's judges)"
        )
    for key in ("judge", "question"):
        if not judged and key in params:
            raise EnvelopeError(
                f"{where}.{key}: scorer '{scorer}' asks no judge model; only a value whose scorer asks one names "
                + ("it" if key == "judge" else "its question's phrasing")
            )
    if "question" in params and not any(params["question"] in by[scorer] for by in phrasings.values() if scorer in by):
        listed = "; ".join(f"{b}: {', '.join(by[scorer]) or 'none'}" for b, by in phrasings.items() if scorer in by)
        raise EnvelopeError(
            f"{where}.question: no benchmark's {scorer} question has a phrasing {excerpt(params['question'])} "
            f"(phrasings by benchmark: {listed}; docs/scorers.md)"
        )
    if judged and value == default:
        raise EnvelopeError(
            f"envelope.axes.{axis}.default: '{value}' is a judge; the default's cells generate the replies the "
            "other values label, so make a value that parses them (e.g. rules) the default"
        )


def _phrasings(benchmark: Any) -> dict[str, tuple[str, ...]]:
    """The phrasings of the question of each of a benchmark's scorers that asks a judge (its question module's
    PHRASINGS, checked at discovery), by scorer."""
    from safetyrepro.plugins import scorer_module
    from safetyrepro.scorers import scorer_of

    questions = {name: scorer_of(benchmark, name).question for name in benchmark.scorers if asks_judge(name)}
    return {name: tuple(getattr(scorer_module(question), "PHRASINGS", {})) for name, question in questions.items()}


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


@dataclass
class Envelope:
    """Axes with their values' parameters, validity rules and seeds.

    `axes` maps every axis to its values' parameters; `mechanisms` names how each declared axis (one
    beyond the four built in) acts, and `defaults` its value where it cannot act.
    `acts_on` says, per benchmark, on which scoring paths option_order and answer_formulation act
    (a benchmark's `presentation_acts`); `scorers`, per benchmark, the scorers it has (a benchmark's `scorers`);
    `phrasings`, per benchmark and scorer asking a judge, the names of its question's other wordings.
    """

    axes: dict[str, dict[str, dict[str, Any]]]
    rules: list[Rule]
    seeds: list[int]
    max_new_tokens: int
    shot_format: str
    stop: list[str]
    source: dict[str, Any] = field(repr=False, default_factory=dict)
    token_cap: int | None = None  # a run may cap generation length (CPU demos); not part of the seal
    mechanisms: dict[str, str] = field(default_factory=dict)
    defaults: dict[str, str] = field(default_factory=dict)
    acts_on: Mapping[str, Mapping[str, tuple[str, ...]]] = field(repr=False, default_factory=dict)
    scorers: Mapping[str, tuple[str, ...]] = field(repr=False, default_factory=dict)
    phrasings: Mapping[str, Mapping[str, tuple[str, ...]]] = field(repr=False, default_factory=dict)
    _configs: dict[str, list[Config]] = field(repr=False, compare=False, default_factory=dict)
    _by_values: dict[tuple, Config] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        benchmarks: Mapping[str, Any],
        unavailable: Iterable[str] = (),
        columns: Iterable[str] = (),
    ) -> Envelope:
        """Build an envelope from its schema-valid config section, defaults filled in; check placeholders,
        declared axes and rule references (`benchmarks`: name -> Benchmark, the registry, every benchmark a rule
        may use; `unavailable`: the names of registered benchmarks that cannot be used, which a rule may still
        name; `columns`: those of the result tables and the analyses, which no declared axis may take)."""
        axes = {axis: dict(data["axes"][axis]) for axis in AXES}
        mechanisms, defaults = {}, {}
        reserved = reserved_names(benchmarks, columns)
        for axis, (values, mechanism, default) in _declared_axes(data["axes"], *reserved).items():
            axes[axis], mechanisms[axis], defaults[axis] = values, mechanism, default
        variables = {axis for axis, kind in mechanisms.items() if kind == "template_variable"}
        offered = {name: tuple(benchmark.scorers) for name, benchmark in benchmarks.items()}
        phrasings = {name: _phrasings(benchmark) for name, benchmark in benchmarks.items()}
        for axis in (axis for axis, kind in mechanisms.items() if kind == "scorer"):
            for value, params in axes[axis].items():
                if (broken := scorer_plugins().broken.get(params["scorer"])) is not None:
                    raise EnvelopeError(f"envelope.axes.{axis}.values.{value}.scorer: {broken}")
                if not any(params["scorer"] in names for names in offered.values()):
                    listed = "; ".join(f"{name}: {', '.join(names)}" for name, names in offered.items())
                    raise EnvelopeError(
                        f"envelope.axes.{axis}.values.{value}.scorer: no benchmark has a scorer "
                        f"{excerpt(params['scorer'])} (scorers by benchmark: {listed})"
                    )
                _check_judge(axis, value, params, defaults[axis], phrasings)
        for name, params in axes["template"].items():
            for key in ("text", "logprob_text"):
                if key in params:
                    where = f"envelope.axes.template.{name}.{key}"
                    _check_fields(params[key], TEMPLATE_FIELDS | variables, where, TEMPLATE_REQUIRED | variables)
        _check_fields(data["shot_format"], {"question", "answer"}, "envelope.shot_format", {"question", "answer"})
        known = {**{axis: set(values) for axis, values in axes.items()}, "benchmark": {*benchmarks, *unavailable}}
        rules = [_rule(index, raw, known) for index, raw in enumerate(data["rules"])]
        envelope = cls(
            axes,
            rules,
            list(data["seeds"]),
            int(data["max_new_tokens"]),
            data["shot_format"],
            list(data["stop"]),
            dict(data),
            mechanisms=mechanisms,
            defaults=defaults,
            acts_on={name: dict(benchmark.presentation_acts) for name, benchmark in benchmarks.items()},
            scorers=offered,
            phrasings=phrasings,
        )
        return envelope

    @property
    def axis_names(self) -> list[str]:
        """Every axis, the four built-in ones first, then the declared ones in name order."""
        return list(self.axes)

    def sampled_axes(self) -> list[str]:
        """The axes whose values are draws from a population: the template, and the declared axes of
        SAMPLED_MECHANISMS."""
        return ["template", *(axis for axis, kind in self.mechanisms.items() if kind in SAMPLED_MECHANISMS)]

    def declared(self, mechanism: str) -> list[str]:
        """The declared axes acting through `mechanism`."""
        return [axis for axis, kind in self.mechanisms.items() if kind == mechanism]

    @property
    def scorer_axis(self) -> str | None:
        """The declared scorer axis (one at most; None without one)."""
        return next(iter(self.declared("scorer")), None)

    def acts(self, axis: str, config: Config, benchmark: str) -> bool:
        """Whether a declared axis's value changes anything in this config on this benchmark."""
        mechanism = self.mechanisms[axis]
        if mechanism == "few_shot_draw":
            return self.shot_count(config) > 0
        if mechanism in ("option_order", "answer_formulation"):
            return config.scoring in self.acts_on.get(benchmark, {}).get(mechanism, ())
        if mechanism == "scorer":  # where its scorer (or judge) labels otherwise than the default's would
            default = self._labeller(self.defaults[axis], axis, benchmark)
            return config.scoring == "freeform" and self._labeller(config[axis], axis, benchmark) != default
        return True

    def is_valid(self, config: Config, benchmark: str) -> bool:
        """True when every rule holds for this config on this benchmark, and every declared axis that
        cannot act here (few-shot draw at 0 shots, option order on Yes/No items) is at its default."""
        choice = dict(config.values) | {"benchmark": benchmark}
        if not all(rule.holds(choice) for rule in self.rules):
            return False
        return all(
            config[axis] == default or self.acts(axis, config, benchmark) for axis, default in self.defaults.items()
        )

    def tier_of(self, values: Mapping[str, str]) -> str:
        """``core`` when every axis value is tagged core, else ``stress``."""
        tiers = {self.axes[axis][values[axis]]["tier"] for axis in self.axes}
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
        for combo in itertools.product(*self.axes.values()):
            values = dict(zip(self.axes, combo))
            config_id = "{template}-{decoding}-{shots}shot-{scoring}".format(**values) + "".join(
                f"-{axis}={values[axis]}" for axis, default in self.defaults.items() if values[axis] != default
            )
            out.append(Config(tuple(values.items()), self.tier_of(values), config_id))
        return out

    def configs(self, benchmark: str) -> list[Config]:
        """The valid configs of one benchmark (enumerated once: a grid job looks its config up by id)."""
        if benchmark not in self._configs:
            self._configs[benchmark] = [c for c in self.all_configs() if self.is_valid(c, benchmark)]
        return list(self._configs[benchmark])

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

    def template_variables(self, config: Config) -> dict[str, str]:
        """The text of every template-variable axis at this config's value, by placeholder name."""
        return {axis: self.axes[axis][config[axis]]["text"] for axis in self.declared("template_variable")}

    def setting(self, mechanism: str, config: Config, benchmark: str | None = None) -> dict[str, Any]:
        """The parameters (tier left out) of the config's value on the axis of `mechanism`, which is
        one at most; empty when the envelope declares none or, given `benchmark`, where it does not
        act there (so a default never acts where the axis cannot)."""
        for axis in self.declared(mechanism):
            if benchmark is None or self.acts(axis, config, benchmark):
                return {k: v for k, v in self.axes[axis][config[axis]].items() if k != "tier"}
        return {}

    def _labeller(self, value: str, axis: str, benchmark: str) -> tuple[str, str | None, str | None]:
        """The scorer that a value of the scorer axis gives on `benchmark` (its own where the benchmark has it,
        else the benchmark's: `rules`), with the name of the judge model it asks and the phrasing of its question
        (None: the question's own) where that scorer is a judge. Where the benchmark's question has not the value's
        phrasing, the default's: the value does not act there."""
        params = self.axes[axis][value]
        scorer = params["scorer"] if params["scorer"] in self.scorers.get(benchmark, ()) else RULES
        if not asks_judge(scorer):
            return scorer, None, None
        phrasing = params.get("question")
        if phrasing is not None and phrasing not in self.phrasings.get(benchmark, {}).get(scorer, ()):
            return self._labeller(self.defaults[axis], axis, benchmark)
        return scorer, params["judge"], phrasing

    def scorers_of(self, benchmark: str) -> list[str]:
        """The scorers that read `benchmark`'s replies under this envelope: those its scorer axis's values give
        there (the cells' and, measured against the benchmark's human labels, the scorers analysis's)."""
        axes = self.declared("scorer")
        return sorted(
            {self._labeller(value, axis, benchmark)[0] for axis in axes for value in self.axes[axis]} or {RULES}
        )

    def scorer(self, config: Config, benchmark: str) -> str:
        """The scorer that labels the config's free-form responses on `benchmark`."""
        axis = self.scorer_axis
        return RULES if axis is None else self._labeller(config[axis], axis, benchmark)[0]

    def labelling(self, value: str, benchmark: str) -> tuple[str, str | None, str | None]:
        """What a value of the scorer axis labels `benchmark`'s replies with: its scorer there, and the judge model
        it asks and its question's phrasing (None where no judge is asked, or the question is the module's own)."""
        return self._labeller(value, self.scorer_axis, benchmark)

    def judge_name(self, config: Config, benchmark: str) -> str | None:
        """The name of the judge model that labels the config's free-form responses on `benchmark`, or None
        (another scorer labels them)."""
        axis = self.scorer_axis
        return None if axis is None else self._labeller(config[axis], axis, benchmark)[1]

    def judge_phrasing(self, config: Config, benchmark: str) -> str | None:
        """The phrasing of the question the config's judge model is asked about `benchmark`'s replies (its scorer
        axis value's `question`), or None: the question's own wording, or no judge."""
        axis = self.scorer_axis
        return None if axis is None else self._labeller(config[axis], axis, benchmark)[2]

    def generation_twin(self, config: Config, benchmark: str) -> Config | None:
        """The config whose responses this one's cell labels with another scorer (the same config at the
        scorer axis's default), or None when the cell runs the model itself."""
        axis = self.scorer_axis
        if axis is None or config[axis] == self.defaults[axis] or not self.acts(axis, config, benchmark):
            return None
        if not self._by_values:  # every config by its values, built once: twins are looked up per cell
            self._by_values.update((c.values, c) for c in self.all_configs())
        values = {**dict(config.values), axis: self.defaults[axis]}
        twin = self._by_values[tuple(values.items())]
        if not self.is_valid(twin, benchmark):
            raise EnvelopeError(
                f"envelope.rules: config {config.config_id} rescores the {benchmark} responses of its twin at "
                f"{axis} '{self.defaults[axis]}', which the rules leave out; let the rules keep that twin"
            )
        return twin

    def presentation(self, config: Config, benchmark: str) -> Presentation:
        """How the config shows and scores the items' options on `benchmark`: a declared option order and
        answer formulation where they act there, else the benchmark's own way."""
        order = self.setting("option_order", config, benchmark)
        formulation = self.setting("answer_formulation", config, benchmark)
        return Presentation(
            order.get("order", "as_given"), order.get("seed", 0), formulation.get("candidates", "letters")
        )

    def cell(self, config: Config, benchmark: str, task: str) -> tuple:
        """What a cell of `config` on `benchmark` (whose task text is `task`) runs, as far as the envelope
        decides it: the scoring path, the prompt template with the task and template variables filled in,
        the few-shot count and draw, the options' presentation, the batch size and, for free-form cells,
        the generation settings and scorer (and judge, and its question's phrasing). Only what the code acts on counts (top_p under greedy, a draw's seed
        at 0 shots or in pool order, an order's seed unless shuffled, decoding on the log-likelihood path
        are not), so two configs with equal cells would run the same thing twice."""
        marks = {name: f"\0{name}\0" for name in TEMPLATE_FIELDS - {"task"}}
        prompt = self.template_text(config).format(task=task, **marks, **self.template_variables(config))
        n = self.shot_count(config)
        draw = self.setting("few_shot_draw", config) if n else {}
        drawn = draw.get("draw", "pool_order")
        order = self.presentation(config, benchmark)
        presentation = (order.order, order.seed if order.order == "shuffled" else None, order.candidates)
        generation = None
        if config.scoring == "freeform":
            decoding = self.decoding(config)
            top_p = None if decoding.greedy else decoding.top_p
            stop, seeds = tuple(self.stop_strings(config)), tuple(self.seeds_for(config))
            generation = (
                decoding.temperature,
                top_p,
                decoding.max_new_tokens,
                stop,
                seeds,
                self.scorer(config, benchmark),
                self.judge_name(config, benchmark),
                self.judge_phrasing(config, benchmark),
            )
        batch_size = self.setting("backend_option", config).get("batch_size")
        shots = (n, drawn, None if drawn == "pool_order" else draw["seed"])
        return config.scoring, prompt, shots, presentation, batch_size, generation

    def check_distinct_cells(self, benchmark: str, task: str) -> None:
        """Refuse two valid configs of `benchmark` with the same `cell`: each would count in rho_flip and
        every analysis as a config of its own."""
        seen: dict[tuple, Config] = {}
        for config in self.configs(benchmark):
            first = seen.setdefault(self.cell(config, benchmark, task), config)
            if first is not config:
                differ = [(axis, a, b) for (axis, a), (_, b) in zip(first.values, config.values) if a != b]
                key = f"envelope.axes.{differ[0][0]}" if len(differ) == 1 else "envelope.axes"
                values = ", ".join(f"{axis} '{a}' vs '{b}'" for axis, a, b in differ)
                verb = "changes" if len(differ) == 1 else "change"
                capped = self.token_cap is not None and config.scoring == "freeform"
                cap = f" (max_new_tokens_cap cuts every generation to {self.token_cap} tokens)" if capped else ""
                raise EnvelopeError(
                    f"{key}: configs {first.config_id} and {config.config_id} run the same {benchmark} cell (same "
                    f"prompts, decoding and scoring): {values} {verb} nothing there{cap}; drop one value, make the "
                    "values differ in what acts, or keep them apart with a rule"
                )

    def digest(self) -> str:
        """SHA-256 of the canonical JSON form: the envelope's seal."""
        return hashlib.sha256(json.dumps(self.source, sort_keys=True).encode()).hexdigest()


def reserved_names(benchmarks: Mapping[str, Any], columns: Iterable[str]) -> tuple[set[str], tuple[str, ...]]:
    """The names no declared axis may take, and the prefixes none may start with: the result tables' and the
    analyses' `columns` (an axis is a column beside them), the template placeholders, and the metric names and
    prefixes of `benchmarks` (name -> Benchmark, the registry handed in)."""
    names = {
        *columns,
        *TEMPLATE_FIELDS,
        *(name for benchmark in benchmarks.values() for name in benchmark.metric_names),
    }
    return names, tuple(dict.fromkeys(p for benchmark in benchmarks.values() for p in benchmark.metric_prefixes))


def _declared_axes(
    axes: Mapping[str, Any], reserved: set[str], prefixes: tuple[str, ...]
) -> dict[str, tuple[dict[str, dict[str, Any]], str, str]]:
    """Each declared axis (beyond the four built in), in name order: its values, mechanism and default, checked
    (none may take a `reserved` name or start with one of the `prefixes`)."""
    out = {}
    for axis in sorted(set(axes) - set(AXES)):  # name order: the same however the YAML was written
        declared, where = axes[axis], f"envelope.axes.{axis}"
        if axis in reserved or axis.startswith(prefixes) or keyword.iskeyword(axis):
            raise EnvelopeError(
                f"{where}: '{axis}' is reserved (a column of the result tables or the analyses, a template placeholder or a "
                "Python keyword); call the axis otherwise"
            )
        if declared["default"] not in declared["values"]:
            raise EnvelopeError(
                f"{where}.default: '{declared['default']}' is not one of its values ({', '.join(declared['values'])})"
            )
        if declared["values"][declared["default"]]["tier"] != CORE:
            raise EnvelopeError(
                f"{where}.default: '{declared['default']}' is tagged stress; the default is what configs run where the "
                "axis cannot act, so it must be core"
            )
        seen: dict[str, str] = {}
        for value, params in declared["values"].items():
            same = seen.setdefault(json.dumps({k: v for k, v in params.items() if k != "tier"}, sort_keys=True), value)
            if same != value:
                raise EnvelopeError(f"{where}.values.{value}: the same parameters as '{same}' (two ids, one config)")
            if declared["mechanism"] == "option_order" and params["order"] == "shuffled" and "seed" not in params:
                raise EnvelopeError(f"{where}.values.{value}: a shuffled order needs a seed")
            if declared["mechanism"] == "few_shot_draw" and params["draw"] != "pool_order" and "seed" not in params:
                raise EnvelopeError(f"{where}.values.{value}: a {params['draw']} draw needs a seed")
        out[axis] = ({v: dict(p) for v, p in declared["values"].items()}, declared["mechanism"], declared["default"])
    for mechanism in MECHANISMS[1:]:  # each acts on one setting: two axes of it would fight
        twins = [axis for axis, (_, kind, _) in out.items() if kind == mechanism]
        if len(twins) > 1:
            raise EnvelopeError(f"envelope.axes.{twins[1]}: a second {mechanism} axis (the first is '{twins[0]}')")
    return out


def _rule(index: int, raw: Mapping[str, Any], known: Mapping[str, set[str]]) -> Rule:
    """One validity rule, every axis, value and benchmark it names checked against `known`."""
    for part in ("if", "then"):
        for key, values in raw[part].items():
            where = f"envelope.rules[{index}] ({raw['name']}).{part}.{key}"
            if key not in known:
                raise EnvelopeError(f"{where}: unknown axis '{key}' (axes: {', '.join(known)})")
            unknown = sorted(set(values) - known[key])
            if unknown:
                what = f"benchmark(s) {unknown}" if key == "benchmark" else f"value(s) {unknown} for axis '{key}'"
                raise EnvelopeError(f"{where}: unknown {what} (known: {', '.join(sorted(known[key]))})")
    return Rule(raw["name"], {k: tuple(v) for k, v in raw["if"].items()}, {k: tuple(v) for k, v in raw["then"].items()})


def template_fields(text: str, where: str) -> list[str]:
    """The placeholders of a str.format template, in order. Refuses malformed braces and a placeholder with a
    conversion or format spec (`{question!r}`, `{question:>80}`, `{question:d}`): the template fills in text as
    it is, so one would quote, pad or break every prompt (`!s` and `:s` change nothing and pass)."""
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise EnvelopeError(f"{where}: malformed placeholder ({exc}); write a literal brace as {{{{ or }}}}") from None
    for _, name, spec, conversion in parts:
        if name is not None and (conversion not in (None, "s") or spec not in ("", "s")):
            written = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise EnvelopeError(
                f"{where}: placeholder {excerpt(written)} has a conversion or format spec; a placeholder is filled "
                f"with its text as it is: write {{{name}}}"
            )
    return [name for _, name, _, _ in parts if name is not None]


def check_parity_template(text: str, where: str) -> list[str]:
    """The case study's parity template: {question} exactly once and nothing else to fill, no conversion or
    format spec, and nothing that ends the Jinja raw block lm-eval's copy of it is written in
    (case_study.drivers.parity_doc_to_text). Returns its literal text before and after {question}."""
    fields = template_fields(text, where)
    if fields != ["question"]:
        raise EnvelopeError(
            f"{where}: needs {{question}} exactly once and no other placeholder (it has {excerpt(fields)})"
        )
    literals, seen = ["", ""], 0
    for literal, name, _, _ in string.Formatter().parse(text):  # an escaped brace splits the literal text
        literals[seen] += literal
        seen += name is not None
    if any(JINJA_ENDRAW.search(literal) for literal in literals):
        raise EnvelopeError(f"{where}: holds Jinja's {{% endraw %}}, which lm-eval's copy of the template cannot quote")
    return literals


def _check_fields(text: str, allowed: set[str], where: str, required: set[str] = frozenset()) -> None:
    used = set(template_fields(text, where))
    unknown = sorted(used - allowed)
    if unknown:
        raise EnvelopeError(f"{where}: unknown placeholder(s) {unknown} (allowed: {sorted(allowed)})")
    missing = sorted(required - used)
    if missing:
        raise EnvelopeError(f"{where}: needs the placeholder(s) {', '.join('{' + m + '}' for m in missing)}")
