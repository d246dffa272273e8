"""``AthenaRefreshJob`` for manual generations: re-runs of a slot beside the live schedule's run.

A re-run is generation 2, 3, ... of a slot, requested first (``slotlock.request_generation``), then run under
the job's manual lease (``SlotLock.for_generation``). Its result is its own item (``<slot>#g<n>``), its queries
have their own ClientRequestTokens, and the results' LATEST pointer only ever moves forward: by slot, then by
generation. Racers are sequenced one request at a time on the fake clock, as in ``test_job.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from athena_refresh.engine import client_request_token
from athena_refresh.results import ResultsStore
from athena_refresh.settings import Settings
from athena_refresh.stored import result_sort_key
from slotlock import Slot, SlotLock, SlotOutcome, SlotRunner, request_generation

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

OPERATOR = "arn:aws:iam::123456789012:user/op"
ROWS_B = [{"origin": "EWR", "flights": 999, "avg_dep_delay_min": 1.0}]  # what the re-run reads, to tell apart


@pytest.fixture
def run_live(make_runner: Any, make_job: Any, clock: Any, slot: Slot) -> Callable[..., SlotOutcome]:
    """``run_live(engine, owner, for_slot=None)``: one invocation of the live schedule (generation 1)."""

    def invoke(engine: Any, owner: str, *, for_slot: Slot | None = None) -> SlotOutcome:
        return make_runner().run(
            make_job(engine), slot=for_slot or slot, owner_id=owner, deadline_ms=clock.now + 300_000
        )

    return invoke


@pytest.fixture
def rerun(make_lock: Any, make_job: Any, clock: Any, slot: Slot) -> Callable[..., SlotOutcome]:
    """``rerun(engine, owner, for_slot=None)``: the operator requests the slot's next generation, then one
    invocation runs it under the manual lease (as the handler does for an event with a manual marker)."""

    def invoke(engine: Any, owner: str, *, for_slot: Slot | None = None) -> SlotOutcome:
        target = for_slot or slot
        lock = make_lock()
        request = request_generation(
            lock.context, target, run_id=f"run-{owner}", kind="rerun", requested_by=OPERATOR, reason="wrong input data"
        )
        assert request.created
        runner = SlotRunner(lock.for_generation(request.generation))
        return runner.run(make_job(engine), slot=target, owner_id=owner, deadline_ms=clock.now + 300_000)

    return invoke


def results_writes(request_log: Any, results_table: str) -> list[list[str]]:
    """For every TransactWriteItems that wrote to the results table: the kinds of its results-table writes
    (``["Put", "Update"]``: the result and the LATEST pointer; ``["Put"]``: the result alone)."""
    found = []
    for body in request_log.requests("TransactWriteItems"):
        kinds = [
            kind
            for item in body["TransactItems"]
            for kind, write in item.items()
            if write["TableName"] == results_table
        ]
        if kinds:
            found.append(kinds)
    return found


def pointer(store: ResultsStore, job: str) -> tuple[str, int, int, str]:
    """(latest_slot, latest_generation, fencing_token, query_execution_id) of the LATEST pointer."""
    latest = store.get_latest(job)
    assert latest is not None
    return latest["latest_slot"], latest["latest_generation"], latest["fencing_token"], latest["query_execution_id"]


def test_a_rerun_of_an_older_slot_stores_its_result_and_leaves_latest_at_the_newer_slot(
    run_live: Any,
    rerun: Any,
    make_engine: Any,
    slot: Slot,
    lock: SlotLock,
    store: ResultsStore,
    settings: Settings,
    clock: Any,
    request_log: Any,
) -> None:
    # GIVEN slot 00:30, then slot 00:31 ran live: LATEST names 00:31
    engine = make_engine([["SUCCEEDED"]] * 3)
    newer = Slot(slot.epoch_s + 60)
    assert run_live(engine, "req-A").status == "succeeded"
    clock.now = newer.epoch_ms + 2_000
    assert run_live(engine, "req-B", for_slot=newer).status == "succeeded"
    latest_before = store.get_latest(settings.job_name)
    live_lock_before = lock.get_lock()
    request_log.clear()

    # WHEN the operator re-runs slot 00:30 (generation 2) and its query reads other rows
    engine.rows = ROWS_B
    outcome = rerun(engine, "req-rerun")

    # THEN it succeeded under the manual lease's own counter, and its result is stored beside generation 1
    assert (outcome.status, outcome.generation, outcome.fencing_token) == ("succeeded", 2, 1)
    qid = list(engine.queries)[2]
    result = store.get_result(settings.job_name, slot.iso, 2)
    assert result is not None
    assert (result["slot"], result["slot_time"], result["generation"]) == (f"{slot.iso}#g2", slot.iso, 2)
    assert (result["query_execution_id"], result["fencing_token"], result["rows"]) == (qid, 1, ROWS_B)
    assert store.list_generations(settings.job_name, slot.iso) == [1, 2]
    assert store.get_result(settings.job_name, slot.iso)["rows"] != ROWS_B  # type: ignore[index]

    # AND LATEST is untouched: the commit carried the result alone, and the summary says the pointer stayed
    assert store.get_latest(settings.job_name) == latest_before
    assert results_writes(request_log, store.table_name) == [["Put"]]
    assert outcome.value["latest_moved"] is False and outcome.value["generation"] == 2
    history = lock.for_generation(2).get_slot(slot)
    assert history is not None and history["status"] == "SUCCEEDED"
    assert history["summary"]["latest_moved"] is False and history["summary"]["generation"] == 2
    # AND the live schedule's lock item was never touched
    assert lock.get_lock() == live_lock_before


def test_a_rerun_of_the_newest_slot_moves_latest_to_its_generation(
    run_live: Any,
    rerun: Any,
    make_engine: Any,
    slot: Slot,
    lock: SlotLock,
    store: ResultsStore,
    settings: Settings,
    request_log: Any,
) -> None:
    # GIVEN slot 00:30 ran live (token 1): LATEST names (00:30, generation 1)
    engine = make_engine([["SUCCEEDED"]] * 2)
    assert run_live(engine, "req-A").status == "succeeded"
    live_qid = next(iter(engine.queries))
    assert pointer(store, settings.job_name) == (slot.iso, 1, 1, live_qid)
    request_log.clear()

    # WHEN the operator re-runs it (generation 2)
    outcome = rerun(engine, "req-rerun")

    # THEN LATEST moves to (00:30, generation 2), with the re-run's token and query
    assert (outcome.status, outcome.generation) == ("succeeded", 2)
    rerun_qid = list(engine.queries)[1]
    assert pointer(store, settings.job_name) == (slot.iso, 2, outcome.fencing_token, rerun_qid)
    assert results_writes(request_log, store.table_name) == [["Put", "Update"]]
    assert outcome.value["latest_moved"] is True and outcome.value["generation"] == 2
    # AND generation 1's result is still there, unchanged
    assert store.get_result(settings.job_name, slot.iso)["query_execution_id"] == live_qid  # type: ignore[index]


@pytest.mark.parametrize("when", ["before_the_live_run", "while_the_live_run_polls"])
def test_a_live_commit_after_a_rerun_of_its_slot_stores_its_result_and_leaves_latest_at_the_rerun(
    when: str,
    run_live: Any,
    rerun: Any,
    make_engine: Any,
    slot: Slot,
    lock: SlotLock,
    store: ResultsStore,
    settings: Settings,
    request_log: Any,
) -> None:
    # GIVEN generation 2 of slot 00:30 commits before the live run's commit: before the live racer arrives, or
    # while it polls its query (the live commit, generation 1, reads no pointer before committing)
    reruns: list[SlotOutcome] = []

    def rerun_now(engine: Any) -> None:
        rows, engine.rows = engine.rows, ROWS_B
        reruns.append(rerun(engine, "req-rerun"))
        engine.rows = rows

    def rerun_at_first_poll(engine: Any, poll: int) -> None:
        if poll == 1 and when == "while_the_live_run_polls":
            rerun_now(engine)

    if when == "before_the_live_run":
        engine = make_engine([["SUCCEEDED"], ["RUNNING", "SUCCEEDED"]])
        rerun_now(engine)
    else:
        engine = make_engine([["RUNNING", "SUCCEEDED"], ["SUCCEEDED"]], on_get_query=rerun_at_first_poll)
    request_log.clear()

    # WHEN the live racer of slot 00:30 runs and commits
    outcome = run_live(engine, "req-A")

    # THEN the re-run had committed first and moved LATEST to (00:30, generation 2)
    [rerun_outcome] = reruns
    assert (rerun_outcome.status, rerun_outcome.generation) == ("succeeded", 2)
    rerun_qid, live_qid = list(engine.queries) if when == "before_the_live_run" else reversed(list(engine.queries))
    # AND the live run succeeded: its result is stored as generation 1, with its own rows
    assert (outcome.status, outcome.generation) == ("succeeded", 1)
    result = store.get_result(settings.job_name, slot.iso)
    assert result is not None and result["query_execution_id"] == live_qid and result["rows"] != ROWS_B
    assert store.list_generations(settings.job_name, slot.iso) == [1, 2]
    # AND LATEST stays at the re-run: the pointer refused the live commit, which was retried without it
    assert pointer(store, settings.job_name) == (slot.iso, 2, rerun_outcome.fencing_token, rerun_qid)
    live_commits = results_writes(request_log, store.table_name)
    assert live_commits[-2:] == [["Put", "Update"], ["Put"]]
    assert outcome.value["latest_moved"] is False and outcome.value["generation"] == 1
    item = lock.get_slot(slot)
    assert item is not None and item["status"] == "SUCCEEDED" and item["summary"]["latest_moved"] is False
    assert lock.get_lock().last_succeeded_slot == slot


def test_a_rerun_starts_its_queries_with_tokens_of_its_own(
    run_live: Any,
    rerun: Any,
    make_engine: Any,
    slot: Slot,
    store: ResultsStore,
    settings: Settings,
) -> None:
    # GIVEN slot 00:30 ran live (attempt 1)
    engine = make_engine([["SUCCEEDED"]] * 2)
    assert run_live(engine, "req-A").status == "succeeded"

    # WHEN it is re-run as generation 2 (attempt 1 too)
    assert rerun(engine, "req-rerun").status == "succeeded"

    # THEN the re-run's ClientRequestToken is derived from "<slot>#g2", not from the slot: Athena (which answers
    # a known token with its query) started a second query instead of handing back the live run's
    live_token, rerun_token = (start["token"] for start in engine.starts)
    deployment = settings.lock_table_name
    assert live_token == client_request_token(settings.job_name, slot.iso, 1, deployment_id=deployment)
    assert rerun_token == client_request_token(
        settings.job_name, result_sort_key(slot.iso, 2), 1, deployment_id=deployment
    )
    assert rerun_token != live_token
    live_qid, rerun_qid = engine.queries
    assert live_qid != rerun_qid
    assert store.get_result(settings.job_name, slot.iso, 2)["query_execution_id"] == rerun_qid  # type: ignore[index]
