"""What each job's outputs depend on, hashed: the settings it reads and the code that computes it.

The workflow passes these digests as rule params, so Snakemake reruns a job when, and only when,
something its outputs depend on changed (docs/reruns.md). A job's code is the
closure, within this package, of the modules that compute it (imports needed only for type hints
do not count), read as syntax trees: comments, docstrings and formatting do not count. A plugin's
module (a benchmark or backend registered by another package) counts with its closure within its
own package and this one. Plumbing that does not change results (the CLI, the model server, config
loading) is in no closure.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import importlib.util
import json
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from safetyrepro.results.records import fingerprint, record_of, record_problem, same_file_sha256
from safetyrepro.results.storage import cell_file

if TYPE_CHECKING:
    from safetyrepro.configuration.settings import Settings
    from safetyrepro.core.config_id import Config
    from safetyrepro.core.model_spec import ModelSpec
    from safetyrepro.scorers import Scorer

PACKAGE = "safetyrepro"
SOURCE_ROOT = Path(__file__).resolve().parents[1]
DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)  # what ast.get_docstring reads

# The modules whose code decides each job's outputs (cells and analyses add theirs: see below).
JOB_CODE: dict[str, tuple[str, ...]] = {
    "build_embedded_model": ("running.embedded_model",),
    "describe_model": ("running.models",),
    "cell": ("running.cell", "configuration.envelope"),
    "aggregate": ("results.aggregate",),
    "rho_flip": ("analysis.flips", "results.markdown"),
    "analysis": ("results.markdown",),
    "summary": ("results.markdown", "results.headline"),
    "headline": ("results.headline",),
    "check_headline": ("results.headline",),
    "provenance": ("results.provenance",),
    "grid_card": ("results.grid_card",),
    "figure": ("results.figures",),
    "case_study": ("case_study",),
    "import": ("imports", "imports.record"),
    "audit": ("audit",),
    "estimate": ("estimation", "results.markdown"),
}


@cache
def _source_file(module: str) -> Path | None:
    """The file of a package module ("safetyrepro.a.b") or of a plugin's Python module, or None for
    anything else."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            return None
        origin = Path(spec.origin) if spec is not None and spec.origin else None
        return origin if origin is not None and origin.suffix == ".py" and origin.is_file() else None
    base = SOURCE_ROOT.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _is_type_checking(node: ast.stmt) -> bool:
    """`if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`): its body runs only under a type checker."""
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).split(".")[-1] == "TYPE_CHECKING"


def _statements(body: list[ast.stmt], skip_type_checking: bool = False) -> Iterator[ast.stmt]:
    """Every statement of `body` and of the blocks nested in it (functions, classes, branches, loops,
    `with`, `try` and `match`), outer first; with `skip_type_checking`, not the body of an
    `if TYPE_CHECKING:` (its `else` is kept). Imports, definitions and docstrings are statements, so
    the expressions between them need no visit."""
    for statement in body:
        yield statement
        for field in ("body", "handlers", "orelse", "finalbody", "cases"):
            if field == "body" and skip_type_checking and _is_type_checking(statement):
                continue
            for block in getattr(statement, field, ()):  # an `except` handler or a `match` case holds a body
                yield from _statements([block] if isinstance(block, ast.stmt) else block.body, skip_type_checking)


def _own(module: str) -> set[str]:
    """The top-level packages whose modules count as `module`'s code: this one and a plugin's own."""
    return {PACKAGE, module.partition(".")[0]}


def _import_targets(module: str, statement: ast.Import | ast.ImportFrom) -> set[str]:
    """The modules an import statement of `module` names (`from . import x` and `from .a import b` may name
    modules: x, a.b)."""
    if isinstance(statement, ast.Import):
        return {alias.name for alias in statement.names}
    package = module if _source_file(module).name == "__init__.py" else module.rpartition(".")[0]
    anchor = package.rsplit(".", statement.level - 1)[0] if statement.level else ""
    target = ".".join(part for part in (anchor, statement.module or "") if part)
    submodules = (f"{target}.{alias.name}" for alias in statement.names)
    return {name if name.partition(".")[0] in _own(module) and _source_file(name) else target for name in submodules}


