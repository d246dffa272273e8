"""The Athena job under the budget in the faults found from outside (issue 31): a start whose answer was lost, a
record of the query that failed, a long query. The capacity gate as the service builds it, on the fake clock, the
lock table on moto and DynamoDB Local; other jobs played directly on the semaphore.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from athena_refresh.errors import QueryEngineError
from athena_refresh.permits import CapacityGate, CapacitySettings
from athena_refresh.report import SlotReport
from slotlock import PermitOwner, Semaphore, Slot, SlotOutcome, SlotRun, TransientLockError

SEMAPHORE = "budget"
DEPLOYMENT = "prod-locks"


@pytest.fixture
def run(clock: Any, slot: Slot) -> Callable[..., SlotOutcome]:
    def invoke(runner: Any, job: Any, owner: str, *, remaining_ms: int = 300_000) -> SlotOutcome:
        return runner.run(job, slot=slot, owner_id=owner, deadline_ms=clock.now + remaining_ms)

    return invoke


@pytest.fixture
def semaphore(ddb: Any, lock_table: str, clock: Any) -> Semaphore:
    return Semaphore(lock_table, SEMAPHORE, 1, client=ddb, clock_ms=clock, deployment=DEPLOYMENT)


@pytest.fixture
def gate_for(semaphore: Semaphore, clock: Any) -> Callable[..., Callable[[SlotReport], CapacityGate]]:
    def factory(engine: Any) -> Callable[[SlotReport], CapacityGate]:
        settings = CapacitySettings(permits=1, semaphore_name=SEMAPHORE, wait_in_place_s=600.0)
        return lambda report: CapacityGate(
            semaphore=semaphore,
            settings=settings,
            event={},
            report=report,
            max_slot_age_ms=None,
            query_is_terminal=lambda query: bool(engine.get_query(query).done),
            sleep_s=clock.sleep,
            rng=random.Random(7),
        )

    return factory


def lose_the_start_answer(engine: Any) -> None:
    """StartQueryExecution is applied, but its answer is lost past botocore's retries (once)."""
    start = engine.start_query
    lost: list[str] = []

    def start_query(**kwargs: Any) -> str:
        query = str(start(**kwargs))
        if not lost:
            lost.append(query)
            raise QueryEngineError("StartQueryExecution", "Read timeout on endpoint URL", retryable=True)
        return query

    engine.start_query = start_query


def throttle_the_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The record_state transaction (query id on the slot item and the permit) is throttled past retries (once)."""
    record = SlotRun.record_state
    failed: list[bool] = []

    def record_state(self: SlotRun, **kwargs: Any) -> None:
        if "query_execution_id" in kwargs and not failed:
            failed.append(True)
            raise TransientLockError("TransactWriteItems", "ThrottlingException", attempts=5)
        record(self, **kwargs)

    monkeypatch.setattr(SlotRun, "record_state", record_state)


@pytest.mark.parametrize("fault", ["start_answer_lost", "record_throttled"])
def test_a_query_started_but_not_recorded_keeps_its_permit_counted_until_the_retry_records_it(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    gate_for: Any,
    semaphore: Semaphore,
    clock: Any,
    slot: Slot,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
) -> None:
    # GIVEN a budget of 1 and a winner whose query starts, but whose start is never recorded on the permit
    engine = make_engine([["RUNNING"] * 3 + ["SUCCEEDED"]])
    if fault == "start_answer_lost":
        lose_the_start_answer(engine)
    else:
        throttle_the_record(monkeypatch)
    job = make_job(engine, capacity=gate_for(engine))

    # WHEN the invocation fails (retryable: the runner releases the lease, the permit stays)
    with pytest.raises((QueryEngineError, TransientLockError)):
        run(make_runner(), job, "req-1")
    assert len(engine.queries) == 1  # the query runs in Athena

    # THEN past the permit's expiry no other job reclaims it: the query may be active
    clock.advance(s=120)
    other = semaphore.try_acquire(PermitOwner("other-job", slot, deployment=DEPLOYMENT), 1, clock.now + 60_000)
    assert not other.acquired

    # AND Lambda's retry of the same event inherits the permit, gets the same query back (same ClientRequestToken)
    # and commits it: one query, one permit, given back in the commit
    outcome = run(make_runner(), make_job(engine, capacity=gate_for(engine)), "req-1")
    assert outcome.status == "succeeded" and len(engine.queries) == 1
    permits, _ = semaphore.read()
    assert permits[0].free


def test_a_long_query_adds_no_permit_request_per_heartbeat(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    gate_for: Any,
    clock: Any,
    request_log: Any,
) -> None:
    # GIVEN a query that runs about 70 s (several heartbeat intervals)
    engine = make_engine([["RUNNING"] * 20 + ["SUCCEEDED"]])
    start_ms = clock.now

    # WHEN the slot runs with nobody waiting
    outcome = run(make_runner(), make_job(engine, capacity=gate_for(engine)), "req-A")

    # THEN the lease was renewed several times, and the permit's only requests of their own are the take's two
    assert outcome.status == "succeeded" and clock.now - start_ms >= 70_000
    own = [
        name
        for name, body, _at in request_log.calls
        if name in ("UpdateItem", "BatchGetItem", "GetItem")
        and ("permit#" in str(body.get("Key", "")) or "RequestItems" in body)
    ]
    assert own == ["BatchGetItem", "UpdateItem"]
    renewals = [
        body
        for name, body, _at in request_log.calls
        if name == "UpdateItem" and str(body.get("Key", {}).get("pk", {}).get("S", "")).startswith("lock#")
    ]
    assert len(renewals) >= 3  # the acquisition and at least two heartbeats
