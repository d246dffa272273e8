"""A job's settings (:class:`JobConfig`), validated up front; the stack-wide settings are re-exported from
:mod:`stacks.stack_settings` and the value checks from :mod:`stacks.checks`, so ``from stacks.config import ...``
keeps working for every name.

:mod:`stacks.jobs` reads each ``jobs/<job>/job.toml`` and hands its keys to :meth:`JobConfig.from_context`.
Every problem names its file (or context key) and the allowed values, for example
``jobs/flights-dashboard/job.toml: racers: must be an integer from 1 to 20, got 0`` (:class:`Labels`). All
problems are collected and raised together in one :class:`ConfigError`, so a broken job folder is fixed in one
round.

Two passes: each key is checked on its own (type, range, syntax: :func:`check_key`, here), then the
relationships between keys that make the schedule, the lease and Lambda's retries work together
(:func:`stacks.job_relationships.relationship_problems`); a relationship is only checked when every key it
involves passed its own check.

This module reads no environment variable and calls no AWS API: ``app.py`` passes the parsed context in.

The schema (the dataclasses and one check per key) is read in one place, each check next to its message; the
bounds shared with the runtime live in ``athena_refresh.contract``.
"""

from __future__ import annotations

import functools
import json
import re
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any

from athena_refresh import contract  # constants only (stdlib), installed with the project
from slotlock import table as lock_table
from slotlock.schedule import CronPeriod, cron_period
from stacks import checks, stack_settings
from stacks.checks import (
    GLUE_NAME,
    GLUE_NAME_RULE,
    REMOVAL_POLICIES,
    WORKGROUP_NAME,
    WORKGROUP_NAME_RULE,
    ConfigError,
    Invalid,
    InvalidKeys,
    Labels,
    bounded,
    email,
    integer,
    named,
    object_of,
    one_of,
    optional,
)
from stacks.job_groups import MAX_JOB_STACKS
from stacks.job_relationships import ASYNC_FIRST_RETRY_DELAY_S, CLOCK_SKEW_ALLOWANCE_S, relationship_problems

# Re-exported: the stack-wide settings and the problem formatting, which many modules import from here.
format_problems = checks.format_problems
STACK_KEY = stack_settings.STACK_KEY
MAX_API_THROTTLE_RATE_LIMIT = stack_settings.MAX_API_THROTTLE_RATE_LIMIT
MAX_API_THROTTLE_BURST_LIMIT = stack_settings.MAX_API_THROTTLE_BURST_LIMIT
StackSettings = stack_settings.StackSettings
CapacitySettings = stack_settings.CapacitySettings
load_context = stack_settings.load_context
load_app_options = stack_settings.load_app_options

CONTEXT_KEY = "job"  # the context key holding the job block

# Bounds imposed by AWS (or by the design), named so the messages and the checks share them. A bound the
# runtime also checks (``Settings.from_env``) lives once in ``athena_refresh.contract``; these are the
# stack's own.
MAX_RACERS = 20  # Scheduler schedules per period: each racer is a billed invocation and a DynamoDB write
MIN_EVENT_AGE_S = contract.MIN_MAX_SLOT_AGE_S  # Lambda async MaximumEventAgeInSeconds (and Scheduler) minimum
MAX_LAMBDA_EVENT_AGE_S = 21_600  # Lambda async MaximumEventAgeInSeconds maximum (6 h)
MAX_LAMBDA_TIMEOUT_S = 900
MIN_LAMBDA_MEMORY_MB = 128
MAX_LAMBDA_MEMORY_MB = 10_240
MAX_QUERY_ATTEMPTS = contract.MAX_MAX_QUERY_ATTEMPTS
# Athena's minimum BytesScannedCutoffPerQuery (the CloudFormation schema's "minimum": 10000000).
MIN_BYTES_SCANNED_CUTOFF = 10_000_000
MAX_BYTES_SCANNED_CUTOFF = 2**63 - 1  # int64 (the API's Long)
MAX_RESULT_REUSE_AGE_MIN = contract.MAX_RESULT_REUSE_MAX_AGE_MIN  # Athena MaxAgeInMinutes maximum (7 days)
# Result values published as metrics (mirrors athena_refresh.settings' limits).
MAX_VALUE_SERIES = contract.MAX_VALUE_METRIC_MAX_SERIES  # each combination is a billed custom metric per column
MAX_VALUE_COLUMNS = 100  # EMF carries at most 100 metrics per log event
MAX_VALUE_DIMENSIONS = 28  # Powertools allows 29 dimensions per metric; "job" is one
# The runtime reads both thresholds too (ALARM_* job settings: ThresholdExceeded), so their bounds are the contract's.
MAX_ALARM_QUERY_DURATION_MS = contract.MAX_ALARM_QUERY_DURATION_MS
#: alarms.data_scanned_bytes must be below bytes_scanned_cutoff_per_query (a relationship), so below int64.
MAX_ALARM_DATA_SCANNED_BYTES = contract.MAX_ALARM_DATA_SCANNED_BYTES  # == MAX_BYTES_SCANNED_CUTOFF - 1


