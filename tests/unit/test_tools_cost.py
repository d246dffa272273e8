"""``python -m tools.cost`` (``make cost``): the monthly model checked against hand-computed figures, the alarms
counted in the real synthesized template (one synthesis per session), the JSON's totals, and bad input.

Prices come from the real table (``athena_refresh.cost.load_prices``); the expected figures are computed here from
its fields, never from a price written in this file.
"""

from __future__ import annotations

import io
import json
import math
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from athena_refresh import contract
from athena_refresh.cost import (
    MB,
    InvocationCost,
    Prices,
    athena_billed_bytes,
    estimate_slot_cost,
    load_prices,
)
from slotlock.capacity import CapacitySnapshot
from stacks.jobs import logical_id_prefix
from tests.sample_jobs import CARRIERS, FIXTURE_JOBS_DIR, FLIGHTS, stage_jobs
from tools.cost import inputs, monthly, usage
from tools.cost.cli import main, parse_scan_bytes
from tools.cost.inputs import CostInputError, Synthesis
from tools.cost.usage import AlarmCount, Durations, JobInputs, Scan, ScheduleRate


@pytest.fixture(scope="module")
def prices() -> Prices:
    return load_prices("us-east-1")


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    return inputs.sample_data_dir()


@pytest.fixture(scope="session")
def sample_jobs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A jobs/ of the two sample jobs (tests/fixtures/jobs): the figures below are theirs, whatever jobs/ holds."""
    return stage_jobs(tmp_path_factory.mktemp("repo"))


@pytest.fixture(scope="session")
def sample_jobs(sample_jobs_dir: Path) -> dict[str, Any]:
    return {job.job_name: job for job in inputs.load_definitions(sample_jobs_dir)}


@pytest.fixture(scope="session")
def synthesis(sample_jobs_dir: Path) -> Synthesis:
    """The real app synthesized once (cdk.json, the sample jobs): only this file uses it."""
    return inputs.synthesize(sample_jobs_dir)


def fake_synthesis(job_names: list[str]) -> Synthesis:
    """Per job: one plain alarm and one metric math alarm over two metrics; one shared alarm; one dashboard."""
    resources: dict[str, Any] = {"Dash": {"Type": inputs.DASHBOARD_TYPE}, "Shared": {"Type": inputs.ALARM_TYPE}}
    ids = {}
    for n, name in enumerate(job_names):
        plain, math_alarm = f"J{n}Plain", f"J{n}Math"
        resources[plain] = {"Type": inputs.ALARM_TYPE, "Properties": {"MetricName": "RunFailed", "Period": 1800}}
        metrics = [{"Id": "e", "Expression": "a + b"}, *({"Id": i, "MetricStat": {"Period": 1800}} for i in "ab")]
        resources[math_alarm] = {"Type": inputs.ALARM_TYPE, "Properties": {"Metrics": metrics}}
        ids[name] = frozenset({plain, math_alarm})
    return Synthesis(resources, ids, read_api_memory_mb=256)


def run(argv: list[str], sample_dir: Path, synthesis: Synthesis | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()

    def synthesize(jobs_dir: Path) -> Synthesis:
        if synthesis is not None:
            return synthesis
        return fake_synthesis([job.job_name for job in inputs.load_definitions(jobs_dir)])

    status = main(argv, stdout=out, stderr=err, env={}, synthesize=synthesize, data_dir=lambda: sample_dir)
    return status, out.getvalue(), err.getvalue()


def job_inputs(**changes: Any) -> JobInputs:
    """A job of 3 racers on a cold half-hourly schedule, 10 MB scanned, small result writes."""
    base = JobInputs(
        name="j",
        racers=3,
        memory_mb=256,
        heartbeat_interval_s=15.0,
        schedule=ScheduleRate(year=2026, firings=17_520, active_hours=8_760, cold_firings=17_520),
        scan=Scan(10 * MB, "assumed"),
        result_writes=(usage.sized_put(500), usage.sized_put(500)),
        summary_bytes=300,
        alarms=AlarmCount(alarms=10, alarm_metrics=13),
    )
    return replace(base, **changes)


# --- the schedule ---------------------------------------------------------------------------------------------
def test_half_hourly_utc_is_48_a_day_times_30_4375_days() -> None:
    rate = usage.schedule_rate("cron(0/30 * * * ? *)", "UTC")
    assert rate.year == 2026 and rate.firings == 48 * 365
    assert rate.slots_per_month == pytest.approx(48 * 30.4375) == 1461
    assert rate.metric_month_fraction == pytest.approx(1.0)  # every hour has a firing
    assert rate.cold_fraction == 1.0  # 30 min apart: over the 15 min idle threshold


def test_daily_new_york_fires_once_a_day_across_both_offset_changes() -> None:
    rate = usage.schedule_rate("cron(15 6 * * ? *)", "America/New_York")
    assert rate.firings == 365 and rate.active_hours == 365
    assert rate.slots_per_month == pytest.approx(30.4375)
    assert rate.metric_month_fraction == pytest.approx(30.4375 / 730.5)  # one hour a day: 1/24
    # 02:30 does not exist on the spring-forward day (2026-03-08): EventBridge skips it.
    assert usage.schedule_rate("cron(30 2 * * ? *)", "America/New_York").firings == 364


def test_frequent_schedules_are_warm() -> None:
    rate = usage.schedule_rate("cron(0/5 * * * ? *)", "UTC")
    assert rate.cold_fraction == 0.0 and rate.slots_per_month == pytest.approx(12 * 24 * 30.4375)
    # Business hours, weekdays: only the first firing of each working day follows a long gap.
    office = usage.schedule_rate("cron(0/10 9-16 ? * MON-FRI *)", "UTC")
    assert office.cold_firings == office.firings / 48 == 261


# --- one slot ---------------------------------------------------------------------------------------------------
def test_slot_usage_is_the_protocols_requests_and_the_assumed_durations(prices: Prices) -> None:
    job = job_inputs()
    usage_, writes = usage.slot_usage(job, Durations())
    # Winner: acquire 1 WRU (lock item < 1 KB), record_state 2 x (1 + 1) + the history index's copy of the slot
    # item (1), no heartbeat in 3 s, the commit: result and LATEST (500 B + 768 B cost: 2 KB -> 2 x 2 each), slot
    # item (300 + 768 + 400 B: 2 x 2) and its history index copy (2), lock (2 x 1).
    assert (writes.acquire, writes.record_state, writes.heartbeats, writes.commit) == (1, 5, 0, 4 + 4 + 4 + 2 + 2)
    assert usage_.write_units == 1 + 5 + 16 and usage_.loser_write_units == 1 and usage_.read_units == 0
    assert usage_.winner_billed_ms == 3000 + 700 and usage_.loser_billed_ms == 100 + 700  # every slot cold
    assert (usage_.racers, usage_.memory_mb, usage_.architecture) == (3, 256, contract.LAMBDA_ARCHITECTURE)
    assert usage_.data_scanned_bytes == (10 * MB,) and usage_.s3_put_requests == 0
    warm = usage.slot_usage(replace(job, schedule=replace(job.schedule, cold_firings=0)), Durations(4.0, 50.0, 900))
    assert (warm[0].winner_billed_ms, warm[0].loser_billed_ms) == (4000, 50)
    estimate = monthly.estimate_job(job, Durations(), prices)
    assert estimate.per_slot == estimate_slot_cost(usage_, prices)
    for service in ("athena", "lambda", "dynamodb", "scheduler", "s3"):
        per_slot = getattr(estimate.per_slot, f"{service}_usd")
        assert estimate.monthly[service] == pytest.approx(per_slot * 1461, abs=1e-6)


def test_heartbeats_count_whole_intervals_of_the_winners_duration() -> None:
    writes = usage.winner_writes(duration_s=40.0, heartbeat_interval_s=15.0, result_writes=(), summary_bytes=0)
    assert writes.heartbeats == 2 and writes.total == 1 + 5 + 2 * 1 + writes.commit


def test_the_commit_is_modelled_as_the_runtime_models_it(prices: Prices) -> None:
    class NoCapacity:
        def snapshot(self) -> CapacitySnapshot:
            return CapacitySnapshot()

    writes = (usage.sized_put(2500), usage.sized_put(900))
    runtime = InvocationCost(prices=prices, racers=1, memory_mb=256, capacity=NoCapacity(), clock_s=lambda: 0.0)
    figure = runtime.estimate(data_scanned_bytes=[0], commit_writes=writes, summary_bytes=1234)
    assert figure.write_units == usage.commit_write_units(writes, 1234)


def test_log_bytes_per_invocation() -> None:
    job = job_inputs(value_columns=3, value_max_series=10)
    logs = usage.log_bytes(job)
    cold, platform = usage.COLD_START_LOG_BYTES, usage.PLATFORM_LOG_BYTES
    assert logs.winner == usage.WINNER_LOG_BYTES + 10 * (120 + 3 * 90) + platform + cold
    assert logs.loser == usage.LOSER_LOG_BYTES + platform + cold
    assert logs.per_slot(3) == logs.winner + 2 * logs.loser


# --- a month ----------------------------------------------------------------------------------------------------
def test_metric_count_with_and_without_value_metrics() -> None:
    without = monthly.metric_series(0, 0)
    assert (
        without.total == (len(contract.ALL_METRICS) - 3) + len(contract.LOSS_REASONS) + len(contract.MISSED_REASONS) + 1
    )
    assert without.total == 14 + 8 + 4 + 1  # as the contract stands: 17 metrics, 8 loss and 4 missed reasons
    with_values = monthly.metric_series(3, 10)
    assert with_values.value_series == 30  # 3 columns x 10 series
    assert with_values.total - without.total == 30 + 1  # and ValueSeriesDropped, emitted only with value metrics


def test_month_by_service_at_the_price_tables_prices(prices: Prices) -> None:
    job = job_inputs(value_columns=3, value_max_series=10)
    estimate = monthly.estimate_job(job, Durations(), prices)
    metrics = (27 + 31) * prices.cloudwatch_usd_per_metric_month
    assert estimate.monthly["cloudwatch_metrics"] == pytest.approx(metrics)
    assert estimate.monthly["cloudwatch_alarms"] == pytest.approx(13 * prices.cloudwatch_usd_per_alarm_month)
    log_gb = estimate.logs.per_slot(3) * 1461 / 2**30
    log_price = prices.cloudwatch_usd_per_gb_logs_ingested + prices.cloudwatch_usd_per_gb_month_logs_stored
    assert estimate.monthly["cloudwatch_logs"] == pytest.approx(log_gb * log_price, abs=1e-6)
    assert estimate.total_usd == pytest.approx(sum(estimate.monthly.values()), abs=1e-9)
    # A daily job emits in 1 hour of 24: its metrics are billed for those hours only.
    daily = replace(job, schedule=ScheduleRate(year=2026, firings=365, active_hours=365, cold_firings=365))
    assert monthly.estimate_job(daily, Durations(), prices).monthly["cloudwatch_metrics"] == pytest.approx(
        metrics / 24, abs=1e-6
    )


def test_what_moves_it(prices: Prices) -> None:
    job = job_inputs(value_columns=3, value_max_series=10)
    estimate = monthly.estimate_job(job, Durations(), prices)
    one_more = monthly.estimate_job(replace(job, racers=4), Durations(), prices)
    assert estimate.one_more_racer_usd == pytest.approx(one_more.total_usd - estimate.total_usd, abs=2e-6)
    loser = (
        estimate_slot_cost(replace(estimate.usage, racers=2), prices).total_usd
        - estimate_slot_cost(replace(estimate.usage, racers=1), prices).total_usd
    )
    log_price = prices.cloudwatch_usd_per_gb_logs_ingested + prices.cloudwatch_usd_per_gb_month_logs_stored
    logs = estimate.logs.loser * 1461 / 2**30 * log_price  # one more loser's log lines, ingested and stored
    assert estimate.one_more_racer_usd == pytest.approx(loser * 1461 + logs, abs=5e-6)
    values_only = 31 * prices.cloudwatch_usd_per_metric_month
    assert estimate.value_metrics_usd > values_only  # plus the value blobs' log bytes
    assert estimate.value_metrics_usd == pytest.approx(values_only, rel=1e-3)


def test_read_api_per_thousand_reads(prices: Prices) -> None:
    api = monthly.read_api_per_thousand(prices, memory_mb=256)
    lambda_one = 0.25 * 0.030 * prices.lambda_usd_per_gb_s["arm64"] + prices.lambda_usd_per_million_requests / 1e6
    assert api["apigateway"] == pytest.approx(1000 / 1e6 * prices.apigateway_usd_per_million_http_requests)
    assert api["lambda"] == pytest.approx(1000 * lambda_one, abs=1e-6)
    assert api["dynamodb"] == pytest.approx(1000 * prices.dynamodb_usd_per_million_read_units / 1e6)
    assert api["total"] == pytest.approx(api["apigateway"] + api["lambda"] + api["dynamodb"])


# --- the sample and the template --------------------------------------------------------------------------------
def test_the_sample_jobs_scan_is_measured_and_billed_at_athenas_minimum(
    sample_jobs: dict[str, Any], sample_dir: Path, prices: Prices
) -> None:
    job = sample_jobs[FLIGHTS]
    slot = inputs.representative_slot(job)
    assert slot.isoformat() == "2026-07-15T00:00:00+00:00"
    sample = inputs.measure_sample(job, data_dir=sample_dir, slot=slot)
    assert 0 < sample.data_scanned_bytes < 10 * MB
    assert athena_billed_bytes(sample.data_scanned_bytes, min_mb=prices.athena_min_mb_per_query) == 10 * MB
    assert sample.commit.rows > 0 and len(sample.commit.writes) == 2 and not sample.commit.rows_offloaded
    assert "'2013-07-15 00:00:00'" in sample.parameters  # the slot's window mapped onto the sample's year


def test_alarm_counting_attributes_each_alarm_and_counts_metric_math_metrics() -> None:
    fake = fake_synthesis(["a", "b"])
    counted = inputs.count_alarms(fake.resources, fake.job_alarm_ids)
    assert counted.per_job["a"] == AlarmCount(alarms=2, alarm_metrics=3, high_resolution=0)
    assert counted.stack == AlarmCount(alarms=1, alarm_metrics=1) and counted.dashboards == 1
    assert inputs.alarm_metrics({"MetricName": "X", "Period": 10}) == (1, True)
    with pytest.raises(ValueError, match="missing from the template"):
        inputs.count_alarms(fake.resources, {"a": frozenset({"Nope"})})
    with pytest.raises(ValueError, match="belongs to both"):
        inputs.count_alarms(fake.resources, {"a": frozenset({"J0Plain"}), "b": frozenset({"J0Plain"})})


def test_alarm_count_equals_the_synthesized_templates(synthesis: Synthesis) -> None:
    counted = inputs.count_alarms(synthesis.resources, synthesis.job_alarm_ids)
    alarms = {k: v for k, v in synthesis.resources.items() if v["Type"] == "AWS::CloudWatch::Alarm"}
    assert sum(c.alarms for c in counted.per_job.values()) + counted.stack.alarms == len(alarms)
    for job, count in counted.per_job.items():
        by_prefix = [k for k in alarms if k.startswith(logical_id_prefix(job))]  # the job's construct's ids
        assert count.alarms == len(by_prefix) > 0
        math_metrics = sum(
            len([m for m in alarms[k]["Properties"].get("Metrics", []) if "MetricStat" in m]) for k in by_prefix
        )
        plain = sum(1 for k in by_prefix if "Metrics" not in alarms[k]["Properties"])
        assert count.alarm_metrics == plain + math_metrics
    assert counted.dashboards == 1


# --- the CLI ----------------------------------------------------------------------------------------------------
def test_json_totals_add_up(sample_dir: Path, sample_jobs_dir: Path, synthesis: Synthesis) -> None:
    status, out, err = run(["--format", "json", "--jobs-dir", str(sample_jobs_dir)], sample_dir, synthesis)
    assert status == 0, err
    document = json.loads(out)
    assert document["estimate"] is True and document["prices"]["region"] == "us-east-1"
    jobs = {job["job"]: job for job in document["jobs"]}
    assert set(jobs) == {FLIGHTS, CARRIERS}
    for job in jobs.values():
        assert job["total_usd"] == pytest.approx(sum(job["monthly_usd"].values()), abs=1e-9)
        assert job["alarms"]["alarms"] == 10 and job["scan"]["origin"] == "measured"
        assert job["scan"]["billed_bytes"] == 10 * MB
    stack = document["stack"]
    assert stack["total_usd"] == pytest.approx(stack["dashboard_usd"] + stack["shared_alarms_usd"])
    total = sum(job["total_usd"] for job in jobs.values()) + stack["total_usd"]
    assert document["total_usd"] == pytest.approx(total, abs=1e-9)
    assert jobs[FLIGHTS]["slots_per_month"] == 1461 and jobs[CARRIERS]["slots_per_month"] == 30.4375
    assert jobs[FLIGHTS]["metrics"]["value_series"] == 3 * 10
    moves = jobs[FLIGHTS]["what_moves_it"]
    assert jobs[FLIGHTS]["sample"]["value_series_observed"] == 3  # EWR, JFK, LGA: below max_series 10
    assert 0 < moves["value_metrics_at_sample_series_usd"] < moves["value_metrics_usd"] < jobs[FLIGHTS]["total_usd"]
    for service, per_slot in jobs[FLIGHTS]["per_slot"]["by_service_usd"].items():
        assert jobs[FLIGHTS]["monthly_usd"][service] == pytest.approx(per_slot * 1461, abs=1e-6)


def test_table_output(sample_dir: Path) -> None:
    status, out, _ = run([], sample_dir)  # jobs/ as it is: whatever jobs a fork holds
    assert status == 0
    for text in ("Athena", "Lambda", "DynamoDB", "EventBridge Scheduler", "CloudWatch metrics", "CloudWatch alarms"):
        assert text in out
    for text in ("CloudWatch logs", "CloudWatch dashboard", "grand total", "ESTIMATE", "What moves it", "one more"):
        assert text in out
    assert "Read API, per 1,000 reads" in out and "Assumptions" in out


def test_scan_bytes_for_another_source_and_the_assumed_minimum(tmp_path: Path, sample_dir: Path) -> None:
    jobs_dir = tmp_path / "jobs"
    shutil.copytree(FIXTURE_JOBS_DIR / FLIGHTS, jobs_dir / "glue-job")
    toml = (jobs_dir / "glue-job" / "job.toml").read_text(encoding="utf-8")
    (jobs_dir / "glue-job" / "job.toml").write_text(
        toml.replace(
            'source = "sample:flights"',
            'source = { database = "sales", table = "orders", location = "s3://acme-data/orders/" }',
        ).replace("[sample]\ndata_year = 2013", ""),
        encoding="utf-8",
    )
    status, out, err = run(["--format", "json", "--jobs-dir", str(jobs_dir)], sample_dir)
    assert status == 0, err
    (job,) = json.loads(out)["jobs"]
    assert job["scan"] == {
        "bytes": 10 * MB,
        "billed_bytes": 10 * MB,
        "origin": "assumed",
        "detail": job["scan"]["detail"],
    }
    assert job["sample"] is None
    status, out, err = run(
        ["--format", "json", "--jobs-dir", str(jobs_dir), "--scan-bytes", "glue-job=3_000_000_000"], sample_dir
    )
    assert status == 0, err
    (job,) = json.loads(out)["jobs"]
    assert job["scan"]["origin"] == "flag" and job["scan"]["billed_bytes"] == math.ceil(3e9 / MB) * MB


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("flights-dashboard", "expected JOB=BYTES"),
        ("flights-dashboard=lots", "expected JOB=BYTES"),
        ("flights-dashboard=-1", "expected JOB=BYTES"),
        ("=10", "expected JOB=BYTES"),
        ("nightly=10", "no job 'nightly'"),
    ],
)
def test_bad_scan_bytes_is_one_line_and_exit_2(spec: str, message: str, sample_dir: Path) -> None:
    def must_not_synthesize(_: Path) -> Synthesis:
        raise AssertionError("bad flags are refused before the synth")

    out, err = io.StringIO(), io.StringIO()
    status = main(["--scan-bytes", spec], stdout=out, stderr=err, env={}, synthesize=must_not_synthesize)
    assert status == 2 and out.getvalue() == ""
    assert (
        err.getvalue().count("\n") == 1
        and err.getvalue().startswith("error: --scan-bytes")
        and message in err.getvalue()
    )


def test_scan_bytes_given_twice_and_underscores() -> None:
    assert parse_scan_bytes(["a=1_000"], ["a"]) == {"a": 1000}
    with pytest.raises(CostInputError, match="given twice"):
        parse_scan_bytes(["a=1", "a=2"], ["a"])


def test_a_broken_job_folder_is_one_line_naming_the_file(tmp_path: Path, sample_dir: Path) -> None:
    jobs_dir = tmp_path / "jobs"
    shutil.copytree(FIXTURE_JOBS_DIR / FLIGHTS, jobs_dir / "broken")
    (jobs_dir / "broken" / "job.toml").write_text("racers = [\n", encoding="utf-8")
    status, out, err = run(["--jobs-dir", str(jobs_dir)], sample_dir)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: jobs/broken/job.toml: not a valid TOML file")


def test_bad_durations_are_one_line_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--winner-duration-s", "-1"], env={})
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--winner-duration-s" in err and "Traceback" not in err


def test_region_falls_back_to_the_tables_default(sample_dir: Path) -> None:
    status, out, err = run(["--format", "json", "--region", "eu-west-1"], sample_dir)
    assert status == 0, err
    document = json.loads(out)
    assert document["prices"] == {**document["prices"], "region": "us-east-1", "requested_region": "eu-west-1"}
    assert "no prices for eu-west-1" in document["assumptions"][0]
