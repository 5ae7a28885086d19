"""Bad inputs of the grid, the templates, the audit and the case study (issue 35, part 3): configs that
would run one cell twice, placeholders with a conversion or format spec, parity templates lm-eval cannot
take, and audit requests the workflow cannot answer."""

from __future__ import annotations

from pathlib import Path

import yaml

from helpers.bad_input_corpus import (
    ENVELOPE,
    SCORES,
    STUDY,
    Case,
    _write,
    audit_case,
    base_config,
    command_case,
    config_case,
)

T1 = ENVELOPE["axes"]["template"]["T1"]["text"]


def _axis(name: str, mechanism: str, values: dict, default: str) -> dict:
    """A declared axis, its values tagged core."""
    return {
        f"envelope.axes.{name}": {
            "mechanism": mechanism,
            "default": default,
            "values": {value: {"tier": "core", **params} for value, params in values.items()},
        }
    }


def _system(texts: dict[str, str], t1: str) -> dict:
    """A `system` template variable with these texts, at the head of every template but T1, which is `t1`."""
    changes = _axis("system", "template_variable", {value: {"text": text} for value, text in texts.items()}, "none")
    for name, params in ENVELOPE["axes"]["template"].items():
        for key in ("text", "logprob_text"):
            if key in params:
                changes[f"envelope.axes.template.{name}.{key}"] = "{system}" + params[key]
    changes["envelope.axes.template.T1.text"] = t1
    return changes


# 1. two configs that would run the same cell (counted twice in rho_flip and every analysis)
CASES: list[Case] = [
    config_case(name, changes, message)
    for name, changes, message in [
        (
            "a greedy decoding with a top_p",
            {"envelope.axes.decoding.greedy2": {"tier": "stress", "temperature": 0.0, "top_p": 0.9}},
            "envelope.axes.decoding: configs T1-greedy-0shot-freeform and T1-greedy2-0shot-freeform run the same",
        ),
        (
            "sampled decodings on the log-likelihood path",
            {"envelope.rules": [rule for rule in ENVELOPE["rules"] if rule["name"] != "logprob_only_under_greedy"]},
            "envelope.axes.decoding: configs T1-greedy-0shot-logprob and T1-t0.3-0shot-logprob run the same",
        ),
        (
            "a core copy of a stress decoding",
            {"envelope/axes/decoding/t0.7b": {**ENVELOPE["axes"]["decoding"]["t0.7"], "tier": "core"}},
            "envelope.axes.decoding: configs T1-t0.7-0shot-freeform and T1-t0.7b-0shot-freeform run the same",
        ),
        (
            "two shots values of one count",
            {"envelope.axes.shots.three": {"tier": "stress", "n": 3}},
            "envelope.axes.shots: configs T1-greedy-3shot-freeform and T1-greedy-threeshot-freeform run the same",
        ),
        (
            "a template copy with a longer generation",
            {"envelope.axes.template.T5": {"tier": "stress", "text": T1, "max_new_tokens": 64}},
            "envelope.axes.template: configs T1-greedy-0shot-logprob and T5-greedy-0shot-logprob run the same",
        ),
        (
            "a template copy with stop strings of its own",
            {"envelope.axes.template.T5": {"tier": "core", "text": T1, "stop": ["\n"]}},
            "envelope.axes.template: configs T1-greedy-0shot-logprob and T5-greedy-0shot-logprob run the same",
        ),
        (
            "a longer greedy decoding, cut back by the run's token cap",
            {
                "envelope.axes.decoding.greedylong": {"tier": "stress", "temperature": 0.0, "max_new_tokens": 512},
                "max_new_tokens_cap": 16,
            },
            "envelope.axes.decoding: configs T1-greedy-0shot-freeform and T1-greedylong-0shot-freeform run the same "
            "truthfulqa cell (same prompts, decoding and scoring): decoding 'greedy' vs 'greedylong' changes nothing "
            "there (max_new_tokens_cap cuts every generation to 16 tokens)",
        ),
        (
            "an order as given with a seed",
            _axis(
                "order",
                "option_order",
                {"given": {"order": "as_given"}, "s7": {"order": "as_given", "seed": 7}},
                "given",
            ),
            "envelope.axes.order: configs T1-greedy-0shot-freeform and T1-greedy-0shot-freeform-order=s7 run the same",
        ),
        (
            "an order reversed twice over, by seed",
            _axis(
                "order",
                "option_order",
                {
                    "given": {"order": "as_given"},
                    "rev": {"order": "reversed"},
                    "rev2": {"order": "reversed", "seed": 2},
                },
                "given",
            ),
            "envelope.axes.order: configs T1-greedy-0shot-freeform-order=rev and T1-greedy-0shot-freeform-order=rev2",
        ),
        (
            "a few-shot draw in pool order with a seed",
            _axis(
                "draw",
                "few_shot_draw",
                {"first": {"draw": "pool_order"}, "seeded": {"draw": "pool_order", "seed": 7}},
                "first",
            ),
            "envelope.axes.draw: configs T1-greedy-3shot-freeform and T1-greedy-3shot-freeform-draw=seeded run the same",
        ),
        (
            "a template that writes out another's system prompt",
            {
                **_system({"none": "", "brief": "Be brief.\n"}, "{system}" + T1),
                "envelope.axes.template.T5": {"tier": "core", "text": "Be brief.\n{system}" + T1},
            },
            "envelope.axes: configs T1-greedy-0shot-freeform-system=brief and T5-greedy-0shot-freeform run the same",
        ),
    ]
]

