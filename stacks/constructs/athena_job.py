"""One scheduled Athena job: its function and role, fan-out schedules, on-failure queue, alarms and its
section of the dashboard.

Everything a job folder (``jobs/<job>/``) deploys, against the resources the stack's jobs share (lock table,
results table and bucket, workgroup, alarm topic, dashboard). Removing the folder removes this construct and only it:
the job's history and results stay in the shared tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from athena_refresh import contract
from stacks.constructs.alarms import RefreshAlarms, alarm_period_s
from stacks.constructs.dashboard import RefreshDashboard
from stacks.constructs.job_metrics import job_metric, summed_over_reasons
from stacks.constructs.once_per_slot_schedule import OncePerSlotSchedule
from stacks.constructs.refresh_function import QueryTarget, RefreshFunction
from stacks.jobs import GlueSource, JobDefinition, SampleSource


@dataclass(frozen=True, kw_only=True)
class SharedResources:
    """What every job of the stack uses: tables, bucket and its prefixes, workgroup, alarm topic, asset, and the
    read side's widget function (each job's dashboard section embeds its latest results)."""

    lock_table: dynamodb.ITable
    results_table: dynamodb.ITable
    bucket: s3.IBucket
    athena_results_prefix: str
    results_prefix: str
    workgroup_name: str
    workgroup_arn: str
    alarm_topic: sns.ITopic
    code_dir: Path
    dashboard: cloudwatch.Dashboard  # one section per job
    sample_database: str  # the Glue database the sample tables are cataloged in
    sample_data_prefix: str  # where the sample's files live in ``bucket`` (per table: <prefix><table>/)
    results_widget_function: lambda_.IFunction  # the dashboard's custom widget (stacks.constructs.read_api)


class AthenaJob(Construct):
    """``function`` (the racer Lambda), ``schedule`` (its :class:`OncePerSlotSchedule`: fan-out, lock grant,
    async retries, ``failures`` queue, the generic alarms), ``alarms`` (the Athena ones), ``dashboard`` (its
    section of the stack's dashboard).

    The function's role reads the job's own source only: the sample's table and prefix, or the Glue table
    and S3 location the job names.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job: JobDefinition,
        shared: SharedResources,
        removal_policy: cdk.RemovalPolicy,
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
            code_dir=shared.code_dir,
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
            success_age_metric=job_metric(
                job_name, contract.METRIC_LAST_SUCCESS_AGE_S, statistic="Maximum", period=period
            ),
            missed_metric=summed_over_reasons(
                job_name, contract.METRIC_SLOT_MISSED, period=period, label="slots missed"
            ),
            failed_metric=job_metric(job_name, contract.METRIC_RUN_FAILED, statistic="Sum", period=period),
        )
        self.failures = self.schedule.failures
        self.alarms = RefreshAlarms(self, "Alarms", config=config, topic=shared.alarm_topic, period=period)
        self.dashboard = RefreshDashboard(
            self,
            "Dashboard",
            job_name=job_name,
            function=self.function,
            log_group=self.refresh.log_group,
            failure_queue=self.failures.queue,
            failure_dead_letter_queue=self.failures.dead_letter_queue,
            schedule_period=cdk.Duration.seconds(config.period.shortest_s),
            stale_after_s=self.schedule.stale_after_s,
            value_metrics=config.value_metrics,
            alarms=[*self.schedule.alarms.values(), *self.alarms.alarms.values()],
            dashboard=shared.dashboard,
            results_widget_function=shared.results_widget_function,
            heading=(
                f"`{config.schedule_expression}` in {config.schedule_timezone}, {config.racers} racers, source"
                f" `{source.table if isinstance(source, SampleSource) else f'{database}.{table}'}`"
            ),
        )
