"""Unit tests of ``athena_refresh.engine`` (no network).

moto covers the happy path and state stepping. botocore's Stubber covers what moto cannot do
(platform-facts.md): paging, FAILED with an AthenaError, non-zero statistics, idempotency request shape.
Real botocore retries are exercised with a ``before-send`` hook that answers every HTTP request locally.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.config
import botocore.endpoint
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from moto import mock_aws
from moto.athena.models import QueryResults, athena_backends
from moto.core import DEFAULT_ACCOUNT_ID
from moto.moto_api import state_manager

from athena_refresh import engine
from athena_refresh.errors import QueryEngineError, QueryFailedError, QueryTimeoutError, ResultTypeError

REGION = "us-east-1"
QID = "11111111-2222-3333-4444-555555555555"
DEPLOYMENT = "ScheduledAthenaRefresh-LockTable-1A2B3C"  # the lock table's name
TOKEN = engine.client_request_token("flights", "2026-11-02T10:00:00Z", 1, deployment_id=DEPLOYMENT)
SQL = "SELECT carrier, count(*) AS n FROM flights WHERE time_hour >= ? GROUP BY 1"
PARAMS = ["TIMESTAMP '2013-01-01 00:00:00'"]


# ----------------------------------------------------------------------------------------------------
# Fixtures and helpers
# ----------------------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Fake credentials, a fixed region and no user config: nothing can reach or depend on real AWS."""
    for name in ("AWS_PROFILE", "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_ATHENA"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def stubbed() -> Iterator[tuple[engine.AthenaQueryEngine, Stubber]]:
    client = boto3.client("athena", region_name=REGION)
    eng = engine.AthenaQueryEngine(workgroup="refresh", database="flights", client=client)
    with Stubber(client) as stubber:
        yield eng, stubber
        stubber.assert_no_pending_responses()


def datum(value: str | None) -> dict[str, str]:
    return {} if value is None else {"VarCharValue": value}


def row(*values: str | None) -> dict[str, Any]:
    return {"Data": [datum(v) for v in values]}


def column_info(*columns: tuple[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "CatalogName": "hive",
            "SchemaName": "",
            "TableName": "",
            "Name": n,
            "Label": n,
            "Type": t,
            "Precision": 0,
            "Scale": 0,
            "Nullable": "UNKNOWN",
            "CaseSensitive": t == "varchar",
        }
        for n, t in columns
    ]


def results_page(rows: list[dict[str, Any]], columns: list[dict[str, Any]], next_token: str | None = None) -> dict:
    page: dict[str, Any] = {"ResultSet": {"Rows": rows, "ResultSetMetadata": {"ColumnInfo": columns}}}
    if next_token:
        page["NextToken"] = next_token
    return page


def execution_response(state: str, *, status_extra: dict | None = None, statistics: dict | None = None) -> dict:
    status: dict[str, Any] = {"State": state, **(status_extra or {})}
    execution: dict[str, Any] = {"QueryExecutionId": QID, "Query": SQL, "Status": status}
    if statistics is not None:
        execution["Statistics"] = statistics
    return {"QueryExecution": execution}


# ----------------------------------------------------------------------------------------------------
# moto: happy path and state stepping
# ----------------------------------------------------------------------------------------------------
@mock_aws
def test_moto_start_get_results_happy_path() -> None:
    # GIVEN an engine on moto's Athena and seeded results (header row first, as Athena returns them)
    client = boto3.client("athena", region_name=REGION)
    eng = engine.AthenaQueryEngine(workgroup="primary", database="default", client=client)

    # WHEN the query is started
    qid = eng.start_query(sql=SQL, parameters=PARAMS, client_request_token=TOKEN)
    athena_backends[DEFAULT_ACCOUNT_ID][REGION].query_results[qid] = QueryResults(
        rows=[row("carrier", "n", "avg_delay"), row("UA", "58665", "12.5"), row("AA", "32729", None)],
        column_info=column_info(("carrier", "varchar"), ("n", "bigint"), ("avg_delay", "double")),
    )

    # THEN moto accepted our request shape and the query reads back typed
    sent = client.get_query_execution(QueryExecutionId=qid)["QueryExecution"]
    assert sent["ExecutionParameters"] == PARAMS
    assert sent["QueryExecutionContext"] == {"Database": "default", "Catalog": "AwsDataCatalog"}
    assert sent["WorkGroup"] == "primary"

    execution = eng.get_query(qid)
    assert execution.query_execution_id == qid
    assert execution.state == "SUCCEEDED" and execution.done
    assert execution.error is None
    assert execution.statistics == engine.QueryStatistics()  # moto reports zeros
    execution.raise_for_state()  # no-op

    result = eng.get_results(qid)
    assert result.columns == (
        engine.Column("carrier", "varchar"),
        engine.Column("n", "bigint"),
        engine.Column("avg_delay", "double"),
    )
    assert result.rows == [
        {"carrier": "UA", "n": 58665, "avg_delay": 12.5},
        {"carrier": "AA", "n": 32729, "avg_delay": None},
    ]


@mock_aws
def test_moto_unknown_workgroup_is_wrapped() -> None:
    eng = engine.AthenaQueryEngine(workgroup="missing", database="default", client=boto3.client("athena"))
    with pytest.raises(QueryEngineError) as info:
        eng.start_query(sql="SELECT 1", parameters=[], client_request_token=TOKEN)
    assert info.value.operation == "StartQueryExecution"
    assert isinstance(info.value.__cause__, ClientError)
    assert "InvalidRequestException" in str(info.value)


@pytest.fixture
def stepped_athena() -> Iterator[None]:
    """moto advances QUEUED -> RUNNING -> SUCCEEDED one step every 2 GetQueryExecution calls."""
    state_manager.set_transition(model_name="athena::execution", transition={"progression": "manual", "times": 2})
    try:
        yield
    finally:
        state_manager.unset_transition("athena::execution")


@mock_aws
def test_moto_wait_for_query_steps_through_states(stepped_athena: None) -> None:
    # GIVEN a query that moto keeps QUEUED/RUNNING for a few polls
    eng = engine.AthenaQueryEngine(workgroup="primary", database="default")  # default client, under moto
    qid = eng.start_query(sql="SELECT 1", parameters=[], client_request_token=TOKEN)
    clock = FakeClock(1_000_000)
    polled: list[str] = []

    # WHEN waiting with a fake clock
    final = engine.wait_for_query(
        eng,
        qid,
        deadline_ms=clock.now_ms + 60_000,
        clock_ms=clock,
        sleep_s=clock.sleep,
        on_poll=lambda ex: polled.append(ex.state),
    )

    # THEN every state was seen, with growing delays between polls
    assert polled == ["QUEUED", "RUNNING", "RUNNING", "SUCCEEDED"]
    assert final.state == "SUCCEEDED"
    assert clock.sleeps_ms == [200, 400, 800]


# ----------------------------------------------------------------------------------------------------
# Stubber: StartQueryExecution request shape and idempotency
# ----------------------------------------------------------------------------------------------------
def expected_start(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "QueryString": SQL,
        "ClientRequestToken": TOKEN,
        "WorkGroup": "refresh",
        "QueryExecutionContext": {"Database": "flights", "Catalog": "AwsDataCatalog"},
        "ExecutionParameters": PARAMS,
    }
    params.update(overrides)
    return {k: v for k, v in params.items() if v is not None}


def test_same_token_twice_sends_identical_requests(stubbed: tuple[engine.AthenaQueryEngine, Stubber]) -> None:
    # GIVEN Athena answers the same id for the same token (its documented idempotency)
    eng, stub = stubbed
    stub.add_response("start_query_execution", {"QueryExecutionId": QID}, expected_start())
    stub.add_response("start_query_execution", {"QueryExecutionId": QID}, expected_start())

    # WHEN the same attempt starts twice (a retried invocation)
    first = eng.start_query(sql=SQL, parameters=tuple(PARAMS), client_request_token=TOKEN)
    second = eng.start_query(sql=SQL, parameters=PARAMS, client_request_token=TOKEN)

    # THEN both requests carried the token, parameters, workgroup and context (Stubber checked them exactly)
    assert first == second == QID


def test_start_without_parameters_omits_execution_parameters_and_sends_output_location() -> None:
    client = boto3.client("athena", region_name=REGION)
    eng = engine.AthenaQueryEngine(
        workgroup="refresh", database="flights", catalog="other", client=client, output_location="s3://bucket/prefix/"
    )
    with Stubber(client) as stub:
        stub.add_response(
            "start_query_execution",
            {"QueryExecutionId": QID},
            expected_start(
                QueryString="SELECT 1",
                ExecutionParameters=None,
                QueryExecutionContext={"Database": "flights", "Catalog": "other"},
                ResultConfiguration={"OutputLocation": "s3://bucket/prefix/"},
            ),
        )
        assert eng.start_query(sql="SELECT 1", parameters=[], client_request_token=TOKEN) == QID
        stub.assert_no_pending_responses()


def test_result_reuse_is_requested_per_query_when_configured() -> None:
    # https://docs.aws.amazon.com/athena/latest/APIReference/API_ResultReuseByAgeConfiguration.html
    client = boto3.client("athena", region_name=REGION)
    eng = engine.AthenaQueryEngine(workgroup="refresh", database="flights", client=client, result_reuse_max_age_min=90)
    with Stubber(client) as stub:
        stub.add_response(
            "start_query_execution",
            {"QueryExecutionId": QID},
            expected_start(
                ResultReuseConfiguration={"ResultReuseByAgeConfiguration": {"Enabled": True, "MaxAgeInMinutes": 90}}
            ),
        )
        assert eng.start_query(sql=SQL, parameters=PARAMS, client_request_token=TOKEN) == QID
        stub.assert_no_pending_responses()


@pytest.mark.parametrize("bad", [-1, 10_081, 1.5, True])
def test_result_reuse_age_outside_athenas_range_is_rejected(bad: Any) -> None:
    with pytest.raises(ValueError, match="result_reuse_max_age_min"):
        engine.AthenaQueryEngine(workgroup="w", database="d", result_reuse_max_age_min=bad)


def test_same_token_with_other_sql_raises_query_engine_error(
    stubbed: tuple[engine.AthenaQueryEngine, Stubber],
) -> None:
    eng, stub = stubbed
    stub.add_client_error(
        "start_query_execution",
        service_error_code="InvalidRequestException",
        service_message="Idempotent parameters do not match",
        http_status_code=400,
    )
    with pytest.raises(QueryEngineError) as info:
        eng.start_query(sql="SELECT 2", parameters=PARAMS, client_request_token=TOKEN)
    assert info.value.operation == "StartQueryExecution"
    assert "InvalidRequestException: Idempotent parameters do not match" in str(info.value)
    assert isinstance(info.value.__cause__, ClientError)


@pytest.mark.parametrize("bad_token", ["x" * 31, "x" * 129, ""])
def test_start_rejects_token_length(bad_token: str) -> None:
    eng = engine.AthenaQueryEngine(workgroup="w", database="d", client=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="32..128"):
        eng.start_query(sql="SELECT 1", parameters=[], client_request_token=bad_token)


def test_start_rejects_a_single_string_as_parameters() -> None:
    eng = engine.AthenaQueryEngine(workgroup="w", database="d", client=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not one str"):
        eng.start_query(sql="SELECT ?", parameters="'2013'", client_request_token=TOKEN)


# ----------------------------------------------------------------------------------------------------
# Stubber: GetQueryExecution mapping
# ----------------------------------------------------------------------------------------------------
def test_failed_query_maps_athena_error_and_raises(stubbed: tuple[engine.AthenaQueryEngine, Stubber]) -> None:
    # GIVEN a FAILED query with an AthenaError
    eng, stub = stubbed
    stub.add_response(
        "get_query_execution",
        execution_response(
            "FAILED",
            status_extra={
                "StateChangeReason": "SYNTAX_ERROR: line 1:8: Column 'x' cannot be resolved",
                "AthenaError": {
                    "ErrorCategory": 2,
                    "ErrorType": 1006,
                    "Retryable": False,
                    "ErrorMessage": "SYNTAX_ERROR: line 1:8: Column 'x' cannot be resolved",
                },
            },
            statistics={"DataScannedInBytes": 0, "EngineExecutionTimeInMillis": 120},
        ),
        {"QueryExecutionId": QID},
    )

    # WHEN it is read
    execution = eng.get_query(QID)

    # THEN the error fields are mapped and raise_for_state raises with them
    assert execution.done and execution.state == "FAILED"
    assert execution.error == engine.QueryError(
        error_category=2,
        error_type=1006,
        retryable=False,
        error_message="SYNTAX_ERROR: line 1:8: Column 'x' cannot be resolved",
        state_change_reason="SYNTAX_ERROR: line 1:8: Column 'x' cannot be resolved",
    )
    with pytest.raises(QueryFailedError) as info:
        execution.raise_for_state()
    err = info.value
    assert (err.query_execution_id, err.state, err.error_category, err.error_type, err.retryable) == (
        QID,
        "FAILED",
        2,
        1006,
        False,
    )
    assert err.as_dict()["error_message"].startswith("SYNTAX_ERROR")


def test_failed_system_error_is_retryable(stubbed: tuple[engine.AthenaQueryEngine, Stubber]) -> None:
    eng, stub = stubbed
    stub.add_response(
        "get_query_execution",
        execution_response(
            "FAILED", status_extra={"AthenaError": {"ErrorCategory": 1, "ErrorType": 401, "Retryable": True}}
        ),
        {"QueryExecutionId": QID},
    )
    with pytest.raises(QueryFailedError) as info:
        eng.get_query(QID).raise_for_state()
    assert (info.value.error_category, info.value.error_type, info.value.retryable) == (1, 401, True)


def test_cancelled_query_raises_without_athena_error(stubbed: tuple[engine.AthenaQueryEngine, Stubber]) -> None:
    eng, stub = stubbed
    stub.add_response(
        "get_query_execution",
        execution_response("CANCELLED", status_extra={"StateChangeReason": "Query was cancelled by user"}),
        {"QueryExecutionId": QID},
    )
    execution = eng.get_query(QID)
    assert execution.done
    assert execution.error == engine.QueryError(None, None, False, None, "Query was cancelled by user")
    with pytest.raises(QueryFailedError) as info:
        execution.raise_for_state()
    assert info.value.state == "CANCELLED"
    assert info.value.reason == "Query was cancelled by user"
    assert info.value.retryable is False


def test_running_query_has_no_error_and_does_not_raise(stubbed: tuple[engine.AthenaQueryEngine, Stubber]) -> None:
    eng, stub = stubbed
    stub.add_response(
        "get_query_execution",
        execution_response("RUNNING", status_extra={"StateChangeReason": "requeued"}),
        {"QueryExecutionId": QID},
    )
    execution = eng.get_query(QID)
    assert not execution.done
    assert execution.error is None
    assert execution.statistics == engine.QueryStatistics()  # no Statistics yet -> zeros
    execution.raise_for_state()


def test_statistics_are_mapped(stubbed: tuple[engine.AthenaQueryEngine, Stubber]) -> None:
    eng, stub = stubbed
    stub.add_response(
        "get_query_execution",
        execution_response(
            "SUCCEEDED",
            statistics={
                "DataScannedInBytes": 7_340_032,
                "EngineExecutionTimeInMillis": 1834,
                "QueryQueueTimeInMillis": 95,
                "TotalExecutionTimeInMillis": 2011,
                "QueryPlanningTimeInMillis": 300,
                "ServiceProcessingTimeInMillis": 40,
            },
        ),
        {"QueryExecutionId": QID},
    )
    stats = eng.get_query(QID).statistics
    assert stats.as_dict() == {
        "data_scanned_bytes": 7_340_032,
        "engine_execution_time_ms": 1834,
        "query_queue_time_ms": 95,
        "total_execution_time_ms": 2011,
    }
    json.dumps(stats.as_dict())


# ----------------------------------------------------------------------------------------------------
# Stubber: GetQueryResults paging and typing
# ----------------------------------------------------------------------------------------------------
def test_results_page_across_three_pages_with_header_only_on_first(
    stubbed: tuple[engine.AthenaQueryEngine, Stubber],
) -> None:
    # GIVEN 2500 data rows over 3 pages of at most 1000 rows; the header is row 1 of page 1 only
    eng, stub = stubbed
    cols = column_info(("i", "bigint"), ("label", "varchar"))
    data = [row(str(i), f"row-{i}") for i in range(2500)]
    pages = [
        results_page([row("i", "label"), *data[:999]], cols, "token-1"),
        results_page(data[999:1999], cols, "token-2"),
        results_page(data[1999:], cols),
    ]
    stub.add_response("get_query_results", pages[0], {"QueryExecutionId": QID, "MaxResults": 1000})
    stub.add_response(
        "get_query_results", pages[1], {"QueryExecutionId": QID, "MaxResults": 1000, "NextToken": "token-1"}
    )
    stub.add_response(
        "get_query_results", pages[2], {"QueryExecutionId": QID, "MaxResults": 1000, "NextToken": "token-2"}
    )

    # WHEN all results are read
    result = eng.get_results(QID)

    # THEN every data row is there once, in order, and no later first row was taken for a header
    assert len(result.rows) == 2500
    assert [r["i"] for r in result.rows] == list(range(2500))
    assert result.rows[999] == {"i": 999, "label": "row-999"}  # first row of page 2 is data
    assert result.rows[1999] == {"i": 1999, "label": "row-1999"}  # first row of page 3 is data
    assert result.columns == (engine.Column("i", "bigint"), engine.Column("label", "varchar"))


def test_missing_varcharvalue_is_null(stubbed: tuple[engine.AthenaQueryEngine, Stubber]) -> None:
    eng, stub = stubbed
    cols = column_info(("carrier", "varchar"), ("dep_delay", "double"), ("n", "bigint"), ("ok", "boolean"))
    stub.add_response(
        "get_query_results",
        results_page(
            [row("carrier", "dep_delay", "n", "ok"), row(None, None, None, None), row("", "1.5", "3", "true")], cols
        ),
        {"QueryExecutionId": QID, "MaxResults": 1000},
    )
    assert eng.get_results(QID).rows == [
        {"carrier": None, "dep_delay": None, "n": None, "ok": None},
        {"carrier": "", "dep_delay": 1.5, "n": 3, "ok": True},  # empty string is not NULL
    ]


def test_header_only_and_empty_results(stubbed: tuple[engine.AthenaQueryEngine, Stubber]) -> None:
    eng, stub = stubbed
    cols = column_info(("n", "bigint"))
    stub.add_response(
        "get_query_results", results_page([row("n")], cols), {"QueryExecutionId": QID, "MaxResults": 1000}
    )
    stub.add_response("get_query_results", results_page([], cols), {"QueryExecutionId": QID, "MaxResults": 1000})
    assert eng.get_results(QID) == engine.QueryResult(columns=(engine.Column("n", "bigint"),), rows=[])
    assert eng.get_results(QID).rows == []


def test_bad_value_in_results_names_the_column(stubbed: tuple[engine.AthenaQueryEngine, Stubber]) -> None:
    eng, stub = stubbed
    stub.add_response(
        "get_query_results",
        results_page([row("carrier", "n"), row("UA", "abc")], column_info(("carrier", "varchar"), ("n", "bigint"))),
        {"QueryExecutionId": QID, "MaxResults": 1000},
    )
    with pytest.raises(ResultTypeError) as info:
        eng.get_results(QID)
    assert (info.value.column, info.value.column_type, info.value.value) == ("n", "bigint", "abc")
    assert "'abc'" in str(info.value) and "bigint" in str(info.value)


def test_duplicate_column_names_are_rejected(stubbed: tuple[engine.AthenaQueryEngine, Stubber]) -> None:
    eng, stub = stubbed
    stub.add_response(
        "get_query_results",
        results_page([row("n", "n"), row("1", "2")], column_info(("n", "bigint"), ("n", "bigint"))),
        {"QueryExecutionId": QID, "MaxResults": 1000},
    )
    with pytest.raises(ResultTypeError, match="duplicate column name"):
        eng.get_results(QID)


def test_row_width_mismatch_is_an_engine_error(stubbed: tuple[engine.AthenaQueryEngine, Stubber]) -> None:
    eng, stub = stubbed
    stub.add_response(
        "get_query_results",
        results_page([row("a", "b"), row("1")], column_info(("a", "bigint"), ("b", "bigint"))),
        {"QueryExecutionId": QID, "MaxResults": 1000},
    )
    with pytest.raises(QueryEngineError, match="1 values for 2 columns"):
        eng.get_results(QID)


# ----------------------------------------------------------------------------------------------------
# Error wrapping
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "operation", "call"),
    [
        (
            "start_query_execution",
            "StartQueryExecution",
            lambda e: e.start_query(sql=SQL, parameters=PARAMS, client_request_token=TOKEN),
        ),
        ("get_query_execution", "GetQueryExecution", lambda e: e.get_query(QID)),
        ("get_query_results", "GetQueryResults", lambda e: e.get_results(QID)),
    ],
)
@pytest.mark.parametrize("code", ["AccessDeniedException", "ThrottlingException", "InvalidRequestException"])
def test_client_errors_are_wrapped_with_cause(
    stubbed: tuple[engine.AthenaQueryEngine, Stubber],
    method: str,
    operation: str,
    call: Any,
    code: str,
) -> None:
    eng, stub = stubbed
    stub.add_client_error(method, service_error_code=code, service_message="nope", http_status_code=400)
    with pytest.raises(QueryEngineError) as info:
        call(eng)
    assert info.value.operation == operation
    assert info.value.query_execution_id == (None if operation == "StartQueryExecution" else QID)
    assert f"{code}: nope" in str(info.value)
    assert isinstance(info.value.__cause__, ClientError)
    assert info.value.__cause__.response["Error"]["Code"] == code


