"""Every protocol step of SlotLock and the interleavings between racers, sequenced on moto with a fake clock.

moto is not atomic under concurrency: these tests drive racers one request at a time. Mutual exclusion
under real concurrency is the business of the serialized-server / DynamoDB Local tests.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from slotlock import (
    CommitReceipt,
    Lease,
    LeaseLostError,
    LockConfigurationError,
    LockNotAcquiredError,
    Loss,
    Slot,
    SlotLock,
    StaleFencingTokenError,
    TransientLockError,
)

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

LEASE_MS = 30_000  # conftest LEASE_S
PERIOD_S = 1800  # a half-hourly schedule


def results_put(table: str, lease: Lease, rows: str = "[1, 2, 3]") -> dict[str, Any]:
    """A caller's own write, carried by the commit transaction (e.g. the query's results)."""
    return {
        "Put": {
            "TableName": table,
            "Item": {
                "pk": {"S": f"results#{lease.job_name}#{lease.slot.iso}"},
                "fencing_token": {"N": str(lease.fencing_token)},
                "rows": {"S": rows},
            },
        }
    }


def acquired(result: Lease | Loss) -> Lease:
    assert isinstance(result, Lease), f"expected a lease, got {result}"
    return result


def lost(result: Lease | Loss) -> Loss:
    assert isinstance(result, Loss), f"expected a loss, got {result}"
    return result


# ---------------------------------------------------------------------------------------------------
# acquire / lose
# ---------------------------------------------------------------------------------------------------


def test_first_racer_acquires_token_1_in_one_request(
    lock: SlotLock, slot: Slot, clock: Any, request_log: Any, get_item: Any
) -> None:
    # GIVEN a fresh table
    # WHEN racer A tries to acquire the slot
    lease = acquired(lock.try_acquire(slot, "A"))

    # THEN it holds token 1 for a full lease, learned from ALL_NEW without any read
    assert lease.fencing_token == 1
    assert (lease.owner_id, lease.slot, lease.job_name) == ("A", slot, lock.job_name)
    assert lease.acquired_at_ms == clock.now
    assert lease.expires_at_ms == clock.now + LEASE_MS
    assert lease.remaining_ms(clock.now) == LEASE_MS
    assert not lease.takeover and not lease.reentered and lease.superseded_slot is None
    assert dict(lease.state) == {}
    assert request_log.operations == ["UpdateItem"]
    # AND the lock item records the holder
    record = lock.get_lock()
    assert record.owned_by("A", 1) and record.locked(clock.now)
    assert record.lease_slot == slot and record.lease_expires_at_ms == lease.expires_at_ms
    assert record.previous_owner_id is None and record.previous_slot is None
    assert "ttl_epoch_s" not in get_item(lock.lock_key)  # the fencing counter must never expire


def test_loser_learns_held_from_exactly_one_request(lock: SlotLock, slot: Slot, clock: Any, request_log: Any) -> None:
    # GIVEN A holds the slot
    lease_a = acquired(lock.try_acquire(slot, "A"))
    clock.advance(ms=150)
    request_log.clear()

    # WHEN B, another racer of the same fan-out, tries
    loss = lost(lock.try_acquire(slot, "B"))

    # THEN B loses "held" after ONE conditional UpdateItem (ALL_OLD tells it who holds) and no other call
    assert request_log.operations == ["UpdateItem"]
    assert loss.reason == "held"
    assert (loss.owner_id, loss.slot, loss.missed_recorded) == ("B", slot, False)
    assert loss.holder_owner_id == "A"
    assert loss.holder_expires_at_ms == lease_a.expires_at_ms
    assert loss.current is not None and loss.current.fencing_token == 1
    # AND the lock is unchanged: the failed condition wrote nothing
    assert lock.get_lock().owned_by("A", 1)


def test_acquire_raises_lock_not_acquired_with_the_loss(lock: SlotLock, slot: Slot) -> None:
    # GIVEN A holds the slot
    lock.acquire(slot, "A")

    # WHEN B uses the raising variant
    with pytest.raises(LockNotAcquiredError) as caught:
        lock.acquire(slot, "B")

    # THEN the error carries the loss
    assert caught.value.loss.reason == "held"
    assert caught.value.loss.holder_owner_id == "A"


def test_lease_is_held_until_exactly_its_expiry(lock: SlotLock, slot: Slot, clock: Any) -> None:
    # GIVEN A's lease
    lease_a = acquired(lock.try_acquire(slot, "A"))

    # WHEN B tries 1 ms before the expiry, then at the expiry
    clock.now = lease_a.expires_at_ms - 1
    before = lock.try_acquire(slot, "B")
    clock.now = lease_a.expires_at_ms
    at = lock.try_acquire(slot, "B")

    # THEN the lease holds strictly before its expiry and is free at it
    assert lost(before).reason == "held"
    assert acquired(at).fencing_token == 2


# ---------------------------------------------------------------------------------------------------
# takeover and fencing
# ---------------------------------------------------------------------------------------------------


def test_takeover_after_expiry_adopts_state_and_fences_out_the_old_holder(
    lock: SlotLock, slot: Slot, clock: Any, table: str, get_item: Any, request_log: Any
) -> None:
    # GIVEN A acquired, started a query and recorded its execution id, then stalled
    lease_a = acquired(lock.try_acquire(slot, "A"))
    lease_a = lock.record_state(lease_a, {"query_execution_id": "qe-1"})
    assert dict(lease_a.state) == {"query_execution_id": "qe-1"}

    # WHEN A's lease runs out and B arrives
    clock.advance(ms=LEASE_MS + 1)
    request_log.clear()
    lease_b = acquired(lock.try_acquire(slot, "B"))

    # THEN B takes over with the next token and adopts A's query (the acquisition + one slot read)
    assert lease_b.fencing_token == lease_a.fencing_token + 1 == 2
    assert lease_b.takeover and lease_b.takeover_from == "A"
    assert not lease_b.reentered and lease_b.superseded_slot is None
    assert dict(lease_b.state) == {"query_execution_id": "qe-1"}
    assert request_log.operations == ["UpdateItem", "GetItem"]

    lock_before = get_item(lock.lock_key)
    slot_before = get_item(lock.slot_key(slot))
    request_log.clear()

    # AND every write of A is refused, naming the new holder
    with pytest.raises(LeaseLostError) as heartbeat:
        lock.heartbeat(lease_a)
    with pytest.raises(LeaseLostError) as state:
        lock.record_state(lease_a, {"query_execution_id": "qe-A-second"})
    with pytest.raises(LeaseLostError) as release:
        lock.release(lease_a)
    with pytest.raises(StaleFencingTokenError) as commit:
        lock.commit(lease_a, writes=[results_put(table, lease_a)], summary={"rows": 3})
    for caught, operation in (
        (heartbeat, "heartbeat"),
        (state, "record_state"),
        (release, "release"),
        (commit, "commit"),
    ):
        assert caught.value.operation == operation
        assert caught.value.current is not None
        assert caught.value.current.owned_by("B", 2)
        assert caught.value.lease is lease_a
    # (each refusal came from ALL_OLD of the refused write itself: no fallback read)
    assert request_log.operations == ["UpdateItem", "TransactWriteItems", "UpdateItem", "TransactWriteItems"]

    # AND A's commit wrote NOTHING: no results, slot and lock items unchanged (all-or-nothing transaction)
    assert get_item(f"results#{lock.job_name}#{slot.iso}") is None
    assert get_item(lock.slot_key(slot)) == slot_before
    assert get_item(lock.lock_key) == lock_before

    # AND B finishes the slot with its own token
    receipt = lock.commit(lease_b, writes=[results_put(table, lease_b)], summary={"query_execution_id": "qe-1"})
    assert (receipt.fencing_token, receipt.outcome, receipt.already_applied) == (2, "succeeded", False)
    assert get_item(f"results#{lock.job_name}#{slot.iso}")["fencing_token"] == {"N": "2"}


def test_expired_but_not_taken_over_lease_can_still_be_renewed(lock: SlotLock, slot: Slot, clock: Any) -> None:
    # GIVEN A's lease expired but nobody took it over
    lease_a = acquired(lock.try_acquire(slot, "A"))
    clock.advance(ms=LEASE_MS + 5_000)

    # WHEN A heartbeats (the condition is owner AND token, never a clock)
    renewed = lock.heartbeat(lease_a)

    # THEN the lease is A's again for a full lease, same token
    assert renewed.fencing_token == 1
    assert renewed.expires_at_ms == clock.now + LEASE_MS
    assert lost(lock.try_acquire(slot, "B")).reason == "held"


def test_heartbeat_extends_the_lease_and_defers_takeover(lock: SlotLock, slot: Slot, clock: Any) -> None:
    # GIVEN A renews two thirds into its lease
    lease_a = acquired(lock.try_acquire(slot, "A"))
    clock.advance(ms=20_000)
    renewed = lock.heartbeat(lease_a)
    assert renewed.expires_at_ms == clock.now + LEASE_MS
    assert lock.get_lock().lease_expires_at_ms == renewed.expires_at_ms

    # WHEN B arrives after the original expiry but before the renewed one
    clock.now = lease_a.expires_at_ms + 1
    # THEN B still loses
    assert lost(lock.try_acquire(slot, "B")).reason == "held"


def test_tokens_increase_strictly_across_slots_and_takeovers(lock: SlotLock, slot: Slot, clock: Any) -> None:
    # GIVEN a sequence of commits, takeovers and re-entries over three slots
    tokens = []
    for index in range(3):
        current = Slot(slot.epoch_s + index * PERIOD_S)
        clock.now = current.epoch_ms + 1_000
        first = acquired(lock.try_acquire(current, f"A{index}"))
        clock.advance(ms=LEASE_MS)
        second = acquired(lock.try_acquire(current, f"B{index}"))
        third = acquired(lock.try_acquire(current, f"B{index}"))  # B's own retry re-enters
        lock.commit(third)
        tokens += [first.fencing_token, second.fencing_token, third.fencing_token]

    # THEN every acquisition got a fresh, larger token (the counter is never reset by a commit)
    assert tokens == list(range(1, 10))
    assert lock.get_lock().fencing_token == 9


# ---------------------------------------------------------------------------------------------------
# finished, superseded, too old
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("owner", ["A", "C"], ids=["same-request-id", "other-racer"])
def test_late_or_duplicate_delivery_of_a_finished_slot_never_reruns(
    lock: SlotLock, slot: Slot, clock: Any, get_item: Any, request_log: Any, owner: str
) -> None:
    # GIVEN A ran and committed the slot
    lease_a = acquired(lock.try_acquire(slot, "A"))
    lock.commit(lease_a, summary={"rows": 3})
    slot_item = get_item(lock.slot_key(slot))
    assert slot_item["status"] == {"S": "SUCCEEDED"}

    # WHEN a late or duplicate delivery (even long after the lease) arrives, from A's retry or another racer
    clock.advance(s=600)
    request_log.clear()
    loss = lost(lock.try_acquire(slot, owner))

    # THEN it loses "slot_finished" after one request; nothing is written and the token does not move
    assert loss.reason == "slot_finished"
    assert loss.holder_owner_id is None
    assert loss.current is not None and loss.current.last_finished_slot == slot
    assert request_log.operations == ["UpdateItem"]
    assert get_item(lock.slot_key(slot)) == slot_item
    assert lock.get_lock().fencing_token == 1


def test_failed_slot_is_finished_for_good(lock: SlotLock, slot: Slot, get_item: Any) -> None:
    # GIVEN the winner recorded a permanent failure
    lease = acquired(lock.try_acquire(slot, "A"))
    receipt = lock.commit(lease, outcome="failed", error={"type": "QueryFailed"})
    assert receipt.outcome == "failed"
    record = lock.get_lock()
    assert record.last_finished_outcome == "failed" and record.last_succeeded_slot is None

    # WHEN it is delivered again / THEN it does not re-run
    assert lost(lock.try_acquire(slot, "B")).reason == "slot_finished"
    assert lock.get_slot(slot)["status"] == "FAILED"
    assert lock.get_slot(slot)["error"] == {"type": "QueryFailed"}


def test_older_slot_after_a_newer_one_acquired_is_superseded(
    lock: SlotLock, slot: Slot, clock: Any, get_item: Any
) -> None:
    # GIVEN the next slot's winner holds the lease
    newer = Slot(slot.epoch_s + PERIOD_S)
    clock.now = newer.epoch_ms + 1_000
    acquired(lock.try_acquire(newer, "N"))

    # WHEN a delayed delivery of the older slot arrives (even after the newer lease expired)
    held = lost(lock.try_acquire(slot, "O1"))
    clock.advance(ms=LEASE_MS + 1)
    expired = lost(lock.try_acquire(slot, "O2"))

    # THEN it is superseded either way: an older slot never runs after a newer one started
    assert held.reason == expired.reason == "superseded"
    assert lock.get_lock().lease_slot == newer
    # AND the slot ends with one terminal record, MISSED "superseded", written by the first loser only
    assert (held.missed_recorded, expired.missed_recorded) == (True, False)
    record = lock.get_slot(slot)
    assert (record["status"], record["reason"]) == ("MISSED", "superseded")
    assert record["error"]["holder_slot"] == newer.iso


def test_older_slot_after_a_newer_one_finished_is_superseded(lock: SlotLock, slot: Slot, clock: Any) -> None:
    # GIVEN the next slot ran and committed
    newer = Slot(slot.epoch_s + PERIOD_S)
    clock.now = newer.epoch_ms + 1_000
    lock.commit(acquired(lock.try_acquire(newer, "N")))

    # WHEN the older slot is delivered late
    loss = lost(lock.try_acquire(slot, "O"))

    # THEN it is superseded, not "finished", and the slot that will never run is recorded MISSED
    assert loss.reason == "superseded"
    assert loss.current is not None and loss.current.last_finished_slot == newer
    assert loss.missed_recorded
    assert (lock.get_slot(slot)["status"], lock.get_slot(slot)["reason"]) == ("MISSED", "superseded")


def test_too_old_delivery_is_recorded_missed_by_exactly_one_racer(
    make_lock: Any, slot: Slot, clock: Any, request_log: Any, get_item: Any
) -> None:
    # GIVEN a lock that skips deliveries older than 5 minutes, and a fan-out delivered 6 minutes late
    lock = make_lock(max_slot_age_s=300)
    clock.now = slot.epoch_ms + 360_000

    # WHEN four racers try
    losses = [lost(lock.try_acquire(slot, f"R{index}")) for index in range(4)]

    # THEN all lose "too_old" without any acquisition request, and exactly one recorded the slot as missed
    # (each with one transaction: the MISSED record, and the slot added to the lock item's missed slots on
    # condition that it is not acquired right now)
    assert {loss.reason for loss in losses} == {"too_old"}
    assert [loss.missed_recorded for loss in losses] == [True, False, False, False]
    assert all(loss.current is None for loss in losses)
    assert request_log.operations == ["TransactWriteItems"] * 4
    # AND on a fresh table the lock item now exists with fencing token 0 and the slot marked missed (layout 1)
    assert get_item(lock.lock_key) == {
        "pk": {"S": lock.lock_key},
        "fencing_token": {"N": "0"},
        "missed_slots_epoch_s": {"NS": [str(slot.epoch_s)]},
        "schema_version": {"N": "1"},
    }
    record = lock.get_slot(slot)
    assert record["status"] == "MISSED" and record["reason"] == "too_old"
    assert record["error"] == {"age_ms": 360_000, "owner_id": "R0"}
    assert isinstance(record["record_id"], str) and len(record["record_id"]) == 32
    # AND a racer whose clock runs behind (so the slot is not too old for it) can never run it
    clock.now = slot.epoch_ms + 10_000
    request_log.clear()
    late = lost(lock.try_acquire(slot, "R-behind"))
    assert (late.reason, late.missed_recorded, request_log.operations) == ("slot_finished", False, ["UpdateItem"])
    # AND the next slot is acquired normally, with the first token
    clock.now = slot.epoch_ms + 60_000
    nxt = acquired(lock.try_acquire(Slot(slot.epoch_s + 60), "N"))
    assert nxt.fencing_token == 1 and nxt.stale_missed_slots == frozenset({slot})
    lock.commit(nxt)
    assert "missed_slots_epoch_s" not in get_item(lock.lock_key)


def test_too_old_delivery_never_overwrites_a_slot_that_ran(
    make_lock: Any, slot: Slot, clock: Any, get_item: Any
) -> None:
    # GIVEN the slot succeeded promptly
    lock = make_lock(max_slot_age_s=300)
    lock.commit(acquired(lock.try_acquire(slot, "A")))
    slot_item = get_item(lock.slot_key(slot))

    # WHEN a duplicate arrives much later
    clock.advance(s=3600)
    loss = lost(lock.try_acquire(slot, "Z"))

    # THEN it is too old, records nothing, and the SUCCEEDED item stays as it was
    assert (loss.reason, loss.missed_recorded) == ("too_old", False)
    assert get_item(lock.slot_key(slot)) == slot_item


def test_delivery_within_max_slot_age_acquires(make_lock: Any, slot: Slot, clock: Any) -> None:
    # GIVEN a 5-minute misfire window / WHEN a delivery arrives exactly at its edge / THEN it runs
    lock = make_lock(max_slot_age_s=300)
    clock.now = slot.epoch_ms + 300_000
    assert acquired(lock.try_acquire(slot, "A")).fencing_token == 1


# ---------------------------------------------------------------------------------------------------
# re-entry, SDK retries
# ---------------------------------------------------------------------------------------------------


def test_dead_winners_retry_reenters_at_once_and_adopts_its_state(lock: SlotLock, slot: Slot, clock: Any) -> None:
    # GIVEN A acquired, recorded its query, and its invocation died (no release)
    lease_a = acquired(lock.try_acquire(slot, "A"))
    lock.record_state(lease_a, {"query_execution_id": "qe-1"})

    # WHEN Lambda retries the event (same request id) long before the lease expires
    clock.advance(ms=1_000)
    retry = acquired(lock.try_acquire(slot, "A"))

    # THEN it re-enters at once with a new token, flagged, with the recorded state
    assert retry.fencing_token == 2
    assert retry.reentered and not retry.takeover
    assert dict(retry.state) == {"query_execution_id": "qe-1"}
    assert retry.expires_at_ms == clock.now + LEASE_MS
    # AND the dead invocation's lease (token 1) is fenced out
    with pytest.raises(StaleFencingTokenError):
        lock.commit(lease_a)
    # AND other racers still lose to the re-entered lease
    assert lost(lock.try_acquire(slot, "B")).reason == "held"


class LosesTransactResponse:
    """A DynamoDB client whose next TransactWriteItems is APPLIED, then its response is lost."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.armed = False
        self.applied_then_lost = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def transact_write_items(self, **params: Any) -> dict[str, Any]:
        response = self._client.transact_write_items(**params)
        if self.armed:
            self.armed = False
            self.applied_then_lost += 1
            raise EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")
        return response


