"""Several jobs in one stack: a job folder (a Glue source) added next to the two sample jobs (copies of
tests/fixtures/jobs in a temporary jobs/), its own function, role, schedules and alarms; grants per source; the
bundled catalog holds every job's prepared query."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import app
from athena_refresh import contract
from athena_refresh.catalog import CATALOG_FILE, load_query
from stacks.jobs import job_named
from stacks.runtime_asset import stage_runtime_asset
from tests.sample_jobs import load_fixture_jobs, stage_jobs
from tests.stacks import deployment_view
from tests.stacks.helpers import HANDLER, as_list, of_job, of_type

GLUE_JOB = "orders-hourly"
GLUE_TOML = """
source = { database = "sales", table = "orders", location = "s3://acme-data-lake/sales/orders/" }
schedule_expression = "cron(5 * * * ? *)"
schedule_timezone = "Europe/Berlin"
racers = 2
lease_duration_s = 40
heartbeat_interval_s = 10
max_slot_age_s = 600
history_ttl_s = 604800
max_query_attempts = 2
window_s = 3600
lambda_timeout_s = 120
lambda_memory_mb = 512
bytes_scanned_cutoff_per_query = 5000000000

[parameters]
region = "'EU'"

[alarms]
data_scanned_bytes = 2000000000
query_duration_ms = 30000
"""
GLUE_SQL = """SELECT region, count(*) AS orders FROM orders
WHERE ordered_at >= CAST(:window_start AS timestamp) AND ordered_at < CAST(:window_end AS timestamp)
  AND region = :region
