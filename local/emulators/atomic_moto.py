"""A moto server that handles one request at a time, so conditional writes are atomic.

Why
---
moto's FAQ says it is not concurrency safe, and it is not. Measured on this project's machine with moto 5.2.5
(see ../shared/notes/platform-facts.md): when 8 racers send the same conditional UpdateItem
(`attribute_not_exists`) at once, in-process threads and the stock ``moto_server`` (a threaded werkzeug server)
both let 2 to 7 racers win each round. A race for the lock item therefore proves nothing on stock moto.
When each request ran under one ``threading.Lock`` and the response was built inside that lock, exactly one
racer won in 1000 out of 1000 rounds, at about the same speed. This module packages that server.

What it does
------------
- It serves ``moto.server.DomainDispatcherApplication(create_backend_app)``, the app that ``moto_server``
  serves, so every moto service works: DynamoDB, S3, Athena, and the ``/moto-api/...`` endpoints
  (``POST /moto-api/reset``, ``/moto-api/static/athena/query-results``, the state manager).
- It uses werkzeug's threaded server on 127.0.0.1 with moto's request handler. Each connection gets its own
  thread, but the WSGI app runs every request under ONE process-wide lock. The lock is shared by all
  instances, because moto's backends are global to the process.
- The request body is read before the lock is taken, so a slow client cannot stall the others. The app runs
  under the lock, and the whole response body is read into memory there too. No moto backend is ever
  touched by two requests at once.
- ``AtomicMotoServer`` runs the server in a background thread; use it as a context manager.
  ``python -m local.emulators.atomic_moto`` serves in the foreground until SIGTERM or SIGINT.
  ``start_server_process`` starts that command as a child process, and ``stop_server_process`` stops it.

What it does NOT emulate
------------------------
- AWS scope of atomicity. AWS makes each single-item write atomic. This server goes further and orders
  every request to every service one after another. That is enough to test mutual exclusion. It says
  nothing about throughput, contention latency or throttling.
- Anything moto itself lacks. moto never deletes TTL-expired items. It accepts some requests that AWS
  rejects: unused ExpressionAttributeValues, 39-digit numbers, and a type mismatch in a comparison, which
  gives HTTP 500 here instead of evaluating to false. Its Athena ignores ClientRequestToken and never
  pages results.
- Authentication, IAM, TLS, request signing checks, network faults. Any access key is accepted, and
  ``testing`` maps to account 123456789012.
- In-process isolation. An in-process ``AtomicMotoServer`` shares moto's global backends with the whole
  interpreter. Code in the same process that talks to moto directly never passes through the lock: that
  includes ``mock_aws`` and calls into ``moto.backends``. ``mock_aws`` also resets those backends when it
  starts and stops, and while it is active, botocore clients in the process are answered in process even
  if they name ``endpoint_url``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from local.emulators.processes import stop_process

if TYPE_CHECKING:
    from werkzeug.serving import BaseWSGIServer

__all__ = [
    "AtomicMotoServer",
    "SerializedWSGIApp",
    "main",
    "start_server_process",
    "stop_server_process",
    "wait_until_ready",
]

DEFAULT_HOST = "127.0.0.1"
READY_PATH = "/moto-api/config"  # cheap GET answered by moto's own API
_REPO_ROOT = Path(__file__).resolve().parents[2]

# moto's backends are module-level globals, so one lock per process, whatever the number of servers.
_BACKEND_LOCK = threading.Lock()


class SerializedWSGIApp:
    """WSGI middleware: runs `app` for one request at a time and returns a fully built response.

    The request body is read first, outside the lock. Then, under the lock, the app runs and its body
    iterable is drained and closed. Only after that does the real ``start_response`` get called.
    """

    def __init__(self, app: Callable[..., Iterable[bytes]], lock: threading.Lock | None = None) -> None:
        self.app = app
        self.lock = lock if lock is not None else _BACKEND_LOCK

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        _buffer_request_body(environ)
        captured: list[tuple[str, list[tuple[str, str]], Any]] = []
        chunks: list[bytes] = []

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
            captured.append((status, headers, exc_info))
            return chunks.append  # the legacy write() callable also lands in the buffer

        with self.lock:
            result = self.app(environ, capture)
            try:
                for chunk in result:
                    if chunk:
                        chunks.append(chunk)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        if not captured:
            raise RuntimeError("WSGI app returned without calling start_response")
        status, headers, exc_info = captured[-1]
        start_response(status, headers, exc_info)
        return chunks


def _buffer_request_body(environ: dict[str, Any]) -> None:
    """Replace wsgi.input by an in-memory copy of the body (Content-Length or chunked), read outside the lock."""
    stream = environ.get("wsgi.input")
    if stream is None:
        return
    if environ.get("wsgi.input_terminated"):  # chunked transfer: werkzeug's stream ends at the body's end
        body = stream.read()
    else:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        body = stream.read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)


def _make_wsgi_server(host: str, port: int, verbose: bool) -> BaseWSGIServer:
    # Imported here: moto + flask take about a second to import, and the process helpers below
    # (used by demo parents and spawned test workers) do not need them.
    from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import ThreadedWSGIServer

    class _Handler(MotoRequestHandler):
        """moto's handler, with per-request logging optional and open connections tracked for stop()."""

        def setup(self) -> None:
            super().setup()
            self.server.track_connection(self.connection, add=True)  # type: ignore[attr-defined]

        def finish(self) -> None:
            try:
                super().finish()
            finally:
                self.server.track_connection(self.connection, add=False)  # type: ignore[attr-defined]

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            if verbose:
                super().log_request(code, size)

    class _Server(ThreadedWSGIServer):
        # Do not join handler threads on close: an idle keep-alive connection would block stop().
        # stop() shuts those connections down instead (see close_connections).
        block_on_close = False

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._connections: set[socket.socket] = set()
            self._connections_lock = threading.Lock()
            super().__init__(*args, **kwargs)

        def track_connection(self, conn: socket.socket, *, add: bool) -> None:
            with self._connections_lock:
                if add:
                    self._connections.add(conn)
                else:
                    self._connections.discard(conn)

        def close_connections(self) -> None:
            with self._connections_lock:
                conns = list(self._connections)
            for conn in conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)

    app = SerializedWSGIApp(DomainDispatcherApplication(create_backend_app))
    return _Server(host, port, app, _Handler)


