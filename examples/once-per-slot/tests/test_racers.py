"""The handler under a real race: three racer processes per slot, several slots, on AWS DynamoDB Local.

As in Lambda, every racer is a process of its own that imports ``report`` and reuses it from slot to slot (a warm
container); the three are released together for each slot by a barrier, each with its own request id, the same
event the schedules send. The lock table is created with ``slotlock.create_lock_table``.

DynamoDB Local's endpoint comes from ``AWS_ENDPOINT_URL_DYNAMODB``, which boto3 honours by itself: the handler has
no test seam. Without it the test is skipped (under ``CI=true`` it fails). Start DynamoDB Local with
``java -Djava.library.path=DynamoDBLocal_lib -jar DynamoDBLocal.jar -inMemory -port 8000`` and run
``AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 pytest``; ``make example`` in the slotlock repository does it.

Every wait is bounded: barrier waits, result reads, joins.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import boto3
import pytest
from slotlock import Slot, SlotHistory, SlotLock, create_lock_table

ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL_DYNAMODB"
RACERS = 3
SLOTS = 5
JOB = "slot-report"
REGION = "us-east-1"
BARRIER_TIMEOUT_S = 60.0  # the first wait also covers every racer's start-up (spawn, import boto3)
RACE_TIMEOUT_S = 120.0
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass
class LambdaContext:
    """The two members of Lambda's context object that slotlock reads."""

    aws_request_id: str
    deadline_s: float

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline_s - time.time()) * 1000))


def event(slot: Slot, racer: int) -> dict[str, Any]:
    """What each of the stack's schedules sends (OncePerSlotSchedule's fan-out)."""
    return {"scheduled_time": slot.iso, "execution_id": f"exec-{uuid.uuid4()}", "racer": racer, "job": JOB}


def racer(index: int, slots: list[Slot], barrier: Any, results: Any) -> None:
    """One racer process: imports the handler once, invokes it once per slot when the barrier opens.

    Reports ``(index, [outcome, ...], error)``; the environment (table, endpoint, credentials) is inherited.
    """
    outcomes: list[dict[str, Any]] = []
    try:
        import report  # in the racer process, as Lambda imports the handler

        for slot in slots:
            barrier.wait(BARRIER_TIMEOUT_S)
            context = LambdaContext(aws_request_id=f"req-{slot.iso}-racer{index}", deadline_s=time.time() + 60)
            outcomes.append(report.handler(event(slot, index), context))
        results.put((index, outcomes, None))
    except BaseException:  # noqa: BLE001 - report instead of dying silently; free the others from the barrier
        barrier.abort()
        results.put((index, outcomes, traceback.format_exc()))


def run_racers(slots: list[Slot]) -> dict[int, list[dict[str, Any]]]:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(RACERS)
    results = ctx.Queue()
    procs = [ctx.Process(target=racer, args=(i, slots, barrier, results), name=f"racer-{i}") for i in range(RACERS)]
    reports: dict[int, list[dict[str, Any]]] = {}
    errors: list[str] = []
    try:
        for proc in procs:
            proc.start()
        deadline = time.monotonic() + RACE_TIMEOUT_S
        while len(reports) < RACERS:
            try:
                index, outcomes, error = results.get(timeout=0.5)
            except queue.Empty:
                dead = [p.name for p in procs if p.exitcode not in (None, 0)]
                assert not dead, f"racers died without reporting: {dead}"
                assert time.monotonic() < deadline, f"only {len(reports)} of {RACERS} racers reported in time"
                continue
            reports[index] = outcomes
            if error:
                errors.append(f"racer {index}: {error}")
        for proc in procs:
            proc.join(max(0.1, deadline - time.monotonic()))
    finally:
        for proc in procs:  # whatever happened: no racer outlives the test
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        results.close()
    assert not errors, "\n".join(errors)
    assert [p.exitcode for p in procs] == [0] * RACERS
    return reports


