"""The serialized moto server: exactly one winner per conditional-write race, across processes and threads.

Every wait in this module is bounded: barrier waits, queue reads, joins, server start and stop.
"""

from __future__ import annotations

import collections
import json
import multiprocessing
import os
import socket
import threading
import time
import urllib.request
import uuid
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from local.emulators.atomic_moto import AtomicMotoServer, start_server_process, stop_server_process
from local.emulators.processes import gather

pytestmark = pytest.mark.slow

RACERS = 8
ROUNDS = 100
BARRIER_TIMEOUT_S = 60.0  # the first wait also covers the spawn start-up of every racer
RACE_TIMEOUT_S = 120.0
REGION = "us-east-1"


# ---------------------------------------------------------------------------------------------------
# helpers (module level: spawned processes import them from here)
# ---------------------------------------------------------------------------------------------------


def make_client(service: str, endpoint_url: str) -> Any:
    session = boto3.session.Session(
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        aws_session_token="testing",
        region_name=REGION,
    )
    config = Config(retries={"mode": "standard"}, connect_timeout=2, read_timeout=10)
    return session.client(service, endpoint_url=endpoint_url, config=config)


def create_race_table(client: Any) -> str:
    name = f"race-{uuid.uuid4().hex[:12]}"
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
    return name


def try_win(client: Any, table: str, round_no: int, me: str) -> bool:
    """One racer's single conditional write for `round_no`. True if this racer's write was applied."""
    try:
        client.update_item(
            TableName=table,
            Key={"pk": {"S": f"round#{round_no}"}},
            UpdateExpression="SET #o = :me ADD #t :one",
            ConditionExpression="attribute_not_exists(#o)",
            ExpressionAttributeNames={"#o": "owner", "#t": "tally"},
            ExpressionAttributeValues={":me": {"S": me}, ":one": {"N": "1"}},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        return True
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
        # A timed-out first attempt that was applied, then retried by botocore, fails its own condition:
        # the old item then names us. (Never seen on loopback; handled so the test cannot flake on it.)
        return exc.response.get("Item", {}).get("owner", {}).get("S") == me


def race_process(endpoint_url: str, table: str, me: str, rounds: int, barrier: Any, results: Any) -> None:
    """Body of one spawned racer: a client of its own, one conditional write per round, in lock step."""
    won: list[int] = []
    try:
        client = make_client("dynamodb", endpoint_url)
        for round_no in range(rounds):
            barrier.wait(BARRIER_TIMEOUT_S)
            if try_win(client, table, round_no, me):
                won.append(round_no)
        results.put((me, won, None))
    except BaseException as exc:  # noqa: BLE001 - report instead of dying silently; free the others from the barrier
        barrier.abort()
        results.put((me, won, repr(exc)))


def race_threads(endpoint_url: str, table: str, racers: int, rounds: int) -> dict[str, list[int]]:
    barrier = threading.Barrier(racers)
    claims: dict[str, list[int]] = {}
    errors: list[str] = []

    def run(me: str) -> None:
        won: list[int] = []
        try:
            client = make_client("dynamodb", endpoint_url)
            for round_no in range(rounds):
                barrier.wait(BARRIER_TIMEOUT_S)
                if try_win(client, table, round_no, me):
                    won.append(round_no)
        except BaseException as exc:  # noqa: BLE001 - a thread reports any failure, then frees the barrier
            barrier.abort()
            errors.append(f"{me}: {exc!r}")
        claims[me] = won

    threads = [threading.Thread(target=run, args=(f"thread-{i}",), daemon=True) for i in range(racers)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + RACE_TIMEOUT_S
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not [t.name for t in threads if t.is_alive()], "racer threads still running after the timeout"
    assert not errors, errors
    return claims


def rounds_without_single_winner(client: Any, table: str, claims: dict[str, list[int]], rounds: int) -> dict:
    """Every round whose outcome is not "exactly one racer won, and its write was applied exactly once"."""
    winners: dict[int, list[str]] = collections.defaultdict(list)
    for me, won in claims.items():
        for round_no in won:
            winners[round_no].append(me)
    items = {}
    for page in client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        for item in page["Items"]:
            items[item["pk"]["S"]] = (item.get("owner", {}).get("S"), int(item.get("tally", {}).get("N", "0")))
    bad = {}
    for round_no in range(rounds):
        stored = items.get(f"round#{round_no}")
        claimed = sorted(winners.get(round_no, []))
        if len(claimed) != 1 or stored != (claimed[0], 1):
            bad[round_no] = {"claimed_by": claimed, "stored_owner_and_tally": stored}
    return bad


def child_processes_running(module: str = "local.emulators.atomic_moto") -> list[int]:
    """PIDs of live (non-zombie) children of this process whose command line mentions `module` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        state, ppid = fields[0], int(fields[1])
        if ppid == os.getpid() and state != "Z" and module in cmdline:
            found.append(int(entry))
    return found


def port_accepts(endpoint_url: str) -> bool:
    host, port = endpoint_url.removeprefix("http://").split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The serialized server as a separate OS process, as the local demo runs it."""
    log = tmp_path_factory.mktemp("atomic-moto") / "server.log"
    proc, endpoint_url = start_server_process(timeout_s=30, log_path=log)
    try:
        yield endpoint_url
    finally:
        assert stop_server_process(proc) == 0, log.read_text(errors="replace")[-2000:]


# ---------------------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------------------


def test_one_winner_per_round_across_processes(server_process: str) -> None:
    # GIVEN one race table on the server process, and 8 spawned racer processes in lock step
    client = make_client("dynamodb", server_process)
    table = create_race_table(client)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(RACERS)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=race_process, args=(server_process, table, f"proc-{i}", ROUNDS, barrier, results))
        for i in range(RACERS)
    ]
    # WHEN every racer sends one conditional UpdateItem per round, 100 rounds
    claims: dict[str, list[int]] = {}
    errors: list[str] = []
    for me, won, error in gather(procs, results, RACE_TIMEOUT_S):
        claims[me] = won
        if error:
            errors.append(f"{me}: {error}")
    # THEN each round has exactly one winner, whose write was applied exactly once
    assert not errors, errors
    assert [p.exitcode for p in procs] == [0] * RACERS
    assert rounds_without_single_winner(client, table, claims, ROUNDS) == {}


