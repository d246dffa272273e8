"""The chaos worker's fault seams on AWS DynamoDB Local: real boto3 clients, botocore's real retries, and the
faults aimed at the lock's writes met by the real :class:`slotlock.SlotLock`."""

from __future__ import annotations

import signal
import time
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from athena_refresh.errors import QueryEngineError
from local.chaos.faults import (
    ACQUIRE,
    ATHENA_MAX_ATTEMPTS,
    ATHENA_THROTTLE,
    CANCELLED_PREFIX,
    COMMIT,
    DYNAMODB_STANDARD_MAX_ATTEMPTS,
    HEARTBEAT,
    OPERATOR_RELEASE,
    PERMANENT_CANCELLATION_KIND,
    RECORD_MISSED,
    RECORD_STATE,
    RESPONSE_LOST,
    TRANSACTION_CONFLICT,
    TRANSIENT_CANCELLATION_KINDS,
    TRANSIENT_CANCELLATION_MESSAGES,
)
from local.chaos.worker import BotocoreFaults, ChaosRuntime, FaultPlan, FaultyEngine
from local.emulators import lambda_runtime
from slotlock import Slot, SlotLock, WriteRejectedError, create_lock_table

pytestmark = pytest.mark.usefixtures("fake_aws_credentials")


class Reports(list):
    def __call__(self, message: dict[str, Any]) -> None:
        self.append(message)


def faulty_client(endpoint: str, plan: FaultPlan, *, fencing: bool = True) -> Any:
    session = boto3.Session(region_name="us-east-1")
    BotocoreFaults(plan, fencing=fencing).install(session.events)
    return session.client("dynamodb", endpoint_url=endpoint, config=Config(retries={"mode": "standard"}))


@pytest.fixture
def table(dynamodb_local: Any, request: pytest.FixtureRequest) -> str:
    name = f"chaos-worker-{abs(hash(request.node.name)) % 10**8}"
    client = dynamodb_local.client()
    create_lock_table(client, name, enable_ttl=False)
    yield name
    client.delete_table(TableName=name)


def storm(kind: str, calls: int) -> FaultPlan:
    plan = FaultPlan(seed=1, transient_rate=0.0, report=Reports())
    plan.storm = {"target": "dynamodb", "kind": kind, "calls": calls}
    return plan


@pytest.mark.parametrize("kind", ["ProvisionedThroughputExceededException", "ThrottlingException", "connection_error"])
def test_a_transient_fault_is_retried_by_botocore_and_the_call_succeeds(
    dynamodb_local: Any, table: str, kind: str
) -> None:
    plan = storm(kind, calls=1)
    client = faulty_client(dynamodb_local.endpoint_url, plan)
    response = client.put_item(TableName=table, Item={"pk": {"S": "a"}})
    assert response["ResponseMetadata"]["RetryAttempts"] == 1
    assert [(r["kind"], r["operation"]) for r in plan.report] == [(kind, "PutItem")]


def test_a_storm_outlasting_the_retries_reaches_the_caller(dynamodb_local: Any, table: str) -> None:
    plan = storm("ProvisionedThroughputExceededException", calls=DYNAMODB_STANDARD_MAX_ATTEMPTS)
    client = faulty_client(dynamodb_local.endpoint_url, plan)
    with pytest.raises(ClientError) as caught:
        client.get_item(TableName=table, Key={"pk": {"S": "a"}})
    assert caught.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert len(plan.report) == DYNAMODB_STANDARD_MAX_ATTEMPTS == 4  # botocore standard mode, for DynamoDB


def test_a_lost_response_means_the_write_applied_and_the_retry_sees_it(dynamodb_local: Any, table: str) -> None:
    # The hazard a lock must survive: the first attempt applied, the caller only sees the retry's answer.
    plan = storm("response_lost", calls=1)
    client = faulty_client(dynamodb_local.endpoint_url, plan)
    with pytest.raises(ClientError) as caught:
        client.put_item(TableName=table, Item={"pk": {"S": "once"}}, ConditionExpression="attribute_not_exists(pk)")
    assert caught.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert dynamodb_local.client().get_item(TableName=table, Key={"pk": {"S": "once"}})["Item"] == {"pk": {"S": "once"}}


