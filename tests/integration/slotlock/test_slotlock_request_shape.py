"""The exact requests slotlock sends: what moto does not check, and AWS does.

moto silently accepts unused ExpressionAttributeValues/Names; AWS rejects them ("Value provided in
ExpressionAttributeValues unused in expressions"). So every captured request is checked both ways:
each placeholder used in an expression is defined, and each defined one is used.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from botocore.stub import Stubber

from slotlock import (
    Lease,
    Loss,
    Permit,
    PermitOwner,
    Semaphore,
    Slot,
    SlotLock,
    Wait,
    bump_fencing_token,
    pause,
    release,
    request_generation,
    resume,
)
from slotlock._expressions import (
    ACQUIRE_CONDITION,
    ACQUIRE_UPDATE,
    GIVE_BACK_UPDATE,
    HOLDER_CONDITION,
    MARK_SLOT_MISSED,
    MARK_SLOT_MISSED_CONDITION,
    OWNER_AND_TOKEN_MATCH,
    SCHEMA_COMPATIBLE,
    SCHEMA_VERSION_SET,
    SLOT_NOT_ACQUIRED,
    SLOT_NOT_ENDED,
    SLOT_WRITE_CONDITION,
)
from slotlock._wire import Condition, checked, either, update, write

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

NOW_MS = 1_795_307_402_000
SLOT = Slot(1_795_307_400)
EXPRESSION_KEYS = (
    "UpdateExpression",
    "ConditionExpression",
    "ProjectionExpression",
    "KeyConditionExpression",
    "FilterExpression",
)
VALUE_PLACEHOLDER = re.compile(r":[A-Za-z0-9_]+")
NAME_PLACEHOLDER = re.compile(r"#[A-Za-z0-9_]+")


def assert_placeholders_match(request: dict[str, Any], where: str) -> None:
    """Every :value / #name placeholder is both defined and used (AWS rejects either mismatch)."""
    text = " ".join(request.get(key, "") for key in EXPRESSION_KEYS)
    used_values, used_names = set(VALUE_PLACEHOLDER.findall(text)), set(NAME_PLACEHOLDER.findall(text))
    defined_values = set(request.get("ExpressionAttributeValues", {}))
    defined_names = set(request.get("ExpressionAttributeNames", {}))
    assert defined_values - used_values == set(), f"{where}: unused ExpressionAttributeValues"
    assert used_values - defined_values == set(), f"{where}: undefined ExpressionAttributeValues"
    assert defined_names - used_names == set(), f"{where}: unused ExpressionAttributeNames"
    assert used_names - defined_names == set(), f"{where}: undefined ExpressionAttributeNames"


