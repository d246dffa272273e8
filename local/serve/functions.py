"""The local world's functions: each job's function on the fake Lambda service, reachable through Lambda's Invoke API.

What AWS Lambda is to ``tools.ops`` on AWS (``run``, ``rerun`` and ``backfill`` invoke a job's function
asynchronously, then poll the lock table), this is to it locally:

- **the functions** (:class:`FunctionHost`): one :class:`local.emulators.lambda_service.FakeLambda` per job, its
  execution environments running the real handler on the DuckDB engine (:mod:`local.emulators.lambda_runtime`),
  started cold on the first invocation (none before: a world of forty jobs costs nothing until used) and kept
  warm, with Lambda's asynchronous retries. One thread steps every service; invocations reach it through a queue.
  The deployment's own functions (the freshness watchdog) run in process (:attr:`LocalFunction.inline`). Time is
  the world's clock (``clock_ms``: :class:`local.emulators.clock.WorldClock`): the schedules fire on it.
- **the Invoke API** (:class:`InvokeServer`): ``POST /2015-03-31/functions/{FunctionName}/invocations`` on
  127.0.0.1, as boto3's Lambda client sends it (``endpoint_url``): ``X-Amz-Invocation-Type: Event`` is queued and
  answered ``202`` with the request id in ``x-amzn-RequestId``
  (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html). An unknown function is Lambda's ``404
  ResourceNotFoundException``; any other invocation type, a body that is not a JSON object or one above the
  asynchronous payload quota (256 KB, https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html) is
  a ``400`` (``InvalidRequestContentException``, ``RequestTooLargeException``). ``GET /ping`` answers the world's
  identity (``tools.ops --local`` checks that the world it found is running).

What differs from Lambda: no IAM, no SigV4 (loopback only), no synchronous invocation, no reserved concurrency.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from local.emulators.lambda_service import Delivery, FakeLambda, FunctionConfig, LambdaServiceError
from slotlock import system_clock_ms
from slotlock.schedule import next_firing

HOST = "127.0.0.1"
INVOKE_PREFIX = "/2015-03-31/functions/"
MAX_ASYNC_PAYLOAD_BYTES = 256 * 1024
STEP_IDLE_S = 0.02  # the stepping thread's pause when no service had anything to do
#: A function whose environments fail their cold start this many times in a row drops its queued invocations
#: (each failure is logged with its log file): a broken function must not respawn for ever.
MAX_COLD_START_FAILURES = 3
#: An execution environment idle this long is stopped (Lambda reclaims idle environments too, after a time it does
#: not document: a local choice), so a world left running with ``--schedule`` does not keep every racer warm.
IDLE_RECLAIM_S = 600.0


#: An in-process function: ``(event, request_id) -> outcome`` (the deployment's own functions, such as the watchdog).
InlineHandler = Callable[[dict[str, Any], str], Any]


@dataclass(frozen=True)
class LocalFunction:
    """One job's function: its name and how to run it (``config``: the fake Lambda service's function), and its
    job's schedule (``cron(...)`` in ``timezone``, ``racers`` invocations a firing) for :class:`FunctionHost`'s live
    schedule. ``inline``: the function runs in this process instead, one thread per invocation (``config`` unused)."""

    job: str
    config: FunctionConfig | None
    schedule_expression: str = ""
    schedule_timezone: str = "UTC"
    racers: int = 1
    inline: InlineHandler | None = None


class FunctionHost:
    """The functions, stepped by one thread; :meth:`invoke` is thread-safe. :meth:`close` is idempotent.

    ``live``: also fire each job's schedule as EventBridge Scheduler does: at each firing, ``racers`` asynchronous
    invocations of the job's function with the stack's Scheduler input (:func:`local.scenario.driver.scheduler_event`),
    from the first firing after :meth:`start` on, by ``clock_ms`` (epoch ms; default the wall clock). What an
    operator or a test does to a schedule: :meth:`disable_schedule` / :meth:`enable_schedule` (the Scheduler's
    schedule state), :attr:`delivery_delay_s` (each firing of a function delivered that many seconds late, as the
    Scheduler's retries deliver a throttled target's events); :meth:`wait_idle` waits until nothing due is left.

    ``before_first``: called once in the stepping thread before the first invocation is delivered (preparing the
    sample data); an exception there is logged, and that invocation is dropped (the operator's wait says it never
    started), never the thread. ``log``: where the functions' failures go (one line each; default: dropped).
    """

    def __init__(
        self,
        functions: Mapping[str, LocalFunction],
        *,
        before_first: Callable[[], None] | None = None,
        log: Callable[[str], None] | None = None,
        live: bool = False,
        clock_ms: Callable[[], int] = system_clock_ms,
    ) -> None:
        self.functions = dict(functions)  # function name -> function
        self.clock_ms = clock_ms
        self.delivery_delay_s: dict[str, float] = {}  # function -> seconds each firing is delivered late
        self.disabled: set[str] = set()  # functions whose schedule is disabled
        self._delayed: list[tuple[int, str, dict[str, Any]]] = []  # (deliver at, epoch ms; function; event)
        self._accepted = 0  # invocations queued and not yet handed to their service or thread
        self._inline_running = 0
        self._count_lock = threading.Lock()
        self.services: dict[str, FakeLambda] = {}
        self.errors: list[str] = []
        self.log = log or (lambda line: None)
        self._seen: dict[str, int] = {}  # function -> how many of its service's errors were logged
        self._cold_failures: dict[str, int] = {}
        self.live = live
        self._next_reclaim = 0.0
        self.next_firing: dict[str, dt.datetime] = {}  # function -> its job's next firing (``live``)
        self.fired: list[tuple[str, str]] = []  # (job, slot) of every live firing
        self._queue: queue.Queue[tuple[str, Delivery]] = queue.Queue()
        self._seq = itertools.count(1)
        self._before_first = before_first
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def now(self) -> dt.datetime:
        """The world's time (``clock_ms``) as an aware UTC datetime."""
        return dt.datetime.fromtimestamp(self.clock_ms() / 1000, dt.UTC)

    def _schedule_next(self, name: str, after: dt.datetime) -> None:
        function = self.functions[name]
        following = next_firing(function.schedule_expression, function.schedule_timezone, after)
        if following is None:
            self.next_firing.pop(name, None)
        else:
            self.next_firing[name] = following

    def function_of(self, job: str) -> str:
        """The function name of ``job``. :raises KeyError: no function runs it."""
        for name, function in self.functions.items():
            if function.job == job:
                return name
        raise KeyError(job)

    def disable_schedule(self, job: str) -> None:
        """Stop firing ``job``'s schedule (as ``UpdateSchedule State=DISABLED``, or a deleted schedule).

        :raises KeyError: no function runs ``job``."""
        name = self.function_of(job)
        self.disabled.add(name)
        self.next_firing.pop(name, None)
        self.log(f"schedule: {job} disabled")

    def enable_schedule(self, job: str) -> None:
        """Fire ``job``'s schedule again from its next firing after now. :raises KeyError: no function runs it."""
        name = self.function_of(job)
        self.disabled.discard(name)
        if self.live and self.functions[name].schedule_expression:
            self._schedule_next(name, self.now())
        self.log(f"schedule: {job} enabled")

    def start(self) -> FunctionHost:
        if self.live:
            now = self.now()
            for name, function in self.functions.items():
                if function.schedule_expression and name not in self.disabled:
                    self._schedule_next(name, now)
        self._thread = threading.Thread(target=self._loop, name="local-functions", daemon=True)
        self._thread.start()
        return self

    def invoke(self, function_name: str, event: Mapping[str, Any]) -> str:
        """Queue an asynchronous invocation of ``function_name`` (a name or an ARN ending in it) with ``event``;
        returns its request id (the lock owner, kept by Lambda's retries).

        :raises KeyError: no such function."""
        name = function_name.rsplit(":function:", 1)[-1].split(":", 1)[0]
        if name not in self.functions:
            raise KeyError(name)
        request_id = str(uuid.uuid4())
        slot = str(event.get("scheduled_time", ""))
        delivery = Delivery(request_id, slot, 0, next(self._seq), dict(event), "operator", due=time.monotonic())
        with self._count_lock:
            self._accepted += 1
        self._queue.put((name, delivery))
        return request_id

    def _run_inline(self, name: str, delivery: Delivery) -> None:
        """One invocation of an in-process function, in a thread of its own (an execution environment)."""
        handler = self.functions[name].inline
        assert handler is not None

        def run() -> None:
            try:
                handler(dict(delivery.event), delivery.request_id)
            except Exception as exc:  # noqa: BLE001 - as Lambda: the invocation failed, the host goes on
                self._error(name, f"invocation {delivery.request_id} failed: {type(exc).__name__}: {exc}")
            finally:
                with self._count_lock:
                    self._inline_running -= 1

        with self._count_lock:
            self._inline_running += 1
        threading.Thread(target=run, name=f"local-{name}", daemon=True).start()

    def idle(self) -> bool:
        """Nothing left to do now: no firing due, no invocation queued, pending or running."""
        now = self.clock_ms()
        if any(due.timestamp() * 1000 <= now for due in list(self.next_firing.values())):
            return False
        if any(at_ms <= now for at_ms, _, _ in list(self._delayed)):
            return False
        with self._count_lock:
            if self._accepted or self._inline_running:
                return False
        return not any(service.pending or service.in_flight for service in list(self.services.values()))

    def wait_idle(self, timeout_s: float) -> None:
        """Wait (bounded, polling every 50 ms) until :meth:`idle` holds twice in a row.

        :raises TimeoutError: still busy after ``timeout_s`` seconds (what is busy is named)."""
        deadline = time.monotonic() + timeout_s
        calm = 0
        while calm < 2:
            if time.monotonic() > deadline:
                busy = {name: len(s.pending) + len(s.in_flight) for name, s in list(self.services.items())}
                raise TimeoutError(
                    f"the local functions are still busy after {timeout_s:g} s: queued {self._accepted}, in process"
                    f" {self._inline_running}, per function {busy}, delayed {len(self._delayed)}"
                )
            calm = calm + 1 if self.idle() else 0
            time.sleep(0.05)

    def _service(self, name: str) -> FakeLambda:
        service = self.services.get(name)
        if service is None:
            config = self.functions[name].config
            assert config is not None, f"{name} runs in process"
            service = self.services[name] = FakeLambda(config)
        return service

    def _fire_due(self) -> None:
        """The live schedule: every firing now due, ``racers`` invocations each (at least once: a late firing is
        delivered late, as the Scheduler's retries would)."""
        from local.scenario.driver import scheduler_event

        now_ms = self.clock_ms()
        now = dt.datetime.fromtimestamp(now_ms / 1000, dt.UTC)
        for name, due in list(self.next_firing.items()):
            if due > now:
                continue
            function = self.functions[name]
            slot = due.strftime("%Y-%m-%dT%H:%M:%SZ")
            delay_s = self.delivery_delay_s.get(name, 0.0)
            for racer in range(function.racers):
                event = scheduler_event(function.job, slot, racer)
                if delay_s > 0:
                    self._delayed.append((now_ms + round(delay_s * 1000), name, event))
                else:
                    self.invoke(name, event)
            self.fired.append((function.job, slot))
            late = f", delivered {delay_s:g} s late" if delay_s > 0 else ""
            self.log(f"schedule: {function.job} slot {slot}: {function.racers} invocation(s) of {name}{late}")
            self._schedule_next(name, now)
        if self._delayed:
            for _, name, event in [entry for entry in self._delayed if entry[0] <= now_ms]:
                self.invoke(name, event)  # queued before it leaves the delayed list: :meth:`idle` never misses it
            self._delayed = [entry for entry in self._delayed if entry[0] > now_ms]

    def _loop(self) -> None:
        while not self._stop.is_set():
            busy = False
            if self.next_firing or self._delayed:
                self._fire_due()
            while True:
                try:
                    name, delivery = self._queue.get_nowait()
                except queue.Empty:
                    break
                busy = True
                try:
                    if self.functions[name].inline is not None:
                        self._run_inline(name, delivery)
                    else:
                        if self._before_first is not None:
                            before, self._before_first = self._before_first, None
                            before()
                        self._service(name).invoke(delivery)
                except Exception as exc:  # noqa: BLE001 - the thread must outlive one bad invocation
                    self._error(name, f"invocation {delivery.request_id} dropped: {exc}")
                finally:
                    with self._count_lock:
                        self._accepted -= 1
            self._reclaim_idle()
            for name, service in list(self.services.items()):
                try:
                    service.step(0.0)
                except LambdaServiceError as exc:  # an environment failed its initialisation
                    self._error(name, str(exc))
                    self._cold_failures[name] = self._cold_failures.get(name, 0) + 1
                self._watch(name, service)
                busy = busy or bool(service.pending or service.in_flight)
            if not busy:
                self._stop.wait(STEP_IDLE_S)

    def _reclaim_idle(self) -> None:
        now = time.monotonic()
        if now < self._next_reclaim:
            return
        self._next_reclaim = now + 5.0
        for service in self.services.values():
            for worker in list(service.workers.values()):
                if worker.state == "idle" and now - worker.last_used > IDLE_RECLAIM_S:
                    worker.stop(timeout_s=2.0)  # marked dead first: the service does not replace it

    def _error(self, name: str, text: str) -> None:
        self.errors.append(f"{name}: {text}")
        self.log(f"local function {name}: {text}")

    def _watch(self, name: str, service: FakeLambda) -> None:
        """Log the service's new failures; after :data:`MAX_COLD_START_FAILURES` failed cold starts in a row, drop
        its queued invocations (they would start environments for ever)."""
        new = service.errors[self._seen.get(name, 0) :]
        self._seen[name] = len(service.errors)
        for text in new:
            self._error(name, text)
            if "cold start" in text:
                self._cold_failures[name] = self._cold_failures.get(name, 0) + 1
        if any(worker.state == "idle" for worker in service.workers.values()):
            self._cold_failures[name] = 0
        if self._cold_failures.get(name, 0) >= MAX_COLD_START_FAILURES and service.pending:
            dropped, service.pending = len(service.pending), []
            self._cold_failures[name] = 0
            self._error(
                name,
                f"{MAX_COLD_START_FAILURES} environments failed their cold start: {dropped} invocation(s) dropped"
                f" (logs in {service.function.logs_dir})",
            )

    def close(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=10)
        for service in self.services.values():
            with contextlib.suppress(Exception):
                service.close()


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, str], bytes]:
    """Lambda's error shape on the wire (restJson1: the type in ``x-amzn-ErrorType`` and the body)."""
    body = json.dumps({"Type": "User", "message": message}).encode("utf-8")
    return status, {"x-amzn-ErrorType": code, "Content-Type": "application/json"}, body


