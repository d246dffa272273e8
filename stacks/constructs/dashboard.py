"""The deployment's one CloudWatch dashboard: an overview of every job, then one job's graphs, chosen with a
dashboard variable.

Its size does not grow with the number of jobs (CloudWatch allows at most 500 widgets per dashboard: "Dashboard
Body Structure and Syntax", https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html):

- **Overview**: the read side's custom widget called with ``{"view": "overview"}`` lists every job (status of the
  last slot, its freshness as the read API's ``latest`` says it, age of the last success, lease holder, paused, the
  latest result and its estimated cost, and how to fetch it with SigV4); the deployment-wide alarms (the shared
  stack's and the freshness watchdog's); the on-failure queue; the deployment-wide counts
  (:data:`DEPLOYMENT_COUNTS`); the Athena capacity budget (:data:`CAPACITY_METRICS`: permits in use against the
  configured permits, the wait for a permit); the job functions' Lambda errors and throttles, summed with a
  ``SEARCH`` on the job stacks' name prefix; the latest runs of every job (Logs Insights over the one job log group).
- **Job ``${job}``**: the job's runs from its log lines (Logs Insights: every job logs one line per invocation
  with its outcome, reason, bytes scanned, query duration and estimated cost, opted in or not), then the per-job
  metrics (``contract.JOB_METRICS``: age of the last success, bytes scanned, query duration), drawn once, which
  only a job with ``per_job_metrics = true`` sends (issue 35). A pattern variable (CDK's
  :class:`DashboardVariable`, free text) replaces :data:`JOB_PLACEHOLDER` in every one of them with the job typed
  in the dashboard's **Job** box (no list of 1,000 names in the template; a metric search would list only the
  jobs that opted in). https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch_dashboard_variables.html

Logs Insights is billed per GB scanned at every view: the "Latest runs" and the job's "runs" widgets each read the
one job log group over the dashboard's time range (default 3 hours): :data:`LOG_QUERIES_PER_VIEW` queries;
``make cost`` counts them at a stated number of views.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from athena_refresh import contract
from stacks.constructs.job_metrics import deployment_metric, job_metric

FULL_WIDTH = 24
METRIC_PERIOD = cdk.Duration.minutes(5)
DEFAULT_INTERVAL = cdk.Duration.hours(3)  # bounds what the Logs Insights widget scans per view
OVERVIEW_PARAMS = {"view": "overview"}
#: The job metrics drawn per job, with their statistics.
JOB_GRAPHS: dict[str, tuple[str, Sequence[str]]] = {
    contract.METRIC_LAST_SUCCESS_AGE_S: ("LastSuccessAgeS: seconds since the last successful run", ("Maximum",)),
    contract.METRIC_DATA_SCANNED_BYTES: ("DataScannedBytes: Athena bytes scanned (billed)", ("Sum", "Maximum")),
    contract.METRIC_QUERY_DURATION_MS: ("QueryDurationMs: Athena total execution time", ("Average", "Maximum")),
}
#: Deployment-wide counts (dimension service only): rare events whose log line names the job.
DEPLOYMENT_COUNTS = (
    contract.METRIC_STALE_WRITE_REJECTED,
    contract.METRIC_CORRUPT_LOCK_ITEM,
    contract.METRIC_THRESHOLD_EXCEEDED,
)
#: The capacity semaphore's deployment-wide metrics (dimension service only), with their statistics: permits held
#: just after each take (against the configured permits), and how long slots waited for theirs.
CAPACITY_METRICS: dict[str, tuple[str, ...]] = {
    contract.METRIC_PERMITS_IN_USE: ("Maximum",),
    contract.METRIC_PERMIT_WAIT_MS: ("p50", "p95"),
}
CAPACITY_TITLE = "Athena capacity (every job): permits in use vs the budget, wait for a permit"
# Logs Insights over the job functions' JSON logs: one "slot <iso>: <status>" line per invocation with the keys
# job, slot, outcome, reason, fencing_token (and query_execution_id when known).
LATEST_RUNS_QUERY = (
    "fields @timestamp, job, slot, outcome, reason, fencing_token, query_execution_id",
    "filter ispresent(outcome)",
    "sort @timestamp desc",
    "limit 100",
)
JOB_VARIABLE_ID = "job"
#: What the job variable replaces in the dashboard's body (a pattern no other text of the body contains).
JOB_PLACEHOLDER = "JOB_PICKED_IN_THE_JOB_BOX"
#: One job's runs from its log lines, the job picked with the variable.
JOB_RUNS_QUERY = (
    "fields @timestamp, slot, outcome, reason, data_scanned_bytes, query_duration_ms, estimated_cost_usd",
    f'filter job = "{JOB_PLACEHOLDER}" and ispresent(outcome)',
    "sort @timestamp desc",
    "limit 100",
)
#: Logs Insights queries each view of the dashboard runs (the "Latest runs" widget and the job's runs): what
#: ``make cost`` multiplies the bytes scanned per query by (the contract's number; a test counts the widgets).
LOG_QUERIES_PER_VIEW = contract.DASHBOARD_LOG_QUERIES_PER_VIEW


def overview_height(job_count: int) -> int:
    """Grid rows for the overview table: a heading plus about one row per job, at most CloudWatch's 1,000."""
    return max(6, min(3 + job_count, 1000))


