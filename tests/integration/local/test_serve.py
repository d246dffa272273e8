"""``make serve``: the demo's store on disk, the payload-2.0 adapter, and the read API over real HTTP.

- the store (:mod:`local.serve.store`): export -> import round trip on the atomic moto server (items, objects,
  the ``history`` index), atomic replacement, refusal of missing/corrupt/other-format stores;
- the adapter (:mod:`local.serve.adapter`): the event API Gateway builds for a request, the proxy response
  written back, through a stub resolver on a real HTTP server (no moto);
- ``python -m local.serve`` without a demo: exit status 2 and the message;
- end to end: a store seeded WITHOUT the demo (results through ``ResultsStore.prepare`` committed by the real
  lock, ``SlotLock.commit``, in the same transaction as the history item; one slot's rows offloaded to S3),
  exported, then served by :class:`local.serve.cli.LocalReadApi` (its own moto child process, the real
  ``results_api`` resolver) and read with ``http.client``: JSON, CSV, ETag/304, the 302 to moto S3 followed
  by a fresh unauthenticated request, 404/400 naming what is wrong, pagination, the widget, the overview widget
  (``/widget/overview``: every job of the catalog with its status), the OpenAPI document.

Every server binds 127.0.0.1 on a free port; every wait is bounded.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import http.client
import io
import json
import re
import socket
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from athena_refresh.catalog import catalog_document
from athena_refresh.engine import QueryResult
from athena_refresh.engine.model import Column, QueryStatistics
from athena_refresh.results import ResultsStore, create_results_table
from local.serve import cli
from local.serve.adapter import build_event, parse_proxy_response, request_time
from local.serve.server import ReadApiServer, ReadApiService
from local.serve.store import (
    MANIFEST_FILE,
    STORE_DIR,
    StoreError,
    StoreMissingError,
    export_store,
    import_store,
    read_manifest,
)
from slotlock import Lease, Slot, SlotLock, create_lock_table
from slotlock.table import HISTORY_INDEX
from stacks.runtime_asset import catalog_queries
from tests.sample_jobs import load_fixture_jobs

REPO_ROOT = Path(__file__).resolve().parents[3]
REGION = "us-east-1"
HTTP_TIMEOUT_S = 10.0
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "aws_session_token": "testing"}


def client(service: str, endpoint: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name=REGION, **CREDENTIALS)


def names(prefix: str) -> tuple[str, str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"{prefix}-locks-{suffix}", f"{prefix}-results-{suffix}", f"{prefix}-bucket-{suffix}"


def repo_catalog() -> dict[str, Any]:
    """The catalog of the two sample jobs (tests/fixtures/jobs), whatever jobs/ holds."""
    return catalog_document(catalog_queries(load_fixture_jobs()))


# ---- the store ------------------------------------------------------------------------------------------
def _small_store(endpoint: str) -> tuple[Any, Any, str, str, str]:
    """Two tables and a bucket with a few items (a history item, a binary attribute) and nested keys."""
    ddb, s3 = client("dynamodb", endpoint), client("s3", endpoint)
    lock_table, results_table, bucket = names("store")
    create_lock_table(ddb, lock_table)
    create_results_table(ddb, results_table)
    s3.create_bucket(Bucket=bucket)
    ddb.put_item(TableName=lock_table, Item={"pk": {"S": "lock#j"}, "fencing_token": {"N": "7"}})
    for index in range(30):  # more than one BatchWriteItem of 25 on the way back
        ddb.put_item(
            TableName=lock_table,
            Item={
                "pk": {"S": f"slot#j#2026-11-22T{index:02d}:00:00Z"},
                "job": {"S": "j"},
                "slot_epoch_s": {"N": str(1795305600 + 3600 * index)},
                "status": {"S": "SUCCEEDED"},
                "blob": {"B": bytes([index, 0, 255])},
                "nested": {"M": {"l": {"L": [{"N": "1"}, {"BS": [b"\x00", b"\x01"]}]}}},
            },
        )
    ddb.put_item(TableName=results_table, Item={"job": {"S": "j"}, "slot": {"S": "LATEST"}, "latest_slot": {"S": "x"}})
    for key in ("results/j/2026-11-22T00:00:00Z/token-1.json", "results/j/2026-11-22T01:00:00Z/g2-token-3.json"):
        s3.put_object(Bucket=bucket, Key=key, Body=json.dumps([{"key": key}]).encode(), ContentType="application/json")
    return ddb, s3, lock_table, results_table, bucket


def _scan(ddb: Any, table: str) -> list[dict[str, Any]]:
    items = [i for page in ddb.get_paginator("scan").paginate(TableName=table) for i in page["Items"]]
    return sorted(items, key=lambda item: json.dumps(item, sort_keys=True, default=repr))


def _objects(s3: Any, bucket: str) -> dict[str, tuple[bytes, str]]:
    found = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for entry in page.get("Contents", []):
            obj = s3.get_object(Bucket=bucket, Key=entry["Key"])
            found[entry["Key"]] = (obj["Body"].read(), obj["ContentType"])
    return found


@pytest.mark.slow
def test_store_round_trip_keeps_items_objects_and_the_history_index(atomic_moto_endpoint: str, tmp_path: Path) -> None:
    ddb, s3, lock_table, results_table, bucket = _small_store(atomic_moto_endpoint)
    before = {lock_table: _scan(ddb, lock_table), results_table: _scan(ddb, results_table)}
    objects = _objects(s3, bucket)
    dest = tmp_path / STORE_DIR
    catalog = repo_catalog()
    manifest = export_store(
        ddb,
        s3,
        dest,
        lock_table=lock_table,
        results_table=results_table,
        bucket=bucket,
        catalog=catalog,
        region=REGION,
    )
    assert manifest["counts"] == {
        "lock_items": 31,
        "result_items": 1,
        "objects": 2,
        "object_bytes": manifest["counts"]["object_bytes"],
    }
    assert manifest["catalog"] == catalog and read_manifest(dest) == manifest
    lines = (dest / "dynamodb" / f"{lock_table}.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 31 and all(set(json.loads(line)) == {"Item"} for line in lines)  # DynamoDB JSON
    assert (dest / "s3" / bucket / "results" / "j" / "2026-11-22T00:00:00Z" / "token-1.json").is_file()

    # Gone from the server, then back from the files.
    for table in (lock_table, results_table):
        ddb.delete_table(TableName=table)
    for key in objects:
        s3.delete_object(Bucket=bucket, Key=key)
    s3.delete_bucket(Bucket=bucket)
    assert import_store(dest, ddb, s3) == manifest
    assert {t: _scan(ddb, t) for t in (lock_table, results_table)} == before
    assert _objects(s3, bucket) == objects
    page = ddb.query(
        TableName=lock_table,
        IndexName=HISTORY_INDEX,
        KeyConditionExpression="#job = :job",
        ExpressionAttributeNames={"#job": "job"},
        ExpressionAttributeValues={":job": {"S": "j"}},
        ScanIndexForward=False,
        Limit=3,
    )
    assert [item["slot_epoch_s"]["N"] for item in page["Items"]] == [str(1795305600 + 3600 * i) for i in (29, 28, 27)]


class _FailingS3:
    """An S3 client whose second GetObject fails (an export interrupted halfway)."""

    def __init__(self, real: Any) -> None:
        self.real, self.gets = real, 0

    def get_object(self, **kwargs: Any) -> Any:
        self.gets += 1
        if self.gets == 2:
            raise OSError("disk vanished")
        return self.real.get_object(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@pytest.mark.slow
def test_an_interrupted_export_leaves_the_previous_store_whole(atomic_moto_endpoint: str, tmp_path: Path) -> None:
    ddb, s3, lock_table, results_table, bucket = _small_store(atomic_moto_endpoint)
    dest = tmp_path / STORE_DIR
    common = {"lock_table": lock_table, "results_table": results_table, "bucket": bucket, "catalog": repo_catalog()}
    first = export_store(ddb, s3, dest, region=REGION, created_at="2026-01-01T00:00:00Z", **common)
    with pytest.raises(StoreError, match="disk vanished"):
        export_store(ddb, _FailingS3(s3), dest, region=REGION, created_at="2026-01-02T00:00:00Z", **common)
    assert read_manifest(dest) == first  # the old store, untouched and complete
    assert sorted(p.name for p in tmp_path.iterdir()) == [STORE_DIR]  # no temporary directory left behind
    second = export_store(ddb, s3, dest, region=REGION, created_at="2026-01-03T00:00:00Z", **common)
    assert read_manifest(dest)["created_at"] == second["created_at"] == "2026-01-03T00:00:00Z"
    assert sorted(p.name for p in tmp_path.iterdir()) == [STORE_DIR]


def test_missing_corrupt_and_foreign_stores_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(StoreMissingError, match="no demo results"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(StoreError, match="not JSON"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST_FILE).write_text(json.dumps({"kind": "athena-refresh-demo-store", "format": 0}))
    with pytest.raises(StoreError, match="format 0; this version reads format 1"):
        read_manifest(tmp_path)
    manifest = {
        "kind": "athena-refresh-demo-store",
        "format": 1,
        "created_at": "2026-01-01T00:00:00Z",
        "region": REGION,
        "lock_table": "l",
        "results_table": "r",
        "bucket": None,
        "catalog": {},
        "tables": [
            {"name": "l", "kind": "lock", "file": "dynamodb/l.jsonl", "items": 0},
            {"name": "r", "kind": "results", "file": "../../etc/passwd", "items": 0},
        ],
        "objects": [],
    }
    (tmp_path / "dynamodb").mkdir()
    (tmp_path / "dynamodb" / "l.jsonl").write_text("", encoding="utf-8")
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match="outside the store"):
        read_manifest(tmp_path)


# ---- the adapter ------------------------------------------------------------------------------------------
def test_the_event_is_api_gateways_payload_2_0() -> None:
    now_ms = 1_795_305_600_123  # 2026-11-22T00:00:00.123Z
    event = build_event(
        method="GET",
        target="/jobs/flights-dashboard/results/2026-11-22T00%3A30%3A00Z?limit=5&status=a&status=b%20c&empty=",
        headers=[
            ("Host", "127.0.0.1:8080"),
            ("User-Agent", "curl/8.5.0"),
            ("Accept", "text/csv"),
            ("X-Dup", "one"),
            ("x-dup", "two"),
            ("Cookie", "a=1; b=2"),
            ("Cookie", "c=3"),
        ],
        source_ip="127.0.0.1",
        server_port=8080,
        now_ms=now_ms,
        request_id="req-1",
    )
    trace = event["headers"].pop("x-amzn-trace-id")
    assert trace.startswith(f"Root=1-{now_ms // 1000:08x}-") and len(trace) == len("Root=1-") + 8 + 1 + 24
    assert event == {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/jobs/flights-dashboard/results/2026-11-22T00:30:00Z",  # decoded, as HTTP APIs deliver it
        "rawQueryString": "limit=5&status=a&status=b%20c&empty=",
        "cookies": ["a=1", "b=2", "c=3"],
        "headers": {
            "host": "127.0.0.1:8080",
            "user-agent": "curl/8.5.0",
            "accept": "text/csv",
            "x-dup": "one,two",
            "x-forwarded-for": "127.0.0.1",
            "x-forwarded-port": "8080",
            "x-forwarded-proto": "http",
            "content-length": "0",
        },
        "queryStringParameters": {"limit": "5", "status": "a,b c", "empty": ""},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": "127.0.0.1",
            "domainPrefix": "127",
            "http": {
                "method": "GET",
                "path": "/jobs/flights-dashboard/results/2026-11-22T00:30:00Z",
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "curl/8.5.0",
            },
            "requestId": "req-1",
            "routeKey": "$default",
            "stage": "$default",
            "time": "22/Nov/2026:00:00:00 +0000",
            "timeEpoch": now_ms,
        },
        "isBase64Encoded": False,
    }
    bare = build_event(method="GET", target="/jobs", headers=[], now_ms=now_ms)
    assert "queryStringParameters" not in bare and "cookies" not in bare and "body" not in bare
    assert bare["rawQueryString"] == "" and bare["requestContext"]["requestId"].endswith("=")
    binary = build_event(method="GET", target="/", headers=[], body=b"\xff\x00", now_ms=now_ms)
    assert binary["isBase64Encoded"] is True and base64.b64decode(binary["body"]) == b"\xff\x00"
    assert (
        request_time(int(dt.datetime(2026, 5, 3, 4, 5, 6, tzinfo=dt.UTC).timestamp() * 1000))
        == "03/May/2026:04:05:06 +0000"
    )


def test_the_proxy_response_is_read_as_api_gateway_reads_it() -> None:
    response = parse_proxy_response(
        {
            "statusCode": 201,
            "headers": {"Content-Type": "text/plain", "X-Many": "a,b"},
            "cookies": ["s=1; Path=/", "t=2"],
            "body": base64.b64encode(b"\x00bin").decode(),
            "isBase64Encoded": True,
        }
    )
    assert response.status == 201 and response.body == b"\x00bin"
    assert response.headers == [
        ("Content-Type", "text/plain"),
        ("X-Many", "a,b"),
        ("Set-Cookie", "s=1; Path=/"),
        ("Set-Cookie", "t=2"),
    ]
    assert parse_proxy_response({"statusCode": 304, "body": "ignored"}).body == b""
    inferred = parse_proxy_response({"ok": True})  # no statusCode: API Gateway infers a 200 of that JSON
    assert inferred.status == 200 and json.loads(inferred.body) == {"ok": True}
    with pytest.raises(ValueError, match="statusCode"):
        parse_proxy_response({"statusCode": "200"})


class StubApp:
    """A resolver stand-in: records each event; ``/boom`` raises, anything else answers with cookies and base64."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        assert context.get_remaining_time_in_millis() > 0 and context.aws_request_id
        self.events.append(event)
        if event["rawPath"] == "/boom":
            raise RuntimeError("the function failed")
        return {
            "statusCode": 200,
            "headers": {"Content-Type": "application/octet-stream", "X-Path": event["rawPath"]},
            "cookies": ["a=1", "b=2; HttpOnly"],
            "body": base64.b64encode(b"payload\x00").decode(),
            "isBase64Encoded": True,
        }


