"""The config reference (docs/config-reference.md), generated from the packaged JSON schemas.

One row per key a user can write: its path (`models[].name`, `benchmarks.<benchmark>.n_items`), type,
default, whether it is required, the values it allows and its description. The schemas are walked
through `$ref`, `properties`, `additionalProperties`, `patternProperties`, `items`, `oneOf`/`anyOf`
and `allOf`/`if`/`then`/`else` (keys that only a condition allows say when they apply).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from safetyrepro.configuration.schema import schema

# (schema name, the key its document sits under in a run config, heading, what the section is)
SECTIONS = (
    (
        "config",
        "",
        "Run configuration",
        "The file given to `--configfile` (or `config/config.yaml`), after its `extends:` layers are merged.",
    ),
    (
        "envelope",
        "envelope.",
        "Envelope",
        "The `envelope` key, inline or in its own YAML file (`config/envelope.yaml`); in a file the keys "
        "stand at the top level, without `envelope.`.",
    ),
    (
        "import_mapping",
        "",
        "Import mapping",
        "The mapping file of an import source (`imports[].mapping`, `safetyrepro import --mapping`).",
    ),
)
BOUNDS = (
    ("minimum", "at least {}"),
    ("exclusiveMinimum", "more than {}"),
    ("maximum", "at most {}"),
    ("exclusiveMaximum", "less than {}"),
    ("minLength", "at least {} character"),
    ("maxLength", "at most {} character"),
    ("minItems", "at least {} entry"),
    ("maxItems", "at most {} entry"),
    ("minProperties", "at least {} key"),
)
PLURALS = {"character": "characters", "entry": "entries", "key": "keys"}


@dataclass
class Key:
    """One key of a schema: where it is written and what it accepts."""

    path: str
    node: dict[str, Any]
    required: str = ""
    when: list[str] = field(default_factory=list)


def resolve(node: Any, root: dict[str, Any]) -> Any:
    """A schema node with its local `$ref` (`#/$defs/...`) merged under its own keywords."""
    while isinstance(node, dict) and "$ref" in node:
        target: Any = root
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def condition(node: dict[str, Any]) -> str:
    """An `if` schema in words: "`imports` is given", "`mechanism` is `option_order`"."""
    parts = [f"`{name}` is given" for name in node.get("required", [])]
    for name, sub in node.get("properties", {}).items():
        if "const" in sub:
            parts.append(f"`{name}` is {_literal(sub['const'])}")
    return " and ".join(parts) or json.dumps(node)


def placeholder(node: dict[str, Any], root: dict[str, Any], prefix: str, keys: dict[str, Key]) -> str:
    """The stand-in for a user-chosen key: `<title>` of the object's `propertyNames`, else the one already
    used at this prefix (a conditional branch restating the object), else `<name>`."""
    title = resolve(node.get("propertyNames", {}), root).get("title")
    if title:
        return f"<{title}>"
    known = (path[len(prefix) :] for path in keys if path.startswith(prefix + "<"))
    return next((name.split(".")[0] for name in known), "<name>")


def walk(node: Any, root: dict[str, Any], prefix: str, keys: dict[str, Key], when: str = "") -> None:
    """Collect into `keys` every key under the schema `node`, paths starting with `prefix`."""
    node = resolve(node, root)
    if not isinstance(node, dict):
        return
    required = set(node.get("required", []))
    if "if" in node:
        cond = condition(resolve(node["if"], root))
        then_required = set(resolve(node.get("then", {}), root).get("required", [])) - required
        else_required = set(resolve(node.get("else", {}), root).get("required", [])) - required
    children = [(name, sub) for name, sub in node.get("properties", {}).items()]
    if isinstance(node.get("additionalProperties"), dict):
        children.append((placeholder(node, root, prefix, keys), node["additionalProperties"]))
    children += [(f"<key matching {pattern}>", sub) for pattern, sub in node.get("patternProperties", {}).items()]
    for name, sub in children:
        if sub is True:  # a key allowed here, declared elsewhere
            continue
        path = prefix + name
        if path not in keys:
            keys[path] = Key(path, resolve(sub, root))
            if name in required:
                keys[path].required = "yes"
            elif "if" in node and name in then_required:
                keys[path].required = f"when {cond}"
            elif "if" in node and name in else_required:
                keys[path].required = f"unless {cond}"
            if when:
                keys[path].when.append(when)
        elif when and keys[path].when and when not in keys[path].when:
            keys[path].when.append(when)
        walk(sub, root, path + ".", keys, when)
    items = resolve(node.get("items"), root)
    if isinstance(items, dict):
        walk(items, root, prefix.removesuffix(".") + "[].", keys, when)
    for alternative in node.get("oneOf", []) + node.get("anyOf", []):
        walk(alternative, root, prefix, keys, when)
    for part in [node] + [resolve(part, root) for part in node.get("allOf", [])]:
        if "if" in part:
            branch = condition(resolve(part["if"], root))
            walk(part.get("then"), root, prefix, keys, " and ".join(filter(None, (when, branch))))
            walk(part.get("else"), root, prefix, keys, " and ".join(filter(None, (when, f"not {branch}"))))
        elif part is not node:
            walk(part, root, prefix, keys, when)


def schema_keys(name: str, prefix: str = "") -> list[Key]:
    """Every key of the packaged schema `name`, in document order."""
    root = schema(name)
    keys: dict[str, Key] = {}
    walk(root, root, prefix, keys)
    return list(keys.values())


def _literal(value: Any) -> str:
    """A value as inline code; JSON where plain text would hide it (a blank string, a list)."""
    plain = isinstance(value, str) and value and value.strip() == value
    return f"`{value if plain else json.dumps(value)}`"


def type_of(node: dict[str, Any], root: dict[str, Any] | None = None) -> str:
    """The type in words: "integer", "list of string", "string or object", "mapping"."""
    node = resolve(node, root or {})
    kinds = node.get("type")
    if kinds is None and "enum" in node:
        kinds = sorted({type(v).__name__.replace("str", "string").replace("bool", "boolean") for v in node["enum"]})
    if kinds is None and ("oneOf" in node or "anyOf" in node):
        return " or ".join(type_of(alt, root) for alt in node.get("oneOf", []) + node.get("anyOf", []))
    if kinds is None:
        return "object" if "properties" in node or "additionalProperties" in node else "any"
    words = []
    for kind in [kinds] if isinstance(kinds, str) else kinds:
        if kind == "array" and isinstance(node.get("items"), dict):
            words.append(f"list of {type_of(node['items'], root)}")
        elif kind == "array":
            words.append("list")
        elif kind == "object" and "properties" not in node and isinstance(node.get("additionalProperties"), dict):
            words.append("mapping")
        else:
            words.append(kind)
    return " or ".join(words)


def allowed(node: dict[str, Any], root: dict[str, Any]) -> str:
    """The values a key allows, in words: its enum, const, pattern, bounds, and the same of its entries and keys."""
    parts = []
    if "enum" in node:
        parts.append(", ".join(_literal(v) for v in node["enum"]))
    if "const" in node:
        parts.append(_literal(node["const"]))
    if "pattern" in node:
        parts.append(f"pattern `{node['pattern']}`")
    for word, text in BOUNDS:
        if word in node:
            phrase = text.format(node[word])
            noun = phrase.rsplit(" ", 1)[-1]
            plural = noun in PLURALS and node[word] != 1
            parts.append(phrase.removesuffix(noun) + PLURALS[noun] if plural else phrase)
    if node.get("uniqueItems"):
        parts.append("no duplicates")
    items = resolve(node.get("items"), root)
    if isinstance(items, dict) and (entries := allowed(items, root)):
        parts.append(f"each entry: {entries}")
    names = resolve(node.get("propertyNames"), root)
    if isinstance(names, dict):
        words = names.get("description") or allowed(names, root)
        if "not" in names and "enum" in names["not"]:
            words = ", ".join(filter(None, (words, "not " + ", ".join(_literal(v) for v in names["not"]["enum"]))))
        if words:
            parts.append(f"keys: {words}")
    return "; ".join(parts)


def _cell(text: str) -> str:
    """Text fit for one Markdown table cell: one line; outside code spans `|` escaped and `<` written as
    `&lt;` (`<axis>` would be read as an HTML tag). Python-Markdown keeps a code span's `|` in its cell."""
    parts = " ".join(str(text).split()).split("`")
    return "`".join(part if i % 2 else part.replace("|", "\\|").replace("<", "&lt;") for i, part in enumerate(parts))


