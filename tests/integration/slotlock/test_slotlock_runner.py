"""SlotRunner / once_per_slot: a Lambda handler that runs its function once per schedule slot."""

from __future__ import annotations

import json
from typing import Any

import pytest

from slotlock import InvalidEventError, Lease, Slot, SlotLock, SlotOutcome, SlotRun, SlotRunner, once_per_slot

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

LEASE_MS = 30_000  # conftest LEASE_S
HEARTBEAT_MS = 10_000  # conftest HEARTBEAT_S
EVENT = {"scheduled_time": "2026-11-22T00:30:00Z"}


def test_winner_runs_once_and_losers_return_lost(lock: SlotLock, slot: Slot, make_context: Any) -> None:
    # GIVEN a decorated handler; the fan-out's other invocations arrive while the winner is running
    calls: list[str] = []
    losers: list[dict[str, Any]] = []

    @once_per_slot(lock)
    def handler(run: SlotRun, event: dict[str, Any], context: Any) -> dict[str, Any]:
        calls.append(context.aws_request_id)
        assert run.lease.slot == slot and event is EVENT
        losers.extend(handler(EVENT, make_context(f"req-{name}")) for name in "BC")
        return {"rows": 3}

    # WHEN the first invocation runs (and B and C race it mid-run)
    winner = handler(EVENT, make_context("req-A"))

    # THEN the function ran once, for the winner, whose returned mapping became the commit summary
    assert calls == ["req-A"]
    assert (winner["status"], winner["fencing_token"], winner["value"], dict(winner["details"])) == (
        "succeeded",
        1,
        {"rows": 3},
        {"rows": 3},
    )
    assert (winner["slot"], winner["owner_id"], winner["takeover"], winner["reentered"]) == (
        slot.iso,
        "req-A",
        False,
        False,
    )
    # AND the losers returned normally with the reason and the holder
    assert [(loser["status"], loser["reason"], loser["owner_id"]) for loser in losers] == [
        ("lost", "held", "req-B"),
        ("lost", "held", "req-C"),
    ]
    for loser in losers:
        assert loser["details"]["holder_owner_id"] == "req-A"
        assert loser["details"]["holder_slot"] == slot.iso
        assert loser["fencing_token"] is None
    # AND the responses (SlotOutcome.as_dict) are JSON-safe, as Lambda's runtime serializes them
    json.dumps([winner, *losers])
    # AND a later duplicate finds the slot finished and does not run
    late = handler(EVENT, make_context("req-D"))
    assert (late["status"], late["reason"], late["details"]["last_finished_slot"]) == (
        "lost",
        "slot_finished",
        slot.iso,
    )
    assert calls == ["req-A"]


def test_function_that_does_not_commit_is_committed_with_its_mapping_as_summary(
    lock: SlotLock, slot: Slot, make_context: Any
) -> None:
    # GIVEN a function that just returns its summary
    handler = once_per_slot(lock)(lambda run, event, context: {"query_execution_id": "qe-1", "rows": 3})

    # WHEN it wins
    outcome = handler(EVENT, make_context("req-A"))

    # THEN the runner committed the slot with that summary, and the lock is released
    assert outcome["status"] == "succeeded"
    item = lock.get_slot(slot)
    assert (item["status"], item["summary"]) == ("SUCCEEDED", {"query_execution_id": "qe-1", "rows": 3})
    assert lock.get_lock().owner_id is None


def test_function_returning_its_run_state_is_committed_with_that_mapping(
    lock: SlotLock, slot: Slot, make_context: Any
) -> None:
    # GIVEN a function that returns run.state (a read-only Mapping, not a dict) as its summary
    def work(run: SlotRun, event: Any, context: Any) -> Any:
        run.record_state(query_execution_id="qe-1")
        return run.state

    # WHEN it wins
    outcome = once_per_slot(lock)(work)(EVENT, make_context("req-A"))

    # THEN the summary is stored as a JSON object (not the mapping's repr), and the outcome is JSON-safe
    assert lock.get_slot(slot)["summary"] == {"query_execution_id": "qe-1"}
    assert json.loads(json.dumps(outcome))["value"] == {"query_execution_id": "qe-1"}


