"""The read side in the template: the HTTP API (IAM on every route, throttled and access-logged stage), the read
functions, their own asset (every job's catalog) and their one read-only role, the dashboard's overview widget,
and the outputs.

Resources are found by their properties (handlers, route keys), never by logical id.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Capture, Match, Template

import app
from athena_refresh import contract
from athena_refresh.catalog import CATALOG_FILE
from athena_refresh.checks import ConfigError
from stacks import REPO_ROOT
from stacks.constructs.dashboard import OVERVIEW_PARAMS, overview_height
from stacks.constructs.watchdog import HANDLER as WATCHDOG_HANDLER
from stacks.jobs import JobDefinition
from stacks.runtime_asset import READ_SIDE_SQL
from stacks.stack_settings import STACK_KEY, StackSettings, load_context
from tests.stacks.helpers import HANDLER, as_list, dashboard_body, of_type, render

API_HANDLER = "results_api.handler.api_handler"
WIDGET_HANDLER = "results_api.handler.widget_handler"
ROUTE_KEYS = {"GET /jobs", "GET /jobs/{job}/results/{slot}", "GET /jobs/{job}/slots", "GET /openapi.json"}
#: The access log's allowed values: request metadata ($context variables) only.
ACCESS_LOG_ALLOWLIST = {
    "$context.requestId",
    "$context.requestTime",
    "$context.httpMethod",
    "$context.routeKey",
    "$context.path",
    "$context.status",
    "$context.responseLength",
    "$context.integrationLatency",
    "$context.integrationErrorMessage",
    "$context.identity.sourceIp",
    "$context.identity.caller",
    "$context.identity.userArn",
}
# Action name fragments that write, create, delete or tag (any service).
WRITE_VERBS = re.compile(r":(Put|Update|Delete|Write|BatchWrite|TransactWrite|Create|Tag|Untag)", re.IGNORECASE)
LOG_WRITES = {"logs:CreateLogStream", "logs:PutLogEvents"}


def _function(template: Template, handler: str) -> tuple[str, dict[str, Any]]:
    found = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": handler}})
    assert len(found) == 1, found.keys()
    ((logical_id, resource),) = found.items()
    return logical_id, resource["Properties"]


@pytest.fixture(scope="module")
def api_function(template: Template) -> tuple[str, dict[str, Any]]:
    return _function(template, API_HANDLER)


@pytest.fixture(scope="module")
def widget_function(template: Template) -> tuple[str, dict[str, Any]]:
    return _function(template, WIDGET_HANDLER)


@pytest.fixture(scope="module")
def read_role_id(api_function: tuple[str, dict[str, Any]]) -> str:
    return str(api_function[1]["Role"]["Fn::GetAtt"][0])


@pytest.fixture(scope="module")
def read_statements(template: Template, read_role_id: str) -> list[dict[str, Any]]:
    policies = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": read_role_id}]}})
    assert len(policies) == 1, policies.keys()
    # No other policy names the role (alone or with others).
    others = [
        logical_id
        for logical_id, policy in template.find_resources("AWS::IAM::Policy").items()
        if {"Ref": read_role_id} in policy["Properties"].get("Roles", []) and logical_id not in policies
    ]
    assert others == []
    return [s for policy in policies.values() for s in policy["Properties"]["PolicyDocument"]["Statement"]]


@pytest.fixture(scope="module")
def table_ids(function_props: dict[str, Any]) -> tuple[str, str]:
    """(lock table, results table) logical ids, from the refresh function's environment."""
    env = function_props["Environment"]["Variables"]
    return env[contract.ENV_LOCK_TABLE_NAME]["Ref"], env[contract.ENV_RESULTS_TABLE_NAME]["Ref"]


@pytest.fixture(scope="module")
def api_id(template: Template) -> str:
    apis = template.find_resources("AWS::ApiGatewayV2::Api")
    assert len(apis) == 1, apis.keys()
    return next(iter(apis))


