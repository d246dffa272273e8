"""``slotlock.pause`` / ``slotlock.resume``: the operator's pause of the live schedule, on both backends.

A paused job refuses every slot at or before ``paused_through_slot_epoch_s`` (far ahead while paused, the
resume minute after a resume) except the slot already acquired, which may finish. Racers are sequenced one
request at a time on the fake clock, as in ``test_slotlock_protocol.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from slotlock import (
    Lease,
    LockConfigurationError,
    LockRecord,
    Loss,
    OperatorAction,
    Slot,
    SlotLock,
    pause,
    resume,
)
from slotlock._decisions import classify_loss
from slotlock._expressions import SCHEMA_COMPATIBLE, SLOT_CREATE_CONDITION, SLOT_NOT_PAUSED
from slotlock.slot import MAX_EPOCH_S

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

LEASE_MS = 30_000  # conftest LEASE_S
PERIOD_S = 1800  # a half-hourly schedule
OPERATOR = "arn:aws:iam::123456789012:user/op"
OTHER_OPERATOR = "arn:aws:iam::123456789012:user/other-op"


def acquired(result: Lease | Loss) -> Lease:
    assert isinstance(result, Lease), f"expected a lease, got {result}"
    return result


def lost(result: Lease | Loss) -> Loss:
    assert isinstance(result, Loss), f"expected a loss, got {result}"
    return result


def paused_by(lock: SlotLock, reason: str = "maintenance window") -> OperatorAction:
    action = pause(lock, reason=reason, requested_by=OPERATOR)
    assert action.changed
    return action


# ---------------------------------------------------------------------------------------------------
# racers of a paused slot
# ---------------------------------------------------------------------------------------------------


def test_racers_of_a_paused_slot_lose_paused_and_exactly_one_records_it_missed(
    lock: SlotLock, slot: Slot, clock: Any, request_log: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN an operator paused the job on a fresh table
    paused_by(lock)
    lock_item = get_item(lock.lock_key)

    # WHEN the slot's fan-out of four racers arrives, one request at a time
    losses, operations = [], []
    for index in range(4):
        clock.advance(ms=100)
        request_log.clear()
        losses.append(lost(lock.try_acquire(slot, f"R{index}")))
        operations.append(request_log.operations)

    # THEN every racer lost "paused" after one UpdateItem and one conditional PutItem of the slot item
    assert {loss.reason for loss in losses} == {"paused"}
    assert operations == [["UpdateItem", "PutItem"]] * 4
    # AND exactly one of them (the first) wrote the MISSED record
    assert [loss.missed_recorded for loss in losses] == [True, False, False, False]
    for loss in losses:
        assert loss.current is not None and loss.current.paused
        assert loss.current.paused_through_slot == Slot(MAX_EPOCH_S)
    record = lock.get_slot(slot)
    assert (record["status"], record["reason"], record["generation"]) == ("MISSED", "paused", 1)
    assert record["error"] == {
        "owner_id": "R0",
        "paused_through_slot": Slot(MAX_EPOCH_S).iso,
        "fencing_token": 0,
    }
    # AND the acquisition asked for the pause in its condition; no racer moved the lock item
    assert SLOT_NOT_PAUSED in request_log.requests("UpdateItem")[0]["ConditionExpression"]
    assert get_item(lock.lock_key) == lock_item
    # AND each later racer's PutItem failed on the absent-item condition (the record is final); the record
    # carries the table layout, and its condition checks it (schema_version, docs/protocol.md)
    [put] = request_log.requests("PutItem")
    assert put["ConditionExpression"] == SLOT_CREATE_CONDITION == f"{SCHEMA_COMPATIBLE} AND attribute_not_exists(#pk)"
    assert put["Item"]["schema_version"] == {"N": "1"}


def test_the_slot_acquired_before_the_pause_may_be_reentered_taken_over_and_committed(
    lock: SlotLock, slot: Slot, clock: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN A holds the slot and recorded its query when the operator pauses the job
    lease_a = acquired(lock.try_acquire(slot, "A"))
    lease_a = lock.record_state(lease_a, {"query_execution_id": "qe-1"})
    clock.advance(ms=500)
    paused_by(lock)

    # WHEN A carries on: heartbeat and state are accepted
    clock.advance(ms=1_000)
    lease_a = lock.heartbeat(lease_a)
    lease_a = lock.record_state(lease_a, {"rows": 3})
    # AND another racer of the same slot loses "held", not "paused"
    assert lost(lock.try_acquire(slot, "B")).reason == "held"
    # AND A's own Lambda retry re-enters the slot
    reentry = acquired(lock.try_acquire(slot, "A"))
    assert reentry.reentered and reentry.fencing_token == 2
    assert dict(reentry.state) == {"query_execution_id": "qe-1", "rows": 3}

    # WHEN A's retry stalls and its lease expires: B takes the slot over, adopting the recorded state
    clock.advance(ms=LEASE_MS + 1)
    lease_b = acquired(lock.try_acquire(slot, "B"))
    assert lease_b.takeover_from == "A" and lease_b.fencing_token == 3
    assert dict(lease_b.state) == {"query_execution_id": "qe-1", "rows": 3}

    # THEN B commits the slot while the job is still paused
    receipt = lock.commit(lease_b, summary={"rows": 3})
    assert (receipt.outcome, receipt.fencing_token) == ("succeeded", 3)
    assert lock.get_slot(slot)["status"] == "SUCCEEDED"
    record = lock.get_lock()
    assert record.paused and record.last_finished_slot == slot and record.owner_id is None
    # AND the next slot is paused (recorded MISSED "paused"), and the finished one stays finished
    nxt = Slot(slot.epoch_s + PERIOD_S)
    clock.now = nxt.epoch_ms + 1_000
    loss = lost(lock.try_acquire(nxt, "N"))
    assert (loss.reason, loss.missed_recorded) == ("paused", True)
    assert lost(lock.try_acquire(slot, "late")).reason == "slot_finished"


def test_after_resume_a_paused_slot_stays_paused_and_the_slot_after_the_resume_minute_runs(
    lock: SlotLock, slot: Slot, clock: Any, request_log: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN the job was paused and the slot's racer recorded it MISSED "paused"
    paused_by(lock)
    assert lost(lock.try_acquire(slot, "R0")).missed_recorded
    slot_item = get_item(lock.slot_key(slot))

    # WHEN the operator resumes 30 s into the next minute
    resume_minute = Slot(slot.epoch_s + 60)
    clock.now = resume_minute.epoch_ms + 30_000
    action = resume(lock, requested_by=OTHER_OPERATOR)

    # THEN the slots up to the resume minute stay paused
    assert action.changed and action.after is not None
    assert not action.after.paused and action.after.paused_through_slot == resume_minute
    # AND a late delivery of the paused slot still loses "paused" (one UpdateItem, one PutItem that fails)
    request_log.clear()
    late = lost(lock.try_acquire(slot, "R-late"))
    assert (late.reason, late.missed_recorded) == ("paused", False)
    assert request_log.operations == ["UpdateItem", "PutItem"]
    assert get_item(lock.slot_key(slot)) == slot_item
    # AND so does the slot of the resume minute itself (never delivered while paused)
    assert lost(lock.try_acquire(resume_minute, "M")).reason == "paused"
    # AND the next slot after the resume minute is acquired as usual (token 1: the pause created token 0)
    nxt = Slot(resume_minute.epoch_s + 60)
    clock.now = nxt.epoch_ms + 1_000
    lease = acquired(lock.try_acquire(nxt, "N"))
    assert lease.fencing_token == 1
    lock.commit(lease)
    assert lock.get_slot(nxt)["status"] == "SUCCEEDED"
    # AND once a newer slot ran, the paused slot is superseded (its record stays MISSED "paused")
    superseded = lost(lock.try_acquire(slot, "R-later"))
    assert (superseded.reason, superseded.missed_recorded) == ("superseded", False)
    assert get_item(lock.slot_key(slot)) == slot_item


def test_a_paused_slot_delivered_first_after_the_resume_is_still_recorded_missed(
    lock: SlotLock, slot: Slot, clock: Any
) -> None:
    # GIVEN a pause and a resume a minute later, and no delivery of the slot in between
    paused_by(lock)
    clock.advance(s=60)
    assert resume(lock, requested_by=OPERATOR).changed

    # WHEN the slot's (late) delivery arrives after the resume
    loss = lost(lock.try_acquire(slot, "late"))

    # THEN it loses "paused" and records the slot MISSED (the first racer to see it does)
    assert (loss.reason, loss.missed_recorded) == ("paused", True)
    assert (lock.get_slot(slot)["status"], lock.get_slot(slot)["reason"]) == ("MISSED", "paused")


# ---------------------------------------------------------------------------------------------------
# the operator's actions: idempotence, dry run, audit, validation
# ---------------------------------------------------------------------------------------------------


def test_pause_and_resume_are_idempotent(
    lock: SlotLock, clock: Any, request_log: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN a fresh table: resuming what was never paused changes nothing and writes nothing
    request_log.clear()
    nothing = resume(lock, requested_by=OPERATOR)
    assert (nothing.changed, nothing.message, nothing.before) == (False, "not paused", None)
    assert request_log.operations == ["GetItem"]
    assert get_item(lock.lock_key) is None

    # WHEN the job is paused twice, by two operators
    first = pause(lock, reason="first", requested_by=OPERATOR)
    clock.advance(s=5)
    paused_item = get_item(lock.lock_key)
    request_log.clear()
    second = pause(lock, reason="second", requested_by=OTHER_OPERATOR)

    # THEN only the first wrote; the second read and kept the first's audit
    assert (first.changed, first.message) == (True, "paused the live schedule")
    assert (second.changed, second.message) == (False, "already paused")
    assert request_log.operations == ["GetItem"]
    assert get_item(lock.lock_key) == paused_item
    assert paused_item["paused_by"] == {"S": OPERATOR} and paused_item["pause_reason"] == {"S": "first"}

    # WHEN it is resumed twice
    resumed = resume(lock, requested_by=OPERATOR)
    resumed_item = get_item(lock.lock_key)
    request_log.clear()
    again = resume(lock, requested_by=OTHER_OPERATOR)

    # THEN only the first resume wrote
    assert resumed.changed and not again.changed and again.message == "not paused"
    assert request_log.operations == ["GetItem"]
    assert get_item(lock.lock_key) == resumed_item


def test_dry_runs_write_nothing(
    lock: SlotLock, slot: Slot, clock: Any, request_log: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN a holder on the slot (the lock item exists)
    acquired(lock.try_acquire(slot, "A"))
    lock_item = get_item(lock.lock_key)
    request_log.clear()

    # WHEN a pause is planned
    plan = pause(lock, reason="maintenance", requested_by=OPERATOR, dry_run=True)

    # THEN it reports what it would do, after one read, and wrote nothing
    assert (plan.changed, plan.dry_run, plan.message) == (False, True, "would pause the live schedule")
    assert plan.before is not None and not plan.before.paused
    assert plan.after is not None and plan.after.paused and plan.after.paused_through_slot == Slot(MAX_EPOCH_S)
    assert plan.after.owner_id == "A"
    assert request_log.operations == ["GetItem"]
    assert get_item(lock.lock_key) == lock_item

    # WHEN paused for real, then a resume is planned
    pause(lock, reason="maintenance", requested_by=OPERATOR)
    paused_item = get_item(lock.lock_key)
    clock.advance(s=90)
    request_log.clear()
    plan = resume(lock, requested_by=OPERATOR, dry_run=True)

    # THEN it names the resume minute and wrote nothing
    resume_minute = Slot(clock.now // 1000)
    assert (plan.changed, plan.dry_run) == (False, True)
    assert plan.message == f"would resume after {resume_minute.iso}"
    assert plan.after is not None and not plan.after.paused and plan.after.paused_through_slot == resume_minute
    assert request_log.operations == ["GetItem"]
    assert get_item(lock.lock_key) == paused_item


@pytest.mark.backends("moto")  # plain reads
def test_a_dry_run_on_a_fresh_table_creates_no_lock_item(lock: SlotLock, get_item: Callable[[str], Any]) -> None:
    plan = pause(lock, reason="maintenance", requested_by=OPERATOR, dry_run=True)
    assert plan.before is None and plan.after is not None and plan.after.paused
    assert get_item(lock.lock_key) is None


def test_pause_and_resume_are_audited_on_the_lock_item(
    lock: SlotLock, slot: Slot, clock: Any, request_log: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN a job that ran a slot (token 1)
    lock.commit(acquired(lock.try_acquire(slot, "A")))
    before = get_item(lock.lock_key)

    # WHEN an operator pauses it with a padded reason
    clock.advance(s=10)
    paused_at = clock.now
    request_log.clear()
    action = pause(lock, reason="  upstream data is late  ", requested_by=OPERATOR)

    # THEN one GetItem and one conditional UpdateItem set the flag and the audit; the rest is kept
    assert request_log.operations == ["GetItem", "UpdateItem"]
    [update] = request_log.requests("UpdateItem")
    assert (
        update["ConditionExpression"] == f"{SCHEMA_COMPATIBLE} AND (attribute_not_exists(#paused) OR #paused = :false)"
    )
    item = get_item(lock.lock_key)
    assert item["paused"] == {"BOOL": True}
    assert item["paused_through_slot_epoch_s"] == {"N": str(MAX_EPOCH_S)}
    assert item["pause_reason"] == {"S": "upstream data is late"}
    assert item["paused_by"] == {"S": OPERATOR}
    assert item["paused_at_ms"] == {"N": str(paused_at)}
    assert {name: value for name, value in item.items() if not name.startswith(("paused", "pause_"))} == before
    assert item["schema_version"] == {"N": "1"}  # (already there: the acquisition wrote it)
    assert action.after is not None and action.after.paused and action.after.fencing_token == 1
    assert action.before is not None and not action.before.paused

    # WHEN another operator resumes it
    clock.advance(s=10)
    resumed_at = clock.now
    action = resume(lock, requested_by=OTHER_OPERATOR)

    # THEN the flag is cleared, the resume minute kept, the resume audited (the pause's audit stays)
    item = get_item(lock.lock_key)
    assert item["paused"] == {"BOOL": False}
    assert item["paused_through_slot_epoch_s"] == {"N": str(Slot(resumed_at // 1000).epoch_s)}
    assert item["resumed_by"] == {"S": OTHER_OPERATOR}
    assert item["resumed_at_ms"] == {"N": str(resumed_at)}
    assert item["paused_by"] == {"S": OPERATOR} and item["pause_reason"] == {"S": "upstream data is late"}
    assert item["fencing_token"] == {"N": "1"}
    record = lock.get_lock()
    assert not record.paused and record.paused_through_slot == Slot(resumed_at // 1000)


def test_pause_on_a_fresh_table_creates_the_lock_item_with_token_0(
    lock: SlotLock, clock: Any, get_item: Callable[[str], Any]
) -> None:
    pause(lock, reason="before the first run", requested_by=OPERATOR)
    item = get_item(lock.lock_key)
    assert item["fencing_token"] == {"N": "0"}
    assert item["job"] == {"S": lock.job_name}
    assert "ttl_epoch_s" not in item
    assert lock.get_lock() == LockRecord(paused=True, paused_through_slot=Slot(MAX_EPOCH_S))


@pytest.mark.parametrize("reason", ["", "   ", "x" * 1001, None, 42], ids=["empty", "blank", "long", "none", "int"])
def test_a_bad_pause_reason_is_refused_before_any_request(lock: SlotLock, request_log: Any, reason: Any) -> None:
    request_log.clear()
    with pytest.raises(LockConfigurationError) as info:
        pause(lock, reason=reason, requested_by=OPERATOR)
    assert info.value.parameter == "reason"
    assert request_log.operations == []


@pytest.mark.backends("moto")  # refused before any request
@pytest.mark.parametrize("requested_by", ["", "  ", "a" * 2049, None])
def test_a_bad_identity_is_refused_before_any_request(lock: SlotLock, request_log: Any, requested_by: Any) -> None:
    request_log.clear()
    with pytest.raises(LockConfigurationError) as pausing:
        pause(lock, reason="maintenance", requested_by=requested_by)
    with pytest.raises(LockConfigurationError) as resuming:
        resume(lock, requested_by=requested_by)
    assert pausing.value.parameter == resuming.value.parameter == "requested_by"
    assert request_log.operations == []


def test_a_reason_of_exactly_the_limit_is_accepted(lock: SlotLock, get_item: Callable[[str], Any]) -> None:
    assert pause(lock, reason="x" * 1000, requested_by=OPERATOR).changed
    assert get_item(lock.lock_key)["pause_reason"] == {"S": "x" * 1000}


# ---------------------------------------------------------------------------------------------------
# the decision (no I/O)
# ---------------------------------------------------------------------------------------------------

SLOT = Slot(1_790_000_000)


@pytest.mark.parametrize(
    ("record", "pauses"),
    [
        (LockRecord(), False),
        (LockRecord(paused=True, paused_through_slot=Slot(MAX_EPOCH_S)), True),
        (LockRecord(paused_through_slot=SLOT), True),  # resumed in the slot's own minute
        (LockRecord(paused_through_slot=Slot(SLOT.epoch_s - 60)), False),  # resumed before the slot
        (LockRecord(paused=True, paused_through_slot=Slot(MAX_EPOCH_S), lease_slot=SLOT), False),  # acquired
    ],
    ids=["never-paused", "paused", "through-the-slot", "through-before", "already-acquired"],
)
def test_pauses_refuses_slots_up_to_the_paused_through_slot_but_the_acquired_one(
    record: LockRecord, pauses: bool
) -> None:
    assert record.pauses(SLOT) is pauses


def test_classify_loss_orders_paused_after_finished_and_superseded_and_before_held() -> None:
    paused = LockRecord(paused=True, paused_through_slot=Slot(MAX_EPOCH_S), fencing_token=3)
    now = SLOT.epoch_ms
    assert classify_loss(paused, SLOT, "R", now) == "paused"
    assert classify_loss(replace(paused, last_finished_slot=SLOT), SLOT, "R", now) == "slot_finished"
    assert classify_loss(replace(paused, lease_slot=Slot(SLOT.epoch_s + 60)), SLOT, "R", now) == "superseded"
    # an older slot's live holder: the pause, not the overrun, is why this slot does not run
    older = replace(paused, owner_id="O", lease_slot=Slot(SLOT.epoch_s - 60), lease_expires_at_ms=now + 1_000)
    assert classify_loss(older, SLOT, "R", now) == "paused"
    # the acquired slot's live holder: held (the pause spares it)
    holder = replace(paused, owner_id="O", lease_slot=SLOT, lease_expires_at_ms=now + 1)
    assert classify_loss(holder, SLOT, "R", now) == "held"
