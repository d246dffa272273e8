"""The freshness watchdog on AWS's own DynamoDB Local with a fake clock (issue 35's Done-when).

Four half-hourly jobs run their real slots through ``slotlock`` (``SlotRunner``: acquisitions, commits, a FAILED
record, the pause and its MISSED ``paused`` records) while the watchdog's real handler (``make_handler``, under its
own once-per-slot lock) runs every watchdog period (15 minutes: half the shortest job period). A job whose schedule
stops, a job whose slots fail and a paused job are each reported within one watchdog period after their grace,
named in exactly one notification per change of state; ``JobsLate + JobsFailing`` crosses the alarm's threshold (1)
and returns to 0 once the jobs recover; the heartbeat ``WatchdogRuns`` is 1 per watchdog slot, whichever racer wins.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from athena_refresh import contract
from athena_refresh.freshness import JobWatch
from athena_refresh.watchdog import WATCH_ITEM_TTL_S, WatchdogDeps, watch_key
from athena_refresh.watchdog_handler import LEASE_DURATION_S, make_handler
from slotlock import Slot, SlotLock, SlotRunner, create_lock_table, pause, resume

pytestmark = pytest.mark.usefixtures("quiet_powertools")

PERIOD_S = 1800
GRACE_S = 2100  # the derived default of a half-hourly job: max_slot_age_s 1800 + lambda_timeout_s 300
WATCHDOG_PERIOD_S = 900
START = int(dt.datetime(2026, 12, 1, 0, 0, tzinfo=dt.UTC).timestamp())
JOBS = ("steady", "stopping", "failing", "pausing")
THRESHOLD = 1  # the JobsLateOrFailing alarm's (stacks/constructs/watchdog.py; pinned by tests/stacks/test_watchdog.py)


@pytest.fixture
def quiet_powertools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", contract.METRICS_NAMESPACE)


@dataclass
class Context:
    aws_request_id: str
    function_name: str = "watchdog"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:watchdog"

    def get_remaining_time_in_millis(self) -> int:
        return 120_000


@dataclass
class World:
    """The lock table on DynamoDB Local, a fake clock (epoch ms), the jobs' locks and the watchdog's handler."""

    client: Any
    table: str
    now_ms: int = START * 1000
    published: list[dict[str, str]] = field(default_factory=list)
    emitted: list[tuple[str, float]] = field(default_factory=list)
    publish_fails: int = 0

    def clock(self) -> int:
        return self.now_ms

    def lock(self, job: str, **kwargs: Any) -> SlotLock:
        return SlotLock(self.table, job, client=self.client, clock_ms=self.clock, max_slot_age_s=1800, **kwargs)

    def publish(self, **message: str) -> dict[str, str]:
        if self.publish_fails:
            self.publish_fails -= 1
            raise ConnectionError("SNS unreachable")
        self.published.append(message)
        return {"MessageId": str(len(self.published))}

    def emit(self, name: str, unit: str, value: float) -> None:
        self.emitted.append((name, value))

    def handler(self, names: tuple[str, ...] = JOBS) -> Any:
        jobs = [JobWatch(job, "cron(0/30 * * * ? *)", "UTC", grace_s=GRACE_S, max_slot_age_s=1800) for job in names]
        deps = WatchdogDeps(
            dynamodb=self.client,
            table=self.table,
            publish=self.publish,
            topic_arn="arn:aws:sns:us-east-1:123456789012:alarms",
            jobs=jobs,
            emit=self.emit,
            clock_ms=self.clock,
            stack="Test",
            sleep_s=lambda _: None,
        )
        lock = self.lock(contract.WATCHDOG_JOB_NAME, lease_duration_s=LEASE_DURATION_S)
        return make_handler(lambda: (lock, deps))


@pytest.fixture
def world(dynamodb_local: Any) -> Iterator[World]:
    client = boto3.client("dynamodb", endpoint_url=dynamodb_local.endpoint_url, region_name="us-east-1")
    table = f"watchdog-{uuid.uuid4().hex[:8]}"
    create_lock_table(client, table, enable_ttl=False)  # the fake clock is in the past: TTL must not delete
    yield World(client, table)
    client.delete_table(TableName=table)


def run_slot(world: World, job: str, slot: int, *, fail: bool = False) -> str:
    runner = SlotRunner(world.lock(job))

    def work(run: Any) -> Any:
        if fail:
            return run.fail({"error_message": "COLUMN_NOT_FOUND: line 1:8: Column 'dst' cannot be resolved"})
        return {"rows": 1}

    return runner.run(work, slot=Slot(slot), owner_id=f"{job}-{slot}-{uuid.uuid4().hex[:6]}").status


def notified_jobs(message: dict[str, str]) -> dict[str, str]:
    """job -> new state, from a notification's lines ``<job>: <old> -> <NEW STATE>``."""
    return {m[1]: m[2].lower() for m in re.finditer(r"^(\S+): [a-z ]+ -> ([A-Z ]+)$", message["Message"], re.MULTILINE)}


