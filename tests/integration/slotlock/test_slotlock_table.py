"""create_lock_table: the layout the lock expects, on both backends."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from slotlock import Slot, SlotLock, create_lock_table
from slotlock.table import HISTORY_INDEX, PARTITION_KEY, TTL_ATTRIBUTE

pytestmark = pytest.mark.backends("moto", "dynamodb-local")


def test_create_lock_table_creates_the_layout_the_lock_uses(ddb: Any) -> None:
    # GIVEN / WHEN a lock table created by the helper, with TTL
    name = create_lock_table(ddb, f"slotlock-created-{uuid.uuid4().hex[:12]}")
    try:
        # THEN it is on-demand with one string partition key, and TTL is on the history items' attribute
        table = ddb.describe_table(TableName=name)["Table"]
        assert table["KeySchema"] == [{"AttributeName": PARTITION_KEY, "KeyType": "HASH"}]
        assert sorted((a["AttributeName"], a["AttributeType"]) for a in table["AttributeDefinitions"]) == [
            ("job", "S"),
            (PARTITION_KEY, "S"),
            ("slot_epoch_s", "N"),
        ]
        # AND the sparse history index: job / slot epoch, every attribute projected
        (index,) = table["GlobalSecondaryIndexes"]
        assert index["IndexName"] == HISTORY_INDEX
        assert index["KeySchema"] == [
            {"AttributeName": "job", "KeyType": "HASH"},
            {"AttributeName": "slot_epoch_s", "KeyType": "RANGE"},
        ]
        assert index["Projection"]["ProjectionType"] == "ALL"
        assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
        ttl = ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) in {
            ("ENABLED", TTL_ATTRIBUTE),
            ("ENABLING", TTL_ATTRIBUTE),
        }
        # AND a lock works on it
        slot = Slot(1_795_307_400)
        lock = SlotLock(name, "job", client=ddb, clock_ms=lambda: slot.epoch_ms + 1_000)
        assert lock.try_acquire(slot, "A").acquired
    finally:
        ddb.delete_table(TableName=name)
