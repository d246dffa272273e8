"""One scheduled Athena job: its function and role, fan-out schedules, async-invoke configuration, its one alarm
(opt-in: ``per_job_metrics``), its registry parameter and its share of the deployment's Athena capacity budget (the function logs to the
deployment's one job log group).

Everything a job folder (``jobs/<job>/``) deploys, in its job stack (:mod:`stacks.job_groups`), against the
resources the deployment shares (lock table, results table and bucket, workgroup, alarm topic, on-failure queue).
Removing the folder removes this construct and only it: the job's history and results stay in the shared tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from athena_refresh import contract, registry
from slotlock_cdk.failure_queue import FailureQueue
from slotlock_cdk.once_per_slot_schedule import OncePerSlotSchedule
from stacks.constructs.alarms import alarm_period_s
from stacks.constructs.capacity import wire_capacity
from stacks.constructs.job_metrics import job_metric
from stacks.constructs.refresh_function import QueryTarget, RefreshFunction
from stacks.jobs import GlueSource, JobDefinition
from stacks.stack_settings import CapacitySettings


@dataclass(frozen=True, kw_only=True)
class SharedResources:
    """What every job of the deployment uses, from the shared stack: tables, bucket and its prefixes, workgroup,
    alarm topic, the deployment-wide on-failure queue, the job registry's path (jobs are found there), and the
    deployment's name and Athena capacity budget."""

    lock_table: dynamodb.ITable
    results_table: dynamodb.ITable
    bucket: s3.IBucket
    athena_results_prefix: str
    results_prefix: str
    workgroup_name: str
    workgroup_arn: str
    alarm_topic: sns.ITopic
    failures: FailureQueue  # every job's on-failure destination; its alarms are the shared stack's
    sample_database: str  # the Glue database the sample tables are cataloged in
    sample_data_prefix: str  # where the sample's files live in ``bucket`` (per table: <prefix><table>/)
    registry_path: str  # "/<shared stack>/jobs/": each job's registry parameter is <path><job>/<group>
    log_group: logs.ILogGroup  # every job function's log group (one structured line per invocation)
    deployment_name: str  # the shared stack's name: names each job's deferral schedules (stacks.constructs.capacity)
    capacity: CapacitySettings  # the deployment's Athena capacity budget (cdk.json context.stack.capacity)


class AthenaJob(Construct):
    """One job in the job stack of group ``group`` (:mod:`stacks.job_groups`).

    ``function`` (the racer Lambda), ``schedule`` (its :class:`OncePerSlotSchedule`: fan-out, lock grant,
    async retries to the deployment's on-failure queue, the job's one alarm ``NoRecentSuccess`` when the job opts in
    to its own metrics, ``per_job_metrics = true``), ``registry`` (the job's SSM parameter
    ``<registry path><job>/<group>``: how tools and people find its function). The registry parameter's is the one
    physical name a job sets, and it carries the group; every other name (function, roles, schedules, alarm) is
    CloudFormation's, so a job moves between job stacks without a collision (tests/stacks/test_safe_moves.py).
    The function's environment carries the deployment's capacity budget; while it is on, its role may read the semaphore and create the job's own deferral
    schedules with the job's Scheduler role (:mod:`stacks.constructs.capacity`).

    The function's role reads the job's own source only: the sample's table and prefix, or the Glue table
    and S3 location the job names. Everything else a job used to have per job (queue, count alarms, a dashboard
    section) is deployment-wide: see :mod:`stacks.refresh_stack`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job: JobDefinition,
        shared: SharedResources,
        removal_policy: cdk.RemovalPolicy,
        code_dir: Path,
        group: int,
        scheduler_role: iam.IRole | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        config = job.config
        source = job.source
        if isinstance(source, GlueSource):
            data_bucket = s3.Bucket.from_bucket_name(self, "SourceBucket", source.bucket_name)
            database, table, data_prefix = source.database, source.table, source.key_prefix
        else:
            data_bucket = shared.bucket
            database, table = shared.sample_database, source.table
            data_prefix = f"{shared.sample_data_prefix}{source.table}/"
        self.refresh = RefreshFunction(
            self,
            "Refresh",
            config=config,
            lock_table=shared.lock_table,
            results_table=shared.results_table,
            query_target=QueryTarget(
                workgroup_name=shared.workgroup_name,
                workgroup_arn=shared.workgroup_arn,
                database_name=database,
                table_name=table,
                bucket=shared.bucket,
                data_bucket=data_bucket,
                data_prefix=data_prefix,
                athena_results_prefix=shared.athena_results_prefix,
                results_prefix=shared.results_prefix,
                lists_partitions=isinstance(source, GlueSource),  # the sample table projects its partitions
            ),
            removal_policy=removal_policy,
            code_dir=code_dir,
            log_group=shared.log_group,
        )
        self.function = self.refresh.function
        job_name = config.job_name
        period = cdk.Duration.seconds(alarm_period_s(config.period.longest_s))  # one slot, capped at a day
        self.schedule = OncePerSlotSchedule(
            self,
            "Schedule",
            function=self.function,
            lock_table=shared.lock_table,
            job_name=job_name,
            schedule_expression=config.schedule_expression,
            time_zone=config.schedule_timezone,
            racers=config.racers,
            max_slot_age_s=config.max_slot_age_s,
            alarm_topic=shared.alarm_topic,
            removal_policy=removal_policy,
            # The job's NoRecentSuccess alarm reads its own metric: both opt-in (``per_job_metrics``, issue 35). Off,
            # the application opts out of the construct's alarm explicitly (slotlock-cdk's 1.x default is kept).
            success_age_metric=(
                job_metric(job_name, contract.METRIC_LAST_SUCCESS_AGE_S, statistic="Maximum", period=period)
                if config.per_job_metrics
                else None
            ),
            failures=shared.failures,
            scheduler_role=scheduler_role,
            capacity_semaphore=shared.capacity.enabled,
            stale_after_periods=contract.STALE_AFTER_PERIODS,
        )
        # The deferral schedules invoke this function with the racers' Scheduler role (it may invoke this one only).
        wire_capacity(
            self.function,
            settings=shared.capacity,
            deferral_role=self.schedule.schedules.role,
            deployment=shared.deployment_name,
            job_name=job_name,
            lock_table_name=shared.lock_table.table_name,
        )
        self.failures = self.schedule.failures
        self.alarms = self.schedule.alarms
        # The name carries the job stack's group: a job moving to another job stack (stack.job_stacks raised,
        # stack_group changed) creates its new entry beside the old one, never on it (athena_refresh.registry).
        self.registry = ssm.StringParameter(
            self,
            "Registry",
            parameter_name=registry.parameter_name(shared.registry_path, job_name, group),
            description=f"Scheduled Athena refresh: where job {job_name} is deployed (JSON, format 1)",
            string_value=registry.entry_value(
                registry.JobRegistryEntry(
                    job=job_name,
                    function_name=self.function.function_name,
                    stack=cdk.Stack.of(self).stack_name,
                    schedule_expression=config.schedule_expression,
                    schedule_timezone=config.schedule_timezone,
                    racers=config.racers,
                    log_group_name=self.refresh.log_group.log_group_name,
                )
            ),
            tier=ssm.ParameterTier.STANDARD,
        )