@pytest.mark.parametrize("fencing", [True, False])
def test_no_fencing_makes_transaction_conditions_vacuous(dynamodb_local: Any, table: str, fencing: bool) -> None:
    plan = FaultPlan(seed=1, transient_rate=0.0, report=Reports())
    client = faulty_client(dynamodb_local.endpoint_url, plan, fencing=fencing)
    client.put_item(TableName=table, Item={"pk": {"S": "lock"}, "fencing_token": {"N": "5"}})
    stale_commit = {
        "TransactItems": [
            {
                "Update": {
                    "TableName": table,
                    "Key": {"pk": {"S": "lock"}},
                    "UpdateExpression": "SET #owner = :owner",
                    "ConditionExpression": "#token = :token",
                    "ExpressionAttributeNames": {"#owner": "owner_id", "#token": "fencing_token"},
                    "ExpressionAttributeValues": {":owner": {"S": "stale"}, ":token": {"N": "4"}},
                }
            }
        ]
    }
    if fencing:
        with pytest.raises(ClientError, match="TransactionCanceledException"):
            client.transact_write_items(**stale_commit)
    else:
        client.transact_write_items(**stale_commit)  # the negative control: the stale token is accepted
        item = dynamodb_local.client().get_item(TableName=table, Key={"pk": {"S": "lock"}})["Item"]
        assert item["owner_id"] == {"S": "stale"}


class CountingEngine:
    def __init__(self) -> None:
        self.calls = 0

    def start_query(self, **kwargs: Any) -> str:
        self.calls += 1
        return "qid-1"

    def get_query(self, query_execution_id: str) -> str:
        self.calls += 1
        return "state"

    def get_results(self, query_execution_id: str) -> str:
        self.calls += 1
        return "rows"


@pytest.mark.parametrize(
    ("throttled", "raises"), [(0, False), (ATHENA_MAX_ATTEMPTS - 1, False), (ATHENA_MAX_ATTEMPTS, True)]
)
def test_the_engine_proxy_throttles_like_athena_and_retries_like_botocore(throttled: int, raises: bool) -> None:
    plan = FaultPlan(seed=1, transient_rate=0.0, report=Reports())
    plan.storm = {"target": "athena", "kind": ATHENA_THROTTLE, "calls": throttled}
    inner = CountingEngine()
    engine = FaultyEngine(inner, plan, backoff_s=0.0)
    if raises:
        with pytest.raises(QueryEngineError, match=ATHENA_THROTTLE):
            engine.start_query(sql="SELECT 1", parameters=[], client_request_token="t" * 32)
        assert inner.calls == 0
    else:
        assert engine.start_query(sql="SELECT 1", parameters=[], client_request_token="t" * 32) == "qid-1"
        assert inner.calls == 1
    assert [r["kind"] for r in plan.report] == [ATHENA_THROTTLE] * throttled


# --- faults aimed at the lock's writes ------------------------------------------------------------------
JOB = "chaos-job"


def aimed(forced: list[dict[str, str]] | None = None, *, scale: float = 0.0) -> FaultPlan:
    """A plan whose only faults are ``forced`` (random rates scaled by ``scale``; 0: none)."""
    plan = FaultPlan(seed=1, transient_rate=0.0, report=Reports(), write_fault_scale=scale)
    plan.forced = [dict(f) for f in forced or ()]
    return plan


def lock_on(endpoint: str, plan: FaultPlan, table: str, **kwargs: Any) -> SlotLock:
    kwargs = {"lease_duration_s": 10, "heartbeat_interval_s": 2, "sleep_s": lambda _s: None, **kwargs}
    return SlotLock(table, JOB, client=faulty_client(endpoint, plan), **kwargs)


def a_recent_slot() -> Slot:
    return Slot(int(time.time()) - 120)


def results_put(table: str, slot: Slot) -> dict[str, Any]:
    """A caller's write in the commit, on another table than the lock's (as the results store's are)."""
    return {"Put": {"TableName": table + "-results", "Item": {"pk": {"S": f"result#{slot.iso}"}}}}


@pytest.fixture
def results_table(dynamodb_local: Any, table: str) -> str:
    client = dynamodb_local.client()
    create_lock_table(client, table + "-results", enable_ttl=False)
    yield table + "-results"
    client.delete_table(TableName=table + "-results")


def test_every_lock_write_is_told_apart_by_its_request_body(dynamodb_local: Any, table: str) -> None:
    plan = aimed()
    lock = lock_on(dynamodb_local.endpoint_url, plan, table)
    lease = lock.acquire(a_recent_slot(), "req-a")
    lease = lock.record_state(lease, {"query_execution_id": "q-1"})
    lock.heartbeat(lease)
    lock.commit(lease, summary={"rows": 0})
    assert lock.record_missed(Slot(lease.slot.epoch_s - 1800), "overrun")  # UpdateItem
    old = lock_on(dynamodb_local.endpoint_url, plan, table, max_slot_age_s=60)
    assert old.try_acquire(Slot(lease.slot.epoch_s - 3600), "req-b").missed_recorded  # too_old: TransactWriteItems
    assert plan.writes == {ACQUIRE: 1, RECORD_STATE: 1, HEARTBEAT: 1, COMMIT: 1, RECORD_MISSED: 2}
    assert plan.report == []  # scale 0, nothing forced: no fault


