"""Where failed slot invocations go: the Lambda on-failure destination (encrypted SQS) and its DLQ.

Lambda sends an asynchronous invocation here once it exhausted its retries or the event grew older
than the maximum event age, with the original event (the slot's scheduled time) and the error:
https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html
So no failed slot disappears silently: an alarm fires while the queue is not empty, and an operator
can read the record and re-invoke the function with its ``requestPayload``.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_sqs as sqs
from constructs import Construct

RETENTION = cdk.Duration.days(14)  # SQS maximum: two weeks to look at a failed slot
MAX_RECEIVE_COUNT = 5  # a record a consumer fails to process 5 times moves to the DLQ


class FailureQueue(Construct):
    """``queue``: the on-failure destination; ``dead_letter_queue``: where records a consumer could not
    process end up. Both SSE-SQS encrypted, TLS-only (a ``aws:SecureTransport`` deny policy), 14 days."""

    def __init__(self, scope: Construct, construct_id: str, *, removal_policy: cdk.RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=RETENTION,
            removal_policy=removal_policy,
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=RETENTION,
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letter_queue, max_receive_count=MAX_RECEIVE_COUNT),
            removal_policy=removal_policy,
        )