def test_retry_of_a_commit_whose_response_was_lost_is_a_success(
    make_lock: Any, ddb: Any, slot: Slot, table: str, get_item: Any, backend: str
) -> None:
    # GIVEN a winner whose commit transaction is applied but whose response never arrives, with no retry
    # budget left (one request per call), so the lost answer reaches the caller as a retryable error
    flaky = LosesTransactResponse(ddb)
    lock = make_lock(client=flaky, max_transient_attempts=1)
    lease = acquired(lock.try_acquire(slot, "A"))
    flaky.armed = True
    with pytest.raises(TransientLockError) as lost_response:
        lock.commit(lease, writes=[results_put(table, lease)], summary={"rows": 3})
    assert lost_response.value.operation == "TransactWriteItems" and lost_response.value.retryable
    assert flaky.applied_then_lost == 1

    # WHEN the same commit is sent again with the same lease
    receipt = lock.commit(lease, writes=[results_put(table, lease)], summary={"rows": 3})

    # THEN it is reported as success: on DynamoDB (Local) the identical resend (same fake ``now``, same
    # attempt) carries the same ClientRequestToken and succeeds idempotently; moto ignores that token, so
    # there the resend fails its condition and ALL_OLD shows our own finished commit (``already_applied``)
    assert isinstance(receipt, CommitReceipt)
    assert (receipt.outcome, receipt.fencing_token) == ("succeeded", 1)
    assert receipt.already_applied is (backend == "moto")
    # AND the slot succeeded once, under our token
    record = lock.get_slot(slot)
    assert (record["status"], record["fencing_token"], record["summary"]) == ("SUCCEEDED", 1, {"rows": 3})
    assert lock.get_lock().last_finished_token == 1
    assert get_item(f"results#{lock.job_name}#{slot.iso}")["fencing_token"] == {"N": "1"}


