#!/usr/bin/env python3
"""A CDK app that runs a plain Python Lambda function exactly once per schedule slot, with slotlock-cdk.

``cdk deploy`` (README.md) creates the stack below: the lock table, an SNS topic for the alarms, the function from
``handler/`` with the ``slotlock`` package as a layer, and ``OncePerSlotSchedule``: three EventBridge Scheduler
schedules (racers) per slot, the lock table grant, Lambda's asynchronous retries with an on-failure queue, and the
alarms. cdk-nag's AWS Solutions checks run on every synth; the two findings on our own function are acknowledged.

Context (``cdk deploy -c name=value``): ``alarm_email`` subscribes an address to the alarm topic; ``disposable=true``
lets ``cdk destroy`` delete the lock table and the queues (by default they are retained: the table holds the
fencing counters and the slots' history).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from cdk_nag import AwsSolutionsChecks
from constructs import Construct
from slotlock_cdk import LockTable, OncePerSlotSchedule, SlotlockLayer

HANDLER_DIR = Path(__file__).resolve().parent / "handler"

JOB_NAME = "slot-report"
SCHEDULE = "cron(0 * * * ? *)"  # every hour, on the hour
TIME_ZONE = "UTC"
RACERS = 3
MAX_SLOT_AGE_S = 1800  # a delivery more than half an hour late is recorded MISSED, not run

#: What we acknowledge on our own function (cdk-nag AwsSolutions); the constructs acknowledge their own findings.
FUNCTION_ACKNOWLEDGMENTS = {
    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]": (
        "The function's role needs only CloudWatch Logs writes, which this AWS managed policy grants; its other "
        "permissions (lock table items, the failure queue) are the inline statements of OncePerSlotSchedule."
    ),
    "AwsSolutions-L1": (
        "The runtime is pinned to python3.13 deliberately, within the slotlock layer's compatible runtimes "
        "(3.11 to 3.13); moving to a newer runtime is a tested change of its own."
    ),
}


class SlotReportStack(cdk.Stack):
    """The lock table, the alarm topic, the report function with the slotlock layer, and its schedules."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        alarm_email: str | None = None,
        disposable: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        removal_policy = cdk.RemovalPolicy.DESTROY if disposable else cdk.RemovalPolicy.RETAIN

        self.lock = LockTable(self, "Lock", removal_policy=removal_policy)
        self.alarm_topic = sns.Topic(self, "Alarms", display_name=f"{JOB_NAME} alarms", enforce_ssl=True)
        if alarm_email:
            self.alarm_topic.add_subscription(subscriptions.EmailSubscription(alarm_email))

        self.layer = SlotlockLayer(self, "Slotlock")
        self.function = lambda_.Function(
            self,
            "Report",
            description=f"{JOB_NAME}: a small report per schedule slot, once per slot (slotlock)",
            runtime=lambda_.Runtime.PYTHON_3_13,
            architecture=lambda_.Architecture.ARM_64,
            handler="report.handler",
            code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
            layers=[self.layer],
            memory_size=256,
            timeout=cdk.Duration.seconds(60),
            environment={
                "LOCK_TABLE_NAME": self.lock.table.table_name,
                "JOB_NAME": JOB_NAME,
                "MAX_SLOT_AGE_S": str(MAX_SLOT_AGE_S),
            },
            log_group=logs.LogGroup(
                self, "ReportLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=cdk.RemovalPolicy.DESTROY
            ),
        )
        for rule_id, reason in FUNCTION_ACKNOWLEDGMENTS.items():
            cdk.Validations.of(self.function).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))

        self.schedule = OncePerSlotSchedule(
            self,
            "SlotReport",
            function=self.function,
            lock_table=self.lock.table,
            job_name=JOB_NAME,
            schedule_expression=SCHEDULE,
            time_zone=TIME_ZONE,
            racers=RACERS,
            max_slot_age_s=MAX_SLOT_AGE_S,
            alarm_topic=self.alarm_topic,
            removal_policy=removal_policy,
        )

        cdk.CfnOutput(self, "LockTableName", value=self.lock.table.table_name)
        cdk.CfnOutput(self, "FunctionName", value=self.function.function_name)
        cdk.CfnOutput(self, "AlarmTopicArn", value=self.alarm_topic.topic_arn)


def build_app(outdir: str | None = None) -> cdk.App:
    """The app with cdk-nag's AWS Solutions checks: a synth raises on any finding not acknowledged."""
    app = cdk.App(outdir=outdir)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    SlotReportStack(
        app,
        "SlotReport",
        alarm_email=app.node.try_get_context("alarm_email"),
        disposable=str(app.node.try_get_context("disposable")).lower() == "true",
    )
    return app


if __name__ == "__main__":
    build_app().synth()
