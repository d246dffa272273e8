"""What one job uses per slot, the model behind ``make cost``: the schedule's firings in a reference year (slots,
the hours they fall in, cold starts), the winner's and losers' DynamoDB write units modelled from the protocol, the
bytes each invocation logs, and the :class:`athena_refresh.cost.SlotUsage` they make with the assumed durations.
No I/O: the inputs come from :mod:`tools.cost.inputs`; :mod:`tools.cost.monthly` prices a month of it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from athena_refresh import contract
from athena_refresh.cost import COST_ATTRIBUTE_BYTES, LOCK_ITEM_BYTES, SLOT_ITEM_BYTES, SlotUsage, commit_write_units
from athena_refresh.watchdog import RECENT_SLOTS
from slotlock.capacity import READ_UNIT_BYTES, estimate_write_units, item_size_bytes

# The arithmetic the stack's value-metrics warning shares (stacks may not import tools/), re-exported here.
from stacks.value_metrics_cost import (  # noqa: F401
    COLD_AFTER_IDLE_S,
    DAYS_PER_MONTH,
    HOURS_PER_MONTH,
    MAX_FIRINGS_PER_YEAR,
    REFERENCE_YEAR,
    VALUE_BLOB_BYTES,
    VALUE_COLUMN_BYTES,
    MetricSeries,
    ScheduleRate,
    metric_series,
    schedule_rate,
    value_log_bytes,
)

# --- the metrics (issue 23) --------------------------------------------------------------------------------------
#: The custom metrics each job sends (dimensions service + job): ``LastSuccessAgeS`` from every invocation,
#: ``DataScannedBytes`` and ``QueryDurationMs`` from the winner once per committed slot. So each is sent in every
#: clock hour in which the job fires, and billed for that share of the month's hours.
JOB_METRICS: Final = (
    contract.METRIC_LAST_SUCCESS_AGE_S,
    contract.METRIC_DATA_SCANNED_BYTES,
    contract.METRIC_QUERY_DURATION_MS,
)
#: The alarm a job opting in to its own metrics adds (``NoRecentSuccess`` on ``LastSuccessAgeS``: one alarm metric);
#: without opt-in the synthesized job stack has none, so ``make cost`` prices the opt-in figure with this count.
OPT_IN_ALARM_METRICS: Final = 1
#: The deployment-wide counts (dimension service only, no job): sent only in an hour in which one happens
#: (a stale write, a corrupt lock item, a threshold exceeded), so a healthy deployment pays nothing for them.
DEPLOYMENT_METRICS: Final = (
    contract.METRIC_STALE_WRITE_REJECTED,
    contract.METRIC_CORRUPT_LOCK_ITEM,
    contract.METRIC_THRESHOLD_EXCEEDED,
)
#: The hours per month in which a deployment-wide count is assumed sent: none (they are rare; each hour one is
#: sent costs its metric 1/730.5 of $0.30, about $0.0004).
DEPLOYMENT_METRIC_HOURS_PER_MONTH: Final = 0.0
#: The capacity semaphore's measurements (dimension service only: one series each for the deployment), sent by
#: every slot that takes a permit: billed in every hour in which some job's winner runs (:mod:`tools.cost.capacity`).
CAPACITY_METRICS: Final = (contract.METRIC_PERMITS_IN_USE, contract.METRIC_PERMIT_WAIT_MS)


# --- assumptions (docs/cost.md says why each is what it is) ------------------------------------------------
#: The winner's duration: an Athena query of a few seconds, seen done by the poll loop (200, 400, 800, 1600 ms
#: backoff: a 2 s query is seen at 3.0 s), plus its few DynamoDB requests.
DEFAULT_WINNER_DURATION_S: Final = 3.0
#: A loser's duration: one conditional UpdateItem (about 10 ms in-region; 6.5 ms p50 on DynamoDB Local in
#: bench-report.json's contended fan-out), settings, logging and the EMF flush; in a fresh environment also
#: building the boto3 clients, the larger part. 100 ms covers that.
DEFAULT_LOSER_DURATION_MS: Final = 100.0
#: The INIT phase of a cold environment (imports: 281 ms median on a 2-core machine in bench-report.json's
#: coldstart, slower at 256 MB's CPU share); billed since 1 August 2025 (prices.toml).
DEFAULT_COLD_START_MS: Final = 700.0
#: The in-flight state record_state writes on the slot item (query execution id, attempt), JSON.
STATE_BYTES: Final = 120
#: Log bytes per invocation, measured in make demo's worker logs (medians of 8 winners and 40 losers per
#: job, 2026-11-25, before issue 23 moved most metrics into the one log line: an upper bound now): a winner's
#: 8 JSON log lines and its 2 metric blobs 6,380 B; a loser's 1,110 B; each
#: value series one EMF blob of about 120 B plus 90 B per value column (384 B with 3 columns, 297 B with 2);
#: Powertools' ColdStart blob 288 B. Lambda's own records (platform start and report, JSON) are not in those
#: logs: 500 B per invocation assumed.
WINNER_LOG_BYTES: Final = 6_400
LOSER_LOG_BYTES: Final = 1_100
COLD_START_LOG_BYTES: Final = 290
PLATFORM_LOG_BYTES: Final = 500


# --- DynamoDB request units of one slot -----------------------------------------------------------------------
def sized_put(size_bytes: int) -> dict[str, Any]:
    """A TransactWriteItems ``Put`` of an item of ``size_bytes`` (one attribute ``pk``), for
    :func:`slotlock.capacity.estimate_write_units`."""
    return {"Put": {"Item": {"pk": {"S": "x" * max(0, size_bytes - 2)}}}}


def single_write_units(size_bytes: int) -> int:
    """WRU of a plain (non-transactional) write of an item of ``size_bytes``: half a transaction's."""
    return estimate_write_units([sized_put(size_bytes)]) // 2


