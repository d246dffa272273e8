"""Recording a slot that will never run as MISSED, written by exactly one of its racers.

A MISSED record is one conditional write of the slot item (absent, or RUNNING under a holder that can
no longer finish: :data:`~slotlock._expressions.SLOT_NOT_ENDED`), so a terminal record is never
overwritten. ``too_old`` and ``overrun`` records go in one transaction with the lock item's missed-slot
mark (:data:`~slotlock._expressions.MARK_SLOT_MISSED`, on condition
:data:`~slotlock._expressions.SLOT_NOT_ACQUIRED`), so the acquire condition refuses the slot from then on.
Every write also checks and sets the table layout; an item of a newer layout raises
:class:`~slotlock.errors.UnsupportedSchemaVersionError` (from the failed condition's item, :mod:`slotlock._client`).
Each write carries a random ``record_id``: an SDK resend of our own applied write is recognised as ours.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from . import _wire as wire
from . import codec
from ._client import Cancelled
from ._expressions import (
    ERROR_JSON,
    FINISHED_AT,
    GENERATION,
    JOB,
    LOCK_NAMES,
    MARK_SLOT_MISSED,
    MARK_SLOT_MISSED_CONDITION,
    PK,
    REASON,
    RECORD_ID,
    SLOT,
    SLOT_CREATE_CONDITION,
    SLOT_EPOCH,
    STATUS,
    STATUS_MISSED,
    TTL,
    slot_item_update,
)
from ._transient import RetryBudget
from ._wire import json_text, write
from .errors import TransientLockError
from .slot import Slot

if TYPE_CHECKING:
    from ._dynamodb import LockContext

logger = logging.getLogger(__name__)


def record_missed(
    ctx: LockContext, slot: Slot, reason: str, detail: Mapping[str, Any], *, guard_lock: bool, budget: RetryBudget
) -> bool:
    """Record ``slot`` MISSED with ``reason`` unless its slot item already holds a record; whether we wrote.

    ``guard_lock``: in one transaction with the lock item's missed-slot mark (``too_old``, ``overrun``).
    Transient failures past ``budget`` return ``False`` (logged): a racer never raises for them.
    """
    now_ms = ctx.clock_ms()
    record_id = uuid.uuid4().hex
    update = slot_item_update(
        ctx,
        slot,
        status=STATUS_MISSED,
        now_ms=now_ms,
        attributes={
            REASON: {"S": reason},
            FINISHED_AT: {"N": str(now_ms)},
            ERROR_JSON: {"S": json_text(detail)},
            RECORD_ID: {"S": record_id},
        },
    )
    try:
        if guard_lock:
            mark_missed = {
                "Update": write(
                    ctx.table_name,
                    key=ctx.lock_key,
                    expression=MARK_SLOT_MISSED,
                    condition=MARK_SLOT_MISSED_CONDITION,
                    names=LOCK_NAMES,
                    values={
                        ":slot": {"N": str(slot.epoch_s)},
                        ":slots": {"NS": [str(slot.epoch_s)]},
                        ":zero": {"N": "0"},
                    },
                )
            }
            ctx.io.transact([{"Update": update}, mark_missed], operation="record_missed", budget=budget)
        else:
            ctx.io.send("UpdateItem", update, budget)
    except ClientError as exc:  # the slot item's condition failed: someone recorded it (maybe us)
        return own_missed_record(ctx, slot, wire.old_item(exc), record_id)
    except Cancelled as cancelled:
        if cancelled.judged.index == 0:
            return own_missed_record(ctx, slot, cancelled.item(0), record_id)
        return False  # the lock item says the slot is acquired right now (or is tampered): not missed
    except TransientLockError as exc:
        logger.warning("could not record slot %s as missed (%s): %s", slot.iso, reason, exc)
        return False
    return True


def record_paused(ctx: LockContext, slot: Slot, detail: Mapping[str, Any], *, budget: RetryBudget) -> bool:
    """Record the paused ``slot`` MISSED (reason ``paused``) with one conditional PutItem of its absent slot
    item; whether we wrote (our own resend included). Of the slot's racers exactly one writes; the others'
    condition fails. A paused slot is never acquired (the resume keeps the slots up to its minute paused),
    so the record stays final. Transient failures past ``budget`` return ``False`` (logged).
    """
    now_ms = ctx.clock_ms()
    record_id = uuid.uuid4().hex
    params = write(
        ctx.table_name,
        item={
            PK: {"S": ctx.slot_key(slot)},
            JOB: {"S": ctx.job_name},
            SLOT: {"S": slot.iso},
            SLOT_EPOCH: {"N": str(slot.epoch_s)},
            GENERATION: {"N": str(ctx.generation)},
            STATUS: {"S": STATUS_MISSED},
            REASON: {"S": "paused"},
            FINISHED_AT: {"N": str(now_ms)},
            ERROR_JSON: {"S": json_text(detail)},
            RECORD_ID: {"S": record_id},
            TTL: {"N": str(ctx.ttl_epoch_s(now_ms))},
        },
        condition=SLOT_CREATE_CONDITION,
        names=LOCK_NAMES,
    )
    try:
        ctx.io.send("PutItem", params, budget)
    except ClientError as exc:  # the slot item exists: another racer recorded it (or our resend)
        return own_missed_record(ctx, slot, wire.old_item(exc), record_id)
    except TransientLockError as exc:
        logger.warning("could not record slot %s as missed (paused): %s", slot.iso, exc)
        return False
    return True


def own_missed_record(ctx: LockContext, slot: Slot, old_item: Mapping[str, Any] | None, record_id: str) -> bool:
    """Whether the record that failed our condition is our own earlier write (an SDK resend)."""
    if old_item is None:  # no ALL_OLD (older emulators): one consistent read
        old_item = ctx.io.get(ctx.slot_key(slot))
        codec.check_schema_version(old_item, ctx.slot_key(slot))  # (an ALL_OLD item was checked by the client)
    return old_item is not None and old_item.get(RECORD_ID, {}).get("S") == record_id