class InvokeServer:
    """Lambda's Invoke API for :class:`FunctionHost` on http://127.0.0.1:``port`` (0: a free one), in a thread.

    ``identity``: what ``GET /ping`` answers (a JSON object). :meth:`close` is idempotent.

    :raises OSError: the port cannot be bound (raised by the constructor).
    """

    def __init__(self, host: FunctionHost, *, identity: Mapping[str, Any], port: int = 0) -> None:
        self.host = host
        self.identity = dict(identity)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/ping":
                    self._send(200, {"Content-Type": "application/json"}, json.dumps(outer.identity).encode())
                else:
                    self._send(*_error(404, "ResourceNotFoundException", f"no such route: GET {self.path[:80]!r}"))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_ASYNC_PAYLOAD_BYTES:
                    self.close_connection = True
                    self._send(
                        *_error(
                            413,
                            "RequestTooLargeException",
                            f"the payload is {length} bytes; an asynchronous invocation takes at most"
                            f" {MAX_ASYNC_PAYLOAD_BYTES}",
                        )
                    )
                    return
                body = self.rfile.read(length) if length else b""
                self._send(*outer.answer(self.path, self.headers.get("X-Amz-Invocation-Type"), body))

        self.server = ThreadingHTTPServer((HOST, port), Handler)
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server.server_address[1]}"

    def answer(self, path: str, invocation_type: str | None, body: bytes) -> tuple[int, dict[str, str], bytes]:
        """The response to one ``POST``: (status, headers, body)."""
        path = path.split("?", 1)[0]
        if not (path.startswith(INVOKE_PREFIX) and path.endswith("/invocations")):
            return _error(404, "ResourceNotFoundException", f"no such route: POST {path[:80]!r}")
        name = unquote(path[len(INVOKE_PREFIX) : -len("/invocations")])
        if (invocation_type or "RequestResponse") != "Event":
            return _error(
                400,
                "InvalidRequestContentException",
                f"the local functions take asynchronous invocations only (InvocationType=Event), got"
                f" {invocation_type or 'RequestResponse'!r}",
            )
        try:
            event = json.loads(body or b"{}")
        except ValueError as exc:
            return _error(400, "InvalidRequestContentException", f"the payload is not JSON: {exc}")
        if not isinstance(event, dict):
            return _error(400, "InvalidRequestContentException", "the payload must be a JSON object (the event)")
        try:
            request_id = self.host.invoke(name, event)
        except KeyError:
            known = ", ".join(sorted(self.host.functions)) or "none"
            return _error(
                404, "ResourceNotFoundException", f"Function not found: {name} (the local functions: {known})"
            )
        return 202, {"x-amzn-RequestId": request_id, "Content-Type": "application/json"}, b""

    def start(self) -> InvokeServer:
        self._thread = threading.Thread(target=self.server.serve_forever, name="local-invoke-api", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self.server.shutdown()
            thread.join(timeout=5)
        self.server.server_close()
