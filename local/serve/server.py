"""``make serve``'s HTTP side: the read API's resolver behind a local HTTP server, as API Gateway would call it.

Every request becomes an API Gateway HTTP API event (payload 2.0, :mod:`local.serve.adapter`) handed to the
function's own resolver, ``results_api.api.create_app(reader).resolve(event, context)``, one invocation at a
time (one execution environment: Powertools' resolver keeps the current event on the app object); its proxy
response goes back on the wire. Three pages are the local server's own: ``GET /`` (an index of each job's URLs),
and two pages around the CloudWatch custom widget's HTML, ``GET /jobs/{job}/widget`` (a job's latest result,
``results_api.widget.render_widget``) and ``GET /widget/overview`` (every job in one table: what the widget's
Lambda answers to ``{"view": "overview"}``, ``results_api.widget.widget_response``).

What differs from the deployed API: **no SigV4 and no IAM authorization** (anyone who can reach the loopback
port can read; it binds 127.0.0.1 only), no throttling, no 30 s integration timeout, no custom domain. Only
GET and HEAD are served (HEAD answers as GET without the body): every other method, standard or not (``POST``,
``QUERY``, ``FOO``), gets a 405 RFC 9457 problem document (``application/problem+json``, the read API's own
shape, ``code`` ``method_not_allowed``) with ``Allow: GET, HEAD``, never :mod:`http.server`'s 501 page; a
request line or a header too long is refused by :mod:`http.server` itself (414, 431); an exception inside the
resolver becomes API Gateway's own 500 ``{"message": "Internal Server Error"}``, logged with its traceback. One
line per request on stderr: method, target, status, milliseconds.

Nothing of the request goes back raw: text taken from it (the method in a 405, the job or the view in a widget
page's 404, :mod:`http.server`'s own error messages) has its control characters (C0, DEL, C1: NUL, CR, LF,
ESC...) escaped as ``\\xNN`` (:func:`printable`) before it is HTML-escaped or JSON-encoded, and header values
never carry one.
"""

from __future__ import annotations

import html
import json
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote

from local.serve.adapter import (
    ProxyResponse,
    build_event,
    error_response,
    lambda_context,
    new_request_id,
    parse_proxy_response,
)
from results_api.errors import ResultsApiError
from results_api.overview import VIEW as OVERVIEW_VIEW
from results_api.responses import NO_STORE, PROBLEM_JSON, problem
from slotlock import system_clock_ms

HOST = "127.0.0.1"
MAX_BODY_BYTES = 1 << 20  # a GET carries no body worth reading; refuse big ones instead of buffering them
IDLE_TIMEOUT_S = 30.0  # an idle keep-alive connection is closed after this long
_WIDGET_PATH = re.compile(r"/jobs/([^/]+)/widget/?")
_VIEW_PATH = re.compile(r"/widget/([^/]+)/?")  # /widget/overview: the one view served
_HOP_BY_HOP = {"connection", "content-length", "keep-alive", "transfer-encoding", "upgrade"}
ALLOWED = "GET, HEAD"
_ALLOWED_METHODS = frozenset(ALLOWED.split(", "))
#: C0 controls, DEL and C1 controls: never sent back as they came (a NUL in a title, a CR/LF in a header).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


class MethodNotAllowedError(ResultsApiError):
    """A method other than GET and HEAD: the local server's 405, as a problem document of the read API's shape."""

    status = 405
    code = "method_not_allowed"

    def __init__(self, method: str) -> None:
        super().__init__(f"{printable(method, 40)} is not allowed: the read API serves {ALLOWED} only")
        self.method = method


def method_not_allowed(method: str, request_id: str) -> ProxyResponse:
    """The 405 of ``method``: an RFC 9457 problem document with ``Allow`` (``method`` escaped, never echoed raw)."""
    body = json.dumps(problem(MethodNotAllowedError(method))).encode("utf-8")
    headers = [
        ("Content-Type", PROBLEM_JSON),
        ("Cache-Control", NO_STORE),
        ("Allow", ALLOWED),
        ("apigw-requestid", request_id),
    ]
    return ProxyResponse(405, headers, body)


