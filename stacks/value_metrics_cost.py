"""What a job's value metrics cost against its work: a warning at synth and in ``python -m tools.jobs check``.

Each value metric series (a value column x a dimension combination, up to ``max_series`` of them) is a billed
CloudWatch custom metric, prorated by the hours the job sends in; each
series also logs one EMF blob per slot. A job that publishes many series but queries little can pay far more for
its metrics than for its work. :func:`value_metrics_warning` says so (a warning, never a failure) when the value
metrics cost more than :data:`WARNING_FACTOR` times the job's work, with the figure ``make cost`` shows for them
and the knob to turn (``value_metrics.max_series``, the dimensions, the columns).

The job's work, the baseline: per slot the query at Athena's minimum (10 MB) and the Lambda invocations (a winner of
:data:`WORK_WINNER_S`, ``racers - 1`` losers of :data:`WORK_LOSER_MS`: ``make cost``'s default durations), times the
schedule's slots per month, plus the job's operational CloudWatch metrics (``contract.JOB_METRICS``: 3 series, paid
whether or not value metrics are on: leaving them out would make every job that publishes a single value series look expensive) and its
one alarm (``make cost`` counts alarms from the synthesized template; a test keeps the two figures equal).

The arithmetic shared with ``make cost`` (:mod:`tools.cost`) lives here, because the stack may not import
``tools/``: the schedule's firings in a reference year (:func:`schedule_rate`), the custom metric series
(:func:`metric_series`) and the bytes a value series logs (:func:`value_log_bytes`). Prices come from
:mod:`athena_refresh.cost` (``prices.toml``). Pure: no I/O beyond reading the price table once.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from athena_refresh import contract
from athena_refresh.cost import Prices, SlotUsage, Usage, estimate, estimate_slot_cost, load_prices
from slotlock.schedule import firings_between

if TYPE_CHECKING:
    from stacks.jobs import JobDefinition

GB: Final = 2**30
DAYS_PER_MONTH: Final = 365.25 / 12  # 30.4375
HOURS_PER_MONTH: Final = DAYS_PER_MONTH * 24  # 730.5
#: The year whose firings are counted (scaled to 365.25 days, so a leap year and a common one agree).
REFERENCE_YEAR: Final = 2026
MAX_FIRINGS_PER_YEAR: Final = 366 * 24 * 60  # a cron fires at most once a minute
#: An invocation whose previous firing is longer ago than this is assumed cold (Lambda reclaims idle
#: environments after minutes; not documented), every other one warm.
COLD_AFTER_IDLE_S: Final = 15 * 60
#: Log bytes of one value series per slot: one EMF blob of about 120 B plus 90 B per value column (measured in
#: make demo's worker logs, 2026-11-25: 384 B with 3 columns, 297 B with 2).
VALUE_BLOB_BYTES: Final = 120
VALUE_COLUMN_BYTES: Final = 90
#: The work's durations: ``make cost``'s defaults (tools.cost.usage.DEFAULT_WINNER_DURATION_S, DEFAULT_LOSER_DURATION_MS).
WORK_WINNER_S: Final = 3.0
WORK_LOSER_MS: Final = 100.0
#: Alarms per job: ``NoRecentSuccess`` (slotlock_cdk.OncePerSlotSchedule); a standard alarm on one metric.
JOB_ALARMS: Final = 1
#: Warn when the value metrics cost more than this many times the job's work.
WARNING_FACTOR: Final = 10.0


# --- the schedule ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScheduleRate:
    """The firings of one schedule in :attr:`year` (UTC): how many, in how many distinct clock hours, and how
    many come after an idle gap longer than :data:`COLD_AFTER_IDLE_S` (cold)."""

    year: int
    firings: int
    active_hours: int
    cold_firings: int

    @property
    def days(self) -> int:
        return 366 if calendar.isleap(self.year) else 365

    @property
    def slots_per_month(self) -> float:
        return self.firings * DAYS_PER_MONTH / self.days

    @property
    def active_hours_per_month(self) -> float:
        return self.active_hours * DAYS_PER_MONTH / self.days

    @property
    def metric_month_fraction(self) -> float:
        """The share of a month's hours in which the job emits metrics (custom metrics are prorated by the hour
        and metered only when sent: https://aws.amazon.com/cloudwatch/pricing/)."""
        return min(1.0, self.active_hours_per_month / HOURS_PER_MONTH)

    @property
    def cold_fraction(self) -> float:
        return self.cold_firings / self.firings if self.firings else 0.0


