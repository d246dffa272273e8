"""Bad input, nothing lost: hostile slots, tampered items, failed queries and odd result values.

Each case checks three things: a clear error that names the problem, the right retry decision (a
permanent problem returns or is reported without a Lambda retry; only transient trouble is raised), and
that no stored data changed (a snapshot of both tables and the overflow bucket before and after).

Retry decisions, by kind (see also ``athena_refresh.service.handle``):

- malformed or far-future event, bad configuration: ``InvalidEventError`` / ``ConfigurationError`` raised
  before any AWS request (the handler tests count them); Lambda's two async retries repeat no request;
- tampered lock item, slot item or results pointer: ``CorruptLockItemError`` (raised by the lock, reported
  by the handler as status ``corrupt`` with the ``CorruptLockItem`` metric, not retried: it cannot heal);
- Athena FAILED: Athena's ``Retryable`` flag decides, whatever the ErrorCategory; retryable failures start
  at most ``max_query_attempts`` queries, then, like permanent ones, the slot is recorded FAILED once and the
  invocation returns normally;
- result values that cannot be typed: the slot is recorded FAILED (the same rows fail every retry).

Every test runs on moto and on DynamoDB Local unless it says why not (moto raises a Python TypeError where
AWS evaluates a wrong-typed comparison as false).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.stub import Stubber

from athena_refresh.engine import AthenaQueryEngine
from athena_refresh.errors import CorruptResultsItemError
from athena_refresh.results import ResultsStore
from athena_refresh.settings import Settings
from athena_refresh.stored import LATEST
from slotlock import (
    CommitConflictError,
    CorruptLockItemError,
    InvalidEventError,
    Lease,
    Slot,
    SlotLock,
)

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

PREVIOUS_SLOT_OFFSET_S = 600  # a 10-minute schedule: the previous slot is well inside the max slot age
DYNAMODB_LOCAL_ONLY = pytest.mark.backends("dynamodb-local")
REMOVE = None  # in a tampering spec: remove the attribute


class SimulatedCrash(BaseException):
    """The invocation dies here; BaseException, so no ``except Exception`` under test can swallow it."""


# ---------------------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------------------


@pytest.fixture
def history(make_runner: Any, make_job: Any, make_engine: Any, clock: Any, slot: Slot, run: Any) -> Slot:
    """The previous slot ran and committed (token 1): the tables hold a lock item, a slot item, a result
    and the LATEST pointer, so "nothing changed" is checked against real data. Returns that slot."""
    previous = Slot(slot.epoch_s - PREVIOUS_SLOT_OFFSET_S)
    now = clock.now
    clock.now = previous.epoch_ms + 2_000
    assert run(make_runner(), make_job(make_engine()), "req-previous", for_slot=previous).status == "succeeded"
    clock.now = now
    return previous


@pytest.fixture
def snapshot(ddb: Any, s3: Any, lock_table: str, results_table: str, bucket: str) -> Callable[[], dict[str, Any]]:
    """``snapshot()``: every item of both tables (strongly consistent) and every overflow object key."""

    def scan(table: str) -> list[str]:
        items: list[dict[str, Any]] = []
        for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
            items.extend(page["Items"])
        return sorted(json.dumps(item, sort_keys=True) for item in items)

    def take() -> dict[str, Any]:
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
        return {"lock_table": scan(lock_table), "results_table": scan(results_table), "bucket": sorted(keys)}

    return take


@pytest.fixture
def tamper(ddb: Any) -> Callable[..., dict[str, Any]]:
    """``tamper(table, key, {attribute: DynamoDB JSON value or REMOVE})``: rewrite one item by hand, as an
    operator (or an attacker) with PutItem rights would. Returns the new item."""

    def edit(table: str, key: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
        item = ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item", dict(key))
        for name, value in changes.items():
            if value is REMOVE:
                item.pop(name, None)
            else:
                item[name] = value
        ddb.put_item(TableName=table, Item=item)
        return item

    return edit


def crash_after_query_started(runner: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A runner whose Lambda dies right after recording its query id, without releasing the lease."""

    def listener(checkpoint: str, lease: Lease) -> None:
        if checkpoint == "query_started":
            raise SimulatedCrash(checkpoint)

    runner.listener = listener
    monkeypatch.setattr(runner.lock, "release", lambda lease: None)
    return runner


