"""``python -m tools.results``: both modes against one deployment seeded by the real writers.

- **direct**: in-process moto; results committed by ``athena_refresh.results.ResultsStore.prepare`` inside the real
  ``slotlock`` commit (one slot offloaded to S3 with a small ``max_inline_bytes``), so the history is the protocol's;
  the CLI reads it through ``results_api.reader.ResultsReader`` with ``--lock-table``/``--results-table``, the jobs
  from the job registry in moto's SSM (the two samples).
- **--api**: real loopback HTTP. One ``ThreadingHTTPServer`` plays API Gateway: it checks each request's SigV4
  signature (recomputed with botocore from the signed headers), then answers through
  ``results_api.api.create_app(reader).resolve`` with a payload-2.0 event; a second one plays S3, serving the
  offloaded rows at the presigned URL the API redirects to. The redirect must arrive there without any
  ``Authorization`` (or other AWS) header.
"""

from __future__ import annotations

import csv
import hmac
import io
import json
import re
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import moto
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.stub import Stubber

from athena_refresh.engine import Column, QueryResult, QueryStatistics
from athena_refresh.freshness import JobState
from athena_refresh.results import ResultsStore, create_results_table
from results_api.api import create_app
from results_api.reader import ResultsReader
from slotlock import Lease, Slot, SlotLock, create_lock_table, request_generation
from stacks.runtime_asset import catalog_queries
from tests.job_registry import entry, put_raw, register
from tests.sample_jobs import load_fixture_jobs
from tools.results.cli import main
from tools.results.client import region_from_url

JOB = "flights-dashboard"
LOCKS, RESULTS, BUCKET = "locks", "results", "bucket-one"
REGION = "us-east-1"
S0, S1, S2 = (Slot.parse(f"2026-11-22T0{h}:{m}:00Z") for h, m in (("0", "00"), ("0", "30"), ("1", "00")))
OPERATOR = "arn:aws:iam::123456789012:user/op"
COLUMNS = (Column("origin", "varchar"), Column("flights", "bigint"), Column("share", "double"))
#: The inline slot S0 g1: markup, quotes, commas, a newline, NULL, an ANSI escape.
TRICKY_ROWS = [
    {"origin": "<script>", "flights": 3, "share": 0.25},
    {"origin": 'a,"b"\nc', "flights": None, "share": 1.5},
    {"origin": "[bold]x[/bold]", "flights": 12345, "share": None},
    {"origin": "\x1b[31mred", "flights": 7, "share": 2.0},
]
#: The offloaded slot S1 (LATEST): 50 rows, far above max_inline_bytes.
BIG_ROWS = [{"origin": f"X{i}", "flights": i, "share": i / 4} for i in range(50)]
RERUN_ROWS = [{"origin": "rerun", "flights": 1, "share": 0.5}]


@dataclass
class Clock:
    now: int

    def __call__(self) -> int:
        return self.now


@dataclass
class World:
    session: boto3.session.Session
    ddb: Any
    s3: Any
    tokens: dict[str, int] = field(default_factory=dict)

    def reader(self, **s3_config: Any) -> ResultsReader:
        s3 = self.s3
        if s3_config:
            s3 = self.session.client(
                "s3", config=Config(signature_version="s3v4", s3={"addressing_style": "path"}), **s3_config
            )
        catalog = catalog_queries(load_fixture_jobs())  # the shared stack's combined catalog
        return ResultsReader(LOCKS, RESULTS, catalog, dynamodb_client=self.ddb, s3_client=s3)


