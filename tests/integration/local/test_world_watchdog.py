"""The freshness watchdog in the local world (``make serve``): two hours of schedules on the world's clock.

Four copies of the half-hourly sample job (``steady``, ``stopping``, ``failing``, ``pausing``) run on the world's
functions (the real handler in execution environments of their own, DuckDB for Athena), fired by the world's live
schedule; the watchdog is the deployed handler on its own schedule (every 15 minutes: half the shortest job period),
notifying the world's SNS topic (read back from the SQS queue subscribed to it) and sending its metrics to the moto
server's CloudWatch. The world's clock moves five minutes at a time and each step waits until nothing due is left.

After the first slot: ``stopping``'s schedule is disabled (as a deleted schedule), ``failing``'s firings are
delivered 2,000 s late (a throttled function: past its max slot age, so each slot ends MISSED ``too_old``),
``pausing`` is paused with ``athena-once ops --local pause``. Each is named within one watchdog period after its
grace (or after its failure or pause), in exactly one notification per change of state; after recovery each is named
on time once; ``JobsLate + JobsFailing`` crosses the alarm's threshold and returns to 0; ``WatchdogRuns`` is 1 per
watchdog slot, whichever of its two racers wins. (FAILED slots: the DynamoDB Local test,
``tests/integration/athena_refresh/test_watchdog.py``.)
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from athena_refresh import contract
from athena_refresh.watchdog import job_watches
from local.emulators.deployment import REGION
from local.serve.store import store_catalog
from local.serve.world import WORKDIR_ENV, WORLD_FILE, LocalWorld
from local.serve.world_watchdog import FUNCTION_NAME
from stacks.jobs import load_job
from tests.integration.local.conftest import CREDENTIALS, seed_store
from tests.sample_jobs import FIXTURE_JOBS_DIR, FLIGHTS, stack_settings
from tools.cli import main as athena_once

pytestmark = pytest.mark.slow

JOBS = ("failing", "pausing", "steady", "stopping")
PERIOD_S = 1800
STEP_S = 300
WATCHDOG_PERIOD_S = 900  # contract.watchdog_period_s of half-hourly jobs (checked below)
LATE_DELIVERY_S = 2000  # past the sample's max_slot_age_s (1800): each slot is recorded MISSED too_old
THRESHOLD = 1  # the JobsLateOrFailing alarm's (stacks/constructs/watchdog.py; pinned by tests/stacks/test_watchdog.py)
STEP_WAIT_S = 240.0


def notified_jobs(message: str) -> dict[str, str]:
    """job -> new state, from a notification's lines ``<job>: <old> -> <NEW STATE>``."""
    return {m[1]: m[2].lower() for m in re.finditer(r"^(\S+): [a-z ]+ -> ([A-Z ]+)$", message, re.MULTILINE)}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workdir whose ``jobs/`` holds the four copies (two racers each) and whose store holds their catalog."""
    root = tmp_path_factory.mktemp("watchworld")
    jobs_dir = root / "jobs"
    for name in JOBS:
        shutil.copytree(FIXTURE_JOBS_DIR / FLIGHTS, jobs_dir / name)
        toml = jobs_dir / name / "job.toml"
        toml.write_text(re.sub(r"(?m)^racers = \d+$", "racers = 2", toml.read_text()))
    settings = stack_settings()
    return seed_store(root, [load_job(jobs_dir / name, settings, root=root) for name in JOBS])


@pytest.fixture
def world(workdir: Path, no_aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalWorld]:
    monkeypatch.setenv(WORKDIR_ENV, str(workdir))
    start_s = (int(time.time()) // PERIOD_S + 2) * PERIOD_S  # a half hour ahead: every item's TTL in the future
    world = LocalWorld(
        workdir, port=0, jobs_dir=workdir / "jobs", live=True, log=lambda line: None, start_at_ms=(start_s - 60) * 1000
    )
    with world:
        yield world
    assert not (workdir / WORLD_FILE).exists()


def cli(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    capsys.readouterr()
    status = athena_once(list(words))
    text = "".join(capsys.readouterr())
    assert status == 0, text
    return text


def metric_per_slot(cloudwatch: Any, name: str, slots: list[int], statistic: str) -> dict[int, float]:
    """The metric's statistic over each watchdog period (its slot, epoch s -> value; absent: no datum), from the moto
    server's CloudWatch, one request a period (moto starts its periods at the first datum, CloudWatch at StartTime)."""
    values = {}
    for slot in slots:
        response = cloudwatch.get_metric_statistics(
            Namespace=contract.METRICS_NAMESPACE,
            MetricName=name,
            Dimensions=[{"Name": contract.DIMENSION_SERVICE, "Value": contract.SERVICE_NAME}],
            StartTime=dt.datetime.fromtimestamp(slot, dt.UTC),
            EndTime=dt.datetime.fromtimestamp(slot + WATCHDOG_PERIOD_S, dt.UTC),
            Period=WATCHDOG_PERIOD_S,
            Statistics=[statistic],
        )
        points = response["Datapoints"]
        assert len(points) <= 1, points
        if points:
            values[slot] = points[0][statistic]
    return values


