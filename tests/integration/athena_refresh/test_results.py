"""``ResultsStore``: the immutable per-slot result, the fenced LATEST pointer, and the S3 overflow.

The prepared writes are executed through a real (moto) TransactWriteItems, as the lock's commit does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from athena_refresh.engine import Column, QueryResult, QueryStatistics
from athena_refresh.errors import CorruptResultsItemError, ResultsStoreError
from athena_refresh.results import ResultsStore
from athena_refresh.results_commit import PreparedResult, latest_condition
from athena_refresh.stored import LATEST, StoredResult, result_sort_key

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

JOB = "flights-dashboard"
SLOT = "2026-11-22T00:30:00Z"
EARLIER = "2026-11-22T00:00:00Z"
LATER = "2026-11-22T01:00:00Z"
WINDOW = ("2013-11-21T00:30:00", "2013-11-22T00:30:00")
COLUMNS = (Column("origin", "varchar"), Column("flights", "bigint"), Column("avg_dep_delay_min", "double"))
ROWS = [
    {"origin": "EWR", "flights": 320, "avg_dep_delay_min": 14.25},
    {"origin": "JFK", "flights": 301, "avg_dep_delay_min": None},
    {"origin": "LGA", "flights": 277, "avg_dep_delay_min": -3.5},
]
STATS = QueryStatistics(
    data_scanned_bytes=7_340_032, engine_execution_time_ms=850, query_queue_time_ms=40, total_execution_time_ms=910
)


def prepare(
    store: ResultsStore,
    *,
    token: int,
    slot: str = SLOT,
    rows: list[dict[str, Any]] | None = None,
    qid: str | None = None,
    generation: int = 1,
    move_latest: bool = True,
) -> PreparedResult:
    return store.prepare(
        job_name=JOB,
        slot_iso=slot,
        fencing_token=token,
        query_execution_id=qid or f"qid-token-{token}",
        statistics=STATS,
        result=QueryResult(columns=COLUMNS, rows=ROWS if rows is None else rows),
        committed_at_ms=1_795_307_402_000 + token,
        window=WINDOW,
        generation=generation,
        move_latest=move_latest,
    )


def big_rows(count: int = 200) -> list[dict[str, Any]]:
    return [
        {"origin": f"AP{i:03d}", "flights": i * 7, "avg_dep_delay_min": i / 8, "note": "é✈" * 5} for i in range(count)
    ]


@pytest.fixture
def transact(ddb: Any) -> Callable[[PreparedResult], None]:
    """Execute the prepared writes as the lock's commit would: one TransactWriteItems."""

    def run(prepared: PreparedResult) -> None:
        ddb.transact_write_items(TransactItems=prepared.writes)

    return run


def cancellation_codes(error: ClientError) -> list[str]:
    return [reason.get("Code", "None") for reason in error.response.get("CancellationReasons", [])]


@pytest.fixture
def move_pointer(ddb: Any) -> Callable[[PreparedResult], None]:
    """Execute only the prepared LATEST write (its own transaction): the pointer's condition, apart from the
    result Put's (which refuses a second result of one slot and generation before the pointer is asked)."""

    def run(prepared: PreparedResult) -> None:
        assert prepared.latest_index is not None
        ddb.transact_write_items(TransactItems=[prepared.writes[prepared.latest_index]])

    return run


@pytest.fixture
def plant_pointer(ddb: Any, results_table: str) -> Callable[..., None]:
    """``plant_pointer(slot, token, generation=None)``: write the LATEST item by hand (``generation`` ``None``:
    a pointer from before generations, without ``latest_generation``)."""

    def plant(slot: str, token: int, generation: int | None = None) -> None:
        item = {
            "job": {"S": JOB},
            "slot": {"S": LATEST},
            "latest_slot": {"S": slot},
            "fencing_token": {"N": str(token)},
            "query_execution_id": {"S": f"qid-token-{token}"},
        }
        if generation is not None:
            item["latest_generation"] = {"N": str(generation)}
        ddb.put_item(TableName=results_table, Item=item)

    return plant


def pointer(store: ResultsStore) -> tuple[str, int | None, int]:
    """(latest_slot, latest_generation, fencing_token) of the LATEST pointer."""
    latest = store.get_latest(JOB)
    assert latest is not None
    return latest["latest_slot"], latest.get("latest_generation"), latest["fencing_token"]


