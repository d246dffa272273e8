"""The freshness watchdog (issue 35): one scheduled function per deployment that names late and failing jobs.

``athena_refresh.watchdog_handler`` runs every ``contract.watchdog_period_s`` (the shortest job period halved,
bounded to 5..15 minutes, a multiple of 5 minutes) under its own once-per-slot lock (``slotlock_cdk.OncePerSlotSchedule``, job
``athena-once-watchdog``, two racers: one winner per slot), reads the lock table (``BatchGetItem``, strongly
consistent; no Scan, no Query) and the bundled catalog of every job's schedule and grace, publishes one notification
per change of a job's state to the deployment's alarm topic, and emits four deployment-wide metrics. Two alarms:

- ``JobsLateOrFailing``: ``JobsLate + JobsFailing`` (Maximum over one watchdog period) >= 1; missing data is not
  breaching (the heartbeat alarm covers a silent watchdog);
- ``WatchdogSilent``: ``WatchdogRuns`` (Sum over three watchdog periods) < 1, missing data **breaching**: the
  watchdog is itself watched.

Least privilege: the lock grants of ``OncePerSlotSchedule`` (``GetItem``, ``PutItem``, ``UpdateItem``: the
watchdog's own lease and its ``watchdog#<job>`` items), ``BatchGetItem`` on the lock table, ``sns:Publish`` on the
topic, its own log group's streams. docs/watchdog.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from athena_refresh import contract
from slotlock_cdk.alarms import add_alarms
from slotlock_cdk.failure_queue import FailureQueue
from slotlock_cdk.once_per_slot_schedule import OncePerSlotSchedule
from stacks.constructs.job_metrics import deployment_metric
from stacks.constructs.refresh_function import (
    ARCHITECTURE,
    LOG_ACTIONS,
    LOG_RETENTION,
    RUNTIME,
    acknowledge_runtime_pin,
    powertools_layer,
    runtime_code,
)

__all__ = ["HANDLER", "SILENT_AFTER_PERIODS", "WATCHDOG_TABLE_ACTIONS", "FreshnessWatchdog"]

HANDLER = "athena_refresh.watchdog_handler.lambda_handler"
SERVICE_NAME = "freshness-watchdog"  # POWERTOOLS_SERVICE_NAME of its log lines (its metrics keep the runtime's)
RACERS = contract.WATCHDOG_RACERS
TIMEOUT_S = contract.WATCHDOG_TIMEOUT_S
MEMORY_MB = contract.WATCHDOG_MEMORY_MB
#: The heartbeat alarm's window: this many watchdog periods without a run.
SILENT_AFTER_PERIODS = 3
#: Beyond the lock's grants (``slotlock_cdk.grants.LOCK_TABLE_ACTIONS``): the reads of every job's items.
WATCHDOG_TABLE_ACTIONS = ("dynamodb:BatchGetItem",)


class FreshnessWatchdog(Construct):
    """The watchdog's function, schedules, grants and two alarms (``alarms``: name -> alarm); ``period_s``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        lock_table: dynamodb.ITable,
        topic: sns.ITopic,
        failures: FailureQueue,
        code_dir: Path,
        shortest_job_periods_s: Sequence[int],
        deployment_name: str,
        removal_policy: cdk.RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.period_s = period_s = contract.watchdog_period_s(shortest_job_periods_s)
        self.log_group = logs.LogGroup(self, "LogGroup", retention=LOG_RETENTION, removal_policy=removal_policy)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Scheduled Athena refresh freshness watchdog: least privilege",
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description="Scheduled Athena refresh freshness watchdog: names late and failing jobs",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=HANDLER,
            code=runtime_code(code_dir),
            role=self.role,
            timeout=cdk.Duration.seconds(TIMEOUT_S),
            memory_size=MEMORY_MB,
            layers=[powertools_layer(self)],
            environment={
                contract.ENV_ALARM_TOPIC_ARN: topic.topic_arn,
                contract.ENV_DEPLOYMENT_STACK: deployment_name,
                "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
            },
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
        )
        self.schedule = OncePerSlotSchedule(
            self,
            "Schedule",
            function=self.function,
            lock_table=lock_table,
            job_name=contract.WATCHDOG_JOB_NAME,
            schedule_expression=f"cron(0/{period_s // 60} * * * ? *)",
            racers=RACERS,
            max_slot_age_s=period_s,
            alarm_topic=topic,
            removal_policy=removal_policy,
            failures=failures,
        )
        for statement in (
            iam.PolicyStatement(
                sid="ReadEveryJobsItems", actions=list(WATCHDOG_TABLE_ACTIONS), resources=[lock_table.table_arn]
            ),
            iam.PolicyStatement(sid="NotifyAlarmTopic", actions=["sns:Publish"], resources=[topic.topic_arn]),
            iam.PolicyStatement(
                sid="WriteOwnLogs", actions=list(LOG_ACTIONS), resources=[self.log_group.log_group_arn]
            ),
        ):
            self.role.add_to_principal_policy(statement)
        acknowledge_runtime_pin(self.function)

        period = cdk.Duration.seconds(period_s)
        late_or_failing = cloudwatch.MathExpression(
            expression="late + failing",
            using_metrics={
                "late": deployment_metric(
                    contract.METRIC_JOBS_LATE, statistic="Maximum", period=period, names=contract.WATCHDOG_METRICS
                ),
                "failing": deployment_metric(
                    contract.METRIC_JOBS_FAILING, statistic="Maximum", period=period, names=contract.WATCHDOG_METRICS
                ),
            },
            period=period,
            label="Jobs late or failing",
        )
        runs = deployment_metric(
            contract.METRIC_WATCHDOG_RUNS,
            statistic="Sum",
            period=cdk.Duration.seconds(SILENT_AFTER_PERIODS * period_s),
            names=contract.WATCHDOG_METRICS,
        )
        self.alarms = add_alarms(
            self,
            {
                "JobsLateOrFailing": (
                    late_or_failing,
                    {
                        "comparison_operator": cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                        "threshold": 1,
                        "treat_missing_data": cloudwatch.TreatMissingData.NOT_BREACHING,
                    },
                    (
                        "A job is late (its latest due slot has not finished within its freshness_s) or failing (its "
                        "last finished slot FAILED, or was MISSED for a reason other than paused). The watchdog's "
                        "notification names the jobs; `athena-once ops status` lists every job's state."
                    ),
                ),
                "WatchdogSilent": (
                    runs,
                    {
                        "comparison_operator": cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                        "threshold": 1,
                        "treat_missing_data": cloudwatch.TreatMissingData.BREACHING,
                    },
                    (
                        f"The freshness watchdog did not run for {SILENT_AFTER_PERIODS} of its periods "
                        f"({SILENT_AFTER_PERIODS * period_s} s): late jobs would go unnoticed. Check its schedules "
                        "and its log group."
                    ),
                ),
            },
            topic,
        )
