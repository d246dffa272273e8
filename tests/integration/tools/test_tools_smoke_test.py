"""``python -m tools.smoke_test``: its logic, with no network.

CloudFormation and Lambda are botocore Stubbers (request shapes checked by botocore against the
service models), DynamoDB and the job registry (SSM) are in-process moto, and for the end-to-end checks the
"deployed function" is the real Lambda handler run in-process by a fake Lambda client. The real run (real credentials,
``python -m tools.smoke_test --stack-name ...``) is never part of the test suite.
"""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import boto3
import moto
import pytest
from aws_lambda_powertools.metrics.provider import cold_start
from botocore.stub import ANY, Stubber

from athena_refresh import contract, service
from athena_refresh.catalog import CatalogQuery, write_catalog
from athena_refresh.engine import Column, QueryExecution, QueryResult, QueryStatistics
from athena_refresh.handler import make_handler
from athena_refresh.job_defaults import spec_of
from athena_refresh.results import ResultsStore, create_results_table
from slotlock import Slot, create_lock_table
from tests.job_registry import PATH, entry, put_raw, register
from tools import smoke_test
from tools.smoke_test import SmokeTestError, StackTargets, discover, run_smoke

STACK = "ScheduledAthenaRefresh"
JOB = "flights-dashboard"
FUNCTION, LOCK_TABLE, RESULTS_TABLE = (
    "ScheduledAthenaRefresh-Jobs-03-JobflightsdashboardRefresh-abc",
    "locks-x",
    "results-x",
)
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/ScheduledAthenaRefresh-FailureQueue-xyz"
#: The shared stack's outputs: no per-job output, the registry's path instead.
OUTPUTS = {
    "LockTableName": LOCK_TABLE,
    "ResultsTableName": RESULTS_TABLE,
    "JobRegistryPath": PATH,
    "FailureQueueUrl": QUEUE,
}
FLIGHTS = entry(JOB, function_name=FUNCTION, group=3)  # 3 racers
CARRIERS = entry("carrier-on-time", function_name="other-function", group=9, racers=2)
TARGETS = StackTargets(FUNCTION, LOCK_TABLE, RESULTS_TABLE, JOB, racers=3)
DISCOVERED = replace(TARGETS, log_group_name=FLIGHTS.log_group_name, failure_queue_url=QUEUE)

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")


def stack_description(outputs: dict[str, str]) -> dict[str, Any]:
    return {
        "Stacks": [
            {
                "StackName": STACK,
                "CreationTime": "2026-11-22T00:00:00Z",
                "StackStatus": "CREATE_COMPLETE",
                "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
            }
        ]
    }


def resources(*rows: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "StackResources": [
            {
                "LogicalResourceId": logical,
                "PhysicalResourceId": physical,
                "ResourceType": kind,
                "Timestamp": "2026-11-22T00:00:00Z",
                "ResourceStatus": "CREATE_COMPLETE",
            }
            for logical, physical, kind in rows
        ]
    }


@pytest.fixture
def clients() -> Iterator[dict[str, Any]]:
    """Stubbed CloudFormation and Lambda clients (fake credentials, no endpoint is ever reached)."""
    session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1")
    made = {"cloudformation": session.client("cloudformation"), "lambda": session.client("lambda")}
    stubbers = {name: Stubber(client) for name, client in made.items()}
    for stubber in stubbers.values():
        stubber.activate()
    yield {**made, **{f"{name}_stub": stubber for name, stubber in stubbers.items()}}
    for stubber in stubbers.values():
        stubber.assert_no_pending_responses()
        stubber.deactivate()


@pytest.fixture
def aws() -> Iterator[None]:
    """In-process moto for DynamoDB and SSM (one mock for both)."""
    with moto.mock_aws():
        yield


@pytest.fixture
def ssm(aws: None) -> Any:
    """moto's SSM holding the registry of both sample jobs."""
    client = boto3.client("ssm", region_name="us-east-1")
    register(client, FLIGHTS, CARRIERS)
    return client


