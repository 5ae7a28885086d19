"""The tests' layout (docs/development.md): the folder says what a test is, and no test module is a library."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers.session import REPO

TESTS = REPO / "tests"
KINDS = ("unit", "end_to_end", "repository")  # the folders of test modules; helpers/ holds the rest


def module_files() -> list[Path]:
    """The test modules under tests/ (the toy plugin package's aside)."""
    return sorted(path for path in TESTS.rglob("test_*.py") if "plugins" not in path.relative_to(TESTS).parts)


def imported_modules(path: Path) -> set[str]:
    """The top-level names of the modules `path` imports (absolute imports only)."""
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    return imported


def test_no_test_module_imports_another_or_conftest():
    """What test modules share lives in tests/helpers/ (`from helpers.x import ...`), so that a test module is never
    a library: no module under tests/ (helpers and conftest included) imports a test module or conftest."""
    names = {path.stem for path in module_files()} | {"conftest"}
    importers = sorted(TESTS.rglob("*.py"))
    assert len(importers) > 60
    found = {
        str(path.relative_to(TESTS)): sorted(imported_modules(path) & names)
        for path in importers
        if imported_modules(path) & names
    }
    assert found == {}


def test_every_test_module_is_in_the_folder_of_its_kind():
    """Test modules are in unit/ (mirroring src/safetyrepro), end_to_end/ or repository/; tests/ itself and
    helpers/ hold none, and every folder of unit/ is a package of src/safetyrepro."""
    modules = module_files()
    assert len(modules) > 40
    assert [str(p.relative_to(TESTS)) for p in modules if p.relative_to(TESTS).parts[0] not in KINDS] == []
    package = REPO / "src" / "safetyrepro"
    folders = {
        p.relative_to(TESTS / "unit") for p in (TESTS / "unit").rglob("*") if p.is_dir() and p.name != "__pycache__"
    }
    assert folders and {str(f) for f in folders if not (package / f / "__init__.py").is_file()} == set()


def test_test_module_names_are_unique():
    """pytest imports a test module by its file name (no __init__.py in the test folders): two of a name clash."""
    stems = [path.stem for path in module_files()]
    assert sorted({s for s in stems if stems.count(s) > 1}) == []


def test_every_test_marked_e2e_is_in_end_to_end():
    """A test marked `e2e` runs what a user runs (the workflow, a command in a clone, pip's resolver, the real model
    against another package): whatever its subject, its kind is end-to-end, so it is in end_to_end/."""

    def marks_e2e(path: Path) -> bool:
        return any(
            isinstance(node, ast.Attribute) and node.attr == "e2e" and getattr(node.value, "attr", None) == "mark"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        )

    marked = [path for path in module_files() if marks_e2e(path)]
    assert len(marked) > 10
    assert [str(p.relative_to(TESTS)) for p in marked if p.relative_to(TESTS).parts[0] != "end_to_end"] == []
