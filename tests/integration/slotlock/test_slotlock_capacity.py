"""slotlock.capacity: what the lock's requests consumed, as DynamoDB reported it, and the commit's model."""

from __future__ import annotations

from typing import Any

import pytest

from slotlock import Slot, SlotLock
from slotlock.capacity import (
    CapacityMeter,
    CapacitySnapshot,
    attribute_value_size,
    estimate_write_units,
    item_size_bytes,
)

pytestmark = pytest.mark.backends("moto", "dynamodb-local")


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ({"S": "abc"}, 3),
        ({"S": "é"}, 2),  # UTF-8 bytes
        ({"N": "0"}, 2),
        ({"N": "12345"}, 4),  # ceil(5 significant digits / 2) + 1
        ({"N": "-1200"}, 2),  # trailing zeros are not significant
        ({"N": "1763769600000"}, 5),  # an epoch in ms: "17637696" significant -> ceil(8 / 2) + 1
        ({"BOOL": True}, 1),
        ({"NULL": True}, 1),
        ({"L": [{"S": "ab"}, {"N": "1"}]}, 3 + (1 + 2) + (1 + 2)),
        ({"M": {"k": {"S": "v"}}}, 3 + (1 + 1 + 1)),
        ({"NS": ["1", "22"]}, 2 + 2),
    ],
)
def test_attribute_sizes_follow_dynamodbs_rules(value: dict[str, Any], size: int) -> None:
    assert attribute_value_size(value) == size


def test_item_size_counts_names_and_values() -> None:
    assert item_size_bytes({"pk": {"S": "lock#job"}, "fencing_token": {"N": "42"}}) == 2 + 8 + 13 + 2


def test_a_transaction_costs_two_units_per_started_kilobyte_of_each_item() -> None:
    small_put = {"Put": {"TableName": "t", "Item": {"pk": {"S": "a"}}}}
    big_put = {"Put": {"TableName": "t", "Item": {"pk": {"S": "b"}, "v": {"S": "x" * 1500}}}}
    update = {
        "Update": {
            "TableName": "t",
            "Key": {"pk": {"S": "c"}},
            "UpdateExpression": "SET #v = :v, #n = if_not_exists(#n, :z) REMOVE #gone",
            "ExpressionAttributeNames": {"#v": "v", "#n": "n", "#gone": "gone"},
            "ExpressionAttributeValues": {":v": {"S": "y" * 2100}, ":z": {"N": "0"}},
        }
    }
    assert estimate_write_units([small_put]) == 2
    assert estimate_write_units([big_put]) == 4  # 1,505 bytes: 2 KB started
    assert estimate_write_units([update]) == 6  # key + "v" + 2,100 bytes: 3 KB started
    assert estimate_write_units([small_put, big_put, update]) == 12
    assert estimate_write_units([small_put], extra_bytes=1024) == 4


def test_the_meter_adds_reported_units_and_counts_what_it_cannot_see() -> None:
    meter = CapacityMeter()
    meter.record("UpdateItem", {"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 1.0}})
    meter.record("GetItem", {"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 1.0}})
    meter.record("TransactWriteItems", {"ConsumedCapacity": [{"TableName": "t", "WriteCapacityUnits": 6.0}]})
    meter.record("TransactWriteItems", {"ConsumedCapacity": []})  # moto answers a transaction so
    meter.record_unmetered("UpdateItem")  # a failed condition: consumed, not reported
    snapshot = meter.snapshot()
    assert (snapshot.read_units, snapshot.write_units) == (1.0, 7.0)
    assert snapshot.requests == {"UpdateItem": 2, "GetItem": 1, "TransactWriteItems": 2}
    assert snapshot.unmetered_requests == 2 and snapshot.request_count == 5
    later = CapacityMeter()
    later.record("UpdateItem", {"ConsumedCapacity": {"CapacityUnits": 2.0}})
    assert (later.snapshot() - CapacitySnapshot()).write_units == 2.0
    assert (snapshot - snapshot).request_count == 0


def test_every_lock_request_asks_for_its_consumed_capacity(lock: SlotLock, slot: Slot, backend: str) -> None:
    # GIVEN a fresh lock: WHEN it acquires, records its state and commits a slot
    before = lock.capacity.snapshot()
    lease = lock.acquire(slot, "owner-a")
    lease = lock.record_state(lease, {"query_execution_id": "q"})
    lock.commit(lease, summary={"rows": 1})
    used = lock.capacity.snapshot() - before
    # THEN each request was counted, and both backends report the single-item writes' units
    # (the state and the commit are each a transaction of the lock item and the slot item)
    assert used.requests == {"UpdateItem": 1, "TransactWriteItems": 2}
    assert used.write_units > 0  # moto reports 0.5 for an UpdateItem, DynamoDB Local 1 per started KB
    if backend == "dynamodb-local":  # it reports transactions too; moto answers them with an empty list
        assert used.unmetered_requests == 0 and used.write_units >= 1 + 2 * 4
    else:
        assert used.unmetered_requests == 2


def test_a_lost_race_is_counted_unmetered(lock: SlotLock, slot: Slot) -> None:
    lock.acquire(slot, "owner-a")
    before = lock.capacity.snapshot()
    assert not lock.try_acquire(slot, "owner-b").acquired
    used = lock.capacity.snapshot() - before
    assert used.requests == {"UpdateItem": 1} and used.unmetered_requests == 1 and used.write_units == 0


def test_the_meter_is_one_hook_per_client_and_counts_only_requests_that_ask(
    lock: SlotLock, slot: Slot, make_semaphore: Any, ddb: Any, table: str
) -> None:
    # GIVEN the lock's client: its meter is registered once (asking again gives the same meter, no second hook)
    meter = CapacityMeter.of(ddb)
    assert CapacityMeter.of(ddb) is meter is lock.capacity
    before = meter.snapshot()
    # WHEN the lock acquires, a semaphore on the same client reads its permits, and someone else reads an item
    # without asking for its consumed capacity
    lock.acquire(slot, "owner-a")
    make_semaphore(permits=2).read()
    ddb.get_item(TableName=table, Key={"pk": {"S": "no-such-item"}})
    used = meter.snapshot() - before
    # THEN the lock's and the semaphore's requests are counted, once each; the plain read is not
    assert used.requests == {"UpdateItem": 1, "BatchGetItem": 1}
    assert used.write_units > 0  # (absent permit items: DynamoDB Local reports 0 read units, moto 1 per item)


@pytest.mark.backends("moto")
def test_a_request_without_an_answer_is_counted_unmetered(ddb: Any) -> None:
    # GIVEN a meter on a client; WHEN a request asking for its capacity gets no answer (the connection fails)
    meter = CapacityMeter.of(ddb)

    def drop(**_: Any) -> None:
        raise ConnectionError("dropped")

    ddb.meta.events.register_first("before-send.dynamodb", drop)
    with pytest.raises(ConnectionError):
        ddb.get_item(TableName="t", Key={"pk": {"S": "k"}}, ReturnConsumedCapacity="TOTAL")
    # THEN it is one request, unmetered (after-call-error names the operation in its event name)
    assert meter.snapshot().requests == {"GetItem": 1} and meter.snapshot().unmetered_requests == 1