@pytest.fixture(scope="module")
def stage(template: Template, api_id: str) -> dict[str, Any]:
    stages = template.find_resources("AWS::ApiGatewayV2::Stage", {"Properties": {"ApiId": {"Ref": api_id}}})
    assert len(stages) == 1, stages.keys()
    return dict(next(iter(stages.values()))["Properties"])


# --- the HTTP API ----------------------------------------------------------------------------------------


def test_every_route_is_a_get_with_iam_authorization_and_there_is_no_default_route(
    template: Template, api_id: str
) -> None:
    routes = template.find_resources("AWS::ApiGatewayV2::Route")
    assert {route["Properties"]["RouteKey"] for route in routes.values()} == ROUTE_KEYS
    assert len(routes) == len(ROUTE_KEYS)
    for logical_id, route in routes.items():
        props = route["Properties"]
        assert props["AuthorizationType"] == "AWS_IAM", logical_id
        assert props["ApiId"] == {"Ref": api_id}
        assert "$default" not in props["RouteKey"]
    template.all_resources_properties("AWS::ApiGatewayV2::Route", Match.object_like({"AuthorizationType": "AWS_IAM"}))
    template.resource_count_is("AWS::ApiGatewayV2::Authorizer", 0)  # IAM needs none; no custom authorizer


def test_every_route_invokes_the_api_function_with_payload_format_2(
    template: Template, api_function: tuple[str, dict[str, Any]], api_id: str
) -> None:
    function_id, _ = api_function
    integrations = template.find_resources("AWS::ApiGatewayV2::Integration")
    assert len(integrations) == 1, integrations.keys()
    ((integration_id, integration),) = integrations.items()
    assert integration["Properties"] == {
        "ApiId": {"Ref": api_id},
        "IntegrationType": "AWS_PROXY",
        "IntegrationUri": {"Fn::GetAtt": [function_id, "Arn"]},
        "PayloadFormatVersion": "2.0",
    }
    target = {"Fn::Join": ["", ["integrations/", {"Ref": integration_id}]]}
    for route in template.find_resources("AWS::ApiGatewayV2::Route").values():
        assert route["Properties"]["Target"] == target


def test_the_api_has_no_cors_and_keeps_its_execute_api_endpoint(template: Template, api_id: str) -> None:
    props = template.to_json()["Resources"][api_id]["Properties"]
    assert props["ProtocolType"] == "HTTP"
    assert "CorsConfiguration" not in props
    assert props.get("DisableExecuteApiEndpoint") in (None, False)