def test_lost_commit_response_is_retried_within_the_budget_and_recognised_as_ours(
    make_lock: Any, ddb: Any, slot: Slot, table: str, get_item: Any
) -> None:
    # GIVEN a winner whose commit transaction is applied but whose answer is lost (connection dropped)
    flaky = LosesTransactResponse(ddb)
    lock = make_lock(client=flaky)
    lease = acquired(lock.try_acquire(slot, "A"))
    flaky.armed = True

    # WHEN it commits (the default budget allows more requests within the lease)
    receipt = lock.commit(lease, writes=[results_put(table, lease)], summary={"rows": 3})

    # THEN the retry (a new attempt, a new token) fails the lock condition and ALL_OLD shows our own
    # applied commit: a success, once, on both backends
    assert flaky.applied_then_lost == 1
    assert (receipt.outcome, receipt.fencing_token, receipt.already_applied) == ("succeeded", 1, True)
    assert lock.get_slot(slot)["status"] == "SUCCEEDED"
    assert get_item(f"results#{lock.job_name}#{slot.iso}")["fencing_token"] == {"N": "1"}


def test_later_resend_of_a_lost_commit_is_a_success_not_an_idempotency_mismatch(
    make_lock: Any, slot: Slot, ddb: Any, clock: Any
) -> None:
    # GIVEN A's commit applied but its response was lost
    flaky = LosesTransactResponse(ddb)
    lock = make_lock(client=flaky, max_transient_attempts=1)
    lease = acquired(lock.try_acquire(slot, "A"))
    flaky.armed = True
    with pytest.raises(TransientLockError):
        lock.commit(lease, summary={"rows": 3})

    # WHEN A resends it a few seconds later, well inside DynamoDB's 10-minute idempotency window (the
    # request now carries another ``now``: reusing the first token would be IdempotentParameterMismatch)
    clock.advance(s=5)
    receipt = lock.commit(lease, summary={"rows": 3})

    # THEN its own applied commit is recognised from ALL_OLD
    assert (receipt.outcome, receipt.fencing_token, receipt.already_applied) == ("succeeded", 1, True)
    assert lock.get_slot(slot)["status"] == "SUCCEEDED"


