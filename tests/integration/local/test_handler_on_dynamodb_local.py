"""The real handler against AWS's own DynamoDB Local: every request the job sends must be valid there.

moto accepts requests that DynamoDB rejects (unused expression values, wrong types); DynamoDB Local
validates like AWS. This runs a winner, two losers, a takeover with a stale commit and the results
store's fenced writes through the production code path (``AWS_ENDPOINT_URL`` points boto3 at it).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from athena_refresh import contract, service
from athena_refresh.catalog import CatalogQuery, write_catalog
from athena_refresh.engine import Column, QueryExecution, QueryResult, QueryStatistics
from athena_refresh.handler import make_handler
from athena_refresh.job_defaults import spec_of
from athena_refresh.results import ResultsStore, create_results_table
from athena_refresh.settings import Settings
from slotlock import Slot, SlotLock, StaleFencingTokenError, create_lock_table

# The inline query form binds exactly two ?: the window's start and end (the engine below is scripted).
SQL = "SELECT origin, count(*) AS flights FROM flights WHERE t >= CAST(? AS timestamp) AND t < CAST(? AS timestamp)"


class ScriptedEngine:
    """Succeeds at once with two rows; counts starts per ClientRequestToken."""

    def __init__(self) -> None:
        self.starts: dict[str, str] = {}

    def start_query(self, *, sql: str, parameters: Any, client_request_token: str) -> str:
        return self.starts.setdefault(client_request_token, f"qe-{len(self.starts) + 1}")

    def get_query(self, query_execution_id: str) -> QueryExecution:
        return QueryExecution(query_execution_id, "SUCCEEDED", QueryStatistics(data_scanned_bytes=2048))

    def get_results(self, query_execution_id: str, *, on_page: Any = None) -> QueryResult:
        return QueryResult(
            (Column("origin", "varchar"), Column("flights", "bigint")),
            [{"origin": "EWR", "flights": 358}, {"origin": "JFK", "flights": None}],
        )


@dataclass
class Context:
    aws_request_id: str
    function_name: str = "athena-refresh"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:athena-refresh"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@pytest.fixture
def environment(dynamodb_local: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, str]]:
    suffix = uuid.uuid4().hex[:8]
    client = boto3.client("dynamodb", endpoint_url=dynamodb_local.endpoint_url)
    lock_table, results_table = f"locks-{suffix}", f"results-{suffix}"
    create_lock_table(client, lock_table, enable_ttl=False)
    create_results_table(client, results_table)
    spec = spec_of(
        job_name="flights",
        schedule_expression="cron(0/30 * * * ? *)",
        window_s=86_400,
        data_year=2013,
        database="flights_demo",
        table="flights",
        workgroup="primary",
        sql=SQL,
    )
    catalog = write_catalog(tmp_path / "job_catalog.json", {"flights": CatalogQuery(SQL, spec=spec)})
    env = {
        "AWS_ENDPOINT_URL": dynamodb_local.endpoint_url,
        contract.ENV_JOB_NAME: "flights",
        contract.ENV_LOCK_TABLE_NAME: lock_table,
        contract.ENV_RESULTS_TABLE_NAME: results_table,
        contract.ENV_ATHENA_WORKGROUP: "primary",
        contract.ENV_ATHENA_DATABASE: "flights_demo",
        contract.ENV_JOB_CATALOG_PATH: str(catalog),
        contract.ENV_LEASE_DURATION_S: "30",
        contract.ENV_HEARTBEAT_INTERVAL_S: "10",
        contract.ENV_MAX_SLOT_AGE_S: "3600",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    service.metrics.clear_default_dimensions()  # a new execution environment (other tests used other jobs)
    yield env


def test_winner_losers_and_fenced_results_are_valid_on_dynamodb_local(environment: dict[str, str]) -> None:
    # GIVEN a slot that is due now (DynamoDB Local deletes TTL-expired items by real time, so real clocks)
    slot = Slot(int(time.time()) // 1800 * 1800)
    event = {"scheduled_time": slot.iso, "racer": 0, "job": "flights"}

    # WHEN three racers invoke the real handler (one execution environment: its deps built once, with a fake engine)
    engine = ScriptedEngine()
    lambda_handler = make_handler(lambda settings: service.Deps.from_settings(settings, engine=engine))
    outcomes = [lambda_handler(event, Context(f"req-{i}")) for i in range(3)]

    # THEN one committed and the others lost, all through requests DynamoDB Local accepted
    assert [o["status"] for o in outcomes] == ["succeeded", "lost", "lost"]
    assert {o["reason"] for o in outcomes[1:]} == {"slot_finished"}
    store = ResultsStore(environment[contract.ENV_RESULTS_TABLE_NAME])
    latest = store.get_latest("flights")
    assert latest is not None and latest["latest_slot"] == slot.iso and latest["fencing_token"] == 1
    result = store.get_result("flights", slot.iso)
    assert result is not None and result["rows"] == [
        {"origin": "EWR", "flights": 358},
        {"origin": "JFK", "flights": None},
    ]


def test_stale_holder_commit_is_rejected_on_dynamodb_local(environment: dict[str, str]) -> None:
    # GIVEN holder A of the current slot whose lease a successor B took over (A's clock ran slow)
    settings = Settings.from_env()
    now_ms = int(time.time() * 1000)
    slot = Slot(now_ms // 1000 // 1800 * 1800)
    clock = {"now": now_ms}
    lock = SlotLock(
        settings.lock_table_name,
        settings.job_name,
        lease_duration_s=30,
        clock_ms=lambda: clock["now"],
        client=boto3.client("dynamodb", endpoint_url=environment["AWS_ENDPOINT_URL"]),
    )
    holder = lock.try_acquire(slot, "A")
    assert holder.acquired
    lock.record_state(holder, {"query_execution_id": "qe-A"})
    clock["now"] += 31_000
    successor = lock.try_acquire(slot, "B")
    assert successor.acquired and successor.takeover_from == "A" and successor.state["query_execution_id"] == "qe-A"

    # WHEN A commits with a results write of its own, then B commits
    writes = [
        {
            "Put": {
                "TableName": settings.results_table_name,
                "Item": {"job": {"S": "flights"}, "slot": {"S": slot.iso}, "fencing_token": {"N": "1"}},
                "ConditionExpression": "attribute_not_exists(#slot)",
                "ExpressionAttributeNames": {"#slot": "slot"},
            }
        }
    ]
    with pytest.raises(StaleFencingTokenError):
        lock.commit(holder, writes=writes)
    receipt = lock.commit(successor, summary={"rows": 0})

    # THEN nothing of A's transaction was written, and B's commit holds
    assert ResultsStore(settings.results_table_name).get_result("flights", slot.iso) is None
    assert receipt.fencing_token == 2 and lock.get_slot(slot)["status"] == "SUCCEEDED"
