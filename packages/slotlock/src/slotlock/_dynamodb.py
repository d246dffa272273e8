"""The DynamoDB slot lock: :class:`SlotLock`, the public facade of every protocol operation.

One table serves many jobs. Per job it holds:

- the **lock item** ``pk = "lock#<job>"``, never deleted and never given a TTL attribute: it carries the
  fencing counter, which must stay strictly monotonic for the life of the table (a deleted counter
  restarts at 1, and every future winner would then be rejected as stale);
- one **slot item** per schedule slot, ``pk = "slot#<job>#<slot iso>"``: status, in-flight state for a
  successor, outcome; it carries ``ttl_epoch_s`` so DynamoDB TTL garbage-collects old history.

Correctness never depends on TTL deletion (AWS deletes expired items lazily, "typically within a few
days"; DynamoDB Local within seconds): lease expiry is compared in the condition expressions.
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/howitworks-ttl.html

Clock assumption: lease expiry is the *caller's* wall clock (epoch ms, injected as ``clock_ms``).
DynamoDB condition expressions have no server clock, so racers whose clocks differ by ``skew`` may
take over up to ``skew`` early. Keep the lease much longer than the worst skew (Lambda hosts are
NTP/chrony-synchronised, typically to well under a second). Fencing makes an early takeover safe:
the superseded holder's commit is conditioned on its token and rejected. Commits check the token,
never a clock.

:class:`SlotLock` holds its validated settings, the table client and the clock, and derives the keys, the history
TTL, lease expiries and retry budgets from them; its protocol steps are plain functions over it:
:mod:`slotlock._acquire` (live and manual), :mod:`slotlock._holder` (heartbeat, state, release),
:mod:`slotlock._commit`, :mod:`slotlock._missed`, :mod:`slotlock._reads` (reads, operator surface). Times are the
caller's wall clock in epoch milliseconds (``clock_ms``, ``*_ms``); durations are named with their unit.

Condition expressions: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
ALL_OLD on failure: https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html#DDB-UpdateItem-request-ReturnValuesOnConditionCheckFailure
Transactions: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import _acquire as acquire
from . import _commit as commit
from . import _holder as holder
from . import _missed as missed
from . import _reads as reads
from . import codec, table
from ._client import LockTableClient
from ._lease import CommitReceipt, Lease, LockRecord, Loss, SlotOutcomeName
from ._transient import (
    DEFAULT_MAX_TRANSIENT_ATTEMPTS,
    LOSER_RETRY_LEASE_SHARE,
    LOSER_TRANSIENT_ATTEMPTS,
    ClockMs,
    RetryBudget,
    system_clock_ms,
)
from .capacity import CapacityMeter
from .errors import LockConfigurationError, LockNotAcquiredError
from .slot import Slot

if TYPE_CHECKING:  # pragma: no cover - stubs are optional
    from mypy_boto3_dynamodb.client import DynamoDBClient

# (The retry defaults and the clock are defined in slotlock._transient, and imported from here too.)
DEFAULT_LEASE_DURATION_S = 60.0
DEFAULT_HISTORY_TTL_S = 30 * 24 * 3600
#: Deliveries whose scheduled time is further ahead of the caller's clock than this are refused: acquiring a
#: future slot would make every earlier slot lose as "superseded" until real time caught up with it. The
#: Scheduler never delivers early (https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-schedule-flexible-time-windows.html:
#: a window only delays), so the allowance only covers clock skew between the Scheduler and the caller.
DEFAULT_MAX_SLOT_LEAD_S = 5.0


class SlotLock:
    """A fenced lease per job and schedule slot on one DynamoDB table.

    Parameters
    ----------
    table_name:
        Table with a string partition key ``pk``. TTL, if enabled, must be on ``ttl_epoch_s``.
    job_name:
        Job this lock serves (part of every key): :data:`slotlock.table.JOB_NAME_PATTERN`.
    client:
        A boto3 DynamoDB client; default ``boto3.client("dynamodb")`` with botocore's ``standard`` retry
        mode (retries throttling with backoff: https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html).
    lease_duration_s:
        Lease length in seconds (> 0). A crashed holder is taken over this long after its last renewal.
    heartbeat_interval_s:
        How often :class:`~slotlock.runner.SlotRun` renews (default a third of the lease); must be
        below half the lease so one late heartbeat does not lose it.
    max_slot_age_s:
        A delivery whose slot is older than this (by ``clock_ms``) is skipped as missed (a misfire
        policy); ``None`` accepts any age. Typically one schedule period.
    history_ttl_s:
        Lifetime of slot items (their ``ttl_epoch_s``), seconds.
    max_slot_lead_s:
        A delivery whose slot is more than this many seconds ahead of ``clock_ms`` is refused with
        :class:`InvalidEventError` before any request (default 5 s: a clock-skew allowance; schedulers
        deliver at or after the scheduled time, never early). Acquiring a future slot (a hostile or
        mistyped event) would make the current slot's racers lose as ``superseded``. ``0`` refuses any
        lead; ``None`` accepts any lead (tests only).
    clock_ms:
        Callable returning the caller's wall clock in epoch milliseconds (inject a fake in tests).
    sleep_s:
        Sleeps that many seconds between retries of transient answers (inject with a fake clock).
    max_transient_attempts:
        Requests in all that a holder's write (renew, state, commit, release) spends on transient
        answers (throttling, conflicting transactions, server errors) before raising the retryable
        :class:`TransientLockError`; never past the lease's expiry nor the invocation deadline.
        A racer's acquisition spends at most ``LOSER_TRANSIENT_ATTEMPTS`` within a quarter lease.

    Raises
    ------
    LockConfigurationError
        On any invalid parameter, naming it.

    Examples
    --------
    >>> lock = SlotLock("locks", "flights-dashboard", lease_duration_s=45)   # doctest: +SKIP
    >>> result = lock.try_acquire(Slot.parse("2026-11-22T00:30:00Z"), owner_id=context.aws_request_id)  # doctest: +SKIP
    >>> if result.acquired: ...  # run, then lock.commit(result)  # doctest: +SKIP
    """

    def __init__(
        self,
        table_name: str,
        job_name: str,
        *,
        client: DynamoDBClient | None = None,
        lease_duration_s: float = DEFAULT_LEASE_DURATION_S,
        heartbeat_interval_s: float | None = None,
        max_slot_age_s: float | None = None,
        history_ttl_s: int = DEFAULT_HISTORY_TTL_S,
        max_slot_lead_s: float | None = DEFAULT_MAX_SLOT_LEAD_S,
        clock_ms: ClockMs = system_clock_ms,
        sleep_s: Callable[[float], None] = time.sleep,
        max_transient_attempts: int = DEFAULT_MAX_TRANSIENT_ATTEMPTS,
    ) -> None:
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
        self.table_name = table_name
        self.job_name = job_name
        self.io = LockTableClient(table_name, client)
        self.lease_duration_ms = int(lease_duration_s * 1000)
        self.heartbeat_interval_ms = int(heartbeat_interval_s * 1000)
        self.max_slot_age_ms = None if max_slot_age_s is None else int(max_slot_age_s * 1000)
        self.history_ttl_s = history_ttl_s
        self.max_slot_lead_ms = None if max_slot_lead_s is None else int(max_slot_lead_s * 1000)
        #: The clock and the sleep can be swapped (e.g. by tests); a lock from :meth:`for_generation` keeps its own.
        self.clock_ms = clock_ms
        self.sleep_s = sleep_s
        self.max_transient_attempts = max_transient_attempts
        #: The generation this lock runs (1: the live schedule; 2..: a manual run, on the manual lock item).
        self.generation = table.LIVE_GENERATION

    def for_generation(self, generation: int) -> SlotLock:
        """This lock for ``generation`` of each slot: 1 is the live schedule's run (this lock); 2, 3, ... are
        manual runs (a re-run, a backfill), whose leases live on the job's manual lock item with its own
        fencing counter and whose history items are ``slot#<job>#<slot>#g<n>`` (:mod:`slotlock.manual`).

        The returned lock shares the client, clock and settings. Raises :class:`LockConfigurationError`
        outside 1..1,000,000.
        """
        if isinstance(generation, bool) or not isinstance(generation, int):
            raise LockConfigurationError("generation", f"must be an integer, got {generation!r:.40}")
        if not table.LIVE_GENERATION <= generation <= table.MAX_GENERATION:
            raise LockConfigurationError("generation", f"must be 1..{table.MAX_GENERATION}, got {generation}")
        clone = copy.copy(self)
        clone.generation = generation
        return clone

    @property
    def context(self) -> SlotLock:
        """The lock itself: its protocol steps run on it (1.x callers pass it to ``request_generation``)."""
        return self

    @property
    def manual(self) -> bool:
        """Whether this lock runs a manual generation (2+): the manual lock item, no pause, no misses."""
        return self.generation != table.LIVE_GENERATION

    @property
    def lock_key(self) -> str:
        """Partition key of the lock item this lock's leases live on (live, or manual for generation 2+)."""
        return table.manual_lock_key(self.job_name) if self.manual else table.lock_key(self.job_name)

    def slot_key(self, slot: Slot) -> str:
        """Partition key of the slot's history item of this lock's generation."""
        return table.slot_key(self.job_name, slot.iso, self.generation)

    @property
    def capacity(self) -> CapacityMeter:
        """What this lock's requests consumed so far, as DynamoDB reported it (:mod:`slotlock.capacity`)."""
        return self.io.capacity

    @property
    def client(self) -> DynamoDBClient:
        """The DynamoDB client (created lazily with the ``standard`` retry mode)."""
        return self.io.client

    def ttl_epoch_s(self, now_ms: int) -> int:
        """The ``ttl_epoch_s`` of a slot item written at ``now_ms``."""
        return now_ms // 1000 + self.history_ttl_s

    def lease_expiry_ms(self, now_ms: int, deadline_ms: int | None) -> int:
        """A lease's expiry when taken or renewed at ``now_ms``: ``min(now + lease, deadline_ms)``."""
        expires = now_ms + self.lease_duration_ms
        return expires if deadline_ms is None else min(expires, deadline_ms)

    def holder_budget(self, lease: Lease) -> RetryBudget:
        """The retry budget of a holder's write: ends at the lease's expiry or the invocation deadline."""
        ends = (lease.expires_at_ms, lease.deadline_ms)
        return RetryBudget.ending(self.clock_ms, self.sleep_s, ends, self.max_transient_attempts)

    def racer_budget(self, now_ms: int, deadline_ms: int | None) -> RetryBudget:
        """The retry budget of a racer (acquisition, missed-slot record): a quarter lease, fewer attempts."""
        ends = (now_ms + int(self.lease_duration_ms * LOSER_RETRY_LEASE_SHARE), deadline_ms)
        return RetryBudget.ending(self.clock_ms, self.sleep_s, ends, LOSER_TRANSIENT_ATTEMPTS)

    # --- acquire --------------------------------------------------------------------------------------
    def try_acquire(self, slot: Slot, owner_id: str, *, deadline_ms: int | None = None) -> Lease | Loss:
        """Race for the lease of ``slot``: one conditional UpdateItem decides.

        The write sets owner and expiry (``min(now + lease, deadline_ms)``) and bumps the fencing token
        with ``ADD``, returning ALL_NEW. A loser learns why from ``ReturnValuesOnConditionCheckFailure=ALL_OLD``
        and gets a :class:`Loss` after this one request. Exceptions to "one request":

        - a winner that takes over (or re-enters) a slot reads its slot item once (consistent), to adopt
          the predecessor's in-flight state;
        - a slot that will never run is recorded MISSED by exactly one of its racers with one more
          conditional write: ``too_old`` (instead of an acquisition), ``overrun`` and ``superseded``;
          ``too_old`` and ``overrun`` in a transaction that also adds the slot to the lock item's missed
          slots (on condition that it is not acquired), so the acquire condition refuses it from then on;
        - an answer that decides nothing (a transaction in flight on the lock item, throttling past
          botocore's retries) is retried a few times within a quarter lease, then lost as ``conflict`` or
          ``unavailable`` (a normal return, never an exception).

        Parameters
        ----------
        slot:
            The schedule slot from the event (:meth:`Slot.from_event`).
        owner_id:
            The Lambda request id (kept by Lambda across async retries of one event), 1..512 chars.
        deadline_ms:
            The invocation's deadline, epoch ms by ``clock_ms``; the lease never extends past it.

        Returns
        -------
        Lease | Loss
            Check ``result.acquired``.

        Raises
        ------
        InvalidEventError
            The slot is more than ``max_slot_lead_s`` ahead of the clock (no request is sent).
        UnsupportedSchemaVersionError
            The lock item (or the slot item adopted on a takeover) has a table layout this slotlock does not
            read (``schema_version``, docs/protocol.md): the condition refused it and the loser learnt it from
            ALL_OLD, after this one request; nothing was written. Not transient: never retried.
        CorruptLockItemError
            The lock item holds wrong-typed or missing attributes (the condition could never be true), or
            the slot item adopted on a takeover is undecodable (the lease is released again first).
        TransientLockError
            A request went unanswered (dropped connection) and the retries stayed undecided: we may hold
            the lease, so Lambda's retry (same request id) must re-enter it.
        LockBackendError
            DynamoDB refused the request for good (a missing table, access denied).
        """
        return acquire.try_acquire(self, slot, owner_id, deadline_ms)

    def acquire(self, slot: Slot, owner_id: str, *, deadline_ms: int | None = None) -> Lease:
        """Like :meth:`try_acquire` but raises :class:`LockNotAcquiredError` (carrying the ``Loss``) on loss."""
        result = self.try_acquire(slot, owner_id, deadline_ms=deadline_ms)
        if isinstance(result, Loss):
            raise LockNotAcquiredError(result)
        return result

    # --- renew / state ----------------------------------------------------------------------------------
    def heartbeat(self, lease: Lease) -> Lease:
        """Renew the lease to ``min(now + lease_duration, lease.deadline_ms)``.

        Conditional on owner and fencing token (no clock): a lease that expired but was not taken over
        is renewed; one that was taken over raises. Sends nothing when the deadline caps the expiry.

        Raises
        ------
        LeaseLostError
            Another owner or token holds the lock (ALL_OLD shows it); write nothing more.
        UnsupportedSchemaVersionError
            The lock item has a newer table layout (ALL_OLD shows it): not a lost lease, not retried.
        TransientLockError
            Throttled or conflicting past the retry budget (which ends at the lease's expiry): retryable,
            the lease is not known to be lost.
        """
        return holder.heartbeat(self, lease)

    def record_state(
        self, lease: Lease, changes: Mapping[str, Any], *, writes: Sequence[Mapping[str, Any]] = ()
    ) -> Lease:
        """Record in-flight state on the slot item for a successor, and renew the lease, atomically.

        ``changes`` (JSON-serialisable, small: at most 64 KiB once merged) are merged into the lease's
        state. One TransactWriteItems: the lock item's renewal is conditional on owner and token, so a
        superseded holder cannot overwrite its successor's state.

        The slot item's write is conditional too: it never overwrites a terminal record (SUCCEEDED,
        FAILED, MISSED). Transient cancellation reasons are retried within the lease (see
        :mod:`slotlock._transient`).

        Raises
        ------
        LeaseLostError
            The lease was taken over (the lock item's condition failed); nothing was written.
        UnsupportedSchemaVersionError
            The lock item or the slot item has a newer table layout; nothing was written, not retried.
        CorruptLockItemError
            The slot item already holds a terminal record although the lock names us as its holder.
        CommitConflictError
            One of ``writes`` (the caller's own TransactWriteItems entries, in the same transaction) failed its
            condition (``index`` into ``writes``): nothing was written.
        TransientLockError, WriteRejectedError
            Transient past the budget (retryable) / refused for good (record the slot FAILED).
        """
        return holder.record_state(self, lease, changes, writes)

    # --- finish -----------------------------------------------------------------------------------------
    def commit(
        self,
        lease: Lease,
        *,
        writes: Sequence[Mapping[str, Any]] = (),
        summary: Mapping[str, Any] | None = None,
        outcome: SlotOutcomeName = "succeeded",
        error: Mapping[str, Any] | None = None,
        reason: str | None = None,
    ) -> CommitReceipt:
        """Finish the slot and release the lease in one fenced TransactWriteItems.

        The transaction holds, all-or-nothing:

        1. the lock item: condition ``owner = ours AND fencing_token = ours``; removes owner and expiry
           (release) and records the slot as the last finished one (complete) in the same write;
        2. the slot item: final status (``SUCCEEDED``/``FAILED``, or ``MISSED`` with ``reason``: the holder gave
           up, e.g. no capacity permit before the slot's maximum age), token, summary or error;
        3. the caller's own writes (TransactWriteItems entries in DynamoDB client format, e.g. results
           conditioned on the token): at most 100 items in all, 4 MB in all.

        A retry of a commit that already applied (ALL_OLD shows the slot finished under our token, or,
        once a newer slot finished, our slot item does) is reported as success (``already_applied``),
        with the outcome that was actually applied.

        A cancellation is judged by its per-item reasons (:mod:`slotlock._transient`): throttling and
        transaction conflicts on any item (the caller's included) are retried within the lease and the
        invocation deadline; only a failed condition on the lock item means the token is stale.

        Raises
        ------
        StaleFencingTokenError
            Our token is no longer current (we were taken over): nothing was written.
        UnsupportedSchemaVersionError
            An item of the lock table in the transaction (the lock item, the slot item, or one of ``writes``
            on the lock table) has a newer table layout: checked before anything else; nothing was written.
        CommitConflictError
            One of the caller's writes failed its own condition: nothing was written.
        CorruptLockItemError
            The slot item already holds a terminal record although the lock names us as its holder.
        TransientLockError
            Throttled or conflicting past the retry budget: retryable; nothing was written (or, if the
            last answer was lost, a Lambda retry finds its own commit applied).
        WriteRejectedError
            DynamoDB refused the transaction for good (``ValidationError``: an item over 400 KB, the
            transaction over 4 MB; ``ItemCollectionSizeLimitExceeded``): nothing was written.
        LockBackendError
            DynamoDB failed otherwise.
        """
        return commit.commit(self, lease, writes=writes, summary=summary, outcome=outcome, error=error, reason=reason)

    def release(self, lease: Lease, *, given_back: str | None = None) -> None:
        """Give the lease up without finishing the slot (e.g. before re-raising an unexpected error).

        Sets the expiry to now but keeps owner, token and slot, so the next acquirer of this slot (our
        own Lambda retry, or another racer) adopts the recorded in-flight state at once. ``given_back`` (why, e.g.
        ``capacity``: :meth:`SlotRun.give_back`) is written too: if superseded, the slot is MISSED with that reason.

        Raises
        ------
        LockConfigurationError
            ``given_back`` is not 1..64 characters (nothing was sent).
        LeaseLostError
            The lease was already taken over (nothing to release).
        UnsupportedSchemaVersionError
            The lock item has a newer table layout: nothing was written.
        TransientLockError
            Throttled past the budget (the lease then simply expires).
        """
        holder.release(self, lease, given_back=given_back)

    def record_missed(self, slot: Slot, reason: str, *, detail: Mapping[str, Any] | None = None) -> bool:
        """Record ``slot`` as MISSED with ``reason``, unless its history item already holds a record.

        One conditional UpdateItem (slot item absent, or RUNNING under a holder that can no longer finish):
        of many racers recording the same slot, exactly one writes, and a terminal record is never
        overwritten. Returns whether this call wrote; an SDK resend of our own applied write (its response
        lost) is recognised by the write's random ``record_id`` and also returns ``True``. Transient
        failures past a short budget return ``False`` (logged): a racer never raises for them.
        """
        budget = self.racer_budget(self.clock_ms(), None)
        return missed.record_missed(self, slot, reason, dict(detail or {}), guard_lock=False, budget=budget)

    # --- reads ------------------------------------------------------------------------------------------
    def get_lock(self) -> LockRecord:
        """The job's lock item (strongly consistent read); a default record on a fresh table."""
        return reads.get_lock(self)

    def get_slot(self, slot: Slot) -> dict[str, Any] | None:
        """The slot's history item decoded to plain Python (``*_json`` attributes parsed), or ``None``.

        Raises
        ------
        CorruptLockItemError
            A ``*_json`` attribute is not a String holding a JSON object (``key`` is the slot item's).
        """
        return reads.get_slot(self, slot)

    def get_slot_state(self, slot: Slot) -> dict[str, Any]:
        """In-flight state recorded for ``slot`` (empty when none). Raises :class:`CorruptLockItemError`."""
        record = self.get_slot(slot)
        return dict(record.get("state") or {}) if record else {}

    # --- operator surface (slotlock._admin) --------------------------------------------------------------
    def get_lock_item(self) -> dict[str, Any] | None:
        """The job's lock item as stored (DynamoDB JSON, strongly consistent read), ``None`` when absent.

        For operator tools that must see an item :meth:`decode_lock` would refuse (e.g. one that lost its
        fencing counter). Raises :class:`LockBackendError` when DynamoDB fails.
        """
        return self.io.get(self.lock_key)

    def update_lock_item(
        self, update_expression: str, condition_expression: str, names: Mapping[str, str], values: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """One conditional UpdateItem of the job's lock item (operator tools); returns the item as it was
        (ALL_OLD), ``None`` if it did not exist. The table layout is set and checked too (``schema_version``).

        Raises
        ------
        botocore.exceptions.ClientError
            The condition failed (``ConditionalCheckFailedException``; ALL_OLD in ``response["Item"]``).
        UnsupportedSchemaVersionError
            The lock item has a newer table layout; nothing was written.
        LockBackendError
            DynamoDB failed otherwise.
        """
        return reads.update_lock_item(self, update_expression, condition_expression, names, values)

    # --- wire helpers -------------------------------------------------------------------------------------
    def decode_lock(self, item: Mapping[str, Mapping[str, Any]]) -> LockRecord:
        """Decode and type-check this job's lock item (DynamoDB JSON): :func:`slotlock.codec.decode_lock_item`."""
        return codec.decode_lock_item(item, self.lock_key)


#: The lock as its protocol steps see it (slotlock 1.0's name for the context the lock held).
LockContext = SlotLock


def _positive_seconds(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
