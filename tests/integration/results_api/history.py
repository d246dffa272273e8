"""The seeded history of the read side's tests (the ``world`` fixture of ``conftest.py``), written once per module
and backend and handed to every test of that module until one of them changes it.

:func:`seed_history` writes it with the real writers only (``SlotLock`` and ``ResultsStore``, as the job writes
it; see its docstring). Seeding is most of a test's cost (dozens of fenced writes and transactions, each one
parsed and validated by moto), and most tests only read it, so :class:`SeededHistories` keeps
the last seeded history of a module: before each test that asks for it, it reads back both tables (strongly
consistent scans) and the bucket's object listing (key, ETag, size) and compares them with what the seeding left.
Equal: the test gets the same tables. Items changed, added or deleted (a test tampered with an item or committed
more): the items as the seeding left them are written back (and the extra ones deleted), then checked again.
Anything else (an object deleted, a table deleted): the tables are dropped, the bucket emptied, and the history
seeded afresh in new tables. So a test always starts from exactly the seeded state, whatever ran before it and in
whichever order.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from athena_refresh.catalog import CatalogQuery, CatalogSchedule
from athena_refresh.cost import SlotUsage, estimate_slot_cost, load_prices
from athena_refresh.engine import Column, QueryResult
from athena_refresh.results import ResultsStore, create_results_table
from slotlock import Lease, Loss, Slot, SlotLock, create_lock_table, pause, request_generation
from tests.unit.results_api.conftest import COLUMNS, JOB, ROWS, SLOTS, STATISTICS

BUCKET = "read-results-overflow"
OPERATOR = "arn:aws:iam::123456789012:user/operator"

#: A job with one offloaded result, then paused; no schedule in its catalog entry.
PAUSED_JOB = "carrier-on-time"
#: A job of the catalog that never ran: no item at all (daily at 06:00 New York time).
IDLE_JOB = "daily-ny"
#: A job whose live lock item was edited by hand (its fencing token is a String).
TAMPERED_JOB = "tampered"
HALF_HOURLY = CatalogSchedule("cron(0/30 * * * ? *)", "UTC", 3)
DAILY_NY = CatalogSchedule("cron(0 6 * * ? *)", "America/New_York", 2)
LEASE_S = 30.0
WINDOW = ("2013-11-21T00:00:00", "2013-11-22T00:00:00")

SMALL_COLUMNS = (Column("origin", "varchar"), Column("flights", "bigint"))
#: The re-run of S0 (generation 2), inline.
RERUN_ROWS = [{"origin": "EWR", "flights": 321}, {"origin": "LGA", "flights": 278}]


def many_rows(count: int, prefix: str = "AP") -> list[dict[str, Any]]:
    return [{"origin": f"{prefix}{index:03d}", "flights": index * 7} for index in range(count)]


#: Offloaded to S3 (the store that writes them inlines at most 200 bytes of rows).
OFFLOADED_ROWS = many_rows(120)
PAUSED_ROWS = many_rows(150, "PJ")
SMALL_INLINE_BYTES = 200


@dataclass
class FakeClock:
    """The writers' and the reader's wall clock, epoch milliseconds; tests move it explicitly."""

    now: int

    def __call__(self) -> int:
        return self.now

    def advance(self, *, ms: int = 0, s: float = 0) -> int:
        self.now += ms + int(s * 1000)
        return self.now


def jobs_catalog() -> dict[str, CatalogQuery]:
    """The catalog of the tests' jobs (a new dict per call)."""
    return {
        JOB: CatalogQuery("SELECT origin, count(*) AS flights FROM flights GROUP BY origin", (), schedule=HALF_HOURLY),
        PAUSED_JOB: CatalogQuery("SELECT 1 AS a", ()),
        IDLE_JOB: CatalogQuery("SELECT 2 AS b", (), schedule=DAILY_NY),
        TAMPERED_JOB: CatalogQuery("SELECT 3 AS c", (), schedule=HALF_HOURLY),
    }


#: The cost estimate S3's commit records: 3 racers, 256 MB, the query scanned 7 MB (billed 10 MB).
LATEST_COST: dict[str, Any] = estimate_slot_cost(
    SlotUsage(
        data_scanned_bytes=[7_340_032],
        winner_billed_ms=2400,
        loser_billed_ms=45,
        racers=3,
        memory_mb=256,
        read_units=1,
        write_units=14,
    ),
    load_prices("us-east-1"),
).as_dict()


