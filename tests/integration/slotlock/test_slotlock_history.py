"""``slotlock.SlotHistory``: a job's history, every generation, newest first, by Query on the sparse index.

The history is written by the protocol itself (live runs, MISSED records, requested and manual generations),
sequenced on the fake clock, then read back on both backends. Both emulators update the index synchronously,
so the eventual consistency of a real index plays no part here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from slotlock import (
    HistoryRecord,
    Lease,
    LockConfigurationError,
    Loss,
    Slot,
    SlotHistory,
    SlotLock,
    pause,
    request_generation,
)
from slotlock.history import decode_record
from slotlock.table import HISTORY_INDEX

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

PERIOD_S = 1800
OPERATOR = "arn:aws:iam::123456789012:user/op"


def acquired(result: Lease | Loss) -> Lease:
    assert isinstance(result, Lease), f"expected a lease, got {result}"
    return result


def lost(result: Lease | Loss) -> Loss:
    assert isinstance(result, Loss), f"expected a loss, got {result}"
    return result


@dataclass
class Written:
    """The slots of the written history; ``expected``: (slot, generation, status) newest first."""

    slots: list[Slot]
    expected: list[tuple[Slot, int, str]]


def ids(records: list[HistoryRecord]) -> list[tuple[Slot, int, str]]:
    return [(record.slot, record.generation, record.status) for record in records]


@pytest.fixture
def history(ddb: Any, table: str) -> SlotHistory:
    return SlotHistory(table, client=ddb)


@pytest.fixture
def written(lock: SlotLock, slot: Slot, clock: Any) -> Written:
    """Four half-hourly slots: S0 SUCCEEDED (+ g2 SUCCEEDED, g3 REQUESTED), S1 FAILED (+ g2 REQUESTED),
    S2 MISSED superseded, S3 RUNNING; a pause, so every kind of non-history item exists too."""
    s0, s1, s2, s3 = (Slot(slot.epoch_s + PERIOD_S * index) for index in range(4))
    clock.now = s0.epoch_ms + 2_000
    lock.commit(acquired(lock.try_acquire(s0, "A0")), summary={"rows": 3})
    clock.now = s1.epoch_ms + 2_000
    lock.commit(acquired(lock.try_acquire(s1, "A1")), outcome="failed", error={"type": "QueryFailed"})
    clock.now = s3.epoch_ms + 2_000
    lease_3 = acquired(lock.try_acquire(s3, "A3"))
    lock.record_state(lease_3, {"query_execution_id": "qe-3"})
    assert lost(lock.try_acquire(s2, "late")).reason == "superseded"  # S2 delivered after S3 started
    for target, run_id in ((s0, "op-1"), (s0, "op-2"), (s1, "op-3")):
        request_generation(lock.context, target, run_id=run_id, kind="rerun", requested_by=OPERATOR, reason="why")
    manual = lock.for_generation(2)
    manual.commit(acquired(manual.try_acquire(s0, "M")), summary={"rows": 4})
    pause(lock, reason="maintenance", requested_by=OPERATOR)
    return Written(
        slots=[s0, s1, s2, s3],
        expected=[
            (s3, 1, "RUNNING"),
            (s2, 1, "MISSED"),
            (s1, 2, "REQUESTED"),
            (s1, 1, "FAILED"),
            (s0, 3, "REQUESTED"),
            (s0, 2, "SUCCEEDED"),
            (s0, 1, "SUCCEEDED"),
        ],
    )


def all_pages(
    history: SlotHistory, job: str, *, start_key: dict[str, Any] | None = None, **params: Any
) -> list[list[HistoryRecord]]:
    """Every page of one selection, from ``start_key`` on, until a page has no next key."""
    pages = []
    for _ in range(50):
        page = history.page(job, start_key=start_key, **params)
        pages.append(page.records)
        if page.next_key is None:
            return pages
        start_key = page.next_key
    raise AssertionError("the pages never ended")


@pytest.mark.backends("moto")  # plain reads
def test_every_slot_and_generation_comes_back_newest_first(
    history: SlotHistory, lock: SlotLock, written: Written, request_log: Any
) -> None:
    # WHEN the job's history is read in one page
    request_log.clear()
    page = history.page(lock.job_name)

    # THEN it is one Query on the history index, newest slot first, each slot's newest generation first
    assert request_log.operations == ["Query"]
    [query] = request_log.requests("Query")
    assert (query["IndexName"], query["ScanIndexForward"], query["Limit"]) == (HISTORY_INDEX, False, 50)
    assert ids(page.records) == written.expected
    assert page.next_key is None
    # AND each record carries what its writer recorded
    s0, s1, s2, s3 = written.slots
    by_id = {(record.slot, record.generation): record for record in page.records}
    running = by_id[(s3, 1)]
    assert (running.owner_id, running.fencing_token, running.state) == ("A3", 3, {"query_execution_id": "qe-3"})
    assert running.started_at_ms is not None and running.finished_at_ms is None and running.duration_ms is None
    missed = by_id[(s2, 1)]
    assert (missed.reason, missed.error["holder_slot"]) == ("superseded", s3.iso)
    failed = by_id[(s1, 1)]
    assert (failed.error, failed.committed, failed.run_id) == ({"type": "QueryFailed"}, True, None)
    rerun = by_id[(s0, 2)]
    assert (rerun.summary, rerun.run_id, rerun.run_kind, rerun.requested_by) == ({"rows": 4}, "op-1", "rerun", OPERATOR)
    assert (rerun.request_reason, rerun.fencing_token, rerun.owner_id) == ("why", 1, "M")
    assert rerun.duration_ms is not None and rerun.duration_ms >= 0
    requested = by_id[(s0, 3)]
    assert (requested.run_id, requested.committed, requested.owner_id) == ("op-2", False, None)
    assert requested.requested_at_ms is not None
    assert all(record.job_name == lock.job_name and record.corrupt is None for record in page.records)
    # AND every record is JSON-safe
    as_dicts = json.loads(json.dumps([record.as_dict() for record in page.records]))
    assert [(entry["slot"], entry["generation"]) for entry in as_dicts[:2]] == [(s3.iso, 1), (s2.iso, 1)]


def test_records_pages_through_everything_newest_slot_first(
    history: SlotHistory, lock: SlotLock, written: Written, request_log: Any
) -> None:
    # WHEN the records are iterated two at a time
    request_log.clear()
    records = list(history.records(lock.job_name, page_size=2))

    # THEN every record comes once, slots newest first (a slot's generations may straddle a page break,
    # where their order is DynamoDB's), in four or five Queries
    assert sorted(ids(records), reverse=True) == written.expected
    assert len(set(ids(records))) == len(records) == 7
    slots = [record.slot for record in records]
    assert slots == sorted(slots, reverse=True)
    assert set(request_log.operations) == {"Query"} and 4 <= len(request_log.operations) <= 5
    # AND a limit stops early
    assert len(list(history.records(lock.job_name, page_size=2, limit=3))) == 3
    [newest] = history.records(lock.job_name, limit=1)
    assert newest.slot == written.slots[3]


@pytest.mark.backends("moto")  # plain reads
def test_since_and_until_bound_the_slots(history: SlotHistory, lock: SlotLock, written: Written) -> None:
    s0, s1, s2, s3 = written.slots
    assert ids(history.page(lock.job_name, since=s1).records) == written.expected[:4]
    assert ids(history.page(lock.job_name, until=s1).records) == written.expected[2:]
    assert ids(history.page(lock.job_name, since=s1, until=s2).records) == written.expected[1:4]
    assert ids(history.page(lock.job_name, since=Slot(s3.epoch_s + 60)).records) == []
    assert ids(history.slot_records(lock.job_name, s0)) == written.expected[4:]
    assert ids(history.slot_records(lock.job_name, Slot(s0.epoch_s + 60))) == []
    # (bounds and a status filter together)
    assert ids(history.page(lock.job_name, since=s1, status="REQUESTED").records) == [(s1, 2, "REQUESTED")]
    assert ids(history.page(lock.job_name, until=s0, status="REQUESTED").records) == [(s0, 3, "REQUESTED")]


def test_a_status_filter_may_give_short_pages_with_a_next_key(
    history: SlotHistory, lock: SlotLock, written: Written
) -> None:
    # WHEN only REQUESTED records are read, one evaluated item per page
    pages = all_pages(history, lock.job_name, status="REQUESTED", limit=1)

    # THEN all of them come back, and no page is longer than the limit
    records = [record for page in pages for record in page]
    assert ids(records) == [(written.slots[1], 2, "REQUESTED"), (written.slots[0], 3, "REQUESTED")]
    assert all(len(page) <= 1 for page in pages)
    # AND the filter applies after the limit (both emulators do as DynamoDB): pages that evaluated another
    # status come back empty, with a next key, so seven items take at least seven pages
    assert len(pages) >= 7 and [] in pages
    # AND one page with room for everything holds exactly the filtered records
    page = history.page(lock.job_name, status="SUCCEEDED")
    assert ids(page.records) == [(written.slots[0], 2, "SUCCEEDED"), (written.slots[0], 1, "SUCCEEDED")]
    missed = list(history.records(lock.job_name, status="MISSED", page_size=3))
    assert ids(missed) == [(written.slots[2], 1, "MISSED")]


def test_next_key_continues_where_the_page_ended(history: SlotHistory, lock: SlotLock, written: Written) -> None:
    first = history.page(lock.job_name, limit=3)
    assert len(first.records) == 3 and first.next_key is not None
    rest = all_pages(history, lock.job_name, limit=3, start_key=first.next_key)
    later = [record for page in rest for record in page]
    assert len(later) == 4
    assert not set(ids(first.records)) & set(ids(later))
    assert min(record.slot for record in first.records) >= max(record.slot for record in later)


@pytest.mark.backends("moto")  # plain reads
def test_only_history_items_are_in_the_index(
    ddb: Any, table: str, lock: SlotLock, written: Written, history: SlotHistory, get_item: Callable[[str], Any]
) -> None:
    # GIVEN the table also holds the live lock item (paused), the manual lock item and generation counters
    s0, s1 = written.slots[:2]
    assert get_item(lock.lock_key) is not None and get_item(lock.for_generation(2).lock_key) is not None
    assert get_item(f"generations#{lock.job_name}#{s0.iso}") is not None
    assert get_item(f"generations#{lock.job_name}#{s1.iso}") is not None

    # WHEN the index is queried raw
    items = ddb.query(
        TableName=table,
        IndexName=HISTORY_INDEX,
        KeyConditionExpression="#job = :job",
        ExpressionAttributeNames={"#job": "job"},
        ExpressionAttributeValues={":job": {"S": lock.job_name}},
    )["Items"]

    # THEN it holds exactly the slot items: no lock item, no manual item, no counter
    keys = sorted(item["pk"]["S"] for item in items)
    scanned = ddb.scan(TableName=table)["Items"]
    assert keys == sorted(item["pk"]["S"] for item in scanned if item["pk"]["S"].startswith("slot#"))
    assert len(keys) == 7 and len(scanned) == 7 + 4
    assert len(history.page(lock.job_name).records) == 7


def test_other_jobs_are_not_listed(
    history: SlotHistory, make_lock: Callable[..., SlotLock], lock: SlotLock, slot: Slot, table: str
) -> None:
    other = make_lock()
    other_job = SlotLock(table, "other-job", client=other.client, clock_ms=other.clock_ms)
    other_job.commit(acquired(other_job.try_acquire(slot, "X")))
    lock.commit(acquired(lock.try_acquire(slot, "A")))
    assert [(record.job_name, record.slot) for record in history.page("other-job").records] == [("other-job", slot)]
    assert [record.job_name for record in history.page(lock.job_name).records] == [lock.job_name]
    assert history.page("never-ran").records == []


def test_a_corrupt_json_attribute_is_reported_not_raised(
    ddb: Any, table: str, lock: SlotLock, slot: Slot, history: SlotHistory
) -> None:
    # GIVEN a good record, and a generation whose item was edited by hand: bad JSON, a Number, a JSON list
    lock.commit(acquired(lock.try_acquire(slot, "A")), summary={"rows": 1})
    ddb.put_item(
        TableName=table,
        Item={
            "pk": {"S": f"slot#{lock.job_name}#{slot.iso}#g9"},
            "job": {"S": lock.job_name},
            "slot": {"S": slot.iso},
            "slot_epoch_s": {"N": str(slot.epoch_s)},
            "generation": {"N": "9"},
            "status": {"S": "SUCCEEDED"},
            "owner_id": {"S": "M"},
            "fencing_token": {"N": "4"},
            "state_json": {"S": "{not json"},
            "summary_json": {"N": "5"},
            "error_json": {"S": "[1, 2]"},
        },
    )

    # WHEN the history is read
    records = history.page(lock.job_name).records

    # THEN the edited item is decoded as far as it can be, with the reason in ``corrupt``
    assert ids(records) == [(slot, 9, "SUCCEEDED"), (slot, 1, "SUCCEEDED")]
    bad, good = records
    assert bad.corrupt is not None and "_json" in bad.corrupt and "#g9" in bad.corrupt
    assert (bad.owner_id, bad.fencing_token, bad.state, bad.summary, bad.error) == ("M", 4, {}, {}, {})
    assert good.corrupt is None and good.summary == {"rows": 1}
    assert bad.as_dict()["corrupt"] == bad.corrupt


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"S": "{not json"}, "is not valid JSON"),
        ({"N": "5"}, "must be a String holding a JSON object"),
        ({"S": "[1, 2]"}, "must hold a JSON object"),
    ],
)
def test_decode_record_names_what_is_corrupt(value: dict[str, str], message: str) -> None:
    item = {
        "pk": {"S": "slot#job#2026-11-22T00:30:00Z"},
        "job": {"S": "job"},
        "slot_epoch_s": {"N": "1795307400"},
        "status": {"S": "FAILED"},
        "error_json": value,
        "summary_json": {"S": '{"rows": 1}'},
    }
    record = decode_record(item)
    assert record.corrupt is not None and message in record.corrupt and "error_json" in record.corrupt
    assert (record.job_name, record.slot, record.status, record.generation) == ("job", Slot(1795307400), "FAILED", 1)
    assert record.error == {} and record.summary == {}  # no *_json is trusted once one is corrupt


def test_decode_record_of_an_item_from_before_generations_is_generation_1() -> None:
    record = decode_record(
        {
            "pk": {"S": "slot#job#2026-11-22T00:30:00Z"},
            "job": {"S": "job"},
            "slot_epoch_s": {"N": "1795307400"},
            "status": {"S": "SUCCEEDED"},
            "started_at_ms": {"N": "1000"},
            "finished_at_ms": {"N": "3500"},
            "summary_json": {"S": '{"rows": 2}'},
        }
    )
    assert (record.generation, record.duration_ms, record.summary, record.corrupt) == (1, 2500, {"rows": 2}, None)
    assert record.committed and record.run_id is None


@pytest.mark.backends("moto")  # refused before any request
@pytest.mark.parametrize("limit", [0, -1, 1001, True, 2.5, "10", None])
def test_a_bad_limit_is_refused_before_any_request(
    history: SlotHistory, lock: SlotLock, request_log: Any, limit: Any
) -> None:
    request_log.clear()
    with pytest.raises(LockConfigurationError) as info:
        history.page(lock.job_name, limit=limit)
    assert info.value.parameter == "limit"
    assert request_log.operations == []


@pytest.mark.parametrize("limit", [1, 1000])
def test_the_limits_bounds_are_accepted(history: SlotHistory, lock: SlotLock, slot: Slot, limit: int) -> None:
    lock.commit(acquired(lock.try_acquire(slot, "A")))
    assert len(history.page(lock.job_name, limit=limit).records) == 1


@pytest.mark.backends("moto")  # refused before any request
@pytest.mark.parametrize("status", ["DONE", "succeeded", "", 1])
def test_a_bad_status_is_refused(history: SlotHistory, lock: SlotLock, request_log: Any, status: Any) -> None:
    request_log.clear()
    with pytest.raises(LockConfigurationError) as info:
        history.page(lock.job_name, status=status)
    assert info.value.parameter == "status"
    assert request_log.operations == []


@pytest.mark.backends("moto")  # refused before any request
@pytest.mark.parametrize("job", ["", "bad#job", "x" * 65, "spaced job", None])
def test_a_bad_job_is_refused(history: SlotHistory, request_log: Any, job: Any) -> None:
    request_log.clear()
    with pytest.raises(LockConfigurationError) as info:
        history.page(job)
    assert info.value.parameter == "job"
    assert request_log.operations == []


@pytest.mark.backends("moto")  # refused before any request
def test_since_after_until_is_refused(history: SlotHistory, lock: SlotLock, slot: Slot, request_log: Any) -> None:
    request_log.clear()
    with pytest.raises(LockConfigurationError) as info:
        history.page(lock.job_name, since=Slot(slot.epoch_s + 60), until=slot)
    assert info.value.parameter == "since"
    assert request_log.operations == []


@pytest.mark.backends("dynamodb-local")  # moto accepts any start key
def test_a_start_key_of_another_query_is_refused_naming_the_start_key(
    history: SlotHistory, lock: SlotLock, slot: Slot, backend: str
) -> None:
    lock.commit(acquired(lock.try_acquire(slot, "A")))
    with pytest.raises(LockConfigurationError) as info:
        history.page(lock.job_name, start_key={"pk": {"S": lock.lock_key}})
    assert info.value.parameter == "start_key"
