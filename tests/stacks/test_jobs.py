"""stacks.jobs: job folders (job.toml + query.sql) read and validated at synth, every problem at once, each
naming its file and key."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from athena_refresh.checks import ConfigError
from stacks.jobs import GlueSource, SampleSource, StackSettings, load_jobs
from tests.sample_jobs import REPO_JOBS_DIR, SAMPLE_JOBS, repo_job_names, stage_jobs

STACK = StackSettings(workgroup="athena-refresh", sample_database="flights_demo")
GOOD_TOML = """
source = "sample:flights"
schedule_expression = "cron(0/30 * * * ? *)"
racers = 3
lease_duration_s = 45
heartbeat_interval_s = 15
max_slot_age_s = 1800
history_ttl_s = 2592000
max_query_attempts = 3
window_s = 86400
lambda_timeout_s = 300
lambda_memory_mb = 256
bytes_scanned_cutoff_per_query = 1000000000

[sample]
data_year = 2013

[alarms]
data_scanned_bytes = 100000000
query_duration_ms = 60000
"""
GOOD_SQL = (
    "SELECT origin, count(*) AS flights FROM flights\nWHERE t >= CAST(:window_start AS timestamp)\n"
    "AND t < CAST(:window_end AS timestamp) GROUP BY origin"
)


def make_job(root: Path, name: str = "job-a", toml: str = GOOD_TOML, sql: str | None = GOOD_SQL) -> Path:
    folder = root / "jobs" / name
    folder.mkdir(parents=True)
    (folder / "job.toml").write_text(toml, encoding="utf-8")
    if sql is not None:
        (folder / "query.sql").write_text(sql, encoding="utf-8")
    return folder


def problems_of(root: Path) -> list[str]:
    """The problems, without the line numbers (``job.toml:7: key`` -> ``job.toml: key``; see test_job_defaults)."""
    with pytest.raises(ConfigError) as caught:
        load_jobs(root / "jobs", STACK)
    return [re.sub(r"^(\S+?\.toml):\d+: ", r"\1: ", problem) for problem in caught.value.problems]


def test_the_repositorys_job_folders_load_whatever_they_are() -> None:
    # A fork replaces or adds jobs: every folder under jobs/ loads, named by its folder, in name order.
    assert [job.job_name for job in load_jobs(REPO_JOBS_DIR, STACK)] == repo_job_names() != []


def test_the_sample_jobs_load(tmp_path: Path) -> None:
    # The samples as shipped (their canonical copies in tests/fixtures/jobs: jobs/ may no longer hold them).
    jobs = load_jobs(stage_jobs(tmp_path), STACK)
    assert [job.job_name for job in jobs] == list(SAMPLE_JOBS) == ["carrier-on-time", "flights-dashboard"]
    carrier, flights = jobs
    assert carrier.schedule_timezone == "America/New_York" and flights.schedule_timezone == "UTC"
    assert carrier.source == flights.source == SampleSource(name="flights", table="flights")
    assert carrier.parameters == {"on_time_delay_min": "15"}
    window = ("window_start", "window_end", "window_first_date", "window_last_date")  # the partition filter's dates
    assert carrier.query.parameter_order == ("on_time_delay_min", "on_time_delay_min", *window)
    assert flights.query.parameter_order == window
    assert flights.config.value_metrics is not None
    assert set(flights.config.value_metrics.columns) <= set(flights.query.output_columns or ())
    assert flights.config.database == "flights_demo" and flights.config.data_year == 2013


def test_a_good_folder_loads_with_the_folder_name_as_job_name(tmp_path: Path) -> None:
    make_job(tmp_path, "my_job-1")
    (job,) = load_jobs(tmp_path / "jobs", STACK)
    assert job.job_name == "my_job-1" and job.config.workgroup == "athena-refresh"
    assert job.query.text.count("?") == 2 and ":window_start" not in job.query.text


def test_a_glue_source_names_database_table_and_location(tmp_path: Path) -> None:
    toml = GOOD_TOML.replace('source = "sample:flights"', "").replace("[sample]\ndata_year = 2013\n", "")
    toml = 'source = { database = "sales", table = "orders", location = "s3://data-lake/sales/orders/" }\n' + toml
    make_job(tmp_path, toml=toml)
    (job,) = load_jobs(tmp_path / "jobs", STACK)
    assert job.source == GlueSource(database="sales", table="orders", location="s3://data-lake/sales/orders/")
    assert isinstance(job.source, GlueSource)
    assert (job.source.bucket_name, job.source.key_prefix) == ("data-lake", "sales/orders/")
    assert (job.config.database, job.config.table, job.config.data_year) == ("sales", "orders", None)


def test_every_problem_of_every_job_is_reported_at_once_naming_file_and_key(tmp_path: Path) -> None:
    make_job(tmp_path, "one", toml=GOOD_TOML.replace("racers = 3", "racers = 0\ncolour = 'red'"))
    make_job(tmp_path, "two", sql="SELECT a FROM t WHERE x = :nope")
    found = problems_of(tmp_path)
    assert any(p.startswith("jobs/one/job.toml: racers: must be an integer from 1 to 20") for p in found)
    assert any(p.startswith("jobs/one/job.toml: colour: unknown key") for p in found)
    assert any(p.startswith("jobs/two/query.sql: line 1: parameter :nope is not defined") for p in found)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("racers = 3", "racers = 3\nracers_typo = 1"), "racers_typo: unknown key"),
        (('schedule_expression = "cron(0/30 * * * ? *)"', 'schedule_expression = "cron(0/30 * * *)"'), "cron(...)"),
        (("lease_duration_s = 45", "lease_duration_s = 600"), "lease_duration_s: must be an integer from 1 to 55"),
        (("heartbeat_interval_s = 15", "heartbeat_interval_s = 25"), "heartbeat_interval_s: must be below"),
        (("racers = 3", 'racers = 3\nschedule_timezone = "Mars/Olympus"'), "schedule_timezone: must be an IANA"),
        (('source = "sample:flights"', 'source = "sample:boats"'), "source: must be one of"),
        (("[sample]\ndata_year = 2013", "[sample]\ndata_year = 1066"), "data_year: must be an integer from 1900"),
        (("racers = 3", 'racers = 3\nsql = "SELECT 1"'), "sql: not a job setting here (the query lives in query.sql)"),
        (("racers = 3", 'racers = 3\njob_name = "x"'), "job_name: not a job setting here"),
        (("racers = 3", 'racers = 3\nworkgroup = "x"'), "workgroup: not a job setting here (stack-wide"),
    ],
)
def test_each_job_file_rule_names_its_key(tmp_path: Path, change: tuple[str, str], expected: str) -> None:
    make_job(tmp_path, toml=GOOD_TOML.replace(*change))
    found = problems_of(tmp_path)
    assert any(p.startswith("jobs/job-a/job.toml: ") and expected in p for p in found), found


def test_value_metric_columns_must_be_output_columns_of_the_query(tmp_path: Path) -> None:
    make_job(tmp_path, toml=GOOD_TOML + '\n[value_metrics]\ncolumns = ["flights", "delays"]\n')
    (problem,) = problems_of(tmp_path)
    assert problem.startswith("jobs/job-a/job.toml: value_metrics.columns: must name output columns")
    assert "got unknown delays" in problem


def test_constants_are_parameters_and_built_ins_cannot_be_redefined(tmp_path: Path) -> None:
    sql = GOOD_SQL.replace("GROUP BY", "AND carrier = :carrier GROUP BY")
    make_job(tmp_path, "ok", toml=GOOD_TOML + "\n[parameters]\ncarrier = \"'AA'\"\n", sql=sql)
    make_job(tmp_path, "bad", toml=GOOD_TOML + '\n[parameters]\nwindow_end = "1"\nn = 5\n"9x" = "1"\n')
    found = problems_of(tmp_path)
    assert not any(p.startswith("jobs/ok/") for p in found)
    assert any("jobs/bad/job.toml: parameters.window_end: a built-in parameter" in p for p in found)
    assert any("jobs/bad/job.toml: parameters.n: must be text" in p for p in found)
    assert any("jobs/bad/job.toml: parameters.9x: a parameter name" in p for p in found)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('{ database = "Sales", table = "orders", location = "s3://b/p/" }', "source.database: must be"),
        ('{ database = "sales", table = "orders", location = "s3://bucket/prefix" }', "source.location: must be"),
        ('{ database = "sales", table = "orders", location = "https://x/" }', "source.location: must be"),
        ('{ database = "sales", table = "orders", location = "s3://bucket/p/", region = "x" }', "source.region"),
    ],
)
def test_a_glue_source_is_checked_key_by_key(tmp_path: Path, source: str, expected: str) -> None:
    toml = GOOD_TOML.replace('source = "sample:flights"', f"source = {source}").replace(
        "[sample]\ndata_year = 2013\n", ""
    )
    make_job(tmp_path, toml=toml)
    assert any(expected in p for p in problems_of(tmp_path))


def test_sample_settings_on_a_glue_source_are_refused(tmp_path: Path) -> None:
    toml = GOOD_TOML.replace(
        'source = "sample:flights"', 'source = { database = "s", table = "t", location = "s3://bkt/t/" }'
    )
    make_job(tmp_path, toml=toml)
    assert any("sample: only for a sample source" in p for p in problems_of(tmp_path))


def test_files_that_are_missing_or_not_toml_are_named(tmp_path: Path) -> None:
    make_job(tmp_path, "no-query", sql=None)
    make_job(tmp_path, "broken", toml="racers = = 3")
    found = problems_of(tmp_path)
    assert any(p.startswith("jobs/no-query/query.sql: missing") for p in found)
    assert any(p.startswith("jobs/broken/job.toml: not a valid TOML file") for p in found)


def test_job_names_must_follow_the_lock_rule_and_differ_in_more_than_case(tmp_path: Path) -> None:
    make_job(tmp_path, "Daily")
    make_job(tmp_path, "daily")
    make_job(tmp_path, "bad.name")
    found = problems_of(tmp_path)
    assert any("duplicate job name" in p for p in found)
    assert any(p.startswith("jobs/bad.name: the folder name is the job name") for p in found)


def test_no_job_at_all_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (problem,) = problems_of(tmp_path)
    assert "no job folder" in problem


def test_a_copied_sample_job_is_one_more_job(tmp_path: Path) -> None:
    stage_jobs(tmp_path)
    shutil.copytree(tmp_path / "jobs" / "flights-dashboard", tmp_path / "jobs" / "flights-hourly")
    assert len(load_jobs(tmp_path / "jobs", STACK)) == 3