def expect_job_configuration(clients: dict[str, Any], function: str = FUNCTION, job: str = JOB) -> None:
    clients["lambda_stub"].add_response(
        "get_function_configuration",
        {"FunctionName": function, "Environment": {"Variables": {contract.ENV_JOB_NAME: job}}},
        {"FunctionName": function},
    )


def expect_stack(clients: dict[str, Any], outputs: dict[str, str]) -> None:
    clients["cloudformation_stub"].add_response("describe_stacks", stack_description(outputs), {"StackName": STACK})


# ---------------------------------------------------------------------------------------------------
# discovery
# ---------------------------------------------------------------------------------------------------


def test_discovery_reads_the_shared_outputs_the_job_s_registry_entry_and_the_function_s_job_name(
    clients: dict[str, Any], ssm: Any
) -> None:
    expect_stack(clients, {**OUTPUTS, "DashboardName": "d"})
    expect_job_configuration(clients)

    # the entry's function, log group and 3 racers (not the other job's 2); the shared queue
    assert discover(clients["cloudformation"], ssm, clients["lambda"], STACK, JOB) == DISCOVERED


def test_a_missing_table_output_falls_back_to_its_logical_id_prefix_and_type(
    clients: dict[str, Any], aws: None
) -> None:
    # GIVEN a registry of one job (--job may be left out) and no ResultsTableName output
    ssm = boto3.client("ssm", region_name="us-east-1")
    register(ssm, FLIGHTS)
    expect_stack(clients, {"LockTableName": LOCK_TABLE, "JobRegistryPath": PATH})
    clients["cloudformation_stub"].add_response(
        "describe_stack_resources",
        resources(
            ("ResultsTableReplica1234", "role-x", "AWS::IAM::Role"),  # other type
            ("ResultsTable7B2FF7F9", RESULTS_TABLE, "AWS::DynamoDB::Table"),
        ),
        {"StackName": STACK},
    )
    expect_job_configuration(clients)

    assert discover(clients["cloudformation"], ssm, clients["lambda"], STACK) == replace(
        DISCOVERED, failure_queue_url=None
    )


def test_an_ambiguous_or_absent_table_is_a_clear_error(clients: dict[str, Any], ssm: Any) -> None:
    expect_stack(clients, {"JobRegistryPath": PATH})
    clients["cloudformation_stub"].add_response("describe_stack_resources", resources(), {"StackName": STACK})
    with pytest.raises(SmokeTestError, match="no output LockTableName and 0 AWS::DynamoDB::Table resources"):
        discover(clients["cloudformation"], ssm, clients["lambda"], STACK, JOB)


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (None, "job registry /ScheduledAthenaRefresh/jobs/ has jobs carrier-on-time, flights-dashboard: pass --job"),
        ("nightly", "no job 'nightly' in the job registry /ScheduledAthenaRefresh/jobs/"),
    ],
)
def test_a_job_must_be_named_among_several_and_must_exist(
    clients: dict[str, Any], ssm: Any, job: str | None, expected: str
) -> None:
    expect_stack(clients, OUTPUTS)
    with pytest.raises(SmokeTestError, match=expected):
        discover(clients["cloudformation"], ssm, clients["lambda"], STACK, job)


def test_a_stack_without_a_job_registry_is_a_clear_error(clients: dict[str, Any], ssm: Any) -> None:
    expect_stack(clients, {"LockTableName": LOCK_TABLE, "ResultsTableName": RESULTS_TABLE})
    with pytest.raises(SmokeTestError, match="has no output JobRegistryPath: not this project's shared stack"):
        discover(clients["cloudformation"], ssm, clients["lambda"], STACK, JOB)


def test_a_malformed_entry_is_a_clear_error(clients: dict[str, Any], ssm: Any) -> None:
    put_raw(ssm, JOB, json.dumps({**FLIGHTS.as_dict(), "schedule_expression": "hourly"}))
    expect_stack(clients, OUTPUTS)
    with pytest.raises(SmokeTestError, match=f"{PATH}{JOB}/00: schedule_expression: must be a cron"):
        discover(clients["cloudformation"], ssm, clients["lambda"], STACK, JOB)


