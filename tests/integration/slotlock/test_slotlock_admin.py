"""``slotlock.bump_fencing_token``: the fence bump after a point-in-time restore, on both backends.

A restore is simulated by writing an older copy of the lock item back (what PITR does to the table).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from slotlock import (
    CorruptLockItemError,
    FenceBump,
    LeaseHeldError,
    LockConfigurationError,
    Slot,
    SlotLock,
    bump_fencing_token,
)
from slotlock._expressions import SCHEMA_COMPATIBLE

pytestmark = pytest.mark.backends("moto", "dynamodb-local")


def run_slot(lock: SlotLock, slot: Slot, owner: str) -> int:
    """Acquire and commit ``slot``; returns its token."""
    lease = lock.acquire(slot, owner)
    lock.commit(lease, summary={"owner": owner})
    return lease.fencing_token


def test_bump_raises_the_counter_and_the_next_lease_gets_a_higher_token(
    lock: SlotLock, slot: Slot, clock: Any, get_item: Callable[[str], Any], ddb: Any, table: str
) -> None:
    # GIVEN a job that ran three slots (tokens 1..3); a snapshot of its lock item after the first one
    run_slot(lock, slot, "req-1")
    snapshot = get_item(lock.lock_key)
    for i in (1, 2):
        clock.advance(s=1800)
        run_slot(lock, Slot(slot.epoch_s + 1800 * i), f"req-{i + 1}")
    # WHEN the table is restored to that snapshot (the counter is back to 1)
    ddb.put_item(TableName=table, Item=snapshot)
    assert lock.get_lock().fencing_token == 1

    # AND the operator bumps the counter to at least 3 + 100
    bump = bump_fencing_token(lock, 103)

    # THEN the counter is 103 (read back), and the next acquisition gets 104
    assert bump == FenceBump(lock.job_name, before=1, after=103, target=103, bumped=True)
    assert lock.get_lock().fencing_token == 103
    clock.advance(s=1800)
    lease = lock.acquire(Slot(slot.epoch_s + 1800 * 3), "req-4")
    assert lease.fencing_token == 104 == bump.next_token
    # AND the bump kept the rest of the item (the finished slot, the last success)
    record = lock.get_lock()
    assert record.last_finished_slot == slot and record.last_succeeded_at_ms is not None


def test_bump_is_idempotent_and_never_lowers_the_counter(
    lock: SlotLock, slot: Slot, clock: Any, request_log: Any
) -> None:
    # GIVEN a counter at 5
    for i in range(5):
        clock.advance(s=1800)
        run_slot(lock, Slot(slot.epoch_s + 1800 * i), f"req-{i}")

    # WHEN bumping to 3 (below), to 5 (equal), then twice to 50
    below, equal = bump_fencing_token(lock, 3), bump_fencing_token(lock, 5)
    request_log.clear()
    first, second = bump_fencing_token(lock, 50), bump_fencing_token(lock, 50)

    # THEN only the first bump to 50 wrote; the counter never went down
    assert (below.bumped, below.before, below.after) == (False, 5, 5)
    assert (equal.bumped, equal.after) == (False, 5)
    assert (first.bumped, first.before, first.after) == (True, 5, 50)
    assert (second.bumped, second.before, second.after) == (False, 50, 50)
    assert request_log.operations == ["GetItem", "UpdateItem", "GetItem"]
    assert lock.get_lock().fencing_token == 50


def test_bump_sends_one_conditional_update_that_only_raises(lock: SlotLock, slot: Slot, request_log: Any) -> None:
    run_slot(lock, slot, "req-1")
    request_log.clear()
    bump_fencing_token(lock, 10)
    [update] = request_log.requests("UpdateItem")
    assert (
        update["ConditionExpression"] == f"{SCHEMA_COMPATIBLE} AND (attribute_not_exists(#token) OR #token < :target)"
    )
    assert update["UpdateExpression"] == (
        "SET #token = :target, #job = if_not_exists(#job, :job), #schema_version = :schema_version"
    )
    assert update["ExpressionAttributeValues"][":target"] == {"N": "10"}


def test_a_concurrent_raise_between_read_and_write_is_not_undone(
    lock: SlotLock, slot: Slot, make_lock: Callable[..., SlotLock], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the counter at 1, and another operator's bump to 500 landing right after our read
    run_slot(lock, slot, "req-1")
    other = make_lock()
    read = lock.get_lock_item

    def read_then_other_bumps() -> Any:
        item = read()
        bump_fencing_token(other, 500)
        return item

    monkeypatch.setattr(lock, "get_lock_item", read_then_other_bumps)

    # WHEN our bump to 100 is sent
    bump = bump_fencing_token(lock, 100)

    # THEN its condition failed, it reports the current counter and left 500 in place
    assert (bump.bumped, bump.before, bump.after) == (False, 1, 500)
    monkeypatch.undo()
    assert lock.get_lock().fencing_token == 500


def test_dry_run_reports_and_writes_nothing(lock: SlotLock, slot: Slot, request_log: Any) -> None:
    run_slot(lock, slot, "req-1")
    request_log.clear()
    bump = bump_fencing_token(lock, 40, dry_run=True)
    assert (bump.before, bump.after, bump.bumped, bump.dry_run) == (1, 40, False, True)
    assert request_log.operations == ["GetItem"]
    assert lock.get_lock().fencing_token == 1


def test_a_missing_lock_item_is_created_with_the_counter(lock: SlotLock, slot: Slot, get_item: Any) -> None:
    # GIVEN a restore into a table without the job's lock item
    bump = bump_fencing_token(lock, 77)
    assert (bump.before, bump.after, bump.bumped) == (None, 77, True)
    assert get_item(lock.lock_key) == {
        "pk": {"S": lock.lock_key},
        "job": {"S": lock.job_name},
        "fencing_token": {"N": "77"},
        "schema_version": {"N": "1"},
    }
    # THEN the first acquisition gets 78
    assert lock.acquire(slot, "req-1").fencing_token == 78


def test_a_lock_item_that_lost_its_counter_gets_it_back(
    lock: SlotLock, slot: Slot, clock: Any, ddb: Any, table: str
) -> None:
    # GIVEN a lock item whose fencing_token attribute was deleted by hand (acquisitions refuse it)
    run_slot(lock, slot, "req-1")
    ddb.update_item(TableName=table, Key={"pk": {"S": lock.lock_key}}, UpdateExpression="REMOVE fencing_token")

    bump = bump_fencing_token(lock, 1001)

    assert (bump.before, bump.after, bump.bumped) == (None, 1001, True)
    clock.advance(s=1800)
    assert lock.acquire(Slot(slot.epoch_s + 1800), "req-2").fencing_token == 1002


def test_a_live_lease_is_not_bumped_unless_forced(lock: SlotLock, slot: Slot, clock: Any) -> None:
    # GIVEN a holder mid-run
    lease = lock.acquire(slot, "req-1")

    # WHEN bumping without force: refused, nothing written
    with pytest.raises(LeaseHeldError) as info:
        bump_fencing_token(lock, 10)
    assert info.value.current.owner_id == "req-1"
    assert lock.get_lock().fencing_token == 1

    # WHEN forced: the holder is fenced out (its commit is rejected as stale)
    assert bump_fencing_token(lock, 10, force=True).bumped
    from slotlock import StaleFencingTokenError

    with pytest.raises(StaleFencingTokenError):
        lock.commit(lease)


def test_an_expired_lease_does_not_block_the_bump(lock: SlotLock, slot: Slot, clock: Any) -> None:
    lock.acquire(slot, "req-1")
    clock.advance(s=lock.lease_duration_ms / 1000 + 1)
    assert bump_fencing_token(lock, 10).bumped


@pytest.mark.backends("moto")  # refused before any request
@pytest.mark.parametrize("at_least", [0, -1, 10**38, 2.5, True, "10", None])
def test_invalid_targets_are_rejected_before_any_request(lock: SlotLock, at_least: Any, request_log: Any) -> None:
    with pytest.raises(LockConfigurationError) as info:
        bump_fencing_token(lock, at_least)
    assert info.value.parameter == "at_least"
    assert request_log.operations == []


def test_a_wrong_typed_counter_is_reported_not_overwritten(lock: SlotLock, ddb: Any, table: str, get_item: Any) -> None:
    ddb.put_item(TableName=table, Item={"pk": {"S": lock.lock_key}, "fencing_token": {"S": "12"}})
    with pytest.raises(CorruptLockItemError) as info:
        bump_fencing_token(lock, 100)
    assert info.value.attribute == "fencing_token"
    assert get_item(lock.lock_key)["fencing_token"] == {"S": "12"}