_CRON_FIELDS = "minutes hours day-of-month month day-of-week year"
_JOB_NAME = lock_table.JOB_NAME_PATTERN  # the one job-name rule, shared with the lock and the runtime
_CRON = re.compile(r"cron\((?P<body>[^()]+)\)")
_COLUMN_NAME = re.compile(r"[a-z_][a-z0-9_]{0,254}")  # an Athena result column (lowercase)
CONTEXT_LABELS = Labels(f"context {CONTEXT_KEY}.", f"{CONTEXT_KEY}.")


def _query_sql(value: Any) -> str:
    """The prepared SQL (``stacks.query_sql``: its placeholders and their order are checked there)."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid("a non-empty SQL statement")
    return value


def _timezone(value: Any) -> str:
    """An IANA time zone name known to this machine's zoneinfo database (or the ``tzdata`` package)."""
    if not isinstance(value, str) or value not in _timezones():
        raise Invalid("an IANA time zone name such as UTC, Europe/Berlin or America/New_York")
    return value


@functools.cache
def _timezones() -> frozenset[str]:
    """Every zone name the machine knows (read once: listing them walks the zoneinfo tree, about 30 ms)."""
    return frozenset(zoneinfo.available_timezones() | {"UTC"})


def _cron_expression(value: Any) -> str:
    """An EventBridge Scheduler ``cron(...)`` expression with six fields.

    ``rate(...)`` is rejected: a rate schedule is anchored to its creation time, so the racers'
    schedules (created one after the other) would not share a scheduled time, hence not a slot.
    ``at(...)`` is a one-time schedule, not a recurring job.
    """
    allowed = f"a cron(...) expression with 6 fields ({_CRON_FIELDS})"
    if not isinstance(value, str):
        raise Invalid(allowed)
    text = value.strip()
    if text.startswith("rate("):
        raise Invalid(
            f"{allowed}; rate(...) is rejected because rate schedules are anchored to their creation "
            "time, so the racers' schedules would not share a scheduled time"
        )
    match = _CRON.fullmatch(text)
    if not match:
        raise Invalid(allowed)
    parts = match["body"].split()
    if len(parts) != 6:
        raise Invalid(allowed)
    day_of_month, day_of_week = parts[2], parts[4]
    if (day_of_month == "?") == (day_of_week == "?"):
        raise Invalid(f"{allowed}, with '?' in exactly one of day-of-month and day-of-week")
    return text


