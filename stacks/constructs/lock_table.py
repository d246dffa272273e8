"""The lock table: one long-lived lock item per job plus one item per schedule slot (docs/design.md)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from slotlock import table as lock_layout

PARTITION_KEY = lock_layout.PARTITION_KEY
TTL_ATTRIBUTE = lock_layout.TTL_ATTRIBUTE  # epoch seconds, on slot items only: garbage collection, never correctness


class LockTable(Construct):
    """DynamoDB table holding the fenced lease (``lock#<job>``) and the slot items (``slot#<job>#<slot>``).

    On-demand capacity (a few requests per schedule period), point-in-time recovery on, deletion
    protection on unless the stack is disposable (``removal_policy`` DESTROY). TTL deletes old slot items
    (history) only: the lock item has no TTL attribute, so its fencing counter is never reset by TTL.

    A point-in-time restore rewinds the fencing counter below tokens already stored with results: see
    docs/operations.md ("fence bump after a point-in-time restore") before restoring.
    """

    def __init__(self, scope: Construct, construct_id: str, *, removal_policy: cdk.RemovalPolicy) -> None:
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
