"""The read side (``lambdas/results_api``): an HTTP API serving each job's results and slot history, and the
Lambda behind the dashboard's "latest results" custom widget; both functions share one read-only role.

Least privilege, from the reads the runtime makes (``results_api``, through ``athena_refresh.results`` and
the lock table's history index):

- results table: ``GetItem`` (a slot's result, the LATEST item), ``BatchGetItem`` (every job's LATEST item for
  ``GET /jobs``) and ``Query`` (a slot's generations), on the table only (it has no index);
- lock table: ``BatchGetItem`` (every job's live lock item for ``GET /jobs``) on the table, and ``Query`` on the
  sparse history index only (``<table>/index/history``: a job's slot history), never on the table itself;
- S3 ``GetObject`` of ``results/*`` only: rows too large for an item live there; the API presigns GET URLs
  with this role's credentials, so a URL can read nothing else;
- CloudWatch Logs: ``CreateLogStream``/``PutLogEvents`` on the two functions' own log groups.

No write of any service (except the log lines), no X-Ray, no managed policy.

The API (API Gateway HTTP API, payload format 2.0) has four ``GET`` routes, each with IAM authorization
(SigV4; the caller needs ``execute-api:Invoke``), no ``$default`` route and no CORS. Its ``$default``
stage is throttled (``StackSettings.api_throttle_*``) and writes an access log of request metadata only
(:data:`ACCESS_LOG_FORMAT`): HTTP APIs cannot log request or response bodies, and the format names none.

The widget function is invoked by CloudWatch with the dashboard viewer's credentials
(``lambda:InvokeFunction`` of the viewer): it needs no resource policy.
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/add_custom_widget_dashboard_about.html
"""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from athena_refresh import contract
from slotlock import table as lock_layout
from stacks.constructs.refresh_function import (
    ARCHITECTURE,
    LOG_ACTIONS,
    LOG_RETENTION,
    RUNTIME,
    acknowledge_runtime_pin,
    powertools_layer,
    runtime_code,
)
from stacks.constructs.refresh_function import (
    PLATFORM_GRANTS as REFRESH_PLATFORM_GRANTS,
)
from stacks.nag import acknowledge, wildcard_finding

API_HANDLER = "results_api.handler.api_handler"
WIDGET_HANDLER = "results_api.handler.widget_handler"
API_SERVICE_NAME = "results-api"  # POWERTOOLS_SERVICE_NAME of each function
WIDGET_SERVICE_NAME = "results-widget"
MEMORY_MB = 256
TIMEOUT = cdk.Duration.seconds(10)  # one page of DynamoDB reads and a presign: well under a second

#: Every route of the API: ``GET`` only, IAM authorization (the API's default authorizer) on each.
ROUTE_PATHS = ("/jobs", "/jobs/{job}/results/{slot}", "/jobs/{job}/slots", "/openapi.json")

# DynamoDB https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazondynamodb.html
RESULTS_TABLE_READ_ACTIONS = ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query")
LOCK_TABLE_READ_ACTIONS = ("dynamodb:BatchGetItem",)
HISTORY_INDEX_ACTIONS = ("dynamodb:Query",)
#: Granted actions no call of the read functions' code makes (the IAM conformance test's exemptions).
PLATFORM_GRANTS: dict[str, str] = {
    action: reason for action, reason in REFRESH_PLATFORM_GRANTS.items() if action.startswith("logs:")
}

#: The access log line (JSON): request metadata only, every value a ``$context`` variable.
#: https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-logging-variables.html
ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "path": "$context.path",
    "status": "$context.status",
    "responseLength": "$context.responseLength",
    "integrationLatency": "$context.integrationLatency",
    "integrationErrorMessage": "$context.integrationErrorMessage",
    "sourceIp": "$context.identity.sourceIp",
    "caller": "$context.identity.caller",
    "userArn": "$context.identity.userArn",
}
ACCESS_LOG_FORMAT = json.dumps(ACCESS_LOG_FIELDS, separators=(",", ":"))


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    """``HttpStage(access_log_settings=...)`` takes an ``IAccessLogSettings`` object (an interface, not a struct)."""

    def __init__(self, destination: apigwv2.IAccessLogDestination, log_format: apigw.AccessLogFormat) -> None:
        self._destination = destination
        self._format = log_format

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return self._format


