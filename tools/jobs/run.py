"""Run one job's query now, for one slot, on the local engine (DuckDB): its rows, bytes scanned and estimated cost.

    python -m tools.jobs run --job flights-dashboard                       the latest slot at or before now
    python -m tools.jobs run --job flights-dashboard --slot 2026-11-24T20:30Z --format json
    make run JOB=flights-dashboard SLOT=2026-11-24T20:30Z

The job's prepared query (``query.sql`` with its ``:name`` parameters as ``?``, exactly as synth prepares it) is
bound as the deployed function binds it: its settings come from a job catalog built like the bundled one
(:func:`stacks.runtime_asset.catalog_queries`), read by :meth:`athena_refresh.settings.Settings.from_env`, and the
parameters are :meth:`Settings.execution_parameters` of the slot (window, ``data_year`` mapping, constants). The
slot defaults to the job's latest schedule firing at or before now (its cron in its time zone). No lock, no racers,
no DynamoDB: one query on :class:`local.emulators.duckdb_engine.DuckDBQueryEngine` with a temporary state directory.

Data: ``<DIR>/<table>/**/*.parquet`` (Hive partitions such as ``dt=2024-01-31/`` are columns), ``DIR`` being
``.cache/data`` by default or ``--data DIR``. The sample (``source = "sample:flights"``) is built there by
``make data``; for your own table (a Glue ``source``), put a copy of (part of) its Parquet files under
``.cache/data/<table>/``.

Output: the rows as a table (``--format table``, the default), CSV (``csv``: the rows on stdout, the summary line on
stderr) or JSON (``json``: one object with the job, slot, parameters, columns, rows, bytes scanned and cost). The
bytes scanned are the local engine's measure of what Athena would read (docs/local.md); the cost is an ESTIMATE:
those bytes as Athena bills them (rounded up to the MB, 10 MB minimum) at ``prices.toml``'s price per TB.

The job's ``[assertions]`` (:mod:`athena_refresh.assertions`) are evaluated on the rows as the function would: each
broken one is a line on stderr, and the slot would be FAILED ``assertion`` (``assertions_failed`` in the JSON).

Exit status: 0 the query succeeded (and its assertions held); 1 it failed (the engine's error, mapped to
``query.sql``'s line and column, on stderr) or broke an assertion; 2 bad arguments, an invalid job folder (each problem on its own line) or no data.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import re
from pathlib import Path
from typing import Any, TextIO

from athena_refresh import assertions
from athena_refresh.cost import TB, PriceTableError, athena_billed_bytes, load_prices
from athena_refresh.engine import QueryResult
from athena_refresh.settings import Settings
from slotlock.schedule import CronError, latest_firings
from stacks.defaults import FileEncodingError
from stacks.jobs import JobDefinition
from tools.cli.exit_status import ExitStatus
from tools.cli.selection import add_select_argument
from tools.jobs import common

FORMATS = ("table", "csv", "json")
STAND_IN = "local-run"  # the table and deployment names the settings need (nothing is created)
EXIT_OK, EXIT_FAILED, EXIT_USAGE = ExitStatus.OK, ExitStatus.FAILED, ExitStatus.USAGE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_select_argument(parser, required=True, one=True)
    add_slot_argument(parser)
    parser.add_argument(
        "--data",
        metavar="DIR",
        type=Path,
        help="the directory holding <table>/...parquet (default: .cache/data, where `make data` builds the sample)",
    )
    parser.add_argument("--format", choices=FORMATS, default="table", help="how to print the rows (default: table)")
    parser.add_argument("--jobs-dir", type=Path, default=common.JOBS_DIR, help=argparse.SUPPRESS)


def add_slot_argument(parser: argparse.ArgumentParser) -> None:
    """``--slot ISO`` (``run`` and ``compile``): read by :func:`parse_slot`, default :func:`latest_slot`."""
    parser.add_argument(
        "--slot",
        metavar="ISO",
        help="the slot's scheduled time, ISO 8601 (UTC unless it has an offset), e.g. 2026-11-24T20:30Z;"
        " default: the job's latest schedule firing at or before now",
    )


def execute(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        loaded = common.load(args.jobs_dir)
        job = loaded.selected_one(args.select)
        slot = parse_slot(args.slot) if args.slot else latest_slot(job, dt.datetime.now(dt.UTC))
        data_dir = common.data_dir_for(job, args.data)
        settings = job_settings(job)
        prices = load_prices()
    except common.JobsError as exc:
        common.print_problems(exc.problems, err)
        return exc.status
    except PriceTableError as exc:
        err.write(f"{exc}\n")
        return EXIT_USAGE
    try:
        run = common.run_query(job, settings, slot, data_dir=data_dir, stand_in=STAND_IN)
    except common.LocalQueryError as exc:
        err.write(failure_line(job, str(exc)) + "\n")
        return EXIT_FAILED
    slot_iso, parameters, result = run.slot_iso, run.parameters, run.result
    scanned = run.execution.statistics.data_scanned_bytes
    billed = athena_billed_bytes(scanned, min_mb=prices.athena_min_mb_per_query)
    cost = billed / TB * prices.athena_usd_per_tb_scanned
    start, end = settings.window(slot)
    summary = (
        f"{job.job_name}, slot {slot_iso} (window {start:%Y-%m-%d %H:%M} .. {end:%Y-%m-%d %H:%M} UTC):"
        f" {len(result.rows)} row(s), {scanned:,} bytes scanned, estimated Athena cost ${cost:.6f}"
        f" ({billed / 2**20:,.0f} MB billed at ${prices.athena_usd_per_tb_scanned:g}/TB, {prices.region}; estimate)"
    )
    from tools.cli import render

    guards = job.config.assertions
    broken = assertions.evaluate(guards, result.rows) if guards is not None else []
    if args.format == "json":
        document = {
            "job": job.job_name,
            "slot": slot_iso,
            "window": [f"{start:%Y-%m-%d %H:%M:%S}", f"{end:%Y-%m-%d %H:%M:%S}"],
            "parameters": dict(zip(settings.query_parameters, parameters, strict=True)),
            "columns": [
                {"name": c.name, "type": trino_type}
                for c, trino_type in zip(result.columns, _trino_types(run.trino_types, result), strict=True)
            ],
            "rows": [{c.name: _json_value(row[c.name]) for c in result.columns} for row in result.rows],
            "data_scanned_bytes": scanned,
            "estimated_cost_usd": round(cost, 10),
            "estimate": f"Athena: {billed} bytes billed (rounded up to the MB, 10 MB minimum) at"
            f" ${prices.athena_usd_per_tb_scanned:g} per TB ({prices.region}, prices of {prices.retrieved})",
            "assertions_failed": [failure.as_dict() for failure in broken] if guards is not None else None,
        }
        render.print_json(out, document, ensure_ascii=True)
    elif args.format == "csv":
        rows = ([_csv_value(row[c.name]) for c in result.columns] for row in result.rows)
        out.write(render.csv_text([c.name for c in result.columns], rows, lineterminator="\n"))
        err.write(summary + "\n")
    else:
        print_table(result, out, _trino_types(run.trino_types, result))
        out.write(summary + "\n")
    err.writelines(
        f"{common.job_file(job, 'job.toml')}: assertion {failure.assertion}: {failure.detail}\n" for failure in broken
    )
    if broken:
        err.write(
            f"the slot would be FAILED (assertion): {len(broken)} assertion(s) broken; its rows would not be published\n"
        )
        return EXIT_FAILED
    return EXIT_OK


def _trino_types(trino_types: tuple[str, ...], result: QueryResult) -> tuple[str, ...]:
    """The columns' whole Trino types (``decimal(23,1)``), or ColumnInfo.Type's names when the engine gave none."""
    if len(trino_types) == len(result.columns):
        return trino_types
    return tuple(c.type for c in result.columns)


def parse_slot(text: str) -> dt.datetime:
    """``--slot`` as an aware UTC time (no offset: UTC). :raises JobsError: not ISO 8601."""
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise common.JobsError([f"--slot: not an ISO 8601 time, e.g. 2026-11-24T20:30Z, got {text!r}"]) from None
    return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).astimezone(dt.UTC).replace(second=0, microsecond=0)


def latest_slot(job: JobDefinition, now: dt.datetime) -> dt.datetime:
    """The job's latest schedule firing at or before ``now`` (its cron, in its time zone)."""
    try:
        return latest_firings(job.config.schedule_expression, job.config.schedule_timezone, now, 1)[0]
    except CronError as exc:
        raise common.JobsError([f"{common.job_file(job, 'job.toml')}: schedule_expression: {exc}"]) from exc


