"""A job's specification, :class:`JobSpec`: one typed model, validated once by its construction.

Synth (``stacks.jobs``: ``job.toml`` + team defaults), ``athena-once check``/``settings``/``run`` and every local
tool build it; the stack writes it into the job catalog as typed JSON and the cold start loads it back into the
same class (:mod:`athena_refresh.catalog`), so the same rules run everywhere. Constructing one checks every key
(type, range, syntax: :func:`check_key`) and every relationship between keys
(:func:`athena_refresh.job_rules.relationship_problems`) and raises :class:`~athena_refresh.checks.ConfigError`
listing every problem; :meth:`JobSpec.from_context` does the same for a raw mapping (a job file's keys, cdk.json's
``job`` block), naming each problem's file, line and key through its :class:`~athena_refresh.checks.Labels`
(``jobs/x/job.toml:7: racers: must be an integer from 1 to 20, got 0``). Tests construct one from keyword
arguments (:func:`athena_refresh.job_defaults.spec_of` derives every default a test leaves out).

Standard library and ``slotlock.schedule`` only: this module ships in the Lambda asset. What needs more (the query
parsed with sqlglot for its output columns, the TOML files' lines) stays in ``stacks/`` and is passed in.
"""

from __future__ import annotations

import dataclasses
import json
import re
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any

from slotlock import table as lock_table
from slotlock.schedule import CRON_PATTERN, CronPeriod, cron_period

from . import contract
from .assertions import parse as parse_row_expression
from .checks import (
    GLUE_NAME,
    GLUE_NAME_RULE,
    REMOVAL_POLICIES,
    WORKGROUP_NAME,
    WORKGROUP_NAME_RULE,
    ConfigError,
    Invalid,
    InvalidKeys,
    Labels,
    accepted_values,
    boolean,
    bounded,
    email,
    integer,
    named,
    object_of,
    one_of,
    optional,
    row_expressions,
)
from .job_rules import ASYNC_FIRST_RETRY_DELAY_S, CLOCK_SKEW_ALLOWANCE_S, relationship_problems

CONTEXT_KEY = "job"  # cdk.json's context key holding a job block
CONTEXT_LABELS = Labels(f"context {CONTEXT_KEY}.", f"{CONTEXT_KEY}.")
#: How a spec built from keyword arguments names its keys: ``racers: must be an integer from 1 to 20, got 0``.
KWARGS_LABELS = Labels("")

# Bounds imposed by AWS (or by the design), named so the messages and the checks share them. A bound the runtime
# shares with its environment variables lives once in ``athena_refresh.contract``.
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
MAX_VALUE_SERIES = contract.MAX_VALUE_METRIC_MAX_SERIES  # each combination is a billed custom metric per column
MAX_VALUE_COLUMNS = 100  # EMF carries at most 100 metrics per log event
MAX_VALUE_DIMENSIONS = 28  # Powertools allows 29 dimensions per metric; "job" is one
MAX_ALARM_QUERY_DURATION_MS = contract.MAX_ALARM_QUERY_DURATION_MS
#: alarms.data_scanned_bytes must be below bytes_scanned_cutoff_per_query (a relationship), so below int64.
MAX_ALARM_DATA_SCANNED_BYTES = contract.MAX_ALARM_DATA_SCANNED_BYTES  # == MAX_BYTES_SCANNED_CUTOFF - 1
DEFAULT_VALUE_METRIC_MAX_SERIES = 10

_CRON_FIELDS = "minutes hours day-of-month month day-of-week year"
_COLUMN_NAME = re.compile(r"[a-z_][a-z0-9_]{0,254}")  # an Athena result column (lowercase)
_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9_+-]+)*")  # no path tricks ('..', leading '/')


