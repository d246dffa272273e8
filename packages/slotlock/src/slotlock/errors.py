"""Exceptions of ``slotlock``: one base class, specific subclasses that carry context.

Every DynamoDB/botocore failure is wrapped in :class:`LockBackendError` with ``raise ... from exc``,
so callers never need to import botocore to handle lock errors, and the original error stays attached.
Every public exception of slotlock is defined here; ``slotlock.schedule.CronError`` and
``slotlock.manual.GenerationRequestError`` are re-exported where 1.0 defined them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .table import SUPPORTED_SCHEMA_VERSIONS

if TYPE_CHECKING:
    from ._lease import Lease, LockRecord, Loss


class SlotLockError(Exception):
    """Base class of every error raised by ``slotlock``."""


class LockConfigurationError(SlotLockError, ValueError):
    """A lock was configured with values that cannot work (names the parameter and the rule)."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(f"{parameter}: {message}")
        self.parameter = parameter


class InvalidEventError(SlotLockError, ValueError):
    """The invocation event carries no usable scheduled time.

    ``field`` names the event field that is missing or malformed. Raised before any DynamoDB request,
    so a malformed event never takes the lock nor stores anything.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"event field {field!r}: {message}")
        self.field = field


class LockBackendError(SlotLockError):
    """DynamoDB could not be reached or refused the request (after botocore's own retries).

    ``operation`` is the DynamoDB API name; ``error_code`` the AWS error code when there is one.
    ``retryable`` says whether another invocation may succeed (throttling, a dropped connection, a
    server error) or will fail the same way (a validation error, a missing table, access denied). It
    never means the lease was lost: only :class:`LeaseLostError` says that.
    """

    def __init__(self, operation: str, message: str, *, error_code: str | None = None, retryable: bool = True) -> None:
        super().__init__(f"DynamoDB {operation} failed: {message}")
        self.operation = operation
        self.error_code = error_code
        self.retryable = retryable


class TransientLockError(LockBackendError):
    """DynamoDB kept answering with transient faults until the retry budget ran out (``retryable``).

    The faults were throttling (``ThrottlingError``, ``ProvisionedThroughputExceeded``), a conflicting
    transaction (``TransactionConflict``), a server error or a dropped connection. The budget never
    outlives the lease nor the invocation deadline, so the lease is still ours or expired, never
    silently taken over. Raise it to Lambda: its async retry keeps the request id, re-enters the lease
    and adopts the recorded in-flight state. ``reasons`` are the last answer's per-item cancellation
    reason codes (empty for a plain request), ``attempts`` how many requests were sent.
    """

    def __init__(
        self,
        operation: str,
        message: str,
        *,
        reasons: tuple[str, ...] = (),
        attempts: int = 1,
        error_code: str | None = None,
    ) -> None:
        super().__init__(operation, message, error_code=error_code, retryable=True)
        self.reasons = reasons
        self.attempts = attempts


class WriteRejectedError(LockBackendError):
    """DynamoDB refused a write for good: the same request would fail on every retry (not ``retryable``).

    Cancellation reasons ``ValidationError`` (an item over 400 KB, a transaction over 4 MB) and
    ``ItemCollectionSizeLimitExceeded``, or a top-level ``ValidationException``:
    https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html#API_TransactWriteItems_Errors
    ``index`` is the rejected item's position in the transaction (``None`` when DynamoDB does not say),
    ``reason_code`` its cancellation reason (or the error code). Nothing of the request was written and
    the lease is still held: :class:`~slotlock.runner.SlotRunner` records the slot FAILED with this reason.
    """

    def __init__(self, operation: str, message: str, *, reason_code: str, index: int | None = None) -> None:
        super().__init__(operation, message, error_code=reason_code, retryable=False)
        self.reason_code = reason_code
        self.index = index

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe description, recorded as the failed slot's error."""
        return {
            "type": type(self).__name__,
            "operation": self.operation,
            "reason": self.reason_code,
            "index": self.index,
            "retryable": False,
            "error_message": str(self),
        }


class CorruptLockItemError(SlotLockError):
    """An item of the lock table (the job's lock item, or a slot's history item) was tampered with.

    DynamoDB evaluates a comparison with a wrong-typed operand as false, so such an item would make
    every acquisition fail silently forever; it is reported instead. ``key`` is the item's ``pk``
    (``lock#<job>`` or ``slot#<job>#<slot>``). Repair or delete the attribute named by ``attribute``
    (never the lock item's ``fencing_token`` itself: see docs/operations.md). A corrupt
    item does not repair itself: retrying the invocation is pointless.
    """

    def __init__(self, key: str, attribute: str, message: str) -> None:
        kind = "lock item" if key.startswith("lock#") else "lock table item"
        super().__init__(f"{kind} {key!r}: attribute {attribute!r} {message}")
        self.key = key
        self.attribute = attribute


#: What an item of the lock table is, by its partition key's prefix (:mod:`slotlock.table`), for messages.
_ITEM_KINDS = (
    ("lock#", "lock item"),
    ("manual#", "manual lock item"),
    ("slot#", "slot item"),
    ("generations#", "generation counter"),
    ("permit#", "permit item"),
    ("tickets#", "tickets item"),
)


class UnsupportedSchemaVersionError(SlotLockError):
    """An item of the lock table has a table layout (``schema_version``) this version of slotlock does not read.

    ``key`` is the item's partition key; ``found`` the attribute's value as stored, in plain Python (``2`` for
    a Number, ``"2"`` for a String, ``None`` for NULL...); ``supported`` the layouts this slotlock reads (``(1,)``).
    A newer slotlock wrote the item: this one refuses to read it and never overwrites it (every conditional
    write carries the ``SCHEMA_COMPATIBLE`` clause, :mod:`slotlock._expressions`), so the item is left as it
    is. Not transient: no retry can help; upgrade slotlock (docs/compatibility.md). Neither a lost lease nor a
    corrupt item: nothing about the lease or the item's contents is known.
    """

    def __init__(self, key: str, found: Any, supported: tuple[int, ...] | None = None) -> None:
        supported = tuple(supported) if supported is not None else SUPPORTED_SCHEMA_VERSIONS
        kind = next((name for prefix, name in _ITEM_KINDS if key.startswith(prefix)), "lock table item")
        layouts = ", ".join(str(version) for version in supported)
        numeric = isinstance(found, (int, float)) and not isinstance(found, bool)
        if numeric and found > max(supported):
            shown, advice = f"schema_version={found}", "upgrade slotlock"
        elif numeric:
            shown, advice = f"schema_version={found}", "no slotlock release writes that layout: repair the item"
        else:
            shown = f"schema_version={found!r} (not a Number)"
            advice = "no slotlock release writes that: repair the item"
        super().__init__(
            f"{kind} {key!r} has table layout {shown}; slotlock {__version__} reads and writes layout"
            f"{'s' if len(supported) > 1 else ''} {layouts}: {advice} (docs/compatibility.md)"
        )
        self.key = key
        self.found = found
        self.supported = supported


class LockNotAcquiredError(SlotLockError):
    """Raised by :meth:`slotlock.SlotLock.acquire` when the race is lost; ``loss`` says why."""

    def __init__(self, loss: Loss) -> None:
        super().__init__(f"lock for {loss.job_name} slot {loss.slot.iso} not acquired: {loss.reason}")
        self.loss = loss


class LeaseLostError(SlotLockError):
    """Our lease is no longer ours: a renew, state write or release found another owner or token.

    The holder must write nothing more. ``current`` is the lock item as DynamoDB returned it with
    ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` (``None`` when it could not be read).
    """

    def __init__(self, lease: Lease, current: LockRecord | None, *, operation: str) -> None:
        holder = f"owner {current.owner_id!r} token {current.fencing_token}" if current else "unknown holder"
        super().__init__(
            f"{operation}: lease of {lease.owner_id!r} (token {lease.fencing_token}) on {lease.job_name} "
            f"slot {lease.slot.iso} was lost; lock now has {holder}"
        )
        self.lease = lease
        self.current = current
        self.operation = operation


class StaleFencingTokenError(LeaseLostError):
    """A commit carried a fencing token that is no longer current, and was rejected atomically.

    Nothing of the commit was written (DynamoDB transactions are all-or-nothing). See Kleppmann,
    "How to do distributed locking" (2016): https://martin.kleppmann.com/2016/02/08/how-to-do-distributed-locking.html
    """


class CommitConflictError(SlotLockError):
    """A caller-supplied write in a commit transaction failed its own condition.

    ``index`` is the position of that write among the caller's writes; ``code`` DynamoDB's cancellation
    reason for it (``ConditionalCheckFailed``, or a code slotlock cannot judge); ``item`` the old item
    returned with ALL_OLD (may be ``None``); ``fencing_token`` the committing lease's token, which the
    lock item still holds. Nothing of the commit was written and the lease is still held.
    """

    def __init__(
        self,
        index: int,
        code: str,
        item: dict[str, Any] | None,
        message: str | None = None,
        *,
        fencing_token: int | None = None,
    ) -> None:
        super().__init__(f"commit write #{index} rejected: {code}{': ' + message if message else ''}")
        self.index = index
        self.code = code
        self.item = item
        self.fencing_token = fencing_token


class PermitLostError(SlotLockError):
    """A capacity permit is no longer ours: a renew or a query record found another holder, or none.

    The permit was reclaimed (its expiry passed and its query, if any, was terminal) or released. ``key`` is
    the permit item, ``owner``/``fencing_token`` ours, ``current_owner``/``current_token`` what DynamoDB
    returned with ALL_OLD (``None`` when the permit is free). The query goes on; only the count is lost.
    """

    def __init__(
        self,
        key: str,
        owner: str,
        fencing_token: int,
        current_owner: str | None,
        current_token: int | None,
        *,
        operation: str,
    ) -> None:
        holder = f"owner {current_owner!r} token {current_token}" if current_owner else "no holder"
        super().__init__(
            f"{operation}: permit {key!r} of {owner!r} (token {fencing_token}) was lost; it now has {holder}"
        )
        self.key = key
        self.owner = owner
        self.fencing_token = fencing_token
        self.current_owner = current_owner
        self.current_token = current_token
        self.operation = operation


class StalePermitTokenError(PermitLostError):
    """A holder of a capacity permit wrote with a fencing token lower than the permit's own: a newer holder
    of the same query (a takeover of the same slot and generation) inherited the permit, or holds it.

    The write was refused. ``current_token`` is the newer token. Like :class:`StaleFencingTokenError` on the
    lock, the stale holder must write nothing more.
    """


# --- operator actions (slotlock.ops), manual generations, cron expressions (slotlock.schedule) -----------
class LeaseHeldError(SlotLockError):
    """A fence bump was refused because a lease is live: the bump would fence its holder out mid-run.

    ``current`` is the lock item. Wait for the lease to expire (or stop the schedules first), or bump
    with ``force=True`` to fence the holder out on purpose (its commit is then rejected as stale).
    """

    def __init__(self, job_name: str, current: LockRecord, action: str = "bump the fencing token") -> None:
        super().__init__(
            f"lock of {job_name!r} is held by {current.owner_id!r} (token {current.fencing_token}) until"
            f" {current.lease_expires_at_ms} ms: refusing to {action} under a live lease"
        )
        self.current = current


class LockChangedError(SlotLockError):
    """The lock item changed between the operator's read and write (another acquisition, another operator):
    nothing was written; read the status again and decide again. ``current`` is the item as it is now."""

    def __init__(self, job_name: str, action: str, current: LockRecord | None) -> None:
        super().__init__(f"lock of {job_name!r} changed while {action} was being applied; nothing was written")
        self.current = current


class GenerationRequestError(SlotLockError):
    """A generation could not be requested (concurrent requests kept moving the slot's counter)."""


class CronError(SlotLockError, ValueError):
    """The expression is not a cron(...) expression this module can evaluate; the message says why."""
