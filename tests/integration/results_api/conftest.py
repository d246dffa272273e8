"""Fixtures for the read side's unit tests (``results_api``): two DynamoDB backends, moto S3, a seeded history.

Every test that touches DynamoDB (it asks for ``ddb``, directly or through the ``world``, a reader or an app)
runs twice, through the module-scoped ``backend`` fixture, as in ``tests/integration/athena_refresh``:

* ``moto``: in-process moto (``mock_aws``), one per module here (the ``aws`` fixture below);
* ``dynamodb-local``: AWS's own DynamoDB Local (the session's ``dynamodb_local`` java process), which validates
  requests as AWS does.

A test's own tables get unique names and are deleted afterwards. The seeded history (``world``) is written once
per module and backend and kept while no test changes it: before each test of the world, both tables and the
bucket are read back and compared with what the seeding left, and restored (or re-seeded in new tables) when
they differ (tests/integration/results_api/history.py). S3 stays on moto in both cases. A module that only needs one backend overrides ``backend`` (the API and the
widget run on moto: what they add over the reader is not DynamoDB's behaviour).

The data is written by the real writers only, never put by hand (except where a test tampers with an item on
purpose): the live lock (``SlotLock.try_acquire``/``commit`` with the results of ``ResultsStore.prepare`` in
the same fenced transaction, a superseded delivery recorded MISSED by the lock itself), a manual generation
(``request_generation`` then the manual lease), and the operator's ``pause``. See :func:`~.history.seed_history`.

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
import moto
import pytest
from botocore.config import Config

from athena_refresh import contract
from athena_refresh.catalog import CatalogQuery, catalog_document
from athena_refresh.results import ResultsStore, create_results_table
from results_api import handler
from results_api.api import create_app
from results_api.reader import ResultsReader
from slotlock import SlotLock, create_lock_table
from tests.backends import DYNAMODB_LOCAL
from tests.backends import _delete_table as delete_table
from tests.integration.results_api.history import (
    BUCKET,
    LEASE_S,
    FakeClock,
    Seeded,
    SeededHistories,
    World,
    empty_bucket,
    jobs_catalog,
)
from tests.unit.results_api.conftest import (  # the history's data, shared with the pure tests
    SLOTS,
    stored_of,  # noqa: F401  (a fixture: the pure tests' StoredResult, for the widget's tests too)
)

REGION = "us-east-1"
LOCK_TABLE = "read-locks"  # the offline reader's names (it sends no request)
RESULTS_TABLE = "read-results"


# ---------------------------------------------------------------------------------------------------
# helpers (handed out through fixtures)
# ---------------------------------------------------------------------------------------------------
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
@pytest.fixture(scope="module")
def aws() -> Iterator[None]:
    """In-process moto for one module (tests/backends.py's, widened): the seeded history outlives a test (see
    :mod:`tests.integration.results_api.history`, which checks before each test that it is unchanged). A test's
    own tables still get unique names and are deleted afterwards; ``bucket`` is emptied for a test without the
    world."""
    with moto.mock_aws():
        yield


@pytest.fixture(scope="session")
def _s3_client(boto_session: boto3.session.Session) -> Any:
    """One S3 client for the session (moto answers it while a ``mock_aws`` is active)."""
    return boto_session.client("s3")


@pytest.fixture
def s3(aws: None, _s3_client: Any) -> Any:
    return _s3_client


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
    return jobs_catalog()


# ---------------------------------------------------------------------------------------------------
# the seeded history (tests/integration/results_api/history.py)
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def _histories(aws: None, boto_session: boto3.session.Session) -> Iterator[SeededHistories]:
    """The module's seeded history (its tables are deleted at the module's end)."""
    histories = SeededHistories(
        lambda endpoint_url: boto_session.client("dynamodb", endpoint_url=endpoint_url), boto_session.client("s3")
    )
    yield histories
    histories.drop()


@pytest.fixture
def _seeded(request: pytest.FixtureRequest, backend: str, _histories: SeededHistories) -> Seeded:
    """The seeded history on this test's backend, exactly as seeding left it."""
    endpoint_url = request.getfixturevalue("dynamodb_local").endpoint_url if backend == DYNAMODB_LOCAL else None
    return _histories.get(backend, endpoint_url)


def _uses_world(request: pytest.FixtureRequest) -> bool:
    return "world" in request.fixturenames


@pytest.fixture
def lock_table(request: pytest.FixtureRequest, ddb: Any, table_names: dict[str, str]) -> Iterator[str]:
    """The seeded history's lock table for a test of the ``world``; else a fresh one (tests/backends.py's)."""
    if _uses_world(request):
        yield request.getfixturevalue("_seeded").world.lock_table
        return
    yield create_lock_table(ddb, table_names["lock"], enable_ttl=False)
    delete_table(ddb, table_names["lock"])


@pytest.fixture
def results_table(request: pytest.FixtureRequest, ddb: Any, table_names: dict[str, str]) -> Iterator[str]:
    """The seeded history's results table for a test of the ``world``; else a fresh one."""
    if _uses_world(request):
        yield request.getfixturevalue("_seeded").world.results_table
        return
    yield create_results_table(ddb, table_names["results"])
    delete_table(ddb, table_names["results"])


@pytest.fixture
def bucket(request: pytest.FixtureRequest, s3: Any) -> str:
    """:data:`BUCKET`: the seeded history's for a test of the ``world``; else emptied for this test."""
    if _uses_world(request):
        request.getfixturevalue("_seeded")
    else:
        empty_bucket(s3)
    return BUCKET


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
    _seeded: Seeded,
    ddb: Any,
    lock_table: str,
    results_table: str,
    bucket: str,
    clock: FakeClock,
    catalog: dict[str, CatalogQuery],
) -> World:
    """The history of :data:`JOB` over S0..S4 as the job writes it (:func:`~.history.seed_history`), in this
    test's tables and bucket; ``clock`` where seeding left it (5 s into S4's lease). Seeded once per module and
    backend, restored after a test that changed it."""
    clock.now = _seeded.clock_ms
    return _seeded.world_for(catalog)


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
