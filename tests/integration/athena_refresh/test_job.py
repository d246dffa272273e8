"""``AthenaRefreshJob`` under ``slotlock.SlotRunner``: a scripted engine, moto tables, a fake clock.

Each simulated Lambda gets a lock object of its own (``make_runner``); they share the tables, the
clock and the engine (which stands for Athena: one account's queries, whoever polls them). Racers are
sequenced one request at a time (moto is not atomic under concurrency).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from athena_refresh.engine import client_request_token
from athena_refresh.errors import QueryEngineError, QueryTimeoutError
from athena_refresh.job import CHECKPOINT_QUERY_STARTED
from athena_refresh.report import SlotReport
from athena_refresh.results import ResultsStore, create_results_table
from athena_refresh.settings import Settings
from slotlock import Lease, Slot, SlotLock, SlotOutcome, SlotRunner, create_lock_table

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

WINDOW_PARAMETERS = ["'2013-11-21 00:30:00'", "'2013-11-22 00:30:00'"]  # slot 2026-11-22T00:30Z, data year 2013
ROWS_B = [{"origin": "EWR", "flights": 999, "avg_dep_delay_min": 1.0}]  # what a successor reads, to tell apart


class SimulatedCrash(BaseException):
    """The invocation dies here (timeout, OOM): nothing of it runs afterwards. BaseException, so no
    ``except Exception`` in the code under test can swallow it."""


def crash_at(checkpoint_name: str) -> Callable[[str, Lease], None]:
    def listener(checkpoint: str, lease: Lease) -> None:
        if checkpoint == checkpoint_name:
            raise SimulatedCrash(checkpoint)

    return listener


def killed(runner: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A killed Lambda cannot release its lease: make this runner's release a no-op."""
    monkeypatch.setattr(runner.lock, "release", lambda lease: None)
    return runner


def failed(*, retryable: bool, **fields: Any) -> dict[str, Any]:
    return {"state": "FAILED", "retryable": retryable, **fields}


@pytest.fixture
def run(clock: Any, slot: Slot) -> Callable[..., SlotOutcome]:
    """``run(runner, job, owner, remaining_ms=300_000)``: one invocation for the test's slot."""

    def invoke(runner: Any, job: Any, owner: str, *, remaining_ms: int = 300_000) -> SlotOutcome:
        return runner.run(job, slot=slot, owner_id=owner, deadline_ms=clock.now + remaining_ms)

    return invoke


# ---------------------------------------------------------------------------------------------------
# the winner
# ---------------------------------------------------------------------------------------------------


def test_happy_path_stores_one_result_and_the_latest_pointer(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    store: ResultsStore,
    settings: Settings,
    request_log: Any,
    clock: Any,
) -> None:
    # GIVEN a query that is queued, then running, then done
    engine = make_engine([["QUEUED", "RUNNING", "SUCCEEDED"]])

    # WHEN the first racer runs the slot
    job = make_job(engine)
    outcome = run(make_runner(), job, "req-A")
    sent = list(request_log.operations)

    # THEN it succeeded under token 1 with one query, started with the slot's token and window
    assert (outcome.status, outcome.fencing_token) == ("succeeded", 1)
    assert (outcome.takeover, outcome.reentered, outcome.adopted_state) == (False, False, False)
    assert engine.starts == [
        {
            "sql": settings.query_sql,
            "parameters": WINDOW_PARAMETERS,
            "token": client_request_token(settings.job_name, slot.iso, 1, deployment_id=settings.lock_table_name),
        }
    ]
    qid = next(iter(engine.queries))
    assert engine.call_names == ["start_query", "get_query", "get_query", "get_query", "get_results"]
    assert clock.sleeps_ms == [200, 400]  # capped exponential backoff between polls

    # AND exactly one result is stored, with its rows, and LATEST points at it
    [result] = stored_results = store.list_results(settings.job_name)
    assert result["slot"] == slot.iso and result["fencing_token"] == 1 and result["query_execution_id"] == qid
    assert store.get_result(settings.job_name, slot.iso)["rows"] == engine.rows  # type: ignore[index]
    assert result["window_start"] == "2013-11-21T00:30:00" and result["window_end"] == "2013-11-22T00:30:00"
    assert len(stored_results) == 1
    latest = store.get_latest(settings.job_name)
    assert latest is not None and (latest["latest_slot"], latest["fencing_token"]) == (slot.iso, 1)

    # AND the slot is finished with a summary, the lease released
    item = lock.get_slot(slot)
    assert item is not None and item["status"] == "SUCCEEDED" and item["fencing_token"] == 1
    assert item["summary"]["query_execution_id"] == qid and item["summary"]["row_count"] == 3
    assert item["summary"]["attempt"] == 1 and item["summary"]["rows_location"] == "inline"
    assert item["state"] == {"query_execution_id": qid, "attempt": 1}
    record = lock.get_lock()
    assert record.owner_id is None and record.last_finished_slot == slot and record.last_succeeded_slot == slot

    # AND three DynamoDB requests did it all: acquire, record the query id, commit
    assert sent == ["UpdateItem", "TransactWriteItems", "TransactWriteItems"]

    # AND its report (the service's log line fields and metric values) describes the run: one query started,
    # its statistics, the commit and its rows (no cost tracker, no value metrics, no thresholds: those stay unset)
    assert job.report == SlotReport(
        queries_started=1, data_scanned_bytes=7_340_032, query_duration_ms=910, committed=True, rows_stored=3
    )


