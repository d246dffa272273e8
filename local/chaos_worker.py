"""A ``local.lambda_runtime`` execution environment with the chaos suite's fault seams.

``python -m local.chaos_worker --worker-id w1 ... --seed 7 --clock-skew-ms -300 --transient-rate 0.01``

Everything of :mod:`local.lambda_runtime` (the REAL handler, the DuckDB engine, checkpoint faults: SIGKILL
or SIGSTOP of this very process at a named protocol checkpoint) plus, installed once at the cold start and
never by editing the runtime's code paths:

- **faults on the real boto3 clients** (:class:`BotocoreFaults`): a ``before-send`` hook on boto3's default
  session, so every client the handler creates (the lock's, the results store's) carries it. At random
  calls it answers with DynamoDB's ``ProvisionedThroughputExceededException`` or ``ThrottlingException``
  (HTTP 400 with the JSON 1.0 ``__type``), raises a connection error, or sends the request for real and
  then drops the response ("response lost": the write applied but the caller never hears of it). botocore's
  own ``standard`` retry mode then does what it does on AWS; a *storm* fails every call of an invocation
  until the retries are exhausted, so the error reaches the handler and Lambda's async retry;
- **faults on the query engine** (:class:`FaultyEngine`): Athena's ``TooManyRequestsException`` at random
  ``StartQueryExecution``/``GetQueryExecution``/``GetQueryResults`` calls, retried as often as
  :class:`athena_refresh.engine.AthenaQueryEngine`'s client would (its ``DEFAULT_CLIENT_CONFIG``), then
  surfaced as the
  :class:`~athena_refresh.errors.QueryEngineError` that engine raises;
- **clock skew**: this environment's lock clock runs ``--clock-skew-ms`` ahead (or behind) of the real one
  (the SlotLock the service builds gets a skewed ``clock_ms``);
- **fencing off** (``--no-fencing``, the negative control only): a ``before-parameter-build`` hook makes
  every ``TransactWriteItems`` condition vacuous (``(<condition>) OR attribute_not_exists(#unfenced)``,
  same names and values, so the request stays valid). The commit then no longer checks the fencing
  token, and the history checker must report the run as violating.

Every injected fault is reported to the parent as ``{"type": "injected", "kind": ..., "operation": ...}``.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import sys
import threading
import time
import uuid
from typing import Any, Sequence

from local.lambda_runtime import LAMBDAS_DIR, Runtime, main

if str(LAMBDAS_DIR) not in sys.path:
    sys.path.insert(0, str(LAMBDAS_DIR))

from athena_refresh.engine import DEFAULT_CLIENT_CONFIG  # noqa: E402

#: botocore ``standard`` retry mode: four attempts in all for DynamoDB (botocore/retries/standard.py,
#: https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html). A storm of that many calls
#: outlasts the client's retries.
DYNAMODB_STANDARD_MAX_ATTEMPTS = 4
#: AthenaQueryEngine's client: ``max_attempts`` retries after the first call (botocore Config semantics).
ATHENA_MAX_ATTEMPTS = int(DEFAULT_CLIENT_CONFIG.retries["max_attempts"]) + 1
DYNAMODB_THROTTLES = ("ProvisionedThroughputExceededException", "ThrottlingException")
DYNAMODB_FAULT_KINDS = DYNAMODB_THROTTLES + ("connection_error", "response_lost")
ATHENA_THROTTLE = "TooManyRequestsException"
UNFENCED_NAME = "#chaos_unfenced"


class FaultPlan:
    """This environment's seeded fault decisions (thread-safe); ``report`` tells the parent about each one."""

    def __init__(self, *, seed: int, transient_rate: float, report: Any) -> None:
        self.rng = random.Random(seed)
        self.transient_rate = transient_rate
        self.report = report
        self.storm: dict[str, Any] | None = None  # {"target": "dynamodb"|"athena", "kind": ..., "calls": n}
        self._lock = threading.Lock()

    def decide(self, target: str, operation: str, kinds: Sequence[str]) -> str | None:
        """The fault to inject into this call of ``target``/``operation``, or ``None``."""
        with self._lock:
            storm = self.storm
            if storm and storm["target"] == target and storm["calls"] > 0:
                storm["calls"] -= 1
                kind = str(storm["kind"])
            elif self.rng.random() < self.transient_rate:
                kind = self.rng.choice(list(kinds))
            else:
                return None
        self.report({"type": "injected", "kind": kind, "target": target, "operation": operation,
                     "storm": bool(storm and storm["target"] == target), "mono_ns": time.monotonic_ns()})
        return kind


