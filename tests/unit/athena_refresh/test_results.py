"""``ResultsStore``: the immutable per-slot result, the fenced LATEST pointer, and the S3 overflow.

The prepared writes are executed through a real (moto) TransactWriteItems, as the lock's commit does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from athena_refresh.engine import Column, QueryResult, QueryStatistics
from athena_refresh.errors import ResultsStoreError
from athena_refresh.results import LATEST, PreparedResult, ResultsStore

JOB = "flights-dashboard"
SLOT = "2026-11-22T00:30:00Z"
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


# ---------------------------------------------------------------------------------------------------
# request shape
# ---------------------------------------------------------------------------------------------------


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
    assert item["fencing_token"] == {"N": "7"}
    assert item["query_execution_id"] == {"S": "qid-token-7"}
    assert json.loads(item["rows_json"]["S"]) == ROWS
    assert json.loads(item["columns_json"]["S"]) == [{"name": c.name, "type": c.type} for c in COLUMNS]
    assert json.loads(item["statistics_json"]["S"]) == STATS.as_dict()
    assert item["row_count"] == {"N": "3"}
    assert (item["window_start"], item["window_end"]) == ({"S": WINDOW[0]}, {"S": WINDOW[1]})
    assert "rows_s3_uri" not in item

    # ... and the LATEST pointer, moved only by a higher fencing token
    body = update["Update"]
    assert body["Key"] == {"job": {"S": JOB}, "slot": {"S": LATEST}}
    assert body["ConditionExpression"] == "attribute_not_exists(#token) OR #token < :token"
    assert body["ExpressionAttributeNames"]["#token"] == "fencing_token"
    assert body["ExpressionAttributeValues"][":token"] == {"N": "7"}
    assert body["ExpressionAttributeValues"][":slot"] == {"S": SLOT}

    # and the summary says where the rows went
    assert prepared.summary == {
        "query_execution_id": "qid-token-7",
        "row_count": 3,
        "rows_bytes": len(item["rows_json"]["S"].encode()),
        "rows_location": "inline",
        "statistics": STATS.as_dict(),
        "window": list(WINDOW),
    }


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
    assert latest == {
        "job": JOB,
        "slot": LATEST,
        "latest_slot": SLOT,
        "fencing_token": 3,
        "query_execution_id": "qid-token-3",
        "row_count": 3,
        "committed_at_ms": 1_795_307_402_003,
    }
    assert store.get_result(JOB, "2026-11-22T01:00:00Z") is None


def test_latest_pointer_refuses_a_lower_token_and_accepts_a_higher_one(store: ResultsStore, transact: Any) -> None:
    # GIVEN slot 00:30 committed under token 5
    transact(prepare(store, token=5))

    # WHEN a stale writer (token 4) tries to commit the next slot
    with pytest.raises(ClientError) as info:
        transact(prepare(store, token=4, slot="2026-11-22T01:00:00Z"))

    # THEN the whole transaction is cancelled by the pointer's condition: nothing of it is stored
    assert info.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert cancellation_codes(info.value) == ["None", "ConditionalCheckFailed"]
    assert store.get_latest(JOB)["fencing_token"] == 5  # type: ignore[index]
    assert store.get_result(JOB, "2026-11-22T01:00:00Z") is None

    # WHEN the same token comes again (never happens: tokens are unique per acquisition), also refused
    with pytest.raises(ClientError):
        transact(prepare(store, token=5, slot="2026-11-22T01:00:00Z"))

    # WHEN a newer holder (token 6) commits
    transact(prepare(store, token=6, slot="2026-11-22T01:00:00Z"))

    # THEN the pointer moves forward
    latest = store.get_latest(JOB)
    assert latest is not None and (latest["fencing_token"], latest["latest_slot"]) == (6, "2026-11-22T01:00:00Z")
    assert [r["slot"] for r in store.list_results(JOB)] == [SLOT, "2026-11-22T01:00:00Z"]


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


def test_rows_exactly_at_the_budget_stay_inline(make_store: Any, bucket: str, s3: Any) -> None:
    # GIVEN a budget exactly the size of the rows' JSON
    size = len(json.dumps(ROWS, separators=(",", ":")).encode())
    # WHEN they are prepared
    prepared = prepare(make_store(max_inline_bytes=size), token=1)
    # THEN they stay in the item (only "larger than" overflows) and nothing is uploaded
    assert prepared.summary["rows_location"] == "inline"
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


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


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1, 2}, b"bytes"], ids=["nan", "inf", "set", "bytes"])
def test_rows_that_are_not_json_are_refused(store: ResultsStore, bad: Any) -> None:
    # GIVEN / WHEN a row holds a value JSON cannot carry faithfully / THEN it is refused, not mangled
    with pytest.raises(ResultsStoreError, match="not JSON-serialisable"):
        prepare(store, token=1, rows=[{"origin": "EWR", "flights": 1, "avg_dep_delay_min": bad}])
