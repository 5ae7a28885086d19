"""Declaring a subcommand: its parser, what it does, its required `--option` arguments and a job's record
options; how a command's errors and warnings are printed."""

from __future__ import annotations

import argparse

WARNING_PREFIX = "safetyrepro: warning: "


def plugin_warnings() -> list[str]:
    """A line per registered benchmark, backend, scorer or human labels that cannot be used, naming it and its
    package: what a command that went on without it prints, once (one that needs it is refused with the same error;
    docs/extending.md)."""
    from safetyrepro.backends import discovered
    from safetyrepro.benchmarks import BROKEN
    from safetyrepro.scorers import discovered as scorers
    from safetyrepro.scorers.human_labels import discovered as human_labels

    problems = [*BROKEN.values(), *discovered().broken.values(), *scorers().broken.values()]
    problems += human_labels().broken.values()
    return [
        f"{WARNING_PREFIX}{problem} (left out: only a config or command that names it is refused)"
        for problem in problems
    ]


def refuse_broken(names: list[str], key: str = "") -> None:
    """A ConfigError, with the plugin's error, where `names` holds a benchmark plugin that cannot be used (argparse
    offers their names, so that naming one says why it is left out; docs/extending.md)."""
    from safetyrepro.benchmarks import BROKEN
    from safetyrepro.configuration.schema import ConfigError

    for name in names:
        if name in BROKEN:
            raise ConfigError(f"{key}{BROKEN[name]}")


def add_command(commands, name: str, func, help: str, required: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """A subcommand of `commands` (the subparsers action) running `func`; `help` is its one-line description."""
    parser = commands.add_parser(name, description=help, allow_abbrev=False)  # `--out` is not `--outputs`
    for option in required:
        parser.add_argument(f"--{option}", required=True)
    parser.set_defaults(func=func)
    return parser


def add_record_options(parser: argparse.ArgumentParser) -> None:
    """The options by which the workflow has a job record what it wrote (the `job` decorator)."""
    group = parser.add_argument_group("the job's record (the workflow passes these)")
    group.add_argument("--job-record", help="where to write the record, results/jobs/<first output>.json")
    group.add_argument("--fingerprint", help="what the outputs depend on, hashed by the workflow")
    group.add_argument("--results-dir", default=".", help="the results folder (inputs read from it are recorded)")
    group.add_argument("--inputs", nargs="*", default=[], help="the files the job reads")
    group.add_argument(
        "--outputs",
        nargs="*",
        default=[],
        help="the files the job writes (the record among them or not), to hash into the record",
    )
