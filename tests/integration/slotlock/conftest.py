"""Fixtures for the slotlock unit tests: the DynamoDB backends, a fake clock, a Lambda-like context.

The backends (``backend``, ``ddb``, ``boto_session``, DynamoDB Local) are the plugin ``tests/backends.py``: a test
that uses a table runs on moto, and also on DynamoDB Local where it declares so (``@pytest.mark.backends("moto",
"dynamodb-local")`` on the test or the module): every test that sends a conditional write, a transaction or a
permit/ticket write, and every request-shape, ALL_OLD or cancellation-reason test. moto is lenient (it accepts
unused expression values, raises a Python TypeError for wrong-typed comparisons); DynamoDB Local validates
requests as AWS does, so every request the lock sends is proven valid there. Stubber tests use ``boto_session``
only and are not duplicated.

Tests are isolated by a fresh table each (unique names), so one moto per test module is enough (``aws`` below:
module scope, not session: it must be stopped before other modules, e.g. the serialized moto server tests, run).

Both backends are used for *sequenced* interleavings only (moto is not atomic under concurrency, see
the platform facts notes): every test drives the racers one request at a time and moves time with
:class:`FakeClock`. The table has no TTL enabled, so DynamoDB Local's real-time TTL deletion never
removes items written under the fake clock.

This directory is the package ``tests.integration.slotlock`` (every folder up to tests/ has an
``__init__.py``), so it never shadows the code under test ``slotlock``; the helpers are handed out through
fixtures.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import moto
import pytest

from slotlock import Semaphore, Slot, SlotLock

SEMAPHORE_NAME = "123456789012-us-east-1"
WAITER_TTL_S = 20.0
JOB_NAME = "flights-dashboard"
LEASE_S = 30.0
HEARTBEAT_S = 10.0

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


@pytest.fixture(scope="module")
def aws() -> Iterator[None]:
    """One in-process moto per test module (the plugin's is one per test): tables have unique names."""
    with moto.mock_aws():
        yield


@pytest.fixture
def table(lock_table: str) -> str:
    """A fresh lock table for this test (string partition key ``pk``), as the stack creates it (the plugin's
    ``lock_table``)."""
    return lock_table


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
    ddb.meta.events.register("before-call.dynamodb", log)  # the test's own client (tests/backends.py)
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