def test_commit_retry_is_a_success_even_after_the_next_slot_was_acquired(
    make_lock: Any, ddb: Any, slot: Slot, clock: Any
) -> None:
    # GIVEN A's commit applied but its response was lost, and the next slot's winner acquired meanwhile
    flaky = LosesTransactResponse(ddb)
    lock = make_lock(client=flaky, max_transient_attempts=1)
    lease = acquired(lock.try_acquire(slot, "A"))
    flaky.armed = True
    with pytest.raises(TransientLockError):
        lock.commit(lease, summary={"rows": 3})
    newer = Slot(slot.epoch_s + PERIOD_S)
    clock.now = newer.epoch_ms + 1_000
    acquired(lock.try_acquire(newer, "N"))

    # WHEN A resends its commit
    receipt = lock.commit(lease, summary={"rows": 3})

    # THEN it is still recognised as its own applied commit, not as a stale token
    assert receipt.already_applied
    assert lock.get_slot(slot)["status"] == "SUCCEEDED"


def test_commit_retry_is_a_success_even_after_the_next_slot_finished(
    make_lock: Any, ddb: Any, slot: Slot, clock: Any, request_log: Any
) -> None:
    # GIVEN A's commit applied but its response was lost, and the next slot ran and finished meanwhile
    flaky = LosesTransactResponse(ddb)
    lock = make_lock(client=flaky, max_transient_attempts=1)
    lease = acquired(lock.try_acquire(slot, "A"))
    flaky.armed = True
    with pytest.raises(TransientLockError):
        lock.commit(lease, summary={"rows": 3})
    newer = Slot(slot.epoch_s + PERIOD_S)
    clock.now = newer.epoch_ms + 1_000
    lock.commit(acquired(lock.try_acquire(newer, "N")))
    request_log.clear()

    # WHEN A resends its commit (the lock item no longer names A's slot nor token)
    receipt = lock.commit(lease, summary={"rows": 3})

    # THEN A's own slot item, written under A's token, proves the commit applied (one extra read)
    assert receipt.already_applied
    assert request_log.operations == ["TransactWriteItems", "GetItem"]
    assert lock.get_slot(slot)["fencing_token"] == 1


