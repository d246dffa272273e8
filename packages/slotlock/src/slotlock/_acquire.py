"""The race for a slot's lease: one conditional UpdateItem decides, a loser learns why from ALL_OLD.

:func:`try_acquire` sends the acquisition (:data:`~slotlock._expressions.ACQUIRE_CONDITION`,
:data:`~slotlock._expressions.ACQUIRE_UPDATE`); the winner's :class:`Lease` is built from ALL_NEW
(:func:`lease_from`: takeover, re-entry, superseded slot, adopted in-flight state); a loser's
:class:`Loss` from ALL_OLD (:func:`loss`, classified by :func:`slotlock._decisions.classify_loss`),
recording the slot MISSED when it will never run (:mod:`slotlock._missed`). A takeover of a slot whose
history is already terminal gives the slot up (:func:`abandon_ended_slot`).
ALL_OLD on failure: https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html#DDB-UpdateItem-request-ReturnValuesOnConditionCheckFailure
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from . import _decisions as decisions
from . import _missed as missed
from . import _reads as reads
from . import _wire as wire
from ._expressions import (
    ACQUIRE_CONDITION,
    ACQUIRE_UPDATE,
    EXPIRES,
    LOCK_NAMES,
    MANUAL_ACQUIRE_CONDITION,
    MANUAL_ACQUIRE_UPDATE,
    PK,
    STATUS,
    TERMINAL_STATUSES,
)
from ._holder import lock_update, set_expiry
from ._lease import Lease, LockRecord, Loss, LossReason
from ._transient import RetryBudget
from ._wire import update, write
from .errors import (
    CorruptLockItemError,
    InvalidEventError,
    LockBackendError,
    LockConfigurationError,
)
from .slot import Slot

if TYPE_CHECKING:
    from ._dynamodb import LockContext

logger = logging.getLogger(__name__)


def try_acquire(
    ctx: LockContext, slot: Slot, owner_id: str, deadline_ms: int | None, *, manual: bool | None = None
) -> Lease | Loss:
    """Race for the lease of ``slot`` (documented on :meth:`slotlock._dynamodb.SlotLock.try_acquire`).

    ``manual`` (default: ``ctx.manual``, a generation of 2 or more): the race for the job's manual lease to run
    generation ``ctx.generation`` (:mod:`slotlock.manual`): the same one conditional UpdateItem, on the manual lock
    item with :data:`~slotlock._expressions.MANUAL_ACQUIRE_CONDITION`, judged by :func:`lease_from` and
    :func:`loss` (``manual=True``). No maximum slot age applies to it (a backfill runs old slots); the maximum slot lead does.
    """
    manual = ctx.manual if manual is None else manual
    check_owner_id(owner_id)
    now_ms = ctx.clock_ms()
    if ctx.max_slot_lead_ms is not None and slot.epoch_ms - now_ms > ctx.max_slot_lead_ms:
        raise InvalidEventError(
            "scheduled_time",
            f"{slot.iso} is in the future: a manual run is for a past or current slot"
            if manual
            else f"{slot.iso} is {(slot.epoch_ms - now_ms) / 1000:.0f} s ahead of this caller's clock; at most"
            f" {ctx.max_slot_lead_ms / 1000:.0f} s is accepted (a future slot would supersede every earlier one)",
        )
    if not manual and ctx.max_slot_age_ms is not None and now_ms - slot.epoch_ms > ctx.max_slot_age_ms:
        recorded = missed.record_missed(
            ctx,
            slot,
            "too_old",
            {"age_ms": now_ms - slot.epoch_ms, "owner_id": owner_id},
            guard_lock=True,
            budget=ctx.racer_budget(now_ms, deadline_ms),
        )
        return Loss(ctx.job_name, slot, owner_id, "too_old", None, recorded, missed_reason="too_old")
    expires_ms = racer_expiry_ms(ctx, now_ms, deadline_ms)
    values = {
        ":owner": {"S": owner_id},
        ":expires": {"N": str(expires_ms)},
        ":now": {"N": str(now_ms)},
        ":slot": {"N": str(slot.epoch_s)},
        **({":gen": {"N": str(ctx.generation)}} if manual else {}),
        ":job": {"S": ctx.job_name},
        ":one": {"N": "1"},
        ":null": {"NULL": True},
    }
    params = write(
        ctx.table_name,
        key=ctx.lock_key,
        expression=MANUAL_ACQUIRE_UPDATE if manual else ACQUIRE_UPDATE,
        condition=MANUAL_ACQUIRE_CONDITION if manual else ACQUIRE_CONDITION,
        names=LOCK_NAMES,
        values=values,
        return_values="ALL_NEW",
    )
    answer = send_acquisition(
        ctx,
        slot,
        owner_id,
        params,
        ctx.racer_budget(now_ms, deadline_ms),
        operation="manual acquire" if manual else "acquire",
        lost=lambda current: loss(ctx, slot, owner_id, now_ms, current, deadline_ms, manual=manual),
    )
    if isinstance(answer, (Lease, Loss)):
        return answer
    record = ctx.decode_lock(answer["Attributes"])
    return lease_from(ctx, record, slot, owner_id, now_ms, expires_ms, deadline_ms, manual=manual)


def check_owner_id(owner_id: object) -> None:
    """A racer's owner id is 1..512 characters; raises :class:`LockConfigurationError` otherwise."""
    if not isinstance(owner_id, str) or not 1 <= len(owner_id) <= 512:
        raise LockConfigurationError("owner_id", f"must be 1..512 characters, got {owner_id!r}")


