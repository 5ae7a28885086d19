"""docs/config-reference.md: generated from the schemas, current, and listing every key they hold."""

from __future__ import annotations

import re

import pytest
import yaml
from helpers.session import REPO

from safetyrepro.cli import main
from safetyrepro.configuration.reference import SECTIONS, render
from safetyrepro.configuration.schema import schema

PAGE = REPO / "docs" / "config-reference.md"


def page_keys() -> dict[str, list[str]]:
    """Section heading -> the key paths of its table, as the page lists them."""
    sections: dict[str, list[str]] = {}
    for block in PAGE.read_text(encoding="utf-8").split("\n## ")[1:]:
        heading = block.split("\n", 1)[0]
        sections[heading] = re.findall(r"^\| `([^`]+)` \|", block, re.MULTILINE)
    return sections


def schema_paths(node, root, prefix: str, found: set[str]) -> None:
    """Every key path under a schema node, each chosen key written `<>`: its own walk, not the generator's."""
    while isinstance(node, dict) and "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[1]] | {k: v for k, v in node.items() if k != "$ref"}
    if not isinstance(node, dict):
        return
    named = [(name, sub) for name, sub in node.get("properties", {}).items() if sub is not True]
    named += [("<>", sub) for sub in [node.get("additionalProperties")] if isinstance(sub, dict)]
    named += [("<>", sub) for sub in node.get("patternProperties", {}).values()]
    for name, sub in named:
        found.add(prefix + name)
        schema_paths(sub, root, f"{prefix}{name}.", found)
    if isinstance(node.get("items"), dict):
        schema_paths(node["items"], root, prefix.removesuffix(".") + "[].", found)
    for part in node.get("allOf", []) + node.get("oneOf", []) + node.get("anyOf", []):
        schema_paths(part, root, prefix, found)
    for branch in ("then", "else"):
        schema_paths(node.get(branch), root, prefix, found)


def generic(path: str) -> str:
    return re.sub(r"<[^>]*>", "<>", path)


def test_the_committed_page_is_what_the_command_writes(tmp_path):
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/config-reference.md is stale: run `safetyrepro config-reference --out docs/config-reference.md`"
    )
    out = tmp_path / "reference.md"
    assert main(["config-reference", "--out", str(out)]) == 0 and out.read_text(encoding="utf-8") == render()
    assert main(["config-reference", "--check", str(out)]) == 0
    out.write_text(render().replace("| `data_dir` |", "| `data_folder` |"), encoding="utf-8")
    assert main(["config-reference", "--check", str(out)]) == 1


@pytest.mark.parametrize(("name", "prefix", "heading"), [section[:3] for section in SECTIONS])
def test_the_page_lists_every_key_of_the_schema(name, prefix, heading):
    found: set[str] = set()
    root = schema(name)
    schema_paths(root, root, prefix, found)
    listed = page_keys()[heading]
    assert len(listed) == len(set(listed)), "a key is listed twice"
    assert {generic(path) for path in listed} == found
    assert len(listed) == len(found)
    assert f"Schema: `{name}.schema.yaml`, {len(found)} keys." in PAGE.read_text(encoding="utf-8")


def config_paths(data, prefix: str = "") -> set[str]:
    """Every key path a YAML document writes (list entries as `[]`)."""
    paths = set()
    if isinstance(data, dict):
        for key, value in data.items():
            paths |= {f"{prefix}{key}"} | config_paths(value, f"{prefix}{key}.")
    elif isinstance(data, list):
        for entry in data:
            paths |= config_paths(entry, prefix.removesuffix(".") + "[].")
    return paths


def test_every_key_the_shipped_configs_use_is_on_the_page():
    documented = [path for paths in page_keys().values() for path in paths]
    # a chosen key (`<value>`) may itself hold a dot (decoding value `t0.3`)
    patterns = [re.compile(".+".join(map(re.escape, re.split(r"<[^>]*>", path)))) for path in documented]
    used = set()
    for path in sorted((REPO / "config").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        prefix = "envelope." if path.name.startswith("envelope") else ""
        # `extends:` (an overlay's or an envelope file's base) is read before the checks: the page says so
        used |= {key for key in config_paths(data, prefix) if key != f"{prefix}extends"}
    assert len(used) > 60
    assert [key for key in sorted(used) if not any(p.fullmatch(key) for p in patterns)] == []


@pytest.mark.parametrize("name", [section[0] for section in SECTIONS])
def test_no_schema_keyword_is_null(name):
    """A null keyword is YAML's reading of an unquoted comma in a flow mapping (`description: a, b`)."""

    def nulls(node, where: str) -> list[str]:
        if isinstance(node, dict):
            return [f"{where}/{k}" for k, v in node.items() if v is None] + [
                n for k, v in node.items() for n in nulls(v, f"{where}/{k}")
            ]
        return [n for i, v in enumerate(node) for n in nulls(v, f"{where}/{i}")] if isinstance(node, list) else []

    assert nulls(schema(name), "") == []