# ---------------------------------------------------------------------------------------------------
# request shape
# ---------------------------------------------------------------------------------------------------


@pytest.mark.backends("moto")  # no DynamoDB request
def test_prepare_gives_an_immutable_put_and_a_fenced_latest_update(store: ResultsStore) -> None:
    # WHEN a small result is prepared for token 7
    prepared = prepare(store, token=7)

    # THEN there are exactly two writes: the slot's result, created only if absent ...
    put, update = prepared.writes
    assert set(put) == {"Put"} and set(update) == {"Update"}
    assert put["Put"]["TableName"] == update["Update"]["TableName"] == store.table_name
    assert put["Put"]["ConditionExpression"] == "attribute_not_exists(#slot)"
    assert put["Put"]["ExpressionAttributeNames"] == {"#slot": "slot"}
    item = put["Put"]["Item"]
    assert item["job"] == {"S": JOB} and item["slot"] == {"S": SLOT}
    assert item["slot_time"] == {"S": SLOT} and item["generation"] == {"N": "1"}  # the live schedule's run
    assert item["fencing_token"] == {"N": "7"}
    assert item["query_execution_id"] == {"S": "qid-token-7"}
    assert json.loads(item["rows_json"]["S"]) == ROWS
    assert json.loads(item["columns_json"]["S"]) == [{"name": c.name, "type": c.type} for c in COLUMNS]
    assert json.loads(item["statistics_json"]["S"]) == STATS.as_dict()
    assert item["row_count"] == {"N": "3"}
    assert (item["window_start"], item["window_end"]) == ({"S": WINDOW[0]}, {"S": WINDOW[1]})
    assert "rows_s3_uri" not in item

    # ... and the LATEST pointer (write 1), moved forward only: by slot, then generation, then token
    assert prepared.latest_index == 1
    body = update["Update"]
    assert body["Key"] == {"job": {"S": JOB}, "slot": {"S": LATEST}}
    assert body["ConditionExpression"] == latest_condition(1)
    assert body["ExpressionAttributeNames"]["#token"] == "fencing_token"
    assert body["ExpressionAttributeNames"]["#latest_slot"] == "latest_slot"
    assert body["ExpressionAttributeNames"]["#gen"] == "latest_generation"
    assert body["ExpressionAttributeValues"][":token"] == {"N": "7"}
    assert body["ExpressionAttributeValues"][":slot"] == {"S": SLOT}
    assert body["ExpressionAttributeValues"][":gen"] == {"N": "1"}

    # and the summary says where the rows went, and that the pointer moves
    assert prepared.summary == {
        "query_execution_id": "qid-token-7",
        "row_count": 3,
        "rows_bytes": len(item["rows_json"]["S"].encode()),
        "rows_location": "inline",
        "statistics": STATS.as_dict(),
        "window": list(WINDOW),
        "latest_moved": True,
    }


@pytest.mark.backends("moto")  # no DynamoDB request
def test_prepare_without_moving_latest_gives_the_put_alone(store: ResultsStore) -> None:
    # WHEN a result is prepared for a commit that must leave the pointer alone (a newer result is there)
    prepared = prepare(store, token=7, generation=2, move_latest=False)

    # THEN there is only the result's Put, under the generation's sort key, and the summary says so
    [put] = prepared.writes
    assert put["Put"]["Item"]["slot"] == {"S": f"{SLOT}#g2"}
    assert prepared.latest_index is None and prepared.summary["latest_moved"] is False

    # AND dropping the pointer from a full preparation gives the same shape
    full = prepare(store, token=7, generation=2)
    dropped = full.without_latest()
    assert dropped.writes == [full.writes[0]] and dropped.latest_index is None
    assert dropped.summary == {**full.summary, "latest_moved": False}
    assert dropped.without_latest() is dropped


def test_result_sort_key_is_the_slot_for_generation_1_and_suffixed_after() -> None:
    # GIVEN / WHEN / THEN generation 1 (the live schedule) keeps the slot's ISO text; a manual one is suffixed
    assert result_sort_key(SLOT) == result_sort_key(SLOT, 1) == SLOT
    assert result_sort_key(SLOT, 2) == f"{SLOT}#g2"
    assert result_sort_key(SLOT, 10) == f"{SLOT}#g10"
    # every generation's key starts with the slot (one begins_with Query finds them), and LATEST is none of them
    assert all(result_sort_key(SLOT, g).startswith(SLOT) and result_sort_key(SLOT, g) != LATEST for g in (1, 2, 99))


