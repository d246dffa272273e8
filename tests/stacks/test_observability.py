"""Alarms, the alarm topic and the one dashboard of the deployment (issue 23's layout).

Per job, in its job stack: one alarm, ``NoRecentSuccess``. In the shared stack: the five deployment-wide alarms
(:class:`stacks.constructs.alarms.DeploymentAlarms`) and one dashboard (:class:`DeploymentDashboard`): an overview
of every job, then one job's graphs picked with the ``job`` dashboard variable, its size independent of the number
of jobs. Alarms and widgets are read from the merged template (``template``/``resources``: every stack, cross-stack
references read as local ones).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Capture, Template

import app
from athena_refresh import contract
from stacks import REPO_ROOT
from stacks.constructs.alarms import MAX_ALARM_PERIOD_S, OBSERVABILITY_DOC, STALE_AFTER_PERIODS
from stacks.constructs.dashboard import (
    CAPACITY_METRICS,
    CAPACITY_TITLE,
    DEPLOYMENT_COUNTS,
    JOB_GRAPHS,
    JOB_PLACEHOLDER,
    JOB_RUNS_QUERY,
    JOB_VARIABLE_ID,
    LATEST_RUNS_QUERY,
    LOG_QUERIES_PER_VIEW,
)
from stacks.constructs.job_metrics import value_search_expression
from stacks.deployment import KEEP_PER_JOB_METRICS_LINE
from stacks.jobs import JobDefinition, load_jobs
from stacks.runtime_asset import catalog_queries
from stacks.stack_settings import STACK_KEY, load_context
from tests.sample_jobs import CARRIERS, FLIGHTS, stack_settings, stage_jobs
from tests.stacks import deployment_view
from tests.stacks.deployment_view import STACK_OF
from tests.stacks.helpers import HANDLER, dashboard_body, expressions, job_prefix, metric_rows, of_job, of_type

SHARED_STACK = app.STACK_NAME
DEPLOYMENT_ALARMS = (
    "FailedInvocationsQueued",
    "FailureRecordsDeadLettered",
    "StaleWriteRejected",
    "CorruptLockItem",
    "ThresholdExceeded",
)
#: The freshness watchdog's two alarms (shared stack, construct ``Watchdog``; pinned in test_watchdog.py).
WATCHDOG_ALARMS = ("JobsLateOrFailing", "WatchdogSilent")
SERVICE_ONLY = [{"Name": contract.DIMENSION_SERVICE, "Value": contract.SERVICE_NAME}]
JOB_HEADING = JOB_PLACEHOLDER  # the per-job section's heading names what the job variable replaces
COPIES = 10  # job folders added next to the two samples for the "size does not grow" deployment
ALARM_EMAIL = "oncall@example.com"


def _name(logical_id: str, prefix: str) -> str:
    """The construct id of an alarm: its logical id without ``prefix`` and CDK's 8-character hash."""
    assert logical_id.startswith(prefix) and len(logical_id) > len(prefix) + 8, (logical_id, prefix)
    return logical_id[len(prefix) : -8]


def _dimensions(job: str) -> list[dict[str, str]]:
    """An alarm's dimensions of a job metric, as CDK sorts them."""
    return [{"Name": contract.DIMENSION_JOB, "Value": job}, *SERVICE_ONLY]


# The alarm tests pin the alarm of a job that opts in (issue 35: per_job_metrics, off by default); this module's
# deployment is the two sample jobs with `per_job_metrics = true` in jobs/defaults.toml (the one line that keeps
# them), and the session's sample deployment (no opt-in) shows that none is made without it.
@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, sample_data_dir: Path) -> Any:
    jobs_dir = stage_jobs(tmp_path_factory.mktemp("opted-in"))
    (jobs_dir / "defaults.toml").write_text(f"{KEEP_PER_JOB_METRICS_LINE}\n", encoding="utf-8")
    _, built = app.build_app(sample_data_dir=sample_data_dir, jobs_dir=jobs_dir)
    assert all(job.config.per_job_metrics for job in built.definitions)
    return built


@pytest.fixture(scope="module")
def stack(deployment: Any) -> Any:
    return deployment.shared