def test_two_deployments_of_one_job_in_one_account_start_separate_queries(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    make_settings: Any,
    make_store: Any,
    run: Any,
    slot: Slot,
    settings: Settings,
    store: ResultsStore,
    ddb: Any,
    clock: Any,
) -> None:
    # GIVEN staging (this test's tables) and prod: same job name, same account, so one Athena that returns
    # the same query for the same ClientRequestToken; prod has its own lock and results tables
    engine = make_engine([["SUCCEEDED"], ["SUCCEEDED"]])
    prod_locks, prod_results = f"{settings.lock_table_name}-prod", f"{settings.results_table_name}-prod"
    create_lock_table(ddb, prod_locks, enable_ttl=False)
    create_results_table(ddb, prod_results)
    try:
        prod = make_settings(lock_table_name=prod_locks, results_table_name=prod_results)
        prod_store = ResultsStore(prod_results, bucket_name=None, dynamodb_client=ddb)
        prod_runner = SlotRunner(
            SlotLock(
                prod_locks,
                prod.job_name,
                client=ddb,
                clock_ms=clock,
                lease_duration_s=prod.lease_duration_s,
                heartbeat_interval_s=prod.heartbeat_interval_s,
            )
        )

        # WHEN both run the same slot, staging first
        staging_outcome = run(make_runner(), make_job(engine), "req-staging")
        prod_outcome = run(prod_runner, make_job(engine, settings=prod, results=prod_store), "req-prod")

        # THEN each sent the token built with its own lock table's name, so each got a query of its own
        assert [start["token"] for start in engine.starts] == [
            client_request_token(settings.job_name, slot.iso, 1, deployment_id=settings.lock_table_name),
            client_request_token(prod.job_name, slot.iso, 1, deployment_id=prod_locks),
        ]
        staging_qid, prod_qid = list(engine.queries)
        assert (staging_outcome.status, prod_outcome.status) == ("succeeded", "succeeded")
        assert store.get_result(settings.job_name, slot.iso)["query_execution_id"] == staging_qid  # type: ignore[index]
        assert prod_store.get_result(prod.job_name, slot.iso)["query_execution_id"] == prod_qid  # type: ignore[index]
    finally:
        ddb.delete_table(TableName=prod_locks)
        ddb.delete_table(TableName=prod_results)