# ---------------------------------------------------------------------------------------------------
# executed through moto's TransactWriteItems
# ---------------------------------------------------------------------------------------------------


def test_stored_result_reads_back_with_typed_metadata(store: ResultsStore, transact: Any) -> None:
    # GIVEN a committed result
    transact(prepare(store, token=3))

    # WHEN it is read back
    result = store.get_result(JOB, SLOT)
    latest = store.get_latest(JOB)

    # THEN rows, columns and statistics are plain Python again
    assert result is not None and latest is not None
    assert result["rows"] == ROWS
    assert result["columns"] == [{"name": c.name, "type": c.type} for c in COLUMNS]
    assert result["statistics"] == STATS.as_dict()
    assert result["fencing_token"] == 3 and result["row_count"] == 3
    assert (result["slot"], result["slot_time"], result["generation"]) == (SLOT, SLOT, 1)
    # AND the LATEST item is the pointer plus a copy of the result (one read serves the latest result)
    assert latest == {
        "job": JOB,
        "slot": LATEST,
        "latest_slot": SLOT,
        "latest_generation": 1,
        "fencing_token": 3,
        "query_execution_id": "qid-token-3",
        "row_count": 3,
        "committed_at_ms": 1_795_307_402_003,
        "columns": result["columns"],
        "statistics": result["statistics"],
        "rows": ROWS,
        "window_start": WINDOW[0],
        "window_end": WINDOW[1],
    }
    assert store.get_result(JOB, "2026-11-22T01:00:00Z") is None


def test_latest_pointer_refuses_an_older_slot_whatever_its_token_and_accepts_a_newer_one(
    store: ResultsStore, transact: Any
) -> None:
    # GIVEN slot 00:30 committed under token 5
    transact(prepare(store, token=5))

    # WHEN an older slot commits with the pointer's write, even under a higher token (a late holder)
    with pytest.raises(ClientError) as info:
        transact(prepare(store, token=9, slot=EARLIER))

    # THEN the whole transaction is cancelled by the pointer's condition: nothing of it is stored
    assert info.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert cancellation_codes(info.value) == ["None", "ConditionalCheckFailed"]
    assert pointer(store) == (SLOT, 1, 5)
    assert store.get_result(JOB, EARLIER) is None

    # WHEN a newer slot commits, even under a lower token (tokens of different slots and generations come from
    # different counters: the live lock item's, the manual lock item's)
    transact(prepare(store, token=2, slot=LATER))

    # THEN the pointer moves forward to it
    assert pointer(store) == (LATER, 1, 2)
    assert store.get_latest(JOB)["query_execution_id"] == "qid-token-2"  # type: ignore[index]
    assert [r["slot"] for r in store.list_results(JOB)] == [SLOT, LATER]


def test_latest_pointer_moves_to_a_newer_generation_of_its_slot_and_never_back(
    store: ResultsStore, transact: Any
) -> None:
    # GIVEN slot 00:30 committed by the live schedule (generation 1, token 5)
    transact(prepare(store, token=5))

    # WHEN generation 3 of the same slot commits (a re-run, under the manual lease's own counter: token 1)
    transact(prepare(store, token=1, generation=3))

    # THEN the pointer names (00:30, generation 3), and both results are stored
    assert pointer(store) == (SLOT, 3, 1)
    assert store.list_generations(JOB, SLOT) == [1, 3]

    # WHEN generation 2 of the same slot commits afterwards with the pointer's write, whatever its token
    with pytest.raises(ClientError) as info:
        transact(prepare(store, token=2, generation=2))

    # THEN the pointer's condition cancels it: an older generation never moves the pointer back
    assert cancellation_codes(info.value) == ["None", "ConditionalCheckFailed"]
    assert pointer(store) == (SLOT, 3, 1)
    assert store.get_result(JOB, SLOT, 2) is None
    assert [r["slot"] for r in store.list_results(JOB)] == [SLOT, f"{SLOT}#g3"]

    # AND the next slot's live run (generation 1) moves it on: slot first, then generation
    transact(prepare(store, token=6, slot=LATER))
    assert pointer(store) == (LATER, 1, 6)


