"""Helpers of the stack tests: reading resources, policies and the dashboard out of a template."""

from __future__ import annotations

import json
from typing import Any

from stacks.jobs import logical_id_prefix

HANDLER = "athena_refresh.handler.lambda_handler"
DEFAULT_JOB = "flights-dashboard"  # stacks.jobs.DEFAULT_LOCAL_JOB: the job whose resources tests read
#: cdk.json ``capacity`` keys of a deployment sharing another deployment's budget (``shared_budget_deployment``):
#: that deployment's lock table holds the permits, and the queries in its workgroups may be looked up (the first is
#: the other deployment's, which the IAM conformance scenario starts a query in).
SHARED_BUDGET = {"table_name": "other-deployment-locks", "shared_workgroups": ["other-deployment-wg", "team-b.athena"]}
#: The property holding a resource type's physical name, unique per account and Region (when it is set): what a
#: deploy could collide on (tests/stacks/test_upgrade.py, tests/stacks/test_safe_moves.py).
PHYSICAL_NAME = {
    "AWS::Athena::WorkGroup": "Name",
    "AWS::SSM::Parameter": "Name",
    "AWS::Scheduler::Schedule": "Name",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::IAM::Role": "RoleName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::CloudWatch::Dashboard": "DashboardName",
    "AWS::CloudWatch::Alarm": "AlarmName",
}


def job_prefix(job: str = DEFAULT_JOB) -> str:
    """The logical-id prefix of a job's resources (``stacks.jobs.logical_id_prefix``)."""
    return logical_id_prefix(job)


def of_job(resources: dict[str, Any], job: str = DEFAULT_JOB) -> dict[str, dict[str, Any]]:
    """The resources of one job's construct (function, role, schedules, queues, alarms, dashboard)."""
    return {logical_id: res for logical_id, res in resources.items() if logical_id.startswith(job_prefix(job))}


def single(resources: dict[str, Any], type_: str) -> tuple[str, dict[str, Any]]:
    """The one resource of ``type_`` (logical id, resource)."""
    found = [(logical_id, res) for logical_id, res in resources.items() if res["Type"] == type_]
    assert len(found) == 1, [logical_id for logical_id, _ in found]
    return found[0]


def of_type(resources: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {logical_id: res for logical_id, res in resources.items() if res["Type"] == type_}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def actions_on(statements: list[dict[str, Any]], resource_fragment: str) -> set[str]:
    """Actions of the Allow statements whose Resource (rendered as JSON) contains ``resource_fragment``."""
    actions: set[str] = set()
    for statement in statements:
        if statement["Effect"] != "Allow":
            continue
        if any(resource_fragment in json.dumps(resource) for resource in as_list(statement["Resource"])):
            actions.update(as_list(statement["Action"]))
    return actions


def render(value: Any) -> str:
    """A template value as readable text: ``{"Ref": X}`` -> ``<X>``, GetAtt -> ``<X.Attr>``, joins joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(render(part) for part in parts)
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    raise AssertionError(f"cannot render {value!r}")


def dashboard_body(resources: dict[str, Any], job: str | None = DEFAULT_JOB) -> dict[str, Any]:
    """The dashboard JSON, each ``{"Ref": id}`` of its Fn::Join replaced by the text ``<Ref id>`` and each
    ``{"Fn::GetAtt": [id, attr]}`` by ``<GetAtt id.attr>``: only the widgets of ``job``'s section (from its
    ``# Job `<job>``` heading to the next job's), or the whole dashboard with ``job=None``."""
    _, dashboard = single(resources, "AWS::CloudWatch::Dashboard")
    body = dashboard["Properties"]["DashboardBody"]
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]

    def text(part: Any) -> str:
        if isinstance(part, str):
            return part
        if "Ref" in part:
            return f"<Ref {part['Ref']}>"
        return "<GetAtt {}.{}>".format(*part["Fn::GetAtt"])

    whole = json.loads("".join(text(part) for part in parts))
    if job is None:
        return whole
    sections: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] | None = None
    for widget in whole["widgets"]:
        markdown = widget["properties"].get("markdown", "") if widget["type"] == "text" else ""
        if markdown.startswith("# Job `"):
            current = sections.setdefault(markdown.split("`")[1], [])
        if current is not None:
            current.append(widget)
    assert job in sections, list(sections)
    return {**whole, "widgets": sections[job]}


def metric_rows(body: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    """(namespace, metric name, dimensions) of every metric line of every graph (expressions skipped)."""
    rows = []
    for widget in body["widgets"]:
        for row in widget["properties"].get("metrics", []):
            names = [item for item in row if isinstance(item, str)]
            if not names:  # [{"expression": ...}]
                continue
            namespace, metric_name, dims = names[0], names[1], names[2:]
            rows.append((namespace, metric_name, dict(zip(dims[::2], dims[1::2], strict=True))))
    return rows


def expressions(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(widget title, expression) of every expression line of every graph."""
    return [
        (widget["properties"].get("title", ""), options["expression"])
        for widget in body["widgets"]
        for row in widget["properties"].get("metrics", [])
        for options in row
        if isinstance(options, dict) and "expression" in options
    ]
