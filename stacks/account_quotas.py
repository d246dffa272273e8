"""Account quotas that grow with the number of jobs, counted at synth: IAM roles, and the racers that start in the
busiest minute against Lambda's concurrency. Each is one line; a line over the quota says what to request.

- IAM: "Roles in an AWS account": 1,000 by default, adjustable up to 5,000 ("IAM and AWS STS quotas",
  https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html). This app makes two roles per job
  (the function's execution role, which reads the job's own source only, and the job's EventBridge Scheduler
  role, which may invoke that job's function only: with the capacity budget on, the job's function passes that role
  to its own deferral schedules, so a role shared by a job stack would let one job's function invoke another's)
  plus a few in the shared stack. The count is the roles the templates declare; roles of other applications in the
  account count against the same quota.
- Lambda: "Concurrent executions": 1,000 per Region by default (new accounts may start lower), shared by every
  function of the account in the Region ("Lambda quotas",
  https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html). Every racer of every job firing in the
  same minute starts at once (the schedules' flexible time window is off); the busiest minute of a reference week
  is counted. A racer over the quota is throttled: Lambda retries a throttled asynchronous event for up to
  ``max_slot_age_s``, and the lock makes a late racer harmless, but a slot can be missed.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_iam as iam

from slotlock.schedule import firings_between

DEFAULT_ROLES_PER_ACCOUNT = 1_000
MAX_ROLES_PER_ACCOUNT = 5_000
IAM_QUOTAS_URL = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html"
DEFAULT_LAMBDA_CONCURRENCY = 1_000
LAMBDA_QUOTAS_URL = "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"
#: The reference week whose busiest minute is counted (a Monday, UTC; a schedule that does not fire in it counts 0).
REFERENCE_WEEK_START = dt.datetime(2027, 1, 4, tzinfo=dt.UTC)
REFERENCE_WEEK = dt.timedelta(days=7)
_MAX_FIRINGS_PER_WEEK = 7 * 24 * 60  # a cron fires at most once a minute


@dataclass(frozen=True)
class ScheduledJob:
    """What the busiest minute needs of one job: its cron, time zone and racers."""

    schedule_expression: str
    schedule_timezone: str
    racers: int


@dataclass(frozen=True)
class BusiestMinute:
    """The minute of the reference week in which the most racers start, and how many (``at`` None: no firing)."""

    racers: int
    at: dt.datetime | None


def count_roles(stacks: Iterable[cdk.Stack]) -> int:
    """The IAM roles the stacks declare (``AWS::IAM::Role``), from the construct trees (before synthesis)."""
    return sum(1 for stack in stacks for node in stack.node.find_all() if isinstance(node, iam.CfnRole))


def busiest_minute(jobs: Sequence[ScheduledJob]) -> BusiestMinute:
    """Sum each minute's starting racers over the reference week (each distinct schedule enumerated once)."""
    end = REFERENCE_WEEK_START + REFERENCE_WEEK - dt.timedelta(minutes=1)
    racers_by_schedule: Counter[tuple[str, str]] = Counter()
    for job in jobs:
        racers_by_schedule[(job.schedule_expression, job.schedule_timezone)] += job.racers
    per_minute: Counter[dt.datetime] = Counter()
    for (expression, timezone), racers in racers_by_schedule.items():
        for firing in firings_between(expression, timezone, REFERENCE_WEEK_START, end, limit=_MAX_FIRINGS_PER_WEEK):
            per_minute[firing] += racers
    if not per_minute:
        return BusiestMinute(0, None)
    at, racers = max(per_minute.items(), key=lambda item: (item[1], -item[0].timestamp()))
    return BusiestMinute(racers, at)


def quota_lines(*, roles: int, busiest: BusiestMinute, jobs: int) -> list[str]:
    """Two lines: the roles against IAM's default quota, the busiest minute against Lambda's; each over its quota
    says what to request."""
    role_line = f"IAM roles: {roles} declared ({jobs} jobs: 2 each) against IAM's default {DEFAULT_ROLES_PER_ACCOUNT:,}"
    if roles > DEFAULT_ROLES_PER_ACCOUNT:
        role_line += (
            f" per account ({IAM_QUOTAS_URL}): OVER; request 'Roles per account' of at least {roles} plus the roles "
            f"the account already has (Service Quotas, IAM; adjustable up to {MAX_ROLES_PER_ACCOUNT:,})"
        )
    else:
        role_line += f" per account ({IAM_QUOTAS_URL}): within, with the account's other roles counted too"
    when = f" at {busiest.at:%a %H:%M} UTC of the reference week" if busiest.at else ""
    lambda_line = (
        f"Lambda: {busiest.racers} racers start in the busiest minute{when} against Lambda's default "
        f"{DEFAULT_LAMBDA_CONCURRENCY:,} concurrent executions per Region ({LAMBDA_QUOTAS_URL})"
    )
    if busiest.racers > DEFAULT_LAMBDA_CONCURRENCY:
        lambda_line += (
            f": OVER; request 'Concurrent executions' of at least {busiest.racers} plus what the account's other "
            "functions use at that minute (Service Quotas, Lambda), or spread the jobs' minutes or lower their racers"
        )
    else:
        lambda_line += ": within (the account's other functions share it; new accounts may start lower)"
    return [role_line, lambda_line]