def test_stale_commit_of_an_unfinished_slot_is_rejected_even_when_a_newer_slot_finished(
    lock: SlotLock, slot: Slot, clock: Any
) -> None:
    # GIVEN A's slot was superseded (A never committed) and the newer slot finished
    lease = acquired(lock.try_acquire(slot, "A"))
    lock.record_state(lease, {"query_execution_id": "qe-1"})
    newer = Slot(slot.epoch_s + PERIOD_S)
    clock.now = newer.epoch_ms + 1_000
    lock.commit(acquired(lock.try_acquire(newer, "N")))

    # WHEN A finally commits / THEN it is stale: its slot item is MISSED, not finished under its token
    with pytest.raises(StaleFencingTokenError):
        lock.commit(lease)
    assert lock.get_slot(slot)["status"] == "MISSED"


def test_resent_commit_reports_the_outcome_that_actually_applied(lock: SlotLock, slot: Slot) -> None:
    # GIVEN A committed success (and, say, never saw the response)
    lease = acquired(lock.try_acquire(slot, "A"))
    lock.commit(lease, summary={"rows": 3})

    # WHEN it then tries to finish the same lease as failed
    receipt = lock.commit(lease, outcome="failed", error={"type": "Timeout"})

    # THEN nothing is overwritten and the receipt tells the truth: the slot succeeded, earlier
    assert (receipt.already_applied, receipt.outcome) == (True, "succeeded")
    item = lock.get_slot(slot)
    assert (item["status"], item["summary"], item["error"]) == ("SUCCEEDED", {"rows": 3}, {})


