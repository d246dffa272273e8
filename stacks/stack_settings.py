"""The stack-wide settings (cdk.json ``context.stack``): :class:`StackSettings` and its :class:`CapacitySettings`
(the deployment's Athena capacity budget, issue 24), and reading cdk.json.

What every job of a deployment shares: names, removal policy, alarm email, the read API's throttling, the number of
job stacks, and the capacity budget. Each key is checked as the job keys are (:mod:`athena_refresh.checks`); every
problem names its context key and the allowed values, e.g. ``context stack.capacity.permits: must be an integer from 0
to 99 (...), got 100``, and all of them are raised together in one :class:`~athena_refresh.checks.ConfigError`. A
number the runtime reads as well takes its bounds from ``athena_refresh.contract.NUMERIC_BOUNDS``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from athena_refresh import contract  # constants only (stdlib), installed with the project
from athena_refresh.budget import CapacityBudget, headroom_problem
from athena_refresh.checks import (
    GLUE_NAME,
    GLUE_NAME_RULE,
    REMOVAL_POLICIES,
    WORKGROUP_NAME,
    WORKGROUP_NAME_RULE,
    ConfigError,
    Invalid,
    InvalidKeys,
    bounded,
    distinct_list,
    email,
    integer,
    named,
    object_of,
    one_of,
    optional,
)
from slotlock import table as lock_table
from stacks.job_groups import DEFAULT_JOB_STACKS, MAX_JOB_STACKS

STACK_KEY = "stack"  # the context key holding the stack-wide settings
CAPACITY_KEY = "capacity"  # its sub key holding the capacity budget

# The read API's stage throttling (requests per second, steady rate and burst). API Gateway's account-level
# throttling quota per Region is 10,000 requests per second with a burst of 5,000 (default quota); a stage
# limit above it never applies.
# https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-throttling.html
MAX_API_THROTTLE_RATE_LIMIT = 10_000
MAX_API_THROTTLE_BURST_LIMIT = 5_000

#: At most this many other deployments' workgroups in ``capacity.shared_workgroups``: one ARN each in every job role's
#: inline policy (IAM: a role's inline policies total at most 10,240 characters,
#: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html).
MAX_SHARED_WORKGROUPS = 20

#: The Scheduler schedule group of the deferred re-invocations: every account has ``default``; a schedule's ARN is
#: ``arn:<partition>:scheduler:<region>:<account>:schedule/<group>/<name>``.
DEFERRAL_SCHEDULE_GROUP = "default"


@dataclass(frozen=True, kw_only=True)
class CapacitySettings:
    """The deployment's Athena capacity budget (cdk.json ``context.stack.capacity``): at most ``permits`` of the
    queries of every deployment sharing ``semaphore_name`` are active at once (0: off, no semaphore request).

    ``semaphore_name`` ``None``: ``<account id>-<region>`` of the deployment (CloudFormation pseudo parameters), so
    every deployment in one account and Region shares one budget, as Athena's quota is shared. A slot waits up to
    ``wait_in_place_s`` for a permit, then gives its invocation back and is re-invoked ``retry_delay_s`` later (a
    one-time Scheduler schedule); a manual run leaves ``manual_headroom`` permits free for the live schedules.

    ``shared_workgroups``: the Athena workgroups of the other deployments sharing the budget (same account and
    Region: Athena's quota is per account and Region, so a shared budget always is). An expired permit of another
    deployment names a query in its workgroup, and the waiter asks ``GetQueryExecution`` whether that query ended
    before it reclaims the permit: each job role may call that action (only that one) on these workgroups.
    """

    permits: int = contract.DEFAULT_CAPACITY_PERMITS
    semaphore_name: str | None = None
    table_name: str | None = None  # another deployment's lock table, to share its budget (None: our lock table)
    wait_in_place_s: int = contract.DEFAULT_CAPACITY_WAIT_IN_PLACE_S
    manual_headroom: int = contract.DEFAULT_CAPACITY_MANUAL_HEADROOM
    retry_delay_s: int = contract.DEFAULT_CAPACITY_RETRY_DELAY_S
    max_query_active_s: int = contract.DEFAULT_CAPACITY_MAX_QUERY_ACTIVE_S  # the workgroup's DML query timeout
    shared_workgroups: tuple[str, ...] = ()  # other deployments' workgroups whose queries the jobs may look up

    @property
    def enabled(self) -> bool:
        """Whether the budget is on (``permits`` > 0): only then do the functions get its grants."""
        return self.permits > 0

    @property
    def budget(self) -> CapacityBudget:
        """The budget's numbers as the runtime reads them: written into every job's catalog (its ``capacity``
        section, ``athena_refresh.catalog``), loaded back at cold start into the same class."""
        return CapacityBudget(
            permits=self.permits,
            wait_in_place_s=self.wait_in_place_s,
            manual_headroom=self.manual_headroom,
            retry_delay_s=self.retry_delay_s,
            max_query_active_s=self.max_query_active_s,
        )

    def runtime_environment(
        self,
        *,
        default_semaphore_name: str,
        lock_table_name: str,
        deferral_role_arn: str,
        deferral_schedule_prefix: str,
        deferral_schedule_group: str = DEFERRAL_SCHEDULE_GROUP,
    ) -> dict[str, str]:
        """``contract.CAPACITY_ENV_VARS`` (the budget's wiring) as text, the same for every job but the deferral's
        role and prefix; the budget's numbers travel in the job catalog (:attr:`budget`).

        ``default_semaphore_name``: the name when ``semaphore_name`` is not set (the stack passes
        ``<AWS::AccountId>-<AWS::Region>`` as CDK tokens, known at deploy time only). Set with ``permits`` 0 too.
        """
        return {
            contract.ENV_CAPACITY_SEMAPHORE_NAME: self.semaphore_name or default_semaphore_name,
            contract.ENV_CAPACITY_TABLE_NAME: self.table_name or lock_table_name,
            contract.ENV_DEFERRAL_ROLE_ARN: deferral_role_arn,
            contract.ENV_DEFERRAL_SCHEDULE_GROUP: deferral_schedule_group,
            contract.ENV_DEFERRAL_SCHEDULE_PREFIX: deferral_schedule_prefix,
        }


def _capacity(**values: Any) -> CapacitySettings:
    """The budget from its checked keys, and the one rule between them (headroom below permits when on)."""
    message = headroom_problem(values["permits"], values["manual_headroom"])
    if message:
        raise InvalidKeys([("manual_headroom", message)])
    return CapacitySettings(**values)


_CAPACITY_CHECKS: dict[str, tuple[Any, Any]] = {
    "permits": (
        bounded(
            contract.ENV_CAPACITY_PERMITS,
            "0: off; active Athena queries of every deployment sharing the semaphore; keep the sum of the budgets "
            "below the account's active DML query quota",
        ),
        contract.DEFAULT_CAPACITY_PERMITS,
    ),
    "semaphore_name": (
        optional(named(lock_table.SEMAPHORE_NAME_PATTERN, f"{lock_table.SEMAPHORE_NAME_RULE}, or null")),
        None,
    ),
    "table_name": (
        optional(
            named(
                re.compile(r"[A-Za-z0-9_.-]{3,255}"),
                "a DynamoDB table name (3 to 255 letters, digits, '_', '-', '.'): another deployment's lock table in "
                "this account and Region, or null",
            )
        ),
        None,
    ),
    "wait_in_place_s": (
        bounded(contract.ENV_CAPACITY_WAIT_IN_PLACE_S, "seconds a slot waits for a permit before giving it back"),
        contract.DEFAULT_CAPACITY_WAIT_IN_PLACE_S,
    ),
    "manual_headroom": (
        bounded(contract.ENV_CAPACITY_MANUAL_HEADROOM, "permits a manual run leaves free for the live schedules"),
        contract.DEFAULT_CAPACITY_MANUAL_HEADROOM,
    ),
    "retry_delay_s": (
        bounded(
            contract.ENV_CAPACITY_RETRY_DELAY_S,
            "seconds until a slot given back is invoked again; Scheduler's one-time schedules have minute granularity",
        ),
        contract.DEFAULT_CAPACITY_RETRY_DELAY_S,
    ),
    "max_query_active_s": (
        bounded(
            contract.ENV_CAPACITY_MAX_QUERY_ACTIVE_S,
            "the longest a query stays active (your DML query timeout quota, 30 minutes by default): a permit whose "
            "query start was never recorded stays counted this long past its expiry",
        ),
        contract.DEFAULT_CAPACITY_MAX_QUERY_ACTIVE_S,
    ),
    "shared_workgroups": (
        distinct_list(
            named(WORKGROUP_NAME, WORKGROUP_NAME_RULE),
            f"Athena workgroup names ({WORKGROUP_NAME_RULE} each) of the other deployments sharing this budget, in "
            "this account and Region",
            max_items=MAX_SHARED_WORKGROUPS,
        ),
        (),
    ),
}


@dataclass(frozen=True, kw_only=True)
class StackSettings:
    """What every job of the stack shares (cdk.json context ``stack``): names, removal policy, alarm email, the
    read API's throttling, the job stacks and the Athena capacity budget."""

    workgroup: str = "athena-refresh"
    sample_database: str = "flights_demo"
    removal_policy: str = "RETAIN"  # of the stateful resources: tables, buckets, log groups, queues
    alarm_email: str | None = None  # subscribed to the alarm topic every job's alarms notify
    # The read API's $default stage (every route): steady requests per second and burst (token bucket size).
    api_throttle_rate_limit: int = 20
    api_throttle_burst_limit: int = 40
    # How many job stacks the jobs are spread over (stacks.job_groups): changing it moves jobs between stacks.
    job_stacks: int = DEFAULT_JOB_STACKS
    # The deployment's Athena capacity budget: in every job's catalog (its numbers) and function environment (its
    # wiring), so a change updates every job.
    capacity: CapacitySettings = field(default_factory=CapacitySettings)

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
                CAPACITY_KEY: (object_of(_CAPACITY_CHECKS, _capacity), CapacitySettings()),
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
