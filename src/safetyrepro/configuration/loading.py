"""Reading a run's config: YAML read strictly, a config's layers (`extends:`) merged, `--config` overrides typed."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from safetyrepro.benchmarks.files import regular_file
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.core.errors import DataError
from safetyrepro.core.messages import excerpt

MAX_YAML_VALUES = 200_000  # a config is a few thousand values; aliases must not expand it past this


MAX_YAML_DEPTH = 64  # a config nests about 8 levels deep; far deeper nesting would exhaust Python's recursion
LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"  # libyaml's parser stops at 1,000 levels with this problem


_INT_TAG = "tag:yaml.org,2002:int"


_MERGE_TAG = "tag:yaml.org,2002:merge"


class YAMLMisread(yaml.constructor.ConstructorError):
    """YAML that loads, but not as it reads: a key given twice, or an integer that YAML 1.1 takes as octal."""


class _StrictLoader(yaml.CSafeLoader):
    """The safe loader (libyaml's parser: five times the pure-Python one's speed), refusing (YAMLMisread) what it would read otherwise than it looks: a mapping's key
    given twice (the last would win) and an integer with a leading zero (octal: 010 is 8). Messages name
    the value's dotted key within the document."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.paths: dict[yaml.Node, str] = {}  # a node -> its dotted key in the document

    def _path(self, parent: yaml.Node, part: str) -> str:
        above = self.paths.get(parent)
        return part if above is None else f"{above}{part}" if part.startswith("[") else f"{above}.{part}"

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                continue  # keys merged in with `<<:` may be overridden
            key = self.construct_object(key_node)
            if key in first_line:
                raise YAMLMisread(
                    None,
                    None,
                    f"key {excerpt(self._path(node, str(key)), 60)} given twice (first on line {first_line[key]}); "
                    "YAML would keep only the last",
                    key_node.start_mark,
                )
            first_line[key] = key_node.start_mark.line + 1
            self.paths[value_node] = self._path(node, str(key))
        return super().construct_mapping(node, deep)

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> list[Any]:
        for index, item in enumerate(node.value):
            self.paths[item] = self._path(node, f"[{index}]")
        return super().construct_sequence(node, deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        value = super().construct_yaml_int(node)
        sign, digits = ("-" if node.value.startswith("-") else ""), node.value.lstrip("+-").replace("_", "")
        if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
            key = self.paths.get(node)
            raise YAMLMisread(
                None,
                None,
                f"{'' if key is None else f'{key[:60]}: '}{node.value} has a leading zero, so YAML 1.1 reads it as "
                f"the octal {value}; write {sign}{digits.lstrip('0') or '0'} (or quote it, if it is text)",
                node.start_mark,
            )
        return value


_StrictLoader.add_constructor(_INT_TAG, _StrictLoader.construct_yaml_int)


def check_shape(data: Any, where: str) -> None:
    """Refuse data that, with every YAML alias expanded, holds more than MAX_YAML_VALUES values or nests
    deeper than MAX_YAML_DEPTH (a ConfigError naming `where`; stops counting early)."""
    stack, count = [(data, 1)], 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_YAML_VALUES:
            raise ConfigError(f"{where}: expands to more than {MAX_YAML_VALUES:,} values (YAML aliases?)")
        if depth > MAX_YAML_DEPTH:
            raise ConfigError(f"{where}: nested more than {MAX_YAML_DEPTH} levels deep")
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children)


def _strict_load(stream: Any, where: str) -> Any:
    """Load YAML text or a stream with `_StrictLoader`, checked by `check_shape`: a misread, too deep a nesting
    or an alias bomb as a ConfigError naming `where`; a syntax error raises yaml.YAMLError."""
    loader = _StrictLoader(stream)  # a SafeLoader: no tag builds a Python object
    try:
        data = loader.get_single_data()
    except YAMLMisread as exc:
        raise ConfigError(f"{where}{_position(exc)}: {exc.problem}") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested more than {MAX_YAML_DEPTH} levels deep") from None
    except yaml.YAMLError as exc:
        if getattr(exc, "problem", None) == LIBYAML_TOO_DEEP:
            raise ConfigError(f"{where}: nested more than {MAX_YAML_DEPTH} levels deep") from None
        raise
    finally:
        loader.dispose()
    check_shape(data, where)
    return data


