"""Issue 31, finding 3: a waiting slot whose reclaim check cannot read an expired permit's query keeps waiting.

The service's capacity gate (``athena_refresh.service._capacity_gate``) asks ``GetQueryExecution`` about the query an
expired permit names before it reclaims the permit. With a budget shared by several deployments, that query may run
in another deployment's workgroup, which the job role may not read (``AccessDeniedException``); Athena may also
throttle the call past botocore's retries (``ThrottlingException``) or not know the id (``InvalidRequestException``).
Before the fix the error escaped the gate: a permanent one recorded the waiting slot FAILED although it never ran a
query, a retryable one ended the invocation as a Lambda error. The promise: waiting never ends in the failure queue
and never records FAILED. An unreadable query is "not reclaimable now" (:mod:`athena_refresh.reclaim`).

The engine is the real :class:`~athena_refresh.engine.AthenaQueryEngine` on a botocore ``Stubber`` (the error as
Athena answers it, wrapped by the engine as in production); the lock and the semaphore on the fake clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.stub import Stubber

from athena_refresh import service
from athena_refresh.engine import AthenaQueryEngine, QueryExecution, QueryStatistics
from athena_refresh.errors import QueryEngineError
from athena_refresh.permits import CapacitySettings
from athena_refresh.reclaim import ReclaimCheck, error_code
from athena_refresh.report import SlotReport
from athena_refresh.results import ResultsStore
from athena_refresh.settings import Settings
from slotlock import PermitOwner, Semaphore, Slot, SlotLock

pytestmark = [
    pytest.mark.usefixtures("fresh_powertools_state"),
    pytest.mark.backends("moto", "dynamodb-local"),
]  # the seams installed here are reset afterwards

NAME = "123456789012-us-east-1"
#: The query of another deployment's expired permit (an Athena query execution id is a UUID).
OTHER_QUERY = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
OTHER = PermitOwner("other-deployment-job", Slot.parse("2026-11-22T00:00Z"))
#: Longer than two of the semaphore's rechecks of a query still active (``query_recheck_s``, 30 s by default, which an
#: unreadable query counts as): the slot asks about it more than once before it is given back.
WAIT_IN_PLACE_S = 90

#: What Athena answers (error code, HTTP status, whether the engine calls it retryable).
ATHENA_ERRORS = {
    "AccessDeniedException": 400,  # another deployment's workgroup, not granted to this role
    "ThrottlingException": 400,  # GetQueryExecution's rate, past botocore's retries
    "InvalidRequestException": 400,  # an id Athena does not know (any more)
}


class FakeDeferral:
    """Records each arranged re-invocation: (event, at_ms, key)."""

    def __init__(self) -> None:
        self.deferred: list[tuple[dict[str, Any], int, str]] = []

    def defer(self, event: Mapping[str, Any], *, at_ms: int, key: str) -> str:
        self.deferred.append((dict(event), at_ms, key))
        return f"schedule-{len(self.deferred)}"


@pytest.fixture
def athena_answering() -> Iterator[Callable[[str], AthenaQueryEngine]]:
    """``athena_answering(code)``: the real Athena engine whose every ``GetQueryExecution`` of :data:`OTHER_QUERY`
    Athena answers with error ``code`` (a botocore ``Stubber``: no request leaves the process, no retry sleeps)."""
    stubbers: list[Stubber] = []

    def make(code: str) -> AthenaQueryEngine:
        client = boto3.client("athena", region_name="us-east-1")
        stubber = Stubber(client)
        for _ in range(200):  # more than the wait's polls
            stubber.add_client_error(
                "get_query_execution",
                service_error_code=code,
                service_message=f"{code} for query {OTHER_QUERY}",
                http_status_code=ATHENA_ERRORS[code],
                expected_params={"QueryExecutionId": OTHER_QUERY},
            )
        stubber.activate()
        stubbers.append(stubber)
        return AthenaQueryEngine(workgroup="athena-refresh", database="flights_demo", client=client)

    yield make
    for stubber in stubbers:
        stubber.deactivate()


@pytest.fixture
def expired_foreign_permit(ddb: Any, lock_table: str, clock: Any) -> Semaphore:
    """A budget of one permit, held by another deployment's slot whose lease expired naming :data:`OTHER_QUERY`
    (its holder died, or runs on: either way its query may still be active)."""
    semaphore = Semaphore(lock_table, NAME, 1, client=ddb, clock_ms=clock, sleep_s=clock.sleep)
    taken = semaphore.try_acquire(OTHER, 1, clock.now + 10_000)
    assert taken.acquired
    semaphore.record_query(taken, OTHER_QUERY)  # type: ignore[arg-type]
    clock.advance(s=60)
    return semaphore


def _run_gated(
    engine: AthenaQueryEngine,
    semaphore: Semaphore,
    *,
    make_settings: Callable[..., Settings],
    make_lock: Callable[..., SlotLock],
    make_job: Any,
    make_runner: Any,
    make_context: Any,
    store: ResultsStore,
    clock: Any,
    slot: Slot,
) -> tuple[Any, Any, FakeDeferral]:
    """The slot's winner with the capacity gate exactly as the service builds it for an invocation."""
    deferral = FakeDeferral()
    capacity = CapacitySettings(permits=1, semaphore_name=NAME, wait_in_place_s=WAIT_IN_PLACE_S, retry_delay_s=120)
    settings = make_settings(capacity=capacity)
    deps = service.Deps(
        settings=settings,
        lock=make_lock(),
        engine=engine,
        results=store,
        semaphore=semaphore,
        deferral=lambda _s, _c: deferral,
        capacity_sleep_s=clock.sleep,
    )
    event = {"scheduled_time": slot.iso, "job": settings.job_name}
    gate = service._capacity_gate(deps, event, make_context("req-A"))
    job = make_job(engine, capacity=gate)
    outcome = make_runner().run(job, slot=slot, owner_id="req-A", deadline_ms=clock.now + 300_000)
    return outcome, job, deferral


