"""CloudWatch dashboard: every job metric of the contract, the Lambda's health, and the latest runs.

The metric names come from ``athena_refresh.contract`` only (every ``METRIC_*`` constant): a renamed or
added metric changes the dashboard with no edit here, and the template tests catch a mismatch.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from athena_refresh import contract
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

# Metrics emitted with an extra "reason" dimension, and the values it takes (one line per value).
REASONS_BY_METRIC: dict[str, Sequence[str]] = {
    contract.METRIC_LOST_RACE: contract.LOSS_REASONS,
    contract.METRIC_SLOT_MISSED: contract.MISSED_REASONS,
}
# Statistics per metric, from the unit in its name: durations and ages ("...Ms", "...S") are averaged
# and maximized; counts and byte totals are summed.
TIME_STATISTICS = ("Average", "Maximum")
SUM_STATISTICS = ("Sum",)
LATEST_RUNS_QUERY = (
    "fields @timestamp, slot, fencing_token, outcome, query_execution_id",
    "filter ispresent(outcome)",
    "sort @timestamp desc",
    "limit 50",
)
GRAPHS_PER_ROW = 3
FULL_WIDTH = 24


def contract_metric_names() -> tuple[str, ...]:
    """Every metric name the runtime emits: the values of contract's ``METRIC_*`` constants, in order."""
    return tuple(value for name, value in vars(contract).items() if name.startswith("METRIC_"))


def statistics_for(metric_name: str) -> Sequence[str]:
    """``TIME_STATISTICS`` for a name ending in a time unit (``QueryDurationMs``), else ``SUM_STATISTICS``."""
    return TIME_STATISTICS if metric_name.endswith(("Ms", "S")) else SUM_STATISTICS


class RefreshDashboard(Construct):
    """One graph per job metric (dimensions ``service`` and ``job``, plus ``reason`` where emitted),
    Lambda invocations/errors/throttles/duration, and a Logs Insights table of the latest runs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job_name: str,
        function: lambda_.IFunction,
        log_group: logs.ILogGroup,
        period: cdk.Duration = cdk.Duration.minutes(5),
    ) -> None:
        super().__init__(scope, construct_id)
        self._job_name = job_name
        self._period = period
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=cdk.Duration.days(1))

        job_graphs = [self._job_metric_graph(name) for name in contract_metric_names()]
        for start in range(0, len(job_graphs), GRAPHS_PER_ROW):
            self.dashboard.add_widgets(*job_graphs[start : start + GRAPHS_PER_ROW])

        width = FULL_WIDTH // 2
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Lambda invocations, errors, throttles",
                width=width,
                left=[
                    function.metric_invocations(statistic="Sum", period=period),
                    function.metric_errors(statistic="Sum", period=period),
                    function.metric_throttles(statistic="Sum", period=period),
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

    def _job_metric_graph(self, metric_name: str) -> cloudwatch.GraphWidget:
        dimensions = {contract.DIMENSION_SERVICE: contract.SERVICE_NAME, contract.DIMENSION_JOB: self._job_name}
        statistics = statistics_for(metric_name)
        reasons = REASONS_BY_METRIC.get(metric_name)
        if reasons:
            metrics = [
                self._metric(metric_name, {**dimensions, contract.DIMENSION_REASON: reason}, statistic, label=reason)
                for reason in reasons
                for statistic in statistics
            ]
        else:
            metrics = [self._metric(metric_name, dimensions, statistic, label=statistic) for statistic in statistics]
        return cloudwatch.GraphWidget(title=metric_name, width=FULL_WIDTH // GRAPHS_PER_ROW, left=metrics)

    def _metric(self, metric_name: str, dimensions: dict[str, str], statistic: str, *, label: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=contract.METRICS_NAMESPACE,
            metric_name=metric_name,
            dimensions_map=dimensions,
            statistic=statistic,
            period=self._period,
            label=label,
        )
