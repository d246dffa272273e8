"""slotlock: run a scheduled job once per schedule slot with a fenced DynamoDB lease.

Public API::

    SlotLock            the lock (try_acquire / acquire / heartbeat / record_state / commit / release)
    Slot                a schedule slot (the event's scheduled time)
    Lease, Loss         results of an acquisition; LockRecord: the decoded lock item
    SlotRunner, SlotRun, SlotOutcome, once_per_slot   run a function once per slot
    errors              SlotLockError and its subclasses

Depends on boto3 only.
"""

from .dynamodb import SlotLock, system_clock_ms
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
)
from .lease import CommitReceipt, Lease, LockRecord, Loss
from .runner import SlotOutcome, SlotRun, SlotRunner, once_per_slot
from .slot import Slot

__all__ = [
    "CommitConflictError",
    "CommitReceipt",
    "CorruptLockItemError",
    "InvalidEventError",
    "Lease",
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
    "once_per_slot",
    "system_clock_ms",
]
