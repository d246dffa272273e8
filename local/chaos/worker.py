"""A ``local.emulators.lambda_runtime`` execution environment with the chaos suite's fault seams.

``python -m local.chaos.worker --worker-id w1 ... --seed 7 --clock-skew-ms -300 --transient-rate 0.01``

Everything of :mod:`local.emulators.lambda_runtime` (the REAL handler, the DuckDB engine, checkpoint faults: SIGKILL
or SIGSTOP of this very process at a named protocol checkpoint) plus, installed once at the cold start and
never by editing the runtime's code paths:

- **faults on the real boto3 clients** (:class:`BotocoreFaults`): a ``before-send`` hook on boto3's default
  session, so every client the handler creates (the lock's, the results store's) carries it. At random
  calls it answers with DynamoDB's ``ProvisionedThroughputExceededException`` or ``ThrottlingException``
  (HTTP 400 with the JSON 1.0 ``__type``), raises a connection error, or sends the request for real and
  then drops the response ("response lost": the write applied but the caller never hears of it). botocore's
  own ``standard`` retry mode then does what it does on AWS; a *storm* fails every call of an invocation
  until the retries are exhausted, so the error reaches the handler and Lambda's async retry;
- **faults aimed at the lock's writes** (:data:`WRITE_FAULTS`), told apart by the request body
  (:func:`classify_write`), each at its own rate per request and never sent to DynamoDB (a cancelled
  transaction applies nothing):

  - the ``record_state`` and ``commit`` transactions (``TransactWriteItems``) answered with a fabricated
    ``TransactionCanceledException`` (HTTP 400; botocore does not retry it) whose ``CancellationReasons``
    hold one entry per ``TransactItems`` entry: a transient reason (``ThrottlingError``,
    ``ProvisionedThroughputExceeded``, ``TransactionConflict``) on one random item, ``None`` on the others;
    for a commit also, rarely, the permanent ``ValidationError`` on one of the results store's items (the
    slot must then end FAILED with reason ``write_rejected``; never in an invocation that carries a
    checkpoint fault, whose ``before_commit`` would fire again for the failure record);
  - the acquire ``UpdateItem`` (``ADD #token :one``) and the heartbeat ``UpdateItem`` (``SET #expires =
    :expires, #schema_version = :schema_version``, also a release's shape) answered with
    ``TransactionConflictException`` (HTTP 400; botocore does not retry it);
  - the MISSED records (an ``UpdateItem`` or ``TransactWriteItems`` whose slot item sets ``#status =
    :missed``): the first attempt is sent and its answer lost, so botocore resends the applied write;

  and the harness may force one of these faults on an invocation's next such write (``forced``), so a short
  run covers every kind. Under ``--no-fencing`` an invocation with a checkpoint fault gets none of them (the
  negative control's stale commits must reach DynamoDB), and a holder resumed after the operator's forced
  release (a stop fault marked ``"operator": "release"``) gets none once resumed: its commit (or renewal) is
  the stale write that scenario sends to the fence, and one cancelled attempt would end it
  ``TransientLockError`` before it reached DynamoDB whenever its lease had run out by its own clock (a
  matter of scheduling: :meth:`ChaosRuntime.checkpoint`);
- **faults on the query engine** (:class:`FaultyEngine`): Athena's ``TooManyRequestsException`` at random
  ``StartQueryExecution``/``GetQueryExecution``/``GetQueryResults`` calls, retried as often as
  :class:`athena_refresh.engine.AthenaQueryEngine`'s client would (its ``DEFAULT_CLIENT_CONFIG``), then
  surfaced as the
  :class:`~athena_refresh.errors.QueryEngineError` that engine raises;
- **clock skew**: this environment's lock clock runs ``--clock-skew-ms`` ahead (or behind) of the real one
  (the deps' ``clock_ms``: the SlotLock the handler builds runs on it);
- **fencing off** (``--no-fencing``, the negative control only): a ``before-parameter-build`` hook makes
  every ``TransactWriteItems`` condition vacuous (``<condition> OR attribute_not_exists(#unfenced)``,
  same names and values, so the request stays valid). The commit then no longer checks the fencing
  token, and the history checker must report the run as violating.

Every injected fault is reported to the parent as ``{"type": "injected", "kind": ..., "operation": ...}``
(with ``write``, the lock write it hit, for the aimed ones). Besides the checkpoints, each invocation also
reports ``{"type": "dynamodb_requests", "count": n}`` (every request it sent, resends included) just before
its result, and an acquisition that recorded an older slot MISSED (``superseded``) reports
``{"type": "superseded", "slot": ..., "recorded": ...}`` before its ``acquired`` checkpoint.

The fault vocabulary these seams draw from (kinds, the lock's writes, the aimed faults' rates) is one specification
with the plan that forces them and the verdict that reports them: :mod:`local.chaos.faults`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from local.chaos.faults import (
    ATHENA_MAX_ATTEMPTS,
    ATHENA_THROTTLE,
    CANCELLED_PREFIX,
    DYNAMODB_FAULT_KINDS,
    OPERATOR_RELEASE,
    PERMANENT_CANCELLATION,
    PERMANENT_CANCELLATION_KIND,
    RESPONSE_LOST,
    TRANSACTION_CONFLICT,
    TRANSIENT_CANCELLATION_MESSAGES,
    UNFENCED_NAME,
    WRITE_FAULTS,
    classify_write,
)
from local.emulators.lambda_runtime import Runtime, main


class FaultPlan:
    """This environment's seeded fault decisions (thread-safe); ``report`` tells the parent about each one.

    Per invocation (set by :class:`ChaosRuntime`): ``storm``; ``forced``, faults the harness wants on this
    invocation's next write of a kind (``[{"write": "commit", "kind": "cancelled_ThrottlingError"}]``);
    ``permanent_allowed`` (no permanent ValidationError in an invocation with a checkpoint fault);
    ``aimed_allowed`` (none of these aimed faults at all: the negative control's invocations with a checkpoint
    fault, so that its stale commits reach DynamoDB, and a force-released holder once resumed, so that its
    stale write does); and ``requests``, the DynamoDB requests it sent.
    """

    def __init__(self, *, seed: int, transient_rate: float, report: Any, write_fault_scale: float = 1.0) -> None:
        self.rng = random.Random(seed)
        self.transient_rate = transient_rate
        self.write_fault_scale = write_fault_scale
        self.report = report
        self.storm: dict[str, Any] | None = None  # {"target": "dynamodb"|"athena", "kind": ..., "calls": n}
        self.forced: list[dict[str, str]] = []
        self.permanent_allowed = True
        self.aimed_allowed = True
        self.requests = 0
        self.writes: dict[str, int] = {}  # this invocation's requests per lock write (classify_write)
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
        self.report(
            {
                "type": "injected",
                "kind": kind,
                "target": target,
                "operation": operation,
                "storm": bool(storm and storm["target"] == target),
                "mono_ns": time.monotonic_ns(),
            }
        )
        return kind

    def decide_write(self, write: str, operation: str, *, first_attempt: bool, results_items: bool) -> str | None:
        """The fault aimed at this request of the lock's ``write`` (:data:`WRITE_FAULTS`), or ``None``."""
        if not self.aimed_allowed:
            return None
        eligible = [
            (kinds, rate)
            for kinds, rate in WRITE_FAULTS.get(write, ())
            if (PERMANENT_CANCELLATION_KIND not in kinds or (results_items and self.permanent_allowed))
            and (RESPONSE_LOST not in kinds or first_attempt)
        ]
        with self._lock:
            forced = next(
                (
                    f
                    for f in self.forced
                    if f.get("write") == write and any(f.get("kind") in kinds for kinds, _ in eligible)
                ),
                None,
            )
            if forced is not None:
                self.forced.remove(forced)
                kind = forced["kind"]
            else:
                kind = None
                for kinds, rate in eligible:
                    if self.rng.random() < rate * self.write_fault_scale:
                        kind = self.rng.choice(list(kinds))
                        break
                if kind is None:
                    return None
        self.report(
            {
                "type": "injected",
                "kind": kind,
                "target": "dynamodb",
                "operation": operation,
                "write": write,
                "forced": forced is not None,
                "storm": False,
                "mono_ns": time.monotonic_ns(),
            }
        )
        return kind

    def randrange(self, n: int) -> int:
        with self._lock:
            return self.rng.randrange(n)

    def count_request(self, write: str | None) -> None:
        with self._lock:
            self.requests += 1
            if write is not None:
                self.writes[write] = self.writes.get(write, 0) + 1


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
        from botocore.exceptions import ConnectionClosedError

        operation = event_name.rsplit(".", 1)[-1]
        write = classify_write(operation, request.body)
        self.plan.count_request(write)
        if write is not None:
            aimed = self._aimed(request, operation, write)
            if aimed is not None:
                return aimed
        kind = self.plan.decide("dynamodb", operation, DYNAMODB_FAULT_KINDS)
        if kind is None:
            return None
        if kind == "connection_error":
            raise ConnectionClosedError(endpoint_url=request.url)
        if kind == RESPONSE_LOST:
            self._http.send(request)  # the write reaches DynamoDB ...
            raise ConnectionClosedError(endpoint_url=request.url)  # ... and its answer never comes back
        return _error_response(
            request,
            {
                "__type": f"com.amazonaws.dynamodb.v20120810#{kind}",
                "message": f"injected by the chaos suite ({operation})",
            },
        )

    def _aimed(self, request: Any, operation: str, write: str) -> Any:
        """A fault aimed at one of the lock's writes (:data:`WRITE_FAULTS`): a response, a raise, or ``None``."""
        from botocore.exceptions import ConnectionClosedError

        attempt = int(((getattr(request, "context", None) or {}).get("retries") or {}).get("attempt", 1))
        items: list[dict[str, Any]] = []
        if operation == "TransactWriteItems":
            body = request.body.decode() if isinstance(request.body, bytes) else request.body
            items = json.loads(body)["TransactItems"]
        lock_table = _table(items[0]) if items else None
        results_items = [i for i, item in enumerate(items) if _table(item) != lock_table]
        kind = self.plan.decide_write(write, operation, first_attempt=attempt == 1, results_items=bool(results_items))
        if kind is None:
            return None
        if kind == RESPONSE_LOST:
            self._http.send(request)  # the MISSED record is written ...
            raise ConnectionClosedError(endpoint_url=request.url)  # ... botocore resends it, unaware
        if kind == TRANSACTION_CONFLICT:
            return _error_response(
                request,
                {
                    "__type": f"com.amazonaws.dynamodb.v20120810#{kind}",
                    "message": "Transaction is ongoing for the item",
                },
            )
        reason = kind[len(CANCELLED_PREFIX) :]
        if reason == PERMANENT_CANCELLATION[0]:
            index = results_items[self.plan.randrange(len(results_items))]
            message = PERMANENT_CANCELLATION[1]
        else:
            index = self.plan.randrange(len(items))
            message = TRANSIENT_CANCELLATION_MESSAGES[reason]
        reasons: list[dict[str, str]] = [{"Code": "None"} for _ in items]
        reasons[index] = {"Code": reason, "Message": message}
        return _error_response(
            request,
            {
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "Message": "Transaction cancelled, please refer cancellation reasons for specific reasons"
                f" [{', '.join(r['Code'] for r in reasons)}]",
                "CancellationReasons": reasons,
            },
        )

    @staticmethod
    def unfence(params: dict[str, Any], **_: Any) -> None:
        """Negative control: every TransactWriteItems condition becomes always true."""
        for entry in params.get("TransactItems", []):
            for action in entry.values():
                condition = action.get("ConditionExpression")
                if condition:
                    # OR binds loosest in DynamoDB's condition grammar, so no parentheses are needed (and
                    # DynamoDB refuses doubled ones: "The expression has redundant parentheses").
                    action["ConditionExpression"] = f"{condition} OR attribute_not_exists({UNFENCED_NAME})"
                    action.setdefault("ExpressionAttributeNames", {})[UNFENCED_NAME] = "chaos_no_such_attribute"