def writes_of(operation: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The single-item write requests inside a captured request body (transactions unpacked)."""
    if operation != "TransactWriteItems":
        return [(operation, body)]
    return [(kind, entry[kind]) for entry in body["TransactItems"] for kind in entry]


def acquire_params(owner: str, expires_ms: int) -> dict[str, Any]:
    return {
        "TableName": "locks",
        "Key": {"pk": {"S": "lock#job"}},
        "UpdateExpression": ACQUIRE_UPDATE,
        "ConditionExpression": ACQUIRE_CONDITION,
        "ExpressionAttributeNames": {
            "#pk": "pk",
            "#job": "job",
            "#token": "fencing_token",
            "#owner": "owner_id",
            "#expires": "lease_expires_at_ms",
            "#acquired": "acquired_at_ms",
            "#lease_slot": "lease_slot_epoch_s",
            "#prev_owner": "previous_owner_id",
            "#prev_slot": "previous_slot_epoch_s",
            "#given_back": "given_back_reason",
            "#prev_given_back": "previous_given_back_reason",
            "#last_fin_slot": "last_finished_slot_epoch_s",
            "#missed": "missed_slots_epoch_s",
            "#paused_through": "paused_through_slot_epoch_s",
            "#schema_version": "schema_version",
        },
        "ExpressionAttributeValues": {
            ":owner": {"S": owner},
            ":expires": {"N": str(expires_ms)},
            ":now": {"N": str(NOW_MS)},
            ":slot": {"N": str(SLOT.epoch_s)},
            ":job": {"S": "job"},
            ":one": {"N": "1"},
            ":null": {"NULL": True},
            ":schema_version": {"N": "1"},
        },
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",  # slotlock.capacity: the slot's cost estimate counts what it consumed
    }


# ---------------------------------------------------------------------------------------------------
# Stubber: exact shape of the acquisition
# ---------------------------------------------------------------------------------------------------


def test_try_acquire_sends_one_conditional_update_item(boto_session: Any) -> None:
    # GIVEN a stubbed client expecting the exact acquisition request, answering as DynamoDB would (ALL_NEW)
    client = boto_session.client("dynamodb")
    lock = SlotLock("locks", "job", client=client, clock_ms=lambda: NOW_MS, lease_duration_s=30)
    expected = acquire_params("A", NOW_MS + 30_000)
    all_new = {
        "pk": {"S": "lock#job"},
        "job": {"S": "job"},
        "fencing_token": {"N": "42"},
        "owner_id": {"S": "A"},
        "lease_expires_at_ms": {"N": str(NOW_MS + 30_000)},
        "acquired_at_ms": {"N": str(NOW_MS)},
        "lease_slot_epoch_s": {"N": str(SLOT.epoch_s)},
        "previous_owner_id": {"NULL": True},
        "previous_slot_epoch_s": {"N": str(SLOT.epoch_s - 1800)},
    }
    with Stubber(client) as stubber:
        stubber.add_response("update_item", {"Attributes": all_new}, expected_params=expected)

        # WHEN a racer acquires
        lease = lock.try_acquire(SLOT, "A")

        # THEN that one request was sent, and the lease comes from ALL_NEW
        stubber.assert_no_pending_responses()
    assert isinstance(lease, Lease)
    assert (lease.fencing_token, lease.expires_at_ms, lease.takeover_from, lease.superseded_slot) == (
        42,
        NOW_MS + 30_000,
        None,
        None,
    )
    # AND the request is valid on AWS: no unused or undefined placeholder
    assert_placeholders_match(expected, "try_acquire")


def test_acquire_condition_is_built_from_the_named_clauses() -> None:
    # GIVEN / WHEN / THEN the published constants compose as documented in the module's timeline
    assert SCHEMA_COMPATIBLE == "(attribute_not_exists(#schema_version) OR #schema_version = :schema_version)"
    assert ACQUIRE_CONDITION == (
        "(attribute_not_exists(#schema_version) OR #schema_version = :schema_version)"
        " AND (attribute_not_exists(#pk) OR (attribute_exists(#token)"
        " AND (attribute_not_exists(#last_fin_slot) OR #last_fin_slot < :slot)"
        " AND (attribute_not_exists(#lease_slot) OR #lease_slot <= :slot)"
        " AND NOT contains(#missed, :slot)"
        " AND (attribute_not_exists(#paused_through) OR #paused_through < :slot OR #lease_slot = :slot)"
        " AND ((attribute_not_exists(#owner) OR #expires <= :now) OR (#owner = :owner AND #lease_slot = :slot))))"
    )
    assert ACQUIRE_UPDATE.endswith(", #job = :job, #schema_version = :schema_version ADD #token :one")
    assert OWNER_AND_TOKEN_MATCH == "#owner = :owner AND #token = :token"
    assert HOLDER_CONDITION == f"{SCHEMA_COMPATIBLE} AND #owner = :owner AND #token = :token"


def test_the_layout_clause_is_anded_in_without_redundant_parentheses() -> None:
    # GIVEN / WHEN / THEN a condition with a top-level OR is parenthesized (AND binds tighter), any other is not
    # (DynamoDB refuses redundant parentheses), and a checked condition carries the layout clause once
    assert (
        checked("#a = :a AND #b = :b")
        == checked("#a = :a", "#b = :b")
        == (f"{SCHEMA_COMPATIBLE} AND #a = :a AND #b = :b")
    )
    assert checked(either("attribute_not_exists(#t)", "#t < :t")) == (
        f"{SCHEMA_COMPATIBLE} AND (attribute_not_exists(#t) OR #t < :t)"
    )
    assert checked(either("#a = :a", "#b = :b")) == f"{SCHEMA_COMPATIBLE} AND (#a = :a OR #b = :b)"
    assert checked(SLOT_NOT_ENDED) == SLOT_WRITE_CONDITION
    assert isinstance(ACQUIRE_CONDITION, Condition) and ACQUIRE_CONDITION.count(SCHEMA_COMPATIBLE) == 1
    # AND the SET clause gets the layout at its end, or a SET clause is added when the update has none
    assert update(("SET", ["#e = :e"])) == "SET #e = :e, #schema_version = :schema_version"
    assert update(("SET", ["#e = :e"]), ("REMOVE", ["#o"]), ("ADD", ["#t :one"])) == (
        "SET #e = :e, #schema_version = :schema_version REMOVE #o ADD #t :one"
    )
    assert update(("REMOVE", ["#w.#me"])) == "SET #schema_version = :schema_version REMOVE #w.#me"
    assert ACQUIRE_UPDATE.count(SCHEMA_VERSION_SET) == 1
    # AND a Put's item carries it; the names are derived from the expressions (nothing unused, nothing missing)
    put = write("t", item={"pk": {"S": "k"}}, condition=checked("attribute_not_exists(#pk)"), names={"#pk": "pk"})
    assert put["Item"]["schema_version"] == {"N": "1"}
    assert put["ExpressionAttributeNames"] == {"#schema_version": "schema_version", "#pk": "pk"}
    assert_placeholders_match(put, "put")
    # AND an unchecked condition, or a placeholder no namespace defines, is a bug caught before any request
    with pytest.raises(TypeError):
        write("t", item={"pk": {"S": "k"}}, condition="attribute_not_exists(#pk)", names={"#pk": "pk"})  # type: ignore[arg-type]
    with pytest.raises(KeyError):
        write("t", item={"pk": {"S": "k"}}, condition=checked("attribute_not_exists(#nope)"), names={"#pk": "pk"})


def test_loser_request_is_the_same_single_request_and_uses_all_old(boto_session: Any) -> None:
    # GIVEN a stubbed conditional failure carrying the holder's item (ALL_OLD), as AWS returns it
    client = boto_session.client("dynamodb")
    lock = SlotLock("locks", "job", client=client, clock_ms=lambda: NOW_MS, lease_duration_s=30)
    holder = {
        "pk": {"S": "lock#job"},
        "fencing_token": {"N": "5"},
        "owner_id": {"S": "A"},
        "lease_expires_at_ms": {"N": str(NOW_MS + 10_000)},
        "lease_slot_epoch_s": {"N": str(SLOT.epoch_s)},
    }
    with Stubber(client) as stubber:
        stubber.add_client_error(
            "update_item",
            "ConditionalCheckFailedException",
            "The conditional request failed",
            expected_params=acquire_params("B", NOW_MS + 12_000),
            modeled_fields={"Item": holder},
        )

        # WHEN B races with 12 s left in its invocation
        loss = lock.try_acquire(SLOT, "B", deadline_ms=NOW_MS + 12_000)

        # THEN B lost "held" after that single request (no read)
        stubber.assert_no_pending_responses()
    assert isinstance(loss, Loss) and loss.reason == "held" and loss.holder_owner_id == "A"


# ---------------------------------------------------------------------------------------------------
# Every request of every protocol step, captured on moto
# ---------------------------------------------------------------------------------------------------


def run_every_step(lock: SlotLock, clock: Any, slot: Slot, table: str) -> None:
    """Drive every request type: acquire, lose, heartbeat, record_state, release, takeover, commit
    (succeeded, failed, with a superseded slot and a caller write), record_missed (too_old, overrun)."""
    lease = lock.try_acquire(slot, "A")
    assert isinstance(lease, Lease)
    assert isinstance(lock.try_acquire(slot, "B"), Loss)
    clock.advance(ms=10_000)
    lease = lock.heartbeat(lease)
    lease = lock.record_state(lease, {"query_execution_id": "qe-1"})
    lock.release(lease)
    taken = lock.try_acquire(slot, "B")
    assert isinstance(taken, Lease) and taken.takeover_from == "A"
    lock.commit(taken, writes=[{"Put": {"TableName": table, "Item": {"pk": {"S": "results"}}}}], summary={"rows": 1})

    # an older slot superseded by a crashed holder, then a failed commit
    nxt = Slot(slot.epoch_s + 1800)
    clock.now = nxt.epoch_ms + 1_000
    zombie = lock.try_acquire(nxt, "C")
    assert isinstance(zombie, Lease)
    after = Slot(nxt.epoch_s + 1800)
    clock.now = after.epoch_ms + 55_000
    newest = lock.try_acquire(after, "D")
    assert isinstance(newest, Lease) and newest.superseded_slot == nxt
    # overrun of the next minute while D holds (delivered on time, within D's 30 s lease)
    clock.now = after.epoch_ms + 61_000
    overrun = lock.try_acquire(Slot(after.epoch_s + 60), "E")
    assert isinstance(overrun, Loss) and overrun.missed_recorded
    lock.commit(newest, outcome="failed", error={"type": "QueryFailed"})
    # too old
    assert lock.record_missed(Slot(slot.epoch_s - 1800), "too_old", detail={"age_ms": 1})


def test_every_request_defines_exactly_the_placeholders_it_uses(
    lock: SlotLock, clock: Any, slot: Slot, table: str, request_log: Any
) -> None:
    # GIVEN every protocol step, run on moto with the requests captured at botocore's before-call
    run_every_step(lock, clock, slot, table)

    # WHEN each captured write is inspected
    checked: dict[str, int] = {}
    for operation, body in request_log.calls:
        for kind, request in writes_of(operation, body):
            # THEN no placeholder is unused or undefined (moto would accept both; AWS rejects both)
            assert_placeholders_match(request, f"{operation}/{kind}")
            checked[kind] = checked.get(kind, 0) + 1

    # AND every kind of write was covered
    assert set(checked) >= {"UpdateItem", "GetItem", "Update", "Put"}
    assert request_log.operations.count("TransactWriteItems") == 4  # record_state, 2 commits, overrun record


def test_every_write_of_every_module_sets_the_layout_and_is_conditioned_on_it(
    lock: SlotLock, clock: Any, slot: Slot, table: str, ddb: Any, request_log: Any
) -> None:
    # GIVEN every protocol step, the operator actions, a manual generation and the semaphore, captured
    run_every_step(lock, clock, slot, table)
    clock.now += 3_600_000
    pause(lock, reason="maintenance", requested_by="op")
    paused = Slot(slot.epoch_s + 3 * 1800)
    clock.now = paused.epoch_ms + 1_000
    assert isinstance(lock.try_acquire(paused, "P"), Loss)  # MISSED "paused": a conditional PutItem
    resume(lock, requested_by="op")
    later = Slot(paused.epoch_s + 1800)
    clock.now = later.epoch_ms + 1_000
    held = lock.try_acquire(later, "Q")
    assert isinstance(held, Lease)
    release(lock, reason="stuck", requested_by="op", force=True)
    bump_fencing_token(lock, held.fencing_token + 10)
    request_generation(lock.context, slot, run_id="op-1", kind="rerun", requested_by="op", reason="redo")
    manual = lock.for_generation(2)
    run = manual.try_acquire(slot, "M")
    assert isinstance(run, Lease)
    sem = Semaphore(table, "sem", 1, client=ddb, clock_ms=clock)
    permit = sem.try_acquire_for(run)
    assert isinstance(permit, Permit)
    wait = sem.try_acquire(PermitOwner("other", slot), 1, clock.now + 30_000)
    assert isinstance(wait, Wait)
    sem.renew(sem.record_query(permit, "qe-1"), clock.now + 30_000)
    manual.commit(run, writes=[sem.release_item(permit)])
    sem.leave(wait.ticket)

    # WHEN every write slotlock sent is inspected (the caller's own result write aside)
    writes = [
        (operation, kind, request)
        for operation, body in request_log.calls
        for kind, request in writes_of(operation, body)
        if kind in ("UpdateItem", "PutItem", "Update", "Put")
        and (request.get("Key") or request.get("Item"))["pk"] != {"S": "results"}
    ]

    # THEN each sets schema_version = 1 (its SET clause, or its Put item) and is conditioned on the layout first
    keys = set()
    for operation, kind, request in writes:
        where = f"{operation}/{kind} {request.get('UpdateExpression') or request['Item']['pk']}"
        assert request["ConditionExpression"].startswith(f"{SCHEMA_COMPATIBLE} AND "), where
        if "UpdateExpression" in request:
            assert SCHEMA_VERSION_SET in request["UpdateExpression"], where
        else:
            assert request["Item"]["schema_version"] == {"N": "1"}, where
        assert request["ExpressionAttributeValues"][":schema_version"] == {"N": "1"}, where
        assert_placeholders_match(request, where)
        keys.add((request.get("Key") or request.get("Item"))["pk"]["S"].split("#", 1)[0])
    # AND every kind of item was written
    assert keys == {"lock", "manual", "slot", "generations", "permit", "tickets"}


def test_fenced_writes_are_conditioned_on_owner_and_token_and_return_all_old(
    lock: SlotLock, clock: Any, slot: Slot, table: str, request_log: Any
) -> None:
    # GIVEN every protocol step, captured
    run_every_step(lock, clock, slot, table)

    # WHEN the lock-item writes other than the acquisition are collected
    lock_writes = [
        (operation, kind, request)
        for operation, body in request_log.calls
        for kind, request in writes_of(operation, body)
        if kind in ("UpdateItem", "Update")
        and request["Key"] == {"pk": {"S": lock.lock_key}}
        and request["UpdateExpression"] not in (ACQUIRE_UPDATE, MARK_SLOT_MISSED)
    ]

    # THEN each is conditioned on the layout, owner AND token (never a clock) and asks for ALL_OLD on failure
    assert len(lock_writes) == 5  # heartbeat, record_state, release, 2 commits
    for operation, kind, request in lock_writes:
        assert request["ConditionExpression"] == HOLDER_CONDITION, (operation, kind)
        assert request["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD", (operation, kind)
    # AND every acquisition uses the published expressions
    acquisitions = [body for body in request_log.requests("UpdateItem") if body["UpdateExpression"] == ACQUIRE_UPDATE]
    assert len(acquisitions) == 6
    assert {body["ConditionExpression"] for body in acquisitions} == {ACQUIRE_CONDITION}
    assert {(body["ReturnValues"], body["ReturnValuesOnConditionCheckFailure"]) for body in acquisitions} == {
        ("ALL_NEW", "ALL_OLD")
    }
    # AND nothing overwrites a terminal record: every slot-item write (RUNNING state, commit, MISSED) is
    # conditioned on the item being absent or RUNNING, and returns ALL_OLD to judge a failure
    slot_writes = [
        request
        for operation, body in request_log.calls
        for kind, request in writes_of(operation, body)
        if kind in ("UpdateItem", "Update") and request["Key"]["pk"]["S"].startswith("slot#")
    ]
    assert len(slot_writes) == 6  # record_state, 2 commits, superseded, overrun, too_old
    for request in slot_writes:
        assert request["ConditionExpression"] == SLOT_WRITE_CONDITION == f"{SCHEMA_COMPATIBLE} AND {SLOT_NOT_ENDED}"
        assert request["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    # (all built by the one builder: the slot's identity, status and TTL, then the write's own attributes)
    assert all(
        request["UpdateExpression"].startswith(
            "SET #job = :job, #slot = :slot, #slot_epoch_s = :slot_epoch_s, #generation = :generation,"
            " #status = :status, #ttl_epoch_s = :ttl_epoch_s"
        )
        for request in slot_writes
    )
    missed = [r for r in slot_writes if r["ExpressionAttributeValues"][":status"] == {"S": "MISSED"}]
    assert len(missed) == 3 and all(len(r["ExpressionAttributeValues"][":record_id"]["S"]) == 32 for r in missed)
    # AND the overrun record marks its slot missed on the lock item, on condition that it is not acquired
    # right now, in the same transaction
    marks = [
        (operation, r)
        for operation, body in request_log.calls
        for kind, r in writes_of(operation, body)
        if kind == "Update" and r.get("UpdateExpression") == MARK_SLOT_MISSED
    ]
    assert [(operation, r["ConditionExpression"]) for operation, r in marks] == [
        ("TransactWriteItems", MARK_SLOT_MISSED_CONDITION)
    ]
    assert MARK_SLOT_MISSED_CONDITION == f"{SCHEMA_COMPATIBLE} AND {SLOT_NOT_ACQUIRED}"
    assert marks[0][1]["ExpressionAttributeValues"][":slots"] == {"NS": [str(slot.epoch_s + 3660)]}


def test_commit_carries_a_stable_idempotency_token(lock: SlotLock, slot: Slot, request_log: Any) -> None:
    # GIVEN a committed lease
    lease = lock.try_acquire(slot, "A")
    assert isinstance(lease, Lease)
    lock.commit(lease)

    # WHEN the same commit is resent, and a failed commit of the same lease is attempted
    lock.commit(lease)
    lock.commit(lease, outcome="failed")

    # THEN the resend reuses the ClientRequestToken (DynamoDB's 36-character limit), another outcome does not
    tokens = [body["ClientRequestToken"] for body in request_log.requests("TransactWriteItems")]
    assert len(tokens) == 3 and all(1 <= len(token) <= 36 for token in tokens)
    assert tokens[0] == tokens[1] != tokens[2]


@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
def test_commit_lock_update_removes_owner_and_expiry(
    lock: SlotLock, slot: Slot, request_log: Any, outcome: str
) -> None:
    # GIVEN a lease / WHEN it commits
    lease = lock.try_acquire(slot, "A")
    assert isinstance(lease, Lease)
    lock.commit(lease, outcome=outcome)  # type: ignore[arg-type]

    # THEN the lock item update releases (REMOVE owner and expiry) and keeps the token
    (body,) = request_log.requests("TransactWriteItems")
    lock_update = body["TransactItems"][0]["Update"]
    assert lock_update["Key"] == {"pk": {"S": lock.lock_key}}
    assert lock_update["UpdateExpression"].endswith(", #schema_version = :schema_version REMOVE #expires, #owner")
    assert "#token" not in lock_update["UpdateExpression"]
    assert_placeholders_match(lock_update, f"commit {outcome}")


def test_a_give_back_is_the_fenced_release_with_its_reason_in_the_same_request(
    lock: SlotLock, slot: Slot, request_log: Any
) -> None:
    # GIVEN a lease
    lease = lock.try_acquire(slot, "A")
    assert isinstance(lease, Lease)
    request_log.clear()

    # WHEN its holder gives the slot back for capacity (SlotRun.give_back)
    lock.release(lease, given_back="capacity")

    # THEN one UpdateItem of the lock item, fenced like every release, sets the expiry and the reason together
    (body,) = request_log.requests("UpdateItem")
    assert request_log.operations == ["UpdateItem"]
    assert body["Key"] == {"pk": {"S": lock.lock_key}}
    assert body["UpdateExpression"] == GIVE_BACK_UPDATE
    assert GIVE_BACK_UPDATE == "SET #expires = :expires, #given_back = :given_back, #schema_version = :schema_version"
    assert body["ConditionExpression"] == HOLDER_CONDITION
    assert body["ExpressionAttributeValues"][":given_back"] == {"S": "capacity"}
    assert body["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    assert_placeholders_match(body, "give back")
    # AND every acquisition removes the reason, keeping it as the previous holder's for a superseder
    assert ACQUIRE_UPDATE.startswith(
        "REMOVE #given_back SET #prev_owner = if_not_exists(#owner, :null),"
        " #prev_slot = if_not_exists(#lease_slot, :null), #prev_given_back = if_not_exists(#given_back, :null),"
    )
