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
from constructs import Construct

from athena_refresh import contract
from stacks.config import JobConfig
from stacks.constructs.job_metrics import job_metric

MAX_ALARM_PERIOD_S = 86_400
STALE_AFTER_PERIODS = 2


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


class RefreshAlarms(Construct):
    """The Athena job's own alarms, beside :class:`~stacks.constructs.once_per_slot_schedule.OncePerSlotSchedule`'s
    (failed, missed, no recent success, queued failures, dropped events): a stale writer fenced off, a corrupt
    lock item, a query scanning or running past its threshold. ``alarms``: name -> alarm; all notify ``topic``
    on ALARM and OK, each evaluating one slot (``period``)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: JobConfig,
        topic: sns.ITopic,
        period: cdk.Duration,
    ) -> None:
        super().__init__(scope, construct_id)
        job = config.job_name

        def count(metric_name: str) -> cloudwatch.IMetric:
            return job_metric(job, metric_name, statistic="Sum", period=period)

        definitions: dict[str, tuple[cloudwatch.IMetric, Mapping[str, object], str]] = {
            "StaleWriteRejected": (
                count(contract.METRIC_STALE_WRITE_REJECTED),
                AT_LEAST_ONCE,
                f"A stale holder of {job}'s lease tried to commit and was fenced off: check for pauses/timeouts.",
            ),
            "CorruptLockItem": (
                count(contract.METRIC_CORRUPT_LOCK_ITEM),
                AT_LEAST_ONCE,
                f"The lock item of {job} is invalid (edited or restored by hand?): runs are blocked.",
            ),
            "DataScannedHigh": (
                job_metric(job, contract.METRIC_DATA_SCANNED_BYTES, statistic="Maximum", period=period),
                {
                    "comparison_operator": cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    "threshold": config.alarms.data_scanned_bytes,
                    "treat_missing_data": cloudwatch.TreatMissingData.NOT_BREACHING,
                },
                (
                    f"A query of {job} scanned more than {config.alarms.data_scanned_bytes} bytes "
                    f"(the workgroup cancels at {config.bytes_scanned_cutoff_per_query})."
                ),
            ),
            "QueryDurationHigh": (
                job_metric(job, contract.METRIC_QUERY_DURATION_MS, statistic="Maximum", period=period),
                {
                    "comparison_operator": cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    "threshold": config.alarms.query_duration_ms,
                    "treat_missing_data": cloudwatch.TreatMissingData.NOT_BREACHING,
                },
                f"A query of {job} ran longer than {config.alarms.query_duration_ms} ms.",
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
