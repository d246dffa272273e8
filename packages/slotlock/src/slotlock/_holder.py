"""What a lease holder writes between acquisition and commit: renewal, in-flight state, release.

Every write here is fenced: conditional on the lock item's owner AND fencing token
(:data:`~slotlock._expressions.OWNER_AND_TOKEN_MATCH`), never on a clock, so a superseded holder cannot
write; and on the item's table layout (:data:`~slotlock._expressions.HOLDER_CONDITION`). The fenced
building blocks (:func:`lock_update`, :func:`transact`, :func:`slot_ended_error`) are shared with the commit
(:mod:`slotlock._commit`) and with the abandonment of an ended slot (:mod:`slotlock._acquire`). Transient answers
are retried within :meth:`SlotLock.holder_budget` (the lease's expiry or the invocation deadline, whichever comes
first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from . import _reads as reads
from ._client import Cancelled
from ._expressions import (
    GIVE_BACK_UPDATE,
    HOLDER_CONDITION,
    LEASE_EXPIRY_UPDATE,
    LOCK_NAMES,
    OWNER,
    STATE_JSON,
    STATUS,
    STATUS_RUNNING,
    TOKEN,
    slot_item_update,
)
from ._lease import Lease, LockRecord
from ._transient import RetryBudget
from ._wire import MAX_STATE_BYTES, UpdateExpression, json_text, write
from .errors import CommitConflictError, CorruptLockItemError, LeaseLostError, LockConfigurationError

if TYPE_CHECKING:
    from ._dynamodb import LockContext

#: The longest give-back reason (it becomes a MISSED record's ``reason`` if the slot is then superseded).
MAX_REASON_CHARS = 64


def heartbeat(ctx: LockContext, lease: Lease) -> Lease:
    """Renew to ``min(now + lease_duration, lease.deadline_ms)``; nothing is sent when that is no later."""
    now_ms = ctx.clock_ms()
    expires_ms = ctx.lease_expiry_ms(now_ms, lease.deadline_ms)
    if expires_ms <= lease.expires_at_ms:
        return lease
    set_expiry(ctx, lease, expires_ms, operation="heartbeat")
    return replace(lease, expires_at_ms=expires_ms)


def record_state(
    ctx: LockContext, lease: Lease, changes: Mapping[str, Any], writes: Sequence[Mapping[str, Any]] = ()
) -> Lease:
    """Merge ``changes`` into the state on the slot item and renew the lease: one TransactWriteItems
    (lock item: owner and token; slot item: not ended; then the caller's ``writes``, e.g. a capacity permit's
    record of the query). A caller's write that fails its own condition raises :class:`CommitConflictError`
    (``index`` into ``writes``): nothing was written, and the caller may record the state again without it."""
    state = {**lease.state, **changes}
    state_json = json_text(state)
    if len(state_json.encode()) > MAX_STATE_BYTES:
        raise LockConfigurationError("changes", f"state is {len(state_json)} bytes; at most {MAX_STATE_BYTES}")
    now_ms = ctx.clock_ms()
    expires_ms = max(ctx.lease_expiry_ms(now_ms, lease.deadline_ms), lease.expires_at_ms)
    items = [
        lock_update(ctx, lease, LEASE_EXPIRY_UPDATE, {":expires": {"N": str(expires_ms)}}),
        {
            "Update": slot_item_update(
                ctx,
                lease.slot,
                status=STATUS_RUNNING,
                now_ms=now_ms,
                attributes={
                    TOKEN: {"N": str(lease.fencing_token)},
                    OWNER: {"S": lease.owner_id},
                    STATE_JSON: {"S": state_json},
                },
                started_at_ms=now_ms,
                generation=ctx.generation,
            )
        },
        *writes,
    ]
    own_offset = 2
    try:
        transact(ctx, items, operation="record_state", budget=ctx.holder_budget(lease), lease=lease)
    except Cancelled as cancelled:
        if cancelled.judged.verdict == "lease_gone":
            raise LeaseLostError(lease, cancelled.lock_record(ctx), operation="record_state") from cancelled.error
        index = cancelled.judged.index
        if index is not None and index >= own_offset:
            reason = cancelled.reasons[index]
            raise CommitConflictError(
                index - own_offset,
                str(cancelled.judged.code),
                reason.get("Item"),
                reason.get("Message"),
                fencing_token=lease.fencing_token,
            ) from cancelled.error
        raise slot_ended_error(ctx, lease, cancelled.item(1)) from cancelled.error
    return replace(lease, state=MappingProxyType(state), expires_at_ms=expires_ms)


def release(ctx: LockContext, lease: Lease, *, given_back: str | None = None) -> None:
    """Set the lease's expiry to now, keeping owner, token and slot for the next acquirer to adopt.

    ``given_back``: why the holder gives the slot back unfinished (e.g. ``capacity``), written on the live lock item
    in the same UpdateItem (:data:`~slotlock._expressions.GIVE_BACK_UPDATE`): the next acquisition removes it, and if
    that acquisition is a newer slot's, the slot is recorded MISSED with this reason instead of ``superseded``. Not
    written for a manual generation (a manual run is never superseded)."""
    if given_back is not None and (not isinstance(given_back, str) or not 1 <= len(given_back) <= MAX_REASON_CHARS):
        raise LockConfigurationError("reason", f"must be 1..{MAX_REASON_CHARS} characters, got {given_back!r:.80}")
    mark = given_back if given_back is not None and not ctx.manual else None
    set_expiry(ctx, lease, ctx.clock_ms(), operation="release", given_back=mark)


def set_expiry(
    ctx: LockContext, lease: Lease, expires_ms: int, *, operation: str, given_back: str | None = None
) -> None:
    """One UpdateItem setting the lease expiry, conditional on owner and token (heartbeat, release), and the
    give-back reason with it when given (:func:`release`).

    Transient answers (throttling past botocore's retries, ``TransactionConflictException`` while a
    transaction touches the lock item) are retried within :meth:`SlotLock.holder_budget`.
    """
    values = {":expires": {"N": str(expires_ms)}}
    if given_back is None:
        update = lock_update(ctx, lease, LEASE_EXPIRY_UPDATE, values)["Update"]
    else:
        values[":given_back"] = {"S": given_back}
        update = lock_update(ctx, lease, GIVE_BACK_UPDATE, values)["Update"]
    try:
        ctx.io.send("UpdateItem", update, ctx.holder_budget(lease))
    except ClientError as exc:  # send re-raises only a failed condition: ALL_OLD names the new holder
        raise LeaseLostError(lease, reads.old_lock_record(ctx, exc), operation=operation) from exc


def lock_update(
    ctx: LockContext, lease: Lease, expression: UpdateExpression, values: Mapping[str, Any]
) -> dict[str, Any]:
    """A TransactWriteItems ``Update`` entry of the lock item, fenced by the lease's owner and token and checked
    for the layout (:data:`~slotlock._expressions.HOLDER_CONDITION`), setting the layout too
    (:func:`~slotlock._expressions.write`), ALL_OLD on failure."""
    return {
        "Update": write(
            ctx.table_name,
            key=ctx.lock_key,
            expression=expression,
            condition=HOLDER_CONDITION,
            names=LOCK_NAMES,
            values={":owner": {"S": lease.owner_id}, ":token": {"N": str(lease.fencing_token)}, **values},
        )
    }


def transact(
    ctx: LockContext,
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
        item = ctx.io.get(ctx.lock_key)
        current = ctx.decode_lock(item) if item else None
        return current is not None and current.owned_by(lease.owner_id, lease.fencing_token), current

    ctx.io.transact(
        items, operation=operation, budget=budget, decide_undecided=decide if lease else None, idempotent=idempotent
    )


def slot_ended_error(ctx: LockContext, lease: Lease, item: Mapping[str, Any] | None) -> CorruptLockItemError:
    """A holder's slot-item write met a terminal record although the lock item names it as holder."""
    status = (item or {}).get(STATUS, {}).get("S") if item else None
    return CorruptLockItemError(
        ctx.slot_key(lease.slot),
        STATUS,
        f"is {status or 'not RUNNING'} although the lock item names {lease.owner_id!r} (token"
        f" {lease.fencing_token}) as this slot's holder; a terminal record is never overwritten",
    )
