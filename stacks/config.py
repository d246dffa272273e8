"""The job's configuration: the ``"job"`` block of the CDK context (cdk.json), validated up front.

Every problem names its context key and the allowed values, for example
``context job.racers: must be an integer from 1 to 20, got 0``. All problems are collected and raised
together in one :class:`ConfigError`, so a broken cdk.json is fixed in one round.

This module reads no environment variable and calls no AWS API: ``app.py`` passes the parsed context in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

CONTEXT_KEY = "job"  # the context key holding the job block

# Bounds imposed by AWS (or by the design), named so the messages and the checks share them.
MAX_RACERS = 20
MIN_EVENT_AGE_S = 60  # Lambda async MaximumEventAgeInSeconds and Scheduler retry policy minimum
MAX_LAMBDA_EVENT_AGE_S = 21_600  # Lambda async MaximumEventAgeInSeconds maximum (6 h)
MAX_LAMBDA_TIMEOUT_S = 900
MIN_LAMBDA_MEMORY_MB = 128
MAX_LAMBDA_MEMORY_MB = 10_240
MAX_QUERY_ATTEMPTS = 10
MIN_PERIOD_S = 60  # history TTL and query window: the runtime's minimum
SQL_PLACEHOLDERS = 2
REMOVAL_POLICIES = ("RETAIN", "DESTROY")

_CRON_FIELDS = "minutes hours day-of-month month day-of-week year"
_JOB_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # no "#": it separates the parts of the lock keys
_GLUE_NAME = re.compile(r"[a-z0-9_]{1,255}")  # Athena/Glue: lowercase letters, digits, underscore
_WORKGROUP_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
_CRON = re.compile(r"cron\((?P<body>[^()]+)\)")


class ConfigError(ValueError):
    """The CDK context is invalid. ``problems`` holds one message per offending key."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


class _Invalid(Exception):
    """Internal: one value failed its check; the message says what is allowed."""


# --- value checks: each returns the normalized value or raises _Invalid(allowed-values text) -------


def _integer(lo: int | None = None, hi: int | None = None) -> Callable[[Any], int]:
    if lo is not None and hi is not None:
        allowed = f"an integer from {lo} to {hi}"
    elif lo is not None:
        allowed = f"an integer >= {lo}"
    else:
        allowed = "an integer"

    def check(value: Any) -> int:
        # bool is an int subclass; a float (even 3.0) or a string is a typo worth reporting.
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Invalid(allowed)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise _Invalid(allowed)
        return value

    return check


