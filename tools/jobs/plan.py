"""The plan before deploy: what ``athena-once check`` warns about a set of jobs that is valid but will cost, wait or
scan more than its author likely means (issue 34). Warnings never block; ``check --strict`` makes them problems.

One line each, naming the file (and line) to change:

- **minutes on which more jobs fire than capacity permits**: the jobs' firings over one week (:data:`PLAN_WEEK`,
  each in its time zone), counted per minute; where more fire at once than the budget's ``permits``
  (cdk.json ``context.stack.capacity``), how many, and that the last of them waits about that many queries' time;
- **a query without a filter on its source's partition column** (the sample's ``dt``; a table of your own: the
  partition keys of its local Hive-partitioned files, if any): every slot scans the whole table;
- **a window over 7 days that is more than 48 periods**: each slot rescans mostly what the previous ones did;
- **``SELECT *`` on a source of more than 20 columns**: Athena bills every column's bytes;
- **value metrics on columns that are not numeric** (by the source's types, when the column is the source's);
- **unused ``[parameters]``**: declared in job.toml, never used in query.sql;
- **folders under ``jobs/`` that look like jobs but are not** (a ``Job.toml``, a ``query.sql`` without job.toml):
  synth and every tool skip them without a word otherwise.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from slotlock.schedule import CronError, firings_between
from stacks.jobs import JOB_FILE, QUERY_FILE, JobDefinition, SampleSource
from stacks.stack_settings import StackSettings
from tools.jobs import common

__all__ = ["PLAN_WEEK", "plan_warnings"]

#: The week whose firings are counted per minute (a week without a daylight-saving change in the US or the EU).
PLAN_WEEK = (dt.datetime(2026, 7, 13, tzinfo=dt.UTC), dt.datetime(2026, 7, 19, 23, 59, tzinfo=dt.UTC))
WIDE_SOURCE_COLUMNS = 20
LONG_WINDOW_S = 7 * 86_400
LONG_WINDOW_PERIODS = 48
NUMERIC_GLUE_TYPES = ("tinyint", "smallint", "int", "integer", "bigint", "float", "double", "real", "decimal")


def plan_warnings(
    jobs: Sequence[JobDefinition],
    stack: StackSettings,
    jobs_dir: Path,
    declared: Mapping[str, Mapping[str, str]],
    *,
    data_dir: Path = common.DATA_DIR,
) -> list[str]:
    """Every plan warning of ``jobs`` (validated as synth validates them) under ``jobs_dir``, in the order above."""
    warnings = _capacity(jobs, stack)
    for job in jobs:
        schema = _schema(job, declared.get(job.job_name), data_dir)
        tree = _parse(job)
        warnings += _partition_filter(job, tree, data_dir)
        warnings += _long_window(job)
        warnings += _select_star(job, tree, schema)
        warnings += _value_metrics(job, schema)
        warnings += _unused_parameters(job)
    return warnings + _lookalike_folders(jobs_dir)


def _capacity(jobs: Sequence[JobDefinition], stack: StackSettings) -> list[str]:
    permits = stack.capacity.permits
    if permits <= 0:
        return []
    by_minute: dict[dt.datetime, list[str]] = defaultdict(list)
    for job in jobs:
        config = job.config
        try:
            firings = firings_between(config.schedule_expression, config.schedule_timezone, *PLAN_WEEK)
        except CronError:
            continue  # load_jobs validated it; a schedule firing too often for the limit is counted without it
        for firing in firings:
            by_minute[firing.replace(second=0, microsecond=0)].append(job.job_name)
    crowded: dict[int, tuple[int, dt.datetime]] = {}  # minute of the hour -> (most jobs at once, an example)
    for minute, names in by_minute.items():
        if len(names) > permits and len(names) > crowded.get(minute.minute, (0, minute))[0]:
            crowded[minute.minute] = (len(names), minute)
    lines = []
    for minute_of_hour, (count, example) in sorted(crowded.items()):
        waits = -(-count // permits) - 1
        lines.append(
            f"cdk.json: context.stack.capacity.permits = {permits}: {count} jobs fire on minute :{minute_of_hour:02d}"
            f" (e.g. {example:%Y-%m-%dT%H:%MZ}): {count - permits} wait for a permit, the last about {waits}"
            f" query duration(s); spread their schedules (cron minutes) or raise the permits"
        )
    return lines


def _schema(job: JobDefinition, declared: Mapping[str, str] | None, data_dir: Path) -> dict[str, str]:
    """The source's columns (name -> Glue type, lowercase) when known: the sample's, ``source.columns``, or the
    local Parquet files' (DuckDB types); empty when unknown."""
    if isinstance(job.source, SampleSource):
        return {name.lower(): kind.lower() for name, kind in common.sample_schema(job.source).items()}
    if declared:
        return {name.lower(): kind.lower() for name, kind in declared.items()}
    table_dir = data_dir / job.source.table
    if common.has_parquet(table_dir):
        return {name.lower(): kind.lower() for name, kind in common.parquet_schema(table_dir).items()}
    return {}


