"""The README and the documentation pages: what `mkdocs build --strict` (make lint) does not check."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.session import REPO

PAGES = sorted((REPO / "docs").glob("*.md"))
README = REPO / "README.md"


def prose(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of a Markdown file outside code blocks, with code spans removed."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fenced ^= line.startswith("```")
        if not fenced and not line.startswith("    ") and not line.startswith("<!--"):
            lines.append((number, re.sub(r"``.*?``|`[^`]*`", "", line)))
    return lines


def test_the_readme_fits_on_a_screen_and_states_no_timings_or_commits():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) <= 10 * 1024
    assert re.findall(r"\b[0-9a-f]{7,40}\b", text) == []
    assert re.findall(r"\b\d+(?:\.\d+)? ?(?:s|min|h|seconds|minutes|hours|items/s)\b", text) == []


def test_the_readmes_links_into_the_docs_resolve():
    links = re.findall(r"\]\((docs/[^)#]+)", README.read_text(encoding="utf-8"))
    assert len(links) > 10
    assert [link for link in links if not (REPO / link).is_file()] == []
    assert {f"docs/{page.name}" for page in PAGES} <= set(links) | {"docs/index.md"}


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda path: path.name)
def test_no_placeholder_is_read_as_an_html_tag(path):
    """`<bias type>` outside a code span is an HTML tag to Markdown: the browser shows nothing."""
    assert [(number, tag) for number, line in prose(path) for tag in re.findall(r"<[A-Za-z/][^>]*>", line)] == []


def test_the_layout_page_lists_every_file_of_the_package():
    """docs/layout.md's tree names each file under src/safetyrepro (packages' __init__.py aside), and no other."""
    text = (REPO / "docs" / "layout.md").read_text(encoding="utf-8")
    tree = text.split("```text\n", 1)[1].split("```", 1)[0].splitlines()[1:]
    listed, folders = set(), []
    for line in tree:
        marker = re.search(r"[├└]── ", line)
        depth, name = marker.start() // 4, line[marker.end() :].split("  #", 1)[0].strip()
        folders[depth:] = [name.rstrip("/")] if name.endswith("/") else []
        if not name.endswith("/"):
            listed.add("/".join([*folders[:depth], name]))
    package = REPO / "src" / "safetyrepro"
    files = {
        path.relative_to(package).as_posix()
        for path in package.rglob("*")
        if path.suffix in {".py", ".json", ".yaml"} and "__pycache__" not in path.parts and path.name != "__init__.py"
    }
    assert listed - {"__init__.py"} == files
