"""The command line's end of a scenario preset (``python -m local.chaos``, ``python -m local.capacity``): options from
the parsed flags, one run, its report file, its summary, its verdict and the exit status.

Exit statuses (the presets document theirs; the same table): 0 the run passed; 1 it did not (one ``FAIL`` line per
problem on stderr, at most :data:`MAX_FAIL_LINES`); 2 bad arguments (argparse), or the run could not happen: the
harness failed (:class:`local.scenario.driver.ScenarioError`) or the machine lacks something
(:data:`local.emulators.environment.LOCAL_RUN_ERRORS`: DynamoDB Local missing, a work directory that cannot be
written, ...), one ``<failed> <why>`` line on stderr and no report written; 130 interrupted (the run has stopped its
processes on the way out).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from local.emulators.environment import LOCAL_RUN_ERRORS, describe
from local.reports import write_report
from local.scenario.driver import ScenarioError

MAX_FAIL_LINES = 20
#: Why a run could not happen (exit 2): the harness failed, or the machine lacks something.
CANNOT_RUN: tuple[type[Exception], ...] = (ScenarioError, *LOCAL_RUN_ERRORS)
Options = TypeVar("Options")


def options_from(cls: type[Options], args: Any, **overrides: Any) -> Options:
    """``cls`` (an options dataclass) from parsed flags: every field whose name is an attribute of ``args`` (an
    ``argparse.Namespace``; give a flag ``dest=<field>`` when its name differs), then ``overrides``."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values = {name: getattr(args, name) for name in names if hasattr(args, name)}
    return cls(**{**values, **overrides})


def run_and_report(
    run: Callable[[], dict[str, Any]],
    *,
    report_path: Path,
    failed: str,
    summary: Callable[[dict[str, Any]], list[str]],
    problems: Callable[[dict[str, Any]], list[str]],
) -> int:
    """Run, write the report to ``report_path`` (:func:`local.reports.write_report`), print the ``summary`` lines and
    ``report: <path>`` on stdout and each of the report's ``problems`` as a ``FAIL`` line on stderr; the exit status
    of the module docstring (``failed``: the stderr line's prefix when the run could not happen, e.g.
    ``"chaos harness failed:"``)."""
    try:
        report = run()
        write_report(report_path, report)
    except CANNOT_RUN as exc:  # never a bug's class: one line, no traceback
        print(f"{failed} {describe(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the run has stopped its processes on the way out
        print("interrupted", file=sys.stderr)
        return 130
    for line in summary(report):
        print(line)
    found = problems(report)
    for problem in found[:MAX_FAIL_LINES]:
        print(f"FAIL {problem}", file=sys.stderr)
    print(f"report: {report_path}")
    return 1 if found else 0


__all__ = ["MAX_FAIL_LINES", "options_from", "run_and_report"]
