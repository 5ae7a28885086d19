"""The `safetyrepro` command line: the commands a user types (safetyrepro.cli.user) and those the
workflow's jobs run (safetyrepro.cli.jobs; their work in safetyrepro.pipeline), listed apart."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import textwrap

from safetyrepro.backends import ModelLoadError
from safetyrepro.benchmarks import DataError
from safetyrepro.cli.command import add_record_options, plugin_warnings
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.core.messages import ERROR_PREFIX

GROUPS = (
    ("commands you type", "user"),
    ("commands the workflow runs (its rules' jobs call them; you need not type them)", "jobs"),
)  # the modules of this package declaring them, imported as the parser is built: the pipeline they run imports
# safetyrepro.cli.command


def _listing(title: str, commands: dict[str, argparse.ArgumentParser], width: int) -> str:
    """A titled list of commands with their descriptions, as `--help` shows options."""
    rows = [
        textwrap.fill(parser.description, 100, initial_indent=f"  {name:<{width}}", subsequent_indent=" " * (width + 2))
        for name, parser in commands.items()
    ]
    return "\n".join([f"{title}:", *rows])


def build_parser() -> argparse.ArgumentParser:
    """The argument parser: one subcommand per task, `--help` listing the user's and the jobs' apart."""
    parser = argparse.ArgumentParser(
        prog="safetyrepro",
        description="The `safetyrepro` command line (a run itself is `snakemake`: docs/quick-start.md).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="a command below (COMMAND --help: its options)"
    )
    groups = []
    for title, name in GROUPS:
        known = len(commands.choices)
        importlib.import_module(f"{__name__}.{name}").add_commands(commands)
        groups.append((title, dict(list(commands.choices.items())[known:])))
    for command in commands.choices.values():
        if getattr(command.get_default("func"), "recorded", False):
            add_record_options(command)
    width = max(map(len, commands.choices)) + 2
    parser.epilog = "\n\n".join(_listing(title, group, width) for title, group in groups)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; errors become one line on stderr and exit status 2; a command that went
    on without a plugin that cannot be used says so after it, a line per plugin."""
    from safetyrepro.pipeline.lifecycle import CellError

    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        status = args.func(args)
    except (ConfigError, DataError, ModelLoadError, CellError) as exc:
        print(f"{ERROR_PREFIX}{exc}", file=sys.stderr)
        return 2
    for line in plugin_warnings():  # it went on without them: said after it, so that an error stays one line
        print(line, file=sys.stderr)
    return status