@dataclass
class Response:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request(base_url: str, path: str, *, method: str = "GET", headers: dict[str, str] | None = None) -> Response:
    """One request on a fresh connection, redirects NOT followed (http.client never follows them)."""
    url = urllib.parse.urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=HTTP_TIMEOUT_S)
    try:
        conn.request(method, path, headers=headers or {})
        answer = conn.getresponse()
        return Response(answer.status, answer.headers, answer.read())
    finally:
        conn.close()


@pytest.fixture
def stub_server() -> Iterator[tuple[ReadApiServer, StubApp, list[str]]]:
    app, log = StubApp(), []
    service = ReadApiService(
        app=app,
        jobs=["job-a"],
        widget=lambda job, now_ms: f"<table><tr><td>{job}</td></tr></table>",
        overview=lambda now_ms: f"<table><tr><td>every job at {now_ms}</td></tr></table>",
        log=log.append,
    )
    server = ReadApiServer(service, 0).start()
    try:
        yield server, app, log
    finally:
        server.stop()


def test_requests_reach_the_resolver_as_events_and_its_answers_reach_the_client(
    stub_server: tuple[ReadApiServer, StubApp, list[str]],
) -> None:
    server, app, log = stub_server
    answer = request(
        server.base_url, "/jobs/job-a/results/2026-11-22T00%3A30%3A00Z?x=1&x=2", headers={"X-Dup": "a", "Cookie": "k=v"}
    )
    assert answer.status == 200 and answer.body == b"payload\x00"
    assert answer.headers.get_all("Set-Cookie") == ["a=1", "b=2; HttpOnly"]
    assert answer.headers["Content-Length"] == "8" and answer.headers["apigw-requestid"]
    event = app.events[-1]
    assert event["rawPath"] == answer.headers["X-Path"] == "/jobs/job-a/results/2026-11-22T00:30:00Z"
    assert event["queryStringParameters"] == {"x": "1,2"} and event["cookies"] == ["k=v"]
    assert event["headers"]["x-dup"] == "a" and "cookie" not in event["headers"]
    assert event["requestContext"]["http"]["sourceIp"] == "127.0.0.1"

    boom = request(server.base_url, "/boom")  # an exception inside resolve: 500, never a dropped connection
    assert boom.status == 500 and boom.json() == {"message": "Internal Server Error"}
    assert any("RuntimeError: the function failed" in line for line in log)

    head = request(server.base_url, "/jobs", method="HEAD")
    assert head.status == 200 and head.body == b"" and head.headers["Content-Length"] == "8"
    assert app.events[-1]["requestContext"]["http"]["method"] == "GET"
    post = request(server.base_url, "/jobs", method="POST")
    assert post.status == 405 and post.headers["Allow"] == "GET, HEAD"
    too_long = request(server.base_url, "/jobs", headers={"X-Big": "x" * 70_000})  # http.server's own refusal
    assert too_long.status == 431

    widget = request(server.base_url, "/jobs/job-a/widget")
    assert widget.status == 200 and widget.headers["Content-Type"] == "text/html; charset=utf-8"
    assert widget.body.startswith(b"<!doctype html>") and b"<td>job-a</td>" in widget.body
    unknown = request(server.base_url, "/jobs/nope/widget")
    assert unknown.status == 404 and b"nope" in unknown.body
    index = request(server.base_url, "/")
    assert index.status == 200 and b"/jobs/job-a/results/latest" in index.body and b"/openapi.json" in index.body
    assert b"href='/widget/overview'" in index.body
    # A request's line is logged once its answer is written: the client may be further on by then (a loaded
    # machine), so wait for the line (bounded) instead of expecting it first.
    first = "GET /jobs/job-a/results/2026-11-22T00%3A30%3A00Z?x=1&x=2 200 "
    deadline = time.monotonic() + LOG_WAIT_S
    while not any(line.startswith(first) for line in log) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert any(line.startswith(first) and line.endswith(" ms") for line in list(log)), log
    assert any(line.startswith("POST /jobs 405 ") for line in log)  # a 405 is logged before it is answered