def test_botocore_errors_are_wrapped() -> None:
    # A parameter botocore rejects before sending (ParamValidationError is a BotoCoreError)
    eng = engine.AthenaQueryEngine(workgroup="w", database="d", client=boto3.client("athena", region_name=REGION))
    with pytest.raises(QueryEngineError) as info:
        eng.start_query(sql="SELECT ?", parameters=[""], client_request_token=TOKEN)
    assert "ParamValidationError" in str(info.value)
    assert info.value.__cause__ is not None


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


class FakeAthenaHttp:
    """A ``before-send`` hook: answers each HTTP request with the next canned (status, error code) locally."""

    def __init__(self, answers: list[tuple[int, str | None]]) -> None:
        self.answers = answers
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any, **_: Any) -> AWSResponse:
        self.bodies.append(json.loads(request.body))
        status, code = self.answers[min(len(self.bodies), len(self.answers)) - 1]
        payload = {"__type": code, "Message": "Rate exceeded"} if code else {"QueryExecutionId": QID}
        return AWSResponse(request.url, status, {"x-amzn-requestid": "r"}, _Raw(json.dumps(payload).encode()))


@pytest.fixture
def no_retry_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(botocore.endpoint.time, "sleep", slept.append)
    return slept


@pytest.mark.parametrize("code", ["ThrottlingException", "TooManyRequestsException"])
def test_default_client_retries_throttling_then_wraps(code: str, no_retry_sleep: list[float]) -> None:
    # GIVEN the default client (standard retries) and an Athena that always throttles
    eng = engine.AthenaQueryEngine(workgroup="refresh", database="flights")
    http = FakeAthenaHttp([(400, code)])
    eng.client.meta.events.register("before-send.athena.StartQueryExecution", http)

    # WHEN a query is started
    with pytest.raises(QueryEngineError) as info:
        eng.start_query(sql=SQL, parameters=PARAMS, client_request_token=TOKEN)

    # THEN botocore tried 6 times (1 + max_attempts 5 retries) with the same token, then we wrapped its error
    assert len(http.bodies) == 6
    assert {b["ClientRequestToken"] for b in http.bodies} == {TOKEN}
    assert len(no_retry_sleep) == 5
    assert isinstance(info.value.__cause__, ClientError)
    assert info.value.__cause__.response["Error"]["Code"] == code
    assert code in str(info.value)


