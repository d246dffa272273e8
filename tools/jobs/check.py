"""Check every job offline: what synth validates, plus each query's tables and columns against its source.

    python -m tools.jobs check                    every job under jobs/
    python -m tools.jobs check --job top-routes   one job
    make check

``make check`` does everything ``make synth`` (app.py) validates about the jobs, without jsii, Node.js or the CDK:
cdk.json's stack settings and every job folder through :func:`stacks.jobs.load_jobs`, the same function synth calls
before any construct exists (every key, range and relationship, the query's named parameters, that it parses as
one Trino query, value metrics among its output columns). It does not synthesize: what only a synthesized template
shows (cdk-nag's AwsSolutions findings, cfn-lint) stays with ``make synth`` / ``make lint``.

On top of that, what can be known without AWS:

- **what Athena refuses** (:func:`stacks.sql_check.check_job_sql` over :func:`athena_sql.analyzer.check_query`, the
  check synth runs too): syntax that is not Trino's (``::``, ILIKE, ``GROUP BY ALL``, ``INTERVAL 1 DAY``, trailing
  commas ...), functions Athena engine v3 lacks or calls it cannot resolve, type mismatches Trino refuses (an uncast
  ``:window_start`` against a timestamp, ``date - integer``, ``||`` with a number ...) and the aggregation rules,
  each as ``jobs/x/query.sql:3:17: TYPE_MISMATCH: <Trino's words>``; what it could not decide is a ``note:``;
- **tables and columns**: the prepared query (its ``?`` bound to typed literals) is parsed as Trino and qualified
  with :func:`sqlglot.optimizer.qualify.qualify` against the source's schema (``validate_qualify_columns``); a table
  other than the job's source, or a column the table lacks, is reported with the file, the line of the name in
  ``query.sql`` and the closest column names. The schema: for ``sample:flights``, the columns the stack's Glue table
  declares (``sample_data.flights``: no data needed), partition column ``dt`` (string) included; for your own table,
  ``source.columns`` in job.toml (``columns = { carrier = "string", dep_delay = "double" }``, Glue types), else the
  schema of its Parquet files under ``.cache/data/<table>/``; with neither, columns are not checked (a warning);
- **value metrics cost**: a ``warning:`` when a job's value metrics would cost more than 10x its work
  (:mod:`stacks.value_metrics_cost`, the figure ``make cost`` shows);
- **the plan before deploy** (:mod:`tools.jobs.plan`): ``warning:`` lines (crowded minutes against the capacity
  permits, no partition filter, long windows, ``SELECT *`` of a wide source, ...); ``--strict`` makes them problems.

One problem gives one message: a job whose SQL is not Trino's syntax (SYNTAX_ERROR) is not qualified, and qualifying
stops at the first unknown name. Output: one line per problem, ``jobs/x/query.sql:3: column "dst" not found in
flights; did you mean dest?`` or ``jobs/x/query.sql:6:21: TYPE_MISMATCH: Cannot apply operator: timestamp(3) >=
varchar(19) ...``, then ``note:`` and ``warning:`` lines, then ``N jobs checked``. Exit status: 0 no problem
(warnings and notes allowed); 1 a problem; 2 bad arguments or an invalid job folder (each problem synth would report
on its own line).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.tokens import TokenType

from athena_refresh.cost import PriceTableError
from athena_sql.diagnostics import CheckResult
from athena_sql.source import Source
from athena_sql.syntax import trailing_comma
from slotlock.schedule import CronError
from stacks.defaults import FileEncodingError
from stacks.jobs import GlueSource, JobDefinition, SampleSource
from stacks.sql_check import WINDOW_PARAMETER_LITERALS, check_job_sql
from stacks.value_metrics_cost import value_metrics_warning
from tools.cli.exit_status import ExitStatus
from tools.cli.selection import add_select_argument
from tools.jobs import common, plan

EXIT_OK, EXIT_FAILED, EXIT_USAGE = ExitStatus.OK, ExitStatus.FAILED, ExitStatus.USAGE
#: What each built-in parameter is bound to while checking (its runtime type: timestamp text, date text).
SAMPLE_VALUES = dict(WINDOW_PARAMETER_LITERALS)
_UNRESOLVED = re.compile(r"Column '(?P<name>[^']+)' could not be resolved")
_LINE = re.compile(r"Line: (?P<line>\d+)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_select_argument(parser)
    parser.add_argument("--jobs-dir", type=Path, default=common.JOBS_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, default=common.DATA_DIR, help=argparse.SUPPRESS)
    parser.add_argument(
        "--strict", action="store_true", help="the plan's warnings are problems (exit 1): for a deploy gate"
    )


def execute(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        loaded = common.load(args.jobs_dir)
        jobs = loaded.selected(args.select)
    except common.JobsError as exc:
        common.print_problems(exc.problems, err)
        return exc.status
    problems: list[str] = []
    for job in jobs:
        report = check_job_report(job, loaded.declared_columns.get(job.job_name), data_dir=args.data)
        problems.extend(report.problems)
        out.writelines(line + "\n" for line in report.problems)
        out.writelines(f"note: {line}\n" for line in report.notes)
        out.writelines(f"warning: {line}\n" for line in report.warnings)
    stack = common.stack_settings()
    planned = plan.plan_warnings(jobs, stack, args.jobs_dir, loaded.declared_columns, data_dir=args.data)
    if getattr(args, "strict", False):
        problems.extend(planned)
        out.writelines(f"{line} (--strict)\n" for line in planned)
    else:
        out.writelines(f"warning: {line}\n" for line in planned)
    noun = "job" if len(jobs) == 1 else "jobs"
    if problems:
        out.write(f"{len(jobs)} {noun} checked: {len(problems)} problem{'s' if len(problems) != 1 else ''}\n")
        return EXIT_FAILED
    out.write(f"{len(jobs)} {noun} checked\n")
    return EXIT_OK


@dataclasses.dataclass(frozen=True)
class JobReport:
    """What ``check`` says about one job: ``problems`` (Athena would refuse it, or it reads what it may not),
    ``notes`` (what the SQL check could not decide: not failures) and ``warnings``."""

    problems: list[str]
    notes: list[str]
    warnings: list[str]


def check_job(
    job: JobDefinition, declared: Mapping[str, str] | None, *, data_dir: Path = common.DATA_DIR
) -> tuple[list[str], list[str]]:
    """(problems, warnings) of one job that load_jobs accepted (:func:`check_job_report` without its notes)."""
    report = check_job_report(job, declared, data_dir=data_dir)
    return report.problems, report.warnings


def check_job_report(
    job: JobDefinition, declared: Mapping[str, str] | None, *, data_dir: Path = common.DATA_DIR
) -> JobReport:
    """The SQL check of :func:`stacks.sql_check.check_job_sql` (each refusal as ``jobs/x/query.sql:3:17:
    TYPE_MISMATCH: ...``), then the tables and columns the query reads against the source's schema (skipped when
    the SQL is not Trino's), and the value metrics cost warning."""
    warnings: list[str] = []
    try:
        warning = value_metrics_warning(job)
    except (CronError, PriceTableError) as exc:  # synth refuses a bad cron; a broken price table is ours
        warning = f"{common.job_file(job, 'job.toml')}: value metrics cost not estimated: {exc}"
    if warning:
        warnings.append(warning)
    try:
        sql = common.query_text(job)
    except (OSError, FileEncodingError) as exc:
        return JobReport([f"{common.job_file(job)}: cannot be read: {exc}"], [], warnings)
    schema = table_schema(job, declared, data_dir=data_dir)
    result = check_job_sql(job, _glue_schema(schema) if schema is not None else None)
    problems = [refusal.located(common.job_file(job)) for refusal in result.refusals]
    notes = [item.located(common.job_file(job)) for item in result.unchecked if item.kind != "table"]
    if _syntax_refused(result):
        return JobReport(problems, notes, warnings)
    if schema is None:
        table = job.source.table
        warnings.append(
            f"{common.job_file(job)}: columns not checked: no schema for table {table} (give source.columns in"
            f' job.toml, e.g. columns = {{ carrier = "string" }}, or put its Parquet files under .cache/data/{table}/)'
        )
        schema = {}
    problem = resolve_problem(job, sql, schema, checked=bool(schema))
    if problem is None:
        return JobReport(problems, notes, warnings)
    # the name resolution's line (its words and "did you mean" are check's own) stands for the analyzer's
    others = [
        refusal.located(common.job_file(job))
        for refusal in result.refusals
        if refusal.error_class != "COLUMN_NOT_FOUND"
    ]
    return JobReport([problem, *others], notes, warnings)