@pytest.mark.parametrize("code", list(ATHENA_ERRORS))
def test_a_permit_whose_query_cannot_be_read_is_waited_on_then_the_slot_is_given_back(
    code: str,
    athena_answering: Callable[[str], AthenaQueryEngine],
    expired_foreign_permit: Semaphore,
    make_settings: Callable[..., Settings],
    make_lock: Callable[..., SlotLock],
    make_job: Any,
    make_runner: Any,
    make_context: Any,
    store: ResultsStore,
    lock: SlotLock,
    clock: Any,
    slot: Slot,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # GIVEN the budget's only permit expired naming another deployment's query, and Athena answering `code` to every
    # GetQueryExecution of it
    engine = athena_answering(code)
    caplog.set_level(logging.WARNING, logger="athena_refresh")

    # WHEN a winner waits for a permit (90 s in place)
    outcome, job, deferral = _run_gated(
        engine,
        expired_foreign_permit,
        make_settings=make_settings,
        make_lock=make_lock,
        make_job=make_job,
        make_runner=make_runner,
        make_context=make_context,
        store=store,
        clock=clock,
        slot=slot,
    )

    # THEN it kept waiting (the permit is not reclaimable while its query cannot be read), then gave the slot back like
    # any waiting slot: no Lambda error, no FAILED record, no query started, one re-invocation arranged
    assert (outcome.status, outcome.reason) == ("deferred", "capacity"), outcome
    assert job.report.queries_started == 0 and job.report.permit is None
    assert len(deferral.deferred) == 1 and job.report.permit_wait_ms >= WAIT_IN_PLACE_S * 1000
    record = lock.get_slot(slot)
    assert record is None or record.get("status") != "FAILED", record
    assert lock.get_slot_state(slot)["capacity"]["deferrals"] == 1
    # AND it asked about the query again while it waited (once per recheck), each unreadable answer counted on the
    # invocation's report
    assert job.report.permit_queries_unreadable >= 3  # at 0, 30 and 60 s at least: not one try
    # AND the permit stays the other deployment's, counted: never reclaimed under a query that may still run
    permits, _ = expired_foreign_permit.read()
    assert (permits[0].owner, permits[0].query_execution_id) == (OTHER.id, OTHER_QUERY)
    # AND each unreadable answer is one WARNING naming the query, the error code and that the permit stays counted
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and OTHER_QUERY in r.getMessage()]
    assert len(warnings) == job.report.permit_queries_unreadable
    assert all(code in r.getMessage() and "permit stays counted" in r.getMessage() for r in warnings)
    assert {getattr(r, "error_code", None) for r in warnings} == {code}