def test_default_client_retry_succeeds_with_the_same_token(no_retry_sleep: list[float]) -> None:
    eng = engine.AthenaQueryEngine(workgroup="refresh", database="flights")
    http = FakeAthenaHttp([(400, "TooManyRequestsException"), (400, "ThrottlingException"), (200, None)])
    eng.client.meta.events.register("before-send.athena.StartQueryExecution", http)
    assert eng.start_query(sql=SQL, parameters=PARAMS, client_request_token=TOKEN) == QID
    assert [b["ClientRequestToken"] for b in http.bodies] == [TOKEN] * 3


def test_default_client_is_lazy_and_uses_standard_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    # Construction needs no region or credentials: the client is created on first use
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    eng = engine.AthenaQueryEngine(workgroup="refresh", database="flights")
    assert eng._client is None
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)

    retries = eng.client.meta.config.retries
    assert retries["mode"] == "standard"
    assert retries["total_max_attempts"] == 6  # Config max_attempts=5 counts retries
    assert eng.client is eng.client
    assert eng.client.meta.service_model.service_name == "athena"


def test_injected_client_is_used_as_is() -> None:
    client = boto3.client("athena", region_name="eu-west-1")
    assert engine.AthenaQueryEngine(workgroup="w", database="d", client=client).client is client