# 2. placeholders with a conversion or format spec: they quote, pad or break every prompt
CASES += [
    config_case(name, {key: value}, message)
    for name, key, value, message in [
        (
            "template placeholder with !r",
            "envelope.axes.template.T1.text",
            T1.replace("{question}", "{question!r}"),
            "envelope.axes.template.T1.text: placeholder '{question!r}' has a conversion or format spec",
        ),
        (
            "template placeholder padded to 99999999",
            "envelope.axes.template.T1.text",
            T1.replace("{question}", "{question:>99999999}"),
            "envelope.axes.template.T1.text: placeholder '{question:>99999999}' has a conversion or format spec",
        ),
        (
            "template placeholder as an integer",
            "envelope.axes.template.T1.text",
            T1.replace("{question}", "{question:d}"),
            "placeholder '{question:d}' has a conversion or format spec",
        ),
        (
            "template placeholder cut to 20 characters",
            "envelope.axes.template.T2.text",
            ENVELOPE["axes"]["template"]["T2"]["text"].replace("{answer_format}", "{answer_format:.20}"),
            "envelope.axes.template.T2.text: placeholder '{answer_format:.20}'",
        ),
        (
            "template placeholder with a nested spec",
            "envelope.axes.template.T3.text",
            ENVELOPE["axes"]["template"]["T3"]["text"].replace("{question}", "{question:{shots}}"),
            "envelope.axes.template.T3.text: placeholder '{question:{shots}}'",
        ),
        (
            "logprob template placeholder with !a",
            "envelope.axes.template.T4.logprob_text",
            ENVELOPE["axes"]["template"]["T4"]["logprob_text"].replace("{shots}", "{shots!a}"),
            "envelope.axes.template.T4.logprob_text: placeholder '{shots!a}'",
        ),
        (
            "shot format answer with !r",
            "envelope.shot_format",
            "{question}\nAnswer: {answer!r}\n\n",
            "envelope.shot_format: placeholder '{answer!r}' has a conversion or format spec",
        ),
    ]
]
CASES.append(
    config_case(
        "template variable placeholder padded",
        _system({"none": "", "careful": "Be careful.\n\n"}, "{system:>40}" + T1),
        "envelope.axes.template.T1.text: placeholder '{system:>40}' has a conversion or format spec",
    )
)

# 3. the case study's parity template, checked as the config loads (lm-eval gets a Jinja copy of it)
CASES += [
    config_case(name, {"case_study": {**STUDY, "parity": {"template": template}}}, message)
    for name, template, message in [
        (
            "parity template with !r",
            "Q: {question!r}\nA:",
            "case_study.parity.template: placeholder '{question!r}' has a conversion or format spec",
        ),
        (
            "parity template padded",
            "Q: {question:<200}\nA:",
            "case_study.parity.template: placeholder '{question:<200}'",
        ),
        (
            "parity template asking twice",
            "Q: {question}\nA: {question}",
            "case_study.parity.template: needs {question} exactly once and no other placeholder",
        ),
        (
            "parity template with an answer field",
            "Q: {question}\nA: {answer}",
            "case_study.parity.template: needs {question} exactly once and no other placeholder",
        ),
        ("parity template without a field", "Q:\nA:", "case_study.parity.template: needs {question} exactly once"),
        ("parity template with an open brace", "Q: {question\nA:", "case_study.parity.template: malformed placeholder"),
        (
            "parity template ending a Jinja raw block",
            "Q: {question}\n{{%endraw%}}A:",
            "case_study.parity.template: holds Jinja's {% endraw %}",
        ),
        (
            "parity template ending a Jinja raw block, trimmed",
            "{{%- endraw -%}}Q: {question}\nA:",
            "case_study.parity.template: holds Jinja's {% endraw %}",
        ),
    ]
]


# 4. and 5. audit requests the workflow cannot answer: checked before anything runs
def _imports(scratch: Path, rows: str, mapping: str | None = None) -> Path:
    """A config importing a table of `rows` (with `mapping` as its mapping file), results in the scratch folder."""
    source = {"kind": "table", "path": str(_write(scratch / "scores.csv", SCORES + rows))}
    if mapping is not None:
        source["mapping"] = str(_write(scratch / "mapping.yaml", mapping))
    config = {"imports": [source], "results_dir": str(scratch / "results")}
    return _write(scratch / "imports.yaml", yaml.safe_dump(config))


