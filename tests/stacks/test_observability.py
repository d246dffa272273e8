"""Alarms, the alarm topic, and the dashboard (every contract metric, the analytics values, the latest runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

import app
from athena_refresh import contract
from athena_refresh.catalog import CATALOG_FILE
from stacks import REPO_ROOT
from stacks.config import STACK_KEY, JobConfig, load_context
from stacks.constructs.job_metrics import value_search_expression
from tests.sample_jobs import stage_jobs
from tests.stacks.helpers import dashboard_body, expressions, job_prefix, metric_rows, of_job, of_type

JOB_DIMENSIONS_SORTED = [{"Name": "job", "Value": "flights-dashboard"}, {"Name": "service", "Value": "athena-refresh"}]


@pytest.fixture(scope="module")
def alarms(resources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The flights job's alarm properties by their construct id (``Job<job>ScheduleNoRecentSuccess...``)."""
    found = {}
    prefixes = (job_prefix() + "Schedule", job_prefix() + "Alarms")  # OncePerSlotSchedule's and the Athena ones
    for logical_id, resource in of_type(of_job(resources), "AWS::CloudWatch::Alarm").items():
        (prefix,) = [p for p in prefixes if logical_id.startswith(p)]
        found[logical_id[len(prefix) : -8]] = resource["Properties"]
    return found


def test_every_alarm_exists_and_notifies_the_topic_on_alarm_and_ok(
    alarms: dict[str, dict[str, Any]], resources: dict[str, Any]
) -> None:
    assert set(alarms) == {
        "NoRecentSuccess",
        "RunFailed",
        "SlotMissed",
        "StaleWriteRejected",
        "CorruptLockItem",
        "FailedInvocationsQueued",
        "FailureRecordsDeadLettered",
        "AsyncEventsDropped",
        "DataScannedHigh",
        "QueryDurationHigh",
    }
    (topic_id,) = of_type(resources, "AWS::SNS::Topic")
    for name, props in alarms.items():
        assert props["AlarmActions"] == [{"Ref": topic_id}], name
        assert props["OKActions"] == [{"Ref": topic_id}], name
        assert props["EvaluationPeriods"] == 1, name
        assert props["AlarmDescription"], name


def test_no_recent_success_alarm_breaches_after_two_periods_or_without_data(
    alarms: dict[str, dict[str, Any]], config: JobConfig
) -> None:
    props = alarms["NoRecentSuccess"]
    assert props["Namespace"] == contract.METRICS_NAMESPACE
    assert props["MetricName"] == contract.METRIC_LAST_SUCCESS_AGE_S
    assert props["Dimensions"] == JOB_DIMENSIONS_SORTED
    assert props["Statistic"] == "Maximum"
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    assert props["Threshold"] == 2 * config.period.longest_s == 3600
    assert props["Period"] == config.period.longest_s == 1800
    assert props["TreatMissingData"] == "breaching"