def test_athena_engine_satisfies_protocol() -> None:
    assert isinstance(engine.AthenaQueryEngine(workgroup="w", database="d"), engine.QueryEngine)


# ----------------------------------------------------------------------------------------------------
# convert_value
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "column_type", "expected"),
    [
        (None, "bigint", None),
        (None, "varchar", None),
        ("true", "boolean", True),
        ("false", "boolean", False),
        ("-128", "tinyint", -128),
        ("32767", "smallint", 32767),
        ("2147483647", "integer", 2147483647),
        ("7", "int", 7),
        ("9223372036854775807", "bigint", 9223372036854775807),
        ("-42", "BIGINT", -42),
        ("1.5", "real", 1.5),
        ("2.25", "float", 2.25),
        ("-12.75", "double", -12.75),
        ("1.0E10", "double", 1.0e10),
        ("3.4028235E38", "real", 3.4028235e38),
        ("NaN", "double", "NaN"),
        ("Infinity", "double", "Infinity"),
        ("-Infinity", "real", "-Infinity"),
        ("12345678901234567890.123456789", "decimal", "12345678901234567890.123456789"),
        ("12.30", "decimal(10,2)", "12.30"),
        ("-0.01", "decimal", "-0.01"),
        ("UA", "varchar", "UA"),
        ("x", "char", "x"),
        ("x", "string", "x"),
        ("68 65 6c 6c 6f", "varbinary", "68 65 6c 6c 6f"),
        ("", "varchar", ""),
        ("2013-01-01", "date", "2013-01-01"),
        ("2013-01-01 05:00:00.000", "timestamp", "2013-01-01T05:00:00.000"),
        ("2013-12-31 23:59:59.999", "timestamp(3)", "2013-12-31T23:59:59.999"),
        ("2013-01-01 05:00:00", "timestamp", "2013-01-01T05:00:00.000"),
        ("2013-01-01 05:00:00.123456", "timestamp(6)", "2013-01-01T05:00:00.123456"),
        ("2013-01-01 05:00:00.000 UTC", "timestamp with time zone", "2013-01-01T05:00:00.000+00:00"),
        ("2013-01-01 05:00:00.000 +05:30", "timestamp(3) with time zone", "2013-01-01T05:00:00.000+05:30"),
        ("2013-01-01 05:00:00.000 -08:00", "timestamp with time zone", "2013-01-01T05:00:00.000-08:00"),
        ("[1, 2, 3]", "array", "[1, 2, 3]"),
        ("{a=1, b=2}", "map", "{a=1, b=2}"),
        ("{x=1, y=foo}", "row", "{x=1, y=foo}"),
        ('{"a":1}', "json", '{"a":1}'),
        ("12:30:00.000", "time", "12:30:00.000"),  # unknown -> str
        ("1 02:03:04.000", "interval day to second", "1 02:03:04.000"),
    ],
)
def test_convert_value(value: str | None, column_type: str, expected: Any) -> None:
    converted = engine.convert_value(value, column_type)
    assert converted == expected
    assert type(converted) is type(expected)
    json.dumps(converted, allow_nan=False)  # JSON-safe


