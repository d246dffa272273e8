"""Fixtures for the slotlock unit tests: two DynamoDB backends, a fake clock, a Lambda-like context.

Every test that uses a table runs twice, through the ``backend`` fixture:

* ``moto``: in-process moto, one per test module;
* ``dynamodb-local``: AWS's own DynamoDB Local (``local.emulators.dynamodb_local``), one java process per test
  session. moto is lenient (it accepts unused expression values, raises a Python TypeError for
  wrong-typed comparisons); DynamoDB Local validates requests as AWS does, so every request the lock
  sends is proven valid there. Without Java or the npm package these params are skipped with the
  reason, except under ``CI=true``, where they fail: CI must really run them.

Tests are isolated by a fresh table each (unique names). A test that depends on one backend's
behaviour narrows the fixture: ``@pytest.mark.parametrize("backend", ["moto"], indirect=True)``.
Stubber tests use ``boto_session`` only and are not duplicated.

Both backends are used for *sequenced* interleavings only (moto is not atomic under concurrency, see
the platform facts notes): every test drives the racers one request at a time and moves time with
:class:`FakeClock`. The table has no TTL enabled, so DynamoDB Local's real-time TTL deletion never
removes items written under the fake clock.

This directory has no ``__init__.py`` (a package named ``slotlock`` here would shadow the code under
test), so the helpers are handed out through fixtures instead of being imported.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import moto
import pytest

from local.emulators.dynamodb_local import DynamoDBLocal
from slotlock import Semaphore, Slot, SlotLock, create_lock_table

TABLE_PREFIX = "slotlock-test"
SEMAPHORE_NAME = "123456789012-us-east-1"
WAITER_TTL_S = 20.0
JOB_NAME = "flights-dashboard"
LEASE_S = 30.0
HEARTBEAT_S = 10.0

BACKENDS = ["moto", "dynamodb-local"]

#: The slot every test races for unless it needs several: 2026-11-22T00:30:00Z.
SLOT_EPOCH_S = int(dt.datetime(2026, 11, 22, 0, 30, tzinfo=dt.UTC).timestamp())


@dataclass
class FakeClock:
    """The callers' wall clock, epoch milliseconds; tests move it explicitly."""

    now: int

    def __call__(self) -> int:
        return self.now

    def advance(self, *, ms: int = 0, s: float = 0) -> int:
        self.now += ms + int(s * 1000)
        return self.now


@dataclass
class LambdaContext:
    """The two members of the Lambda context object that slotlock reads."""

    aws_request_id: str
    clock: FakeClock
    deadline_ms: int

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - self.clock.now)


@dataclass
class RequestLog:
    """Every DynamoDB API call the client makes (botocore ``before-call``), with its JSON request body.

    ``before-call`` fires once per API call (botocore's own retries are below it), so ``operations``
    counts requests as the caller issued them.
    """

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


@pytest.fixture(scope="session")
def boto_session() -> boto3.session.Session:
    """One session for the whole run: its loader caches the service models, so a client costs ~10 ms
    instead of ~0.5 s (mock_aws drops boto3's default session, and with it that cache). Explicit fake
    keys: this is created before any function-scoped credentials fixture runs."""
    return boto3.session.Session(
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        aws_session_token="testing",
        region_name="us-east-1",
    )


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """The DynamoDB implementation under test: ``"moto"`` (in-process, one per test module; module
    scope, not session: it must be stopped before other modules, e.g. the serialized moto server
    tests, run) or ``"dynamodb-local"`` (the session's DynamoDB Local)."""
    if request.param == "moto":
        with moto.mock_aws():
            yield "moto"
    else:
        request.getfixturevalue("dynamodb_local")
        yield "dynamodb-local"


@pytest.fixture
def ddb(backend: str, boto_session: boto3.session.Session, request: pytest.FixtureRequest) -> Any:
    if backend == "moto":
        return boto_session.client("dynamodb")
    server: DynamoDBLocal = request.getfixturevalue("dynamodb_local")
    return boto_session.client("dynamodb", endpoint_url=server.endpoint_url)


@pytest.fixture
def table(ddb: Any) -> Iterator[str]:
    """A fresh lock table for this test (string partition key ``pk``), as the stack creates it."""
    name = f"{TABLE_PREFIX}-{uuid.uuid4().hex[:12]}"
    create_lock_table(ddb, name, enable_ttl=False)
    yield name
    ddb.delete_table(TableName=name)


@pytest.fixture
def slot() -> Slot:
    return Slot(SLOT_EPOCH_S)


@pytest.fixture
def clock() -> FakeClock:
    """Starts 2 s after the slot's scheduled time (a normal, prompt delivery)."""
    return FakeClock(now=SLOT_EPOCH_S * 1000 + 2_000)


@pytest.fixture
def request_log(ddb: Any) -> RequestLog:
    log = RequestLog()
    ddb.meta.events.register("before-call.dynamodb", log)
    return log


@pytest.fixture
def make_lock(ddb: Any, table: str, clock: FakeClock) -> Callable[..., SlotLock]:
    """``make_lock(**overrides)``: a SlotLock on the fresh table, the shared client and the fake clock."""

    def make(**overrides: Any) -> SlotLock:
        params: dict[str, Any] = {
            "client": ddb,
            "clock_ms": clock,
            "lease_duration_s": LEASE_S,
            "heartbeat_interval_s": HEARTBEAT_S,
            # retry backoff moves the fake clock, so retry budgets (bounded by the lease) are exercised
            "sleep_s": lambda seconds: clock.advance(ms=max(1, int(seconds * 1000))),
        }
        params.update(overrides)
        return SlotLock(table, JOB_NAME, **params)

    return make


@pytest.fixture
def lock(make_lock: Callable[..., SlotLock]) -> SlotLock:
    return make_lock()


@pytest.fixture
def get_item(ddb: Any, table: str) -> Callable[[str], dict[str, Any] | None]:
    """Raw item (DynamoDB JSON) by key, strongly consistent; ``None`` when absent."""

    def get(key: str) -> dict[str, Any] | None:
        return ddb.get_item(TableName=table, Key={"pk": {"S": key}}, ConsistentRead=True).get("Item")

    return get


@pytest.fixture
def make_context(clock: FakeClock) -> Callable[..., LambdaContext]:
    """``make_context(request_id, remaining_ms=...)``: a Lambda context whose deadline is on the fake clock."""

    def make(request_id: str, *, remaining_ms: int = 900_000) -> LambdaContext:
        return LambdaContext(aws_request_id=request_id, clock=clock, deadline_ms=clock.now + remaining_ms)

    return make


@pytest.fixture
def make_semaphore(ddb: Any, table: str, clock: FakeClock) -> Callable[..., Semaphore]:
    """``make_semaphore(permits=1, **overrides)``: a Semaphore on the fresh table with slotlock's defaults (the start
    window on), the shared client, the fake clock (its sleeps move it) and a 20 s waiter TTL."""

    def make(permits: int = 1, **overrides: Any) -> Semaphore:
        name = overrides.pop("name", SEMAPHORE_NAME)
        params: dict[str, Any] = {
            "client": ddb,
            "clock_ms": clock,
            "sleep_s": lambda seconds: clock.advance(ms=max(1, int(seconds * 1000))),
            "waiter_ttl_s": WAITER_TTL_S,
        }
        params.update(overrides)
        return Semaphore(table, name, permits, **params)

    return make