# ---------------------------------------------------------------------------------------------------
# overrun, superseded
# ---------------------------------------------------------------------------------------------------


def test_overrun_next_slots_racers_lose_and_exactly_one_records_missed(
    lock: SlotLock, slot: Slot, clock: Any, request_log: Any
) -> None:
    # GIVEN the holder of slot S is still running (it keeps renewing) when slot S+1 fires
    nxt = Slot(slot.epoch_s + 60)
    lease_s = acquired(lock.try_acquire(slot, "S-holder"))
    clock.now = nxt.epoch_ms + 500
    lease_s = lock.heartbeat(lease_s)
    request_log.clear()

    # WHEN S+1's racers arrive
    losses = [lost(lock.try_acquire(nxt, f"R{index}")) for index in range(3)]

    # THEN all lose "overrun"; exactly one recorded S+1 as missed with one extra conditional transaction
    # (the MISSED record, and S+1 added to the lock item's missed slots on condition that it is not the
    # lock's acquired slot); the others see S+1 among the missed slots and send nothing more
    assert [loss.reason for loss in losses] == ["overrun"] * 3
    assert [loss.missed_recorded for loss in losses] == [True, False, False]
    assert all(loss.holder_owner_id == "S-holder" for loss in losses)
    assert request_log.operations == ["UpdateItem", "TransactWriteItems", "UpdateItem", "UpdateItem"]
    record = lock.get_slot(nxt)
    assert (record["status"], record["reason"]) == ("MISSED", "overrun")
    assert record["error"]["holder_owner_id"] == "S-holder" and record["error"]["holder_slot"] == slot.iso
    assert record["error"]["owner_id"] == "R0"
    # AND the S holder is undisturbed
    assert lock.commit(lease_s).outcome == "succeeded"
    assert lock.get_slot(slot)["status"] == "SUCCEEDED"
    # AND a later delivery of S+1 (a Lambda retry) never runs the MISSED slot
    late = lost(lock.try_acquire(nxt, "R-retry"))
    assert (late.reason, late.missed_recorded) == ("slot_finished", False)
    assert lock.get_slot(nxt)["status"] == "MISSED"