def _commit(
    lock: SlotLock, store: ResultsStore, clock: Clock, slot: Slot, owner: str, rows: list[dict[str, Any]], **kw: Any
) -> int:
    lease = lock.try_acquire(slot, owner)
    assert isinstance(lease, Lease), lease
    prepared = store.prepare(
        job_name=JOB,
        slot_iso=slot.iso,
        fencing_token=lease.fencing_token,
        query_execution_id=f"qe-{owner}",
        statistics=QueryStatistics(1024, 20, 3, 40),
        result=QueryResult(columns=COLUMNS, rows=rows),
        committed_at_ms=clock.now,
        window=(slot.iso, slot.iso),
        **kw,
    )
    lock.commit(lease, writes=prepared.writes, summary=prepared.summary)
    return lease.fencing_token


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    """S0 g1 SUCCEEDED (inline, tricky rows), S1 g1 SUCCEEDED (offloaded: LATEST), S2 g1 FAILED, S0 g2 SUCCEEDED
    (a re-run, inline; LATEST stays on S1), all through the real lock on a fake clock."""
    with moto.mock_aws():
        session = boto3.session.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            aws_session_token="testing",
            region_name=REGION,
        )
        ddb, s3 = session.client("dynamodb"), session.client("s3")
        create_lock_table(ddb, LOCKS, enable_ttl=False)
        create_results_table(ddb, RESULTS)
        s3.create_bucket(Bucket=BUCKET)
        register(session.client("ssm"), entry(JOB), entry("carrier-on-time"))  # /ScheduledAthenaRefresh/jobs/
        clock = Clock(S0.epoch_ms + 2_000)
        lock = SlotLock(LOCKS, JOB, client=ddb, clock_ms=clock, lease_duration_s=30)
        store = ResultsStore(RESULTS, bucket_name=BUCKET, dynamodb_client=ddb, s3_client=s3, max_inline_bytes=400)
        tokens = {"S0": _commit(lock, store, clock, S0, "A0", TRICKY_ROWS)}
        clock.now = S1.epoch_ms + 2_000
        tokens["S1"] = _commit(lock, store, clock, S1, "A1", BIG_ROWS)
        clock.now = S2.epoch_ms + 2_000
        lease = lock.try_acquire(S2, "A2")
        assert isinstance(lease, Lease)
        lock.commit(lease, outcome="failed", error={"type": "QueryFailed", "message": "boom"})
        clock.now += 60_000
        request_generation(lock.context, S0, run_id="op-1", kind="rerun", requested_by=OPERATOR, reason="source fixed")
        tokens["S0g2"] = _commit(
            lock.for_generation(2), store, clock, S0, "M", RERUN_ROWS, generation=2, move_latest=False
        )
        yield World(session, ddb, s3, tokens)


def cli(world: World, *argv: str, session: Any = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err, session=session or world.session)
    return status, out.getvalue(), err.getvalue()


def direct(world: World, *argv: str) -> tuple[int, str, str]:
    return cli(world, *argv, "--lock-table", LOCKS, "--results-table", RESULTS)


def parse_csv(text: str) -> list[list[str]]:
    assert "\r\n" in text  # RFC 4180 line ends
    return list(csv.reader(io.StringIO(text, newline="")))


# --- direct mode -------------------------------------------------------------------------------------------


def test_latest_reads_the_offloaded_rows_from_s3_in_every_format(world: World) -> None:
    status, out, err = direct(world, "latest", "--job", JOB, "--format", "json")
    assert (status, err) == (0, "")
    document = json.loads(out)
    assert (document["job"], document["slot"], document["generation"]) == (JOB, S1.iso, 1)
    assert document["fencing_token"] == world.tokens["S1"] and document["query_execution_id"] == "qe-A1"
    assert document["rows"] == BIG_ROWS and document["row_count"] == 50
    assert document["columns"] == [{"name": c.name, "type": c.type} for c in COLUMNS]

    status, out, _ = direct(world, "latest", "--job", JOB, "--format", "csv")
    table = parse_csv(out)
    assert status == 0 and table[0] == ["origin", "flights", "share"] and len(table) == 51
    assert table[50] == ["X49", "49", "12.25"]

    status, out, _ = direct(world, "latest", "--job", JOB)  # table, the default
    assert status == 0
    header = out.splitlines()[0]
    for text in (JOB, S1.iso, "generation 1", f"fencing token {world.tokens['S1']}", "qe-A1", "committed 2026-11-22"):
        assert text in header
    assert "ago" in header and "50 row(s)" in out
    # text left, numbers right: "X7" hugs the left border, 7 and 1.75 the right one
    assert re.search(r"│ X7 +│ +7 │ +1\.75 │", out), out


