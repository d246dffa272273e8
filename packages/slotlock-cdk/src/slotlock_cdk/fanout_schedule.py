"""The deliberate race: N EventBridge Scheduler schedules with the same cron, one Lambda target each."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from constructs import Construct

from slotlock_cdk.acknowledgments import acknowledge

SCHEDULER_RETRY_ATTEMPTS = 0  # redelivery is Lambda's async retries' job (and the lock dedupes)


class FanoutSchedule(Construct):
    """``racers`` schedules sharing one cron expression and time zone (IANA; ``ScheduleExpressionTimezone``),
    flexible time window off.

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
        time_zone: str = "UTC",
        job_name: str,
        max_event_age: cdk.Duration,
        role: iam.IRole | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        # ``role``: a scheduler role shared by several jobs' schedules (a job stack's); by default one role per
        # job. Either way the target grants it lambda:InvokeFunction on this job's function alone.
        self.role = role or scheduler_role(self, "SchedulerRole", description=f"invoke the racers of job {job_name}")
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
                role=self.role,
                retry_attempts=SCHEDULER_RETRY_ATTEMPTS,
                max_event_age=max_event_age,
            )
            self.schedules.append(
                scheduler.Schedule(
                    self,
                    f"Racer{racer}",
                    description=f"{job_name}: racer {racer} of {racers}",
                    schedule=scheduler.ScheduleExpression.expression(schedule_expression, cdk.TimeZone.of(time_zone)),
                    time_window=scheduler.TimeWindow.off(),
                    target=target,
                )
            )
        function_id = cdk.Stack.of(self).get_logical_id(function.node.default_child)
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::<{function_id}.Arn>:*]",
            "lambda:InvokeFunction on the function's versions and aliases (ARN:*), as granted by "
            "aws_scheduler_targets.LambdaInvoke; the role is assumable by EventBridge Scheduler only.",
        )


def scheduler_role(scope: Construct, construct_id: str, *, description: str) -> iam.Role:
    """A role assumable by EventBridge Scheduler for this account only (``aws:SourceAccount``); each schedule's
    target adds ``lambda:InvokeFunction`` on its own function.
    https://docs.aws.amazon.com/scheduler/latest/UserGuide/setting-up.html#setting-up-execution-role
    """
    return iam.Role(
        scope,
        construct_id,
        assumed_by=iam.ServicePrincipal(
            "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": cdk.Aws.ACCOUNT_ID}}
        ),
        description=f"EventBridge Scheduler: {description}",
    )