def test_crashed_older_slot_is_superseded_and_recorded_missed_at_the_newer_commit(
    lock: SlotLock, slot: Slot, clock: Any, table: str
) -> None:
    # GIVEN S's holder recorded state then crashed, and was never retried
    zombie = acquired(lock.try_acquire(slot, "S-holder"))
    zombie = lock.record_state(zombie, {"query_execution_id": "qe-S"})

    # WHEN S+1 fires after S's lease expired, and its winner commits
    nxt = Slot(slot.epoch_s + PERIOD_S)
    clock.now = nxt.epoch_ms + 1_000
    lease = acquired(lock.try_acquire(nxt, "N"))
    assert lease.superseded_slot == slot
    assert not lease.takeover and dict(lease.state) == {}  # S's state belongs to S, not adopted
    lock.commit(lease, writes=[results_put(table, lease)])

    # THEN S's item ends MISSED (reason superseded) in the same transaction
    record = lock.get_slot(slot)
    assert (record["status"], record["reason"]) == ("MISSED", "superseded")
    assert record["error"] == {"superseded_by_slot": nxt.iso, "fencing_token": 2}
    assert lock.get_slot(nxt)["status"] == "SUCCEEDED"
    # AND S can neither finish late nor be re-delivered
    with pytest.raises(StaleFencingTokenError):
        lock.commit(zombie)
    assert lost(lock.try_acquire(slot, "S-holder")).reason == "superseded"
    assert lock.get_slot(slot)["status"] == "MISSED"


def test_superseded_slot_is_recorded_missed_even_if_the_newer_winner_reenters(
    lock: SlotLock, slot: Slot, clock: Any
) -> None:
    # GIVEN S's holder crashed after recording state, and S+1's winner replaced it...
    zombie = acquired(lock.try_acquire(slot, "S-holder"))
    lock.record_state(zombie, {"query_execution_id": "qe-S"})
    nxt = Slot(slot.epoch_s + PERIOD_S)
    clock.now = nxt.epoch_ms + 1_000
    first = acquired(lock.try_acquire(nxt, "N"))
    assert first.superseded_slot == slot
    # ...but failed once (released) and its Lambda retry re-entered
    lock.release(first)
    retry = acquired(lock.try_acquire(nxt, "N"))
    assert retry.reentered

    # WHEN the retry commits
    lock.commit(retry)

    # THEN S should end MISSED (superseded)
    assert lock.get_slot(slot)["status"] == "MISSED"


# ---------------------------------------------------------------------------------------------------
# deadline
# ---------------------------------------------------------------------------------------------------


def test_lease_never_extends_past_the_invocation_deadline(
    lock: SlotLock, slot: Slot, clock: Any, request_log: Any
) -> None:
    # GIVEN an invocation with 12 s left, shorter than the 30 s lease
    deadline = clock.now + 12_000
    lease = acquired(lock.try_acquire(slot, "A", deadline_ms=deadline))

    # THEN the lease ends at the deadline
    assert lease.expires_at_ms == deadline
    assert lease.deadline_ms == deadline
    assert lock.get_lock().lease_expires_at_ms == deadline

    # WHEN it heartbeats later
    clock.advance(ms=5_000)
    request_log.clear()
    renewed = lock.heartbeat(lease)

    # THEN nothing is sent (it cannot extend) and the lease is unchanged
    assert renewed.expires_at_ms == deadline
    assert request_log.operations == []
    # AND recording state does not extend past it either
    with_state = lock.record_state(lease, {"query_execution_id": "qe-1"})
    assert with_state.expires_at_ms == deadline
    assert lock.get_lock().lease_expires_at_ms == deadline
    # AND another racer can take over right at the deadline
    clock.now = deadline
    assert acquired(lock.try_acquire(slot, "B")).takeover_from == "A"


