"""The lock table's layout, and one way to create it (as the Java lock client's ``createLockTable``).

One table serves many jobs. Its items share one string partition key, :data:`PARTITION_KEY`:

- ``lock#<job>``: the live schedule's lock item (its lease and fencing counter, the pause flag);
- ``manual#<job>``: the lock item of manual runs (run, re-run, backfill): its own lease and fencing
  counter, so a manual run never touches the live lease;
- ``slot#<job>#<slot>``: a slot's history item, generation 1 (the live schedule's run);
- ``slot#<job>#<slot>#g<n>``: generation ``n`` >= 2 of the slot (a deliberate re-run);
- ``generations#<job>#<slot>``: the slot's generation counter (the last generation requested);
- ``permit#<semaphore>#<i>``: permit ``i`` of a capacity semaphore (:mod:`slotlock.semaphore`);
- ``tickets#<semaphore>``: the semaphore's ticket counter and its waiters.

Slot items carry :data:`TTL_ATTRIBUTE` (epoch seconds) so DynamoDB's TTL garbage-collects history; the
lock items and the generation counters never do, so no counter is ever reset by TTL
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/howitworks-ttl.html).

History is listed by ``Query`` on the sparse global secondary index :data:`HISTORY_INDEX`: partition key
``job``, sort key ``slot_epoch_s``, attributes that only slot items carry together (the lock items have
``job`` but no ``slot_epoch_s``), so the index holds history items only. Adding an index never changes the
table's key schema (a new key schema would replace the table and reset every fencing counter).
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.sparse

The construct library (``slotlock_cdk.LockTable``) declares the same layout from these constants; tests,
the demo, the chaos suite and the benchmarks create their tables with :func:`create_lock_table`.
"""

from __future__ import annotations

import re
from typing import Any

PARTITION_KEY = "pk"
TTL_ATTRIBUTE = "ttl_epoch_s"
#: The history index: sparse (slot items only), eventually consistent, projecting every attribute.
HISTORY_INDEX = "history"
HISTORY_PARTITION_KEY = "job"
HISTORY_SORT_KEY = "slot_epoch_s"
#: Generation 1 is the live schedule's run of a slot; manual runs are generations 2, 3, ...
LIVE_GENERATION = 1
MAX_GENERATION = 1_000_000
#: The one job-name rule (the lock, the function's settings and the stack's configuration all use it):
#: 1..64 letters, digits, '-' or '_'. No '#', which separates the parts of the keys (``slot#<job>#<slot>``);
#: short enough for every key, metric dimension and resource name built from it.
JOB_NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
JOB_NAME_RULE = "1 to 64 letters, digits, '-' or '_'"

#: The table layout this version of ``slotlock`` reads and writes (docs/compatibility.md). Every item the lock
#: writes carries it in :data:`SCHEMA_VERSION_ATTRIBUTE`; an item without it has layout 1 (written before the
#: attribute existed). A newer layout is refused, never overwritten.
SCHEMA_VERSION = 1
SCHEMA_VERSION_ATTRIBUTE = "schema_version"
#: The layouts this version reads: an item of any other ``schema_version`` (a newer layout, or not a Number) is
#: refused with :class:`~slotlock.errors.UnsupportedSchemaVersionError`, by every conditional write (the
#: ``SCHEMA_COMPATIBLE`` clause of :mod:`slotlock._expressions`) and by every decoder (:mod:`slotlock.codec`).
SUPPORTED_SCHEMA_VERSIONS: tuple[int, ...] = (SCHEMA_VERSION,)

#: A slot item's ``status`` values (history, ``tools.ops``, the read API).
STATUS_REQUESTED = "REQUESTED"  # a manual generation requested by an operator, not started yet
STATUS_RUNNING = "RUNNING"
STATUS_SUCCEEDED = "SUCCEEDED"
STATUS_FAILED = "FAILED"
STATUS_MISSED = "MISSED"
TERMINAL_STATUSES = (STATUS_SUCCEEDED, STATUS_FAILED, STATUS_MISSED)
#: The live lock item's pause audit (who paused, why).
PAUSE_REASON = "pause_reason"
PAUSED_BY = "paused_by"


def is_valid_job_name(value: object) -> bool:
    """Whether ``value`` is a job name by :data:`JOB_NAME_PATTERN`."""
    return isinstance(value, str) and JOB_NAME_PATTERN.fullmatch(value) is not None


def lock_key(job: str) -> str:
    """Partition key of the live schedule's lock item of ``job``."""
    return f"lock#{job}"


def manual_lock_key(job: str) -> str:
    """Partition key of the lock item of ``job``'s manual runs (its own lease and fencing counter)."""
    return f"manual#{job}"


def slot_key(job: str, slot_iso: str, generation: int = LIVE_GENERATION) -> str:
    """Partition key of generation ``generation`` of a slot's history item (``slot_iso``: canonical form)."""
    base = f"slot#{job}#{slot_iso}"
    return base if generation == LIVE_GENERATION else f"{base}#g{generation}"


def generation_counter_key(job: str, slot_iso: str) -> str:
    """Partition key of a slot's generation counter (the last generation requested for it)."""
    return f"generations#{job}#{slot_iso}"


#: A semaphore name (shared by every deployment that shares one Athena budget, e.g. ``<account>-<region>``):
#: 1..128 letters, digits, '-', '_', '.' or ':'; no '#', which separates the parts of the keys.
SEMAPHORE_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
SEMAPHORE_NAME_RULE = "1 to 128 letters, digits, '-', '_', '.' or ':'"


def permit_key(semaphore: str, index: int) -> str:
    """Partition key of permit ``index`` (0..N-1) of the capacity semaphore ``semaphore``."""
    return f"permit#{semaphore}#{index}"


def tickets_key(semaphore: str) -> str:
    """Partition key of the capacity semaphore's ticket counter and waiters."""
    return f"tickets#{semaphore}"


def create_lock_table(client: Any, table_name: str, *, enable_ttl: bool = True, wait: bool = True) -> str:
    """Create an on-demand lock table named ``table_name`` with ``client`` (a boto3 DynamoDB client), with
    the history index :data:`HISTORY_INDEX`.

    ``enable_ttl`` turns DynamoDB's TTL on for :data:`TTL_ATTRIBUTE` (history items only); turn it off
    where items are written under a fake clock, which TTL would expire for real. ``wait`` waits until the
    table is ACTIVE (a few seconds on AWS). Returns ``table_name``.

    Raises
    ------
    botocore.exceptions.ClientError
        As ``CreateTable`` does, e.g. ``ResourceInUseException`` when the table exists.
    """
    client.create_table(
        TableName=table_name,
        KeySchema=[{"AttributeName": PARTITION_KEY, "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": HISTORY_PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": HISTORY_SORT_KEY, "AttributeType": "N"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": HISTORY_INDEX,
                "KeySchema": [
                    {"AttributeName": HISTORY_PARTITION_KEY, "KeyType": "HASH"},
                    {"AttributeName": HISTORY_SORT_KEY, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    if wait:
        client.get_waiter("table_exists").wait(TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    if enable_ttl:
        client.update_time_to_live(
            TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
        )
    return table_name
