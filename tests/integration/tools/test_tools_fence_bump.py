"""``python -m tools.fence_bump``: a simulated point-in-time restore, its failure mode, and the fix (moto).

The job runs for real (SlotLock commits with ResultsStore's fenced writes); the restore is simulated by
writing an older copy of the lock item back, which is what PITR does to the table.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from typing import Any

import boto3
import moto
import pytest

from athena_refresh.engine import Column, QueryResult, QueryStatistics
from athena_refresh.results import ResultsStore, create_results_table
from slotlock import Slot, SlotLock, create_lock_table
from tools import fence_bump

JOB = "flights-dashboard"
LOCK_TABLE, RESULTS_TABLE = "refresh-locks", "refresh-results"
PERIOD_S = 1800
#: A day ago, so every slot the tests run is in the past of the tool's (real) clock: no lease looks live.
SLOT0 = Slot((int(time.time()) - 86_400) // PERIOD_S * PERIOD_S)


@pytest.fixture
def ddb() -> Iterator[Any]:
    with moto.mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_lock_table(client, LOCK_TABLE, enable_ttl=False)
        create_results_table(client, RESULTS_TABLE)
        yield client


class Job:
    """The refresh's lock and results on the moto tables, with a clock that moves one period per run."""

    def __init__(self, ddb: Any) -> None:
        self.ddb = ddb
        self.now_ms = SLOT0.epoch_ms + 2_000
        self.lock = SlotLock(LOCK_TABLE, JOB, client=ddb, lease_duration_s=45, clock_ms=lambda: self.now_ms)
        self.store = ResultsStore(RESULTS_TABLE, dynamodb_client=ddb)

    def run(self, index: int) -> int:
        """Run slot ``index`` (acquire, fenced commit with its result); returns its token."""
        slot = Slot(SLOT0.epoch_s + PERIOD_S * index)
        self.now_ms = slot.epoch_ms + 2_000
        lease = self.lock.acquire(slot, f"req-{index}")
        prepared = self.store.prepare(
            job_name=JOB,
            slot_iso=slot.iso,
            fencing_token=lease.fencing_token,
            query_execution_id=f"q-{index}",
            statistics=QueryStatistics(),
            result=QueryResult((Column("n", "bigint"),), [{"n": index}]),
            committed_at_ms=self.now_ms,
            window=("a", "b"),
        )
        self.lock.commit(lease, writes=prepared.writes, summary=prepared.summary)
        return lease.fencing_token

    def lock_item(self) -> dict[str, Any]:
        return self.ddb.get_item(TableName=LOCK_TABLE, Key={"pk": {"S": self.lock.lock_key}}, ConsistentRead=True)[
            "Item"
        ]

    def restore(self, item: dict[str, Any]) -> None:
        self.ddb.put_item(TableName=LOCK_TABLE, Item=item)