def test_function_returning_a_non_mapping_is_committed_without_summary(
    lock: SlotLock, slot: Slot, make_context: Any
) -> None:
    # GIVEN / WHEN a function returning a plain value
    outcome = once_per_slot(lock)(lambda run, event, context: 42)(EVENT, make_context("req-A"))

    # THEN the value is returned, and the summary is empty
    assert (outcome["status"], outcome["value"], dict(outcome["details"])) == ("succeeded", 42, {})
    assert lock.get_slot(slot)["summary"] == {}


def test_function_that_commits_itself_is_not_committed_twice(
    lock: SlotLock, slot: Slot, table: str, make_context: Any, request_log: Any
) -> None:
    # GIVEN a function that commits its own results write
    def work(run: SlotRun, event: Any, context: Any) -> str:
        put = {
            "Put": {"TableName": table, "Item": {"pk": {"S": "results"}, "token": {"N": str(run.lease.fencing_token)}}}
        }
        run.commit(writes=[put], summary={"rows": 1})
        return "done"

    # WHEN it wins
    outcome = once_per_slot(lock)(work)(EVENT, make_context("req-A"))

    # THEN exactly one transaction was sent after the acquisition, and the outcome carries its summary
    assert request_log.operations == ["UpdateItem", "TransactWriteItems"]
    assert (outcome["status"], outcome["value"], dict(outcome["details"])) == ("succeeded", "done", {"rows": 1})


def test_function_that_fails_for_good_finishes_the_slot_as_failed(
    lock: SlotLock, slot: Slot, make_context: Any
) -> None:
    # GIVEN / WHEN a function that records a permanent failure
    outcome = once_per_slot(lock)(lambda run, event, context: run.fail({"type": "QueryFailed"}))(
        EVENT, make_context("req-A")
    )

    # THEN the slot is FAILED and does not run again
    assert (outcome["status"], dict(outcome["details"])) == ("failed", {"type": "QueryFailed"})
    assert lock.get_slot(slot)["status"] == "FAILED"
    assert (
        once_per_slot(lock)(lambda run, event, context: None)(EVENT, make_context("req-B"))["reason"] == "slot_finished"
    )


def test_exception_releases_the_lease_keeps_state_and_the_retry_reenters(
    lock: SlotLock, slot: Slot, clock: Any, make_context: Any
) -> None:
    # GIVEN a function that starts a query, records it, then fails unexpectedly on the first attempt
    attempts: list[dict[str, Any]] = []

    @once_per_slot(lock)
    def handler(run: SlotRun, event: Any, context: Any) -> dict[str, Any]:
        attempts.append({"state": dict(run.state), "reentered": run.lease.reentered, "token": run.lease.fencing_token})
        if not run.state:
            run.record_state(query_execution_id="qe-1")
            clock.advance(ms=3_000)
            raise RuntimeError("Athena throttled")
        return {"query_execution_id": run.state["query_execution_id"]}

    # WHEN the first invocation runs
    with pytest.raises(RuntimeError, match="Athena throttled"):
        handler(EVENT, make_context("req-A"))

    # THEN the error propagated, and the lease was released (expires now) with owner, token and state kept
    record = lock.get_lock()
    assert record.owned_by("req-A", 1)
    assert record.lease_expires_at_ms == clock.now
    assert lock.get_slot_state(slot) == {"query_execution_id": "qe-1"}

    # WHEN Lambda retries the event (same request id) a minute later
    clock.advance(s=60)
    outcome = handler(EVENT, make_context("req-A"))

    # THEN it re-entered, adopted the query, and committed
    assert attempts[1] == {"state": {"query_execution_id": "qe-1"}, "reentered": True, "token": 2}
    assert (outcome["status"], outcome["reentered"], outcome["adopted_state"], outcome["fencing_token"]) == (
        "succeeded",
        True,
        True,
        2,
    )
    assert lock.get_slot(slot)["summary"] == {"query_execution_id": "qe-1"}


