"""CloudWatch dashboard: the analytics values the job computes, the age of the last successful run, the latest
results (a custom widget backed by the read side's widget function), every job metric of the contract, the
Lambda's health, the on-failure queue, and the latest runs.

The metric names come from ``athena_refresh.contract`` only (``ALL_METRICS``): a renamed or added metric
changes the dashboard with no edit here, and the template tests prove dashboard metrics == ALL_METRICS.
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
from stacks.config import ValueMetricsConfig
from stacks.constructs.job_metrics import REASONS_BY_METRIC, job_metric, value_search_expression

# Statistics per metric, from the unit in its name: durations and ages ("...Ms", "...S") are averaged
# and maximized; byte totals are summed and maximized (the largest query); counts are summed.
TIME_STATISTICS = ("Average", "Maximum")
BYTES_STATISTICS = ("Sum", "Maximum")
# Money ("...USD"): the period's total and the dearest slot.
USD_STATISTICS = ("Sum", "Maximum")
SUM_STATISTICS = ("Sum",)
# What each graph shows, for the operator reading the dashboard (title suffixes).
TITLES = {
    contract.METRIC_LOST_RACE: "LostRace: lease contention, by reason",
    contract.METRIC_TAKEOVER: "Takeover: expired leases taken over",
    contract.METRIC_SLOT_MISSED: "SlotMissed: slots that never ran, by reason",
    contract.METRIC_QUERY_DURATION_MS: "QueryDurationMs: Athena total execution time",
    contract.METRIC_DATA_SCANNED_BYTES: "DataScannedBytes: Athena bytes scanned (billed)",
    contract.METRIC_ESTIMATED_COST_USD: "EstimatedCostUSD: cost per committed slot, USD (an ESTIMATE)",
    contract.METRIC_LAST_SUCCESS_AGE_S: "LastSuccessAgeS: seconds since the last successful run",
    contract.METRIC_STALE_WRITE_REJECTED: "StaleWriteRejected: fenced writes of a stale holder",
    contract.METRIC_CORRUPT_LOCK_ITEM: "CorruptLockItem: invalid lock items found",
    contract.METRIC_VALUE_SERIES_DROPPED: "ValueSeriesDropped: result rows over the series cap",
}
# Logs Insights over the function's JSON logs: the runtime logs one "slot <iso>: <status>" line per
# invocation with the keys job, slot, outcome, reason, fencing_token (and query_execution_id when known).
LATEST_RUNS_QUERY = (
    "fields @timestamp, job, slot, outcome, reason, fencing_token, query_execution_id, @message",
    "filter ispresent(outcome)",
    "sort @timestamp desc",
    "limit 50",
)
RESULTS_WIDGET_HEIGHT = 8
GRAPHS_PER_ROW = 3
FULL_WIDTH = 24
METRIC_PERIOD = cdk.Duration.minutes(5)


def statistics_for(metric_name: str) -> Sequence[str]:
    """Statistics graphed for ``metric_name`` (see the constants above)."""
    if metric_name.endswith(("Ms", "S")):
        return TIME_STATISTICS
    if metric_name.endswith("Bytes"):
        return BYTES_STATISTICS
    if metric_name.endswith("USD"):
        return USD_STATISTICS
    return SUM_STATISTICS


SECTION_HEADING = "# Job "  # each job's section of the shared dashboard starts with this markdown heading


class RefreshDashboard(Construct):
    """The job's section of a dashboard: ``dashboard`` when given (the stack's, shared by every job, one
    section per job under a ``# Job `<name>``` heading), else a dashboard of its own.

    :param schedule_period: the shortest gap between slots; the value graphs use it as their period
        (one data point per slot), capped at one day.
    :param stale_after_s: the "no successful run" alarm threshold, drawn on the last-success graph.
    :param value_metrics: the result columns published as metrics (``None``: no values section).
    :param alarms: shown in an alarm status widget at the top.
    :param results_widget_function: renders the job's latest results (slot, age, fencing token) in a custom
        widget below the status row, called with ``{"job": <job_name>}`` (``None``: no such widget).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job_name: str,
        function: lambda_.IFunction,
        log_group: logs.ILogGroup,
        failure_queue: sqs.IQueue,
        failure_dead_letter_queue: sqs.IQueue,
        schedule_period: cdk.Duration,
        stale_after_s: int,
        value_metrics: ValueMetricsConfig | None,
        alarms: Sequence[cloudwatch.IAlarm] = (),
        period: cdk.Duration = METRIC_PERIOD,
        dashboard: cloudwatch.Dashboard | None = None,
        results_widget_function: lambda_.IFunction | None = None,
        heading: str = "",
    ) -> None:
        super().__init__(scope, construct_id)
        self._job_name = job_name
        self._period = period
        self.dashboard = dashboard or cloudwatch.Dashboard(self, "Dashboard", default_interval=cdk.Duration.days(1))
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=f"{SECTION_HEADING}`{job_name}`" + (f"\n{heading}" if heading else ""),
                width=FULL_WIDTH,
                height=2,
            )
        )

        last_success = [
            job_metric(
                job_name, contract.METRIC_LAST_SUCCESS_AGE_S, statistic="Maximum", period=period, label="age (s)"
            )
        ]
        self.dashboard.add_widgets(
            cloudwatch.SingleValueWidget(
                title="Last successful run (seconds ago)", width=6, height=6, metrics=last_success
            ),
            cloudwatch.GraphWidget(
                title="Age of the last successful run (s)",
                width=10,
                height=6,
                left=last_success,
                left_annotations=[cloudwatch.HorizontalAnnotation(value=stale_after_s, label="alarm: two periods")],
            ),
            cloudwatch.AlarmStatusWidget(title="Alarms", width=8, height=6, alarms=list(alarms)),
        )
        if results_widget_function is not None:
            # CloudWatch calls the function with the viewer's credentials on load and refresh; the widget shows
            # the latest committed slot, which the dashboard's time range does not change.
            self.dashboard.add_widgets(
                cloudwatch.CustomWidget(
                    function_arn=results_widget_function.function_arn,
                    title=f"Latest results: {job_name} (slot, age, fencing token)",
                    params={"job": job_name},
                    width=FULL_WIDTH,
                    height=RESULTS_WIDGET_HEIGHT,
                    update_on_refresh=True,
                    update_on_resize=False,
                    update_on_time_range_change=False,
                )
            )

        if value_metrics is not None:
            value_period = cdk.Duration.seconds(min(int(schedule_period.to_seconds()), 86_400))
            by = f" by {', '.join(value_metrics.dimensions)}" if value_metrics.dimensions else ""
            value_graphs = [
                cloudwatch.GraphWidget(
                    title=f"{column}{by}",
                    width=FULL_WIDTH // GRAPHS_PER_ROW,
                    left=[
                        cloudwatch.MathExpression(
                            expression=value_search_expression(
                                job_name, column, value_metrics.dimensions, statistic="Maximum", period=value_period
                            ),
                            using_metrics={},
                            period=value_period,
                            label="",
                        )
                    ],
                    legend_position=cloudwatch.LegendPosition.RIGHT,
                )
                for column in value_metrics.columns
            ]
            self.dashboard.add_widgets(
                cloudwatch.TextWidget(
                    markdown=(
                        f"## Result values of job `{job_name}`\n"
                        f"Published by the winner of each slot in namespace `{contract.VALUES_NAMESPACE}`, "
                        f"at most {value_metrics.max_series} dimension combinations per run "
                        "(each one is a billed custom metric)."
                    ),
                    width=FULL_WIDTH,
                    height=2,
                )
            )
            self._add_rows(value_graphs)

        self._add_rows([self._job_metric_graph(name) for name in contract.ALL_METRICS])

        width = FULL_WIDTH // 3
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Lambda invocations, errors, throttles, dropped async events",
                width=width,
                left=[
                    function.metric_invocations(statistic="Sum", period=period),
                    function.metric_errors(statistic="Sum", period=period),
                    function.metric_throttles(statistic="Sum", period=period),
                    function.metric("AsyncEventsDropped", statistic="Sum", period=period),
                ],
            ),
            cloudwatch.GraphWidget(
                title="Lambda duration (ms)",
                width=width,
                left=[
                    function.metric_duration(statistic=statistic, period=period, label=statistic)
                    for statistic in ("Average", "p99", "Maximum")
                ],
            ),
            cloudwatch.GraphWidget(
                title="Failed slot invocations waiting (on-failure queue, DLQ)",
                width=width,
                left=[
                    failure_queue.metric_approximate_number_of_messages_visible(
                        statistic="Maximum", period=period, label="on-failure queue"
                    ),
                    failure_dead_letter_queue.metric_approximate_number_of_messages_visible(
                        statistic="Maximum", period=period, label="dead-letter queue"
                    ),
                ],
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.LogQueryWidget(
                title="Latest runs",
                width=FULL_WIDTH,
                height=8,
                log_group_names=[log_group.log_group_name],
                query_lines=list(LATEST_RUNS_QUERY),
                view=cloudwatch.LogQueryVisualizationType.TABLE,
            )
        )

    def _add_rows(self, widgets: Sequence[cloudwatch.IWidget]) -> None:
        for start in range(0, len(widgets), GRAPHS_PER_ROW):
            self.dashboard.add_widgets(*widgets[start : start + GRAPHS_PER_ROW])

    def _job_metric_graph(self, metric_name: str) -> cloudwatch.GraphWidget:
        statistics = statistics_for(metric_name)
        reasons = REASONS_BY_METRIC.get(metric_name)
        if reasons:
            metrics = [
                job_metric(
                    self._job_name, metric_name, statistic=statistic, period=self._period, reason=reason, label=reason
                )
                for reason in reasons
                for statistic in statistics
            ]
        else:
            metrics = [
                job_metric(self._job_name, metric_name, statistic=statistic, period=self._period, label=statistic)
                for statistic in statistics
            ]
        return cloudwatch.GraphWidget(
            title=TITLES.get(metric_name, metric_name),
            width=FULL_WIDTH // GRAPHS_PER_ROW,
            left=metrics,
            stacked=bool(reasons),
        )
