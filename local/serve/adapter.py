"""One HTTP request in, one API Gateway HTTP API event (payload format 2.0) out; the proxy response back.

What API Gateway sends a Lambda proxy integration of an HTTP API with ``payloadFormatVersion`` 2.0, and how it
reads the function's answer, as documented in
https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-integrations-lambda.html:

- ``version`` "2.0", ``routeKey`` and ``requestContext.routeKey`` "$default" (the read API's routes live in the
  function's resolver; the local server has only the default route), ``requestContext.stage`` "$default", so
  ``rawPath`` carries no stage prefix;
- ``rawPath`` and ``requestContext.http.path``: the path **percent-decoded**, as HTTP APIs deliver it (REST
  APIs and function URLs keep the encoding; observed on live HTTP APIs, e.g. the captures cited in
  https://github.com/middleapi/standard-server/pull/93); ``rawQueryString``: the query as sent, without ``?``;
- ``headers``: names lower-cased, duplicate headers combined with commas; ``cookies``: every ``Cookie`` header's
  cookies (the ``cookie`` header itself is not in ``headers``); ``queryStringParameters``: decoded, duplicate
  names combined with commas, absent when there is no query; API Gateway's own ``x-forwarded-for``,
  ``x-forwarded-port``, ``x-forwarded-proto`` and ``x-amzn-trace-id`` are added;
- ``requestContext``: ``accountId``, ``apiId``, ``domainName`` (the Host), ``domainPrefix`` (its first label),
  ``http`` {``method``, ``path``, ``protocol``, ``sourceIp``, ``userAgent``}, ``requestId``, ``time``
  (``12/Mar/2020:19:03:58 +0000``), ``timeEpoch`` (ms); no ``authorizer``: nothing authenticates locally (the
  deployed API uses IAM authorization, SigV4, and then adds ``authorizer.iam``);
- ``body`` (text, or base64 with ``isBase64Encoded`` true when it is not UTF-8), absent when empty.

The response: ``statusCode``, ``headers`` (one value each; commas for several), ``cookies`` (each becomes a
``Set-Cookie`` header), ``body`` (base64-decoded when ``isBase64Encoded``). A JSON answer without
``statusCode`` is, as API Gateway infers it, a 200 ``application/json`` whose body is that JSON.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import secrets
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

from local.emulators.lambda_runtime import LambdaContext

ACCOUNT_ID = "123456789012"  # moto's account for the fake credentials
API_ID = "local"
FUNCTION_NAME = "athena-refresh-results-api-local"
FUNCTION_TIMEOUT_MS = 29_000  # an HTTP API's integration timeout: at most 30 s
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_NO_BODY_STATUSES = (204, 304)


class ProxyResponseError(ValueError):
    """The function's answer is not a proxy response API Gateway could return (API Gateway answers 500)."""


def request_time(epoch_ms: int) -> str:
    """``requestContext.time``: the CLF-like UTC time API Gateway writes (English month, whatever the locale)."""
    moment = dt.datetime.fromtimestamp(epoch_ms / 1000, dt.UTC)
    return f"{moment:%d}/{_MONTHS[moment.month - 1]}/{moment:%Y:%H:%M:%S} +0000"


def new_request_id() -> str:
    """An id shaped like API Gateway's (``JKJaXmPLvHcESHA=``: 10 random bytes, base64)."""
    return base64.b64encode(secrets.token_bytes(10)).decode("ascii")


