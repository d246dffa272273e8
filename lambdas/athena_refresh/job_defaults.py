"""A job's defaults and their derivation: where each effective value came from (:class:`Setting`).

Only ``source`` and ``schedule_expression`` are required in a ``job.toml`` (plus the folder's ``query.sql``).
Every other key takes, in this order of precedence:

1. the job's ``job.toml``;
2. the team defaults ``jobs/defaults.toml`` (:class:`TeamDefaults`, read by ``stacks.defaults.load_team_defaults``);
3. a value derived from the schedule's period P (its shortest gap, ``slotlock.schedule.cron_period``) or
   from other effective keys (:func:`resolve`), chosen so that every relationship of
   :func:`athena_refresh.job_rules.relationship_problems` holds;
4. a built-in constant (:data:`BUILT_IN`).

:func:`resolve` returns the effective values with their origin, which ``athena-once settings`` prints and
``JobDefinition.settings`` keeps; :func:`spec_of` builds a :class:`~athena_refresh.jobspec.JobSpec` from keyword
arguments with the same derivation (tests, local tools). Standard library and ``slotlock.schedule`` only: this
module ships in the Lambda asset with the spec it derives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slotlock.schedule import CronError, cron_period

from . import contract
from .job_rules import (
    ASYNC_FIRST_RETRY_DELAY_S,
    CLOCK_SKEW_ALLOWANCE_S,
    COMMIT_RESERVE_S,
    MIN_SCHEDULE_PERIOD_S,
    largest_heartbeat_s,
)
from .jobspec import MAX_LAMBDA_EVENT_AGE_S, MAX_LAMBDA_TIMEOUT_S, JobSpec, check_key

ORIGIN_JOB = "job.toml"
ORIGIN_TEAM = "jobs/defaults.toml"
ORIGIN_DERIVED = "derived"
ORIGIN_BUILT_IN = "built-in"

#: Built-in values of the keys no rule derives (or the starting point of a rule).
BUILT_IN: Mapping[str, Any] = {
    "schedule_timezone": "UTC",
    "racers": 3,
    "lease_duration_s": 45,
    "heartbeat_interval_s": 15,
    "max_slot_lead_s": contract.DEFAULT_MAX_SLOT_LEAD_S,
    "history_ttl_s": 30 * 86_400,
    "max_query_attempts": 3,
    "lambda_memory_mb": 256,
    "bytes_scanned_cutoff_per_query": 1_000_000_000,
    "result_reuse_max_age_min": 0,
    "value_metrics": None,
    "assertions": None,
    "stack_group": None,
    "per_job_metrics": False,
}
#: Why each built-in value is what it is (``settings`` prints it).
BUILT_IN_WHY: Mapping[str, str] = {
    "schedule_timezone": "EventBridge Scheduler's default",
    "racers": "three invocations race for each slot",
    "max_query_attempts": "attempts for retryable Athena failures",
    "lease_duration_s": f"expires before Lambda's first async retry ({ASYNC_FIRST_RETRY_DELAY_S} s, minus skew)",
    "heartbeat_interval_s": "below (lease_duration_s - 5 s) / 2",
    "max_slot_lead_s": "clock-skew allowance",
    "history_ttl_s": "30 days",
    "lambda_memory_mb": "the runtime polls and pages results: little memory",
    "bytes_scanned_cutoff_per_query": "1 GB",
    "result_reuse_max_age_min": "off",
    "value_metrics": "off",
    "assertions": "none: every result is published",
    "stack_group": "a hash of the job's name over stack.job_stacks (stacks/job_groups.py)",
    "per_job_metrics": "off: the watchdog, the job's log line and the dashboard's log views watch it (issue 35)",
}
#: The alarm thresholds' share of the cutoff and of the timeout, in percent.
ALARM_PERCENT = 80
#: Stands in for the period when the schedule is invalid (its own problem is reported): the derived keys then
#: satisfy every rule that does not involve the period, so no follow-on problem is reported about them.
_FALLBACK_PERIOD_S = 3600

#: The settings a job resolves, in the order ``settings`` prints them (dotted: a key of a table).
SETTING_KEYS = (
    "schedule_expression",
    "schedule_timezone",
    "racers",
    "lease_duration_s",
    "heartbeat_interval_s",
    "max_slot_age_s",
    "max_slot_lead_s",
    "history_ttl_s",
    "max_query_attempts",
    "window_s",
    "lambda_timeout_s",
    "freshness_s",
    "lambda_memory_mb",
    "bytes_scanned_cutoff_per_query",
    "result_reuse_max_age_min",
    "alarms.data_scanned_bytes",
    "alarms.query_duration_ms",
    "value_metrics",
    "assertions",
    "stack_group",
    "per_job_metrics",
)
ALARM_KEYS = ("data_scanned_bytes", "query_duration_ms")


@dataclass(frozen=True)
class Setting:
    """One effective key: its value, where it came from (``origin``) and why (a file:line, or the rule)."""

    key: str
    value: Any
    origin: str  # ORIGIN_JOB, ORIGIN_TEAM, ORIGIN_DERIVED or ORIGIN_BUILT_IN
    why: str


@dataclass(frozen=True)
class TeamDefaults:
    """The valid keys of ``jobs/defaults.toml`` (flat, dotted), their lines, and its problems."""

    label: str = ORIGIN_TEAM  # the file as messages name it
    values: Mapping[str, Any] = field(default_factory=dict)
    lines: Mapping[str, int] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


def located(label: str, lines: Mapping[str, int], key: str) -> str:
    """``file:line`` of ``key`` (or of its table), else ``file``."""
    for name in (key, key.rsplit(".", 1)[0], key.split(".")[0]):
        if name in lines:
            return f"{label}:{lines[name]}"
    return label


def schedule_period_s(expression: Any, timezone: Any) -> int | None:
    """P, the schedule's shortest gap in seconds; ``None`` when the expression or time zone is invalid."""
    expression, problems = check_key("schedule_expression", expression)
    timezone, tz_problems = check_key("schedule_timezone", timezone)
    if problems or tz_problems:
        return None
    try:
        return cron_period(expression, timezone).shortest_s
    except CronError:
        return None