def test_only_api_gateway_may_invoke_the_api_function_and_only_from_this_api(
    template: Template, resources: dict[str, Any], api_function: tuple[str, dict[str, Any]], api_id: str
) -> None:
    function_id, _ = api_function
    permissions = [
        p["Properties"]
        for p in of_type(resources, "AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == {"Fn::GetAtt": [function_id, "Arn"]}
    ]
    assert len(permissions) == len(ROUTE_KEYS)  # one per route (CDK's HttpLambdaIntegration)
    for permission in permissions:
        assert permission["Principal"] == "apigateway.amazonaws.com"
        assert permission["Action"] == "lambda:InvokeFunction"
        assert f":<{api_id}>/*/*/" in render(permission["SourceArn"])


def test_the_widget_function_has_no_resource_policy(
    resources: dict[str, Any], widget_function: tuple[str, dict[str, Any]]
) -> None:
    # CloudWatch invokes a custom widget's function with the dashboard viewer's credentials.
    function_id, _ = widget_function
    assert not [
        p
        for p in of_type(resources, "AWS::Lambda::Permission").values()
        if function_id in json.dumps(p["Properties"]["FunctionName"])
    ]


def test_the_default_stage_is_throttled_from_the_stack_settings(stage: dict[str, Any]) -> None:
    defaults = StackSettings()
    assert stage["StageName"] == "$default"
    assert stage["AutoDeploy"] is True
    assert stage["DefaultRouteSettings"] == {
        "ThrottlingRateLimit": defaults.api_throttle_rate_limit,
        "ThrottlingBurstLimit": defaults.api_throttle_burst_limit,
    }
    assert (defaults.api_throttle_rate_limit, defaults.api_throttle_burst_limit) == (20, 40)
    assert "RouteSettings" not in stage  # no route overrides the stage's limits


def test_the_access_log_holds_request_metadata_only(stage: dict[str, Any], resources: dict[str, Any]) -> None:
    settings = stage["AccessLogSettings"]
    log_group_id = settings["DestinationArn"]["Fn::GetAtt"][0]
    assert resources[log_group_id]["Type"] == "AWS::Logs::LogGroup"
    assert resources[log_group_id]["Properties"]["RetentionInDays"] == 30
    text = settings["Format"]
    assert isinstance(text, str)
    fields = json.loads(text)  # one JSON object per request
    assert set(fields.values()) == ACCESS_LOG_ALLOWLIST  # every value is an allowed $context variable
    assert fields["requestId"] == "$context.requestId"  # API Gateway requires a request id
    # No other variable hides in the text: each "$..." is one of the values above.
    assert set(re.findall(r"\$[A-Za-z.]+", text)) == ACCESS_LOG_ALLOWLIST
    for forbidden in ("$response", "$request.", "body", "$input", "authorizer.", "$stageVariables"):
        assert forbidden.lower() not in text.lower(), forbidden


def test_throttling_follows_the_stack_settings(sample_data_dir: Path, sample_jobs_dir: Path) -> None:
    context = load_context(REPO_ROOT / "cdk.json")
    context[STACK_KEY] = {**context[STACK_KEY], "api_throttle_rate_limit": 5, "api_throttle_burst_limit": 7}
    _, deployment = app.build_app(context=context, sample_data_dir=sample_data_dir, jobs_dir=sample_jobs_dir)
    rate, burst = Capture(), Capture()
    Template.from_stack(deployment.shared).has_resource_properties(  # the read API is the shared stack's
        "AWS::ApiGatewayV2::Stage",
        {"DefaultRouteSettings": {"ThrottlingRateLimit": rate, "ThrottlingBurstLimit": burst}},
    )
    assert (rate.as_number(), burst.as_number()) == (5, 7)


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("api_throttle_rate_limit", 0, "an integer from 1 to 10000"),
        ("api_throttle_rate_limit", 2.5, "an integer from 1 to 10000"),
        ("api_throttle_burst_limit", 5001, "an integer from 1 to 5000"),
        ("api_throttle_burst_limit", "40", "an integer from 1 to 5000"),
    ],
)
def test_throttle_settings_are_validated(key: str, value: Any, allowed: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        StackSettings.from_context({key: value})
    (problem,) = excinfo.value.problems
    assert problem.startswith(f"context {STACK_KEY}.{key}: must be {allowed}")
    assert problem.endswith(f"got {value!r}")


# --- the read functions and their role ------------------------------------------------------------------


@pytest.mark.parametrize(("handler", "service"), [(API_HANDLER, "results-api"), (WIDGET_HANDLER, "results-widget")])
def test_each_read_function_runs_the_read_asset_with_the_refresh_functions_runtime(
    template: Template,
    resources: dict[str, Any],
    function_props: dict[str, Any],
    table_ids: tuple[str, str],
    read_role_id: str,
    stack: Any,
    handler: str,
    service: str,
) -> None:
    _, props = _function(template, handler)
    lock, results = table_ids
    assert props["Role"] == {"Fn::GetAtt": [read_role_id, "Arn"]}
    assert props["MemorySize"] == 256
    assert props["Timeout"] == 10
    # The refresh functions' runtime, architecture and Powertools layer; the read side's own asset (shared stack).
    for key in ("Runtime", "Architectures", "Layers"):
        assert props[key] == function_props[key], key
    assert props["Code"]["S3Key"] == _asset_key(stack.runtime_asset_dir)
    assert props["Environment"]["Variables"] == {
        contract.ENV_LOCK_TABLE_NAME: {"Ref": lock},
        contract.ENV_RESULTS_TABLE_NAME: {"Ref": results},
        "POWERTOOLS_SERVICE_NAME": service,
    }
    assert "TracingConfig" not in props  # no X-Ray
    assert props["LoggingConfig"]["LogFormat"] == "JSON"
    log_group_id = props["LoggingConfig"]["LogGroup"]["Ref"]
    assert resources[log_group_id]["Properties"]["RetentionInDays"] == 30


def _asset_key(asset_dir: Path) -> str:
    """The S3 key of a staged directory's Lambda asset: its source fingerprint (CDK's default asset hash)."""
    return f"{cdk.FileSystem.fingerprint(str(asset_dir))}.zip"


def test_the_read_side_has_its_own_asset_with_every_jobs_catalog(
    template: Template, deployment: Any, stack: Any, catalog: dict[str, Any], jobs: tuple[JobDefinition, ...]
) -> None:
    """The read functions serve every job: their asset's catalog holds each job's name and deployed schedule, and
    no query or setting (a job's query or settings edit changes that job's own asset only); each job function runs
    its own asset (one job's catalog), never the read side's."""
    read_catalog = json.loads((stack.runtime_asset_dir / CATALOG_FILE).read_text(encoding="utf-8"))["jobs"]
    assert sorted(read_catalog) == [job.job_name for job in jobs]
    for name, entry in read_catalog.items():
        assert entry == {
            "sql": READ_SIDE_SQL,
            "parameters": [],
            "constants": {},
            "schedule": catalog[name]["schedule"],
        }, name
    read_key = _asset_key(stack.runtime_asset_dir)
    job_keys = {}
    for job_stack in deployment.job_stacks.values():
        for name, asset_dir in job_stack.asset_dirs.items():
            job_keys[name] = _asset_key(asset_dir)
    assert sorted(job_keys) == sorted(read_catalog)
    assert read_key not in job_keys.values()
    assert len(set(job_keys.values())) == len(job_keys)  # one asset per job
    for name, key in job_keys.items():
        found = template.find_resources(
            "AWS::Lambda::Function",
            {
                "Properties": {
                    "Handler": HANDLER,
                    "Code": Match.object_like({"S3Key": key}),
                    "Environment": {"Variables": Match.object_like({contract.ENV_JOB_NAME: name})},
                }
            },
        )
        assert len(found) == 1, name
    readers = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Code": Match.object_like({"S3Key": read_key})}}
    )
    # The freshness watchdog reads the same catalog (every job's schedule and grace): it shares the read side's asset.
    assert {res["Properties"]["Handler"] for res in readers.values()} == {API_HANDLER, WIDGET_HANDLER, WATCHDOG_HANDLER}
    assert len(readers) == 3


