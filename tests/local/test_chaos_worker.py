"""The chaos worker's fault seams on AWS DynamoDB Local: real boto3 clients, botocore's real retries."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from athena_refresh.errors import QueryEngineError
from local.chaos_worker import (
    ATHENA_MAX_ATTEMPTS,
    ATHENA_THROTTLE,
    DYNAMODB_STANDARD_MAX_ATTEMPTS,
    BotocoreFaults,
    FaultPlan,
    FaultyEngine,
)

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
    client.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    )
    yield name
    client.delete_table(TableName=name)


def storm(kind: str, calls: int) -> FaultPlan:
    plan = FaultPlan(seed=1, transient_rate=0.0, report=Reports())
    plan.storm = {"target": "dynamodb", "kind": kind, "calls": calls}
    return plan


@pytest.mark.parametrize("kind", ["ProvisionedThroughputExceededException", "ThrottlingException", "connection_error"])
def test_a_transient_fault_is_retried_by_botocore_and_the_call_succeeds(dynamodb_local: Any, table: str, kind: str) -> None:
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
    stale_commit = {"TransactItems": [{"Update": {
        "TableName": table, "Key": {"pk": {"S": "lock"}}, "UpdateExpression": "SET #owner = :owner",
        "ConditionExpression": "#token = :token",
        "ExpressionAttributeNames": {"#owner": "owner_id", "#token": "fencing_token"},
        "ExpressionAttributeValues": {":owner": {"S": "stale"}, ":token": {"N": "4"}},
    }}]}
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


@pytest.mark.parametrize(("throttled", "raises"), [(0, False), (ATHENA_MAX_ATTEMPTS - 1, False), (ATHENA_MAX_ATTEMPTS, True)])
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