@pytest.mark.parametrize("reason", sorted(TRANSIENT_CANCELLATION_MESSAGES))
def test_a_fabricated_cancellation_has_one_reason_per_item_and_botocore_does_not_retry_it(
    dynamodb_local: Any, table: str, reason: str
) -> None:
    plan = aimed([{"write": COMMIT, "kind": CANCELLED_PREFIX + reason}])
    client = faulty_client(dynamodb_local.endpoint_url, plan)
    items = [
        {
            "Update": {
                "TableName": table,
                "Key": {"pk": {"S": f"k{n}"}},
                "UpdateExpression": "SET #status = :status",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {":status": {"S": "SUCCEEDED"}},
            }
        }
        for n in range(3)
    ]
    with pytest.raises(ClientError) as caught:
        client.transact_write_items(TransactItems=items)
    error = caught.value.response
    assert error["Error"]["Code"] == "TransactionCanceledException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400 and error["ResponseMetadata"]["RetryAttempts"] == 0
    codes = [r["Code"] for r in error["CancellationReasons"]]
    assert len(codes) == len(items) and sorted(codes) == sorted(["None", "None", reason])
    assert f"[{', '.join(codes)}]" in error["Error"]["Message"]
    assert plan.requests == 1
    assert [(r["kind"], r["write"]) for r in plan.report] == [(CANCELLED_PREFIX + reason, COMMIT)]
    assert "Item" not in dynamodb_local.client().get_item(TableName=table, Key={"pk": {"S": "k0"}})  # nothing sent


@pytest.mark.parametrize("write", [RECORD_STATE, COMMIT])
def test_the_lock_retries_a_transient_cancellation_of_its_state_record_and_commit(
    dynamodb_local: Any, table: str, write: str
) -> None:
    plan = aimed([{"write": write, "kind": kind} for kind in TRANSIENT_CANCELLATION_KINDS])  # three in a row
    lock = lock_on(dynamodb_local.endpoint_url, plan, table)
    lease = lock.acquire(a_recent_slot(), "req-a")
    lease = lock.record_state(lease, {"query_execution_id": "q-1"})
    receipt = lock.commit(lease, summary={"rows": 0})
    assert receipt.outcome == "succeeded" and not receipt.already_applied
    assert plan.writes[write] == 4 and plan.forced == []  # three cancelled, the fourth applied
    assert lock.get_slot(lease.slot)["status"] == "SUCCEEDED"


def test_a_permanent_validation_error_is_aimed_at_a_results_item_only(
    dynamodb_local: Any, table: str, results_table: str
) -> None:
    plan = aimed([{"write": COMMIT, "kind": PERMANENT_CANCELLATION_KIND}])
    lock = lock_on(dynamodb_local.endpoint_url, plan, table)
    lease = lock.acquire(a_recent_slot(), "req-a")
    with pytest.raises(WriteRejectedError) as caught:
        lock.commit(lease, writes=[results_put(table, lease.slot)], summary={"rows": 1})
    assert caught.value.reason_code == "ValidationError" and caught.value.index == 2  # the results item
    # The failure record carries no results item: the forced fault does not apply to it (nothing to aim at).
    plan.forced = [{"write": COMMIT, "kind": PERMANENT_CANCELLATION_KIND}]
    assert lock.commit(lease, outcome="failed", error=caught.value.as_dict()).outcome == "failed"
    assert lock.get_slot(lease.slot)["status"] == "FAILED"
    assert [r["kind"] for r in plan.report] == [PERMANENT_CANCELLATION_KIND]


def test_no_permanent_validation_error_in_an_invocation_with_a_checkpoint_fault(
    dynamodb_local: Any, table: str, results_table: str
) -> None:
    # Its before_commit checkpoint would fire again for the failure record (a second SIGSTOP, say).
    plan = aimed([{"write": COMMIT, "kind": PERMANENT_CANCELLATION_KIND}])
    plan.permanent_allowed = False  # ChaosRuntime: the invocation carries a checkpoint fault
    lock = lock_on(dynamodb_local.endpoint_url, plan, table)
    lease = lock.acquire(a_recent_slot(), "req-a")
    assert lock.commit(lease, writes=[results_put(table, lease.slot)]).outcome == "succeeded"
    assert plan.report == [] and plan.writes[COMMIT] == 1


