"""The Athena job under the capacity budget (issue 24): ``AthenaRefreshJob`` with a :class:`CapacityGate`.

A scripted engine, the lock and results tables on moto and DynamoDB Local, a fake clock whose sleeps move it.
Other holders of permits are played directly on the semaphore (their own owners, tokens and expiries).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from athena_refresh.errors import QueryEngineError
from athena_refresh.job import CHECKPOINT_QUERY_STARTED
from athena_refresh.permits import CapacityGate, CapacitySettings, CapacityWaitTimeoutError
from athena_refresh.report import SlotReport
from athena_refresh.results import ResultsStore
from athena_refresh.settings import Settings
from slotlock import Lease, PermitOwner, Semaphore, Slot, SlotHistory, SlotLock, SlotRunner, request_generation
from slotlock._expressions import PERMIT_OWNER, PERMIT_TOKEN, PK
from slotlock.table import permit_key

pytestmark = pytest.mark.backends("moto", "dynamodb-local")


class SimulatedCrash(BaseException):
    """The invocation dies here (as in test_job.py): BaseException, so nothing under test swallows it."""


def crash_at(checkpoint_name: str) -> Callable[[str, Lease], None]:
    def listener(checkpoint: str, lease: Lease) -> None:
        if checkpoint == checkpoint_name:
            raise SimulatedCrash(checkpoint)

    return listener


def killed(runner: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A killed Lambda cannot release its lease."""
    monkeypatch.setattr(runner.lock, "release", lambda lease: None)
    return runner


NAME = "123456789012-eu-west-1"
OTHER = PermitOwner("other-job", Slot.parse("2026-11-22T00:00Z"))


class FakeDeferral:
    """Records each arranged re-invocation: (event, at_ms, key)."""

    def __init__(self) -> None:
        self.deferred: list[tuple[dict[str, Any], int, str]] = []

    def defer(self, event: Mapping[str, Any], *, at_ms: int, key: str) -> str:
        self.deferred.append((dict(event), at_ms, key))
        return f"schedule-{len(self.deferred)}"


@pytest.fixture
def make_semaphore(ddb: Any, lock_table: str, clock: Any) -> Callable[..., Semaphore]:
    def make(permits: int = 2) -> Semaphore:
        return Semaphore(lock_table, NAME, permits, client=ddb, clock_ms=clock, sleep_s=clock.sleep)

    return make


@pytest.fixture
def gated(
    make_job: Any, make_semaphore: Callable[..., Semaphore], clock: Any, slot: Slot, settings: Settings
) -> Callable[..., Any]:
    """``gated(engine, permits=2, deferral=None, **capacity)``: the job with a capacity gate, as the service builds it."""

    def make(
        engine: Any, *, permits: int = 2, deferral: Any = None, max_slot_age_s: float | None = 1800.0, **capacity: Any
    ) -> Any:
        semaphore = make_semaphore(permits)
        capacity_settings = CapacitySettings(permits=permits, semaphore_name=NAME, **capacity)
        event = {"scheduled_time": slot.iso, "job": settings.job_name}

        def gate(report: SlotReport) -> CapacityGate:
            return CapacityGate(
                semaphore=semaphore,
                settings=capacity_settings,
                event=event,
                report=report,
                max_slot_age_ms=None if max_slot_age_s is None else int(max_slot_age_s * 1000),
                deferral=deferral,
                query_is_terminal=lambda qid: engine.get_query(qid).done,
                sleep_s=clock.sleep,
            )

        return make_job(engine, capacity=gate)

    return make


@pytest.fixture
def run(clock: Any, slot: Slot) -> Callable[..., Any]:
    def invoke(runner: Any, job: Any, owner: str, *, remaining_ms: int = 300_000, at: Slot | None = None) -> Any:
        return runner.run(job, slot=at or slot, owner_id=owner, deadline_ms=clock.now + remaining_ms)

    return invoke


def held_by_others(semaphore: Semaphore, count: int, clock: Any, *, for_ms: int = 3_600_000) -> list[Any]:
    """``count`` permits taken by other jobs' live queries (their leases far from expiry)."""
    permits = []
    for i in range(count):
        owner = PermitOwner(f"other-{i}", OTHER.slot)
        got = semaphore.try_acquire(owner, 1, clock.now + for_ms)
        assert got.acquired
        permits.append(got)
    return permits


def all_free(semaphore: Semaphore) -> bool:
    permits, _ = semaphore.read()
    return all(permit.free for permit in permits)