@pytest.mark.parametrize("generation", [1, 2])
def test_latest_pointer_compares_tokens_only_for_the_same_slot_and_generation(
    generation: int, store: ResultsStore, transact: Any, move_pointer: Any
) -> None:
    # GIVEN (00:30, generation) committed under token 5
    transact(prepare(store, token=5, generation=generation))

    # WHEN the pointer's write of the same slot and generation comes with a lower token, or the same one
    # (never happens: tokens are unique per acquisition; a fencing counter that went back does it)
    for stale in (4, 5):
        with pytest.raises(ClientError) as info:
            move_pointer(prepare(store, token=stale, generation=generation))
        # THEN it is refused
        assert cancellation_codes(info.value) == ["ConditionalCheckFailed"]
    assert pointer(store) == (SLOT, generation, 5)

    # WHEN it comes with a higher token
    move_pointer(prepare(store, token=6, generation=generation, qid="qid-newer"))

    # THEN the pointer takes it
    assert pointer(store) == (SLOT, generation, 6)
    assert store.get_latest(JOB)["query_execution_id"] == "qid-newer"  # type: ignore[index]


def test_a_pointer_from_before_generations_counts_as_generation_1(
    store: ResultsStore, plant_pointer: Any, move_pointer: Any
) -> None:
    # GIVEN a LATEST pointer written before generations existed: (00:30, token 5), no latest_generation
    plant_pointer(SLOT, 5)

    # WHEN generation 1 of that slot writes it with a token at or below 5: THEN it is refused (tokens compared)
    for stale in (4, 5):
        with pytest.raises(ClientError):
            move_pointer(prepare(store, token=stale))
    # AND an older slot is refused whatever its token
    with pytest.raises(ClientError):
        move_pointer(prepare(store, token=9, slot=EARLIER))
    assert pointer(store) == (SLOT, None, 5)

    # WHEN generation 2 of that slot writes it, under a lower token
    move_pointer(prepare(store, token=1, generation=2))

    # THEN it moves (generation 2 is newer than the legacy pointer's generation 1), and now carries its generation
    assert pointer(store) == (SLOT, 2, 1)


def test_a_higher_token_of_generation_1_moves_a_pointer_from_before_generations(
    store: ResultsStore, plant_pointer: Any, move_pointer: Any
) -> None:
    # GIVEN a legacy pointer (00:30, token 5), no latest_generation
    plant_pointer(SLOT, 5)
    # WHEN generation 1 of the same slot comes with token 6
    move_pointer(prepare(store, token=6))
    # THEN it moves, as for a pointer of generation 1
    assert pointer(store) == (SLOT, 1, 6)


def test_a_slot_result_is_never_overwritten(store: ResultsStore, transact: Any) -> None:
    # GIVEN slot 00:30 stored under token 5
    transact(prepare(store, token=5))

    # WHEN a write with a higher token tries to replace that slot's result
    with pytest.raises(ClientError) as info:
        transact(prepare(store, token=9, rows=[{"origin": "XXX", "flights": 0, "avg_dep_delay_min": None}]))

    # THEN the Put's attribute_not_exists cancels it all: the first result stands, the pointer too
    assert cancellation_codes(info.value) == ["ConditionalCheckFailed", "None"]
    assert store.get_result(JOB, SLOT)["rows"] == ROWS  # type: ignore[index]
    assert store.get_latest(JOB)["fencing_token"] == 5  # type: ignore[index]


# ---------------------------------------------------------------------------------------------------
# generations
# ---------------------------------------------------------------------------------------------------


