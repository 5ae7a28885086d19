"""Declaring a subcommand: its parser, what it does and its required `--option` arguments; how a command's
errors and warnings are printed."""

from __future__ import annotations

import argparse

ERROR_PREFIX = "safetyrepro: error: "  # how a handled error is printed: the one line a user gets (cli.main)
WARNING_PREFIX = "safetyrepro: warning: "


def plugin_warnings() -> list[str]:
    """A line per registered benchmark, backend or scorer that cannot be used, naming it and its package: what a command
    that went on without it prints, once (one that needs it is refused with the same error; docs/extending.md)."""
    from safetyrepro.backends import discovered
    from safetyrepro.benchmarks import BROKEN
    from safetyrepro.scorers import discovered as scorers

    problems = [*BROKEN.values(), *discovered().broken.values(), *scorers().broken.values()]
    return [
        f"{WARNING_PREFIX}{problem} (left out: only a config or command that names it is refused)"
        for problem in problems
    ]


def add_command(commands, name: str, func, help: str, required: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """A subcommand of `commands` (the subparsers action) running `func`; `help` is its one-line description."""
    parser = commands.add_parser(name, description=help, allow_abbrev=False)  # `--out` is not `--outputs`
    for option in required:
        parser.add_argument(f"--{option}", required=True)
    parser.set_defaults(func=func)
    return parser
