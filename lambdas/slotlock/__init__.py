"""slotlock: run a scheduled job once per schedule slot with a fenced DynamoDB lease.

Public API::

    SlotLock            the lock (try_acquire / acquire / heartbeat / record_state / commit / release)
    Slot                a schedule slot (the event's scheduled time)
    Lease, Loss         results of an acquisition; LockRecord: the decoded lock item
    SlotRunner, SlotRun, SlotOutcome, once_per_slot   run a function once per slot
    errors              SlotLockError and its subclasses
    bump_fencing_token, FenceBump, LeaseHeldError   operator fix after a point-in-time restore (admin)
    pause, resume, release, OperatorAction, LockChangedError   operator actions on the lock items (admin)
    request_generation, GenerationRequest   request a manual generation of a slot (manual)
    SlotHistory, HistoryRecord, HistoryPage   a job's history, every generation, by Query (history)
    create_lock_table   create a lock table with the layout the lock expects (slotlock.table)
    Semaphore, PermitOwner, Permit, Wait, Ticket, Release   a fenced, fair counting semaphore (semaphore)

Depends on boto3 only.
"""

from .admin import (
    FenceBump,
    LeaseHeldError,
    LockChangedError,
    OperatorAction,
    bump_fencing_token,
    pause,
    release,
    resume,
)
from .dynamodb import SlotLock
from .errors import (
    CommitConflictError,
    CorruptLockItemError,
    InvalidEventError,
    LeaseLostError,
    LockBackendError,
    LockConfigurationError,
    LockNotAcquiredError,
    PermitLostError,
    SlotLockError,
    StaleFencingTokenError,
    StalePermitTokenError,
    TransientLockError,
    WriteRejectedError,
)
from .history import HistoryPage, HistoryRecord, SlotHistory
from .lease import CommitReceipt, Lease, LockRecord, Loss
from .manual import GenerationRequest, GenerationRequestError, request_generation
from .runner import SlotOutcome, SlotRun, SlotRunner, once_per_slot
from .semaphore import Semaphore
from .semaphore_items import Permit, PermitOwner, PermitRecord, Release, Ticket, Wait
from .slot import Slot
from .table import create_lock_table

__all__ = [
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
    "Wait",
    "WriteRejectedError",
    "bump_fencing_token",
    "create_lock_table",
    "once_per_slot",
    "pause",
    "release",
    "request_generation",
    "resume",
]
