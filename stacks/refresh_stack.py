"""The stack: wires the constructs together, and exports the names an operator needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from stacks.config import JobConfig
from stacks.constructs.alarms import RefreshAlarms
from stacks.constructs.athena_workgroup import AthenaWorkgroup
from stacks.constructs.dashboard import RefreshDashboard
from stacks.constructs.failure_queue import FailureQueue
from stacks.constructs.fanout_schedule import FanoutSchedule
from stacks.constructs.flights_catalog import FlightsCatalog
from stacks.constructs.lock_table import LockTable
from stacks.constructs.refresh_function import QueryTarget, RefreshFunction
from stacks.constructs.results_storage import ATHENA_RESULTS_PREFIX, DATA_PREFIX, RESULTS_PREFIX, ResultsStorage
from stacks.nag import acknowledge, wildcard_finding


class ScheduledAthenaRefreshStack(cdk.Stack):
    """EventBridge Scheduler fans out to ``config.racers`` invocations of one Lambda; they race for a
    fenced DynamoDB lease per schedule slot, and the winner runs the Athena query and stores the result.

    :param config: the validated job configuration (cdk.json context ``job``).
    :param sample_data_dir: local directory uploaded to ``s3://<bucket>/data/<table>/`` and cataloged.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: JobConfig,
        sample_data_dir: Path,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        removal_policy = cdk.RemovalPolicy[config.removal_policy]

        lock = LockTable(self, "Lock", removal_policy=removal_policy)
        results = ResultsStorage(self, "Results", removal_policy=removal_policy)
        catalog = FlightsCatalog(
            self,
            "Catalog",
            bucket=results.bucket,
            data_prefix=f"{DATA_PREFIX}{config.table}/",
            sample_data_dir=sample_data_dir,
            database_name=config.database,
            table_name=config.table,
            removal_policy=removal_policy,
        )
        workgroup = AthenaWorkgroup(
            self,
            "Athena",
            name=config.workgroup,
            output_location=results.s3_url(ATHENA_RESULTS_PREFIX),
            bytes_scanned_cutoff_per_query=config.bytes_scanned_cutoff_per_query,
        )
        failures = FailureQueue(self, "Failures", removal_policy=removal_policy)
        refresh = RefreshFunction(
            self,
            "Refresh",
            config=config,
            lock_table=lock.table,
            results_table=results.table,
            query_target=QueryTarget(
                workgroup_name=workgroup.name,
                workgroup_arn=workgroup.arn,
                database_name=catalog.database.ref,  # Ref of AWS::Glue::Database is its name
                table_name=config.table,
                bucket=results.bucket,
                data_prefix=catalog.data_prefix,
                athena_results_prefix=ATHENA_RESULTS_PREFIX,
                results_prefix=RESULTS_PREFIX,
            ),
            failure_queue=failures.queue,
            removal_policy=removal_policy,
        )
        FanoutSchedule(
            self,
            "Fanout",
            function=refresh.function,
            schedule_expression=config.schedule_expression,
            racers=config.racers,
            job_name=config.job_name,
            max_event_age=cdk.Duration.seconds(config.max_slot_age_s),
        )
        alarms = RefreshAlarms(
            self,
            "Alarms",
            config=config,
            function=refresh.function,
            failure_queue=failures.queue,
            failure_dead_letter_queue=failures.dead_letter_queue,
        )
        dashboard = RefreshDashboard(
            self,
            "Dashboard",
            job_name=config.job_name,
            function=refresh.function,
            log_group=refresh.log_group,
            failure_queue=failures.queue,
            failure_dead_letter_queue=failures.dead_letter_queue,
            schedule_period=cdk.Duration.seconds(config.period.shortest_s),
            stale_after_s=alarms.stale_after_s,
            value_metrics=config.value_metrics,
            alarms=list(alarms.alarms.values()),
        )
        self._acknowledge_findings(results, refresh)

        outputs = {
            "LockTableName": lock.table.table_name,
            "ResultsTableName": results.table.table_name,
            "ResultsBucketName": results.bucket.bucket_name,
            "FunctionName": refresh.function.function_name,
            "DashboardName": dashboard.dashboard.dashboard_name,
            "AthenaWorkgroupName": workgroup.name,
            "GlueDatabaseName": catalog.database.ref,
            "AlarmTopicArn": alarms.topic.topic_arn,
            "FailureQueueUrl": failures.queue.queue_url,
        }
        for output_id, value in outputs.items():
            cdk.CfnOutput(self, output_id, value=value)

    def _acknowledge_findings(self, results: ResultsStorage, refresh: RefreshFunction) -> None:
        """Findings on resources this stack does not shape itself; each with its reason.

        The function's own findings are acknowledged in :class:`RefreshFunction`.
        """
        function_id = self.get_logical_id(refresh.function.node.default_child)
        for child in self.node.children:
            # aws_scheduler_targets creates one role per target account/region at stack level.
            if child.node.id.startswith("SchedulerRoleForTarget-"):
                acknowledge(
                    child,
                    f"AwsSolutions-IAM5[Resource::<{function_id}.Arn>:*]",
                    "lambda:InvokeFunction on the function's versions and aliases (ARN:*), as granted by "
                    "aws_scheduler_targets.LambdaInvoke; the role is assumable by EventBridge Scheduler only.",
                )
            # BucketDeployment's singleton handler (CDK-owned code uploading the sample data).
            if child.node.id.startswith("Custom::CDKBucketDeployment"):
                self._acknowledge_bucket_deployment(child, results.bucket)

    def _acknowledge_bucket_deployment(self, handler: IConstruct, bucket: s3.IBucket) -> None:
        reason = "CDK's BucketDeployment handler (CDK-owned code, run once per deployment to copy the sample data): "
        acknowledge(handler, "AwsSolutions-L1", reason + "its runtime is chosen and updated by aws-cdk-lib.")
        acknowledge(
            handler,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            reason + "the role CDK creates for it carries the managed basic execution policy (logs only).",
        )
        for finding in (
            "Action::s3:GetBucket*",
            "Action::s3:GetObject*",
            "Action::s3:List*",
            "Action::s3:Abort*",
            "Action::s3:DeleteObject*",
        ):
            acknowledge(
                handler,
                f"AwsSolutions-IAM5[{finding}]",
                reason + "CDK grants these action groups to read the asset and prune and write the destination prefix.",
            )
        asset_bucket = f"cdk-{cdk.DefaultStackSynthesizer.DEFAULT_QUALIFIER}-assets-<AWS::AccountId>-<AWS::Region>"
        acknowledge(
            handler,
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{asset_bucket}/*]",
            reason + "it reads the sample-data asset zip from the CDK bootstrap asset bucket.",
        )
        acknowledge(
            handler,
            wildcard_finding(self, bucket.arn_for_objects("*")),
            reason + "it writes and prunes the objects under data/<table>/ of the results bucket.",
        )