@cache
def imported_modules(module: str) -> tuple[str, ...]:
    """The modules of this package (and of a plugin's own package, for a plugin's module) that `module`
    imports anywhere in its code, except under `if TYPE_CHECKING:`."""
    found: set[str] = set()
    for statement in _statements(_syntax_tree(module).body, skip_type_checking=True):
        if isinstance(statement, ast.Import | ast.ImportFrom):
            found |= _import_targets(module, statement)
    own = _own(module)  # never looked up elsewhere: that would import other packages
    return tuple(
        sorted(name for name in found if name.partition(".")[0] in own and _source_file(name) and name != module)
    )


def _full_name(module: str) -> str:
    """A module named relative to the package (or a plugin's, by its full name) by its full name."""
    return f"{PACKAGE}.{module}" if _source_file(f"{PACKAGE}.{module}") else module


def code_closure(*modules: str, leave_out: tuple[str, ...] = ()) -> list[str]:
    """The modules given (relative to the package; a plugin's by its full name) and every module of
    theirs they import, transitively. A module in `leave_out` (named alike) counts only where a module
    other than those given imports it (a scorer's module imported by the benchmark's rules is their code)."""
    roots = [_full_name(name) for name in modules]
    skipped = {_full_name(name) for name in leave_out}
    todo = [name for root in roots for name in imported_modules(root) if name not in skipped]
    seen = set(roots)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(imported_modules(name))
    return sorted(seen)


@cache
def _syntax_tree(module: str) -> ast.Module:
    """A module's syntax tree without docstrings (parsed once: its imports and its code are read off it)."""
    tree = ast.parse(_source_file(module).read_text(encoding="utf-8"))
    for node in (tree, *_statements(tree.body)):  # listed before any body changes
        if isinstance(node, DOCUMENTED) and ast.get_docstring(node, clean=False) is not None:
            node.body = node.body[1:] or [ast.Pass()]
    return tree


@cache
def _file_digest(path: Path) -> str:
    """A scorer's file's SHA-256, read once per process (every cell that scorer labels asks for it)."""
    from safetyrepro.running.hashing import file_sha256

    return file_sha256(path)


@cache
def _code_of(module: str) -> str:
    """A module's code: its top-level statements as syntax trees without docstrings, one per line, less its
    imports of modules of its own package (the imported modules are in the closure, and their code counts
    there). Comments, docstrings, formatting, and which module of a closure holds a definition do not count."""
    tree = copy.deepcopy(_syntax_tree(module))
    own = _own(module)
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                kept = [
                    statement
                    for statement in block
                    if not isinstance(statement, ast.Import | ast.ImportFrom)
                    or not all(name.partition(".")[0] in own for name in _import_targets(module, statement))
                ]
                setattr(node, field, kept or ([] if field != "body" else [ast.Pass()]))
    return "\n".join(ast.dump(statement) for statement in tree.body)


@cache
def code_digest(*modules: str, leave_out: tuple[str, ...] = ()) -> str:
    """SHA-256 over the code of `code_closure(*modules, leave_out=leave_out)`: its modules' statements, sorted, so a
    definition moved unchanged from one module of the closure to another changes nothing."""
    statements = sorted(
        line for name in code_closure(*modules, leave_out=leave_out) for line in _code_of(name).split("\n")
    )
    return hashlib.sha256("\n".join(statements).encode()).hexdigest()


def _labelling(settings: Settings, benchmark: str, config: Config) -> Scorer | None:
    """The scorer labelling the config's cells on `benchmark` (None on the log-likelihood path)."""
    from safetyrepro.benchmarks import BENCHMARKS
    from safetyrepro.scorers import scorer_of

    scorer = settings.labelling_scorer(benchmark, config)
    return scorer_of(BENCHMARKS[benchmark], scorer) if scorer else None


def cell_modules(settings: Settings, spec: ModelSpec, benchmark: str, config: Config) -> tuple[str, ...]:
    """A cell's code: its benchmark, the backend serving its scoring path to its model, prompt rendering, the cell
    runner and the code of the scorer labelling it (`Scorer.code`)."""
    from safetyrepro.benchmarks import BENCHMARKS

    backend = backend_module(settings.backend.serving(config.scoring, spec))
    module = type(BENCHMARKS[benchmark]).__module__
    scorer = _labelling(settings, benchmark, config)
    return (*JOB_CODE["cell"], module.removeprefix(f"{PACKAGE}."), backend, *(scorer.code() if scorer else ()))