@dataclass
class ReadApiService:
    """What answers the requests: the function's resolver (``app``), and the local pages.

    ``app``: anything with ``resolve(event, context) -> dict`` (the Powertools resolver); ``jobs``: the job
    names (the catalog's); ``widget``: ``(job, now_ms) -> HTML fragment`` (``render_widget`` bound to a reader);
    ``overview``: ``now_ms -> HTML fragment`` (``widget_response`` of ``{"view": "overview"}`` bound to a reader);
    ``clock_ms``: the time the pages are rendered at (epoch ms; the local world's clock in ``make serve``).
    """

    app: Any
    jobs: Sequence[str]
    widget: Callable[[str, int], str]
    overview: Callable[[int], str] = field(default=lambda now_ms: "<p>No overview is served here.</p>")
    title: str = "athena-refresh results (local)"
    log: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr, flush=True))
    clock_ms: Callable[[], int] = system_clock_ms
    _resolve_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def handle(
        self,
        *,
        method: str,
        target: str,
        headers: Iterable[tuple[str, str]],
        body: bytes = b"",
        source_ip: str = HOST,
        server_port: int = 80,
        protocol: str = "HTTP/1.1",
        request_id: str | None = None,
    ) -> ProxyResponse:
        """One request's response; never raises (a failure is a logged 500)."""
        request_id = request_id or new_request_id()
        try:
            event = build_event(
                method=method,
                target=target,
                headers=headers,
                body=body,
                source_ip=source_ip,
                server_port=server_port,
                protocol=protocol,
                request_id=request_id,
            )
            path = event["rawPath"]
            if path == "/":
                response = self._index()
            elif (match := _WIDGET_PATH.fullmatch(path)) is not None:
                response = self._widget(match.group(1))
            elif (match := _VIEW_PATH.fullmatch(path)) is not None:
                response = self._view(match.group(1))
            else:
                with self._resolve_lock:  # one invocation at a time, as in one execution environment
                    result = self.app.resolve(event, lambda_context())
                response = parse_proxy_response(result)
        except Exception:  # noqa: BLE001 - a failed integration is API Gateway's 500, never a dropped connection
            self.log(f"500 for {method} {printable(target)} (request {request_id}):\n{traceback.format_exc()}")
            return error_response(500, "Internal Server Error", request_id)
        return ProxyResponse(response.status, [*response.headers, ("apigw-requestid", request_id)], response.body)

    # ---- the local pages --------------------------------------------------------------------------------
    def _widget(self, job: str) -> ProxyResponse:
        if job not in self.jobs:
            known = ", ".join(self.jobs) or "none"
            shown = printable(job, 120)  # taken from the request's path: its control characters escaped
            text = f"<p>No job named <code>{html.escape(shown)}</code>. Jobs: {html.escape(known)}.</p>"
            return _html(404, page(f"{shown}: no such job", text))
        fragment = self.widget(job, self.clock_ms())
        intro = (
            f"<p>The CloudWatch custom widget of <code>{html.escape(job)}</code>, as the dashboard shows it"
            " (<code>results_api.widget.render_widget</code>). <a href='/'>All jobs</a></p>"
        )
        return _html(200, page(f"{job}: latest results", intro + fragment))

    def _view(self, view: str) -> ProxyResponse:
        if view != OVERVIEW_VIEW:
            shown = printable(view, 120)  # taken from the request's path: its control characters escaped
            text = (
                f"<p>No widget view named <code>{html.escape(shown)}</code>. Views: "
                f"<a href='/widget/{OVERVIEW_VIEW}'>{OVERVIEW_VIEW}</a>.</p>"
            )
            return _html(404, page(f"{shown}: no such view", text))
        fragment = self.overview(self.clock_ms())
        intro = (
            "<p>The CloudWatch custom widget's overview, every job in one table, as the dashboard shows it"
            f" (params <code>{html.escape(json.dumps({'view': OVERVIEW_VIEW}))}</code>,"
            " <code>results_api.widget.widget_response</code>). <a href='/'>All jobs</a></p>"
        )
        return _html(200, page("every job: overview", intro + fragment))

    def _index(self) -> ProxyResponse:
        rows = []
        for job in self.jobs:
            base = f"/jobs/{quote(job)}"
            links = [
                (f"{base}/results/latest", "latest (JSON)"),
                (f"{base}/slots?limit=10", "slots"),
                (f"{base}/widget", "widget"),
            ]
            cells = " · ".join(f"<a href='{html.escape(href)}'>{label}</a>" for href, label in links)
            csv = html.escape(f"curl -s -H 'Accept: text/csv' http://<host>{base}/results/latest")
            rows.append(f"<tr><td><code>{html.escape(job)}</code></td><td>{cells}</td><td><code>{csv}</code></td></tr>")
        body = (
            "<p>The read API (<code>results_api</code>) serving the demo's stores from <code>.demo/store</code>."
            " Local only: no SigV4, no IAM authorization.</p>"
            f"<p>Every job at once: <a href='/widget/{OVERVIEW_VIEW}'>the overview widget</a>"
            " (the dashboard's overview table).</p>"
            "<table><tr><th>job</th><th>links</th><th>CSV (needs an Accept header)</th></tr>"
            + "".join(rows)
            + "</table><p><a href='/jobs'>/jobs</a> · <a href='/openapi.json'>/openapi.json</a></p>"
        )
        return _html(200, page(self.title, body))


def page(title: str, body_html: str) -> str:
    """A complete small HTML page around ``body_html`` (trusted markup), titled ``title`` (control characters
    escaped, then HTML-escaped)."""
    title = html.escape(printable(title, 1000))
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}"
        "code{font-size:.9em}</style></head>\n"
        f"<body><h1>{title}</h1>\n{body_html}\n</body></html>\n"
    )