def test_a_slot_reads_its_newest_generation_or_the_one_named(world: World) -> None:
    status, out, _ = direct(world, "slot", "--job", JOB, "--slot", S0.iso, "--format", "json")
    document = json.loads(out)
    assert status == 0 and (document["generation"], document["rows"]) == (2, RERUN_ROWS)
    assert document["fencing_token"] == world.tokens["S0g2"]

    status, out, _ = direct(world, "slot", "--job", JOB, "--slot", S0.iso, "--generation", "1", "--format", "csv")
    assert status == 0
    assert parse_csv(out) == [
        ["origin", "flights", "share"],
        ["<script>", "3", "0.25"],
        ['a,"b"\nc', "", "1.5"],
        ["[bold]x[/bold]", "12345", ""],
        ["\x1b[31mred", "7", "2.0"],
    ]


def test_the_table_shows_data_as_text_never_as_markup_or_terminal_control(world: World) -> None:
    status, out, _ = direct(world, "slot", "--job", JOB, "--slot", "2026-11-22T00:00:00Z", "--generation", "1")
    assert status == 0
    assert "[bold]x[/bold]" in out and "<script>" in out and "NULL" in out
    assert "\x1b" not in out and "\\x1b[31mred" in out


def test_history_pages_through_every_generation_newest_first(world: World) -> None:
    expected = [(S2.iso, 1, "FAILED"), (S1.iso, 1, "SUCCEEDED"), (S0.iso, 2, "SUCCEEDED"), (S0.iso, 1, "SUCCEEDED")]

    status, out, err = direct(world, "history", "--job", JOB, "--format", "json")
    page = json.loads(out)
    assert status == 0 and err == ""
    assert [(e["slot"], e["generation"], e["status"]) for e in page["slots"]] == expected
    assert page["next_token"] is None and page["limit"] == 50
    rerun = page["slots"][2]
    assert (rerun["run_kind"], rerun["requested_by"], rerun["request_reason"]) == ("rerun", OPERATOR, "source fixed")

    # one page of 1: a token to continue with, said on stderr
    status, out, err = direct(world, "history", "--job", JOB, "--limit", "1", "--format", "json")
    first = json.loads(out)
    assert len(first["slots"]) == 1 and first["next_token"] and f"--next-token {first['next_token']}" in err
    status, out, _ = direct(
        world,
        "history",
        "--job",
        JOB,
        "--limit",
        "1",
        "--pages",
        "2",
        "--next-token",
        first["next_token"],
        "--format",
        "json",
    )
    assert [e["slot"] for e in json.loads(out)["slots"]] == [S1.iso, S0.iso]

    status, out, err = direct(world, "history", "--job", JOB, "--limit", "1", "--all", "--format", "csv")
    table = parse_csv(out)
    assert status == 0 and err == "" and table[0][:3] == ["slot", "generation", "status"]
    assert [tuple(row[:3]) for row in table[1:]] == [(s, str(g), st) for s, g, st in expected]

    status, out, _ = direct(world, "history", "--job", JOB, "--status", "FAILED")
    assert status == 0 and "FAILED" in out and "SUCCEEDED" not in out and "A2" in out


