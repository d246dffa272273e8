"""``athena-once conformance``: a corpus of statements with Athena's (Trino's) answers, run locally and checked.

    athena-once conformance --cases tools/conformance/corpus/trino.json --out .cache/conformance-report.json
    make conformance [CONFORMANCE_ARGS="--details"]

Each case of the cases file(s) (:mod:`.cases`) runs on the local engine and through the SQL check
(:mod:`.runner`); the report (``--out``, JSON) holds each case's outcome, the totals per category and the goals
(:mod:`.report`); a summary table (per category) and the goals are printed, and with ``--details`` each case that
misses its expectation.

Exit status: 0 every goal met; 1 a goal missed (the report says which cases); 2 bad arguments or a bad cases file
(one line naming the file and the case), or the report cannot be written.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tools.cli.exit_status import ExitStatus
from tools.cli.program import prog
from tools.conformance.cases import Case, CasesError, load_cases

if TYPE_CHECKING:
    from tools.conformance.report import Goal
    from tools.conformance.runner import Outcome

Totals = dict[str, dict[str, Any]]

REPO_ROOT = Path(__file__).resolve().parents[2]
CORPUS = REPO_ROOT / "tools" / "conformance" / "corpus"
DEFAULT_DATA = REPO_ROOT / ".cache" / "data"

_COLUMNS = (
    "category",
    "values",
    "EQUAL",
    "DIFFERENT",
    "(type only)",
    "REFUSED",
    "EQUAL %",
    "refusals",
    "REFUSED_BY_CHECK",
    "ACCEPTED",
    "valid refused",
    "run errors",
    "failed locally",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog("athena-once conformance"),
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Exit status: 0 every goal met; 1 a goal missed; 2 bad arguments or cases file (docs/cli.md).",
    )
    parser.add_argument(
        "--cases",
        metavar="CASES.json",
        type=Path,
        action="append",
        required=True,
        help="a JSON list of cases (repeatable; ids unique across files); the project's corpus is"
        f" {CORPUS.relative_to(REPO_ROOT)}/*.json",
    )
    parser.add_argument("--out", metavar="REPORT.json", type=Path, help="write the report (JSON) there")
    parser.add_argument(
        "--data",
        metavar="DIR",
        type=Path,
        default=DEFAULT_DATA,
        help="the tables the statements read, <DIR>/<table>/...parquet (default: .cache/data, built by `make data`)",
    )
    parser.add_argument(
        "--only", metavar="GLOB", action="append", help="only the cases whose id matches (repeatable; fnmatch)"
    )
    parser.add_argument("--details", action="store_true", help="also list every case that misses its expectation")
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The command line; returns the exit status (:class:`~tools.cli.exit_status.ExitStatus`)."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2; argparse printed it)
        return exc.code if isinstance(exc.code, int) else ExitStatus.OK
    try:
        cases = _selected(load_cases(args.cases), args.only)
    except CasesError as exc:
        err.write(f"{exc}\n")
        return ExitStatus.USAGE
    if not cases:
        err.write(f"no case matches --only {' '.join(args.only or [])}\n")
        return ExitStatus.USAGE
    if args.out is not None and args.out.is_dir():
        err.write(f"--out {args.out}: is a directory; give the report's file name\n")
        return ExitStatus.USAGE
    from tools.conformance.report import goals, totals
    from tools.conformance.runner import run_cases

    outcomes = list(run_cases(cases, data_dir=args.data))
    counted = totals(outcomes)
    judged = goals(outcomes, counted)
    if args.out is not None:
        status = _write(args, outcomes, counted, judged, err)
        if status is not None:
            return status
    _print(out, counted, judged, outcomes if args.details else [], args.out)
    return ExitStatus.OK if all(goal.met for goal in judged) else ExitStatus.FAILED


def _selected(cases: list[Case], only: Sequence[str] | None) -> list[Case]:
    if not only:
        return cases
    return [case for case in cases if any(fnmatch.fnmatchcase(case.id, pattern) for pattern in only)]


def _write(
    args: argparse.Namespace, outcomes: list[Outcome], counted: Totals, judged: list[Goal], err: TextIO
) -> int | None:
    from tools.cli import render

    document = {
        "cases_files": [str(path) for path in args.cases],
        "data": str(args.data),
        "local": "the local engine (local/emulators/duckdb_engine); values as Athena's VarCharValue text",
        "check": "athena_sql.analyzer.check_query",
        "totals": counted,
        "goals": [goal.as_dict() for goal in judged],
        "cases": [outcome.as_dict() for outcome in outcomes],
    }
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", encoding="utf-8") as file:
            render.print_json(file, document)
    except OSError as exc:
        err.write(f"--out {args.out}: cannot write the report: {exc.strerror or exc}\n")
        return ExitStatus.USAGE
    return None


def _print(out: TextIO, counted: Totals, judged: list[Goal], outcomes: list[Outcome], written: Path | None) -> None:
    from tools.cli import render

    def row(name: str, c: dict[str, Any]) -> list[object]:
        percent = "" if c["equal_percent"] is None else f"{c['equal_percent']:.1f}"
        return [
            name,
            c["value_cases"],
            c["EQUAL"],
            c["DIFFERENT"],
            c["DIFFERENT_type_only"],
            c["REFUSED"],
            percent,
            c["refusal_cases"],
            c["REFUSED_BY_CHECK"],
            c["ACCEPTED"],
            c["valid_refused_by_check"],
            c["failing_cases"],
            c["failed_locally"],
        ]

    made = render.table(_COLUMNS, right=_COLUMNS[1:], title="conformance: the local run and the check")
    for name, counts in counted.items():
        render.add_row(made, *row(name, counts), style="bold" if name == "all" else None)
    console = render.console_for(out, width=200)
    console.print(made)
    missing = [o for o in outcomes if _misses(o)]
    if missing:
        details = render.table(("id", "category", "run", "check", "what"), fold=("what",), title="cases that miss")
        for o in missing:
            render.add_row(details, o.case.id, o.case.category, o.run, o.check, _what(o))
        console.print(details)
    out.writelines(f"{'met' if goal.met else 'NOT MET'}: {goal.goal} ({goal.detail})\n" for goal in judged)
    if written is not None:
        out.write(f"report: {written}\n")


def _misses(outcome: Outcome) -> bool:
    case, run, check = outcome.case, outcome.run, outcome.check
    if case.fails_at_run:
        return bool(run != "REFUSED")
    if case.refusal:
        return bool(check == "ACCEPTED")
    return bool(run != "EQUAL" or check == "REFUSED_BY_CHECK")


def _what(outcome: Outcome) -> str:
    case, answer = outcome.case, outcome.answer
    if case.fails_at_run:
        return f"Athena fails it ({case.error}); local answered {answer.get('value')!r} {answer.get('type')}"
    if case.refusal:
        return f"Athena: {case.error}; the check accepted it"
    if "error" in answer:
        return f"local: {answer['error'][:160]}"
    if "value" in answer:
        expected = json.dumps(case.value, ensure_ascii=False)
        return (
            f"expected {expected} {case.type}; local {json.dumps(answer['value'], ensure_ascii=False)} {answer['type']}"
        )
    return f"local answered {answer.get('answered')}"
