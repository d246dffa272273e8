"""Operator actions on a job's lock item (not used by racers): raise the fencing counter ("fence bump").

Why: a DynamoDB point-in-time restore (or a restore from backup, or an import) of the lock table
brings the lock item back as it was at the restore point, so its fencing counter can be *below*
tokens that were issued after that point and are already stored with results. Every new winner would
then get a token its results store has seen before: the fenced writes (the results table's LATEST
pointer accepts only a higher token) reject its commit, slot after slot, or, with a store that
checks less, a stale writer could look current again. Raising the counter above every stored token
restores the invariant "a new lease's token is higher than any token ever used".

https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/PointInTimeRecovery.html

The bump is one conditional UpdateItem that only ever raises the counter (``attribute_not_exists OR
fencing_token < :target``), so it is idempotent and safe to repeat, and never lowers a counter that
moved on in the meantime. Boto3 only, like the rest of :mod:`slotlock`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .dynamodb import SlotLock
from .errors import LockConfigurationError, SlotLockError
from .expressions import JOB, TOKEN
from .lease import LockRecord
from .wire import old_item

#: DynamoDB numbers have at most 38 significant digits.
MAX_FENCING_TOKEN = 10**38 - 1

BUMP_CONDITION = "attribute_not_exists(#token) OR #token < :target"


class LeaseHeldError(SlotLockError):
    """A fence bump was refused because a lease is live: the bump would fence its holder out mid-run.

    ``current`` is the lock item. Wait for the lease to expire (or stop the schedules first), or bump
    with ``force=True`` to fence the holder out on purpose (its commit is then rejected as stale).
    """

    def __init__(self, job_name: str, current: LockRecord) -> None:
        super().__init__(
            f"lock of {job_name!r} is held by {current.owner_id!r} (token {current.fencing_token}) until"
            f" {current.lease_expires_at_ms} ms: refusing to bump the fencing token under a live lease"
        )
        self.current = current


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
            "SET #token = :target, #job = if_not_exists(#job, :job)",
            BUMP_CONDITION,
            {"#token": TOKEN, "#job": JOB},
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
