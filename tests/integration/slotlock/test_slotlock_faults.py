"""Faults that real DynamoDB produces and neither emulator does on its own, injected at botocore's hooks.

Every test runs on moto and on DynamoDB Local (the ``backend`` fixture). The faulty answers are fabricated
at ``before-call`` (the request is not sent; botocore's own retries sit below that hook, so each injected
answer is one request as the caller sees it) and lost answers at ``after-call`` (the request applied, its
answer never arrives). Shapes follow the TransactWriteItems reference
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html#API_TransactWriteItems_Errors):
one ``CancellationReasons`` entry per item, in request order, ``None`` for the items that did not fail.

One section per rule of the transient-fault issue: (1) cancellations judged item by item, (2) a loser
never raises, (3) terminal states are final, (4) a resend of an applied write is ours, (8) no slot from
the future.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ConnectionClosedError

from slotlock import (
    CommitConflictError,
    InvalidEventError,
    Lease,
    LeaseLostError,
    Loss,
    Slot,
    SlotLock,
    SlotRunner,
    StaleFencingTokenError,
    TransientLockError,
    WriteRejectedError,
)
from slotlock._dynamodb import DEFAULT_MAX_TRANSIENT_ATTEMPTS, LOSER_TRANSIENT_ATTEMPTS

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

TRANSIENT_REASONS = ["ThrottlingError", "ProvisionedThroughputExceeded", "TransactionConflict"]
PERMANENT_REASONS = ["ValidationError", "ItemCollectionSizeLimitExceeded"]
Answer = dict[str, Any]


def cancelled(*codes: str) -> Answer:
    """A TransactionCanceledException answer with one reason per item (``"None"`` where nothing failed)."""
    return {
        "Error": {
            "Code": "TransactionCanceledException",
            "Message": f"Transaction cancelled, please refer cancellation reasons for specific reasons [{', '.join(codes)}]",
        },
        "CancellationReasons": [
            {"Code": code} if code == "None" else {"Code": code, "Message": f"injected {code}"} for code in codes
        ],
        "ResponseMetadata": {"HTTPStatusCode": 400},
    }


def error(code: str) -> Answer:
    """A single-item error answer (HTTP 400), e.g. ``TransactionConflictException`` on an UpdateItem."""
    return {"Error": {"Code": code, "Message": f"injected {code}"}, "ResponseMetadata": {"HTTPStatusCode": 400}}


class Injector:
    """Answers the next matching requests of one operation with planned answers, then lets requests through.

    ``when(body)`` selects the requests (default: all of that operation); ``answers`` are consumed in order.
    ``lose_answers`` makes the next matching requests apply but raise a dropped connection instead of
    their answer. ``injected`` counts the answers given.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.injected = 0
        self._plans: list[tuple[str, Callable[[dict[str, Any]], bool], deque[Answer]]] = []
        self._losses: list[tuple[str, Callable[[dict[str, Any]], bool], list[int]]] = []
        client.meta.events.register("before-call.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def answer(
        self, operation: str, *answers: Answer, when: Callable[[dict[str, Any]], bool] = lambda body: True
    ) -> None:
        self._plans.append((operation, when, deque(answers)))

    def always(
        self, operation: str, answer: Answer, *, when: Callable[[dict[str, Any]], bool] = lambda body: True
    ) -> None:
        self.answer(operation, *([answer] * 100), when=when)

    def lose_answers(
        self, operation: str, count: int = 1, *, when: Callable[[dict[str, Any]], bool] = lambda body: True
    ) -> None:
        self._losses.append((operation, when, [count]))

    def stop(self) -> None:
        self._plans.clear()
        self._losses.clear()

    def _before(self, model: Any, params: dict[str, Any], **_: Any) -> Any:
        body = json.loads(params.get("body") or b"{}")
        for operation, when, answers in self._plans:
            if operation == model.name and answers and when(body):
                self.injected += 1
                return AWSResponse("https://dynamodb.local", 400, {}, None), answers.popleft()
        params["context"]["slotlock_test_body"] = body  # the request context reaches after-call
        return None

    def _after(self, model: Any, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        if http_response.status_code >= 300:
            return
        body = context.get("slotlock_test_body", {})
        for operation, when, remaining in self._losses:
            if operation == model.name and remaining[0] > 0 and when(body):
                remaining[0] -= 1
                self.injected += 1
                raise ConnectionClosedError(endpoint_url="https://dynamodb.local")


@pytest.fixture
def inject(ddb: Any, request_log: Any) -> Any:
    """The injector, registered after ``request_log`` so that the log also sees the answered requests."""
    injector = Injector(ddb)
    yield injector
    injector.stop()
    ddb.meta.events.unregister("before-call.dynamodb", injector._before)
    ddb.meta.events.unregister("after-call.dynamodb", injector._after)


def acquired(result: Lease | Loss) -> Lease:
    assert isinstance(result, Lease), f"expected a lease, got {result}"
    return result


def lost(result: Lease | Loss) -> Loss:
    assert isinstance(result, Loss), f"expected a loss, got {result}"
    return result


def results_put(table: str, key: str, **extra: Any) -> dict[str, Any]:
    """A caller write of the commit: a results item conditioned on being new (as the results store does)."""
    return {
        "Put": {
            "TableName": table,
            "Item": {"pk": {"S": key}, "rows": {"N": "3"}, **extra},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def is_acquisition(body: dict[str, Any]) -> bool:
    return "ADD #token :one" in body.get("UpdateExpression", "")


def is_missed_write(body: dict[str, Any]) -> bool:
    text = json.dumps(body)
    return '"MISSED"' in text


# ---------------------------------------------------------------------------------------------------
# rule 1: a cancellation is judged by its reasons, item by item
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("item", [0, 1], ids=["on-the-lock-item", "on-the-slot-item"])
@pytest.mark.parametrize("reason", TRANSIENT_REASONS)
def test_a_transient_cancellation_of_record_state_is_retried_and_the_lease_kept(
    lock: SlotLock, slot: Slot, clock: Any, inject: Injector, request_log: Any, reason: str, item: int
) -> None:
    # GIVEN a holder whose next two record_state transactions are cancelled with a transient reason
    lease = acquired(lock.try_acquire(slot, "A"))
    codes = ["None", "None"]
    codes[item] = reason
    inject.answer("TransactWriteItems", cancelled(*codes), cancelled(*codes))
    before_ms = clock.now

    # WHEN it records its query id
    lease = lock.record_state(lease, {"query_execution_id": "qe-1"})

    # THEN the third request went through after a backoff: the state is stored and the lease still ours
    assert request_log.operations.count("TransactWriteItems") == 3 and clock.now > before_ms
    assert lock.get_slot_state(slot) == {"query_execution_id": "qe-1"}
    assert lock.get_lock().owned_by("A", lease.fencing_token)


@pytest.mark.parametrize("reason", TRANSIENT_REASONS)
def test_a_transient_cancellation_past_the_budget_is_retryable_and_never_lease_lost(
    lock: SlotLock, slot: Slot, inject: Injector, get_item: Any, reason: str
) -> None:
    # GIVEN a holder whose record_state is cancelled with a transient reason on every attempt
    lease = acquired(lock.try_acquire(slot, "A"))
    inject.always("TransactWriteItems", cancelled("None", reason))

    # WHEN it records its state
    with pytest.raises(TransientLockError) as info:
        lock.record_state(lease, {"query_execution_id": "qe-1"})

    # THEN the error is retryable (Lambda's retry re-enters), names the reasons, and the budget was spent
    assert info.value.retryable and not isinstance(info.value, LeaseLostError)
    assert info.value.reasons == ("None", reason) and info.value.attempts == DEFAULT_MAX_TRANSIENT_ATTEMPTS
    # AND nothing was written, and the lease is still ours (not lost, not corrupt)
    assert get_item(lock.slot_key(slot)) is None
    assert lock.get_lock().owned_by("A", lease.fencing_token)


def test_the_retry_budget_never_outlives_the_lease(lock: SlotLock, slot: Slot, clock: Any, inject: Injector) -> None:
    # GIVEN a holder with 300 ms of lease left, and a commit that is throttled on every attempt
    lease = acquired(lock.try_acquire(slot, "A"))
    clock.now = lease.expires_at_ms - 300
    inject.always("TransactWriteItems", cancelled("None", "ThrottlingError"))

    # WHEN it commits
    with pytest.raises(TransientLockError) as info:
        lock.commit(lease)

    # THEN it stopped retrying before its lease ran out (a successor may take over after that)
    assert clock.now <= lease.expires_at_ms
    assert 1 <= info.value.attempts <= DEFAULT_MAX_TRANSIENT_ATTEMPTS


@pytest.mark.parametrize("reason", TRANSIENT_REASONS)
def test_a_throttled_or_conflicting_results_write_is_retried_never_corrupt_nor_lost(
    lock: SlotLock, slot: Slot, table: str, inject: Injector, get_item: Any, reason: str
) -> None:
    # GIVEN a commit whose caller write (index 2: a results item) is cancelled twice with a transient reason
    lease = acquired(lock.try_acquire(slot, "A"))
    inject.answer("TransactWriteItems", cancelled("None", "None", reason), cancelled("None", "None", reason))

    # WHEN it commits
    receipt = lock.commit(lease, writes=[results_put(table, "results#1")], summary={"rows": 3})

    # THEN the commit applied once: result stored, slot SUCCEEDED, lease released
    assert (receipt.outcome, receipt.already_applied) == ("succeeded", False)
    assert get_item("results#1") is not None and lock.get_slot(slot)["status"] == "SUCCEEDED"
    assert lock.get_lock().last_finished_slot == slot


def test_a_commit_that_ran_out_of_budget_is_retried_by_the_next_attempt(
    lock: SlotLock, slot: Slot, table: str, inject: Injector, get_item: Any
) -> None:
    # GIVEN a commit throttled past its budget (nothing written)
    lease = acquired(lock.try_acquire(slot, "A"))
    inject.always("TransactWriteItems", cancelled("None", "None", "TransactionConflict"))
    with pytest.raises(TransientLockError):
        lock.commit(lease, writes=[results_put(table, "results#1")])
    assert get_item("results#1") is None and lock.get_slot(slot) is None

    # WHEN the throttling ends and the same holder commits again (Lambda's retry would re-enter first)
    inject.stop()
    receipt = lock.commit(lease, writes=[results_put(table, "results#1")])

    # THEN it commits normally
    assert receipt.outcome == "succeeded" and get_item("results#1") is not None


@pytest.mark.parametrize("reason", PERMANENT_REASONS)
def test_a_permanent_reason_is_a_write_rejected_error_and_nothing_is_written(
    lock: SlotLock, slot: Slot, table: str, inject: Injector, request_log: Any, get_item: Any, reason: str
) -> None:
    # GIVEN a commit whose results write is refused for good (an item over 400 KB, say)
    lease = acquired(lock.try_acquire(slot, "A"))
    inject.answer("TransactWriteItems", cancelled("None", "None", reason))
    request_log.clear()

    # WHEN it commits
    with pytest.raises(WriteRejectedError) as info:
        lock.commit(lease, writes=[results_put(table, "results#1")])

    # THEN one request, no retry: not retryable, naming the reason and the item
    assert request_log.operations == ["TransactWriteItems"]
    assert not info.value.retryable and (info.value.reason_code, info.value.index) == (reason, 2)
    assert get_item("results#1") is None and lock.get_lock().owned_by("A", lease.fencing_token)


@pytest.mark.parametrize("reason", PERMANENT_REASONS)
def test_the_runner_records_a_rejected_write_failed_once_and_returns(
    lock: SlotLock, slot: Slot, table: str, inject: Injector, get_item: Any, reason: str
) -> None:
    # GIVEN a function whose commit is refused for good
    inject.answer("TransactWriteItems", cancelled("None", "None", reason))

    def work(run: Any) -> None:
        run.commit(writes=[results_put(table, "results#1")], summary={"rows": 3})

    # WHEN the runner runs the slot
    outcome = SlotRunner(lock).run(work, slot=slot, owner_id="A")

    # THEN it returns (no Lambda retry) with status failed, reason write_rejected, and the slot is FAILED once
    assert (outcome.status, outcome.reason) == ("failed", "write_rejected")
    item = lock.get_slot(slot)
    assert item["status"] == "FAILED" and (item["error"]["type"], item["error"]["reason"]) == (
        "WriteRejectedError",
        reason,
    )
    assert get_item("results#1") is None
    assert lock.get_lock().last_finished_outcome == "failed" and not lock.get_lock().locked(lock.clock_ms())


def test_an_undecided_cancellation_with_the_lease_still_ours_is_retried(
    lock: SlotLock, slot: Slot, inject: Injector, request_log: Any
) -> None:
    # GIVEN a cancellation without any usable reason (all "None")
    lease = acquired(lock.try_acquire(slot, "A"))
    inject.answer("TransactWriteItems", cancelled("None", "None"))
    request_log.clear()

    # WHEN the holder records state
    lock.record_state(lease, {"query_execution_id": "qe-1"})

    # THEN it read the lock item (consistent) once, found itself the holder, and retried
    assert request_log.operations == ["TransactWriteItems", "GetItem", "TransactWriteItems"]
    assert request_log.requests("GetItem")[0]["ConsistentRead"] is True
    assert lock.get_slot_state(slot) == {"query_execution_id": "qe-1"}


def test_an_undecided_cancellation_after_a_takeover_is_a_stale_token(
    lock: SlotLock, slot: Slot, clock: Any, inject: Injector
) -> None:
    # GIVEN A's lease expired and B took the slot over
    lease = acquired(lock.try_acquire(slot, "A"))
    clock.advance(ms=lease.expires_at_ms - clock.now + 1)
    successor = acquired(lock.try_acquire(slot, "B"))
    # AND A's commit is cancelled without a usable reason
    inject.answer("TransactWriteItems", cancelled("None", "None"))

    # WHEN A commits
    with pytest.raises(StaleFencingTokenError) as info:
        lock.commit(lease)

    # THEN the lock item decided it: B holds a newer token
    assert info.value.current is not None and info.value.current.owned_by("B", successor.fencing_token)


def test_an_unknown_reason_code_on_a_caller_write_is_refused_for_good_not_retried(
    lock: SlotLock, slot: Slot, table: str, inject: Injector, request_log: Any
) -> None:
    # GIVEN a cancellation naming a reason code slotlock does not know, on the caller's write
    lease = acquired(lock.try_acquire(slot, "A"))
    inject.answer("TransactWriteItems", cancelled("None", "None", "SomeFutureReason"))
    request_log.clear()

    # WHEN it commits
    with pytest.raises(WriteRejectedError) as info:
        lock.commit(lease, writes=[results_put(table, "results#1")])

    # THEN the lock item was read once (the lease is ours), and the write is refused for good: no retry storm
    assert request_log.operations == ["TransactWriteItems", "GetItem"]
    assert (info.value.reason_code, info.value.index) == ("SomeFutureReason", 2)


def test_a_real_failed_condition_on_a_caller_write_is_a_commit_conflict(
    lock: SlotLock, slot: Slot, table: str, ddb: Any
) -> None:
    # GIVEN the results item the commit wants to create already exists (a real condition failure)
    lease = acquired(lock.try_acquire(slot, "A"))
    ddb.put_item(TableName=table, Item={"pk": {"S": "results#1"}})

    # WHEN it commits / THEN the caller's own condition is named, and the lease is not reported lost
    with pytest.raises(CommitConflictError) as info:
        lock.commit(lease, writes=[results_put(table, "results#1")])
    assert (info.value.index, info.value.code, info.value.fencing_token) == (
        0,
        "ConditionalCheckFailed",
        lease.fencing_token,
    )


@pytest.mark.parametrize("code", ["TransactionConflictException", "ProvisionedThroughputExceededException"])
def test_heartbeat_and_release_retry_a_conflicting_or_throttled_write(
    lock: SlotLock, slot: Slot, clock: Any, inject: Injector, request_log: Any, code: str
) -> None:
    # GIVEN a holder whose next lock-item writes meet a transaction in flight (or throttling) twice each
    lease = acquired(lock.try_acquire(slot, "A"))
    clock.advance(s=10)
    inject.answer("UpdateItem", error(code), error(code))
    request_log.clear()

    # WHEN it renews
    renewed = lock.heartbeat(lease)

    # THEN the third request renewed the lease
    assert request_log.operations == ["UpdateItem"] * 3 and renewed.expires_at_ms > lease.expires_at_ms
    assert lock.get_lock().lease_expires_at_ms == renewed.expires_at_ms

    # AND a release retries the same way
    inject.answer("UpdateItem", error(code))
    lock.release(renewed)
    assert not lock.get_lock().locked(clock.now)


def test_a_heartbeat_conflicting_past_the_budget_is_retryable_not_lease_lost(
    lock: SlotLock, slot: Slot, clock: Any, inject: Injector
) -> None:
    # GIVEN every renewal meets a transaction in flight on the lock item
    lease = acquired(lock.try_acquire(slot, "A"))
    clock.advance(s=10)
    inject.always("UpdateItem", error("TransactionConflictException"))

    # WHEN it renews / THEN a retryable error, and the lease is still ours on the table
    with pytest.raises(TransientLockError) as info:
        lock.heartbeat(lease)
    assert info.value.retryable and info.value.error_code == "TransactionConflictException"
    inject.stop()
    assert lock.get_lock().owned_by("A", lease.fencing_token)


# ---------------------------------------------------------------------------------------------------
# rule 2: a loser never raises
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("TransactionConflictException", "conflict"),
        ("ProvisionedThroughputExceededException", "unavailable"),
        ("ThrottlingException", "unavailable"),
        ("InternalServerError", "unavailable"),
    ],
)
def test_an_acquisition_that_stays_undecided_is_a_normal_loss(
    lock: SlotLock, slot: Slot, inject: Injector, request_log: Any, code: str, reason: str
) -> None:
    # GIVEN the winner's commit is in flight on the lock item (or DynamoDB throttles) for the whole budget
    inject.always("UpdateItem", error(code), when=is_acquisition)

    # WHEN a racer tries
    loss = lost(lock.try_acquire(slot, "B"))

    # THEN it loses normally, saying why, after its short budget of requests
    assert (loss.reason, loss.missed_recorded) == (reason, False)
    assert request_log.operations == ["UpdateItem"] * LOSER_TRANSIENT_ATTEMPTS


def test_an_acquisition_decided_on_the_second_answer_wins(
    lock: SlotLock, slot: Slot, inject: Injector, request_log: Any
) -> None:
    # GIVEN one answer that decides nothing, then the lock item is free
    inject.answer("UpdateItem", error("TransactionConflictException"), when=is_acquisition)

    # WHEN a racer tries / THEN it wins with the first token
    assert acquired(lock.try_acquire(slot, "A")).fencing_token == 1
    assert request_log.operations == ["UpdateItem", "UpdateItem"]


def test_a_loser_decided_by_the_first_answer_sends_one_request(lock: SlotLock, slot: Slot, request_log: Any) -> None:
    # GIVEN a holder
    acquired(lock.try_acquire(slot, "A"))
    request_log.clear()

    # WHEN a racer tries / THEN one request decides it
    assert lost(lock.try_acquire(slot, "B")).reason == "held"
    assert request_log.operations == ["UpdateItem"]


# ---------------------------------------------------------------------------------------------------
# rule 3: terminal states are final and unique
# ---------------------------------------------------------------------------------------------------


def test_a_running_slot_is_never_recorded_missed_and_its_success_carries_no_miss_reason(
    make_lock: Any, slot: Slot, clock: Any, get_item: Any
) -> None:
    # GIVEN a holder of slot S (a long lease), and a racer of S delivered so late that S is too old for it
    lock = make_lock(max_slot_age_s=300, lease_duration_s=900)
    lease = acquired(lock.try_acquire(slot, "A"))
    clock.now = slot.epoch_ms + 360_000

    # WHEN the late racer tries
    late = lost(lock.try_acquire(slot, "late"))

    # THEN it loses too_old but records nothing: the lock item says S is acquired right now
    assert (late.reason, late.missed_recorded) == ("too_old", False)
    assert get_item(lock.slot_key(slot)) is None
    # AND the holder commits; the SUCCEEDED record carries no miss reason
    assert lock.commit(lease).outcome == "succeeded"
    item = lock.get_slot(slot)
    assert item["status"] == "SUCCEEDED" and "reason" not in item


def test_the_racers_of_a_superseded_slot_leave_exactly_one_missed_record(
    lock: SlotLock, slot: Slot, clock: Any, request_log: Any
) -> None:
    # GIVEN the next slot holds the lock
    newer = Slot(slot.epoch_s + 60)
    clock.now = newer.epoch_ms + 1_000
    acquired(lock.try_acquire(newer, "N"))

    # WHEN three racers of the older slot arrive
    losses = [lost(lock.try_acquire(slot, f"O{index}")) for index in range(3)]

    # THEN all lose "superseded", exactly one wrote the MISSED record, and the slot is MISSED
    assert [(loss.reason, loss.missed_recorded) for loss in losses] == [
        ("superseded", True),
        ("superseded", False),
        ("superseded", False),
    ]
    assert lock.get_slot(slot)["status"] == "MISSED" and lock.get_slot(slot)["reason"] == "superseded"


# ---------------------------------------------------------------------------------------------------
# rule 4: an SDK resend of an applied write is ours
# ---------------------------------------------------------------------------------------------------


def test_a_resent_acquisition_whose_first_answer_was_lost_is_our_lease(
    lock: SlotLock, slot: Slot, inject: Injector
) -> None:
    # GIVEN the acquisition applies but its answer is lost (the connection drops)
    inject.lose_answers("UpdateItem", 1)

    # WHEN the racer acquires (its resend finds the lease its own for this slot: a re-entry)
    lease = acquired(lock.try_acquire(slot, "A"))

    # THEN the lease is ours: the resend re-entered it with the next token, as a Lambda retry would
    assert (lease.fencing_token, lease.reentered, lease.takeover) == (2, True, False)
    assert lock.get_lock().owned_by("A", 2)


@pytest.mark.parametrize("path", ["superseded", "too_old"])
def test_a_resent_missed_record_whose_first_answer_was_lost_is_ours(
    make_lock: Any, slot: Slot, clock: Any, inject: Injector, request_log: Any, path: str
) -> None:
    # GIVEN a racer about to record its slot MISSED, whose write applies but whose answer is lost
    lock = make_lock(max_slot_age_s=300)
    if path == "superseded":
        newer = Slot(slot.epoch_s + 60)
        clock.now = newer.epoch_ms + 1_000
        acquired(lock.try_acquire(newer, "N"))
        inject.lose_answers("UpdateItem", 1, when=is_missed_write)
    else:
        clock.now = slot.epoch_ms + 360_000
        inject.lose_answers("TransactWriteItems", 1)
    request_log.clear()

    # WHEN it tries the slot
    loss = lost(lock.try_acquire(slot, "R"))

    # THEN the resend found its own record (same record_id): it reports the record as its own, once
    assert (loss.reason, loss.missed_recorded) == (path, True)
    assert inject.injected == 1
    assert lock.get_slot(slot)["status"] == "MISSED" and lock.get_slot(slot)["reason"] == path
    # AND a second racer does not claim it
    assert lost(lock.try_acquire(slot, "R2")).missed_recorded is False


# ---------------------------------------------------------------------------------------------------
# rule 8: a slot cannot come from the future
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("lead_ms", "accepted"), [(4_000, True), (5_000, True), (6_000, False), (600_000, False)])
def test_a_slot_ahead_of_the_clock_by_more_than_the_allowance_is_refused_before_any_request(
    lock: SlotLock, slot: Slot, clock: Any, request_log: Any, lead_ms: int, accepted: bool
) -> None:
    # GIVEN a delivery whose scheduled time is lead_ms ahead of the racer's clock (allowance: 5 s)
    clock.now = slot.epoch_ms - lead_ms

    # WHEN it tries / THEN within the allowance it races normally; beyond it, refused naming the field
    if accepted:
        assert acquired(lock.try_acquire(slot, "A")).fencing_token == 1
    else:
        with pytest.raises(InvalidEventError) as info:
            lock.try_acquire(slot, "A")
        assert info.value.field == "scheduled_time" and "ahead of this caller's clock" in str(info.value)
        assert request_log.operations == []


def test_the_lead_allowance_is_configurable(make_lock: Any, slot: Slot, clock: Any) -> None:
    # GIVEN a lock that accepts no lead at all
    lock = make_lock(max_slot_lead_s=0)
    clock.now = slot.epoch_ms - 1_000

    # WHEN / THEN a slot 1 s ahead is refused; at its time it is accepted
    with pytest.raises(InvalidEventError):
        lock.try_acquire(slot, "A")
    clock.now = slot.epoch_ms
    assert acquired(lock.try_acquire(slot, "A")).fencing_token == 1