def _query_sql(value: Any) -> str:
    """The prepared SQL (``stacks.query_sql``: its placeholders and their order are checked there)."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid("a non-empty SQL statement")
    return value


def _timezone(value: Any) -> str:
    """An IANA time zone name this machine's zoneinfo database (or the ``tzdata`` package) knows: one lookup,
    not a walk of the whole tree, so the cold start pays well under a millisecond."""
    allowed = "an IANA time zone name such as UTC, Europe/Berlin or America/New_York"
    if not isinstance(value, str) or not _ZONE_NAME.fullmatch(value):
        raise Invalid(allowed)
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise Invalid(allowed) from None
    return value


def _cron_expression(value: Any) -> str:
    """An EventBridge Scheduler ``cron(...)`` expression with six fields (``slotlock.schedule.CRON_PATTERN``).

    ``rate(...)`` is rejected: a rate schedule is anchored to its creation time, so the racers' schedules
    (created one after the other) would not share a scheduled time, hence not a slot. ``at(...)`` is a one-time
    schedule, not a recurring job.
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
    match = CRON_PATTERN.fullmatch(text)
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
        if not isinstance(value, list | tuple) or not lo <= len(value) <= hi:
            raise Invalid(allowed)
        if not all(isinstance(name, str) and _COLUMN_NAME.fullmatch(name) for name in value):
            raise Invalid(allowed)
        if len(set(value)) != len(value):
            raise Invalid(allowed)
        return tuple(value)

    return check


@dataclass(frozen=True, kw_only=True)
class AlarmsSpec:
    """Alarm thresholds (units in the names) and the optional email subscription of the alarm topic."""

    data_scanned_bytes: int  # DataScannedBytes (Maximum per period) above this alarms
    query_duration_ms: int  # QueryDurationMs (Maximum per period) above this alarms
    email: str | None = None

    def __post_init__(self) -> None:
        _check_object(self, _ALARM_CHECKS, "alarms")


@dataclass(frozen=True, kw_only=True)
class ValueMetricsSpec:
    """Result columns published as CloudWatch metrics (one metric per column), with dimension columns.

    Each distinct combination of dimension values is a billed custom metric per value column; the runtime
    publishes at most ``max_series`` combinations per run.
    """

    columns: tuple[str, ...]
    dimensions: tuple[str, ...] = ()
    max_series: int = DEFAULT_VALUE_METRIC_MAX_SERIES

    def __post_init__(self) -> None:
        _check_object(self, _VALUE_METRIC_CHECKS, "value_metrics")


@dataclass(frozen=True, kw_only=True)
class AssertionsSpec:
    """Result tests run on a slot's rows before its commit (:mod:`athena_refresh.assertions`: the keys, the row
    expressions' grammar); a slot whose rows break one is FAILED ``assertion`` and never becomes LATEST."""

    rows_at_least: int | None = None
    rows_at_most: int | None = None
    not_null: tuple[str, ...] = ()
    unique: tuple[str, ...] = ()
    accepted_values: Mapping[str, tuple[Any, ...]] = dataclasses.field(default_factory=dict)
    expressions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_object(self, _ASSERTION_CHECKS, "assertions")

    @property
    def columns(self) -> tuple[str, ...]:
        """Every result column the assertions name (checked against the query's output columns)."""
        named = [*self.not_null, *self.unique, *self.accepted_values]
        named += [column for text in self.expressions for column in parse_row_expression(text).columns]
        return tuple(dict.fromkeys(named))


def _check_object(spec: Any, checks: Mapping[str, tuple[Callable[[Any], Any], Any]], key: str) -> None:
    """A sub spec's own keys, each with its check (normalized in place); :raises ConfigError: naming them."""
    problems: list[str] = []
    for name, (check, _default) in checks.items():
        value = getattr(spec, name)
        try:
            object.__setattr__(spec, name, check(value))
        except Invalid as exc:
            problems.append(f"{key}.{name}: must be {exc}, got {value!r}")
    if problems:
        raise ConfigError(problems)