@dataclass
class World:
    """What the writers wrote (see :func:`seed_history`).

    ``history``: ``(slot, generation, status)`` of every history record of :data:`JOB`, newest first (slot,
    then generation). ``tokens``: the fencing token of each committed ``(slot, generation)``.
    """

    lock_table: str
    results_table: str
    catalog: dict[str, CatalogQuery]
    history: list[tuple[Slot, int, str]]
    tokens: dict[tuple[Slot, int], int]
    committed_at_ms: dict[tuple[Slot, int], int]
    held_lease: Lease
    paused_committed_at_ms: int
    summaries: dict[tuple[Slot, int], dict[str, Any]]
    #: What the writers were given: the latest result's columns and rows (S3), the offloaded rows of S0
    #: generation 1 and of the paused job's one result.
    latest_columns: list[dict[str, str]] = field(
        default_factory=lambda: [{"name": c.name, "type": c.type} for c in COLUMNS]
    )
    latest_rows: list[dict[str, Any]] = field(default_factory=lambda: ROWS)
    offloaded_rows: list[dict[str, Any]] = field(default_factory=lambda: OFFLOADED_ROWS)
    paused_rows: list[dict[str, Any]] = field(default_factory=lambda: PAUSED_ROWS)
    #: The cost estimate committed with S3 (the other results were committed without one).
    latest_cost: dict[str, Any] = field(default_factory=lambda: LATEST_COST)


def acquired(result: Lease | Loss) -> Lease:
    assert isinstance(result, Lease), f"expected a lease, got {result}"
    return result


