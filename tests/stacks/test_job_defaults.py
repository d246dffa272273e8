"""Job defaults (stacks.defaults): a two-line job.toml, defaults derived from the schedule that satisfy every
relationship, team defaults in jobs/defaults.toml, provenance, and problems as one list with file:line."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import app
from athena_refresh.checks import ConfigError, format_problems
from athena_refresh.job_rules import (
    ASYNC_FIRST_RETRY_DELAY_S,
    CLOCK_SKEW_ALLOWANCE_S,
    COMMIT_RESERVE_S,
    MIN_SCHEDULE_PERIOD_S,
)
from slotlock.schedule import cron_period
from stacks import REPO_ROOT
from stacks.defaults import JOB_TOML_KEYS, TEAM_KEYS, key_lines
from stacks.job_groups import job_group
from stacks.jobs import JobDefinition, StackSettings, load_job, load_jobs
from tools.jobs import settings as settings_command

STACK = StackSettings(workgroup="athena-refresh", sample_database="flights_demo")
TWO_LINES = 'source = "sample:flights"\nschedule_expression = "{cron}"\n'
SQL = (
    "SELECT origin, count(*) AS flights FROM flights\nWHERE t >= CAST(:window_start AS timestamp)\n"
    "AND t < CAST(:window_end AS timestamp) GROUP BY origin"
)


def make_job(
    root: Path, toml: str = TWO_LINES.format(cron="cron(0/30 * * * ? *)"), name: str = "x", sql: str = SQL
) -> Path:
    folder = root / "jobs" / name
    folder.mkdir(parents=True)
    (folder / "job.toml").write_text(toml, encoding="utf-8")
    (folder / "query.sql").write_text(sql, encoding="utf-8")
    return folder


def load_one(root: Path) -> JobDefinition:
    (job,) = load_jobs(root / "jobs", STACK)
    return job


def problems_of(root: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_jobs(root / "jobs", STACK)
    return list(caught.value.problems)


def test_a_two_line_job_loads_with_the_documented_defaults(tmp_path: Path) -> None:
    make_job(tmp_path)
    job = load_one(tmp_path)
    config = job.config
    assert (config.racers, config.lease_duration_s, config.heartbeat_interval_s) == (3, 45, 15)
    assert (config.max_slot_age_s, config.window_s) == (1800, 1800)  # one period
    assert config.lambda_timeout_s == 900  # min(900, max_slot_age_s - 60)
    assert (config.history_ttl_s, config.max_query_attempts, config.max_slot_lead_s) == (2_592_000, 3, 5)
    assert (config.lambda_memory_mb, config.bytes_scanned_cutoff_per_query) == (256, 1_000_000_000)
    assert config.alarms.data_scanned_bytes == 800_000_000  # 80% of the cutoff
    assert config.alarms.query_duration_ms == 720_000  # 80% of the timeout
    assert (config.value_metrics, config.result_reuse_max_age_min, config.schedule_timezone) == (None, 0, "UTC")
    assert config.data_year == 2013  # the sample's year
    origins = job.settings_origin
    assert origins["source"] == origins["schedule_expression"] == "job.toml"
    assert origins["racers"] == origins["sample.data_year"] == "built-in"
    assert origins["max_slot_age_s"] == origins["lambda_timeout_s"] == origins["window_s"] == "derived"


def test_a_glue_source_has_no_data_year(tmp_path: Path) -> None:
    source = 'source = { database = "sales", table = "orders", location = "s3://data-lake/orders/" }\n'
    make_job(tmp_path, source + 'schedule_expression = "cron(0 * * * ? *)"\n')
    job = load_one(tmp_path)
    assert job.config.data_year is None and "sample.data_year" not in job.settings_origin


@pytest.mark.parametrize(
    ("cron", "timezone"),
    [
        ("cron(0/2 * * * ? *)", "UTC"),
        ("cron(0/5 * * * ? *)", "UTC"),
        ("cron(0/30 * * * ? *)", "UTC"),
        ("cron(0 * * * ? *)", "UTC"),
        ("cron(0 6 * * ? *)", "UTC"),
        ("cron(0 6 ? * MON *)", "UTC"),
        ("cron(0 6 1 * ? *)", "UTC"),
        ("cron(30 2 * * ? *)", "Europe/Berlin"),  # daylight saving: 23 h and 25 h gaps, and a skipped 02:30
        ("cron(0 1 ? * SUN *)", "America/New_York"),
    ],
)
def test_the_defaults_satisfy_every_relationship(tmp_path: Path, cron: str, timezone: str) -> None:
    make_job(tmp_path, TWO_LINES.format(cron=cron) + f'schedule_timezone = "{timezone}"\n')
    config = load_one(tmp_path).config  # loading checks every relationship; restated here
    period = cron_period(cron, timezone).shortest_s
    assert 2 * config.heartbeat_interval_s + CLOCK_SKEW_ALLOWANCE_S < config.lease_duration_s
    assert config.lease_duration_s + CLOCK_SKEW_ALLOWANCE_S <= ASYNC_FIRST_RETRY_DELAY_S
    assert config.heartbeat_interval_s + COMMIT_RESERVE_S < config.lambda_timeout_s <= min(900, period - 60)
    assert config.lambda_timeout_s + ASYNC_FIRST_RETRY_DELAY_S <= config.max_slot_age_s == min(period, 21_600)
    assert config.window_s == min(period, 366 * 86_400)
    assert config.alarms.data_scanned_bytes < config.bytes_scanned_cutoff_per_query


@pytest.mark.parametrize("cron", ["cron(* * * * ? *)", "cron(0,1 * * * ? *)"])
def test_a_schedule_shorter_than_two_minutes_is_one_problem(tmp_path: Path, cron: str) -> None:
    make_job(tmp_path, TWO_LINES.format(cron=cron) + "lambda_timeout_s = 300\n")
    (problem,) = problems_of(tmp_path)
    assert problem.startswith("jobs/x/job.toml:2: schedule_expression: fires ")
    assert f"the shortest period a job can have is {MIN_SCHEDULE_PERIOD_S} s (2 minutes)" in problem


def test_team_defaults_override_derived_ones_and_the_job_overrides_the_team(tmp_path: Path) -> None:
    make_job(tmp_path, TWO_LINES.format(cron="cron(0 * * * ? *)") + "racers = 5\n", name="a")
    make_job(tmp_path, TWO_LINES.format(cron="cron(0 * * * ? *)"), name="b")
    (tmp_path / "jobs" / "defaults.toml").write_text(
        "# the team's defaults\nracers = 2\nlambda_timeout_s = 600\n\n[alarms]\nquery_duration_ms = 1000\n",
        encoding="utf-8",
    )
    a, b = load_jobs(tmp_path / "jobs", STACK)
    assert (a.config.racers, b.config.racers) == (5, 2)
    assert a.settings_origin["racers"] == "job.toml" and b.settings_origin["racers"] == "jobs/defaults.toml"
    assert b.config.lambda_timeout_s == 600 and b.settings_origin["lambda_timeout_s"] == "jobs/defaults.toml"
    assert b.config.alarms.query_duration_ms == 1000
    assert b.config.max_slot_age_s == 3600 and b.settings_origin["max_slot_age_s"] == "derived"
    why = {setting.key: setting.why for setting in b.settings}
    assert why["racers"] == "jobs/defaults.toml:2" and why["alarms.query_duration_ms"] == "jobs/defaults.toml:6"
    assert "one period" in why["max_slot_age_s"]


def test_per_job_metrics_is_off_by_default_on_for_the_team_and_off_again_for_one_job(tmp_path: Path) -> None:
    # issue 35: the job's own metrics and alarm are opt-in; the one team-defaults line turns them on for every job
    make_job(tmp_path, TWO_LINES.format(cron="cron(0 * * * ? *)"), name="a")
    make_job(tmp_path, TWO_LINES.format(cron="cron(0 * * * ? *)") + "per_job_metrics = false\n", name="b")
    a0, _ = load_jobs(tmp_path / "jobs", STACK)
    assert (a0.config.per_job_metrics, a0.settings_origin["per_job_metrics"]) == (False, "built-in")
    (tmp_path / "jobs" / "defaults.toml").write_text("per_job_metrics = true\n", encoding="utf-8")
    a, b = load_jobs(tmp_path / "jobs", STACK)
    assert (a.config.per_job_metrics, a.settings_origin["per_job_metrics"]) == (True, "jobs/defaults.toml")
    assert (b.config.per_job_metrics, b.settings_origin["per_job_metrics"]) == (False, "job.toml")
    (tmp_path / "jobs" / "defaults.toml").write_text("per_job_metrics = 1\n", encoding="utf-8")
    assert problems_of(tmp_path) == ["jobs/defaults.toml:1: per_job_metrics: must be true or false, got 1"]


def test_team_defaults_are_checked_naming_their_own_file_once(tmp_path: Path) -> None:
    make_job(tmp_path, name="a")
    make_job(tmp_path, name="b")
    (tmp_path / "jobs" / "defaults.toml").write_text(
        'racers = 0\nracerz = 1\nsource = "sample:flights"\n[alarms]\nemail = "a@b.c"\n', encoding="utf-8"
    )
    assert problems_of(tmp_path) == [
        "jobs/defaults.toml:1: racers: must be an integer from 1 to 20, got 0",
        f"jobs/defaults.toml:2: racerz: unknown key; did you mean racers? allowed keys: {', '.join(TEAM_KEYS)}",
        "jobs/defaults.toml:3: source: each job sets it in its own job.toml, not a team default",
        "jobs/defaults.toml:5: alarms.email: not a team default (stack-wide, in cdk.json)",
    ]


def test_a_relationship_broken_by_a_team_default_names_the_team_file(tmp_path: Path) -> None:
    make_job(tmp_path, TWO_LINES.format(cron="cron(0/5 * * * ? *)"))
    (tmp_path / "jobs" / "defaults.toml").write_text("lambda_timeout_s = 600\n", encoding="utf-8")
    found = problems_of(tmp_path)
    assert any(
        p.startswith("jobs/defaults.toml:1: lambda_timeout_s (team default, for jobs/x/job.toml):") for p in found
    )


def test_an_unknown_key_gets_its_line_a_suggestion_and_exactly_the_accepted_keys(tmp_path: Path) -> None:
    make_job(tmp_path, TWO_LINES.format(cron="cron(0/30 * * * ? *)") + "\n# comment\n\n\nracer = 3\n")
    (problem,) = problems_of(tmp_path)
    assert problem.startswith("jobs/x/job.toml:7: racer: unknown key; did you mean racers? allowed keys: ")
    allowed = problem.split("allowed keys: ")[1].split(", ")
    assert allowed == list(JOB_TOML_KEYS)
    assert {"source", "sample", "parameters", "alarms", "value_metrics"} <= set(allowed)
    assert not {"workgroup", "removal_policy", "job_name", "sql", "database", "table", "data_year"} & set(allowed)


def test_every_accepted_key_is_accepted(tmp_path: Path) -> None:
    lines = (
        'source = "sample:flights"',
        'schedule_expression = "cron(0 * * * ? *)"',
        'schedule_timezone = "UTC"',
        "racers = 2",
        "lease_duration_s = 40",
        "heartbeat_interval_s = 10",
        "max_slot_age_s = 3000",
        "max_slot_lead_s = 3",
        "history_ttl_s = 86400",
        "max_query_attempts = 2",
        "window_s = 7200",
        "lambda_timeout_s = 600",
        "freshness_s = 3600",
        "lambda_memory_mb = 512",
        "bytes_scanned_cutoff_per_query = 20000000",
        "result_reuse_max_age_min = 60",
        "stack_group = 3",
        "per_job_metrics = true",
        "[alarms]\ndata_scanned_bytes = 10000000\nquery_duration_ms = 5000",
        '[value_metrics]\ncolumns = ["flights"]\ndimensions = ["origin"]',
        '[assertions]\nrows_at_least = 1\nnot_null = ["origin"]\nexpressions = ["flights >= 0"]',
        "[sample]\ndata_year = 2013",
        '[parameters]\nunused = "1"',
    )
    make_job(tmp_path, "".join(f"{line}\n" for line in lines))
    job = load_one(tmp_path)
    assert {s.origin for s in job.settings} == {"job.toml"}
    assert {s.key.split(".")[0] for s in job.settings} == set(JOB_TOML_KEYS)


def test_a_problem_about_a_derived_key_says_it_was_not_set(tmp_path: Path) -> None:
    make_job(tmp_path, TWO_LINES.format(cron="cron(0/5 * * * ? *)") + "lambda_timeout_s = 280\n")
    (problem,) = problems_of(tmp_path)
    assert problem.startswith("jobs/x/job.toml: max_slot_age_s (not set; derived default 300: one period")
    assert "must be at least lambda_timeout_s + 60 s = 340 s" in problem


def test_a_sql_problem_has_no_follow_on_value_metrics_problem(tmp_path: Path) -> None:
    toml = TWO_LINES.format(cron="cron(0/30 * * * ? *)") + '[value_metrics]\ncolumns = ["flights"]\n'
    make_job(tmp_path, toml, sql="SELECT origin, count(*) AS flights FROM flights WHERE x = :nope")
    (problem,) = problems_of(tmp_path)
    assert problem.startswith("jobs/x/query.sql: ") and ":nope" in problem


def test_key_lines_finds_keys_tables_and_inline_tables() -> None:
    text = 'a = 1\n[alarms]\nquery_duration_ms = 5\n"quoted" = 2\n[t]\nsource = { database = "d", table = "x" }\n'
    assert key_lines(text) == {
        "a": 1,
        "alarms": 2,
        "alarms.query_duration_ms": 3,
        "alarms.quoted": 4,
        "t": 5,
        "t.source": 6,
        "t.source.database": 6,
        "t.source.table": 6,
    }


def test_load_job_reads_team_defaults_next_to_the_folder(tmp_path: Path) -> None:
    folder = make_job(tmp_path)
    (tmp_path / "jobs" / "defaults.toml").write_text("racers = 4\n", encoding="utf-8")
    job = load_job(folder, STACK)
    assert job.config.racers == 4 and job.settings_origin["racers"] == "jobs/defaults.toml"


def test_format_problems_is_one_per_line_without_repeats() -> None:
    assert format_problems(["a: x", "b: y", "a: x"]) == "a: x\nb: y"
    assert ConfigError(["a: x", "b: y"]).lines() == "a: x\nb: y"


def test_app_main_prints_the_list_and_exits_2(tmp_path: Path) -> None:
    make_job(tmp_path, TWO_LINES.format(cron="cron(* * * * ? *)") + "racer = 3\n")
    err = io.StringIO()
    assert app.main(jobs_dir=tmp_path / "jobs", err=err) == 2
    assert err.getvalue().splitlines() == [
        f"jobs/x/job.toml:3: racer: unknown key; did you mean racers? allowed keys: {', '.join(JOB_TOML_KEYS)}",
        (
            "jobs/x/job.toml:2: schedule_expression: fires every 60 s; the shortest period a job can have is 120 s"
            " (2 minutes): a slot's Lambda timeout plus Lambda's 60 s first retry must fit in one period,"
            " got 'cron(* * * * ? *)'"
        ),
    ]


def test_app_as_a_process_prints_no_traceback(tmp_path: Path) -> None:
    make_job(tmp_path, "racers = 0\n")
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path / "cdk.out"), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    code = f"import sys, pathlib, app; sys.exit(app.main(jobs_dir=pathlib.Path({str(tmp_path / 'jobs')!r})))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("jobs/")]
    assert sorted(lines) == [
        "jobs/x/job.toml: schedule_expression: missing; required",
        (
            'jobs/x/job.toml: source: missing; required, one of "sample:flights", or a table {database, table,'
            ' location} of an existing Glue catalog (location "s3://bucket/prefix/")'
        ),
        "jobs/x/job.toml:1: racers: must be an integer from 1 to 20, got 0",
    ]


def run_settings(tmp_path: Path, *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    settings_command.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    status = settings_command.execute(parser.parse_args([*argv, "--jobs-dir", str(tmp_path / "jobs")]), out, err)
    return status, out.getvalue(), err.getvalue()


def test_settings_prints_each_value_and_its_origin_as_json(tmp_path: Path) -> None:
    make_job(tmp_path, name="a")
    make_job(tmp_path, TWO_LINES.format(cron="cron(0 * * * ? *)"), name="b")
    (tmp_path / "jobs" / "defaults.toml").write_text("racers = 4\n", encoding="utf-8")
    status, out, err = run_settings(tmp_path, "--job", "b", "--format", "json")
    assert (status, err) == (0, "")
    (job,) = json.loads(out)["jobs"]
    rows = {row["key"]: row for row in job["settings"]}
    assert job["job"] == "b"
    assert rows["racers"] == {
        "key": "racers",
        "value": 4,
        "origin": "jobs/defaults.toml",
        "why": "jobs/defaults.toml:1",
    }
    assert rows["schedule_expression"]["origin"] == "job.toml"
    assert rows["max_slot_age_s"]["value"] == 3600 and rows["max_slot_age_s"]["origin"] == "derived"
    assert rows["lambda_timeout_s"]["value"] == 900 and rows["history_ttl_s"]["origin"] == "built-in"
    # the job's stack, not "off" (issue 34): the group its name hashes to, and that stack's name
    group = job_group("b", StackSettings().job_stacks)
    assert rows["stack_group"]["value"] == group and rows["stack_group"]["origin"] == "built-in"
    assert rows["stack_group"]["why"].startswith(f"ScheduledAthenaRefresh-Jobs-{group:02d}; a hash of the job's name")


def test_settings_prints_a_table_per_job(tmp_path: Path) -> None:
    make_job(tmp_path, name="a")
    make_job(tmp_path, name="b")
    status, out, _ = run_settings(tmp_path)
    assert status == 0
    assert "a (a/job.toml)" in out and "b (b/job.toml)" in out
    line = next(line for line in out.splitlines() if "max_slot_age_s" in line)
    assert "1800" in line and "derived" in line and "one period" in line


def test_settings_reports_problems_and_unknown_jobs_with_status_2(tmp_path: Path) -> None:
    make_job(tmp_path, TWO_LINES.format(cron="cron(0 * * * ? *)") + "racer = 1\n")
    status, out, err = run_settings(tmp_path)
    assert (status, out) == (2, "") and err.startswith("jobs/x/job.toml:3: racer: unknown key; did you mean racers?")
    status, _, err = run_settings(tmp_path, "--job", "nope")
    assert status == 2 and err == "no job 'nope'; jobs: x\n"


def test_app_main_warns_of_value_metrics_that_cost_far_more_than_the_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warning on stderr, and the synth goes on (exit 0): the stack is built, its synthesis stubbed here."""
    sql = (
        "SELECT origin, dest, carrier, count(*) AS flights, avg(dep_delay) AS d1, avg(arr_delay) AS d2,"
        " max(dep_delay) AS d3, max(arr_delay) AS d4, min(dep_delay) AS d5, min(arr_delay) AS d6,"
        " sum(distance) AS d7, avg(distance) AS d8 FROM flights"
        " WHERE sched_dep_utc >= CAST(:window_start AS timestamp) AND sched_dep_utc < CAST(:window_end AS timestamp)"
        " GROUP BY 1, 2, 3"  # the sample's columns: synth's SQL check refuses a column the table lacks
    )
    metrics = (
        '[value_metrics]\ncolumns = ["flights", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8"]\n'
        'dimensions = ["origin", "dest", "carrier"]\nmax_series = 50\n'
    )
    make_job(tmp_path, TWO_LINES.format(cron="cron(0/30 * * * ? *)") + metrics, sql=sql)
    built = app.build_app

    class Synthesized:
        def synth(self) -> Any:
            return type("Assembly", (), {"directory": str(tmp_path), "stacks": []})()

    monkeypatch.setattr(app, "build_app", lambda **kw: (Synthesized(), built(**kw)[1]))
    err = io.StringIO()
    assert app.main(jobs_dir=tmp_path / "jobs", err=err) == 0
    # the value-metrics warning, then the per-job metrics notice (issue 35: the job does not opt in)
    line, notice = err.getvalue().splitlines()
    assert line.startswith("warning: jobs/x/job.toml: value_metrics:") and "max_series" in line, line
    assert notice.startswith("note: 1 of 1 jobs do not opt in") and "(x)" in notice, notice


