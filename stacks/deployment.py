"""The whole deployment: the shared stack plus one job stack per group, built from the validated job folders.

``ScheduledAthenaRefresh`` (:class:`~stacks.refresh_stack.ScheduledAthenaRefreshStack`) holds what the jobs share;
``ScheduledAthenaRefresh-Jobs-00`` .. ``-Jobs-<K-1>`` (:class:`~stacks.job_stack.JobGroupStack`, K = cdk.json context
``stack.job_stacks``) hold the jobs, assigned by :mod:`stacks.job_groups`. Every job stack depends on the shared stack
(it imports its exports), so ``cdk deploy --all`` deploys the shared stack first, then the job stacks (several at
once with ``--concurrency``). docs/architecture.md argues the layout; docs/operations.md describes the upgrade from
the one-stack layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aws_cdk as cdk
from constructs import Construct

from stacks import account_quotas, quotas
from stacks.job_groups import SHARED_STACK_NAME, group_jobs, group_stack_name
from stacks.job_stack import JobGroupStack
from stacks.jobs import JobDefinition
from stacks.refresh_stack import ScheduledAthenaRefreshStack
from stacks.stack_settings import StackSettings

#: The one jobs/defaults.toml line that keeps every job's own metrics and alarm (issue 35).
KEEP_PER_JOB_METRICS_LINE = "per_job_metrics = true"
#: How many opted-out jobs the notice names (then "and N more").
NOTICE_NAMES = 10

SHARED_DESCRIPTION = "Scheduled Athena refresh: what every job shares (tables, bucket, workgroup, read side, dashboard)"


@dataclass
class Deployment:
    """``shared``: the shared stack; ``job_stacks``: group -> its stack (every group, empty ones too)."""

    shared: ScheduledAthenaRefreshStack
    job_stacks: dict[int, JobGroupStack] = field(default_factory=dict)

    @property
    def stacks(self) -> list[cdk.Stack]:
        """The shared stack, then the job stacks by group."""
        return [self.shared, *(self.job_stacks[group] for group in sorted(self.job_stacks))]

    @property
    def definitions(self) -> tuple[JobDefinition, ...]:
        return self.shared.definitions

    def stack_of(self, job_name: str) -> JobGroupStack:
        """The job stack deploying ``job_name``. :raises KeyError: no such job."""
        for stack in self.job_stacks.values():
            if job_name in stack.jobs:
                return stack
        raise KeyError(job_name)

    def quota_problems(self) -> list[str]:
        """Every stack over CloudFormation's resource or output quota, one line each (before synthesis)."""
        counts = [quotas.count(self.shared)]
        counts += [quotas.count(stack, jobs=len(stack.jobs)) for stack in self.job_stacks.values()]
        return quotas.count_problems(counts, job_stacks=len(self.job_stacks))

    def account_quota_lines(self) -> list[str]:
        """IAM roles and the busiest minute's racers against the account's default quotas, one line each
        (:mod:`stacks.account_quotas`); a line over its quota says what to request."""
        busiest = account_quotas.busiest_minute(
            [
                account_quotas.ScheduledJob(
                    job.config.schedule_expression, job.config.schedule_timezone, job.config.racers
                )
                for job in self.definitions
            ]
        )
        return account_quotas.quota_lines(
            roles=account_quotas.count_roles(self.stacks), busiest=busiest, jobs=len(self.definitions)
        )

    def account_quota_warnings(self) -> list[str]:
        """The lines of :meth:`account_quota_lines` that are over their quota (what synth prints as warnings)."""
        return [line for line in self.account_quota_lines() if ": OVER;" in line]

    def per_job_metrics_notice(self) -> str | None:
        """One line naming the jobs that do not opt in to their own metrics (``per_job_metrics``, off by default
        since issue 35): a deploy removes each one's ``NoRecentSuccess`` alarm where an earlier version deployed it
        (their metrics stop), and the one team-defaults line that keeps them. ``None``: every job opts in."""
        names = sorted(job.job_name for job in self.definitions if not job.config.per_job_metrics)
        if not names:
            return None
        shown = ", ".join(names[:NOTICE_NAMES]) + (
            f" and {len(names) - NOTICE_NAMES} more" if len(names) > NOTICE_NAMES else ""
        )
        return (
            f"{len(names)} of {len(self.definitions)} jobs do not opt in to their own metrics and alarm "
            f"(per_job_metrics, off by default): a deploy removes the NoRecentSuccess alarm of each that has one "
            f"and their 3 custom metrics stop ({shown}); to keep them add `{KEEP_PER_JOB_METRICS_LINE}` to "
            "jobs/defaults.toml (docs/operations.md#upgrading-to-opt-in-per-job-metrics)"
        )


def build_deployment(
    scope: Construct,
    *,
    settings: StackSettings,
    jobs: Sequence[JobDefinition],
    sample_data_dir: Path,
    shared_stack_name: str = SHARED_STACK_NAME,
) -> Deployment:
    """The shared stack and every group's job stack under ``scope`` (the app).

    :raises ValueError: no job.
    """
    shared = ScheduledAthenaRefreshStack(
        scope,
        shared_stack_name,
        settings=settings,
        jobs=jobs,
        sample_data_dir=sample_data_dir,
        description=SHARED_DESCRIPTION,
    )
    groups = group_jobs([(job.job_name, job.config.stack_group, job) for job in jobs], settings.job_stacks)
    deployment = Deployment(shared)
    for group, members in groups.items():
        name = group_stack_name(group, shared_stack_name)
        deployment.job_stacks[group] = JobGroupStack(
            scope,
            name,
            group=group,
            jobs=members,
            shared=shared.shared,
            removal_policy=shared.removal_policy,
            description=(
                f"Scheduled Athena refresh: jobs of group {group:02d} ({len(members)} jobs; per job N racers and one "
                "fenced DynamoDB lease per schedule slot)"
            ),
        )
    return deployment