_ALARM_CHECKS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "data_scanned_bytes": (integer(1, MAX_ALARM_DATA_SCANNED_BYTES), MISSING),
    "query_duration_ms": (integer(1, MAX_ALARM_QUERY_DURATION_MS), MISSING),
    "email": (optional(email), None),
}
_VALUE_METRIC_CHECKS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "columns": (_column_names(lo=1, hi=MAX_VALUE_COLUMNS), MISSING),
    "dimensions": (_column_names(lo=0, hi=MAX_VALUE_DIMENSIONS), ()),
    "max_series": (bounded(contract.ENV_VALUE_METRIC_MAX_SERIES), DEFAULT_VALUE_METRIC_MAX_SERIES),
}
_ASSERTION_CHECKS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "rows_at_least": (optional(integer(0, 10**9)), None),
    "rows_at_most": (optional(integer(0, 10**9)), None),
    "not_null": (_column_names(lo=0, hi=MAX_VALUE_COLUMNS), ()),
    "unique": (_column_names(lo=0, hi=MAX_VALUE_COLUMNS), ()),
    "accepted_values": (accepted_values, {}),
    "expressions": (row_expressions, ()),
}
#: The sub keys of the object-valued keys, each with its check and default (``MISSING``: required).
SUB_CHECKS = {"alarms": _ALARM_CHECKS, "value_metrics": _VALUE_METRIC_CHECKS, "assertions": _ASSERTION_CHECKS}