def test_late_failing_and_paused_jobs_are_named_once_per_change_within_one_watchdog_period(world: World) -> None:
    handler = world.handler()
    stops_after = START + 4 * PERIOD_S  # stopping: its last slot; failing: fails from here on; pausing: paused here
    recovers_at = START + 10 * PERIOD_S
    end = START + 14 * PERIOD_S
    reported: dict[tuple[str, str], int] = {}  # (job, state) -> watchdog run time (epoch s) that first named it
    sums: list[tuple[int, float, float | None]] = []
    pausing = world.lock("pausing")
    t = START
    while t <= end:  # every 15 minutes of fake time; the jobs fire on the half hour, 2 s after their slot
        world.now_ms = t * 1000 + 2_000
        if t % PERIOD_S == 0:
            for job in JOBS:
                if job == "stopping" and stops_after < t < recovers_at:
                    continue  # its schedules are gone: nothing runs
                if job == "pausing" and t == stops_after:
                    pause(pausing, reason="maintenance", requested_by="test")
                if job == "pausing" and t == recovers_at:
                    resume(pausing, requested_by="test")
                status = run_slot(world, job, t, fail=job == "failing" and stops_after <= t < recovers_at)
                assert status in ("succeeded", "failed", "missed", "lost"), (job, t, status)
        # The watchdog's two racers of its slot t: one wins, the other finds the slot taken or finished.
        world.now_ms = t * 1000 + 30_000
        before, emitted_before = len(world.published), len(world.emitted)
        event = {"scheduled_time": Slot(t).iso, "racer": 0, "job": contract.WATCHDOG_JOB_NAME}
        outcomes = [handler(dict(event, racer=r), Context(f"wd-{t}-{r}"))["status"] for r in range(2)]
        assert sorted(outcomes) == ["lost", "succeeded"], outcomes
        for message in world.published[before:]:
            for job, state in notified_jobs(message).items():
                reported.setdefault((job, state), t)
        run = dict(world.emitted[emitted_before:])
        lateness = run.get(contract.METRIC_OLDEST_LATENESS_S)
        sums.append((t, run[contract.METRIC_JOBS_LATE] + run[contract.METRIC_JOBS_FAILING], lateness))
        t += WATCHDOG_PERIOD_S

    # The stopping job's first unrun firing is stops_after + 30 min: late at + GRACE_S, named within one period.
    due = stops_after + PERIOD_S + GRACE_S
    assert due <= reported[("stopping", "late")] < due + WATCHDOG_PERIOD_S
    # The failing job's first FAILED slot is recorded at stops_after: named at the next run (before its grace).
    assert stops_after <= reported[("failing", "failing")] < stops_after + WATCHDOG_PERIOD_S
    assert stops_after <= reported[("pausing", "paused")] < stops_after + WATCHDOG_PERIOD_S
    # Each recovered at recovers_at and was named so once.
    for job in ("stopping", "failing", "pausing"):
        assert recovers_at <= reported[(job, "on time")] < recovers_at + WATCHDOG_PERIOD_S, job
    assert not any(job == "steady" for job, _ in reported)

    # One notification per change of state: each (job, state) once, across every message.
    mentions: dict[tuple[str, str], int] = {}
    for message in world.published:
        for job, state in notified_jobs(message).items():
            mentions[(job, state)] = mentions.get((job, state), 0) + 1
    assert mentions == {
        ("stopping", "late"): 1,
        ("failing", "failing"): 1,
        ("pausing", "paused"): 1,
        ("stopping", "on time"): 1,
        ("failing", "on time"): 1,
        ("pausing", "on time"): 1,
    }
    # Readable in an email: the reason, the last success and the command to look closer.
    late = next(m["Message"] for m in world.published if ("stopping", "late") in notified_jobs(m).items())
    assert "last success:  slot 2026-12-01T02:00:00Z" in late
    assert "athena-once ops --stack Test history --job stopping" in late
    failing = next(m["Message"] for m in world.published if ("failing", "failing") in notified_jobs(m).items())
    assert "COLUMN_NOT_FOUND" in failing

    # The alarm's expression crosses its threshold and returns; the heartbeat is one per watchdog slot.
    values = [value for _, value, _ in sums]
    assert values[0] == 0 and max(values) >= THRESHOLD and values[-1] == 0
    first_alarm = next(t for t, value, _ in sums if value >= THRESHOLD)
    assert first_alarm == reported[("failing", "failing")]
    # OldestLatenessS is sent only by the runs that find a job late or failing (billed only in those hours).
    assert [lateness is not None for _, _, lateness in sums] == [value >= THRESHOLD for _, value, _ in sums]
    assert max(lateness or 0 for _, _, lateness in sums) > 0 and sums[-1][2] is None
    runs = [value for name, value in world.emitted if name == contract.METRIC_WATCHDOG_RUNS]
    assert runs == [1.0] * len(sums)