def test_both_read_functions_and_nothing_else_use_the_read_role(resources: dict[str, Any], read_role_id: str) -> None:
    users = {
        res["Properties"]["Handler"]
        for res in of_type(resources, "AWS::Lambda::Function").values()
        if res["Properties"]["Role"] == {"Fn::GetAtt": [read_role_id, "Arn"]}
    }
    assert users == {API_HANDLER, WIDGET_HANDLER}


def test_the_read_role_has_no_managed_policy_and_only_lambda_may_assume_it(
    resources: dict[str, Any], read_role_id: str
) -> None:
    role = resources[read_role_id]["Properties"]
    assert "ManagedPolicyArns" not in role
    assert "Policies" not in role
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "lambda.amazonaws.com"}
    assert statement["Action"] == "sts:AssumeRole"


def test_the_read_role_statements_are_exactly_the_reads(
    read_statements: list[dict[str, Any]],
    table_ids: tuple[str, str],
    results_bucket_id: str,
    api_function: tuple[str, dict[str, Any]],
    widget_function: tuple[str, dict[str, Any]],
) -> None:
    lock, results = table_ids
    log_groups = sorted(
        f"<{props['LoggingConfig']['LogGroup']['Ref']}.Arn>" for _, props in (api_function, widget_function)
    )
    by_sid = {}
    for statement in read_statements:
        assert statement["Effect"] == "Allow"
        assert "Condition" not in statement and "NotAction" not in statement and "NotResource" not in statement
        by_sid[statement["Sid"]] = (
            set(as_list(statement["Action"])),
            sorted(render(resource) for resource in as_list(statement["Resource"])),
        )
    assert len(by_sid) == len(read_statements)  # every statement has its own sid
    assert by_sid == {
        "WriteOwnLogs": (LOG_WRITES, log_groups),
        "ReadResults": ({"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}, [f"<{results}.Arn>"]),
        "ReadLockItems": ({"dynamodb:BatchGetItem"}, [f"<{lock}.Arn>"]),
        # The slot history: Query on the lock table's history index only, never on the table.
        "QuerySlotHistory": ({"dynamodb:Query"}, [f"<{lock}.Arn>/index/history"]),
        "ReadOffloadedResults": ({"s3:GetObject"}, [f"<{results_bucket_id}.Arn>/{contract.RESULTS_S3_PREFIX}*"]),
    }


def test_the_read_role_writes_nothing_but_its_own_log_lines(read_statements: list[dict[str, Any]]) -> None:
    actions = {action for statement in read_statements for action in as_list(statement["Action"])}
    assert not {action for action in actions if "*" in action}
    writes = {action for action in actions if WRITE_VERBS.search(action)}
    assert writes == LOG_WRITES
    assert not {action for action in actions if action.startswith("xray:")}


# --- the dashboard's overview widget ------------------------------------------------------------------


def test_the_overview_widget_is_backed_by_the_widget_function(
    resources: dict[str, Any], jobs: tuple[JobDefinition, ...], widget_function: tuple[str, dict[str, Any]]
) -> None:
    """One custom widget for the whole deployment (not one per job): the widget function in its overview mode."""
    function_id, props = widget_function
    assert props["Handler"] == WIDGET_HANDLER
    whole = dashboard_body(resources, None)
    (widget,) = [w for w in whole["widgets"] if w["type"] == "custom"]
    assert whole["widgets"].index(widget) == 1  # right below the heading, above the per-job section
    assert widget["properties"] == {
        "endpoint": f"<GetAtt {function_id}.Arn>",
        "params": OVERVIEW_PARAMS,
        "title": "Every job: last slot, freshness, last success, lease, paused, latest result, how to fetch",
        "updateOn": {"refresh": True, "resize": False, "timeRange": False},
    }
    assert OVERVIEW_PARAMS == {"view": "overview"}
    assert widget["width"] == 24 and widget["height"] == overview_height(len(jobs)) == 6


# --- outputs ------------------------------------------------------------------------------------------------


def test_outputs_name_the_api_and_the_read_functions(
    template: Template,
    api_id: str,
    api_function: tuple[str, dict[str, Any]],
    widget_function: tuple[str, dict[str, Any]],
) -> None:
    url = Capture()
    template.has_output("ReadApiUrl", {"Value": url})
    assert render(url.as_object()) == f"https://<{api_id}>.execute-api.<AWS::Region>.<AWS::URLSuffix>/"
    template.has_output("ReadApiId", {"Value": {"Ref": api_id}})
    template.has_output("ReadApiFunctionName", {"Value": {"Ref": api_function[0]}})
    template.has_output("ResultsWidgetFunctionName", {"Value": {"Ref": widget_function[0]}})
