"""A job stack: the jobs of one group (:mod:`stacks.job_groups`), each with its own small asset.

Each job's function gets an asset of its own: the runtime packages plus a job catalog holding that job alone and the
deployment's capacity budget (:func:`stacks.runtime_asset.stage_job_asset`), so editing one job folder changes one
asset hash, one function and one stack. The shared resources come from the shared stack as CloudFormation cross-stack references
(exports of ``ScheduledAthenaRefresh``, imported here), which also make ``cdk deploy --all`` deploy the shared
stack first. Each job keeps its own EventBridge Scheduler role, allowed to invoke its own function only.

A group without jobs is an empty stack (no resources): ``cdk deploy`` skips it, or deletes it when it exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from constructs import Construct

from stacks.constructs.athena_job import AthenaJob, SharedResources
from stacks.jobs import JobDefinition
from stacks.runtime_asset import stage_job_asset

#: CDK's default validation rule "Resources section must exist and be non-empty".
EMPTY_TEMPLATE_RULE = "CloudFormation-Validate::F0001"


class JobGroupStack(cdk.Stack):
    """The jobs of one group: one :class:`AthenaJob` per job (``jobs``: name -> construct).

    :param group: the group's index (the stack is ``<shared>-Jobs-<group:02d>``).
    :param jobs: the group's validated job folders (may be empty).
    :param shared: the shared stack's resources every job uses.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        group: int,
        jobs: Sequence[JobDefinition],
        shared: SharedResources,
        removal_policy: cdk.RemovalPolicy,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.group = group
        self.definitions: tuple[JobDefinition, ...] = tuple(jobs)
        #: Each job's staged asset directory (runtime packages + that job's catalog), by job name.
        self.asset_dirs: dict[str, Path] = {}
        self.jobs: dict[str, AthenaJob] = {}
        if not jobs:
            # CDK's default rules refuse a template without resources (F0001); an empty job stack is deliberate: it
            # removes the group's deployed stack on the next `cdk deploy` (see the module doc).
            cdk.Validations.of(self).acknowledge(
                cdk.Acknowledgment(id=EMPTY_TEMPLATE_RULE, reason="an empty job group: cdk deploy deletes its stack")
            )
            return
        for job in jobs:
            asset_dir = self.asset_dirs[job.job_name] = stage_job_asset(job, capacity=shared.capacity.budget)
            self.jobs[job.job_name] = AthenaJob(
                self,
                f"Job-{job.job_name}",
                job=job,
                shared=shared,
                removal_policy=removal_policy,
                code_dir=asset_dir,
                group=group,
            )
