"""The refresh Lambda: the staged asset (runtime + job catalog), Powertools public layer, environment from
the contract, JSON logs with retention, X-Ray, and a role of its own that allows exactly the calls the
runtime makes (plus what Athena does with them). Its async retries, on-failure queue and lock table grant
come from :class:`~slotlock_cdk.once_per_slot_schedule.OncePerSlotSchedule`, as for any such function.

Least privilege, from the runtime's calls (``lambdas/``):

- lock table (``slotlock._dynamodb``): ``UpdateItem`` (acquire, heartbeat, release, state),
  ``PutItem`` (missed-slot records), ``GetItem`` (consistent reads of the lock and slot items), and
  ``TransactWriteItems`` (the fenced commit), which IAM authorizes per item action (``UpdateItem`` on
  the lock table, ``PutItem`` + ``UpdateItem`` on the results table): there is no
  ``dynamodb:TransactWriteItems`` action.
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html
- the capacity semaphore (``slotlock.semaphore``), while the budget is on: ``BatchGetItem`` on the lock table (one
  consistent read of the permits and the tickets item; their writes are ``UpdateItem``), added to the lock grant by
  ``OncePerSlotSchedule(capacity_semaphore=True)``; the deferral's ``scheduler:CreateSchedule`` and
  ``iam:PassRole`` come from :mod:`stacks.constructs.capacity`.
- results table (``athena_refresh.results``): the commit's ``Put`` (result item) and ``Update`` (fenced LATEST
  pointer), and ``GetItem`` of the LATEST item (``ResultsStore.latest_order``: whether a manual generation, or a
  commit after a LATEST conflict, moves the pointer).
- Athena (``athena_refresh.engine``): ``StartQueryExecution``, ``GetQueryExecution``,
  ``GetQueryResults`` on the one workgroup (the runtime never stops a query: a successor adopts it); with a
  capacity budget shared by several deployments, ``GetQueryExecution`` alone on their workgroups too (the reclaim
  check of another deployment's expired permit: ``SharedCapacityQueryStatus`` in :mod:`stacks.constructs.capacity`).
- what Athena does with the caller's credentials: Glue ``GetDatabase``/``GetTable`` on the catalog, the
  database and the table, and ``GetPartitions`` for a user's own table (Athena lists the partitions of a
  partitioned table without partition projection; the sample table projects its partitions, so its jobs
  are not granted it); S3 ``GetObject``/``ListBucket`` of the table's data prefix;
  S3 writes and reads of the workgroup's output prefix.
  https://docs.aws.amazon.com/athena/latest/ug/fine-grained-access-to-glue-resources.html
  https://docs.aws.amazon.com/athena/latest/ug/s3-permissions.html
- S3 ``PutObject`` of result rows too large for an item (``results/``).
- CloudWatch Logs (this function's log group only), SQS ``SendMessage`` (the on-failure queue), X-Ray.

Metrics go out as EMF through the log group: no ``cloudwatch:PutMetricData``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from athena_refresh import contract
from athena_refresh.jobspec import JobSpec
from stacks import LAMBDAS_DIR
from stacks.nag import acknowledge, wildcard_finding

HANDLER = "athena_refresh.handler.lambda_handler"
RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}[
    contract.LAMBDA_ARCHITECTURE
]
# Public SSM parameter holding the ARN of the latest Powertools layer; resolved at deploy time.
POWERTOOLS_LAYER_PARAMETER = f"/aws/service/powertools/python/{ARCHITECTURE.name}/{RUNTIME.name}/latest"
ASSET_EXCLUDES = ("**/__pycache__", "**/*.pyc")
LOG_RETENTION = logs.RetentionDays.ONE_MONTH

# Service authorization reference of each service (actions, resource types, condition keys):
# DynamoDB https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazondynamodb.html
# Athena   https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonathena.html
# Glue     https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsglue.html
# S3       https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html
# SQS      https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsqs.html
# Logs     https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatchlogs.html
# X-Ray    https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsx-ray.html
RESULTS_TABLE_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")
ATHENA_ACTIONS = ("athena:StartQueryExecution", "athena:GetQueryExecution", "athena:GetQueryResults")
GLUE_ACTIONS = ("glue:GetDatabase", "glue:GetTable")
# Athena lists a table's partitions in Glue unless the table projects them (partition projection):
# https://docs.aws.amazon.com/athena/latest/ug/partition-projection.html
GLUE_PARTITION_ACTIONS = ("glue:GetPartitions",)
# Athena writes the query output with the caller's credentials (multipart for large output) and
# GetQueryResults reads it back the same way.
S3_QUERY_OUTPUT_ACTIONS = ("s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")
S3_BUCKET_ACTIONS = ("s3:GetBucketLocation", "s3:ListBucketMultipartUploads")
LOG_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")  # the log group itself is the stack's
# Added by CDK for Tracing.ACTIVE with Resource "*": neither action supports resource-level
# permissions (X-Ray service authorization reference above).
XRAY_ACTIONS = ("xray:PutTraceSegments", "xray:PutTelemetryRecords")

#: Granted actions that no call of our code makes: the Lambda service uses them with the function's role. The
#: IAM conformance test (tests/stacks/test_iam_conformance.py) accepts an unused grant only when it is named here.
PLATFORM_GRANTS: dict[str, str] = {
    "logs:CreateLogStream": "the Lambda service creates the function's log streams with its execution role",
    "logs:PutLogEvents": "the Lambda service ships the function's log lines (and EMF metrics) with its execution role",
    "xray:PutTraceSegments": "Tracing.ACTIVE: Lambda's X-Ray integration sends the trace segments with the role",
    "xray:PutTelemetryRecords": "Tracing.ACTIVE: Lambda's X-Ray integration sends its telemetry with the role",
    "sqs:SendMessage": "Lambda delivers a failed asynchronous invocation's record to the on-failure queue with the"
    " function's role (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html)",
}


@dataclass(frozen=True, kw_only=True)
class QueryTarget:
    """What the function queries and where Athena reads and writes (prefixes end with "/").

    ``data_bucket``/``data_prefix``: where the job's source table lives (the stack's bucket for the sample,
    the Glue table's own location otherwise); ``bucket``: the stack's bucket, holding the workgroup's query
    output (``athena_results_prefix``) and oversized results (``results_prefix``).
    """

    workgroup_name: str
    workgroup_arn: str
    database_name: str
    table_name: str
    bucket: s3.IBucket
    data_bucket: s3.IBucket
    data_prefix: str
    athena_results_prefix: str
    results_prefix: str
    #: Whether Athena asks Glue for the table's partitions (``glue:GetPartitions``): ``False`` for a table with
    #: partition projection (the sample's), ``True`` for a user's table, whose layout the stack cannot know.
    lists_partitions: bool = True


class RefreshFunction(Construct):
    """The racer Lambda. ``function`` is the ``lambda_.Function``; ``log_group`` its log group (its own, or the
    one given, shared by the deployment's job functions: one group for every job's log lines); ``role`` its
    execution role (no managed policies)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: JobSpec,
        lock_table: dynamodb.ITable,
        results_table: dynamodb.ITable,
        query_target: QueryTarget,
        removal_policy: cdk.RemovalPolicy,
        code_dir: Path = LAMBDAS_DIR,  # the staged asset (stacks.runtime_asset): runtime packages + job catalog
        log_group: logs.ILogGroup | None = None,  # a log group shared with other functions (the deployment's)
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = log_group or logs.LogGroup(
            self, "LogGroup", retention=LOG_RETENTION, removal_policy=removal_policy
        )
        # Our own role: the default one carries the managed AWSLambdaBasicExecutionRole (logs:* on any group).
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Scheduled Athena refresh racer ({config.job_name}): least privilege",
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description=f"Scheduled Athena refresh racer for job {config.job_name}",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=HANDLER,
            code=runtime_code(code_dir),
            role=self.role,
            timeout=cdk.Duration.seconds(config.lambda_timeout_s),
            memory_size=config.lambda_memory_mb,
            tracing=lambda_.Tracing.ACTIVE,
            layers=[powertools_layer(self)],
            environment=function_environment(config, lock_table, results_table, query_target),
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
        )  # async retries, the on-failure queue and the lock table grant: OncePerSlotSchedule
        stack = cdk.Stack.of(self)
        for statement in policy_statements(stack, lock_table, results_table, query_target, self.log_group):
            self.role.add_to_principal_policy(statement)
        self._acknowledge_findings(stack, query_target)

    def _acknowledge_findings(self, stack: cdk.Stack, target: QueryTarget) -> None:
        acknowledge_runtime_pin(self.function)
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "Only xray:PutTraceSegments and xray:PutTelemetryRecords (added by Tracing.ACTIVE) use '*': X-Ray "
            "supports no resource-level permissions for them (service authorization reference for X-Ray).",
        )
        bucket = target.bucket
        acknowledge(
            self.role,
            wildcard_finding(
                self, target.data_bucket.arn_for_objects(f"{target.data_prefix}*"), producer=_owner(target.data_bucket)
            ),
            "s3:GetObject of the queried table's data files, which Athena reads with the function's "
            "credentials; the file names are the data's, so the table's prefix is the narrowest scope.",
        )
        for prefix, why in (
            (
                target.athena_results_prefix,
                (
                    "Athena writes and reads back query output under the workgroup's "
                    "output prefix with the function's credentials; object names are query execution ids."
                ),
            ),
            (
                target.results_prefix,
                (
                    "s3:PutObject of result rows too large for a DynamoDB item, under "
                    "results/<job>/<slot>/token-<fencing token>.json: names are per slot, so a prefix is needed."
                ),
            ),
        ):
            acknowledge(
                self.role, wildcard_finding(self, bucket.arn_for_objects(f"{prefix}*"), producer=_owner(bucket)), why
            )