def test_a_function_serving_another_job_is_a_clear_error(clients: dict[str, Any], ssm: Any) -> None:
    expect_stack(clients, OUTPUTS)
    expect_job_configuration(clients, job="carrier-on-time")
    with pytest.raises(SmokeTestError, match=f"names function {FUNCTION}, whose JOB_NAME is 'carrier-on-time'"):
        discover(clients["cloudformation"], ssm, clients["lambda"], STACK, JOB)


def test_an_unknown_stack_is_a_clear_error(clients: dict[str, Any], ssm: Any) -> None:
    clients["cloudformation_stub"].add_client_error(
        "describe_stacks",
        "ValidationError",
        f"Stack with id {STACK} does not exist",
        expected_params={"StackName": STACK},
    )
    with pytest.raises(SmokeTestError, match="does not exist"):
        discover(clients["cloudformation"], ssm, clients["lambda"], STACK, JOB)


# ---------------------------------------------------------------------------------------------------
# the run, on moto tables
# ---------------------------------------------------------------------------------------------------


@pytest.fixture
def tables(aws: None) -> Any:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    create_lock_table(ddb, LOCK_TABLE, enable_ttl=False)
    create_results_table(ddb, RESULTS_TABLE)
    return ddb


@dataclass
class FakeTime:
    """A clock and a sleep that moves it (no test waits)."""

    now: float = field(default_factory=time.time)
    sleeps: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_no_result_within_the_timeout_fails_after_bounded_waiting(clients: dict[str, Any], tables: Any) -> None:
    # GIVEN a function whose asynchronous invocations are accepted (202) but never run (request shapes
    # checked by the Lambda Stubber)
    for _ in range(3):
        clients["lambda_stub"].add_response(
            "invoke", {"StatusCode": 202}, {"FunctionName": FUNCTION, "InvocationType": "Event", "Payload": ANY}
        )
    fake = FakeTime()

    # WHEN the smoke test runs with a 30 s timeout
    report = run_smoke(
        TARGETS,
        lambda_client=clients["lambda"],
        dynamodb=tables,
        timeout_s=30,
        poll_s=4,
        clock_s=fake,
        sleep_s=fake.sleep,
    )

    # THEN it waited 30 s in bounded steps and failed, saying what it saw
    assert not report.passed
    assert sum(fake.sleeps) == 30 and max(fake.sleeps) == 4
    assert report.failures == [
        (
            f"no history item for slot {report.slot} after 30 s: did any racer run?"
            " (see the function's logs and the on-failure queue)"
        )
    ]
    assert report.lines()[-1] == "SMOKE TEST FAILED"

    # ... and with the names discovery found, the message says where to look
    for _ in range(3):
        clients["lambda_stub"].add_response(
            "invoke", {"StatusCode": 202}, {"FunctionName": FUNCTION, "InvocationType": "Event", "Payload": ANY}
        )
    report = run_smoke(
        DISCOVERED, lambda_client=clients["lambda"], dynamodb=tables, timeout_s=1, clock_s=fake, sleep_s=fake.sleep
    )
    assert report.failures[0].endswith(
        f"(see the function's logs in log group {FLIGHTS.log_group_name} and the on-failure queue {QUEUE})"
    )