def _syntax_refused(result: CheckResult) -> bool:
    return any(refusal.error_class == "SYNTAX_ERROR" for refusal in result.refusals)


def _glue_schema(schema: Mapping[str, str]) -> dict[str, str]:
    """``schema`` (Glue types, or ``duckdb:`` types read from Parquet files) as Glue types for the SQL check."""
    return {
        name: common.glue_type_of(type_[len("duckdb:") :]) if type_.startswith("duckdb:") else type_
        for name, type_ in schema.items()
    }


def trailing_comma_line(sql: str) -> int | None:
    """The line of the first comma followed by a clause keyword, a closing bracket or the end of the query
    (:func:`athena_sql.syntax.trailing_comma`)."""
    comma = trailing_comma(Source(sql, common.tokens(sql)))
    return int(comma.line) if comma is not None else None


def table_schema(
    job: JobDefinition, declared: Mapping[str, str] | None, *, data_dir: Path = common.DATA_DIR
) -> dict[str, str] | None:
    """The source table's columns (name -> type text, ``dialect`` below): ``None`` when unknown."""
    if isinstance(job.source, SampleSource):
        return common.sample_schema(job.source)
    if declared:
        return dict(declared)
    table_dir = data_dir / job.source.table
    if common.has_parquet(table_dir):
        return {name: f"duckdb:{type_}" for name, type_ in common.parquet_schema(table_dir).items()}
    return None


