"""The relationships between a job's keys, re-exported from :mod:`athena_refresh.job_rules` (where they live so
that the runtime's :class:`~athena_refresh.jobspec.JobSpec` runs them at cold start as synth does)."""

from __future__ import annotations

from athena_refresh.job_rules import (
    ASYNC_FIRST_RETRY_DELAY_S,
    CLOCK_SKEW_ALLOWANCE_S,
    COMMIT_RESERVE_S,
    MIN_SCHEDULE_PERIOD_S,
    heartbeat_bound_s,
    relationship_problems,
)

__all__ = [
    "ASYNC_FIRST_RETRY_DELAY_S",
    "CLOCK_SKEW_ALLOWANCE_S",
    "COMMIT_RESERVE_S",
    "MIN_SCHEDULE_PERIOD_S",
    "heartbeat_bound_s",
    "relationship_problems",
]
