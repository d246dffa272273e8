"""Protocol decisions over a decoded lock item (no I/O): why an acquisition lost, whether a commit applied.

The acquire condition (:data:`slotlock.expressions.ACQUIRE_CONDITION`) decides *that* a racer lost;
these functions say *why*, from the lock item DynamoDB returned with the failure (ALL_OLD), in the
order of the condition's timeline. :class:`slotlock.dynamodb.SlotLock` acts on the answers.
"""

from __future__ import annotations

from typing import Literal

from .lease import LockRecord, LossReason
from .slot import Slot

#: ``ours``: our own acquisition already applied (a resend failed the condition): that is our success.
#: ``unexplained``: nothing in the item explains the failure (a tampered item).
LossVerdict = LossReason | Literal["ours", "unexplained"]


def classify_loss(current: LockRecord, slot: Slot, owner_id: str, now_ms: int) -> LossVerdict:
    """Why ``owner_id`` could not acquire ``slot`` at ``now_ms`` (caller clock, epoch ms), given ``current``.

    In order: a finished slot at or after ``slot`` (``slot_finished`` for the same slot, ``superseded``
    for a newer one); a newer acquired slot (``superseded``); our own lease for the slot (``ours``); a
    live lease of another owner (``held`` for this slot, ``overrun`` for an older one); the slot among
    the missed slots (``slot_finished``: recorded MISSED, it never runs); otherwise ``unexplained``.
    """
    if current.last_finished_slot is not None and current.last_finished_slot >= slot:
        return "slot_finished" if current.last_finished_slot == slot else "superseded"
    if current.lease_slot is not None and current.lease_slot > slot:
        return "superseded"
    if current.owner_id == owner_id and current.lease_slot == slot:
        return "ours"
    if current.locked(now_ms):
        return "held" if current.lease_slot == slot else "overrun"
    if slot in current.missed_slots:
        return "slot_finished"
    return "unexplained"


def records_missed(reason: LossReason, current: LockRecord, slot: Slot) -> bool:
    """Whether a loser for ``reason`` must try to record ``slot`` MISSED: the slot will never run
    (``overrun``, ``superseded``) and is not already among the lock item's missed slots."""
    return reason in ("overrun", "superseded") and slot not in current.missed_slots
