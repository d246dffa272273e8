"""slotlock: run a scheduled job once per schedule slot with a fenced DynamoDB lease.

Public API::

    SlotLock            the lock (try_acquire / acquire / heartbeat / record_state / commit / release)
    Slot                a schedule slot (the event's scheduled time)
    Lease, Loss         results of an acquisition; LockRecord: the decoded lock item
    SlotRunner, SlotRun, SlotOutcome, once_per_slot   run a function once per slot
    errors              SlotLockError and its subclasses
    bump_fencing_token, FenceBump, LeaseHeldError   operator fix after a point-in-time restore (admin)
    create_lock_table   create a lock table with the layout the lock expects (slotlock.table)

Depends on boto3 only.
"""

from .admin import FenceBump, LeaseHeldError, bump_fencing_token
from .dynamodb import SlotLock
from .errors import (
    CommitConflictError,
    CorruptLockItemError,
    InvalidEventError,
    LeaseLostError,
    LockBackendError,
    LockConfigurationError,
    LockNotAcquiredError,
    SlotLockError,
    StaleFencingTokenError,
    TransientLockError,
    WriteRejectedError,
)
from .lease import CommitReceipt, Lease, LockRecord, Loss
from .runner import SlotOutcome, SlotRun, SlotRunner, once_per_slot
from .slot import Slot
from .table import create_lock_table

__all__ = [
    "CommitConflictError",
    "CommitReceipt",
    "CorruptLockItemError",
    "FenceBump",
    "InvalidEventError",
    "Lease",
    "LeaseHeldError",
    "LeaseLostError",
    "LockBackendError",
    "LockConfigurationError",
    "LockNotAcquiredError",
    "LockRecord",
    "Loss",
    "Slot",
    "SlotLock",
    "SlotLockError",
    "SlotOutcome",
    "SlotRun",
    "SlotRunner",
    "StaleFencingTokenError",
    "TransientLockError",
    "WriteRejectedError",
    "bump_fencing_token",
    "create_lock_table",
    "once_per_slot",
]