class InProcessEngine:
    """Stands for Athena: every query succeeds with two rows and some statistics."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def start_query(self, *, sql: str, parameters: Sequence[str], client_request_token: str) -> str:
        self.started.append(client_request_token)
        return f"q-{len(self.started)}"

    def get_query(self, query_execution_id: str) -> QueryExecution:
        return QueryExecution(query_execution_id, "SUCCEEDED", QueryStatistics(data_scanned_bytes=4096), None)

    def get_results(self, query_execution_id: str, *, on_page: Any = None) -> QueryResult:
        return QueryResult(
            (Column("origin", "varchar"), Column("flights", "bigint")),
            [{"origin": "EWR", "flights": 3}, {"origin": "JFK", "flights": 2}],
        )


@dataclass
class Context:
    aws_request_id: str
    function_name: str = FUNCTION
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = f"arn:aws:lambda:us-east-1:123456789012:function:{FUNCTION}"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


class InProcessLambda:
    """A Lambda client whose function is the real handler, run at once in this process.

    Invocations run one at a time, also when the smoke test sends them from several threads (``--sync``):
    in-process moto is not atomic under concurrency (the platform notes), a real Lambda runs them in
    parallel and DynamoDB's conditional write picks the one winner. ``RequestResponse`` invocations return
    the handler's response as the payload.
    """

    def __init__(self, engine: Callable[[], Any] = InProcessEngine) -> None:
        self.invocations: list[dict[str, Any]] = []
        self._serial = threading.Lock()
        self.use_engine(engine)

    def use_engine(self, engine: Callable[[], Any]) -> None:
        """The function's engine from now on (``engine()`` builds it): a new execution environment's deps."""
        self.handler = make_handler(lambda settings: service.Deps.from_settings(settings, engine=engine()))

    def invoke(self, *, FunctionName: str, InvocationType: str, Payload: bytes) -> dict[str, Any]:
        event = json.loads(Payload)
        with self._serial:
            self.invocations.append({"function": FunctionName, "type": InvocationType, "event": event})
            result = self.handler(event, Context(str(uuid.uuid4())))
        if InvocationType == "Event":
            return {"StatusCode": 202}
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(result).encode())}


@pytest.fixture
def deployed(tables: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[InProcessLambda]:
    """The function's environment and job catalog as the stack sets them, on moto, with an in-process engine."""
    keys = {"schedule_expression": "cron(0/30 * * * ? *)", "database": "db", "table": "t", "workgroup": "wg"}
    spec = spec_of(job_name=JOB, sql="SELECT 1 FROM t WHERE a >= ? AND a < ?", **keys)
    catalog = write_catalog(tmp_path / "job_catalog.json", {JOB: CatalogQuery(spec.sql, spec=spec)})
    for key, value in {
        contract.ENV_JOB_NAME: JOB,
        contract.ENV_LOCK_TABLE_NAME: LOCK_TABLE,
        contract.ENV_RESULTS_TABLE_NAME: RESULTS_TABLE,
        contract.ENV_ATHENA_WORKGROUP: "wg",
        contract.ENV_ATHENA_DATABASE: "db",
        contract.ENV_JOB_CATALOG_PATH: str(catalog),
    }.items():
        monkeypatch.setenv(key, value)
    service.metrics.clear_metrics()
    cold_start.is_cold_start = True
    yield InProcessLambda()
    service.metrics.clear_metrics()
    service.metrics.clear_default_dimensions()


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_racing_the_deployed_function_passes_with_one_committed_result(
    deployed: InProcessLambda, tables: Any, sync: bool
) -> None:
    # WHEN the smoke test races three invocations for this minute's slot
    report = run_smoke(TARGETS, lambda_client=deployed, dynamodb=tables, sync=sync, poll_s=0.01, timeout_s=5)

    # THEN every invocation carried the Scheduler-shaped input for one slot, and the checks passed
    slot = Slot(int(time.time()))
    events = [i["event"] for i in deployed.invocations]
    assert sorted(e["racer"] for e in events) == [0, 1, 2]
    assert {(e["scheduled_time"], e["job"]) for e in events} == {(report.slot, JOB)}
    assert len({e["execution_id"] for e in events}) == 1
    assert {i["type"] for i in deployed.invocations} == {"RequestResponse" if sync else "Event"}
    assert report.slot in (slot.iso, Slot(slot.epoch_s - 60).iso)  # the minute may have turned meanwhile
    assert report.failures == []
    assert (report.slot_status, report.fencing_token, report.query_execution_id, report.row_count) == (
        "SUCCEEDED",
        1,
        "q-1",
        2,
    )
    assert report.data_scanned_bytes == 4096
    if sync:
        assert report.outcomes == ["succeeded", "lost/slot_finished", "lost/slot_finished"]
    assert ResultsStore(RESULTS_TABLE, dynamodb_client=tables).get_result(JOB, report.slot)["fencing_token"] == 1