def test_the_overview_page_wraps_the_overview_widget_and_refuses_other_views_and_methods(
    stub_server: tuple[ReadApiServer, StubApp, list[str]],
) -> None:
    server, app, log = stub_server
    for path in ("/widget/overview", "/widget/overview/"):
        page = request(server.base_url, path)
        assert page.status == 200 and page.headers["Content-Type"] == "text/html; charset=utf-8", path
        assert page.body.startswith(b"<!doctype html>") and b"<td>every job at " in page.body
        assert b"<a href='/'>" in page.body and page.headers["apigw-requestid"]
    head = request(server.base_url, "/widget/overview", method="HEAD")
    assert head.status == 200 and head.body == b"" and int(head.headers["Content-Length"]) > 0
    unknown = request(server.base_url, "/widget/%3Cb%3Enope")  # a view that is not served: 404 page, escaped
    assert unknown.status == 404 and b"&lt;b&gt;nope" in unknown.body and b"<b>nope" not in unknown.body
    assert b"/widget/overview" in unknown.body
    post = request(server.base_url, "/widget/overview", method="POST")
    assert post.status == 405 and post.headers["Allow"] == "GET, HEAD"
    assert post.headers["Content-Type"] == "application/problem+json"
    assert post.json()["code"] == "method_not_allowed"
    assert app.events == []  # the local pages never reach the function
    deadline = time.monotonic() + LOG_WAIT_S
    while not any(line.startswith("HEAD /widget/overview 200 ") for line in log) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert any(line.startswith("HEAD /widget/overview 200 ") for line in list(log)), log


