"""What things cost, as an estimate: one usage model (:class:`Usage`: billed quantities per service) and one
function from usage to USD per service (:func:`estimate`), at the prices of the price table
(:mod:`athena_refresh.prices`, data with sources and dates). Every estimate of the project is this arithmetic: each
committed slot's (:func:`estimate_slot_cost`, measured by :class:`InvocationCost`), ``make cost``'s month
(:mod:`tools.cost`), the capacity budget's figures, the stack's value-metrics warning and ``make bench``.

Per committed slot (:func:`estimate_slot_cost`):

- **Athena**: each billed query's bytes scanned, rounded up to the MB with a 10 MB minimum
  (:func:`athena_billed_bytes`), at the price per TB (https://aws.amazon.com/athena/pricing/; TB = 2^40 bytes,
  MB = 2^20 bytes);
- **Lambda**: the winner's GB-seconds (memory x billed duration) and request, plus the losers, modelled as
  ``racers - 1`` invocations of the winner's own time to its lock decision (a loser does exactly that: start,
  one conditional write, exit) and a request each (https://aws.amazon.com/lambda/pricing/);
- **DynamoDB**: the read and write request units the winner's requests consumed (``ReturnConsumedCapacity``,
  counted by :class:`slotlock.capacity.CapacityMeter`, an event hook on the lock's client), the commit modelled
  from the items it writes (it records this estimate, so its own consumption is only known after it), and the
  losers' failed conditional writes modelled as the winner's acquisition write (DynamoDB reports no capacity
  with a failed condition);
- **EventBridge Scheduler**: one invocation per racer;
- **S3**: the PUT of rows offloaded to S3 (Athena's own result objects are not counted).

Not counted per slot: free tiers (per account), data transfer, CloudWatch (per month, not per slot: ``make cost``
prices its metrics, alarms, dashboards and logs with the same :func:`estimate`), storage, KMS, X-Ray. Every
figure is an estimate and is labelled so wherever it is shown.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from slotlock.capacity import CapacitySnapshot, estimate_write_units

from . import contract
from .prices import ARCHITECTURES, MB, PRICES_PATH, TB, Prices, PriceTableError, load_prices

__all__ = [
    "MB",
    "PRICES_PATH",
    "TB",
    "Cost",
    "CostEstimate",
    "InvocationCost",
    "PriceTableError",
    "Prices",
    "SlotUsage",
    "Usage",
    "WatchdogModel",
    "athena_billed_bytes",
    "commit_write_units",
    "estimate",
    "estimate_slot_cost",
    "format_usd",
    "load_prices",
]

#: Decimal places kept in USD figures (a slot costs from about 1e-7 USD upwards).
USD_DIGITS: Final = 10
#: Bytes the cost attribute adds to each item that carries it (the commit's model counts them).
COST_ATTRIBUTE_BYTES: Final = 768
#: The lock item a commit updates: well under 1 KB (a counter, an owner, a few timestamps).
LOCK_ITEM_BYTES: Final = 600
#: The slot item's attributes besides its summary (keys, status, owner, token, timestamps, TTL).
SLOT_ITEM_BYTES: Final = 400


@dataclass(frozen=True)
class Usage:
    """Billed quantities, per service (any period: a slot, a view, a month; every field defaults to none).

    ``athena_billed_bytes``: bytes Athena bills (:func:`athena_billed_bytes` per query, summed).
    ``lambda_gb_s``: GB-seconds on ``architecture``; ``lambda_requests``: invocations.
    ``read_units``/``write_units``: DynamoDB on-demand request units.
    ``scheduler_invocations``: EventBridge Scheduler invocations.
    ``s3_put_requests``/``s3_get_requests``: S3 Standard requests.
    ``metrics``: CloudWatch custom metrics, billed for ``metric_month_fraction`` of the month's hours (custom
    metrics are prorated by the hour: 1.0 when they are sent every hour). ``alarm_metrics``: metrics evaluated by
    standard alarms, a month each. ``dashboards``: dashboard-months. ``log_gb``: GB of logs ingested and stored
    for a month; ``logs_insights_gb_scanned``: GB of logs that Logs Insights queries scan. ``http_requests``: API
    Gateway HTTP API requests.
    """

    athena_billed_bytes: int = 0
    lambda_gb_s: float = 0.0
    lambda_requests: float = 0
    architecture: str = "arm64"
    read_units: float = 0.0
    write_units: float = 0.0
    scheduler_invocations: float = 0
    s3_put_requests: float = 0
    s3_get_requests: float = 0
    metrics: float = 0
    metric_month_fraction: float = 1.0
    alarm_metrics: float = 0
    dashboards: float = 0
    log_gb: float = 0.0
    logs_insights_gb_scanned: float = 0.0
    http_requests: float = 0

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture must be one of {ARCHITECTURES}, got {self.architecture!r}")


@dataclass(frozen=True)
class Cost:
    """USD per service of one :class:`Usage`, unrounded (callers round once, at the digits they show)."""

    athena: float = 0.0
    lambda_: float = 0.0
    dynamodb: float = 0.0
    scheduler: float = 0.0
    s3: float = 0.0
    cloudwatch_metrics: float = 0.0
    cloudwatch_alarms: float = 0.0
    cloudwatch_dashboards: float = 0.0
    cloudwatch_logs: float = 0.0
    apigateway: float = 0.0

    def by_service(self) -> dict[str, float]:
        """Service name -> USD (``lambda`` for :attr:`lambda_`), every service, in this order."""
        return {
            "athena": self.athena,
            "lambda": self.lambda_,
            "dynamodb": self.dynamodb,
            "scheduler": self.scheduler,
            "s3": self.s3,
            "cloudwatch_metrics": self.cloudwatch_metrics,
            "cloudwatch_alarms": self.cloudwatch_alarms,
            "cloudwatch_dashboards": self.cloudwatch_dashboards,
            "cloudwatch_logs": self.cloudwatch_logs,
            "apigateway": self.apigateway,
        }


def estimate(usage: Usage, prices: Prices) -> Cost:
    """``usage`` at ``prices``: USD per service (list prices: no free tier, no discount, no data transfer).

    Athena: billed bytes / TB x $/TB; Lambda: GB-s x $/GB-s of the architecture + requests x $/request; DynamoDB:
    units x $/unit, read and write; Scheduler, S3 and API Gateway: requests x their price; CloudWatch: custom
    metrics x $/metric-month x the share of the month's hours they are sent in, alarm metrics x $/alarm-month,
    dashboards x $/dashboard-month, CloudWatch Logs: log GB x ($/GB ingested + $/GB-month stored) + GB scanned by
    Logs Insights x $/GB scanned.
    """
    p = prices
    return Cost(
        athena=usage.athena_billed_bytes / TB * p.athena_usd_per_tb_scanned,
        lambda_=usage.lambda_gb_s * p.lambda_usd_per_gb_s[usage.architecture]
        + usage.lambda_requests / 1e6 * p.lambda_usd_per_million_requests,
        dynamodb=usage.write_units / 1e6 * p.dynamodb_usd_per_million_write_units
        + usage.read_units / 1e6 * p.dynamodb_usd_per_million_read_units,
        scheduler=usage.scheduler_invocations / 1e6 * p.scheduler_usd_per_million_invocations,
        s3=usage.s3_put_requests / 1e3 * p.s3_usd_per_thousand_put
        + usage.s3_get_requests / 1e3 * p.s3_usd_per_thousand_get,
        cloudwatch_metrics=usage.metrics * p.cloudwatch_usd_per_metric_month * usage.metric_month_fraction,
        cloudwatch_alarms=usage.alarm_metrics * p.cloudwatch_usd_per_alarm_month,
        cloudwatch_dashboards=usage.dashboards * p.cloudwatch_usd_per_dashboard_month,
        cloudwatch_logs=usage.log_gb
        * (p.cloudwatch_usd_per_gb_logs_ingested + p.cloudwatch_usd_per_gb_month_logs_stored)
        + usage.logs_insights_gb_scanned * p.cloudwatch_usd_per_gb_logs_insights_scanned,
        apigateway=usage.http_requests / 1e6 * p.apigateway_usd_per_million_http_requests,
    )


@dataclass(frozen=True)
class WatchdogModel:
    """The deployment's freshness watchdog (issue 35) as billed quantities, per run and per month.

    One run every ``period_s`` seconds (:meth:`for_jobs`: :func:`athena_refresh.contract.watchdog_period_s` of the
    jobs' shortest schedule periods, the rule the stack schedules it with), fired by ``racers`` schedules (the
    stack's ``OncePerSlotSchedule``: one Scheduler invocation and one Lambda request each):

    - the **winner**: ``duration_ms`` at ``memory_mb``; per job ``items_per_job`` strongly consistent reads (the
      lock item and the state last notified, and at most the newest firing's slot item of a job on time: an upper
      bound; each item under 4 KB, 1 read unit), ``winner_write_units`` on its own lock (the acquisition's
      conditional UpdateItem, 1 WRU, and the commit's transaction of its lock and slot items, 2 WRU each, plus 1 for
      the slot item's copy in the history index); ``log_bytes_per_run`` of logs;
    - each **loser**: ``loser_duration_ms``, one failed conditional write (1 WRU), ``loser_log_bytes`` of logs;
    - **metrics**: the deployment-wide custom metrics sent by every run (``JobsLate``, ``JobsFailing``,
      ``WatchdogRuns``: every hour); ``OldestLatenessS`` is sent only by a run that finds a job late or failing,
      so, like the deployment-wide counts, it is counted as none (each hour it is sent costs $0.30 / 730.5).

    Not counted: the writes and the notification of a change of a job's state (one per change). Its two alarms
    (JobsLateOrFailing on two metrics, WatchdogSilent) are resources of the shared stack: ``make cost`` counts them
    with the deployment's alarms from the synthesized template (counted once).
    ``duration_ms`` and the log bytes are assumptions (a run is a few batched reads).
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html
    """

    period_s: int = contract.MIN_WATCHDOG_PERIOD_S
    racers: int = contract.WATCHDOG_RACERS
    duration_ms: float = 800.0
    loser_duration_ms: float = 100.0
    memory_mb: int = contract.WATCHDOG_MEMORY_MB
    items_per_job: int = 3
    winner_write_units: int = 6
    metrics: int = 3
    log_bytes_per_run: int = 1_500
    loser_log_bytes: int = 1_100

    @classmethod
    def for_jobs(cls, shortest_job_periods_s: Iterable[int]) -> WatchdogModel:
        """The watchdog of a deployment of jobs whose shortest schedule periods (seconds) are given."""
        return cls(period_s=contract.watchdog_period_s(shortest_job_periods_s))

    def runs_per_month(self, hours_per_month: float) -> float:
        return hours_per_month * 3600 / self.period_s

    def usage(self, jobs: int, *, hours_per_month: float, architecture: str = "arm64") -> Usage:
        """A month of the watchdog watching ``jobs`` jobs (Scheduler, Lambda, reads and writes, metrics, logs):
        priced by :func:`estimate` like everything else."""
        runs = self.runs_per_month(hours_per_month)
        losers = self.racers - 1
        billed_ms = _billed_ms(self.duration_ms) + losers * _billed_ms(self.loser_duration_ms)
        return Usage(
            lambda_gb_s=runs * self.memory_mb / 1024 * billed_ms / 1000,
            lambda_requests=runs * self.racers,
            architecture=architecture,
            read_units=runs * jobs * self.items_per_job,
            write_units=runs * (self.winner_write_units + losers),
            scheduler_invocations=runs * self.racers,
            metrics=self.metrics,
            # GB as CloudWatch Logs bills it (2^30 bytes)
            log_gb=runs * (self.log_bytes_per_run + losers * self.loser_log_bytes) / 2**30,
        )


def athena_billed_bytes(data_scanned_bytes: int, *, min_mb: int = 10) -> int:
    """Bytes Athena bills for one query that scanned ``data_scanned_bytes``: rounded up to the MB (2^20 bytes),
    at least ``min_mb`` MB. ``athena_billed_bytes(1) == athena_billed_bytes(10 * MB) == 10 * MB``.

    Integer arithmetic: exact for any size (a float division would round past 2^53 bytes, billing less than
    was scanned). :raises ValueError: ``data_scanned_bytes`` is negative.
    """
    if data_scanned_bytes < 0:
        raise ValueError(f"data_scanned_bytes must be >= 0, got {data_scanned_bytes}")
    return max(min_mb, -(-data_scanned_bytes // MB)) * MB


@dataclass(frozen=True)
class SlotUsage:
    """What one slot used: measured, except where noted as modelled.

    ``data_scanned_bytes``: per billed query (a succeeded one; failed queries are free). ``winner_billed_ms``:
    the winner's duration (plus its INIT when cold). ``loser_billed_ms``: one loser's (modelled: the winner's
    time to its lock decision). ``read_units``/``write_units``: the winner's DynamoDB request units.
    ``loser_write_units``: one loser's failed conditional write (modelled). ``scheduler_invocations``: default
    ``racers``. ``s3_put_requests``/``s3_get_requests``: requests to the results bucket.
    """

    data_scanned_bytes: Sequence[int]
    winner_billed_ms: float
    loser_billed_ms: float
    racers: int
    memory_mb: int
    architecture: str = "arm64"
    read_units: float = 0.0
    write_units: float = 0.0
    loser_write_units: float = 1.0
    scheduler_invocations: int | None = None
    s3_put_requests: int = 0
    s3_get_requests: int = 0

    def __post_init__(self) -> None:
        if self.racers < 1:
            raise ValueError(f"racers must be >= 1, got {self.racers}")
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture must be one of {ARCHITECTURES}, got {self.architecture!r}")

    def billed(self, *, min_mb: int = 10) -> Usage:
        """The slot's billed quantities: each query's :func:`athena_billed_bytes`; the winner's and the losers'
        GB-seconds (each duration rounded up to the ms) and a request each; the winner's units plus each loser's
        write; ``scheduler_invocations`` (default ``racers``); the S3 requests."""
        losers = self.racers - 1
        gb = self.memory_mb / 1024
        return Usage(
            athena_billed_bytes=sum(athena_billed_bytes(b, min_mb=min_mb) for b in self.data_scanned_bytes),
            lambda_gb_s=gb * (_billed_ms(self.winner_billed_ms) + losers * _billed_ms(self.loser_billed_ms)) / 1000,
            lambda_requests=self.racers,
            architecture=self.architecture,
            read_units=self.read_units,
            write_units=self.write_units + losers * self.loser_write_units,
            scheduler_invocations=self.racers if self.scheduler_invocations is None else self.scheduler_invocations,
            s3_put_requests=self.s3_put_requests,
            s3_get_requests=self.s3_get_requests,
        )


@dataclass(frozen=True)
class CostEstimate:
    """USD per service for one slot, with the billed quantities behind them and the prices' origin."""

    athena_usd: float
    lambda_usd: float
    dynamodb_usd: float
    scheduler_usd: float
    s3_usd: float
    athena_billed_bytes: int
    lambda_gb_s: float
    lambda_requests: int
    read_units: float
    write_units: float
    prices: Mapping[str, Any]

    @property
    def total_usd(self) -> float:
        return round(
            self.athena_usd + self.lambda_usd + self.dynamodb_usd + self.scheduler_usd + self.s3_usd, USD_DIGITS
        )

    def as_dict(self) -> dict[str, Any]:
        """The stored shape (``cost`` on the result item, the slot's summary and the read API)::

        {"estimated_cost_usd": 5.1e-05, "estimate": true,
         "by_service_usd": {"athena": ..., "lambda": ..., "dynamodb": ..., "scheduler": ..., "s3": ...},
         "usage": {"athena_billed_bytes": ..., "lambda_gb_s": ..., "lambda_requests": ..., "read_units": ...,
                   "write_units": ...},
         "prices": {"region": "us-east-1", "requested_region": "us-east-1", "retrieved": "2026-11-24"}}
        """
        return {
            "estimated_cost_usd": self.total_usd,
            "estimate": True,
            "by_service_usd": {
                "athena": self.athena_usd,
                "lambda": self.lambda_usd,
                "dynamodb": self.dynamodb_usd,
                "scheduler": self.scheduler_usd,
                "s3": self.s3_usd,
            },
            "usage": {
                "athena_billed_bytes": self.athena_billed_bytes,
                "lambda_gb_s": self.lambda_gb_s,
                "lambda_requests": self.lambda_requests,
                "read_units": self.read_units,
                "write_units": self.write_units,
            },
            "prices": dict(self.prices),
        }


def estimate_slot_cost(usage: SlotUsage, prices: Prices) -> CostEstimate:
    """The slot's cost per service from ``usage`` at ``prices`` (see the module docstring for what counts):
    :meth:`SlotUsage.billed` at :func:`estimate`, each service rounded to :data:`USD_DIGITS`."""
    billed = usage.billed(min_mb=prices.athena_min_mb_per_query)
    cost = estimate(billed, prices)
    return CostEstimate(
        athena_usd=_usd(cost.athena),
        lambda_usd=_usd(cost.lambda_),
        dynamodb_usd=_usd(cost.dynamodb),
        scheduler_usd=_usd(cost.scheduler),
        s3_usd=_usd(cost.s3),
        athena_billed_bytes=billed.athena_billed_bytes,
        lambda_gb_s=round(billed.lambda_gb_s, 6),
        lambda_requests=usage.racers,
        read_units=round(billed.read_units, 6),
        write_units=round(billed.write_units, 6),
        prices=prices.label(),
    )


def _billed_ms(duration_ms: float) -> int:
    """Lambda bills each invocation's duration rounded up to the millisecond (clock noise below 1 ns ignored)."""
    return max(0, math.ceil(round(duration_ms, 6)))


def _usd(value: float) -> float:
    return round(value, USD_DIGITS)


def format_usd(value: float | None) -> str:
    """A USD figure for people: ``$0.000051`` below a cent (slots cost that little), ``$12.3456`` above;
    ``-`` for ``None``."""
    if value is None:
        return "-"
    return f"${value:.6f}" if abs(value) < 0.01 else f"${value:,.4f}"


def commit_write_units(result_writes: Sequence[Mapping[str, Any]], summary_bytes: int) -> int:
    """The fenced commit's write request units, modelled: one transaction of the results store's writes (result
    item, LATEST) each carrying the cost attribute, the slot item (``summary_bytes`` of summary, the cost and its
    own attributes) and the lock item, 2 WRU per started KB of each; plus the slot item's copy in the history
    index (projecting every attribute: 1 WRU per started KB, a plain write).
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.ThroughputConsiderations.Writes
    """
    slot_item_bytes = summary_bytes + COST_ATTRIBUTE_BYTES + SLOT_ITEM_BYTES
    units = estimate_write_units(result_writes, extra_bytes=COST_ATTRIBUTE_BYTES)
    units += 2 * math.ceil(slot_item_bytes / 1024) + 2 * math.ceil(LOCK_ITEM_BYTES / 1024)
    return units + math.ceil(slot_item_bytes / 1024)


class CapacitySource(Protocol):
    """What :class:`InvocationCost` reads DynamoDB consumption from (:class:`slotlock.capacity.CapacityMeter`)."""

    def snapshot(self) -> CapacitySnapshot: ...


class InvocationCost:
    """Measures one invocation for its slot's estimate: started at the invocation's start, told when the lock
    decision came back (:meth:`lock_decided`), asked for the estimate just before the commit (:meth:`estimate`).

    ``capacity``: the lock's meter (consumption since this object was built counts); ``init_ms``: the INIT
    phase this invocation paid for (0 when warm); ``clock_s``: a monotonic clock in seconds.
    """

    def __init__(
        self,
        *,
        prices: Prices,
        racers: int,
        memory_mb: int,
        capacity: CapacitySource,
        architecture: str = "arm64",
        init_ms: float = 0.0,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prices = prices
        self.racers = racers
        self.memory_mb = memory_mb
        self.architecture = architecture
        self.init_ms = init_ms
        self._capacity = capacity
        self._clock_s = clock_s
        self._started_s = clock_s()
        self._start_capacity = capacity.snapshot()
        self._decision_ms: float | None = None
        self._decision_write_units: float | None = None

    def elapsed_ms(self) -> float:
        return (self._clock_s() - self._started_s) * 1000

    def lock_decided(self) -> None:
        """Record the time to the lock decision and the acquisition's write units (a loser's whole work)."""
        if self._decision_ms is not None:
            return
        self._decision_ms = self.elapsed_ms()
        used = self._capacity.snapshot() - self._start_capacity
        self._decision_write_units = used.write_units if used.unmetered_requests == 0 and used.write_units else None

    def estimate(
        self,
        *,
        data_scanned_bytes: Sequence[int],
        commit_writes: Sequence[Mapping[str, Any]],
        summary_bytes: int,
        s3_put_requests: int = 0,
    ) -> CostEstimate:
        """The slot's estimate now, the commit included by its model (:func:`commit_write_units`: ``commit_writes``
        are the caller's own transaction items, each about to carry the cost attribute; ``summary_bytes`` the
        slot item's summary)."""
        used = self._capacity.snapshot() - self._start_capacity
        commit_units = commit_write_units(commit_writes, summary_bytes)
        decision_ms = self._decision_ms if self._decision_ms is not None else self.elapsed_ms()
        usage = SlotUsage(
            data_scanned_bytes=tuple(data_scanned_bytes),
            winner_billed_ms=self.init_ms + self.elapsed_ms(),
            loser_billed_ms=self.init_ms + decision_ms,
            racers=self.racers,
            memory_mb=self.memory_mb,
            architecture=self.architecture,
            read_units=used.read_units,
            write_units=used.write_units + commit_units,
            loser_write_units=self._decision_write_units or 1.0,
            s3_put_requests=s3_put_requests,
        )
        return estimate_slot_cost(usage, self.prices)
