"""Run any Lambda function once per schedule slot: the construct around ``slotlock.once_per_slot``.

Give it a function whose handler is wrapped with :func:`slotlock.once_per_slot` (or the Athena job's
handler) and it adds what makes "N racers, one winner per slot" work on AWS:

- the **fan-out**: ``racers`` EventBridge Scheduler schedules with one cron expression and time zone, each
  sending ``{"scheduled_time": <aws.scheduler.scheduled-time>, "execution_id", "racer", "job"}``
  (:class:`~slotlock_cdk.fanout_schedule.FanoutSchedule`), so every racer names the same slot;
- the **lock table grant**: ``GetItem``, ``PutItem`` and ``UpdateItem`` on the lock table (the fenced
  transactions are authorized per item action), with the table's name in the function's environment variable
  ``lock_table_env_var`` (``LOCK_TABLE_NAME``; a ``lambda_.Function`` only: an imported function's environment
  cannot be set, and ``None`` turns it off); plus
  ``BatchGetItem`` for a function that also takes permits of a ``slotlock.Semaphore`` (``capacity_semaphore``);
- **Lambda's asynchronous retries** (two, within ``max_slot_age_s``) and the **on-failure queue** with its
  dead-letter queue (:class:`~slotlock_cdk.failure_queue.FailureQueue`): a slot whose invocations all
  failed is never lost silently;
- the **alarms** every such job needs, notifying ``alarm_topic``: failed invocations queued, failure
  records dead-lettered, events dropped by Lambda, and, when the handler publishes them
  (``success_age_metric``, ``missed_metric``, ``failed_metric``), no success for two periods, a missed
  slot, a failed run.

Example (a plain function; ``lock`` is a :class:`~slotlock_cdk.lock_table.LockTable`)::

    OncePerSlotSchedule(self, "NightlyReport", function=report_fn, lock_table=lock.table,
                        job_name="nightly-report", schedule_expression="cron(0 2 * * ? *)",
                        time_zone="Europe/Berlin", racers=3, max_slot_age_s=3600,
                        alarm_topic=topic, removal_policy=cdk.RemovalPolicy.RETAIN)

https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from slotlock.schedule import cron_period
from slotlock_cdk.alarms import (
    AT_LEAST_ONCE,
    MAX_ALARM_PERIOD_S,
    STALE_AFTER_PERIODS,
    AlarmDefinition,
    add_alarms,
    alarm_period_s,
)
from slotlock_cdk.failure_queue import FailureQueue
from slotlock_cdk.fanout_schedule import FanoutSchedule
from slotlock_cdk.grants import LOCK_TABLE_ACTIONS, SEMAPHORE_TABLE_ACTIONS, SendOnlyQueueDestination

__all__ = ["ASYNC_RETRY_ATTEMPTS", "LOCK_TABLE_ENV_VAR", "OncePerSlotSchedule"]

ASYNC_RETRY_ATTEMPTS = 2  # Lambda's maximum: the lock makes every redelivery safe
#: The environment variable that carries the lock table's name to the function (what ``SlotLock`` needs).
LOCK_TABLE_ENV_VAR = "LOCK_TABLE_NAME"


class OncePerSlotSchedule(Construct):
    """Fan-out schedules, lock grant, async retries with an on-failure queue, and alarms for ``function``.

    ``schedules`` (:class:`FanoutSchedule`), ``failures`` (:class:`FailureQueue`), ``alarms`` (name ->
    alarm), ``period_s`` (shortest, longest gap between slots, in ``time_zone``), ``stale_after_s``,
    ``alarm_period`` (one slot, capped at a day: what the optional metrics should use).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.IFunction,
        lock_table: dynamodb.ITable,
        job_name: str,
        schedule_expression: str,
        racers: int,
        max_slot_age_s: int,
        alarm_topic: sns.ITopic,
        removal_policy: cdk.RemovalPolicy,
        time_zone: str = "UTC",
        success_age_metric: cloudwatch.IMetric | None = None,
        missed_metric: cloudwatch.IMetric | None = None,
        failed_metric: cloudwatch.IMetric | None = None,
        failures: FailureQueue | None = None,
        scheduler_role: iam.IRole | None = None,
        capacity_semaphore: bool = False,
        stale_after_periods: int = STALE_AFTER_PERIODS,
        lock_table_env_var: str | None = LOCK_TABLE_ENV_VAR,
    ) -> None:
        super().__init__(scope, construct_id)
        period = cron_period(schedule_expression, time_zone)
        self.period_s = (period.shortest_s, period.longest_s)
        self.stale_after_s = stale_after_periods * period.longest_s
        max_event_age = cdk.Duration.seconds(max_slot_age_s)

        # ``failures``: an on-failure queue shared by many functions (a deployment's); its owner alarms on it.
        owns_failures = failures is None
        self.failures = failures or FailureQueue(self, "Failures", removal_policy=removal_policy)
        function.configure_async_invoke(
            retry_attempts=ASYNC_RETRY_ATTEMPTS,
            max_event_age=max_event_age,
            on_failure=SendOnlyQueueDestination(self.failures.queue),
        )
        if lock_table_env_var and isinstance(function, lambda_.Function):
            function.add_environment(lock_table_env_var, lock_table.table_name)
        function.add_to_role_policy(
            iam.PolicyStatement(
                sid="LockTableItems",
                actions=list(LOCK_TABLE_ACTIONS + (SEMAPHORE_TABLE_ACTIONS if capacity_semaphore else ())),
                resources=[lock_table.table_arn],
            )
        )
        self.schedules = FanoutSchedule(
            self,
            "Fanout",
            function=function,
            schedule_expression=schedule_expression,
            time_zone=time_zone,
            racers=racers,
            job_name=job_name,
            max_event_age=max_event_age,
            role=scheduler_role,
        )

        alarm_period = self.alarm_period = cdk.Duration.seconds(alarm_period_s(period.longest_s))
        definitions: dict[str, AlarmDefinition] = {}
        # With an on-failure destination, Lambda sends an event it drops (too old, retries exhausted) there before
        # dropping it (AsyncEventsDropped, https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html):
        # the queue's alarm covers it, so a shared queue needs no per-function alarm.
        if owns_failures:
            definitions.update(self._queue_alarms(function, job_name, alarm_period))
        # The handler's own metrics (give them with this construct's ``alarm_period``: one slot, capped at a day).
        if success_age_metric is not None:
            definitions["NoRecentSuccess"] = (
                success_age_metric,
                {
                    "comparison_operator": cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    "threshold": self.stale_after_s,
                    "treat_missing_data": (
                        cloudwatch.TreatMissingData.BREACHING
                        if period.longest_s <= MAX_ALARM_PERIOD_S
                        else cloudwatch.TreatMissingData.MISSING
                    ),
                },
                (
                    f"No successful run of {job_name} for more than {stale_after_periods} schedule periods "
                    f"({self.stale_after_s} s), or no invocation at all."
                ),
            )
        if failed_metric is not None:
            definitions["RunFailed"] = (failed_metric, AT_LEAST_ONCE, f"A run of {job_name} failed for good.")
        if missed_metric is not None:
            definitions["SlotMissed"] = (
                missed_metric,
                AT_LEAST_ONCE,
                f"A slot of {job_name} never ran (too old, overrun or superseded).",
            )
        self.alarms = add_alarms(self, definitions, alarm_topic)

    def _queue_alarms(
        self, function: lambda_.IFunction, job_name: str, alarm_period: cdk.Duration
    ) -> dict[str, AlarmDefinition]:
        """Failed invocations queued, failure records dead-lettered, async events dropped: for a queue of its own."""
        return {
            "FailedInvocationsQueued": (
                self.failures.queue.metric_approximate_number_of_messages_visible(
                    statistic="Maximum", period=alarm_period
                ),
                AT_LEAST_ONCE,
                f"Invocations of {job_name} exhausted Lambda's retries: their events wait in the on-failure queue.",
            ),
            "FailureRecordsDeadLettered": (
                self.failures.dead_letter_queue.metric_approximate_number_of_messages_visible(
                    statistic="Maximum", period=alarm_period
                ),
                AT_LEAST_ONCE,
                f"Failure records of {job_name} could not be processed and moved to the dead-letter queue.",
            ),
            "AsyncEventsDropped": (
                function.metric("AsyncEventsDropped", statistic="Sum", period=alarm_period),
                AT_LEAST_ONCE,
                f"Lambda dropped asynchronous events of {job_name} (too old or throttled) without running them.",
            ),
        }
