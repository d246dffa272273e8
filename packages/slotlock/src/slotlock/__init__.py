"""slotlock: run a scheduled job once per schedule slot with a fenced DynamoDB lease.

Public API::

    SlotLock            the lock (try_acquire / acquire / heartbeat / record_state / commit / release)
    Slot                a schedule slot (the event's scheduled time)
    Lease, Loss         results of an acquisition; LockRecord: the decoded lock item
    SlotRunner, SlotRun, SlotOutcome, once_per_slot   run a function once per slot
    errors              SlotLockError and its subclasses
    bump_fencing_token, FenceBump, LeaseHeldError   operator fix after a point-in-time restore (slotlock.ops.admin)
    pause, resume, release, OperatorAction, LockChangedError   operator actions on the lock items (slotlock.ops.admin)
    request_generation, GenerationRequest   request a manual generation of a slot (slotlock.ops.requests)
    SlotHistory, HistoryRecord, HistoryPage   a job's history, every generation, by Query (slotlock.ops.history)
    create_lock_table   create a lock table with the layout the lock expects (slotlock.table)
    Semaphore, PermitOwner, Permit, Wait, Ticket, Release   a fenced, fair counting semaphore (semaphore)
    DEFAULT_LEASE_DURATION_S, system_clock_ms   the lock's default lease and clock
    __version__         this distribution's version

Public modules beside these names: ``slotlock.errors``, ``slotlock.table`` (the layout, ``SCHEMA_VERSION``),
``slotlock.schedule`` (cron periods and firings), ``slotlock.history``, ``slotlock.codec`` (decoding items),
``slotlock.capacity`` (the requests' capacity units), ``slotlock.slot``, ``slotlock.manual``, ``slotlock.runner``,
``slotlock.semaphore`` and ``slotlock.ops`` (history, operator actions, manual-run requests; since 1.1: its names
are also where 1.0 had them). Modules whose name starts with ``_`` are internal: they may change in any release.
What a release may change: docs/compatibility.md.

Depends on boto3 only.
"""

from ._dynamodb import DEFAULT_LEASE_DURATION_S, SlotLock
from ._lease import CommitReceipt, Lease, LockRecord, Loss
from ._semaphore_items import Permit, PermitOwner, PermitRecord, Release, Ticket, Wait
from ._transient import system_clock_ms
from ._version import __version__
from .errors import (
    CommitConflictError,
    CorruptLockItemError,
    GenerationRequestError,
    InvalidEventError,
    LeaseHeldError,
    LeaseLostError,
    LockBackendError,
    LockChangedError,
    LockConfigurationError,
    LockNotAcquiredError,
    PermitLostError,
    SlotLockError,
    StaleFencingTokenError,
    StalePermitTokenError,
    TransientLockError,
    UnsupportedSchemaVersionError,
    WriteRejectedError,
)
from .ops import (
    FenceBump,
    GenerationRequest,
    HistoryPage,
    HistoryRecord,
    OperatorAction,
    SlotHistory,
    bump_fencing_token,
    pause,
    release,
    request_generation,
    resume,
)
from .runner import SlotOutcome, SlotRun, SlotRunner, once_per_slot
from .semaphore import Semaphore
from .slot import Slot
from .table import create_lock_table

__all__ = [
    "DEFAULT_LEASE_DURATION_S",
    "CommitConflictError",
    "CommitReceipt",
    "CorruptLockItemError",
    "FenceBump",
    "GenerationRequest",
    "GenerationRequestError",
    "HistoryPage",
    "HistoryRecord",
    "InvalidEventError",
    "Lease",
    "LeaseHeldError",
    "LeaseLostError",
    "LockBackendError",
    "LockChangedError",
    "LockConfigurationError",
    "LockNotAcquiredError",
    "LockRecord",
    "Loss",
    "OperatorAction",
    "Permit",
    "PermitLostError",
    "PermitOwner",
    "PermitRecord",
    "Release",
    "Semaphore",
    "Slot",
    "SlotHistory",
    "SlotLock",
    "SlotLockError",
    "SlotOutcome",
    "SlotRun",
    "SlotRunner",
    "StaleFencingTokenError",
    "StalePermitTokenError",
    "Ticket",
    "TransientLockError",
    "UnsupportedSchemaVersionError",
    "Wait",
    "WriteRejectedError",
    "__version__",
    "bump_fencing_token",
    "create_lock_table",
    "once_per_slot",
    "pause",
    "release",
    "request_generation",
    "resume",
    "system_clock_ms",
]
