"""``slotlock.release``: the operator's release of a lease (live or manual), on both backends.

A release sets the expiry to now and bumps the fencing token, conditioned on the owner and token it read:
the old holder is fenced out, the next acquirer of the slot takes it over and adopts the recorded state.
Racers and the operator are sequenced one request at a time on the fake clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from slotlock import (
    Lease,
    LeaseHeldError,
    LeaseLostError,
    LockChangedError,
    LockConfigurationError,
    Loss,
    Slot,
    SlotLock,
    StaleFencingTokenError,
    release,
    request_generation,
)
from slotlock._dynamodb import LockContext
from slotlock._expressions import SCHEMA_COMPATIBLE

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

LEASE_MS = 30_000  # conftest LEASE_S
PERIOD_S = 1800
OPERATOR = "arn:aws:iam::123456789012:user/op"


def acquired(result: Lease | Loss) -> Lease:
    assert isinstance(result, Lease), f"expected a lease, got {result}"
    return result


def lost(result: Lease | Loss) -> Loss:
    assert isinstance(result, Loss), f"expected a loss, got {result}"
    return result


def test_a_live_lease_is_not_released_without_force(
    lock: SlotLock, slot: Slot, clock: Any, request_log: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN A holds the slot
    lease_a = acquired(lock.try_acquire(slot, "A"))
    lock_item = get_item(lock.lock_key)
    clock.advance(ms=1_000)
    request_log.clear()

    # WHEN the operator releases without force
    with pytest.raises(LeaseHeldError) as info:
        release(lock, reason="stuck?", requested_by=OPERATOR)

    # THEN it is refused after one read, naming the holder; nothing was written
    assert info.value.current.owned_by("A", 1)
    assert "release it" in str(info.value)
    assert request_log.operations == ["GetItem"]
    assert get_item(lock.lock_key) == lock_item
    # AND A carries on undisturbed
    lock.commit(lock.heartbeat(lease_a))


def test_force_release_fences_out_the_holder_and_the_next_racer_takes_over_its_state(
    lock: SlotLock, slot: Slot, clock: Any, table: str, request_log: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN A holds the slot and recorded its query
    lease_a = acquired(lock.try_acquire(slot, "A"))
    lease_a = lock.record_state(lease_a, {"query_execution_id": "qe-1"})
    slot_item = get_item(lock.slot_key(slot))

    # WHEN the operator force-releases it
    clock.advance(ms=2_000)
    released_at = clock.now
    request_log.clear()
    action = release(lock, reason="  the query hangs  ", requested_by=OPERATOR, force=True)

    # THEN one conditional UpdateItem (on the owner and token it read) bumped the token and set the audit
    assert request_log.operations == ["GetItem", "UpdateItem"]
    [update] = request_log.requests("UpdateItem")
    assert update["ConditionExpression"] == f"{SCHEMA_COMPATIBLE} AND #owner = :owner AND #token = :token"
    assert (action.changed, action.dry_run, action.action) == (True, False, "release --force")
    assert action.before is not None and action.before.owned_by("A", 1)
    assert action.after is not None and action.after.fencing_token == 2
    item = get_item(lock.lock_key)
    assert item["fencing_token"] == {"N": "2"}
    assert item["lease_expires_at_ms"] == {"N": str(released_at)}
    assert item["released_by"] == {"S": OPERATOR}
    assert item["released_at_ms"] == {"N": str(released_at)}
    assert item["release_reason"] == {"S": "the query hangs"}
    assert item["released_fencing_token"] == {"N": "1"}
    # (owner and slot stay for the next acquirer; the slot item is untouched)
    assert item["owner_id"] == {"S": "A"} and item["lease_slot_epoch_s"] == {"N": str(slot.epoch_s)}
    assert get_item(lock.slot_key(slot)) == slot_item
    assert not lock.get_lock().locked(clock.now)

    # AND every write of the old holder is refused from then on
    clock.advance(ms=1_000)  # (a heartbeat sends nothing unless it extends the lease)
    with pytest.raises(LeaseLostError) as heartbeat:
        lock.heartbeat(lease_a)
    with pytest.raises(LeaseLostError) as state:
        lock.record_state(lease_a, {"query_execution_id": "qe-A-again"})
    with pytest.raises(StaleFencingTokenError) as commit:
        lock.commit(lease_a, summary={"by": "A"})
    for caught in (heartbeat, state, commit):
        assert caught.value.current is not None and caught.value.current.fencing_token == 2
    assert get_item(lock.slot_key(slot)) == slot_item

    # AND the next racer of the slot takes it over at once, adopting A's query
    lease_b = acquired(lock.try_acquire(slot, "B"))
    assert (lease_b.takeover_from, lease_b.fencing_token) == ("A", 3)
    assert dict(lease_b.state) == {"query_execution_id": "qe-1"}
    receipt = lock.commit(lease_b, summary={"query_execution_id": "qe-1"})
    assert (receipt.outcome, receipt.fencing_token) == ("succeeded", 3)
    assert lock.get_slot(slot)["owner_id"] == "B"


def test_an_expired_lease_is_released_without_force_and_the_zombie_is_fenced_out(
    lock: SlotLock, slot: Slot, clock: Any
) -> None:
    # GIVEN A froze: its lease expired and nobody took it over (A could still renew it)
    lease_a = acquired(lock.try_acquire(slot, "A"))
    clock.advance(ms=LEASE_MS + 5_000)

    # WHEN the operator releases it without force
    action = release(lock, reason="frozen holder", requested_by=OPERATOR)

    # THEN it is released and A, waking up, can neither renew nor commit
    assert action.changed and action.action == "release"
    with pytest.raises(LeaseLostError):
        lock.heartbeat(lease_a)
    with pytest.raises(StaleFencingTokenError):
        lock.commit(lease_a)
    # AND A's own Lambda retry re-enters the slot with a fresh token
    retry = acquired(lock.try_acquire(slot, "A"))
    assert retry.reentered and retry.fencing_token == 3


def test_nothing_to_release_on_a_fresh_table_or_after_a_commit(
    lock: SlotLock, slot: Slot, request_log: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN a fresh table
    request_log.clear()
    fresh = release(lock, reason="check", requested_by=OPERATOR, force=True)
    assert (fresh.changed, fresh.message, fresh.before) == (False, "no lease to release", None)
    assert request_log.operations == ["GetItem"]
    assert get_item(lock.lock_key) is None

    # GIVEN a committed slot (no owner)
    lock.commit(acquired(lock.try_acquire(slot, "A")))
    lock_item = get_item(lock.lock_key)
    done = release(lock, reason="check", requested_by=OPERATOR, force=True)
    assert (done.changed, done.message) == (False, "no lease to release")
    assert get_item(lock.lock_key) == lock_item


def test_a_dry_run_release_reports_and_writes_nothing(
    lock: SlotLock, slot: Slot, clock: Any, request_log: Any, get_item: Callable[[str], Any]
) -> None:
    lease_a = acquired(lock.try_acquire(slot, "A"))
    lock_item = get_item(lock.lock_key)
    request_log.clear()
    plan = release(lock, reason="plan", requested_by=OPERATOR, force=True, dry_run=True)
    assert (plan.changed, plan.dry_run) == (False, True)
    assert plan.message == "would release 'A' and fence out token 1"
    assert plan.after is not None and plan.after.fencing_token == 2 and plan.after.lease_expires_at_ms == clock.now
    assert request_log.operations == ["GetItem"]
    assert get_item(lock.lock_key) == lock_item
    # (a dry run of a live lease without force is refused like the real thing)
    with pytest.raises(LeaseHeldError):
        release(lock, reason="plan", requested_by=OPERATOR, dry_run=True)
    lock.commit(lease_a)


def test_a_lease_that_changed_hands_between_read_and_write_is_not_released(
    lock: SlotLock, slot: Slot, clock: Any, monkeypatch: pytest.MonkeyPatch, get_item: Callable[[str], Any]
) -> None:
    # GIVEN A's lease expired, and B takes the slot over right after the operator's read
    acquired(lock.try_acquire(slot, "A"))
    clock.advance(ms=LEASE_MS + 1)
    read = LockContext.get_lock_item
    taken_over: list[Lease] = []

    def read_then_b_takes_over(ctx: LockContext) -> Any:
        item = read(ctx)
        if not taken_over:
            taken_over.append(acquired(lock.try_acquire(slot, "B")))
        return item

    monkeypatch.setattr(LockContext, "get_lock_item", read_then_b_takes_over)

    # WHEN the operator releases A's (expired) lease
    with pytest.raises(LockChangedError) as info:
        release(lock, reason="frozen holder", requested_by=OPERATOR)
    monkeypatch.undo()

    # THEN nothing was written; the error shows the lock as it is now (B's)
    [lease_b] = taken_over
    assert info.value.current is not None and info.value.current.owned_by("B", 2)
    item = get_item(lock.lock_key)
    assert "released_by" not in item and item["fencing_token"] == {"N": "2"}
    # AND B's lease is intact
    assert lock.commit(lease_b).fencing_token == 2


def test_manual_release_releases_the_manual_lease_only(
    lock: SlotLock, slot: Slot, clock: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN a live holder of the slot, and a manual run of generation 2 of the same slot
    live = acquired(lock.try_acquire(slot, "L"))
    request_generation(lock.context, slot, run_id="op-1", kind="rerun", requested_by=OPERATOR, reason="bad input")
    manual_lock = lock.for_generation(2)
    lease_m = acquired(manual_lock.try_acquire(slot, "M"))
    lease_m = manual_lock.record_state(lease_m, {"query_execution_id": "qe-m"})
    live_item = get_item(lock.lock_key)

    # WHEN the operator releases the manual lease: refused without force, released with it
    with pytest.raises(LeaseHeldError) as info:
        release(lock, reason="stuck re-run", requested_by=OPERATOR, manual=True)
    assert info.value.current.owned_by("M", 1)
    action = release(lock, reason="stuck re-run", requested_by=OPERATOR, manual=True, force=True)

    # THEN the manual lock item is released and audited; the live lock item is untouched
    assert action.changed and action.after is not None and action.after.fencing_token == 2
    manual_item = get_item(manual_lock.lock_key)
    assert manual_item["released_by"] == {"S": OPERATOR}
    assert manual_item["released_fencing_token"] == {"N": "1"}
    assert get_item(lock.lock_key) == live_item
    # AND the manual holder is fenced out, while the live holder is not
    with pytest.raises(StaleFencingTokenError):
        manual_lock.commit(lease_m)
    assert lock.commit(live).fencing_token == 1
    # AND the next manual invocation of generation 2 takes over and adopts the recorded query
    lease_m2 = acquired(manual_lock.try_acquire(slot, "M2"))
    assert (lease_m2.takeover_from, lease_m2.fencing_token, lease_m2.generation) == ("M", 3, 2)
    assert dict(lease_m2.state) == {"query_execution_id": "qe-m"}
    manual_lock.commit(lease_m2)
    assert manual_lock.get_slot(slot)["status"] == "SUCCEEDED"


def test_a_manual_release_without_a_manual_run_has_nothing_to_release(
    lock: SlotLock, slot: Slot, get_item: Callable[[str], Any]
) -> None:
    acquired(lock.try_acquire(slot, "L"))
    action = release(lock, reason="check", requested_by=OPERATOR, manual=True, force=True)
    assert (action.changed, action.message) == (False, "no lease to release")
    assert get_item(lock.for_generation(2).lock_key) is None
    assert lock.get_lock().owned_by("L", 1)


@pytest.mark.parametrize(
    ("reason", "requested_by", "parameter"),
    [
        ("", OPERATOR, "reason"),
        ("   ", OPERATOR, "reason"),
        ("x" * 1001, OPERATOR, "reason"),
        ("ok", "", "requested_by"),
    ],
)
def test_bad_audit_fields_are_refused_before_any_request(
    lock: SlotLock, slot: Slot, request_log: Any, reason: str, requested_by: str, parameter: str
) -> None:
    acquired(lock.try_acquire(slot, "A"))
    request_log.clear()
    with pytest.raises(LockConfigurationError) as info:
        release(lock, reason=reason, requested_by=requested_by, force=True)
    assert info.value.parameter == parameter
    assert request_log.operations == []


def test_a_second_release_changes_nothing_and_keeps_the_first_audit(
    lock: SlotLock, slot: Slot, get_item: Callable[[str], dict[str, Any] | None]
) -> None:
    # GIVEN a live holder released by force by one operator
    holder = acquired(lock.try_acquire(slot, "A"))
    first = release(lock, reason="stuck", requested_by=OPERATOR, force=True)
    assert first.changed and first.after is not None and first.after.fencing_token == holder.fencing_token + 1

    # WHEN another operator releases again before anyone acquired
    second = release(lock, reason="me too", requested_by="arn:aws:iam::123456789012:user/other")

    # THEN nothing is written: no token bumped for a lease nobody held, the first release's audit stays
    assert (second.changed, second.message) == (False, "already released")
    item = get_item(lock.lock_key)
    assert item is not None and int(item["fencing_token"]["N"]) == holder.fencing_token + 1
    assert item["released_by"]["S"] == OPERATOR and item["release_reason"]["S"] == "stuck"