def test_history_all_stops_at_the_page_cap_and_says_how_to_continue(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tools.results.cli.MAX_PAGES", 2)
    status, out, err = direct(world, "history", "--job", JOB, "--limit", "1", "--all", "--format", "json")
    assert status == 0 and len(json.loads(out)["slots"]) == 2
    assert "stopped after 2 pages (the --all cap); continue with --next-token" in err


def test_jobs_lists_every_job_of_the_registry(world: World) -> None:  # here the two samples
    status, out, _ = direct(world, "jobs", "--format", "json")
    jobs = {job["job"]: job for job in json.loads(out)["jobs"]}
    assert status == 0 and set(jobs) == {"flights-dashboard", "carrier-on-time"}
    assert jobs[JOB]["latest"]["slot"] == S1.iso and jobs[JOB]["lease"]["state"] == "free"
    assert jobs["carrier-on-time"]["latest"]["slot"] is None
    assert (jobs[JOB]["freshness"]["slot"], jobs["carrier-on-time"]["freshness"]["slot"]) == (S1.iso, None)
    assert {job["freshness"]["state"] for job in jobs.values()} <= set(JobState.ALL)

    status, out, _ = direct(world, "jobs", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out, newline="")))
    assert status == 0 and {r["job"]: r["latest_slot"] for r in rows} == {JOB: S1.iso, "carrier-on-time": ""}
    assert {r["freshness_state"] for r in rows} <= set(JobState.ALL) and {r["late"] for r in rows} <= {"true", "false"}

    status, out, _ = direct(world, "jobs")
    assert status == 0 and "carrier-on-time" in out and "cron(0/30 * * * ? *)" in out
    # each job's freshness, as latest says it (the real clock: the state is the watchdog's at this moment)
    assert "freshness" in out.splitlines()[2] and f"{jobs[JOB]['freshness']['state'].replace('_', ' ')}, next " in out

    # the command's own session (the environment's credentials and region: moto's here)
    out_buffer, err_buffer = io.StringIO(), io.StringIO()
    argv = ["jobs", "--lock-table", LOCKS, "--results-table", RESULTS, "--format", "json"]
    assert main(argv, stdout=out_buffer, stderr=err_buffer) == 0, err_buffer.getvalue()
    assert json.loads(out_buffer.getvalue())["jobs"][1]["job"] == JOB


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["latest", "--job", "nope"], "error: no job 'nope'; jobs: carrier-on-time, flights-dashboard"),
        (["latest", "--job", "carrier-on-time"], "error: job 'carrier-on-time' has no committed result yet"),
        (["slot", "--job", JOB, "--slot", "yesterday"], "error: slot: "),
        (["slot", "--job", JOB, "--slot", S2.iso], f"error: job '{JOB}' has no committed result for slot {S2.iso}"),
        (["history", "--job", JOB, "--next-token", "forged"], "error: next_token: "),
    ],
)
def test_a_refused_read_is_one_error_line_and_exit_1(world: World, argv: list[str], message: str) -> None:
    status, out, err = direct(world, *argv)
    assert (status, out) == (1, "")
    assert err.startswith(message) and err.count("\n") == 1