@pytest.fixture
def lock_table(monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh lock table on DynamoDB Local; the environment the racers inherit points at it."""
    endpoint = os.environ.get(ENDPOINT_VARIABLE)
    if not endpoint:
        message = f"{ENDPOINT_VARIABLE} is not set: no DynamoDB Local to race on"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    assert urlparse(endpoint).hostname in LOOPBACK, f"{ENDPOINT_VARIABLE}={endpoint}: only a local emulator is used"
    # Fake credentials and a fixed region (DynamoDB Local keeps data per key and region): nothing reaches AWS.
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    table = f"slot-report-locks-{uuid.uuid4().hex[:12]}"
    create_lock_table(boto3.client("dynamodb"), table)
    monkeypatch.setenv("LOCK_TABLE_NAME", table)
    monkeypatch.setenv("JOB_NAME", JOB)
    monkeypatch.setenv("MAX_SLOT_AGE_S", "1800")
    return table


def recent_slots(count: int) -> list[Slot]:
    """The last ``count`` whole minutes before now, oldest first (within the handler's maximum slot age)."""
    this_minute = Slot(int(time.time()))
    return [Slot(this_minute.epoch_s - 60 * (count - i)) for i in range(count)]


def test_exactly_one_racer_runs_each_slot(lock_table: str) -> None:
    # GIVEN five consecutive slots, and three racer processes invoked for each, released together
    slots = recent_slots(SLOTS)

    # WHEN they race
    reports = run_racers(slots)

    # THEN every racer got an outcome for every slot, in order
    assert sorted(reports) == list(range(RACERS))
    for outcomes in reports.values():
        assert [outcome["slot"] for outcome in outcomes] == [slot.iso for slot in slots]

    # AND per slot exactly one racer ran the report (succeeded, with the report as value); the others lost to it,
    # while it ran (held) or after its commit (slot_finished), without running anything
    winners: dict[str, dict[str, Any]] = {}
    for slot_no, slot in enumerate(slots):
        outcomes = [reports[index][slot_no] for index in range(RACERS)]
        succeeded = [outcome for outcome in outcomes if outcome["status"] == "succeeded"]
        assert len(succeeded) == 1, outcomes
        winner = winners[slot.iso] = succeeded[0]
        assert winner["value"]["slot"] == slot.iso and winner["value"] == winner["details"]
        losers = [outcome for outcome in outcomes if outcome is not winner]
        assert [loser["status"] for loser in losers] == ["lost"] * (RACERS - 1), losers
        assert {loser["reason"] for loser in losers} <= {"held", "slot_finished"}, losers
        assert all(loser["value"] is None and loser["fencing_token"] is None for loser in losers)

    # AND the winners' fencing tokens are 1, 2, 3, ...: one acquisition per slot, losers never take one
    assert [winners[slot.iso]["fencing_token"] for slot in slots] == list(range(1, SLOTS + 1))
    # AND every report after the first knows the previous success
    values = [winners[slot.iso]["value"] for slot in slots]
    assert values[0]["since_previous_success_s"] is None
    assert all(value["since_previous_success_s"] >= 0 for value in values[1:])

    # AND the lock table's history agrees: one SUCCEEDED record per slot, the winner's owner, token and summary
    client = boto3.client("dynamodb")
    lock = SlotLock(lock_table, JOB, client=client)
    for slot in slots:
        item = lock.get_slot(slot)  # strongly consistent
        winner = winners[slot.iso]
        assert item is not None
        assert (item["status"], item["owner_id"], item["fencing_token"], item["summary"]) == (
            "SUCCEEDED",
            winner["owner_id"],
            winner["fencing_token"],
            winner["value"],
        )
    history = list(SlotHistory(lock_table, client=client).records(JOB))  # the history index, newest first
    assert [(record.slot, record.status, record.generation) for record in history] == [
        (slot, "SUCCEEDED", 1) for slot in reversed(slots)
    ]
    record = lock.get_lock()
    assert (record.fencing_token, record.owner_id, record.last_finished_slot) == (SLOTS, None, slots[-1])
