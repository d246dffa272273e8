"""An execution environment of ``make capacity``: :mod:`local.emulators.lambda_runtime` hosting many job functions.

``python -m local.capacity.worker --worker-id w1 ...`` (started by :mod:`local.capacity.harness` through the fake
Lambda service). It calls the REAL handler, like the demo's and the chaos suite's environments, with these local
parts, each passed in the handler's deps (``athena_refresh.service.Deps``: :meth:`CapacityRuntime.deps_options`) or
botocore's event hooks, never by editing the runtime:

- **one pool of environments for every job's function.** The stack deploys one function per job; 200 jobs x 3
  racers would need 600 processes here. Each invocation message carries its function's environment (``env``: the
  variables where it differs from the pool's, ``JOB_NAME`` at least), applied for that invocation only: the handler
  reads its settings per invocation (``Settings.from_env``), so it runs exactly as that job's function would;
- **the engine**: :class:`~local.emulators.duckdb_engine.DuckDBQueryEngine` with Athena's quota
  (:class:`~local.emulators.duckdb_engine.EngineQuota`, from ``LOCAL_ENGINE_QUOTA``) across every environment
  sharing ``LOCAL_ENGINE_STATE_DIR``, and each job's own simulated duration (``LOCAL_QUERY_DURATIONS``, a JSON
  file: job -> ms), never longer than the query timeout (``LOCAL_ENGINE_QUERY_TIMEOUT_S``, Athena's DML query
  timeout: the harness sets it to the functions' ``capacity.max_query_active_s``, so that bound is real); every
  ``StartQueryExecution`` answer is reported to the parent (``query_start``, ``query_refused``);
- **a lost StartQueryExecution answer** (the invocation's fault ``lose_start_answer``): the start is applied (the
  query registered and running), then the call raises a retryable ``QueryEngineError``, as botocore does when
  every attempt's answer was lost. Once per ClientRequestToken across the environments (a marker file created
  exclusively under the engine's state directory): a retry or a later racer of the slot that starts the same
  token gets the same query back, as Athena's idempotency answers it. Reported as a ``fault`` (the fake service
  records it) and a ``query_start`` with ``answer_lost``;
- **the deferral** (the deps' ``deferral``): a slot given back for capacity asks the parent (``defer``) to deliver
  the event again; the parent scales the delay (the runtime's retry delay is at least 60 s);
- **what the checker needs** (:mod:`local.scenario.checker.capacity`): every permit write DynamoDB accepted (``permit``:
  take, inherit, record, renew, release, from the request and the answer of the real boto3 client, by a
  ``before-parameter-build``/``after-call`` hook pair), and the DynamoDB requests of each invocation by operation
  (``request_counts``, a ``before-send`` hook: resends included).

Every report is one JSON line to the parent, sent before the invocation's result line.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from local.emulators.lambda_runtime import Runtime, main

#: The harness's own variables (never read by the runtime): where the engine keeps its state, Athena's quota as
#: JSON (``EngineQuota`` fields), and the file of each job's simulated query duration.
ENV_ENGINE_STATE_DIR = "LOCAL_ENGINE_STATE_DIR"
ENV_ENGINE_QUOTA = "LOCAL_ENGINE_QUOTA"
ENV_QUERY_DURATIONS = "LOCAL_QUERY_DURATIONS"
#: The stand-in's query timeout, seconds (Athena's DML query timeout): no query stays active longer.
ENV_ENGINE_QUERY_TIMEOUT_S = "LOCAL_ENGINE_QUERY_TIMEOUT_S"
DEFAULT_QUERY_MS = 500
#: The invocation's fault that loses a StartQueryExecution answer (the plan's faults: :mod:`local.capacity.plan`).
LOSE_START_ANSWER = "lose_start_answer"
LOST_ANSWERS_DIR = "lost_answers"

PERMIT_PREFIX = "permit#"


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


@functools.lru_cache(maxsize=8)
def _durations(path: str) -> dict[str, int]:
    if not path:
        return {}
    return {str(k): int(v) for k, v in json.loads(Path(path).read_text(encoding="utf-8")).items()}


def permit_writes(operation: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The permit writes of one applied DynamoDB request: ``{"op", "key", "owner", "token", "query", ...}`` each
    (with the new expiry, the writer's clock, and for a reclaim the holder, expiry and query it replaced).

    ``op``: ``take`` (free or reclaimed), ``inherit``, ``renew``, ``record`` (the query id), ``release``; told apart
    by the update expression (:mod:`slotlock._expressions`); other writes (the tickets item, the lock) are not listed.
    """
    from slotlock._expressions import (
        PERMIT_INHERIT_UPDATE,
        PERMIT_RECORD_QUERY_EXPIRY_UPDATE,
        PERMIT_RECORD_QUERY_UPDATE,
        PERMIT_RELEASE_UPDATE,
        PERMIT_RENEW_UPDATE,
        PERMIT_TAKE_UPDATE,
    )

    if operation == "UpdateItem":
        updates = [params]
    elif operation == "TransactWriteItems":
        updates = [entry["Update"] for entry in params.get("TransactItems", ()) if "Update" in entry]
    else:
        return []
    kinds = {
        PERMIT_TAKE_UPDATE: "take",
        PERMIT_INHERIT_UPDATE: "inherit",
        PERMIT_RELEASE_UPDATE: "release",
        PERMIT_RENEW_UPDATE: "renew",
        PERMIT_RECORD_QUERY_UPDATE: "record",
        PERMIT_RECORD_QUERY_EXPIRY_UPDATE: "record",
    }
    found = []
    for update in updates:
        key = str(update.get("Key", {}).get("pk", {}).get("S", ""))
        if not key.startswith(PERMIT_PREFIX):
            continue
        op = kinds.get(str(update.get("UpdateExpression", "")))
        if op is None:
            continue
        values = update.get("ExpressionAttributeValues", {})
        number = functools.partial(_number, values)
        found.append(
            {
                "op": op,
                "key": key,
                "owner": values.get(":owner", {}).get("S"),
                "token": number(":token"),
                "query": values.get(":query", {}).get("S"),
                "expires": number(":expires"),  # a take's, an inheritance's or a renewal's new expiry
                "now": number(":now"),  # the writer's clock
                "seen_owner": values.get(":seen_owner", {}).get("S"),  # a reclaim: the holder it replaced ...
                "seen_expires": number(":seen_expires"),  # ... and that holder's expiry as read
                "seen_query": values.get(":seen_query", {}).get("S"),
            }
        )
    return found


