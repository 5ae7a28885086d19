"""The `safetyrepro` command line."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .benchmarks import BENCHMARKS, DataError
from .config import ConfigError, load_settings

log = logging.getLogger("safetyrepro")


def cmd_envelope(args: argparse.Namespace) -> int:
    """Print the grid's size: cells, configs per benchmark, generation runs."""
    settings = load_settings(args.configfile)
    envelope = settings.envelope
    per_benchmark = {b: len(settings.configs(b)) for b in settings.benchmarks}
    cells = settings.cells()
    summary = {
        "models": [m.name for m in settings.models],
        "benchmarks": list(settings.benchmarks),
        "configs_per_benchmark": per_benchmark,
        "cells": len(cells),
        "generation_runs": sum(len(envelope.seeds_for(c)) for _, _, c in cells),
        "core_cells": sum(c.tier == "core" for _, _, c in cells),
        "envelope_sha256": envelope.digest(),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for key, value in summary.items():
            print(f"{key}: {value}")
    return 0


def cmd_parse(args: argparse.Namespace) -> int:
    """Label free-form responses read as JSON lines on stdin; write them back with `label`."""
    benchmark = BENCHMARKS[args.benchmark]
    for number, line in enumerate(sys.stdin, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            response = record["response"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise DataError(f"stdin line {number}: expected a JSON object with a 'response' field") from None
        record["label"] = benchmark.extract(response)
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    return 0


def cmd_fetch_data(args: argparse.Namespace) -> int:
    """Download missing benchmark files at their pinned commits and check their hashes."""
    from .fetch import fetch_data

    fetched = fetch_data(Path(args.data_dir), base_url=args.base_url, benchmarks=args.benchmark or None)
    print(f"fetched {len(fetched)} file(s) into {args.data_dir}")
    return 0


def cmd_build_model(args: argparse.Namespace) -> int:
    """Build the embedded gemma-3-270m as a plain HF model directory."""
    from .models import build_embedded_model

    print(build_embedded_model(Path(args.out)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one subcommand per task."""
    parser = argparse.ArgumentParser(prog="safetyrepro", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    commands = parser.add_subparsers(dest="command", required=True)

    envelope = commands.add_parser("envelope", help="size of the grid a config describes")
    envelope.add_argument("--configfile", default="config/config.yaml")
    envelope.add_argument("--json", action="store_true", help="one JSON object")
    envelope.set_defaults(func=cmd_envelope)

    parse = commands.add_parser("parse", help="label JSON-lines responses from stdin")
    parse.add_argument("benchmark", choices=sorted(BENCHMARKS))
    parse.set_defaults(func=cmd_parse)

    fetch = commands.add_parser("fetch-data", help="download benchmark files (pinned, hash-checked)")
    fetch.add_argument("--data-dir", required=True)
    fetch.add_argument("--base-url", help="mirror laid out like raw.githubusercontent.com")
    fetch.add_argument("--benchmark", action="append", choices=sorted(BENCHMARKS))
    fetch.set_defaults(func=cmd_fetch_data)

    build = commands.add_parser("build-model", help="build the embedded gemma-3-270m HF directory")
    build.add_argument("--out", default="resources/models/gemma-3-270m")
    build.set_defaults(func=cmd_build_model)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; errors become one line on stderr and exit status 2."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except (ConfigError, DataError) as exc:
        print(f"safetyrepro: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