class AtomicMotoServer:
    """A serialized moto server on a background thread.

    >>> with AtomicMotoServer() as server:
    ...     boto3.client("dynamodb", endpoint_url=server.endpoint_url, region_name="us-east-1")

    Parameters
    ----------
    host:
        Interface to bind; loopback by default.
    port:
        TCP port; 0 (default) picks a free one. Read it back from ``port`` / ``endpoint_url``.
    verbose:
        Log every request (werkzeug's access log) to stderr.
    """

    def __init__(self, host: str = DEFAULT_HOST, port: int = 0, *, verbose: bool = False) -> None:
        self.host = host
        self._requested_port = port
        self._verbose = verbose
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("server not started")
        return int(self._server.server_address[1])

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> AtomicMotoServer:
        """Bind (the socket is listening when this returns) and serve on a daemon thread."""
        if self._server is not None:
            raise RuntimeError("server already started")
        self._server = _make_wsgi_server(self.host, self._requested_port, self._verbose)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"atomic-moto-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop accepting, drop open connections, close the socket; every wait is bounded by `timeout_s`."""
        server, thread = self._server, self._thread
        if server is None:
            return
        deadline = time.monotonic() + timeout_s
        # shutdown() blocks until serve_forever returns; run it on a helper thread so the wait is bounded.
        stopper = threading.Thread(target=server.shutdown, name="atomic-moto-shutdown", daemon=True)
        stopper.start()
        stopper.join(max(0.0, deadline - time.monotonic()))
        server.close_connections()
        server.server_close()
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------------
# Other OS processes: readiness probe, child-process start/stop, CLI
# --------------------------------------------------------------------------------------------------


class AtomicMotoError(RuntimeError):
    """The moto server child could not be started (it exited before it was ready)."""