# ---------------------------------------------------------------------------------------------------
def test_a_winner_takes_a_free_permit_with_two_requests_and_gives_it_back_in_the_commit(
    gated: Any,
    make_job: Any,
    make_engine: Any,
    make_runner: Any,
    run: Any,
    request_log: Any,
    store: ResultsStore,
    settings: Settings,
    make_semaphore: Any,
    slot: Slot,
    clock: Any,
) -> None:
    # GIVEN the same slot run once without and once with the budget (two jobs' worth of tables: a later slot)
    plain = run(make_runner(), make_job(make_engine([["SUCCEEDED"]])), "req-plain")
    assert plain.status == "succeeded"
    without = list(request_log.operations)
    request_log.clear()
    later = Slot(slot.epoch_s + 1800)
    clock.advance(s=1800)

    # WHEN a winner with the budget on runs the next slot
    job = gated(make_engine([["SUCCEEDED"]]))
    outcome = run(make_runner(), job, "req-A", at=later)

    # THEN it took a free permit with one BatchGetItem and one UpdateItem more than without the budget: the query's
    # record rides in the record_state transaction, the release in the commit transaction
    assert outcome.status == "succeeded"
    with_budget = request_log.operations
    assert len(with_budget) - len(without) == 2
    assert with_budget.count("BatchGetItem") == 1
    assert (job.report.permit, job.report.permit_wait_ms, job.report.permits_in_use) == ("free", 0, 1)
    [record, commit] = request_log.requests("TransactWriteItems")
    assert any("permit#" in str(item) for item in record["TransactItems"])
    assert any("permit#" in str(item) for item in commit["TransactItems"])
    assert all_free(make_semaphore())
    assert outcome.details["permit_wait_ms"] == 0


def test_a_winner_waits_in_line_heartbeating_and_takes_the_permit_once_one_is_given_back(
    gated: Any, make_engine: Any, make_runner: Any, run: Any, make_semaphore: Any, clock: Any, request_log: Any
) -> None:
    # GIVEN both permits held by other jobs' live queries; one is given back after about 40 s
    semaphore = make_semaphore()
    others = held_by_others(semaphore, 2, clock)
    released_at = clock.now + 40_000
    real_sleep = clock.sleep

    def sleep(seconds: float) -> None:
        real_sleep(seconds)
        if clock.now >= released_at and others:
            semaphore.release(others.pop())

    job = gated(make_engine([["SUCCEEDED"]]))
    job.capacity = _with_sleep(job.capacity, sleep)

    # WHEN the winner runs
    outcome = run(make_runner(), job, "req-A")

    # THEN it waited (bounded backoff, renewing its lease), then took the freed permit and committed
    assert outcome.status == "succeeded"
    assert 40_000 <= job.report.permit_wait_ms < 60_000
    assert request_log.heartbeats(), "the lease was renewed while waiting"
    assert max(clock.sleeps_ms) <= 5_000  # the poll's backoff is capped
    assert job.report.permit == "free"


def _with_sleep(factory: Any, sleep: Callable[[float], None]) -> Any:
    def make(report: SlotReport) -> CapacityGate:
        gate = factory(report)
        gate.sleep_s = sleep
        return gate

    return make


def test_a_wait_past_wait_in_place_gives_the_slot_back_and_the_reinvocation_takes_over(
    gated: Any,
    make_engine: Any,
    make_runner: Any,
    run: Any,
    make_semaphore: Any,
    clock: Any,
    slot: Slot,
    lock: SlotLock,
) -> None:
    # GIVEN every permit held, and a deferral (the deployed one is a one-time Scheduler schedule)
    semaphore = make_semaphore()
    others = held_by_others(semaphore, 2, clock)
    deferral = FakeDeferral()
    engine = make_engine([["SUCCEEDED"]])

    # WHEN the winner has waited wait_in_place_s (30 s)
    first = run(make_runner(), gated(engine, deferral=deferral, wait_in_place_s=30, retry_delay_s=120), "req-A")

    # THEN it gave the slot back: not an error, no query, the lease released with the wait recorded, one re-invocation
    # arranged with the same slot's event (the deferral count added)
    assert (first.status, first.reason) == ("deferred", "capacity")
    assert engine.starts == []
    [(event, at_ms, key)] = deferral.deferred
    assert event == {"scheduled_time": slot.iso, "job": "flights-dashboard", "capacity_deferral": 1}
    assert at_ms == clock.now + 120_000 and key.endswith("#d1")
    state = lock.get_slot_state(slot)
    assert state["capacity"]["deferrals"] == 1 and state["capacity"]["waited_ms"] >= 30_000

    # WHEN the permits are given back and the re-invocation arrives 2 minutes later
    for permit in others:
        semaphore.release(permit)
    clock.advance(s=120)
    job = gated(engine, deferral=deferral)
    second = run(make_runner(), job, "req-B")

    # THEN it took the released lease over, adopted the recorded wait and committed
    assert (second.status, second.takeover) == ("succeeded", True)
    assert job.report.capacity_deferrals == 1 and job.report.permit_wait_ms >= 30_000
    assert len(engine.starts) == 1 and all_free(semaphore)