def test_a_slot_that_already_ran_is_refused_before_any_invocation(deployed: InProcessLambda, tables: Any) -> None:
    first = run_smoke(
        TARGETS, lambda_client=deployed, dynamodb=tables, poll_s=0.01, timeout_s=5, slot=Slot(int(time.time()) - 120)
    )
    assert first.passed
    deployed.invocations.clear()
    with pytest.raises(SmokeTestError, match="already has a result"):
        run_smoke(TARGETS, lambda_client=deployed, dynamodb=tables, slot=Slot.parse(first.slot))
    assert deployed.invocations == []


def test_a_failed_slot_fails_the_smoke_test(deployed: InProcessLambda, tables: Any) -> None:
    class Failing(InProcessEngine):
        def get_query(self, query_execution_id: str) -> QueryExecution:
            from athena_refresh.engine import QueryError

            error = QueryError(
                error_category=2,
                error_type=1006,
                retryable=False,
                error_message="COLUMN_NOT_FOUND",
                state_change_reason=None,
            )
            return QueryExecution(query_execution_id, "FAILED", QueryStatistics(), error)

    deployed.use_engine(Failing)
    report = run_smoke(TARGETS, lambda_client=deployed, dynamodb=tables, poll_s=0.01, timeout_s=5)
    assert report.slot_status == "FAILED"
    assert len(report.failures) == 1 and "expected SUCCEEDED" in report.failures[0]
    assert "COLUMN_NOT_FOUND" in report.failures[0]


# ---------------------------------------------------------------------------------------------------
# the CLI
# ---------------------------------------------------------------------------------------------------


def test_the_cli_refuses_to_run_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")

    class NoSession:
        def client(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("no AWS client may be created under CI")

    err = io.StringIO()
    assert smoke_test.main(["--stack-name", STACK], session=NoSession(), err=err) == 2
    assert "refusing to run: CI is set" in err.getvalue()


def test_the_cli_prints_a_summary_and_exits_0_on_success(
    deployed: InProcessLambda, tables: Any, ssm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = ssm
    monkeypatch.delenv("CI", raising=False)
    session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1")
    cloudformation = session.client("cloudformation")
    with Stubber(cloudformation) as cfn:
        cfn.add_response(
            "describe_stacks",
            stack_description(OUTPUTS),
            {"StackName": STACK},
        )

        class Lambda(InProcessLambda):
            def get_function_configuration(self, *, FunctionName: str) -> dict[str, Any]:
                return {"Environment": {"Variables": {contract.ENV_JOB_NAME: JOB}}}

        fake_lambda = Lambda()

        class Session:
            def client(self, name: str, **kwargs: Any) -> Any:
                return {"cloudformation": cloudformation, "lambda": fake_lambda, "ssm": registry}.get(name) or tables

        out = io.StringIO()
        code = smoke_test.main(
            ["--stack-name", STACK, "--job", JOB, "--invocations", "2", "--timeout-s", "5"],
            session=Session(),
            out=out,
            poll_s=0.01,
        )

    lines = out.getvalue().splitlines()
    assert code == 0, lines
    assert lines[0] == f"stack function {FUNCTION}, job {JOB!r}, lock {LOCK_TABLE}, results {RESULTS_TABLE}"
    assert "2 invocations" in lines[1] and "fencing token 1, query q-1, rows 2, scanned 4096 bytes" in lines[2]
    assert lines[-1] == "PASSED"
    assert len(fake_lambda.invocations) == 2


def test_the_cli_rejects_a_malformed_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    err = io.StringIO()

    class NoSession:
        def client(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("no AWS client before the arguments are valid")

    assert smoke_test.main(["--stack-name", STACK, "--slot", "yesterday"], session=NoSession(), err=err) == 1
    assert "--slot" in err.getvalue()