class DeploymentDashboard(Construct):
    """``dashboard``: the deployment's dashboard; ``job_variable`` its ``job`` variable.

    :param job_names: every job of the deployment (the overview's height, the variable's default).
    :param widget_function: the read side's widget function (``results_api.handler.widget_handler``).
    :param alarms: the deployment-wide alarms (status widget).
    :param failures: the deployment's on-failure queue and its dead-letter queue.
    :param log_group: the job functions' log group.
    :param function_name_prefix: the job functions' generated names start with it (the job stacks' prefix).
    :param capacity_permits: the deployment's capacity budget (``context.stack.capacity.permits``; 0: off), drawn as
        a line on the permits in use.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job_names: Sequence[str],
        widget_function: lambda_.IFunction,
        alarms: Sequence[cloudwatch.IAlarm],
        failure_queue: sqs.IQueue,
        failure_dead_letter_queue: sqs.IQueue,
        log_group: logs.ILogGroup,
        function_name_prefix: str,
        capacity_permits: int,
        period: cdk.Duration = METRIC_PERIOD,
    ) -> None:
        super().__init__(scope, construct_id)
        default_job = min(job_names)
        self.job_variable = cloudwatch.DashboardVariable(
            id=JOB_VARIABLE_ID,
            type=cloudwatch.VariableType.PATTERN,
            label="Job",
            input_type=cloudwatch.VariableInputType.INPUT,
            value=JOB_PLACEHOLDER,
            default_value=cloudwatch.DefaultValue.value(default_job),
            visible=True,
        )
        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", default_interval=DEFAULT_INTERVAL, variables=[self.job_variable]
        )
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=(
                    f"# Scheduled Athena refresh: {len(job_names)} jobs\n"
                    "Results need SigV4: `python -m tools.results latest <job>` or a signed `GET` of the read API. "
                    "What happened to job J at slot S: `python -m tools.ops history J` (docs/observability.md)."
                ),
                width=FULL_WIDTH,
                height=2,
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.CustomWidget(
                function_arn=widget_function.function_arn,
                title="Every job: last slot, freshness, last success, lease, paused, latest result, how to fetch",
                params=OVERVIEW_PARAMS,
                width=FULL_WIDTH,
                height=overview_height(len(job_names)),
                update_on_refresh=True,
                update_on_resize=False,
                update_on_time_range_change=False,
            )
        )
        third, quarter = FULL_WIDTH // 3, FULL_WIDTH // 4
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Deployment alarms", width=quarter, height=6, alarms=list(alarms)),
            cloudwatch.GraphWidget(
                title="Failed slot invocations waiting (on-failure queue, DLQ)",
                width=quarter,
                left=[
                    failure_queue.metric_approximate_number_of_messages_visible(
                        statistic="Maximum", period=period, label="on-failure queue"
                    ),
                    failure_dead_letter_queue.metric_approximate_number_of_messages_visible(
                        statistic="Maximum", period=period, label="dead-letter queue"
                    ),
                ],
            ),
            cloudwatch.GraphWidget(
                title="Stale writes, corrupt lock items, thresholds exceeded (every job)",
                width=quarter,
                left=[
                    deployment_metric(name, statistic="Sum", period=period, label=name) for name in DEPLOYMENT_COUNTS
                ],
            ),
            capacity_graph(capacity_permits, width=quarter, period=period),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Job functions: errors, throttles, dropped async events (sum over every job)",
                width=FULL_WIDTH // 2,
                left=[
                    cloudwatch.MathExpression(
                        expression=(
                            f'SUM(SEARCH(\'{{AWS/Lambda,FunctionName}} MetricName="{metric}" '
                            f"{function_name_prefix}', 'Sum', {int(period.to_seconds())}))"
                        ),
                        using_metrics={},
                        period=period,
                        label=metric,
                    )
                    for metric in ("Errors", "Throttles", "AsyncEventsDropped")
                ],
            ),
            cloudwatch.LogQueryWidget(
                title="Latest runs (every job)",
                width=FULL_WIDTH // 2,
                height=6,
                log_group_names=[log_group.log_group_name],
                query_lines=list(LATEST_RUNS_QUERY),
                view=cloudwatch.LogQueryVisualizationType.TABLE,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=f"# Job `{JOB_PLACEHOLDER}`\nType the job's name in the **Job** box above.",
                width=FULL_WIDTH,
                height=1,
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.LogQueryWidget(
                title="Its runs: outcome, reason, bytes scanned, duration, estimated cost (log lines)",
                width=FULL_WIDTH,
                height=6,
                log_group_names=[log_group.log_group_name],
                query_lines=list(JOB_RUNS_QUERY),
                view=cloudwatch.LogQueryVisualizationType.TABLE,
            )
        )
        self.dashboard.add_widgets(
            *[
                cloudwatch.GraphWidget(
                    title=f"{title} (per_job_metrics = true only)",
                    width=third,
                    left=[
                        job_metric(JOB_PLACEHOLDER, name, statistic=statistic, period=period, label=statistic)
                        for statistic in statistics
                    ],
                )
                for name, (title, statistics) in JOB_GRAPHS.items()
            ]
        )


def capacity_graph(permits: int, *, width: int, period: cdk.Duration) -> cloudwatch.GraphWidget:
    """The "Athena capacity" graph: ``PermitsInUse`` (Maximum) on the left axis with the budget ``permits`` as a
    horizontal line (none while off), ``PermitWaitMs`` p50 and p95 on the right axis (milliseconds)."""
    in_use, wait = contract.METRIC_PERMITS_IN_USE, contract.METRIC_PERMIT_WAIT_MS

    def lines(name: str) -> list[cloudwatch.IMetric]:
        return [
            deployment_metric(name, statistic=statistic, period=period, label=f"{name} {statistic}")
            for statistic in CAPACITY_METRICS[name]
        ]

    annotations = (
        [cloudwatch.HorizontalAnnotation(value=permits, label=f"budget: {permits} permits")] if permits > 0 else []
    )
    return cloudwatch.GraphWidget(
        title=CAPACITY_TITLE if permits > 0 else f"{CAPACITY_TITLE} (budget off: permits 0)",
        width=width,
        left=lines(in_use),
        right=lines(wait),
        left_annotations=annotations,
        left_y_axis=cloudwatch.YAxisProps(min=0, label="permits", show_units=False),
        right_y_axis=cloudwatch.YAxisProps(min=0, label="ms", show_units=False),
    )