def test_exception_right_after_acquiring_lets_the_retry_reenter_before_the_lease_would_expire(
    lock: SlotLock, clock: Any, make_context: Any
) -> None:
    # GIVEN a first attempt that fails at once
    def work(run: SlotRun, event: Any, context: Any) -> None:
        if run.lease.fencing_token == 1:
            raise ValueError("bad config")

    handler = once_per_slot(lock)(work)
    with pytest.raises(ValueError):
        handler(EVENT, make_context("req-A"))

    # WHEN the retry arrives 1 s later (the lease would have run 29 s more) / THEN it runs at once
    clock.advance(ms=1_000)
    assert handler(EVENT, make_context("req-A"))["status"] == "succeeded"


def test_stale_commit_is_reported_as_stale_rejected_without_raising(
    lock: SlotLock, slot: Slot, clock: Any, table: str, make_context: Any, get_item: Any
) -> None:
    # GIVEN a winner that stalls past its lease while another racer takes over
    def slow(run: SlotRun, event: Any, context: Any) -> dict[str, Any]:
        run.record_state(query_execution_id="qe-1")
        clock.advance(ms=LEASE_MS + 1)
        takeover = lock.try_acquire(slot, "req-B")
        assert isinstance(takeover, Lease) and takeover.takeover_from == "req-A"
        put = {
            "Put": {"TableName": table, "Item": {"pk": {"S": "results"}, "token": {"N": str(run.lease.fencing_token)}}}
        }
        run.commit(writes=[put])
        raise AssertionError("unreachable: the commit is stale")

    # WHEN it returns to the runner
    outcome = once_per_slot(lock)(slow)(EVENT, make_context("req-A"))

    # THEN the outcome says so, names the new holder, and nothing of the commit was written
    assert (outcome["status"], outcome["reason"]) == ("stale_rejected", "fencing_token_superseded")
    assert outcome["details"] == {"holder_owner_id": "req-B", "current_fencing_token": 2}
    assert get_item("results") is None
    assert lock.get_lock().owned_by("req-B", 2)


def test_stale_implicit_commit_is_also_stale_rejected(
    lock: SlotLock, slot: Slot, clock: Any, make_context: Any
) -> None:
    # GIVEN a function that returns after being taken over (the runner commits for it)
    def slow(run: SlotRun, event: Any, context: Any) -> dict[str, Any]:
        clock.advance(ms=LEASE_MS)
        lock.try_acquire(slot, "req-B")
        return {"rows": 3}

    # WHEN / THEN
    assert once_per_slot(lock)(slow)(EVENT, make_context("req-A"))["status"] == "stale_rejected"
    assert lock.get_slot(slot) is None


def test_lease_lost_at_heartbeat_returns_lease_lost(lock: SlotLock, slot: Slot, clock: Any, make_context: Any) -> None:
    # GIVEN a function that was taken over while it looped
    def loop(run: SlotRun, event: Any, context: Any) -> None:
        clock.advance(ms=LEASE_MS)
        lock.try_acquire(slot, "req-B")
        run.heartbeat()
        raise AssertionError("unreachable: the heartbeat must raise")

    # WHEN / THEN it returns normally, and the new holder keeps the lease (nothing was released)
    outcome = once_per_slot(lock)(loop)(EVENT, make_context("req-A"))
    assert (outcome["status"], outcome["reason"], outcome["details"]["holder_owner_id"]) == (
        "lease_lost",
        "heartbeat",
        "req-B",
    )
    assert lock.get_lock().owned_by("req-B", 2) and lock.get_lock().locked(clock.now)


def test_exception_after_a_takeover_propagates_and_does_not_touch_the_new_lease(
    lock: SlotLock, slot: Slot, clock: Any, make_context: Any
) -> None:
    # GIVEN a function that fails after it was taken over
    def work(run: SlotRun, event: Any, context: Any) -> None:
        clock.advance(ms=LEASE_MS)
        lock.try_acquire(slot, "req-B")
        raise KeyError("boom")

    # WHEN / THEN its own error propagates (the failed release is only logged), B's lease is intact
    with pytest.raises(KeyError):
        once_per_slot(lock)(work)(EVENT, make_context("req-A"))
    record = lock.get_lock()
    assert record.owned_by("req-B", 2) and record.lease_expires_at_ms == clock.now + LEASE_MS


