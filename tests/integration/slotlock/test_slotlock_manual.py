"""Manual runs (``slotlock.manual``): requested generations 2, 3, ... of a slot, run under the job's manual lease.

A manual run never reads nor writes the live lock item: the live schedule always wins and is never delayed.
Everything runs on both backends, racers sequenced one request at a time on the fake clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ConnectionClosedError

from slotlock import (
    CorruptLockItemError,
    GenerationRequest,
    GenerationRequestError,
    InvalidEventError,
    Lease,
    LeaseLostError,
    LockConfigurationError,
    Loss,
    Slot,
    SlotLock,
    StaleFencingTokenError,
    pause,
    request_generation,
)
from slotlock._client import LockTableClient
from slotlock.manual import REQUEST_ATTEMPTS, ManualMarker

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


def keys_touched(request_log: Any) -> list[str]:
    """The partition keys of every item the logged requests read or wrote, in order."""
    keys = []
    for operation, body in request_log.calls:
        if operation == "TransactWriteItems":
            for entry in body["TransactItems"]:
                for write in entry.values():
                    keys.append((write.get("Key") or write.get("Item"))["pk"]["S"])
        elif "Key" in body:
            keys.append(body["Key"]["pk"]["S"])
        elif "Item" in body:
            keys.append(body["Item"]["pk"]["S"])
    return keys


@pytest.fixture
def ask(lock: SlotLock) -> Callable[..., GenerationRequest]:
    """``ask(slot, run_id, kind="rerun", resume=False)``: the operator requests the slot's next generation."""

    def request(slot: Slot, run_id: str, *, kind: str = "rerun", resume: bool = False) -> GenerationRequest:
        return request_generation(
            lock.context,
            slot,
            run_id=run_id,
            kind=kind,  # type: ignore[arg-type]
            requested_by=OPERATOR,
            reason="  the input data was wrong  ",
            resume=resume,
        )

    return request


# ---------------------------------------------------------------------------------------------------
# requesting generations
# ---------------------------------------------------------------------------------------------------


