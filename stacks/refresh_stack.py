"""The stack: wires the constructs together, and exports the names an operator needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
from constructs import Construct

from stacks.config import JobConfig
from stacks.constructs.athena_workgroup import AthenaWorkgroup
from stacks.constructs.dashboard import RefreshDashboard
from stacks.constructs.fanout_schedule import FanoutSchedule
from stacks.constructs.flights_catalog import FlightsCatalog
from stacks.constructs.lock_table import LockTable
from stacks.constructs.refresh_function import QueryTarget, RefreshFunction
from stacks.constructs.results_store import ATHENA_RESULTS_PREFIX, DATA_PREFIX, RESULTS_PREFIX, ResultsStore


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
        results = ResultsStore(self, "Results", removal_policy=removal_policy)
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
            self, "Athena", name=config.workgroup, output_location=results.s3_url(ATHENA_RESULTS_PREFIX)
        )
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
        dashboard = RefreshDashboard(
            self, "Dashboard", job_name=config.job_name, function=refresh.function, log_group=refresh.log_group
        )

        outputs = {
            "LockTableName": lock.table.table_name,
            "ResultsTableName": results.table.table_name,
            "ResultsBucketName": results.bucket.bucket_name,
            "FunctionName": refresh.function.function_name,
            "DashboardName": dashboard.dashboard.dashboard_name,
            "AthenaWorkgroupName": workgroup.name,
            "GlueDatabaseName": catalog.database.ref,
        }
        for output_id, value in outputs.items():
            cdk.CfnOutput(self, output_id, value=value)
