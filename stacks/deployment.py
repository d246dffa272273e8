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

from stacks import quotas
from stacks.job_groups import SHARED_STACK_NAME, group_jobs, group_stack_name
from stacks.job_stack import JobGroupStack
from stacks.jobs import JobDefinition
from stacks.refresh_stack import ScheduledAthenaRefreshStack
from stacks.stack_settings import StackSettings

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
