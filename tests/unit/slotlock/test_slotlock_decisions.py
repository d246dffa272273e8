"""slotlock._decisions: the pure protocol decisions over a decoded lock item, without DynamoDB."""

from __future__ import annotations

from typing import Any

import pytest

from slotlock import Slot
from slotlock._decisions import classify_loss, outcome_applied_on_lock, outcome_applied_on_slot_item, records_missed
from slotlock._lease import LockRecord

S1, S2, S3 = Slot.parse("2026-11-24T10:00:00Z"), Slot.parse("2026-11-24T10:30:00Z"), Slot.parse("2026-11-24T11:00:00Z")
NOW_MS = 1_000_000


def held(slot: Slot, owner: str = "other", *, expires_ms: int = NOW_MS + 1, **more: Any) -> LockRecord:
    return LockRecord(fencing_token=7, owner_id=owner, lease_expires_at_ms=expires_ms, lease_slot=slot, **more)


@pytest.mark.parametrize(
    ("current", "slot", "verdict"),
    [
        (LockRecord(last_finished_slot=S2), S2, "slot_finished"),
        (LockRecord(last_finished_slot=S3), S2, "superseded"),
        (held(S3), S2, "superseded"),
        (held(S2, "me"), S2, "ours"),
        (held(S2), S2, "held"),
        (held(S1), S2, "overrun"),
        (held(S1, expires_ms=NOW_MS, missed_slots=frozenset({S2})), S2, "slot_finished"),
        (held(S1, expires_ms=NOW_MS), S2, "unexplained"),
    ],
)
def test_classify_loss_follows_the_condition_timeline(current: LockRecord, slot: Slot, verdict: str) -> None:
    assert classify_loss(current, slot, "me", NOW_MS) == verdict


def test_only_slots_that_never_run_and_are_not_marked_yet_are_recorded_missed() -> None:
    assert records_missed("overrun", LockRecord(), S2) and records_missed("superseded", LockRecord(), S2)
    assert not records_missed("held", LockRecord(), S2)
    assert not records_missed("overrun", LockRecord(missed_slots=frozenset({S2})), S2)


@pytest.mark.parametrize("outcome", ["succeeded", "failed", "missed"])
def test_a_commit_shows_on_the_lock_item_under_its_own_slot_and_token(outcome: str) -> None:
    current = LockRecord(last_finished_slot=S2, last_finished_token=7, last_finished_outcome=outcome)
    assert outcome_applied_on_lock(current, S2, 7) == outcome
    assert outcome_applied_on_lock(current, S2, 8) is None  # another acquisition's commit
    assert outcome_applied_on_lock(current, S1, 7) is None
    odd = LockRecord(last_finished_slot=S2, last_finished_token=7, last_finished_outcome="skipped")
    assert outcome_applied_on_lock(odd, S2, 7) is None


def test_a_commit_shows_on_its_slot_item_once_a_newer_slot_finished() -> None:
    assert outcome_applied_on_slot_item({"fencing_token": 7, "status": "SUCCEEDED"}, 7) == "succeeded"
    assert outcome_applied_on_slot_item({"fencing_token": 7, "status": "FAILED"}, 7) == "failed"
    assert outcome_applied_on_slot_item({"fencing_token": 7, "status": "RUNNING"}, 7) is None
    assert outcome_applied_on_slot_item({"fencing_token": 6, "status": "SUCCEEDED"}, 7) is None
    assert outcome_applied_on_slot_item({}, 7) is None