def _html(status: int, text: str) -> ProxyResponse:
    return ProxyResponse(status, [("Content-Type", "text/html; charset=utf-8")], text.encode("utf-8"))


def printable(text: str, limit: int = 300) -> str:
    """``text`` for a log line or a response: non-printable characters (every control character among them: C0,
    DEL, C1) escaped as Python escapes them (``\\x00``, ``\\n``), cut at ``limit``."""
    cleaned = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return cleaned if len(cleaned) <= limit else cleaned[:limit] + "..."


def _header_value(value: str) -> str:
    """A header name or value without control characters (each one escaped): nothing raw reaches the wire."""
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], value)


class ReadApiHandler(BaseHTTPRequestHandler):
    """One connection: GET/HEAD through :meth:`ReadApiService.handle`, every other method (any token) 405."""

    server: ReadApiServer
    protocol_version = "HTTP/1.1"  # keep-alive; every response carries its Content-Length
    server_version = "local-read-api"
    timeout = IDLE_TIMEOUT_S

    def version_string(self) -> str:
        return self.server_version

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def parse_request(self) -> bool:
        """:mod:`http.server`'s parsing, then the 405 of any method but GET and HEAD. ``http.server`` dispatches to
        ``do_<METHOD>`` and answers 501 with its HTML page when there is none (``QUERY``, ``FOO``): answered here
        instead, before that look-up, so every method gets the same problem document."""
        if not super().parse_request():
            return False  # http.server has answered (400, 414, 431...)
        if self.command in _ALLOWED_METHODS:
            return True
        started = time.monotonic()
        self.close_connection = True  # its body (if any) is not read
        self._log_line(405, started)  # before the answer: once a client has its 405, the log has the line
        self._write(method_not_allowed(self.command, new_request_id()), head=False)
        return False

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """:mod:`http.server`'s own error page (400, 414, 431...) with its texts' control characters escaped: a
        message can quote the request line, and it goes into the status line and the page."""
        super().send_error(
            code,
            None if message is None else printable(message, 200),
            None if explain is None else printable(explain, 500),
        )

    def _serve(self, *, head: bool) -> None:
        started = time.monotonic()
        body, refusal = self._read_body()
        if refusal is not None:
            self.close_connection = True
            response = refusal
        else:
            response = self.server.service.handle(
                method="GET",  # HEAD is answered as GET, without the body
                target=self.path,
                headers=self.headers.items(),
                body=body,
                source_ip=self.client_address[0],
                server_port=self.server.server_address[1],
                protocol=self.request_version,
            )
        self._write(response, head=head)
        self._log_line(response.status, started)

    def _read_body(self) -> tuple[bytes, ProxyResponse | None]:
        if self.headers.get("Transfer-Encoding"):
            return b"", error_response(411, "Length Required", new_request_id())
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return b"", error_response(400, "Bad Request", new_request_id())
        if length < 0:
            return b"", error_response(400, "Bad Request", new_request_id())
        if length > MAX_BODY_BYTES:
            return b"", error_response(413, "Request Entity Too Large", new_request_id())
        return (self.rfile.read(length) if length else b""), None

    def _write(self, response: ProxyResponse, *, head: bool) -> None:
        try:
            self.send_response(response.status)
            for name, value in response.headers:
                if name.lower() not in _HOP_BY_HOP:
                    self.send_header(_header_value(name), _header_value(value))
            if response.status not in (204, 304):
                self.send_header("Content-Length", str(len(response.body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if not head and response.body:
                self.wfile.write(response.body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away

    def _log_line(self, status: int, started: float) -> None:
        ms = (time.monotonic() - started) * 1000
        self.server.service.log(f"{printable(self.command, 40)} {printable(self.path)} {status} {ms:.1f} ms")

    # http.server's own messages (its 400/414/431 refusals) go to the same log; send_response logs nothing.
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return

    def log_message(self, format: str, *args: Any) -> None:
        self.server.service.log(f"{self.address_string()} {printable(format % args)}")


class ReadApiServer(ThreadingHTTPServer):
    """A threaded HTTP server on the loopback interface for one :class:`ReadApiService`.

    Binds at construction (``port`` 0: a free port), serves once :meth:`start` is called (on a daemon thread);
    :meth:`stop` is idempotent and bounded.
    """

    daemon_threads = True
    block_on_close = False

    def __init__(self, service: ReadApiService, port: int = 0, host: str = HOST) -> None:
        self.service = service
        self.host = host
        super().__init__((host, port), ReadApiHandler)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> ReadApiServer:
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.2}, name=f"read-api-{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            stopper = threading.Thread(target=self.shutdown, name="read-api-shutdown", daemon=True)
            stopper.start()
            stopper.join(timeout_s)
            thread.join(timeout_s)
        self.server_close()
