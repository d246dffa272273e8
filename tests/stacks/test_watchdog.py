"""The freshness watchdog's infrastructure in the shared stack: function, schedules, grants and its two alarms.

The sample jobs' shortest period is 30 minutes (flights-dashboard), so the watchdog runs every 15 minutes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Capture, Match, Template

from athena_refresh import contract
from stacks.constructs.watchdog import HANDLER, SILENT_AFTER_PERIODS
from tests.stacks.helpers import actions_on, dashboard_body, of_type

PERIOD_S = 900


def _watchdog_metric(name: str, statistic: str, period: int) -> dict[str, Any]:
    return {
        "Metric": {
            "Namespace": contract.METRICS_NAMESPACE,
            "MetricName": name,
            "Dimensions": [{"Name": contract.DIMENSION_SERVICE, "Value": contract.SERVICE_NAME}],
        },
        "Period": period,
        "Stat": statistic,
    }


@pytest.mark.parametrize(
    ("periods", "expected"),
    [([1800, 86_400], 900), ([300], 300), ([600], 300), ([1200], 600), ([3600], 900), ([], 900), ([2700], 900)],
)
def test_the_period_is_half_the_shortest_job_period_bounded_to_5_15_minutes(periods: list[int], expected: int) -> None:
    assert contract.watchdog_period_s(periods) == expected  # the runtime's rule, the stack's and make cost's


def test_the_late_or_failing_alarm_pins_metrics_threshold_period_and_missing_data(shared_template: Template) -> None:
    late, failing = Capture(), Capture()
    shared_template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "Threshold": 1,
            "EvaluationPeriods": 1,
            "TreatMissingData": "notBreaching",
            "Metrics": Match.array_with(
                [
                    Match.object_like({"Expression": "late + failing", "ReturnData": True}),
                    Match.object_like({"Id": "late", "MetricStat": late, "ReturnData": False}),
                    Match.object_like({"Id": "failing", "MetricStat": failing, "ReturnData": False}),
                ]
            ),
            "AlarmActions": Match.any_value(),
            "OKActions": Match.any_value(),
        },
    )
    assert late.as_object() == _watchdog_metric(contract.METRIC_JOBS_LATE, "Maximum", PERIOD_S)
    assert failing.as_object() == _watchdog_metric(contract.METRIC_JOBS_FAILING, "Maximum", PERIOD_S)


def test_the_heartbeat_alarm_breaches_on_missing_data(shared_template: Template) -> None:
    shared_template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": contract.METRICS_NAMESPACE,
            "MetricName": contract.METRIC_WATCHDOG_RUNS,
            "Dimensions": [{"Name": contract.DIMENSION_SERVICE, "Value": contract.SERVICE_NAME}],
            "Statistic": "Sum",
            "Period": SILENT_AFTER_PERIODS * PERIOD_S,
            "ComparisonOperator": "LessThanThreshold",
            "Threshold": 1,
            "EvaluationPeriods": 1,
            "TreatMissingData": "breaching",
        },
    )


def _watchdog_function(resources: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    found = [
        (k, r) for k, r in of_type(resources, "AWS::Lambda::Function").items() if r["Properties"]["Handler"] == HANDLER
    ]
    assert len(found) == 1, found
    return found[0]


def test_one_function_two_racers_every_15_minutes_under_its_own_lock(shared_template: Template) -> None:
    resources = shared_template.to_json()["Resources"]
    logical_id, function = _watchdog_function(resources)
    environment = function["Properties"]["Environment"]["Variables"]
    assert set(environment) >= {
        contract.ENV_LOCK_TABLE_NAME,
        contract.ENV_ALARM_TOPIC_ARN,
        contract.ENV_DEPLOYMENT_STACK,
    }
    schedules = [
        r["Properties"]
        for r in of_type(resources, "AWS::Scheduler::Schedule").values()
        if r["Properties"]["Target"]["Arn"] == {"Fn::GetAtt": [logical_id, "Arn"]}
    ]
    assert len(schedules) == 2
    assert {s["ScheduleExpression"] for s in schedules} == {"cron(0/15 * * * ? *)"}
    inputs = [json.loads(s["Target"]["Input"]) for s in schedules]
    assert {i["job"] for i in inputs} == {contract.WATCHDOG_JOB_NAME}


def test_least_privilege_reads_by_key_and_publishes_to_the_alarm_topic(shared_template: Template) -> None:
    resources = shared_template.to_json()["Resources"]
    _, function = _watchdog_function(resources)
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [
        statement
        for policy in of_type(resources, "AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    lock_table = next(k for k, r in resources.items() if r["Type"] == "AWS::DynamoDB::Table" and k.startswith("Lock"))
    actions = {a for s in statements for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])}
    assert "dynamodb:Scan" not in actions and "dynamodb:Query" not in actions
    assert actions_on(statements, lock_table) == {
        "dynamodb:BatchGetItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
    }
    assert "sns:Publish" in actions_on(statements, "AlarmTopic")


def test_the_dashboards_alarm_widget_lists_both_watchdog_alarms(shared_template: Template) -> None:
    """The dashboard's "Deployment alarms" status widget shows the watchdog's two alarms beside the shared stack's."""
    parts = Capture()
    shared_template.has_resource_properties("AWS::CloudWatch::Dashboard", {"DashboardBody": {"Fn::Join": ["", parts]}})
    alarm_refs = [
        part["Fn::GetAtt"][0]
        for part in parts.as_array()
        if isinstance(part, dict) and "Fn::GetAtt" in part and part["Fn::GetAtt"][1] == "Arn"
    ]
    resources = shared_template.to_json()["Resources"]
    watchdog = sorted(k for k in of_type(resources, "AWS::CloudWatch::Alarm") if k.startswith("Watchdog"))
    assert [k[len("Watchdog") : -8] for k in watchdog] == ["JobsLateOrFailing", "WatchdogSilent"]
    assert set(watchdog) <= set(alarm_refs)
    (status,) = [w for w in dashboard_body(resources, None)["widgets"] if w["type"] == "alarm"]
    assert [f"<GetAtt {k}.Arn>" for k in watchdog] == status["properties"]["alarms"][-2:]
