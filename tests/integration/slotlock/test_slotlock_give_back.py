"""A slot given back unfinished (``SlotRun.give_back``) whose comeback never came is recorded MISSED with the
give-back's reason (issue 31, finding 7): ``capacity``, not ``superseded``.

The reason rides on the lock item: the give-back's release writes it in the UpdateItem it sends anyway, every
acquisition removes it and copies it to ``previous_given_back_reason`` (ALL_NEW), so the newer slot's winner knows
it without a request more. A comeback that re-acquires the slot clears it. Sequenced on the fake clock, on both
backends (moto and DynamoDB Local).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from slotlock import (
    Lease,
    LockConfigurationError,
    LockRecord,
    Loss,
    Slot,
    SlotHistory,
    SlotLock,
    SlotRun,
    SlotRunner,
    request_generation,
)
from slotlock._acquire import superseded_reason
from slotlock.table import lock_key, manual_lock_key

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

PERIOD_S = 1800
JOB = "flights-dashboard"  # conftest JOB_NAME


def acquired(result: Lease | Loss) -> Lease:
    assert isinstance(result, Lease), f"expected a lease, got {result}"
    return result


def lost(result: Lease | Loss) -> Loss:
    assert isinstance(result, Loss), f"expected a loss, got {result}"
    return result


def give_back_for_capacity(run: SlotRun) -> None:
    """What ``athena_refresh.permits.CapacityGate.defer`` does, as far as the lock sees it."""
    run.record_state(capacity={"deferrals": 1, "waited_ms": 60_000})
    run.give_back("capacity", {"deferrals": 1})


@pytest.fixture
def given_back(lock: SlotLock, slot: Slot, clock: Any, request_log: Any) -> Slot:
    """Slot S, given back for capacity by its winner "A" (its comeback arranged, not arrived); S+1 returned."""
    outcome = SlotRunner(lock).run(give_back_for_capacity, slot=slot, owner_id="A", deadline_ms=clock.now + 300_000)
    assert (outcome.status, outcome.reason) == ("deferred", "capacity")
    # the give-back is the release it always was: one UpdateItem, no request more
    assert request_log.operations == ["UpdateItem", "TransactWriteItems", "UpdateItem"]
    request_log.clear()
    return Slot(slot.epoch_s + PERIOD_S)


def test_a_slot_given_back_whose_comeback_never_came_is_missed_with_the_give_back_reason(
    lock: SlotLock, slot: Slot, clock: Any, given_back: Slot, ddb: Any, table: str, request_log: Any
) -> None:
    # GIVEN S was given back for capacity (its state says it waits for capacity)
    nxt = given_back

    # WHEN S's comeback never comes and S+1 fires
    clock.now = nxt.epoch_ms + 1_000
    lease = acquired(lock.try_acquire(nxt, "N"))
    sent = list(request_log.operations)

    # THEN S+1's winner recorded S MISSED "capacity", not "superseded", the superseding slot kept in the detail
    record = lock.get_slot(slot)
    assert record is not None
    assert (record["status"], record["reason"]) == ("MISSED", "capacity")
    assert record["error"] == {"superseded_by_slot": nxt.iso, "fencing_token": lease.fencing_token}
    assert record["state"] == {"capacity": {"deferrals": 1, "waited_ms": 60_000}}  # the wait it had recorded
    # AND the history reader shows that reason
    [history] = SlotHistory(table, client=ddb).slot_records(JOB, slot)
    assert (history.status, history.reason, history.error["superseded_by_slot"]) == ("MISSED", "capacity", nxt.iso)
    # AND the lease says so, and it took the requests it always takes: its acquisition and the MISSED record
    assert (lease.superseded_slot, lease.superseded_recorded, lease.superseded_reason) == (slot, True, "capacity")
    assert sent == ["UpdateItem", "UpdateItem"]
    # AND the acquisition took the mark off the lock item (kept as the previous holder's, like its owner)
    current = lock.get_lock()
    assert (current.given_back_reason, current.previous_given_back_reason) == (None, "capacity")
    # AND the comeback, arriving after all, finds S superseded and records nothing more
    late = lost(lock.try_acquire(slot, "A-comeback"))
    assert (late.reason, late.missed_recorded) == ("superseded", False)
    assert lock.get_slot(slot)["reason"] == "capacity"


def test_the_give_back_reason_is_on_the_lock_item_until_the_next_acquisition(
    lock: SlotLock, slot: Slot, given_back: Slot, get_item: Any
) -> None:
    # GIVEN / WHEN S was given back for capacity / THEN the release wrote why, beside the kept owner, token and slot
    item = get_item(lock_key(JOB))
    assert item is not None and item["given_back_reason"] == {"S": "capacity"}
    current = lock.get_lock()
    assert (current.owner_id, current.lease_slot, current.given_back_reason) == ("A", slot, "capacity")
    assert current.lease_expires_at_ms is not None and current.lease_expires_at_ms <= lock.clock_ms()


@pytest.mark.parametrize(("comeback_ends", "reason"), [("dies", "superseded"), ("gives_back_again", "capacity")])
def test_a_comeback_that_reacquired_the_slot_clears_the_give_back_reason(
    lock: SlotLock, slot: Slot, clock: Any, given_back: Slot, comeback_ends: str, reason: str
) -> None:
    # GIVEN S was given back for capacity, and its comeback took the released lease over and adopted the state
    nxt = given_back
    clock.advance(s=120)
    comeback = acquired(lock.try_acquire(slot, "B"))
    assert comeback.takeover and comeback.state["capacity"]["deferrals"] == 1
    assert lock.get_lock().given_back_reason is None  # the acquisition removed the mark

    # WHEN the comeback dies holding the lease, or gives the slot back again, and S+1 fires
    if comeback_ends == "gives_back_again":
        SlotRun(lock, comeback).give_back("capacity")
    clock.now = nxt.epoch_ms + 1_000
    lease = acquired(lock.try_acquire(nxt, "N"))

    # THEN S is MISSED with what became of its last holder: "superseded" when it ran again and died (not labelled
    # "capacity" by an older give-back), "capacity" when that holder gave it back too
    assert (lease.superseded_slot, lease.superseded_reason) == (slot, reason)
    record = lock.get_slot(slot)
    assert record is not None and (record["status"], record["reason"]) == ("MISSED", reason)


def test_a_racer_of_the_given_back_slot_records_the_give_back_reason_when_the_newer_winner_could_not(
    lock: SlotLock, slot: Slot, clock: Any, given_back: Slot, ddb: Any
) -> None:
    # GIVEN S was given back for capacity, and S+1's winner could not write S's MISSED record (throttled past its
    # short budget: it goes on without it)
    nxt = given_back
    clock.now = nxt.epoch_ms + 1_000
    throttled = throttle_missed_records(ddb)
    lease = acquired(lock.try_acquire(nxt, "N"))
    ddb.meta.events.unregister("before-call.dynamodb", throttled)
    assert (lease.superseded_reason, lease.superseded_recorded) == ("capacity", False)
    assert lock.get_slot(slot)["status"] == "RUNNING"

    # WHEN S's comeback arrives after S+1 started
    outcome = SlotRunner(lock).run(lambda run: None, slot=slot, owner_id="A-comeback", deadline_ms=clock.now + 60_000)

    # THEN it loses as superseded and records S MISSED "capacity" itself (from the lock item it lost to, ALL_OLD)
    assert (outcome.status, outcome.reason) == ("missed", "capacity")
    record = lock.get_slot(slot)
    assert record is not None and (record["status"], record["reason"]) == ("MISSED", "capacity")
    assert record["error"]["holder_slot"] == nxt.iso


def test_a_manual_generation_given_back_leaves_no_mark_on_a_lock_item(
    make_lock: Callable[..., SlotLock], slot: Slot, get_item: Any
) -> None:
    # GIVEN a manual run (generation 2) of S holding the manual lease
    lock = make_lock()
    request_generation(lock.context, slot, run_id="op-1", kind="rerun", requested_by="op", reason="why")
    manual = lock.for_generation(2)
    lease = acquired(manual.try_acquire(slot, "M"))

    # WHEN it gives the slot back for capacity
    SlotRun(manual, lease).give_back("capacity")

    # THEN the manual lease is released and no reason is stored: a manual run is never superseded
    item = get_item(manual_lock_key(JOB))
    assert item is not None and "given_back_reason" not in item
    assert int(item["lease_expires_at_ms"]["N"]) <= lock.clock_ms()
    assert get_item(lock_key(JOB)) is None  # the live lock item was never touched


@pytest.mark.parametrize("reason", ["", "x" * 65])
def test_a_give_back_reason_that_could_not_be_a_missed_reason_is_refused_before_any_request(
    lock: SlotLock, slot: Slot, request_log: Any, reason: str
) -> None:
    # GIVEN a holder
    lease = acquired(lock.try_acquire(slot, "A"))
    request_log.clear()

    # WHEN it releases giving an empty or overlong reason / THEN it is refused naming the parameter, nothing sent
    with pytest.raises(LockConfigurationError) as info:
        lock.release(lease, given_back=reason)
    assert info.value.parameter == "reason" and request_log.operations == []
    assert lock.get_lock().owned_by("A", lease.fencing_token)


def test_the_missed_reason_of_a_superseded_slot_comes_from_the_acquisition_that_replaced_its_holder() -> None:
    # GIVEN / WHEN / THEN only the acquisition right after S's give-back (previous slot S) carries its reason
    s, s1 = Slot(1_800_000_000), Slot(1_800_001_800)
    assert superseded_reason(LockRecord(previous_slot=s, previous_given_back_reason="capacity"), s) == "capacity"
    assert superseded_reason(LockRecord(previous_slot=s), s) == "superseded"
    assert superseded_reason(LockRecord(previous_slot=s1, previous_given_back_reason="capacity"), s) == "superseded"


def throttle_missed_records(ddb: Any) -> Callable[..., Any]:
    """Answer every MISSED record's UpdateItem with throttling (the request is not sent); returns the hook."""

    def hook(model: Any, params: dict[str, Any], **_: Any) -> Any:
        body = params.get("body") or b""
        if model.name == "UpdateItem" and '"MISSED"' in (body.decode() if isinstance(body, bytes) else str(body)):
            error = {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}
            return AWSResponse("https://dynamodb.local", 400, {}, None), {
                "Error": error,
                "ResponseMetadata": {"HTTPStatusCode": 400},
            }
        return None

    ddb.meta.events.register("before-call.dynamodb", hook)
    return hook