def render() -> str:
    """The whole reference page as Markdown."""
    lines = [
        "# Config reference",
        "",
        "<!-- Generated from the schemas by `safetyrepro config-reference --out docs/config-reference.md`;",
        "     do not edit by hand: tests/unit/configuration/test_config_reference.py fails when this page is stale. -->",
        "",
        "Every key of a run's config, its envelope and an import mapping, as the schemas in `workflow/schemas`",
        "(and `src/safetyrepro/schemas`) define them. A path such as `models[].name` is the key `name` of each",
        "entry of the list `models`; `<benchmark>` stands for a key you choose. Defaults are filled in once,",
        "after the checks; a key with no default is absent unless given. `extends:` (an overlay's base) is read",
        "before the schema and is not a schema key: see [Configuration](configuration.md).",
        "",
    ]
    for name, prefix, heading, about in SECTIONS:
        root = schema(name)
        keys = schema_keys(name, prefix)
        lines += [
            f"## {heading}",
            "",
            f"{about} Schema: `{name}.schema.yaml`, {len(keys)} keys.",
            "",
            "| key | type | default | required | allowed | description |",
            "|---|---|---|---|---|---|",
        ]
        for key in keys:
            node = key.node
            description = node.get("description") or node.get("title", "")
            if key.when:
                description = f"(only when {' or '.join(key.when)}) {description}".strip()
            default = _literal(node["default"]) if "default" in node else ""
            cells = (f"`{key.path}`", type_of(node, root), default, key.required, allowed(node, root), description)
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)