@dataclass(frozen=True)
class WinnerWrites:
    """The winner's write request units: the acquisition (one conditional UpdateItem), record_state (a
    transaction of the lock and slot items), ``heartbeats`` renewals (one UpdateItem each) and the commit; with the
    capacity budget on, ``semaphore``: its permit's writes (:class:`SemaphoreRequests`, renewals included)."""

    acquire: int
    record_state: int
    heartbeats: int
    heartbeat_units: int
    commit: int
    semaphore: int = 0

    @property
    def total(self) -> int:
        return self.acquire + self.record_state + self.heartbeats * self.heartbeat_units + self.commit + self.semaphore


def winner_writes(
    *,
    duration_s: float,
    heartbeat_interval_s: float,
    result_writes: Sequence[Mapping[str, Any]],
    summary_bytes: int,
    semaphore: SemaphoreRequests | None = None,
) -> WinnerWrites:
    """One renewal per whole heartbeat interval of the winner's duration (none for a short query); ``semaphore``:
    the capacity budget's permit (never renewed once its query is recorded: its expiry covers the invocation)."""
    lock = single_write_units(LOCK_ITEM_BYTES)
    heartbeats = math.floor(duration_s / heartbeat_interval_s) if heartbeat_interval_s > 0 else 0
    permit = 0 if semaphore is None else semaphore.write_units
    return WinnerWrites(
        acquire=lock,
        # the transaction of the lock and slot items, and the slot item's copy in the history index
        record_state=estimate_write_units([sized_put(LOCK_ITEM_BYTES), sized_put(SLOT_ITEM_BYTES + STATE_BYTES)])
        + single_write_units(SLOT_ITEM_BYTES + STATE_BYTES),
        heartbeats=heartbeats,
        heartbeat_units=lock,
        commit=commit_write_units(result_writes, summary_bytes),
        semaphore=permit,
    )


#: A loser's failed conditional write: billed by the existing lock item's size (under 1 KB): 1 WRU.
LOSER_WRITE_UNITS: Final = single_write_units(LOCK_ITEM_BYTES)


# --- the capacity semaphore's requests of one slot (issue 24) ----------------------------------------------------
#: A permit item: key, owner (``<job>#<slot>#g<n>``), token, expiry, take time, semaphore, index, query id and the
#: previous holder's owner, token and query (about 550 B with a 17-character job name; a 64-character one adds
#: about 100 B): under 1 KB.
PERMIT_ITEM_BYTES: Final = 700
#: Strongly consistent reads: 1 RRU per started 4 KB of each item, each item of a BatchGetItem rounded up on its
#: own (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html). Every permit
#: item and the tickets item (a counter and the live waiters, under 4 KB while a few dozen wait) is under 4 KB.
READ_UNITS_PER_SEMAPHORE_ITEM: Final = 1