def _owner(bucket: s3.IBucket) -> cdk.Stack:
    """The stack that defines ``bucket`` (the shared stack's, or an imported bucket's own stack)."""
    return cdk.Stack.of(bucket)


def powertools_layer(scope: Construct, construct_id: str = "PowertoolsLayer") -> lambda_.ILayerVersion:
    """The Powertools public layer for :data:`RUNTIME` and :data:`ARCHITECTURE`: its ARN is the value of the
    public SSM parameter :data:`POWERTOOLS_LAYER_PARAMETER`, resolved at deploy time (one stack parameter,
    shared by every function)."""
    return lambda_.LayerVersion.from_layer_version_arn(
        scope, construct_id, ssm.StringParameter.value_for_string_parameter(scope, POWERTOOLS_LAYER_PARAMETER)
    )


def runtime_code(code_dir: Path) -> lambda_.Code:
    """The staged asset (:mod:`stacks.runtime_asset`) as Lambda code; every function shares its one hash."""
    return lambda_.Code.from_asset(str(code_dir), exclude=list(ASSET_EXCLUDES))


def acknowledge_runtime_pin(function: lambda_.IFunction) -> None:
    """AwsSolutions-L1 (not the latest runtime) on a function built with :data:`RUNTIME` and the layer."""
    acknowledge(
        function,
        "AwsSolutions-L1",
        f"The runtime is pinned to {RUNTIME.name} together with the Powertools public layer parameter "
        f"{POWERTOOLS_LAYER_PARAMETER}; both move to a newer Python in one reviewed change.",
    )