def seed_history(ddb: Any, s3: Any, lock_table: str, results_table: str, clock: FakeClock) -> World:
    """Write the history of :data:`JOB` over S0..S4 into the (empty) tables and :data:`BUCKET`, as the job writes
    it, sequenced on ``clock``:

    - S0: live run SUCCEEDED (token 1), rows offloaded to S3; then re-run as generation 2 (manual token 1),
      SUCCEEDED, rows inline (LATEST moved to S0 generation 2);
    - S1: live run FAILED (token 2); generation 2 REQUESTED by an operator, never run;
    - S3: live run acquired (token 3); S2 delivered late meanwhile: MISSED ``superseded``; S3 SUCCEEDED with
      :data:`ROWS` (LATEST: S3 generation 1);
    - S4: live lease held (token 4, owner ``racer-4``), RUNNING with a query id recorded: the clock ends 5 s in.

    :data:`PAUSED_JOB` committed S0 (offloaded, 150 rows) and was paused; :data:`IDLE_JOB` never ran;
    :data:`TAMPERED_JOB`'s lock item holds its fencing token as a String.
    """

    def make_lock(job: str) -> SlotLock:
        return SlotLock(lock_table, job, client=ddb, clock_ms=clock, lease_duration_s=LEASE_S, max_slot_lead_s=None)

    def make_store(**overrides: Any) -> ResultsStore:
        return ResultsStore(results_table, bucket_name=BUCKET, dynamodb_client=ddb, s3_client=s3, **overrides)

    live = make_lock(JOB)
    store = make_store()
    offloading = make_store(max_inline_bytes=SMALL_INLINE_BYTES)
    s0, s1, s2, s3, s4 = SLOTS
    tokens: dict[tuple[Slot, int], int] = {}
    committed: dict[tuple[Slot, int], int] = {}
    summaries: dict[tuple[Slot, int], dict[str, Any]] = {}

    def run(
        lock: SlotLock,
        slot: Slot,
        owner: str,
        rows: list[dict[str, Any]],
        columns: tuple[Column, ...],
        writer: ResultsStore,
        generation: int = 1,
    ) -> None:
        lease = acquired(lock.try_acquire(slot, owner))
        clock.advance(s=3)
        prepared = writer.prepare(
            job_name=lock.job_name,
            slot_iso=slot.iso,
            fencing_token=lease.fencing_token,
            query_execution_id=f"qe-{lock.job_name}-{slot.epoch_s}-g{generation}",
            statistics=STATISTICS,
            result=QueryResult(columns=columns, rows=rows),
            committed_at_ms=clock.now,
            window=WINDOW,
            generation=generation,
            move_latest=writer.latest_order(lock.job_name, slot.iso, generation) < 0,
        )
        lock.commit(lease, writes=prepared.writes, summary=prepared.summary)
        tokens[(slot, generation)] = lease.fencing_token
        committed[(slot, generation)] = clock.now
        summaries[(slot, generation)] = prepared.summary

    clock.now = s0.epoch_ms + 2_000
    run(live, s0, "racer-0", OFFLOADED_ROWS, SMALL_COLUMNS, offloading)
    paused_lock = make_lock(PAUSED_JOB)
    run(paused_lock, s0, "racer-p", PAUSED_ROWS, SMALL_COLUMNS, offloading)
    paused_committed_at_ms = clock.now
    pause(paused_lock, reason="maintenance", requested_by=OPERATOR)

    clock.now = s1.epoch_ms + 2_000
    live.commit(acquired(live.try_acquire(s1, "racer-1")), outcome="failed", error={"type": "QueryFailed"})
    clock.advance(s=60)
    request_generation(live.context, s0, run_id="op-1", kind="rerun", requested_by=OPERATOR, reason="late data")
    run(live.for_generation(2), s0, "manual-1", RERUN_ROWS, SMALL_COLUMNS, store, generation=2)
    request_generation(live.context, s1, run_id="op-2", kind="rerun", requested_by=OPERATOR, reason="retry")

    clock.now = s3.epoch_ms + 2_000
    lease_3 = acquired(live.try_acquire(s3, "racer-3"))
    late = live.try_acquire(s2, "racer-2")  # S2 delivered after S3 started: recorded MISSED by the lock
    assert isinstance(late, Loss) and late.reason == "superseded"
    clock.advance(s=4)
    prepared = store.prepare(
        job_name=JOB,
        slot_iso=s3.iso,
        fencing_token=lease_3.fencing_token,
        query_execution_id="qe-s3",
        statistics=STATISTICS,
        result=QueryResult(columns=COLUMNS, rows=ROWS),
        committed_at_ms=clock.now,
        window=WINDOW,
        cost=lambda _writes, _summary: LATEST_COST,  # the live runtime's hook measures; this one is fixed
    )
    live.commit(lease_3, writes=prepared.writes, summary=prepared.summary)
    tokens[(s3, 1)] = lease_3.fencing_token
    committed[(s3, 1)] = clock.now
    summaries[(s3, 1)] = prepared.summary

    clock.now = s4.epoch_ms + 2_000
    held = live.record_state(acquired(live.try_acquire(s4, "racer-4")), {"query_execution_id": "qe-s4"})
    clock.advance(s=5)

    ddb.put_item(
        TableName=lock_table,
        Item={"pk": {"S": f"lock#{TAMPERED_JOB}"}, "job": {"S": TAMPERED_JOB}, "fencing_token": {"S": "7"}},
    )
    return World(
        lock_table=lock_table,
        results_table=results_table,
        catalog=jobs_catalog(),
        history=[
            (s4, 1, "RUNNING"),
            (s3, 1, "SUCCEEDED"),
            (s2, 1, "MISSED"),
            (s1, 2, "REQUESTED"),
            (s1, 1, "FAILED"),
            (s0, 2, "SUCCEEDED"),
            (s0, 1, "SUCCEEDED"),
        ],
        tokens=tokens,
        committed_at_ms=committed,
        held_lease=held,
        paused_committed_at_ms=paused_committed_at_ms,
        summaries=summaries,
    )


def empty_bucket(s3: Any) -> None:
    """:data:`BUCKET` exists and holds no object (created if missing)."""
    if not any(b["Name"] == BUCKET for b in s3.list_buckets().get("Buckets", [])):
        s3.create_bucket(Bucket=BUCKET)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=BUCKET, Delete={"Objects": keys, "Quiet": True})


@dataclass(frozen=True)
class Stored:
    """Everything a test could change of a seeded history: each table's items (canonical JSON by canonical key
    JSON) and the bucket's objects (key, ETag, size)."""

    items: dict[str, dict[str, str]]
    objects: tuple[tuple[str, str, int], ...]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def read_stored(ddb: Any, s3: Any, keys: dict[str, tuple[str, ...]]) -> Stored | None:
    """What ``keys``' tables (name -> key attribute names) and :data:`BUCKET` hold now (strongly consistent
    scans); ``None`` when any of them cannot be read (a table or the bucket deleted)."""
    try:
        items: dict[str, dict[str, str]] = {}
        for table, key_names in keys.items():
            pages = ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
            items[table] = {
                _canonical({name: item[name] for name in key_names}): _canonical(item)
                for page in pages
                for item in page["Items"]
            }
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
        objects = tuple(sorted((o["Key"], o["ETag"], o["Size"]) for page in pages for o in page.get("Contents", [])))
        return Stored(items, objects)
    except Exception:  # noqa: BLE001  (any failure to read it back means: not the seeded state)
        return None