def racer_expiry_ms(ctx: LockContext, now_ms: int, deadline_ms: int | None) -> int:
    """The expiry of a lease taken at ``now_ms``; raises :class:`LockConfigurationError` when the deadline
    leaves no time to hold one."""
    expires_ms = ctx.lease_expiry_ms(now_ms, deadline_ms)
    if expires_ms <= now_ms:
        raise LockConfigurationError(
            "deadline_ms", f"{deadline_ms} is not after now ({now_ms}): no time to hold a lease"
        )
    return expires_ms


def send_acquisition(
    ctx: LockContext,
    slot: Slot,
    owner_id: str,
    params: Mapping[str, Any],
    budget: RetryBudget,
    *,
    operation: str,
    lost: Callable[[LockRecord | None], Lease | Loss],
) -> dict[str, Any] | Lease | Loss:
    """Send one acquisition UpdateItem (live or manual) until an answer decides: the response (won), or
    ``lost(ALL_OLD record)`` when the condition failed, or a ``conflict``/``unavailable`` :class:`Loss`.

    The first answer decides (won, or lost with ALL_OLD saying why). Only an answer that decides nothing is
    retried, within ``budget`` (a quarter lease): a transaction in flight on the lock item
    (TransactionConflictException: the holder's commit) or throttling past botocore's retries. A racer that
    stays undecided returns a normal loss; but if a request may have applied without us hearing of it (a
    dropped connection), we may hold the lease: then the retryable TransientLockError goes to Lambda, whose
    retry (same request id) re-enters it. A ValidationException that a tampered lock item explains (e.g.
    ``ADD`` on a String fencing token) raises :class:`CorruptLockItemError` naming the attribute.
    """
    outcome_unknown = False
    while True:
        try:
            return ctx.io.call("UpdateItem", **params)
        except ClientError as exc:
            if wire.is_conditional_failure(exc):
                return lost(reads.old_lock_record(ctx, exc))
            if wire.error_code(exc) == "ValidationException":
                raise_if_corrupt(ctx, exc)
            wrapped = ctx.io.wrap("UpdateItem", exc)
            if not wrapped.retryable:
                raise wrapped from exc
            if budget.retry():
                continue
            if outcome_unknown:
                raise budget.spent("UpdateItem", f"{operation}: {wrapped}") from exc
            reason: LossReason = "conflict" if wrapped.error_code == "TransactionConflictException" else "unavailable"
            logger.warning(
                "%s of %s slot %s undecided after %d request(s) (%s): returning a %r loss",
                operation,
                ctx.job_name,
                slot.iso,
                budget.attempts,
                wrapped.error_code,
                reason,
            )
            return Loss(ctx.job_name, slot, owner_id, reason, generation=ctx.generation)
        except LockBackendError as exc:  # no answer at all: the write may have applied
            outcome_unknown = True
            if not budget.retry():
                raise budget.spent("UpdateItem", f"{operation}: {exc}") from exc


