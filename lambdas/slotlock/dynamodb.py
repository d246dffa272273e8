"""The DynamoDB slot lock: the only module that knows DynamoDB's wire format.

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

Condition expressions: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
ALL_OLD on failure: https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html#DDB-UpdateItem-request-ReturnValuesOnConditionCheckFailure
Transactions: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html
"""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from . import codec, decisions, table, wire
from .client import Cancelled as _Cancelled
from .client import LockTableClient
from .errors import (
    CommitConflictError,
    CorruptLockItemError,
    InvalidEventError,
    LeaseLostError,
    LockBackendError,
    LockConfigurationError,
    LockNotAcquiredError,
    StaleFencingTokenError,
    TransientLockError,
)
from .expressions import (
    ACQUIRE_CONDITION,
    ACQUIRE_UPDATE,
    ACQUIRED,
    ERROR_JSON,
    EXPIRES,
    FINISHED_AT,
    JOB,
    LAST_FIN_AT,
    LAST_FIN_OUTCOME,
    LAST_FIN_SLOT,
    LAST_FIN_TOKEN,
    LAST_OK_AT,
    LAST_OK_SLOT,
    LEASE_SLOT,
    MARK_SLOT_MISSED,
    MISSED_SLOTS,
    OWNER,
    OWNER_AND_TOKEN_MATCH,
    PK,
    PREV_OWNER,
    PREV_SLOT,
    REASON,
    RECORD_ID,
    SLOT_NOT_ACQUIRED,
    STATE_JSON,
    STATUS,
    STATUS_FAILED,
    STATUS_MISSED,
    STATUS_RUNNING,
    STATUS_SUCCEEDED,
    SUMMARY_JSON,
    TERMINAL_STATUSES,
    TOKEN,
    slot_item_update,
)
from .lease import CommitReceipt, Lease, LockRecord, Loss, LossReason, SlotOutcomeName
from .slot import Slot
from .transient import RetryBudget

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

logger = logging.getLogger(__name__)


def system_clock_ms() -> int:
    """Wall clock, epoch milliseconds (the default ``clock_ms``)."""
    return time.time_ns() // 1_000_000


