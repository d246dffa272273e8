"""A month of each job, the model behind ``make cost``: one slot's usage (:mod:`tools.cost.usage`) priced by
:func:`athena_refresh.cost.estimate_slot_cost` times the slots per month, plus the per-month services (CloudWatch
custom metrics, the job's alarm, logs), what moves the total, and what the deployment spends for all its jobs
(the dashboard, the deployment-wide alarms, the capacity budget's two metrics, the overview widget's Lambda and
reads, the "Latest runs" Logs Insights scans at a stated number of views), shared equally by the jobs. A job's **fixed monthly cost** is
everything but its query's scan and its opt-in value metrics, plus that share. Every price comes from
:mod:`athena_refresh.cost` (``prices.toml``).

A month is 365.25 / 12 = 30.4375 days (730.5 hours). Every figure is an ESTIMATE.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from athena_refresh import contract
from athena_refresh.cost import CostEstimate, Prices, SlotUsage, Usage, WatchdogModel, estimate, estimate_slot_cost
from stacks.value_metrics_cost import GB
from tools.cost.usage import (
    DASHBOARD_RANGE_H,
    DEFAULT_DASHBOARD_VIEWS_PER_MONTH,
    HOURS_PER_MONTH,
    OPT_IN_ALARM_METRICS,
    WIDGET_DURATION_MS,
    AlarmCount,
    Durations,
    JobInputs,
    LogBytes,
    MetricSeries,
    WinnerWrites,
    log_bytes,
    metric_series,
    overview_read_units,
    slot_usage,
)

USD_DIGITS: Final = 6  # monthly figures are rounded to the micro-dollar; totals are sums of the rounded parts
#: The read API: one warm invocation reading LATEST (one strongly consistent GetItem, up to 4 KB: 1 RRU).
READ_API_DURATION_MS: Final = 30.0
READ_API_READ_UNITS: Final = 1.0

#: Monthly lines of a job, in display order.
SERVICES: Final = (
    "athena",
    "lambda",
    "dynamodb",
    "scheduler",
    "s3",
    "cloudwatch_metrics",
    "cloudwatch_alarms",
    "cloudwatch_logs",
)
#: The lines of a job's own fixed cost: every service but Athena (its query's scan).
FIXED_SERVICES: Final = tuple(s for s in SERVICES if s != "athena")


def usd(value: float) -> float:
    return round(value, USD_DIGITS)


@dataclass(frozen=True)
class JobEstimate:
    """One job's month: ``monthly`` (service -> USD, :data:`SERVICES`), the slot's usage and estimate behind it,
    the counts, and what moves it (``one_more_racer_usd``, ``value_metrics_usd``)."""

    inputs: JobInputs
    usage: SlotUsage
    per_slot: CostEstimate
    writes: WinnerWrites
    metrics: MetricSeries
    logs: LogBytes
    monthly: Mapping[str, float]
    one_more_racer_usd: float = 0.0
    value_metrics_usd: float = 0.0
    #: The job's own fixed lines (:data:`FIXED_SERVICES`) without its value metrics: ``monthly`` of the same job
    #: with value metrics off, but Athena.
    fixed_own: Mapping[str, float] = field(default_factory=dict)
    #: Watching the job, its own part (issue 35): its own metrics and alarms as deployed (none without
    #: ``per_job_metrics``), and as they would be with ``per_job_metrics = true``.
    watch_own_usd: float = 0.0
    watch_own_opt_in_usd: float = 0.0

    @property
    def total_usd(self) -> float:
        return usd(sum(self.monthly.values()))

    @property
    def fixed_own_usd(self) -> float:
        return usd(sum(self.fixed_own.values()))

    @property
    def log_bytes_per_month(self) -> float:
        return self.logs.per_slot(self.inputs.racers) * self.inputs.schedule.slots_per_month

    @property
    def log_gb_per_month(self) -> float:
        return self.logs.per_slot(self.inputs.racers) * self.inputs.schedule.slots_per_month / GB


def _monthly(job: JobInputs, durations: Durations, prices: Prices) -> JobEstimate:
    usage, writes = slot_usage(job, durations)
    per_slot = estimate_slot_cost(usage, prices)
    slots = job.schedule.slots_per_month
    metrics = metric_series(job.value_columns, job.value_max_series, per_job_metrics=job.per_job_metrics)
    logs = log_bytes(job)
    watching = estimate(
        Usage(
            metrics=metrics.total,
            metric_month_fraction=job.schedule.metric_month_fraction,
            alarm_metrics=job.alarms.alarm_metrics,
            log_gb=logs.per_slot(job.racers) * slots / GB,
        ),
        prices,
    )
    monthly = {
        "athena": usd(per_slot.athena_usd * slots),
        "lambda": usd(per_slot.lambda_usd * slots),
        "dynamodb": usd(per_slot.dynamodb_usd * slots),
        "scheduler": usd(per_slot.scheduler_usd * slots),
        "s3": usd(per_slot.s3_usd * slots),
        "cloudwatch_metrics": usd(watching.cloudwatch_metrics),
        "cloudwatch_alarms": usd(watching.cloudwatch_alarms),
        "cloudwatch_logs": usd(watching.cloudwatch_logs),
    }
    opt_in_alarms = job.alarms.alarm_metrics if job.per_job_metrics else OPT_IN_ALARM_METRICS
    own, opt_in = (
        estimate(Usage(metrics=series, metric_month_fraction=fraction, alarm_metrics=alarms), prices)
        for series, alarms, fraction in (
            (metrics.job, job.alarms.alarm_metrics, job.schedule.metric_month_fraction),
            (len(contract.JOB_METRICS), opt_in_alarms, job.schedule.metric_month_fraction),
        )
    )
    return JobEstimate(
        job,
        usage,
        per_slot,
        writes,
        metrics,
        logs,
        monthly,
        watch_own_usd=usd(own.cloudwatch_metrics + own.cloudwatch_alarms),
        watch_own_opt_in_usd=usd(opt_in.cloudwatch_metrics + opt_in.cloudwatch_alarms),
    )


def estimate_job(job: JobInputs, durations: Durations, prices: Prices) -> JobEstimate:
    """The job's month at ``prices``, with the cost of one more racer and of its value metrics (the difference
    to the same job without them: their metrics and their log lines)."""
    base = _monthly(job, durations, prices)
    more = _monthly(replace(job, racers=job.racers + 1), durations, prices)
    without = _monthly(replace(job, value_columns=0, value_max_series=0), durations, prices)
    return replace(
        base,
        one_more_racer_usd=usd(more.total_usd - base.total_usd),
        value_metrics_usd=usd(base.total_usd - without.total_usd),
        fixed_own={service: without.monthly[service] for service in FIXED_SERVICES},
    )


# --- the deployment -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeploymentEstimate:
    """What the deployment spends per month for all of its ``jobs`` (the shared stack's dashboard and
    deployment-wide alarms, the overview widget's Lambda and DynamoDB reads and the "Latest runs" Logs Insights
    scans at ``views_per_month``; the deployment-wide metrics at none), each job's equal share of it, and the read
    API's price per 1,000 reads (usage unknown: in no total)."""

    jobs: int
    dashboards: int
    alarms: AlarmCount
    views_per_month: float
    logs_insights_gb_per_view: float
    overview_read_units_per_view: int
    parts: Mapping[str, float]
    read_api_per_thousand: Mapping[str, float] = field(default_factory=dict)
    #: The capacity budget's deployment-wide metrics (0: off) and the share of the month's hours they are billed for.
    capacity_metrics: int = 0
    capacity_metric_hours_share: float = 0.0
    #: The freshness watchdog priced in the line ``watchdog`` (its period: the jobs' one).
    watchdog: WatchdogModel = field(default_factory=WatchdogModel)

    @property
    def total_usd(self) -> float:
        return usd(sum(self.parts.values()))

    @property
    def share_usd(self) -> float:
        """Each job's share: the total divided by the number of jobs deployed."""
        return usd(self.total_usd / self.jobs) if self.jobs else 0.0

    @property
    def dashboard_usd(self) -> float:
        return self.parts["dashboard"]

    @property
    def alarms_usd(self) -> float:
        return self.parts["alarms"]

    @property
    def watch_usd(self) -> float:
        """What watching every job costs the deployment: the dashboard (and its widget's and Logs Insights' cost per
        view), the deployment-wide alarms and the watchdog (issue 35)."""
        return usd(sum(self.parts[line] for line in WATCH_LINES))

    @property
    def watch_share_usd(self) -> float:
        """Each job's share of :attr:`watch_usd`."""
        return usd(self.watch_usd / self.jobs) if self.jobs else 0.0


