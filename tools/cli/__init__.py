"""``athena-once``: the one command of the project (``[project.scripts]`` in pyproject.toml, installed by ``make venv``).

    athena-once check|run|compile|settings|cost [options]   the jobs under jobs/, offline
    athena-once conformance --cases CASES.json [--out R.json] Athena's answers, run locally and checked, offline
    athena-once ops <command> [options]                      a deployed stack: status, history, pause, resume,
                                                             release, run, rerun, backfill, fence-bump, smoke-test
    athena-once results <command> [options]                  a deployment's results: jobs, latest, slot, history
    athena-once local demo|serve|chaos|capacity [options]    the local world

Each command's ``--help`` lists its options, a group's ``--help`` its commands. Jobs are chosen with one syntax
everywhere: ``-s/--select`` (:mod:`tools.cli.selection`). The exit statuses are one table
(:mod:`tools.cli.exit_status`). docs/cli.md has the whole reference.

The ``python -m tools.jobs|tools.ops|tools.results|tools.cost|tools.fence_bump|tools.smoke_test`` and ``python -m
local.demo|local.serve|local.chaos|local.capacity`` entry points are deprecated aliases: they run the same code
with the same flags, output and exit statuses (CHANGELOG.md). A command's module is imported only when the command
runs, so ``athena-once check`` does not load boto3's or rich's clients it does not use.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

from tools.cli.exit_status import ExitStatus
from tools.cli.program import invoked_as, until_broken_pipe

PROG = "athena-once"


@dataclass(frozen=True)
class Command:
    """One command: ``target`` (``module:function``) is called with the arguments after the command's name,
    prefixed by ``prefix`` (``check`` is ``tools.jobs``'s ``check``), and returns the exit status."""

    name: str
    help: str
    target: str
    prefix: tuple[str, ...] = ()


@dataclass(frozen=True)
class Group:
    """Commands one level down (``athena-once local demo``). ``default``: a command whose own parser takes every
    other word (``ops``: tools.ops parses its deployment options and its commands); ``commands`` are dispatched
    here and listed after the default's help."""

    name: str
    help: str
    commands: tuple[Command, ...]
    default: Command | None = None


SECTIONS: tuple[tuple[str, tuple[Command | Group, ...]], ...] = (
    (
        "the jobs under jobs/, offline (no AWS account)",
        (
            Command(
                "check", "what synth validates, plus the query's tables and columns", "tools.jobs.cli:main", ("check",)
            ),
            Command("run", "one slot of one job's query on the local engine (DuckDB)", "tools.jobs.cli:main", ("run",)),
            Command(
                "compile",
                "what StartQueryExecution receives for one job and slot (the statement, its parameters)",
                "tools.jobs.cli:main",
                ("compile",),
            ),
            Command(
                "settings", "each job's settings and where each value came from", "tools.jobs.cli:main", ("settings",)
            ),
            Command("cost", "each job's estimated monthly cost by service, before deploying", "tools.cost.cli:main"),
            Command(
                "conformance",
                "a corpus of statements with Athena's answers, run locally and checked",
                "tools.conformance.cli:main",
            ),
        ),
    ),
    (
        "a deployed stack (AWS credentials, or --endpoint-url for DynamoDB Local)",
        (
            Group(
                "ops",
                "status, history, pause, resume, release, run, rerun, backfill, fence-bump, smoke-test",
                (
                    Command(
                        "fence-bump",
                        "raise a job's fencing counter above its stored tokens (after a table restore)",
                        "tools.fence_bump:main",
                    ),
                    Command(
                        "smoke-test",
                        "invoke a deployed job's function like its schedule does, and check the outcome",
                        "tools.smoke_test:main",
                    ),
                ),
                default=Command("ops", "", "tools.ops.cli:main"),
            ),
            Command(
                "results", "jobs, latest, slot, history: a deployment's committed results", "tools.results.cli:main"
            ),
        ),
    ),
    (
        "the local world (no AWS account)",
        (
            Group(
                "local",
                "demo, serve, clock, chaos, capacity",
                (
                    Command(
                        "demo",
                        "every job locally: slots x racing invocations, a kill and a pause",
                        "local.demo.cli:main",
                    ),
                    Command(
                        "serve",
                        "the read API on the last demo's results, and the local world ops --local acts on",
                        "local.serve.cli:main",
                    ),
                    Command(
                        "clock",
                        "the local world's time, and moving it forward (--advance-s)",
                        "local.serve.clock_cli:main",
                    ),
                    Command(
                        "chaos",
                        "racer processes, seeded faults, a recorded history and a checker",
                        "local.chaos.cli:main",
                    ),
                    Command(
                        "capacity", "many jobs on one Athena capacity budget, with faults", "local.capacity.cli:main"
                    ),
                ),
            ),
        ),
    ),
)

EPILOG = (
    "Jobs: -s/--select NAME|GLOB (commas or spaces, repeatable; a union). "
    "Exit status: 0 ok; 1 failed or refused; 2 bad arguments or job folder; 3 unavailable, retry; 4 a job is failing; 130 interrupted "
    "(docs/cli.md)."
)


def _entries() -> dict[str, Command | Group]:
    return {entry.name: entry for _, entries in SECTIONS for entry in entries}


def _listing(entries: Sequence[Command | Group], width: int) -> list[str]:
    return [f"  {entry.name:<{width}}  {entry.help}" for entry in entries]


def usage_text() -> str:
    """The one command's ``--help``: every command and group, by section."""
    width = max(len(name) for name in _entries())
    lines = [f"usage: {PROG} <command> [options]   ({PROG} <command> --help)", ""]
    for title, entries in SECTIONS:
        lines += [f"{title}:", *_listing(entries, width), ""]
    return "\n".join([*lines, EPILOG, ""])


def group_text(group: Group) -> str:
    """A group's command list (``athena-once local --help``), or the lines after its default's help."""
    width = max(len(c.name) for c in group.commands)
    head = [] if group.default else [f"usage: {PROG} {group.name} <command> [options]", ""]
    title = f"more {group.name} commands" if group.default else "commands"
    return "\n".join([*head, f"{title} ({PROG} {group.name} <command> --help):", *_listing(group.commands, width), ""])


def _call(command: Command, argv: Sequence[str], prog: str) -> int:
    module_name, _, function = command.target.partition(":")
    target: Callable[[list[str]], int] = getattr(importlib.import_module(module_name), function)
    with invoked_as(prog):
        try:
            return int(target([*command.prefix, *argv]))
        except SystemExit as exc:  # argparse's --help (0) and usage errors (2)
            return exc.code if isinstance(exc.code, int) else ExitStatus.FAILED


def _unknown(what: str, word: str, names: Sequence[str], err: TextIO) -> int:
    close = difflib.get_close_matches(word, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    err.write(f"{what}: unknown command {word!r}{hint}; commands: {', '.join(names)}\n")
    return ExitStatus.USAGE


def _group(group: Group, argv: list[str], out: TextIO, err: TextIO) -> int:
    names = [c.name for c in group.commands]
    by_name = {c.name: c for c in group.commands}
    word = argv[0] if argv else None
    if word in by_name:
        return _call(by_name[word], argv[1:], f"{PROG} {group.name} {word}")
    if group.default is not None:
        status = _call(group.default, argv, f"{PROG} {group.name}")
        if any(a in ("-h", "--help") for a in argv[:1]):
            out.write("\n" + group_text(group))
        return status
    if word in (None, "-h", "--help"):
        out.write(group_text(group))
        return ExitStatus.OK if word else ExitStatus.USAGE
    return _unknown(f"{PROG} {group.name}", word, names, err)


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The one command; returns the exit status (:class:`~tools.cli.exit_status.ExitStatus`).

    Output of a command goes where the command writes it (stdout/stderr); ``out``/``err`` carry this dispatcher's
    own lines (the listings, an unknown command). A reader that leaves the pipe (``| head``) ends it quietly with
    status 1, as the ``python -m`` aliases do."""
    return until_broken_pipe(lambda: _main(argv, out, err))


def _main(argv: Sequence[str] | None, out: TextIO | None, err: TextIO | None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    words = list(sys.argv[1:] if argv is None else argv)
    if not words or words[0] in ("-h", "--help"):
        out.write(usage_text())
        return ExitStatus.OK if words else ExitStatus.USAGE
    entries = _entries()
    entry = entries.get(words[0])
    try:
        if entry is None:
            return _unknown(PROG, words[0], list(entries), err)
        if isinstance(entry, Group):
            return _group(entry, words[1:], out, err)
        return _call(entry, words[1:], f"{PROG} {entry.name}" if not entry.prefix else PROG)
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return ExitStatus.INTERRUPTED
