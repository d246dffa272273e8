"""Manual runs: a new generation of a past slot, under the job's own manual lease, beside the live schedule.

The live schedule runs generation 1 of each slot (:mod:`slotlock._acquire`). Every other run of a slot (an
operator's run of a past slot, a re-run, a backfill) is a **generation** 2, 3, ... of it, with its own history
item (``slot#<job>#<slot>#g<n>``), and it is fenced by a lease on the job's **manual lock item**
(``manual#<job>``), which has its own fencing counter. A manual run never reads nor writes the live lock item,
so the live slot always wins: a live racer never loses to, nor records a miss because of, a manual run. One
manual run per job runs at a time (the manual lease).

Timeline of a re-run of slot S as generation 2 (racer M, lease 45 s)::

    t=0     operator: request_generation(S)  TransactWriteItems
              [generations#job#S: last_generation 1 -> 2] + [slot#job#S#g2: REQUESTED, who, when, why]
    t=0.1   operator: invoke the function asynchronously with {"scheduled_time": S, "manual": {"generation": 2}}
    t=0.2   M: UpdateItem manual#job  SET owner=M, slot=S, generation=2, expiry  ADD fencing_token 1 -> 4
    t=0.21  M: GetItem slot#job#S#g2 (REQUESTED: run it; RUNNING: adopt its query; ended: give the lease back)
    t=0.5   M: StartQueryExecution(token=f(job, S#g2, attempt 1)); record it on slot#job#S#g2  [owner=M ∧ token=4]
    t=20    M: TransactWriteItems [manual#job: owner=M ∧ token=4] + [slot#job#S#g2 SUCCEEDED] + results of (S, 2)

Requesting a generation (:func:`request_generation`) is the operator's step, in :mod:`slotlock.ops.requests`
(re-exported here, where 1.x has it): one transaction moves the slot's generation counter
(``generations#<job>#<slot>``, never expired) and writes the generation's history item as REQUESTED with the
audit (who, when, why, which command), so generations are never reused and a backfill that is run again finds
the generations it already requested (``run_id``) instead of adding more.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from . import _acquire as acquire
from . import table
from .errors import GenerationRequestError, InvalidEventError, LockConfigurationError
from .ops.requests import (
    MAX_REASON_CHARS,
    MAX_REQUESTED_BY_CHARS,
    REQUEST_ATTEMPTS,
    RUN_ID_PATTERN,
    RUN_KINDS,
    GenerationRequest,
    RunKind,
    find_requested,
    request_generation,
    validate_request,
)

if TYPE_CHECKING:
    from ._dynamodb import LockContext
    from ._lease import Lease, Loss
    from .slot import Slot

__all__ = [
    "MANUAL_EVENT_FIELD",
    "MAX_REASON_CHARS",
    "MAX_REQUESTED_BY_CHARS",
    "REQUEST_ATTEMPTS",
    "RUN_ID_PATTERN",
    "RUN_KINDS",
    "GenerationRequest",
    "GenerationRequestError",
    "ManualMarker",
    "RunKind",
    "find_requested",
    "request_generation",
    "try_acquire",
    "validate_request",
]

logger = logging.getLogger(__name__)


def try_acquire(ctx: LockContext, slot: Slot, owner_id: str, deadline_ms: int | None) -> Lease | Loss:
    """Race for the manual lease to run generation ``ctx.generation`` of ``slot``.

    One conditional UpdateItem of the manual lock item (:data:`~slotlock._expressions.MANUAL_ACQUIRE_CONDITION`),
    then one consistent read of the generation's history item: REQUESTED runs; RUNNING adopts its recorded
    state (a predecessor's query id, whoever held the manual lease in between); a terminal record gives the
    lease back and loses as ``slot_finished``. No maximum slot age applies (a backfill runs old slots); the
    maximum slot lead does (a manual run of a future slot is refused).

    Raises
    ------
    InvalidEventError
        The slot is too far ahead of the clock, or the generation was never requested (no history item):
        ``manual.generation``. The lease is given back first in the second case.
    CorruptLockItemError, TransientLockError, LockBackendError
        As :func:`slotlock._acquire.try_acquire`.
    """
    return acquire.try_acquire(ctx, slot, owner_id, deadline_ms, manual=True)


#: The field of an invocation event that marks an operator's run (``tools.ops run/rerun/backfill``).
MANUAL_EVENT_FIELD = "manual"


@dataclass(frozen=True)
class ManualMarker:
    """The explicit manual marker of an operator's invocation::

        {"job": "...", "scheduled_time": "...", "manual": {"generation": 2, "run_id": "...", "kind": "rerun",
         "requested_by": "arn:aws:sts::...", "reason": "..."}}

    ``generation`` ``None`` (absent): run the slot through the live path like any racer (``run`` of the
    current slot: once per slot holds); 2 or more: run that requested generation through the manual path.
    """

    generation: int | None
    run_id: str
    kind: RunKind
    requested_by: str
    reason: str

    @classmethod
    def from_event(cls, event: object) -> ManualMarker | None:
        """The event's marker, or ``None`` for a scheduled invocation (no ``manual`` field).

        Raises :class:`InvalidEventError` naming the bad field (``manual.generation``, ``manual.run_id``, ...).
        """
        if not isinstance(event, dict) or MANUAL_EVENT_FIELD not in event:
            return None
        marker = event[MANUAL_EVENT_FIELD]
        if not isinstance(marker, dict):
            raise InvalidEventError("manual", f"must be an object, got {type(marker).__name__}")
        generation = marker.get("generation")
        if generation is not None and (
            isinstance(generation, bool)
            or not isinstance(generation, int)
            or not table.LIVE_GENERATION < generation <= table.MAX_GENERATION
        ):
            raise InvalidEventError(
                "manual.generation", f"must be an integer from 2 to {table.MAX_GENERATION}, got {generation!r:.40}"
            )
        fields = {name: marker.get(name) for name in ("run_id", "kind", "requested_by", "reason")}
        try:
            validate_request(**fields)
        except LockConfigurationError as exc:
            raise InvalidEventError(f"manual.{exc.parameter}", str(exc)) from exc
        return cls(
            generation=generation,
            run_id=str(fields["run_id"]),
            kind=cast(RunKind, fields["kind"]),
            requested_by=str(fields["requested_by"]),
            reason=str(fields["reason"]).strip(),
        )

    def as_event_field(self) -> dict[str, object]:
        """The marker as the event carries it."""
        marker: dict[str, object] = {
            "run_id": self.run_id,
            "kind": self.kind,
            "requested_by": self.requested_by,
            "reason": self.reason,
        }
        if self.generation is not None:
            marker["generation"] = self.generation
        return marker