def test_a_generation_2_result_is_stored_beside_generation_1(store: ResultsStore, transact: Any) -> None:
    # GIVEN slot 00:30 committed by the live schedule (token 5)
    transact(prepare(store, token=5))

    # WHEN its re-run (generation 2, token 1 of the manual counter) commits other rows
    rows = [{"origin": "EWR", "flights": 321, "avg_dep_delay_min": 14.0}]
    transact(prepare(store, token=1, generation=2, rows=rows, qid="qid-rerun"))

    # THEN both results are stored, the re-run under "<slot>#g2", each with its slot time and generation
    assert [(r["slot"], r["slot_time"], r["generation"]) for r in store.list_results(JOB)] == [
        (SLOT, SLOT, 1),
        (f"{SLOT}#g2", SLOT, 2),
    ]
    live, rerun = store.get_result(JOB, SLOT), store.get_result(JOB, SLOT, 2)
    assert live is not None and rerun is not None
    assert (live["rows"], live["fencing_token"], live["query_execution_id"]) == (ROWS, 5, "qid-token-5")
    assert (rerun["rows"], rerun["fencing_token"], rerun["query_execution_id"]) == (rows, 1, "qid-rerun")
    assert store.get_result(JOB, SLOT, 3) is None
    # AND the pointer names the re-run
    assert pointer(store) == (SLOT, 2, 1)


def test_a_generation_result_is_never_overwritten_either(store: ResultsStore, transact: Any) -> None:
    # GIVEN generation 2 of slot 00:30 stored
    transact(prepare(store, token=1, generation=2))

    # WHEN another write of generation 2 comes (a stale manual holder), even under a higher token
    with pytest.raises(ClientError) as info:
        transact(prepare(store, token=7, generation=2, rows=[]))

    # THEN its Put is refused: the first result of the generation stands
    assert cancellation_codes(info.value)[0] == "ConditionalCheckFailed"
    assert store.get_result(JOB, SLOT, 2)["rows"] == ROWS  # type: ignore[index]


def test_an_oversized_generation_goes_to_s3_under_a_key_of_its_own(
    make_store: Any, bucket: str, s3: Any, transact: Any
) -> None:
    # GIVEN a tiny item budget, and generation 1 and 2 of one slot offloaded under the same token number
    store = make_store(max_inline_bytes=1024)
    live, rerun = big_rows(), big_rows(150)
    transact(prepare(store, token=4, rows=live))
    transact(prepare(store, token=4, rows=rerun, generation=2))

    # THEN each has its own object (generation 2: g2-token-<token>) and reads back its own rows
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
    assert keys == [f"results/{JOB}/{SLOT}/g2-token-4.json", f"results/{JOB}/{SLOT}/token-4.json"]
    assert store.get_result(JOB, SLOT)["rows"] == live  # type: ignore[index]
    assert store.get_result(JOB, SLOT, 2)["rows"] == rerun  # type: ignore[index]


def test_get_result_without_a_generation_reads_the_newest_one(store: ResultsStore, transact: Any) -> None:
    # GIVEN nothing stored for the slot: THEN there is no newest generation either
    assert store.get_result(JOB, SLOT, None) is None

    # GIVEN generations 1, 2 and 10 of slot 00:30 (10 sorts before 2 as text), and generation 3 of a later slot
    for generation in (1, 2, 10):
        transact(prepare(store, token=generation, generation=generation, qid=f"qid-g{generation}"))
    transact(prepare(store, token=3, generation=3, slot=LATER))

    # WHEN the slot's result is read without a generation
    newest = store.get_result(JOB, SLOT, generation=None)

    # THEN it is generation 10's, with its rows
    assert newest is not None
    assert (newest["generation"], newest["slot"], newest["query_execution_id"]) == (10, f"{SLOT}#g10", "qid-g10")
    assert newest["rows"] == ROWS
    assert store.get_result(JOB, LATER, None)["generation"] == 3  # type: ignore[index]
    # AND the default is still generation 1
    assert store.get_result(JOB, SLOT)["generation"] == 1  # type: ignore[index]


def test_list_generations_names_the_stored_generations_of_one_slot_in_order(store: ResultsStore, transact: Any) -> None:
    # GIVEN nothing stored: THEN no generations
    assert store.list_generations(JOB, SLOT) == []

    # GIVEN generations 10, 2 and 1 of slot 00:30 committed in that order (no pointer moves for the older
    # ones), one of the next slot, and the LATEST pointer
    transact(prepare(store, token=10, generation=10))
    transact(prepare(store, token=2, generation=2, move_latest=False))
    transact(prepare(store, token=1, move_latest=False))
    transact(prepare(store, token=1, slot=LATER))

    # WHEN / THEN the slot's generations come back as numbers, ascending; other slots and LATEST are not among them
    assert store.list_generations(JOB, SLOT) == [1, 2, 10]
    assert store.list_generations(JOB, LATER) == [1]
    assert store.list_generations(JOB, EARLIER) == []
    assert store.list_generations("another-job", SLOT) == []


