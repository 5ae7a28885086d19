"""Declaring a subcommand: its parser, what it does and its required `--option` arguments."""

from __future__ import annotations

import argparse

ERROR_PREFIX = "safetyrepro: error: "  # how a handled error is printed: the one line a user gets (cli.main)


def add_command(commands, name: str, func, help: str, required: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """A subcommand of `commands` (the subparsers action) running `func`; `help` is its one-line description."""
    parser = commands.add_parser(name, description=help, allow_abbrev=False)  # `--out` is not `--outputs`
    for option in required:
        parser.add_argument(f"--{option}", required=True)
    parser.set_defaults(func=func)
    return parser
