"""The capacity deferral: a slot given back for capacity comes back by one later invocation of its function.

:class:`Deferral` is what the capacity gate (:mod:`athena_refresh.permits`) calls; :class:`SchedulerDeferral` is the
deployed one (a one-time EventBridge Scheduler schedule), built per invocation by :func:`scheduler_deferral` from the
settings and the invocation's context (the function's ARN). Local tools inject their own
(:class:`athena_refresh.service.Deps`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import boto3
from botocore.config import Config

from .errors import QueryEngineError

if TYPE_CHECKING:  # pragma: no cover
    from .settings import Settings


class Deferral(Protocol):
    """Arranges one later invocation of this function with ``event``, at ``at_ms`` (epoch ms); ``key`` names it
    (the same key twice is one invocation). Returns the arrangement's name."""

    def defer(self, event: Mapping[str, Any], *, at_ms: int, key: str) -> str: ...


@dataclass
class SchedulerDeferral:
    """:class:`Deferral` by a one-time EventBridge Scheduler schedule (``at(...)``, deleted after it ran).

    ``CreateSchedule`` with ``ActionAfterCompletion: DELETE`` (https://docs.aws.amazon.com/scheduler/latest/
    APIReference/API_CreateSchedule.html), target this function with ``role_arn`` (the job's Scheduler role, which
    may invoke it). The name is ``prefix`` + 32 hex of SHA-256 of ``key`` (names: 1-64 characters
    ``[0-9a-zA-Z-_.]``): a resend after a lost answer meets ``ConflictException``, which means done.
    """

    client: Any
    function_arn: str
    role_arn: str
    group: str = "default"
    prefix: str = ""

    def defer(self, event: Mapping[str, Any], *, at_ms: int, key: str) -> str:
        name = f"{self.prefix}{hashlib.sha256(key.encode()).hexdigest()[:32]}"
        at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at_ms / 1000))
        try:
            self.client.create_schedule(
                Name=name,
                GroupName=self.group,
                ScheduleExpression=f"at({at})",
                ScheduleExpressionTimezone="UTC",
                FlexibleTimeWindow={"Mode": "OFF"},
                ActionAfterCompletion="DELETE",
                State="ENABLED",
                Target={
                    "Arn": self.function_arn,
                    "RoleArn": self.role_arn,
                    "Input": json.dumps(dict(event), separators=(",", ":"), default=str),
                    "RetryPolicy": {"MaximumRetryAttempts": 5, "MaximumEventAgeInSeconds": 3600},
                },
            )
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if code == "ConflictException":
                return name  # our own earlier request, applied (a resend or a Lambda retry): one invocation
            raise QueryEngineError("CreateSchedule", str(exc), retryable=True, error_code=code) from exc
        return name


#: Builds the invocation's deferral from the settings and the invocation's context (``None``: no deferral).
DeferralFactory = Callable[["Settings", Any], "Deferral | None"]


def scheduler_deferral(settings: Settings, context: Any) -> Deferral | None:
    """The deployed deferral: a one-time Scheduler schedule invoking this very function (its ARN from the
    invocation's context), or ``None`` when the stack configured none."""
    capacity = settings.capacity
    function_arn = getattr(context, "invoked_function_arn", None)
    if capacity.deferral_role_arn is None or not isinstance(function_arn, str):
        return None
    return SchedulerDeferral(
        client=scheduler_client(),
        function_arn=function_arn,
        role_arn=capacity.deferral_role_arn,
        group=capacity.deferral_schedule_group,
        prefix=capacity.deferral_schedule_prefix,
    )


@functools.lru_cache(maxsize=1)
def scheduler_client() -> Any:
    """The Scheduler client, built once per execution environment (on the first deferral's need)."""
    return boto3.client("scheduler", config=Config(retries={"mode": "standard"}))


__all__ = ["Deferral", "DeferralFactory", "SchedulerDeferral", "scheduler_client", "scheduler_deferral"]