@functools.lru_cache(maxsize=64)
def schedule_rate(
    expression: str, timezone: str, *, year: int = REFERENCE_YEAR, cold_after_idle_s: float = COLD_AFTER_IDLE_S
) -> ScheduleRate:
    """Count the firings of ``expression`` in ``timezone`` during ``year`` (EventBridge Scheduler's rules,
    :func:`slotlock.schedule.firings_between`). The first firing's idle gap is measured from the year's
    last one (a year repeats). :raises slotlock.schedule.CronError: as ``firings_between``."""
    start = dt.datetime(year, 1, 1, tzinfo=dt.UTC)
    end = dt.datetime(year + 1, 1, 1, tzinfo=dt.UTC) - dt.timedelta(seconds=1)
    epochs = [int(f.timestamp()) for f in firings_between(expression, timezone, start, end, limit=MAX_FIRINGS_PER_YEAR)]
    cold = 0
    if epochs:
        previous = epochs[-1] - (366 if calendar.isleap(year) else 365) * 86_400
        for epoch in epochs:
            if epoch - previous > cold_after_idle_s:
                cold += 1
            previous = epoch
    return ScheduleRate(
        year=year, firings=len(epochs), active_hours=len({e // 3600 for e in epochs}), cold_firings=cold
    )


# --- CloudWatch custom metrics --------------------------------------------------------------------------------
@dataclass(frozen=True)
class MetricSeries:
    """The custom metrics one job sends: its ``contract.JOB_METRICS`` (dimensions service, job) and, opt-in, its
    value series (value columns x ``max_series``, namespace ScheduledAthenaRefresh/Values). Dropped series,
    losses, takeovers and the rest are fields of the invocation's log line, not metrics (docs/observability.md);
    the deployment-wide counts (``contract.DEPLOYMENT_METRICS``) are the deployment's, not a job's."""

    job: int
    value_series: int

    @property
    def total(self) -> int:
        return self.job + self.value_series

    @property
    def operational_total(self) -> int:
        """The series every job pays for, value metrics or not."""
        return self.job

    @property
    def value_metrics(self) -> int:
        return self.value_series


def metric_series(value_columns: int, max_series: int, *, per_job_metrics: bool = True) -> MetricSeries:
    """The job's custom metrics: its ``contract.JOB_METRICS`` when it opts in (``per_job_metrics``, issue 35), and
    the value series at their cap (``max_series``)."""
    return MetricSeries(
        job=len(contract.JOB_METRICS) if per_job_metrics else 0,
        value_series=value_columns * max_series if value_columns else 0,
    )


def value_log_bytes(value_columns: int, max_series: int) -> int:
    """Bytes the winner logs per slot for its value series (one EMF blob per series)."""
    series = max_series if value_columns else 0
    return series * (VALUE_BLOB_BYTES + VALUE_COLUMN_BYTES * value_columns)


# --- value metrics against the work ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ValueMetricsCost:
    """One job's value metrics per month (``value_usd``: ``make cost``'s "value metrics" line, from ``series``
    custom metrics and their log bytes) against its work (``work_usd``), both estimates in USD."""

    columns: int
    max_series: int
    series: int
    rate: ScheduleRate
    value_usd: float
    work_usd: float

    @property
    def factor(self) -> float:
        return self.value_usd / self.work_usd if self.work_usd > 0 else float("inf")


def value_metrics_usd(value_columns: int, max_series: int, rate: ScheduleRate, prices: Prices) -> float:
    """The value metrics' monthly USD as ``make cost`` counts them: their custom metrics for the hours the job
    sends, and the log bytes of their EMF blobs (ingested and stored for a month)."""
    cost = estimate(
        Usage(
            metrics=metric_series(value_columns, max_series).value_metrics,
            metric_month_fraction=rate.metric_month_fraction,
            log_gb=value_log_bytes(value_columns, max_series) * rate.slots_per_month / GB,
        ),
        prices,
    )
    return cost.cloudwatch_metrics + cost.cloudwatch_logs


def work_usd(rate: ScheduleRate, prices: Prices, *, racers: int, memory_mb: int) -> float:
    """The job's work per month: each slot's query at Athena's minimum and its Lambda invocations, plus the
    operational custom metrics every job sends and its one alarm."""
    slot = estimate_slot_cost(
        SlotUsage(
            data_scanned_bytes=(0,),  # billed at the 10 MB minimum
            winner_billed_ms=WORK_WINNER_S * 1000,
            loser_billed_ms=WORK_LOSER_MS,
            racers=racers,
            memory_mb=memory_mb,
            architecture=contract.LAMBDA_ARCHITECTURE,
            scheduler_invocations=0,
            loser_write_units=0.0,
        ),
        prices,
    )
    per_slot = slot.athena_usd + slot.lambda_usd
    watching = estimate(
        Usage(
            metrics=metric_series(0, 0).operational_total,
            metric_month_fraction=rate.metric_month_fraction,
            alarm_metrics=JOB_ALARMS,
        ),
        prices,
    )
    return per_slot * rate.slots_per_month + watching.cloudwatch_metrics + watching.cloudwatch_alarms


def value_metrics_cost(job: JobDefinition, prices: Prices | None = None) -> ValueMetricsCost | None:
    """The job's value metrics against its work; ``None`` when it publishes none.

    :raises slotlock.schedule.CronError: the schedule cannot be evaluated (synth has refused it already).
    """
    values = job.config.value_metrics
    if values is None or not values.columns:
        return None
    prices = prices or load_prices()
    rate = schedule_rate(job.config.schedule_expression, job.config.schedule_timezone)
    columns, max_series = len(values.columns), values.max_series
    return ValueMetricsCost(
        columns=columns,
        max_series=max_series,
        series=metric_series(columns, max_series).value_metrics,
        rate=rate,
        value_usd=value_metrics_usd(columns, max_series, rate, prices),
        work_usd=work_usd(rate, prices, racers=job.config.racers, memory_mb=job.config.lambda_memory_mb),
    )


def value_metrics_warning(
    job: JobDefinition, *, factor: float = WARNING_FACTOR, prices: Prices | None = None
) -> str | None:
    """One line when ``job``'s value metrics would cost more than ``factor`` times its work, else ``None``."""
    cost = value_metrics_cost(job, prices)
    if cost is None or cost.factor <= factor:
        return None
    values = job.config.value_metrics
    assert values is not None  # value_metrics_cost returned a cost
    dims = f" by {', '.join(values.dimensions)}" if values.dimensions else ""
    return (
        f"{job.folder.parent.name}/{job.folder.name}/job.toml: value_metrics: about ${cost.value_usd:,.2f} a month"
        f" (estimate, as make cost shows it: {cost.series} custom metrics = {cost.columns} columns x max_series"
        f" {cost.max_series}{dims}) is {cost.factor:,.0f}x the job's work (${cost.work_usd:,.2f} a month:"
        f" {cost.rate.slots_per_month:,.0f} slots at Athena's 10 MB minimum, Lambda, operational metrics and alarm);"
        " lower value_metrics.max_series to the dimension values the data has, use fewer dimensions or columns"
    )


def value_metrics_warnings(jobs: Iterable[JobDefinition], *, factor: float = WARNING_FACTOR) -> list[str]:
    """The warning of every job whose value metrics cost more than ``factor`` times its work, in order."""
    prices = load_prices()
    return [w for job in jobs if (w := value_metrics_warning(job, factor=factor, prices=prices)) is not None]
