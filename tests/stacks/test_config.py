"""Synth-time validation of the cdk.json "job" context: new keys, relationships between keys, and the
schedule's period. Every message names the key (and the other key of a relationship)."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from athena_refresh import contract
from athena_refresh.catalog import CatalogQuery, catalog_document
from athena_refresh.checks import ConfigError
from athena_refresh.errors import ConfigurationError
from athena_refresh.job_rules import ASYNC_FIRST_RETRY_DELAY_S, CLOCK_SKEW_ALLOWANCE_S
from athena_refresh.jobspec import (
    MAX_ALARM_DATA_SCANNED_BYTES,
    MAX_ALARM_QUERY_DURATION_MS,
    MAX_BYTES_SCANNED_CUTOFF,
    MAX_LAMBDA_EVENT_AGE_S,
    MAX_LAMBDA_MEMORY_MB,
    MAX_LAMBDA_TIMEOUT_S,
    MAX_RACERS,
    MIN_BYTES_SCANNED_CUTOFF,
    MIN_LAMBDA_MEMORY_MB,
    AlarmsSpec,
    JobSpec,
    ValueMetricsSpec,
    as_raw,
)
from athena_refresh.settings import Settings
from slotlock.schedule import CronError, CronPeriod, cron_period
from stacks import REPO_ROOT
from stacks.job_groups import MAX_JOB_STACKS
from stacks.query_sql import output_columns
from tests.sample_jobs import spec_from_context
from tests.stacks.test_capacity_settings import CAPACITY_NUMBERS


def _problems(job_context: dict[str, Any], **override: Any) -> list[str]:
    with pytest.raises(ConfigError) as excinfo:
        spec_from_context({**job_context, **override})
    return list(excinfo.value.problems)


def _only_problem(job_context: dict[str, Any], **override: Any) -> str:
    problems = _problems(job_context, **override)
    assert len(problems) == 1, problems
    return problems[0]


def test_cdk_json_sets_the_new_keys(config: JobSpec) -> None:
    assert config.bytes_scanned_cutoff_per_query == 1_000_000_000
    assert config.alarms == AlarmsSpec(data_scanned_bytes=100_000_000, query_duration_ms=60_000, email=None)
    assert config.value_metrics == ValueMetricsSpec(
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
            (
                f"must be an integer from 1 to {ASYNC_FIRST_RETRY_DELAY_S - CLOCK_SKEW_ALLOWANCE_S} (Lambda's first "
                "async retry"
            ),
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
            (
                "must name output columns of job.sql (origin, flights, delayed_departures, cancelled, "
                "avg_dep_delay_min, p90_arr_delay_min, worst_delay_dest), got unknown flihgts"
            ),
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
    from athena_refresh.jobspec import ValueMetricsSpec

    assert "billed custom metric" in (ValueMetricsSpec.__doc__ or "")
    message = _only_problem(job_context, value_metrics={"columns": ["flights"], "max_series": 0})
    assert "from 1 to 50" in message


def test_a_relationship_is_skipped_when_one_of_its_keys_is_invalid(job_context: dict[str, Any]) -> None:
    """One message per actual mistake: an invalid lease does not also report the heartbeat rule."""
    problems = _problems(job_context, lease_duration_s="45")
    assert [problem.split(":")[0] for problem in problems] == ["context job.lease_duration_s"]


def test_value_metrics_are_optional(job_context: dict[str, Any]) -> None:
    job = {key: value for key, value in job_context.items() if key != "value_metrics"}
    assert spec_from_context(job).value_metrics is None
    assert spec_from_context({**job_context, "value_metrics": None}).value_metrics is None


def test_value_metric_defaults(job_context: dict[str, Any]) -> None:
    config = spec_from_context({**job_context, "value_metrics": {"columns": ["flights"]}})
    assert config.value_metrics == ValueMetricsSpec(columns=("flights",), dimensions=(), max_series=10)


def test_alarm_email_is_accepted(job_context: dict[str, Any]) -> None:
    alarms = {"data_scanned_bytes": 1, "query_duration_ms": 1, "email": "ops@example.com"}
    assert spec_from_context({**job_context, "alarms": alarms}).alarms.email == "ops@example.com"


@pytest.mark.parametrize(
    ("sql", "columns"),
    [
        ("SELECT a, b AS c FROM t WHERE x < ? AND y > ?", ("a", "c")),
        ('SELECT t.a, count(*) AS "n", max_by(x, y) as top FROM t', ("a", "n", "top")),
        ("select distinct a from t", ("a",)),
        ("SELECT f(a, b) AS s, 'from' AS w FROM t", ("s", "w")),
        ("WITH s AS (SELECT 1 AS one FROM t) SELECT x FROM s", ("x",)),  # the outer SELECT
        ("SELECT * FROM t", None),
        ("SELECT a + 1 FROM t", ("_col0",)),  # Athena's name for an unnamed expression
        ("-- a comment first\nSELECT a FROM t", ("a",)),
        ("SELECT FROM WHERE", None),  # not a query: no columns known
    ],
)
def test_sql_output_columns(sql: str, columns: tuple[str, ...] | None) -> None:
    assert output_columns(sql) == columns


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
    "expression",
    ["rate(5 minutes)", "cron(0 0 * *)", "cron(0 25 * * ? *)", "cron(0 0 ? * FOO *)", "cron(5-1 * * * ? *)"],
)
def test_cron_period_rejects_what_it_cannot_evaluate(expression: str) -> None:
    with pytest.raises(CronError):
        cron_period(expression)


@pytest.mark.parametrize("value", [-1, 10_081, "60", 1.5])
def test_result_reuse_age_must_be_athenas_range(job_context: dict[str, Any], value: object) -> None:
    problem = _only_problem(job_context, result_reuse_max_age_min=value)
    assert problem.startswith("context job.result_reuse_max_age_min: must be an integer from 0 to 10080")


def test_result_reuse_is_off_unless_configured(config: JobSpec) -> None:
    assert config.result_reuse_max_age_min == 0


# --- bounds of every number (issue rule 6) ------------------------------------------------------------

#: A query for the runtime's inline form (exactly two ?: the window's start and end).
#: The deployment's wiring, as the stack sets it in the function's environment (names only matter here).
WIRING = {
    contract.ENV_JOB_NAME: "flights-dashboard",
    contract.ENV_LOCK_TABLE_NAME: "locks",
    contract.ENV_RESULTS_TABLE_NAME: "results",
    contract.ENV_ATHENA_WORKGROUP: "wg",
    contract.ENV_ATHENA_DATABASE: "db",
}
#: Context keys whose runtime variable has bounds in contract.NUMERIC_BOUNDS, with that variable.
SHARED = {
    "lease_duration_s": contract.ENV_LEASE_DURATION_S,
    "heartbeat_interval_s": contract.ENV_HEARTBEAT_INTERVAL_S,
    "max_slot_age_s": contract.ENV_MAX_SLOT_AGE_S,
    "max_slot_lead_s": contract.ENV_MAX_SLOT_LEAD_S,
    "history_ttl_s": contract.ENV_HISTORY_TTL_S,
    "max_query_attempts": contract.ENV_MAX_QUERY_ATTEMPTS,
    "window_s": contract.ENV_WINDOW_S,
    "data_year": contract.ENV_DATA_YEAR,
    "result_reuse_max_age_min": contract.ENV_RESULT_REUSE_MAX_AGE_MIN,
    "value_metrics.max_series": contract.ENV_VALUE_METRIC_MAX_SERIES,
    "alarms.data_scanned_bytes": contract.ENV_ALARM_DATA_SCANNED_BYTES,
    "alarms.query_duration_ms": contract.ENV_ALARM_QUERY_DURATION_MS,
}
#: Bounds the stack alone checks (AWS limits of resources the stack creates).
STACK_ONLY = {
    "racers": (1, MAX_RACERS),
    "lambda_timeout_s": (1, MAX_LAMBDA_TIMEOUT_S),
    "lambda_memory_mb": (MIN_LAMBDA_MEMORY_MB, MAX_LAMBDA_MEMORY_MB),
    "bytes_scanned_cutoff_per_query": (MIN_BYTES_SCANNED_CUTOFF, MAX_BYTES_SCANNED_CUTOFF),
    "stack_group": (0, MAX_JOB_STACKS - 1),  # and below stack.job_stacks (stacks.jobs checks it with the file)
    "freshness_s": (contract.MIN_FRESHNESS_S, contract.MAX_FRESHNESS_S),  # the watchdog's grace (synth only)
}


def stack_bounds(key: str) -> tuple[int, int]:
    """The integer range a numeric context key must have: a shared key's is the integers inside the runtime's
    range; max_slot_age_s is further capped by Lambda's MaximumEventAgeInSeconds (the stack sets it from the key)."""
    if key in STACK_ONLY:
        return STACK_ONLY[key]
    lo, hi = contract.NUMERIC_BOUNDS[SHARED[key]]
    if key == "max_slot_age_s":
        hi = min(hi, MAX_LAMBDA_EVENT_AGE_S)
    return math.ceil(lo), math.floor(hi)