def wait_until_ready(endpoint_url: str, timeout_s: float = 30.0, *, interval_s: float = 0.05) -> None:
    """Poll ``GET {endpoint_url}/moto-api/config`` until it answers; raise TimeoutError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last_error: BaseException | None = None
    url = endpoint_url.rstrip("/") + READY_PATH
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"moto server at {endpoint_url} not ready after {timeout_s} s: {last_error!r}")
        try:
            with urllib.request.urlopen(url, timeout=min(2.0, max(remaining, 0.05))) as response:
                response.read()
                return
        except urllib.error.HTTPError:
            return  # an HTTP answer of any status means the server is up
        except (OSError, ValueError) as exc:  # refused, reset, timeout
            last_error = exc
        time.sleep(min(interval_s, max(0.0, deadline - time.monotonic())))


def start_server_process(
    *,
    host: str = DEFAULT_HOST,
    port: int = 0,
    timeout_s: float = 30.0,
    log_path: str | os.PathLike[str] | None = None,
    verbose: bool = False,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
    own_session: bool = False,
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``python -m local.emulators.atomic_moto`` and return ``(process, endpoint_url)`` once it answers.

    ``own_session``: the child runs in a session of its own, so a Ctrl-C on the terminal (SIGINT to the foreground
    process group) reaches the parent only, which can still read the server before it stops it; on Linux the child
    is also sent SIGTERM when the parent dies (``prctl(PR_SET_PDEATHSIG)``), so a killed parent leaves no server.

    The child writes its endpoint to a ready file in a private temporary directory; this waits for that
    file (at most `timeout_s`), then probes the endpoint. The child's stdout and stderr go to `log_path`
    when given, else they are discarded. On failure the child is stopped and :class:`AtomicMotoError` (a
    RuntimeError) or TimeoutError is raised. Stop it with ``stop_server_process(process)``.
    """
    deadline = time.monotonic() + timeout_s
    with tempfile.TemporaryDirectory(prefix="atomic-moto-") as tmp:
        ready_file = Path(tmp) / "endpoint"
        cmd = [
            python,
            "-m",
            "local.emulators.atomic_moto",
            "--host",
            host,
            "--port",
            str(port),
            "--ready-file",
            str(ready_file),
        ]
        if verbose:
            cmd.append("--verbose")
        child_env = dict(os.environ if env is None else env)
        child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO_ROOT), child_env.get("PYTHONPATH")) if p)
        with contextlib.ExitStack() as stack:
            out: Any = subprocess.DEVNULL
            if log_path is not None:
                out = stack.enter_context(open(log_path, "ab"))
            proc = subprocess.Popen(
                cmd,
                cwd=_REPO_ROOT,
                env=child_env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=own_session,
                preexec_fn=_die_with_parent if own_session else None,  # noqa: PLW1509 - prctl only, no locks taken
            )
        try:
            endpoint_url = _wait_for_ready_file(proc, ready_file, deadline)
            wait_until_ready(endpoint_url, max(0.1, deadline - time.monotonic()))
        except BaseException:
            stop_server_process(proc)
            raise
    return proc, endpoint_url


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``; elsewhere none)."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def _wait_for_ready_file(proc: subprocess.Popen[bytes], ready_file: Path, deadline: float) -> str:
    while True:
        if ready_file.exists():
            text = ready_file.read_text(encoding="utf-8").strip()
            if text:
                return text
        code = proc.poll()
        if code is not None:
            raise AtomicMotoError(f"atomic moto server exited with code {code} before it was ready")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"atomic moto server (pid {proc.pid}) wrote no ready file in time")
        time.sleep(0.05)


def stop_server_process(proc: subprocess.Popen[bytes], timeout_s: float = 5.0) -> int:
    """Stop the child started by `start_server_process`: SIGTERM, wait up to `timeout_s`, then SIGKILL.

    Returns the exit code (negative signal number if it was killed). Safe to call twice.
    """
    return stop_process(proc, timeout_s)


def _write_ready_file(path: Path, endpoint_url: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(endpoint_url + "\n", encoding="utf-8")
    os.replace(tmp, path)  # atomic: readers never see a partial line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m local.emulators.atomic_moto",
        description="Serve moto with one request at a time (atomic conditional writes) until SIGTERM/SIGINT.",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="interface to bind (default %(default)s)")
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one (default)")
    parser.add_argument("--ready-file", type=Path, help="write the endpoint URL here once listening")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = parser.parse_args(argv)

    stop_requested = threading.Event()

    def request_stop(signum: int, frame: Any) -> None:
        stop_requested.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    server = AtomicMotoServer(args.host, args.port, verbose=args.verbose).start()
    try:
        print(server.endpoint_url, flush=True)
        if args.ready_file is not None:
            _write_ready_file(args.ready_file, server.endpoint_url)
        while not stop_requested.wait(0.5):
            if not server.running:
                print("atomic moto server thread died", file=sys.stderr, flush=True)
                return 1
    finally:
        server.stop()
        if args.ready_file is not None:
            with contextlib.suppress(OSError):
                args.ready_file.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
