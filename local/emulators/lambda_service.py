"""A fake Lambda service for asynchronous invocations, on local processes: the demo's and the chaos suite's.

It stands for what AWS Lambda does with the Scheduler's asynchronous invocations of one function
(https://docs.aws.amazon.com/lambda/latest/dg/invocation-async.html):

- **execution environments**: ``local.emulators.lambda_runtime``-style worker processes
  (:class:`local.emulators.lambda_pool.Worker`), started cold, reused warm, one invocation at a time; the
  service keeps at least ``min_environments`` alive (a crashed one is replaced by a cold one) and scales out
  up to ``max_environments`` when a delivery finds none idle;
- **deliveries** (:class:`Delivery`): an invocation of an event with its request id, due at a time, given to
  the least recently used idle environment;
- **timeouts**: an invocation running past the function's timeout (plus a grace) has its environment
  SIGKILLed;
- **async retries**: an invocation that raised, crashed or timed out is retried with the **same event and
  the same request id**, twice at most (``MAX_ASYNC_RETRIES``), then goes to the on-failure destination
  (:attr:`FakeLambda.dead_lettered`);
- **stopped environments**: a worker that SIGSTOPs itself at a checkpoint (a ``pause`` fault) stays with its
  invocation until the driver resumes it (:meth:`FakeLambda.resume`), and at most the function's timeout.

Every message of every environment is recorded in :attr:`FakeLambda.history` in the shape
:mod:`local.scenario.checker` reads (``deliver``, ``checkpoint``, ``fault``, ``resumed``, ``result``, ``error``,
``crash``, ``dlq``, ``injected``, ``superseded``, ``dynamodb_requests``, ``sigcont``), with machine-wide
monotonic times; a message of any other type goes to :meth:`ServiceHooks.on_message`. What a run does on top
(its plan, when to redeliver or resume, what to print) comes in through :class:`ServiceHooks`, so ``local.demo``,
``local.chaos`` and ``local.capacity`` (the presets of :mod:`local.scenario`) drive one service.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import queue
import signal
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from local.emulators.lambda_model import (
    DIED,
    ERROR,
    KILL,
    KILLED,
    MAX_ASYNC_RETRIES,
    PAUSE,
    TIMEOUT,
    TIMEOUT_GRACE_S,
    Delivery,
    FunctionConfig,
    LambdaServiceError,
    ServiceHooks,
    environment_argv,
)
from local.emulators.lambda_pool import Worker, pump


class FakeLambda:
    """The service: environments, due deliveries, timeouts, retries, history. :meth:`close` is idempotent."""

    def __init__(self, function: FunctionConfig, *, hooks: ServiceHooks | None = None) -> None:
        self.function = function
        self.hooks = hooks or ServiceHooks()
        self.events: queue.Queue[tuple[str, dict[str, Any] | None]] = queue.Queue()
        self.workers: dict[str, Worker] = {}
        self.worker_seq = 0
        self.pending: list[tuple[float, int, Delivery]] = []  # heap of due deliveries
        self._seq = itertools.count()
        self.in_flight: dict[str, Delivery] = {}  # worker id -> delivery
        self.deliveries: list[Delivery] = []
        self.history: list[dict[str, Any]] = []
        self.counts: Counter[str] = Counter()  # injected faults, checkpoint faults, lambda_retry, lambda_timeout, ...
        self.dead_lettered: list[Delivery] = []
        self.errors: list[str] = []  # the service's own failures (an environment that would not start, ...)
        self._closed = False

    # ---- history -----------------------------------------------------------------------------------
    def record(self, what: str, t_ns: int | None = None, **data: Any) -> None:
        self.history.append({"what": what, "t_ns": t_ns if t_ns is not None else time.monotonic_ns(), **data})

    # ---- environments ------------------------------------------------------------------------------
    def spawn(self) -> Worker:
        """Start one cold environment."""
        self.worker_seq += 1
        worker_id = f"w{self.worker_seq}"
        log_path = self.function.logs_dir / f"{worker_id}.log"
        argv = self.function.worker_argv(worker_id, self.worker_seq)
        worker = Worker(worker_id, argv, self.function.env, log_path, self.events)
        self.workers[worker_id] = worker
        return worker

    def idle(self) -> list[Worker]:
        return [w for w in self.workers.values() if w.state == "idle"]

    def alive(self) -> int:
        return sum(1 for w in self.workers.values() if w.state != "dead")

    def ensure_ready(self, count: int, timeout_s: float) -> None:
        """Wait until ``count`` environments are idle, starting cold ones as needed; bounded by ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while len(self.idle()) < count:
            if time.monotonic() > deadline:
                raise LambdaServiceError(f"only {len(self.idle())} of {count} execution environments became ready")
            if not any(w.state == "starting" for w in self.workers.values()):
                busy = sum(1 for w in self.workers.values() if w.state in ("busy", "paused"))
                for _ in range(count - len(self.idle()) - busy):
                    self.spawn()
            self.step(0.2)

    # ---- deliveries --------------------------------------------------------------------------------
    def invoke(self, delivery: Delivery) -> None:
        """Queue ``delivery``; it is given to an environment once due (``delivery.due``)."""
        self.deliveries.append(delivery)
        heapq.heappush(self.pending, (delivery.due, next(self._seq), delivery))

    def quiet(self, *, ignore: Callable[[Delivery], bool] = lambda d: False) -> bool:
        """Nothing due and nothing in flight (``ignore``: in-flight deliveries that do not count)."""
        return not self.pending and not any(not ignore(d) for d in self.in_flight.values())

    def run_until(self, done: Callable[[], bool], *, deadline: float, what: str) -> None:
        """Step until ``done()``; raises :class:`LambdaServiceError` naming ``what`` past ``deadline``."""
        while not done():
            if time.monotonic() > deadline:
                raise LambdaServiceError(f"{what} did not settle within its bound")
            self.step(0.05)

    def step(self, timeout_s: float) -> None:
        """Handle the environments' messages of up to ``timeout_s``, dispatch what is due, enforce timeouts."""
        pump(self.events, timeout_s, self._handle)
        self._dispatch()
        self._check_timeouts()

    def _dispatch(self) -> None:
        now = time.monotonic()
        while self.pending and self.pending[0][0] <= now:
            idle = self.idle()
            if not idle:
                starting = any(w.state == "starting" for w in self.workers.values())
                if not starting and self.alive() < self.function.max_environments:
                    worker = self.spawn()  # Lambda scales out: a cold environment
                    self.hooks.notice(f"no idle environment: Lambda scales out with a cold environment {worker.id}")
                return
            _, _, delivery = heapq.heappop(self.pending)
            worker = min(idle, key=lambda w: w.last_used)
            delivery.worker_id = worker.id
            delivery.delivered_at = now
            worker.invocation = delivery
            worker.state = "busy"
            worker.served += 1
            worker.last_used = now
            self.in_flight[worker.id] = delivery
            self.record(
                "deliver",
                request_id=delivery.request_id,
                slot=delivery.slot,
                kind=delivery.kind,
                attempt=delivery.attempt,
                worker=worker.id,
            )
            if not worker.send(delivery.invoke_message(int(self.function.timeout_s * 1000))):
                self.hooks.notice(f"could not deliver to {worker.id}; it has exited")

    def _check_timeouts(self) -> None:
        now = time.monotonic()
        for worker_id, delivery in list(self.in_flight.items()):
            worker = self.workers[worker_id]
            if delivery.paused:
                if now - delivery.paused_at > self.function.timeout_s:  # never stopped for longer than that
                    self.resume(delivery, "stopped for the whole timeout")
                continue
            if worker.state == "busy" and now - worker.last_used > self.function.timeout_s + TIMEOUT_GRACE_S:
                self.counts["lambda_timeout"] += 1
                delivery.status = f"crashed:{TIMEOUT}"
                self.hooks.notice(f"{worker.id} exceeded the {self.function.timeout_s:g} s timeout; Lambda stops it")
                worker.signal(signal.SIGKILL)

    def resume(self, delivery: Delivery, why: str) -> None:
        """SIGCONT the environment of a stopped ``delivery`` (no-op unless it is stopped)."""
        if not delivery.paused or delivery.worker_id is None:
            return
        worker = self.workers[delivery.worker_id]
        delivery.paused = False
        self.record("sigcont", request_id=delivery.request_id, slot=delivery.slot, worker=worker.id, why=why)
        if worker.state == "paused":
            worker.state = "busy"
            worker.last_used = time.monotonic()
        worker.signal(signal.SIGCONT)

    def retry(self, delivery: Delivery, delay_s: float, why: str) -> None:
        """Lambda's async retry: the same event and request id; after two retries, the on-failure destination."""
        if delivery.attempt > MAX_ASYNC_RETRIES:
            self.dead_lettered.append(delivery)
            self.record("dlq", request_id=delivery.request_id, slot=delivery.slot, kind=delivery.kind)
            self.hooks.notice(
                f"request {delivery.request_id[:8]} failed after {delivery.attempt} attempts ({why});"
                " Lambda sends it to the on-failure destination"
            )
            return
        future = delivery.kind == "future"
        self.counts["lambda_retry_future" if future else "lambda_retry"] += 1
        self.hooks.notice(
            f"{why}; Lambda async retry of request {delivery.request_id[:8]} (same request id) in {delay_s:.1f} s"
        )
        self.invoke(delivery.retried(kind="future" if future else "retry", due=time.monotonic() + delay_s))

    # ---- messages ----------------------------------------------------------------------------------
    def _handle(self, worker_id: str, message: dict[str, Any] | None) -> None:
        worker = self.workers[worker_id]
        if message is None:
            self._on_exit(worker)
            return
        kind = message.get("type")
        delivery = self.in_flight.get(worker_id)
        t_ns = message.get("mono_ns")
        if kind == "ready":
            worker.init_ms = int(message.get("init_ms", 0))
            if worker.state == "starting":
                worker.state = "idle"
        elif kind == "init_error":
            text = f"{worker_id} failed to initialise: {message.get('error_type')}: {message.get('error_message')}"
            self.errors.append(text)
            raise LambdaServiceError(f"{text}; see {worker.log_path}")
        elif kind == "injected":
            write = message.get("write")  # set on the faults aimed at the lock's writes
            self.counts[f"{message.get('kind')}@{write}" if write else str(message.get("kind"))] += 1
            self.record(
                "injected",
                t_ns,
                worker=worker_id,
                kind=message.get("kind"),
                operation=message.get("operation"),
                write=write,
                forced=message.get("forced"),
                request_id=delivery.request_id if delivery else None,
                slot=delivery.slot if delivery else None,
            )
        elif delivery is None:
            return
        elif kind == "start":
            delivery.cold = bool(message.get("cold"))
            if delivery.cold:
                self.counts["cold_start"] += 1
        elif kind == "superseded":
            self.record(
                "superseded",
                t_ns,
                request_id=delivery.request_id,
                slot=message.get("slot"),
                by_slot=message.get("by_slot"),
                recorded=message.get("recorded"),
                token=message.get("fencing_token"),
                worker=worker_id,
            )
        elif kind == "dynamodb_requests":
            self.record(
                "dynamodb_requests",
                t_ns,
                request_id=delivery.request_id,
                slot=delivery.slot,
                kind=delivery.kind,
                count=message.get("count"),
                writes=message.get("writes"),
                worker=worker_id,
            )
        elif kind == "checkpoint":
            delivery.checkpoints.append(message)
            self.record(
                "checkpoint",
                t_ns,
                request_id=delivery.request_id,
                slot=delivery.slot,
                checkpoint=message.get("checkpoint"),
                token=message.get("fencing_token"),
                takeover=message.get("takeover"),
                reentered=message.get("reentered"),
                worker=worker_id,
            )
            self.hooks.on_checkpoint(delivery, message)
        elif kind == "fault":
            self._on_fault(worker, delivery, message)
        elif kind == "resumed":
            self.record("resumed", t_ns, request_id=delivery.request_id, slot=delivery.slot, worker=worker_id)
        elif kind == "result":
            if message.get("request_id") == delivery.request_id:
                self._on_result(worker, delivery, message)
        else:
            self.hooks.on_message(delivery, message)

    def _on_fault(self, worker: Worker, delivery: Delivery, message: dict[str, Any]) -> None:
        action, checkpoint = message.get("action"), message.get("checkpoint")
        self.counts[f"{action}@{checkpoint}"] += 1
        delivery.fault_fired = str(action)
        self.record(
            "fault",
            message.get("mono_ns"),
            request_id=delivery.request_id,
            slot=delivery.slot,
            action=action,
            checkpoint=checkpoint,
            token=message.get("fencing_token"),
            worker=worker.id,
        )
        if action == PAUSE:
            delivery.paused = True
            delivery.paused_at = time.monotonic()
            worker.state = "paused"
        self.hooks.on_fault(delivery, worker, message)

    def _on_result(self, worker: Worker, delivery: Delivery, message: dict[str, Any]) -> None:
        self.in_flight.pop(worker.id, None)
        worker.invocation = None
        worker.state = "idle"
        worker.last_used = time.monotonic()
        delivery.done = True
        delivery.finished_at = time.monotonic()
        t_ns = message.get("mono_ns")
        if message.get("ok"):
            outcome = message.get("outcome") or {}
            delivery.outcome = outcome
            delivery.status, delivery.reason = outcome.get("status"), outcome.get("reason")
            delivery.token = outcome.get("fencing_token")
            self.record(
                "result",
                t_ns,
                request_id=delivery.request_id,
                slot=delivery.slot,
                status=delivery.status,
                reason=delivery.reason,
                token=delivery.token,
                kind=delivery.kind,
                worker=worker.id,
                queries_started=outcome.get("queries_started"),
                takeover=outcome.get("takeover"),
                reentered=outcome.get("reentered"),
                already_applied=outcome.get("already_applied"),
                superseded_slot=outcome.get("superseded_slot"),
                superseded_recorded=outcome.get("superseded_recorded"),
                error_type=(outcome.get("details") or {}).get("type") if delivery.status == "failed" else None,
            )
        else:
            delivery.error = {"error_type": message.get("error_type"), "error_message": message.get("error_message")}
            delivery.status = f"error:{message.get('error_type')}"
            self.record(
                "error",
                t_ns,
                request_id=delivery.request_id,
                slot=delivery.slot,
                kind=delivery.kind,
                attempt=delivery.attempt,
                error_type=message.get("error_type"),
                error_message=message.get("error_message"),
            )
            why = f"the handler raised {message.get('error_type')}"
            self.retry(delivery, self.hooks.retry_delay_s(delivery, ERROR), why)
        self.hooks.on_finished(delivery)

    def _on_exit(self, worker: Worker) -> None:
        if worker.state == "dead":
            return
        with contextlib.suppress(Exception):
            worker.proc.wait(timeout=5)
        worker.exit_code = worker.proc.returncode
        previous, worker.state = worker.state, "dead"
        delivery = self.in_flight.pop(worker.id, None)
        worker.invocation = None
        if self._closed:
            return
        if previous == "starting":
            self.errors.append(f"{worker.id} exited during its cold start (code {worker.exit_code}); see its log")
        crashed = delivery is not None and not delivery.done
        if delivery is not None and crashed:
            delivery.done = True
            delivery.finished_at = time.monotonic()
            if delivery.status == f"crashed:{TIMEOUT}":
                cause = TIMEOUT
            else:
                cause = KILLED if delivery.fault_fired == KILL else DIED
            delivery.status = f"crashed:{cause}"
            if cause == DIED:
                self.errors.append(f"{worker.id} died unexpectedly (code {worker.exit_code}); see its log")
            self.record("crash", request_id=delivery.request_id, slot=delivery.slot, cause=cause, worker=worker.id)
            self.retry(delivery, self.hooks.retry_delay_s(delivery, cause), f"environment {cause}")
        if self.alive() < self.function.min_environments:
            replacement = self.spawn()  # Lambda replaces the environment (a cold start)
            self.hooks.notice(
                f"{worker.id} is gone (exit {worker.exit_code}); Lambda replaces it with a cold environment"
                f" {replacement.id}"
            )
        if delivery is not None and crashed:
            self.hooks.on_finished(delivery)

    # ---- teardown ----------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every environment (SIGCONT first, so a stopped one can exit); bounded."""
        if self._closed:
            return
        self._closed = True
        workers = list(self.workers.values())
        for worker in workers:  # ask them all first, then wait
            with contextlib.suppress(Exception):
                worker.signal(signal.SIGCONT)
                worker.send({"type": "shutdown"})
        for worker in workers:
            with contextlib.suppress(Exception):
                worker.stop(timeout_s=2.0)