def with_key(job_context: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """cdk.json's job block with ``key`` (``object.sub`` for a key of an object) set to ``value``."""
    if key.startswith("alarms."):
        return {**job_context, "alarms": {**job_context["alarms"], key.split(".")[1]: value}}
    if key.startswith("value_metrics."):
        return {**job_context, "value_metrics": {**job_context["value_metrics"], key.split(".")[1]: value}}
    return {**job_context, key: value}


def range_problems(job: dict[str, Any], key: str) -> list[str]:
    """The problems about ``key``'s own type and range (relationship problems are another rule's)."""
    try:
        spec_from_context(job)
    except ConfigError as error:
        return [problem for problem in error.problems if problem.startswith(f"context job.{key}: must be an integer")]
    return []


def numeric_key_cases() -> list[Any]:
    cases = []
    for key in [*SHARED, *STACK_ONLY]:
        lo, hi = stack_bounds(key)
        for label, value, accepted in [
            ("below-min", lo - 1, False),
            ("min", lo, True),
            ("max", hi, True),
            ("above-max", hi + 1, False),
            ("10e12", 10**12, hi >= 10**12),
            ("1e308-text", "1e308", False),
            ("1e308", 1e308, False),
            ("inf", math.inf, False),
        ]:
            cases.append(pytest.param(key, value, accepted, id=f"{key}-{label}"))
    return cases


def test_every_numeric_key_is_classified(job_context: dict[str, Any]) -> None:
    # GIVEN the job's fields / WHEN the numbers among them are listed / THEN each one has its bounds here
    numeric = {field.name for field in dataclasses.fields(JobSpec) if field.type in ("int", "int | None")}
    numeric |= {f"alarms.{f.name}" for f in dataclasses.fields(AlarmsSpec) if f.type == "int"}
    numeric |= {f"value_metrics.{f.name}" for f in dataclasses.fields(ValueMetricsSpec) if f.type == "int"}
    assert numeric == set(SHARED) | set(STACK_ONLY)
    # ... and the stack-wide numbers the runtime reads too (context stack.capacity: tests/stacks/test_capacity.py)
    assert set(SHARED.values()) | set(CAPACITY_NUMBERS.values()) == set(contract.NUMERIC_BOUNDS)


@pytest.mark.parametrize(("key", "value", "accepted"), numeric_key_cases())
def test_every_numeric_key_is_checked_against_both_of_its_bounds(
    job_context: dict[str, Any], key: str, value: Any, accepted: bool
) -> None:
    # GIVEN cdk.json with one numeric key at, just outside, or far outside its range
    job = with_key(job_context, key, value)
    lo, hi = stack_bounds(key)

    # WHEN the context is validated
    problems = range_problems(job, key)

    # THEN a value in range passes the key's own check; any other is refused naming the key and the range
    if accepted:
        assert problems == []
    else:
        [problem] = problems
        assert problem.startswith(f"context job.{key}: must be an integer from {lo} to {hi}")
        assert problem.endswith(f", got {value!r}")


def test_an_absurd_window_is_refused_at_synth_naming_the_key_and_range(job_context: dict[str, Any]) -> None:
    # GIVEN / WHEN a window of 10**12 s
    message = _only_problem(job_context, window_s=10**12)
    # THEN the existing message style names the key and the range
    assert message == f"context job.window_s: must be an integer from 60 to {366 * 86400}, got 1000000000000"


def read_back(tmp_path: Path, raw: dict[str, Any], env: dict[str, str] | None = None) -> Settings:
    """The settings the cold start reads from a catalog holding the spec ``raw`` (typed JSON, as the stack writes
    it) beside ``env`` (default: the wiring). :raises ConfigurationError: as ``Settings.from_env``."""
    entry = {"spec": raw, "parameters": ["window_start", "window_end"], "constants": {}}
    path = tmp_path / "job_catalog.json"
    path.write_text(json.dumps({"format": 2, "jobs": {raw["job_name"]: entry}}), encoding="utf-8")
    return Settings.from_env(env or WIRING, catalog_path=path)


@pytest.mark.parametrize("key", list(SHARED))
def test_the_stack_and_the_runtime_share_each_numbers_bounds(
    job_context: dict[str, Any], key: str, tmp_path: Path
) -> None:
    # GIVEN a key that the stack checks at synth and the runtime checks again at cold start: in the catalog's spec
    # (the same JobSpec rules), or for a local run's tuning in the environment (the same contract bounds)
    variable = SHARED[key]
    runtime_lo, runtime_hi = contract.NUMERIC_BOUNDS[variable]
    lo, hi = stack_bounds(key)
    spec = as_raw(spec_from_context(job_context))
    partner = {contract.ENV_LEASE_DURATION_S: str(contract.MAX_LEASE_DURATION_S)}  # heartbeat < lease / 2
    if key == "lease_duration_s":
        partner = {contract.ENV_HEARTBEAT_INTERVAL_S: "0.3"}  # below half the shortest lease

    def runtime_accepts(value: float) -> bool:
        raw, env = copy.deepcopy(spec), dict(WIRING)
        if variable in contract.LOCAL_TUNING_ENV_VARS:
            env |= {**partner, variable: str(value)}
        elif "." in key:
            top, sub = key.split(".")
            raw[top][sub] = value
            raw["bytes_scanned_cutoff_per_query"] = MAX_BYTES_SCANNED_CUTOFF  # a byte threshold stays below it
        else:
            raw[key] = value
        try:
            read_back(tmp_path, raw, env)
        except ConfigurationError as error:
            assert error.key == variable or f"spec.{key}: must be an integer" in str(error), error
            return False
        return True

    # WHEN each side is asked at the stack's bounds and just outside them
    # THEN the stack's range is the integers of the runtime's range (same contract constants): every value
    # the stack deploys, the runtime accepts, and the runtime refuses the integers the stack refuses ...
    assert range_problems(with_key(job_context, key, lo), key) == []
    assert range_problems(with_key(job_context, key, hi), key) == []
    assert range_problems(with_key(job_context, key, lo - 1), key)
    assert range_problems(with_key(job_context, key, hi + 1), key)
    assert runtime_accepts(lo) and runtime_accepts(hi)
    assert not runtime_accepts(runtime_lo - 1) and not runtime_accepts(runtime_hi + 1)
    assert lo == math.ceil(runtime_lo)  # equal, or a fractional runtime minimum (heartbeat 0.1 s) rounded up
    # ... except the maximum slot age: Lambda caps the deployed value at 6 h, while the runtime also serves
    # the local harnesses, which replay a backlog of days (docs/reliability.md, local/chaos/harness.py)
    if key == "max_slot_age_s":
        assert hi == MAX_LAMBDA_EVENT_AGE_S < runtime_hi
    else:
        assert hi == runtime_hi


def test_the_catalog_carries_the_slot_lead(job_context: dict[str, Any], config: JobSpec, tmp_path: Path) -> None:
    # GIVEN cdk.json (no max_slot_lead_s: the default) and a configured lead
    configured = spec_from_context({**job_context, "max_slot_lead_s": 2})

    # WHEN each spec is written into the catalog and read back as the runtime does
    # THEN the spec carries the key, and the runtime reads it as seconds
    assert config.max_slot_lead_s == contract.DEFAULT_MAX_SLOT_LEAD_S == 5
    assert read_back(tmp_path, as_raw(config)).max_slot_lead_s == 5.0
    assert read_back(tmp_path, as_raw(configured)).max_slot_lead_s == 2.0
    # AND the function's environment carries the wiring only (the capacity budget is deployment-wide:
    # CapacitySettings.runtime_environment, tests/stacks/test_capacity.py)
    wiring = config.wiring_environment(lock_table_name="locks", results_table_name="results")
    assert set(wiring) >= set(contract.WIRING_ENV_VARS) - {
        contract.ENV_ATHENA_CATALOG,
        contract.ENV_RESULTS_BUCKET_NAME,
    }
    assert not set(wiring) & set(contract.JOB_SETTING_ENV_VARS)


def test_the_catalog_carries_the_alarm_thresholds_the_runtime_compares_with(config: JobSpec, tmp_path: Path) -> None:
    # GIVEN a job's [alarms] thresholds
    alarms = config.alarms

    # WHEN its spec is written for the job catalog, and read back as the runtime does
    document = catalog_document({config.job_name: CatalogQuery(config.sql, spec=config)})
    runtime = read_back(tmp_path, document["jobs"][config.job_name]["spec"])

    # THEN the spec's alarms carry them, as integers, and the runtime compares with the same numbers
    assert document["jobs"][config.job_name]["spec"]["alarms"]["data_scanned_bytes"] == alarms.data_scanned_bytes
    assert document["jobs"][config.job_name]["spec"]["alarms"]["query_duration_ms"] == alarms.query_duration_ms
    assert (runtime.alarm_data_scanned_bytes, runtime.alarm_query_duration_ms) == (
        alarms.data_scanned_bytes,
        alarms.query_duration_ms,
    )
    # AND their bounds are the contract's (the byte threshold stays below the largest workgroup cutoff)
    assert MAX_ALARM_DATA_SCANNED_BYTES == contract.MAX_ALARM_DATA_SCANNED_BYTES == MAX_BYTES_SCANNED_CUTOFF - 1
    assert MAX_ALARM_QUERY_DURATION_MS == contract.MAX_ALARM_QUERY_DURATION_MS


@pytest.mark.parametrize("value", [-1, 61, 2.5, "5"])
def test_max_slot_lead_is_whole_seconds_from_0_to_60(job_context: dict[str, Any], value: Any) -> None:
    message = _only_problem(job_context, max_slot_lead_s=value)
    assert message == f"context job.max_slot_lead_s: must be an integer from 0 to 60, got {value!r}"


@pytest.mark.parametrize("key", [*SHARED, *STACK_ONLY])
def test_the_configuration_table_lists_each_numbers_range(key: str) -> None:
    # GIVEN the job.toml table of docs/configuration.md (the README links to it)
    doc = (REPO_ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = doc.split("\n## Jobs as folders\n", 1)[1].split("\n## ", 1)[0]
    table, _, name = key.rpartition(".")
    # a key of a TOML table is written `[alarms]` `name`; value_metrics' keys share its one `[value_metrics]` row
    if not table:
        first = f"`{name}`"
    elif table == "alarms":
        first = f"`[alarms]` `{name}`"
    else:
        first = f"`[{table}]`"

    # WHEN the key's row is looked up
    [row] = [line for line in section.splitlines() if line.startswith("|") and first in line.split("|")[1]]

    # THEN it shows the range the stack checks
    lo, hi = stack_bounds(key)
    assert f"{lo}..{hi}" in row, row


@pytest.mark.parametrize(
    ("expression", "timezone", "shortest_s", "longest_s"),
    [
        # Daily at 06:00 local: 23 h on the spring-forward day, 25 h on the fall-back day.
        ("cron(0 6 * * ? *)", "America/New_York", 23 * 3600, 25 * 3600),
        ("cron(15 6 * * ? *)", "America/New_York", 23 * 3600, 25 * 3600),  # the carrier-on-time sample
        # 02:30 does not exist on the spring-forward day in Berlin: that firing is skipped (47 h).
        ("cron(30 2 * * ? *)", "Europe/Berlin", 24 * 3600, 47 * 3600),
        # Every 30 minutes: the repeated hour fires once, so one gap is 90 minutes; none gets shorter.
        ("cron(0/30 * * * ? *)", "America/New_York", 1800, 5400),
        ("cron(15 0/6 * * ? *)", "Europe/Berlin", 5 * 3600, 7 * 3600),
        ("cron(0 6 * * ? *)", "Asia/Tokyo", 86400, 86400),  # no daylight saving: no change
        ("cron(0 6 * * ? *)", "UTC", 86400, 86400),
    ],
)
def test_cron_period_in_a_time_zone_follows_the_schedulers_daylight_saving_rules(
    expression: str, timezone: str, shortest_s: int, longest_s: int
) -> None:
    # GIVEN a cron expression in a time zone / WHEN its period is computed on UTC instants
    # THEN the gaps around the changes are the ones EventBridge Scheduler produces
    assert cron_period(expression, timezone) == CronPeriod(shortest_s, longest_s)


def test_an_unknown_time_zone_is_a_cron_error() -> None:
    with pytest.raises(CronError, match="unknown time zone 'Mars/Olympus'"):
        cron_period("cron(0 6 * * ? *)", "Mars/Olympus")


def test_a_daylight_saving_period_sizes_the_jobs_alarms(job_context: dict[str, Any]) -> None:
    # GIVEN a daily job in New York time / WHEN validated / THEN its period is 23 h to 25 h, not 24 h
    config = spec_from_context(
        {**job_context, "schedule_expression": "cron(0 6 * * ? *)", "schedule_timezone": "America/New_York"}
    )
    assert config.period == CronPeriod(23 * 3600, 25 * 3600)
    message = _only_problem(job_context, schedule_timezone="Moon/Base")
    assert message.startswith("context job.schedule_timezone: must be an IANA time zone name")
