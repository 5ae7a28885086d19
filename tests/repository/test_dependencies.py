"""Every library the package imports is one it declares (pyproject.toml's dependencies, or an extra's for the
code that extra serves): a fresh install of the run (`make setup`) then has it, not only as another package's
dependency, or, like httpx before it was declared, only in the test environment."""

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

from helpers.session import REPO

PACKAGE = REPO / "src" / "safetyrepro"


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0]).lower()


def imported_libraries() -> dict[str, set[str]]:
    """Each top-level module outside the standard library that the package imports anywhere (a function's own
    imports too) -> the files that import it."""
    imported: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top != "safetyrepro":
                    imported.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return imported


def test_every_library_imported_is_declared():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {_name(r) for r in project["dependencies"]}
    extras = {_name(r) for requirements in project["optional-dependencies"].values() for r in requirements}
    providers = packages_distributions()
    undeclared = {}
    for module, files in imported_libraries().items():
        # an extra's library need not be installed here (vLLM): its module name is then its distribution's
        names = {_name(d) for d in providers.get(module, [])} or {_name(module)}
        if not names & (declared | extras):
            undeclared[module] = sorted(files)
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