def _json(value: Mapping[str, Any] | None) -> str:
    # dict(): json only encodes dicts as objects; any other Mapping (e.g. a Lease's read-only state)
    # would go through default=str and be stored as its repr.
    return json.dumps(dict(value) if value is not None else {}, sort_keys=True, separators=(",", ":"), default=str)


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
        self.table_name = table_name
        self.job_name = job_name
        self.lease_duration_ms = int(lease_duration_s * 1000)
        self.heartbeat_interval_ms = int(heartbeat_interval_s * 1000)
        self.max_slot_age_ms = None if max_slot_age_s is None else int(max_slot_age_s * 1000)
        self.history_ttl_s = history_ttl_s
        self.max_slot_lead_ms = None if max_slot_lead_s is None else int(max_slot_lead_s * 1000)
        if (
            isinstance(max_transient_attempts, bool)
            or not isinstance(max_transient_attempts, int)
            or not (1 <= max_transient_attempts <= 20)
        ):
            raise LockConfigurationError(
                "max_transient_attempts", f"must be an integer from 1 to 20, got {max_transient_attempts!r}"
            )
        self.clock_ms = clock_ms
        self.sleep_s = sleep_s
        self.max_transient_attempts = max_transient_attempts
        self._io = LockTableClient(table_name, client)
        self.lock_key = f"lock#{job_name}"

    # --- plumbing -------------------------------------------------------------------------------------
    @property
    def client(self) -> DynamoDBClient:
        """The DynamoDB client (created lazily with the ``standard`` retry mode)."""
        return self._io.client

    def slot_key(self, slot: Slot) -> str:
        """Partition key of a slot's history item."""
        return f"slot#{self.job_name}#{slot.iso}"

    def holder_budget(self, lease: Lease) -> RetryBudget:
        """The retry budget of a holder's write: ends at the lease's expiry or the invocation deadline."""
        ends = [lease.expires_at_ms] + ([lease.deadline_ms] if lease.deadline_ms is not None else [])
        return RetryBudget(
            clock_ms=self.clock_ms,
            sleep_s=self.sleep_s,
            deadline_ms=min(ends),
            max_attempts=self.max_transient_attempts,
        )

    def _racer_budget(self, now_ms: int, deadline_ms: int | None) -> RetryBudget:
        ends = [now_ms + int(self.lease_duration_ms * LOSER_RETRY_LEASE_SHARE)]
        if deadline_ms is not None:
            ends.append(deadline_ms)
        return RetryBudget(
            clock_ms=self.clock_ms, sleep_s=self.sleep_s, deadline_ms=min(ends), max_attempts=LOSER_TRANSIENT_ATTEMPTS
        )

    def _ttl(self, now_ms: int) -> int:
        return now_ms // 1000 + self.history_ttl_s

    def _lease_expiry(self, now_ms: int, deadline_ms: int | None) -> int:
        expires = now_ms + self.lease_duration_ms
        return expires if deadline_ms is None else min(expires, deadline_ms)

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
        CorruptLockItemError
            The lock item holds wrong-typed or missing attributes (the condition could never be true), or
            the slot item adopted on a takeover is undecodable (the lease is released again first).
        TransientLockError
            A request went unanswered (dropped connection) and the retries stayed undecided: we may hold
            the lease, so Lambda's retry (same request id) must re-enter it.
        LockBackendError
            DynamoDB refused the request for good (a missing table, access denied).
        """
        if not isinstance(owner_id, str) or not 1 <= len(owner_id) <= 512:
            raise LockConfigurationError("owner_id", f"must be 1..512 characters, got {owner_id!r}")
        now_ms = self.clock_ms()
        if self.max_slot_lead_ms is not None and slot.epoch_ms - now_ms > self.max_slot_lead_ms:
            raise InvalidEventError(
                "scheduled_time",
                f"{slot.iso} is {(slot.epoch_ms - now_ms) / 1000:.0f} s ahead of this caller's clock; at most"
                f" {self.max_slot_lead_ms / 1000:.0f} s is accepted (a future slot would supersede every earlier one)",
            )
        if self.max_slot_age_ms is not None and now_ms - slot.epoch_ms > self.max_slot_age_ms:
            recorded = self._record_missed(
                slot,
                "too_old",
                {"age_ms": now_ms - slot.epoch_ms, "owner_id": owner_id},
                guard_lock=True,
                budget=self._racer_budget(now_ms, deadline_ms),
            )
            return Loss(self.job_name, slot, owner_id, "too_old", None, recorded)
        expires_ms = self._lease_expiry(now_ms, deadline_ms)
        if expires_ms <= now_ms:
            raise LockConfigurationError(
                "deadline_ms", f"{deadline_ms} is not after now ({now_ms}): no time to hold a lease"
            )
        params = {
            "TableName": self.table_name,
            "Key": {PK: {"S": self.lock_key}},
            "UpdateExpression": ACQUIRE_UPDATE,
            "ConditionExpression": ACQUIRE_CONDITION,
            "ExpressionAttributeNames": {
                "#pk": PK,
                "#job": JOB,
                "#token": TOKEN,
                "#owner": OWNER,
                "#expires": EXPIRES,
                "#acquired": ACQUIRED,
                "#lease_slot": LEASE_SLOT,
                "#prev_owner": PREV_OWNER,
                "#prev_slot": PREV_SLOT,
                "#last_fin_slot": LAST_FIN_SLOT,
                "#missed": MISSED_SLOTS,
            },
            "ExpressionAttributeValues": {
                ":owner": {"S": owner_id},
                ":expires": {"N": str(expires_ms)},
                ":now": {"N": str(now_ms)},
                ":slot": {"N": str(slot.epoch_s)},
                ":job": {"S": self.job_name},
                ":one": {"N": "1"},
                ":null": {"NULL": True},
            },
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        # The first answer decides (won, or lost with ALL_OLD saying why). Only an answer that decides
        # nothing is retried, a few times within a quarter lease: a transaction in flight on the lock item
        # (TransactionConflictException: the holder's commit) or throttling past botocore's retries. A racer
        # that stays undecided returns a normal loss ("conflict"/"unavailable"); but if a request may have
        # applied without us hearing of it (a dropped connection), we may hold the lease: then the retryable
        # TransientLockError goes to Lambda, whose retry (same request id) re-enters it.
        budget = self._racer_budget(now_ms, deadline_ms)
        outcome_unknown = False
        while True:
            try:
                response = self._io.call("UpdateItem", **params)
                break
            except ClientError as exc:
                if wire.is_conditional_failure(exc):
                    return self._loss(slot, owner_id, now_ms, self._old_lock_record(exc), deadline_ms)
                if wire.error_code(exc) == "ValidationException":
                    # e.g. ADD on a String fencing_token: name the corrupt attribute if that is the cause
                    self._raise_if_corrupt(exc)
                wrapped = self._io.wrap("UpdateItem", exc)
                if not wrapped.retryable:
                    raise wrapped from exc
                if budget.retry():
                    continue
                if outcome_unknown:
                    raise TransientLockError("UpdateItem", f"acquire: {wrapped}", attempts=budget.attempts) from exc
                reason: LossReason = (
                    "conflict" if wrapped.error_code == "TransactionConflictException" else "unavailable"
                )
                logger.warning(
                    "acquire of %s slot %s undecided after %d request(s) (%s): returning a %r loss",
                    self.job_name,
                    slot.iso,
                    budget.attempts,
                    wrapped.error_code,
                    reason,
                )
                return Loss(self.job_name, slot, owner_id, reason)
            except LockBackendError as exc:  # no answer at all: the write may have applied
                outcome_unknown = True
                if not budget.retry():
                    raise TransientLockError("UpdateItem", f"acquire: {exc}", attempts=budget.attempts) from exc
        record = self.decode_lock(response["Attributes"])
        return self._lease_from(record, slot, owner_id, now_ms, expires_ms, deadline_ms)

    def acquire(self, slot: Slot, owner_id: str, *, deadline_ms: int | None = None) -> Lease:
        """Like :meth:`try_acquire` but raises :class:`LockNotAcquiredError` (carrying the ``Loss``) on loss."""
        result = self.try_acquire(slot, owner_id, deadline_ms=deadline_ms)
        if isinstance(result, Loss):
            raise LockNotAcquiredError(result)
        return result

    def _lease_from(
        self, record: LockRecord, slot: Slot, owner_id: str, now_ms: int, expires_ms: int, deadline_ms: int | None
    ) -> Lease | Loss:
        previous_owner, previous_slot = record.previous_owner_id, record.previous_slot
        same_slot_predecessor = previous_owner is not None and previous_slot == slot
        superseded = (
            previous_slot if previous_owner is not None and previous_slot is not None and previous_slot < slot else None
        )
        lease = Lease(
            job_name=self.job_name,
            slot=slot,
            owner_id=owner_id,
            fencing_token=record.fencing_token,
            acquired_at_ms=now_ms,
            expires_at_ms=expires_ms,
            deadline_ms=deadline_ms,
            takeover_from=previous_owner if same_slot_predecessor and previous_owner != owner_id else None,
            reentered=same_slot_predecessor and previous_owner == owner_id,
            superseded_slot=superseded,
            last_succeeded_at_ms=record.last_succeeded_at_ms,
            stale_missed_slots=frozenset(missed for missed in record.missed_slots if missed < slot),
        )
        if superseded is not None:
            # Recorded now, not at commit: a later re-entry of this slot overwrites the previous_* copy. The
            # older slot can never finish (its holder's token is stale), whatever becomes of this one.
            recorded = self._record_missed(
                superseded,
                "superseded",
                {"superseded_by_slot": slot.iso, "fencing_token": lease.fencing_token},
                guard_lock=False,
                budget=self._racer_budget(now_ms, deadline_ms),
            )
            lease = replace(lease, superseded_recorded=recorded)
        if not same_slot_predecessor:
            return lease
        # A takeover or re-entry: one consistent read of the slot item, for the predecessor's in-flight state
        # to adopt (a query id). A terminal record there (impossible unless the table was edited: the acquire
        # condition refuses finished and missed slots) forbids running the slot all the same.
        try:
            item = self.get_slot(slot)
        except CorruptLockItemError:
            # Nothing can be adopted from a tampered slot item: give the lease back (kept owner, token
            # and slot, expiry now) so the error, not a stuck lease, is what the next racer meets too.
            self._set_expiry(lease, now_ms, operation="release")
            raise
        if item is not None and item.get(STATUS) in TERMINAL_STATUSES:
            return self._abandon_ended_slot(lease, record, str(item[STATUS]))
        if item is not None:
            lease = replace(lease, state=MappingProxyType(dict(item.get("state") or {})))
        return lease

    def _abandon_ended_slot(self, lease: Lease, record: LockRecord, status: str) -> Loss:
        """We took over a slot whose history item is already terminal: run nothing.

        Only an edited table gets here (the acquire condition refuses finished and missed slots); it is
        checked on takeovers, which read the slot item anyway.

        One fenced UpdateItem finishes the slot on the lock item (last finished slot = this slot, with the
        recorded outcome) and releases the lease, so later deliveries of the slot lose as ``slot_finished``
        and never run it either. If that write fails, the lease simply expires.
        """
        now_ms = self.clock_ms()
        outcome = status.lower()
        update = self._lock_update(
            lease,
            "SET #fin_slot = :slot, #fin_outcome = :outcome, #fin_token = :token, #fin_at = :now REMOVE #expires, #owner",
            {
                "#fin_slot": LAST_FIN_SLOT,
                "#fin_outcome": LAST_FIN_OUTCOME,
                "#fin_token": LAST_FIN_TOKEN,
                "#fin_at": LAST_FIN_AT,
                "#expires": EXPIRES,
            },
            {":slot": {"N": str(lease.slot.epoch_s)}, ":outcome": {"S": outcome}, ":now": {"N": str(now_ms)}},
        )["Update"]
        try:
            self._io.send("UpdateItem", update, self.holder_budget(lease))
        except (ClientError, LockBackendError) as exc:
            logger.warning(
                "slot %s already ended (%s); could not mark it finished on the lock item, the lease"
                " expires by itself: %s",
                lease.slot.iso,
                status,
                exc,
            )
        logger.info(
            "slot %s was already %s when acquired (token %d): not run", lease.slot.iso, status, lease.fencing_token
        )
        current = replace(
            record,
            owner_id=None,
            lease_expires_at_ms=None,
            last_finished_slot=lease.slot,
            last_finished_outcome=outcome,
            last_finished_token=lease.fencing_token,
            last_finished_at_ms=now_ms,
        )
        return Loss(self.job_name, lease.slot, lease.owner_id, "slot_finished", current)

    def _loss(
        self, slot: Slot, owner_id: str, now_ms: int, current: LockRecord | None, deadline_ms: int | None
    ) -> Lease | Loss:
        if current is None:
            # The item vanished between the write and the fallback read: only an operator deletes it.
            raise CorruptLockItemError(self.lock_key, PK, "disappeared during acquisition (was the lock item deleted?)")
        verdict = decisions.classify_loss(current, slot, owner_id, now_ms)
        if verdict == "ours":
            # Our own write already applied (an SDK retry of it failed the condition): that is our success.
            return self._lease_from(current, slot, owner_id, now_ms, current.lease_expires_at_ms or now_ms, deadline_ms)
        if verdict == "unexplained":
            raise CorruptLockItemError(
                self.lock_key,
                EXPIRES,
                f"made the acquire condition false although no live lease or finished slot explains it: {current}",
            )
        reason: LossReason = verdict
        recorded = False
        if decisions.records_missed(reason, current, slot):
            # The slot will never run: exactly one of its racers records it MISSED (conditional writes). A
            # superseded slot can never be acquired again (the lock's slots only move forward); an overrun
            # one could be, once the older holder finishes, hence the lock-item check in the same transaction.
            detail = {
                "owner_id": owner_id,
                "holder_owner_id": current.owner_id,
                "holder_slot": current.lease_slot.iso if current.lease_slot else None,
                "last_finished_slot": current.last_finished_slot.iso if current.last_finished_slot else None,
                "fencing_token": current.fencing_token,
            }
            recorded = self._record_missed(
                slot, reason, detail, guard_lock=reason == "overrun", budget=self._racer_budget(now_ms, deadline_ms)
            )
        return Loss(self.job_name, slot, owner_id, reason, current, recorded)

    # --- renew / state ----------------------------------------------------------------------------------
    def heartbeat(self, lease: Lease) -> Lease:
        """Renew the lease to ``min(now + lease_duration, lease.deadline_ms)``.

        Conditional on owner and fencing token (no clock): a lease that expired but was not taken over
        is renewed; one that was taken over raises. Sends nothing when the deadline caps the expiry.

        Raises
        ------
        LeaseLostError
            Another owner or token holds the lock (ALL_OLD shows it); write nothing more.
        TransientLockError
            Throttled or conflicting past the retry budget (which ends at the lease's expiry): retryable,
            the lease is not known to be lost.
        """
        now_ms = self.clock_ms()
        expires_ms = self._lease_expiry(now_ms, lease.deadline_ms)
        if expires_ms <= lease.expires_at_ms:
            return lease
        self._set_expiry(lease, expires_ms, operation="heartbeat")
        return replace(lease, expires_at_ms=expires_ms)

    def record_state(self, lease: Lease, changes: Mapping[str, Any]) -> Lease:
        """Record in-flight state on the slot item for a successor, and renew the lease, atomically.

        ``changes`` (JSON-serialisable, small: at most 64 KiB once merged) are merged into the lease's
        state. One TransactWriteItems: the lock item's renewal is conditional on owner and token, so a
        superseded holder cannot overwrite its successor's state.

        The slot item's write is conditional too: it never overwrites a terminal record (SUCCEEDED,
        FAILED, MISSED). Transient cancellation reasons are retried within the lease (see
        :mod:`slotlock.transient`).

        Raises
        ------
        LeaseLostError
            The lease was taken over (the lock item's condition failed); nothing was written.
        CorruptLockItemError
            The slot item already holds a terminal record although the lock names us as its holder.
        TransientLockError, WriteRejectedError
            Transient past the budget (retryable) / refused for good (record the slot FAILED).
        """
        state = {**lease.state, **changes}
        state_json = _json(state)
        if len(state_json.encode()) > MAX_STATE_BYTES:
            raise LockConfigurationError("changes", f"state is {len(state_json)} bytes; at most {MAX_STATE_BYTES}")
        now_ms = self.clock_ms()
        expires_ms = max(self._lease_expiry(now_ms, lease.deadline_ms), lease.expires_at_ms)
        items = [
            self._lock_update(
                lease, "SET #expires = :expires", {"#expires": EXPIRES}, {":expires": {"N": str(expires_ms)}}
            ),
            {
                "Update": slot_item_update(
                    self.table_name,
                    self.slot_key(lease.slot),
                    job=self.job_name,
                    slot_iso=lease.slot.iso,
                    slot_epoch_s=lease.slot.epoch_s,
                    status=STATUS_RUNNING,
                    ttl_epoch_s=self._ttl(now_ms),
                    attributes={
                        TOKEN: {"N": str(lease.fencing_token)},
                        OWNER: {"S": lease.owner_id},
                        STATE_JSON: {"S": state_json},
                    },
                    started_at_ms=now_ms,
                )
            },
        ]
        try:
            self._transact(items, operation="record_state", budget=self.holder_budget(lease), lease=lease)
        except _Cancelled as cancelled:
            if cancelled.judged.verdict == "lease_gone":
                raise LeaseLostError(lease, cancelled.lock_record(self), operation="record_state") from cancelled.error
            raise self._slot_ended_error(lease, cancelled.item(1)) from cancelled.error
        return replace(lease, state=MappingProxyType(state), expires_at_ms=expires_ms)

    # --- finish -----------------------------------------------------------------------------------------
    def commit(
        self,
        lease: Lease,
        *,
        writes: Sequence[Mapping[str, Any]] = (),
        summary: Mapping[str, Any] | None = None,
        outcome: SlotOutcomeName = "succeeded",
        error: Mapping[str, Any] | None = None,
    ) -> CommitReceipt:
        """Finish the slot and release the lease in one fenced TransactWriteItems.

        The transaction holds, all-or-nothing:

        1. the lock item: condition ``owner = ours AND fencing_token = ours``; removes owner and expiry
           (release) and records the slot as the last finished one (complete) in the same write;
        2. the slot item: final status (``SUCCEEDED``/``FAILED``), token, summary or error;
        3. the caller's own writes (TransactWriteItems entries in DynamoDB client format, e.g. results
           conditioned on the token): at most 100 items in all, 4 MB in all.

        A retry of a commit that already applied (ALL_OLD shows the slot finished under our token, or,
        once a newer slot finished, our slot item does) is reported as success (``already_applied``),
        with the outcome that was actually applied.

        A cancellation is judged by its per-item reasons (:mod:`slotlock.transient`): throttling and
        transaction conflicts on any item (the caller's included) are retried within the lease and the
        invocation deadline; only a failed condition on the lock item means the token is stale.

        Raises
        ------
        StaleFencingTokenError
            Our token is no longer current (we were taken over): nothing was written.
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
        if outcome not in ("succeeded", "failed"):
            raise LockConfigurationError("outcome", f"must be 'succeeded' or 'failed', got {outcome!r}")
        now_ms = self.clock_ms()
        succeeded = outcome == "succeeded"
        lock_set = (
            "SET #fin_slot = :slot, #fin_outcome = :outcome, #fin_token = :token, #fin_at = :now"
            + (", #ok_slot = :slot, #ok_at = :now" if succeeded else "")
            + " REMOVE #expires"
        )
        lock_names = {
            "#fin_slot": LAST_FIN_SLOT,
            "#fin_outcome": LAST_FIN_OUTCOME,
            "#fin_token": LAST_FIN_TOKEN,
            "#fin_at": LAST_FIN_AT,
            "#expires": EXPIRES,
        }
        if succeeded:
            lock_names |= {"#ok_slot": LAST_OK_SLOT, "#ok_at": LAST_OK_AT}
        lock_values: dict[str, Any] = {
            ":slot": {"N": str(lease.slot.epoch_s)},
            ":outcome": {"S": outcome},
            ":now": {"N": str(now_ms)},
        }
        # The owner attribute is removed too: REMOVE of the condition's own attribute is allowed.
        lock_set += ", #owner"
        if lease.stale_missed_slots:  # now refused by the finished slot itself: keep the set small
            lock_set += " DELETE #missed :stale_missed"
            lock_names["#missed"] = MISSED_SLOTS
            lock_values[":stale_missed"] = {"NS": sorted(str(missed.epoch_s) for missed in lease.stale_missed_slots)}
        lock_item = self._lock_update(lease, lock_set, lock_names, lock_values)
        slot_item = {
            "Update": slot_item_update(
                self.table_name,
                self.slot_key(lease.slot),
                job=self.job_name,
                slot_iso=lease.slot.iso,
                slot_epoch_s=lease.slot.epoch_s,
                status=STATUS_SUCCEEDED if succeeded else STATUS_FAILED,
                ttl_epoch_s=self._ttl(now_ms),
                attributes={
                    TOKEN: {"N": str(lease.fencing_token)},
                    OWNER: {"S": lease.owner_id},
                    FINISHED_AT: {"N": str(now_ms)},
                    SUMMARY_JSON: {"S": _json(summary)},
                    ERROR_JSON: {"S": _json(error)},
                },
                started_at_ms=lease.acquired_at_ms,
            )
        }
        items: list[Mapping[str, Any]] = [lock_item, slot_item]
        own_offset = len(items)
        items.extend(writes)
        if len(items) > MAX_TRANSACTION_ITEMS:
            raise LockConfigurationError(
                "writes", f"{len(writes)} writes exceed the transaction limit of {MAX_TRANSACTION_ITEMS}"
            )
        receipt = CommitReceipt(self.job_name, lease.slot, lease.fencing_token, outcome, now_ms)
        try:
            self._transact(items, operation="commit", budget=self.holder_budget(lease), lease=lease, idempotent=True)
        except _Cancelled as cancelled:
            judged = cancelled.judged
            if judged.verdict == "lease_gone":
                current = cancelled.lock_record(self)
                applied = self._applied_outcome(lease, current)
                if applied is not None:
                    return replace(receipt, outcome=applied, already_applied=True)
                raise StaleFencingTokenError(lease, current, operation="commit") from cancelled.error
            index = judged.index if judged.index is not None else 0
            if index < own_offset:
                raise self._slot_ended_error(lease, cancelled.item(1)) from cancelled.error
            reason = cancelled.reasons[index]
            raise CommitConflictError(
                index - own_offset,
                str(judged.code),
                reason.get("Item"),
                reason.get("Message"),
                fencing_token=lease.fencing_token,
            ) from cancelled.error
        return receipt

    def _slot_ended_error(self, lease: Lease, item: Mapping[str, Any] | None) -> CorruptLockItemError:
        """A holder's slot-item write met a terminal record although the lock item names it as holder."""
        status = (item or {}).get(STATUS, {}).get("S") if item else None
        return CorruptLockItemError(
            self.slot_key(lease.slot),
            STATUS,
            f"is {status or 'not RUNNING'} although the lock item names {lease.owner_id!r} (token"
            f" {lease.fencing_token}) as this slot's holder; a terminal record is never overwritten",
        )

    def _applied_outcome(self, lease: Lease, current: LockRecord | None) -> SlotOutcomeName | None:
        """The outcome that our own earlier commit of ``lease`` wrote, or ``None`` if it never applied.

        Tokens are unique per acquisition, so "finished under our token" identifies our commit, whoever
        holds the lease now. The lock item shows it until a newer slot finishes; after that the slot
        item (written in the same transaction) still does, at the cost of one read.
        """
        if current is None:
            return None
        if current.last_finished_slot == lease.slot and current.last_finished_token == lease.fencing_token:
            outcome = current.last_finished_outcome
            return outcome if outcome in ("succeeded", "failed") else None  # type: ignore[return-value]
        if current.last_finished_slot is not None and current.last_finished_slot > lease.slot:
            item = self.get_slot(lease.slot) or {}
            if item.get(TOKEN) == lease.fencing_token and item.get(STATUS) in (STATUS_SUCCEEDED, STATUS_FAILED):
                return "succeeded" if item[STATUS] == STATUS_SUCCEEDED else "failed"
        return None

    def release(self, lease: Lease) -> None:
        """Give the lease up without finishing the slot (e.g. before re-raising an unexpected error).

        Sets the expiry to now but keeps owner, token and slot, so the next acquirer of this slot (our
        own Lambda retry, or another racer) adopts the recorded in-flight state at once.

        Raises
        ------
        LeaseLostError
            The lease was already taken over (nothing to release).
        TransientLockError
            Throttled past the budget (the lease then simply expires).
        """
        self._set_expiry(lease, self.clock_ms(), operation="release")

    def _set_expiry(self, lease: Lease, expires_ms: int, *, operation: str) -> None:
        """One UpdateItem setting the lease expiry, conditional on owner and token (heartbeat, release).

        Transient answers (throttling past botocore's retries, ``TransactionConflictException`` while a
        transaction touches the lock item) are retried within :meth:`holder_budget`.
        """
        update = self._lock_update(
            lease, "SET #expires = :expires", {"#expires": EXPIRES}, {":expires": {"N": str(expires_ms)}}
        )["Update"]
        try:
            self._io.send("UpdateItem", update, self.holder_budget(lease))
        except ClientError as exc:  # _send re-raises only a failed condition: ALL_OLD names the new holder
            raise LeaseLostError(lease, self._old_lock_record(exc), operation=operation) from exc

    def record_missed(self, slot: Slot, reason: str, *, detail: Mapping[str, Any] | None = None) -> bool:
        """Record ``slot`` as MISSED with ``reason``, unless its history item already holds a record.

        One conditional UpdateItem (slot item absent, or RUNNING under a holder that can no longer finish):
        of many racers recording the same slot, exactly one writes, and a terminal record is never
        overwritten. Returns whether this call wrote; an SDK resend of our own applied write (its response
        lost) is recognised by the write's random ``record_id`` and also returns ``True``. Transient
        failures past a short budget return ``False`` (logged): a racer never raises for them.
        """
        return self._record_missed(
            slot, reason, dict(detail or {}), guard_lock=False, budget=self._racer_budget(self.clock_ms(), None)
        )

    def _record_missed(
        self, slot: Slot, reason: str, detail: Mapping[str, Any], *, guard_lock: bool, budget: RetryBudget
    ) -> bool:
        now_ms = self.clock_ms()
        record_id = uuid.uuid4().hex
        update = slot_item_update(
            self.table_name,
            self.slot_key(slot),
            job=self.job_name,
            slot_iso=slot.iso,
            slot_epoch_s=slot.epoch_s,
            status=STATUS_MISSED,
            ttl_epoch_s=self._ttl(now_ms),
            attributes={
                REASON: {"S": reason},
                FINISHED_AT: {"N": str(now_ms)},
                ERROR_JSON: {"S": _json(detail)},
                RECORD_ID: {"S": record_id},
            },
        )
        try:
            if guard_lock:
                mark_missed = {
                    "Update": {
                        "TableName": self.table_name,
                        "Key": {PK: {"S": self.lock_key}},
                        "UpdateExpression": MARK_SLOT_MISSED,
                        "ConditionExpression": SLOT_NOT_ACQUIRED,
                        "ExpressionAttributeNames": {
                            "#pk": PK,
                            "#token": TOKEN,
                            "#lease_slot": LEASE_SLOT,
                            "#missed": MISSED_SLOTS,
                        },
                        "ExpressionAttributeValues": {
                            ":slot": {"N": str(slot.epoch_s)},
                            ":slots": {"NS": [str(slot.epoch_s)]},
                            ":zero": {"N": "0"},
                        },
                    }
                }
                self._transact([{"Update": update}, mark_missed], operation="record_missed", budget=budget)
            else:
                self._io.send("UpdateItem", update, budget)
        except ClientError as exc:  # the slot item's condition failed: someone recorded it (maybe us)
            return self._own_missed_record(slot, wire.old_item(exc), record_id)
        except _Cancelled as cancelled:
            if cancelled.judged.index == 0:
                return self._own_missed_record(slot, cancelled.item(0), record_id)
            return False  # the lock item says the slot is acquired right now (or is tampered): not missed
        except TransientLockError as exc:
            logger.warning("could not record slot %s as missed (%s): %s", slot.iso, reason, exc)
            return False
        return True

    def _own_missed_record(self, slot: Slot, old_item: Mapping[str, Any] | None, record_id: str) -> bool:
        """Whether the record that failed our condition is our own earlier write (an SDK resend)."""
        if old_item is None:  # no ALL_OLD (older emulators): one consistent read
            old_item = self._io.get(self.slot_key(slot))
        return old_item is not None and old_item.get(RECORD_ID, {}).get("S") == record_id

    # --- reads ------------------------------------------------------------------------------------------
    def get_lock(self) -> LockRecord:
        """The job's lock item (strongly consistent read); a default record on a fresh table."""
        item = self._io.get(self.lock_key)
        return self.decode_lock(item) if item else LockRecord()

    def _transact(
        self,
        items: Sequence[Mapping[str, Any]],
        *,
        operation: str,
        budget: RetryBudget,
        lease: Lease | None = None,
        idempotent: bool = False,
    ) -> None:
        """:meth:`LockTableClient.transact`; an undecided cancellation of a holder's write (``lease``) is
        decided by one consistent read of the lock item: still our owner and token, or not."""

        def decide() -> tuple[bool, LockRecord | None]:
            assert lease is not None
            item = self._io.get(self.lock_key)
            current = self.decode_lock(item) if item else None
            return current is not None and current.owned_by(lease.owner_id, lease.fencing_token), current

        self._io.transact(
            items, operation=operation, budget=budget, decide_undecided=decide if lease else None, idempotent=idempotent
        )

    # --- operator surface (slotlock.admin) --------------------------------------------------------------
    def get_lock_item(self) -> dict[str, Any] | None:
        """The job's lock item as stored (DynamoDB JSON, strongly consistent read), ``None`` when absent.

        For operator tools that must see an item :meth:`decode_lock` would refuse (e.g. one that lost its
        fencing counter). Raises :class:`LockBackendError` when DynamoDB fails.
        """
        return self._io.get(self.lock_key)

    def update_lock_item(
        self, update_expression: str, condition_expression: str, names: Mapping[str, str], values: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """One conditional UpdateItem of the job's lock item (operator tools); returns the item as it was
        (ALL_OLD), ``None`` if it did not exist.

        Raises
        ------
        botocore.exceptions.ClientError
            The condition failed (``ConditionalCheckFailedException``; ALL_OLD in ``response["Item"]``).
        LockBackendError
            DynamoDB failed otherwise.
        """
        try:
            response = self._io.call(
                "UpdateItem",
                TableName=self.table_name,
                Key={PK: {"S": self.lock_key}},
                UpdateExpression=update_expression,
                ConditionExpression=condition_expression,
                ExpressionAttributeNames=dict(names),
                ExpressionAttributeValues=dict(values),
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if wire.is_conditional_failure(exc):
                raise
            raise self._io.wrap("UpdateItem", exc) from exc
        attributes = response.get("Attributes")
        return attributes if isinstance(attributes, dict) else None

    def get_slot(self, slot: Slot) -> dict[str, Any] | None:
        """The slot's history item decoded to plain Python (``*_json`` attributes parsed), or ``None``.

        Raises
        ------
        CorruptLockItemError
            A ``*_json`` attribute is not a String holding a JSON object (``key`` is the slot item's).
        """
        key = self.slot_key(slot)
        item = self._io.get(key)
        if item is None:
            return None
        return codec.decode_slot_item(item, key)

    def get_slot_state(self, slot: Slot) -> dict[str, Any]:
        """In-flight state recorded for ``slot`` (empty when none). Raises :class:`CorruptLockItemError`."""
        record = self.get_slot(slot)
        return dict(record.get("state") or {}) if record else {}

    def _raise_if_corrupt(self, exc: ClientError) -> None:
        item = self._io.get(self.lock_key)
        if item:
            try:
                self.decode_lock(item)
            except CorruptLockItemError as corrupt:
                raise corrupt from exc

    def _old_lock_record(self, exc: ClientError) -> LockRecord | None:
        item = wire.old_item(exc)
        if item is None:  # ALL_OLD not returned (older emulators): fall back to one consistent read
            item = self._io.get(self.lock_key)
        return self.decode_lock(item) if item else None

    # --- wire helpers -------------------------------------------------------------------------------------
    def decode_lock(self, item: Mapping[str, Mapping[str, Any]]) -> LockRecord:
        """Decode and type-check this job's lock item (DynamoDB JSON): :func:`slotlock.codec.decode_lock_item`."""
        return codec.decode_lock_item(item, self.lock_key)

    def _lock_update(
        self, lease: Lease, expression: str, names: Mapping[str, str], values: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self.table_name,
                "Key": {PK: {"S": self.lock_key}},
                "UpdateExpression": expression,
                "ConditionExpression": OWNER_AND_TOKEN_MATCH,
                "ExpressionAttributeNames": {"#owner": OWNER, "#token": TOKEN, **names},
                "ExpressionAttributeValues": {
                    ":owner": {"S": lease.owner_id},
                    ":token": {"N": str(lease.fencing_token)},
                    **values,
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }


def _positive_seconds(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