def test_a_backend_failure_exits_3(world: World) -> None:
    status, out, err = cli(world, "latest", "--job", JOB, "--lock-table", LOCKS, "--results-table", "no-such-table")
    assert (status, out) == (3, "") and err.startswith("error: could not read the latest result")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["latest"], "the following arguments are required: -s/--select/--job"),
        (["latest", "--job", JOB, "--format", "xml"], "argument --format: invalid choice: 'xml'"),
        (["history", "--job", JOB, "--limit", "0"], "argument --limit: 0 must be at least 1"),
        (["history", "--job", JOB, "--pages", "2", "--all"], "not allowed with argument"),
        (["nothing"], "invalid choice: 'nothing'"),
    ],
)
def test_bad_usage_exits_2_with_argparse_s_message(
    world: World, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status, out, _ = cli(world, *argv)
    assert (status, out) == (2, "")
    assert message in capsys.readouterr().err


def test_every_command_has_help_with_examples(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("jobs", "latest", "slot", "history"):
        assert cli(world, command, "--help")[0] == 0
        text = capsys.readouterr().out
        assert "examples:" in text and f"python -m tools.results {command}" in text and "exit status" in text


class StackSession:
    """The world's session, except that CloudFormation answers from ``outputs`` (Stubber)."""

    def __init__(self, world: World, outputs: dict[str, str]) -> None:
        self.world, self.outputs = world, outputs
        self.region_name = REGION

    def client(self, name: str, **kwargs: Any) -> Any:
        client = self.world.session.client(name, **kwargs)
        if name == "cloudformation":
            stubber = Stubber(client)
            stack = {"StackName": "S", "CreationTime": "2026-11-22T00:00:00Z", "StackStatus": "CREATE_COMPLETE"}
            stack["Outputs"] = [{"OutputKey": k, "OutputValue": v} for k, v in self.outputs.items()]
            stubber.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": "S"})
            stubber.activate()
        return client

    def get_credentials(self) -> Any:
        return self.world.session.get_credentials()


def test_the_deployment_comes_from_the_stack_outputs_as_tools_ops_reads_them(world: World) -> None:
    # GIVEN a shared stack S whose registry (its JobRegistryPath output) holds one job
    register(world.session.client("ssm"), entry(JOB), path="/S/jobs/")
    outputs = {"LockTableName": LOCKS, "ResultsTableName": RESULTS, "JobRegistryPath": "/S/jobs/"}
    status, out, err = cli(world, "--stack", "S", "jobs", "--format", "json", session=StackSession(world, outputs))
    assert (status, err) == (0, "")
    assert [job["job"] for job in json.loads(out)["jobs"]] == [JOB]  # the registry's jobs only

    status, out, err = cli(world, "jobs", "--stack", "S", session=StackSession(world, {"JobRegistryPath": "/S/jobs/"}))
    assert status == 1 and "stack S has no LockTableName/ResultsTableName output" in err

    without_registry = {"LockTableName": LOCKS, "ResultsTableName": RESULTS}
    status, out, err = cli(world, "jobs", "--stack", "S", session=StackSession(world, without_registry))
    assert (status, out) == (1, "") and err.startswith("error: stack S has no JobRegistryPath output")

    status, _, err = cli(world, "jobs", "--api", "--stack", "S", session=StackSession(world, outputs))
    assert status == 1 and "stack S has no ReadApiUrl output" in err


def test_a_malformed_registry_entry_is_one_error_line_and_exit_1(world: World) -> None:
    ssm = world.session.client("ssm")
    put_raw(ssm, "broken", "{}", path="/Broken/jobs/")
    status, out, err = cli(world, "jobs", "--stack", "Broken", "--lock-table", LOCKS, "--results-table", RESULTS)
    assert (status, out) == (1, "")
    assert err == "error: job registry parameter /Broken/jobs/broken/00: format: expected 1, got None" + (
        " (written by another version of this project: use the tools of the version that deployed it)\n"
    )


# --- --api: real loopback HTTP -----------------------------------------------------------------------------

_AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/execute-api/aws4_request,"
    r" SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<signature>[0-9a-f]{64})"
)


def sigv4_valid(path: str, headers: dict[str, str]) -> bool:
    """Whether ``headers`` carry a valid SigV4 signature of ``GET path`` for the test credentials: recomputed
    by botocore from the signed headers as received, at the request's own X-Amz-Date."""
    match = _AUTH.fullmatch(headers.get("authorization", ""))
    if not match or "x-amz-date" not in headers:
        return False
    signed = match["signed"].split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        return False
    request = AWSRequest(method="GET", url=f"http://{headers['host']}{path}", headers={h: headers[h] for h in signed})
    request.context["timestamp"] = headers["x-amz-date"]
    signer = SigV4Auth(Credentials("testing", "testing", "testing"), "execute-api", match["region"])
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    return hmac.compare_digest(expected, match["signature"])


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    signed: bool = False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    requests: list[Recorded]
    app: Any
    canned: tuple[int, str] | None
    s3: Any


class ApiHandler(BaseHTTPRequestHandler):
    """API Gateway: SigV4 checked (403 otherwise), then the real resolver on a payload-2.0 event."""

    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        record = Recorded(self.path, headers, sigv4_valid(self.path, headers))
        self.server.requests.append(record)
        if not record.signed:
            return self.reply(403, {"Content-Type": "application/json"}, '{"message":"Forbidden"}')
        if self.server.canned is not None:
            status, body = self.server.canned
            return self.reply(status, {"Content-Type": "application/problem+json"}, body)
        wire_path, _, query = self.path.partition("?")
        raw_path = urllib.parse.unquote(wire_path)  # an HTTP API delivers rawPath percent-decoded
        event = {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": raw_path,
            "rawQueryString": query,
            "headers": headers,
            "queryStringParameters": dict(urllib.parse.parse_qsl(query)) or None,
            "requestContext": {
                "http": {"method": "GET", "path": raw_path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
                "requestId": "r",
                "routeKey": "$default",
                "stage": "$default",
                "accountId": "123456789012",
                "apiId": "abc123",
                "domainName": headers.get("host", ""),
                "domainPrefix": "abc123",
                "time": "",
                "timeEpoch": 0,
            },
            "isBase64Encoded": False,
        }
        response = self.server.app.resolve(event, None)
        self.reply(response["statusCode"], response.get("headers") or {}, response.get("body") or "")

    def reply(self, status: int, headers: dict[str, str], body: str) -> None:
        data = body.encode()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class S3Handler(BaseHTTPRequestHandler):
    """S3 at a presigned URL (path style): serves the object from moto; records the headers it was sent."""

    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.requests.append(Recorded(self.path, headers))
        path, _, query = self.path.partition("?")
        bucket, _, key = urllib.parse.unquote(path).lstrip("/").partition("/")
        assert "X-Amz-Signature=" in query  # presigned
        body = self.server.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(handler: type[BaseHTTPRequestHandler], **attributes: Any) -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), handler)
    server.requests, server.canned = [], None
    for name, value in attributes.items():
        setattr(server, name, value)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def url_of(server: _Server) -> str:
    host, port = server.server_address[:2]
    return f"http://{host}:{port}/"