def _sub_spec(checks: Mapping[str, tuple[Callable[[Any], Any], Any]], build: type) -> Callable[[Any], Any]:
    """The check of an object-valued key: a mapping (a job file's table) or the sub spec itself (kwargs)."""
    as_object = object_of(checks, build)

    def check(value: Any) -> Any:
        if isinstance(value, build):
            return value  # constructed, hence checked, already
        return as_object(value)

    return check


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """A job's validated specification. Units are in the names; constructing one checks every value and every
    relationship (:raises ConfigError: listing each problem, ``racers: must be an integer from 1 to 20, got 0``).

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
    alarms: AlarmsSpec
    result_reuse_max_age_min: int = 0  # Athena query result reuse per query, minutes (0: off)
    value_metrics: ValueMetricsSpec | None = None  # None: no result values as metrics
    assertions: AssertionsSpec | None = None  # None: no result tests before the commit
    removal_policy: str = "RETAIN"  # of the stateful resources: tables, buckets, log groups, queues
    schedule_timezone: str = "UTC"  # IANA name: the cron's wall clock (Scheduler's ScheduleExpressionTimezone)
    #: The job stack this job is pinned to (``stacks.job_groups``); ``None``: a hash of its name decides.
    stack_group: int | None = None
    #: The watchdog's grace (``athena_refresh.freshness``): a slot not finished this long after its firing is late.
    #: ``None``: :attr:`grace_s`'s fallback (``job_defaults.resolve`` always derives one for a job folder).
    freshness_s: int | None = None
    #: The job's own CloudWatch custom metrics (``contract.JOB_METRICS``) and its ``NoRecentSuccess`` alarm: opt-in
    #: (issue 35). Off, the job is watched by the deployment's watchdog, its log line and the dashboard's log views.
    per_job_metrics: bool = False

    def __post_init__(self) -> None:
        values, problems = _checked({field.name: getattr(self, field.name) for field in fields(self)}, KWARGS_LABELS)
        if problems:
            raise ConfigError(problems)
        for name, value in values.items():
            if value is not getattr(self, name):
                object.__setattr__(self, name, value)  # normalized (e.g. removal_policy upper case)

    @property
    def grace_s(self) -> int:
        """The watchdog's grace in seconds: ``freshness_s``, else ``max_slot_age_s + lambda_timeout_s`` (the last
        moment a slot can still finish: its last delivery, then one whole run)."""
        return self.freshness_s if self.freshness_s is not None else self.max_slot_age_s + self.lambda_timeout_s

    @property
    def period(self) -> CronPeriod:
        """Gaps between consecutive slots of ``schedule_expression`` in ``schedule_timezone`` (validated)."""
        return cron_period(self.schedule_expression, self.schedule_timezone)  # cached by slotlock

    def wiring_environment(
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
        """The function's environment beside a job catalog: the wiring (``contract.WIRING_ENV_VARS``: the job's
        name, the shared resources' names) and Powertools' names, as text; the job's settings travel in the
        catalog as this spec.

        The stack passes its resources' names (CDK tokens are strings); local harnesses (``local.demo``,
        ``local.chaos``) pass their own tables and may tune a run with ``contract.LOCAL_TUNING_ENV_VARS`` (a short
        lease and heartbeat, a widened slot age: only those given are set). ``ATHENA_CATALOG`` is left to its
        default; no bucket leaves ``RESULTS_BUCKET_NAME`` unset (rows that would not fit an item then fail instead
        of being truncated).
        """
        env = {
            contract.ENV_JOB_NAME: self.job_name,
            contract.ENV_LOCK_TABLE_NAME: lock_table_name,
            contract.ENV_RESULTS_TABLE_NAME: results_table_name,
            contract.ENV_ATHENA_WORKGROUP: workgroup or self.workgroup,
            contract.ENV_ATHENA_DATABASE: database or self.database,
            "POWERTOOLS_SERVICE_NAME": contract.SERVICE_NAME,
            "POWERTOOLS_METRICS_NAMESPACE": contract.METRICS_NAMESPACE,
        }
        if results_bucket_name:
            env[contract.ENV_RESULTS_BUCKET_NAME] = results_bucket_name
        tuning = (
            (contract.ENV_LEASE_DURATION_S, lease_duration_s),
            (contract.ENV_HEARTBEAT_INTERVAL_S, heartbeat_interval_s),
            (contract.ENV_MAX_SLOT_AGE_S, max_slot_age_s),
        )
        env.update({name: str(value) for name, value in tuning if value is not None})
        return env

    @classmethod
    def from_context(
        cls,
        job: Any,
        *,
        labels: Labels = CONTEXT_LABELS,
        output_columns: tuple[str, ...] | None = None,
        check_output_columns: bool = True,
    ) -> JobSpec:
        """Validate a raw job (a mapping of its keys, or its JSON text as ``cdk -c job=...`` gives) and build it.

        ``output_columns``: the query's output columns (``stacks.query_sql``), against which the value metrics are
        checked; ``None`` or ``check_output_columns=False`` (the query did not prepare): not checked.

        :raises ConfigError: listing every missing, unknown or invalid key and every broken relationship, each
            named by ``labels`` (``jobs/x/job.toml:7: racers: ...``).
        """
        if isinstance(job, str):
            try:
                job = json.loads(job)
            except ValueError:
                raise ConfigError([f"context {CONTEXT_KEY}: must be a JSON object, got {job!r}"]) from None
        if not isinstance(job, Mapping):
            raise ConfigError([f"context {CONTEXT_KEY}: must be an object with the job settings, got {job!r}"])
        problems = [
            f"{labels.at(key)}: unknown key; allowed keys: {', '.join(_FIELDS)}" for key in sorted(set(job) - _FIELDS)
        ]
        values, value_problems = _checked(job, labels, output_columns if check_output_columns else None)
        problems.extend(value_problems)
        if problems:
            raise ConfigError(problems)
        return cls(**values)


def as_raw(spec: JobSpec) -> dict[str, Any]:
    """The spec's keys as plain data (the sub specs as mappings, tuples as lists): what
    :meth:`JobSpec.from_context` reads back, and the catalog's typed JSON."""
    raw = {field.name: getattr(spec, field.name) for field in fields(spec)}
    for key in SUB_CHECKS:
        sub = raw[key]
        if dataclasses.is_dataclass(sub) and not isinstance(sub, type):
            raw[key] = {
                name: list(value) if isinstance(value, tuple) else value
                for name, value in dataclasses.asdict(sub).items()
            }
    return raw