def _column_names(*, lo: int, hi: int) -> Callable[[Any], tuple[str, ...]]:
    allowed = f"a list of {lo} to {hi} distinct lowercase column names (letters, digits, '_')"

    def check(value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not lo <= len(value) <= hi:
            raise Invalid(allowed)
        if not all(isinstance(name, str) and _COLUMN_NAME.fullmatch(name) for name in value):
            raise Invalid(allowed)
        if len(set(value)) != len(value):
            raise Invalid(allowed)
        return tuple(value)

    return check


@dataclass(frozen=True, kw_only=True)
class AlarmsConfig:
    """Alarm thresholds (units in the names) and the optional email subscription of the alarm topic."""

    data_scanned_bytes: int  # DataScannedBytes (Maximum per period) above this alarms
    query_duration_ms: int  # QueryDurationMs (Maximum per period) above this alarms
    email: str | None = None


@dataclass(frozen=True, kw_only=True)
class ValueMetricsConfig:
    """Result columns published as CloudWatch metrics (one metric per column), with dimension columns.

    Each distinct combination of dimension values is a billed custom metric per value column; the
    runtime publishes at most ``max_series`` combinations per run.
    """

    columns: tuple[str, ...]
    dimensions: tuple[str, ...] = ()
    max_series: int = 10


_ALARM_CHECKS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "data_scanned_bytes": (integer(1, MAX_ALARM_DATA_SCANNED_BYTES), MISSING),
    "query_duration_ms": (integer(1, MAX_ALARM_QUERY_DURATION_MS), MISSING),
    "email": (optional(email), None),
}
_VALUE_METRIC_CHECKS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "columns": (_column_names(lo=1, hi=MAX_VALUE_COLUMNS), MISSING),
    "dimensions": (_column_names(lo=0, hi=MAX_VALUE_DIMENSIONS), ()),
    "max_series": (bounded(contract.ENV_VALUE_METRIC_MAX_SERIES), 10),
}
#: The sub keys of the object-valued keys, each with its check and default (``MISSING``: required).
_SUB_CHECKS = {"alarms": _ALARM_CHECKS, "value_metrics": _VALUE_METRIC_CHECKS}
_alarms = object_of(_ALARM_CHECKS, AlarmsConfig)
_value_metrics = optional(object_of(_VALUE_METRIC_CHECKS, ValueMetricsConfig))