def test_the_query_is_reclaimed_once_it_can_be_read_and_has_ended(
    expired_foreign_permit: Semaphore,
    make_settings: Callable[..., Settings],
    make_lock: Callable[..., SlotLock],
    make_job: Any,
    make_runner: Any,
    make_context: Any,
    make_engine: Any,
    store: ResultsStore,
    clock: Any,
    slot: Slot,
) -> None:
    # GIVEN the same expired permit, and an engine that can read its query: denied twice, then SUCCEEDED (ended)
    engine = make_engine([["SUCCEEDED"]])
    answers = iter(["denied", "denied"])
    own_get_query = engine.get_query

    def get_query(query_execution_id: str) -> Any:
        if query_execution_id != OTHER_QUERY:
            return own_get_query(query_execution_id)
        if next(answers, None) == "denied":
            raise QueryEngineError(
                "GetQueryExecution", "AccessDeniedException: no", retryable=False, error_code="AccessDeniedException"
            )
        return QueryExecution(OTHER_QUERY, "SUCCEEDED", QueryStatistics(), None)

    engine.get_query = get_query

    # WHEN the winner waits
    outcome, job, deferral = _run_gated(
        engine,
        expired_foreign_permit,
        make_settings=make_settings,
        make_lock=make_lock,
        make_job=make_job,
        make_runner=make_runner,
        make_context=make_context,
        store=store,
        clock=clock,
        slot=slot,
    )

    # THEN the two unreadable answers were waits, and the permit was reclaimed once its query read as ended
    assert outcome.status == "succeeded" and deferral.deferred == []
    assert (job.report.permit, job.report.permit_queries_unreadable) == ("reclaimed", 2)


# --- the reclaim check by itself ------------------------------------------------------------------------------------


class _Raising:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    def get_query(self, query_execution_id: str) -> Any:
        raise self.error


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (
            QueryEngineError(
                "GetQueryExecution", "AccessDeniedException: no", retryable=False, error_code="AccessDeniedException"
            ),
            "AccessDeniedException",
        ),
        (QueryEngineError("GetQueryExecution", "unexpected query state 'PAUSED'"), "QueryEngineError"),
        (
            ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "GetQueryExecution"),
            "ThrottlingException",
        ),  # a botocore error an engine let through unwrapped
        (EndpointConnectionError(endpoint_url="https://athena.us-east-1.amazonaws.com"), "EndpointConnectionError"),
    ],
    ids=["access-denied", "engine-check", "unwrapped-client-error", "unwrapped-connection-error"],
)
def test_an_unreadable_query_is_not_terminal_and_is_counted(
    error: BaseException, code: str, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN a reclaim check whose engine cannot read the query
    report = SlotReport()
    check = ReclaimCheck(_Raising(error), report)  # type: ignore[arg-type]

    # WHEN it is asked twice / THEN "not terminal now", counted, one WARNING each naming the query and the code
    with caplog.at_level(logging.WARNING, logger="athena_refresh"):
        assert check(OTHER_QUERY) is False and check(OTHER_QUERY) is False
    assert report.permit_queries_unreadable == 2
    assert report.log_fields()["permit_queries_unreadable"] == 2
    assert [getattr(r, "error_code", None) for r in caplog.records] == [code, code]
    assert all(OTHER_QUERY in r.getMessage() for r in caplog.records)


def test_a_wrapped_connection_error_names_its_cause() -> None:
    # GIVEN the engine's wrapping of a botocore connection error (no AWS error code)
    wrapped = QueryEngineError("GetQueryExecution", "EndpointConnectionError: could not connect")
    wrapped.__cause__ = EndpointConnectionError(endpoint_url="https://athena.us-east-1.amazonaws.com")
    report = SlotReport()

    # WHEN the check meets it / THEN not terminal, counted, and the code names both types
    assert ReclaimCheck(_Raising(wrapped), report)(OTHER_QUERY) is False  # type: ignore[arg-type]
    assert report.permit_queries_unreadable == 1
    assert error_code(wrapped) == "QueryEngineError (EndpointConnectionError)"


def test_a_programming_error_is_not_mistaken_for_an_unreadable_query() -> None:
    # GIVEN an engine failing with a TypeError (a bug, not an answer of Athena)
    report = SlotReport()
    check = ReclaimCheck(_Raising(TypeError("get_query() got an unexpected keyword")), report)  # type: ignore[arg-type]

    # WHEN the check runs / THEN the bug surfaces, uncounted
    with pytest.raises(TypeError):
        check(OTHER_QUERY)
    assert report.permit_queries_unreadable == 0
