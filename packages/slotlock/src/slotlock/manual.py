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

Requesting a generation (:func:`request_generation`) is the operator's step: one transaction moves the
slot's generation counter (``generations#<job>#<slot>``, never expired) and writes the generation's history
item as REQUESTED with the audit (who, when, why, which command), so generations are never reused and a
backfill that is run again finds the generations it already requested (``run_id``) instead of adding more.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from . import _acquire as acquire
from . import codec, table
from ._client import Cancelled
from ._expressions import (
    GENERATION,
    JOB,
    LAST_GENERATION,
    LOCK_NAMES,
    PK,
    REQUEST_REASON,
    REQUESTED_AT,
    REQUESTED_BY,
    RUN_ID,
    RUN_KIND,
    SLOT,
    SLOT_CREATE_CONDITION,
    SLOT_EPOCH,
    STATUS,
    STATUS_REQUESTED,
    TTL,
)
from ._lease import Lease, Loss
from ._wire import checked, update, write
from .errors import CorruptLockItemError, InvalidEventError, LockConfigurationError
from .errors import GenerationRequestError as GenerationRequestError  # noqa: PLC0414 (public here since 1.0)
from .slot import Slot

if TYPE_CHECKING:
    from ._dynamodb import LockContext

logger = logging.getLogger(__name__)

RunKind = Literal["run", "rerun", "backfill"]
RUN_KINDS: tuple[RunKind, ...] = ("run", "rerun", "backfill")
#: An operator command's id: letters, digits and ``._:-``, 1..128 characters.
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")
MAX_REASON_CHARS = 1000
MAX_REQUESTED_BY_CHARS = 2048
#: A request transaction that meets a concurrent request of the same slot re-reads the counter and tries again.
REQUEST_ATTEMPTS = 5


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


@dataclass(frozen=True)
class GenerationRequest:
    """A generation requested for a slot (:func:`request_generation`).

    ``created``: this call wrote it; ``False``: the command ``run_id`` had requested it before (a resumed
    backfill), and ``status`` is its history item's status now (REQUESTED, RUNNING or terminal).
    """

    job_name: str
    slot: Slot
    generation: int
    run_id: str
    status: str
    created: bool


def validate_request(run_id: object, kind: object, requested_by: object, reason: object) -> None:
    """Check a generation request's audit fields; raises :class:`LockConfigurationError` naming the first bad one."""
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
        raise LockConfigurationError("run_id", f"must be 1..128 of [A-Za-z0-9._:-], got {run_id!r:.80}")
    if kind not in RUN_KINDS:
        raise LockConfigurationError("kind", f"must be one of {', '.join(RUN_KINDS)}, got {kind!r:.40}")
    if not isinstance(requested_by, str) or not 1 <= len(requested_by) <= MAX_REQUESTED_BY_CHARS:
        raise LockConfigurationError("requested_by", f"must be 1..{MAX_REQUESTED_BY_CHARS} characters")
    if not isinstance(reason, str) or not 1 <= len(reason.strip()) <= MAX_REASON_CHARS:
        raise LockConfigurationError("reason", f"must be 1..{MAX_REASON_CHARS} characters (say why)")


def find_requested(ctx: LockContext, slot: Slot, run_id: str) -> GenerationRequest | None:
    """The generation of ``slot`` that command ``run_id`` requested, if any (strongly consistent reads of the
    counter and of each generation's item, newest first)."""
    counter = ctx.io.get(table.generation_counter_key(ctx.job_name, slot.iso))
    last = _last_generation(ctx, slot, counter)
    for generation in range(last, table.LIVE_GENERATION, -1):
        key = table.slot_key(ctx.job_name, slot.iso, generation)
        item = ctx.io.get(key)
        codec.check_schema_version(item, key)
        if item is not None and item.get(RUN_ID, {}).get("S") == run_id:
            status = item.get(STATUS, {}).get("S", "")
            return GenerationRequest(ctx.job_name, slot, generation, run_id, status, created=False)
    return None