@pytest.mark.parametrize("reason", ["held", "slot_finished"])
def test_loser_sends_one_dynamodb_request_and_never_calls_the_engine(
    reason: str,
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    request_log: Any,
    clock: Any,
) -> None:
    # GIVEN another racer holds the slot's lease, or already finished the slot
    if reason == "held":
        assert lock.try_acquire(slot, "req-A", deadline_ms=clock.now + 300_000).acquired
    else:
        assert run(make_runner(), make_job(make_engine()), "req-A").status == "succeeded"
    clock.advance(s=1)
    engine = make_engine()
    request_log.clear()

    # WHEN a late racer of the same slot runs
    job = make_job(engine)
    outcome = run(make_runner(), job, "req-B")

    # THEN it lost with a reason, after exactly one DynamoDB request and zero engine calls
    assert (outcome.status, outcome.reason, outcome.fencing_token) == ("lost", reason, None)
    assert request_log.operations == ["UpdateItem"]
    assert engine.calls == []
    assert job.report == SlotReport()  # nothing to report: not started, nothing committed
    assert outcome.details["fencing_token"] == 1  # learnt from ALL_OLD, at no extra request


# ---------------------------------------------------------------------------------------------------
# crashes, takeovers, re-entry
# ---------------------------------------------------------------------------------------------------