def lease_from(
    ctx: LockContext,
    record: LockRecord,
    slot: Slot,
    owner_id: str,
    now_ms: int,
    expires_ms: int,
    deadline_ms: int | None,
    *,
    manual: bool = False,
) -> Lease | Loss:
    """The winner's lease from the lock item as acquired (ALL_NEW): a takeover or re-entry adopts the
    predecessor's in-flight state (one read of the slot item); a superseded older slot is recorded MISSED
    (:func:`superseded_reason`).

    ``manual``: from the manual lock item, for generation ``ctx.generation``; a takeover or re-entry is of the same
    slot *and* generation, nothing is superseded, and the generation's history item is always read
    (:func:`requested_or_loss`: REQUESTED runs; RUNNING adopts its recorded state, a predecessor's query id, whoever
    held the manual lease in between; terminal gives the lease back and loses as ``slot_finished``; absent, never
    requested, gives the lease back and raises :class:`InvalidEventError` ``manual.generation``)."""
    previous_owner, previous_slot = record.previous_owner_id, record.previous_slot
    same_run = (
        previous_owner is not None
        and previous_slot == slot
        and (not manual or record.previous_generation == ctx.generation)
    )
    superseded = (
        previous_slot
        if not manual and previous_owner is not None and previous_slot is not None and previous_slot < slot
        else None
    )
    lease = Lease(
        job_name=ctx.job_name,
        slot=slot,
        owner_id=owner_id,
        fencing_token=record.fencing_token,
        acquired_at_ms=now_ms,
        expires_at_ms=expires_ms,
        deadline_ms=deadline_ms,
        takeover_from=previous_owner if same_run and previous_owner != owner_id else None,
        reentered=same_run and previous_owner == owner_id,
        superseded_slot=superseded,
        superseded_reason=superseded_reason(record, superseded) if superseded is not None else None,
        last_succeeded_at_ms=None if manual else record.last_succeeded_at_ms,
        stale_missed_slots=frozenset() if manual else frozenset(stale for stale in record.missed_slots if stale < slot),
        generation=ctx.generation,
    )
    if superseded is not None:
        # Recorded now, not at commit: a later re-entry of this slot overwrites the previous_* copy. The
        # older slot can never finish (its holder's token is stale), whatever becomes of this one.
        recorded = missed.record_missed(
            ctx,
            superseded,
            lease.superseded_reason or "superseded",
            {"superseded_by_slot": slot.iso, "fencing_token": lease.fencing_token},
            guard_lock=False,
            budget=ctx.racer_budget(now_ms, deadline_ms),
        )
        lease = replace(lease, superseded_recorded=recorded)
    if not same_run and not manual:
        return lease
    # A takeover or re-entry (a manual run: always): one consistent read of the slot item, for the predecessor's
    # in-flight state to adopt (a query id). A terminal record there (live: impossible unless the table was
    # edited, the acquire condition refuses finished and missed slots) forbids running the slot all the same.
    try:
        item = reads.get_slot(ctx, slot)
    except CorruptLockItemError:
        # Nothing can be adopted from a tampered slot item: give the lease back (kept owner, token
        # and slot, expiry now) so the error, not a stuck lease, is what the next racer meets too.
        set_expiry(ctx, lease, now_ms, operation="release")
        raise
    if manual:
        ended = requested_or_loss(ctx, lease, record, item, now_ms)
        if ended is not None:
            return ended
    elif item is not None and item.get(STATUS) in TERMINAL_STATUSES:
        return abandon_ended_slot(ctx, lease, record, str(item[STATUS]))
    if item is not None:
        lease = replace(lease, state=MappingProxyType(dict(item.get("state") or {})))
    return lease


def requested_or_loss(
    ctx: LockContext, lease: Lease, record: LockRecord, item: Mapping[str, Any] | None, now_ms: int
) -> Loss | None:
    """A manual winner's step: ``None`` when the generation's history ``item`` lets it run (REQUESTED, or RUNNING
    to adopt); a terminal record gives the lease back and loses as ``slot_finished``; no item (never requested)
    gives the lease back and raises :class:`InvalidEventError` (``manual.generation``)."""
    if item is None:
        set_expiry(ctx, lease, now_ms, operation="release")
        raise InvalidEventError(
            "manual.generation",
            f"generation {ctx.generation} of slot {lease.slot.iso} was never requested (no {ctx.slot_key(lease.slot)}"
            " item); request it first (tools.ops run/rerun/backfill do)",
        )
    status = str(item.get(STATUS))
    if status not in TERMINAL_STATUSES:
        return None
    set_expiry(ctx, lease, now_ms, operation="release")
    logger.info("generation %d of slot %s is already %s: not run", ctx.generation, lease.slot.iso, status)
    return Loss(
        ctx.job_name,
        lease.slot,
        lease.owner_id,
        "slot_finished",
        replace(record, owner_id=None),
        generation=ctx.generation,
    )


def superseded_reason(record: LockRecord, superseded: Slot) -> str:
    """The reason to record the superseded slot MISSED with, from the lock item as the newer slot's acquisition
    left it (ALL_NEW; a loser's ALL_OLD): ``superseded``, or, when the acquisition that replaced the slot's last
    holder found the slot given back (:data:`~slotlock._expressions.GIVEN_BACK`, copied to ``previous_*``), the
    give-back reason (e.g. ``capacity``: the slot waited for capacity and its comeback never came). A comeback that
    re-acquired the slot removed the mark, so a slot that ran again and then died is ``superseded``."""
    if record.previous_slot == superseded and record.previous_given_back_reason:
        return record.previous_given_back_reason
    return "superseded"