def request_generation(
    ctx: LockContext,
    slot: Slot,
    *,
    run_id: str,
    kind: RunKind,
    requested_by: str,
    reason: str,
    resume: bool = False,
) -> GenerationRequest:
    """Request the next generation of ``slot`` (>= 2): one transaction moves the slot's generation counter and
    writes the generation's history item as REQUESTED with the audit (``requested_by``, ``requested_at_ms``,
    ``request_reason``, ``run_kind``, ``run_id``).

    ``resume``: first look for a generation that ``run_id`` requested before (:func:`find_requested`) and
    return it instead (``created=False``): a backfill run again after a crash adds no generation twice.

    Raises
    ------
    LockConfigurationError
        A bad audit field (named).
    UnsupportedSchemaVersionError
        The slot's generation counter or a generation's history item has a newer table layout (nothing written).
    GenerationRequestError
        Concurrent requests of the same slot kept moving its counter (:data:`REQUEST_ATTEMPTS` times).
    TransientLockError, LockBackendError
        DynamoDB failed.
    """
    validate_request(run_id, kind, requested_by, reason)
    if resume:
        found = find_requested(ctx, slot, run_id)
        if found is not None:
            return found
    for _ in range(REQUEST_ATTEMPTS):
        counter_key = table.generation_counter_key(ctx.job_name, slot.iso)
        counter = ctx.io.get(counter_key)
        last = _last_generation(ctx, slot, counter)
        generation = last + 1
        if generation > table.MAX_GENERATION:
            raise LockConfigurationError("generation", f"slot {slot.iso} has {last} generations; no more allowed")
        now_ms = ctx.clock_ms()
        # Both writes set the layout and are conditioned on it; ALL_OLD on failure lets the client refuse a
        # newer item at once (slotlock._client), before the cancellation is judged.
        move_counter = {
            "Update": write(
                ctx.table_name,
                key=counter_key,
                expression=update(("SET", ["#last = :gen", "#job = :job", "#slot = :slot_iso"])),
                condition=checked("attribute_not_exists(#pk)" if counter is None else "#last = :last"),
                names=LOCK_NAMES,
                values={
                    ":gen": {"N": str(generation)},
                    ":job": {"S": ctx.job_name},
                    ":slot_iso": {"S": slot.iso},
                    **({} if counter is None else {":last": {"N": str(last)}}),
                },
            )
        }
        put_request = {
            "Put": write(
                ctx.table_name,
                item={
                    PK: {"S": table.slot_key(ctx.job_name, slot.iso, generation)},
                    JOB: {"S": ctx.job_name},
                    SLOT: {"S": slot.iso},
                    SLOT_EPOCH: {"N": str(slot.epoch_s)},
                    GENERATION: {"N": str(generation)},
                    STATUS: {"S": STATUS_REQUESTED},
                    RUN_ID: {"S": run_id},
                    RUN_KIND: {"S": kind},
                    REQUESTED_BY: {"S": requested_by},
                    REQUESTED_AT: {"N": str(now_ms)},
                    REQUEST_REASON: {"S": reason.strip()},
                    TTL: {"N": str(ctx.ttl_epoch_s(now_ms))},
                },
                condition=SLOT_CREATE_CONDITION,
                names=LOCK_NAMES,
            )
        }
        try:
            ctx.io.transact(
                [move_counter, put_request],
                operation="request_generation",
                budget=ctx.racer_budget(now_ms, None),
            )
        except Cancelled:
            # Another request of this slot moved the counter first (read it again), or this is botocore's
            # resend of our own applied request (its answer was lost): our item then carries our request time.
            mine_key = table.slot_key(ctx.job_name, slot.iso, generation)
            mine = ctx.io.get(mine_key) or {}
            codec.check_schema_version(mine, mine_key)
            if mine.get(RUN_ID, {}).get("S") == run_id and mine.get(REQUESTED_AT, {}).get("N") == str(now_ms):
                return GenerationRequest(ctx.job_name, slot, generation, run_id, STATUS_REQUESTED, created=True)
            continue
        return GenerationRequest(ctx.job_name, slot, generation, run_id, STATUS_REQUESTED, created=True)
    raise GenerationRequestError(
        f"slot {slot.iso} of {ctx.job_name!r}: concurrent requests kept moving its generation counter;"
        f" gave up after {REQUEST_ATTEMPTS} attempts"
    )


def _last_generation(ctx: LockContext, slot: Slot, counter: dict[str, Any] | None) -> int:
    key = table.generation_counter_key(ctx.job_name, slot.iso)
    codec.check_schema_version(counter, key)  # a raw item: its layout is checked before it is read
    if counter is None:
        return table.LIVE_GENERATION
    value = counter.get(LAST_GENERATION)
    if not isinstance(value, dict) or set(value) != {"N"}:
        raise CorruptLockItemError(key, LAST_GENERATION, f"must be a Number, found {value!r:.80}")
    try:
        last = int(str(value["N"]))
    except ValueError as exc:
        raise CorruptLockItemError(key, LAST_GENERATION, f"must be an integer, found {value['N']!r}") from exc
    if last < table.LIVE_GENERATION:
        raise CorruptLockItemError(key, LAST_GENERATION, f"must be >= 1, found {last}")
    return last


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
