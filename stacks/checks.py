"""The value checks and problem reporting, re-exported from :mod:`athena_refresh.checks` (where they live so that
the runtime's :class:`~athena_refresh.jobspec.JobSpec` runs the same checks at cold start as synth does)."""

from __future__ import annotations

from athena_refresh.checks import (
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
    distinct_list,
    email,
    format_problems,
    integer,
    named,
    object_of,
    one_of,
    optional,
)

__all__ = [
    "GLUE_NAME",
    "GLUE_NAME_RULE",
    "REMOVAL_POLICIES",
    "WORKGROUP_NAME",
    "WORKGROUP_NAME_RULE",
    "ConfigError",
    "Invalid",
    "InvalidKeys",
    "Labels",
    "bounded",
    "distinct_list",
    "email",
    "format_problems",
    "integer",
    "named",
    "object_of",
    "one_of",
    "optional",
]
