"""The freshness watchdog in the local world: the deployed handler, fired by the world's live schedule, on the world's
clock, notifying a topic in the world's moto server.

What the stack deploys (``stacks.constructs.watchdog``), this stands up locally with the same rules from the runtime:

- **the function**: :func:`athena_refresh.watchdog_handler.make_handler` (the deployed handler: its once-per-slot lock
  ``lock#athena-once-watchdog`` in the world's lock table, Powertools' logger), in process
  (:attr:`local.serve.functions.LocalFunction.inline`), one handler per execution environment;
- **the schedule**: ``cron(0/<minutes> * * * ? *)`` with :func:`athena_refresh.contract.watchdog_period_s` of the
  catalog's shortest job periods, :data:`athena_refresh.contract.WATCHDOG_RACERS` invocations a firing;
- **the jobs it watches**: :func:`athena_refresh.watchdog.job_watches` of the store's catalog (each job's declared
  ``freshness``), as the deployed watchdog reads its bundled catalog;
- **the alarm topic**: an SNS topic in the moto server (:data:`ALARM_TOPIC_NAME`) with an SQS queue subscribed
  (:data:`NOTIFICATIONS_QUEUE_NAME`, raw delivery), so what an email subscriber would read can be read back
  (``aws sqs receive-message --endpoint-url <moto>``); each notification is also printed in the world's log;
- **the metrics**: ``PutMetricData`` to the moto server's CloudWatch, namespace
  :data:`~athena_refresh.contract.METRICS_NAMESPACE`, dimension ``service`` (what the stack's alarms read), each
  datum stamped with the world's time.

What differs from AWS: no alarm evaluates the metrics (moto stores them; the stack's thresholds are pinned by
``tests/stacks/test_watchdog.py``), and delivery to the topic is moto's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from athena_refresh import contract

if TYPE_CHECKING:
    from local.serve.functions import LocalFunction
    from local.serve.world import LocalWorld

__all__ = ["ALARM_TOPIC_NAME", "NOTIFICATIONS_QUEUE_NAME", "WorldWatchdog"]

ALARM_TOPIC_NAME = "athena-once-alarms"
NOTIFICATIONS_QUEUE_NAME = "athena-once-alarm-notifications"
#: The watchdog's function name in the world (the Invoke API answers it too).
FUNCTION_NAME = "athena-refresh-demo-watchdog"


class WorldWatchdog:
    """The world's watchdog: :meth:`setup` creates the topic and its queue, :meth:`function` is its local function.

    ``stack``: the shared stack its notifications name. ``notifications``: every message published (subject, message), in order; ``runs``: every run's outcome (the
    handler's dict: a racer that lost the slot returns its outcome too)."""

    def __init__(self, world: LocalWorld, clock_ms: Callable[[], int], *, stack: str) -> None:
        self.world = world
        self.stack = stack
        self.clock_ms = clock_ms
        self.topic_arn = ""
        self.queue_url = ""
        self.notifications: list[tuple[str, str]] = []
        self.runs: list[dict[str, Any]] = []
        self._free: list[Callable[[Any, Any], dict[str, Any]]] = []  # idle execution environments (handlers)
        self._lock = threading.Lock()

    def setup(self) -> None:
        """Create the alarm topic and the queue subscribed to it (idempotent: a restarted world finds them)."""
        import json

        sns, sqs = self.world._client("sns"), self.world._client("sqs")
        self.topic_arn = sns.create_topic(Name=ALARM_TOPIC_NAME)["TopicArn"]
        self.queue_url = sqs.create_queue(QueueName=NOTIFICATIONS_QUEUE_NAME)["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "sns.amazonaws.com"},
                    "Action": "sqs:SendMessage",
                    "Resource": queue_arn,
                    "Condition": {"ArnEquals": {"aws:SourceArn": self.topic_arn}},
                }
            ],
        }
        sqs.set_queue_attributes(QueueUrl=self.queue_url, Attributes={"Policy": json.dumps(policy)})
        sns.subscribe(
            TopicArn=self.topic_arn, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"}
        )

    def function(self) -> LocalFunction:
        """The watchdog's local function: in process, on the schedule the stack gives it."""
        from local.serve.functions import LocalFunction
        from local.serve.store import store_catalog
        from slotlock.schedule import cron_period

        catalog = store_catalog(self.world.manifest)
        periods = [
            cron_period(query.schedule.expression, query.schedule.timezone).shortest_s
            for query in catalog.values()
            if query.schedule is not None
        ]
        period_s = contract.watchdog_period_s(periods)
        return LocalFunction(
            contract.WATCHDOG_JOB_NAME,
            None,
            f"cron(0/{period_s // 60} * * * ? *)",
            "UTC",
            contract.WATCHDOG_RACERS,
            inline=self.invoke,
        )

    def _handler(self) -> Callable[[Any, Any], dict[str, Any]]:
        """A new execution environment: the deployed handler on the world's clients, clock and catalog."""
        from athena_refresh.watchdog import WatchdogDeps, job_watches
        from athena_refresh.watchdog_handler import LEASE_DURATION_S, make_handler
        from local.serve.store import store_catalog
        from slotlock import SlotLock

        dynamodb = self.world._client("dynamodb")
        sns = self.world._client("sns")
        cloudwatch = self.world._client("cloudwatch")
        table = str(self.world.manifest["lock_table"])

        def publish(**message: Any) -> Any:
            response = sns.publish(**message)
            with self._lock:
                self.notifications.append((str(message.get("Subject", "")), str(message.get("Message", ""))))
            self.world.log(f"watchdog notification: {message.get('Subject', '')}")
            for line in str(message.get("Message", "")).splitlines():
                self.world.log(f"  | {line}")
            return response

        def emit(name: str, unit: str, value: float) -> None:
            import datetime as dt

            cloudwatch.put_metric_data(
                Namespace=contract.METRICS_NAMESPACE,
                MetricData=[
                    {
                        "MetricName": name,
                        "Unit": unit,
                        "Value": float(value),
                        "Timestamp": dt.datetime.fromtimestamp(self.clock_ms() / 1000, dt.UTC),
                        "Dimensions": [{"Name": contract.DIMENSION_SERVICE, "Value": contract.SERVICE_NAME}],
                    }
                ],
            )

        def build() -> tuple[SlotLock, WatchdogDeps]:
            lock = SlotLock(
                table,
                contract.WATCHDOG_JOB_NAME,
                client=dynamodb,
                lease_duration_s=LEASE_DURATION_S,
                clock_ms=self.clock_ms,
            )
            deps = WatchdogDeps(
                dynamodb=dynamodb,
                table=table,
                publish=publish,
                topic_arn=self.topic_arn,
                jobs=job_watches(store_catalog(self.world.manifest)),
                emit=emit,
                clock_ms=self.clock_ms,
                stack=self.stack,
            )
            return lock, deps

        return make_handler(build)

    def invoke(self, event: dict[str, Any], request_id: str) -> dict[str, Any]:
        """One invocation (an idle environment reused, else a new one), its outcome recorded and logged."""
        from local.emulators.deployment import REGION
        from local.emulators.lambda_runtime import LambdaContext

        with self._lock:
            handler = self._free.pop() if self._free else None
        if handler is None:
            handler = self._handler()
        try:
            context = LambdaContext(
                aws_request_id=request_id,
                function_name=FUNCTION_NAME,
                timeout_ms=contract.WATCHDOG_TIMEOUT_S * 1000,
                memory_limit_in_mb=contract.WATCHDOG_MEMORY_MB,
                region=REGION,
                clock_ms=self.clock_ms,
            )
            outcome = handler(event, context)
        finally:
            with self._lock:
                self._free.append(handler)
        with self._lock:
            self.runs.append(outcome)
        if outcome.get("status") == "succeeded":  # the slot's winner (a racer that lost the slot says "lost")
            value = outcome.get("value") or {}
            self.world.log(f"watchdog slot {event.get('scheduled_time')}: {value}")
        return outcome