def build_event(
    *,
    method: str,
    target: str,
    headers: Iterable[tuple[str, str]],
    body: bytes = b"",
    source_ip: str = "127.0.0.1",
    server_port: int = 80,
    protocol: str = "HTTP/1.1",
    now_ms: int | None = None,
    request_id: str | None = None,
) -> dict[str, Any]:
    """The payload 2.0 event of one request: ``target`` is the request line's target (``/path?query``),
    ``headers`` every header line in order (name, value). See the module docstring."""
    now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    request_id = request_id or new_request_id()
    raw_path, _, raw_query = target.partition("#")[0].partition("?")
    path = unquote(raw_path or "/")
    joined: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        lower = name.lower()
        if lower == "cookie":
            cookies.extend(part.strip() for part in value.split(";") if part.strip())
            continue
        joined[lower] = f"{joined[lower]},{value}" if lower in joined else value
    forwarded = joined.get("x-forwarded-for")
    joined["x-forwarded-for"] = f"{forwarded}, {source_ip}" if forwarded else source_ip
    joined["x-forwarded-port"] = str(server_port)
    joined["x-forwarded-proto"] = "http"
    joined["x-amzn-trace-id"] = f"Root=1-{now_ms // 1000:08x}-{secrets.token_hex(12)}"
    joined["content-length"] = str(len(body))
    domain = (joined.get("host") or f"127.0.0.1:{server_port}").rsplit(":", 1)[0] or "127.0.0.1"
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": raw_query,
    }
    if cookies:
        event["cookies"] = cookies
    event["headers"] = joined
    if raw_query:
        params: dict[str, str] = {}
        for name, value in parse_qsl(raw_query, keep_blank_values=True):
            params[name] = f"{params[name]},{value}" if name in params else value
        if params:
            event["queryStringParameters"] = params
    event["requestContext"] = {
        "accountId": ACCOUNT_ID,
        "apiId": API_ID,
        "domainName": domain,
        "domainPrefix": domain.split(".", 1)[0],
        "http": {
            "method": method.upper(),
            "path": path,
            "protocol": protocol,
            "sourceIp": source_ip,
            "userAgent": joined.get("user-agent", ""),
        },
        "requestId": request_id,
        "routeKey": "$default",
        "stage": "$default",
        "time": request_time(now_ms),
        "timeEpoch": now_ms,
    }
    if body:
        try:
            event["body"], event["isBase64Encoded"] = body.decode("utf-8"), False
        except UnicodeDecodeError:
            event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode("ascii"), True
    else:
        event["isBase64Encoded"] = False
    return event


def lambda_context(request_id: str | None = None) -> LambdaContext:
    """A Lambda-like context for one invocation of the read API's function (its own request id)."""
    return LambdaContext(
        aws_request_id=request_id or str(uuid.uuid4()), function_name=FUNCTION_NAME, timeout_ms=FUNCTION_TIMEOUT_MS
    )


@dataclass(frozen=True)
class ProxyResponse:
    """What goes back on the wire: status, header lines in order (``Set-Cookie`` once per cookie), body bytes."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or ``None``."""
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


def parse_proxy_response(result: Any) -> ProxyResponse:
    """The function's answer (payload 2.0 response) as a :class:`ProxyResponse`.

    :raises ProxyResponseError: not a response API Gateway could return (a wrong type, an undecodable body).
    """
    if not isinstance(result, Mapping) or "statusCode" not in result:
        try:  # inferred: any JSON is a 200 application/json of that JSON
            text = result if isinstance(result, str) else json.dumps(result)
        except (TypeError, ValueError) as exc:
            raise ProxyResponseError(f"the function returned {type(result).__name__}, not JSON") from exc
        return ProxyResponse(200, [("Content-Type", "application/json")], text.encode("utf-8"))
    status = result["statusCode"]
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        raise ProxyResponseError(f"statusCode must be an HTTP status, got {status!r:.40}")
    headers: list[tuple[str, str]] = []
    raw_headers = result.get("headers") or {}
    if not isinstance(raw_headers, Mapping):
        raise ProxyResponseError("headers must be an object")
    for name, value in raw_headers.items():
        if not isinstance(name, str) or "\n" in name or "\r" in name:
            raise ProxyResponseError(f"bad header name {name!r:.40}")
        text = (
            value
            if isinstance(value, str)
            else json.dumps(value)
            if not isinstance(value, (int, float))
            else str(value)
        )
        if "\n" in text or "\r" in text:
            raise ProxyResponseError(f"header {name} holds a line break")
        headers.append((name, text))
    cookies = result.get("cookies") or []
    if not isinstance(cookies, list) or not all(
        isinstance(c, str) and "\n" not in c and "\r" not in c for c in cookies
    ):
        raise ProxyResponseError("cookies must be a list of Set-Cookie values")
    headers.extend(("Set-Cookie", cookie) for cookie in cookies)
    body = result.get("body")
    if body is None:
        data = b""
    elif not isinstance(body, str):
        raise ProxyResponseError(f"body must be a string, got {type(body).__name__}")
    elif result.get("isBase64Encoded"):
        try:
            data = base64.b64decode(body, validate=True)
        except ValueError as exc:
            raise ProxyResponseError("isBase64Encoded is true but the body is not base64") from exc
    else:
        data = body.encode("utf-8")
    if status in _NO_BODY_STATUSES:
        data = b""
    return ProxyResponse(status, headers, data)


def error_response(status: int, message: str, request_id: str) -> ProxyResponse:
    """API Gateway's own JSON error answer (``{"message": "Internal Server Error"}`` for a failed function)."""
    body = json.dumps({"message": message}).encode("utf-8")
    return ProxyResponse(status, [("Content-Type", "application/json"), ("apigw-requestid", request_id)], body)