def other_scorers_modules(settings: Settings, benchmark: str, config: Config) -> tuple[str, ...]:
    """The code of the benchmark's scorers other than the one labelling this config's cells (all of them on the
    log-likelihood path): not in the cell's code (editing one relabels that scorer's cells, and generates nothing
    again)."""
    from safetyrepro.benchmarks import BENCHMARKS
    from safetyrepro.scorers import scorer_of

    labelled = BENCHMARKS[benchmark]
    scorer = _labelling(settings, benchmark, config)
    others = {module for name in labelled.scorers for module in scorer_of(labelled, name).code()}
    return tuple(sorted(others - set(scorer.code() if scorer else ())))


def backend_module(kind: str) -> str:
    """The module of a registered backend (relative to the package; a plugin's by its full name)."""
    from safetyrepro.backends import registered

    return registered()[kind].__module__.removeprefix(f"{PACKAGE}.")


def backend_modules(settings: Settings, spec: ModelSpec) -> tuple[str, ...]:
    """The modules of the backends a model's server loads."""
    return tuple(sorted({backend_module(kind) for kind in settings.backend.kinds(spec).values()}))


def analysis_modules(name: str, benchmarks: Iterable[str]) -> tuple[str, ...]:
    """An analysis job's code: the module of its function, the Markdown rendering, and for an analysis that
    reads human labels, the code of the `HumanLabels` of the run's `benchmarks` that have them."""
    from safetyrepro.analysis.suite import ANALYSES
    from safetyrepro.scorers.human_labels import human_labels_of, with_human_labels

    analysis = ANALYSES[name]
    labelled = with_human_labels(benchmarks) if analysis.human_labels else []
    return (
        *JOB_CODE["analysis"],
        analysis.module.removeprefix(f"{PACKAGE}."),
        *(m for b in labelled for m in human_labels_of(b).code()),
    )


def _serving(settings: Settings, scoring: str, batch, spec: ModelSpec) -> dict:
    """What the backend serving a scoring path adds to a fingerprint: its name, how requests are batched
    (HF's batch size, vLLM's batch-invariant kernels change what a batch computes), its options that change
    results (e.g. HF's prefix reuse: near-ties may move at bf16) and another environment's Python (torch,
    transformers) where one computes."""
    from safetyrepro.backends import registered

    backend = settings.backend
    params = {"backend": backend.serving(scoring, spec), "batch": vars(batch)}
    params |= {key: backend.option(key) for key in registered()[params["backend"]].result_options}
    if backend.server_python is not None:
        params["server_python"] = backend.server_python
    return params


def cell_fingerprint(settings: Settings, spec: ModelSpec, benchmark: str, config: Config) -> str:
    """Everything a cell's result depends on, hashed; a change reruns exactly the affected cells."""

    envelope = settings.envelope
    params = {
        "model": spec.record(),
        **_serving(settings, config.scoring, settings.batch_condition(config, spec), spec),
        "n_items": settings.n_items[benchmark],
        "subset_seed": settings.subset_seed,
        "fewshot_pool": settings.fewshot_pool,
        "config": config.as_dict(),
        "values": {axis: envelope.axes[axis][config[axis]] for axis in envelope.axes},
        "seeds": envelope.seeds_for(config),
        "decoding": vars(envelope.decoding(config)),
        "stop": envelope.stop_strings(config),
        "shot_format": envelope.shot_format,
        "code": code_digest(
            *cell_modules(settings, spec, benchmark, config),
            leave_out=other_scorers_modules(settings, benchmark, config),
        ),
    }
    if (scorer := _labelling(settings, benchmark, config)) and scorer.files:  # a fitted head
        params["scorer_files"] = {path.name: _file_digest(path) for path in scorer.files}
    if judge := settings.judge_model(benchmark, config):  # the judge model, as a model under test is named
        params["judge"] = judge.record()
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()


def data_digests(settings: Settings, benchmarks: Iterable[str]) -> dict[str, str | None]:
    """The SHA-256 of each data file of `benchmarks` as it is now in the data folder, by its path there: a job
    that reads them is redone when their contents change, not their file times (data restored, re-synced or
    copied without its times reruns nothing; docs/reruns.md)."""
    return {path: digest for name in benchmarks for path, digest in _data_digests(settings.data_dir, name)}