def test_a_transaction_conflict_on_the_acquire_and_the_heartbeat_is_retried_by_the_lock_not_botocore(
    dynamodb_local: Any, table: str
) -> None:
    plan = aimed()
    lock = lock_on(dynamodb_local.endpoint_url, plan, table)
    plan.forced = [{"write": ACQUIRE, "kind": TRANSACTION_CONFLICT}]
    lease = lock.acquire(a_recent_slot(), "req-a")
    plan.forced = [{"write": HEARTBEAT, "kind": TRANSACTION_CONFLICT}]
    time.sleep(0.01)
    renewed = lock.heartbeat(lease)
    assert renewed.expires_at_ms > lease.expires_at_ms
    assert plan.writes == {ACQUIRE: 2, HEARTBEAT: 2}  # each: the conflict (not resent by botocore), then the retry
    assert [(r["kind"], r["write"]) for r in plan.report] == [
        (TRANSACTION_CONFLICT, ACQUIRE),
        (TRANSACTION_CONFLICT, HEARTBEAT),
    ]


@pytest.mark.parametrize("path", ["UpdateItem", "TransactWriteItems"])
def test_a_missed_record_whose_answer_was_lost_is_resent_and_recognised_as_ours(
    dynamodb_local: Any, table: str, path: str
) -> None:
    plan = aimed([{"write": RECORD_MISSED, "kind": RESPONSE_LOST}])
    lock = lock_on(dynamodb_local.endpoint_url, plan, table, max_slot_age_s=60)
    slot = Slot(int(time.time()) - 7200)
    if path == "UpdateItem":
        assert lock.record_missed(slot, "overrun") is True
    else:
        loss = lock.try_acquire(slot, "req-a")  # too_old: the MISSED record and the lock's missed-slot check
        assert loss.reason == "too_old" and loss.missed_recorded is True
    assert plan.writes == {RECORD_MISSED: 2}  # the lost one (applied) and botocore's resend
    assert lock.get_slot(slot)["status"] == "MISSED"
    assert [(r["kind"], r["write"], r["operation"]) for r in plan.report] == [(RESPONSE_LOST, RECORD_MISSED, path)]


def test_the_negative_controls_faulted_invocations_get_no_aimed_fault() -> None:
    # Its stopped holder has no retry budget left after its lease: a cancelled stale commit would never be sent.
    plan = aimed([{"write": COMMIT, "kind": TRANSIENT_CANCELLATION_KINDS[0]}], scale=1000.0)
    plan.aimed_allowed = False  # ChaosRuntime under --no-fencing, for an invocation with a checkpoint fault
    assert plan.decide_write(COMMIT, "TransactWriteItems", first_attempt=True, results_items=True) is None
    plan.aimed_allowed = True
    assert (
        plan.decide_write(COMMIT, "TransactWriteItems", first_attempt=True, results_items=True)
        == TRANSIENT_CANCELLATION_KINDS[0]
    )


RELEASED_BEFORE_COMMIT = {"action": "pause", "checkpoint": "before_commit", "operator": OPERATOR_RELEASE}


@pytest.mark.parametrize(
    ("fault", "checkpoint", "aimed_after"),
    [
        (RELEASED_BEFORE_COMMIT, "before_commit", False),  # resumed after the forced release: its commit is fenced
        ({**RELEASED_BEFORE_COMMIT, "checkpoint": "query_started"}, "query_started", False),  # ... its renewal is
        (RELEASED_BEFORE_COMMIT, "query_finished", True),  # not stopped yet
        ({"action": "pause", "checkpoint": "before_commit", "policy": "takeover_done"}, "before_commit", True),
        (None, "before_commit", True),
    ],
)
def test_a_force_released_holder_gets_no_aimed_fault_once_resumed(
    monkeypatch: pytest.MonkeyPatch, fault: dict[str, str] | None, checkpoint: str, aimed_after: bool
) -> None:
    # Whether its stale write would be retried after a cancellation depends on the time left on its lease when
    # the harness resumes it (scheduling): that write must reach the fence every time. A plain stop keeps them.
    signals: list[int] = []
    monkeypatch.setattr(lambda_runtime.os, "kill", lambda _pid, sig: signals.append(sig))  # SIGSTOP, then "SIGCONT"
    runtime = ChaosRuntime.__new__(ChaosRuntime)  # no cold start: only the checkpoint seam is exercised
    runtime.plan = aimed(scale=1000.0)  # every aimed write fault drawn, were it allowed
    runtime.channel = SimpleNamespace(send=Reports())
    runtime.current = {"request_id": "req-a", "fault": fault}
    lease = SimpleNamespace(
        fencing_token=7, takeover=False, reentered=False, state={}, expires_at_ms=0, superseded_slot=None
    )
    runtime.checkpoint(checkpoint, lease)
    assert signals == ([signal.SIGSTOP] if fault and fault["checkpoint"] == checkpoint else [])
    assert runtime.plan.aimed_allowed is aimed_after
    commit = runtime.plan.decide_write(COMMIT, "TransactWriteItems", first_attempt=True, results_items=False)
    assert (commit is not None) is aimed_after
