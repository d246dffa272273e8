"""The shared stack: the resources the jobs share, the read side (:class:`ReadApi`), the dashboard, the
deployment-wide alarms, and the names an operator needs as outputs (tables, bucket, workgroup, topic,
``DashboardName``, ``FailureQueueUrl``, ``JobLogGroupName``, ``JobRegistryPath``, the read API's ``ReadApiUrl``,
``ReadApiId``, ``ReadApiFunctionName``, ``ResultsWidgetFunctionName``). No output per job: a job's function is found
in the job registry (one SSM parameter per job under ``JobRegistryPath``), so the outputs quota (200 per template)
does not bound the number of jobs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from athena_refresh import registry
from slotlock_cdk.failure_queue import FailureQueue
from slotlock_cdk.lock_table import LockTable
from stacks.constructs.alarms import DeploymentAlarms, alarm_topic
from stacks.constructs.athena_job import SharedResources
from stacks.constructs.athena_workgroup import AthenaWorkgroup
from stacks.constructs.dashboard import DeploymentDashboard
from stacks.constructs.flights_catalog import FlightsCatalog
from stacks.constructs.read_api import ReadApi
from stacks.constructs.refresh_function import LOG_RETENTION
from stacks.constructs.results_storage import ATHENA_RESULTS_PREFIX, DATA_PREFIX, RESULTS_PREFIX, ResultsStorage
from stacks.constructs.watchdog import FreshnessWatchdog
from stacks.jobs import SAMPLE_TABLES, JobDefinition, SampleSource
from stacks.nag import acknowledge, wildcard_finding
from stacks.runtime_asset import stage_read_asset
from stacks.stack_settings import StackSettings


class ScheduledAthenaRefreshStack(cdk.Stack):
    """The shared stack of a deployment: what every job uses, the read side, the dashboard and the
    deployment-wide alarms. The jobs themselves are deployed by the job stacks (:mod:`stacks.job_stack`), which
    import :attr:`shared` from here.

    Resources: the lock and results tables (logical ids ``Lock...``/``Results...`` unchanged since the one-stack
    layout, so existing deployments update in place and keep their fencing counters), the bucket, the sample's
    Glue catalog (when a job reads a sample), the Athena workgroup, the alarm topic, the job functions' log group,
    the on-failure queue and its DLQ, the read side (IAM-authorized HTTP API and the dashboard's widget, one
    read-only role), one dashboard (:class:`DeploymentDashboard`) and the deployment-wide alarms.

    :param settings: the stack-wide settings (cdk.json context ``stack``).
    :param jobs: every validated job folder of the deployment, at least one.
    :param sample_data_dir: local directory uploaded to ``s3://<bucket>/data/<table>/`` and cataloged
        (only when a job reads a sample).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: StackSettings,
        jobs: Sequence[JobDefinition],
        sample_data_dir: Path,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        if not jobs:
            raise ValueError("a deployment needs at least one job")
        #: The validated job folders of the deployment (deployed by the job stacks).
        self.definitions: tuple[JobDefinition, ...] = tuple(jobs)
        removal_policy = self.removal_policy = cdk.RemovalPolicy[settings.removal_policy]

        lock = LockTable(self, "Lock", removal_policy=removal_policy)
        results = ResultsStorage(self, "Results", removal_policy=removal_policy)
        catalog: FlightsCatalog | None = None
        if any(isinstance(job.source, SampleSource) for job in jobs):
            catalog = FlightsCatalog(
                self,
                "Catalog",
                bucket=results.bucket,
                data_prefix=f"{DATA_PREFIX}{SAMPLE_TABLES['flights']}/",
                sample_data_dir=sample_data_dir,
                database_name=settings.sample_database,
                table_name=SAMPLE_TABLES["flights"],
                removal_policy=removal_policy,
            )
        # Athena enforces the scan cutoff per workgroup: the shared one takes the largest job's (each function
        # judges its own job's lower [alarms] threshold: the deployment's ThresholdExceeded alarm).
        workgroup = AthenaWorkgroup(
            self,
            "Athena",
            name=settings.workgroup,
            output_location=results.s3_url(ATHENA_RESULTS_PREFIX),
            bytes_scanned_cutoff_per_query=max(job.config.bytes_scanned_cutoff_per_query for job in jobs),
        )
        topic = alarm_topic(self, "AlarmTopic", email=settings.alarm_email, label=construct_id)
        failures = FailureQueue(self, "Failures", removal_policy=removal_policy)
        job_logs = logs.LogGroup(self, "JobLogs", retention=LOG_RETENTION, removal_policy=removal_policy)
        #: The read side's asset: the runtime packages and every job's name and schedule (it serves them all).
        self.runtime_asset_dir = stage_read_asset(jobs)
        self.read_api = ReadApi(
            self,
            "ReadApi",
            lock_table=lock.table,
            results_table=results.table,
            bucket=results.bucket,
            results_prefix=RESULTS_PREFIX,
            code_dir=self.runtime_asset_dir,
            throttle_rate_limit=settings.api_throttle_rate_limit,
            throttle_burst_limit=settings.api_throttle_burst_limit,
            removal_policy=removal_policy,
        )
        #: The job registry's path: each job stack writes one parameter ``<path><job>`` (docs/operations.md).
        self.registry_path = registry.registry_path(construct_id)
        #: What every job stack imports from here.
        self.shared = SharedResources(
            lock_table=lock.table,
            results_table=results.table,
            bucket=results.bucket,
            athena_results_prefix=ATHENA_RESULTS_PREFIX,
            results_prefix=RESULTS_PREFIX,
            workgroup_name=workgroup.name,
            workgroup_arn=workgroup.arn,
            alarm_topic=topic,
            failures=failures,
            # Ref of the Glue database (its name): the functions then deploy after the catalog.
            sample_database=catalog.database.ref if catalog is not None else settings.sample_database,
            sample_data_prefix=DATA_PREFIX,
            registry_path=self.registry_path,
            log_group=job_logs,
            deployment_name=self.stack_name,
            capacity=settings.capacity,
        )
        self.alarms = DeploymentAlarms(
            self,
            "Alarms",
            failure_queue=failures.queue,
            failure_dead_letter_queue=failures.dead_letter_queue,
            topic=topic,
        )
        #: The freshness watchdog: late and failing jobs named within minutes (stacks/constructs/watchdog.py).
        self.watchdog = FreshnessWatchdog(
            self,
            "Watchdog",
            lock_table=lock.table,
            topic=topic,
            failures=failures,
            code_dir=self.runtime_asset_dir,
            shortest_job_periods_s=[job.config.period.shortest_s for job in jobs],
            deployment_name=construct_id,
            removal_policy=removal_policy,
        )
        self.dashboard = DeploymentDashboard(
            self,
            "Dashboard",
            job_names=[job.job_name for job in jobs],
            widget_function=self.read_api.widget_function,
            # every deployment-wide alarm on the dashboard: the shared stack's and the watchdog's
            alarms=[*self.alarms.alarms.values(), *self.watchdog.alarms.values()],
            failure_queue=failures.queue,
            failure_dead_letter_queue=failures.dead_letter_queue,
            log_group=job_logs,
            function_name_prefix=f"{construct_id}-Jobs-",
            capacity_permits=settings.capacity.permits,
        )
        self._acknowledge_findings(results)

        outputs = {
            "LockTableName": lock.table.table_name,
            "ResultsTableName": results.table.table_name,
            "ResultsBucketName": results.bucket.bucket_name,
            "AthenaWorkgroupName": workgroup.name,
            "AlarmTopicArn": topic.topic_arn,
            "DashboardName": self.dashboard.dashboard.dashboard_name,
            "FailureQueueUrl": failures.queue.queue_url,
            "JobLogGroupName": job_logs.log_group_name,
            "JobRegistryPath": self.registry_path,
            "ReadApiUrl": self.read_api.url,
            "ReadApiId": self.read_api.http_api.api_id,
            "ReadApiFunctionName": self.read_api.api_function.function_name,
            "ResultsWidgetFunctionName": self.read_api.widget_function.function_name,
        }
        if catalog is not None:
            outputs["GlueDatabaseName"] = catalog.database.ref
        for output_id, value in outputs.items():
            cdk.CfnOutput(self, output_id, value=value)

    def _acknowledge_findings(self, results: ResultsStorage) -> None:
        """Findings on resources this stack does not shape itself; each with its reason.

        The function's own findings are acknowledged in :class:`RefreshFunction`, the schedules' role's in
        :class:`FanoutSchedule`, the read side's in :class:`ReadApi`.
        """
        for child in self.node.children:
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
