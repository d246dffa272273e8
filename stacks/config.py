"""A job's settings as the stack validates them: :class:`JobConfig`, the runtime's
:class:`athena_refresh.jobspec.JobSpec` (one model, validated once by its construction, loaded back at cold start)
with the query's output columns found by sqlglot; the stack-wide settings are re-exported from
:mod:`stacks.stack_settings` and the value checks from :mod:`stacks.checks`, so ``from stacks.config import ...``
keeps working for every name.

:mod:`stacks.jobs` reads each ``jobs/<job>/job.toml`` and builds its :class:`JobSpec`. Every problem names its
file (or context key) and the allowed values, for example
``jobs/flights-dashboard/job.toml: racers: must be an integer from 1 to 20, got 0`` (:class:`Labels`). All
problems are collected and raised together in one :class:`ConfigError`, so a broken job folder is fixed in one
round. The rules themselves (per key, between keys, the defaults' derivation) live in the runtime package:
:mod:`athena_refresh.jobspec`, :mod:`athena_refresh.job_rules`, :mod:`athena_refresh.job_defaults`.

This module reads no environment variable and calls no AWS API: ``app.py`` passes the parsed context in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from athena_refresh.jobspec import (
    CONTEXT_KEY,
    CONTEXT_LABELS,
    MAX_ALARM_DATA_SCANNED_BYTES,
    MAX_ALARM_QUERY_DURATION_MS,
    MAX_BYTES_SCANNED_CUTOFF,
    MAX_LAMBDA_EVENT_AGE_S,
    MAX_LAMBDA_MEMORY_MB,
    MAX_LAMBDA_TIMEOUT_S,
    MAX_QUERY_ATTEMPTS,
    MAX_RACERS,
    MAX_RESULT_REUSE_AGE_MIN,
    MAX_VALUE_COLUMNS,
    MAX_VALUE_DIMENSIONS,
    MAX_VALUE_SERIES,
    MIN_BYTES_SCANNED_CUTOFF,
    MIN_EVENT_AGE_S,
    MIN_LAMBDA_MEMORY_MB,
    AlarmsSpec,
    JobSpec,
    ValueMetricsSpec,
    check_key,
)
from stacks import stack_settings
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
    format_problems,
)
from stacks.job_relationships import ASYNC_FIRST_RETRY_DELAY_S, CLOCK_SKEW_ALLOWANCE_S
from stacks.query_sql import output_columns as query_output_columns

__all__ = [
    "ASYNC_FIRST_RETRY_DELAY_S",
    "CLOCK_SKEW_ALLOWANCE_S",
    "CONTEXT_KEY",
    "CONTEXT_LABELS",
    "GLUE_NAME",
    "GLUE_NAME_RULE",
    "MAX_ALARM_DATA_SCANNED_BYTES",
    "MAX_ALARM_QUERY_DURATION_MS",
    "MAX_API_THROTTLE_BURST_LIMIT",
    "MAX_API_THROTTLE_RATE_LIMIT",
    "MAX_BYTES_SCANNED_CUTOFF",
    "MAX_LAMBDA_EVENT_AGE_S",
    "MAX_LAMBDA_MEMORY_MB",
    "MAX_LAMBDA_TIMEOUT_S",
    "MAX_QUERY_ATTEMPTS",
    "MAX_RACERS",
    "MAX_RESULT_REUSE_AGE_MIN",
    "MAX_VALUE_COLUMNS",
    "MAX_VALUE_DIMENSIONS",
    "MAX_VALUE_SERIES",
    "MIN_BYTES_SCANNED_CUTOFF",
    "MIN_EVENT_AGE_S",
    "MIN_LAMBDA_MEMORY_MB",
    "REMOVAL_POLICIES",
    "STACK_KEY",
    "WORKGROUP_NAME",
    "WORKGROUP_NAME_RULE",
    "AlarmsConfig",
    "CapacitySettings",
    "ConfigError",
    "Invalid",
    "InvalidKeys",
    "JobConfig",
    "JobSpec",
    "Labels",
    "StackSettings",
    "ValueMetricsConfig",
    "check_key",
    "format_problems",
    "load_app_options",
    "load_context",
]

# Re-exported: the stack-wide settings, which many modules import from here.
STACK_KEY = stack_settings.STACK_KEY
MAX_API_THROTTLE_RATE_LIMIT = stack_settings.MAX_API_THROTTLE_RATE_LIMIT
MAX_API_THROTTLE_BURST_LIMIT = stack_settings.MAX_API_THROTTLE_BURST_LIMIT
StackSettings = stack_settings.StackSettings
CapacitySettings = stack_settings.CapacitySettings
load_context = stack_settings.load_context
load_app_options = stack_settings.load_app_options

#: The former names of the sub specs.
AlarmsConfig = AlarmsSpec
ValueMetricsConfig = ValueMetricsSpec


class JobConfig(JobSpec):
    """:class:`JobSpec` whose :meth:`from_context` also finds the query's output columns (sqlglot, which the
    runtime does not carry) to check the value metrics against, when the caller does not pass them."""

    @classmethod
    def from_context(
        cls,
        job: Any,
        *,
        labels: Labels = CONTEXT_LABELS,
        output_columns: tuple[str, ...] | None = None,
        check_output_columns: bool = True,
    ) -> JobSpec:
        """:meth:`JobSpec.from_context`, the output columns taken from ``job``'s ``sql`` when not given.

        :raises ConfigError: listing every missing, unknown or invalid key, and every broken relationship.
        """
        if output_columns is None and check_output_columns and isinstance(job, Mapping):
            sql = job.get("sql")
            if isinstance(sql, str) and sql.strip():
                output_columns = query_output_columns(sql)
        return JobSpec.from_context(
            job, labels=labels, output_columns=output_columns, check_output_columns=check_output_columns
        )