#: How long a test waits for a request's log line, written by the server's thread after the answer (a bound only).
LOG_WAIT_S = 30.0


#: Control characters (C0, DEL, C1) as they would appear on the wire: raw, or UTF-8 for C1 in a decoded path.
CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]")


def raw_exchange(base_url: str, data: bytes) -> tuple[list[bytes], bytes]:
    """Send ``data`` (a whole request, possibly not one http.client would send) on a fresh connection; the
    response's status and header lines, and its body (read to Content-Length, or until the server closes)."""
    url = urllib.parse.urlsplit(base_url)
    with socket.create_connection((url.hostname, url.port), timeout=HTTP_TIMEOUT_S) as conn:
        conn.sendall(data)
        received = b""
        for _ in range(1000):  # bounded: a response of a few KB
            chunk = conn.recv(65536)
            if not chunk:
                break
            received += chunk
            head, sep, body = received.partition(b"\r\n\r\n")
            length = re.search(rb"(?im)^content-length: *(\d+)", head)
            if sep and length and len(body) >= int(length.group(1)):
                break
    head, _, body = received.partition(b"\r\n\r\n")
    return head.split(b"\r\n"), body


def assert_no_control_characters(lines: list[bytes], body: bytes) -> None:
    """Status and header lines: printable ASCII only; the body (UTF-8): no control character but its own LF/tab."""
    for line in lines:
        assert all(0x20 <= byte < 0x7F for byte in line), line
    assert not CONTROL_BYTES.search(body) and b"\r" not in body, body


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "QUERY", "FOO", "PROPFIND"])
def test_every_method_but_get_and_head_gets_the_405_problem_document(
    stub_server: tuple[ReadApiServer, StubApp, list[str]], method: str
) -> None:
    server, app, log = stub_server
    answer = request(server.base_url, "/jobs", method=method)
    assert answer.status == 405 and answer.headers["Allow"] == "GET, HEAD"
    assert answer.headers["Content-Type"] == "application/problem+json"
    assert answer.headers["Cache-Control"] == "no-store" and answer.headers["apigw-requestid"]
    assert answer.json() == {
        "type": "about:blank#method_not_allowed",
        "title": "method not allowed",
        "status": 405,
        "detail": f"{method} is not allowed: the read API serves GET, HEAD only",
        "code": "method_not_allowed",
    }
    assert app.events == []  # never reaches the function
    assert any(line.startswith(f"{method} /jobs 405 ") for line in log)