def _parse(job: JobDefinition) -> exp.Expression | None:
    try:
        return sqlglot.parse_one(job.query.text, read=common.DIALECT)
    except SqlglotError:
        return None  # check reports what does not parse


def _partition_keys(job: JobDefinition, data_dir: Path) -> tuple[str, ...]:
    if isinstance(job.source, SampleSource):
        from sample_data.flights import FLIGHTS_GLUE_PARTITION_KEYS

        return tuple(name for name, _ in FLIGHTS_GLUE_PARTITION_KEYS)
    table_dir = data_dir / job.source.table
    if not table_dir.is_dir():
        return ()
    keys = {part.name.split("=", 1)[0] for part in table_dir.iterdir() if part.is_dir() and "=" in part.name}
    return tuple(sorted(keys))


def _partition_filter(job: JobDefinition, tree: exp.Expression | None, data_dir: Path) -> list[str]:
    keys = _partition_keys(job, data_dir)
    if tree is None or not keys:
        return []
    filtered = {
        column.name.lower()
        for clause in (*tree.find_all(exp.Where), *tree.find_all(exp.Join))
        for column in clause.find_all(exp.Column)
    }
    if filtered & set(keys):
        return []
    period = _minutes(job.config.period.shortest_s)
    return [
        (
            f"{common.job_file(job)}: no filter on the partition column {' or '.join(keys)} of {job.source.table}: every"
            f" slot (every {period}) scans the whole table; add e.g. WHERE {keys[0]} BETWEEN :window_first_date AND"
            " :window_last_date"
        )
    ]


def _long_window(job: JobDefinition) -> list[str]:
    config = job.config
    periods = config.window_s / max(1, config.period.shortest_s)
    if config.window_s <= LONG_WINDOW_S or periods <= LONG_WINDOW_PERIODS:
        return []
    return [
        (
            f"{common.job_file(job, 'job.toml')}: window_s = {config.window_s} ({config.window_s / 86_400:g} days) is"
            f" {periods:,.0f} periods of {_minutes(config.period.shortest_s)}: each slot rescans what the previous ones"
            " read; shorten the window or the schedule's frequency"
        )
    ]


def _select_star(job: JobDefinition, tree: exp.Expression | None, schema: Mapping[str, str]) -> list[str]:
    if tree is None or len(schema) <= WIDE_SOURCE_COLUMNS:
        return []
    projections = [e for select in tree.find_all(exp.Select) for e in select.expressions]
    if not any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and e.is_star) for e in projections):
        return []
    line = common.identifier_line(job.query.text, "*")
    return [
        (
            f"{common.located(job, line)}: SELECT * of {job.source.table}, a source of {len(schema)} columns: Athena bills"
            " the bytes of every column read; name the columns the job needs"
        )
    ]


def _value_metrics(job: JobDefinition, schema: Mapping[str, str]) -> list[str]:
    metrics = job.config.value_metrics
    if metrics is None or not schema:
        return []
    lines = []
    for column in metrics.columns:
        kind = schema.get(column.lower())
        if kind is not None and not kind.startswith(NUMERIC_GLUE_TYPES) and "int" not in kind:
            lines.append(
                f"{common.job_file(job, 'job.toml')}: value_metrics column {column} is {kind} in {job.source.table},"
                " not a number: CloudWatch takes numbers only (the metric would never be sent); cast it in the query"
                " or remove it"
            )
    return lines


def _unused_parameters(job: JobDefinition) -> list[str]:
    used = set(job.query.parameter_order)
    return [
        f"{common.job_file(job, 'job.toml')}: [parameters] {name} is never used in {QUERY_FILE} (:{name})"
        for name in job.parameters
        if name not in used
    ]


def _lookalike_folders(jobs_dir: Path) -> list[str]:
    if not jobs_dir.is_dir():
        return []
    lines = []
    for folder in sorted(p for p in jobs_dir.iterdir() if p.is_dir() and not (p / JOB_FILE).is_file()):
        names = sorted(child.name for child in folder.iterdir() if child.is_file())
        near = [name for name in names if name.lower() in (JOB_FILE, "jobs.toml", "job.tml", "job.toml.txt")]
        if near or QUERY_FILE in names:
            found = f"it has {', '.join(near or [QUERY_FILE])}"
            lines.append(
                f"{jobs_dir.name}/{folder.name}/: not a job ({found}, no {JOB_FILE}): every tool skips it; a job folder"
                f" holds {JOB_FILE} and {QUERY_FILE}, exactly so named"
            )
    return lines


def _minutes(seconds: int) -> str:
    if seconds % 86_400 == 0:
        return f"{seconds // 86_400} day(s)"
    if seconds % 3_600 == 0:
        return f"{seconds // 3_600} h"
    return f"{seconds // 60} min"
