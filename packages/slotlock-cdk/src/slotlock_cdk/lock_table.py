"""The lock table: one long-lived lock item per job plus one item per schedule slot (docs/design.md)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from slotlock import table as lock_layout

__all__ = ["PARTITION_KEY", "SUPPORTED_SCHEMA_VERSION", "TTL_ATTRIBUTE", "LockTable", "SchemaVersionMismatchError"]

#: The table layout (``slotlock.table.SCHEMA_VERSION``) this construct declares: keys, TTL, the history index.
SUPPORTED_SCHEMA_VERSION = 1
PARTITION_KEY = lock_layout.PARTITION_KEY
TTL_ATTRIBUTE = lock_layout.TTL_ATTRIBUTE  # epoch seconds, on slot items only: garbage collection, never correctness


class SchemaVersionMismatchError(RuntimeError):
    """The installed ``slotlock`` reads and writes a table layout this construct does not declare."""


class LockTable(Construct):
    """DynamoDB table holding the fenced leases (``lock#<job>``, ``manual#<job>``), the slot items
    (``slot#<job>#<slot>[#g<n>]``) and the generation counters, with the sparse history index.

    On-demand capacity (a few requests per schedule period), point-in-time recovery on, deletion
    protection on unless the stack is disposable (``removal_policy`` DESTROY). TTL deletes old slot items
    (history) only: the lock item has no TTL attribute, so its fencing counter is never reset by TTL.

    A point-in-time restore rewinds the fencing counter below tokens already stored with results: see
    docs/operations.md ("fence bump after a point-in-time restore") before restoring.
    """

    def __init__(self, scope: Construct, construct_id: str, *, removal_policy: cdk.RemovalPolicy) -> None:
        """:raises SchemaVersionMismatchError: the installed ``slotlock`` has another table layout (a pip install
        outside this library's ``slotlock`` version range)."""
        if lock_layout.SCHEMA_VERSION != SUPPORTED_SCHEMA_VERSION:
            raise SchemaVersionMismatchError(
                f"slotlock {getattr(lock_layout, 'SCHEMA_VERSION', None)!r} table layout installed, but this "
                f"LockTable declares layout {SUPPORTED_SCHEMA_VERSION}: install the slotlock version slotlock-cdk requires"
            )
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name=PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute=TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=removal_policy == cdk.RemovalPolicy.RETAIN,
            removal_policy=removal_policy,
        )
        # The history index: sparse (only slot items carry both keys), so `tools.ops history` and the read API
        # list a job's history with Query, never Scan. Adding an index updates the table in place; the key
        # schema above must never change (a replacement would reset every fencing counter, and with RETAIN and
        # a fixed name it fails). CloudFormation adds one index per update.
        self.table.add_global_secondary_index(
            index_name=lock_layout.HISTORY_INDEX,
            partition_key=dynamodb.Attribute(
                name=lock_layout.HISTORY_PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(name=lock_layout.HISTORY_SORT_KEY, type=dynamodb.AttributeType.NUMBER),
            projection_type=dynamodb.ProjectionType.ALL,
        )