# ---------------------------------------------------------------------------------------------------
# a far-future scheduled time
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ahead_s", [6, 60, 301, 24 * 3600, 70 * 365 * 24 * 3600], ids=["6-s", "1-min", "5-min", "1-day", "70-years"]
)
def test_future_slot_is_refused_before_any_request(
    ahead_s: int,
    history: Slot,
    lock: SlotLock,
    clock: Any,
    snapshot: Any,
    request_log: Any,
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
) -> None:
    # GIVEN a delivery whose scheduled time is ahead of the racer's clock by more than the 5 s clock-skew
    # allowance (the Scheduler never delivers early: a hostile or mistyped event); acquiring it would make
    # the current slot's racers lose as "superseded"
    clock.now = clock.now // 60_000 * 60_000 + 1_000  # just after a minute, so a slot can be ``ahead_s`` ahead
    future = Slot((clock.now // 1000 + ahead_s + 59) // 60 * 60)
    before = snapshot()
    request_log.clear()

    # WHEN it races
    with pytest.raises(InvalidEventError) as info:
        lock.try_acquire(future, "req-hostile")

    # THEN it is refused naming the field and the lead, before any request; nothing changed
    assert info.value.field == "scheduled_time" and "ahead of this caller's clock" in str(info.value)
    assert request_log.operations == []
    assert snapshot() == before
    # AND the real current slot still runs
    assert run(make_runner(), make_job(make_engine()), "req-A").status == "succeeded"


def test_a_slot_slightly_ahead_of_a_skewed_clock_still_runs(
    make_runner: Any, make_job: Any, make_engine: Any, run: Any, clock: Any, slot: Slot
) -> None:
    # GIVEN a racer whose clock runs 4 seconds behind the scheduler's (within the 5 s allowance)
    clock.now = slot.epoch_ms - 4_000
    # WHEN / THEN it runs the slot
    assert run(make_runner(), make_job(make_engine()), "req-A").status == "succeeded"


# ---------------------------------------------------------------------------------------------------
# tampered lock items
# ---------------------------------------------------------------------------------------------------

LIVE_OWNER = {"owner_id": {"S": "req-other"}}


def _live(clock_ms: int) -> dict[str, Any]:
    return {**LIVE_OWNER, "lease_expires_at_ms": {"N": str(clock_ms + 20_000)}}


MOTO_TYPE_ERROR = "moto 5.2.5 raises a Python TypeError on a wrong-typed comparison; AWS evaluates it as false"
MOTO_PARTIAL_UPDATE = (
    "moto 5.2.5 applies the SET actions of an UpdateItem whose ADD then fails (ValidationException); AWS and "
    "DynamoDB Local apply an update all-or-nothing"
)
# (id, changes(clock_ms, slot) -> tampering of the lock item, attribute named, why moto cannot run it)
LOCK_TAMPERING: list[tuple[str, Callable[[int, Slot], dict[str, Any]], str, str | None]] = [
    # an ADD on a missing counter would silently restart it at 1: the acquire condition requires it
    ("token-removed", lambda now, s: {"fencing_token": REMOVE}, "fencing_token", None),
    ("token-string", lambda now, s: {"fencing_token": {"S": "1"}}, "fencing_token", MOTO_PARTIAL_UPDATE),
    (
        "expiry-removed-under-owner",
        lambda now, s: {**LIVE_OWNER, "lease_expires_at_ms": REMOVE},
        "lease_expires_at_ms",
        None,
    ),
    ("owner-number-live-lease", lambda now, s: {**_live(now), "owner_id": {"N": "7"}}, "owner_id", None),
    (
        "expiry-string-under-owner",
        lambda now, s: {**LIVE_OWNER, "lease_expires_at_ms": {"S": str(now - 1)}},
        "lease_expires_at_ms",
        MOTO_TYPE_ERROR,
    ),
    (
        "last-finished-slot-string",
        lambda now, s: {"last_finished_slot_epoch_s": {"S": s.iso}},
        "last_finished_slot_epoch_s",
        MOTO_TYPE_ERROR,
    ),
    ("lease-slot-string", lambda now, s: {"lease_slot_epoch_s": {"S": s.iso}}, "lease_slot_epoch_s", MOTO_TYPE_ERROR),
    (
        "expiry-as-list",
        lambda now, s: {**LIVE_OWNER, "lease_expires_at_ms": {"L": [{"N": "1"}]}},
        "lease_expires_at_ms",
        MOTO_TYPE_ERROR,
    ),
]


@pytest.mark.parametrize(
    ("changes", "attribute", "not_on_moto"),
    [case[1:] for case in LOCK_TAMPERING],
    ids=[case[0] for case in LOCK_TAMPERING],
)
def test_tampered_lock_item_is_reported_naming_the_attribute_and_nothing_changes(
    changes: Callable[[int, Slot], dict[str, Any]],
    attribute: str,
    not_on_moto: str | None,
    backend: str,
    history: Slot,
    lock: SlotLock,
    lock_table: str,
    tamper: Any,
    snapshot: Any,
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    clock: Any,
) -> None:
    if not_on_moto and backend == "moto":
        pytest.skip(not_on_moto)
    # GIVEN the job's lock item was edited by hand
    tamper(lock_table, {"pk": {"S": lock.lock_key}}, changes(clock.now, history))
    before = snapshot()
    engine = make_engine()

    # WHEN a racer of the next slot runs
    with pytest.raises(CorruptLockItemError) as info:
        run(make_runner(), make_job(engine), "req-A")

    # THEN the error names the item and the attribute (not a silent "held" or "superseded", forever)
    assert (info.value.key, info.value.attribute) == (lock.lock_key, attribute)
    assert str(info.value).startswith(f"lock item {lock.lock_key!r}: attribute {attribute!r}")
    # AND no query was started and nothing stored changed (the corrupt item is left for the operator)
    assert engine.calls == []
    assert snapshot() == before


# ---------------------------------------------------------------------------------------------------
# tampered slot (history) items
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state_json", "problem"),
    [
        ({"S": "{not json"}, "is not valid JSON"),
        ({"S": "[1, 2]"}, "must hold a JSON object, found list"),
        ({"N": "1"}, "must be a String holding a JSON object, found Number"),
    ],
    ids=["not-json", "json-list", "number"],
)
@pytest.mark.parametrize("successor", ["takeover", "own-retry"])
def test_tampered_in_flight_state_is_reported_and_the_lease_given_back(
    state_json: dict[str, Any],
    problem: str,
    successor: str,
    lock: SlotLock,
    lock_table: str,
    slot: Slot,
    tamper: Any,
    snapshot: Any,
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    clock: Any,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN A started the query, recorded its id on the slot item and died; then the item was edited
    engine = make_engine([["RUNNING", "SUCCEEDED"]])
    with pytest.raises(SimulatedCrash):
        run(crash_after_query_started(make_runner(), monkeypatch), make_job(engine), "req-A")
    slot_key = lock.slot_key(slot)
    tamper(lock_table, {"pk": {"S": slot_key}}, {"state_json": state_json})
    clock.advance(s=settings.lease_duration_s + 1)
    before = snapshot()

    # WHEN a successor (another racer, or A's own Lambda retry) acquires the slot and would adopt the state
    owner = "req-B" if successor == "takeover" else "req-A"
    with pytest.raises(CorruptLockItemError) as info:
        run(make_runner(), make_job(engine), owner)

    # THEN the error names the slot item and the attribute
    assert (info.value.key, info.value.attribute) == (slot_key, "state_json")
    assert problem in str(info.value)
    # AND it started no query, left the tampered item and the results as they were, and gave the lease
    # back at once (expiry = now) instead of holding it until it expires
    assert len(engine.starts) == 1
    after = snapshot()
    assert after["results_table"] == before["results_table"] and after["bucket"] == before["bucket"]
    assert lock.get_lock().lease_expires_at_ms == clock.now
    raw = [json.loads(i) for i in after["lock_table"] if json.loads(i)["pk"]["S"] == slot_key]
    assert raw[0]["state_json"] == state_json


@pytest.mark.parametrize(
    ("state", "attribute", "problem"),
    [
        ({"attempt": "2", "query_execution_id": "qe-1"}, "state_json.attempt", "must be an integer from 1 to"),
        ({"attempt": 0, "query_execution_id": "qe-1"}, "state_json.attempt", "found 0"),
        ({"attempt": 10**12, "query_execution_id": "qe-1"}, "state_json.attempt", "max_query_attempts"),
        ({"attempt": True, "query_execution_id": "qe-1"}, "state_json.attempt", "found True"),
        ({"attempt": 1, "query_execution_id": 123}, "state_json.query_execution_id", "found 123"),
        (
            {"attempt": 1, "query_execution_id": "has a space"},
            "state_json.query_execution_id",
            "Athena query execution id",
        ),
        ({"attempt": 1, "query_execution_id": "q" * 129}, "state_json.query_execution_id", "1..128"),
    ],
    ids=["attempt-string", "attempt-zero", "attempt-huge", "attempt-bool", "qid-number", "qid-space", "qid-too-long"],
)
def test_ill_typed_adopted_state_is_corrupt_never_a_retried_error(
    state: dict[str, Any],
    attribute: str,
    problem: str,
    lock: SlotLock,
    lock_table: str,
    slot: Slot,
    tamper: Any,
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    clock: Any,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN A started the query and died; then its recorded state was edited into valid JSON of wrong types
    engine = make_engine([["RUNNING", "SUCCEEDED"]])
    with pytest.raises(SimulatedCrash):
        run(crash_after_query_started(make_runner(), monkeypatch), make_job(engine), "req-A")
    slot_key = lock.slot_key(slot)
    tamper(lock_table, {"pk": {"S": slot_key}}, {"state_json": {"S": json.dumps(state)}})
    clock.advance(s=settings.lease_duration_s + 1)

    # WHEN a successor acquires the slot and would adopt the state
    with pytest.raises(CorruptLockItemError) as info:
        run(make_runner(), make_job(engine), "req-B")

    # THEN it is reported corrupt (the handler returns status "corrupt": no Lambda retry), naming the slot
    # item and the attribute, before any query call with the bad values
    assert (info.value.key, info.value.attribute) == (slot_key, attribute)
    assert problem in str(info.value)
    assert len(engine.starts) == 1 and not isinstance(info.value, ValueError)
    # AND the lease was given back at once
    assert lock.get_lock().lease_expires_at_ms == clock.now


# ---------------------------------------------------------------------------------------------------
# tampered results (the fenced resource)
# ---------------------------------------------------------------------------------------------------


MOTO_TYPE_ERROR = (
    "moto 5.2.5 reports a String-vs-Number comparison in a condition as a cancellation reason 'TypeError' (no"
    " ALL_OLD item); AWS and DynamoDB Local evaluate it as false (ConditionalCheckFailed). slotlock judges a reason"
    " code it does not know, with the lease still ours, as a permanent refusal (WriteRejectedError: the runner"
    " records the slot FAILED, so no CommitConflictError is raised); the DynamoDB Local run proves the AWS behaviour"
)


@pytest.mark.parametrize(
    ("target", "changes", "attribute", "problem"),
    [
        ("latest", {"fencing_token": {"S": "1"}, "latest_slot": "<slot>"}, "fencing_token", "must be a Number"),
        ("latest", {"fencing_token": {"N": "99"}, "latest_slot": "<slot>"}, "fencing_token", "is 99, not below"),
        ("slot", {"fencing_token": {"N": "1"}, "rows_json": {"S": "[]"}}, "slot", "already holds a result"),
    ],
    ids=["latest-token-string", "latest-token-above-the-counter", "result-already-there"],
)
def test_results_that_contradict_the_lock_refuse_the_commit_as_a_whole(
    target: str,
    changes: dict[str, Any],
    attribute: str,
    problem: str,
    backend: str,
    history: Slot,
    results_table: str,
    store: ResultsStore,
    settings: Settings,
    tamper: Any,
    snapshot: Any,
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    request: pytest.FixtureRequest,
) -> None:
    if backend == "moto" and changes.get("fencing_token") == {"S": "1"}:
        request.applymarker(pytest.mark.xfail(raises=pytest.fail.Exception, strict=True, reason=MOTO_TYPE_ERROR))
    # GIVEN the results table was edited: the LATEST pointer (naming the coming slot: only the same slot and
    # generation compare tokens), or a result planted for the coming slot
    if "latest_slot" in changes:
        changes = {**changes, "latest_slot": {"S": slot.iso}}
    key_slot = LATEST if target == "latest" else slot.iso
    tamper(results_table, {"job": {"S": settings.job_name}, "slot": {"S": key_slot}}, changes)
    before = snapshot()

    # WHEN the slot's winner commits
    with pytest.raises(CommitConflictError) as info:
        run(make_runner(), make_job(make_engine()), "req-A")

    # THEN the whole transaction was refused (no result, no completion), and the results store explains
    # which item contradicts the lock
    explained = store.conflict_error(
        info.value.index,
        info.value.item,
        job_name=settings.job_name,
        slot_iso=slot.iso,
        fencing_token=info.value.fencing_token,
        code=info.value.code,
    )
    assert isinstance(explained, CorruptResultsItemError)
    assert (explained.key, explained.attribute) == (f"{settings.job_name}/{key_slot}", attribute)
    if backend == "dynamodb-local" or target != "latest" or "99" in problem:
        assert problem in str(explained)  # moto returns no ALL_OLD item for a wrong-typed comparison
    after = snapshot()
    assert after["results_table"] == before["results_table"] and after["bucket"] == before["bucket"]
    assert lock.get_slot(slot)["status"] == "RUNNING"  # type: ignore[index]
    assert lock.get_lock().last_finished_slot == history


@pytest.mark.backends("moto")  # no DynamoDB request
@pytest.mark.parametrize(
    ("pointer_token", "code", "blames_the_counter", "says"),
    [
        (
            {"N": "99"},
            "ConditionalCheckFailed",
            True,
            "is 99, not below the committing token 7, which the lock item holds",
        ),
        ({"N": "7"}, "ConditionalCheckFailed", True, "is 7, not below the committing token 7"),
        ({"N": "3"}, "ConditionalCheckFailed", False, "is 3, below the committing token 7"),
        ({"N": "3"}, "TypeError", False, "(TypeError)"),
    ],
    ids=["above", "equal", "below", "unknown-code"],
)
def test_a_refused_pointer_blames_the_fencing_counter_only_when_the_tokens_show_it(
    pointer_token: dict[str, str], code: str, blames_the_counter: bool, says: str, store: ResultsStore
) -> None:
    # GIVEN a commit under token 7 (which the lock item holds) refused at the LATEST pointer write
    # WHEN the results store explains it
    explained = store.conflict_error(
        1, {"fencing_token": pointer_token}, job_name="job", slot_iso="2026-11-22T00:30:00Z", fencing_token=7, code=code
    )

    # THEN it names the pointer and its token, and says "counter went back" only for a token at or above 7
    assert (explained.key, explained.attribute) == ("job/LATEST", "fencing_token")
    assert says in str(explained)
    assert ("fencing counter went back" in str(explained)) is blames_the_counter


# ---------------------------------------------------------------------------------------------------
# Athena FAILED: Athena's Retryable flag decides
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("athena_error", "queries"),
    [
        (
            {
                "error_category": 2,
                "error_type": 1006,
                "retryable": False,
                "error_message": "SYNTAX_ERROR: line 1:8: Column 'orign' cannot be resolved",
            },
            1,
        ),
        (
            {
                "error_category": 2,
                "error_type": 1001,
                "retryable": False,
                "error_message": "Permission denied on S3 path: s3://flights/2013/",
            },
            1,
        ),
        ({"error_category": 1, "error_type": 401, "retryable": True, "error_message": "internal error"}, 3),
        ({"error_category": 1, "error_type": 402, "retryable": False, "error_message": "system error"}, 1),
        ({"error_category": 3, "error_type": 9999, "retryable": True, "error_message": "other"}, 3),
        ({}, 1),  # FAILED without any AthenaError: nothing says a retry could help
    ],
    ids=["user-syntax", "user-permission", "system-retryable", "system-not-retryable", "other-retryable", "none"],
)
def test_failed_query_is_retried_only_when_athena_says_so_and_fails_the_slot_once(
    athena_error: dict[str, Any],
    queries: int,
    history: Slot,
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    snapshot: Any,
    request_log: Any,
    clock: Any,
    settings: Settings,
) -> None:
    # GIVEN every query of this slot ends FAILED with this AthenaError (max_query_attempts = 3)
    assert settings.max_query_attempts == 3
    request_log.clear()
    engine = make_engine([["RUNNING", {"state": "FAILED", **athena_error}]] * 3)
    before = snapshot()

    # WHEN the slot runs
    outcome = run(make_runner(), make_job(engine), "req-A")

    # THEN it returned normally (no Lambda retry) after the bounded number of queries
    assert outcome.status == "failed" and len(engine.starts) == queries
    assert outcome.details["attempt"] == queries
    assert outcome.details["retryable"] is bool(athena_error.get("retryable"))
    assert outcome.details.get("error_message") == athena_error.get("error_message")
    # AND the slot is recorded FAILED once, and no result was stored
    assert sum('"FAILED"' in json.dumps(r) for r in request_log.requests("TransactWriteItems")) == 1
    assert lock.get_slot(slot)["status"] == "FAILED"  # type: ignore[index]
    after = snapshot()
    assert after["results_table"] == before["results_table"] and after["bucket"] == before["bucket"]
    # AND no later delivery or retry runs it again
    clock.advance(s=120)
    assert run(make_runner(), make_job(engine), "req-A").reason == "slot_finished"
    assert len(engine.starts) == queries


# ---------------------------------------------------------------------------------------------------
# result values: every Athena type and NULL, stored faithfully or refused before the commit
# ---------------------------------------------------------------------------------------------------

QID = "11111111-2222-3333-4444-555555555555"
# (name, Athena ColumnInfo.Type, VarCharValue as Athena prints it, value stored)
TYPED_COLUMNS: list[tuple[str, str, str, Any]] = [
    ("flag", "boolean", "true", True),
    ("tiny", "tinyint", "-128", -128),
    ("small", "smallint", "32767", 32767),
    ("n", "integer", "2147483647", 2147483647),
    ("big", "bigint", "9223372036854775807", 9223372036854775807),
    ("ratio", "double", "-12.75", -12.75),
    ("real_value", "real", "3.4028235E38", 3.4028235e38),
    ("not_a_number", "double", "NaN", "NaN"),
    ("amount", "decimal(38,9)", "12345678901234567890.123456789", "12345678901234567890.123456789"),
    ("day", "date", "2013-01-01", "2013-01-01"),
    ("at", "timestamp(3)", "2013-01-01 05:00:00.000", "2013-01-01T05:00:00.000"),
    ("at_zone", "timestamp(3) with time zone", "2013-01-01 05:00:00.000 UTC", "2013-01-01T05:00:00.000+00:00"),
    ("name", "varchar", 'Zürich ✈ "quoted" \\ back', 'Zürich ✈ "quoted" \\ back'),
    ("empty", "varchar", "", ""),
    ("code", "char", "UA", "UA"),
    ("bytes", "varbinary", "68 65 6c 6c 6f", "68 65 6c 6c 6f"),
    ("tags", "array", "[JFK, LGA]", "[JFK, LGA]"),
    ("by_origin", "map", "{EWR=1, JFK=2}", "{EWR=1, JFK=2}"),
    ("pair", "row", "{x=1, y=foo}", "{x=1, y=foo}"),
    ("doc", "json", '{"a":[1,null]}', '{"a":[1,null]}'),
    ("clock_time", "time", "12:30:00.000", "12:30:00.000"),
    ("mystery", "geometry", "POINT (1 2)", "POINT (1 2)"),  # unknown type name: kept as printed
]


@pytest.fixture
def athena_engine_answering(boto_session: Any) -> Callable[..., tuple[Any, Stubber]]:
    """``athena_engine_answering(columns, rows)``: a real :class:`AthenaQueryEngine` whose client (stubbed)
    answers one start, one SUCCEEDED poll and one results page of ``rows`` (VarCharValues; None is NULL)."""

    def make(columns: list[tuple[str, str]], rows: list[list[str | None]]) -> tuple[Any, Stubber]:
        return _stubbed_engine(boto_session.client("athena"), columns, rows)

    return make


def _stubbed_engine(client: Any, columns: list[tuple[str, str]], rows: list[list[str | None]]) -> tuple[Any, Stubber]:
    stubber = Stubber(client)
    stubber.add_response("start_query_execution", {"QueryExecutionId": QID})
    stubber.add_response(
        "get_query_execution",
        {
            "QueryExecution": {
                "QueryExecutionId": QID,
                "Status": {"State": "SUCCEEDED"},
                "Statistics": {"DataScannedInBytes": 1024, "TotalExecutionTimeInMillis": 300},
            },
        },
    )
    info = [{"Name": n, "Label": n, "Type": t} for n, t in columns]
    header = {"Data": [{"VarCharValue": n} for n, _ in columns]}
    data = [{"Data": [{} if v is None else {"VarCharValue": v} for v in values]} for values in rows]
    stubber.add_response(
        "get_query_results", {"ResultSet": {"Rows": [header, *data], "ResultSetMetadata": {"ColumnInfo": info}}}
    )
    stubber.activate()
    return AthenaQueryEngine(workgroup="athena-refresh", database="flights_demo", client=client), stubber


def test_every_athena_type_and_null_in_every_type_is_stored_and_read_back(
    athena_engine_answering: Any,
    make_runner: Any,
    make_job: Any,
    run: Any,
    store: ResultsStore,
    settings: Settings,
    slot: Slot,
) -> None:
    # GIVEN Athena answers one row with a value of every type, and one row of NULLs
    columns = [(name, kind) for name, kind, _, _ in TYPED_COLUMNS]
    engine, stubber = athena_engine_answering(columns, [[raw for *_, raw, _ in TYPED_COLUMNS], [None] * len(columns)])

    # WHEN the slot runs and commits
    outcome = run(make_runner(), make_job(engine), "req-A")

    # THEN the typed values and the NULLs are stored, and read back exactly
    assert outcome.status == "succeeded"
    stubber.assert_no_pending_responses()
    stored = store.get_result(settings.job_name, slot.iso)
    assert stored is not None
    assert stored["rows"] == [{name: value for name, _, _, value in TYPED_COLUMNS}, dict.fromkeys(dict(columns))]
    assert stored["columns"] == [{"name": n, "type": t} for n, t in columns]


@pytest.mark.parametrize(
    ("column_type", "raw", "shown"),
    [
        ("bigint", "12abc", "'12abc'"),
        ("date", "2013-02-30", "'2013-02-30'"),
        ("timestamp", "x" * 1_000_000, "... (1000000 characters)"),
    ],
    ids=["bigint", "impossible-date", "megabyte-value"],
)
def test_a_value_that_does_not_fit_its_type_fails_the_slot_before_any_result_is_written(
    column_type: str,
    raw: str,
    shown: str,
    athena_engine_answering: Any,
    history: Slot,
    make_runner: Any,
    make_job: Any,
    run: Any,
    lock: SlotLock,
    snapshot: Any,
    slot: Slot,
    clock: Any,
) -> None:
    # GIVEN Athena answers a value that does not parse as its declared type
    engine, _ = athena_engine_answering([("origin", "varchar"), ("v", column_type)], [["EWR", raw]])
    before = snapshot()

    # WHEN the slot runs
    outcome = run(make_runner(), make_job(engine), "req-A")

    # THEN the slot ended FAILED with an error naming column, type and (an excerpt of) the value, and the
    # invocation returned normally: the same rows would fail every retry
    assert outcome.status == "failed"
    error = dict(outcome.details)
    assert (error["type"], error["column"], error["column_type"], error["query_execution_id"]) == (
        "ResultTypeError",
        "v",
        column_type,
        QID,
    )
    assert shown in error["error_message"] and len(error["value"]) < 300
    assert lock.get_slot(slot)["error"] == error  # type: ignore[index]
    # AND nothing of the results was written
    after = snapshot()
    assert after["results_table"] == before["results_table"] and after["bucket"] == before["bucket"]
    # AND the finished slot does not run again
    clock.advance(s=60)
    assert run(make_runner(), make_job(engine), "req-B").reason == "slot_finished"


# ---------------------------------------------------------------------------------------------------
# TTL deletion of history items (DynamoDB Local deletes by real time)
# ---------------------------------------------------------------------------------------------------


@DYNAMODB_LOCAL_ONLY
def test_the_lock_does_not_depend_on_history_items_surviving_ttl(
    ddb: Any,
    lock_table: str,
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    store: ResultsStore,
    settings: Settings,
    clock: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN the lock table with TTL on ttl_epoch_s, as the stack creates it, and history kept 60 s only:
    # on the fake clock every slot item is already expired in real time, so DynamoDB Local deletes it
    ddb.update_time_to_live(
        TableName=lock_table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl_epoch_s"}
    )

    def wait_until_deleted(key: str) -> None:
        deadline = time.monotonic() + 30
        while "Item" in ddb.get_item(TableName=lock_table, Key={"pk": {"S": key}}, ConsistentRead=True):
            assert time.monotonic() < deadline, f"DynamoDB Local did not delete {key} within 30 s"
            time.sleep(0.2)

    # AND winner A died after starting its query; its slot item (the in-flight state) was deleted by TTL
    engine = make_engine([["RUNNING", "SUCCEEDED"]])
    with pytest.raises(SimulatedCrash):
        run(crash_after_query_started(make_runner(history_ttl_s=60), monkeypatch), make_job(engine), "req-A")
    wait_until_deleted(lock.slot_key(slot))
    clock.advance(s=settings.lease_duration_s + 1)

    # WHEN B takes over: there is no state to adopt
    outcome = run(make_runner(history_ttl_s=60), make_job(engine), "req-B")

    # THEN B restarts attempt 1 with the same ClientRequestToken, which Athena answers with A's query:
    # still one query for the slot, committed under B's token
    assert (outcome.status, outcome.fencing_token, outcome.adopted_state) == ("succeeded", 2, False)
    assert len(engine.queries) == 1 and len({s["token"] for s in engine.starts}) == 1
    assert store.get_result(settings.job_name, slot.iso)["query_execution_id"] == next(iter(engine.queries))  # type: ignore[index]

    # WHEN a late delivery arrives (the finished slot's history item is expired too, deleted or not yet)
    clock.advance(s=60)
    late = run(make_runner(history_ttl_s=60), make_job(engine), "req-C")

    # THEN the lock item (never given a TTL) says the slot finished: it does not run again
    assert (late.status, late.reason) == ("lost", "slot_finished")
    assert lock.get_lock().fencing_token == 2 and len(engine.queries) == 1