def test_heartbeat_caps_a_partial_extension_at_the_deadline(lock: SlotLock, slot: Slot, clock: Any) -> None:
    # GIVEN a lease of 30 s in an invocation with 50 s left
    deadline = clock.now + 50_000
    lease = acquired(lock.try_acquire(slot, "A", deadline_ms=deadline))
    assert lease.expires_at_ms == clock.now + LEASE_MS

    # WHEN it renews 25 s later / THEN the new expiry is the deadline, not now + lease
    clock.advance(ms=25_000)
    assert lock.heartbeat(lease).expires_at_ms == deadline
    assert lock.get_lock().lease_expires_at_ms == deadline


@pytest.mark.backends("moto")  # refused before any request
def test_acquire_without_time_left_is_refused_before_any_request(
    lock: SlotLock, slot: Slot, clock: Any, request_log: Any
) -> None:
    # GIVEN / WHEN an invocation whose deadline has passed / THEN it sends nothing
    with pytest.raises(LockConfigurationError) as caught:
        lock.try_acquire(slot, "A", deadline_ms=clock.now)
    assert caught.value.parameter == "deadline_ms"
    assert request_log.operations == []


# ---------------------------------------------------------------------------------------------------
# release, record_state details
# ---------------------------------------------------------------------------------------------------


def test_release_expires_the_lease_now_and_keeps_owner_token_and_state(lock: SlotLock, slot: Slot, clock: Any) -> None:
    # GIVEN A recorded state
    lease = acquired(lock.try_acquire(slot, "A"))
    lease = lock.record_state(lease, {"query_execution_id": "qe-1"})
    clock.advance(ms=2_000)

    # WHEN A releases without finishing
    lock.release(lease)

    # THEN the lease expires now; owner, token and slot stay, so anyone adopts the state at once
    record = lock.get_lock()
    assert record.lease_expires_at_ms == clock.now
    assert record.owned_by("A", 1) and not record.locked(clock.now)
    assert lock.get_slot(slot)["state"] == {"query_execution_id": "qe-1"}
    lease_b = acquired(lock.try_acquire(slot, "B"))
    assert (lease_b.takeover_from, dict(lease_b.state)) == ("A", {"query_execution_id": "qe-1"})


def test_record_state_merges_changes_and_marks_the_slot_running(lock: SlotLock, slot: Slot, clock: Any) -> None:
    # GIVEN a lease
    lease = acquired(lock.try_acquire(slot, "A"))
    started = clock.now

    # WHEN state is recorded twice
    lease = lock.record_state(lease, {"query_execution_id": "qe-1"})
    clock.advance(ms=4_000)
    lease = lock.record_state(lease, {"pages": 2})

    # THEN changes merge, the slot item is RUNNING under our token, and the lease was renewed
    assert dict(lease.state) == {"query_execution_id": "qe-1", "pages": 2}
    record = lock.get_slot(slot)
    assert record["status"] == "RUNNING"
    assert (record["fencing_token"], record["owner_id"]) == (1, "A")
    assert record["state"] == {"query_execution_id": "qe-1", "pages": 2}
    assert record["started_at_ms"] == started
    assert lease.expires_at_ms == clock.now + LEASE_MS == lock.get_lock().lease_expires_at_ms


def test_commit_releases_the_lock_and_records_history(lock: SlotLock, slot: Slot, clock: Any) -> None:
    # GIVEN a lease with state
    lease = acquired(lock.try_acquire(slot, "A"))
    lease = lock.record_state(lease, {"query_execution_id": "qe-1"})
    clock.advance(ms=7_000)

    # WHEN it commits
    receipt = lock.commit(lease, summary={"rows": 3})

    # THEN the lock has no holder and remembers the finished slot; the slot item holds the outcome
    assert receipt == CommitReceipt(lock.job_name, slot, 1, "succeeded", clock.now)
    record = lock.get_lock()
    assert record.owner_id is None and record.lease_expires_at_ms is None
    assert (record.last_finished_slot, record.last_finished_token, record.last_finished_outcome) == (
        slot,
        1,
        "succeeded",
    )
    assert (record.last_succeeded_slot, record.last_succeeded_at_ms) == (slot, clock.now)
    item = lock.get_slot(slot)
    assert (item["status"], item["summary"], item["finished_at_ms"]) == ("SUCCEEDED", {"rows": 3}, clock.now)
    assert item["ttl_epoch_s"] == clock.now // 1000 + lock.history_ttl_s
    # AND the next slot acquires without any "superseded" bookkeeping
    nxt = Slot(slot.epoch_s + PERIOD_S)
    clock.now = nxt.epoch_ms
    nxt_lease = acquired(lock.try_acquire(nxt, "B"))
    assert nxt_lease.superseded_slot is None and not nxt_lease.takeover and nxt_lease.fencing_token == 2
