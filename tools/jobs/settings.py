"""Each job's effective settings: every key's value and where it came from (job.toml, jobs/defaults.toml, derived, built-in).

    python -m tools.jobs settings                      every job under jobs/, one table each
    python -m tools.jobs settings --job flights-dashboard --format json

Only ``source`` and ``schedule_expression`` are required in a ``job.toml``; every other key comes from the
team defaults ``jobs/defaults.toml``, a rule on the schedule's period, or a built-in value
(:mod:`athena_refresh.job_defaults`, docs/configuration.md). Offline: reads cdk.json and the job folders, nothing else.

Exit status: 0 printed; 2 an unknown job or an invalid job folder (each problem on its own line,
``jobs/<job>/job.toml:<line>: key: problem``, on stderr).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from athena_refresh.checks import ConfigError, format_problems
from stacks import JOBS_DIR, REPO_ROOT
from stacks.job_groups import group_stack_name, job_group
from stacks.jobs import JobDefinition, load_job, load_jobs
from stacks.stack_settings import STACK_KEY, StackSettings, load_context
from tools.cli.exit_status import ExitStatus
from tools.cli.selection import SelectionError, add_select_argument, patterns, select

EXIT_OK = ExitStatus.OK
EXIT_USAGE = ExitStatus.USAGE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_select_argument(parser)
    parser.add_argument("--format", choices=("table", "json"), default="table", help="output format (default: table)")
    parser.add_argument("--jobs-dir", type=Path, default=JOBS_DIR, help=argparse.SUPPRESS)  # tests: a tmp jobs/


def execute(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    jobs_dir: Path = getattr(args, "jobs_dir", None) or JOBS_DIR
    try:
        stack = _stack_settings()
        jobs = _load(jobs_dir, list(getattr(args, "select", None) or ()), stack)
    except ConfigError as exc:
        err.write(format_problems(exc.problems) + "\n")
        return EXIT_USAGE
    if getattr(args, "format", "table") == "json":
        out.write(json.dumps({"jobs": [_job_document(job, stack.job_stacks) for job in jobs]}, indent=2) + "\n")
    else:
        _print_tables(jobs, stack.job_stacks, out)
    return EXIT_OK


def _stack_settings() -> StackSettings:
    """cdk.json's stack settings. :raises ConfigError: naming every invalid key."""
    return StackSettings.from_context(load_context(REPO_ROOT / "cdk.json").get(STACK_KEY))


def _load(jobs_dir: Path, names: list[str], stack: StackSettings) -> tuple[JobDefinition, ...]:
    """The jobs ``names`` selects (``-s/--select`` patterns; default: all), validated like synth does; only the
    selected folders are read. :raises ConfigError: naming every problem (a pattern matching no folder included)."""
    root = jobs_dir.parent
    if not patterns(names):
        return load_jobs(jobs_dir, stack, root=root)
    known = sorted(p.name for p in jobs_dir.iterdir() if (p / "job.toml").is_file()) if jobs_dir.is_dir() else []
    try:
        selected = select(names, known)
    except SelectionError as exc:
        raise ConfigError(str(exc).splitlines()) from exc
    jobs: list[JobDefinition] = []
    problems: list[str] = []
    for name in selected:
        try:
            jobs.append(load_job(jobs_dir / name, stack, root=root))
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems)
    return tuple(jobs)


def _plain(value: Any) -> Any:
    """JSON-friendly: tuples (value metrics' columns) as lists, a config dataclass as its fields."""
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if hasattr(value, "__dataclass_fields__"):
        return {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
    return value


def _settings(job: JobDefinition, job_stacks: int) -> list[tuple[str, Any, str, str]]:
    """``(key, value, origin, why)`` of each setting, ``stack_group`` as the group it resolves to (job.toml's, else
    the hash of the name over ``job_stacks``: :func:`stacks.job_groups.job_group`) with its stack's name in ``why``."""
    rows = []
    for s in job.settings:
        value, why = s.value, s.why
        if s.key == "stack_group":
            value = job_group(job.job_name, job_stacks, s.value)
            why = f"{group_stack_name(value)}; {why}"
        rows.append((s.key, value, s.origin, why))
    return rows


def _job_document(job: JobDefinition, job_stacks: int) -> dict[str, Any]:
    return {
        "job": job.job_name,
        "settings": [
            {"key": key, "value": _plain(value), "origin": origin, "why": why}
            for key, value, origin, why in _settings(job, job_stacks)
        ],
    }


def _text(value: Any) -> str:
    if value is None:
        return "off"
    if isinstance(value, str):
        return value
    return json.dumps(_plain(value))


def _print_tables(jobs: tuple[JobDefinition, ...], job_stacks: int, out: TextIO) -> None:
    from tools.cli import render  # rich only when a table is printed

    console = render.console_for(out)
    for job in jobs:
        rows = ((key, _text(value), origin, why) for key, value, origin, why in _settings(job, job_stacks))
        title = f"{job.job_name} ({job.folder.name}/job.toml)"
        console.print(
            render.table(("key", "value", "origin", "why"), rows, fold=True, title=title, title_justify="left")
        )
