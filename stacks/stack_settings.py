"""The stack-wide settings (cdk.json ``context.stack``): :class:`StackSettings`, and reading cdk.json.

What every job of a deployment shares: names, removal policy, alarm email, the read API's throttling, the number of
job stacks. Each key is checked as the job keys are (:mod:`stacks.checks`); every problem
names its context key and the allowed values, e.g. ``context stack.job_stacks: must be an integer from 1 to
100 (...), got 0``, and all of them are raised together in one :class:`~stacks.checks.ConfigError`.

:mod:`stacks.config` re-exports every name here (``from stacks.config import StackSettings`` keeps working).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stacks.checks import (
    GLUE_NAME,
    GLUE_NAME_RULE,
    REMOVAL_POLICIES,
    WORKGROUP_NAME,
    WORKGROUP_NAME_RULE,
    ConfigError,
    Invalid,
    InvalidKeys,
    email,
    integer,
    named,
    object_of,
    one_of,
    optional,
)
from stacks.job_groups import DEFAULT_JOB_STACKS, MAX_JOB_STACKS

STACK_KEY = "stack"  # the context key holding the stack-wide settings

# The read API's stage throttling (requests per second, steady rate and burst). API Gateway's account-level
# throttling quota per Region is 10,000 requests per second with a burst of 5,000 (default quota); a stage
# limit above it never applies.
# https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-throttling.html
MAX_API_THROTTLE_RATE_LIMIT = 10_000
MAX_API_THROTTLE_BURST_LIMIT = 5_000


@dataclass(frozen=True, kw_only=True)
class StackSettings:
    """What every job of the stack shares (cdk.json context ``stack``): names, removal policy, alarm email, the
    read API's throttling, and the job stacks."""

    workgroup: str = "athena-refresh"
    sample_database: str = "flights_demo"
    removal_policy: str = "RETAIN"  # of the stateful resources: tables, buckets, log groups, queues
    alarm_email: str | None = None  # subscribed to the alarm topic every job's alarms notify
    # The read API's $default stage (every route): steady requests per second and burst (token bucket size).
    api_throttle_rate_limit: int = 20
    api_throttle_burst_limit: int = 40
    # How many job stacks the jobs are spread over (stacks.job_groups): changing it moves jobs between stacks.
    job_stacks: int = DEFAULT_JOB_STACKS

    @classmethod
    def from_context(cls, value: Any) -> StackSettings:
        """Parse the ``"stack"`` context value. :raises ConfigError: naming every invalid or unknown key."""
        check = object_of(
            {
                "workgroup": (named(WORKGROUP_NAME, WORKGROUP_NAME_RULE), cls.workgroup),
                "sample_database": (named(GLUE_NAME, GLUE_NAME_RULE), cls.sample_database),
                "removal_policy": (one_of(REMOVAL_POLICIES), cls.removal_policy),
                "alarm_email": (optional(email), None),
                "api_throttle_rate_limit": (
                    integer(1, MAX_API_THROTTLE_RATE_LIMIT, "requests per second; API Gateway's account quota"),
                    cls.api_throttle_rate_limit,
                ),
                "api_throttle_burst_limit": (
                    integer(1, MAX_API_THROTTLE_BURST_LIMIT, "requests; API Gateway's account burst quota"),
                    cls.api_throttle_burst_limit,
                ),
                "job_stacks": (integer(1, MAX_JOB_STACKS, "job stacks (stacks.job_groups)"), cls.job_stacks),
            },
            cls,
        )
        try:
            settings: StackSettings = check({} if value is None else value)
        except Invalid as exc:
            raise ConfigError([f"context {STACK_KEY}: must be {exc}, got {value!r}"]) from None
        except InvalidKeys as exc:
            raise ConfigError([f"context {STACK_KEY}.{key}: {message}" for key, message in exc.problems]) from None
        return settings


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
