"""The fenced commit: finish the slot and release the lease in one TransactWriteItems.

The transaction holds the lock item (fenced by owner and token: release, and record the slot as the
last finished one), the slot item (final status) and the caller's own writes, all or nothing. A
cancellation is judged item by item (:mod:`slotlock._transient`); a failed condition on the lock item is
checked against our own earlier commit ("was my commit applied": :func:`applied_outcome`) before it
counts as a stale token.
Transactions: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from . import _decisions as decisions
from . import _reads as reads
from ._client import Cancelled
from ._expressions import (
    ERROR_JSON,
    FINISHED_AT,
    OWNER,
    REASON,
    STATUS_FAILED,
    STATUS_MISSED,
    STATUS_SUCCEEDED,
    SUMMARY_JSON,
    TOKEN,
    slot_item_update,
)
from ._holder import lock_update, slot_ended_error, transact
from ._lease import CommitReceipt, Lease, LockRecord, SlotOutcomeName
from ._wire import MAX_TRANSACTION_ITEMS, json_text, update
from .errors import CommitConflictError, LockConfigurationError, StaleFencingTokenError

if TYPE_CHECKING:
    from ._dynamodb import LockContext


def commit(
    ctx: LockContext,
    lease: Lease,
    *,
    writes: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any] | None,
    outcome: SlotOutcomeName,
    error: Mapping[str, Any] | None,
    reason: str | None = None,
) -> CommitReceipt:
    """Finish ``lease``'s slot with ``outcome`` and release the lease, with the caller's ``writes``, in one
    fenced TransactWriteItems (documented on :meth:`slotlock._dynamodb.SlotLock.commit`)."""
    if outcome not in ("succeeded", "failed", "missed"):
        raise LockConfigurationError("outcome", f"must be 'succeeded', 'failed' or 'missed', got {outcome!r}")
    if (outcome == "missed") != bool(reason):
        raise LockConfigurationError(
            "reason", f"a reason is given with, and only with, outcome 'missed', got {reason!r}"
        )
    now_ms = ctx.clock_ms()
    succeeded = outcome == "succeeded"
    lock_set = ["#fin_slot = :slot", "#fin_outcome = :outcome", "#fin_token = :token", "#fin_at = :now"]
    lock_values: dict[str, Any] = {
        ":slot": {"N": str(lease.slot.epoch_s)},
        ":outcome": {"S": outcome},
        ":now": {"N": str(now_ms)},
    }
    if ctx.manual:  # the manual lock item: which generation it finished last (for status)
        lock_set.append("#fin_gen = :gen")
        lock_values[":gen"] = {"N": str(ctx.generation)}
    if succeeded:
        lock_set += ["#ok_slot = :slot", "#ok_at = :now"]
    stale_missed = []
    if lease.stale_missed_slots:  # now refused by the finished slot itself: keep the set small
        stale_missed.append("#missed :stale_missed")
        lock_values[":stale_missed"] = {"NS": sorted(str(missed.epoch_s) for missed in lease.stale_missed_slots)}
    # The owner attribute is removed too: REMOVE of the condition's own attribute is allowed.
    expression = update(("SET", lock_set), ("REMOVE", ["#expires", "#owner"]), ("DELETE", stale_missed))
    lock_item = lock_update(ctx, lease, expression, lock_values)
    slot_item = {
        "Update": slot_item_update(
            ctx,
            lease.slot,
            status={"succeeded": STATUS_SUCCEEDED, "failed": STATUS_FAILED, "missed": STATUS_MISSED}[outcome],
            now_ms=now_ms,
            attributes={
                TOKEN: {"N": str(lease.fencing_token)},
                OWNER: {"S": lease.owner_id},
                FINISHED_AT: {"N": str(now_ms)},
                SUMMARY_JSON: {"S": json_text(summary)},
                ERROR_JSON: {"S": json_text(error)},
                **({REASON: {"S": reason}} if reason else {}),
            },
            started_at_ms=lease.acquired_at_ms,
            generation=ctx.generation,
        )
    }
    items: list[Mapping[str, Any]] = [lock_item, slot_item]
    own_offset = len(items)
    items.extend(writes)
    if len(items) > MAX_TRANSACTION_ITEMS:
        raise LockConfigurationError(
            "writes", f"{len(writes)} writes exceed the transaction limit of {MAX_TRANSACTION_ITEMS}"
        )
    receipt = CommitReceipt(ctx.job_name, lease.slot, lease.fencing_token, outcome, now_ms, generation=ctx.generation)
    try:
        transact(ctx, items, operation="commit", budget=ctx.holder_budget(lease), lease=lease, idempotent=True)
    except Cancelled as cancelled:
        judged = cancelled.judged
        if judged.verdict == "lease_gone":
            current = cancelled.lock_record(ctx)
            applied = applied_outcome(ctx, lease, current)
            if applied is not None:
                return replace(receipt, outcome=applied, already_applied=True)
            raise StaleFencingTokenError(lease, current, operation="commit") from cancelled.error
        index = judged.index if judged.index is not None else 0
        if index < own_offset:
            raise slot_ended_error(ctx, lease, cancelled.item(1)) from cancelled.error
        cancellation = cancelled.reasons[index]
        raise CommitConflictError(
            index - own_offset,
            str(judged.code),
            cancellation.get("Item"),
            cancellation.get("Message"),
            fencing_token=lease.fencing_token,
        ) from cancelled.error
    return receipt


def applied_outcome(ctx: LockContext, lease: Lease, current: LockRecord | None) -> SlotOutcomeName | None:
    """The outcome that our own earlier commit of ``lease`` wrote, or ``None`` if it never applied.

    Tokens are unique per acquisition, so "finished under our token" identifies our commit, whoever
    holds the lease now. The lock item shows it until a newer slot finishes; after that the slot
    item (written in the same transaction) still does, at the cost of one read.
    """
    if current is None:
        return None
    if ctx.manual:  # the manual lock item finishes other slots' generations in any order: ask the slot item
        return decisions.outcome_applied_on_slot_item(reads.get_slot(ctx, lease.slot) or {}, lease.fencing_token)
    if current.last_finished_slot is not None and current.last_finished_slot > lease.slot:
        return decisions.outcome_applied_on_slot_item(reads.get_slot(ctx, lease.slot) or {}, lease.fencing_token)
    return decisions.outcome_applied_on_lock(current, lease.slot, lease.fencing_token)