class ReadApi(Construct):
    """``role`` (read-only, shared), ``api_function``/``widget_function`` with their ``*_log_group``, ``http_api``,
    ``stage`` (``$default``: throttled, access-logged to ``access_log_group``) and ``url``.

    :param results_prefix: the bucket prefix of offloaded result rows (ends with "/"): the role reads it only.
    :param code_dir: the staged asset shared with the refresh functions (:mod:`stacks.runtime_asset`).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        lock_table: dynamodb.ITable,
        results_table: dynamodb.ITable,
        bucket: s3.IBucket,
        results_prefix: str,
        code_dir: Path,
        throttle_rate_limit: int,
        throttle_burst_limit: int,
        removal_policy: cdk.RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        # Our own role: the default one carries the managed AWSLambdaBasicExecutionRole (logs:* on any group).
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Scheduled Athena refresh read API and results widget: read-only",
        )
        layer = powertools_layer(self)
        environment = {
            contract.ENV_LOCK_TABLE_NAME: lock_table.table_name,
            contract.ENV_RESULTS_TABLE_NAME: results_table.table_name,
        }

        def read_function(
            name: str, *, handler: str, service: str, description: str
        ) -> tuple[lambda_.Function, logs.LogGroup]:
            log_group = logs.LogGroup(self, f"{name}LogGroup", retention=LOG_RETENTION, removal_policy=removal_policy)
            function = lambda_.Function(
                self,
                f"{name}Function",
                description=description,
                runtime=RUNTIME,
                architecture=ARCHITECTURE,
                handler=handler,
                code=runtime_code(code_dir),
                role=self.role,
                timeout=TIMEOUT,
                memory_size=MEMORY_MB,
                layers=[layer],
                environment={**environment, "POWERTOOLS_SERVICE_NAME": service},
                log_group=log_group,
                logging_format=lambda_.LoggingFormat.JSON,
            )
            return function, log_group

        self.api_function, self.api_log_group = read_function(
            "Api",
            handler=API_HANDLER,
            service=API_SERVICE_NAME,
            description="Scheduled Athena refresh read API: each job's results and slot history",
        )
        self.widget_function, self.widget_log_group = read_function(
            "Widget",
            handler=WIDGET_HANDLER,
            service=WIDGET_SERVICE_NAME,
            description="Scheduled Athena refresh dashboard widget: each job's latest results",
        )
        for statement in read_statements(
            lock_table=lock_table,
            results_table=results_table,
            bucket=bucket,
            results_prefix=results_prefix,
            log_groups=[self.api_log_group, self.widget_log_group],
        ):
            self.role.add_to_principal_policy(statement)

        self.http_api = apigwv2.HttpApi(
            self,
            "HttpApi",
            api_name=f"{cdk.Stack.of(self).stack_name}-results",
            description="Scheduled Athena refresh: each job's results and slot history (read-only, IAM auth)",
            # Every route, including any added later, requires SigV4-signed requests (execute-api:Invoke).
            default_authorizer=authorizers.HttpIamAuthorizer(),
            # HttpApi's own default stage takes no options: the throttled, logged $default stage is below.
            create_default_stage=False,
        )
        integration = integrations.HttpLambdaIntegration(
            "ApiIntegration", self.api_function, payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0
        )
        for path in ROUTE_PATHS:
            self.http_api.add_routes(path=path, methods=[apigwv2.HttpMethod.GET], integration=integration)

        self.access_log_group = logs.LogGroup(
            self, "AccessLogs", retention=LOG_RETENTION, removal_policy=removal_policy
        )
        self.stage = apigwv2.HttpStage(
            self,
            "Stage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=throttle_rate_limit, burst_limit=throttle_burst_limit),
            access_log_settings=_AccessLogSettings(
                apigwv2.LogGroupLogDestination(self.access_log_group),
                apigw.AccessLogFormat.custom(ACCESS_LOG_FORMAT),
            ),
        )
        #: The API's endpoint (``https://<api id>.execute-api.<region>.<suffix>/``).
        self.url = self.stage.url
        self._acknowledge_findings(bucket, results_prefix)

    def _acknowledge_findings(self, bucket: s3.IBucket, results_prefix: str) -> None:
        for function in (self.api_function, self.widget_function):
            acknowledge_runtime_pin(function)
        acknowledge(
            self.role,
            wildcard_finding(self, bucket.arn_for_objects(f"{results_prefix}*")),
            "s3:GetObject (read only) of offloaded result rows, named results/<job>/<slot>/token-<fencing token>"
            ".json: names are per slot, so the prefix is the narrowest scope; the API presigns GET URLs for them.",
        )


def read_statements(
    *,
    lock_table: dynamodb.ITable,
    results_table: dynamodb.ITable,
    bucket: s3.IBucket,
    results_prefix: str,
    log_groups: list[logs.ILogGroup],
) -> list[iam.PolicyStatement]:
    """The read role's statements (each with a Sid): reads only, from the module doc's list."""
    return [
        iam.PolicyStatement(
            sid="WriteOwnLogs", actions=list(LOG_ACTIONS), resources=[group.log_group_arn for group in log_groups]
        ),
        iam.PolicyStatement(
            sid="ReadResults", actions=list(RESULTS_TABLE_READ_ACTIONS), resources=[results_table.table_arn]
        ),
        iam.PolicyStatement(
            sid="ReadLockItems", actions=list(LOCK_TABLE_READ_ACTIONS), resources=[lock_table.table_arn]
        ),
        iam.PolicyStatement(
            sid="QuerySlotHistory",
            actions=list(HISTORY_INDEX_ACTIONS),
            resources=[f"{lock_table.table_arn}/index/{lock_layout.HISTORY_INDEX}"],
        ),
        iam.PolicyStatement(
            sid="ReadOffloadedResults",
            actions=["s3:GetObject"],
            resources=[bucket.arn_for_objects(f"{results_prefix}*")],
        ),
    ]
