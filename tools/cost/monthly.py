"""A month of each job, the model behind ``make cost``: one slot's usage (:mod:`tools.cost.usage`) priced by
:func:`athena_refresh.cost.estimate_slot_cost` times the slots per month, plus the per-month services (CloudWatch
custom metrics, alarms, logs), what moves the total, and the stack's shared lines (the dashboard; the read API's
price per 1,000 reads). Every price comes from :mod:`athena_refresh.cost` (``prices.toml``).

A month is 365.25 / 12 = 30.4375 days (730.5 hours). Every figure is an ESTIMATE.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from athena_refresh import contract
from athena_refresh.cost import CostEstimate, Prices, SlotUsage, estimate_slot_cost
from stacks.value_metrics_cost import MetricSeries, metric_series  # shared with the stack's warning
from tools.cost.usage import (
    AlarmCount,
    Durations,
    JobInputs,
    LogBytes,
    WinnerWrites,
    log_bytes,
    slot_usage,
)

GB: Final = 2**30
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

    @property
    def total_usd(self) -> float:
        return usd(sum(self.monthly.values()))

    @property
    def log_gb_per_month(self) -> float:
        return self.logs.per_slot(self.inputs.racers) * self.inputs.schedule.slots_per_month / GB


def _monthly(job: JobInputs, durations: Durations, prices: Prices) -> JobEstimate:
    usage, writes = slot_usage(job, durations)
    per_slot = estimate_slot_cost(usage, prices)
    slots = job.schedule.slots_per_month
    metrics = metric_series(job.value_columns, job.value_max_series)
    logs = log_bytes(job)
    log_gb = logs.per_slot(job.racers) * slots / GB
    log_prices = prices.cloudwatch_usd_per_gb_logs_ingested + prices.cloudwatch_usd_per_gb_month_logs_stored
    monthly = {
        "athena": usd(per_slot.athena_usd * slots),
        "lambda": usd(per_slot.lambda_usd * slots),
        "dynamodb": usd(per_slot.dynamodb_usd * slots),
        "scheduler": usd(per_slot.scheduler_usd * slots),
        "s3": usd(per_slot.s3_usd * slots),
        "cloudwatch_metrics": usd(
            metrics.total * prices.cloudwatch_usd_per_metric_month * job.schedule.metric_month_fraction
        ),
        "cloudwatch_alarms": usd(job.alarms.alarm_metrics * prices.cloudwatch_usd_per_alarm_month),
        "cloudwatch_logs": usd(log_gb * log_prices),
    }
    return JobEstimate(job, usage, per_slot, writes, metrics, logs, monthly)


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
    )


# --- the stack --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StackEstimate:
    """The shared lines (the dashboard; alarms of no job) and the read API's price per 1,000 reads."""

    dashboards: int
    alarms: AlarmCount
    dashboard_usd: float
    alarms_usd: float
    read_api_per_thousand: Mapping[str, float] = field(default_factory=dict)

    @property
    def total_usd(self) -> float:
        return usd(self.dashboard_usd + self.alarms_usd)


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
        "apigateway": usd(1000 / 1e6 * prices.apigateway_usd_per_million_http_requests),
        "lambda": usd(1000 * one.lambda_usd),
        "dynamodb": usd(1000 * one.dynamodb_usd),
    }
    return {**parts, "total": usd(sum(parts.values()))}


def estimate_stack(dashboards: int, alarms: AlarmCount, prices: Prices, *, read_api_memory_mb: int) -> StackEstimate:
    return StackEstimate(
        dashboards=dashboards,
        alarms=alarms,
        dashboard_usd=usd(dashboards * prices.cloudwatch_usd_per_dashboard_month),
        alarms_usd=usd(alarms.alarm_metrics * prices.cloudwatch_usd_per_alarm_month),
        read_api_per_thousand=read_api_per_thousand(prices, memory_mb=read_api_memory_mb),
    )


def grand_total(jobs: Sequence[JobEstimate], stack: StackEstimate) -> float:
    return usd(sum(job.total_usd for job in jobs) + stack.total_usd)
