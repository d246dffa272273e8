"""Protocol decisions over a decoded lock item (no I/O): why an acquisition lost, whether a commit applied.

The acquire condition (:data:`slotlock._expressions.ACQUIRE_CONDITION`) decides *that* a racer lost;
these functions say *why*, from the lock item DynamoDB returned with the failure (ALL_OLD), in the
order of the condition's timeline. A commit's retry that fails its condition asks whether its own
earlier commit applied. :mod:`slotlock._acquire` and :mod:`slotlock._commit` act on the answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ._expressions import RECORD_ID, STATUS, STATUS_FAILED, STATUS_MISSED, STATUS_SUCCEEDED, TOKEN
from ._lease import LockRecord, LossReason, SlotOutcomeName
from .slot import Slot

#: ``ours``: our own acquisition already applied (a resend failed the condition): that is our success.
#: ``unexplained``: nothing in the item explains the failure (a tampered item).
LossVerdict = LossReason | Literal["ours", "unexplained"]


def classify_loss(current: LockRecord, slot: Slot, owner_id: str, now_ms: int) -> LossVerdict:
    """Why ``owner_id`` could not acquire ``slot`` at ``now_ms`` (caller clock, epoch ms), given ``current``.

    In order: a finished slot at or after ``slot`` (``slot_finished`` for the same slot, ``superseded``
    for a newer one); a newer acquired slot (``superseded``); our own lease for the slot (``ours``); the
    job paused for this slot (``paused``); a live lease of another owner (``held`` for this slot,
    ``overrun`` for an older one); the slot among the missed slots (``slot_finished``: recorded MISSED, it
    never runs); otherwise ``unexplained``.
    """
    if current.last_finished_slot is not None and current.last_finished_slot >= slot:
        return "slot_finished" if current.last_finished_slot == slot else "superseded"
    if current.lease_slot is not None and current.lease_slot > slot:
        return "superseded"
    if current.owner_id == owner_id and current.lease_slot == slot:
        return "ours"
    if current.pauses(slot):
        return "paused"
    if current.locked(now_ms):
        return "held" if current.lease_slot == slot else "overrun"
    if slot in current.missed_slots:
        return "slot_finished"
    return "unexplained"


def classify_manual_loss(current: LockRecord, slot: Slot, generation: int, owner_id: str, now_ms: int) -> LossVerdict:
    """Why ``owner_id`` could not take the manual lease for ``generation`` of ``slot``, given the manual lock item
    ``current``: our own lease for it (``ours``); a live lease for the same slot and generation (``held``) or
    for another manual run (``busy``); otherwise ``unexplained``."""
    same_run = current.lease_slot == slot and current.lease_generation == generation
    if same_run and current.owner_id == owner_id:
        return "ours"
    if current.locked(now_ms):
        return "held" if same_run else "busy"
    return "unexplained"


def records_missed(reason: LossReason, current: LockRecord, slot: Slot) -> bool:
    """Whether a loser for ``reason`` must try to record ``slot`` MISSED: the slot will never run
    (``overrun``, ``superseded``) and is not already among the lock item's missed slots."""
    return reason in ("overrun", "superseded") and slot not in current.missed_slots


def outcome_applied_on_lock(current: LockRecord, slot: Slot, fencing_token: int) -> SlotOutcomeName | None:
    """The outcome our commit of ``slot`` under ``fencing_token`` wrote, if the lock item shows it: the
    last finished slot is ours, under our token (tokens are unique per acquisition, whoever holds the
    lease now). ``None`` if it does not show it."""
    if current.last_finished_slot == slot and current.last_finished_token == fencing_token:
        if current.last_finished_outcome == "succeeded":
            return "succeeded"
        if current.last_finished_outcome == "failed":
            return "failed"
        if current.last_finished_outcome == "missed":
            return "missed"
    return None


def outcome_applied_on_slot_item(slot_item: Mapping[str, Any], fencing_token: int) -> SlotOutcomeName | None:
    """The outcome our commit under ``fencing_token`` wrote, from the decoded slot item (written in the
    same transaction; it still shows the commit once a newer slot finished). ``None`` if it does not."""
    statuses: dict[Any, SlotOutcomeName] = {
        STATUS_SUCCEEDED: "succeeded",
        STATUS_FAILED: "failed",
        STATUS_MISSED: "missed",
    }
    if slot_item.get(STATUS) == STATUS_MISSED and RECORD_ID in slot_item:
        return None  # recorded MISSED by someone else (superseded, too old): record_missed writes a record_id
    if slot_item.get(TOKEN) == fencing_token and slot_item.get(STATUS) in statuses:
        return statuses[slot_item[STATUS]]
    return None