@dataclass(frozen=True, kw_only=True)
class JobConfig:
    """Validated job settings. Units are in the names; every value is already checked.

    ``period`` (derived, not a key) holds the schedule's shortest and longest gap between slots.
    """

    job_name: str
    schedule_expression: str  # cron(...) in schedule_timezone, shared by every racer
    racers: int  # number of schedules (one Lambda invocation each) racing for a slot
    lease_duration_s: int
    heartbeat_interval_s: int
    max_slot_age_s: int  # also the async invocation's maximum event age
    max_slot_lead_s: int = contract.DEFAULT_MAX_SLOT_LEAD_S  # refuse slots further ahead of the clock (skew)
    history_ttl_s: int
    max_query_attempts: int
    window_s: int
    data_year: int | None  # the sample's year the window is mapped onto; None: the slot's own window
    lambda_timeout_s: int
    lambda_memory_mb: int
    database: str
    table: str
    workgroup: str
    sql: str
    bytes_scanned_cutoff_per_query: int  # Athena cancels a query that scans more (workgroup setting)
    alarms: AlarmsConfig
    result_reuse_max_age_min: int = 0  # Athena query result reuse per query, minutes (0: off)
    value_metrics: ValueMetricsConfig | None = None  # None: no result values as metrics
    removal_policy: str = "RETAIN"  # of the stateful resources: tables, buckets, log groups, queues
    schedule_timezone: str = "UTC"  # IANA name: the cron's wall clock (Scheduler's ScheduleExpressionTimezone)
    #: The job stack this job is pinned to (``stacks.job_groups``); ``None``: a hash of its name decides.
    stack_group: int | None = None

    @property
    def period(self) -> CronPeriod:
        """Gaps between consecutive slots of ``schedule_expression`` in ``schedule_timezone`` (validated)."""
        return cron_period(self.schedule_expression, self.schedule_timezone)

    def runtime_environment(
        self,
        *,
        lock_table_name: str,
        results_table_name: str,
        results_bucket_name: str | None = None,
        workgroup: str | None = None,
        database: str | None = None,
        lease_duration_s: float | None = None,
        heartbeat_interval_s: float | None = None,
        max_slot_age_s: float | None = None,
    ) -> dict[str, str]:
        """The function's environment: every variable ``Settings.from_env`` reads (contract names), as text.

        The stack passes its resources' names (CDK tokens are strings); local harnesses (``local.demo``,
        ``local.chaos``, ``bench``) pass their own tables and may shorten the lease for a quick run.
        ``ATHENA_CATALOG`` is left to its default; no bucket leaves ``RESULTS_BUCKET_NAME`` unset (rows that
        would not fit an item then fail instead of being truncated). Value metrics off sets the three
        ``VALUE_METRIC_*`` variables empty, which the runtime reads as off.
        """
        values = self.value_metrics
        env = {
            contract.ENV_JOB_NAME: self.job_name,
            contract.ENV_LOCK_TABLE_NAME: lock_table_name,
            contract.ENV_RESULTS_TABLE_NAME: results_table_name,
            contract.ENV_LEASE_DURATION_S: str(
                lease_duration_s if lease_duration_s is not None else self.lease_duration_s
            ),
            contract.ENV_HEARTBEAT_INTERVAL_S: str(
                heartbeat_interval_s if heartbeat_interval_s is not None else self.heartbeat_interval_s
            ),
            contract.ENV_MAX_SLOT_AGE_S: str(max_slot_age_s if max_slot_age_s is not None else self.max_slot_age_s),
            contract.ENV_HISTORY_TTL_S: str(self.history_ttl_s),
            contract.ENV_MAX_QUERY_ATTEMPTS: str(self.max_query_attempts),
            contract.ENV_WINDOW_S: str(self.window_s),
            contract.ENV_DATA_YEAR: "" if self.data_year is None else str(self.data_year),
            contract.ENV_ATHENA_WORKGROUP: workgroup or self.workgroup,
            contract.ENV_ATHENA_DATABASE: database or self.database,
            contract.ENV_RESULT_REUSE_MAX_AGE_MIN: str(self.result_reuse_max_age_min),
            contract.ENV_VALUE_METRIC_COLUMNS: ",".join(values.columns) if values else "",
            contract.ENV_VALUE_METRIC_DIMENSIONS: ",".join(values.dimensions) if values else "",
            contract.ENV_VALUE_METRIC_MAX_SERIES: str(values.max_series) if values else "",
            contract.ENV_MAX_SLOT_LEAD_S: str(self.max_slot_lead_s),
            contract.ENV_ALARM_DATA_SCANNED_BYTES: str(self.alarms.data_scanned_bytes),
            contract.ENV_ALARM_QUERY_DURATION_MS: str(self.alarms.query_duration_ms),
            "POWERTOOLS_SERVICE_NAME": contract.SERVICE_NAME,
            "POWERTOOLS_METRICS_NAMESPACE": contract.METRICS_NAMESPACE,
        }
        if results_bucket_name:
            env[contract.ENV_RESULTS_BUCKET_NAME] = results_bucket_name
        return env

    def job_settings(self) -> dict[str, str]:
        """The job's own settings as the runtime reads them (``contract.JOB_SETTING_ENV_VARS``, text): what the
        stack writes into the job catalog's ``settings`` (:mod:`athena_refresh.catalog`)."""
        env = self.runtime_environment(lock_table_name="-", results_table_name="-")
        return {name: env[name] for name in contract.JOB_SETTING_ENV_VARS}

    @classmethod
    def from_context(
        cls,
        job: Any,
        *,
        labels: Labels = CONTEXT_LABELS,
        output_columns: tuple[str, ...] | None = None,
        check_output_columns: bool = True,
    ) -> JobConfig:
        """Parse the ``"job"`` context value (a mapping, or its JSON text as ``cdk -c job=...`` gives).

        ``check_output_columns=False``: the query did not prepare (its problems are reported already), so the
        value metrics are not checked against its output columns.

        :raises ConfigError: listing every missing, unknown or invalid key, and every broken relationship.
        """
        if isinstance(job, str):
            try:
                job = json.loads(job)
            except ValueError:
                raise ConfigError([f"context {CONTEXT_KEY}: must be a JSON object, got {job!r}"]) from None
        if not isinstance(job, Mapping):
            raise ConfigError([f"context {CONTEXT_KEY}: must be an object with the job settings, got {job!r}"])

        problems: list[str] = []
        values: dict[str, Any] = {}
        known = {field.name: field for field in fields(cls)}
        for key in sorted(set(job) - set(known)):
            problems.append(f"{labels.at(key)}: unknown key; allowed keys: {', '.join(known)}")
        for key in _CHECKS:
            if key not in job:
                if known[key].default is MISSING:
                    problems.append(f"{labels.at(key)}: missing; required")
                continue
            value, key_problems = check_key(key, job[key], labels)
            problems.extend(key_problems)
            if not key_problems:
                values[key] = value
        problems.extend(relationship_problems(values, labels, output_columns, check_output_columns))
        if problems:
            raise ConfigError(problems)
        return cls(**values)


