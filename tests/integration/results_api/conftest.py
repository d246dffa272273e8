"""Fixtures for the read side's unit tests (``results_api``): two DynamoDB backends, moto S3, a seeded history.

Every test that touches DynamoDB (it asks for ``ddb``, directly or through the ``world``, a reader or an app)
runs twice, through the module-scoped ``backend`` fixture, as in ``tests/integration/athena_refresh``:

* ``moto``: in-process moto (``mock_aws``), fresh backends for every test;
* ``dynamodb-local``: AWS's own DynamoDB Local (the session's ``dynamodb_local`` java process), which validates
  requests as AWS does. Its tables get unique names per test and are deleted afterwards.

S3 stays on moto in both cases. A module that only needs one backend overrides ``backend`` (the API and the
widget run on moto: what they add over the reader is not DynamoDB's behaviour).

The data is written by the real writers only, never put by hand (except where a test tampers with an item on
purpose): the live lock (``SlotLock.try_acquire``/``commit`` with the results of ``ResultsStore.prepare`` in
the same fenced transaction, a superseded delivery recorded MISSED by the lock itself), a manual generation
(``request_generation`` then the manual lease), and the operator's ``pause``. See :class:`World`.

This directory is the package ``tests.integration.results_api`` (every folder up to tests/ has an
``__init__.py``), so it never shadows the code under test ``results_api``; the helpers are handed out through
fixtures.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from athena_refresh import contract
from athena_refresh.catalog import CatalogQuery, CatalogSchedule, catalog_document
from athena_refresh.cost import SlotUsage, estimate_slot_cost, load_prices
from athena_refresh.engine import Column, QueryResult
from athena_refresh.results import ResultsStore
from results_api import handler
from results_api.api import create_app
from results_api.reader import ResultsReader
from slotlock import Lease, Loss, Slot, SlotLock, pause, request_generation
from tests.unit.results_api.conftest import (  # the history's data, shared with the pure tests
    COLUMNS,
    JOB,
    ROWS,
    SLOTS,
    STATISTICS,
    stored_of,  # noqa: F401  (a fixture: the pure tests' StoredResult, for the widget's tests too)
)

REGION = "us-east-1"
LOCK_TABLE = "read-locks"  # the offline reader's names (it sends no request)
RESULTS_TABLE = "read-results"
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


# ---------------------------------------------------------------------------------------------------
# helpers (handed out through fixtures)
# ---------------------------------------------------------------------------------------------------
@dataclass
class FakeClock:
    """The writers' and the reader's wall clock, epoch milliseconds; tests move it explicitly."""

    now: int

    def __call__(self) -> int:
        return self.now

    def advance(self, *, ms: int = 0, s: float = 0) -> int:
        self.now += ms + int(s * 1000)
        return self.now


@dataclass
class RequestLog:
    """Every DynamoDB API call of one client (botocore ``before-call``: once per call as the caller issued it,
    botocore's own retries are below it), with its JSON body."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        body = params.get("body") or b"{}"
        self.calls.append((model.name, json.loads(body)))
        # Returning None matters: a value returned from before-call would short-circuit the request.

    @property
    def operations(self) -> list[str]:
        return [name for name, _ in self.calls]

    def requests(self, operation: str) -> list[dict[str, Any]]:
        return [body for name, body in self.calls if name == operation]

    def clear(self) -> None:
        self.calls.clear()


@dataclass
class LambdaContext:
    """The members of the Lambda context that Powertools' ``inject_lambda_context`` reads."""

    aws_request_id: str = "req-0001"
    function_name: str = "results-api"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:results-api"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


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
    """What the writers wrote (see :func:`world`).

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


def widget_context(params: Mapping[str, Any], *, title: str, width: int, height: int) -> dict[str, Any]:
    """CloudWatch's ``widgetContext`` for a custom widget with ``params`` (the shape CloudWatch sends)."""
    return {
        "dashboardName": "refresh",
        "widgetId": "widget-1",
        "accountId": "123456789012",
        "locale": "en",
        "timezone": {"label": "UTC", "offsetISO": "+00:00", "offsetInMinutes": 0},
        "period": 300,
        "isAutoPeriod": True,
        "timeRange": {"mode": "relative", "start": 0, "end": 1},
        "theme": "light",
        "linkCharts": True,
        "title": title,
        "forms": {"all": {}},
        "params": dict(params),
        "width": width,
        "height": height,
    }


@pytest.fixture
def cloudwatch_widget_context() -> Callable[..., dict[str, Any]]:
    """:func:`widget_context`, for the tests of the widget handler."""
    return widget_context


def api_event(path: str, query: str = "", headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) ``GET`` event for a request of ``path`` and ``query`` as the
    client sent them (percent-encoded). As an HTTP API does, the event carries the path percent-decoded
    (``rawPath``), the raw query string, and the decoded query parameters."""
    path = urllib.parse.unquote(path)
    parameters: dict[str, str] = {}
    for part in query.split("&"):
        if part:
            name, _, value = part.partition("=")
            parameters[urllib.parse.unquote(name)] = urllib.parse.unquote(value)
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": dict(headers or {}),
        "queryStringParameters": parameters or None,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api",
            "domainName": "api.example.com",
            "domainPrefix": "api",
            "http": {"method": "GET", "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "t"},
            "requestId": "req",
            "routeKey": "$default",
            "stage": "$default",
            "time": "22/Nov/2026:02:00:07 +0000",
            "timeEpoch": 0,
        },
        "isBase64Encoded": False,
    }


# ---------------------------------------------------------------------------------------------------
# AWS: DynamoDB on moto or DynamoDB Local, S3 on in-process moto
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def _s3_client(boto_session: boto3.session.Session) -> Any:
    """One S3 client for the session (moto answers it while a ``mock_aws`` is active)."""
    return boto_session.client("s3")


@pytest.fixture
def s3(aws: None, _s3_client: Any) -> Any:
    return _s3_client


@pytest.fixture
def bucket(s3: Any) -> str:
    s3.create_bucket(Bucket=BUCKET)
    return BUCKET


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(now=SLOTS[0].epoch_ms + 2_000)


@pytest.fixture
def request_log(ddb: Any) -> Iterator[RequestLog]:
    """Every DynamoDB request of the shared client during the test (unregistered afterwards)."""
    log = RequestLog()
    ddb.meta.events.register("before-call.dynamodb", log)
    yield log
    ddb.meta.events.unregister("before-call.dynamodb", log)


@pytest.fixture
def catalog() -> dict[str, CatalogQuery]:
    return {
        JOB: CatalogQuery("SELECT origin, count(*) AS flights FROM flights GROUP BY origin", (), schedule=HALF_HOURLY),
        PAUSED_JOB: CatalogQuery("SELECT 1 AS a", ()),
        IDLE_JOB: CatalogQuery("SELECT 2 AS b", (), schedule=DAILY_NY),
        TAMPERED_JOB: CatalogQuery("SELECT 3 AS c", (), schedule=HALF_HOURLY),
    }


# ---------------------------------------------------------------------------------------------------
# the seeded history
# ---------------------------------------------------------------------------------------------------
@pytest.fixture
def make_lock(ddb: Any, lock_table: str, clock: FakeClock) -> Callable[[str], SlotLock]:
    def make(job: str) -> SlotLock:
        return SlotLock(lock_table, job, client=ddb, clock_ms=clock, lease_duration_s=LEASE_S, max_slot_lead_s=None)

    return make


@pytest.fixture
def make_store(ddb: Any, s3: Any, results_table: str, bucket: str) -> Callable[..., ResultsStore]:
    def make(**overrides: Any) -> ResultsStore:
        return ResultsStore(results_table, bucket_name=bucket, dynamodb_client=ddb, s3_client=s3, **overrides)

    return make


@pytest.fixture
def world(
    ddb: Any,
    lock_table: str,
    results_table: str,
    make_lock: Callable[[str], SlotLock],
    make_store: Callable[..., ResultsStore],
    clock: FakeClock,
    catalog: dict[str, CatalogQuery],
) -> World:
    """The history of :data:`JOB` over S0..S4, written as the job writes it, sequenced on the fake clock:

    - S0: live run SUCCEEDED (token 1), rows offloaded to S3; then re-run as generation 2 (manual token 1),
      SUCCEEDED, rows inline (LATEST moved to S0 generation 2);
    - S1: live run FAILED (token 2); generation 2 REQUESTED by an operator, never run;
    - S3: live run acquired (token 3); S2 delivered late meanwhile: MISSED ``superseded``; S3 SUCCEEDED with
      :data:`ROWS` (LATEST: S3 generation 1);
    - S4: live lease held (token 4, owner ``racer-4``), RUNNING with a query id recorded: the clock ends 5 s in.

    :data:`PAUSED_JOB` committed S0 (offloaded, 150 rows) and was paused; :data:`IDLE_JOB` never ran;
    :data:`TAMPERED_JOB`'s lock item holds its fencing token as a String.
    """
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
        catalog=catalog,
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


@pytest.fixture
def make_reader(
    ddb: Any, s3: Any, lock_table: str, results_table: str, clock: FakeClock, catalog: dict[str, CatalogQuery]
) -> Callable[..., ResultsReader]:
    """``make_reader(**overrides)``: a reader of this test's tables on the shared clients and the fake clock."""

    def make(**overrides: Any) -> ResultsReader:
        params: dict[str, Any] = {"dynamodb_client": ddb, "s3_client": s3, "clock_ms": clock}
        params.update(overrides)
        return ResultsReader(lock_table, results_table, params.pop("catalog", catalog), **params)

    return make


@pytest.fixture
def reader(make_reader: Callable[..., ResultsReader]) -> ResultsReader:
    return make_reader()


@pytest.fixture(scope="session")
def _offline_clients(boto_session: boto3.session.Session) -> dict[str, Any]:
    """Clients of a closed loopback port (discard, 9): any request they send fails at once and never leaves
    the machine. For reads that must be refused before any request (the request log says none was sent)."""
    config = Config(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=1)
    endpoint = "http://127.0.0.1:9"
    return {
        "dynamodb": boto_session.client("dynamodb", endpoint_url=endpoint, config=config),
        "s3": boto_session.client("s3", endpoint_url=endpoint, config=config),
    }


@pytest.fixture
def offline_requests(_offline_clients: dict[str, Any]) -> Iterator[RequestLog]:
    """Every request the offline DynamoDB client is asked to send during the test (there should be none)."""
    log = RequestLog()
    client = _offline_clients["dynamodb"]
    client.meta.events.register("before-call.dynamodb", log)
    yield log
    client.meta.events.unregister("before-call.dynamodb", log)


@pytest.fixture
def offline_reader(
    _offline_clients: dict[str, Any], offline_requests: RequestLog, catalog: dict[str, CatalogQuery], clock: FakeClock
) -> ResultsReader:
    """A reader of the test catalog whose clients reach nothing: for the checks made before any request."""
    return ResultsReader(
        LOCK_TABLE,
        RESULTS_TABLE,
        catalog,
        dynamodb_client=_offline_clients["dynamodb"],
        s3_client=_offline_clients["s3"],
        clock_ms=clock,
    )


@pytest.fixture
def make_app(reader: ResultsReader) -> Callable[..., Any]:
    """``make_app(over=...)``: the API's resolver over the reader (default: this test's)."""

    def make(*, over: ResultsReader | None = None) -> Any:
        return create_app(over or reader)

    return make


@pytest.fixture
def get(make_app: Callable[..., Any]) -> Callable[..., dict[str, Any]]:
    """``get(path, query="", headers=None)``: the API's answer to one GET (a payload 2.0 response dict)."""
    app = make_app()

    def call(path: str, query: str = "", headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        response: dict[str, Any] = app.resolve(api_event(path, query, headers), LambdaContext())
        return response

    return call


@pytest.fixture
def offline_get(offline_reader: ResultsReader) -> Callable[..., dict[str, Any]]:
    """Like ``get``, over the reader whose clients reach nothing: for answers given before any request."""
    app = create_app(offline_reader)

    def call(path: str, query: str = "", headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        response: dict[str, Any] = app.resolve(api_event(path, query, headers), LambdaContext())
        return response

    return call


@pytest.fixture
def event() -> Callable[..., dict[str, Any]]:
    """``event(path, query="", headers=None)``: a payload 2.0 event (see :func:`api_event`)."""
    return api_event


@pytest.fixture
def lambda_context() -> LambdaContext:
    return LambdaContext()


@pytest.fixture
def deployed(
    world: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog: dict[str, CatalogQuery]
) -> Iterator[None]:
    """The read functions' environment (table names, a catalog file) and a fresh execution environment."""
    path = tmp_path / "job_catalog.json"
    path.write_text(json.dumps(catalog_document(catalog)), encoding="utf-8")
    monkeypatch.setenv(contract.ENV_LOCK_TABLE_NAME, world.lock_table)
    monkeypatch.setenv(contract.ENV_RESULTS_TABLE_NAME, world.results_table)
    monkeypatch.setenv(contract.ENV_JOB_CATALOG_PATH, str(path))
    monkeypatch.setattr(handler, "_reader", None)
    monkeypatch.setattr(handler, "_app", None)
    yield