def _position(exc: yaml.YAMLError) -> str:
    """', line L, column C' of a YAML error, where it has one."""
    mark = getattr(exc, "problem_mark", None)
    return f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def read_yaml(path: str | os.PathLike) -> Any:
    """Load a YAML file strictly (`_strict_load`), turning every problem into a ConfigError with the position."""
    if os.path.lexists(path) and not os.path.isdir(path):
        try:
            regular_file(Path(path), "config file not found")  # a named pipe would block, a device never end
        except DataError as exc:
            raise ConfigError(str(exc)) from None
    try:
        with open(path, encoding="utf-8") as handle:
            return _strict_load(handle, str(path))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a YAML file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:  # no permission, or a file the kernel refuses to give (/proc/self/mem)
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{_position(exc)}: YAML syntax error: {problem}") from None


DEFAULT_CONFIGFILE = "config/config.yaml"


def merge_layer(base: Mapping[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    """`layer` over `base`: mappings merge key by key, anything else replaces; a null value deletes the key."""
    merged = copy.deepcopy(dict(base))
    for key, value in layer.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_layer(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def read_document(path: str) -> dict[str, Any]:
    """A config file's own mapping of keys (its `extends`, if any, not yet followed)."""
    document = read_yaml(path)
    if document is None:
        raise ConfigError(f"{path}: the file is empty")
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: expected a YAML mapping of config keys, got {type(document).__name__}")
    return document


def with_bases(document: dict[str, Any], origin: str, folder: str) -> tuple[dict[str, Any], list[str]]:
    """A complete config as it is; an overlay (`extends: <base>`, relative to `folder`, the overlay's own) merged
    over its base, which may itself be an overlay; and a line per layer, base first. The chain is followed in a
    loop, however long."""
    overlays, read = [], set()
    while "extends" in document:
        if os.path.isfile(origin):
            read.add(os.path.realpath(origin))
        document = dict(document)
        base = document.pop("extends")
        if not isinstance(base, str) or not base.strip():
            raise ConfigError(f"{origin}: extends: expected the path of the config file this overlay changes")
        path = os.path.join(folder, os.path.expanduser(base))
        if os.path.realpath(path) in read:
            raise ConfigError(f"{origin}: extends: {base} is already a layer of this config (a cycle)")
        overlays.append((document, f"{origin} (overlay on {path})"))
        try:
            document = read_document(path)
        except ConfigError as exc:
            raise ConfigError(f"{origin}: extends: {exc}") from None
        origin, folder = path, os.path.dirname(path)
    merged, layers = document, [f"{origin} (complete config)"]
    for overlay, layer in reversed(overlays):
        merged = merge_layer(merged, overlay)
        layers.append(layer)
    return merged, layers


def typed_override(value: Any, key: str) -> Any:
    """A `--config` value (of dotted `key`) as a YAML file would give it, read strictly (`_strict_load`):
    Snakemake leaves nested values as strings, and hands a deleted key to cluster jobs as 'None'. An empty
    value (Snakemake's None for `key=`) or a lone ~ would drop the key, so that its default applied: refused."""
    if isinstance(value, Mapping):
        return {name: typed_override(item, f"{key}.{name}") for name, item in value.items()}
    if isinstance(value, list):
        return [typed_override(item, f"{key}[{index}]") for index, item in enumerate(value)]
    if value is None or value == "":
        raise ConfigError(f"--config {key}: an empty value; give one (null drops the key, and its default applies)")
    if value == "~":
        raise ConfigError(f"--config {key}: a lone ~ is YAML's null; write the full path (or null, to drop the key)")
    if value == "None":
        return None
    if isinstance(value, str):
        try:
            return _strict_load(value, f"--config {key}")
        except (yaml.YAMLError, UnicodeEncodeError):  # libyaml reads UTF-8: a byte that is not stays text
            return value
    return value