def test_a_notification_lost_before_publish_is_sent_by_the_next_run(world: World) -> None:
    handler = world.handler()
    world.now_ms = (START + 2) * 1000
    run_slot(world, "steady", START, fail=True)
    world.now_ms = (START + 30) * 1000
    world.publish_fails = 1
    with pytest.raises(ConnectionError):
        handler({"scheduled_time": Slot(START).iso}, Context("wd-1"))
    item = world.client.get_item(TableName=world.table, Key={"pk": {"S": watch_key("steady")}}, ConsistentRead=True)
    assert item["Item"]["state"] == {"S": "failing"} and item["Item"]["published"] == {"BOOL": False}
    assert world.published == []
    # The next slot's run publishes what the write recorded (at least once), then marks it published.
    world.now_ms = (START + WATCHDOG_PERIOD_S + 30) * 1000
    outcome = handler({"scheduled_time": Slot(START + WATCHDOG_PERIOD_S).iso}, Context("wd-2"))
    assert outcome["status"] == "succeeded"
    assert [notified_jobs(m) for m in world.published] == [{"steady": "failing"}]
    item = world.client.get_item(TableName=world.table, Key={"pk": {"S": watch_key("steady")}}, ConsistentRead=True)
    assert item["Item"]["published"] == {"BOOL": True}
    # A third run with nothing new publishes nothing.
    world.now_ms = (START + 2 * WATCHDOG_PERIOD_S + 30) * 1000
    handler({"scheduled_time": Slot(START + 2 * WATCHDOG_PERIOD_S).iso}, Context("wd-3"))
    assert len(world.published) == 1


def test_state_items_expire_unless_their_job_is_still_watched(world: World) -> None:
    """A job removed from the catalog leaves a ``watchdog#<job>`` item no run reads again: its TTL (the lock table's
    ``ttl_epoch_s``, set by every write) lets DynamoDB delete it. A job still watched has its TTL pushed back once
    less than half of it is left (or the item has none: written before the TTL), never on every run."""
    updates: list[str] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        updates.append(params["Key"]["pk"]["S"])

    world.client.meta.events.register("provide-client-params.dynamodb.UpdateItem", record)

    def state_item(job: str) -> dict[str, Any]:
        key = {"pk": {"S": watch_key(job)}}
        return dict(world.client.get_item(TableName=world.table, Key=key, ConsistentRead=True)["Item"])

    def run_watchdog(at_s: int, names: tuple[str, ...]) -> None:
        world.now_ms = at_s * 1000
        slot = Slot(at_s - at_s % WATCHDOG_PERIOD_S)
        handler = world.handler(names)
        assert handler({"scheduled_time": slot.iso}, Context(f"wd-{at_s}"))["status"] == "succeeded"

    # GIVEN paused jobs (a state that lasts without a slot), the first run records each (first sight), each item
    # expiring WATCH_ITEM_TTL_S after the write
    world.now_ms = START * 1000
    for job in JOBS:
        pause(world.lock(job), reason="maintenance", requested_by="test")
    run_watchdog(START + 30, JOBS)
    assert {state_item(job)["state"]["S"] for job in JOBS} == {"paused"}
    assert {state_item(job)["ttl_epoch_s"]["N"] for job in JOBS} == {str(START + 30 + WATCH_ITEM_TTL_S)}
    # WHEN "stopping" is removed from the catalog and the watchdog runs on, for less than half the lifetime
    kept = tuple(job for job in JOBS if job != "stopping")
    updates.clear()
    run_watchdog(START + WATCH_ITEM_TTL_S // 2 - WATCHDOG_PERIOD_S, kept)
    # THEN no run writes a state item that did not change (only the watchdog's own lock item is updated)
    assert [key for key in updates if key.startswith("watchdog#")] == []
    # AND past half the lifetime, each watched job's item is pushed back once; the removed job's is never touched
    later = START + WATCH_ITEM_TTL_S // 2 + WATCHDOG_PERIOD_S + 30
    run_watchdog(later, kept)
    run_watchdog(later + WATCHDOG_PERIOD_S, kept)
    assert sorted(key for key in updates if key.startswith("watchdog#")) == sorted(watch_key(job) for job in kept)
    assert {state_item(job)["ttl_epoch_s"]["N"] for job in kept} == {str(later + WATCH_ITEM_TTL_S)}
    assert state_item("stopping")["ttl_epoch_s"]["N"] == str(START + 30 + WATCH_ITEM_TTL_S)  # DynamoDB deletes it
    # AND an item written before the TTL (none) gets one at the next run, its state and first sight kept
    world.client.update_item(
        TableName=world.table, Key={"pk": {"S": watch_key("steady")}}, UpdateExpression="REMOVE ttl_epoch_s"
    )
    before = state_item("steady")
    run_watchdog(later + 2 * WATCHDOG_PERIOD_S, kept)
    after = state_item("steady")
    assert after.pop("ttl_epoch_s") == {"N": str(later + 2 * WATCHDOG_PERIOD_S + WATCH_ITEM_TTL_S)}
    assert after == before