def test_a_slot_given_back_whose_comeback_never_came_is_recorded_missed_capacity_by_the_next_slot(
    gated: Any,
    make_engine: Any,
    make_runner: Any,
    run: Any,
    make_semaphore: Any,
    clock: Any,
    slot: Slot,
    lock: SlotLock,
    ddb: Any,
    lock_table: str,
) -> None:
    # GIVEN every permit held: the winner of S waits 30 s, then gives S back for capacity (its comeback arranged)
    semaphore = make_semaphore()
    others = held_by_others(semaphore, 2, clock)
    deferral = FakeDeferral()
    first = run(make_runner(), gated(make_engine([]), deferral=deferral, wait_in_place_s=30), "req-A")
    assert (first.status, first.reason) == ("deferred", "capacity") and len(deferral.deferred) == 1

    # WHEN the comeback never comes (its schedule lost), the permits free up and S+1 fires
    for permit in others:
        semaphore.release(permit)
    nxt = Slot(slot.epoch_s + 1800)
    clock.now = nxt.epoch_ms + 2_000
    engine = make_engine([["SUCCEEDED"]])
    second = run(make_runner(), gated(engine, deferral=deferral), "req-N", at=nxt)

    # THEN S+1 ran, and its winner recorded S MISSED "capacity" (what S was waiting for), not "superseded"
    assert (second.status, second.superseded_slot, second.superseded_recorded) == ("succeeded", slot.iso, True)
    item = lock.get_slot(slot)
    assert item is not None and (item["status"], item["reason"]) == ("MISSED", "capacity")
    assert item["error"]["superseded_by_slot"] == nxt.iso
    assert item["state"]["capacity"]["deferrals"] == 1 and item["state"]["capacity"]["waited_ms"] >= 30_000
    [record] = SlotHistory(lock_table, client=ddb).slot_records(lock.job_name, slot)
    assert (record.status, record.reason) == ("MISSED", "capacity")
    assert len(engine.starts) == 1 and all_free(semaphore)


def test_no_permit_before_the_max_slot_age_finishes_the_slot_missed_capacity_once(
    gated: Any,
    make_engine: Any,
    make_runner: Any,
    run: Any,
    make_semaphore: Any,
    clock: Any,
    slot: Slot,
    lock: SlotLock,
) -> None:
    # GIVEN every permit held for long, a max slot age that leaves 2 minutes, and a re-invocation that would come too late
    semaphore = make_semaphore()
    held_by_others(semaphore, 2, clock)
    deferral = FakeDeferral()
    engine = make_engine([["SUCCEEDED"]])
    clock.now = slot.epoch_ms + 60_000
    job = gated(engine, deferral=deferral, max_slot_age_s=240, wait_in_place_s=30, retry_delay_s=600)

    # WHEN the winner waits
    outcome = run(make_runner(), job, "req-A")

    # THEN at its last chance (the slot's max age less the 60 s margin) it finished the slot MISSED capacity itself
    assert (outcome.status, outcome.reason) == ("missed", "capacity")
    assert clock.now >= slot.epoch_ms + 180_000
    assert deferral.deferred == [] and engine.starts == []
    item = lock.get_slot(slot)
    assert item is not None and (item["status"], item["reason"]) == ("MISSED", "capacity")

    # AND a late delivery of the slot finds it finished: recorded exactly once
    late = run(make_runner(), gated(engine, deferral=deferral), "req-late")
    assert (late.status, late.reason) == ("lost", "slot_finished")


def test_too_many_requests_from_athena_is_waiting_not_a_failed_attempt(
    gated: Any, make_engine: Any, make_runner: Any, run: Any, make_semaphore: Any
) -> None:
    # GIVEN Athena refuses the first two starts: the account's quota is taken by people's own queries
    engine = make_engine([["SUCCEEDED"]])
    start = engine.start_query
    refusals = iter([True, True])

    def busy_start(**kwargs: Any) -> str:
        if next(refusals, False):
            raise QueryEngineError(
                "StartQueryExecution",
                "TooManyRequestsException: too many queries",
                error_code="TooManyRequestsException",
            )
        return start(**kwargs)

    engine.start_query = busy_start
    job = gated(engine)

    # WHEN the winner runs
    outcome = run(make_runner(), job, "req-A")

    # THEN it waited and started attempt 1 once Athena had room: no failed attempt, no Lambda retry
    assert outcome.status == "succeeded" and outcome.details["attempt"] == 1
    assert job.report.queries_started == 1 and job.report.permit_wait_ms > 0
    assert all_free(make_semaphore())