def _table(entry: Mapping[str, Any]) -> str | None:
    """The table of one ``TransactItems`` entry (``{"Update": {"TableName": ...}}``)."""
    return next((action.get("TableName") for action in entry.values() if isinstance(action, dict)), None)


def _error_response(request: Any, error: dict[str, Any]) -> Any:
    """An HTTP 400 answer of the JSON 1.0 protocol carrying ``error``, built in memory (nothing is sent)."""
    from botocore.awsrequest import AWSResponse

    body = json.dumps(error).encode()
    headers = {
        "x-amzn-RequestId": uuid.uuid4().hex,
        "Content-Type": "application/x-amz-json-1.0",
        "Content-Length": str(len(body)),
    }
    return AWSResponse(request.url, 400, headers, _Body(body))


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

    def get_results(self, query_execution_id: str, **kwargs: Any) -> Any:
        return self._call("GetQueryResults", self.engine.get_results, query_execution_id, **kwargs)


class ChaosRuntime(Runtime):
    """:class:`local.emulators.lambda_runtime.Runtime` plus the faults above, in its deps (the faulty engine, the
    skewed lock clock) and the boto3 session's hooks (installed once, at the cold start)."""

    plan: FaultPlan

    def init(self) -> None:
        self.plan = FaultPlan(
            seed=self.args.seed,
            transient_rate=self.args.transient_rate,
            report=self.channel.send,
            write_fault_scale=self.args.write_fault_scale,
        )
        super().init()

    def install_hooks(self, events: Any) -> None:
        """The faults on the real boto3 clients (:class:`BotocoreFaults`)."""
        BotocoreFaults(self.plan, fencing=not self.args.no_fencing).install(events)

    def invocation_report(self, context: Any) -> dict[str, Any]:
        """Every DynamoDB request the invocation sent (resends included), and its lock writes by kind."""
        return {
            "type": "dynamodb_requests",
            "request_id": context.aws_request_id,
            "count": self.plan.requests,
            "writes": dict(self.plan.writes),
            "mono_ns": time.monotonic_ns(),
        }

    def engine(self, settings: Any) -> Any:
        """The local engine, its calls faulted by the plan."""
        return FaultyEngine(super().engine(settings), self.plan)

    def deps_options(self) -> dict[str, Any]:
        """The lock's clock, skewed by ``--clock-skew-ms``."""
        from slotlock._dynamodb import system_clock_ms

        skew_ms = int(self.args.clock_skew_ms)

        def skewed_clock_ms() -> int:
            return system_clock_ms() + skew_ms

        return {**super().deps_options(), "clock_ms": skewed_clock_ms}

    def checkpoint(self, checkpoint: str, lease: Any) -> None:
        if checkpoint == "acquired" and lease.superseded_slot is not None:
            # This acquisition replaced an unfinished older slot's holder; it recorded that slot MISSED
            # ("superseded") unless someone had already (recorded False). Said before a kill can strike.
            self.channel.send(
                {
                    "type": "superseded",
                    "request_id": self.current.get("request_id"),
                    "slot": lease.superseded_slot.iso,
                    "by_slot": lease.slot.iso,
                    "recorded": bool(lease.superseded_recorded),
                    "fencing_token": lease.fencing_token,
                    "mono_ns": time.monotonic_ns(),
                }
            )
        super().checkpoint(checkpoint, lease)  # returns after the fault's SIGSTOP once the harness sent SIGCONT
        fault = self.current.get("fault") or {}
        if fault.get("operator") == OPERATOR_RELEASE and fault.get("checkpoint") == checkpoint:
            # Resumed after the operator force-released our lease: the next lock write (the commit, or the
            # renewal) is the stale write the scenario is about, and it must reach the fence. Its retry budget
            # ends at our lease's expiry, which may or may not have passed by our (skewed) clock depending on
            # how long the takeover took under load: whether an aimed cancellation would end the invocation
            # TransientLockError (no budget left, nothing sent to the fence) or be retried into the fence would
            # be decided by scheduling, not by the seed. The per-call throttles stay (botocore retries them);
            # the aimed faults before the stop (fresh lease, retried) are kept.
            self.plan.aimed_allowed = False

    def invoke(self, message: dict[str, Any]) -> None:
        storm = message.get("storm")
        self.plan.storm = dict(storm) if storm else None
        self.plan.forced = [dict(f) for f in message.get("forced") or ()]
        self.plan.permanent_allowed = not message.get("fault")
        # The negative control must send its stale commits: a holder stopped past its lease has no retry budget
        # left, so one cancelled attempt would end its invocation before the commit reached DynamoDB.
        self.plan.aimed_allowed = not (self.args.no_fencing and message.get("fault"))
        self.plan.requests = 0
        self.plan.writes = {}
        try:
            super().invoke(message)
        finally:
            self.plan.storm = None
            self.plan.forced = []


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, required=True, help="this environment's fault RNG seed")
    parser.add_argument("--transient-rate", type=float, default=0.0, help="probability of a fault per call")
    parser.add_argument("--clock-skew-ms", type=int, default=0, help="the lock clock's offset from real time")
    parser.add_argument("--no-fencing", action="store_true", help="negative control: vacuous commit conditions")
    parser.add_argument(
        "--write-fault-scale",
        type=float,
        default=1.0,
        help="multiplies the rates of the faults aimed at the lock's writes (0: none)",
    )


if __name__ == "__main__":
    sys.exit(main(runtime_cls=ChaosRuntime, add_arguments=_add_arguments, prog="python -m local.chaos.worker"))