def test_takeover_adopts_the_predecessors_query(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    store: ResultsStore,
    settings: Settings,
    clock: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN racer A started the query, recorded its id, and was killed
    engine = make_engine([["RUNNING", "RUNNING", "SUCCEEDED"]])
    runner_a = killed(make_runner(listener=crash_at(CHECKPOINT_QUERY_STARTED)), monkeypatch)
    with pytest.raises(SimulatedCrash):
        run(runner_a, make_job(engine), "req-A")
    [qid] = engine.queries

    # WHEN its lease has expired and racer B arrives (a late delivery of the same slot)
    clock.advance(s=settings.lease_duration_s + 1)
    job = make_job(engine)
    outcome = run(make_runner(), job, "req-B")

    # THEN B took over, adopted A's query instead of starting a second one, and stored its result
    assert (outcome.status, outcome.fencing_token) == ("succeeded", 2)
    assert (outcome.takeover, outcome.reentered, outcome.adopted_state) == (True, False, True)
    assert len(engine.starts) == 1
    assert (job.report.query_adopted, job.report.queries_started, job.report.committed) == (True, 0, True)
    [result] = store.list_results(settings.job_name)
    assert (result["query_execution_id"], result["fencing_token"]) == (qid, 2)
    assert store.get_latest(settings.job_name)["fencing_token"] == 2  # type: ignore[index]


def test_retry_of_a_dead_winner_reenters_and_adopts(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    store: ResultsStore,
    settings: Settings,
    clock: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN winner A was killed after starting the query; its lease has NOT expired yet
    engine = make_engine([["RUNNING", "SUCCEEDED"]])
    with pytest.raises(SimulatedCrash):
        run(killed(make_runner(listener=crash_at(CHECKPOINT_QUERY_STARTED)), monkeypatch), make_job(engine), "req-A")
    [qid] = engine.queries
    clock.advance(s=5)

    # WHEN Lambda retries the same event (same request id) in a fresh execution environment
    job = make_job(engine)
    outcome = run(make_runner(), job, "req-A")

    # THEN it re-entered its own lease at once (no waiting for expiry) and adopted the query
    assert outcome.status == "succeeded"
    assert (outcome.takeover, outcome.reentered, outcome.adopted_state) == (False, True, True)
    assert outcome.fencing_token == 2
    assert len(engine.starts) == 1
    assert (job.report.query_adopted, job.report.queries_started) == (True, 0)
    assert store.get_result(settings.job_name, slot.iso)["query_execution_id"] == qid  # type: ignore[index]


def test_a_racer_of_the_same_slot_cannot_take_over_a_live_lease(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    monkeypatch: pytest.MonkeyPatch,
    clock: Any,
    settings: Settings,
) -> None:
    # GIVEN A was killed after starting the query, and its lease has one second left
    engine = make_engine([["RUNNING", "SUCCEEDED"]])
    with pytest.raises(SimulatedCrash):
        run(killed(make_runner(listener=crash_at(CHECKPOINT_QUERY_STARTED)), monkeypatch), make_job(engine), "req-A")
    clock.advance(s=settings.lease_duration_s - 1)

    # WHEN another racer arrives
    outcome = run(make_runner(), make_job(engine), "req-B")

    # THEN it loses to the live lease and touches nothing
    assert (outcome.status, outcome.reason) == ("lost", "held")
    assert engine.call_names == ["start_query"]


@pytest.mark.parametrize("successor", ["committed", "still_running"])
def test_paused_holders_commit_is_rejected_and_its_rows_are_not_stored(
    successor: str,
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    store: ResultsStore,
    settings: Settings,
    clock: Any,
) -> None:
    # GIVEN holder A, paused (GC, frozen sandbox) after reading its rows and just before its commit,
    # long enough for its lease to expire and for B to take over the slot
    engine = make_engine([["RUNNING", "SUCCEEDED"]])
    successor_outcomes: list[Any] = []

    def pause_before_commit(checkpoint: str, lease: Lease) -> None:
        if checkpoint != "before_commit":
            return
        clock.advance(s=settings.lease_duration_s + 1)
        engine.rows = ROWS_B
        if successor == "committed":
            successor_outcomes.append(run(make_runner(), make_job(engine), "req-B"))
        else:
            successor_outcomes.append(lock.try_acquire(slot, "req-B", deadline_ms=clock.now + 300_000))

    # WHEN A resumes and commits
    outcome = run(make_runner(listener=pause_before_commit), make_job(engine), "req-A")

    # THEN A's commit carried a stale token and was rejected as a whole
    assert (outcome.status, outcome.reason, outcome.fencing_token) == ("stale_rejected", "fencing_token_superseded", 1)
    assert outcome.details["current_fencing_token"] == 2
    # AND A's rows are not stored: either B's are (under B's token), or nothing yet
    if successor == "committed":
        assert successor_outcomes[0].status == "succeeded" and successor_outcomes[0].fencing_token == 2
        [result] = store.list_results(settings.job_name)
        assert result["fencing_token"] == 2
        assert store.get_result(settings.job_name, slot.iso)["rows"] == ROWS_B  # type: ignore[index]
        assert store.get_latest(settings.job_name)["fencing_token"] == 2  # type: ignore[index]
        assert lock.get_slot(slot)["owner_id"] == "req-B"  # type: ignore[index]
    else:
        assert successor_outcomes[0].acquired
        assert store.list_results(settings.job_name) == []
        assert store.get_latest(settings.job_name) is None
        assert lock.get_slot(slot)["status"] == "RUNNING"  # type: ignore[index]
        assert lock.get_lock().owner_id == "req-B"


# ---------------------------------------------------------------------------------------------------
# query failures
# ---------------------------------------------------------------------------------------------------


def test_retryable_failure_starts_attempt_2_with_a_new_client_request_token(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    store: ResultsStore,
    settings: Settings,
) -> None:
    # GIVEN the first query fails with a retryable (system) error, the second succeeds
    engine = make_engine(
        [
            ["RUNNING", failed(retryable=True, error_category=1, error_type=401, error_message="internal error")],
            ["RUNNING", "SUCCEEDED"],
        ]
    )

    # WHEN the slot runs
    job = make_job(engine)
    outcome = run(make_runner(), job, "req-A")

    # THEN a second query was started with attempt 2's token (not a resend of attempt 1's)
    tokens = [start["token"] for start in engine.starts]
    assert tokens == [
        client_request_token(settings.job_name, slot.iso, 1, deployment_id=settings.lock_table_name),
        client_request_token(settings.job_name, slot.iso, 2, deployment_id=settings.lock_table_name),
    ]
    assert len(set(engine.queries)) == 2
    second_qid = list(engine.queries)[1]
    assert outcome.status == "succeeded" and outcome.value["attempt"] == 2
    assert store.get_result(settings.job_name, slot.iso)["query_execution_id"] == second_qid  # type: ignore[index]
    assert lock.get_slot(slot)["state"] == {"query_execution_id": second_qid, "attempt": 2}  # type: ignore[index]
    assert job.report.queries_started == 2


@pytest.mark.parametrize("max_attempts", [1, 3])
def test_retryable_failures_are_bounded_by_max_query_attempts(
    max_attempts: int,
    make_settings: Any,
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    store: ResultsStore,
    clock: Any,
) -> None:
    # GIVEN every attempt fails retryably (a further attempt would have succeeded)
    settings = make_settings(max_query_attempts=max_attempts)
    engine = make_engine([[failed(retryable=True, error_type=401)]] * max_attempts + [["SUCCEEDED"]])

    # WHEN the slot runs
    outcome = run(make_runner(), make_job(engine, settings=settings), "req-A")

    # THEN it made exactly max_attempts attempts, then ended the slot failed
    assert len(engine.starts) == max_attempts
    assert outcome.status == "failed"
    item = lock.get_slot(slot)
    assert item is not None and item["status"] == "FAILED"
    assert item["error"]["attempt"] == max_attempts and item["error"]["retryable"] is True
    assert store.list_results(settings.job_name) == []

    # AND the slot is finished for good: a later racer does not run it again
    clock.advance(s=60)
    again = run(make_runner(), make_job(engine, settings=settings), "req-B")
    assert (again.status, again.reason) == ("lost", "slot_finished")
    assert len(engine.starts) == max_attempts


def test_permanent_failure_ends_the_slot_failed_with_the_athena_error_recorded(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    store: ResultsStore,
    settings: Settings,
    clock: Any,
    request_log: Any,
) -> None:
    # GIVEN the query fails with a user error Athena marks not retryable
    engine = make_engine(
        [
            [
                "RUNNING",
                failed(
                    retryable=False,
                    error_category=2,
                    error_type=1006,
                    error_message="COLUMN_NOT_FOUND: line 1:8: Column 'orign' cannot be resolved",
                    reason="SYNTAX_ERROR",
                ),
            ]
        ]
    )

    # WHEN the slot runs
    outcome = run(make_runner(), make_job(engine), "req-A")

    # THEN it returns normally (no Lambda retry storm) with status failed and no second attempt
    [qid] = engine.queries
    expected_error = {
        "query_execution_id": qid,
        "state": "FAILED",
        "reason": "SYNTAX_ERROR",
        "error_category": 2,
        "error_type": 1006,
        "retryable": False,
        "error_message": "COLUMN_NOT_FOUND: line 1:8: Column 'orign' cannot be resolved",
        "attempt": 1,
    }
    assert outcome.status == "failed" and outcome.value == expected_error and dict(outcome.details) == expected_error
    assert len(engine.starts) == 1

    # AND the slot item records the AthenaError fields; nothing is stored as a result
    item = lock.get_slot(slot)
    assert item is not None and item["status"] == "FAILED" and item["error"] == expected_error
    record = lock.get_lock()
    assert (record.last_finished_slot, record.last_finished_outcome, record.owner_id) == (slot, "failed", None)
    assert record.last_succeeded_slot is None
    assert store.list_results(settings.job_name) == [] and store.get_latest(settings.job_name) is None

    # AND the slot never runs again, neither for a late racer nor for a retry of the same request
    for owner in ("req-B", "req-A"):
        clock.advance(s=settings.lease_duration_s * 2)
        request_log.clear()
        again = run(make_runner(), make_job(engine), owner)
        assert (again.status, again.reason) == ("lost", "slot_finished")
        assert request_log.operations == ["UpdateItem"]
    assert len(engine.calls) == 3  # start, two polls: nothing since


def test_cancelled_query_without_athena_error_is_a_permanent_failure(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
) -> None:
    # GIVEN a query someone cancelled (Athena gives no AthenaError, so nothing says it is retryable)
    engine = make_engine([["RUNNING", {"state": "CANCELLED", "reason": "Query was cancelled by user"}]])

    # WHEN the slot runs
    outcome = run(make_runner(), make_job(engine), "req-A")

    # THEN the slot ends failed after one attempt
    assert outcome.status == "failed" and len(engine.starts) == 1
    assert lock.get_slot(slot)["error"]["state"] == "CANCELLED"  # type: ignore[index]


# ---------------------------------------------------------------------------------------------------
# time budget, heartbeats, lost lease
# ---------------------------------------------------------------------------------------------------


def test_query_timeout_near_the_deadline_releases_the_lease_and_propagates(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    store: ResultsStore,
    settings: Settings,
    clock: Any,
) -> None:
    # GIVEN an invocation with 12 s left, 5 s of which are reserved for the commit, and a slow query
    engine = make_engine([["RUNNING"]])
    job = make_job(engine, commit_reserve_ms=5_000)
    started_ms = clock.now

    # WHEN the budget runs out while polling
    with pytest.raises(QueryTimeoutError) as info:
        run(make_runner(), job, "req-A", remaining_ms=12_000)

    # THEN polling stopped exactly at the deadline minus the reserve, naming the query
    [qid] = engine.queries
    assert info.value.query_execution_id == qid and info.value.state == "RUNNING"
    assert clock.now == started_ms + 12_000 - 5_000
    # AND the lease was released (expiry = now) with owner, token and in-flight state kept for adoption
    record = lock.get_lock()
    assert (record.owner_id, record.fencing_token, record.lease_expires_at_ms) == ("req-A", 1, clock.now)
    item = lock.get_slot(slot)
    assert item is not None and item["status"] == "RUNNING" and item["state"]["query_execution_id"] == qid
    assert store.list_results(settings.job_name) == []
    assert "stop_query" not in engine.call_names  # the query keeps running

    # WHEN Lambda's retry (same request id) arrives and the query has finished meanwhile
    engine.queries[qid].script = deque(["SUCCEEDED"])
    clock.advance(s=60)
    retry = make_job(engine)
    outcome = run(make_runner(), retry, "req-A")

    # THEN it re-enters, adopts the query and stores its result, without starting another
    assert (outcome.status, outcome.reentered, outcome.adopted_state) == ("succeeded", True, True)
    assert len(engine.starts) == 1 and retry.report.query_adopted and retry.report.queries_started == 0
    assert store.get_result(settings.job_name, slot.iso)["query_execution_id"] == qid  # type: ignore[index]


def test_a_successor_adopts_a_timed_out_query_at_once(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    clock: Any,
) -> None:
    # GIVEN A timed out and released its lease (expiry = now)
    engine = make_engine([["RUNNING"]])
    with pytest.raises(QueryTimeoutError):
        run(make_runner(), make_job(engine, commit_reserve_ms=5_000), "req-A", remaining_ms=8_000)
    [qid] = engine.queries
    engine.queries[qid].script = deque(["SUCCEEDED"])

    # WHEN another racer arrives one millisecond later: the released lease is free
    clock.advance(ms=1)
    outcome = run(make_runner(), make_job(engine), "req-B")

    assert (outcome.status, outcome.takeover, outcome.adopted_state) == ("succeeded", True, True)
    assert len(engine.starts) == 1


def test_heartbeats_follow_the_interval_and_never_extend_the_lease_past_the_deadline(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    settings: Settings,
    clock: Any,
    request_log: Any,
) -> None:
    # GIVEN lease 30 s, heartbeat 10 s, an invocation with 60 s left (5 s reserved for the commit),
    # and a query that runs about 51 s: polls at 0, 0.2, 0.6, 1.4, 3.0, 6.2, then every 5 s
    assert (settings.lease_duration_s, settings.heartbeat_interval_s) == (30.0, 10.0)
    engine = make_engine([["RUNNING"] * 14 + ["SUCCEEDED"]])
    start_ms = clock.now
    deadline_ms = start_ms + 60_000

    # WHEN the slot runs
    outcome = run(make_runner(), make_job(engine, commit_reserve_ms=5_000), "req-A", remaining_ms=60_000)

    # THEN it succeeded after 15 polls
    assert outcome.status == "succeeded"
    assert engine.call_names.count("get_query") == 15
    # AND renewals were sent when a heartbeat interval had passed (polls are at most 5 s apart), each
    # extending to now + lease but capped at the deadline; once capped, no more requests are sent
    heartbeats = [(at - start_ms, expires - start_ms) for at, expires in request_log.heartbeats()]
    assert heartbeats == [(11_200, 41_200), (21_200, 51_200), (31_200, 60_000)]
    renewals = [0] + [at for at, _ in heartbeats]  # the acquisition and record_state happened at 0
    gaps = [later - earlier for earlier, later in itertools.pairwise(renewals)]
    max_poll_delay_ms = 5_000
    assert all(
        settings.heartbeat_interval_s * 1000 <= gap <= settings.heartbeat_interval_s * 1000 + max_poll_delay_ms
        for gap in gaps
    )
    # every expiry the lock ever held: never past the deadline, and each renewal came before the lease lapsed
    acquire = request_log.requests("UpdateItem")[0]
    expiries = [int(acquire["ExpressionAttributeValues"][":expires"]["N"])] + [e for _, e in request_log.heartbeats()]
    assert all(expires <= deadline_ms for expires in expiries)
    assert all(at < previous for (at, _), previous in zip(request_log.heartbeats(), expiries))


def test_a_slow_result_read_renews_the_lease_between_pages_and_before_the_commit(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    settings: Settings,
    clock: Any,
    request_log: Any,
) -> None:
    # GIVEN a query whose results come in 4 pages that take 8 s each (32 s in all: longer than the 30 s
    # lease and than 3 heartbeat intervals of 10 s)
    def slow_page(engine: Any, page: int) -> None:
        clock.advance(s=8)

    engine = make_engine([["SUCCEEDED"]], pages=4, on_page_read=slow_page)
    start_ms = clock.now

    # WHEN the slot runs
    outcome = run(make_runner(), make_job(engine), "req-A")

    # THEN it committed as the lease holder, having renewed while reading (each time a heartbeat was due)
    assert outcome.status == "succeeded"
    renewed_at = [at - start_ms for at, _ in request_log.heartbeats()]
    assert renewed_at == [16_000, 32_000]  # after pages 2 and 4; none due before the commit at 32 s
    # AND the lease never lapsed: each renewal and the commit came before the expiry then held
    acquire = request_log.requests("UpdateItem")[0]
    expiry = int(acquire["ExpressionAttributeValues"][":expires"]["N"])
    for at, expires in request_log.heartbeats():
        assert at < expiry
        expiry = expires
    assert clock.now < expiry
    assert lock.get_slot(slot)["status"] == "SUCCEEDED"  # type: ignore[index]


def test_lease_lost_during_polling_writes_nothing_more_and_leaves_the_query_running(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    store: ResultsStore,
    settings: Settings,
    clock: Any,
    request_log: Any,
) -> None:
    # GIVEN A is polling its query; during the third poll A stalls past its lease and B takes over
    takeovers: list[Any] = []

    def stall_and_take_over(engine: Any, poll: int) -> None:
        if poll == 3:
            clock.advance(s=settings.lease_duration_s + 1)
            takeovers.append(lock.try_acquire(slot, "req-B", deadline_ms=clock.now + 300_000))
            request_log.clear()

    engine = make_engine([["RUNNING"] * 5 + ["SUCCEEDED"]], on_get_query=stall_and_take_over)

    # WHEN A's poll returns and its heartbeat falls due
    outcome = run(make_runner(), make_job(engine), "req-A")

    # THEN A learns it lost the lease and returns normally
    assert takeovers[0].acquired and takeovers[0].takeover_from == "req-A"
    assert (outcome.status, outcome.reason, outcome.fencing_token) == ("lease_lost", "heartbeat", 1)
    assert outcome.details == {"holder_owner_id": "req-B", "current_fencing_token": 2}
    # AND after the takeover A sent only the rejected heartbeat: no release, no state, no commit
    assert request_log.operations == ["UpdateItem"]
    # AND it neither read results nor stopped the query (B adopts it)
    [qid] = engine.queries
    assert engine.call_names == ["start_query", "get_query", "get_query", "get_query"]
    assert lock.get_slot(slot)["state"]["query_execution_id"] == qid  # type: ignore[index]
    assert lock.get_lock().owner_id == "req-B"
    assert store.list_results(settings.job_name) == [] and store.get_latest(settings.job_name) is None


class RejectingEngine:
    """StartQueryExecution answers with a QueryEngineError (as AthenaQueryEngine wraps a ClientError)."""

    def __init__(self, error: Any) -> None:
        self.error = error
        self.starts = 0

    def start_query(self, **_: Any) -> str:
        self.starts += 1
        raise self.error

    def get_query(self, query_execution_id: str) -> Any:  # pragma: no cover - never reached
        raise AssertionError("no query was started")

    def get_results(self, query_execution_id: str, *, on_page: Any = None) -> Any:  # pragma: no cover
        raise AssertionError("no query was started")


def test_a_rejected_start_fails_the_slot_once_instead_of_a_retry_storm(
    make_runner: Any,
    make_job: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    store: ResultsStore,
    settings: Settings,
) -> None:
    # GIVEN Athena rejects the request itself (e.g. the role lacks athena:StartQueryExecution)
    error = QueryEngineError(
        "StartQueryExecution",
        "AccessDeniedException: not authorized",
        retryable=False,
        error_code="AccessDeniedException",
    )
    engine = RejectingEngine(error)

    # WHEN the slot runs, and again as Lambda would retry it with the same request id
    outcome = run(make_runner(), make_job(engine), "req-A")
    again = run(make_runner(), make_job(engine), "req-A")

    # THEN the first run records the slot FAILED with the error and returns normally; the retry finds it finished
    assert outcome.status == "failed"
    assert outcome.value == {
        "type": "QueryEngineError",
        "operation": "StartQueryExecution",
        "error_code": "AccessDeniedException",
        "retryable": False,
        "query_execution_id": None,
        "error_message": "StartQueryExecution failed: AccessDeniedException: not authorized",
    }
    assert (again.status, again.reason) == ("lost", "slot_finished")
    assert engine.starts == 1
    item = lock.get_slot(slot)
    assert item is not None and item["status"] == "FAILED" and item["error"]["error_code"] == "AccessDeniedException"
    assert store.list_results(settings.job_name) == []


def test_a_retryable_engine_error_propagates_and_the_retry_runs_again(
    make_runner: Any,
    make_job: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    clock: Any,
) -> None:
    # GIVEN throttling that outlasted botocore's retries
    engine = RejectingEngine(
        QueryEngineError(
            "StartQueryExecution", "TooManyRequestsException: Rate exceeded", error_code="TooManyRequestsException"
        )
    )

    # WHEN the slot runs: THEN the error propagates (Lambda retries) and the lease is given back
    with pytest.raises(QueryEngineError):
        run(make_runner(), make_job(engine), "req-A")
    assert lock.get_lock().lease_expires_at_ms <= clock.now  # released (expired now), owner kept for re-entry
    item = lock.get_slot(slot)
    assert item is None or item["status"] == "RUNNING"
    with pytest.raises(QueryEngineError):
        run(make_runner(), make_job(engine), "req-A")
    assert engine.starts == 2


def test_rows_too_large_without_an_overflow_bucket_fail_the_slot_without_truncating(
    make_runner: Any,
    make_job: Any,
    make_engine: Any,
    run: Any,
    slot: Slot,
    lock: SlotLock,
    store: ResultsStore,
    settings: Settings,
) -> None:
    # GIVEN a result bigger than an item can hold and no results bucket
    engine = make_engine(rows=[{"origin": "X" * 1000, "flights": i, "avg_dep_delay_min": 1.0} for i in range(400)])
    small_store = ResultsStore(store.table_name, dynamodb_client=store.dynamodb, max_inline_bytes=1000)

    # WHEN the slot runs
    outcome = run(make_runner(), make_job(engine, results=small_store), "req-A")

    # THEN the slot is FAILED, naming the cause; nothing is stored
    assert outcome.status == "failed" and outcome.value["type"] == "ResultsStoreError"
    assert "refusing to truncate" in outcome.value["error_message"]
    assert lock.get_slot(slot)["status"] == "FAILED"
    assert store.list_results(settings.job_name) == []