@dataclass(frozen=True)
class SemaphoreRequests:
    """What the capacity semaphore adds to one slot whose winner takes a permit without waiting
    (``slotlock.Semaphore``; ``permits`` N):

    - one strongly consistent ``BatchGetItem`` of the N permit items and the tickets item: ``read_units`` (N + 1);
    - one conditional ``UpdateItem`` taking a permit: ``take_write_units`` (1);
    - the query id recorded on the permit inside the ``record_state`` transaction and the permit released inside
      the commit transaction: one more item in each, 2 WRU each (a transaction bills twice the units).

    Nothing per heartbeat: the record sets the permit's expiry to the invocation's deadline plus the takeover
    window, so it is never renewed, whatever the query's length (docs/protocol.md, "Capacity semaphore").
    """

    permits: int
    read_units: int
    take_write_units: int
    record_write_units: int
    release_write_units: int

    @classmethod
    def of(cls, permits: int) -> SemaphoreRequests:
        in_transaction = estimate_write_units([sized_put(PERMIT_ITEM_BYTES)])
        return cls(
            permits=permits,
            read_units=(permits + 1) * READ_UNITS_PER_SEMAPHORE_ITEM,
            take_write_units=single_write_units(PERMIT_ITEM_BYTES),
            record_write_units=in_transaction,
            release_write_units=in_transaction,
        )

    @property
    def write_units(self) -> int:
        """The take, the record and the release: all a permit costs when no one waits."""
        return self.take_write_units + self.record_write_units + self.release_write_units

    def as_dict(self) -> dict[str, Any]:
        return {
            "permits": self.permits,
            "requests": {"BatchGetItem": 1, "UpdateItem": 1, "items_in_existing_transactions": 2},
            "read_units": self.read_units,
            "write_units": {
                "take": self.take_write_units,
                "record_query": self.record_write_units,
                "release": self.release_write_units,
                "total": self.write_units,
            },
        }


def semaphore_requests(permits: int) -> SemaphoreRequests | None:
    """The semaphore's requests per slot, ``None`` when the budget is off (``permits`` 0: no request at all)."""
    return SemaphoreRequests.of(permits) if permits > 0 else None


# --- the dashboard (the deployment's, shared by every job) -----------------------------------------------------
#: Views of the dashboard per month: about 20 a day. Each view (and each refresh: auto-refresh every minute is
#: 1,440 a day) runs the overview custom widget and the "Latest runs" Logs Insights query.
DEFAULT_DASHBOARD_VIEWS_PER_MONTH: Final = 600
#: The dashboard's default time range (stacks/constructs/dashboard.py ``DEFAULT_INTERVAL``): what the "Latest runs"
#: widget scans of the one job log group per view.
DASHBOARD_RANGE_H: Final = 3
#: One overview render of the widget function: INIT (views are minutes apart: mostly cold) plus ceil(N / 50)
#: BatchGetItem requests of the lock and LATEST items, ceil(4 N / 100) of the freshness' slot items, and the HTML.
WIDGET_DURATION_MS: Final = 1_000.0


def overview_read_units(result_writes: Sequence[Mapping[str, Any]], summary_bytes: int) -> int:
    """RRU the overview reads per job per render (consistent BatchGetItem, billed by the whole item, whatever the
    projection): the lock item, the LATEST item (as large as the result item the commit writes, with its cost
    attribute) and the slot items of its freshness: the schedule's
    :data:`~athena_refresh.watchdog.RECENT_SLOTS` newest firings (the last slot is among them while the job keeps
    its schedule; an item not found still costs a read unit: an upper bound)."""
    items = [w["Put"]["Item"] for w in result_writes if "Put" in w and "Item" in w["Put"]]
    latest = max((item_size_bytes(item) for item in items), default=0) + COST_ATTRIBUTE_BYTES
    slot_item = SLOT_ITEM_BYTES + summary_bytes + COST_ATTRIBUTE_BYTES
    slot_units = RECENT_SLOTS * math.ceil(slot_item / READ_UNIT_BYTES)
    return slot_units + sum(math.ceil(size / READ_UNIT_BYTES) for size in (LOCK_ITEM_BYTES, latest))


