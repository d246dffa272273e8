"""Synth-time validation of the cdk.json "job" context: new keys, relationships between keys, and the
schedule's period. Every message names the key (and the other key of a relationship)."""

from __future__ import annotations

from typing import Any

import pytest

from stacks.config import (
    ASYNC_FIRST_RETRY_DELAY_S,
    CLOCK_SKEW_ALLOWANCE_S,
    AlarmsConfig,
    ConfigError,
    JobConfig,
    ValueMetricsConfig,
    sql_output_columns,
)
from stacks.schedule import CronError, CronPeriod, cron_period


def _problems(job_context: dict[str, Any], **override: Any) -> list[str]:
    with pytest.raises(ConfigError) as excinfo:
        JobConfig.from_context({**job_context, **override})
    return list(excinfo.value.problems)


def _only_problem(job_context: dict[str, Any], **override: Any) -> str:
    problems = _problems(job_context, **override)
    assert len(problems) == 1, problems
    return problems[0]


def test_cdk_json_sets_the_new_keys(config: JobConfig) -> None:
    assert config.bytes_scanned_cutoff_per_query == 1_000_000_000
    assert config.alarms == AlarmsConfig(data_scanned_bytes=100_000_000, query_duration_ms=60_000, email=None)
    assert config.value_metrics == ValueMetricsConfig(
        columns=("flights", "delayed_departures", "avg_dep_delay_min"), dimensions=("origin",), max_series=10
    )
    assert config.period == CronPeriod(shortest_s=1800, longest_s=1800)


@pytest.mark.parametrize(
    ("override", "prefix", "fragment"),
    [
        # relationships
        (
            {"heartbeat_interval_s": 20, "lease_duration_s": 45},
            "context job.heartbeat_interval_s:",
            f"must be below (job.lease_duration_s - {CLOCK_SKEW_ALLOWANCE_S} s clock skew allowance) / 2 = 20 s",
        ),
        (
            {"lease_duration_s": 56, "heartbeat_interval_s": 10},
            "context job.lease_duration_s:",
            f"must be at most {ASYNC_FIRST_RETRY_DELAY_S - CLOCK_SKEW_ALLOWANCE_S} s: Lambda's first async retry",
        ),
        (
            {"schedule_expression": "cron(0/5 * * * ? *)", "max_slot_age_s": 300, "lambda_timeout_s": 250},
            "context job.max_slot_age_s:",
            "must be at least job.lambda_timeout_s + 60 s = 310 s, or Lambda drops the first async retry",
        ),
        (
            {"max_slot_age_s": 3600},
            "context job.max_slot_age_s:",
            "must not exceed the schedule's period",
        ),
        (
            {"lambda_timeout_s": 20, "max_slot_age_s": 600},
            "context job.lambda_timeout_s:",
            "must be longer than job.heartbeat_interval_s + 5 s commit reserve = 20 s",
        ),
        (
            {"alarms": {"data_scanned_bytes": 2_000_000_000, "query_duration_ms": 1000}},
            "context job.alarms.data_scanned_bytes:",
            "must be below job.bytes_scanned_cutoff_per_query (1000000000)",
        ),
        (
            {"value_metrics": {"columns": ["flights", "flihgts"], "dimensions": ["origin"]}},
            "context job.value_metrics.columns:",
            "must name output columns of job.sql (origin, flights, delayed_departures, cancelled, "
            "avg_dep_delay_min, p90_arr_delay_min, worst_delay_dest), got unknown flihgts",
        ),
        (
            {"value_metrics": {"columns": ["flights"], "dimensions": ["carrier"]}},
            "context job.value_metrics.dimensions:",
            "got unknown carrier",
        ),
        (
            {"value_metrics": {"columns": ["flights"], "dimensions": ["flights"]}},
            "context job.value_metrics.dimensions:",
            "must not repeat a value column",
        ),
        # single keys
        ({"schedule_expression": "cron(0 0 1 1 ? 2030)"}, "context job.schedule_expression:", "not a recurring"),
        ({"schedule_expression": "cron(70 * * * ? *)"}, "context job.schedule_expression:", "outside 0..59"),
        ({"bytes_scanned_cutoff_per_query": 9_999_999}, "context job.bytes_scanned_cutoff_per_query:", "from 10000000"),
        ({"alarms": {"data_scanned_bytes": 1}}, "context job.alarms.query_duration_ms:", "missing; required"),
        (
            {"alarms": {"data_scanned_bytes": 1, "query_duration_ms": 1, "email": "ops"}},
            "context job.alarms.email:",
            "must be an email address (or null for no subscription), got 'ops'",
        ),
        (
            {"alarms": {"data_scanned_bytes": 1, "query_duration_ms": 1, "sms": "+1"}},
            "context job.alarms.sms:",
            "unknown key; allowed keys: data_scanned_bytes, query_duration_ms, email",
        ),
        ({"alarms": 5}, "context job.alarms:", "must be an object with keys"),
        (
            {"value_metrics": {"columns": ["flights"], "max_series": 51}},
            "context job.value_metrics.max_series:",
            "must be an integer from 1 to 50, got 51",
        ),
        (
            {"value_metrics": {"columns": []}},
            "context job.value_metrics.columns:",
            "a list of 1 to 100 distinct lowercase column names",
        ),
        (
            {"value_metrics": {"columns": ["Flights"]}},
            "context job.value_metrics.columns:",
            "got ['Flights']",
        ),
    ],
)
def test_invalid_configuration_names_the_keys(
    job_context: dict[str, Any], override: dict[str, Any], prefix: str, fragment: str
) -> None:
    message = _only_problem(job_context, **override)
    assert message.startswith(prefix), message
    assert fragment in message, message