ATHENA_TYPE_NAMES = [
    "boolean",
    "tinyint",
    "smallint",
    "integer",
    "int",
    "bigint",
    "real",
    "float",
    "double",
    "decimal",
    "decimal(38,9)",
    "varchar",
    "varchar(10)",
    "char",
    "char(2)",
    "string",
    "varbinary",
    "date",
    "timestamp",
    "timestamp(3)",
    "timestamp(6) with time zone",
    "array",
    "array(varchar)",
    "map",
    "map(varchar,bigint)",
    "row",
    "row(x integer,y varchar)",
    "json",
    "time",
    "interval year to month",
    "uuid",
    "ipaddress",
    "geometry",
    "",
]


@pytest.mark.parametrize("column_type", ATHENA_TYPE_NAMES)
def test_null_is_none_in_every_type_including_unknown_ones(column_type: str) -> None:
    # GIVEN / WHEN a missing VarCharValue (SQL NULL) / THEN None, whatever the declared type
    assert engine.convert_value(None, column_type) is None


@pytest.mark.parametrize(
    ("value", "column_type", "expected"),
    [
        ("12.30", " DECIMAL( 10 , 2 ) ", "12.30"),  # case and spaces in the type name
        ("7", "BigInt", 7),
        (" 7 ", "integer", 7),
        ("[a, b]", "array(varchar)", "[a, b]"),
        ("{a=1}", "map(varchar,bigint)", "{a=1}"),
        ("{x=1, y=a}", "row(x integer,y varchar)", "{x=1, y=a}"),
        ("ab", "char(2)", "ab"),
        ("2013-01-01 05:00:00.000 Z", "TIMESTAMP(3) WITH TIME ZONE", "2013-01-01T05:00:00.000+00:00"),
        ("5e9e1c1c-0000-4000-8000-000000000000", "uuid", "5e9e1c1c-0000-4000-8000-000000000000"),
        ("POINT (1 2)", "geometry", "POINT (1 2)"),  # unknown type names keep Athena's text
        ("anything", "", "anything"),
        ("-0.0", "double", -0.0),
        ("4.9E-324", "double", 4.9e-324),
    ],
)
def test_convert_value_accepts_parameterised_and_unknown_type_names(
    value: str, column_type: str, expected: Any
) -> None:
    converted = engine.convert_value(value, column_type)
    assert converted == expected and type(converted) is type(expected)
    json.dumps(converted, allow_nan=False)