def function_environment(
    config: JobSpec, lock_table: dynamodb.ITable, results_table: dynamodb.ITable, target: QueryTarget
) -> dict[str, str]:
    """The deployment's wiring (``contract.WIRING_ENV_VARS``: job name, resource names) and Powertools'
    settings, from :meth:`JobSpec.wiring_environment`; the job's spec travels in the job catalog."""
    return config.wiring_environment(
        lock_table_name=lock_table.table_name,
        results_table_name=results_table.table_name,
        results_bucket_name=target.bucket.bucket_name,
        workgroup=target.workgroup_name,
        database=target.database_name,
    )


def policy_statements(
    stack: cdk.Stack,
    lock_table: dynamodb.ITable,
    results_table: dynamodb.ITable,
    target: QueryTarget,
    log_group: logs.ILogGroup,
) -> list[iam.PolicyStatement]:
    """The function's statements (each with a Sid), from the runtime's calls listed in the module doc."""
    bucket = target.bucket
    glue_arns = [
        stack.format_arn(service="glue", resource="catalog"),
        stack.format_arn(service="glue", resource="database", resource_name=target.database_name),
        stack.format_arn(service="glue", resource="table", resource_name=f"{target.database_name}/{target.table_name}"),
    ]
    return [
        iam.PolicyStatement(sid="WriteOwnLogs", actions=list(LOG_ACTIONS), resources=[log_group.log_group_arn]),
        iam.PolicyStatement(
            sid="ResultsTableCommit", actions=list(RESULTS_TABLE_ACTIONS), resources=[results_table.table_arn]
        ),
        iam.PolicyStatement(sid="AthenaQueries", actions=list(ATHENA_ACTIONS), resources=[target.workgroup_arn]),
        iam.PolicyStatement(
            sid="GlueCatalogRead",
            actions=list(GLUE_ACTIONS + (GLUE_PARTITION_ACTIONS if target.lists_partitions else ())),
            resources=glue_arns,
        ),
        iam.PolicyStatement(
            sid="ReadSourceData",
            actions=["s3:GetObject"],
            resources=[target.data_bucket.arn_for_objects(f"{target.data_prefix}*")],
        ),
        iam.PolicyStatement(
            sid="ListSourceData",
            actions=["s3:ListBucket"],
            resources=[target.data_bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{target.data_prefix}*"]}},
        ),
        iam.PolicyStatement(
            sid="ListQueryOutput",
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{target.athena_results_prefix}*"]}},
        ),
        iam.PolicyStatement(sid="BucketForAthena", actions=list(S3_BUCKET_ACTIONS), resources=[bucket.bucket_arn]),
        iam.PolicyStatement(
            sid="QueryOutput",
            actions=list(S3_QUERY_OUTPUT_ACTIONS),
            resources=[bucket.arn_for_objects(f"{target.athena_results_prefix}*")],
        ),
        iam.PolicyStatement(
            sid="OversizedResults",
            actions=["s3:PutObject"],
            resources=[bucket.arn_for_objects(f"{target.results_prefix}*")],
        ),
    ]
