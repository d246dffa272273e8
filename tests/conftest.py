"""Shared pytest fixtures. Keep this file generic: fake AWS credentials, the atomic moto server; the DynamoDB
backends (DynamoDB Local, moto, ``backend``, ``ddb``, tables) are the plugin ``tests/backends.py``; the order
pytest-xdist hands modules to its workers (the longest first) is the plugin ``tests/scheduling.py``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local.emulators.atomic_moto import AtomicMotoServer

pytest_plugins = ["tests.backends", "tests.scheduling"]

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