# --- inputs and the estimate ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Durations:
    """The Lambda durations assumed (see the defaults above)."""

    winner_s: float = DEFAULT_WINNER_DURATION_S
    loser_ms: float = DEFAULT_LOSER_DURATION_MS
    cold_start_ms: float = DEFAULT_COLD_START_MS


@dataclass(frozen=True)
class Scan:
    """Bytes one slot's query scans and where the number comes from: ``measured`` (the sample on DuckDB),
    ``flag`` (``--scan-bytes``) or ``assumed`` (Athena's minimum)."""

    bytes: int
    origin: str
    detail: str = ""


@dataclass(frozen=True)
class AlarmCount:
    """Alarms and the metrics they evaluate (a metric math alarm evaluates each of its metrics)."""

    alarms: int = 0
    alarm_metrics: int = 0
    high_resolution: int = 0  # period below 60 s (priced as standard: the price table has no other price)


@dataclass(frozen=True)
class JobInputs:
    """What the estimate of one job needs, from its folder, the sample and the synthesized template."""

    name: str
    racers: int
    memory_mb: int
    heartbeat_interval_s: float
    schedule: ScheduleRate
    #: The schedule's shortest period in seconds (``slotlock.schedule.cron_period``): sets the watchdog's period.
    period_s: int
    scan: Scan
    result_writes: tuple[Mapping[str, Any], ...]
    summary_bytes: int
    alarms: AlarmCount
    value_columns: int = 0
    value_max_series: int = 0
    rows_offloaded: bool = False
    architecture: str = contract.LAMBDA_ARCHITECTURE
    #: The capacity budget's permits (cdk.json ``context.stack.capacity.permits``; 0: off).
    capacity_permits: int = 0
    #: The job opts in to its own metrics and alarm (``per_job_metrics``, issue 35; off by default).
    per_job_metrics: bool = False


@dataclass(frozen=True)
class LogBytes:
    winner: float
    loser: float

    def per_slot(self, racers: int) -> float:
        return self.winner + (racers - 1) * self.loser


def log_bytes(job: JobInputs) -> LogBytes:
    """Bytes each invocation logs (JSON lines, EMF blobs, Lambda's records; ColdStart when cold)."""
    cold = job.schedule.cold_fraction * COLD_START_LOG_BYTES
    values = value_log_bytes(job.value_columns, job.value_max_series)
    return LogBytes(
        winner=WINNER_LOG_BYTES + values + PLATFORM_LOG_BYTES + cold,
        loser=LOSER_LOG_BYTES + PLATFORM_LOG_BYTES + cold,
    )


def slot_usage(job: JobInputs, durations: Durations) -> tuple[SlotUsage, WinnerWrites]:
    """One slot's usage (the expected value: cold starts weighted by the schedule's cold share); with the capacity
    budget on, its winner takes a permit without waiting (waiting: :mod:`tools.cost.capacity`)."""
    init_ms = job.schedule.cold_fraction * durations.cold_start_ms
    semaphore = semaphore_requests(job.capacity_permits)
    writes = winner_writes(
        duration_s=durations.winner_s,
        heartbeat_interval_s=job.heartbeat_interval_s,
        result_writes=job.result_writes,
        summary_bytes=job.summary_bytes,
        semaphore=semaphore,
    )
    usage = SlotUsage(
        data_scanned_bytes=(job.scan.bytes,),
        winner_billed_ms=durations.winner_s * 1000 + init_ms,
        loser_billed_ms=durations.loser_ms + init_ms,
        racers=job.racers,
        memory_mb=job.memory_mb,
        architecture=job.architecture,
        read_units=float(semaphore.read_units if semaphore else 0),
        write_units=float(writes.total),
        loser_write_units=float(LOSER_WRITE_UNITS),
        s3_put_requests=1 if job.rows_offloaded else 0,
    )
    return usage, writes