# --- config errors name their true origin once (issue 34) ------------------------------------------------------


def test_a_team_default_that_breaks_a_rule_for_several_jobs_is_reported_once_at_defaults_toml(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        make_job(tmp_path, TWO_LINES.format(cron="cron(0/15 * * * ? *)"), name=name)
    make_job(tmp_path, TWO_LINES.format(cron="cron(0 * * * ? *)"), name="hourly")  # not broken by it
    (tmp_path / "jobs" / "defaults.toml").write_text("racers = 3\nlambda_timeout_s = 890\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_jobs(tmp_path / "jobs", StackSettings(), root=tmp_path)
    (problem,) = caught.value.problems
    assert problem.startswith("jobs/defaults.toml:2: lambda_timeout_s = 890 (team default) breaks a rule for 3 jobs")
    assert "(a, b, c): max_slot_age_s (not set; derived default 900" in problem and "hourly" not in problem
    # a job that sets the key itself keeps its own line
    make_job(tmp_path, TWO_LINES.format(cron="cron(0/15 * * * ? *)") + "lambda_timeout_s = 890\n", name="own")
    with pytest.raises(ConfigError) as caught:
        load_jobs(tmp_path / "jobs", StackSettings(), root=tmp_path)
    assert any(p.startswith("jobs/own/job.toml") for p in caught.value.problems)
    assert "breaks a rule for 3 jobs (a, b, c)" in caught.value.problems[0]


def test_a_top_level_key_after_a_table_header_is_explained(tmp_path: Path) -> None:
    toml = TWO_LINES.format(cron="cron(0/30 * * * ? *)") + "[alarms]\ndata_scanned_bytes = 10\nracers = 4\n"
    make_job(tmp_path, toml)
    with pytest.raises(ConfigError) as caught:
        load_jobs(tmp_path / "jobs", StackSettings(), root=tmp_path)
    (problem,) = caught.value.problems
    assert problem.startswith("jobs/x/job.toml:5: alarms.racers: unknown key in [alarms]; `racers` is a top-level key")
    assert "move it above [alarms]" in problem
    # a key that is no key at all keeps the "did you mean"
    make_job(tmp_path, TWO_LINES.format(cron="cron(0/30 * * * ? *)") + "[alarms]\nquery_duration = 5\n", name="y")
    with pytest.raises(ConfigError) as caught:
        load_jobs(tmp_path / "jobs", StackSettings(), root=tmp_path)
    assert any(
        "alarms.query_duration: unknown key; did you mean query_duration_ms?" in p for p in caught.value.problems
    )


def test_a_byte_order_mark_is_accepted_and_other_encodings_are_named(tmp_path: Path) -> None:
    folder = make_job(tmp_path)
    (folder / "job.toml").write_bytes(b"\xef\xbb\xbf" + TWO_LINES.format(cron="cron(0/30 * * * ? *)").encode())
    (folder / "query.sql").write_bytes(b"\xef\xbb\xbf" + SQL.encode())
    (job,) = load_jobs(tmp_path / "jobs", StackSettings(), root=tmp_path)
    assert not job.query.text.startswith("\ufeff")
    (folder / "job.toml").write_text(TWO_LINES.format(cron="cron(0/30 * * * ? *)"), encoding="utf-16")
    with pytest.raises(ConfigError) as caught:
        load_jobs(tmp_path / "jobs", StackSettings(), root=tmp_path)
    assert list(caught.value.problems) == [
        "jobs/x/job.toml: not a valid TOML file: saved as UTF-16 (its byte order mark says so): save it as UTF-8"
    ]
    (folder / "job.toml").write_text(TWO_LINES.format(cron="cron(0/30 * * * ? *)"), encoding="utf-8")
    (folder / "query.sql").write_bytes(b"SELECT 1\n-- caf\xe9\n")
    with pytest.raises(ConfigError) as caught:
        load_jobs(tmp_path / "jobs", StackSettings(), root=tmp_path)
    expected = "not UTF-8: byte 0xe9 on line 2 (saved as Latin-1 or Windows-1252?): save it as UTF-8"
    assert list(caught.value.problems) == [f"jobs/x/query.sql: cannot be read: {expected}"]