def _name(pattern: re.Pattern[str], allowed: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise _Invalid(allowed)
        return value

    return check


def _one_of(choices: Sequence[str]) -> Callable[[Any], str]:
    allowed = "one of " + ", ".join(choices)

    def check(value: Any) -> str:
        if not isinstance(value, str) or value.upper() not in choices:
            raise _Invalid(allowed)
        return value.upper()

    return check


def _query_sql(value: Any) -> str:
    """The runtime binds the window's start and end to the query's two ``?`` placeholders."""
    if not isinstance(value, str) or not value.strip():
        raise _Invalid("a non-empty SQL statement")
    if value.count("?") != SQL_PLACEHOLDERS:
        raise _Invalid(f"a SQL statement with exactly {SQL_PLACEHOLDERS} ? placeholders (window start, window end)")
    return value


def _cron_expression(value: Any) -> str:
    """An EventBridge Scheduler ``cron(...)`` expression with six fields.

    ``rate(...)`` is rejected: a rate schedule is anchored to its creation time, so the racers'
    schedules (created one after the other) would not share a scheduled time, hence not a slot.
    ``at(...)`` is a one-time schedule, not a recurring job.
    """
    allowed = f"a cron(...) expression with 6 fields ({_CRON_FIELDS})"
    if not isinstance(value, str):
        raise _Invalid(allowed)
    text = value.strip()
    if text.startswith("rate("):
        raise _Invalid(
            f"{allowed}; rate(...) is rejected because rate schedules are anchored to their creation "
            "time, so the racers' schedules would not share a scheduled time"
        )
    match = _CRON.fullmatch(text)
    if not match:
        raise _Invalid(allowed)
    parts = match["body"].split()
    if len(parts) != 6:
        raise _Invalid(allowed)
    day_of_month, day_of_week = parts[2], parts[4]
    if (day_of_month == "?") == (day_of_week == "?"):
        raise _Invalid(f"{allowed}, with '?' in exactly one of day-of-month and day-of-week")
    return text


@dataclass(frozen=True, kw_only=True)
class JobConfig:
    """Validated job settings. Units are in the names; every value is already checked."""

    job_name: str
    schedule_expression: str  # cron(...) in UTC, shared by every racer
    racers: int  # number of schedules (one Lambda invocation each) racing for a slot
    lease_duration_s: int
    heartbeat_interval_s: int
    max_slot_age_s: int  # also the async invocation's maximum event age
    history_ttl_s: int
    max_query_attempts: int
    window_s: int
    data_year: int
    lambda_timeout_s: int
    lambda_memory_mb: int
    database: str
    table: str
    workgroup: str
    sql: str
    removal_policy: str = "RETAIN"  # of the stateful resources: tables, bucket, log group

    @classmethod
    def from_context(cls, job: Any) -> JobConfig:
        """Parse the ``"job"`` context value (a mapping, or its JSON text as ``cdk -c job=...`` gives).

        :raises ConfigError: listing every missing, unknown or invalid key.
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
            problems.append(f"context {CONTEXT_KEY}.{key}: unknown key; allowed keys: {', '.join(known)}")
        for key, check in _CHECKS.items():
            if key not in job:
                if known[key].default is MISSING:
                    problems.append(f"context {CONTEXT_KEY}.{key}: missing; required")
                continue
            try:
                values[key] = check(job[key])
            except _Invalid as exc:
                problems.append(f"context {CONTEXT_KEY}.{key}: must be {exc}, got {job[key]!r}")

        lease, heartbeat = values.get("lease_duration_s"), values.get("heartbeat_interval_s")
        if lease is not None and heartbeat is not None and not heartbeat < lease / 2:
            problems.append(
                f"context {CONTEXT_KEY}.heartbeat_interval_s: must be less than half of "
                f"{CONTEXT_KEY}.lease_duration_s ({lease} / 2 = {lease / 2:g}), got {heartbeat}"
            )
        if problems:
            raise ConfigError(problems)
        return cls(**values)


# One check per field, in field order (the dataclass and this table must name the same keys).
_CHECKS: dict[str, Callable[[Any], Any]] = {
    "job_name": _name(_JOB_NAME, "1 to 64 letters, digits, '-' or '_'"),
    "schedule_expression": _cron_expression,
    "racers": _integer(1, MAX_RACERS),
    "lease_duration_s": _integer(1),
    "heartbeat_interval_s": _integer(1),
    "max_slot_age_s": _integer(MIN_EVENT_AGE_S, MAX_LAMBDA_EVENT_AGE_S),
    "history_ttl_s": _integer(MIN_PERIOD_S),
    "max_query_attempts": _integer(1, MAX_QUERY_ATTEMPTS),
    "window_s": _integer(MIN_PERIOD_S),
    "data_year": _integer(1900, 2100),
    "lambda_timeout_s": _integer(1, MAX_LAMBDA_TIMEOUT_S),
    "lambda_memory_mb": _integer(MIN_LAMBDA_MEMORY_MB, MAX_LAMBDA_MEMORY_MB),
    "database": _name(_GLUE_NAME, "1 to 255 lowercase letters, digits or '_' (a Glue/Athena name)"),
    "table": _name(_GLUE_NAME, "1 to 255 lowercase letters, digits or '_' (a Glue/Athena name)"),
    "workgroup": _name(_WORKGROUP_NAME, "1 to 128 letters, digits, '.', '-' or '_'"),
    "sql": _query_sql,
    "removal_policy": _one_of(REMOVAL_POLICIES),
}
if list(_CHECKS) != [field.name for field in fields(JobConfig)]:  # pragma: no cover - a programming error
    raise RuntimeError("JobConfig's fields and _CHECKS must name the same keys in the same order")


def load_context(path: str | Path = "cdk.json") -> dict[str, Any]:
    """Return the ``"context"`` object of a cdk.json file (empty if it has none)."""
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    context = document.get("context", {})
    if not isinstance(context, dict):
        raise ConfigError([f"{path}: 'context' must be an object, got {type(context).__name__}"])
    return context


def load_app_options(path: str | Path = "cdk.json") -> dict[str, Any]:
    """Return cdk.json's top-level settings that the CLI would otherwise turn into App options.

    Only ``versionReporting`` matters here: the CLI passes it as context, so ``python app.py`` must
    apply it too for both synths to produce the same template.
    """
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    return {"analytics_reporting": bool(document.get("versionReporting", True))}