#: The deployment's lines, in display order.
DEPLOYMENT_LINES: Final = (
    "dashboard",
    "alarms",
    "deployment_metrics",
    "capacity_metrics",
    "widget_lambda",
    "widget_dynamodb",
    "logs_insights",
    "watchdog",
)
#: The deployment's lines that watch the jobs (each job's ``watch_monthly_usd`` shares them).
WATCH_LINES: Final = ("dashboard", "alarms", "widget_lambda", "widget_dynamodb", "logs_insights", "watchdog")


def read_api_per_thousand(
    prices: Prices, *, memory_mb: int, architecture: str = contract.LAMBDA_ARCHITECTURE
) -> dict[str, float]:
    """USD per 1,000 reads of the read API: the HTTP API request, the function's invocation (one warm
    invocation of :data:`READ_API_DURATION_MS`) and its read of LATEST (:data:`READ_API_READ_UNITS`)."""
    one = estimate_slot_cost(
        SlotUsage(
            data_scanned_bytes=(),
            winner_billed_ms=READ_API_DURATION_MS,
            loser_billed_ms=0.0,
            racers=1,
            memory_mb=memory_mb,
            architecture=architecture,
            read_units=READ_API_READ_UNITS,
            scheduler_invocations=0,
        ),
        prices,
    )
    parts = {
        "apigateway": usd(estimate(Usage(http_requests=1000), prices).apigateway),
        "lambda": usd(1000 * one.lambda_usd),
        "dynamodb": usd(1000 * one.dynamodb_usd),
    }
    return {**parts, "total": usd(sum(parts.values()))}