def abandon_ended_slot(ctx: LockContext, lease: Lease, record: LockRecord, status: str) -> Loss:
    """We took over a slot whose history item is already terminal: run nothing.

    Only an edited table gets here (the acquire condition refuses finished and missed slots); it is
    checked on takeovers, which read the slot item anyway.

    One fenced UpdateItem finishes the slot on the lock item (last finished slot = this slot, with the
    recorded outcome) and releases the lease, so later deliveries of the slot lose as ``slot_finished``
    and never run it either. If that write fails, the lease simply expires.
    """
    now_ms = ctx.clock_ms()
    outcome = status.lower()
    finish = lock_update(
        ctx,
        lease,
        update(
            ("SET", ["#fin_slot = :slot", "#fin_outcome = :outcome", "#fin_token = :token", "#fin_at = :now"]),
            ("REMOVE", ["#expires", "#owner"]),
        ),
        {":slot": {"N": str(lease.slot.epoch_s)}, ":outcome": {"S": outcome}, ":now": {"N": str(now_ms)}},
    )["Update"]
    try:
        ctx.io.send("UpdateItem", finish, ctx.holder_budget(lease))
    except (ClientError, LockBackendError) as exc:
        logger.warning(
            "slot %s already ended (%s); could not mark it finished on the lock item, the lease expires by itself: %s",
            lease.slot.iso,
            status,
            exc,
        )
    logger.info("slot %s was already %s when acquired (token %d): not run", lease.slot.iso, status, lease.fencing_token)
    current = replace(
        record,
        owner_id=None,
        lease_expires_at_ms=None,
        last_finished_slot=lease.slot,
        last_finished_outcome=outcome,
        last_finished_token=lease.fencing_token,
        last_finished_at_ms=now_ms,
    )
    return Loss(ctx.job_name, lease.slot, lease.owner_id, "slot_finished", current)


def loss(
    ctx: LockContext,
    slot: Slot,
    owner_id: str,
    now_ms: int,
    current: LockRecord | None,
    deadline_ms: int | None,
    *,
    manual: bool = False,
) -> Lease | Loss:
    """A failed acquire condition, judged from the lock item (ALL_OLD): our own earlier acquisition (a
    :class:`Lease` after all), or a :class:`Loss`, recording the slot MISSED if it will never run.

    ``manual``: judged from the manual lock item (:func:`slotlock._decisions.classify_manual_loss`): our own
    earlier acquisition, or a loss, ``held`` (the same slot and generation) or ``busy`` (another manual run);
    a manual run records nothing MISSED."""
    if current is None:
        # The item vanished between the write and the fallback read: only an operator deletes it.
        raise CorruptLockItemError(ctx.lock_key, PK, "disappeared during acquisition (was the lock item deleted?)")
    if manual:
        verdict = decisions.classify_manual_loss(current, slot, ctx.generation, owner_id, now_ms)
    else:
        verdict = decisions.classify_loss(current, slot, owner_id, now_ms)
    if verdict == "ours":
        # Our own write already applied (an SDK retry of it failed the condition): that is our success.
        expires_ms = current.lease_expires_at_ms or now_ms
        return lease_from(ctx, current, slot, owner_id, now_ms, expires_ms, deadline_ms, manual=manual)
    if verdict == "unexplained":
        explained_by = "no live lease" if manual else "no live lease or finished slot"
        raise CorruptLockItemError(
            ctx.lock_key,
            EXPIRES,
            f"made the {'manual ' if manual else ''}acquire condition false although {explained_by} explains it:"
            f" {current}",
        )
    reason: LossReason = verdict
    if manual:
        return Loss(ctx.job_name, slot, owner_id, reason, current, generation=ctx.generation)
    recorded = False
    missed_reason: str | None = None
    if reason == "paused":
        # Every racer of a paused slot returns; one of them records it MISSED "paused" (a conditional
        # PutItem of the absent slot item: exactly one writes).
        detail = {
            "owner_id": owner_id,
            "paused_through_slot": current.paused_through_slot.iso if current.paused_through_slot else None,
            "fencing_token": current.fencing_token,
        }
        missed_reason = "paused"
        recorded = missed.record_paused(ctx, slot, detail, budget=ctx.racer_budget(now_ms, deadline_ms))
    elif decisions.records_missed(reason, current, slot):
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
        missed_reason = superseded_reason(current, slot) if reason == "superseded" else reason
        recorded = missed.record_missed(
            ctx,
            slot,
            missed_reason,
            detail,
            guard_lock=reason == "overrun",
            budget=ctx.racer_budget(now_ms, deadline_ms),
        )
    return Loss(ctx.job_name, slot, owner_id, reason, current, recorded, missed_reason=missed_reason)


def raise_if_corrupt(ctx: LockContext, exc: ClientError) -> None:
    """Raise the :class:`CorruptLockItemError` that explains ``exc`` (one consistent read), if any."""
    item = ctx.io.get(ctx.lock_key)
    if item:
        try:
            ctx.decode_lock(item)
        except CorruptLockItemError as corrupt:
            raise corrupt from exc