def test_convert_value_error_message_carries_an_excerpt_of_a_huge_value() -> None:
    # GIVEN / WHEN a 1 MB value that is not a bigint
    with pytest.raises(ResultTypeError) as info:
        engine.convert_value("9" * 999_999 + "x", "bigint")
    # THEN the message names the type with an excerpt; the full value stays on the exception
    assert len(str(info.value)) < 400 and "(1000000 characters)" in str(info.value)
    assert len(info.value.value) == 1_000_000


def test_convert_value_named_time_zone() -> None:
    zoneinfo = pytest.importorskip("zoneinfo")
    try:
        zoneinfo.ZoneInfo("America/New_York")
    except zoneinfo.ZoneInfoNotFoundError:
        pytest.skip("no time zone database on this machine")
    assert (
        engine.convert_value("2013-07-01 05:00:00.000 America/New_York", "timestamp with time zone")
        == "2013-07-01T05:00:00.000-04:00"
    )


@pytest.mark.parametrize(
    ("value", "column_type"),
    [
        ("abc", "bigint"),
        ("1.5", "bigint"),
        ("1_000", "integer"),
        ("", "bigint"),
        ("yes", "boolean"),
        ("nan", "double"),
        ("inf", "double"),
        ("1e999", "double"),
        ("abc", "double"),
        ("12,30", "decimal"),
        ("NaN", "decimal"),
        ("2013-02-30", "date"),
        ("01/02/2013", "date"),
        ("2013-01-01", "timestamp"),
        ("2013-01-01 25:00:00.000", "timestamp"),
        ("2013-01-01 05:00:00.000 UTC", "timestamp"),
        ("2013-01-01 05:00:00.000", "timestamp with time zone"),
        ("2013-01-01 05:00:00.000 Not/AZone", "timestamp with time zone"),
        ("2013-01-01 05:00:00.000 +25:00", "timestamp with time zone"),
    ],
)
def test_convert_value_rejects_unparsable(value: str, column_type: str) -> None:
    with pytest.raises(ResultTypeError) as info:
        engine.convert_value(value, column_type)
    assert info.value.column_type == column_type
    assert info.value.value == value
    assert repr(value) in str(info.value)


# ----------------------------------------------------------------------------------------------------
# wait_for_query
# ----------------------------------------------------------------------------------------------------
class FakeClock:
    """Epoch-ms clock that only moves when something sleeps on it."""

    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms
        self.sleeps_ms: list[float] = []

    def __call__(self) -> int:
        return self.now_ms

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps_ms.append(round(seconds * 1000, 6))
        self.now_ms += round(seconds * 1000)


class ScriptedEngine:
    """QueryEngine whose get_query returns scripted states (the last one repeats)."""

    def __init__(self, states: list[str], clock: FakeClock | None = None) -> None:
        self.states = states
        self.clock = clock
        self.polls = 0
        self.polled_at_ms: list[int] = []

    def start_query(self, *, sql: str, parameters: Any, client_request_token: str) -> str:
        return QID

    def get_query(self, query_execution_id: str) -> engine.QueryExecution:
        if self.clock is not None:
            self.polled_at_ms.append(self.clock.now_ms)
        state = self.states[min(self.polls, len(self.states) - 1)]
        self.polls += 1
        error = engine.QueryError(2, 1006, False, "bad", "bad") if state == "FAILED" else None
        return engine.QueryExecution(query_execution_id, state, engine.QueryStatistics(), error)  # type: ignore[arg-type]

    def get_results(self, query_execution_id: str, *, on_page: Any = None) -> engine.QueryResult:
        raise NotImplementedError