def estimate_deployment(
    jobs: Sequence[JobEstimate],
    *,
    dashboards: int,
    alarms: AlarmCount,
    prices: Prices,
    read_api_memory_mb: int,
    views_per_month: float = DEFAULT_DASHBOARD_VIEWS_PER_MONTH,
    capacity_metrics: int = 0,
    watchdog: WatchdogModel | None = None,
) -> DeploymentEstimate:
    """The deployment's month for ``jobs`` (every job deployed: pass the same estimate 50 times for 50 copies).

    Per view: one widget invocation of :data:`WIDGET_DURATION_MS` at the read side's memory, reading
    :func:`~tools.cost.usage.overview_read_units` per job; one Logs Insights query over the one job log group for
    the dashboard's default range: the bytes every job logs in :data:`DASHBOARD_RANGE_H` hours.

    ``capacity_metrics``: the capacity budget's deployment-wide metrics (``len(usage.CAPACITY_METRICS)`` when it is
    on, else 0), sent by every winner: billed for the hours in which some job fires, at most all of them (the sum of
    the jobs' shares, capped at 1: exact when one job fires every hour, an upper bound when jobs share hours).

    ``watchdog``: the deployment's freshness watchdog watching every job (default
    :meth:`athena_refresh.cost.WatchdogModel.for_jobs` of the jobs' ``period_s``: the period the stack gives it):
    its line ``watchdog`` (Scheduler, Lambda, reads and writes, its metrics, logs; its 2 alarms are the shared
    stack's, in ``alarms``). The dashboard's views run ``contract.DASHBOARD_LOG_QUERIES_PER_VIEW`` Logs Insights
    queries."""
    watchdog = watchdog or WatchdogModel.for_jobs(job.inputs.period_s for job in jobs)
    log_bytes_per_month = sum(job.log_bytes_per_month for job in jobs)
    gb_per_view = (
        log_bytes_per_month * DASHBOARD_RANGE_H / HOURS_PER_MONTH / GB * contract.DASHBOARD_LOG_QUERIES_PER_VIEW
    )
    read_units = sum(overview_read_units(job.inputs.result_writes, job.inputs.summary_bytes) for job in jobs)
    # per view, unrounded (monthly lines are rounded once, to the micro-dollar)
    view = estimate(
        Usage(
            lambda_gb_s=read_api_memory_mb / 1024 * WIDGET_DURATION_MS / 1000,
            lambda_requests=1,
            architecture=contract.LAMBDA_ARCHITECTURE,
            read_units=read_units,
        ),
        prices,
    )
    hours_share = min(1.0, sum(job.inputs.schedule.metric_month_fraction for job in jobs)) if capacity_metrics else 0.0
    month = estimate(
        Usage(
            dashboards=dashboards,
            alarm_metrics=alarms.alarm_metrics,
            metrics=capacity_metrics,
            metric_month_fraction=hours_share,
        ),
        prices,
    )
    parts = {
        "dashboard": usd(month.cloudwatch_dashboards),
        "alarms": usd(month.cloudwatch_alarms),
        "deployment_metrics": 0.0,  # sent only when they happen: DEPLOYMENT_METRIC_HOURS_PER_MONTH
        "capacity_metrics": usd(month.cloudwatch_metrics),
        "widget_lambda": usd(views_per_month * view.lambda_),
        "widget_dynamodb": usd(views_per_month * view.dynamodb),
        "logs_insights": usd(
            estimate(Usage(logs_insights_gb_scanned=views_per_month * gb_per_view), prices).cloudwatch_logs
        ),
        "watchdog": usd(
            sum(
                estimate(
                    watchdog.usage(
                        len(jobs), hours_per_month=HOURS_PER_MONTH, architecture=contract.LAMBDA_ARCHITECTURE
                    ),
                    prices,
                )
                .by_service()
                .values()
            )
        ),
    }
    return DeploymentEstimate(
        jobs=len(jobs),
        dashboards=dashboards,
        alarms=alarms,
        views_per_month=views_per_month,
        logs_insights_gb_per_view=gb_per_view,
        overview_read_units_per_view=read_units,
        parts=parts,
        read_api_per_thousand=read_api_per_thousand(prices, memory_mb=read_api_memory_mb),
        capacity_metrics=capacity_metrics,
        capacity_metric_hours_share=hours_share,
        watchdog=watchdog,
    )


def fixed_monthly_usd(job: JobEstimate, deployment: DeploymentEstimate) -> float:
    """The job's fixed monthly cost: its own lines but Athena and its value metrics, plus its share of the
    deployment's."""
    return usd(job.fixed_own_usd + deployment.share_usd)


def watch_monthly_usd(job: JobEstimate, deployment: DeploymentEstimate, *, opt_in: bool = False) -> float:
    """What watching the job costs a month (issue 35): its own metrics and alarms (as deployed, or ``opt_in``: as
    with ``per_job_metrics = true``) plus its share of the deployment's dashboard, alarms and watchdog."""
    own = job.watch_own_opt_in_usd if opt_in else job.watch_own_usd
    return usd(own + deployment.watch_share_usd)


def grand_total(jobs: Sequence[JobEstimate], deployment: DeploymentEstimate) -> float:
    return usd(sum(job.total_usd for job in jobs) + deployment.total_usd)