def check_key(key: str, value: Any, labels: Labels = CONTEXT_LABELS) -> tuple[Any, list[str]]:
    """One key's check on its own (type, range, syntax): ``(normalized value, [])`` or ``(None, problems)``.

    ``key`` is a :class:`JobConfig` field, or ``alarms.<sub>`` / ``value_metrics.<sub>`` for one sub key.
    """
    top, _, sub = key.partition(".")
    check = _SUB_CHECKS[top][sub][0] if sub else _CHECKS[key]
    try:
        return check(value), []
    except Invalid as exc:
        return None, [f"{labels.at(key)}: must be {exc}, got {value!r}"]
    except InvalidKeys as exc:
        return None, [f"{labels.at(f'{key}.{name}')}: {message}" for name, message in exc.problems]


# One check per field, in field order (the dataclass and this table must name the same keys).
_CHECKS: dict[str, Callable[[Any], Any]] = {
    "job_name": named(_JOB_NAME, lock_table.JOB_NAME_RULE),
    "schedule_expression": _cron_expression,
    "racers": integer(1, MAX_RACERS),
    "lease_duration_s": bounded(
        contract.ENV_LEASE_DURATION_S,
        f"Lambda's first async retry comes about {ASYNC_FIRST_RETRY_DELAY_S} s after a failure and must find the "
        f"failed holder's lease expired, allowing {CLOCK_SKEW_ALLOWANCE_S} s clock skew",
    ),
    "heartbeat_interval_s": bounded(contract.ENV_HEARTBEAT_INTERVAL_S),
    # The runtime allows older deliveries (local replays); Lambda's MaximumEventAgeInSeconds, set from this
    # key, allows at most 6 h.
    "max_slot_age_s": integer(MIN_EVENT_AGE_S, min(MAX_LAMBDA_EVENT_AGE_S, contract.MAX_MAX_SLOT_AGE_S)),
    "max_slot_lead_s": bounded(contract.ENV_MAX_SLOT_LEAD_S),
    "history_ttl_s": bounded(contract.ENV_HISTORY_TTL_S),
    "max_query_attempts": bounded(contract.ENV_MAX_QUERY_ATTEMPTS),
    "window_s": bounded(contract.ENV_WINDOW_S),
    "data_year": optional(bounded(contract.ENV_DATA_YEAR)),
    "lambda_timeout_s": integer(1, MAX_LAMBDA_TIMEOUT_S),
    "lambda_memory_mb": integer(MIN_LAMBDA_MEMORY_MB, MAX_LAMBDA_MEMORY_MB),
    "database": named(GLUE_NAME, GLUE_NAME_RULE),
    "table": named(GLUE_NAME, GLUE_NAME_RULE),
    "workgroup": named(WORKGROUP_NAME, WORKGROUP_NAME_RULE),
    "sql": _query_sql,
    "bytes_scanned_cutoff_per_query": integer(MIN_BYTES_SCANNED_CUTOFF, MAX_BYTES_SCANNED_CUTOFF),
    "alarms": _alarms,
    "result_reuse_max_age_min": bounded(contract.ENV_RESULT_REUSE_MAX_AGE_MIN),
    "value_metrics": _value_metrics,
    "removal_policy": one_of(REMOVAL_POLICIES),
    "schedule_timezone": _timezone,
    "stack_group": optional(integer(0, MAX_JOB_STACKS - 1)),
}

if list(_CHECKS) != [field.name for field in fields(JobConfig)]:  # pragma: no cover - a programming error
    raise RuntimeError("JobConfig's fields and _CHECKS must name the same keys in the same order")
