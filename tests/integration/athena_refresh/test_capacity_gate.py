"""The capacity gate (``athena_refresh.permits.CapacityGate``) keeps its lease and its permit alive while it waits,
and never starts a query without its permit.

Defects found by ``make capacity`` (200 jobs on a budget of 20, with short leases; docs/local.md), each pinned here
with the fake clock (the semaphore's own part, a take written with an expiry already past, is in
tests/integration/slotlock/test_semaphore.py):

- a winner waiting on Athena's own quota (``TooManyRequestsException``) with a permit held renewed its lease but not
  its permit: past the lease the permit expired naming no query, another slot reclaimed it, and both then started
  their queries (one more active query than the budget);
- a lease that ran out between the acquisition and the gate's first try (a stall) made the semaphore refuse the
  take (``LockConfigurationError``: an expiry in the past), ending the invocation with an error;
- the gate's waits (up to 5 s) and the job's polls (up to 5 s) did not follow the heartbeat interval, so a short lease
  (1..5 s are allowed) ran out between two renewals and another delivery of the slot could take it over;
- a winner whose permit was reclaimed between its take and its start (it stalled past its lease before naming its
  query on the permit) started its query anyway: one active query more than the budget;
- a backfill (a manual generation) of a slot older than the maximum slot age was finished MISSED ``capacity`` at
  once whenever it had to wait for a permit, although the maximum age does not apply to manual runs.

Found from outside (issue 31): a query whose start answer or record was lost ran without a counted permit (it
expired naming no query and was reclaimed by expiry); a long query renewed its permit at every heartbeat.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from athena_refresh.errors import QueryEngineError
from athena_refresh.permits import CapacityGate, CapacitySettings, NoCapacityGate
from athena_refresh.report import SlotReport
from slotlock import (
    PermitOwner,
    Semaphore,
    Slot,
    SlotOutcome,
    SlotRun,
    SlotRunner,
    TransientLockError,
    request_generation,
)
from slotlock._expressions import LEASE_EXPIRY_UPDATE

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

SEMAPHORE = "budget"
DEPLOYMENT = "prod-locks"
SHORT_LEASE = {"lease_duration_s": 2.0, "heartbeat_interval_s": 0.5}


@pytest.fixture
def run(clock: Any, slot: Slot) -> Callable[..., SlotOutcome]:
    def invoke(runner: Any, job: Any, owner: str, *, remaining_ms: int = 300_000) -> SlotOutcome:
        return runner.run(job, slot=slot, owner_id=owner, deadline_ms=clock.now + remaining_ms)

    return invoke


@pytest.fixture
def semaphore(ddb: Any, lock_table: str, clock: Any) -> Semaphore:
    # The start window off (reclaimed at the expiry itself): these tests are about the expiry's mechanics; a permit
    # naming no query stays counted max_query_active_s past it by default (test_capacity_faults.py).
    return Semaphore(lock_table, SEMAPHORE, 1, client=ddb, clock_ms=clock, max_query_active_s=0)


@pytest.fixture
def windowed(ddb: Any, lock_table: str, clock: Any) -> Semaphore:
    """As the service builds it: the deployment in the owner ids, the start window on (slotlock's default)."""
    return Semaphore(lock_table, SEMAPHORE, 1, client=ddb, clock_ms=clock, deployment=DEPLOYMENT)


@pytest.fixture
def gate_for(semaphore: Semaphore, clock: Any) -> Callable[..., Callable[[SlotReport], CapacityGate]]:
    """``gate_for(engine, on=semaphore)``: the job's capacity gate factory, as the service builds it, on the fake
    clock (by default on the ``semaphore`` fixture)."""

    def factory(
        engine: Any, *, wait_in_place_s: float = 600.0, on: Semaphore | None = None
    ) -> Callable[[SlotReport], CapacityGate]:
        settings = CapacitySettings(permits=1, semaphore_name=SEMAPHORE, wait_in_place_s=wait_in_place_s)
        return lambda report: CapacityGate(
            semaphore=on or semaphore,
            settings=settings,
            event={},
            report=report,
            max_slot_age_ms=None,
            query_is_terminal=lambda query: bool(engine.get_query(query).done),
            sleep_s=clock.sleep,
            rng=random.Random(7),
        )

    return factory


class AthenaFull:
    """StartQueryExecution answers ``TooManyRequestsException`` until ``until_ms`` (people's own queries hold
    Athena's quota), then starts as ``engine`` does; ``on_refused()`` runs at each refusal."""

    def __init__(self, engine: Any, clock: Any, until_ms: int, on_refused: Callable[[], None]) -> None:
        self.engine, self.clock, self.until_ms, self.on_refused = engine, clock, until_ms, on_refused
        self.refused = 0

    def start_query(self, **kwargs: Any) -> str:
        if self.clock.now < self.until_ms:
            self.refused += 1
            self.on_refused()
            raise QueryEngineError(
                "StartQueryExecution",
                "TooManyRequestsException: too many queries",
                retryable=True,
                error_code="TooManyRequestsException",
            )
        return str(self.engine.start_query(**kwargs))

    def get_query(self, query_execution_id: str) -> Any:
        return self.engine.get_query(query_execution_id)

    def get_results(self, query_execution_id: str, **kwargs: Any) -> Any:
        return self.engine.get_results(query_execution_id, **kwargs)


def lease_renewals(request_log: Any) -> list[tuple[int, int]]:
    """(sent at, new expiry) of the lock item's renewals (a permit's renewal has the same update expression)."""
    return [
        (at, int(body["ExpressionAttributeValues"][":expires"]["N"]))
        for name, body, at in request_log.calls
        if name == "UpdateItem"
        and body.get("UpdateExpression") == LEASE_EXPIRY_UPDATE
        and body["Key"]["pk"]["S"].startswith("lock#")
    ]


def test_a_holder_waiting_on_athenas_quota_keeps_its_permit(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    gate_for: Any,
    semaphore: Semaphore,
    clock: Any,
    slot: Slot,
) -> None:
    # GIVEN a winner that took the only permit, and Athena refusing its start for 100 s (three 30 s leases) while
    # another job's winner tries for the permit at every refusal
    other = PermitOwner("other-job", slot)
    taken_by_other: list[int] = []

    def other_tries() -> None:
        if semaphore.try_acquire(other, 1, clock.now + 60_000).acquired:
            taken_by_other.append(clock.now)

    start_ms = clock.now
    engine = AthenaFull(make_engine(), clock, start_ms + 100_000, other_tries)

    # WHEN the slot runs
    outcome = run(make_runner(), make_job(engine, capacity=gate_for(engine)), "req-A")

    # THEN it waited in place, its permit renewed with its lease, so the other winner never got it
    assert outcome.status == "succeeded" and engine.refused > 3
    assert taken_by_other == []
    permits, _ = semaphore.read()
    assert permits[0].owner == other.id or permits[0].free  # given back in the commit; the other may take it now


def test_a_lease_run_out_before_the_first_try_is_renewed_not_an_error(
    make_runner: Any, make_job: Any, make_engine: Any, run: Any, gate_for: Any, semaphore: Semaphore, clock: Any
) -> None:
    # GIVEN a 2 s lease and a stall of 3 s right after the acquisition (nobody took the slot over meanwhile)
    def stall(checkpoint: str, _lease: Any) -> None:
        if checkpoint == "acquired":
            clock.advance(s=3)

    engine = make_engine()

    # WHEN the slot runs
    outcome = run(make_runner(listener=stall, **SHORT_LEASE), make_job(engine, capacity=gate_for(engine)), "req-A")

    # THEN the gate renewed the lease before taking the permit (it used to raise LockConfigurationError)
    assert outcome.status == "succeeded"
    permits, _ = semaphore.read()
    assert permits[0].free


def test_with_a_short_lease_waits_and_polls_never_outlast_the_heartbeat_interval(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    gate_for: Any,
    semaphore: Semaphore,
    clock: Any,
    slot: Slot,
    request_log: Any,
) -> None:
    # GIVEN a 2 s lease (heartbeat 0.5 s), the only permit held by another job's winner for 6 s more (then it
    # expires naming no query: reclaimable), and a query that runs 20 polls
    held = semaphore.try_acquire(PermitOwner("other-job", slot), 1, clock.now + 6_000)
    assert held.acquired
    engine = make_engine([["RUNNING"] * 20 + ["SUCCEEDED"]])

    # WHEN the slot runs
    outcome = run(make_runner(**SHORT_LEASE), make_job(engine, capacity=gate_for(engine)), "req-A")

    # THEN it waited, took the expired permit, ran its query and committed; no sleep was longer than the heartbeat
    # interval, and every renewal of its lease came before the lease ran out
    assert outcome.status == "succeeded"
    assert clock.sleeps_ms and max(clock.sleeps_ms) <= 500
    renewals = lease_renewals(request_log)
    assert len(renewals) >= 4
    acquire = request_log.requests("UpdateItem")[0]
    expiries = [int(acquire["ExpressionAttributeValues"][":expires"]["N"])] + [e for _, e in renewals]
    assert all(at < previous for (at, _), previous in zip(renewals, expiries, strict=False))


def test_a_permit_lost_before_the_start_is_waited_for_again_never_started_without(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    ddb: Any,
    lock_table: str,
    semaphore: Semaphore,
    clock: Any,
    slot: Slot,
    settings: Any,
) -> None:
    # GIVEN a winner that stalls past its lease right after taking the only permit (no query named on it yet), and
    # another job's winner that reclaims the expired permit meanwhile
    other = PermitOwner("other-job", slot)

    class Stalling(Semaphore):
        stalled = False

        def try_acquire_for(self, lease: Any, **kwargs: Any) -> Any:
            got = super().try_acquire_for(lease, **kwargs)
            if got.acquired and not self.stalled:
                self.stalled = True
                clock.advance(ms=30_000 + 1)  # the 30 s lease, and the permit with it, expired
                assert semaphore.try_acquire(other, 1, clock.now + 60_000).how == "reclaimed"
            return got

    stalling = Stalling(lock_table, SEMAPHORE, 1, client=ddb, clock_ms=clock, max_query_active_s=0)
    owners_at_start: list[str | None] = []

    class Watching:
        """Reads who holds the permit at each StartQueryExecution."""

        def __init__(self, engine: Any) -> None:
            self.engine = engine

        def start_query(self, **kwargs: Any) -> str:
            permits, _ = semaphore.read()
            owners_at_start.append(permits[0].owner)
            return str(self.engine.start_query(**kwargs))

        def get_query(self, query_execution_id: str) -> Any:
            return self.engine.get_query(query_execution_id)

        def get_results(self, query_execution_id: str, **kwargs: Any) -> Any:
            return self.engine.get_results(query_execution_id, **kwargs)

    engine = Watching(make_engine())
    job_settings = settings
    capacity = CapacitySettings(permits=1, semaphore_name=SEMAPHORE, wait_in_place_s=600.0)

    def gate(report: SlotReport) -> CapacityGate:
        return CapacityGate(
            semaphore=stalling,
            settings=capacity,
            event={},
            report=report,
            max_slot_age_ms=None,
            query_is_terminal=lambda query: bool(engine.get_query(query).done),
            sleep_s=clock.sleep,
            rng=random.Random(7),
        )

    # WHEN the slot runs
    outcome = run(make_runner(), make_job(engine, capacity=gate), "req-A")

    # THEN it found its permit gone before the start (the renewal refused), waited until the other's permit expired
    # in turn, and started its one query holding the permit
    assert outcome.status == "succeeded"
    assert owners_at_start == [PermitOwner(job_settings.job_name, slot).id]


class Deferrals:
    """A :class:`athena_refresh.permits.Deferral` that records what it was asked to arrange."""

    def __init__(self) -> None:
        self.asked: list[tuple[dict[str, Any], int, str]] = []

    def defer(self, event: Any, *, at_ms: int, key: str) -> str:
        self.asked.append((dict(event), at_ms, key))
        return f"schedule-{len(self.asked)}"


def test_a_backfill_of_a_slot_older_than_the_maximum_age_waits_for_a_permit_instead_of_missing(
    make_lock: Any, make_job: Any, make_engine: Any, semaphore: Semaphore, clock: Any, slot: Slot
) -> None:
    # GIVEN a backfill generation of a slot two days old (the live schedule's maximum age is 30 minutes; it does not
    # apply to a manual run), and the only permit held by a live slot's query
    old_slot = Slot(slot.epoch_s - 2 * 86_400)
    assert semaphore.try_acquire(PermitOwner("other-job", slot), 1, clock.now + 600_000).acquired
    lock = make_lock()
    request = request_generation(
        lock.context, old_slot, run_id="backfill-1", kind="backfill", requested_by="operator", reason="capacity test"
    )
    deferrals = Deferrals()
    engine = make_engine()
    capacity = CapacitySettings(permits=1, semaphore_name=SEMAPHORE, wait_in_place_s=20.0)

    def gate(report: SlotReport) -> CapacityGate:
        return CapacityGate(
            semaphore=semaphore,
            settings=capacity,
            event={"scheduled_time": old_slot.iso},
            report=report,
            max_slot_age_ms=1_800_000,
            deferral=deferrals,
            sleep_s=clock.sleep,
            rng=random.Random(7),
        )

    # WHEN its manual run finds no permit
    runner = SlotRunner(lock.for_generation(request.generation))
    outcome = runner.run(
        make_job(engine, capacity=gate), slot=old_slot, owner_id="req-M", deadline_ms=clock.now + 300_000
    )

    # THEN it waited in place, then gave the generation back to come back later (it used to be finished MISSED
    # "capacity" at once, the slot being older than the live schedule's maximum age)
    assert (outcome.status, outcome.reason) == ("deferred", "capacity")
    assert len(deferrals.asked) == 1 and engine.call_names.count("start_query") == 0
    item = lock.for_generation(request.generation).get_slot(old_slot)
    assert item is not None and item["status"] in ("REQUESTED", "RUNNING")


# --- issue 31: a query started but not recorded; a long query -------------------------------------------
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
    windowed: Semaphore,
    clock: Any,
    slot: Slot,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
) -> None:
    # GIVEN a budget of 1 and a winner whose query starts, but whose start is never recorded on the permit
    engine = make_engine([["RUNNING"] * 3 + ["SUCCEEDED"]])
    semaphore = windowed
    if fault == "start_answer_lost":
        lose_the_start_answer(engine)
    else:
        throttle_the_record(monkeypatch)
    job = make_job(engine, capacity=gate_for(engine, on=semaphore))

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
    outcome = run(make_runner(), make_job(engine, capacity=gate_for(engine, on=semaphore)), "req-1")
    assert outcome.status == "succeeded" and len(engine.queries) == 1
    permits, _ = semaphore.read()
    assert permits[0].free