def test_latest_order_says_where_the_pointer_stands(store: ResultsStore, transact: Any) -> None:
    # GIVEN no pointer: THEN every (slot, generation) is ahead of it (a commit moves it)
    assert store.latest_order(JOB, SLOT, 1) == -1

    # GIVEN the pointer at (00:30, generation 2)
    transact(prepare(store, token=1, generation=2))

    # WHEN / THEN -1: it is behind; 0: it is there; 1: it is ahead (a commit leaves it alone)
    assert store.latest_order(JOB, SLOT, 3) == -1
    assert store.latest_order(JOB, LATER, 1) == -1
    assert store.latest_order(JOB, SLOT, 2) == 0
    assert store.latest_order(JOB, SLOT, 1) == 1
    assert store.latest_order(JOB, EARLIER, 5) == 1
    # AND another job's pointer is its own
    assert store.latest_order("another-job", EARLIER, 1) == -1


def test_latest_order_of_a_legacy_or_tampered_pointer(store: ResultsStore, plant_pointer: Any, ddb: Any) -> None:
    # GIVEN a pointer from before generations (no latest_generation): it counts as generation 1
    plant_pointer(SLOT, 5)
    assert store.latest_order(JOB, SLOT, 1) == 0
    assert store.latest_order(JOB, SLOT, 2) == -1
    assert store.latest_order(JOB, EARLIER, 4) == 1

    # GIVEN a pointer whose latest_slot is not a String: it counts as behind, so the fenced write decides
    ddb.update_item(
        TableName=store.table_name,
        Key={"job": {"S": JOB}, "slot": {"S": LATEST}},
        UpdateExpression="SET latest_slot = :n",
        ExpressionAttributeValues={":n": {"N": "1"}},
    )
    assert store.latest_order(JOB, EARLIER, 1) == -1


# ---------------------------------------------------------------------------------------------------
# S3 overflow
# ---------------------------------------------------------------------------------------------------


def test_oversized_rows_go_to_s3_with_their_sha256(make_store: Any, bucket: str, s3: Any, transact: Any) -> None:
    # GIVEN a store whose item budget is tiny, and rows far above it
    store = make_store(max_inline_bytes=1024)
    rows = big_rows()
    rows_json = json.dumps(rows, separators=(",", ":"))
    assert len(rows_json.encode()) > 1024

    # WHEN the result is prepared and committed
    prepared = prepare(store, token=11, rows=rows)
    transact(prepared)

    # THEN the rows are in S3 under the slot and the writer's token, and the item points at them
    key = f"results/{JOB}/{SLOT}/token-11.json"
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert json.loads(body) == rows
    item = prepared.writes[0]["Put"]["Item"]
    assert "rows_json" not in item
    assert item["rows_s3_uri"] == {"S": f"s3://{bucket}/{key}"}
    assert item["rows_sha256"] == {"S": hashlib.sha256(body).hexdigest()}
    assert item["rows_bytes"] == {"N": str(len(body))}
    assert prepared.summary["rows_location"] == "s3" and prepared.summary["row_count"] == len(rows)

    # AND get_result reads them back identically
    stored = store.get_result(JOB, SLOT)
    assert stored is not None
    assert stored["rows"] == rows
    assert "rows_s3_uri" not in stored and stored["rows_sha256"] == hashlib.sha256(body).hexdigest()


@pytest.mark.backends("moto")  # no DynamoDB request
def test_rows_exactly_at_the_budget_stay_inline(make_store: Any, bucket: str, s3: Any) -> None:
    # GIVEN a budget exactly the size of the rows' JSON
    size = len(json.dumps(ROWS, separators=(",", ":")).encode())
    # WHEN they are prepared
    prepared = prepare(make_store(max_inline_bytes=size), token=1)
    # THEN they stay in the item (only "larger than" overflows) and nothing is uploaded
    assert prepared.summary["rows_location"] == "inline"
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