GROUP BY region"""


@pytest.fixture(scope="module")
def three_jobs(tmp_path_factory: pytest.TempPathFactory, sample_data_dir: Path) -> dict[str, Any]:
    jobs_dir = stage_jobs(tmp_path_factory.mktemp("repo"))
    (jobs_dir / GLUE_JOB).mkdir()
    (jobs_dir / GLUE_JOB / "job.toml").write_text(GLUE_TOML, encoding="utf-8")
    (jobs_dir / GLUE_JOB / "query.sql").write_text(GLUE_SQL, encoding="utf-8")
    _, deployment = app.build_app(sample_data_dir=sample_data_dir, jobs_dir=jobs_dir)
    return deployment_view.merged_template(deployment_view.stack_templates(deployment))


def _function(resources: dict[str, Any], job: str) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (logical_id, res)
        for logical_id, res in of_type(of_job(resources, job), "AWS::Lambda::Function").items()
        if res["Properties"].get("Handler") == HANDLER
    ]
    return found


def _statements(resources: dict[str, Any], role_id: str) -> dict[str, dict[str, Any]]:
    policies = [
        p for p in of_type(resources, "AWS::IAM::Policy").values() if p["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    return {s.get("Sid", "<no sid>"): s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]}


def test_each_job_has_its_own_function_schedules_alarm_and_registry_entry(three_jobs: dict[str, Any]) -> None:
    resources = three_jobs["Resources"]
    for job, racers in (("flights-dashboard", 3), ("carrier-on-time", 3), (GLUE_JOB, 2)):
        mine = of_job(resources, job)
        function_id, function = _function(resources, job)
        assert function["Properties"]["Environment"]["Variables"][contract.ENV_JOB_NAME] == job
        schedules = of_type(mine, "AWS::Scheduler::Schedule")
        assert len(schedules) == racers
        assert all(s["Properties"]["Target"]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]} for s in schedules.values())
        assert not of_type(mine, "AWS::SQS::Queue")  # the deployment's one on-failure queue serves every job
        assert list(of_type(mine, "AWS::CloudWatch::Alarm")) == [a for a in mine if "NoRecentSuccess" in a]
        assert len(of_type(mine, "AWS::SSM::Parameter")) == 1  # its registry entry
        assert not of_type(mine, "AWS::CloudWatch::Dashboard")
    # Shared: one lock table and one results table, one bucket for results, one workgroup, one alarm topic,
    # one dashboard and one on-failure queue with its DLQ, whatever the number of jobs.
    assert len(of_type(resources, "AWS::DynamoDB::Table")) == 2
    assert len(of_type(resources, "AWS::SNS::Topic")) == 1
    assert len(of_type(resources, "AWS::CloudWatch::Dashboard")) == 1
    assert len(of_type(resources, "AWS::SQS::Queue")) == 2
    (workgroup,) = of_type(resources, "AWS::Athena::WorkGroup").values()
    # Athena enforces the cutoff per workgroup: the shared one takes the largest job's.
    assert workgroup["Properties"]["WorkGroupConfiguration"]["BytesScannedCutoffPerQuery"] == 5_000_000_000
    glue_schedule = next(iter(of_type(of_job(resources, GLUE_JOB), "AWS::Scheduler::Schedule").values()))
    assert glue_schedule["Properties"]["ScheduleExpression"] == "cron(5 * * * ? *)"
    assert glue_schedule["Properties"]["ScheduleExpressionTimezone"] == "Europe/Berlin"
    outputs = three_jobs["Outputs"]
    assert {"JobRegistryPath", "FailureQueueUrl", "DashboardName"} <= set(outputs)
    assert not [name for name in outputs if name.startswith(("JobNames", "FunctionName"))]  # no output per job


def test_a_glue_job_reads_its_own_table_and_location_only(three_jobs: dict[str, Any]) -> None:
    resources = three_jobs["Resources"]
    _, function = _function(resources, GLUE_JOB)
    env = function["Properties"]["Environment"]["Variables"]
    assert env[contract.ENV_ATHENA_DATABASE] == "sales"
    statements = _statements(resources, function["Properties"]["Role"]["Fn::GetAtt"][0])
    glue = json.dumps(statements["GlueCatalogRead"]["Resource"])
    assert "database/sales" in glue and "table/sales/orders" in glue and "flights" not in glue
    # A user's table may be partitioned without projection: Athena then lists its partitions as the caller.
    assert "glue:GetPartitions" in statements["GlueCatalogRead"]["Action"]
    read = json.dumps(statements["ReadSourceData"]["Resource"])
    assert "arn:" in read and "s3:::acme-data-lake/sales/orders/*" in read
    listed = statements["ListSourceData"]
    assert "acme-data-lake" in json.dumps(listed["Resource"])
    assert listed["Condition"] == {"StringLike": {"s3:prefix": ["sales/orders/*"]}}
    everything = json.dumps(statements)
    assert "data/flights" not in everything  # the sample's data is not this job's source


def test_the_sample_jobs_cannot_read_the_glue_jobs_data(three_jobs: dict[str, Any]) -> None:
    resources = three_jobs["Resources"]
    for job in ("flights-dashboard", "carrier-on-time"):
        _, function = _function(resources, job)
        statements = _statements(resources, function["Properties"]["Role"]["Fn::GetAtt"][0])
        assert "acme-data-lake" not in json.dumps(statements) and "sales" not in json.dumps(statements)
        assert any("data/flights/*" in json.dumps(as_list(s["Resource"])) for s in statements.values())


def test_removing_a_job_folder_removes_its_resources_and_keeps_the_shared_ones(
    tmp_path: Path, sample_data_dir: Path
) -> None:
    jobs_dir = stage_jobs(tmp_path)
    shutil.rmtree(jobs_dir / "carrier-on-time")
    _, deployment = app.build_app(sample_data_dir=sample_data_dir, jobs_dir=jobs_dir)
    resources = deployment_view.merged_template(deployment_view.stack_templates(deployment))["Resources"]
    assert of_job(resources, "carrier-on-time") == {}
    assert "carrier-on-time" not in json.dumps(resources)  # no trace left: not in the dashboard, no parameter
    assert len(of_type(resources, "AWS::Scheduler::Schedule")) == 3 + 2  # the job's 3 racers, the watchdog's 2
    assert len(of_type(resources, "AWS::DynamoDB::Table")) == 2  # history and results stay


def test_the_read_sides_staged_asset_bundles_every_jobs_prepared_query() -> None:
    jobs = load_fixture_jobs()
    staged = stage_runtime_asset(jobs)
    assert {p.name for p in staged.iterdir()} == {"slotlock", "athena_refresh", "results_api", CATALOG_FILE}
    assert not list(staged.rglob("__pycache__"))
    for job in jobs:
        query = load_query(job.job_name, staged / CATALOG_FILE)
        assert query.sql == job.query.text and query.parameters == job.query.parameter_order
        assert dict(query.constants) == dict(job.parameters)
        # the job's spec, typed, as synth built it (the stack-wide alarm email left out of the asset)
        assert query.spec == dataclasses.replace(job.config, alarms=dataclasses.replace(job.config.alarms, email=None))
    carrier = load_query("carrier-on-time", staged / CATALOG_FILE)
    assert carrier.parameters == job_named(jobs, "carrier-on-time").query.parameter_order
    assert ":on_time_delay_min" not in carrier.sql and carrier.sql.count("?") == 6


def test_a_broken_job_folder_stops_the_synth_before_any_construct(tmp_path: Path, sample_data_dir: Path) -> None:
    jobs_dir = stage_jobs(tmp_path)
    (jobs_dir / "carrier-on-time" / "query.sql").write_text("SELECT :nope AS x", encoding="utf-8")
    with pytest.raises(Exception, match=r"jobs/carrier-on-time/query.sql: line 1: parameter :nope is not defined"):
        app.build_app(sample_data_dir=sample_data_dir, jobs_dir=jobs_dir)