@pytest.fixture
def s3_server(world: World) -> Iterator[_Server]:
    yield from serve(S3Handler, s3=world.s3)


@pytest.fixture
def api_server(world: World, s3_server: _Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Server]:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    # the API's read role presigns against the fake S3 (presigning is local: no request)
    reader = world.reader(endpoint_url=url_of(s3_server).rstrip("/"))
    reader.store = world.reader().store  # what the API itself reads from S3 (rows asked as CSV) comes from moto
    yield from serve(ApiHandler, app=create_app(reader))


def api(world: World, server: _Server, *argv: str) -> tuple[int, str, str]:
    return cli(world, *argv, "--api", url_of(server))


def test_an_offloaded_result_follows_the_redirect_without_the_signature(
    world: World, api_server: _Server, s3_server: _Server
) -> None:
    status, out, err = api(world, api_server, "latest", "--job", JOB, "--format", "json")
    assert (status, err) == (0, "")

    # the API request was signed (valid SigV4 for execute-api in the session's region, with the session token)
    [request] = api_server.requests
    assert request.signed and request.path == f"/jobs/{JOB}/results/latest"
    assert f"/{REGION}/execute-api/aws4_request" in request.headers["authorization"]
    assert request.headers["x-amz-date"] and request.headers["x-amz-security-token"] == "testing"
    # the presigned URL was fetched once, with no Authorization and no AWS header of ours
    [fetch] = s3_server.requests
    assert "authorization" not in fetch.headers
    assert not [name for name in fetch.headers if name.startswith("x-amz")]
    assert fetch.path.startswith(f"/{BUCKET}/results/{JOB}/") and "X-Amz-Signature=" in fetch.path

    # the rows from S3, the metadata from the 302's headers
    document = json.loads(out)
    assert document["rows"] == BIG_ROWS and document["row_count"] == 50
    assert (document["job"], document["slot"], document["generation"]) == (JOB, S1.iso, 1)
    assert (document["fencing_token"], document["query_execution_id"]) == (world.tokens["S1"], "qe-A1")
    assert [c["name"] for c in document["columns"]] == ["origin", "flights", "share"]

    # CSV: the API answers it itself (issue 34: it redirected to the JSON rows), the same text as the direct
    # mode's; the client fetches nothing from S3
    fetches = len(s3_server.requests)
    status, out, _ = api(world, api_server, "latest", "--job", JOB, "--format", "csv")
    assert status == 0 and out == direct(world, "latest", "--job", JOB, "--format", "csv")[1]
    assert api_server.requests[-1].headers["accept"] == "text/csv" and len(s3_server.requests) == fetches

    # the table: the rows, numbers right-aligned (types inferred from the values)
    status, out, _ = api(world, api_server, "latest", "--job", JOB)
    assert status == 0 and JOB in out.splitlines()[0] and re.search(r"│ X7 +│ +7 │ +1\.75 │", out)


def test_an_inline_result_reads_the_same_through_the_api_as_from_the_tables(world: World, api_server: _Server) -> None:
    for fmt in ("json", "csv"):
        argv = ("slot", "--job", JOB, "--slot", S0.iso, "--generation", "1", "--format", fmt)
        via_api, from_tables = api(world, api_server, *argv), direct(world, *argv)
        assert via_api[0] == from_tables[0] == 0
        assert via_api[1] == from_tables[1]
    assert api_server.requests[-1].headers["accept"] == "text/csv"  # the API's own CSV
    # the slot's colons travel percent-encoded in the signed path
    assert api_server.requests[-1].path == f"/jobs/{JOB}/results/2026-11-22T00%3A00%3A00Z?generation=1"
    assert all(r.signed for r in api_server.requests)


