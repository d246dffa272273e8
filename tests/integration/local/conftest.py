"""Fixtures and helpers of the local world's tests (``make serve``): no AWS settings, and a seeded store."""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from pathlib import Path

import boto3
import pytest

from athena_refresh.catalog import catalog_document
from athena_refresh.results import create_results_table
from local.emulators.atomic_moto import start_server_process, stop_server_process
from local.emulators.deployment import REGION, aws_env
from local.serve.store import STORE_DIR, export_store
from local.serve.world import LOCAL_ENV, WORKDIR_ENV
from slotlock import create_lock_table
from stacks.jobs import JobDefinition
from stacks.runtime_asset import catalog_queries

CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "aws_session_token": "testing"}


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS setting at all: no AWS_* variable, no config or credentials file, no ``--local`` setting."""
    for name in list(os.environ):
        if name.startswith("AWS_") or name in (LOCAL_ENV, WORKDIR_ENV):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def seed_store(workdir: Path, jobs: Sequence[JobDefinition]) -> Path:
    """A store in ``workdir`` holding ``jobs``' catalog, their empty tables and the results bucket (exported as the
    demo exports it, from a moto server of its own); returns ``workdir``."""
    process, endpoint = start_server_process(log_path=workdir / "seed-moto.log", env=aws_env(), timeout_s=60)
    try:
        ddb = boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION, **CREDENTIALS)
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name=REGION, **CREDENTIALS)
        suffix = uuid.uuid4().hex[:8]
        lock_table, results_table, bucket = f"w-locks-{suffix}", f"w-results-{suffix}", f"w-bucket-{suffix}"
        create_lock_table(ddb, lock_table)
        create_results_table(ddb, results_table)
        s3.create_bucket(Bucket=bucket)
        export_store(
            ddb,
            s3,
            workdir / STORE_DIR,
            lock_table=lock_table,
            results_table=results_table,
            bucket=bucket,
            catalog=catalog_document(catalog_queries(jobs)),
            region=REGION,
        )
    finally:
        stop_server_process(process)
    return workdir
