"""``python -m tools.jobs``: the jobs under ``jobs/``, offline (no AWS account, no deployment).

    python -m tools.jobs settings [--job NAME] [--format table|json]   each key's value and where it came from
    python -m tools.jobs run --job NAME [--slot ISO] [--data DIR] [--format table|csv|json]
                                                                     one slot of one job's query, on DuckDB
    python -m tools.jobs check [--job NAME]                            what synth validates, plus the query's
                                                                     tables and columns against the source
    python -m tools.jobs compile --job NAME [--slot ISO] [--format table|json]
                                                                     what StartQueryExecution receives for a slot

Each subcommand lives in its own module (:mod:`.settings`, :mod:`.run`, :mod:`.check`, :mod:`.compile`), which gives its
arguments (``add_arguments``) and runs them (``execute(args, out, err) -> exit status``).

Exit status: 0 done; 1 the query failed (``run``) or a check found a problem (``check``); 2 bad arguments or
an invalid job folder (each problem on its own line, ``jobs/<job>/job.toml:<line>: key: problem``, no
traceback); 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TextIO

from tools.cli.exit_status import ExitStatus
from tools.cli.program import prog

EXIT_OK = ExitStatus.OK
EXIT_FAILED = ExitStatus.FAILED
EXIT_USAGE = ExitStatus.USAGE
EXIT_INTERRUPTED = ExitStatus.INTERRUPTED


def _commands() -> dict[str, ModuleType]:
    from tools.jobs import check, compile, run, settings

    return {"settings": settings, "run": run, "check": check, "compile": compile}


def build_parser(commands: dict[str, ModuleType]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog("python -m tools.jobs"),
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    for name, module in commands.items():
        text = (module.__doc__ or name).strip().splitlines()[0]
        module.add_arguments(sub.add_parser(name, help=text, description=module.__doc__))
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The command line; returns the exit status."""
    out, err = out or sys.stdout, err or sys.stderr
    commands = _commands()
    try:
        args = build_parser(commands).parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2; argparse printed it)
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    try:
        return int(commands[args.command].execute(args, out, err))
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return EXIT_INTERRUPTED