def test_history_and_jobs_through_the_api(world: World, api_server: _Server) -> None:
    argv = ("history", "--job", JOB, "--limit", "1", "--all", "--from", S0.iso)
    via_api = api(world, api_server, *argv, "--format", "json")
    assert via_api == direct(world, *argv, "--format", "json")
    assert len(json.loads(via_api[1])["slots"]) == 4
    assert len(api_server.requests) in (4, 5)  # pages of one (DynamoDB may end with an empty page)
    assert all(r.signed for r in api_server.requests)

    status, out, err = api(
        world, api_server, "history", "--job", JOB, "--limit", "1", "--pages", "2", "--format", "csv"
    )
    table = parse_csv(out)
    assert status == 0 and table[0][0] == "slot" and [r[0] for r in table[1:]] == [S2.iso, S1.iso]  # one header
    assert "--next-token" in err

    status, out, _ = api(world, api_server, "jobs", "--format", "json")
    assert status == 0 and {j["job"] for j in json.loads(out)["jobs"]} == {JOB, "carrier-on-time"}
    status, out, _ = api(world, api_server, "jobs", "--format", "csv")
    assert status == 0 and out == direct(world, "jobs", "--format", "csv")[1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["latest", "--job", "nope"], "error: no job 'nope'; jobs: carrier-on-time, flights-dashboard (HTTP 404)"),
        (["slot", "--job", JOB, "--slot", "yesterday"], "error: slot: "),
        (["history", "--job", JOB, "--from", "2026-13-01T00:00:00Z"], "error: from: "),
    ],
)
def test_a_problem_document_is_one_error_line_and_exit_1(
    world: World, api_server: _Server, argv: list[str], message: str
) -> None:
    status, out, err = api(world, api_server, *argv)
    assert (status, out) == (1, "")
    assert err.startswith(message) and err.count("\n") == 1
    assert "(HTTP 4" in err


def test_a_server_failure_exits_3_and_forbidden_exits_1(world: World, api_server: _Server) -> None:
    api_server.canned = (503, json.dumps({"status": 503, "detail": "DynamoDB failed; retry later"}))
    status, out, err = api(world, api_server, "latest", "--job", JOB)
    assert (status, out, err) == (3, "", "error: DynamoDB failed; retry later (HTTP 503)\n")
    api_server.canned = None
    # a signature by the wrong secret: API Gateway's own 403 {"message"}
    stranger = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="wrong", region_name=REGION)
    status, out, err = cli(world, "latest", "--job", JOB, "--api", url_of(api_server), session=stranger)
    assert not api_server.requests[-1].signed
    assert (status, out, err) == (1, "", "error: Forbidden (HTTP 403)\n")


def test_the_signing_region_is_the_flag_else_the_execute_api_host_s_else_the_session_s() -> None:
    assert region_from_url("https://abc123.execute-api.eu-west-1.amazonaws.com/") == "eu-west-1"
    assert region_from_url("https://abc123.execute-api.cn-north-1.amazonaws.com.cn/prod") == "cn-north-1"
    assert region_from_url("https://results.example.com/") is None


def test_an_unreachable_api_exits_3(world: World) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    status, out, err = cli(world, "latest", "--job", JOB, "--api", f"http://127.0.0.1:{port}/")
    assert (status, out) == (3, "") and err.startswith(f"error: cannot reach 127.0.0.1:{port}")


def test_the_api_url_and_its_region_come_from_the_stack(world: World, api_server: _Server) -> None:
    outputs = {"LockTableName": LOCKS, "ResultsTableName": RESULTS, "ReadApiUrl": url_of(api_server)}
    status, out, err = cli(
        world, "latest", "--job", JOB, "--api", "--stack", "S", "--format", "json", session=StackSession(world, outputs)
    )
    assert (status, err) == (0, "") and json.loads(out)["rows"] == BIG_ROWS
    assert api_server.requests[-1].signed