@pytest.fixture(scope="module")
def template(deployment: Any) -> Template:
    return Template.from_json(deployment_view.merged_template(deployment_view.stack_templates(deployment)))


@pytest.fixture(scope="module")
def shared_template(deployment: Any) -> Template:
    return Template.from_stack(deployment.shared)


@pytest.fixture(scope="module")
def resources(template: Template) -> dict[str, Any]:
    return template.to_json()["Resources"]


@pytest.fixture(scope="module")
def catalog(deployment: Any) -> dict[str, Any]:
    """Each job's catalog entry as its function's asset holds it (this module's deployment)."""
    from athena_refresh.catalog import CATALOG_FILE

    return {
        name: json.loads((asset_dir / CATALOG_FILE).read_text(encoding="utf-8"))["jobs"][name]
        for job_stack in deployment.job_stacks.values()
        for name, asset_dir in job_stack.asset_dirs.items()
    }


@pytest.fixture(scope="module")
def all_alarms(resources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every alarm of the deployment (every stack), by logical id."""
    return of_type(resources, "AWS::CloudWatch::Alarm")


@pytest.fixture(scope="module")
def deployment_alarms(all_alarms: dict[str, dict[str, Any]], template: Template) -> dict[str, dict[str, Any]]:
    """The shared stack's alarms' properties by construct id (``Alarms<name>...``)."""
    stack_of = template.to_json()[STACK_OF]
    return {
        _name(logical_id, "Alarms"): alarm["Properties"]
        for logical_id, alarm in all_alarms.items()
        if stack_of[logical_id] == SHARED_STACK and not logical_id.startswith("Watchdog")
    }


@pytest.fixture(scope="module")
def job_alarms(
    all_alarms: dict[str, dict[str, Any]], jobs: tuple[JobDefinition, ...]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Each job's alarms' properties by construct id (``Job<job>Schedule<name>...``)."""
    return {
        job.job_name: {
            _name(logical_id, job_prefix(job.job_name) + "Schedule"): alarm["Properties"]
            for logical_id, alarm in of_job(all_alarms, job.job_name).items()
        }
        for job in jobs
    }


@pytest.fixture(scope="module")
def topic_id(resources: dict[str, Any], template: Template) -> str:
    (found,) = of_type(resources, "AWS::SNS::Topic")
    assert template.to_json()[STACK_OF][found] == SHARED_STACK
    return found


@pytest.fixture(scope="module")
def queue_ids(stack: Any) -> tuple[str, str]:
    """(on-failure queue, its dead-letter queue) logical ids: the deployment's one pair, in the shared stack."""
    failures = stack.shared.failures
    return tuple(
        stack.resolve(stack.get_logical_id(q.node.default_child)) for q in (failures.queue, failures.dead_letter_queue)
    )


@pytest.fixture(scope="module")
def job_logs_id(resources: dict[str, Any], template: Template, jobs: tuple[JobDefinition, ...]) -> str:
    """The one log group every job function writes to (``JobLogs`` in the shared stack)."""
    functions = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": HANDLER}})
    assert len(functions) == len(jobs)
    (log_group,) = {f["Properties"]["LoggingConfig"]["LogGroup"]["Ref"] for f in functions.values()}
    assert resources[log_group]["Type"] == "AWS::Logs::LogGroup"
    assert log_group.startswith("JobLogs")
    assert template.to_json()[STACK_OF][log_group] == SHARED_STACK
    return str(log_group)


@pytest.fixture(scope="module")
def body(resources: dict[str, Any]) -> dict[str, Any]:
    """The whole dashboard body."""
    return dashboard_body(resources, None)


# --- alarms ------------------------------------------------------------------------------------------


def test_every_alarm_of_the_deployment_exists_and_notifies_the_topic_on_alarm_and_ok(
    all_alarms: dict[str, dict[str, Any]],
    deployment_alarms: dict[str, dict[str, Any]],
    job_alarms: dict[str, dict[str, dict[str, Any]]],
    jobs: tuple[JobDefinition, ...],
    topic_id: str,
) -> None:
    assert set(deployment_alarms) == set(DEPLOYMENT_ALARMS)
    assert {job: set(alarms) for job, alarms in job_alarms.items()} == {
        job.job_name: {"NoRecentSuccess"} for job in jobs
    }
    watchdog = {_name(logical_id, "Watchdog") for logical_id in all_alarms if logical_id.startswith("Watchdog")}
    assert watchdog == set(WATCHDOG_ALARMS)
    # Nothing else: the deployment's alarms are these 5, the watchdog's 2 + one per job, whatever the number of jobs.
    assert len(all_alarms) == len(DEPLOYMENT_ALARMS) + len(WATCHDOG_ALARMS) + len(jobs)
    for logical_id, alarm in all_alarms.items():
        props = alarm["Properties"]
        assert props["AlarmActions"] == [{"Ref": topic_id}], logical_id
        assert props["OKActions"] == [{"Ref": topic_id}], logical_id
        assert props["EvaluationPeriods"] == 1, logical_id
        assert props["AlarmDescription"], logical_id


@pytest.mark.parametrize(
    ("job_name", "longest_gap_s", "missing_data"),
    [
        (FLIGHTS, 1800, "breaching"),  # every 30 minutes: no data means nothing ran
        (CARRIERS, 90_000, "missing"),  # daily in New York: one 25-hour gap a year, beyond the one-day period
    ],
)
def test_each_jobs_one_alarm_fires_after_two_periods_without_success(
    job_alarms: dict[str, dict[str, dict[str, Any]]],
    jobs: tuple[JobDefinition, ...],
    job_name: str,
    longest_gap_s: int,
    missing_data: str,
) -> None:
    (config,) = [job.config for job in jobs if job.job_name == job_name]
    assert config.period.longest_s == longest_gap_s
    props = job_alarms[job_name]["NoRecentSuccess"]
    assert (props["Namespace"], props["MetricName"], props["Statistic"]) == (
        contract.METRICS_NAMESPACE,
        contract.METRIC_LAST_SUCCESS_AGE_S,
        "Maximum",
    )
    assert props["Dimensions"] == _dimensions(job_name)
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    assert props["Threshold"] == STALE_AFTER_PERIODS * longest_gap_s
    assert props["Period"] == min(longest_gap_s, MAX_ALARM_PERIOD_S)  # one slot, capped at a day
    assert props["TreatMissingData"] == missing_data
    assert job_name in props["AlarmDescription"]


def test_each_jobs_alarm_is_in_its_job_stack(
    deployment: Any, template: Template, jobs: tuple[JobDefinition, ...]
) -> None:
    stack_of = template.to_json()[STACK_OF]
    for job in jobs:
        (logical_id,) = of_type(of_job(template.to_json()["Resources"], job.job_name), "AWS::CloudWatch::Alarm")
        assert stack_of[logical_id] == deployment.stack_of(job.job_name).stack_name


@pytest.mark.parametrize("name", ["FailedInvocationsQueued", "FailureRecordsDeadLettered"])
def test_queue_alarms_watch_the_deployments_one_failure_queue_and_its_dlq(
    deployment_alarms: dict[str, dict[str, Any]], queue_ids: tuple[str, str], name: str
) -> None:
    queue_id = dict(zip(("FailedInvocationsQueued", "FailureRecordsDeadLettered"), queue_ids, strict=True))[name]
    props = deployment_alarms[name]
    assert (props["Namespace"], props["MetricName"], props["Statistic"], props["Period"]) == (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        "Maximum",
        300,
    )
    assert props["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    assert (props["ComparisonOperator"], props["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1)
    assert props["TreatMissingData"] == "notBreaching"


def test_every_job_function_fails_over_to_the_one_queue(resources: dict[str, Any], queue_ids: tuple[str, str]) -> None:
    assert len(of_type(resources, "AWS::SQS::Queue")) == 2  # no queue per job
    destinations = {
        json.dumps(config["Properties"]["DestinationConfig"]["OnFailure"]["Destination"])
        for config in of_type(resources, "AWS::Lambda::EventInvokeConfig").values()
    }
    assert destinations == {json.dumps({"Fn::GetAtt": [queue_ids[0], "Arn"]})}


@pytest.mark.parametrize(
    ("name", "metric_name", "query"),
    [
        ("StaleWriteRejected", contract.METRIC_STALE_WRITE_REJECTED, "Stale writes and corrupt items by job"),
        ("CorruptLockItem", contract.METRIC_CORRUPT_LOCK_ITEM, "Stale writes and corrupt items by job"),
        ("ThresholdExceeded", contract.METRIC_THRESHOLD_EXCEEDED, "Which job exceeded a threshold"),
    ],
)
def test_deployment_count_alarms_fire_on_any_occurrence_of_any_job(
    deployment_alarms: dict[str, dict[str, Any]], name: str, metric_name: str, query: str
) -> None:
    props = deployment_alarms[name]
    assert (props["Namespace"], props["MetricName"], props["Statistic"], props["Period"]) == (
        contract.METRICS_NAMESPACE,
        metric_name,
        "Sum",
        300,
    )
    assert props["Dimensions"] == SERVICE_ONLY  # no job dimension: one series for every job
    assert (props["ComparisonOperator"], props["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1)
    assert props["TreatMissingData"] == "notBreaching"
    # The log line names the job: the description sends the operator to the query that finds it.
    assert f"the Logs Insights query '{query}' in {OBSERVABILITY_DOC}" in props["AlarmDescription"]


def test_the_count_alarms_are_the_dashboards_deployment_counts(deployment_alarms: dict[str, dict[str, Any]]) -> None:
    counted = {props["MetricName"] for props in deployment_alarms.values() if props["Namespace"] != "AWS/SQS"}
    assert counted == set(DEPLOYMENT_COUNTS)


def test_each_alarm_description_names_a_query_the_observability_doc_has(
    deployment_alarms: dict[str, dict[str, Any]],
) -> None:
    doc = (REPO_ROOT / OBSERVABILITY_DOC).read_text(encoding="utf-8")
    named = {
        match
        for props in deployment_alarms.values()
        for match in re.findall(r"the Logs Insights query '([^']+)'", props["AlarmDescription"])
    }
    assert named == {"Stale writes and corrupt items by job", "Which job exceeded a threshold"}
    headings = set(re.findall(r"^### (.+)$", doc, re.MULTILINE))
    for query in named:
        assert query in headings, f"{OBSERVABILITY_DOC} has no query headed {query!r}"


def test_no_email_subscription_unless_configured(template: Template) -> None:
    template.resource_count_is("AWS::SNS::Topic", 1)  # one topic for every alarm of the deployment
    template.resource_count_is("AWS::SNS::Subscription", 0)


# --- the dashboard: one per deployment --------------------------------------------------------------


def test_one_dashboard_in_the_shared_stack(template: Template, shared_template: Template) -> None:
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)  # no job stack has one
    shared_template.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    (dashboard_id,) = shared_template.find_resources("AWS::CloudWatch::Dashboard")
    shared_template.has_output("DashboardName", {"Value": {"Ref": dashboard_id}})


def test_the_job_variable_replaces_the_placeholder_with_the_typed_job_and_defaults_to_the_first_job(
    body: dict[str, Any], jobs: tuple[JobDefinition, ...]
) -> None:
    """A pattern variable (free text): it works without per-job metrics (a metric search would list only the jobs
    that opt in) and names no job but the default in the template."""
    first = min(job.job_name for job in jobs)
    assert first == jobs[0].job_name == CARRIERS
    assert body["variables"] == [
        {
            "type": "pattern",
            "pattern": JOB_PLACEHOLDER,
            "inputType": "input",
            "id": JOB_VARIABLE_ID,
            "label": "Job",
            "visible": True,
            "defaultValue": first,
        }
    ]
    text = json.dumps({**body, "variables": []})
    assert first not in text  # every per-job widget names the placeholder, replaced at view time
    assert text.count(JOB_PLACEHOLDER) == 2 + sum(len(stats) for _, stats in JOB_GRAPHS.values())


def test_without_opt_in_no_job_has_an_alarm_of_its_own(twelve_jobs: Any) -> None:
    """Twelve jobs, none opting in (issue 35): no job stack holds an alarm; the shared stack's deployment-wide
    alarms stay."""
    alarms = {
        name: [r for r in t.get("Resources", {}).values() if r["Type"] == "AWS::CloudWatch::Alarm"]
        for name, t in deployment_view.stack_templates(twelve_jobs).items()
    }
    assert [name for name, found in alarms.items() if found] == [SHARED_STACK]
    assert len(alarms[SHARED_STACK]) == len(DEPLOYMENT_ALARMS) + len(WATCHDOG_ALARMS)


def test_dashboard_layout_overview_then_one_job_section(body: dict[str, Any]) -> None:
    layout = [
        (w["type"], w["properties"].get("title") or w["properties"].get("markdown", "").split("\n")[0])
        for w in body["widgets"]
    ]
    assert layout == [
        ("text", "# Scheduled Athena refresh: 2 jobs"),
        ("custom", "Every job: last slot, freshness, last success, lease, paused, latest result, how to fetch"),
        ("alarm", "Deployment alarms"),
        ("metric", "Failed slot invocations waiting (on-failure queue, DLQ)"),
        ("metric", "Stale writes, corrupt lock items, thresholds exceeded (every job)"),
        ("metric", CAPACITY_TITLE),
        ("metric", "Job functions: errors, throttles, dropped async events (sum over every job)"),
        ("log", "Latest runs (every job)"),
        ("text", f"# Job `{JOB_HEADING}`"),
        ("log", "Its runs: outcome, reason, bytes scanned, duration, estimated cost (log lines)"),
        *(("metric", f"{title} (per_job_metrics = true only)") for title, _ in JOB_GRAPHS.values()),
    ]
    (custom,) = [w for w in body["widgets"] if w["type"] == "custom"]
    assert custom["properties"]["params"] == {"view": "overview"}  # test_read_api checks the rest of it


def test_per_job_graphs_draw_exactly_the_job_metrics_of_the_default_job(
    resources: dict[str, Any], jobs: tuple[JobDefinition, ...]
) -> None:
    section = dashboard_body(resources, JOB_HEADING)
    graphs = [w for w in section["widgets"] if w["type"] == "metric"]
    assert [w["properties"]["title"] for w in graphs] == [
        f"{title} (per_job_metrics = true only)" for title, _ in JOB_GRAPHS.values()
    ]
    default_job = {contract.DIMENSION_SERVICE: contract.SERVICE_NAME, contract.DIMENSION_JOB: JOB_PLACEHOLDER}
    for (metric_name, (_, statistics)), graph in zip(JOB_GRAPHS.items(), graphs, strict=True):
        lines = graph["properties"]["metrics"]
        # One line per statistic; CloudWatch's default statistic (Average) is left out of the JSON.
        assert [line[-1].get("stat", "Average") for line in lines] == list(statistics), metric_name
        rows = metric_rows({"widgets": [graph]})
        assert rows == [(contract.METRICS_NAMESPACE, metric_name, default_job)] * len(statistics)


def test_the_dashboards_metrics_are_the_job_metrics_and_the_deployment_counts(body: dict[str, Any]) -> None:
    """Of the runtime's namespace the dashboard draws the per-job metrics (job dimension: the variable's default)
    and the deployment-wide metrics (service only: the counts and the capacity semaphore's), nothing else; no
    value-metric SEARCH graph is left."""
    rows = [(name, dims) for namespace, name, dims in metric_rows(body) if namespace == contract.METRICS_NAMESPACE]
    assert set(DEPLOYMENT_COUNTS) | set(CAPACITY_METRICS) == set(contract.DEPLOYMENT_METRICS)  # each one drawn
    assert {name for name, _ in rows} == set(JOB_GRAPHS) | set(contract.DEPLOYMENT_METRICS)
    for name, dims in rows:
        expected = {contract.DIMENSION_SERVICE} | ({contract.DIMENSION_JOB} if name in JOB_GRAPHS else set())
        assert set(dims) == expected, (name, dims)
    assert [
        name
        for name, dims in rows
        if name in DEPLOYMENT_COUNTS and dims == {contract.DIMENSION_SERVICE: contract.SERVICE_NAME}
    ] == list(DEPLOYMENT_COUNTS)
    assert not any(contract.VALUES_NAMESPACE in expression for _, expression in expressions(body))


def test_dashboard_shows_the_deployment_alarms_and_the_failure_queues(
    body: dict[str, Any], resources: dict[str, Any], queue_ids: tuple[str, str]
) -> None:
    (status,) = [w for w in body["widgets"] if w["type"] == "alarm"]
    alarm_ids = [re.fullmatch(r"<GetAtt (\w+)\.Arn>", arn).group(1) for arn in status["properties"]["alarms"]]  # type: ignore[union-attr]
    # the shared stack's alarms, then the freshness watchdog's (issue 35): every deployment-wide alarm
    shown = [_name(i, "Watchdog" if i.startswith("Watchdog") else "Alarms") for i in alarm_ids]
    assert shown == [*DEPLOYMENT_ALARMS, *WATCHDOG_ALARMS]
    assert all(resources[logical_id]["Type"] == "AWS::CloudWatch::Alarm" for logical_id in alarm_ids)
    queues = [
        dims
        for namespace, name, dims in metric_rows(body)
        if (namespace, name) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    ]
    assert queues == [{"QueueName": f"<GetAtt {queue_id}.QueueName>"} for queue_id in queue_ids]


def test_dashboard_sums_the_job_functions_lambda_health_with_a_search_on_the_job_stacks(
    body: dict[str, Any],
) -> None:
    (graph,) = [w for w in body["widgets"] if w["properties"].get("title", "").startswith("Job functions:")]
    assert expressions({"widgets": [graph]}) == [
        (
            graph["properties"]["title"],
            f"SUM(SEARCH('{{AWS/Lambda,FunctionName}} MetricName=\"{metric}\" {SHARED_STACK}-Jobs-', 'Sum', 300))",
        )
        for metric in ("Errors", "Throttles", "AsyncEventsDropped")
    ]
    assert not [row for row in metric_rows(body) if row[0] == "AWS/Lambda"]  # no line per function


def test_the_log_widgets_query_the_job_log_group_only(body: dict[str, Any], job_logs_id: str) -> None:
    latest, runs = [widget for widget in body["widgets"] if widget["type"] == "log"]
    assert len([latest, runs]) == LOG_QUERIES_PER_VIEW == contract.DASHBOARD_LOG_QUERIES_PER_VIEW  # make cost's count
    # the picked job's runs: its log lines (every job logs them, opted in or not)
    assert runs["properties"]["query"] == f"SOURCE '<Ref {job_logs_id}>' | " + "\n| ".join(JOB_RUNS_QUERY)
    assert f'job = "{JOB_PLACEHOLDER}"' in JOB_RUNS_QUERY[1]
    for field in ("outcome", "reason", "data_scanned_bytes", "query_duration_ms", "estimated_cost_usd"):
        assert field in JOB_RUNS_QUERY[0]
    props = latest["properties"]
    assert props["query"] == f"SOURCE '<Ref {job_logs_id}>' | " + "\n| ".join(LATEST_RUNS_QUERY)
    assert props["query"].count("SOURCE ") == 1
    for field in ("job", "slot", "outcome", "reason", "fencing_token", "query_execution_id"):
        assert field in LATEST_RUNS_QUERY[0]
    assert props["view"] == "table"
    assert body["start"] == "-PT3H"  # what one view of the widget scans


# --- the dashboard's size does not grow with the number of jobs ---------------------------------------


@pytest.fixture(scope="module")
def twelve_jobs(tmp_path_factory: pytest.TempPathFactory, sample_data_dir: Path) -> Any:
    """A deployment of 12 jobs (the two samples + 10 copies of the flights job), with an alarm email: the one
    extra synthesis of this module."""
    jobs_dir = stage_jobs(tmp_path_factory.mktemp("repo"))
    for index in range(COPIES):
        shutil.copytree(jobs_dir / FLIGHTS, jobs_dir / f"copy-{index:02d}")
    context = load_context(REPO_ROOT / "cdk.json")
    context[STACK_KEY] = {**context[STACK_KEY], "alarm_email": ALARM_EMAIL}
    _, deployment = app.build_app(context=context, sample_data_dir=sample_data_dir, jobs_dir=jobs_dir)
    assert len(deployment.definitions) == 2 + COPIES
    return deployment


def test_the_dashboard_is_the_same_for_2_and_12_jobs_but_for_the_overview_height(
    twelve_jobs: Any, body: dict[str, Any]
) -> None:
    shared = Template.from_stack(twelve_jobs.shared)
    shared.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    many = dashboard_body(shared.to_json()["Resources"], None)
    assert len(many["widgets"]) == len(body["widgets"]) == 10 + len(JOB_GRAPHS) == 13
    overview = [i for i, w in enumerate(body["widgets"]) if w["type"] == "custom"]
    assert [(w["height"]) for w in many["widgets"] if w["type"] == "custom"] == [3 + 12]  # about one row per job
    assert [(w["height"]) for w in body["widgets"] if w["type"] == "custom"] == [6]  # at least 6

    def normalized(dashboard: dict[str, Any]) -> str:
        widgets = [
            {**w, "height": 0} if i in overview else w for i, w in enumerate(dashboard["widgets"])
        ]  # the widgets below the overview move down with it
        text = json.dumps({**dashboard, "widgets": [{k: v for k, v in w.items() if k != "y"} for w in widgets]})
        return re.sub(r"refresh: \d+ jobs", "refresh: N jobs", text)

    assert normalized(many) == normalized(body)
    text = json.dumps(many)
    for job in twelve_jobs.definitions[1:]:  # only the default job (carrier-on-time) is named
        assert job.job_name not in text, job.job_name


def test_twelve_jobs_have_no_alarm_of_their_own_without_opt_in_and_five_deployment_alarms(twelve_jobs: Any) -> None:
    per_job = {name: set(job.alarms) for stack in twelve_jobs.job_stacks.values() for name, job in stack.jobs.items()}
    assert per_job == {job.job_name: set() for job in twelve_jobs.definitions}
    assert list(twelve_jobs.shared.alarms.alarms) == list(DEPLOYMENT_ALARMS)


def test_email_subscription_from_the_stack_settings(twelve_jobs: Any) -> None:
    shared = Template.from_stack(twelve_jobs.shared)
    shared.resource_count_is("AWS::SNS::Topic", 1)  # one topic for every alarm of the deployment
    topic = Capture()
    shared.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": ALARM_EMAIL, "TopicArn": {"Ref": topic}}
    )
    shared.resource_count_is("AWS::SNS::Subscription", 1)
    assert topic.as_string().startswith("AlarmTopic")


# --- value metrics: the function's catalog settings (no graph of them on the dashboard) -----------------


def test_value_search_expression_without_dimensions() -> None:
    import aws_cdk as cdk

    assert value_search_expression("j", "rows", (), statistic="Sum", period=cdk.Duration.hours(1)) == (
        "SEARCH('{ScheduledAthenaRefresh/Values,job} MetricName=\"rows\" job=\"j\"', 'Sum', 3600)"
    )


def test_function_gets_the_value_metric_settings(catalog: dict[str, Any]) -> None:
    values = catalog[FLIGHTS]["spec"]["value_metrics"]  # the job's spec travels in its own asset's catalog
    assert values["columns"] == ["flights", "delayed_departures", "avg_dep_delay_min"]
    assert values["dimensions"] == ["origin"]
    assert values["max_series"] == 10


def test_without_value_metrics_the_settings_are_empty(tmp_path: Path) -> None:
    jobs_dir = stage_jobs(tmp_path)
    job_file = jobs_dir / FLIGHTS / "job.toml"
    text = job_file.read_text(encoding="utf-8")
    job_file.write_text(text[: text.index("[value_metrics]")], encoding="utf-8")
    queries = catalog_queries(load_jobs(jobs_dir, stack_settings(), root=tmp_path))
    flights, carriers = queries[FLIGHTS].spec, queries[CARRIERS].spec
    assert flights is not None and flights.value_metrics is None
    assert carriers is not None and carriers.value_metrics is not None  # untouched


def test_the_dashboard_names_no_job_but_the_default(body: dict[str, Any], jobs: tuple[JobDefinition, ...]) -> None:
    text = json.dumps(body)
    assert [job.job_name for job in jobs if job.job_name in text] == [jobs[0].job_name]