def test_late_failing_and_paused_jobs_are_named_once_per_change_on_the_local_world(
    world: LocalWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    host = world.functions
    watchdog = host.functions[FUNCTION_NAME]
    assert watchdog.schedule_expression == f"cron(0/{WATCHDOG_PERIOD_S // 60} * * * ? *)"
    assert watchdog.racers == contract.WATCHDOG_RACERS == 2
    (grace_s,) = {w.grace_s for w in job_watches(store_catalog(world.manifest))}  # the declared default: 2100
    start_s = world.start_at_ms // 1000 + 60
    sqs = boto3.client("sqs", endpoint_url=world.moto_endpoint, region_name=REGION, **CREDENTIALS)
    cloudwatch = boto3.client("cloudwatch", endpoint_url=world.moto_endpoint, region_name=REGION, **CREDENTIALS)
    world_file = json.loads((world.workdir / WORLD_FILE).read_text())
    assert world_file["notifications_queue_url"] == world.watchdog.queue_url
    assert world_file["clock_file"] == str(world.clock.path)
    (banner,) = [line for line in world.extra_lines() if "the freshness watchdog" in line]
    assert "cron(0/15 * * * ? *)" in banner and world.watchdog.topic_arn in banner, banner

    recover_s = start_s + 85 * 60
    end_s = start_s + 125 * 60
    reported: dict[tuple[str, str], int] = {}  # (job, state) -> the watchdog slot (epoch s) that named it
    mentions: dict[tuple[str, str], int] = {}
    messages: list[str] = []
    t = start_s + 5
    while t <= end_s:
        world.clock.advance_to(t * 1000)
        host.wait_idle(STEP_WAIT_S)
        if t == start_s + 5:  # after the first slot: the schedule stops, the deliveries lag, the job is paused
            host.disable_schedule("stopping")
            host.delivery_delay_s[host.function_of("failing")] = LATE_DELIVERY_S
            cli(capsys, "ops", "--local", "pause", "-s", "pausing", "--reason", "maintenance", "--yes")
        if t - 5 == recover_s - STEP_S:  # the read API says freshness at the world's time too
            for job, late in (("stopping", True), ("steady", False)):
                url = f"{world.base_url}/jobs/{job}/results/latest"
                with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=30) as response:
                    assert json.loads(response.read())["freshness"]["late"] is late, job
                text = cli(capsys, "results", "--local", "latest", "-s", job, "--format", "json")
                assert json.loads(text)["freshness"]["late"] is late, (job, text)
        if t - 5 == recover_s:
            host.enable_schedule("stopping")
            host.delivery_delay_s[host.function_of("failing")] = 0
            cli(capsys, "ops", "--local", "resume", "-s", "pausing", "--yes")
        received = sqs.receive_message(QueueUrl=world.watchdog.queue_url, MaxNumberOfMessages=10)
        for message in received.get("Messages", []):
            sqs.delete_message(QueueUrl=world.watchdog.queue_url, ReceiptHandle=message["ReceiptHandle"])
            messages.append(message["Body"])
            for job, state in notified_jobs(message["Body"]).items():
                reported.setdefault((job, state), t // WATCHDOG_PERIOD_S * WATCHDOG_PERIOD_S)
                mentions[(job, state)] = mentions.get((job, state), 0) + 1
        t += STEP_S
    assert len(messages) == len(world.watchdog.notifications)  # every notification delivered through the topic

    # The stopping job's first unrun firing (start + 30 min): late at + grace, named within one watchdog period.
    due_s = start_s + PERIOD_S + grace_s
    assert due_s <= reported[("stopping", "late")] < due_s + WATCHDOG_PERIOD_S, (reported, due_s)
    # The failing job's first slot recorded MISSED too_old (delivered at start + 30 min + 2,000 s): the next run.
    missed_s = start_s + PERIOD_S + LATE_DELIVERY_S
    assert missed_s <= reported[("failing", "failing")] < missed_s + WATCHDOG_PERIOD_S, (reported, missed_s)
    assert start_s <= reported[("pausing", "paused")] < start_s + 5 + WATCHDOG_PERIOD_S, reported
    for job in ("stopping", "failing", "pausing"):  # recovered: each named on time, once
        assert recover_s <= reported[(job, "on time")] <= recover_s + PERIOD_S, (job, reported)
    assert mentions == {(job, state): 1 for job, state in reported} and len(reported) == 6, mentions
    assert not any(job == "steady" for job, _ in reported)
    failing = next(m for m in messages if notified_jobs(m).get("failing") == "failing")
    assert "too_old" in failing and "athena-once ops --stack ScheduledAthenaRefresh history --job failing" in failing

    # The alarm's expression crosses its threshold and returns; the heartbeat is one per watchdog slot.
    slots = list(range(start_s, end_s, WATCHDOG_PERIOD_S))
    assert len(slots) == 9
    late = metric_per_slot(cloudwatch, contract.METRIC_JOBS_LATE, slots, "Maximum")
    failing_counts = metric_per_slot(cloudwatch, contract.METRIC_JOBS_FAILING, slots, "Maximum")
    assert set(late) == set(failing_counts) == set(slots)
    sums = [late[s] + failing_counts[s] for s in slots]
    assert sums[0] == 0 and max(sums) >= THRESHOLD and sums[-1] == 0, sums
    assert next(s for s, value in zip(slots, sums, strict=True) if value >= THRESHOLD) == reported[("stopping", "late")]
    runs = metric_per_slot(cloudwatch, contract.METRIC_WATCHDOG_RUNS, slots, "Sum")
    assert runs == {s: 1.0 for s in slots}, runs
    winners = [run for run in world.watchdog.runs if run["status"] == "succeeded"]
    assert len(winners) == len(slots) and len(world.watchdog.runs) == 2 * len(slots)

    # AND the world's clock from the command line: printed, moved forward, never back
    before_ms = world.clock.now_ms()
    assert "the world's time: " in cli(capsys, "local", "clock")
    text = cli(capsys, "local", "clock", "--advance-s", "60")
    assert world.clock.now_ms() - before_ms >= 60_000 and "s from the wall clock" in text, text
    assert athena_once(["local", "clock", "--advance-s", "-1"]) == 2  # a usage error
    assert "only moves forward" in capsys.readouterr().err