def test_a_method_with_control_characters_gets_the_405_without_them(
    stub_server: tuple[ReadApiServer, StubApp, list[str]],
) -> None:
    server, _, log = stub_server
    lines, body = raw_exchange(server.base_url, b"FO\x00\x1bO /jobs HTTP/1.1\r\nHost: x\r\n\r\n")
    assert lines[0] == b"HTTP/1.1 405 Method Not Allowed"
    assert_no_control_characters(lines, body)
    assert json.loads(body)["detail"] == "FO\\x00\\x1bO is not allowed: the read API serves GET, HEAD only"
    assert any(line.startswith("FO\\x00\\x1bO /jobs 405 ") for line in log)  # the log line escapes it too


@pytest.mark.parametrize(
    "target",
    [
        b"/jobs/%00/widget",  # percent-encoded NUL, decoded into the job name
        b"/jobs/a%0d%0aX-Injected:%201%1b%7f%c2%85/widget",  # CR LF, ESC, DEL and C1 NEL
        b"/jobs/\x00\x01/widget",  # raw bytes in the request line
        b"/widget/%00",  # a widget view: the same 404 page
        b"/widget/a%0d%0aX-Injected:%201%1b%7f%c2%85/",
    ],
)
def test_control_characters_in_the_path_never_come_back_raw(
    stub_server: tuple[ReadApiServer, StubApp, list[str]], target: bytes
) -> None:
    server, _, _ = stub_server
    lines, body = raw_exchange(server.base_url, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert lines[0] == b"HTTP/1.1 404 Not Found"
    assert_no_control_characters(lines, body)
    assert not any(line.lower().startswith(b"x-injected") for line in lines)
    assert b"\\x00" in body or b"\\r\\n" in body  # shown escaped in the title and the page


def test_http_servers_own_refusals_carry_no_control_characters(
    stub_server: tuple[ReadApiServer, StubApp, list[str]],
) -> None:
    server, _, _ = stub_server
    lines, body = raw_exchange(server.base_url, b"GET /\x00 \x00 HTTP/1.1\r\nHost: x\r\n\r\n")  # 400 syntax
    assert lines[0].startswith(b"HTTP/1.1 400 ")
    assert_no_control_characters(lines, body)


# ---- the command line -------------------------------------------------------------------------------------
def test_serving_without_a_demo_says_so_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--workdir", str(tmp_path), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "no demo results in" in err and "run `make demo` first, then `make serve`" in err
    (tmp_path / STORE_DIR).mkdir()
    (tmp_path / STORE_DIR / MANIFEST_FILE).write_text('{"kind": "athena-refresh-demo-store", "format": 99}')
    assert cli.main(["--workdir", str(tmp_path), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "format 99" in err and "Traceback" not in err and "run `make demo` again" in err
    assert err.count("\n") == 1  # one line


# ---- end to end over HTTP ---------------------------------------------------------------------------------
FLIGHTS = "flights-dashboard"
CARRIER = "carrier-on-time"
FIRST_SLOT = Slot(int(dt.datetime(2026, 11, 22, 0, 0, tzinfo=dt.UTC).timestamp()))
SLOTS = 5  # flights-dashboard: slots 0..4 half-hourly; slot 1 offloaded to S3, slot 3 FAILED (no result)
OFFLOADED, FAILED = 1, 3
COLUMNS = (Column("origin", "varchar"), Column("flights", "bigint"), Column("note", "varchar"))


def rows_of(index: int) -> list[dict[str, Any]]:
    return [
        {"origin": "EWR", "flights": 100 + index, "note": 'quoted, "text"'},
        {"origin": "JFK", "flights": 200 + index, "note": None},
    ]


@dataclass
class Seeded:
    base_url: str
    slots: list[Slot]
    committed: list[int]  # indexes of slots with a result


@pytest.fixture(scope="module")
def served(atomic_moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    ddb, s3 = client("dynamodb", atomic_moto_endpoint), client("s3", atomic_moto_endpoint)
    lock_table, results_table, bucket = names("serve")
    create_lock_table(ddb, lock_table, enable_ttl=False)
    create_results_table(ddb, results_table)
    s3.create_bucket(Bucket=bucket)
    clock = [0]
    slots = [Slot(FIRST_SLOT.epoch_s + 1800 * index) for index in range(SLOTS)]
    committed = []
    for job, job_slots in ((FLIGHTS, slots), (CARRIER, slots[:1])):
        lock = SlotLock(lock_table, job, client=ddb, clock_ms=lambda: clock[0], lease_duration_s=30)
        for index, slot in enumerate(job_slots):
            clock[0] = slot.epoch_ms + 2_000
            lease = lock.try_acquire(slot, f"owner-{job}-{index}", deadline_ms=clock[0] + 60_000)
            assert isinstance(lease, Lease), lease
            if job == FLIGHTS and index == FAILED:
                lock.commit(lease, outcome="failed", error={"type": "QueryFailed", "message": "boom"})
                continue
            store = ResultsStore(
                results_table,
                bucket_name=bucket,
                dynamodb_client=ddb,
                s3_client=s3,
                max_inline_bytes=10 if index == OFFLOADED else 300_000,
            )
            prepared = store.prepare(
                job_name=job,
                slot_iso=slot.iso,
                fencing_token=lease.fencing_token,
                query_execution_id=f"qe-{job}-{index}",
                statistics=QueryStatistics(data_scanned_bytes=1000 + index),
                result=QueryResult(COLUMNS, rows_of(index)),
                committed_at_ms=clock[0],
                window=("2013-11-21T00:00:00", "2013-11-22T00:00:00"),
            )
            assert prepared.summary["rows_location"] == ("s3" if index == OFFLOADED else "inline")
            lock.commit(lease, writes=prepared.writes, summary=prepared.summary)
            if job == FLIGHTS:
                committed.append(index)
    workdir = tmp_path_factory.mktemp("serve")
    export_store(
        ddb,
        s3,
        workdir / STORE_DIR,
        lock_table=lock_table,
        results_table=results_table,
        bucket=bucket,
        catalog=repo_catalog(),
        region=REGION,
    )
    log: list[str] = []
    with cli.LocalReadApi(workdir, port=0, log=log.append) as api:
        assert api.moto_endpoint != atomic_moto_endpoint  # its own moto, loaded from the files alone
        yield Seeded(api.base_url, slots, committed)


@pytest.mark.slow
def test_jobs_and_the_latest_result_as_json_and_csv(served: Seeded) -> None:
    jobs = request(served.base_url, "/jobs")
    assert jobs.status == 200 and jobs.headers["Content-Type"].startswith("application/json")
    by_name = {job["job"]: job for job in jobs.json()["jobs"]}
    assert sorted(by_name) == [CARRIER, FLIGHTS]
    assert by_name[FLIGHTS]["latest"]["slot"] == served.slots[-1].iso

    latest = request(served.base_url, f"/jobs/{FLIGHTS}/results/latest")
    assert latest.status == 200
    document = latest.json()
    assert document["slot"] == served.slots[-1].iso and document["rows"] == rows_of(SLOTS - 1)

    as_csv = request(served.base_url, f"/jobs/{FLIGHTS}/results/latest", headers={"Accept": "text/csv"})
    assert as_csv.status == 200 and as_csv.headers["Content-Type"].startswith("text/csv")
    table = list(csv.reader(io.StringIO(as_csv.body.decode("utf-8"), newline="")))
    assert table == [["origin", "flights", "note"], ["EWR", "104", 'quoted, "text"'], ["JFK", "204", ""]]

    etag = latest.headers["ETag"]
    assert etag
    again = request(served.base_url, f"/jobs/{FLIGHTS}/results/latest", headers={"If-None-Match": etag})
    assert again.status == 304 and again.body == b""


@pytest.mark.slow
def test_offloaded_rows_redirect_to_a_presigned_url_any_client_can_follow(served: Seeded) -> None:
    slot = served.slots[OFFLOADED].iso
    answer = request(served.base_url, f"/jobs/{FLIGHTS}/results/{slot}")
    assert answer.status == 302 and answer.body == b""
    location = answer.headers["Location"]
    assert location.startswith("http://127.0.0.1:") and "/results/" in urllib.parse.unquote(location)
    fresh = urllib.request.Request(location)  # a new request: no Authorization header, nothing from the API
    assert fresh.get_header("Authorization") is None
    with urllib.request.urlopen(fresh, timeout=HTTP_TIMEOUT_S) as rows:
        assert rows.status == 200 and json.loads(rows.read()) == rows_of(OFFLOADED)
    inline = request(served.base_url, f"/jobs/{FLIGHTS}/results/{served.slots[0].iso}?generation=1")
    assert inline.status == 200 and inline.json()["rows"] == rows_of(0)


@pytest.mark.slow
def test_errors_name_the_job_or_the_parameter(served: Seeded) -> None:
    unknown = request(served.base_url, "/jobs/no-such-job/results/latest")
    assert unknown.status == 404 and "no-such-job" in unknown.json()["detail"]
    bad_slot = request(served.base_url, f"/jobs/{FLIGHTS}/results/not-a-slot")
    assert bad_slot.status == 400 and bad_slot.json()["parameter"] == "slot"
    for query in ("limit=0", "limit=many"):
        bad_limit = request(served.base_url, f"/jobs/{FLIGHTS}/slots?{query}")
        assert bad_limit.status == 400 and bad_limit.json()["parameter"] == "limit", bad_limit.body
    failed = request(served.base_url, f"/jobs/{FLIGHTS}/results/{served.slots[FAILED].iso}")
    assert failed.status == 404 and served.slots[FAILED].iso in failed.json()["detail"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "status"),
    [
        (b"/jobs/%00/results/latest", 400),
        (b"/jobs/flights-dashboard/results/%00%1b%7f%c2%85", 400),
        (b"/%0d%0aX-Injected:%201", 404),
        (b"/jobs/\x00/results/latest", 400),
        (b"/jobs/flights-dashboard/slots?limit=%00", 400),
        (b"/jobs/flights-dashboard/slots?next_token=%1b%00", 400),
        (b"/jobs/%00/widget", 404),
        (b"/widget/%00%1b", 404),
    ],
)
def test_the_read_apis_errors_never_echo_control_characters(served: Seeded, target: bytes, status: int) -> None:
    lines, body = raw_exchange(served.base_url, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert lines[0].startswith(b"HTTP/1.1 %d " % status), lines[0]
    assert_no_control_characters(lines, body)


@pytest.mark.slow
def test_the_slot_history_pages_newest_first_until_next_token_is_absent(served: Seeded) -> None:
    seen: list[tuple[str, str]] = []
    pages = 0
    query = "limit=2"
    for _ in range(10):
        page = request(served.base_url, f"/jobs/{FLIGHTS}/slots?{query}")
        assert page.status == 200, page.body
        body = page.json()
        pages += 1
        seen += [(entry["slot"], entry["status"]) for entry in body["slots"]]
        if not body.get("next_token"):
            break
        query = urllib.parse.urlencode({"limit": 2, "next_token": body["next_token"]})
    else:
        pytest.fail("next_token never went away")
    assert pages >= 2
    expected = [(slot.iso, "FAILED" if i == FAILED else "SUCCEEDED") for i, slot in enumerate(served.slots)]
    assert seen == expected[::-1]  # every record once, newest first


@pytest.mark.slow
def test_the_widget_page_and_the_openapi_document(served: Seeded) -> None:
    widget = request(served.base_url, f"/jobs/{FLIGHTS}/widget")
    assert widget.status == 200 and widget.headers["Content-Type"] == "text/html; charset=utf-8"
    text = widget.body.decode("utf-8")
    assert text.startswith("<!doctype html>") and "<table>" in text and served.slots[-1].iso in text
    assert "quoted, &quot;text&quot;" in text  # escaped by the widget
    assert request(served.base_url, "/jobs/no-such-job/widget").status == 404
    spec = request(served.base_url, "/openapi.json")
    assert spec.status == 200 and "/jobs/{job}/slots" in spec.json()["paths"]
    index = request(served.base_url, "/")
    assert index.status == 200 and f"/jobs/{CARRIER}/widget".encode() in index.body


@pytest.mark.slow
def test_the_overview_page_lists_every_job_of_the_catalog_with_its_status(served: Seeded) -> None:
    index = request(served.base_url, "/")
    assert index.status == 200 and b"href='/widget/overview'" in index.body
    page = request(served.base_url, "/widget/overview")
    assert page.status == 200 and page.headers["Content-Type"] == "text/html; charset=utf-8"
    text = page.body.decode("utf-8")
    assert text.startswith("<!doctype html>") and "<table>" in text
    rows = {match.group(1): match.group(0) for match in re.finditer(r"<tr><td><b>([^<]+)</b></td>.*?</tr>", text)}
    assert sorted(rows) == sorted(repo_catalog()["jobs"]) == [CARRIER, FLIGHTS]  # every job of the catalog
    # each row: the status of the job's last slot (the newest its lock item knows), and that slot
    assert f"<b>SUCCEEDED</b> {served.slots[-1].iso}" in rows[FLIGHTS]
    assert f"<b>SUCCEEDED</b> {served.slots[0].iso}" in rows[CARRIER]
    assert "<b>2</b> jobs" in text
    head = request(served.base_url, "/widget/overview", method="HEAD")
    assert head.status == 200 and head.body == b"" and int(head.headers["Content-Length"]) > 0
    post = request(served.base_url, "/widget/overview", method="POST")
    assert post.status == 405 and post.headers["Allow"] == "GET, HEAD"
    assert post.headers["Content-Type"] == "application/problem+json"
    assert post.json()["code"] == "method_not_allowed"
    assert request(served.base_url, "/widget/no-such-view").status == 404