def job_settings(job: JobDefinition) -> Settings:
    """The runtime's settings of ``job`` (:func:`tools.jobs.common.job_settings`)."""
    return common.job_settings(job, stand_in=STAND_IN)


# --- the engine's error, mapped onto query.sql ---------------------------------------------------------------------
_COLUMN = re.compile(r"Column '(?P<name>[^']+)' cannot be resolved")  # the local engine's words (Trino's)
_CANDIDATES = re.compile(r"; candidates: (?P<names>.+?)(?:\n|$)")
_DID_YOU_MEAN = re.compile(r"; did you mean (?P<name>[\w.]+)")  # the SQL check's words (the engine runs it first)
_QUOTED = re.compile(r"\"([^\"]+)\"|'([^']+)'")
_DUCKDB_SUFFIX = re.compile(r"\s*\[DuckDB \w+\]\s*$")
_CODE = re.compile(r"^[A-Z_]+: ")
_LOCATION = re.compile(r"^line (?P<line>\d+):\d+: ")


def failure_line(job: JobDefinition, message: str) -> str:
    """One line: ``jobs/<job>/query.sql:<line>: <what>``, the line found by searching the named identifier in the
    file's text (tokens: never inside a string or comment)."""
    sql = _read(job)
    column = _COLUMN.search(message)
    if column:
        name = column.group("name")
        candidates = _CANDIDATES.search(message)
        hint = ""
        suggested = _DID_YOU_MEAN.search(message)
        if suggested:
            hint = f'; did you mean "{suggested.group("name").rsplit(".", 1)[-1]}"?'
        elif candidates:
            first = _QUOTED.search(candidates.group("names"))
            if first:
                suggestion = (first.group(1) or first.group(2)).rsplit(".", 1)[-1]
                hint = f'; did you mean "{suggestion}"?'
        return f'{common.located(job, common.identifier_line(sql, name))}: column "{name}" not found{hint}'
    text = _DUCKDB_SUFFIX.sub("", _CODE.sub("", message.strip()))
    text = " ".join(part.strip() for part in text.splitlines() if part.strip())
    located = _LOCATION.match(text)  # the SQL check's position (the engine runs it first): its line is query.sql's
    if located:
        return (
            f"{common.located(job, int(located['line']))}: {text[located.end() :]} (job {job.job_name}, local engine)"
        )
    line = None
    for match in _QUOTED.finditer(text):
        line = common.identifier_line(sql, match.group(1) or match.group(2))
        if line is not None:
            break
    return f"{common.located(job, line)}: {text} (job {job.job_name}, local engine)"


def _read(job: JobDefinition) -> str:
    try:
        return common.query_text(job)
    except (OSError, FileEncodingError):
        return ""


# --- output ----------------------------------------------------------------------------------------------------
_NUMERIC_TYPES = ("tinyint", "smallint", "integer", "bigint", "double", "real")


def print_table(result: QueryResult, out: TextIO, trino_types: tuple[str, ...] = ()) -> None:
    """The rows as a table: each column headed by its name and Trino type, numbers right-justified, doubles rounded
    for display (``--format json``/``csv`` keep every digit)."""
    types = _trino_types(trino_types, result)
    headers = [f"{c.name}\n{t}" for c, t in zip(result.columns, types, strict=True)]
    numeric = {
        h
        for h, c in zip(headers, result.columns, strict=True)
        if c.type in _NUMERIC_TYPES or c.type.startswith("decimal")
    }
    from tools.cli import render  # rich only when a table is printed

    rows = ([render.data_cell(row[c.name], none="") for c in result.columns] for row in result.rows)

    render.console_for(out, width=200).print(render.table(headers, rows, right=numeric))


def _csv_value(value: Any) -> str:
    return "" if value is None else str(value)


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)
