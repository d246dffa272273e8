"""Value objects: the lease we hold, why we lost, and a decoded view of the lock item.

All times are epoch milliseconds from the *caller's* wall clock (``*_ms``), except slot times, which
come from the event (:class:`~slotlock.slot.Slot`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from .slot import Slot

LossReason = Literal[
    "held", "overrun", "slot_finished", "superseded", "too_old", "conflict", "unavailable", "paused", "busy"
]
SlotOutcomeName = Literal["succeeded", "failed", "missed"]


@dataclass(frozen=True)
class LockRecord:
    """The job's lock item as stored (decoded and type-checked), or as returned by ALL_OLD/ALL_NEW.

    ``owner_id`` is ``None`` when no lease is held (after a commit); ``fencing_token`` is 0 on a fresh
    table. ``lease_slot`` is the slot of the latest acquisition (kept after release).
    ``missed_slots`` are slots recorded MISSED while nobody held them ("overrun", "too_old"): never
    acquirable; a commit prunes those older than its slot.
    ``paused``: an operator paused the job; ``paused_through_slot``: slots at or before it are not acquired
    (far in the future while paused; the resume minute after a resume), except the one already acquired.
    ``lease_generation``/``last_finished_generation``: on the manual lock item, the generation of the
    latest manual run (``None`` on the live lock item, whose runs are all generation 1).
    ``given_back_reason``: why the lease slot's last holder gave it back unfinished (``SlotRun.give_back``), until
    the next acquisition; ``previous_given_back_reason``: that reason as the latest acquisition found it (for the
    previous slot: a superseded slot is recorded MISSED with it).
    """

    fencing_token: int = 0
    owner_id: str | None = None
    lease_expires_at_ms: int | None = None
    acquired_at_ms: int | None = None
    lease_slot: Slot | None = None
    previous_owner_id: str | None = None
    previous_slot: Slot | None = None
    last_finished_slot: Slot | None = None
    last_finished_outcome: str | None = None
    last_finished_token: int | None = None
    last_finished_at_ms: int | None = None
    last_succeeded_slot: Slot | None = None
    last_succeeded_at_ms: int | None = None
    missed_slots: frozenset[Slot] = frozenset()
    paused: bool = False
    paused_through_slot: Slot | None = None
    lease_generation: int | None = None
    previous_generation: int | None = None
    last_finished_generation: int | None = None
    given_back_reason: str | None = None
    previous_given_back_reason: str | None = None

    def pauses(self, slot: Slot) -> bool:
        """Whether the pause refuses ``slot``: at or before the paused-through slot, and not the slot
        already acquired (which may finish)."""
        return self.paused_through_slot is not None and slot <= self.paused_through_slot and self.lease_slot != slot

    def locked(self, now_ms: int) -> bool:
        """Whether *anyone* holds an unexpired lease at ``now_ms`` (redis-py's ``locked()``)."""
        return self.owner_id is not None and self.lease_expires_at_ms is not None and now_ms < self.lease_expires_at_ms

    def owned_by(self, owner_id: str, fencing_token: int) -> bool:
        """Whether the item still names this owner and token (redis-py's ``owned()``; no clock involved)."""
        return self.owner_id == owner_id and self.fencing_token == fencing_token


@dataclass(frozen=True)
class Lease:
    """A lease we hold on one job's lock for one slot. Immutable: renewals return a new ``Lease``.

    Attributes
    ----------
    job_name, slot, owner_id:
        What is locked, for which schedule slot, by whom (the Lambda request id, which Lambda keeps
        across its async retries of one event).
    fencing_token:
        Strictly increasing for the life of the table (Kleppmann's fencing token). Writes that must
        not come from a superseded holder are conditioned on it (see :meth:`SlotLock.commit`).
    acquired_at_ms, expires_at_ms:
        Caller clock, epoch ms. ``expires_at_ms`` never exceeds ``deadline_ms``.
    deadline_ms:
        The invocation's own deadline (epoch ms), or ``None`` when unbounded.
    takeover_from:
        The previous owner whose expired lease on this same slot we took over (``None`` otherwise).
    reentered:
        ``True`` when the previous holder of this slot was ourselves (a Lambda retry of our event).
    superseded_slot:
        An older, unfinished slot whose expired holder we replaced; recorded as missed at acquisition.
    superseded_recorded:
        Whether *our* acquisition wrote that MISSED record (exactly one writer per slot; a racer of the
        older slot may have written it first).
    superseded_reason:
        The reason of that MISSED record: ``superseded``, or the reason the older slot's last holder gave it
        back for (e.g. ``capacity``) when no comeback re-acquired it. ``None`` without a superseded slot.
    last_succeeded_at_ms:
        When the job last succeeded (from the lock item, caller clock), for "age of last success".
    stale_missed_slots:
        Missed slots older than ours seen on the lock item at acquisition: our commit removes them.
    state:
        In-flight state recorded for this slot by previous holders (e.g. a query execution id), which a
        successor adopts. Read-only mapping.
    generation:
        1 for the live schedule's run of the slot; 2, 3, ... for manual runs (a re-run, a backfill), whose
        lease is on the job's manual lock item with its own fencing counter.
    """

    acquired: ClassVar[bool] = True

    job_name: str
    slot: Slot
    owner_id: str
    fencing_token: int
    acquired_at_ms: int
    expires_at_ms: int
    deadline_ms: int | None = None
    takeover_from: str | None = None
    reentered: bool = False
    superseded_slot: Slot | None = None
    superseded_recorded: bool = False
    superseded_reason: str | None = None
    last_succeeded_at_ms: int | None = None
    stale_missed_slots: frozenset[Slot] = frozenset()
    state: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    generation: int = 1

    @property
    def takeover(self) -> bool:
        """Whether this lease took over an expired lease of another owner on the same slot."""
        return self.takeover_from is not None

    def remaining_ms(self, now_ms: int) -> int:
        """Milliseconds of lease left at ``now_ms`` (negative once expired)."""
        return self.expires_at_ms - now_ms


@dataclass(frozen=True)
class Loss:
    """Why a racer did not get the lease (it should return normally: no retry is useful).

    ``reason``:

    - ``held``: another owner holds an unexpired lease on this slot (the normal fan-out loser);
    - ``overrun``: an older slot's holder is still running;
    - ``slot_finished``: this slot already succeeded or failed for good;
    - ``slot_finished``: this slot already succeeded, failed, or was recorded missed (then the racer
      that acquired it ran nothing and marked it finished on the lock item);
    - ``superseded``: a newer slot already acquired or finished (this slot can never run);
    - ``too_old``: the delivery is older than the lock's maximum slot age (a misfire);
    - ``conflict``: the acquisition kept meeting a transaction in flight on the lock item (the holder's
      commit) within its short retry budget;
    - ``unavailable``: DynamoDB kept throttling (or failing) the acquisition within its short retry budget;
    - ``paused``: an operator paused the job (one racer records the slot MISSED ``paused``);
    - ``busy``: (manual runs) another manual run of the job holds the manual lease.

    ``missed_recorded`` is ``True`` for the one racer whose write recorded the slot as MISSED (reasons
    ``overrun``, ``superseded``, ``too_old`` and ``paused``); ``missed_reason`` is the reason that record carries
    (``reason``, except for a ``superseded`` slot its last holder gave back: the give-back reason, e.g.
    ``capacity``; ``None`` when it did not try to record one). ``current`` is the lock item as DynamoDB returned it with
    ALL_OLD (``None`` for ``too_old``, ``conflict`` and ``unavailable``).
    """

    acquired: ClassVar[bool] = False

    job_name: str
    slot: Slot
    owner_id: str
    reason: LossReason
    current: LockRecord | None = None
    missed_recorded: bool = False
    generation: int = 1
    missed_reason: str | None = None

    @property
    def holder_owner_id(self) -> str | None:
        """Owner of the lease we lost to, if any."""
        return self.current.owner_id if self.current else None

    @property
    def holder_expires_at_ms(self) -> int | None:
        """When that lease expires (holder's clock, epoch ms), if any."""
        return self.current.lease_expires_at_ms if self.current else None


@dataclass(frozen=True)
class CommitReceipt:
    """What a successful commit wrote: the slot's final outcome under our fencing token."""

    job_name: str
    slot: Slot
    fencing_token: int
    outcome: SlotOutcomeName
    committed_at_ms: int
    already_applied: bool = False  # an SDK retry found our own earlier commit in place
    generation: int = 1
