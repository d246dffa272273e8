"""What a once-per-slot function is granted on the lock table, and its send-only on-failure destination.

DynamoDB authorizes each item of a ``TransactWriteItems`` by its item action (the lock's transactions hold
``Put`` and ``Update`` items), so the lock needs these item actions on the table and nothing more; the project's
IAM conformance test evaluates every call the lock makes against them.
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html
https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazondynamodb.html"""

from __future__ import annotations

import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

__all__ = ["LOCK_TABLE_ACTIONS", "SEMAPHORE_TABLE_ACTIONS", "SendOnlyQueueDestination"]

#: The lock's requests on the lock table (``slotlock.SlotLock`` and ``slotlock.once_per_slot``).
LOCK_TABLE_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")
#: Added for a function that takes permits of a ``slotlock.Semaphore``: its one consistent read of the permits.
SEMAPHORE_TABLE_ACTIONS = ("dynamodb:BatchGetItem",)


@jsii.implements(lambda_.IDestination)
class SendOnlyQueueDestination:
    """An SQS on-failure destination granting the function ``sqs:SendMessage`` only.

    (``aws_lambda_destinations.SqsDestination`` also grants ``GetQueueAttributes`` and ``GetQueueUrl``,
    which Lambda does not need to deliver a record.)
    https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html#invocation-async-destinations
    """

    def __init__(self, queue: sqs.IQueue) -> None:
        self.queue = queue

    def bind(
        self, scope: Construct, fn: lambda_.IFunction, options: lambda_.DestinationOptions | None = None
    ) -> lambda_.DestinationConfig:
        fn.add_to_role_policy(
            iam.PolicyStatement(
                sid="OnFailureDestination", actions=["sqs:SendMessage"], resources=[self.queue.queue_arn]
            )
        )
        return lambda_.DestinationConfig(destination=self.queue.queue_arn)
