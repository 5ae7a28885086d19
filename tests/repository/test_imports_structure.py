"""The package's import structure: no import circle, and the interfaces a plugin implements import light."""

import ast
import json
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from helpers.session import REPO

PACKAGE = REPO / "src" / "safetyrepro"
# The interfaces a plugin implements: importing one loads no plugin, no pandas and no torch.
INTERFACES = [
    "safetyrepro.benchmarks.base",
    "safetyrepro.backends.base",
    "safetyrepro.scorers.base",
    "safetyrepro.scorers.human_labels",
]
HEAVY = ["pandas", "torch"]
PLUGIN_GROUPS = [
    "safetyrepro.benchmarks",
    "safetyrepro.backends",
    "safetyrepro.scorers",
]  # the registered plugins, built-in ones included


def package_modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """Module -> each package module it imports anywhere in its code (under `if TYPE_CHECKING:` and inside
    functions too), and the packages above that module, which Python imports first (except the importer's own)."""
    modules, graph = package_modules(), {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level - 1)[0] if node.level else ""
                module = ".".join(part for part in (base, node.module or "") if part)
                targets = [
                    f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules else module for alias in node.names
                ]
            else:
                continue
            for target in targets:
                while target and target not in modules:  # `import a.b.c` of a name in a.b
                    target = target.rpartition(".")[0]
                parts = target.split(".") if target else []
                above = [".".join(parts[:i]) for i in range(2, len(parts))]
                for imported in [*above, target] if target else []:
                    if imported != name and not name.startswith(f"{imported}."):
                        graph[name].add(imported)
    return graph


def test_the_package_has_no_import_circle():
    try:
        TopologicalSorter(import_graph()).prepare()
    except CycleError as circle:
        pytest.fail(f"import circle: {' -> '.join(circle.args[1])}")


@pytest.mark.parametrize("interface", INTERFACES)
def test_importing_a_plugin_interface_loads_no_plugin_and_no_heavy_library(interface):
    code = f"import json, sys; import {interface}; print(json.dumps(sorted(sys.modules)))"
    loaded = set(
        json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    )
    plugins = {point.module for group in PLUGIN_GROUPS for point in entry_points(group=group)}
    assert plugins and (sorted(plugins & loaded), sorted(name for name in HEAVY if name in loaded)) == ([], [])
