"""``make cost``'s capacity budget (issue 24): its two deployment-wide metrics, the semaphore's requests per slot, and
waiting in place against giving the slot back, each checked against figures computed here from the price table's
fields (never from a price written in this file), and the CLI's ``capacity`` section (JSON and text)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from athena_refresh.cost import Prices, load_prices
from stacks.stack_settings import CapacitySettings
from tests.integration.tools.test_tools_cost import job_inputs, run
from tools.cost import capacity, inputs, monthly, usage
from tools.cost.usage import AlarmCount, Durations, ScheduleRate


@pytest.fixture(scope="module")
def prices() -> Prices:
    return load_prices("us-east-1")


@pytest.fixture(scope="module")
def sample_dir() -> Path:
    return inputs.sample_data_dir()


def gb_s_usd(prices: Prices, gb_s: float) -> float:
    return gb_s * prices.lambda_usd_per_gb_s["arm64"]


def dynamodb_usd(prices: Prices, read_units: float, write_units: float) -> float:
    return (
        read_units / 1e6 * prices.dynamodb_usd_per_million_read_units
        + write_units / 1e6 * prices.dynamodb_usd_per_million_write_units
    )


# --- the semaphore's requests of one slot ------------------------------------------------------------------------
def test_the_semaphore_per_slot_when_no_one_waits() -> None:
    # GIVEN 10 permits: one strongly consistent BatchGetItem of 10 permit items and the tickets item (each under 4 KB:
    # 1 RRU each), one UpdateItem taking a permit (under 1 KB: 1 WRU), one more item in the record_state and in the
    # commit transactions (2 WRU each: a transaction bills twice), nothing per heartbeat
    sem = usage.SemaphoreRequests.of(10)
    assert (sem.read_units, sem.take_write_units, sem.record_write_units, sem.release_write_units) == (11, 1, 2, 2)
    assert sem.write_units == 5 and "per_heartbeat" not in sem.as_dict()["write_units"]
    assert usage.SemaphoreRequests.of(99).read_units == 100  # the semaphore's maximum: one BatchGetItem of 100 keys
    assert usage.semaphore_requests(0) is None  # off: no request at all


def test_the_slot_usage_carries_the_semaphore(prices: Prices) -> None:
    off = job_inputs()
    on = job_inputs(capacity_permits=10)
    (usage_off, writes_off), (usage_on, writes_on) = (
        usage.slot_usage(off, Durations()),
        usage.slot_usage(on, Durations()),
    )
    assert (writes_off.semaphore, usage_off.read_units) == (0, 0)
    assert writes_on.semaphore == 5 and writes_on.total == writes_off.total + 5
    assert usage_on.read_units == 11 and usage_on.write_units == usage_off.write_units + 5
    # a 40 s winner renews its lease twice, never its permit (recorded with an expiry covering the invocation)
    long = usage.winner_writes(
        duration_s=40.0,
        heartbeat_interval_s=15.0,
        result_writes=(),
        summary_bytes=0,
        semaphore=usage.SemaphoreRequests.of(10),
    )
    assert (long.heartbeats, long.semaphore) == (2, 5)
    # per month: 1,461 slots of 11 RRU and 5 WRU more
    more = monthly.estimate_job(on, Durations(), prices).monthly["dynamodb"]
    less = monthly.estimate_job(off, Durations(), prices).monthly["dynamodb"]
    assert more - less == pytest.approx(1461 * dynamodb_usd(prices, 11, 5), abs=2e-6)


# --- the two metrics -----------------------------------------------------------------------------------------------
def test_the_capacity_metrics_are_the_deployments_and_billed_by_the_hours_some_job_fires(prices: Prices) -> None:
    metric = prices.cloudwatch_usd_per_metric_month
    half_hourly = monthly.estimate_job(job_inputs(capacity_permits=10), Durations(), prices)
    daily_rate = ScheduleRate(year=2026, firings=365, active_hours=365, cold_firings=365)
    daily = monthly.estimate_job(job_inputs(capacity_permits=10, schedule=daily_rate), Durations(), prices)

    def line(jobs: list[monthly.JobEstimate], metrics: int = 2) -> float:
        d = monthly.estimate_deployment(
            jobs, dashboards=1, alarms=AlarmCount(), prices=prices, read_api_memory_mb=256, capacity_metrics=metrics
        )
        return d.parts["capacity_metrics"]

    assert line([half_hourly]) == pytest.approx(2 * metric)  # every hour: $0.60
    assert line([half_hourly] * 50) == pytest.approx(2 * metric)  # one series each, however many jobs
    assert line([daily]) == pytest.approx(2 * metric / 24, abs=1e-6)  # 1 hour a day
    assert line([daily, daily]) == pytest.approx(2 * 2 * metric / 24, abs=1e-6)  # at most: their hours may differ
    assert line([half_hourly], metrics=0) == 0.0  # the budget off
    # the line is part of the deployment's total, so of each job's share
    with_budget = monthly.estimate_deployment(
        [half_hourly] * 4,
        dashboards=1,
        alarms=AlarmCount(5, 5),
        prices=prices,
        read_api_memory_mb=256,
        capacity_metrics=2,
    )
    without = monthly.estimate_deployment(
        [half_hourly] * 4, dashboards=1, alarms=AlarmCount(5, 5), prices=prices, read_api_memory_mb=256
    )
    assert with_budget.share_usd - without.share_usd == pytest.approx(2 * metric / 4, abs=1e-6)


# --- waiting -------------------------------------------------------------------------------------------------------
def test_polls_while_waiting_in_place() -> None:
    # sleeps of 0.5, 1, 2, 4, then 5 s, 75% on average: 0.375, 1.125, 2.625, 5.625, then every 3.75 s
    assert [capacity.polls_within(w) for w in (0, 0.37, 0.375, 1.2, 5.7, 9.3)] == [0, 0, 1, 2, 4, 4]
    assert capacity.polls_within(60) == 4 + int((60 - 5.625) // 3.75)  # 18


def test_waiting_in_place_against_giving_back(prices: Prices) -> None:
    job, sem = job_inputs(capacity_permits=10), usage.SemaphoreRequests.of(10)
    # in place for 60 s at 256 MB: 15 GB-s; 18 polls of 11 RRU; 4 lease renewals (15 s) and 2 ticket renewals (30 s)
    waiting = capacity.in_place(60, job, sem, prices)
    assert (waiting.usage.lambda_gb_s, waiting.usage.read_units, waiting.usage.write_units) == (15.0, 18 * 11, 4 + 2)
    assert waiting.usd == pytest.approx(gb_s_usd(prices, 15.0) + dynamodb_usd(prices, 198, 6), abs=1e-8)
    # give back: 1 Scheduler invocation, 1 Lambda request of a loser's 100 ms (warm: back 120 s later), the wait
    # recorded (record_state: 5 WRU), the line left (1), the lease released (1) and taken over (1), the slot item read
    back = capacity.give_back(job, Durations(), prices, retry_delay_s=120)
    assert (back.usage.scheduler_invocations, back.usage.lambda_requests, back.usage.lambda_gb_s) == (1, 1, 0.025)
    assert (back.usage.read_units, back.usage.write_units) == (1, 5 + 1 + 1 + 1)
    expected = (
        prices.scheduler_usd_per_million_invocations / 1e6
        + prices.lambda_usd_per_million_requests / 1e6
        + gb_s_usd(prices, 0.025)
        + dynamodb_usd(prices, 1, 8)
    )
    assert back.usd == pytest.approx(expected, abs=1e-8)
    assert waiting.usd > 30 * back.usd  # a minute in place costs over 30 give-backs
    # back after 15 idle minutes or more: the environment is cold, INIT is billed too
    cold = capacity.give_back(job, Durations(cold_start_ms=700), prices, retry_delay_s=900)
    assert cold.usage.lambda_gb_s == pytest.approx(0.25 * 0.8)
    # break-even: the wait in place that costs a give-back
    even = capacity.break_even_s(job, sem, prices, back.usd)
    assert even is not None and 0.5 < even < 5
    assert (
        capacity.in_place(even, job, sem, prices).usd >= back.usd > capacity.in_place(even - 0.01, job, sem, prices).usd
    )
    # a larger function pays more per second in place: the break-even comes sooner
    big = replace(job, memory_mb=2048)
    big_back = capacity.give_back(big, Durations(), prices, retry_delay_s=120)
    big_even = capacity.break_even_s(big, sem, prices, big_back.usd)
    assert big_even is not None and big_even < even


def test_the_capacity_estimate_off_and_on(prices: Prices) -> None:
    job = job_inputs(capacity_permits=10)
    off = capacity.estimate_capacity(
        CapacitySettings(permits=0), [job], Durations(), prices, deployment_parts={}, metric_hours_share=0.0
    )
    assert not off.enabled and off.jobs == () and off.as_dict()["semaphore_per_slot"] is None
    on = capacity.estimate_capacity(
        CapacitySettings(permits=10, wait_in_place_s=60, retry_delay_s=120),
        [job],
        Durations(),
        prices,
        deployment_parts={"capacity_metrics": 0.6},
        metric_hours_share=1.0,
        p95_wait_s=12.5,
        p95_source="capacity-report.json",
    )
    document = on.as_dict()
    assert document["metrics"] == {
        "names": ["PermitsInUse", "PermitWaitMs"],
        "hours_share": 1.0,
        "monthly_usd": 0.6,
        "deployment_line": "capacity_metrics",
    }
    assert document["semaphore_per_slot"]["usd"] == pytest.approx(dynamodb_usd(prices, 11, 5))
    waits = document["waiting"]["j"]["waits"]
    assert [(w["wait_s"], w["cheaper"]) for w in waits] == [(60.0, "give_back"), (12.5, "give_back")]
    assert waits[1]["origin"] == "wait_s.p95 of capacity-report.json"
    assert waits[1]["in_place_usd"] == capacity.in_place(12.5, job, usage.SemaphoreRequests.of(10), prices).usd


# --- the CLI -------------------------------------------------------------------------------------------------------
def test_the_json_and_the_text_carry_the_capacity_section(tmp_path: Path, sample_dir: Path) -> None:
    report = tmp_path / "capacity-report.json"
    report.write_text(json.dumps({"wait_s": {"p50": 1.0, "p95": 42.0}}), encoding="utf-8")
    status, out, err = run(["--format", "json", "--capacity-report", str(report)], sample_dir)
    assert status == 0, err
    document = json.loads(out)
    section, budget = document["capacity"], inputs.load_capacity()
    assert (section["enabled"], section["permits"], section["wait_in_place_s"]) == (True, 10, budget.wait_in_place_s)
    assert section["p95_wait_s"] == 42.0 and section["metrics"]["monthly_usd"] > 0
    assert document["deployment"]["monthly_usd"]["capacity_metrics"] == section["metrics"]["monthly_usd"]
    for job in document["jobs"]:
        waits = section["waiting"][job["job"]]["waits"]
        assert [w["wait_s"] for w in waits] == [60.0, 42.0]
        assert job["dynamodb_winner_read_units"] == 11 and job["dynamodb_winner_write_units"]["semaphore"] == 5
    # without a report: only the configured wait
    status, out, _ = run(["--capacity-report", str(tmp_path / "absent.json")], sample_dir)
    assert status == 0
    for text in ("Capacity budget", "PermitsInUse and PermitWaitMs", "break-even", "give back", "no capacity-report"):
        assert text in out, text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not a readable JSON document"),
        ('{"wait_s": {"p95": -1}}', "wait_s.p95 must be a number of seconds >= 0"),
        ('{"wait_s": {"p95": "12"}}', "wait_s.p95 must be a number of seconds >= 0"),
    ],
)
def test_a_bad_capacity_report_is_one_line_and_exit_2(
    tmp_path: Path, sample_dir: Path, content: str, message: str
) -> None:
    report = tmp_path / "capacity-report.json"
    report.write_text(content, encoding="utf-8")
    status, out, err = run(["--capacity-report", str(report)], sample_dir)
    assert (status, out) == (2, "") and err.startswith("error: ") and message in err and err.count("\n") == 1


def test_a_capacity_report_without_the_p95_is_not_required(tmp_path: Path) -> None:
    report = tmp_path / "capacity-report.json"
    report.write_text(json.dumps({"wait_s": {"p50": 3}}), encoding="utf-8")
    assert inputs.capacity_p95_wait_s(report) is None
    report.write_text(json.dumps([1, 2]), encoding="utf-8")
    assert inputs.capacity_p95_wait_s(report) is None
    assert inputs.capacity_p95_wait_s(tmp_path / "absent.json") is None