def test_a_long_query_adds_no_permit_request_per_heartbeat(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    gate_for: Any,
    windowed: Semaphore,
    clock: Any,
    request_log: Any,
) -> None:
    # GIVEN a query that runs about 70 s (several heartbeat intervals)
    engine = make_engine([["RUNNING"] * 20 + ["SUCCEEDED"]])
    start_ms = clock.now

    # WHEN the slot runs with nobody waiting
    outcome = run(make_runner(), make_job(engine, capacity=gate_for(engine, on=windowed)), "req-A")

    # THEN the lease was renewed several times, and the permit's only requests of their own are the take's two
    assert outcome.status == "succeeded" and clock.now - start_ms >= 70_000
    own = [
        name
        for name, body, _at in request_log.calls
        if name in ("UpdateItem", "BatchGetItem", "GetItem")
        and ("permit#" in str(body.get("Key", "")) or "RequestItems" in body)
    ]
    assert own == ["BatchGetItem", "UpdateItem"]
    assert len(lease_renewals(request_log)) >= 2  # at least two heartbeats of the lock item


def test_without_a_budget_the_null_gate_never_waits_and_renews_only_the_lease() -> None:
    # GIVEN the gate of a deployment without a capacity budget, and a run that counts its heartbeats
    class Run:
        heartbeats = 0

        def heartbeat(self) -> bool:
            self.heartbeats += 1
            return True

    gate, run = NoCapacityGate(), Run()
    athena_full = QueryEngineError("StartQueryExecution", "Rate exceeded", error_code="TooManyRequestsException")

    # WHEN the job asks it for a permit, its writes, and a heartbeat
    taken = gate.take(run)  # type: ignore[arg-type]
    gate.adopt(run)  # type: ignore[arg-type]
    gate.heartbeat(run)  # type: ignore[arg-type]

    # THEN no permit and no verdict: the query starts at once; Athena's "no capacity now" is not waited out (the
    # engine error propagates as without a gate), no permit write joins a transaction, and a heartbeat is the lease's
    assert taken is None and gate.permit is None
    assert not gate.waits_out(athena_full)
    assert gate.record_query_writes(run, "q-1", replacing=None) == [] and gate.release_writes() == []  # type: ignore[arg-type]
    assert run.heartbeats == 1
    with pytest.raises(RuntimeError, match="no capacity budget"):
        gate.pause(run, 1.0)  # type: ignore[arg-type]