def test_listener_sees_checkpoints_in_protocol_order(lock: SlotLock, make_context: Any) -> None:
    # GIVEN a listener
    seen: list[tuple[str, int, dict[str, Any]]] = []

    def listener(checkpoint: str, lease: Lease) -> None:
        seen.append((checkpoint, lease.fencing_token, dict(lease.state)))

    @once_per_slot(lock, listener=listener)
    def handler(run: SlotRun, event: Any, context: Any) -> dict[str, Any]:
        run.record_state(query_execution_id="qe-1")
        run.checkpoint("query_started")
        return {"rows": 3}

    # WHEN the winner runs
    handler(EVENT, make_context("req-A"))

    # THEN the checkpoints arrive in order, each with the lease current at that point
    assert [name for name, _, _ in seen] == [
        "acquired",
        "state_recorded",
        "query_started",
        "before_commit",
        "committed",
    ]
    assert seen[0][2] == {} and seen[1][2] == {"query_execution_id": "qe-1"}
    assert {token for _, token, _ in seen} == {1}


def test_listener_fault_before_commit_releases_and_propagates(
    lock: SlotLock, slot: Slot, clock: Any, make_context: Any
) -> None:
    # GIVEN a fault injected at "before_commit" (a crash just before the commit)
    def listener(checkpoint: str, lease: Lease) -> None:
        if checkpoint == "before_commit":
            raise ConnectionError("injected")

    handler = once_per_slot(lock, listener=listener)(lambda run, event, context: {"rows": 3})

    # WHEN / THEN the fault propagates, nothing was committed, and the lease is released
    with pytest.raises(ConnectionError):
        handler(EVENT, make_context("req-A"))
    assert lock.get_slot(slot) is None
    assert not lock.get_lock().locked(clock.now)


def test_slot_run_heartbeat_is_rate_limited(
    lock: SlotLock, slot: Slot, clock: Any, make_context: Any, request_log: Any
) -> None:
    # GIVEN a function that heartbeats from its work loop
    sent: list[tuple[str, bool, list[str]]] = []

    def loop(run: SlotRun, event: Any, context: Any) -> None:
        def beat(label: str, *, force: bool = False) -> None:
            request_log.clear()
            sent.append((label, run.heartbeat(force=force), request_log.operations[:]))

        beat("at once")
        clock.advance(ms=HEARTBEAT_MS - 1)
        beat("1 ms early")
        clock.advance(ms=1)
        beat("interval passed")
        assert run.lease.expires_at_ms == clock.now + LEASE_MS
        clock.advance(ms=1_000)
        beat("just renewed")
        beat("forced", force=True)
        clock.advance(ms=HEARTBEAT_MS - 1)
        beat("interval counts from the forced renewal")
        run.record_state(query_execution_id="qe-1")
        clock.advance(ms=HEARTBEAT_MS - 1)
        beat("record_state renewed too")
        run.commit()
        clock.advance(ms=HEARTBEAT_MS)
        beat("after commit")

    # WHEN it runs
    once_per_slot(lock)(loop)(EVENT, make_context("req-A"))

    # THEN a renewal is sent only when the interval has passed since the last renewal, or when forced
    assert sent == [
        ("at once", False, []),
        ("1 ms early", False, []),
        ("interval passed", True, ["UpdateItem"]),
        ("just renewed", False, []),
        ("forced", True, ["UpdateItem"]),
        ("interval counts from the forced renewal", False, []),
        ("record_state renewed too", False, []),
        ("after commit", False, []),
    ]


