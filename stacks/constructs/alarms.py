"""The deployment's alarms and the SNS topic they notify (optionally an email subscription).

The building blocks (one period per slot, count alarms, SNS actions, "no success for two periods") are the
construct library's: :mod:`slotlock_cdk.alarms`. ``LastSuccessAgeS`` is what this project's handler publishes on
every invocation, losers included, from the lock item it already touched.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from athena_refresh import contract
from slotlock_cdk.alarms import AT_LEAST_ONCE, MAX_ALARM_PERIOD_S, AlarmDefinition, add_alarms, alarm_period_s
from stacks.constructs.job_metrics import deployment_metric

__all__ = [
    "AT_LEAST_ONCE",
    "MAX_ALARM_PERIOD_S",
    "STALE_AFTER_PERIODS",
    "DeploymentAlarms",
    "add_alarms",
    "alarm_period_s",
    "alarm_topic",
]

STALE_AFTER_PERIODS = contract.STALE_AFTER_PERIODS  # the opt-in per-job NoRecentSuccess alarm's rule


def alarm_topic(scope: Construct, construct_id: str, *, email: str | None, label: str) -> sns.Topic:
    """An SNS topic (TLS-only publishing) for alarm notifications, with an optional email subscription."""
    topic = sns.Topic(scope, construct_id, display_name=f"Scheduled Athena refresh alarms ({label})", enforce_ssl=True)
    if email:
        topic.add_subscription(subscriptions.EmailSubscription(email))
    return topic


#: Where the deployment-wide alarms' descriptions send the operator: the Logs Insights query naming the job.
OBSERVABILITY_DOC = "docs/observability.md"


class DeploymentAlarms(Construct):
    """The alarms one deployment needs once, whatever its number of jobs (``alarms``: name -> alarm), each
    notifying ``topic`` on ALARM and OK:

    - ``FailedInvocationsQueued`` / ``FailureRecordsDeadLettered``: the deployment's on-failure queue and its DLQ
      (Lambda also sends the events it drops there, so no per-function AsyncEventsDropped alarm is needed);
    - ``StaleWriteRejected``, ``CorruptLockItem``, ``ThresholdExceeded``: rare conditions each function judges
      itself (the last one against its own job's ``[alarms]`` thresholds) and counts without a job dimension.
      The invocation's log line names the job; each description names the Logs Insights query that finds it.

    Each evaluates one period of ``period_s``; per-job health is the job's own ``NoRecentSuccess`` alarm.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        failure_queue: sqs.IQueue,
        failure_dead_letter_queue: sqs.IQueue,
        topic: sns.ITopic,
        period_s: int = 300,
    ) -> None:
        super().__init__(scope, construct_id)
        period = cdk.Duration.seconds(period_s)

        def count(metric_name: str) -> cloudwatch.IMetric:
            return deployment_metric(metric_name, statistic="Sum", period=period)

        def query(name: str) -> str:
            return f" Which job: the Logs Insights query '{name}' in {OBSERVABILITY_DOC}."

        definitions: dict[str, AlarmDefinition] = {
            "FailedInvocationsQueued": (
                failure_queue.metric_approximate_number_of_messages_visible(statistic="Maximum", period=period),
                AT_LEAST_ONCE,
                (
                    "Slot invocations exhausted Lambda's retries (or were dropped): their events wait in the "
                    "on-failure queue; each record's requestPayload names the job and slot."
                ),
            ),
            "FailureRecordsDeadLettered": (
                failure_dead_letter_queue.metric_approximate_number_of_messages_visible(
                    statistic="Maximum", period=period
                ),
                AT_LEAST_ONCE,
                "Failure records could not be processed and moved to the dead-letter queue.",
            ),
            "StaleWriteRejected": (
                count(contract.METRIC_STALE_WRITE_REJECTED),
                AT_LEAST_ONCE,
                "A stale lease holder tried to commit and was fenced off: check for pauses or timeouts."
                + query("Stale writes and corrupt items by job"),
            ),
            "CorruptLockItem": (
                count(contract.METRIC_CORRUPT_LOCK_ITEM),
                AT_LEAST_ONCE,
                "A job's lock item is invalid (edited or restored by hand?): its runs are blocked."
                + query("Stale writes and corrupt items by job"),
            ),
            "ThresholdExceeded": (
                count(contract.METRIC_THRESHOLD_EXCEEDED),
                AT_LEAST_ONCE,
                "A committed slot scanned more bytes or ran longer than its job's [alarms] thresholds."
                + query("Which job exceeded a threshold"),
            ),
        }
        self.alarms = add_alarms(self, definitions, topic)
