"""Alarms on the job and an SNS topic they notify (optionally an email subscription).

Alarm periods follow the schedule: one evaluation period = one slot (capped at one day, CloudWatch's
maximum), so an alarm stays in ALARM for a whole slot instead of flapping every five minutes.

"No successful run for two periods": CloudWatch has no time-since-last-success metric. Every invocation,
losers included, emits ``LastSuccessAgeS`` read from the lock item it already touched, so the alarm is
``Maximum(LastSuccessAgeS) > 2 periods``; missing data is breaching because no data at all means no
invocation ran (schedules disabled, function broken before the handler). For schedules slower than
daily, a day without data is normal, so missing data is then left as missing.
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html#alarms-and-missing-data
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from athena_refresh import contract
from stacks.constructs.job_metrics import deployment_metric

MAX_ALARM_PERIOD_S = 86_400
STALE_AFTER_PERIODS = contract.STALE_AFTER_PERIODS  # the dashboard overview flags a job stale alike


#: Threshold settings of a count alarm: fires on any occurrence in a period; no data is no occurrence.
AT_LEAST_ONCE: Mapping[str, object] = {
    "comparison_operator": cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    "threshold": 1,
    "treat_missing_data": cloudwatch.TreatMissingData.NOT_BREACHING,
}


def alarm_period_s(longest_gap_s: int) -> int:
    """One slot, capped at one day (CloudWatch alarm periods are multiples of 60 s up to one day)."""
    return min(longest_gap_s, MAX_ALARM_PERIOD_S)


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

        definitions: dict[str, tuple[cloudwatch.IMetric, Mapping[str, object], str]] = {
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


def add_alarms(
    scope: Construct,
    definitions: Mapping[str, tuple[cloudwatch.IMetric, Mapping[str, object], str]],
    topic: sns.ITopic,
) -> dict[str, cloudwatch.Alarm]:
    """One alarm per definition (name -> metric, threshold settings, description), each evaluating one
    period and notifying ``topic`` on ALARM and OK."""
    action = cloudwatch_actions.SnsAction(topic)
    alarms: dict[str, cloudwatch.Alarm] = {}
    for name, (metric, settings, description) in definitions.items():
        alarm = cloudwatch.Alarm(
            scope,
            name,
            metric=metric,
            evaluation_periods=1,
            alarm_description=description,
            **settings,  # type: ignore[arg-type]  # the settings are the keyword arguments of cloudwatch.Alarm
        )
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        alarms[name] = alarm
    return alarms
