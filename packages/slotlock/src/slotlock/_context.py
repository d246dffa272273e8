"""What every protocol operation of the lock needs: :class:`LockContext`, and the lock's defaults and limits.

No protocol here. :class:`slotlock._dynamodb.SlotLock` validates its constructor's parameters into one
frozen :class:`LockContext` (:meth:`LockContext.create`) and hands it to the operation modules
(:mod:`slotlock._acquire`, :mod:`slotlock._holder`, :mod:`slotlock._commit`, :mod:`slotlock._missed`,
:mod:`slotlock._reads`), which are plain functions over it. Keys, the history TTL, lease expiries and
retry budgets derive from it here, in one place.

Times are the caller's wall clock in epoch milliseconds (``clock_ms``, ``*_ms``); durations are named
with their unit.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from . import codec, table
from ._client import LockTableClient
from ._lease import Lease, LockRecord
from ._transient import RetryBudget
from .errors import LockConfigurationError
from .slot import Slot

if TYPE_CHECKING:  # pragma: no cover - stubs are optional
    from mypy_boto3_dynamodb.client import DynamoDBClient

ClockMs = Callable[[], int]

DEFAULT_LEASE_DURATION_S = 60.0
DEFAULT_HISTORY_TTL_S = 30 * 24 * 3600
#: Deliveries whose scheduled time is further ahead of the caller's clock than this are refused: acquiring a
#: future slot would make every earlier slot lose as "superseded" until real time caught up with it. The
#: Scheduler never delivers early (https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-schedule-flexible-time-windows.html:
#: a window only delays), so the allowance only covers clock skew between the Scheduler and the caller.
DEFAULT_MAX_SLOT_LEAD_S = 5.0
MAX_TRANSACTION_ITEMS = 100  # DynamoDB TransactWriteItems limit
MAX_STATE_BYTES = 64 * 1024  # in-flight state is small by design (ids, counters)
#: Requests in all (the first included) that a holder spends on transient answers (throttling, a conflicting
#: transaction, a server error) of one write, within the lease and the invocation deadline.
DEFAULT_MAX_TRANSIENT_ATTEMPTS = 6
#: A racer's acquisition or missed-slot record: fewer attempts, within this share of the lease.
LOSER_TRANSIENT_ATTEMPTS = 3
LOSER_RETRY_LEASE_SHARE = 0.25


def system_clock_ms() -> int:
    """Wall clock, epoch milliseconds (the default ``clock_ms``)."""
    return time.time_ns() // 1_000_000


def json_text(value: Mapping[str, Any] | None) -> str:
    """``value`` as the compact, key-sorted JSON text stored in ``*_json`` attributes (``{}`` for ``None``)."""
    # dict(): json only encodes dicts as objects; any other Mapping (e.g. a Lease's read-only state)
    # would go through default=str and be stored as its repr.
    return json.dumps(dict(value) if value is not None else {}, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class LockContext:
    """One job's lock on one table, as the operations see it: validated settings, the table client, the clock.

    Built by :meth:`create` from :class:`~slotlock._dynamodb.SlotLock`'s parameters (documented there);
    durations are held in milliseconds, the history TTL in seconds.
    """

    table_name: str
    job_name: str
    io: LockTableClient
    lease_duration_ms: int
    heartbeat_interval_ms: int
    max_slot_age_ms: int | None
    history_ttl_s: int
    max_slot_lead_ms: int | None
    clock_ms: ClockMs
    sleep_s: Callable[[float], None]
    max_transient_attempts: int
    generation: int = table.LIVE_GENERATION

    @classmethod
    def create(
        cls,
        table_name: str,
        job_name: str,
        *,
        client: DynamoDBClient | None,
        lease_duration_s: float,
        heartbeat_interval_s: float | None,
        max_slot_age_s: float | None,
        history_ttl_s: int,
        max_slot_lead_s: float | None,
        clock_ms: ClockMs,
        sleep_s: Callable[[float], None],
        max_transient_attempts: int,
    ) -> LockContext:
        """Validate :class:`~slotlock._dynamodb.SlotLock`'s parameters; raises :class:`LockConfigurationError`
        naming the first invalid one."""
        if not isinstance(table_name, str) or not 3 <= len(table_name) <= 255:
            raise LockConfigurationError(
                "table_name", f"must be a DynamoDB table name (3..255 chars), got {table_name!r}"
            )
        if not table.is_valid_job_name(job_name):
            raise LockConfigurationError("job_name", f"must be {table.JOB_NAME_RULE}, got {job_name!r:.80}")
        if not _positive_seconds(lease_duration_s):
            raise LockConfigurationError(
                "lease_duration_s", f"must be a positive number of seconds, got {lease_duration_s!r}"
            )
        if heartbeat_interval_s is None:
            heartbeat_interval_s = lease_duration_s / 3
        if not _positive_seconds(heartbeat_interval_s):
            raise LockConfigurationError("heartbeat_interval_s", f"must be positive, got {heartbeat_interval_s!r}")
        if heartbeat_interval_s * 2 >= lease_duration_s:
            raise LockConfigurationError(
                "heartbeat_interval_s",
                f"{heartbeat_interval_s} s must be below half of lease_duration_s ({lease_duration_s} s)"
                " so that one late heartbeat does not lose the lease",
            )
        if max_slot_age_s is not None and not _positive_seconds(max_slot_age_s):
            raise LockConfigurationError("max_slot_age_s", f"must be positive or None, got {max_slot_age_s!r}")
        if not isinstance(history_ttl_s, int) or history_ttl_s <= 0:
            raise LockConfigurationError("history_ttl_s", f"must be a positive integer, got {history_ttl_s!r}")
        if max_slot_lead_s is not None and not (_positive_seconds(max_slot_lead_s) or max_slot_lead_s == 0):
            raise LockConfigurationError("max_slot_lead_s", f"must be >= 0 seconds or None, got {max_slot_lead_s!r}")
        if (
            isinstance(max_transient_attempts, bool)
            or not isinstance(max_transient_attempts, int)
            or not (1 <= max_transient_attempts <= 20)
        ):
            raise LockConfigurationError(
                "max_transient_attempts", f"must be an integer from 1 to 20, got {max_transient_attempts!r}"
            )
        return cls(
            table_name=table_name,
            job_name=job_name,
            io=LockTableClient(table_name, client),
            lease_duration_ms=int(lease_duration_s * 1000),
            heartbeat_interval_ms=int(heartbeat_interval_s * 1000),
            max_slot_age_ms=None if max_slot_age_s is None else int(max_slot_age_s * 1000),
            history_ttl_s=history_ttl_s,
            max_slot_lead_ms=None if max_slot_lead_s is None else int(max_slot_lead_s * 1000),
            clock_ms=clock_ms,
            sleep_s=sleep_s,
            max_transient_attempts=max_transient_attempts,
        )

    def for_generation(self, generation: int) -> LockContext:
        """This lock's context for ``generation`` (1: the live schedule; 2..: a manual run, on the manual
        lock item). Raises :class:`LockConfigurationError` outside 1..``table.MAX_GENERATION``."""
        if isinstance(generation, bool) or not isinstance(generation, int):
            raise LockConfigurationError("generation", f"must be an integer, got {generation!r:.40}")
        if not table.LIVE_GENERATION <= generation <= table.MAX_GENERATION:
            raise LockConfigurationError("generation", f"must be 1..{table.MAX_GENERATION}, got {generation}")
        return replace(self, generation=generation)

    # --- keys -------------------------------------------------------------------------------------------
    @property
    def manual(self) -> bool:
        """Whether this context runs a manual generation (2+): the manual lock item, no pause, no misses."""
        return self.generation != table.LIVE_GENERATION

    @property
    def lock_key(self) -> str:
        """Partition key of the lock item this context's leases live on (live, or manual for generation 2+)."""
        return table.manual_lock_key(self.job_name) if self.manual else table.lock_key(self.job_name)

    def slot_key(self, slot: Slot) -> str:
        """Partition key of the slot's history item of this context's generation."""
        return table.slot_key(self.job_name, slot.iso, self.generation)

    # --- times ------------------------------------------------------------------------------------------
    def ttl_epoch_s(self, now_ms: int) -> int:
        """The ``ttl_epoch_s`` of a slot item written at ``now_ms``."""
        return now_ms // 1000 + self.history_ttl_s

    def lease_expiry_ms(self, now_ms: int, deadline_ms: int | None) -> int:
        """A lease's expiry when taken or renewed at ``now_ms``: ``min(now + lease, deadline_ms)``."""
        expires = now_ms + self.lease_duration_ms
        return expires if deadline_ms is None else min(expires, deadline_ms)

    def holder_budget(self, lease: Lease) -> RetryBudget:
        """The retry budget of a holder's write: ends at the lease's expiry or the invocation deadline."""
        ends = [lease.expires_at_ms] + ([lease.deadline_ms] if lease.deadline_ms is not None else [])
        return RetryBudget(
            clock_ms=self.clock_ms,
            sleep_s=self.sleep_s,
            deadline_ms=min(ends),
            max_attempts=self.max_transient_attempts,
        )

    def racer_budget(self, now_ms: int, deadline_ms: int | None) -> RetryBudget:
        """The retry budget of a racer (acquisition, missed-slot record): a quarter lease, fewer attempts."""
        ends = [now_ms + int(self.lease_duration_ms * LOSER_RETRY_LEASE_SHARE)]
        if deadline_ms is not None:
            ends.append(deadline_ms)
        return RetryBudget(
            clock_ms=self.clock_ms, sleep_s=self.sleep_s, deadline_ms=min(ends), max_attempts=LOSER_TRANSIENT_ATTEMPTS
        )

    # --- the lock item (slotlock._client.LockReader) -----------------------------------------------------
    def get_lock_item(self) -> dict[str, Any] | None:
        """The job's lock item as stored (DynamoDB JSON, strongly consistent read), ``None`` when absent."""
        return self.io.get(self.lock_key)

    def decode_lock(self, item: Mapping[str, Mapping[str, Any]]) -> LockRecord:
        """Decode and type-check this job's lock item (DynamoDB JSON): :func:`slotlock.codec.decode_lock_item`."""
        return codec.decode_lock_item(item, self.lock_key)


def _positive_seconds(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