def _data_type(text: str) -> exp.DataType:
    if text.startswith("duckdb:"):
        dialect, text = "duckdb", text[len("duckdb:") :]
    else:
        dialect = "hive"  # Glue types are Hive DDL types
    try:
        return exp.DataType.build(text, dialect=dialect)
    except (SqlglotError, ValueError):
        return exp.DataType.build("unknown")


def bound_sql(job: JobDefinition) -> str:
    """The prepared SQL with each ``?`` replaced by a typed literal (constants as written), same lines."""
    text = job.query.text
    values = {**SAMPLE_VALUES, **{name: " ".join(value.split()) for name, value in job.parameters.items()}}
    pieces, position = [], 0
    names = iter(job.query.parameter_order)
    for token in common.tokens(text):
        if token.token_type == TokenType.PLACEHOLDER:
            pieces.append(text[position : token.start])
            pieces.append(values.get(next(names, ""), "NULL"))
            position = token.end + 1
    pieces.append(text[position:])
    return "".join(pieces)


def resolve_problem(job: JobDefinition, sql: str, schema: Mapping[str, str], *, checked: bool = True) -> str | None:
    """The first unknown table or column of the job's query against ``schema``; ``None`` when all resolve."""
    source = job.source
    table = source.table
    try:
        expression = sqlglot.parse_one(bound_sql(job), read=common.DIALECT)
    except SqlglotError as exc:  # load_jobs parsed it already; the bound literals should not change that
        return f"{common.job_file(job)}: does not parse as Trino: {str(exc).splitlines()[0]}"
    ctes = {cte.alias_or_name.lower() for cte in expression.find_all(exp.CTE)}
    database = source.database if isinstance(source, GlueSource) else None
    for node in expression.find_all(exp.Table):
        name = node.name.lower()
        if not name or (not node.db and name in ctes):
            continue
        if name != table.lower() or (node.db and database and node.db.lower() != database.lower()):
            shown = ".".join(part for part in (node.catalog, node.db, node.name) if part)
            line = common.identifier_line(sql, node.name)
            return (
                f"{common.located(job, line)}: table {shown} is not the job's source; the job reads"
                f" {'' if database is None else database + '.'}{table} (its role may read only that table)"
            )
        node.set("db", None)
        node.set("catalog", None)
    if not checked:
        return None
    types = {name: _data_type(type_text) for name, type_text in schema.items()}
    try:
        qualified = qualify(
            expression,
            schema={table: {name: t.sql(dialect=common.DIALECT) for name, t in types.items()}},
            dialect=common.DIALECT,
            validate_qualify_columns=True,
        )
        annotate_types(qualified, schema={table: {name: t.sql(dialect=common.DIALECT) for name, t in types.items()}})
    except OptimizeError as exc:
        message = str(exc)
        unresolved = _UNRESOLVED.search(message)
        if unresolved:
            name = unresolved.group("name")
            close = difflib.get_close_matches(name, list(schema), n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(close)}?" if close else f"; {table} has {', '.join(schema)}"
            return (
                f'{common.located(job, common.identifier_line(sql, name))}: column "{name}" not found in {table}{hint}'
            )
        at = _LINE.search(message)
        first = message.splitlines()[0] if message else type(exc).__name__
        return f"{common.located(job, int(at.group('line')) if at else None)}: {first}"
    except SqlglotError:
        return None  # sqlglot cannot follow this query: not the user's problem, the engine and Athena decide
    return None