class ServiceInvoker:
    """``tools.ops``'s :class:`~tools.ops.operator.Invoker` over one :class:`FakeLambda`: an asynchronous
    invocation is a delivery due now with a fresh request id (kept by its retries, as Lambda does), and the
    operator's waits between polls drive the service (its environments' messages, retries, timeouts)."""

    def __init__(self, service: FakeLambda) -> None:
        self.service = service
        self._seq = itertools.count(1)

    def invoke_async(self, function_name: str, event: dict[str, Any]) -> str:
        if function_name != self.service.function.name:
            raise LambdaServiceError(
                f"no function {function_name!r} here (this service runs {self.service.function.name!r})"
            )
        request_id = f"ops-{next(self._seq)}-{time.monotonic_ns() % 10**9:09d}"
        slot = str(event.get("scheduled_time", ""))
        self.service.invoke(Delivery(request_id, slot, 0, 0, dict(event), "operator", due=time.monotonic()))
        return request_id

    def pause_s(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.service.step(min(0.05, max(0.0, deadline - time.monotonic())))


__all__ = [  # the shared types live in local.emulators.lambda_model; every driver imports them from here
    "DIED",
    "ERROR",
    "KILL",
    "KILLED",
    "MAX_ASYNC_RETRIES",
    "PAUSE",
    "TIMEOUT",
    "TIMEOUT_GRACE_S",
    "Delivery",
    "FakeLambda",
    "FunctionConfig",
    "LambdaServiceError",
    "ServiceHooks",
    "ServiceInvoker",
    "environment_argv",
]