def test_slot_run_heartbeat_capped_by_the_deadline_sends_nothing(
    lock: SlotLock, clock: Any, make_context: Any, request_log: Any
) -> None:
    # GIVEN an invocation with 12 s left (the lease is capped at its deadline)
    results: list[tuple[bool, list[str], int]] = []

    def loop(run: SlotRun, event: Any, context: Any) -> None:
        assert run.lease.expires_at_ms == run.lease.deadline_ms
        assert run.remaining_ms() == 12_000
        clock.advance(ms=HEARTBEAT_MS)
        request_log.clear()
        results.append((run.heartbeat(), request_log.operations[:], run.lease.expires_at_ms))
        request_log.clear()
        results.append((run.heartbeat(force=True), request_log.operations[:], run.lease.expires_at_ms))

    # WHEN the loop heartbeats after an interval, and forced
    context = make_context("req-A", remaining_ms=12_000)
    deadline = clock.now + 12_000
    once_per_slot(lock)(loop)(EVENT, context)

    # THEN nothing is sent, the lease still ends at the deadline, and heartbeat() says it sent nothing
    assert results == [(False, [], deadline), (False, [], deadline)]


def test_context_deadline_caps_the_lease(lock: SlotLock, clock: Any, make_context: Any) -> None:
    # GIVEN an invocation with 20 s left / WHEN it wins / THEN its lease ends at the deadline
    leases: list[Lease] = []
    once_per_slot(lock)(lambda run, event, context: leases.append(run.lease))(
        EVENT, make_context("req-A", remaining_ms=20_000)
    )
    assert leases[0].expires_at_ms == leases[0].deadline_ms == leases[0].acquired_at_ms + 20_000


def test_overrun_loser_that_recorded_the_miss_returns_missed(
    make_lock: Any, slot: Slot, clock: Any, make_context: Any
) -> None:
    # GIVEN slot S still held (2-minute lease) when the next minute's slot fires
    lock = make_lock(lease_duration_s=120, heartbeat_interval_s=30)
    lock.try_acquire(slot, "req-S")
    clock.advance(s=60)
    handler = once_per_slot(lock)(lambda run, event, context: pytest.fail("must not run"))
    event = {"scheduled_time": "2026-11-22T00:31:00Z"}

    # WHEN two racers of the next slot arrive
    first, second = handler(event, make_context("req-1")), handler(event, make_context("req-2"))

    # THEN the one that recorded the miss says "missed", the other "lost"; both give the reason
    assert (first["status"], first["reason"], second["status"], second["reason"]) == (
        "missed",
        "overrun",
        "lost",
        "overrun",
    )
    assert first["details"]["holder_slot"] == slot.iso


@pytest.mark.backends("moto")  # refused before any request
def test_invalid_event_raises_before_any_request(lock: SlotLock, make_context: Any, request_log: Any) -> None:
    # GIVEN a malformed event / WHEN the handler runs / THEN InvalidEventError, and DynamoDB was not called
    handler = once_per_slot(lock)(lambda run, event, context: pytest.fail("must not run"))
    with pytest.raises(InvalidEventError) as caught:
        handler({"scheduled_time": "2026-11-22T00:30:00"}, make_context("req-A"))
    assert caught.value.field == "scheduled_time"
    assert request_log.operations == []


def test_lock_factory_is_called_once_on_first_use(lock: SlotLock, make_context: Any) -> None:
    # GIVEN a handler built with a lock factory (settings and clients are built inside the invocation)
    built: list[SlotLock] = []

    def factory() -> SlotLock:
        built.append(lock)
        return lock

    handler = once_per_slot(factory)(lambda run, event, context: None)
    assert built == []

    # WHEN it is invoked twice / THEN the factory ran once
    handler(EVENT, make_context("req-A"))
    handler(EVENT, make_context("req-B"))
    assert built == [lock]


def test_runner_run_without_lambda_context(lock: SlotLock, slot: Slot) -> None:
    # GIVEN / WHEN the runner is used directly (no deadline)
    outcome = SlotRunner(lock).run(lambda run: {"ok": True}, slot=slot, owner_id="worker-1")

    # THEN it behaves the same, with an unbounded lease
    assert isinstance(outcome, SlotOutcome) and outcome.status == "succeeded"