def restore_items(ddb: Any, want: Stored, have: Stored) -> None:
    """Write back the seeded items a test changed or deleted and delete the ones it added (BatchWriteItem of
    the items as read after seeding: the writers' own output, byte for byte). Objects are not restored."""
    for table, wanted in want.items.items():
        present = have.items[table]
        requests = [{"DeleteRequest": {"Key": json.loads(key)}} for key in present.keys() - wanted.keys()]
        requests += [
            {"PutRequest": {"Item": json.loads(item)}} for key, item in wanted.items() if present.get(key) != item
        ]
        for start in range(0, len(requests), 25):  # BatchWriteItem's limit
            pending: dict[str, Any] = {table: requests[start : start + 25]}
            for _ in range(10):  # bounded: unprocessed items are retried a few times, then the check reseeds
                pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
                if not pending:
                    break


@dataclass
class Seeded:
    """One seeded history: the world, the clock's value when seeding ended, what the stores held then."""

    backend: str
    ddb: Any
    world: World
    clock_ms: int
    keys: dict[str, tuple[str, ...]]
    state: Stored

    def world_for(self, catalog: dict[str, CatalogQuery]) -> World:
        """A copy of the world for one test (its own containers; ``catalog``: the test's)."""
        return dataclasses.replace(
            self.world,
            catalog=catalog,
            history=list(self.world.history),
            tokens=dict(self.world.tokens),
            committed_at_ms=dict(self.world.committed_at_ms),
            summaries=copy.deepcopy(self.world.summaries),
        )


class SeededHistories:
    """The last seeded history of one module (one at a time: a module's tests run grouped by backend).

    ``make_ddb(endpoint_url)``: a DynamoDB client (``None``: moto in-process), made once per endpoint; ``s3``: the
    S3 client. The seeding and the checks use these clients only, never a test's (a test may hook its clients).
    ``seedings``, ``restores``: how often each happened.
    """

    def __init__(self, make_ddb: Callable[[str | None], Any], s3: Any) -> None:
        self.make_ddb = make_ddb
        self.s3 = s3
        self.clients: dict[str | None, Any] = {}
        self.current: Seeded | None = None
        self.seedings = 0
        self.restores = 0

    def get(self, backend: str, endpoint_url: str | None) -> Seeded:
        """The seeded history on ``backend`` (at ``endpoint_url``) exactly as seeding left it: the kept one if
        nothing changed it or once its items are restored (the objects and tables unchanged), else a new one (new
        tables, the bucket emptied first)."""
        kept = self.current
        if kept is not None and kept.backend == backend:
            now = read_stored(kept.ddb, self.s3, kept.keys)
            if now == kept.state:
                return kept
            if now is not None and now.objects == kept.state.objects:
                restore_items(kept.ddb, kept.state, now)
                self.restores += 1
                if read_stored(kept.ddb, self.s3, kept.keys) == kept.state:
                    return kept
        self.drop()
        if endpoint_url not in self.clients:
            self.clients[endpoint_url] = self.make_ddb(endpoint_url)
        ddb = self.clients[endpoint_url]
        suffix = uuid.uuid4().hex[:12]
        lock_table = create_lock_table(ddb, f"locks-{suffix}", enable_ttl=False)
        results_table = create_results_table(ddb, f"results-{suffix}")
        empty_bucket(self.s3)
        clock = FakeClock(now=SLOTS[0].epoch_ms + 2_000)
        world = seed_history(ddb, self.s3, lock_table, results_table, clock)
        keys = {
            table: tuple(k["AttributeName"] for k in ddb.describe_table(TableName=table)["Table"]["KeySchema"])
            for table in (lock_table, results_table)
        }
        state = read_stored(ddb, self.s3, keys)
        assert state is not None, "the seeded history cannot be read back"
        self.current = Seeded(backend, ddb, world, clock.now, keys, state)
        self.seedings += 1
        return self.current

    def drop(self) -> None:
        """Delete the kept history's tables (a test may have deleted them already)."""
        kept, self.current = self.current, None
        if kept is None:
            return
        for table in kept.keys:
            try:
                kept.ddb.delete_table(TableName=table)
            except kept.ddb.exceptions.ResourceNotFoundException:
                pass
