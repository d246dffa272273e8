"""Alarm building blocks of a once-per-slot job: one evaluation period per slot, count alarms, SNS actions.

Alarm periods follow the schedule: one evaluation period = one slot (capped at one day, CloudWatch's
maximum), so an alarm stays in ALARM for a whole slot instead of flapping every five minutes.

"No successful run for two periods": CloudWatch has no time-since-last-success metric. A handler that
publishes its last success's age on every invocation (losers included) gets the alarm
``Maximum(age) > STALE_AFTER_PERIODS periods``; missing data is breaching because no data at all means no
invocation ran (schedules disabled, function broken before the handler). For schedules slower than
daily, a day without data is normal, so missing data is then left as missing.
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html#alarms-and-missing-data
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_sns as sns
from constructs import Construct

__all__ = [
    "AT_LEAST_ONCE",
    "MAX_ALARM_PERIOD_S",
    "STALE_AFTER_PERIODS",
    "AlarmDefinition",
    "add_alarms",
    "alarm_period_s",
]

#: CloudWatch's longest alarm period (seconds): periods are multiples of 60 s up to one day.
#: https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html
MAX_ALARM_PERIOD_S = 86_400
#: A job is stale after this many schedule periods without a success (the default of ``NoRecentSuccess``).
STALE_AFTER_PERIODS = 2

#: Threshold settings of a count alarm: fires on any occurrence in a period; no data is no occurrence.
AT_LEAST_ONCE: Mapping[str, object] = {
    "comparison_operator": cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    "threshold": 1,
    "treat_missing_data": cloudwatch.TreatMissingData.NOT_BREACHING,
}

#: One alarm: its metric, the threshold settings (keyword arguments of ``cloudwatch.Alarm``), its description.
AlarmDefinition = tuple[cloudwatch.IMetric, Mapping[str, object], str]


def alarm_period_s(longest_gap_s: int) -> int:
    """One slot (the schedule's longest gap, seconds), capped at :data:`MAX_ALARM_PERIOD_S`."""
    return min(longest_gap_s, MAX_ALARM_PERIOD_S)


def add_alarms(
    scope: Construct, definitions: Mapping[str, AlarmDefinition], topic: sns.ITopic
) -> dict[str, cloudwatch.Alarm]:
    """One alarm per definition (construct id -> metric, threshold settings, description), each evaluating one
    period and notifying ``topic`` on ALARM and OK. Returns construct id -> alarm."""
    action = cloudwatch_actions.SnsAction(topic)
    alarms: dict[str, cloudwatch.Alarm] = {}
    for name, (metric, settings, description) in definitions.items():
        alarm = cloudwatch.Alarm(
            scope,
            name,
            metric=metric,
            evaluation_periods=1,
            alarm_description=description,
            **settings,  # the settings are the keyword arguments of cloudwatch.Alarm
        )
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        alarms[name] = alarm
    return alarms
