"""Snakemake dry runs of one workflow in one working directory, one after another in one Python process:

    python tests/dry_run_edits.py REQUEST.json OUT.json

REQUEST holds the scratch copy of the workflow and package (`source`: PYTHONPATH names its src/) and the
working directory, and lists the runs, each a config file and the modules (relative to src/safetyrepro)
to edit for it. A run appends a statement to its modules, calls Snakemake's command line
(`snakemake.cli.main`, the `snakemake` command's own entry point) with `--dry-run`, and undoes the edit. Snakemake, pandas and
the package are imported once, not once per dry run (most of a dry run's 2.3 CPU-s; tests/test_workflow.py).

The package's cached functions (the code digests read off the source files among them) are emptied
before each dry run, as a new process starts empty. An edit to a module this process has imported
changes its file, not its code here: the digests are read from the files.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path


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


def empty_caches() -> None:
    """Empty every functools cache of the package's imported modules."""
    for name, module in list(sys.modules.items()):
        if name == "safetyrepro" or name.startswith("safetyrepro."):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def dry_run(arguments: list[str]) -> dict:
    """One `snakemake --dry-run` through the command line's entry point: exit code, stdout and stderr."""
    from snakemake.cli import main

    empty_caches()
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(arguments)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    return {"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def main() -> None:
    request_path, out_path = map(Path, sys.argv[1:3])
    request = json.loads(request_path.read_text())
    source = Path(request["source"])
    results = []
    for run in request["runs"]:
        arguments = ["--snakefile", str(source / "Snakefile"), "--directory", request["workdir"]]
        with edited(source, run["modules"]):
            results.append(dry_run([*arguments, "--configfile", run["configfile"], "--dry-run"]))
    out_path.write_text(json.dumps(results))


if __name__ == "__main__":
    main()
