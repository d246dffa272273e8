"""The watchdog's Lambda entry point: one :func:`athena_refresh.watchdog.watch` per schedule slot, under the
project's own once-per-slot lock (``slotlock.SlotRunner``, job :data:`~athena_refresh.contract.WATCHDOG_JOB_NAME`),
with the Powertools logger and EMF metrics as the job runtime has them.

The seam is :func:`make_handler`: ``deps`` is a builder ``() -> (SlotLock, WatchdogDeps)`` called once per execution
environment (the deployed one reads the environment: ``LOCK_TABLE_NAME``, ``ALARM_TOPIC_ARN``, ``DEPLOYMENT_STACK``,
and the bundled catalog, or ``JOB_CATALOG_PATH``'s as the job runtime reads it); tests give DynamoDB Local's client, a fake SNS and a fake clock.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from slotlock import SlotLock, SlotRunner
from slotlock.runner import SlotRun

from . import contract
from .catalog import BUNDLED_CATALOG_PATH, load_catalog
from .observability import logger, metrics
from .watchdog import WatchdogDeps, job_watches, watch

__all__ = ["DepsBuilder", "deployed_deps", "lambda_handler", "make_handler", "powertools_emit"]

DepsBuilder = Callable[[], tuple[SlotLock, WatchdogDeps]]
#: The watchdog's lease outlasts its whole run (the stack's timeout, 120 s), so no racer takes a slot over while its
#: winner still runs; a crashed winner's slot is left to the next slot (a few minutes later), whose run sees all.
LEASE_DURATION_S = 150


def powertools_emit(name: str, unit: str, value: float) -> None:
    """The deployed metric sink: Powertools' EMF metrics (flushed by ``log_metrics`` at the end of the run)."""
    metrics.add_metric(name=name, unit=MetricUnit(unit), value=value)


def deployed_deps() -> tuple[SlotLock, WatchdogDeps]:
    """The lock and deps from the environment and the bundled catalog (every job's schedule and grace)."""
    import boto3

    table = os.environ[contract.ENV_LOCK_TABLE_NAME]
    dynamodb = boto3.client("dynamodb")
    sns = boto3.client("sns")
    lock = SlotLock(table, contract.WATCHDOG_JOB_NAME, client=dynamodb, lease_duration_s=LEASE_DURATION_S)
    deps = WatchdogDeps(
        dynamodb=dynamodb,
        table=table,
        publish=sns.publish,
        topic_arn=os.environ[contract.ENV_ALARM_TOPIC_ARN],
        jobs=job_watches(load_catalog(os.environ.get(contract.ENV_JOB_CATALOG_PATH, "") or BUNDLED_CATALOG_PATH)),
        emit=powertools_emit,
        stack=os.environ.get(contract.ENV_DEPLOYMENT_STACK, "ScheduledAthenaRefresh"),
    )
    return lock, deps


def make_handler(build: DepsBuilder) -> Callable[[Any, Any], dict[str, Any]]:
    """The handler ``(event, context) -> outcome dict``: the slot from the schedule's event, one :func:`watch` run by
    the winner of the slot (a second racer or a redelivery finds the slot taken or finished and returns)."""
    cache: list[tuple[SlotRunner, WatchdogDeps]] = []

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics
    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        if not cache:
            lock, deps = build()
            cache.append((SlotRunner(lock), deps))
        runner, deps = cache[0]

        def run(slot_run: SlotRun) -> dict[str, Any]:
            report = watch(deps)
            logger.info("watchdog run", extra={"watchdog": report.as_dict()})
            return {"notified": len(report.notified), **report.metrics}

        return runner.run_event(run, event, context).as_dict()

    return lambda_handler


lambda_handler = make_handler(deployed_deps)