def test_wait_backoff_grows_and_caps() -> None:
    # GIVEN a query that runs 9 polls before succeeding
    clock = FakeClock(0)
    eng = ScriptedEngine(["QUEUED"] + ["RUNNING"] * 8 + ["SUCCEEDED"], clock)
    polls: list[engine.QueryExecution] = []

    # WHEN waiting with a far deadline
    final = engine.wait_for_query(
        eng,
        QID,
        deadline_ms=10**9,
        clock_ms=clock,
        sleep_s=clock.sleep,
        on_poll=polls.append,
    )

    # THEN delays double from 200 ms and stop at max_delay_ms; on_poll saw every poll, terminal included
    assert final.state == "SUCCEEDED"
    assert clock.sleeps_ms == [200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000]
    assert [p.state for p in polls] == ["QUEUED"] + ["RUNNING"] * 8 + ["SUCCEEDED"]
    assert eng.polled_at_ms[:4] == [0, 200, 600, 1400]


def test_wait_custom_backoff_settings() -> None:
    clock = FakeClock(0)
    eng = ScriptedEngine(["RUNNING"] * 5 + ["SUCCEEDED"], clock)
    engine.wait_for_query(
        eng,
        QID,
        deadline_ms=10**9,
        clock_ms=clock,
        sleep_s=clock.sleep,
        initial_delay_ms=100,
        max_delay_ms=1000,
        multiplier=3.0,
    )
    assert clock.sleeps_ms == [100, 300, 900, 1000, 1000]


def test_wait_never_sleeps_past_deadline_and_times_out() -> None:
    # GIVEN a query that never finishes and a deadline 1000 ms away
    clock = FakeClock(5_000)
    eng = ScriptedEngine(["RUNNING"], clock)
    polls: list[str] = []

    # WHEN waiting
    with pytest.raises(QueryTimeoutError) as info:
        engine.wait_for_query(
            eng,
            QID,
            deadline_ms=6_000,
            clock_ms=clock,
            sleep_s=clock.sleep,
            on_poll=lambda e: polls.append(e.state),
        )

    # THEN the third sleep is cut to end at the deadline, a last poll happens there, and nothing sleeps after
    assert clock.sleeps_ms == [200, 400, 400]
    assert eng.polled_at_ms == [5_000, 5_200, 5_600, 6_000]
    assert clock.now_ms == 6_000
    assert polls == ["RUNNING"] * 4
    assert (info.value.query_execution_id, info.value.state, info.value.waited_ms) == (QID, "RUNNING", 1_000)
    assert isinstance(info.value, TimeoutError)


def test_wait_past_deadline_polls_once_without_sleeping() -> None:
    clock = FakeClock(10_000)
    eng = ScriptedEngine(["QUEUED"], clock)
    with pytest.raises(QueryTimeoutError) as info:
        engine.wait_for_query(eng, QID, deadline_ms=9_000, clock_ms=clock, sleep_s=clock.sleep)
    assert clock.sleeps_ms == []
    assert eng.polled_at_ms == [10_000]
    assert info.value.state == "QUEUED"


def test_wait_already_finished_returns_at_once_even_past_deadline() -> None:
    clock = FakeClock(10_000)
    eng = ScriptedEngine(["SUCCEEDED"], clock)
    assert engine.wait_for_query(eng, QID, deadline_ms=0, clock_ms=clock, sleep_s=clock.sleep).state == "SUCCEEDED"
    assert clock.sleeps_ms == []


def test_wait_returns_failed_without_raising() -> None:
    clock = FakeClock(0)
    eng = ScriptedEngine(["RUNNING", "FAILED"], clock)
    final = engine.wait_for_query(eng, QID, deadline_ms=60_000, clock_ms=clock, sleep_s=clock.sleep)
    assert final.state == "FAILED"
    with pytest.raises(QueryFailedError):
        final.raise_for_state()


def test_wait_on_poll_exception_stops_the_wait() -> None:
    class LeaseLost(Exception):
        pass

    def on_poll(execution: engine.QueryExecution) -> None:
        raise LeaseLost

    clock = FakeClock(0)
    with pytest.raises(LeaseLost):
        engine.wait_for_query(
            ScriptedEngine(["RUNNING"], clock),
            QID,
            deadline_ms=60_000,
            clock_ms=clock,
            sleep_s=clock.sleep,
            on_poll=on_poll,
        )
    assert clock.sleeps_ms == []


@pytest.mark.parametrize(
    "settings",
    [{"initial_delay_ms": 0}, {"max_delay_ms": 100}, {"multiplier": 0.5}],
)
def test_wait_rejects_bad_settings(settings: dict[str, Any]) -> None:
    clock = FakeClock(0)
    with pytest.raises(ValueError):
        engine.wait_for_query(
            ScriptedEngine(["RUNNING"], clock), QID, deadline_ms=1, clock_ms=clock, sleep_s=clock.sleep, **settings
        )


def test_wait_defaults_to_time_sleep() -> None:
    # A real (tiny) wait with the default sleep: proves the default argument is wired
    eng = ScriptedEngine(["RUNNING", "SUCCEEDED"])
    start = time.monotonic()
    final = engine.wait_for_query(
        eng,
        QID,
        deadline_ms=int(time.time() * 1000) + 5_000,
        clock_ms=lambda: int(time.time() * 1000),
        initial_delay_ms=1,
    )
    assert final.state == "SUCCEEDED"
    assert time.monotonic() - start < 1


# ----------------------------------------------------------------------------------------------------
# client_request_token
# ----------------------------------------------------------------------------------------------------
def token(job: str, slot: str, attempt: int, deployment_id: str = DEPLOYMENT) -> str:
    return engine.client_request_token(job, slot, attempt, deployment_id=deployment_id)