@pytest.mark.backends("moto")  # refused before any request
def test_oversize_without_a_bucket_is_refused_and_writes_nothing(
    make_store: Any, bucket: str, s3: Any, scan: Any, results_table: str
) -> None:
    # GIVEN no overflow bucket configured
    store = make_store(bucket_name=None, max_inline_bytes=1024)

    # WHEN oversized rows are prepared
    with pytest.raises(ResultsStoreError) as info:
        prepare(store, token=2, rows=big_rows())

    # THEN it refuses to truncate, naming the variable to set, and nothing was written anywhere
    assert "RESULTS_BUCKET_NAME" in str(info.value)
    assert scan(results_table) == []
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


@pytest.mark.backends("moto")  # no DynamoDB request
def test_failed_upload_is_a_results_store_error(make_store: Any, bucket: str) -> None:
    # GIVEN an overflow bucket that does not exist
    store = make_store(bucket_name="no-such-bucket", max_inline_bytes=10)
    # WHEN oversized rows are prepared
    with pytest.raises(ResultsStoreError) as info:
        prepare(store, token=2)
    # THEN the S3 error is wrapped, not leaked
    assert isinstance(info.value.__cause__, ClientError)


def test_get_result_verifies_the_checksum(make_store: Any, bucket: str, s3: Any, transact: Any) -> None:
    # GIVEN an offloaded result
    store = make_store(max_inline_bytes=100)
    transact(prepare(store, token=4, rows=big_rows(20)))
    key = f"results/{JOB}/{SLOT}/token-4.json"

    # WHEN the S3 object is replaced behind the store's back (same JSON shape, one value changed)
    tampered = big_rows(20)
    tampered[0]["flights"] = 999_999
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(tampered, separators=(",", ":")).encode())

    # THEN reading it fails loudly instead of returning the wrong rows
    with pytest.raises(ResultsStoreError, match="SHA-256"):
        store.get_result(JOB, SLOT)


def test_missing_s3_object_is_a_results_store_error(make_store: Any, bucket: str, s3: Any, transact: Any) -> None:
    # GIVEN an offloaded result whose object was deleted
    store = make_store(max_inline_bytes=100)
    transact(prepare(store, token=4, rows=big_rows(20)))
    s3.delete_object(Bucket=bucket, Key=f"results/{JOB}/{SLOT}/token-4.json")

    # WHEN it is read
    with pytest.raises(ResultsStoreError) as info:
        store.get_result(JOB, SLOT)
    # THEN the S3 error is wrapped
    assert isinstance(info.value.__cause__, ClientError)


@pytest.mark.backends("moto")  # refused before any request
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1, 2}, b"bytes"], ids=["nan", "inf", "set", "bytes"])
def test_rows_that_are_not_json_are_refused(store: ResultsStore, bad: Any) -> None:
    # GIVEN / WHEN a row holds a value JSON cannot carry faithfully / THEN it is refused, not mangled
    with pytest.raises(ResultsStoreError, match="not JSON-serialisable"):
        prepare(store, token=1, rows=[{"origin": "EWR", "flights": 1, "avg_dep_delay_min": bad}])


# ---------------------------------------------------------------------------------------------------
# LATEST carries the result: the read API's one-read latest
# ---------------------------------------------------------------------------------------------------


@pytest.fixture
def counting(ddb: Any) -> Iterator[Callable[[ResultsStore], list[str]]]:
    """``counting(store)``: the operation names of the DynamoDB requests ``store`` sends from then on."""
    registered: list[tuple[Any, Callable[..., None]]] = []

    def start(store: ResultsStore) -> list[str]:
        calls: list[str] = []

        def record(model: Any, **_: Any) -> None:
            calls.append(model.name)

        store.dynamodb.meta.events.register("before-call.dynamodb.*", record)
        registered.append((store.dynamodb, record))
        return calls

    yield start
    for client, handler in registered:
        client.meta.events.unregister("before-call.dynamodb.*", handler)


def test_latest_is_one_get_item_and_equals_the_stored_result(store: ResultsStore, transact: Any, counting: Any) -> None:
    # GIVEN a committed result
    transact(prepare(store, token=3))
    calls = counting(store)

    # WHEN the latest result is read
    latest = store.latest(JOB)

    # THEN one GetItem answers it, and it is the result item's content
    assert calls == ["GetItem"]
    assert latest is not None and latest == store.result(JOB, SLOT)
    assert (latest.slot_iso, latest.generation, latest.fencing_token, latest.rows) == (SLOT, 1, 3, ROWS)
    assert latest.columns == [{"name": c.name, "type": c.type} for c in COLUMNS]
    assert (latest.window_start, latest.window_end, latest.offloaded) == (*WINDOW, False)