class _Body:
    """The ``raw`` of a botocore AWSResponse built in memory."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        yield self._data


class BotocoreFaults:
    """``before-send`` / ``before-parameter-build`` handlers for boto3's default session."""

    def __init__(self, plan: FaultPlan, *, fencing: bool = True) -> None:
        from botocore.httpsession import URLLib3Session

        self.plan = plan
        self.fencing = fencing
        self._http = URLLib3Session()

    def install(self, events: Any) -> None:
        events.register("before-send.dynamodb", self.before_send)
        if not self.fencing:
            events.register("before-parameter-build.dynamodb.TransactWriteItems", self.unfence)

    def before_send(self, request: Any, event_name: str = "", **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse
        from botocore.exceptions import ConnectionClosedError

        operation = event_name.rsplit(".", 1)[-1]
        kind = self.plan.decide("dynamodb", operation, DYNAMODB_FAULT_KINDS)
        if kind is None:
            return None
        if kind == "connection_error":
            raise ConnectionClosedError(endpoint_url=request.url)
        if kind == "response_lost":
            self._http.send(request)  # the write reaches DynamoDB ...
            raise ConnectionClosedError(endpoint_url=request.url)  # ... and its answer never comes back
        body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{kind}",
                           "message": f"injected by the chaos suite ({operation})"}).encode()
        headers = {"x-amzn-RequestId": uuid.uuid4().hex, "Content-Type": "application/x-amz-json-1.0",
                   "Content-Length": str(len(body))}
        return AWSResponse(request.url, 400, headers, _Body(body))

    @staticmethod
    def unfence(params: dict[str, Any], **_: Any) -> None:
        """Negative control: every TransactWriteItems condition becomes always true."""
        for entry in params.get("TransactItems", []):
            for action in entry.values():
                condition = action.get("ConditionExpression")
                if condition:
                    action["ConditionExpression"] = f"({condition}) OR attribute_not_exists({UNFENCED_NAME})"
                    action.setdefault("ExpressionAttributeNames", {})[UNFENCED_NAME] = "chaos_no_such_attribute"


class FaultyEngine:
    """A ``QueryEngine`` proxy that throttles like Athena and retries like botocore's standard mode."""

    def __init__(self, engine: Any, plan: FaultPlan, *, backoff_s: float = 0.05) -> None:
        self.engine = engine
        self.plan = plan
        self.backoff_s = backoff_s

    def _call(self, operation: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from athena_refresh.errors import QueryEngineError

        for attempt in range(1, ATHENA_MAX_ATTEMPTS + 1):
            if self.plan.decide("athena", operation, (ATHENA_THROTTLE,)) is None:
                return fn(*args, **kwargs)
            if attempt < ATHENA_MAX_ATTEMPTS:
                time.sleep(self.backoff_s * 2**attempt)
        raise QueryEngineError(
            operation, f"{ATHENA_THROTTLE}: Rate exceeded (injected; {ATHENA_MAX_ATTEMPTS} attempts)"
        )

    def start_query(self, **kwargs: Any) -> str:
        return self._call("StartQueryExecution", self.engine.start_query, **kwargs)

    def get_query(self, query_execution_id: str) -> Any:
        return self._call("GetQueryExecution", self.engine.get_query, query_execution_id)

    def get_results(self, query_execution_id: str) -> Any:
        return self._call("GetQueryResults", self.engine.get_results, query_execution_id)


class ChaosRuntime(Runtime):
    """:class:`local.lambda_runtime.Runtime` plus the seams above (installed once, at the cold start)."""

    plan: FaultPlan

    def init(self) -> None:
        import boto3

        self.plan = FaultPlan(seed=self.args.seed, transient_rate=self.args.transient_rate, report=self.channel.send)
        # Before the handler builds any client: clients copy the session's handlers when created.
        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session()
        BotocoreFaults(self.plan, fencing=not self.args.no_fencing).install(boto3.DEFAULT_SESSION.events)
        super().init()
        from athena_refresh import service
        from slotlock import SlotLock, system_clock_ms

        local_engine = service._engine_factory
        service.use_engine_factory(lambda settings: FaultyEngine(local_engine(settings), self.plan))
        skew_ms = int(self.args.clock_skew_ms)

        def skewed_clock_ms() -> int:
            return system_clock_ms() + skew_ms

        service.SlotLock = functools.partial(SlotLock, clock_ms=skewed_clock_ms)  # looked up by dependencies()

    def invoke(self, message: dict[str, Any]) -> None:
        storm = message.get("storm")
        self.plan.storm = dict(storm) if storm else None
        try:
            super().invoke(message)
        finally:
            self.plan.storm = None


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, required=True, help="this environment's fault RNG seed")
    parser.add_argument("--transient-rate", type=float, default=0.0, help="probability of a fault per call")
    parser.add_argument("--clock-skew-ms", type=int, default=0, help="the lock clock's offset from real time")
    parser.add_argument("--no-fencing", action="store_true", help="negative control: vacuous commit conditions")


if __name__ == "__main__":
    sys.exit(main(runtime_cls=ChaosRuntime, add_arguments=_add_arguments, prog="python -m local.chaos_worker"))
