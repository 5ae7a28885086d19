"""Snakemake dry runs of one workflow in one working directory, one after another in one Python process:

    python tests/helpers/dry_run_edits.py REQUEST.json OUT.json

REQUEST holds the scratch copy of the workflow and package (`source`: PYTHONPATH names its src/) and lists
the runs, each a working directory, a config file and the modules (relative to src/safetyrepro) to edit for
it (none: the workflow as it is). A run appends a statement to its modules, calls Snakemake's command line
(`snakemake.cli.main`, the `snakemake` command's own entry point) with `--dry-run`, and undoes the
edit. Python, Snakemake, pandas and the package start once, not once per dry run (docs/measurements.md measures both ways).

The package's cached functions (the code digests read off the source files among them) are emptied
before each dry run, as a new process starts without them. An edit to a module this process has
imported changes its file, not its code here: the digests are read from the files. What this process
keeps between dry runs could make one see less than a new process would (an edit unseen: no rerun),
or see an undone edit still: tests/end_to_end/test_workflow.py expects a rerun of every edit made here, and a
last dry run without an edit to plan nothing.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

# the digests of a job's code, read off the source files: what an edit must reach
FINGERPRINTS = "safetyrepro.pipeline.fingerprints"
CODE_CACHES = {f"{FINGERPRINTS}.{name}" for name in ("_syntax_tree", "_code_of", "code_digest", "imported_modules")}


@contextlib.contextmanager
def edited(source: Path, modules: list[str] | tuple[str, ...]) -> Iterator[None]:
    """Each of `modules` (relative to src/safetyrepro under `source`) with a statement appended, until the
    block ends."""
    paths = [source / "src" / "safetyrepro" / module for module in modules]
    originals = [path.read_text() for path in paths]
    for path, original in zip(paths, originals):
        path.write_text(original + "\n_AN_EDIT = 1\n")
    try:
        yield
    finally:
        for path, original in zip(paths, originals):
            path.write_text(original)


def empty_caches() -> set[str]:
    """Empty every functools cache of the package's imported modules (functions, and methods of their
    classes), as a new process starts with none; returns their qualified names."""
    emptied = set()
    for name, module in list(sys.modules.items()):
        if name == "safetyrepro" or name.startswith("safetyrepro."):
            for value in list(vars(module).values()):
                members = vars(value).values() if isinstance(value, type) and value.__module__ == name else ()
                for cached in (value, *(getattr(member, "__func__", member) for member in members)):
                    if callable(getattr(cached, "cache_clear", None)):
                        cached.cache_clear()
                        emptied.add(f"{name}.{cached.__qualname__}")
    return emptied


def dry_run(arguments: list[str]) -> dict:
    """One `snakemake --dry-run` through the command line's entry point: exit status, stdout and stderr
    (a message that ends the run, `sys.exit("...")`, goes to stderr, as Python prints it)."""
    from snakemake.cli import main

    emptied = empty_caches()
    assert CODE_CACHES <= emptied, f"caches not found: {sorted(CODE_CACHES - emptied)}"
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(arguments)
        except SystemExit as stop:
            if stop.code is None or isinstance(stop.code, int):
                code = stop.code or 0
            else:
                print(stop.code, file=sys.stderr)
                code = 1
    return {"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def main() -> None:
    request_path, out_path = map(Path, sys.argv[1:3])
    request = json.loads(request_path.read_text())
    source = Path(request["source"])
    import safetyrepro.pipeline.fingerprints as fingerprints  # the Snakefile's first import of the package

    assert Path(fingerprints.__file__).is_relative_to(source / "src"), "PYTHONPATH must name the scratch package"
    results = []
    for run in request["runs"]:
        arguments = ["--snakefile", str(source / "Snakefile"), "--directory", run["workdir"]]
        with edited(source, run.get("modules", ())):
            results.append(dry_run([*arguments, "--configfile", run["configfile"], "--dry-run"]))
    out_path.write_text(json.dumps(results))


if __name__ == "__main__":
    main()
