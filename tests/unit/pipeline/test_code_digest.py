"""The code digest of the fingerprints: what counts as a change of a job's code, and what does not."""

import textwrap

import pytest

from safetyrepro.pipeline.fingerprints import JOB_CODE, code_closure, code_digest

# One closure, four ways: as written; f moved unchanged from a to b, and g from b to c (the imports follow, a
# docstring added); f edited; f moved out of the closure.
WRITTEN = {
    "a": """
            from {pkg}.b import g
            from {pkg} import c

            def f(x):
                return g(x) + 1

            def h():
                from {pkg}.b import g
                return c.k(g(1))
        """,
    "b": "def g(x):\n    return 2 * x\n",
    "c": "def k(x):\n    return x\n",
}
VARIANTS = {
    "written": WRITTEN,
    "moved": {
        "a": """
            '''Now only h.'''
            from {pkg} import c
            from {pkg}.b import f

            def h():
                from {pkg}.c import g
                return c.k(g(1))
        """,
        "b": "from {pkg}.c import g\n\ndef f(x):\n    return g(x) + 1\n",
        "c": "def k(x):\n    return x\n\ndef g(x):\n    '''Doubled.'''\n    return 2 * x\n",
    },
    "edited": {**WRITTEN, "a": WRITTEN["a"].replace("g(x) + 1", "g(x) + 2")},
    "moved_out": {  # f now in d, which nothing of the closure imports
        "a": """
            from {pkg}.b import g
            from {pkg} import c

            def h():
                from {pkg}.b import g
                return c.k(g(1))
        """,
        "b": "def g(x):\n    return 2 * x\n",
        "c": "def k(x):\n    return x\n",
        "d": "from {pkg}.b import g\n\ndef f(x):\n    return g(x) + 1\n",
    },
}


@pytest.fixture
def digests(tmp_path, monkeypatch):
    """Each variant written as a package of its own (pkg_written, ...), its digest from module a."""
    monkeypatch.syspath_prepend(str(tmp_path))
    found = {}
    for variant, modules in VARIANTS.items():
        package = tmp_path / f"pkg_{variant}"
        package.mkdir()
        (package / "__init__.py").write_text("")
        for name, code in modules.items():
            (package / f"{name}.py").write_text(textwrap.dedent(code).format(pkg=package.name))
        found[variant] = code_digest(f"{package.name}.a")
        assert code_closure(f"{package.name}.a")[0] == f"{package.name}.a"
    return found


def test_a_definition_moved_unchanged_within_the_closure_changes_nothing(digests):
    assert digests["moved"] == digests["written"]


def test_an_edit_or_a_definition_leaving_the_closure_changes_the_digest(digests):
    assert digests["edited"] != digests["written"]
    assert digests["moved_out"] != digests["written"]


def test_the_estimate_jobs_code_covers_the_module_writing_estimate_md():
    """estimate.md is rendered by results.markdown.estimate_markdown: an edit of it reruns the estimate job."""
    assert "safetyrepro.results.markdown" in code_closure(*JOB_CODE["estimate"])