def test_a_period_shorter_than_the_lambda_timeout_is_an_error(job_context: dict[str, Any]) -> None:
    problems = _problems(
        job_context, schedule_expression="cron(0/5 * * * ? *)", max_slot_age_s=300, lambda_timeout_s=400
    )
    assert (
        "context job.lambda_timeout_s: must not exceed the schedule's period (job.schedule_expression "
        "'cron(0/5 * * * ? *)' fires 300 s apart), or a slot can still run when the next one starts, got 400"
    ) in problems


def test_rate_schedules_are_rejected(job_context: dict[str, Any]) -> None:
    message = _only_problem(job_context, schedule_expression="rate(30 minutes)")
    assert message.startswith("context job.schedule_expression: must be a cron(...) expression")
    assert "racers' schedules would not share a scheduled time" in message


def test_max_series_is_documented_as_billed(job_context: dict[str, Any]) -> None:
    from stacks.config import ValueMetricsConfig

    assert "billed custom metric" in (ValueMetricsConfig.__doc__ or "")
    message = _only_problem(job_context, value_metrics={"columns": ["flights"], "max_series": 0})
    assert "from 1 to 50" in message


def test_a_relationship_is_skipped_when_one_of_its_keys_is_invalid(job_context: dict[str, Any]) -> None:
    """One message per actual mistake: an invalid lease does not also report the heartbeat rule."""
    problems = _problems(job_context, lease_duration_s="45")
    assert [problem.split(":")[0] for problem in problems] == ["context job.lease_duration_s"]


def test_value_metrics_are_optional(job_context: dict[str, Any]) -> None:
    job = {key: value for key, value in job_context.items() if key != "value_metrics"}
    assert JobConfig.from_context(job).value_metrics is None
    assert JobConfig.from_context({**job_context, "value_metrics": None}).value_metrics is None


def test_value_metric_defaults(job_context: dict[str, Any]) -> None:
    config = JobConfig.from_context({**job_context, "value_metrics": {"columns": ["flights"]}})
    assert config.value_metrics == ValueMetricsConfig(columns=("flights",), dimensions=(), max_series=10)


def test_alarm_email_is_accepted(job_context: dict[str, Any]) -> None:
    alarms = {"data_scanned_bytes": 1, "query_duration_ms": 1, "email": "ops@example.com"}
    assert JobConfig.from_context({**job_context, "alarms": alarms}).alarms.email == "ops@example.com"


@pytest.mark.parametrize(
    ("sql", "columns"),
    [
        ("SELECT a, b AS c FROM t WHERE x < ? AND y > ?", ("a", "c")),
        ('SELECT t.a, count(*) AS "n", max_by(x, y) as top FROM t', ("a", "n", "top")),
        ("select distinct a from t", ("a",)),
        ("SELECT f(a, b) AS s, 'from' AS w FROM t", ("s", "w")),
        ("WITH s AS (SELECT 1 AS one FROM t) SELECT x FROM s", ("x",)),  # the outer SELECT
        ("SELECT * FROM t", None),
        ("SELECT a + 1 FROM t", None),
    ],
)
def test_sql_output_columns(sql: str, columns: tuple[str, ...] | None) -> None:
    assert sql_output_columns(sql) == columns


@pytest.mark.parametrize(
    ("expression", "shortest_s", "longest_s"),
    [
        ("cron(0/30 * * * ? *)", 1800, 1800),
        ("cron(* * * * ? *)", 60, 60),
        ("cron(5,20 */2 * * ? *)", 900, 6300),
        ("cron(0 12 ? * MON-FRI *)", 86400, 3 * 86400),
        ("cron(0 12 * * ? *)", 86400, 86400),
        ("cron(0 0,23 ? * MON *)", 23 * 3600, 6 * 86400 + 3600),
        ("cron(15 10 L * ? *)", 28 * 86400, 31 * 86400),
        ("cron(0 9 ? * 6#3 *)", 28 * 86400, 35 * 86400),
        ("cron(0 9 ? * 2L *)", 28 * 86400, 35 * 86400),
    ],
)
def test_cron_period(expression: str, shortest_s: int, longest_s: int) -> None:
    period = cron_period(expression)
    assert period.longest_s == longest_s
    assert period.shortest_s <= shortest_s
    if "L" not in expression:
        assert period.shortest_s == shortest_s


@pytest.mark.parametrize(
    "expression", ["rate(5 minutes)", "cron(0 0 * *)", "cron(0 25 * * ? *)", "cron(0 0 ? * FOO *)", "cron(5-1 * * * ? *)"]
)
def test_cron_period_rejects_what_it_cannot_evaluate(expression: str) -> None:
    with pytest.raises(CronError):
        cron_period(expression)


@pytest.mark.parametrize("value", [-1, 10_081, "60", 1.5])
def test_result_reuse_age_must_be_athenas_range(job_context: dict[str, Any], value: object) -> None:
    problem = _only_problem(job_context, result_reuse_max_age_min=value)
    assert problem.startswith("context job.result_reuse_max_age_min: must be an integer from 0 to 10080")


def test_result_reuse_is_off_unless_configured(config: JobConfig) -> None:
    assert config.result_reuse_max_age_min == 0