def _number(values: Mapping[str, Any], name: str) -> int | None:
    return int(values[name]["N"]) if name in values else None


class DynamoDBObserver:
    """botocore hooks on the default session: requests per operation, and the permit writes that applied."""

    def __init__(self, send: Callable[[dict[str, Any]], None]) -> None:
        self.send = send
        self.operations: dict[str, int] = {}
        self._lock = threading.Lock()

    def install(self, events: Any) -> None:
        events.register("before-send.dynamodb", self.count)
        for operation in ("UpdateItem", "TransactWriteItems"):
            events.register(f"before-parameter-build.dynamodb.{operation}", self.keep_params)
            events.register(f"after-call.dynamodb.{operation}", self.applied)

    def reset(self) -> None:
        with self._lock:
            self.operations = {}

    def count(self, event_name: str = "", **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        with self._lock:
            self.operations[operation] = self.operations.get(operation, 0) + 1

    @staticmethod
    def keep_params(params: dict[str, Any], context: dict[str, Any], model: Any = None, **_: Any) -> None:
        context["capacity_params"] = (getattr(model, "name", ""), json.loads(json.dumps(params, default=str)))

    def applied(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        if getattr(http_response, "status_code", 500) >= 300 or "capacity_params" not in context:
            return
        operation, params = context["capacity_params"]
        for write in permit_writes(operation, params):
            self.send({"type": "permit", **write, "wall_ms": _wall_ms(), "mono_ns": time.monotonic_ns()})


class ReportingEngine:
    """A ``QueryEngine`` proxy that tells the parent every ``StartQueryExecution`` answer, and loses one when the
    invocation's fault says so (``fault()``: the current invocation's instruction; ``lost_dir``: the markers of
    the tokens whose answer was lost already)."""

    def __init__(
        self,
        engine: Any,
        send: Callable[[dict[str, Any]], None],
        *,
        fault: Callable[[], Mapping[str, Any] | None] = lambda: None,
        lost_dir: Path | None = None,
    ) -> None:
        self.engine = engine
        self.send = send
        self.fault = fault
        self.lost_dir = lost_dir

    def start_query(self, *, sql: str, parameters: Sequence[str], client_request_token: str) -> str:
        from athena_refresh.errors import QueryEngineError

        try:
            query_execution_id = self.engine.start_query(
                sql=sql, parameters=parameters, client_request_token=client_request_token
            )
        except QueryEngineError as error:
            self.send({"type": "query_refused", "token": client_request_token, "error_code": error.error_code})
            raise
        lost = self._lose_answer(client_request_token, str(query_execution_id))
        self.send(
            {
                "type": "query_start",
                "token": client_request_token,
                "query_execution_id": query_execution_id,
                "wall_ms": _wall_ms(),
                "answer_lost": lost,
            }
        )
        if lost:
            raise QueryEngineError(
                "StartQueryExecution",
                "Read timeout on endpoint URL (local fault: the start was applied, its answer lost)",
                retryable=True,
            )
        return str(query_execution_id)

    def _lose_answer(self, token: str, query_execution_id: str) -> bool:
        """Whether this applied start's answer is lost: the invocation's fault says so and no answer of this token
        was lost before (the marker is created exclusively: once per token, whichever environment comes first)."""
        fault = self.fault() or {}
        if fault.get("action") != LOSE_START_ANSWER or self.lost_dir is None:
            return False
        self.lost_dir.mkdir(parents=True, exist_ok=True)
        marker = self.lost_dir / hashlib.sha256(token.encode()).hexdigest()
        try:
            with open(marker, "x", encoding="utf-8") as created:
                created.write(query_execution_id)
        except FileExistsError:
            return False
        self.send(
            {
                "type": "fault",
                "action": LOSE_START_ANSWER,
                "checkpoint": str(fault.get("checkpoint") or "start_query"),
                "query_execution_id": query_execution_id,
                "mono_ns": time.monotonic_ns(),
            }
        )
        return True

    def get_query(self, query_execution_id: str) -> Any:
        return self.engine.get_query(query_execution_id)

    def get_results(self, query_execution_id: str, **kwargs: Any) -> Any:
        return self.engine.get_results(query_execution_id, **kwargs)


@dataclasses.dataclass
class LocalDeferral:
    """:class:`athena_refresh.permits.Deferral` through the parent: it delivers ``event`` again later (the parent
    decides how much later: the runtime's ``at_ms`` is a minute or more away, scaled down for a local run)."""

    send: Callable[[dict[str, Any]], None]

    def defer(self, event: Mapping[str, Any], *, at_ms: int, key: str) -> str:
        self.send({"type": "defer", "event": dict(event), "at_ms": at_ms, "key": key, "wall_ms": _wall_ms()})
        return "local-" + hashlib.sha256(key.encode()).hexdigest()[:32]


class CapacityRuntime(Runtime):
    """:class:`local.emulators.lambda_runtime.Runtime` hosting the job functions, with the reports above."""

    observer: DynamoDBObserver
    deferral: LocalDeferral

    def init(self) -> None:
        self.observer = DynamoDBObserver(self.channel.send)
        self.deferral = LocalDeferral(self.channel.send)
        super().init()
        self._warm_up()

    def install_hooks(self, events: Any) -> None:
        """The observer of the DynamoDB requests and permit writes (:class:`DynamoDBObserver`)."""
        self.observer.install(events)

    def invocation_report(self, context: Any) -> dict[str, Any]:
        """The invocation's DynamoDB requests by operation (resends included)."""
        operations = dict(self.observer.operations)
        return {"type": "request_counts", "count": sum(operations.values()), "operations": operations}

    def _warm_up(self) -> None:
        """Run the pool's job query once, at the cold start, into a scratch state directory: the stand-in's one-time
        costs (sqlglot's dialects, the Parquet metadata of every file) are then paid in INIT, not by the first permit
        holder of this environment between its take and its query's record (Athena has no such cost)."""
        import datetime as dt
        import shutil
        import tempfile

        from athena_refresh.settings import Settings
        from local.emulators.duckdb_engine import DuckDBQueryEngine

        settings = Settings.from_env()
        scratch = Path(tempfile.mkdtemp(prefix="capacity-warm-up-"))
        try:
            with DuckDBQueryEngine(data_dir=Path(self.args.data_dir), state_dir=scratch) as engine:
                engine.start_query(
                    sql=settings.query_sql,
                    parameters=settings.execution_parameters(dt.datetime.now(dt.UTC)),
                    client_request_token=f"warm-up-{self.args.worker_id}-".ljust(32, "0"),
                )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def deps_options(self) -> dict[str, Any]:
        """The deferral through the parent (:class:`LocalDeferral`)."""
        deferral = self.deferral
        return {**super().deps_options(), "deferral": lambda _settings, _context: deferral}

    def engine(self, settings: Any) -> Any:
        """The job's engine: the shared state directory, Athena's quota, the job's own query duration."""
        from local.emulators.duckdb_engine import DuckDBQueryEngine, EngineQuota

        state_dir = Path(os.environ.get(ENV_ENGINE_STATE_DIR) or self.args.state_dir)
        quota_json = os.environ.get(ENV_ENGINE_QUOTA, "").strip()
        quota = EngineQuota(**json.loads(quota_json)) if quota_json else None
        duration_ms = _durations(os.environ.get(ENV_QUERY_DURATIONS, "")).get(
            settings.job_name, int(self.args.simulated_duration_ms)
        )
        timeout_s = os.environ.get(ENV_ENGINE_QUERY_TIMEOUT_S, "").strip()
        if timeout_s:  # Athena's query timeout: the query is over by then (the plan keeps every query below it)
            duration_ms = min(duration_ms, int(float(timeout_s) * 1000))
        engine = DuckDBQueryEngine(
            data_dir=Path(self.args.data_dir),
            state_dir=state_dir,
            duration_ms_for=lambda _sql, _parameters: duration_ms,
            quota=quota,
        )
        return ReportingEngine(
            engine,
            self.channel.send,
            fault=lambda: self.current.get("fault"),
            lost_dir=state_dir / LOST_ANSWERS_DIR,
        )

    def invoke(self, message: dict[str, Any]) -> None:
        overlay = {str(k): str(v) for k, v in (message.get("env") or {}).items()}
        saved = {name: os.environ.get(name) for name in overlay}
        os.environ.update(overlay)
        self.observer.reset()
        try:
            super().invoke(message)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


if __name__ == "__main__":
    sys.exit(main(runtime_cls=CapacityRuntime, prog="python -m local.capacity.worker"))