@pytest.mark.backends("moto")  # plain reads
def test_latest_of_a_job_without_results_is_none(store: ResultsStore) -> None:
    assert store.latest(JOB) is None
    assert store.result(JOB, SLOT) is None and store.result(JOB, SLOT, None) is None


def test_latest_follows_a_newer_generation_and_never_an_older_slot(store: ResultsStore, transact: Any) -> None:
    # GIVEN slot LATER committed, then a re-run of the older SLOT (pointer stays), then LATER's generation 2
    transact(prepare(store, token=4, slot=LATER, rows=ROWS[:1]))
    transact(prepare(store, token=1, slot=SLOT, generation=2, move_latest=False))
    transact(prepare(store, token=1, slot=LATER, generation=2, rows=ROWS[:2]))

    # THEN LATEST serves LATER's generation 2 with its own rows
    latest = store.latest(JOB)
    assert latest is not None
    assert (latest.slot_iso, latest.generation, latest.rows) == (LATER, 2, ROWS[:2])


def test_an_offloaded_latest_carries_the_s3_pointer_and_an_inline_one_replaces_it(
    make_store: Any, bucket: str, transact: Any, ddb: Any, results_table: str
) -> None:
    # GIVEN a small inline budget: the first result goes to S3
    store = make_store(max_inline_bytes=2_000)
    transact(prepare(store, token=1, slot=EARLIER, rows=big_rows()))
    latest = store.latest(JOB)
    assert latest is not None and latest.offloaded and latest.rows is None
    assert latest.rows_s3_uri is not None and latest.rows_s3_uri.startswith(f"s3://{bucket}/results/{JOB}/{EARLIER}/")
    assert store.load_rows(latest) == big_rows()

    # WHEN a newer slot's small result commits
    transact(prepare(store, token=2, slot=SLOT))

    # THEN the LATEST item holds its rows inline and no stale S3 pointer
    raw = ddb.get_item(TableName=results_table, Key={"job": {"S": JOB}, "slot": {"S": LATEST}})["Item"]
    assert "rows_json" in raw and not {"rows_s3_uri", "rows_sha256", "rows_bytes"} & set(raw)
    newer = store.latest(JOB)
    assert newer is not None and newer.rows == ROWS

    # AND an offloaded one after it drops the inline rows again
    transact(prepare(store, token=3, slot=LATER, rows=big_rows(300)))
    raw = ddb.get_item(TableName=results_table, Key={"job": {"S": JOB}, "slot": {"S": LATEST}})["Item"]
    assert "rows_json" not in raw and {"rows_s3_uri", "rows_sha256", "rows_bytes"} <= set(raw)


def test_a_pointer_from_before_latest_carried_rows_costs_a_second_read(
    store: ResultsStore, transact: Any, plant_pointer: Any, counting: Any
) -> None:
    # GIVEN a stored result and a LATEST item of the older shape (the pointer only)
    transact(prepare(store, token=3, move_latest=False))
    plant_pointer(SLOT, 3, 1)
    calls = counting(store)

    # WHEN the latest result is read THEN the result item it names answers it
    latest = store.latest(JOB)
    assert calls == ["GetItem", "GetItem"]
    assert latest is not None and latest.rows == ROWS and latest.fencing_token == 3


@pytest.mark.parametrize(
    ("field", "value"),
    [("fencing_token", "3"), ("columns", None), ("rows", None), ("rows", {"a": 1}), ("query_execution_id", 7)],
)
def test_a_stored_result_with_a_bad_field_names_it(field: str, value: Any) -> None:
    plain: dict[str, Any] = {
        "fencing_token": 3,
        "query_execution_id": "q",
        "committed_at_ms": 1,
        "columns": [],
        "row_count": 0,
        "rows": [],
    }
    if value is None:
        del plain[field]
    else:
        plain[field] = value
    with pytest.raises(CorruptResultsItemError) as caught:
        StoredResult.from_item(JOB, SLOT, 1, plain)
    assert (field if field != "rows" else "rows_json") in str(caught.value)
