"""The refresh Lambda: asset ``lambdas/``, Powertools public layer, environment from the contract,
JSON logs with retention, async retries bounded by the slot age, least-privilege inline policies."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from athena_refresh import contract
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from stacks import LAMBDAS_DIR
from stacks.config import JobConfig

HANDLER = "athena_refresh.handler.lambda_handler"
RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64
# Public SSM parameter holding the ARN of the latest Powertools layer; resolved at deploy time.
POWERTOOLS_LAYER_PARAMETER = f"/aws/service/powertools/python/{ARCHITECTURE.name}/{RUNTIME.name}/latest"
ASSET_EXCLUDES = ("**/__pycache__", "**/*.pyc")
ASYNC_RETRY_ATTEMPTS = 2  # Lambda redelivers a failed async invocation; the lock makes it safe
LOG_RETENTION = logs.RetentionDays.ONE_MONTH

# Item actions only: TransactWriteItems is authorized per item action (Put/Update/ConditionCheck).
TABLE_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem")
ATHENA_ACTIONS = (
    "athena:StartQueryExecution",
    "athena:GetQueryExecution",
    "athena:GetQueryResults",
    "athena:StopQueryExecution",
)
GLUE_ACTIONS = ("glue:GetDatabase", "glue:GetTable", "glue:GetPartitions")
S3_WRITE_OBJECT_ACTIONS = ("s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")
S3_BUCKET_ACTIONS = ("s3:GetBucketLocation", "s3:ListBucketMultipartUploads")


@dataclass(frozen=True, kw_only=True)
class QueryTarget:
    """What the function queries and where Athena reads and writes (prefixes end with "/")."""

    workgroup_name: str
    workgroup_arn: str
    database_name: str
    table_name: str
    bucket: s3.IBucket
    data_prefix: str
    athena_results_prefix: str
    results_prefix: str


class RefreshFunction(Construct):
    """The racer Lambda. ``function`` is the ``lambda_.Function``; ``log_group`` its log group."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: JobConfig,
        lock_table: dynamodb.ITable,
        results_table: dynamodb.ITable,
        query_target: QueryTarget,
        removal_policy: cdk.RemovalPolicy,
        code_dir: Path = LAMBDAS_DIR,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(self, "LogGroup", retention=LOG_RETENTION, removal_policy=removal_policy)
        powertools_layer = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "PowertoolsLayer",
            ssm.StringParameter.value_for_string_parameter(self, POWERTOOLS_LAYER_PARAMETER),
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description=f"Scheduled Athena refresh racer for job {config.job_name}",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=HANDLER,
            code=lambda_.Code.from_asset(str(code_dir), exclude=list(ASSET_EXCLUDES)),
            timeout=cdk.Duration.seconds(config.lambda_timeout_s),
            memory_size=config.lambda_memory_mb,
            tracing=lambda_.Tracing.ACTIVE,
            layers=[powertools_layer],
            environment=_environment(config, lock_table, results_table, query_target),
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            retry_attempts=ASYNC_RETRY_ATTEMPTS,
            max_event_age=cdk.Duration.seconds(config.max_slot_age_s),
        )
        for statement in _policy_statements(cdk.Stack.of(self), lock_table, results_table, query_target):
            self.function.add_to_role_policy(statement)


def _environment(
    config: JobConfig, lock_table: dynamodb.ITable, results_table: dynamodb.ITable, target: QueryTarget
) -> dict[str, str]:
    """Every variable ``Settings.from_env`` reads (contract names), except ATHENA_CATALOG (its default)."""
    return {
        contract.ENV_JOB_NAME: config.job_name,
        contract.ENV_LOCK_TABLE_NAME: lock_table.table_name,
        contract.ENV_RESULTS_TABLE_NAME: results_table.table_name,
        contract.ENV_RESULTS_BUCKET_NAME: target.bucket.bucket_name,
        contract.ENV_LEASE_DURATION_S: str(config.lease_duration_s),
        contract.ENV_HEARTBEAT_INTERVAL_S: str(config.heartbeat_interval_s),
        contract.ENV_MAX_SLOT_AGE_S: str(config.max_slot_age_s),
        contract.ENV_HISTORY_TTL_S: str(config.history_ttl_s),
        contract.ENV_MAX_QUERY_ATTEMPTS: str(config.max_query_attempts),
        contract.ENV_WINDOW_S: str(config.window_s),
        contract.ENV_DATA_YEAR: str(config.data_year),
        contract.ENV_ATHENA_WORKGROUP: target.workgroup_name,
        contract.ENV_ATHENA_DATABASE: target.database_name,
        contract.ENV_QUERY_SQL: config.sql,
        "POWERTOOLS_SERVICE_NAME": contract.SERVICE_NAME,
        "POWERTOOLS_METRICS_NAMESPACE": contract.METRICS_NAMESPACE,
    }


def _policy_statements(
    stack: cdk.Stack, lock_table: dynamodb.ITable, results_table: dynamodb.ITable, target: QueryTarget
) -> list[iam.PolicyStatement]:
    """Least privilege: item actions on the two tables, one workgroup, one table's catalog entries,
    and the bucket's prefixes Athena reads (data) and writes (query output, oversized results)."""
    bucket = target.bucket
    glue_arns = [
        stack.format_arn(service="glue", resource="catalog"),
        stack.format_arn(service="glue", resource="database", resource_name=target.database_name),
        stack.format_arn(service="glue", resource="table", resource_name=f"{target.database_name}/{target.table_name}"),
    ]
    written_prefixes = (target.athena_results_prefix, target.results_prefix)
    return [
        iam.PolicyStatement(
            sid="LockAndResultsItems",
            actions=list(TABLE_ACTIONS),
            resources=[lock_table.table_arn, results_table.table_arn],
        ),
        iam.PolicyStatement(sid="AthenaQueries", actions=list(ATHENA_ACTIONS), resources=[target.workgroup_arn]),
        iam.PolicyStatement(sid="GlueCatalogRead", actions=list(GLUE_ACTIONS), resources=glue_arns),
        iam.PolicyStatement(
            sid="ReadSourceData",
            actions=["s3:GetObject"],
            resources=[bucket.arn_for_objects(f"{target.data_prefix}*")],
        ),
        iam.PolicyStatement(
            sid="ListOwnPrefixes",
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={
                "StringLike": {"s3:prefix": [f"{prefix}*" for prefix in (target.data_prefix, *written_prefixes)]}
            },
        ),
        iam.PolicyStatement(
            sid="WriteQueryOutputAndResults",
            actions=list(S3_WRITE_OBJECT_ACTIONS),
            resources=[bucket.arn_for_objects(f"{prefix}*") for prefix in written_prefixes],
        ),
        iam.PolicyStatement(sid="BucketForAthena", actions=list(S3_BUCKET_ACTIONS), resources=[bucket.bucket_arn]),
    ]