def test_one_winner_per_round_across_threads(atomic_moto_endpoint: str) -> None:
    # GIVEN the in-process serialized server and 8 racer threads, each with its own client
    client = make_client("dynamodb", atomic_moto_endpoint)
    table = create_race_table(client)
    # WHEN they race 100 rounds
    claims = race_threads(atomic_moto_endpoint, table, RACERS, ROUNDS)
    # THEN each round has exactly one winner, applied exactly once
    assert rounds_without_single_winner(client, table, claims, ROUNDS) == {}


@pytest.fixture
def widened_race_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sleep 5 ms inside moto's UpdateItem, between reading the item and checking the condition.

    On this 2-core machine the natural window is small: stock moto_server let two racers win 13 of 300
    rounds with 8 spawned processes, and 0 of 140 rounds with 8 threads. Widened, it shows in about 18 of
    20 rounds, so the control below reliably tells a serialized server from a plain one.
    """
    import moto.dynamodb.models as ddb_models

    parse = ddb_models.create_condition_expression_parser

    def slow_parse(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.005)
        return parse(*args, **kwargs)

    monkeypatch.setattr(ddb_models, "create_condition_expression_parser", slow_parse)


@pytest.mark.usefixtures("widened_race_window")
def test_race_test_has_teeth_stock_server_fails_serialized_server_holds(atomic_moto_endpoint: str) -> None:
    from moto.server import ThreadedMotoServer

    rounds = 20
    # Negative control: moto's own threaded server (in-process, so the widened window applies to it too)
    stock = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    stock.start()
    try:
        host, port = stock.get_host_and_port()
        stock_endpoint = f"http://{host}:{port}"
        client = make_client("dynamodb", stock_endpoint)
        table = create_race_table(client)
        claims = race_threads(stock_endpoint, table, RACERS, rounds)
        assert rounds_without_single_winner(client, table, claims, rounds), "stock moto unexpectedly atomic"
    finally:
        stock.stop()
    # The serialized server, same window: still exactly one winner per round
    client = make_client("dynamodb", atomic_moto_endpoint)
    table = create_race_table(client)
    claims = race_threads(atomic_moto_endpoint, table, RACERS, rounds)
    assert rounds_without_single_winner(client, table, claims, rounds) == {}


def test_s3_dynamodb_and_athena_work_through_it(atomic_moto_endpoint: str) -> None:
    # S3: bucket, put, get (a request body, then a response body, both pass through the lock wrapper)
    s3 = make_client("s3", atomic_moto_endpoint)
    bucket = f"bucket-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    payload = os.urandom(256 * 1024)
    s3.put_object(Bucket=bucket, Key="dir/blob.bin", Body=payload)
    assert s3.get_object(Bucket=bucket, Key="dir/blob.bin")["Body"].read() == payload
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["dir/blob.bin"]

    # DynamoDB: table creation and a round trip
    ddb = make_client("dynamodb", atomic_moto_endpoint)
    table = create_race_table(ddb)
    assert ddb.describe_table(TableName=table)["Table"]["TableStatus"] == "ACTIVE"
    ddb.put_item(TableName=table, Item={"pk": {"S": "k"}, "v": {"N": "7"}})
    assert ddb.get_item(TableName=table, Key={"pk": {"S": "k"}}, ConsistentRead=True)["Item"]["v"] == {"N": "7"}

    # Athena: seed a result through moto's static endpoint (a JSON POST body), then query
    seed = {
        "region": REGION,
        "results": [{"rows": [{"Data": [{"VarCharValue": "n"}]}, {"Data": [{"VarCharValue": "42"}]}]}],
    }
    request = urllib.request.Request(
        f"{atomic_moto_endpoint}/moto-api/static/athena/query-results",
        data=json.dumps(seed).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 201
    athena = make_client("athena", atomic_moto_endpoint)
    qid = athena.start_query_execution(
        QueryString="SELECT 42 AS n", ResultConfiguration={"OutputLocation": f"s3://{bucket}/athena/"}
    )["QueryExecutionId"]
    assert athena.get_query_execution(QueryExecutionId=qid)["QueryExecution"]["Status"]["State"] == "SUCCEEDED"
    rows = athena.get_query_results(QueryExecutionId=qid)["ResultSet"]["Rows"]
    assert [r["Data"][0]["VarCharValue"] for r in rows] == ["n", "42"]


def test_reset_endpoint_clears_state(server_process: str) -> None:
    # Reset is tested on the server PROCESS: in-process, it would wipe moto state shared by the whole session.
    ddb = make_client("dynamodb", server_process)
    table = create_race_table(ddb)
    assert table in ddb.list_tables()["TableNames"]
    request = urllib.request.Request(f"{server_process}/moto-api/reset", data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        assert json.loads(response.read()) == {"status": "ok"}
    assert ddb.list_tables()["TableNames"] == []


def test_server_process_start_stop_leaves_nothing_behind() -> None:
    # GIVEN a started server process that has served a request over a kept-alive connection
    started = time.monotonic()
    others = set(child_processes_running())  # e.g. the module's shared server process
    proc, endpoint_url = start_server_process(timeout_s=30)
    try:
        assert set(child_processes_running()) == others | {proc.pid}
        make_client("dynamodb", endpoint_url).list_tables()
    finally:
        # WHEN it is stopped (SIGTERM, bounded wait, SIGKILL)
        returncode = stop_server_process(proc, timeout_s=5)
    # THEN it exited on its own, cleanly, and left no process or listening port behind
    assert returncode == 0
    assert set(child_processes_running()) == others
    assert not port_accepts(endpoint_url)
    assert stop_server_process(proc) == 0  # idempotent
    assert time.monotonic() - started < 30


def test_in_process_server_stops_promptly_with_open_keepalive_connections() -> None:
    server = AtomicMotoServer().start()
    endpoint_url = server.endpoint_url
    client = make_client("s3", endpoint_url)
    client.list_buckets()  # leaves a pooled keep-alive connection open to a handler thread
    started = time.monotonic()
    server.stop(timeout_s=5)
    assert time.monotonic() - started < 2.0
    assert not server.running
    assert not port_accepts(endpoint_url)
