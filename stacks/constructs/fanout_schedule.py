"""The deliberate race: N EventBridge Scheduler schedules with the same cron, one Lambda target each."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from constructs import Construct

SCHEDULER_RETRY_ATTEMPTS = 0  # redelivery is Lambda's async retries' job (and the lock dedupes)


class FanoutSchedule(Construct):
    """``racers`` schedules sharing one cron expression, flexible time window off.

    A Scheduler schedule has exactly one target, hence one schedule per racer. Every invocation gets
    ``{"scheduled_time": <aws.scheduler.scheduled-time>, "execution_id": ..., "racer": i, "job": ...}``:
    the scheduled time (not the invocation's clock) names the slot the racers compete for.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.IFunction,
        schedule_expression: str,
        racers: int,
        job_name: str,
        max_event_age: cdk.Duration,
    ) -> None:
        super().__init__(scope, construct_id)
        self.schedules: list[scheduler.Schedule] = []
        for racer in range(racers):
            target = targets.LambdaInvoke(
                function,
                input=scheduler.ScheduleTargetInput.from_object(
                    {
                        "scheduled_time": scheduler.ContextAttribute.scheduled_time,
                        "execution_id": scheduler.ContextAttribute.execution_id,
                        "racer": racer,
                        "job": job_name,
                    }
                ),
                retry_attempts=SCHEDULER_RETRY_ATTEMPTS,
                max_event_age=max_event_age,
            )
            self.schedules.append(
                scheduler.Schedule(
                    self,
                    f"Racer{racer}",
                    description=f"{job_name}: racer {racer} of {racers}",
                    schedule=scheduler.ScheduleExpression.expression(schedule_expression),
                    time_window=scheduler.TimeWindow.off(),
                    target=target,
                )
            )