TWO = "a,truthfulqa,T1-greedy-0shot-freeform,0.5\nb,truthfulqa,T1-greedy-0shot-freeform,0.4\n"


def audit_imports_case(name: str, rows: str, options: list[str], message: str, mapping: str | None = None) -> Case:
    """`safetyrepro audit` of a config importing a table of `rows`."""
    return command_case(name, lambda s: ["audit", "--configfile", str(_imports(s, rows, mapping)), *options], message)


def _run_with_models(names: list[str]) -> Case:
    def build(scratch: Path, data_dir: Path):
        config = base_config(data_dir)
        config["models"] = [{"name": name, "path": f"org/{name}"} for name in names]
        path = _write(scratch / "config.yaml", yaml.safe_dump(config))
        argv = ["audit", "--configfile", str(path), "--benchmark", "truthfulqa", "--pair", "x", "y_vs_z"]
        return (
            argv,
            "--pair: the audit of x and y_vs_z and that of x_vs_y and z would share the file x_vs_y_vs_z.md",
            None,
        )

    return Case("audit: two pairs of run models with one file name", build)


CASES += [
    audit_imports_case(
        "audit: imported results without the benchmark",
        TWO,
        ["--benchmark", "bbq", "--pair", "a", "b"],
        "--benchmark: the imported results have no benchmark 'bbq' (truthfulqa)",
    ),
    audit_imports_case(
        "audit: imported benchmark in another case",
        TWO,
        ["--benchmark", "TruthfulQA", "--pair", "a", "b"],
        "--benchmark: the imported results have no benchmark 'TruthfulQA' (truthfulqa)",
    ),
    audit_imports_case(
        "audit: imported model only on another benchmark",
        TWO + "c,bbq,T1-greedy-0shot-freeform,0.4\n",
        ["--benchmark", "truthfulqa", "--pair", "a", "c"],
        "--pair: no model named 'c' on truthfulqa (models: a, b)",
    ),
    audit_imports_case(
        "audit: imported models without a shared config",
        "a,truthfulqa,T1-greedy-0shot-freeform,0.5\nb,truthfulqa,T2-greedy-0shot-freeform,0.4\n",
        ["--benchmark", "truthfulqa", "--pair", "a", "b"],
        "--pair: a and b share no config on truthfulqa",
    ),
    audit_imports_case(
        "audit: imported benchmark as a parent path",
        TWO,
        ["--benchmark", "../truthfulqa", "--pair", "a", "b"],
        "--benchmark: '../truthfulqa' is not a benchmark name (letters, digits, . _ + -)",
    ),
    audit_imports_case(
        "audit: imported benchmark as a sub-folder",
        TWO,
        ["--benchmark", "truthfulqa/mc1", "--pair", "a", "b"],
        "--benchmark: 'truthfulqa/mc1' is not a benchmark name",
    ),
    audit_imports_case(
        "audit: imported benchmark with a trailing slash",
        TWO,
        ["--benchmark", "truthfulqa/", "--pair", "a", "b"],
        "--benchmark: 'truthfulqa/' is not a benchmark name",
    ),
    audit_imports_case(
        "audit: imported benchmark empty", TWO, ["--benchmark", "", "--pair", "a", "b"], "--benchmark: '' is not a"
    ),
    audit_case(
        "audit: a benchmark as a parent path",
        ["--pair", "model-a", "model-b", "--benchmark", "../truthfulqa"],
        "--benchmark: '../truthfulqa' is not a benchmark of the run (truthfulqa)",
    ),
    audit_imports_case(
        "audit: an imported hub model name without a mapping",
        "org/a,truthfulqa,T1-greedy-0shot-freeform,0.5\nb,truthfulqa,T1-greedy-0shot-freeform,0.4\n",
        ["--benchmark", "truthfulqa", "--pair", "org/a", "b"],
        "--pair: the imported model name 'org/a' cannot name the audit's files (letters, digits, . _ + -, no '_vs_'); "
        "give its source under `imports` a mapping file (`mapping:`) whose `models` renames it",
    ),
    audit_imports_case(
        "audit: an imported Inspect model name left out of the mapping",
        "hf/org/a,truthfulqa,T1-greedy-0shot-freeform,0.5\nb,truthfulqa,T1-greedy-0shot-freeform,0.4\n",
        ["--benchmark", "truthfulqa", "--pair", "hf/org/a", "b"],
        "rename it in the `models` of the import's mapping file",
        mapping="models: {org/b: b}\n",
    ),
    audit_imports_case(
        "audit: an imported model name with _vs_",
        "base_vs_tuned,truthfulqa,T1-greedy-0shot-freeform,0.5\nb,truthfulqa,T1-greedy-0shot-freeform,0.4\n",
        ["--benchmark", "truthfulqa", "--pair", "base_vs_tuned", "b"],
        "--pair: the imported model name 'base_vs_tuned' cannot name the audit's files",
    ),
    _run_with_models(["x", "y_vs_z", "x_vs_y", "z"]),
]