@pytest.mark.parametrize(
    ("name", "metric_name"),
    [
        ("RunFailed", contract.METRIC_RUN_FAILED),
        ("StaleWriteRejected", contract.METRIC_STALE_WRITE_REJECTED),
        ("CorruptLockItem", contract.METRIC_CORRUPT_LOCK_ITEM),
    ],
)
def test_count_alarms_fire_on_any_occurrence(alarms: dict[str, dict[str, Any]], name: str, metric_name: str) -> None:
    props = alarms[name]
    assert (props["Namespace"], props["MetricName"], props["Statistic"]) == (
        contract.METRICS_NAMESPACE,
        metric_name,
        "Sum",
    )
    assert props["Dimensions"] == JOB_DIMENSIONS_SORTED
    assert (props["ComparisonOperator"], props["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1)
    assert props["TreatMissingData"] == "notBreaching"


def test_slot_missed_alarm_sums_every_reason(alarms: dict[str, dict[str, Any]]) -> None:
    props = alarms["SlotMissed"]
    queries = props["Metrics"]
    (expression,) = [query for query in queries if "Expression" in query]
    assert expression["ReturnData"] is True
    inputs = [query for query in queries if "MetricStat" in query]
    reasons = {
        dimension["Value"]
        for query in inputs
        for dimension in query["MetricStat"]["Metric"]["Dimensions"]
        if dimension["Name"] == contract.DIMENSION_REASON
    }
    assert reasons == set(contract.MISSED_REASONS)
    assert {query["MetricStat"]["Metric"]["MetricName"] for query in inputs} == {contract.METRIC_SLOT_MISSED}
    assert all(f"FILL({query['Id']}, 0)" in expression["Expression"] for query in inputs)


def test_threshold_alarms_use_the_configured_thresholds(alarms: dict[str, dict[str, Any]], config: JobConfig) -> None:
    scanned, duration = alarms["DataScannedHigh"], alarms["QueryDurationHigh"]
    assert (scanned["MetricName"], scanned["Statistic"], scanned["Threshold"]) == (
        contract.METRIC_DATA_SCANNED_BYTES,
        "Maximum",
        config.alarms.data_scanned_bytes,
    )
    assert (duration["MetricName"], duration["Statistic"], duration["Threshold"]) == (
        contract.METRIC_QUERY_DURATION_MS,
        "Maximum",
        config.alarms.query_duration_ms,
    )


def test_queue_and_lambda_alarms(
    alarms: dict[str, dict[str, Any]], resources: dict[str, Any], function_id: str
) -> None:
    queues = of_type(of_job(resources), "AWS::SQS::Queue")
    (failure_queue,) = [logical_id for logical_id, q in queues.items() if "RedrivePolicy" in q["Properties"]]
    (dead_letter,) = set(queues) - {failure_queue}
    for name, queue_id in (("FailedInvocationsQueued", failure_queue), ("FailureRecordsDeadLettered", dead_letter)):
        props = alarms[name]
        assert (props["Namespace"], props["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
        assert props["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    dropped = alarms["AsyncEventsDropped"]
    assert (dropped["Namespace"], dropped["MetricName"], dropped["Statistic"]) == (
        "AWS/Lambda",
        "AsyncEventsDropped",
        "Sum",
    )
    assert dropped["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function_id}}]


def test_no_email_subscription_unless_configured(template: Template) -> None:
    template.resource_count_is("AWS::SNS::Subscription", 0)


def test_email_subscription_from_the_stack_settings(sample_data_dir: Path, sample_jobs_dir: Path) -> None:
    context = load_context(REPO_ROOT / "cdk.json")
    context[STACK_KEY] = {**context[STACK_KEY], "alarm_email": "oncall@example.com"}
    _, stack = app.build_app(context=context, sample_data_dir=sample_data_dir, jobs_dir=sample_jobs_dir)
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::SNS::Topic", 1)  # one topic for every job's alarms
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"})


# --- the dashboard ----------------------------------------------------------------------------------


def test_dashboard_metrics_are_exactly_the_contract_metrics(resources: dict[str, Any], config: JobConfig) -> None:
    """Every metric the runtime emits (contract.ALL_METRICS) is on the dashboard, and nothing else of the
    job's namespace is (the runtime-side test proves emitted == ALL_METRICS)."""
    rows = metric_rows(dashboard_body(resources))
    graphed = {name for namespace, name, _ in rows if namespace == contract.METRICS_NAMESPACE}
    assert graphed == set(contract.ALL_METRICS)
    job_dimensions = {contract.DIMENSION_SERVICE: contract.SERVICE_NAME, contract.DIMENSION_JOB: config.job_name}
    for namespace, name, dimensions in rows:
        if namespace == contract.METRICS_NAMESPACE:
            extra = {key: value for key, value in dimensions.items() if key not in job_dimensions}
            assert {k: v for k, v in dimensions.items() if k in job_dimensions} == job_dimensions, name
            assert set(extra) <= {contract.DIMENSION_REASON}, name


def test_dashboard_shows_lease_contention_takeovers_query_time_and_bytes(resources: dict[str, Any]) -> None:
    body = dashboard_body(resources)
    titles = {widget["properties"].get("title", "") for widget in body["widgets"]}
    for fragment in ("lease contention, by reason", "Takeover", "QueryDurationMs", "DataScannedBytes"):
        assert any(fragment in title for title in titles), fragment
    lost = {
        dims[contract.DIMENSION_REASON]
        for namespace, name, dims in metric_rows(body)
        if name == contract.METRIC_LOST_RACE
    }
    assert lost == set(contract.LOSS_REASONS)


def test_dashboard_shows_the_age_of_the_last_success_with_the_alarm_threshold(
    resources: dict[str, Any], config: JobConfig
) -> None:
    body = dashboard_body(resources)
    (graph,) = [w for w in body["widgets"] if w["properties"].get("title") == "Age of the last successful run (s)"]
    assert graph["properties"]["annotations"]["horizontal"][0]["value"] == 2 * config.period.longest_s
    (single_value,) = [w for w in body["widgets"] if w["properties"].get("view") == "singleValue"]
    assert single_value["properties"]["metrics"][0][1] == contract.METRIC_LAST_SUCCESS_AGE_S
    (alarm_widget,) = [w for w in body["widgets"] if w["type"] == "alarm"]
    assert len(alarm_widget["properties"]["alarms"]) == 10


def test_dashboard_graphs_the_analytics_values_with_search_expressions(
    resources: dict[str, Any], config: JobConfig
) -> None:
    assert config.value_metrics is not None
    found = dict(expressions(dashboard_body(resources)))
    for column in config.value_metrics.columns:
        expected = (
            f"SEARCH('{{{contract.VALUES_NAMESPACE},{contract.DIMENSION_JOB},origin}} "
            f'MetricName="{column}" {contract.DIMENSION_JOB}="{config.job_name}"\', \'Maximum\', 1800)'
        )
        assert found[f"{column} by origin"] == expected
    assert (
        found["flights by origin"]
        == 'SEARCH(\'{ScheduledAthenaRefresh/Values,job,origin} MetricName="flights" job="flights-dashboard"\', '
        "'Maximum', 1800)"
    )


def test_value_search_expression_without_dimensions() -> None:
    import aws_cdk as cdk

    assert value_search_expression("j", "rows", (), statistic="Sum", period=cdk.Duration.hours(1)) == (
        "SEARCH('{ScheduledAthenaRefresh/Values,job} MetricName=\"rows\" job=\"j\"', 'Sum', 3600)"
    )


def test_function_gets_the_value_metric_settings(catalog: dict[str, Any]) -> None:
    settings = catalog["flights-dashboard"]["settings"]  # the job's settings travel in the bundled catalog
    assert settings[contract.ENV_VALUE_METRIC_COLUMNS] == "flights,delayed_departures,avg_dep_delay_min"
    assert settings[contract.ENV_VALUE_METRIC_DIMENSIONS] == "origin"
    assert settings[contract.ENV_VALUE_METRIC_MAX_SERIES] == "10"


def test_without_value_metrics_the_variables_are_empty_and_no_values_are_graphed(
    sample_data_dir: Path, tmp_path: Path
) -> None:
    jobs_dir = stage_jobs(tmp_path)
    job_file = jobs_dir / "flights-dashboard" / "job.toml"
    text = job_file.read_text(encoding="utf-8")
    job_file.write_text(text[: text.index("[value_metrics]")], encoding="utf-8")
    _, stack = app.build_app(sample_data_dir=sample_data_dir, jobs_dir=jobs_dir)
    resources = Template.from_stack(stack).to_json()["Resources"]
    catalog = json.loads((stack.runtime_asset_dir / CATALOG_FILE).read_text(encoding="utf-8"))["jobs"]
    settings = catalog["flights-dashboard"]["settings"]
    assert [settings[name] for name in contract.JOB_SETTING_ENV_VARS if name.startswith("VALUE_METRIC_")] == [
        "",
        "",
        "",
    ]
    assert not any("SEARCH(" in expression for _, expression in expressions(dashboard_body(resources)))
    assert any("SEARCH(" in e for _, e in expressions(dashboard_body(resources, "carrier-on-time")))  # untouched


def test_dashboard_has_a_logs_insights_table_of_the_latest_runs(
    resources: dict[str, Any], function_props: dict[str, Any]
) -> None:
    body = dashboard_body(resources)
    (log_widget,) = [widget for widget in body["widgets"] if widget["type"] == "log"]
    query = log_widget["properties"]["query"]
    assert f"SOURCE '<Ref {function_props['LoggingConfig']['LogGroup']['Ref']}>'" in query
    for field in ("job", "slot", "outcome", "reason", "fencing_token"):
        assert field in query
    assert "filter ispresent(outcome)" in query and "sort @timestamp desc" in query
    assert log_widget["properties"]["view"] == "table"


def test_dashboard_shows_the_failure_queues_and_dropped_events(resources: dict[str, Any]) -> None:
    rows = metric_rows(dashboard_body(resources))
    assert (
        sum(1 for namespace, name, _ in rows if (namespace, name) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible"))
        == 2
    )
    assert any((namespace, name) == ("AWS/Lambda", "AsyncEventsDropped") for namespace, name, _ in rows)
