"""The lock table's layout, and one way to create it (as the Java lock client's ``createLockTable``).

One table serves many jobs: the lock item ``lock#<job>`` and the slot (history) items
``slot#<job>#<slot>`` share one string partition key, :data:`PARTITION_KEY`. Slot items carry
:data:`TTL_ATTRIBUTE` (epoch seconds) so DynamoDB's TTL garbage-collects history; the lock item never
does, so its fencing counter is never reset by TTL
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/howitworks-ttl.html).

The CDK stack (``stacks/constructs/lock_table.py``) declares the same layout from these constants; tests,
the demo, the chaos suite and the benchmarks create their tables with :func:`create_lock_table`.
"""

from __future__ import annotations

import re
from typing import Any

PARTITION_KEY = "pk"
TTL_ATTRIBUTE = "ttl_epoch_s"
#: The one job-name rule (the lock, the function's settings and the stack's configuration all use it):
#: 1..64 letters, digits, '-' or '_'. No '#', which separates the parts of the keys (``slot#<job>#<slot>``);
#: short enough for every key, metric dimension and resource name built from it.
JOB_NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
JOB_NAME_RULE = "1 to 64 letters, digits, '-' or '_'"


def is_valid_job_name(value: object) -> bool:
    """Whether ``value`` is a job name by :data:`JOB_NAME_PATTERN`."""
    return isinstance(value, str) and JOB_NAME_PATTERN.fullmatch(value) is not None


def create_lock_table(client: Any, table_name: str, *, enable_ttl: bool = True, wait: bool = True) -> str:
    """Create an on-demand lock table named ``table_name`` with ``client`` (a boto3 DynamoDB client).

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
        AttributeDefinitions=[{"AttributeName": PARTITION_KEY, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    if wait:
        client.get_waiter("table_exists").wait(TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    if enable_ttl:
        client.update_time_to_live(
            TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
        )
    return table_name
