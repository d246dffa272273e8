"""The slot's cost estimate against DynamoDB: what the runtime measures, and the commit's model (the commit records
the estimate, so its own units are modelled) against AWS's documented rule applied to the items it really wrote.

AWS: a transactional write costs 2 WRU per started KB of each item (the larger of its size before and after)
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling.
DynamoDB Local's own ConsumedCapacity for transactions does not follow that rule (it reports more), so it is only
printed on failure, never the reference."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from athena_refresh.cost import InvocationCost, load_prices
from athena_refresh.engine import Column, QueryResult, QueryStatistics
from athena_refresh.results import ResultsStore
from slotlock import Slot, SlotLock
from slotlock.capacity import item_size_bytes

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

COLUMNS = (Column("origin", "varchar"), Column("flights", "bigint"), Column("avg_dep_delay_min", "double"))


@pytest.mark.backends("dynamodb-local")  # moto reports no transaction capacity
@pytest.mark.parametrize("rows", [3, 40, 400])
def test_the_commits_model_matches_the_documented_rule_on_the_items_it_wrote(
    lock: SlotLock, store: ResultsStore, slot: Slot, rows: int, ddb: Any, lock_table: str, results_table: str
) -> None:
    # GIVEN a winner measured from its acquisition, about to commit a result of `rows` rows
    start = lock.capacity.snapshot()
    tracker = InvocationCost(prices=load_prices("us-east-1"), racers=1, memory_mb=256, capacity=lock.capacity)
    lease = lock.acquire(slot, "winner")
    tracker.lock_decided()
    measured_before_commit = (lock.capacity.snapshot() - start).write_units
    modelled: dict[str, float] = {}

    def cost(writes: Any, summary: Any) -> dict[str, Any]:
        estimate = tracker.estimate(
            data_scanned_bytes=[1], commit_writes=writes, summary_bytes=len(json.dumps(summary))
        )
        modelled["total"] = estimate.write_units
        modelled["commit"] = estimate.write_units - measured_before_commit
        return estimate.as_dict()

    prepared = store.prepare(
        job_name=lock.job_name,
        slot_iso=slot.iso,
        fencing_token=lease.fencing_token,
        query_execution_id="0" * 8 + "-0000-0000-0000-" + "0" * 12,
        statistics=QueryStatistics(data_scanned_bytes=1),
        result=QueryResult(
            columns=COLUMNS,
            rows=[{"origin": f"X{i:03}", "flights": i, "avg_dep_delay_min": i / 7} for i in range(rows)],
        ),
        committed_at_ms=lease.acquired_at_ms,
        window=("2013-11-20T00:30:00", "2013-11-21T00:30:00"),
        cost=cost,
    )
    # WHEN the commit carries the estimate
    before = lock.capacity.snapshot()
    lock.commit(lease, writes=prepared.writes, summary=prepared.summary)
    reported = (lock.capacity.snapshot() - before).write_units

    # THEN the acquisition was measured (DynamoDB Local reports single-item writes), and the commit's model equals
    # the documented rule on the four items as stored (lock, slot, result, LATEST; none existed larger before)
    # plus the history index's copy of the slot item: never below it, and over by at most two KB boundaries (the
    # cost attribute and the slot item's own attributes are allowances, not measured)
    stored = [
        *ddb.scan(TableName=lock_table)["Items"],
        *ddb.scan(TableName=results_table)["Items"],
    ]
    assert len(stored) == 4
    documented = sum(2 * math.ceil(item_size_bytes(item) / 1024) for item in stored)
    # and the slot item's copy in the history index (a plain write: 1 WRU per started KB)
    documented += sum(
        math.ceil(item_size_bytes(item) / 1024)
        for item in stored
        if item.get("pk", {}).get("S", "").startswith("slot#")
    )
    assert measured_before_commit >= 1
    assert 0 <= modelled["commit"] - documented <= 4, (modelled["commit"], documented, reported)
    assert prepared.summary["cost"]["usage"]["write_units"] == modelled["total"]