def _valid(key: str, value: Any, fallback: Any) -> Any:
    """``value`` if it passes its own check, else ``fallback`` (for a rule's inputs: the bad key is reported)."""
    checked, problems = check_key(key, value)
    return fallback if problems else checked


def resolve(
    job: Mapping[str, Any], team: TeamDefaults, *, job_label: str, job_lines: Mapping[str, int]
) -> list[Setting]:
    """Each key of :data:`SETTING_KEYS`: the job's value, else the team's, else derived, else built in.

    ``job``: the job file's settings, flat (``alarms.data_scanned_bytes``); values are not checked here (the
    caller checks the result), but a rule only uses inputs that pass their own check.
    """
    settings: dict[str, Setting] = {}

    def given(key: str) -> bool:
        if key in job:
            settings[key] = Setting(key, job[key], ORIGIN_JOB, located(job_label, job_lines, key))
        elif key in team.values:
            settings[key] = Setting(key, team.values[key], ORIGIN_TEAM, located(team.label, team.lines, key))
        else:
            return False
        return True

    def value(key: str) -> Any:
        default = BUILT_IN.get(key)
        return _valid(key, settings[key].value, default) if default is not None else settings[key].value

    for key in ("schedule_expression", "schedule_timezone", "racers", "lease_duration_s"):
        if not given(key) and key in BUILT_IN:
            settings[key] = Setting(key, BUILT_IN[key], ORIGIN_BUILT_IN, BUILT_IN_WHY.get(key, ""))
    period = schedule_period_s(job.get("schedule_expression"), value("schedule_timezone"))
    basis = _FALLBACK_PERIOD_S if period is None else max(period, MIN_SCHEDULE_PERIOD_S)
    one_period = "one period" if period is None else f"one period ({period} s, the schedule's shortest gap)"

    if not given("heartbeat_interval_s"):
        lease = value("lease_duration_s")
        beat = min(BUILT_IN["heartbeat_interval_s"], largest_heartbeat_s(lease))
        settings["heartbeat_interval_s"] = (
            Setting("heartbeat_interval_s", beat, ORIGIN_BUILT_IN, BUILT_IN_WHY["heartbeat_interval_s"])
            if beat == BUILT_IN["heartbeat_interval_s"]
            else Setting(
                "heartbeat_interval_s",
                beat,
                ORIGIN_DERIVED,
                f"below (lease_duration_s - {CLOCK_SKEW_ALLOWANCE_S} s) / 2",
            )
        )
    if not given("max_slot_age_s"):
        age = min(basis, MAX_LAMBDA_EVENT_AGE_S)
        why = f"{one_period}, at most {MAX_LAMBDA_EVENT_AGE_S} s (Lambda's maximum event age)"
        settings["max_slot_age_s"] = Setting("max_slot_age_s", age, ORIGIN_DERIVED, why)
    for key in ("max_slot_lead_s", "history_ttl_s", "max_query_attempts"):
        if not given(key):
            settings[key] = Setting(key, BUILT_IN[key], ORIGIN_BUILT_IN, BUILT_IN_WHY[key])
    if not given("window_s"):
        window = min(max(basis if period is None else period, contract.MIN_WINDOW_S), contract.MAX_WINDOW_S)
        settings["window_s"] = Setting("window_s", window, ORIGIN_DERIVED, one_period)
    if not given("lambda_timeout_s"):
        age = _valid("max_slot_age_s", settings["max_slot_age_s"].value, min(basis, MAX_LAMBDA_EVENT_AGE_S))
        beat = _valid("heartbeat_interval_s", settings["heartbeat_interval_s"].value, 15)
        floor = beat + COMMIT_RESERVE_S + 1
        timeout = min(MAX_LAMBDA_TIMEOUT_S, max(floor, age - ASYNC_FIRST_RETRY_DELAY_S))
        why = (
            f"min({MAX_LAMBDA_TIMEOUT_S} s, max_slot_age_s - {ASYNC_FIRST_RETRY_DELAY_S} s Lambda's first retry), "
            f"at least heartbeat_interval_s + {COMMIT_RESERVE_S + 1} s"
        )
        settings["lambda_timeout_s"] = Setting("lambda_timeout_s", timeout, ORIGIN_DERIVED, why)
    if not given("freshness_s"):
        age = _valid("max_slot_age_s", settings["max_slot_age_s"].value, min(basis, MAX_LAMBDA_EVENT_AGE_S))
        timeout = _valid("lambda_timeout_s", settings["lambda_timeout_s"].value, MAX_LAMBDA_TIMEOUT_S)
        why = "max_slot_age_s + lambda_timeout_s: a slot's last delivery, then one whole run"
        settings["freshness_s"] = Setting(
            "freshness_s", max(age + timeout, contract.MIN_FRESHNESS_S), ORIGIN_DERIVED, why
        )
    for key in ("lambda_memory_mb", "bytes_scanned_cutoff_per_query", "result_reuse_max_age_min", "per_job_metrics"):
        if not given(key):
            settings[key] = Setting(key, BUILT_IN[key], ORIGIN_BUILT_IN, BUILT_IN_WHY[key])
    if not given("alarms.data_scanned_bytes"):
        cutoff = value("bytes_scanned_cutoff_per_query")
        why = f"{ALARM_PERCENT}% of bytes_scanned_cutoff_per_query"
        scanned = cutoff * ALARM_PERCENT // 100
        settings["alarms.data_scanned_bytes"] = Setting("alarms.data_scanned_bytes", scanned, ORIGIN_DERIVED, why)
    if not given("alarms.query_duration_ms"):
        timeout = _valid("lambda_timeout_s", settings["lambda_timeout_s"].value, MAX_LAMBDA_TIMEOUT_S)
        why = f"{ALARM_PERCENT}% of lambda_timeout_s, in ms"
        duration = timeout * 1000 * ALARM_PERCENT // 100
        settings["alarms.query_duration_ms"] = Setting("alarms.query_duration_ms", duration, ORIGIN_DERIVED, why)
    if not given("value_metrics"):
        settings["value_metrics"] = Setting("value_metrics", None, ORIGIN_BUILT_IN, BUILT_IN_WHY["value_metrics"])
    if not given("assertions"):
        settings["assertions"] = Setting("assertions", None, ORIGIN_BUILT_IN, BUILT_IN_WHY["assertions"])
    if not given("stack_group"):
        settings["stack_group"] = Setting("stack_group", None, ORIGIN_BUILT_IN, BUILT_IN_WHY["stack_group"])
    return [settings[key] for key in SETTING_KEYS if key in settings]


def spec_of(**keys: Any) -> JobSpec:
    """A :class:`JobSpec` from keyword arguments, every key left out taking its default as a job file's would
    (:func:`resolve`, no team defaults); ``alarms`` may be a mapping of some of its keys.

    Required: ``job_name``, ``schedule_expression``, ``database``, ``table``, ``workgroup`` and ``sql``
    (``data_year`` defaults to ``None``). :raises ConfigError: as :class:`JobSpec`'s construction.
    """
    flat = {key: value for key, value in keys.items() if key != "alarms"}
    alarms = keys.get("alarms") or {}
    if not isinstance(alarms, Mapping):
        alarms = {name: getattr(alarms, name) for name in (*ALARM_KEYS, "email")}
    flat |= {f"alarms.{name}": alarms[name] for name in ALARM_KEYS if name in alarms}
    effective = {setting.key: setting.value for setting in resolve(flat, TeamDefaults(), job_label="", job_lines={})}
    values = {key: value for key, value in effective.items() if "." not in key}
    values["alarms"] = {
        **{name: effective[f"alarms.{name}"] for name in ALARM_KEYS},
        "email": alarms.get("email"),
    }
    return JobSpec(**({"data_year": None} | keys | values))
