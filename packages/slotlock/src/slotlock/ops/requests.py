"""Manual-run requests: :func:`request_generation` writes a new generation of a past slot as REQUESTED, with its
audit, for a manual run to execute (:mod:`slotlock.manual`); :func:`find_requested` finds the one an operator's
command asked for before.

One transaction moves the slot's generation counter (``generations#<job>#<slot>``, never expired) and writes the
generation's history item as REQUESTED with the audit (who, when, why, which command), so generations are never
reused and a backfill that is run again finds the generations it already requested (``run_id``) instead of adding
more. Operator tools call these (``tools.ops run/rerun/backfill``), never a racer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .. import codec, table
from .._client import Cancelled
from .._expressions import (
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
from .._wire import checked, update, write
from ..errors import CorruptLockItemError, GenerationRequestError, LockConfigurationError
from ..slot import Slot

if TYPE_CHECKING:
    from .._dynamodb import LockContext


RunKind = Literal["run", "rerun", "backfill"]
RUN_KINDS: tuple[RunKind, ...] = ("run", "rerun", "backfill")
#: An operator command's id: letters, digits and ``._:-``, 1..128 characters.
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")
MAX_REASON_CHARS = 1000
MAX_REQUESTED_BY_CHARS = 2048
#: A request transaction that meets a concurrent request of the same slot re-reads the counter and tries again.
REQUEST_ATTEMPTS = 5


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
