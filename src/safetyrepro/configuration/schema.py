"""The config schemas and the messages of their checks: the packaged schemas, ConfigError, one line per
schema violation, and the schema's defaults filled in."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cache
from importlib.resources import files
from typing import Any

import jsonschema
import yaml

from safetyrepro.core.messages import excerpt


class ConfigError(ValueError):
    """A configuration problem, with a message naming the offending key."""


@cache
def schema(name: str) -> dict[str, Any]:
    """The packaged JSON schema `name` (config, envelope or import_mapping)."""
    return yaml.safe_load(files("safetyrepro").joinpath(f"schemas/{name}.schema.yaml").read_text())


def schema_message(error: jsonschema.ValidationError) -> str:
    """One line for a schema violation: what is wrong, without echoing whole sub-documents."""
    value, rule = error.instance, error.validator_value
    if error.validator == "additionalProperties":
        extra = sorted(set(value) - set(error.schema.get("properties", {})))
        return f"unknown key(s) {', '.join(excerpt(key, 40) for key in extra[:5])}{', ...' if len(extra) > 5 else ''}"
    if error.validator in ("minItems", "minProperties"):
        return f"needs at least {rule} entr{'y' if rule == 1 else 'ies'}, got {len(value)}"
    if error.validator == "type":
        return f"expected {rule}, got {type(value).__name__} {excerpt(value)}"
    if error.validator == "required":
        missing = [key for key in rule if key not in value]
        return f"missing required key(s) {', '.join(map(repr, missing))}"
    if error.validator == "enum":
        return f"{excerpt(value)} is not one of {', '.join(map(str, rule))}"
    if error.validator == "pattern" and "description" in error.schema:
        return f"{excerpt(value)} is not {error.schema['description']}"
    if error.validator == "pattern":
        allowed = "letters, digits and ." + (" _ + -" if "_" in rule else "")
        return f"{excerpt(value)} may use only {allowed}, starting with a letter or digit (it names files and jobs)"
    if error.validator == "minLength":
        return "must not be empty" if rule == 1 else f"needs at least {rule} characters"
    if error.validator == "uniqueItems":
        return "entries must be unique"
    message = error.message
    return message if len(message) <= 200 else f"{message[:185]}... ({len(message)} chars)"


# JSON Schema counts 10.0 as an integer; a count or seed written as a float is a mistake here.
_STRICT_TYPES = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
)


StrictValidator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_STRICT_TYPES)


def apply_defaults(instance: Any, node: Mapping[str, Any]) -> None:
    """Fill the schema's `default`s into a schema-valid instance, in place (nested objects and arrays too)."""
    if isinstance(instance, dict):
        for key, sub in node.get("properties", {}).items():
            if key not in instance and "default" in sub:
                instance[key] = copy.deepcopy(sub["default"])
            if key in instance:
                apply_defaults(instance[key], sub)
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key in set(instance) - set(node.get("properties", {})):
                apply_defaults(instance[key], extra)
    elif isinstance(instance, list) and isinstance(node.get("items"), Mapping):
        for entry in instance:
            apply_defaults(entry, node["items"])
