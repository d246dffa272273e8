"""The operator's backfill beside the live schedule, as ``tools.ops backfill`` runs it: one slot at a time, oldest
first, each a new generation requested with :func:`slotlock.request_generation` (``kind`` ``backfill``, one
``run_id`` for the whole range, ``resume``: a generation this run requested is never requested twice) and invoked
asynchronously with the manual marker; the next slot once the generation's item is terminal.

:class:`Backfill` is a state machine stepped by the harness's loop (it never blocks the fake Lambda service):
``invoke(event)`` sends one asynchronous invocation; the generation's manual runs take the capacity budget's
permits like the live slots but leave ``capacity.manual_headroom`` free (docs/protocol.md, "Capacity semaphore").
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slotlock import PermitOwner, Slot, SlotLock, request_generation

OPERATOR_IDENTITY = "arn:aws:iam::123456789012:user/capacity-operator"
TERMINAL = ("SUCCEEDED", "FAILED", "MISSED")
POLL_S = 0.5  # the operator's wait polls the generation's item (tools.ops polls every 2 s)
#: Invocations of one generation that ended without running it (the manual lease busy, a failure) are sent again,
#: as the operator would run the same backfill command again, a few times at most.
MAX_INVOCATIONS = 6


@dataclass
class BackfillSlot:
    """One slot of the range: its generation (once requested) and what became of it."""

    slot: str
    generation: int | None = None
    status: str | None = None
    invocations: int = 0
    requested_at: float | None = None
    finished_at: float | None = None


@dataclass
class Backfill:
    """A backfill of ``slots`` (ISO, oldest first) of ``job`` on ``lock``'s table; step it until :attr:`done`.

    ``invoke(event)`` sends one asynchronous invocation of the job's function; ``in_flight(owner)`` says whether
    an invocation (or a retry, a deferral) of that generation is still due or running in the fake service;
    ``deployment``: the lock table's name, which the permit owners of the deployment's functions name.
    """

    lock: SlotLock
    job: str
    slots: list[BackfillSlot]
    invoke: Callable[[dict[str, Any]], None]
    in_flight: Callable[[str], bool]
    deployment: str | None = None
    run_id: str = ""
    errors: list[str] = field(default_factory=list)
    _index: int = 0
    _next_poll: float = 0.0

    def __post_init__(self) -> None:
        if not self.run_id:
            digest = hashlib.sha256("|".join([self.job, *(s.slot for s in self.slots)]).encode()).hexdigest()
            self.run_id = f"backfill-{digest[:16]}"

    @property
    def done(self) -> bool:
        return self._index >= len(self.slots)

    @property
    def current(self) -> BackfillSlot | None:
        return None if self.done else self.slots[self._index]

    def owner(self, item: BackfillSlot) -> str:
        """The permit owner of the item's generation (:class:`slotlock.PermitOwner`'s id)."""
        owner = PermitOwner(self.job, Slot.parse(item.slot), item.generation or 0, deployment=self.deployment)
        return owner.id

    def step(self) -> None:
        item = self.current
        if item is None or time.monotonic() < self._next_poll:
            return
        self._next_poll = time.monotonic() + POLL_S
        if item.generation is None:
            request = request_generation(
                self.lock.context,
                Slot.parse(item.slot),
                run_id=self.run_id,
                kind="backfill",
                requested_by=OPERATOR_IDENTITY,
                reason=f"capacity run: backfill of {self.job}",
                resume=True,
            )
            item.generation, item.requested_at = request.generation, time.monotonic()
            self._invoke(item)
            return
        record = self.lock.for_generation(item.generation).get_slot(Slot.parse(item.slot)) or {}
        status = record.get("status")
        if status in TERMINAL:
            item.status, item.finished_at = str(status), time.monotonic()
            self._index += 1
            self._next_poll = 0.0
        elif not self.in_flight(self.owner(item)):
            if item.invocations >= MAX_INVOCATIONS:
                self.errors.append(f"backfill {self.owner(item)} not terminal after {item.invocations} invocations")
                item.status = str(status)
                self._index += 1
            else:
                self._invoke(item)  # its invocation ended without running it: the operator runs it again

    def _invoke(self, item: BackfillSlot) -> None:
        item.invocations += 1
        marker = {
            "generation": item.generation,
            "run_id": self.run_id,
            "kind": "backfill",
            "requested_by": OPERATOR_IDENTITY,
            "reason": f"capacity run: backfill of {self.job}",
        }
        self.invoke({"job": self.job, "scheduled_time": item.slot, "manual": marker})

    def summary(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "run_id": self.run_id,
            "slots": len(self.slots),
            "statuses": {s.slot: s.status for s in self.slots},
            "invocations": sum(s.invocations for s in self.slots),
            "errors": list(self.errors),
        }
