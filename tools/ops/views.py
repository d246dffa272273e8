"""What ``python -m tools.ops`` reads, as plain views: a job's status (:class:`JobStatus`), a run's outcome
(:class:`RunResult`), and a slot's wait for a capacity permit (:func:`capacity_wait`, issue 24)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from athena_refresh.failures import Failure, describe_failure
from slotlock import HistoryRecord, LockRecord, Slot
from slotlock.codec import plain_value


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def capacity_wait(record: HistoryRecord | None) -> dict[str, Any] | None:
    """How long the slot waited for a capacity permit (issue 24), as its slot item says; ``None`` when it says
    nothing (the budget off, a slot that never reached its query, a record from before the budget).

    ``{"waited_ms", "deferrals", "source"}``: ``source`` ``"missed"``: MISSED ``capacity`` (its error records
    ``waited_ms`` and ``deferrals``; a slot given back and superseded before its comeback came records the newer
    slot instead, and the state it kept says them); ``"committed"``: the commit's summary carries ``permit_wait_ms`` (over every
    invocation of the slot; 0: a permit at once), its deferrals from the state it kept; ``"waiting"``: in flight, or
    given back and waiting for its re-invocation (the state's ``capacity``: ``deferrals``, ``waited_ms``).
    ``deferrals`` is ``None`` when the item does not say. A value that is not a count >= 0 is not shown."""
    if record is None:
        return None
    state = record.state.get("capacity")
    state = state if isinstance(state, Mapping) else {}
    if record.status == "MISSED" and record.reason == "capacity":
        told = record.error if "waited_ms" in record.error else state
        waited, deferrals, source = told.get("waited_ms"), told.get("deferrals"), "missed"
    elif "permit_wait_ms" in record.summary:
        waited, deferrals, source = record.summary.get("permit_wait_ms"), state.get("deferrals", 0), "committed"
    elif state:
        waited, deferrals, source = state.get("waited_ms"), state.get("deferrals"), "waiting"
    else:
        return None
    if _count(waited) is None:
        return None
    return {"waited_ms": waited, "deferrals": _count(deferrals), "source": source}


@dataclass(frozen=True)
class JobStatus:
    """``status`` of one job at ``now_ms``: the decoded live and manual lock items and their raw audit fields, and
    the slot item of the live lease's slot (``None``: no slot acquired yet, or its item is gone), and that of the last
    finished slot when it did not succeed (:attr:`failure`: why)."""

    job: str
    now_ms: int
    live: LockRecord
    manual: LockRecord
    live_item: Mapping[str, Any]
    manual_item: Mapping[str, Any]
    slot_record: HistoryRecord | None = None
    last_finished_record: HistoryRecord | None = None

    @property
    def failure(self) -> Failure | None:
        """Why the last finished slot did not succeed (``None``: it succeeded, or nothing finished yet)."""
        record = self.last_finished_record
        return None if record is None else describe_failure(record.status, record.reason, record.error)

    @property
    def capacity(self) -> dict[str, Any] | None:
        """The live lease's slot's capacity wait (:func:`capacity_wait`), with the slot and its status."""
        wait = capacity_wait(self.slot_record)
        if wait is None or self.slot_record is None:
            return None
        return {"slot": self.slot_record.slot.iso, "status": self.slot_record.status, **wait}

    @property
    def lease_remaining_ms(self) -> int | None:
        """Milliseconds left on the live lease (``None`` when no lease is live)."""
        if not self.live.locked(self.now_ms) or self.live.lease_expires_at_ms is None:
            return None
        return self.live.lease_expires_at_ms - self.now_ms

    @property
    def last_success_age_s(self) -> float | None:
        if self.live.last_succeeded_at_ms is None:
            return None
        return max(0, self.now_ms - self.live.last_succeeded_at_ms) / 1000

    def as_dict(self) -> dict[str, Any]:
        def audit(item: Mapping[str, Any], *names: str) -> dict[str, Any]:
            return {name: plain_value(item[name]) for name in names if name in item}

        live, manual = self.live, self.manual
        return {
            "job": self.job,
            "now_ms": self.now_ms,
            "holder": {
                "owner_id": live.owner_id,
                "fencing_token": live.fencing_token,
                "slot": live.lease_slot.iso if live.lease_slot else None,
                "lease_expires_at_ms": live.lease_expires_at_ms,
                "lease_remaining_ms": self.lease_remaining_ms,
                "locked": live.locked(self.now_ms),
                "given_back_reason": live.given_back_reason,  # given back unfinished, for its comeback (capacity)
            },
            "manual_run": {
                "owner_id": manual.owner_id,
                "fencing_token": manual.fencing_token,
                "slot": manual.lease_slot.iso if manual.lease_slot else None,
                "generation": manual.lease_generation,
                "lease_expires_at_ms": manual.lease_expires_at_ms,
                "in_progress": manual.locked(self.now_ms),
                "last_finished_slot": manual.last_finished_slot.iso if manual.last_finished_slot else None,
                "last_finished_generation": manual.last_finished_generation,
                "last_finished_outcome": manual.last_finished_outcome,
            },
            "last_finished": {
                "slot": live.last_finished_slot.iso if live.last_finished_slot else None,
                "outcome": live.last_finished_outcome,
                "fencing_token": live.last_finished_token,
                "at_ms": live.last_finished_at_ms,
                "failure": self.failure.as_dict() if self.failure else None,
            },
            "last_success": {
                "slot": live.last_succeeded_slot.iso if live.last_succeeded_slot else None,
                "at_ms": live.last_succeeded_at_ms,
                "age_s": self.last_success_age_s,
            },
            "paused": live.paused,
            "paused_through_slot": live.paused_through_slot.iso if live.paused_through_slot else None,
            "pause_audit": audit(
                self.live_item, "pause_reason", "paused_by", "paused_at_ms", "resumed_by", "resumed_at_ms"
            ),
            "release_audit": audit(
                self.live_item, "release_reason", "released_by", "released_at_ms", "released_fencing_token"
            ),
            "capacity": self.capacity,
        }


@dataclass
class RunResult:
    """A run's outcome as its history item shows it.

    ``status``: the history item's status once terminal (SUCCEEDED, FAILED, MISSED), or ``REQUESTED``/
    ``RUNNING`` when the wait ended first (``timed_out``); ``skipped``: a backfill found this generation committed
    by an earlier attempt of the same command and invoked nothing.
    """

    job: str
    slot: Slot
    generation: int
    status: str
    record: HistoryRecord | None = None
    request_id: str | None = None
    elapsed_s: float = 0.0
    timed_out: bool = False
    resumed: bool = False
    skipped: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "slot": self.slot.iso,
            "generation": self.generation,
            "status": self.status,
            "request_id": self.request_id,
            "elapsed_s": round(self.elapsed_s, 3),
            "timed_out": self.timed_out,
            "resumed": self.resumed,
            "skipped": self.skipped,
            "record": self.record.as_dict() if self.record else None,
        }


__all__ = ["JobStatus", "RunResult", "capacity_wait"]
