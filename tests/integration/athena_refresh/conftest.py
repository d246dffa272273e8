"""Fixtures for the athena_refresh unit tests: two DynamoDB backends, moto S3, a fake clock, a scripted engine.

Every test that touches DynamoDB (it asks for ``ddb``, directly or through a table, the lock, the store or the
handler's environment) runs twice, through the module-scoped ``backend`` fixture:

* ``moto``: in-process moto (``mock_aws``), fresh backends for every test;
* ``dynamodb-local``: AWS's own DynamoDB Local (the session's ``dynamodb_local`` java process), which validates
  requests as AWS does (unused or undefined expression values, reserved words, wrong-typed comparisons
  evaluate false). Its tables get unique names per test and are deleted afterwards. The production code's
  default clients are pointed at it with ``AWS_ENDPOINT_URL_DYNAMODB`` (botocore's service-specific endpoint),
  so the real handler's requests are validated too. Without Java or the npm package these params are skipped
  with the reason, except under ``CI=true``, where they fail.

S3 (the results overflow) and anything else stay on moto in both cases: ``mock_aws`` is active for every
test and passes requests for other endpoints through.

Both backends are used for *sequenced* interleavings only (moto is not atomic under concurrency, see
../shared/notes/platform-facts.md): each test drives its racers one request at a time and moves time with
:class:`FakeClock`. Polling sleeps advance the same fake clock, so no test ever really waits. The tables
have no TTL enabled (DynamoDB Local deletes TTL-expired items by REAL time, and the fake clock's history
items would expire as real time passes); ``test_bad_input.py`` enables TTL on purpose to show that the
lock never depends on history items surviving.

A test that depends on one backend's behaviour narrows the fixture:
``@pytest.mark.parametrize("backend", ["moto"], indirect=True)``.

This directory is the package ``tests.integration.athena_refresh`` (every folder up to tests/ has an
``__init__.py``), so it never shadows the code under test ``athena_refresh``; the helpers are handed out through
fixtures.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.logging import logger as powertools_logger
from aws_lambda_powertools.metrics.provider import cold_start

from athena_refresh import service
from athena_refresh.engine import Column, QueryError, QueryExecution, QueryResult, QueryStatistics
from athena_refresh.errors import QueryEngineError
from athena_refresh.handler import LambdaHandler, make_handler
from athena_refresh.job import AthenaRefreshJob
from athena_refresh.results import ResultsStore
from athena_refresh.settings import Settings
from slotlock import Slot, SlotLock, SlotRunner
from slotlock._expressions import LEASE_EXPIRY_UPDATE

REGION = "us-east-1"
BUCKET = "refresh-results-overflow"
JOB_NAME = "flights-dashboard"
LEASE_S = 30.0
HEARTBEAT_S = 10.0
SQL = (
    "SELECT origin, count(*) AS flights FROM flights"
    " WHERE sched_dep_utc >= CAST(? AS timestamp) AND sched_dep_utc < CAST(? AS timestamp) GROUP BY origin"
)

#: The slot every test races for unless it needs several: 2026-11-22T00:30:00Z.
SLOT_EPOCH_S = int(dt.datetime(2026, 11, 22, 0, 30, tzinfo=dt.UTC).timestamp())

DEFAULT_COLUMNS = (Column("origin", "varchar"), Column("flights", "bigint"), Column("avg_dep_delay_min", "double"))
DEFAULT_ROWS = [
    {"origin": "EWR", "flights": 320, "avg_dep_delay_min": 14.25},
    {"origin": "JFK", "flights": 301, "avg_dep_delay_min": 11.5},
    {"origin": "LGA", "flights": 277, "avg_dep_delay_min": None},
]
DEFAULT_STATISTICS = QueryStatistics(
    data_scanned_bytes=7_340_032, engine_execution_time_ms=850, query_queue_time_ms=40, total_execution_time_ms=910
)


# ---------------------------------------------------------------------------------------------------
# helpers (handed out through fixtures)
# ---------------------------------------------------------------------------------------------------
@dataclass
class FakeClock:
    """The callers' wall clock, epoch milliseconds; tests move it explicitly, and so do polling sleeps."""

    now: int
    sleeps_ms: list[int] = field(default_factory=list)

    def __call__(self) -> int:
        return self.now

    def advance(self, *, ms: int = 0, s: float = 0) -> int:
        self.now += ms + int(s * 1000)
        return self.now

    def sleep(self, seconds: float) -> None:
        """A ``sleep_s`` that takes no real time: it moves the clock."""
        ms = round(seconds * 1000)
        self.sleeps_ms.append(ms)
        self.now += ms