@cache
def _data_digests(data_dir: Path, benchmark: str) -> tuple[tuple[str, str | None], ...]:
    """One benchmark's (None for a file not there), read once a process (a plan asks for each cell's)."""
    from safetyrepro.running.data import manifest

    paths = [(entry.path, data_dir / entry.path) for entry in manifest([benchmark])]
    return tuple((name, same_file_sha256(path) if path.is_file() else None) for name, path in paths)


@cache
def _model_files(spec: ModelSpec) -> dict[str, str]:
    """A local model folder's files as describe_model hashes them now, read once a process (a served model's
    tokenizer folder's too: describe_model asks no server)."""
    from safetyrepro.running.models import describe_model

    return describe_model(spec)["files"]


def changed_model_files(spec: ModelSpec, description: Path) -> str | None:
    """What changed in a local model folder since its describe_model job described it (`description`, that job's
    output, holds the SHA-256 of each file), or None: weights replaced in the folder redo its description, and so
    its cells, which read it (docs/reruns.md). Its files are read at each plan. A hub model is named by its id and
    revision, and the embedded model's folder is the output of its build: None."""
    if spec.embedded or not spec.path or not Path(spec.path).is_dir():  # "": a served model without a tokenizer
        return None
    described = json.loads(description.read_text(encoding="utf-8")).get("files", {})
    now = _model_files(spec)
    changed = sorted(name for name in described.keys() | now.keys() if described.get(name) != now.get(name))
    return f"the files of {spec.path} changed since it was written ({', '.join(changed)})" if changed else None


def describe_dependencies(spec: ModelSpec) -> dict:
    """What a model's describe_model job record fingerprints (the workflow's DEPENDS["describe_model"]): its spec and
    the code that describes it (a served model's: the backend that asks its server too)."""
    served = ("backends.openai_server",) if spec.endpoint is not None else ()
    return {"spec": spec.record(), "code": code_digest(*JOB_CODE["describe_model"], *served)}


def cell_dependencies(settings: Settings, spec: ModelSpec, benchmark: str, config: Config) -> dict:
    """What a grid cell's job record fingerprints (the workflow's DEPENDS["cell"]): its settings and code, and
    its benchmark's data."""
    return {"cell": cell_fingerprint(settings, spec, benchmark, config), "data": data_digests(settings, [benchmark])}


def grid_cell_is_current(settings: Settings, model: str, benchmark: str, config_id: str) -> bool:
    """Whether a grid cell's outputs are there and its record vouches for them, as the workflow's check before
    it plans (safetyrepro.pipeline.outdated): what the audit counts as already on disk."""
    outputs = [cell_file(settings.results_dir, model, benchmark, config_id, kind) for kind in ("items", "summary")]
    if not all(path.is_file() for path in outputs):
        return False
    made_of = cell_dependencies(settings, settings.model(model), benchmark, settings.config(benchmark, config_id))
    record = Path(record_of(str(outputs[0]), str(settings.results_dir)))
    return record_problem(record, fingerprint(made_of), outputs, settings.results_dir) is None


def judge_agreement_fingerprint(settings: Settings, benchmark: str, value: str) -> str:
    """What the agreement with a benchmark's human labels of the judge a scorer axis value asks depends on: the
    judge, the backend that serves it, the phrasing of its question (none: the question's own), the benchmark's
    data as it is now (`data_digests`) and the code that asks (its judge question) and measures (its
    `HumanLabels`)."""
    from safetyrepro.benchmarks import BENCHMARKS
    from safetyrepro.scorers import scorer_of
    from safetyrepro.scorers.human_labels import human_labels_of

    name, judge_name, phrasing = settings.envelope.labelling(value, benchmark)
    judge = settings.model(judge_name)
    serving = _serving(settings, "freeform", settings.backend.batch_condition("freeform", None, judge), judge)
    scorer = scorer_of(BENCHMARKS[benchmark], name)
    modules = (*scorer.code(), *human_labels_of(benchmark).code(), backend_module(serving["backend"]))
    params = {
        "judge": judge.record(),
        **serving,
        "data": data_digests(settings, [benchmark]),
        "code": code_digest(*modules),
    }
    if phrasing is not None:  # the question's own wording keeps a run's fingerprints as they were
        params["question"] = phrasing
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()
