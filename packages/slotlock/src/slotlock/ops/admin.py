"""Operator actions on a job's lock items (not used by racers): pause and resume the live schedule,
release a lease (``force``: a live one), and raise the fencing counter ("fence bump").

Every action is one conditional UpdateItem of the item it changes, audited on that item: who (the caller's
identity, e.g. the ARN from STS ``GetCallerIdentity``), when (the caller's clock, epoch ms) and why.

**Pause** sets the live lock item's ``paused`` flag and moves ``paused_through_slot_epoch_s`` far ahead; the
acquire condition refuses every slot at or before it except the slot already acquired (a running slot may
finish). Every racer of a paused slot loses on its one acquisition request (no Athena request), then tries
one conditional PutItem of the slot's MISSED ``paused`` record, which exactly one of them writes. **Resume** clears the flag and sets ``paused_through_slot_epoch_s`` to the
resume minute, so a paused slot's late delivery (a Lambda retry) never runs it after the resume either.

**Release** ends a lease on the operator's word: it sets the expiry to now and bumps the fencing token
(``ADD fencing_token 1``), conditioned on the owner and token it read. The old holder's heartbeat, state and
commit are conditioned on its token, so all of them are rejected from then on; the owner and the slot stay on
the item, so the next acquirer of the slot takes it over and adopts the recorded query id. Without ``force``
it refuses while the lease is live (it then only fences out an expired holder that might wake up).

Why: a DynamoDB point-in-time restore (or a restore from backup, or an import) of the lock table
brings the lock item back as it was at the restore point, so its fencing counter can be *below*
tokens that were issued after that point and are already stored with results. Every new winner would
then get a token its results store has seen before: a store that fences by token (the results table's
LATEST pointer compares tokens within one slot and generation) can refuse its commit, or, with a store
that checks less, a stale writer could look current again. Raising the counter above every stored token
restores the invariant "a new lease's token is higher than any token ever used". (The bump raises the
live lock item's counter; the manual lock item ``manual#<job>`` and the per-slot generation counters are
restored too, and are not bumped: see docs/operations.md.)

https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/PointInTimeRecovery.html

The bump is one conditional UpdateItem that only ever raises the counter (``attribute_not_exists OR
fencing_token < :target``), so it is idempotent and safe to repeat, and never lowers a counter that
moved on in the meantime. Boto3 only, like the rest of :mod:`slotlock`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError

from .. import _reads as reads
from .._dynamodb import LockContext, SlotLock
from .._expressions import (
    HOLDER_CONDITION,
    RELEASED_TOKEN,
    TOKEN,
)
from .._lease import LockRecord
from .._wire import Condition, UpdateExpression, checked, either, old_item, update
from ..errors import LeaseHeldError, LockChangedError, LockConfigurationError
from ..slot import MAX_EPOCH_S, Slot
from .requests import MAX_REASON_CHARS, MAX_REQUESTED_BY_CHARS

#: DynamoDB numbers have at most 38 significant digits.
MAX_FENCING_TOKEN = 10**38 - 1

BUMP_CONDITION = checked(either("attribute_not_exists(#token)", "#token < :target"))


@dataclass(frozen=True)
class FenceBump:
    """The result of :func:`bump_fencing_token`.

    ``before``/``after``: the lock item's fencing token before and after (``None`` when there was no
    token, e.g. no lock item yet); ``target``: the requested minimum; ``bumped``: whether this call
    wrote; ``dry_run``: nothing was written because it was asked not to.
    """

    job_name: str
    before: int | None
    after: int | None
    target: int
    bumped: bool
    dry_run: bool = False

    @property
    def next_token(self) -> int:
        """The token the next acquisition gets (counter + 1)."""
        return (self.after or 0) + 1


def bump_fencing_token(lock: SlotLock, at_least: int, *, dry_run: bool = False, force: bool = False) -> FenceBump:
    """Raise the job's fencing counter to at least ``at_least``; never lower it.

    After the call the lock item's ``fencing_token`` is ``>= at_least``, so the next acquisition gets a
    token above every token up to ``at_least``. A counter already at or above it is left alone
    (``bumped=False``): repeating the call changes nothing. A missing lock item is created with just the
    counter (and the job name); a lock item that lost its counter gets it back.

    Parameters
    ----------
    lock:
        The job's :class:`SlotLock` (its table, job name, client and clock are used).
    at_least:
        The minimum counter value, 1 .. 10**38 - 1 (DynamoDB's number precision). Typically the highest
        token stored with results plus a margin (``tools.fence_bump`` computes it).
    dry_run:
        Read the lock item and report what would change, without writing.
    force:
        Bump even while a lease is live. The holder is fenced out: its heartbeat or commit is rejected
        and its slot is taken over once the lease expires.

    Raises
    ------
    LockConfigurationError
        ``at_least`` is not an integer in range.
    LeaseHeldError
        A lease is live and ``force`` is false; nothing was written.
    CorruptLockItemError
        The lock item holds wrong-typed attributes (repair them first); nothing was written.
    LockBackendError
        DynamoDB failed.
    """
    if not isinstance(at_least, int) or isinstance(at_least, bool) or not 1 <= at_least <= MAX_FENCING_TOKEN:
        raise LockConfigurationError("at_least", f"must be an integer from 1 to 10**38 - 1, got {at_least!r}")
    record, before = _decode(lock, lock.get_lock_item())
    if record is not None and record.locked(lock.clock_ms()) and not force and (before or 0) < at_least:
        raise LeaseHeldError(lock.job_name, record)
    if before is not None and before >= at_least:
        return FenceBump(lock.job_name, before, before, at_least, bumped=False, dry_run=dry_run)
    if dry_run:
        return FenceBump(lock.job_name, before, at_least, at_least, bumped=False, dry_run=True)
    try:
        previous = lock.update_lock_item(
            update(("SET", ["#token = :target", "#job = if_not_exists(#job, :job)"])),
            BUMP_CONDITION,
            {},
            {":target": {"N": str(at_least)}, ":job": {"S": lock.job_name}},
        )
    except ClientError as exc:  # only a failed condition reaches here (update_lock_item wraps the rest)
        # The counter moved to >= at_least since our read (acquisitions, or another bump): nothing to do.
        _, current = _decode(lock, old_item(exc) or lock.get_lock_item())
        return FenceBump(lock.job_name, before, current, at_least, bumped=False)
    _, old = _decode(lock, previous)
    return FenceBump(lock.job_name, old, at_least, at_least, bumped=True)


def _decode(lock: SlotLock, item: dict[str, Any] | None) -> tuple[LockRecord | None, int | None]:
    """(decoded lock item, its fencing token): ``(None, None)`` when absent. An item that lost its counter
    decodes with token ``None`` (the bump restores it); any other corruption raises CorruptLockItemError."""
    if not item:
        return None, None
    if TOKEN not in item:
        return lock.decode_lock({**item, TOKEN: {"N": "0"}}), None
    record = lock.decode_lock(item)
    return record, record.fencing_token


@dataclass(frozen=True)
class OperatorAction:
    """What an operator action did (or, with ``dry_run``, would do).

    ``changed``: this call wrote; ``before``/``after``: the lock item decoded before and (when written or
    planned) after; ``message``: one line for a human.
    """

    job_name: str
    action: str
    changed: bool
    dry_run: bool
    message: str
    before: LockRecord | None = None
    after: LockRecord | None = None


def _audit_text(name: str, value: str, limit: int) -> str:
    if not isinstance(value, str) or not 1 <= len(value.strip()) <= limit:
        raise LockConfigurationError(name, f"must be 1..{limit} characters")
    return value.strip()


def _update(
    ctx: LockContext, expression: UpdateExpression, condition: Condition, values: dict[str, Any]
) -> tuple[bool, dict[str, Any] | None]:
    """One conditional UpdateItem of ``ctx``'s lock item (:func:`slotlock._reads.update_lock_item`): ``(True,
    ALL_NEW item)``, or ``(False, ALL_OLD item)`` when the condition failed; anything else is wrapped
    (:class:`LockBackendError`)."""
    try:
        return True, reads.update_lock_item(ctx, expression, condition, {}, values, return_values="ALL_NEW")
    except ClientError as exc:  # update_lock_item re-raises only a failed condition
        return False, old_item(exc) or ctx.io.get(ctx.lock_key)


def _record(ctx: LockContext, item: dict[str, Any] | None) -> LockRecord | None:
    return ctx.decode_lock(item) if item else None


def pause(lock: SlotLock, *, reason: str, requested_by: str, dry_run: bool = False) -> OperatorAction:
    """Pause the live schedule of ``lock``'s job: no slot at or before the pause is acquired any more, except
    the slot already acquired (it may finish); its racers lose as ``paused`` on their acquisition request, and
    exactly one of their conditional PutItems records the slot MISSED ``paused``. Manual runs are not paused (they are the operator's own).

    Idempotent: an already paused job is left as it is (``changed=False``, its audit kept). On a fresh table
    the lock item is created (fencing token 0). Audit: ``paused_by``, ``paused_at_ms``, ``pause_reason``.

    Raises :class:`LockConfigurationError` (a bad reason or identity), :class:`CorruptLockItemError`,
    :class:`LockBackendError`.
    """
    ctx = lock.context.for_generation(1)
    reason = _audit_text("reason", reason, MAX_REASON_CHARS)
    requested_by = _audit_text("requested_by", requested_by, MAX_REQUESTED_BY_CHARS)
    before = _record(ctx, ctx.get_lock_item())
    if before is not None and before.paused:
        return OperatorAction(ctx.job_name, "pause", False, dry_run, "already paused", before, before)
    if dry_run:
        after = replace(before or LockRecord(), paused=True, paused_through_slot=Slot(MAX_EPOCH_S))
        return OperatorAction(ctx.job_name, "pause", False, True, "would pause the live schedule", before, after)
    changed, item = _update(
        ctx,
        update(
            (
                "SET",
                [
                    "#paused = :true",
                    "#paused_through = :forever",
                    "#pause_reason = :reason",
                    "#paused_by = :by",
                    "#paused_at = :now",
                    "#job = if_not_exists(#job, :job)",
                    "#token = if_not_exists(#token, :zero)",
                ],
            )
        ),
        checked(either("attribute_not_exists(#paused)", "#paused = :false")),
        {
            ":true": {"BOOL": True},
            ":false": {"BOOL": False},
            ":forever": {"N": str(MAX_EPOCH_S)},
            ":reason": {"S": reason},
            ":by": {"S": requested_by},
            ":now": {"N": str(ctx.clock_ms())},
            ":job": {"S": ctx.job_name},
            ":zero": {"N": "0"},
        },
    )
    record = _record(ctx, item)
    message = "paused the live schedule" if changed else "already paused"
    return OperatorAction(ctx.job_name, "pause", changed, False, message, before, record)


def resume(lock: SlotLock, *, requested_by: str, dry_run: bool = False) -> OperatorAction:
    """Resume the live schedule: clear the pause flag and keep the slots up to the resume minute paused
    (``paused_through_slot_epoch_s`` = the resume minute), so a paused slot recorded MISSED never runs after
    the resume. The next slot after the resume minute runs as usual. Idempotent (``changed=False`` when not
    paused). Audit: ``resumed_by``, ``resumed_at_ms``.
    """
    ctx = lock.context.for_generation(1)
    requested_by = _audit_text("requested_by", requested_by, MAX_REQUESTED_BY_CHARS)
    before = _record(ctx, ctx.get_lock_item())
    if before is None or not before.paused:
        return OperatorAction(ctx.job_name, "resume", False, dry_run, "not paused", before, before)
    now_ms = ctx.clock_ms()
    resume_minute = Slot(now_ms // 1000)
    if dry_run:
        after = replace(before, paused=False, paused_through_slot=resume_minute)
        return OperatorAction(
            ctx.job_name, "resume", False, True, f"would resume after {resume_minute.iso}", before, after
        )
    changed, item = _update(
        ctx,
        update(("SET", ["#paused = :false", "#paused_through = :through", "#resumed_by = :by", "#resumed_at = :now"])),
        checked("#paused = :true"),
        {
            ":true": {"BOOL": True},
            ":false": {"BOOL": False},
            ":through": {"N": str(resume_minute.epoch_s)},
            ":by": {"S": requested_by},
            ":now": {"N": str(now_ms)},
        },
    )
    message = f"resumed: slots after {resume_minute.iso} run" if changed else "not paused"
    return OperatorAction(ctx.job_name, "resume", changed, False, message, before, _record(ctx, item))


def release(
    lock: SlotLock,
    *,
    reason: str,
    requested_by: str,
    force: bool = False,
    manual: bool = False,
    dry_run: bool = False,
) -> OperatorAction:
    """Release the job's lease on the operator's word (``manual``: the manual runs' lease).

    One UpdateItem: expiry = now, ``ADD fencing_token 1``, audit (``released_by``, ``released_at_ms``,
    ``release_reason``, ``released_fencing_token``), conditioned on the owner and token read just before. The
    old holder's heartbeat, state and commit are all rejected from then on (their conditions name its token);
    owner and slot stay, so the next acquirer of the slot takes it over and adopts the recorded query id.

    Without ``force`` a live lease is refused (:class:`LeaseHeldError`); an expired one is released (which
    fences out a holder that froze and might still wake up and commit). No owner: nothing to release
    (``changed=False``).

    Raises
    ------
    LeaseHeldError
        The lease is live and ``force`` is false; nothing was written.
    LockChangedError
        The lease changed hands between the read and the write; nothing was written.
    LockConfigurationError, CorruptLockItemError, LockBackendError
        A bad audit field; a tampered lock item; DynamoDB failed.
    """
    ctx = lock.context.for_generation(2 if manual else 1)
    reason = _audit_text("reason", reason, MAX_REASON_CHARS)
    requested_by = _audit_text("requested_by", requested_by, MAX_REQUESTED_BY_CHARS)
    item = ctx.get_lock_item()
    before = _record(ctx, item)
    action = "release --force" if force else "release"
    if before is None or before.owner_id is None:
        return OperatorAction(ctx.job_name, action, False, dry_run, "no lease to release", before, before)
    now_ms = ctx.clock_ms()
    released = (item or {}).get(RELEASED_TOKEN, {}).get("N")
    if not before.locked(now_ms) and released == str(before.fencing_token - 1):
        # Released already (an operator's release keeps the owner and bumped the token past it): say so and keep
        # that release's audit, instead of bumping again for a token nobody ever held.
        return OperatorAction(ctx.job_name, action, False, dry_run, "already released", before, before)
    if before.locked(now_ms) and not force:
        raise LeaseHeldError(ctx.job_name, before, "release it")
    after = replace(before, fencing_token=before.fencing_token + 1, lease_expires_at_ms=now_ms)
    if dry_run:
        message = f"would release {before.owner_id!r} and fence out token {before.fencing_token}"
        return OperatorAction(ctx.job_name, action, False, True, message, before, after)
    assert before.owner_id is not None
    changed, item = _update(
        ctx,
        update(
            (
                "SET",
                [
                    "#expires = :now",
                    "#released_by = :by",
                    "#released_at = :now",
                    "#release_reason = :reason",
                    "#released_token = :token",
                ],
            ),
            ("ADD", ["#token :one"]),
        ),
        HOLDER_CONDITION,
        {
            ":now": {"N": str(now_ms)},
            ":by": {"S": requested_by},
            ":reason": {"S": reason},
            ":token": {"N": str(before.fencing_token)},
            ":owner": {"S": before.owner_id},
            ":one": {"N": "1"},
        },
    )
    if not changed:
        raise LockChangedError(ctx.job_name, action, _record(ctx, item))
    message = f"released {before.owner_id!r}: token {before.fencing_token} is fenced out"
    return OperatorAction(ctx.job_name, action, True, False, message, before, _record(ctx, item))