def test_token_is_deterministic_and_per_attempt() -> None:
    a1 = token("flights", "2026-11-02T10:00:00Z", 1)
    assert a1 == token("flights", "2026-11-02T10:00:00Z", 1)  # same attempt, same query
    others = {
        token("flights", "2026-11-02T10:00:00Z", 2),  # new attempt, new query
        token("flights", "2026-11-02T10:05:00Z", 1),
        token("weather", "2026-11-02T10:00:00Z", 1),
        token("flights-2026", "11-02T10:00:00Z", 1),  # same readable text, other input
    }
    assert a1 not in others and len(others) == 4
    assert a1.startswith("flights-2026-11-02T10-00-00Z-a1-")


@pytest.mark.parametrize("attempt", [1, 2, 7])
def test_two_deployments_of_one_job_never_share_a_token(attempt: int) -> None:
    # Staging and prod in one account, same job name, same slot and attempt: Athena scopes tokens to the
    # account and Region, so equal tokens would hand one deployment the other's query.
    slot = "2026-11-02T10:00:00Z"
    prod = token("flights", slot, attempt, "prod-AthenaRefresh-LockTable-A1")
    staging = token("flights", slot, attempt, "staging-AthenaRefresh-LockTable-B2")
    assert prod != staging
    # the readable prefix stays the same; only the digest tells them apart
    assert prod.rsplit("-", 1)[0] == staging.rsplit("-", 1)[0]


def test_racers_of_one_deployment_send_the_same_token() -> None:
    # Each racer computes the token on its own from the same job, slot, attempt and lock table name.
    tokens = {token("flights", "2026-11-02T10:00:00Z", 1, "prod-locks") for _racer in range(5)}
    assert len(tokens) == 1


def test_the_deployment_is_part_of_the_digest_not_of_a_shifted_field() -> None:
    # json.dumps([deployment, job, slot, attempt]) keeps field boundaries: moving text between the
    # deployment and the job (or the slot) changes the token.
    assert token("b-flights", "s", 1, "a") != token("flights", "s", 1, "a-b")
    assert token("j", "s", 1, "d") != token("j", "s", 1, "d ")


@pytest.mark.parametrize(
    ("job", "slot", "attempt", "deployment_id"),
    [
        ("j", "s", 0, "d"),
        ("x" * 500, "2026-11-02T10:00:00+00:00", 10**12, "y" * 255),
        ("ünïcødé job/with spaces", "2026-11-02T10:00:00.123456+05:30", 3, "tåble.name_1-2"),
        ("---", "::", 1, "---"),
        ("flights-dashboard", "2026-11-02T10:00:00Z", 1, "ScheduledAthenaRefresh-LockTableA1B2C3D4-0123456789AB"),
    ],
)
def test_token_length_and_alphabet(job: str, slot: str, attempt: int, deployment_id: str) -> None:
    value = token(job, slot, attempt, deployment_id)
    assert engine.TOKEN_MIN_CHARS == 32 and engine.TOKEN_MAX_CHARS == 128  # StartQueryExecution's bounds
    assert 32 <= len(value) <= 128
    assert re.fullmatch(r"[A-Za-z0-9-]+", value), value


@pytest.mark.parametrize(("job", "slot", "attempt"), [("", "s", 1), ("j", "", 1), ("j", "s", -1), ("j", "s", True)])
def test_token_rejects_bad_input(job: str, slot: str, attempt: Any) -> None:
    with pytest.raises(ValueError):
        token(job, slot, attempt)


@pytest.mark.parametrize("deployment_id", ["", None, 42])
def test_token_requires_a_deployment_identity(deployment_id: Any) -> None:
    with pytest.raises(ValueError, match="deployment_id"):
        engine.client_request_token("flights", "2026-11-02T10:00:00Z", 1, deployment_id=deployment_id)


def test_token_deployment_identity_is_keyword_only_and_required() -> None:
    with pytest.raises(TypeError):
        engine.client_request_token("flights", "2026-11-02T10:00:00Z", 1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        engine.client_request_token("flights", "2026-11-02T10:00:00Z", 1, "prod-locks")  # type: ignore[misc]


@pytest.mark.parametrize(
    ("code", "retryable"),
    [
        ("AccessDeniedException", False),
        ("InvalidRequestException", False),
        ("ResourceNotFoundException", False),
        ("InternalServerException", True),
        ("TooManyRequestsException", True),
    ],
)
def test_engine_errors_say_whether_a_retry_can_help(code: str, retryable: bool) -> None:
    client = boto3.client(
        "athena", region_name=REGION, config=botocore.config.Config(retries={"mode": "standard", "max_attempts": 0})
    )
    eng = engine.AthenaQueryEngine(workgroup="refresh", database="flights", client=client)
    with Stubber(client) as stub:
        stub.add_client_error(
            "start_query_execution", service_error_code=code, service_message="no", http_status_code=400
        )
        with pytest.raises(QueryEngineError) as info:
            eng.start_query(sql=SQL, parameters=PARAMS, client_request_token=TOKEN)
    assert (info.value.error_code, info.value.retryable) == (code, retryable)
    assert info.value.as_dict()["retryable"] is retryable


def test_building_the_default_client_leaves_its_config_constant_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    # botocore rewrites a Config's retries dict in place when it builds a client; the constant must not change, or a
    # later reader (the chaos worker's retry arithmetic) meets a KeyError depending on which test ran first
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    before = dict(engine.DEFAULT_CLIENT_CONFIG.retries or {})
    client = engine.AthenaQueryEngine(workgroup="wg", database="db").client
    assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 6}
    assert engine.DEFAULT_CLIENT_CONFIG.retries == before == {"mode": "standard", "max_attempts": 5}