def test_requests_create_generation_2_then_3_with_the_audit(
    lock: SlotLock, slot: Slot, clock: Any, ask: Any, request_log: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN a past slot (the live schedule ran it or not: generations do not depend on it)
    clock.advance(s=86_400)
    requested_at = clock.now

    # WHEN the operator requests a re-run, then a backfill of the same slot
    request_log.clear()
    first = ask(slot, "op-1")
    first_operations = request_log.operations
    clock.advance(s=10)
    second = ask(slot, "op-2", kind="backfill")

    # THEN they are generations 2 and 3, each written by one read and one transaction
    assert first == GenerationRequest(lock.job_name, slot, 2, "op-1", "REQUESTED", created=True)
    assert (second.generation, second.created, second.status) == (3, True, "REQUESTED")
    assert first_operations == ["GetItem", "TransactWriteItems"]
    # AND each generation's item is REQUESTED with who, when, why and which command
    g2 = get_item(f"slot#{lock.job_name}#{slot.iso}#g2")
    assert g2["status"] == {"S": "REQUESTED"}
    assert g2["generation"] == {"N": "2"}
    assert g2["run_id"] == {"S": "op-1"} and g2["run_kind"] == {"S": "rerun"}
    assert g2["requested_by"] == {"S": OPERATOR}
    assert g2["requested_at_ms"] == {"N": str(requested_at)}
    assert g2["request_reason"] == {"S": "the input data was wrong"}
    assert (g2["job"], g2["slot"], g2["slot_epoch_s"]) == (
        {"S": lock.job_name},
        {"S": slot.iso},
        {"N": str(slot.epoch_s)},
    )
    assert g2["ttl_epoch_s"] == {"N": str(requested_at // 1000 + lock.history_ttl_s)}
    assert get_item(f"slot#{lock.job_name}#{slot.iso}#g3")["run_kind"] == {"S": "backfill"}
    # AND the slot's counter says 3 and never expires
    counter = get_item(f"generations#{lock.job_name}#{slot.iso}")
    assert counter["last_generation"] == {"N": "3"}
    assert "ttl_epoch_s" not in counter
    # AND neither lock item was touched, nor the live generation's history item
    assert get_item(lock.lock_key) is None
    assert get_item(lock.for_generation(2).lock_key) is None
    assert get_item(lock.slot_key(slot)) is None
    # AND the generations of other slots are counted apart
    assert ask(Slot(slot.epoch_s + PERIOD_S), "op-3").generation == 2


def test_resume_finds_the_generation_of_the_same_command_instead_of_adding_one(
    lock: SlotLock, slot: Slot, ask: Any, request_log: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN a backfill "bf-1" requested generation 2, and another command generation 3
    ask(slot, "bf-1", kind="backfill")
    ask(slot, "other")

    # WHEN the backfill runs again after a crash (resume)
    request_log.clear()
    again = ask(slot, "bf-1", kind="backfill", resume=True)

    # THEN it finds generation 2 by reads only (counter, g3, g2) and adds nothing
    assert again == GenerationRequest(lock.job_name, slot, 2, "bf-1", "REQUESTED", created=False)
    assert request_log.operations == ["GetItem", "GetItem", "GetItem"]
    assert get_item(f"generations#{lock.job_name}#{slot.iso}")["last_generation"] == {"N": "3"}
    # AND it reports the generation's status as it is now
    manual = lock.for_generation(2)
    lease = acquired(manual.try_acquire(slot, "M"))
    assert ask(slot, "bf-1", kind="backfill", resume=True).status == "REQUESTED"
    manual.record_state(lease, {"query_execution_id": "qe-1"})
    assert ask(slot, "bf-1", kind="backfill", resume=True).status == "RUNNING"
    manual.commit(lease)
    assert ask(slot, "bf-1", kind="backfill", resume=True).status == "SUCCEEDED"
    # AND a resume of a command that requested nothing yet creates the next generation
    fresh = ask(slot, "bf-2", kind="backfill", resume=True)
    assert (fresh.generation, fresh.created) == (4, True)
    # AND without resume, the same command gets a new generation
    assert ask(slot, "bf-1", kind="backfill").generation == 5


@pytest.mark.backends("moto")  # refused before any request
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("run_id", ""),
        ("run_id", "has space"),
        ("run_id", "x" * 129),
        ("run_id", "slash/no"),
        ("kind", "replay"),
        ("requested_by", ""),
        ("requested_by", "a" * 2049),
        ("reason", "   "),
        ("reason", "x" * 1001),
    ],
)
def test_a_bad_request_is_refused_naming_the_field_before_any_request(
    lock: SlotLock, slot: Slot, request_log: Any, field: str, value: str
) -> None:
    fields: dict[str, Any] = {"run_id": "op-1", "kind": "rerun", "requested_by": OPERATOR, "reason": "why"}
    fields[field] = value
    request_log.clear()
    with pytest.raises(LockConfigurationError) as info:
        request_generation(lock.context, slot, **fields)
    assert info.value.parameter == field
    assert request_log.operations == []


def interleave_requests(monkeypatch: pytest.MonkeyPatch, lock: SlotLock, slot: Slot, times: int) -> list[int]:
    """Right after each of our next ``times`` reads of the slot's generation counter, another operator's request
    of the same slot goes through. Returns the generations the other requests got."""
    counter_key = f"generations#{lock.job_name}#{slot.iso}"
    read = LockTableClient.get
    others: list[int] = []
    inside = [False]

    def read_then_another_request(client: LockTableClient, key: str) -> Any:
        item = read(client, key)
        if key == counter_key and not inside[0] and len(others) < times:
            inside[0] = True
            try:
                other = request_generation(
                    lock.context, slot, run_id=f"other-{len(others)}", kind="rerun", requested_by="x", reason="y"
                )
            finally:
                inside[0] = False
            others.append(other.generation)
        return item

    monkeypatch.setattr(LockTableClient, "get", read_then_another_request)
    return others


def test_a_request_that_meets_a_concurrent_request_takes_the_next_generation(
    lock: SlotLock, slot: Slot, ask: Any, monkeypatch: pytest.MonkeyPatch, get_item: Callable[[str], Any]
) -> None:
    # GIVEN another operator's request of the same slot lands between our read of the counter and our write
    others = interleave_requests(monkeypatch, lock, slot, times=1)

    # WHEN we request a generation
    ours = ask(slot, "op-1")
    monkeypatch.undo()

    # THEN the other request got generation 2, ours (read again) generation 3; nothing was overwritten
    assert others == [2]
    assert (ours.generation, ours.created) == (3, True)
    assert get_item(f"slot#{lock.job_name}#{slot.iso}#g2")["run_id"] == {"S": "other-0"}
    assert get_item(f"slot#{lock.job_name}#{slot.iso}#g3")["run_id"] == {"S": "op-1"}
    assert get_item(f"generations#{lock.job_name}#{slot.iso}")["last_generation"] == {"N": "3"}


def test_a_request_that_keeps_meeting_concurrent_requests_gives_up(
    lock: SlotLock, slot: Slot, ask: Any, monkeypatch: pytest.MonkeyPatch, get_item: Callable[[str], Any]
) -> None:
    # GIVEN every one of our reads of the counter is followed by another request
    others = interleave_requests(monkeypatch, lock, slot, times=100)

    # WHEN we request a generation / THEN we give up after the attempts, having written nothing
    with pytest.raises(GenerationRequestError):
        ask(slot, "op-1")
    monkeypatch.undo()
    assert others == list(range(2, 2 + REQUEST_ATTEMPTS))
    last = others[-1]
    assert get_item(f"generations#{lock.job_name}#{slot.iso}")["last_generation"] == {"N": str(last)}
    assert get_item(f"slot#{lock.job_name}#{slot.iso}#g{last + 1}") is None


@pytest.mark.parametrize("value", [{"S": "2"}, {"N": "0"}, {"N": "2.5"}])
def test_a_corrupt_generation_counter_is_reported_not_overwritten(
    lock: SlotLock, slot: Slot, ask: Any, ddb: Any, table: str, get_item: Callable[[str], Any], value: Any
) -> None:
    key = f"generations#{lock.job_name}#{slot.iso}"
    ddb.put_item(TableName=table, Item={"pk": {"S": key}, "last_generation": value})
    with pytest.raises(CorruptLockItemError) as info:
        ask(slot, "op-1")
    assert (info.value.key, info.value.attribute) == (key, "last_generation")
    assert get_item(key)["last_generation"] == value


# ---------------------------------------------------------------------------------------------------
# running a generation
# ---------------------------------------------------------------------------------------------------


def test_a_manual_run_has_no_maximum_slot_age_but_no_future_slot(
    make_lock: Callable[..., SlotLock], slot: Slot, clock: Any, request_log: Any
) -> None:
    # GIVEN a lock that skips live deliveries older than 5 minutes, a week after the slot
    lock = make_lock(max_slot_age_s=300)
    clock.advance(s=7 * 86_400)
    request_generation(lock.context, slot, run_id="bf-1", kind="backfill", requested_by=OPERATOR, reason="gap")

    # WHEN the live racer and the backfill of the slot arrive
    live = lost(lock.try_acquire(slot, "L"))
    lease = acquired(lock.for_generation(2).try_acquire(slot, "M"))

    # THEN the live one is too old, the backfill runs
    assert live.reason == "too_old" and lease.generation == 2
    # AND a manual run of a future slot is refused before any request
    future = Slot(clock.now // 1000 + 3600)
    request_log.clear()
    with pytest.raises(InvalidEventError) as info:
        lock.for_generation(2).try_acquire(future, "F")
    assert info.value.field == "scheduled_time"
    assert request_log.operations == []


def test_a_never_requested_generation_is_refused_and_the_manual_lease_given_back(
    lock: SlotLock, slot: Slot, clock: Any, ask: Any, request_log: Any
) -> None:
    # GIVEN no generation 5 was requested
    manual = lock.for_generation(5)
    request_log.clear()

    # WHEN an invocation carries generation 5
    with pytest.raises(InvalidEventError) as info:
        manual.try_acquire(slot, "M")

    # THEN it is refused, naming the event's field, after the lease was given back
    assert info.value.field == "manual.generation"
    assert request_log.operations == ["UpdateItem", "GetItem", "UpdateItem"]
    record = manual.get_lock()
    assert record.owner_id == "M" and not record.locked(clock.now)
    # AND a requested generation's run acquires at once (the manual lease is free)
    ask(slot, "op-1")
    assert acquired(lock.for_generation(2).try_acquire(slot, "M2")).fencing_token == 2


def test_a_manual_run_never_touches_the_live_lock_and_runs_beside_the_live_racer(
    lock: SlotLock, slot: Slot, clock: Any, ask: Any, table: str, request_log: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN the live schedule's holder L of the slot, and generation 2 of the same slot requested
    live = acquired(lock.try_acquire(slot, "L"))
    ask(slot, "op-1")
    manual = lock.for_generation(2)
    live_item = get_item(lock.lock_key)
    g2_key = manual.slot_key(slot)
    assert g2_key == f"slot#{lock.job_name}#{slot.iso}#g2"

    # WHEN the manual run M acquires generation 2 (one UpdateItem of the manual item, one read of g2)
    request_log.clear()
    lease_m = acquired(manual.try_acquire(slot, "M"))
    assert request_log.operations == ["UpdateItem", "GetItem"]
    assert keys_touched(request_log) == [manual.lock_key, g2_key]
    assert (lease_m.generation, lease_m.fencing_token, lease_m.takeover, lease_m.reentered) == (2, 1, False, False)
    record = manual.get_lock()
    assert (record.owner_id, record.lease_slot, record.lease_generation) == ("M", slot, 2)
    # AND a live racer of the same slot meets only the live holder (held), untouched by M
    assert lost(lock.try_acquire(slot, "L2")).reason == "held"
    # AND M records its query: g2 becomes RUNNING, keeping the request's audit
    request_log.clear()
    lease_m = manual.record_state(lease_m, {"query_execution_id": "qe-m"})
    assert set(keys_touched(request_log)) == {manual.lock_key, g2_key}
    g2 = manual.get_slot(slot)
    assert (g2["status"], g2["generation"], g2["fencing_token"], g2["owner_id"]) == ("RUNNING", 2, 1, "M")
    assert (g2["run_id"], g2["run_kind"], g2["state"]) == ("op-1", "rerun", {"query_execution_id": "qe-m"})
    # AND the live holder records and commits its own run of the slot meanwhile
    live = lock.record_state(live, {"query_execution_id": "qe-live"})
    lock.commit(live, summary={"by": "L"})
    live_item = get_item(lock.lock_key)

    # WHEN M commits generation 2
    clock.advance(s=5)
    request_log.clear()
    receipt = manual.commit(lease_m, summary={"rows": 7})

    # THEN g2 is SUCCEEDED under the manual token, and the manual lock item records the generation
    assert (receipt.outcome, receipt.generation, receipt.fencing_token, receipt.already_applied) == (
        "succeeded",
        2,
        1,
        False,
    )
    assert set(keys_touched(request_log)) == {manual.lock_key, g2_key}
    g2 = manual.get_slot(slot)
    assert (g2["status"], g2["summary"]) == ("SUCCEEDED", {"rows": 7})
    assert (g2["run_id"], g2["requested_by"]) == ("op-1", OPERATOR)
    record = manual.get_lock()
    assert (record.owner_id, record.last_finished_slot, record.last_finished_generation) == (None, slot, 2)
    assert (record.last_finished_outcome, record.last_finished_token) == ("succeeded", 1)
    # AND the live lock item and the live run's history are exactly as the live holder left them
    assert get_item(lock.lock_key) == live_item
    live_record = lock.get_slot(slot)
    assert (live_record["status"], live_record["generation"], live_record["owner_id"]) == ("SUCCEEDED", 1, "L")
    assert live_record["state"] == {"query_execution_id": "qe-live"}


def test_the_live_lock_item_is_byte_identical_around_a_whole_manual_run(
    lock: SlotLock, slot: Slot, clock: Any, ask: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN the live schedule ran the slot; an operator re-runs it a day later
    lock.commit(acquired(lock.try_acquire(slot, "L")))
    clock.advance(s=86_400)
    ask(slot, "op-1")
    live_item = get_item(lock.lock_key)
    live_history = get_item(lock.slot_key(slot))

    # WHEN the manual run acquires, heartbeats, records state, releases, re-enters and commits
    manual = lock.for_generation(2)
    lease = acquired(manual.try_acquire(slot, "M"))
    clock.advance(s=1)
    lease = manual.heartbeat(lease)
    lease = manual.record_state(lease, {"query_execution_id": "qe-m"})
    manual.release(lease)
    lease = acquired(manual.try_acquire(slot, "M"))
    assert lease.reentered and dict(lease.state) == {"query_execution_id": "qe-m"}
    manual.commit(lease)

    # THEN neither the live lock item nor the live history item changed by one byte
    assert get_item(lock.lock_key) == live_item
    assert get_item(lock.slot_key(slot)) == live_history


def test_a_live_racer_acquires_the_slot_while_a_manual_run_holds_it(
    lock: SlotLock, slot: Slot, clock: Any, ask: Any, request_log: Any
) -> None:
    # GIVEN a manual run of generation 2 of the slot holds the manual lease
    ask(slot, "op-1")
    manual = lock.for_generation(2)
    lease_m = acquired(manual.try_acquire(slot, "M"))

    # WHEN the live schedule's racer of the same slot arrives
    request_log.clear()
    live = acquired(lock.try_acquire(slot, "L"))

    # THEN it acquires with one request and the first live token, unaware of M
    assert request_log.operations == ["UpdateItem"]
    assert (live.fencing_token, live.generation, live.takeover) == (1, 1, False)
    # AND both finish, each on its own items
    lock.commit(live)
    manual.commit(lease_m)
    assert lock.get_slot(slot)["status"] == manual.get_slot(slot)["status"] == "SUCCEEDED"
    assert lock.get_lock().last_finished_slot == slot and manual.get_lock().last_finished_generation == 2


def test_manual_runs_are_not_paused(lock: SlotLock, slot: Slot, ask: Any) -> None:
    # GIVEN the live schedule is paused
    pause(lock, reason="maintenance", requested_by=OPERATOR)
    ask(slot, "op-1")

    # WHEN the live racer and the manual run of the slot arrive
    live = lost(lock.try_acquire(slot, "L"))
    lease_m = acquired(lock.for_generation(2).try_acquire(slot, "M"))

    # THEN the live one loses "paused" and the operator's own run runs
    assert live.reason == "paused"
    assert lock.for_generation(2).commit(lease_m).outcome == "succeeded"


def test_a_second_manual_run_loses_busy_and_the_same_generation_loses_held(
    lock: SlotLock, slot: Slot, clock: Any, ask: Any, request_log: Any
) -> None:
    # GIVEN generations 2 and 3 of the slot and 2 of an older slot requested; M holds generation 2
    ask(slot, "op-1")
    ask(slot, "op-2")
    older = Slot(slot.epoch_s - PERIOD_S)
    ask(older, "op-3")
    lease_m = acquired(lock.for_generation(2).try_acquire(slot, "M"))
    clock.advance(ms=500)

    # WHEN other manual invocations arrive
    request_log.clear()
    other_generation = lost(lock.for_generation(3).try_acquire(slot, "N"))
    other_slot = lost(lock.for_generation(2).try_acquire(older, "O"))
    same_generation = lost(lock.for_generation(2).try_acquire(slot, "D"))

    # THEN another run loses "busy", another owner of the same run "held", each after one request
    assert request_log.operations == ["UpdateItem"] * 3
    assert (other_generation.reason, other_generation.generation) == ("busy", 3)
    assert (other_slot.reason, other_slot.generation) == ("busy", 2)
    assert (same_generation.reason, same_generation.generation) == ("held", 2)
    for loss in (other_generation, other_slot, same_generation):
        assert loss.holder_owner_id == "M" and loss.holder_expires_at_ms == lease_m.expires_at_ms
        assert not loss.missed_recorded
    # AND nothing of theirs was written
    assert lock.for_generation(3).get_slot(slot)["status"] == "REQUESTED"
    assert lock.for_generation(2).get_lock().owned_by("M", 1)
    # AND once M committed, generation 3 runs
    lock.for_generation(2).commit(lease_m)
    assert acquired(lock.for_generation(3).try_acquire(slot, "N")).fencing_token == 2


def test_takeover_of_an_expired_manual_holder_adopts_the_generations_state(
    lock: SlotLock, slot: Slot, clock: Any, ask: Any, request_log: Any
) -> None:
    # GIVEN M1 ran generation 2, recorded its query, then stalled
    ask(slot, "op-1")
    manual = lock.for_generation(2)
    lease_1 = acquired(manual.try_acquire(slot, "M1"))
    lease_1 = manual.record_state(lease_1, {"query_execution_id": "qe-1"})

    # WHEN its lease expires and M2 (Lambda's retry would be M1 itself) arrives
    clock.advance(ms=LEASE_MS + 1)
    request_log.clear()
    lease_2 = acquired(manual.try_acquire(slot, "M2"))

    # THEN M2 takes over with the next manual token and adopts the recorded query
    assert request_log.operations == ["UpdateItem", "GetItem"]
    assert (lease_2.takeover_from, lease_2.fencing_token, lease_2.generation) == ("M1", 2, 2)
    assert not lease_2.reentered
    assert dict(lease_2.state) == {"query_execution_id": "qe-1"}
    # AND the stale holder is fenced out: its heartbeat, state and commit are all refused
    with pytest.raises(LeaseLostError):
        manual.heartbeat(lease_1)
    with pytest.raises(LeaseLostError):
        manual.record_state(lease_1, {"query_execution_id": "qe-1-again"})
    with pytest.raises(StaleFencingTokenError) as stale:
        manual.commit(lease_1, summary={"by": "M1"})
    assert stale.value.current is not None and stale.value.current.owned_by("M2", 2)
    assert manual.get_slot(slot)["state"] == {"query_execution_id": "qe-1"}
    # AND M2 commits; the stale commit's retry is still rejected after that
    manual.commit(lease_2, summary={"by": "M2"})
    with pytest.raises(StaleFencingTokenError):
        manual.commit(lease_1, summary={"by": "M1"})
    g2 = manual.get_slot(slot)
    assert (g2["status"], g2["summary"], g2["fencing_token"]) == ("SUCCEEDED", {"by": "M2"}, 2)


def test_a_holders_own_retry_reenters_its_generation(lock: SlotLock, slot: Slot, clock: Any, ask: Any) -> None:
    ask(slot, "op-1")
    manual = lock.for_generation(2)
    first = acquired(manual.try_acquire(slot, "M"))
    manual.record_state(first, {"query_execution_id": "qe-1"})
    clock.advance(ms=1_000)
    retry = acquired(manual.try_acquire(slot, "M"))
    assert (retry.reentered, retry.takeover, retry.fencing_token) == (True, False, 2)
    assert dict(retry.state) == {"query_execution_id": "qe-1"}
    with pytest.raises(StaleFencingTokenError):
        manual.commit(first)


def test_a_terminal_generation_is_lost_as_slot_finished_and_the_lease_given_back(
    lock: SlotLock, slot: Slot, clock: Any, ask: Any, request_log: Any, get_item: Callable[[str], Any]
) -> None:
    # GIVEN generation 2 ran and committed
    ask(slot, "op-1")
    manual = lock.for_generation(2)
    manual.commit(acquired(manual.try_acquire(slot, "M1")), summary={"rows": 1})
    g2 = get_item(manual.slot_key(slot))

    # WHEN a duplicate invocation of generation 2 arrives
    clock.advance(s=60)
    request_log.clear()
    loss = lost(manual.try_acquire(slot, "M2"))

    # THEN it loses "slot_finished" after acquiring, reading g2 and giving the lease back
    assert (loss.reason, loss.generation, loss.missed_recorded) == ("slot_finished", 2, False)
    assert request_log.operations == ["UpdateItem", "GetItem", "UpdateItem"]
    record = manual.get_lock()
    assert record.owner_id == "M2" and not record.locked(clock.now) and record.fencing_token == 2
    assert get_item(manual.slot_key(slot)) == g2
    # AND the next generation runs at once
    ask(slot, "op-2")
    assert acquired(lock.for_generation(3).try_acquire(slot, "M3")).fencing_token == 3


def test_a_resent_commit_is_recognised_as_already_applied(lock: SlotLock, slot: Slot, clock: Any, ask: Any) -> None:
    # GIVEN M committed generation 2 with outcome "failed"
    ask(slot, "op-1")
    manual = lock.for_generation(2)
    lease = acquired(manual.try_acquire(slot, "M"))
    first = manual.commit(lease, outcome="failed", error={"type": "QueryFailed"})

    # WHEN the same commit is sent again a moment later (its answer was lost: the caller retries it; an
    # identical request at the same instant would carry the same ClientRequestToken, which DynamoDB, unlike
    # moto, answers idempotently as a plain success)
    clock.advance(s=2)
    again = manual.commit(lease, outcome="failed", error={"type": "QueryFailed"})

    # THEN it is recognised from the generation's item, with the outcome that applied
    assert (first.already_applied, again.already_applied) == (False, True)
    assert (again.outcome, again.fencing_token, again.generation) == ("failed", 1, 2)
    # (even when the resend asks for another outcome: the applied one is reported)
    assert manual.commit(lease, outcome="succeeded").outcome == "failed"


@pytest.fixture
def lose_answers(ddb: Any) -> Iterator[list[int]]:
    """``lose_answers[0] = n``: the next ``n`` TransactWriteItems apply, but their answers are lost (a dropped
    connection raised at ``after-call``, after DynamoDB applied the request)."""
    remaining = [0]

    def after(model: Any, http_response: Any, **_: Any) -> None:
        if model.name == "TransactWriteItems" and http_response.status_code < 300 and remaining[0] > 0:
            remaining[0] -= 1
            raise ConnectionClosedError(endpoint_url="https://dynamodb.local")

    ddb.meta.events.register("after-call.dynamodb", after)
    yield remaining
    ddb.meta.events.unregister("after-call.dynamodb", after)


def test_a_commit_whose_answer_was_lost_is_found_applied_on_the_generation_item(
    lock: SlotLock, slot: Slot, ask: Any, request_log: Any, lose_answers: list[int]
) -> None:
    # GIVEN M holds generation 2 and the answer to its commit will be lost
    ask(slot, "op-1")
    manual = lock.for_generation(2)
    lease = acquired(manual.try_acquire(slot, "M"))
    lose_answers[0] = 1
    request_log.clear()

    # WHEN it commits (slotlock resends it as a new attempt; the resend fails its conditions)
    receipt = manual.commit(lease, summary={"rows": 2})

    # THEN the resend's failure is judged as our own applied commit, read from g2
    assert lose_answers == [0]
    assert (receipt.already_applied, receipt.outcome, receipt.generation) == (True, "succeeded", 2)
    assert request_log.operations == ["TransactWriteItems", "TransactWriteItems", "GetItem"]
    g2 = manual.get_slot(slot)
    assert (g2["status"], g2["summary"], g2["fencing_token"]) == ("SUCCEEDED", {"rows": 2}, 1)


def test_a_request_whose_answer_was_lost_is_recognised_as_ours(
    lock: SlotLock, slot: Slot, ask: Any, request_log: Any, lose_answers: list[int], get_item: Callable[[str], Any]
) -> None:
    # GIVEN the answer to the operator's request transaction will be lost
    lose_answers[0] = 1
    request_log.clear()

    # WHEN the operator requests a generation (slotlock resends it; the resend fails its conditions)
    request = ask(slot, "op-1")

    # THEN the applied request is recognised as ours: generation 2, created once, the counter at 2
    assert lose_answers == [0]
    assert (request.generation, request.created) == (2, True)
    assert request_log.operations.count("TransactWriteItems") == 2
    assert get_item(f"generations#{lock.job_name}#{slot.iso}")["last_generation"] == {"N": "2"}
    assert get_item(f"slot#{lock.job_name}#{slot.iso}#g3") is None


# ---------------------------------------------------------------------------------------------------
# the event's marker (no I/O)
# ---------------------------------------------------------------------------------------------------

GOOD_MARKER = {"generation": 2, "run_id": "op-1", "kind": "rerun", "requested_by": OPERATOR, "reason": " why "}


def test_a_good_marker_is_parsed() -> None:
    marker = ManualMarker.from_event({"scheduled_time": "2026-11-22T00:30:00Z", "manual": dict(GOOD_MARKER)})
    assert marker == ManualMarker(generation=2, run_id="op-1", kind="rerun", requested_by=OPERATOR, reason="why")
    assert marker.as_event_field() == {**GOOD_MARKER, "reason": "why"}


def test_a_marker_without_generation_runs_through_the_live_path() -> None:
    fields = {name: value for name, value in GOOD_MARKER.items() if name != "generation"}
    marker = ManualMarker.from_event({"manual": {**fields, "kind": "run"}})
    assert marker is not None and marker.generation is None and marker.kind == "run"
    assert "generation" not in marker.as_event_field()


@pytest.mark.parametrize("event", [{"scheduled_time": "2026-11-22T00:30:00Z"}, [], None, "manual"])
def test_an_event_without_a_marker_is_a_scheduled_invocation(event: Any) -> None:
    assert ManualMarker.from_event(event) is None


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"generation": 1}, "manual.generation"),
        ({"generation": 0}, "manual.generation"),
        ({"generation": 1_000_001}, "manual.generation"),
        ({"generation": True}, "manual.generation"),
        ({"generation": "2"}, "manual.generation"),
        ({"generation": 2.0}, "manual.generation"),
        ({"run_id": ""}, "manual.run_id"),
        ({"run_id": "a b"}, "manual.run_id"),
        ({"run_id": None}, "manual.run_id"),
        ({"run_id": "x" * 129}, "manual.run_id"),
        ({"kind": "replay"}, "manual.kind"),
        ({"kind": None}, "manual.kind"),
        ({"requested_by": ""}, "manual.requested_by"),
        ({"requested_by": 7}, "manual.requested_by"),
        ({"reason": ""}, "manual.reason"),
        ({"reason": "   "}, "manual.reason"),
        ({"reason": "x" * 1001}, "manual.reason"),
    ],
)
def test_a_bad_marker_is_refused_naming_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        ManualMarker.from_event({"manual": {**GOOD_MARKER, **changes}})
    assert info.value.field == field


@pytest.mark.parametrize("marker", [[], "rerun", 2, None])
def test_a_marker_that_is_not_an_object_is_refused(marker: Any) -> None:
    with pytest.raises(InvalidEventError) as info:
        ManualMarker.from_event({"manual": marker})
    assert info.value.field == "manual"
