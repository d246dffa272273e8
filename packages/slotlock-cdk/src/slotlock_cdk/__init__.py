"""slotlock-cdk: the AWS CDK constructs that run a Lambda function once per schedule slot with ``slotlock``.

Public API::

    LockTable             the DynamoDB table the lock expects (keys, TTL, history index, PITR)
    SchemaVersionMismatchError   the installed slotlock has a table layout LockTable does not declare
    OncePerSlotSchedule   fan-out schedules, lock grant, async retries, on-failure queue, alarms for a function
    FanoutSchedule        the racers alone (N EventBridge Scheduler schedules, one cron, one time zone)
    FailureQueue          the encrypted on-failure queue and its dead-letter queue
    SlotlockLayer         a Lambda layer holding the installed ``slotlock`` package (no Docker)
    stage_slotlock        copy the installed ``slotlock`` package into a directory you bundle yourself
    LOCK_TABLE_ACTIONS, SEMAPHORE_TABLE_ACTIONS, SendOnlyQueueDestination   the grants (slotlock_cdk.grants)
    acknowledge           acknowledge a cdk-nag finding with its reason, without depending on cdk-nag

Depends on aws-cdk-lib, constructs and slotlock (a range of ``slotlock`` versions with the same table layout,
``SUPPORTED_SCHEMA_VERSION``). The layout and the compatibility promises: docs/compatibility.md.
"""

from __future__ import annotations

from slotlock_cdk.acknowledgments import acknowledge
from slotlock_cdk.failure_queue import FailureQueue
from slotlock_cdk.fanout_schedule import FanoutSchedule
from slotlock_cdk.grants import LOCK_TABLE_ACTIONS, SEMAPHORE_TABLE_ACTIONS, SendOnlyQueueDestination
from slotlock_cdk.lock_table import SUPPORTED_SCHEMA_VERSION, LockTable, SchemaVersionMismatchError
from slotlock_cdk.once_per_slot_schedule import OncePerSlotSchedule
from slotlock_cdk.runtime import SlotlockLayer, stage_slotlock

__version__ = "1.0.0"

__all__ = [
    "LOCK_TABLE_ACTIONS",
    "SEMAPHORE_TABLE_ACTIONS",
    "SUPPORTED_SCHEMA_VERSION",
    "FailureQueue",
    "FanoutSchedule",
    "LockTable",
    "OncePerSlotSchedule",
    "SchemaVersionMismatchError",
    "SendOnlyQueueDestination",
    "SlotlockLayer",
    "__version__",
    "acknowledge",
    "stage_slotlock",
]
