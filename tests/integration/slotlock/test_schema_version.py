"""The table layout (``schema_version``) on moto and DynamoDB Local, driven one request at a time.

* Every item slotlock writes carries ``schema_version = 1`` (a Number), set by the write that was sent anyway.
* An item without the attribute (written by a slotlock before it existed) is layout 1: every operation accepts it,
  its fencing counter carries on, and the first write adds the attribute.
* An item of a newer layout (2), or whose attribute is not a Number, is refused by every conditional write (the
  ``SCHEMA_COMPATIBLE`` clause) and every decode: :class:`UnsupportedSchemaVersionError`, never a lost lease, a
  "held" loss nor a corrupt item; the loser learns it from ALL_OLD after its one request; the item is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from slotlock import (
    CorruptLockItemError,
    Lease,
    LeaseLostError,
    LockBackendError,
    Loss,
    Permit,
    PermitOwner,
    Semaphore,
    Slot,
    SlotHistory,
    SlotLock,
    SlotLockError,
    SlotRunner,
    UnsupportedSchemaVersionError,
    Wait,
    bump_fencing_token,
    pause,
    release,
    request_generation,
    resume,
)
from slotlock import errors as slotlock_errors
from slotlock.codec import decode_lock_item, decode_slot_item
from slotlock.table import SCHEMA_VERSION, SCHEMA_VERSION_ATTRIBUTE, SUPPORTED_SCHEMA_VERSIONS

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

OPERATOR = "arn:aws:iam::123456789012:user/op"
SEMAPHORE = "123456789012-us-east-1"
LEASE_MS = 30_000  # conftest LEASE_S
PERIOD_S = 1800
LAYOUT_1 = {"N": str(SCHEMA_VERSION)}

#: Values of ``schema_version`` this slotlock refuses, with the ``found`` it reports.
UNSUPPORTED = [
    pytest.param({"N": "2"}, 2, id="newer"),
    pytest.param({"S": "1"}, "1", id="string"),
    pytest.param({"NULL": True}, None, id="null"),
]


# --- helpers ----------------------------------------------------------------------------------------------
def scan(ddb: Any, table: str) -> dict[str, dict[str, Any]]:
    """Every item of the (small) table by partition key, strongly consistent."""
    items: dict[str, dict[str, Any]] = {}
    params: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = ddb.scan(**params)
        items.update({item["pk"]["S"]: item for item in page["Items"]})
        if "LastEvaluatedKey" not in page:
            return items
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def strip_layout(ddb: Any, table: str) -> list[str]:
    """Remove ``schema_version`` from every item: the table as the release before the attribute wrote it.
    Returns the keys."""
    keys = sorted(scan(ddb, table))
    for key in keys:
        ddb.update_item(
            TableName=table,
            Key={"pk": {"S": key}},
            UpdateExpression="REMOVE #v",
            ExpressionAttributeNames={"#v": SCHEMA_VERSION_ATTRIBUTE},
        )
    assert all(SCHEMA_VERSION_ATTRIBUTE not in item for item in scan(ddb, table).values())
    return keys


def set_layout(ddb: Any, table: str, key: str, value: dict[str, Any]) -> dict[str, Any]:
    """Give item ``key`` the ``schema_version`` ``value`` (as a newer slotlock, or a hand edit, would); returns
    the item as it is now."""
    response = ddb.update_item(
        TableName=table,
        Key={"pk": {"S": key}},
        UpdateExpression="SET #v = :v",
        ConditionExpression="attribute_exists(pk)",
        ExpressionAttributeNames={"#v": SCHEMA_VERSION_ATTRIBUTE},
        ExpressionAttributeValues={":v": value},
        ReturnValues="ALL_NEW",
    )
    return dict(response["Attributes"])


def acquired(result: Lease | Loss) -> Lease:
    assert isinstance(result, Lease), f"expected a lease, got {result}"
    return result


def assert_refused(error: UnsupportedSchemaVersionError, key: str, found: Any) -> None:
    """The error names the item, the value found and the layouts supported; it is nothing else."""
    assert (error.key, error.found, error.supported) == (key, found, (1,))
    assert isinstance(error, SlotLockError)
    assert not isinstance(
        error, (LeaseLostError, CorruptLockItemError, LockBackendError)
    )  # not lost, corrupt, transient
    assert f"{key!r}" in str(error) and "schema_version=" in str(error) and "docs/compatibility.md" in str(error)
    assert "reads and writes layout 1" in str(error)


@pytest.fixture
def make_sem(ddb: Any, table: str, clock: Any) -> Callable[..., Semaphore]:
    def make(permits: int = 1) -> Semaphore:
        return Semaphore(
            table,
            SEMAPHORE,
            permits,
            client=ddb,
            clock_ms=clock,
            sleep_s=lambda seconds: clock.advance(ms=max(1, int(seconds * 1000))),
            waiter_ttl_s=20.0,
        )

    return make


# --- the error and the clause (no table) --------------------------------------------------------------------
def test_the_error_is_exported_and_its_message_names_item_versions_and_the_fix() -> None:
    # GIVEN / WHEN the error for a lock item of layout 2
    error = UnsupportedSchemaVersionError("lock#nightly", 2)

    # THEN its message is the documented one, and it is part of the public API
    assert str(error) == (
        "lock item 'lock#nightly' has table layout schema_version=2; slotlock 1.0.0 reads and writes layout 1:"
        " upgrade slotlock (docs/compatibility.md)"
    )
    assert slotlock_errors.UnsupportedSchemaVersionError is UnsupportedSchemaVersionError
    assert "UnsupportedSchemaVersionError" in __import__("slotlock").__all__
    assert SUPPORTED_SCHEMA_VERSIONS == (1,) and error.supported == (1,)
    # AND a value that is no layout at all is not blamed on an old slotlock
    text = str(UnsupportedSchemaVersionError("permit#x#0", "1"))
    assert text.startswith("permit item 'permit#x#0' has table layout schema_version='1' (not a Number)")
    assert "upgrade" not in text


# --- items without the attribute (layout 1, written before it existed) carry over ---------------------------
def test_every_item_slotlock_writes_carries_layout_1(
    lock: SlotLock, make_lock: Callable[..., SlotLock], make_sem: Any, slot: Slot, clock: Any, ddb: Any, table: str
) -> None:
    # GIVEN every kind of write: a run with state, a takeover, commits, MISSED records of every reason, a pause
    # and resume, an operator release and fence bump, a manual generation run, a semaphore's permit and waiter
    lease = acquired(lock.try_acquire(slot, "A"))
    clock.advance(ms=10_000)
    lease = lock.heartbeat(lease)
    lease = lock.record_state(lease, {"query_execution_id": "qe-1"})
    lock.release(lease)
    lock.commit(acquired(lock.try_acquire(slot, "B")))
    old = make_lock(max_slot_age_s=60)
    assert not old.try_acquire(Slot(slot.epoch_s - PERIOD_S), "C").acquired  # too_old, with the lock-item mark
    nxt = Slot(slot.epoch_s + PERIOD_S)
    clock.now = nxt.epoch_ms + 1_000
    acquired(lock.try_acquire(nxt, "D"))  # holds nxt and crashes
    later = Slot(nxt.epoch_s + PERIOD_S)
    clock.now = later.epoch_ms + 55_000
    newest = acquired(lock.try_acquire(later, "E"))  # supersedes nxt: MISSED "superseded"
    clock.now = later.epoch_ms + 61_000
    assert lock.try_acquire(Slot(later.epoch_s + 60), "F").missed_recorded  # overrun (E still holds)
    lock.commit(newest)
    pause(lock, reason="maintenance", requested_by=OPERATOR)
    paused_slot = Slot(later.epoch_s + PERIOD_S)
    clock.now = paused_slot.epoch_ms + 1_000
    assert lock.try_acquire(paused_slot, "G").missed_recorded  # MISSED "paused": a conditional PutItem
    resume(lock, requested_by=OPERATOR)
    nxt2 = Slot(paused_slot.epoch_s + PERIOD_S)
    clock.now = nxt2.epoch_ms + 1_000
    held = acquired(lock.try_acquire(nxt2, "H"))
    release(lock, reason="stuck", requested_by=OPERATOR, force=True)
    bump_fencing_token(lock, held.fencing_token + 100)
    request_generation(lock.context, slot, run_id="op-1", kind="rerun", requested_by=OPERATOR, reason="redo")
    rerun = lock.for_generation(2)
    lock_g2 = acquired(rerun.try_acquire(slot, "M"))
    sem = make_sem(permits=1)
    permit = sem.try_acquire_for(lock_g2)
    assert isinstance(permit, Permit)
    waiter = sem.try_acquire(PermitOwner("other", slot), 1, clock.now + LEASE_MS)
    assert isinstance(waiter, Wait)  # registers on the tickets item
    sem.record_query(permit, "qe-2")
    rerun.commit(lock_g2, writes=[sem.release_item(permit)])

    # WHEN the table is read
    items = scan(ddb, table)

    # THEN every item, of every kind, carries layout 1 as a Number
    kinds = {key.split("#", 1)[0] for key in items}
    assert kinds == {"lock", "manual", "slot", "generations", "permit", "tickets"}
    assert {key: item.get(SCHEMA_VERSION_ATTRIBUTE) for key, item in items.items()} == dict.fromkeys(items, LAYOUT_1)


def test_a_live_lock_item_without_the_attribute_carries_over_with_its_fencing_counter(
    lock: SlotLock, slot: Slot, clock: Any, ddb: Any, table: str, get_item: Callable[[str], Any]
) -> None:
    # GIVEN a job that ran three slots under the release before the attribute (tokens 1..3), the third one left
    # holding its lease (a crash), and its history
    for index in range(3):
        current = Slot(slot.epoch_s + index * PERIOD_S)
        clock.now = current.epoch_ms + 1_000
        lease = acquired(lock.try_acquire(current, f"req-{index}"))
        lease = lock.record_state(lease, {"query_execution_id": f"qe-{index}"})
        if index < 2:
            lock.commit(lease, summary={"rows": index})
    strip_layout(ddb, table)

    # WHEN this release takes the crashed slot over, renews, records state and commits it
    clock.advance(ms=LEASE_MS + 1)
    taken = acquired(lock.try_acquire(lease.slot, "req-new"))
    clock.advance(ms=10_000)
    taken = lock.heartbeat(taken)
    taken = lock.record_state(taken, {"rows_seen": 7})
    receipt = lock.commit(taken, summary={"rows": 7})

    # THEN the fencing counter continued from the old value, the predecessor's state was adopted
    assert (taken.fencing_token, taken.takeover_from, receipt.outcome) == (4, "req-2", "succeeded")
    assert taken.state["query_execution_id"] == "qe-2"
    # AND the items it wrote now carry layout 1; untouched history keeps its old (attribute-less) form
    assert get_item(lock.lock_key)[SCHEMA_VERSION_ATTRIBUTE] == LAYOUT_1
    assert get_item(lock.lock_key)["fencing_token"] == {"N": "4"}
    assert get_item(lock.slot_key(lease.slot))[SCHEMA_VERSION_ATTRIBUTE] == LAYOUT_1
    assert SCHEMA_VERSION_ATTRIBUTE not in get_item(lock.slot_key(slot))
    # AND old and new history items read alike
    assert [record.status for record in SlotHistory(table, client=ddb).records(lock.job_name)] == ["SUCCEEDED"] * 3


def test_missed_records_and_losers_accept_items_without_the_attribute(
    lock: SlotLock, make_lock: Callable[..., SlotLock], slot: Slot, clock: Any, ddb: Any, table: str, get_item: Any
) -> None:
    # GIVEN a lease held on slot S and a finished older slot, all written before the attribute existed
    older = Slot(slot.epoch_s - PERIOD_S)
    clock.now = older.epoch_ms + 1_000
    lock.commit(acquired(lock.try_acquire(older, "req-0")))
    clock.now = slot.epoch_ms + 55_000
    holder = acquired(lock.try_acquire(slot, "A"))
    strip_layout(ddb, table)

    # WHEN a racer of S loses "held", a racer of the next minute records it MISSED "overrun" (a transaction with
    # the lock item's mark), and a late racer of an old slot records it MISSED "too_old"
    loss = lock.try_acquire(slot, "B")
    clock.now = slot.epoch_ms + 61_000
    overrun = lock.try_acquire(Slot(slot.epoch_s + 60), "C")
    too_old = make_lock(max_slot_age_s=60).try_acquire(Slot(older.epoch_s - PERIOD_S), "D")

    # THEN each is judged as before (the lock item's layout-less ALL_OLD decodes as layout 1)
    assert isinstance(loss, Loss) and (loss.reason, loss.holder_owner_id) == ("held", "A")
    assert isinstance(overrun, Loss) and (overrun.reason, overrun.missed_recorded) == ("overrun", True)
    assert isinstance(too_old, Loss) and (too_old.reason, too_old.missed_recorded) == ("too_old", True)
    # AND the lock item carries layout 1 now (the mark's transaction set it), its counter untouched
    lock_item = get_item(lock.lock_key)
    assert lock_item[SCHEMA_VERSION_ATTRIBUTE] == LAYOUT_1 and lock_item["fencing_token"] == {
        "N": str(holder.fencing_token)
    }
    assert get_item(lock.slot_key(Slot(slot.epoch_s + 60)))[SCHEMA_VERSION_ATTRIBUTE] == LAYOUT_1


def test_operator_actions_accept_a_lock_item_without_the_attribute(
    lock: SlotLock, slot: Slot, clock: Any, ddb: Any, table: str, get_item: Any
) -> None:
    # GIVEN a live lease (token 1) on a lock item written before the attribute existed
    acquired(lock.try_acquire(slot, "A"))
    strip_layout(ddb, table)

    # WHEN an operator pauses, resumes, force-releases and bumps the counter, one after the other
    assert pause(lock, reason="maintenance", requested_by=OPERATOR).changed
    assert SCHEMA_VERSION_ATTRIBUTE in get_item(lock.lock_key)
    strip_layout(ddb, table)
    assert resume(lock, requested_by=OPERATOR).changed
    strip_layout(ddb, table)
    released = release(lock, reason="stuck", requested_by=OPERATOR, force=True)
    strip_layout(ddb, table)
    bump = bump_fencing_token(lock, 50)

    # THEN each applied on the old item, the counter moving on from its old value, and the item carries layout 1
    assert released.changed and released.after is not None and released.after.fencing_token == 2
    assert (bump.before, bump.after, bump.bumped) == (2, 50, True)
    assert get_item(lock.lock_key)[SCHEMA_VERSION_ATTRIBUTE] == LAYOUT_1
    assert get_item(lock.lock_key)["fencing_token"] == {"N": "50"}


def test_semaphore_items_without_the_attribute_are_taken_waited_on_and_released(
    lock: SlotLock, make_sem: Any, slot: Slot, clock: Any, ddb: Any, table: str, get_item: Any
) -> None:
    # GIVEN a permit taken and released, and a waiter's tickets item, written before the attribute existed
    sem = make_sem(permits=1)
    first = sem.try_acquire(PermitOwner("a", slot), 3, clock.now + LEASE_MS)
    assert isinstance(first, Permit)
    wait = sem.try_acquire(PermitOwner("b", slot), 5, clock.now + LEASE_MS)
    assert isinstance(wait, Wait)
    assert sem.release(first).outcome == "released"
    sem.leave(wait.ticket)
    strip_layout(ddb, table)

    # WHEN another owner takes the permit, records its query, a third waits, and the permit is released
    taken = sem.try_acquire(PermitOwner("c", slot), 7, clock.now + LEASE_MS)
    assert isinstance(taken, Permit) and taken.how == "free"
    taken = sem.record_query(taken, "qe-c")
    assert isinstance(sem.try_acquire(PermitOwner("d", slot), 9, clock.now + LEASE_MS), Wait)
    assert sem.release(taken).outcome == "released"

    # THEN both items carry layout 1
    assert get_item(taken.key)[SCHEMA_VERSION_ATTRIBUTE] == LAYOUT_1
    assert get_item(f"tickets#{SEMAPHORE}")[SCHEMA_VERSION_ATTRIBUTE] == LAYOUT_1


def test_manual_items_without_the_attribute_carry_over_with_their_counters(
    lock: SlotLock, slot: Slot, clock: Any, ddb: Any, table: str, get_item: Any
) -> None:
    # GIVEN generation 2 of a slot requested and run (manual token 1), written before the attribute existed
    request_generation(lock.context, slot, run_id="op-1", kind="rerun", requested_by=OPERATOR, reason="redo")
    manual = lock.for_generation(2)
    manual.commit(acquired(manual.try_acquire(slot, "M1")))
    strip_layout(ddb, table)

    # WHEN generation 3 is requested and run
    third = request_generation(lock.context, slot, run_id="op-2", kind="rerun", requested_by=OPERATOR, reason="again")
    lease = acquired(lock.for_generation(3).try_acquire(slot, "M2"))

    # THEN the generation counter and the manual fencing counter continued from their old values
    assert (third.generation, lease.fencing_token) == (3, 2)
    counter = get_item(f"generations#{lock.job_name}#{slot.iso}")
    assert counter["last_generation"] == {"N": "3"} and counter[SCHEMA_VERSION_ATTRIBUTE] == LAYOUT_1
    assert get_item(f"manual#{lock.job_name}")[SCHEMA_VERSION_ATTRIBUTE] == LAYOUT_1


# --- a newer layout (or not a Number) is refused, and left unchanged ----------------------------------------
@pytest.mark.parametrize(("value", "found"), UNSUPPORTED)
def test_a_racer_is_refused_by_a_newer_lock_item_after_its_one_request(
    lock: SlotLock, slot: Slot, ddb: Any, table: str, get_item: Any, request_log: Any, value: Any, found: Any
) -> None:
    # GIVEN a live lease held by A, on a lock item that a newer slotlock wrote
    acquired(lock.try_acquire(slot, "A"))
    before = set_layout(ddb, table, lock.lock_key, value)
    request_log.clear()

    # WHEN B races for the slot
    with pytest.raises(UnsupportedSchemaVersionError) as refused:
        lock.try_acquire(slot, "B")

    # THEN B learnt the layout (not "held" by A) from ALL_OLD of its one conditional request, and wrote nothing
    assert_refused(refused.value, lock.lock_key, found)
    assert request_log.operations == ["UpdateItem"]
    assert get_item(lock.lock_key) == before


@pytest.mark.parametrize(("value", "found"), UNSUPPORTED)
@pytest.mark.parametrize("operation", ["heartbeat", "record_state", "commit", "release"])
def test_a_holder_is_refused_by_a_newer_lock_item_and_never_told_it_lost_the_lease(
    lock: SlotLock,
    slot: Slot,
    clock: Any,
    ddb: Any,
    table: str,
    get_item: Any,
    request_log: Any,
    operation: str,
    value: Any,
    found: Any,
) -> None:
    # GIVEN our lease, whose lock item a newer slotlock rewrote (owner and token unchanged)
    lease = acquired(lock.try_acquire(slot, "A"))
    before = set_layout(ddb, table, lock.lock_key, value)
    slot_before = get_item(lock.slot_key(slot))
    clock.advance(ms=10_000)
    request_log.clear()
    calls: dict[str, Callable[[], Any]] = {
        "heartbeat": lambda: lock.heartbeat(lease),
        "record_state": lambda: lock.record_state(lease, {"query_execution_id": "qe-1"}),
        "commit": lambda: lock.commit(lease),
        "release": lambda: lock.release(lease),
    }

    # WHEN we write
    with pytest.raises(UnsupportedSchemaVersionError) as refused:
        calls[operation]()

    # THEN the one request was refused (no retry, no read), and nothing was written
    assert_refused(refused.value, lock.lock_key, found)
    single = "TransactWriteItems" if operation in ("record_state", "commit") else "UpdateItem"
    assert request_log.operations == [single]
    assert get_item(lock.lock_key) == before
    assert get_item(lock.slot_key(slot)) == slot_before


def test_a_commit_is_refused_by_a_newer_slot_item(
    lock: SlotLock, slot: Slot, clock: Any, ddb: Any, table: str, get_item: Any, request_log: Any
) -> None:
    # GIVEN our lease and its recorded state, the slot item rewritten by a newer slotlock
    lease = lock.record_state(acquired(lock.try_acquire(slot, "A")), {"query_execution_id": "qe-1"})
    slot_before = set_layout(ddb, table, lock.slot_key(slot), {"N": "2"})
    lock_before = get_item(lock.lock_key)
    request_log.clear()

    # WHEN we commit
    with pytest.raises(UnsupportedSchemaVersionError) as refused:
        lock.commit(lease, summary={"rows": 1})

    # THEN the transaction's cancellation reason (the slot item's ALL_OLD) named it, after one request
    assert_refused(refused.value, lock.slot_key(slot), 2)
    assert request_log.operations == ["TransactWriteItems"]
    assert (get_item(lock.lock_key), get_item(lock.slot_key(slot))) == (lock_before, slot_before)


def test_a_missed_record_is_refused_by_a_newer_slot_item(
    lock: SlotLock, slot: Slot, ddb: Any, table: str, get_item: Any, request_log: Any
) -> None:
    # GIVEN a slot item of a newer layout
    lock.commit(acquired(lock.try_acquire(slot, "A")))
    before = set_layout(ddb, table, lock.slot_key(slot), {"N": "2"})
    request_log.clear()

    # WHEN a late racer records the slot MISSED
    with pytest.raises(UnsupportedSchemaVersionError):
        lock.record_missed(slot, "too_old")

    # THEN one request, refused; the item is unchanged
    assert request_log.operations == ["UpdateItem"]
    assert get_item(lock.slot_key(slot)) == before


@pytest.mark.parametrize(("value", "found"), UNSUPPORTED)
@pytest.mark.parametrize("action", ["pause", "resume", "release", "bump"])
def test_operator_actions_refuse_a_newer_lock_item_without_writing(
    lock: SlotLock,
    slot: Slot,
    ddb: Any,
    table: str,
    get_item: Any,
    request_log: Any,
    action: str,
    value: Any,
    found: Any,
) -> None:
    # GIVEN a held lease (and, for resume, a paused job) on a lock item of a newer layout
    acquired(lock.try_acquire(slot, "A"))
    if action == "resume":
        pause(lock, reason="maintenance", requested_by=OPERATOR)
    before = set_layout(ddb, table, lock.lock_key, value)
    request_log.clear()
    actions: dict[str, Callable[[], Any]] = {
        "pause": lambda: pause(lock, reason="maintenance", requested_by=OPERATOR),
        "resume": lambda: resume(lock, requested_by=OPERATOR),
        "release": lambda: release(lock, reason="stuck", requested_by=OPERATOR, force=True),
        "bump": lambda: bump_fencing_token(lock, 100, force=True),
    }

    # WHEN the operator acts
    with pytest.raises(UnsupportedSchemaVersionError) as refused:
        actions[action]()

    # THEN the read it starts with refused the item: nothing was written
    assert_refused(refused.value, lock.lock_key, found)
    assert request_log.operations == ["GetItem"]
    assert get_item(lock.lock_key) == before


def test_an_operator_write_is_refused_by_its_condition_too(
    lock: SlotLock, slot: Slot, ddb: Any, table: str, get_item: Any, request_log: Any
) -> None:
    # GIVEN a lock item of a newer layout, and an operator tool's own write that would otherwise apply
    acquired(lock.try_acquire(slot, "A"))
    before = set_layout(ddb, table, lock.lock_key, {"N": "2"})
    request_log.clear()

    # WHEN it is sent through the operator surface
    with pytest.raises(UnsupportedSchemaVersionError):
        lock.update_lock_item("SET #job = :job", "attribute_exists(#job)", {"#job": "job"}, {":job": {"S": "x"}})

    # THEN its one request carried the layout clause, and failed on it
    [sent] = request_log.requests("UpdateItem")
    assert sent["ConditionExpression"].startswith("(attribute_not_exists(#schema_version) OR")
    assert get_item(lock.lock_key) == before


@pytest.mark.parametrize(("value", "found"), UNSUPPORTED)
def test_reads_refuse_newer_items(
    lock: SlotLock, slot: Slot, ddb: Any, table: str, get_item: Any, value: Any, found: Any
) -> None:
    # GIVEN a committed slot whose lock and slot items a newer slotlock rewrote
    lock.commit(acquired(lock.try_acquire(slot, "A")), summary={"rows": 1})
    set_layout(ddb, table, lock.lock_key, value)
    set_layout(ddb, table, lock.slot_key(slot), value)

    # WHEN / THEN every decode of a read item refuses it with the same error
    with pytest.raises(UnsupportedSchemaVersionError) as on_lock:
        lock.get_lock()
    assert_refused(on_lock.value, lock.lock_key, found)
    with pytest.raises(UnsupportedSchemaVersionError) as on_slot:
        lock.get_slot(slot)
    assert_refused(on_slot.value, lock.slot_key(slot), found)
    with pytest.raises(UnsupportedSchemaVersionError):
        SlotHistory(table, client=ddb).page(lock.job_name)
    with pytest.raises(UnsupportedSchemaVersionError):
        decode_lock_item(get_item(lock.lock_key), lock.lock_key)
    with pytest.raises(UnsupportedSchemaVersionError):
        decode_slot_item(get_item(lock.slot_key(slot)), lock.slot_key(slot))
    # AND the raw read for operator tools still shows the item as stored
    assert lock.get_lock_item() == get_item(lock.lock_key)


def test_a_runner_lets_the_error_through_instead_of_reporting_a_loss(
    lock: SlotLock, slot: Slot, ddb: Any, table: str
) -> None:
    # GIVEN a newer lock item
    lock.commit(acquired(lock.try_acquire(slot, "A")))
    set_layout(ddb, table, lock.lock_key, {"N": "2"})

    # WHEN / THEN the runner raises it (no "lost" outcome, and the function never runs)
    ran: list[int] = []
    with pytest.raises(UnsupportedSchemaVersionError):
        SlotRunner(lock).run(lambda run: ran.append(1), slot=Slot(slot.epoch_s), owner_id="B")
    assert ran == []


def test_the_semaphore_refuses_newer_permit_and_tickets_items(
    lock: SlotLock, make_sem: Any, slot: Slot, clock: Any, ddb: Any, table: str, get_item: Any, request_log: Any
) -> None:
    # GIVEN a permit we hold, then rewritten by a newer slotlock
    sem = make_sem(permits=1)
    permit = sem.try_acquire(PermitOwner("a", slot), 3, clock.now + LEASE_MS)
    assert isinstance(permit, Permit)
    before = set_layout(ddb, table, permit.key, {"N": "2"})
    request_log.clear()

    # WHEN we renew it, and another owner tries to take a permit
    with pytest.raises(UnsupportedSchemaVersionError) as on_renew:
        sem.renew(permit, clock.now + LEASE_MS + 1_000)
    renew_requests = list(request_log.operations)
    request_log.clear()
    with pytest.raises(UnsupportedSchemaVersionError):
        sem.try_acquire(PermitOwner("b", slot), 5, clock.now + LEASE_MS)

    # THEN the renewal's one request was refused (not "permit lost"); the taker's read refused it before any write
    assert_refused(on_renew.value, permit.key, 2)
    assert renew_requests == ["UpdateItem"]
    assert request_log.operations == ["BatchGetItem"]
    assert get_item(permit.key) == before
    # AND a tickets item of a newer layout is refused by the same read (the permit, back to layout 1, is held)
    set_layout(ddb, table, permit.key, LAYOUT_1)
    assert isinstance(sem.try_acquire(PermitOwner("b", slot), 5, clock.now + LEASE_MS), Wait)
    set_layout(ddb, table, f"tickets#{SEMAPHORE}", {"N": "2"})
    with pytest.raises(UnsupportedSchemaVersionError) as on_tickets:
        sem.try_acquire(PermitOwner("c", slot), 6, clock.now + LEASE_MS)
    assert on_tickets.value.key == f"tickets#{SEMAPHORE}"


def test_manual_runs_refuse_newer_counter_and_manual_lock_items(
    lock: SlotLock, slot: Slot, ddb: Any, table: str, get_item: Any, request_log: Any
) -> None:
    # GIVEN generation 2 requested and run, then its counter and the manual lock item rewritten by a newer slotlock
    request_generation(lock.context, slot, run_id="op-1", kind="rerun", requested_by=OPERATOR, reason="redo")
    manual = lock.for_generation(2)
    manual.commit(acquired(manual.try_acquire(slot, "M1")))
    counter_key = f"generations#{lock.job_name}#{slot.iso}"
    counter_before = set_layout(ddb, table, counter_key, {"N": "2"})
    manual_before = set_layout(ddb, table, manual.lock_key, {"N": "2"})
    request_log.clear()

    # WHEN generation 3 is requested, and a manual run of generation 2 races again
    with pytest.raises(UnsupportedSchemaVersionError) as on_request:
        request_generation(lock.context, slot, run_id="op-2", kind="rerun", requested_by=OPERATOR, reason="again")
    request_operations = list(request_log.operations)
    request_log.clear()
    with pytest.raises(UnsupportedSchemaVersionError) as on_acquire:
        manual.try_acquire(slot, "M2")

    # THEN the request's read refused the counter before any write; the racer's one request was refused
    assert on_request.value.key == counter_key and request_operations == ["GetItem"]
    assert on_acquire.value.key == manual.lock_key and request_log.operations == ["UpdateItem"]
    assert (get_item(counter_key), get_item(manual.lock_key)) == (counter_before, manual_before)