@dataclass
class FakeQuery:
    query_execution_id: str
    sql: str
    parameters: list[str]
    client_request_token: str
    script: deque[Any]
    state: str = "QUEUED"


class FakeEngine:
    """A :class:`~athena_refresh.engine.QueryEngine` with scripted states that records every call.

    ``scripts`` holds one list of states per *started* query, in start order; each ``get_query`` takes
    the next entry and the last one repeats. An entry is a state name or a dict
    ``{"state": "FAILED", "retryable": True, "error_category": 1, "error_type": 401, "error_message": ...}``.
    Like Athena, a start with an already seen ``client_request_token`` returns the same query id.
    ``rows`` is read when ``get_results`` is called (tests change it to tell two readers apart).
    ``on_get_query(engine, n)`` is called before the n-th (1-based) ``get_query`` answers (fault injection).
    ``pages`` is how many result pages ``get_results`` reads (calling ``on_page`` after each, and
    ``on_page_read(engine, n)`` before handing the n-th page over: e.g. a slow page moves the clock).
    """

    def __init__(
        self,
        scripts: Sequence[Sequence[Any]] | None = None,
        *,
        rows: list[dict[str, Any]] | None = None,
        columns: tuple[Column, ...] = DEFAULT_COLUMNS,
        statistics: QueryStatistics = DEFAULT_STATISTICS,
        on_get_query: Callable[[FakeEngine, int], None] | None = None,
        pages: int = 1,
        on_page_read: Callable[[FakeEngine, int], None] | None = None,
    ) -> None:
        self.scripts = [list(s) for s in (scripts if scripts is not None else [["RUNNING", "SUCCEEDED"]])]
        self.rows = [dict(r) for r in (rows if rows is not None else DEFAULT_ROWS)]
        self.columns = columns
        self.statistics = statistics
        self.on_get_query = on_get_query
        self.pages = pages
        self.on_page_read = on_page_read
        self.calls: list[tuple[str, Any]] = []
        self.queries: dict[str, FakeQuery] = {}
        self._by_token: dict[str, str] = {}
        self._polls = 0

    # --- QueryEngine ------------------------------------------------------------------------------
    def start_query(self, *, sql: str, parameters: Sequence[str], client_request_token: str) -> str:
        self.calls.append(("start_query", {"sql": sql, "parameters": list(parameters), "token": client_request_token}))
        if client_request_token in self._by_token:
            return self._by_token[client_request_token]
        qid = f"qid-{len(self.queries) + 1:04d}-0000-0000-0000-000000000000"
        script = deque(self.scripts.pop(0) if self.scripts else ["SUCCEEDED"])
        self.queries[qid] = FakeQuery(qid, sql, list(parameters), client_request_token, script)
        self._by_token[client_request_token] = qid
        return qid

    def get_query(self, query_execution_id: str) -> QueryExecution:
        self.calls.append(("get_query", query_execution_id))
        self._polls += 1
        if self.on_get_query is not None:
            self.on_get_query(self, self._polls)
        query = self.queries[query_execution_id]
        entry = query.script.popleft() if len(query.script) > 1 else query.script[0]
        spec = {"state": entry} if isinstance(entry, str) else dict(entry)
        query.state = spec["state"]
        error = None
        if query.state in ("FAILED", "CANCELLED"):
            error = QueryError(
                error_category=spec.get("error_category"),
                error_type=spec.get("error_type"),
                retryable=bool(spec.get("retryable", False)),
                error_message=spec.get("error_message"),
                state_change_reason=spec.get("reason"),
            )
        statistics = self.statistics if query.state == "SUCCEEDED" else QueryStatistics()
        return QueryExecution(query_execution_id, query.state, statistics, error)  # type: ignore[arg-type]

    def get_results(self, query_execution_id: str, *, on_page: Callable[[int], object] | None = None) -> QueryResult:
        self.calls.append(("get_results", query_execution_id))
        if self.queries[query_execution_id].state != "SUCCEEDED":
            raise QueryEngineError("GetQueryResults", "InvalidRequestException: query has not yet finished")
        rows = [dict(r) for r in self.rows]
        for page in range(1, self.pages + 1):
            if self.on_page_read is not None:
                self.on_page_read(self, page)
            if on_page is not None:
                on_page(len(rows) * page // self.pages)
        return QueryResult(columns=self.columns, rows=rows)

    def stop_query(self, query_execution_id: str) -> None:  # not part of the protocol: must never be called
        self.calls.append(("stop_query", query_execution_id))

    # --- inspection -----------------------------------------------------------------------------
    @property
    def call_names(self) -> list[str]:
        return [name for name, _ in self.calls]

    @property
    def starts(self) -> list[dict[str, Any]]:
        return [params for name, params in self.calls if name == "start_query"]


@dataclass
class RequestLog:
    """Every DynamoDB API call a client makes (botocore ``before-call``), its JSON body and the fake time.

    ``before-call`` fires once per API call as the caller issued it (botocore's retries are below it).
    """

    clock: FakeClock
    calls: list[tuple[str, dict[str, Any], int]] = field(default_factory=list)

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        body = params.get("body") or b"{}"
        self.calls.append((model.name, json.loads(body), self.clock.now))
        # Returning None matters: a value returned from before-call would short-circuit the request.

    @property
    def operations(self) -> list[str]:
        return [name for name, _, _ in self.calls]

    def requests(self, operation: str) -> list[dict[str, Any]]:
        return [body for name, body, _ in self.calls if name == operation]

    def heartbeats(self) -> list[tuple[int, int]]:
        """``(sent at ms, new expiry ms)`` of every lease renewal UpdateItem (not acquire, not release)."""
        found = []
        for name, body, at in self.calls:
            if name == "UpdateItem" and body.get("UpdateExpression") == LEASE_EXPIRY_UPDATE:
                found.append((at, int(body["ExpressionAttributeValues"][":expires"]["N"])))
        return found

    def clear(self) -> None:
        self.calls.clear()


@dataclass
class LambdaContext:
    """The members of the Lambda context that slotlock and Powertools read.

    With a ``clock`` the remaining time counts down on it; without one it stays ``remaining_ms``.
    """

    aws_request_id: str
    remaining_ms: int = 300_000
    clock: FakeClock | None = None
    deadline_ms: int | None = None
    function_name: str = "athena-refresh"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:athena-refresh"

    def __post_init__(self) -> None:
        if self.clock is not None and self.deadline_ms is None:
            self.deadline_ms = self.clock.now + self.remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        if self.clock is None or self.deadline_ms is None:
            return self.remaining_ms
        return max(0, self.deadline_ms - self.clock.now)


# ---------------------------------------------------------------------------------------------------
# AWS: DynamoDB on moto or DynamoDB Local, everything else on in-process moto
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
def aws_resources(lock_table: str, results_table: str, bucket: str) -> dict[str, str]:
    """Lock table, results table and overflow bucket, all empty."""
    return {"lock_table": lock_table, "results_table": results_table, "bucket": bucket}


@pytest.fixture
def scan(ddb: Any) -> Callable[[str], list[dict[str, Any]]]:
    """``scan(table)``: every item (DynamoDB JSON), strongly consistent."""

    def run(table: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
            items.extend(page["Items"])
        return items

    return run


# ---------------------------------------------------------------------------------------------------
# the job's pieces
# ---------------------------------------------------------------------------------------------------
@pytest.fixture
def slot() -> Slot:
    return Slot(SLOT_EPOCH_S)


@pytest.fixture
def clock() -> FakeClock:
    """Starts 2 s after the slot's scheduled time (a normal, prompt delivery)."""
    return FakeClock(now=SLOT_EPOCH_S * 1000 + 2_000)


@pytest.fixture
def request_log(ddb: Any, clock: FakeClock) -> Iterator[RequestLog]:
    """Every DynamoDB request of the shared client during the test (unregistered afterwards)."""
    log = RequestLog(clock)
    ddb.meta.events.register("before-call.dynamodb", log)
    yield log
    ddb.meta.events.unregister("before-call.dynamodb", log)


@pytest.fixture
def make_settings(table_names: dict[str, str]) -> Callable[..., Settings]:
    """``make_settings(**overrides)``: valid settings for the tests (lease 30 s, heartbeat 10 s, data year 2013),
    naming this test's tables."""

    def make(**overrides: Any) -> Settings:
        params: dict[str, Any] = {
            "job_name": JOB_NAME,
            "lock_table_name": table_names["lock"],
            "results_table_name": table_names["results"],
            "results_bucket_name": BUCKET,
            "athena_workgroup": "athena-refresh",
            "athena_database": "flights_demo",
            "query_sql": SQL,
            "lease_duration_s": LEASE_S,
            "heartbeat_interval_s": HEARTBEAT_S,
            "max_slot_age_s": 1800.0,
            "max_query_attempts": 3,
            "window_s": 86400,
            "data_year": 2013,
        }
        params.update(overrides)
        return Settings(**params)

    return make


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings()


@pytest.fixture
def make_lock(ddb: Any, lock_table: str, clock: FakeClock, settings: Settings) -> Callable[..., SlotLock]:
    """``make_lock(**overrides)``: a SlotLock as the handler builds it, on the shared client and fake clock.

    Each call is a separate lock object (one per simulated Lambda); they share table, client and clock.
    """

    def make(**overrides: Any) -> SlotLock:
        params: dict[str, Any] = {
            "client": ddb,
            "clock_ms": clock,
            "lease_duration_s": settings.lease_duration_s,
            "heartbeat_interval_s": settings.heartbeat_interval_s,
            "max_slot_age_s": settings.max_slot_age_s,
            "history_ttl_s": settings.history_ttl_s,
        }
        params.update(overrides)
        return SlotLock(lock_table, settings.job_name, **params)

    return make


@pytest.fixture
def lock(make_lock: Callable[..., SlotLock]) -> SlotLock:
    return make_lock()


@pytest.fixture
def make_store(ddb: Any, s3: Any, results_table: str) -> Callable[..., ResultsStore]:
    """``make_store(bucket_name=..., max_inline_bytes=...)``: a ResultsStore on the shared clients."""

    def make(**overrides: Any) -> ResultsStore:
        params: dict[str, Any] = {"bucket_name": BUCKET, "dynamodb_client": ddb, "s3_client": s3}
        params.update(overrides)
        return ResultsStore(results_table, **params)

    return make


@pytest.fixture
def store(make_store: Callable[..., ResultsStore], bucket: str) -> ResultsStore:
    return make_store()


@pytest.fixture
def make_engine() -> Callable[..., FakeEngine]:
    """``make_engine(scripts, rows=..., on_get_query=...)``: a :class:`FakeEngine`."""
    return FakeEngine


@pytest.fixture
def make_job(settings: Settings, store: ResultsStore, clock: FakeClock) -> Callable[..., AthenaRefreshJob]:
    """``make_job(engine, **overrides)``: the job as the handler builds it; its sleeps move the fake clock."""

    def make(engine: Any, **overrides: Any) -> AthenaRefreshJob:
        params: dict[str, Any] = {
            "settings": settings,
            "engine": engine,
            "results": store,
            "sleep_s": clock.sleep,
        }
        params.update(overrides)
        return AthenaRefreshJob(**params)

    return make


@pytest.fixture
def make_runner(make_lock: Callable[..., SlotLock]) -> Callable[..., SlotRunner]:
    """``make_runner(listener=None, **lock_overrides)``: a SlotRunner on a lock object of its own."""

    def make(listener: Any = None, **lock_overrides: Any) -> SlotRunner:
        return SlotRunner(make_lock(**lock_overrides), listener=listener)

    return make


@pytest.fixture
def run(clock: FakeClock, slot: Slot) -> Callable[..., Any]:
    """``run(runner, job, owner, for_slot=None, remaining_ms=300_000)``: one invocation for the test's slot (or
    ``for_slot``) with ``remaining_ms`` left. Modules that need another shape define their own ``run``."""

    def invoke(runner: Any, job: Any, owner: str, *, for_slot: Slot | None = None, remaining_ms: int = 300_000) -> Any:
        return runner.run(job, slot=for_slot or slot, owner_id=owner, deadline_ms=clock.now + remaining_ms)

    return invoke


@pytest.fixture
def make_context(clock: FakeClock) -> Callable[..., LambdaContext]:
    """``make_context(request_id, remaining_ms=..., on_fake_clock=True)``: a Lambda-like context.

    On the fake clock its deadline is ``clock.now + remaining_ms``; otherwise (for the real handler, whose
    lock uses the system clock) it always reports ``remaining_ms``.
    """

    def make(request_id: str, *, remaining_ms: int = 300_000, on_fake_clock: bool = True) -> LambdaContext:
        return LambdaContext(
            aws_request_id=request_id, remaining_ms=remaining_ms, clock=clock if on_fake_clock else None
        )

    return make


@pytest.fixture
def fresh_powertools_state() -> Iterator[None]:
    """A new execution environment per test (handler suites use it): no buffered metrics, cold start
    again, and no job dimension left over for the next module (each test builds its own handler and deps:
    ``handler_deps``, ``lambda_handler``)."""
    service.metrics.clear_metrics()
    cold_start.is_cold_start = True
    powertools_logger.is_cold_start = True
    yield
    service.metrics.clear_metrics()
    service.metrics.clear_default_dimensions()
    cold_start.is_cold_start = True
    powertools_logger.is_cold_start = True


class HandlerDeps:
    """The deps a test's handler builds: :meth:`service.Deps.from_settings` with the engine ``engine_factory``
    builds and the other parts in ``options`` (``clock_ms``, ``listener``, ``deferral``, ``capacity_sleep_s``).

    One deps per settings, kept like an execution environment's, so ``handler_deps(Settings.from_env())`` is what
    the handler uses (its lock's client, its clock). Set the factory and the options before the first invocation
    (or make a new handler)."""

    def __init__(self, engine_factory: Callable[[Settings], Any], **options: Any) -> None:
        self.engine_factory = engine_factory
        self.options: dict[str, Any] = dict(options)
        self._built: dict[Settings, service.Deps] = {}

    def __call__(self, settings: Settings) -> service.Deps:
        if settings not in self._built:
            engine = self.engine_factory(settings)
            self._built[settings] = service.Deps.from_settings(settings, engine=engine, **self.options)
        return self._built[settings]


@pytest.fixture
def handler_deps(make_engine: Callable[..., Any]) -> HandlerDeps:
    """The test handler's deps (:class:`HandlerDeps`); the engine: a fake whose queries succeed at the first poll."""
    return HandlerDeps(lambda settings: make_engine([["SUCCEEDED"]] * 5))


@pytest.fixture
def lambda_handler(handler_deps: HandlerDeps) -> LambdaHandler:
    """The real Lambda handler (the deployed Powertools decorators, settings from the environment) on the test's
    deps: ``make_handler(handler_deps)``."""
    return make_handler(handler_deps)