def cli(ddb: Any, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = fence_bump.main(
        ["--lock-table", LOCK_TABLE, "--results-table", RESULTS_TABLE, "--job", JOB, *args],
        dynamodb=ddb,
        out=out,
        err=err,
    )
    return code, out.getvalue(), err.getvalue()


def test_after_a_restore_tokens_repeat_until_the_fence_bump_raises_them_above_every_stored_one(ddb: Any) -> None:
    # GIVEN a job that ran 5 slots (tokens 1..5), and a lock-table backup taken after slot 1
    job = Job(ddb)
    job.run(0)
    backup = job.lock_item()
    assert [job.run(i) for i in range(1, 5)] == [2, 3, 4, 5]

    # WHEN the lock table is restored to that point: the counter is back to 1
    job.restore(backup)

    # THEN the next winner gets token 2 again, a token already stored with slot 1's result: tokens no longer
    # identify one acquisition (LATEST orders by slot, then generation, so the newer slot still commits)
    assert job.run(5) == 2
    assert job.store.get_result(JOB, Slot(SLOT0.epoch_s + PERIOD_S).iso)["fencing_token"] == 2  # type: ignore[index]

    # WHEN the operator runs the fence bump
    code, out, err = cli(ddb, "--margin", "100")

    # THEN it reports the stored tokens and the counter before/after
    assert (code, err) == (0, "")
    assert "highest fencing token stored with results: 5" in out
    assert f"LATEST pointer token 2 (slot {Slot(SLOT0.epoch_s + PERIOD_S * 5).iso}); 6 result items" in out
    assert "bumped: lock refresh-locks fencing token 2 -> 105 (target 5 + margin 100); next acquisition gets 106" in out
    # AND the next winner commits under token 106
    assert job.run(6) == 106
    assert job.store.get_latest(JOB)["fencing_token"] == 106  # type: ignore[index]


def test_a_second_run_changes_nothing(ddb: Any) -> None:
    job = Job(ddb)
    for i in range(3):
        job.run(i)
    assert cli(ddb, "--margin", "10")[0] == 0
    code, out, _ = cli(ddb, "--margin", "10")
    assert code == 0
    assert (
        "already above: lock refresh-locks fencing token 13 >= target 13; nothing written; next acquisition gets 14"
        in out
    )


def test_dry_run_writes_nothing(ddb: Any) -> None:
    job = Job(ddb)
    job.run(0)
    backup = job.lock_item()
    job.run(1)
    job.run(2)
    job.restore(backup)
    code, out, _ = cli(ddb, "--dry-run")
    assert code == 0
    assert (
        "dry run: lock refresh-locks fencing token 1 -> would be 1003 (target 3 + margin 1000); nothing written" in out
    )
    assert job.lock.get_lock().fencing_token == 1


def test_a_restore_without_the_lock_item_gets_the_counter_back(ddb: Any) -> None:
    job = Job(ddb)
    job.run(0)
    job.run(1)
    ddb.delete_item(TableName=LOCK_TABLE, Key={"pk": {"S": job.lock.lock_key}})
    code, out, _ = cli(ddb)
    assert code == 0 and "fencing token none -> 1002" in out
    assert job.run(2) == 1003


def test_a_live_lease_is_refused_unless_forced(ddb: Any) -> None:
    job = Job(ddb)
    job.run(0)
    job.lock.clock_ms = lambda: 10**13  # hold a lease that the real clock sees as live for a long time
    job.lock.acquire(Slot(SLOT0.epoch_s + PERIOD_S), "req-live")
    code, _, err = cli(ddb)
    assert code == 1 and "refused" in err and "req-live" in err and "--force" in err
    assert job.lock.get_lock().fencing_token == 2
    assert cli(ddb, "--force")[0] == 0
    assert job.lock.get_lock().fencing_token == 1001


def test_a_missing_table_is_an_error_with_exit_status_1(ddb: Any) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = fence_bump.main(
        ["--lock-table", LOCK_TABLE, "--results-table", "no-such-table", "--job", JOB], dynamodb=ddb, out=out, err=err
    )
    assert code == 1 and "ResourceNotFoundException" in err.getvalue()


def test_a_negative_margin_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as info:
        fence_bump.parse_args(["--lock-table", "a", "--results-table", "b", "--job", "c", "--margin", "-1"])
    assert info.value.code == 2


def test_results_are_read_with_a_projection_across_pages(ddb: Any) -> None:
    # GIVEN many results (moto pages Query at 1 MB; force small pages with Limit through a wrapper)
    job = Job(ddb)
    for i in range(7):
        job.run(i)
    calls: list[dict[str, Any]] = []
    original = ddb.query

    def query(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return original(**kwargs, Limit=3)

    class Client:
        def __getattr__(self, name: str) -> Any:
            return query if name == "query" else getattr(ddb, name)

    stored = fence_bump.stored_tokens(Client(), RESULTS_TABLE, JOB)
    assert (stored.highest, stored.latest_token, stored.result_items) == (7, 7, 7)
    assert len(calls) == 3 and all("ProjectionExpression" in c and c["ConsistentRead"] for c in calls)
