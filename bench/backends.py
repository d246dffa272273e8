"""The DynamoDB endpoints a benchmark runs on, each a separate local process, one at a time.

- ``dynamodb-local``: AWS's own DynamoDB Local (Java, in memory), :class:`local.emulators.dynamodb_local.DynamoDBLocal`.
  It validates requests like AWS and reports consumed capacity like AWS for single-item requests (its transaction
  figures run above AWS's documented rule: docs/cost.md).
- ``moto-atomic``: moto served one request at a time (:mod:`local.emulators.atomic_moto`), in a child process, so
  conditional writes are atomic. It orders EVERY request after the previous one (AWS only serialises writes
  to one item), and its ConsumedCapacity figures are placeholders, not AWS's.

Every contender of one comparison talks to the same endpoint with the same client configuration
(:data:`CLIENT_CONFIG`), from :func:`make_client`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

REGION = "us-east-1"
# DynamoDB Local keeps data per access key and region: every process must use the same ones.
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "aws_session_token": "testing"}
#: One client configuration for every contender and the floor: botocore's standard retry mode (the one
#: SlotLock and Powertools users get), bounded timeouts, a small connection pool (one Lambda, one caller).
CLIENT_CONFIG = Config(
    region_name=REGION,
    retries={"mode": "standard", "max_attempts": 5},
    connect_timeout=5,
    read_timeout=30,
    max_pool_connections=4,
)
BACKENDS = ("dynamodb-local", "moto-atomic")
#: What the report says about each endpoint.
BACKEND_NOTES = {
    "dynamodb-local": "AWS DynamoDB Local 1.25.1 (Java, in memory); validates like AWS; capacity like AWS for single-item"
    " requests, above AWS's rule for transactions",
    "moto-atomic": "moto 5.2.5 serving one request at a time (local.emulators.atomic_moto); capacity figures are placeholders",
}


@dataclass(frozen=True)
class Endpoint:
    """A running DynamoDB endpoint: its backend name and URL (picklable, for racer processes)."""

    backend: str
    url: str

    @property
    def reports_capacity(self) -> bool:
        """Whether its ConsumedCapacity is AWS's (DynamoDB Local) rather than a placeholder (moto)."""
        return self.backend == "dynamodb-local"


def make_session() -> boto3.session.Session:
    """A boto3 session with the fake credentials and region (never a real account)."""
    return boto3.session.Session(region_name=REGION, **CREDENTIALS)


def make_client(endpoint: Endpoint, session: boto3.session.Session | None = None) -> Any:
    """A DynamoDB client for ``endpoint`` with :data:`CLIENT_CONFIG`."""
    return (session or make_session()).client("dynamodb", endpoint_url=endpoint.url, config=CLIENT_CONFIG)


def make_resource(endpoint: Endpoint, session: boto3.session.Session | None = None) -> Any:
    """A DynamoDB service resource for ``endpoint`` with :data:`CLIENT_CONFIG` (python-dynamodb-lock needs one)."""
    return (session or make_session()).resource("dynamodb", endpoint_url=endpoint.url, config=CLIENT_CONFIG)


@contextlib.contextmanager
def running(backend: str) -> Iterator[Endpoint]:
    """Start ``backend`` (one of :data:`BACKENDS`), yield its :class:`Endpoint`, stop it by its PID."""
    if backend == "dynamodb-local":
        from local.emulators.dynamodb_local import DynamoDBLocal

        with DynamoDBLocal(region=REGION) as server:
            yield Endpoint(backend, server.endpoint_url)
    elif backend == "moto-atomic":
        from local.emulators.atomic_moto import start_server_process, stop_server_process

        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        proc, url = start_server_process(env=env)
        try:
            yield Endpoint(backend, url)
        finally:
            stop_server_process(proc)
    else:
        raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")


def create_table(client: Any, table: str, keys: list[tuple[str, str]], ttl_attribute: str | None = None) -> None:
    """Create an on-demand table with string ``keys`` ``[(name, "HASH"|"RANGE"), ...]`` and wait for it."""
    client.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": name, "KeyType": kind} for name, kind in keys],
        AttributeDefinitions=[{"AttributeName": name, "AttributeType": "S"} for name, _ in keys],
    )
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})
    if ttl_attribute:
        client.update_time_to_live(
            TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl_attribute}
        )