def test_a_takeover_inherits_the_permit_and_never_takes_a_second(
    gated: Any,
    make_engine: Any,
    make_runner: Any,
    run: Any,
    make_semaphore: Any,
    clock: Any,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN racer A took a permit, started its query and was killed
    semaphore = make_semaphore()
    engine = make_engine([["RUNNING", "RUNNING", "SUCCEEDED"]])
    runner_a = killed(make_runner(listener=crash_at(CHECKPOINT_QUERY_STARTED)), monkeypatch)
    with pytest.raises(SimulatedCrash):
        run(runner_a, gated(engine), "req-A")
    [qid] = engine.queries
    [held] = [permit for permit in semaphore.read()[0] if not permit.free]
    assert (held.fencing_token, held.query_execution_id) == (1, qid)

    # WHEN its lease expired and a late delivery takes over
    clock.advance(s=settings.lease_duration_s + 1)
    job = gated(engine)
    outcome = run(make_runner(), job, "req-B")

    # THEN B inherited A's permit (one permit for the one query, never a second) and released it in its commit
    assert outcome.status == "succeeded" and outcome.takeover
    assert job.report.permit == "inherited" and len(engine.starts) == 1
    assert all_free(semaphore)


def test_a_permit_lost_between_the_query_and_the_commit_never_holds_the_result_back(
    gated: Any,
    make_engine: Any,
    make_runner: Any,
    run: Any,
    make_semaphore: Any,
    clock: Any,
    ddb: Any,
    lock_table: str,
    store: ResultsStore,
    settings: Settings,
) -> None:
    # GIVEN the winner's permit is taken by someone else while its query runs (a reclaim after a missed renewal)
    semaphore = make_semaphore(1)
    stolen: list[str] = []

    def steal(engine: Any, poll: int) -> None:
        if poll == 1:
            [permit] = semaphore.read()[0]
            ddb.update_item(
                TableName=lock_table,
                Key={PK: {"S": permit_key(NAME, permit.index)}},
                UpdateExpression="SET #owner = :other, #token = :one",
                ExpressionAttributeNames={"#owner": PERMIT_OWNER, "#token": PERMIT_TOKEN},
                ExpressionAttributeValues={":other": {"S": OTHER.id}, ":one": {"N": "1"}},
            )
            stolen.append(permit_key(NAME, permit.index))

    engine = make_engine([["RUNNING", "SUCCEEDED"]], on_get_query=steal)
    job = gated(engine, permits=1)

    # WHEN it commits
    outcome = run(make_runner(), job, "req-A")

    # THEN the results are committed all the same (the release write refused, the commit sent again without it),
    # and the other owner's permit is left alone
    assert stolen and outcome.status == "succeeded"
    assert store.get_result(settings.job_name, outcome.slot) is not None
    [permit] = semaphore.read()[0]
    assert permit.owner == OTHER.id


def test_a_manual_run_leaves_the_headroom_to_the_live_schedule(
    gated: Any,
    make_engine: Any,
    make_runner: Any,
    make_lock: Any,
    run: Any,
    make_semaphore: Any,
    clock: Any,
    slot: Slot,
    lock: SlotLock,
) -> None:
    # GIVEN 2 permits, one held; a re-run (generation 2) of a past slot with a headroom of 1
    semaphore = make_semaphore()
    held_by_others(semaphore, 1, clock)
    past = Slot(slot.epoch_s - 1800)
    request_generation(lock.context, past, run_id="r1", kind="rerun", requested_by="op", reason="test")
    deferral = FakeDeferral()
    manual = gated(make_engine([["SUCCEEDED"]]), deferral=deferral, manual_headroom=1, wait_in_place_s=10)

    # WHEN the re-run asks for a permit while one is free
    result = run(SlotRunner(make_lock().for_generation(2)), manual, "req-rerun", at=past)

    # THEN it did not take the last free permit: the live schedule keeps it; the re-run waits and is given back
    assert (result.status, result.reason) == ("deferred", "capacity")
    assert not all_free(semaphore) and sum(not p.free for p in semaphore.read()[0]) == 1

    # AND a live slot takes that permit at once
    live = gated(make_engine([["SUCCEEDED"]]))
    assert run(make_runner(), live, "req-live").status == "succeeded" and live.report.permit_wait_ms == 0


def test_without_a_deferral_the_wait_ends_in_a_retryable_error_and_the_lease_is_released(
    gated: Any,
    make_engine: Any,
    make_runner: Any,
    run: Any,
    make_semaphore: Any,
    clock: Any,
    slot: Slot,
    lock: SlotLock,
) -> None:
    # GIVEN every permit held and no deferral configured (local tools)
    held_by_others(make_semaphore(), 2, clock)

    # WHEN / THEN the wait ends with a retryable error, and the lease is given back for the retry
    with pytest.raises(CapacityWaitTimeoutError) as info:
        run(make_runner(), gated(make_engine([["SUCCEEDED"]]), wait_in_place_s=5), "req-A")
    assert info.value.retryable
    record = lock.get_lock()
    assert record.lease_expires_at_ms is not None and record.lease_expires_at_ms <= clock.now