def check_key(key: str, value: Any, labels: Labels = CONTEXT_LABELS) -> tuple[Any, list[str]]:
    """One key's check on its own (type, range, syntax): ``(normalized value, [])`` or ``(None, problems)``.

    ``key`` is a :class:`JobSpec` field, or ``alarms.<sub>`` / ``value_metrics.<sub>`` for one sub key.
    """
    top, _, sub = key.partition(".")
    check = SUB_CHECKS[top][sub][0] if sub else _CHECKS[key]
    try:
        return check(value), []
    except Invalid as exc:
        return None, [f"{labels.at(key)}: must be {exc}, got {value!r}"]
    except InvalidKeys as exc:
        return None, [f"{labels.at(f'{key}.{name}')}: {message}" for name, message in exc.problems]


def _checked(
    job: Mapping[str, Any], labels: Labels, output_columns: tuple[str, ...] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Both passes over ``job``'s known keys: each key on its own, then the relationships between those that
    passed (a relationship is only checked when every key it involves passed its own check)."""
    problems: list[str] = []
    values: dict[str, Any] = {}
    for key in _CHECKS:
        if key not in job:
            if _DEFAULTS[key] is MISSING:
                problems.append(f"{labels.at(key)}: missing; required")
            continue
        value, key_problems = check_key(key, job[key], labels)
        problems.extend(key_problems)
        if not key_problems:
            values[key] = value
    problems.extend(relationship_problems(values, labels, output_columns))
    return values, problems


# One check per field, in field order (the dataclass and this table must name the same keys).
_CHECKS: dict[str, Callable[[Any], Any]] = {
    "job_name": named(lock_table.JOB_NAME_PATTERN, lock_table.JOB_NAME_RULE),
    "schedule_expression": _cron_expression,
    "racers": integer(1, MAX_RACERS),
    "lease_duration_s": bounded(
        contract.ENV_LEASE_DURATION_S,
        f"Lambda's first async retry comes about {ASYNC_FIRST_RETRY_DELAY_S} s after a failure and must find the "
        f"failed holder's lease expired, allowing {CLOCK_SKEW_ALLOWANCE_S} s clock skew",
    ),
    "heartbeat_interval_s": bounded(contract.ENV_HEARTBEAT_INTERVAL_S),
    # The runtime's environment bounds allow older deliveries (local replays); Lambda's MaximumEventAgeInSeconds,
    # set from this key, allows at most 6 h.
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
    "alarms": _sub_spec(_ALARM_CHECKS, AlarmsSpec),
    "result_reuse_max_age_min": bounded(
        contract.ENV_RESULT_REUSE_MAX_AGE_MIN, "minutes, 0: off; Athena's maximum is 7 days"
    ),
    "value_metrics": optional(_sub_spec(_VALUE_METRIC_CHECKS, ValueMetricsSpec)),
    "assertions": optional(_sub_spec(_ASSERTION_CHECKS, AssertionsSpec)),
    "removal_policy": one_of(REMOVAL_POLICIES),
    "schedule_timezone": _timezone,
    "stack_group": optional(integer(0, contract.MAX_JOB_STACKS - 1)),
    "freshness_s": optional(
        integer(contract.MIN_FRESHNESS_S, contract.MAX_FRESHNESS_S, "seconds after a firing before its slot is late")
    ),
    "per_job_metrics": boolean,
}
_FIELDS = frozenset(field.name for field in fields(JobSpec))
_DEFAULTS = {field.name: field.default for field in fields(JobSpec)}

if list(_CHECKS) != [field.name for field in fields(JobSpec)]:  # pragma: no cover - a programming error
    raise RuntimeError("JobSpec's fields and _CHECKS must name the same keys in the same order")
