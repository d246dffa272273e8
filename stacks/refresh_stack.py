"""The stack: the resources the jobs share, the read side (:class:`ReadApi`), one :class:`AthenaJob` per job
folder, and the names an operator needs as outputs (one ``DashboardName`` with a section per job; the read API's
``ReadApiUrl``, ``ReadApiId``, ``ReadApiFunctionName``, ``ResultsWidgetFunctionName``; per job:
``FunctionName<Job>``, ``FailureQueueUrl<Job>``, where ``<Job>`` is :func:`stacks.jobs.output_suffix` of the job's
name)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from stacks.config import StackSettings
from stacks.constructs.alarms import alarm_topic
from stacks.constructs.athena_job import AthenaJob, SharedResources
from stacks.constructs.athena_workgroup import AthenaWorkgroup
from stacks.constructs.flights_catalog import FlightsCatalog
from stacks.constructs.lock_table import LockTable
from stacks.constructs.read_api import ReadApi
from stacks.constructs.results_storage import ATHENA_RESULTS_PREFIX, DATA_PREFIX, RESULTS_PREFIX, ResultsStorage
from stacks.jobs import SAMPLE_TABLES, JobDefinition, SampleSource, output_suffix
from stacks.nag import acknowledge, wildcard_finding
from stacks.runtime_asset import stage_runtime_asset


class ScheduledAthenaRefreshStack(cdk.Stack):
    """Every job folder, deployed: per job, EventBridge Scheduler fans out to ``racers`` invocations of the
    job's Lambda; they race for a fenced DynamoDB lease per schedule slot, and the winner runs the job's
    Athena query and stores the result. The jobs share the lock and results tables, the bucket, the
    workgroup, the alarm topic, the dashboard and the read side (an IAM-authorized HTTP API and the dashboard's
    latest-results widget, one read-only role); each has its own function, role, schedules, queue, alarms and
    dashboard section.

    :param settings: the stack-wide settings (cdk.json context ``stack``).
    :param jobs: the validated job folders (:func:`stacks.jobs.load_jobs`), at least one.
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
            raise ValueError("a stack needs at least one job")
        #: The validated job folders this stack deploys.
        self.definitions: tuple[JobDefinition, ...] = tuple(jobs)
        removal_policy = cdk.RemovalPolicy[settings.removal_policy]

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
        # Athena enforces the scan cutoff per workgroup: the shared one takes the largest job's (each job's
        # DataScannedHigh alarm watches its own threshold below it).
        workgroup = AthenaWorkgroup(
            self,
            "Athena",
            name=settings.workgroup,
            output_location=results.s3_url(ATHENA_RESULTS_PREFIX),
            bytes_scanned_cutoff_per_query=max(job.config.bytes_scanned_cutoff_per_query for job in jobs),
        )
        topic = alarm_topic(self, "AlarmTopic", email=settings.alarm_email, label=construct_id)
        dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=cdk.Duration.days(1))
        #: The functions' asset: the runtime packages and the job catalog (every job's query and settings).
        self.runtime_asset_dir = stage_runtime_asset(jobs)
        # Before the jobs: each job's dashboard section embeds the read side's widget.
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
        shared = SharedResources(
            lock_table=lock.table,
            results_table=results.table,
            bucket=results.bucket,
            athena_results_prefix=ATHENA_RESULTS_PREFIX,
            results_prefix=RESULTS_PREFIX,
            workgroup_name=workgroup.name,
            workgroup_arn=workgroup.arn,
            alarm_topic=topic,
            code_dir=self.runtime_asset_dir,
            dashboard=dashboard,
            # Ref of the Glue database (its name): the functions then deploy after the catalog.
            sample_database=catalog.database.ref if catalog is not None else settings.sample_database,
            sample_data_prefix=DATA_PREFIX,
            results_widget_function=self.read_api.widget_function,
        )
        self.jobs: dict[str, AthenaJob] = {
            job.job_name: AthenaJob(self, f"Job-{job.job_name}", job=job, shared=shared, removal_policy=removal_policy)
            for job in jobs
        }
        self._acknowledge_findings(results)

        outputs = {
            "LockTableName": lock.table.table_name,
            "ResultsTableName": results.table.table_name,
            "ResultsBucketName": results.bucket.bucket_name,
            "AthenaWorkgroupName": workgroup.name,
            "AlarmTopicArn": topic.topic_arn,
            "DashboardName": dashboard.dashboard_name,
            "JobNames": ",".join(self.jobs),
            "ReadApiUrl": self.read_api.url,
            "ReadApiId": self.read_api.http_api.api_id,
            "ReadApiFunctionName": self.read_api.api_function.function_name,
            "ResultsWidgetFunctionName": self.read_api.widget_function.function_name,
        }
        if catalog is not None:
            outputs["GlueDatabaseName"] = catalog.database.ref
        for name, athena_job in self.jobs.items():
            suffix = output_suffix(name)
            outputs[f"FunctionName{suffix}"] = athena_job.function.function_name
            outputs[f"FailureQueueUrl{suffix}"] = athena_job.failures.queue.queue_url
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
