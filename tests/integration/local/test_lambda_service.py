"""The fake Lambda service's own rules, without processes: async retries keep the event and the request id,
two retries at most then the on-failure destination; what ``quiet`` counts; the local deployment's guards."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from local.emulators.deployment import LocalDeployment, LocalDeploymentError
from local.emulators.lambda_service import (
    MAX_ASYNC_RETRIES,
    Delivery,
    FakeLambda,
    FunctionConfig,
    ServiceHooks,
)
from tests.sample_jobs import FLIGHTS, fixture_job

REPO_ROOT = Path(__file__).resolve().parents[3]


class Notes(ServiceHooks):
    def __init__(self) -> None:
        self.notices: list[str] = []

    def notice(self, text: str) -> None:
        self.notices.append(text)


def _service(tmp_path: Path, hooks: ServiceHooks | None = None) -> FakeLambda:
    function = FunctionConfig(
        name="fn",
        env={},
        worker_argv=lambda worker_id, seq: ["true"],
        logs_dir=tmp_path,
        timeout_s=30,
        min_environments=1,
        max_environments=2,
    )
    return FakeLambda(function, hooks=hooks)


def _delivery(kind: str = "race", **fields: Any) -> Delivery:
    event = {"scheduled_time": "2026-11-24T10:00:00Z", "racer": 0}
    return Delivery("req-1", "2026-11-24T10:00:00Z", 0, 0, event, kind, **fields)


def test_a_retry_is_the_same_event_and_request_id_without_the_faults(tmp_path: Path) -> None:
    service = _service(tmp_path)
    first = _delivery(fault={"action": "kill", "checkpoint": "acquired"}, forced=[{"write": "commit"}])
    first.status, first.done = "crashed:killed", True
    before = time.monotonic()
    service.retry(first, 1.5, "environment killed")
    (retry,) = service.deliveries
    assert (retry.request_id, retry.event, retry.slot) == (first.request_id, first.event, first.slot)
    assert retry.attempt == 2 and retry.kind == "retry" and retry.retry_of is first
    assert retry.fault is None and retry.forced == [] and retry.storm is None
    assert not retry.done and retry.status is None and retry.worker_id is None
    assert retry.due >= before + 1.5
    assert service.counts["lambda_retry"] == 1 and not service.dead_lettered


def test_after_two_retries_the_event_goes_to_the_on_failure_destination(tmp_path: Path) -> None:
    hooks = Notes()
    service = _service(tmp_path, hooks)
    delivery = _delivery()
    for _ in range(MAX_ASYNC_RETRIES):
        service.retry(delivery, 0.0, "the handler raised")
        delivery = service.deliveries[-1]
    assert delivery.attempt == 1 + MAX_ASYNC_RETRIES
    service.retry(delivery, 0.0, "the handler raised")
    assert service.dead_lettered == [delivery]
    assert len(service.deliveries) == MAX_ASYNC_RETRIES  # no third retry
    assert service.history[-1]["what"] == "dlq" and service.history[-1]["request_id"] == "req-1"
    assert "on-failure destination" in hooks.notices[-1]


def test_a_near_future_delivery_stays_future_on_retry(tmp_path: Path) -> None:
    service = _service(tmp_path)
    service.retry(_delivery(kind="future"), 0.0, "InvalidEventError")
    assert service.deliveries[-1].kind == "future"
    assert service.counts["lambda_retry_future"] == 1


def test_quiet_counts_pending_and_in_flight_deliveries_unless_ignored(tmp_path: Path) -> None:
    service = _service(tmp_path)
    assert service.quiet()
    service.invoke(_delivery(due=time.monotonic() + 60))
    assert not service.quiet()
    service.pending.clear()
    stopped = _delivery(paused=True)
    service.in_flight["w1"] = stopped
    assert not service.quiet()
    assert service.quiet(ignore=lambda d: d.paused)


def test_the_invoke_message_carries_the_event_and_the_instructions() -> None:
    delivery = _delivery(fault={"action": "pause", "checkpoint": "before_commit"}, storm={"target": "athena"})
    message = delivery.invoke_message(30_000)
    assert message["type"] == "invoke" and message["request_id"] == "req-1" and message["timeout_ms"] == 30_000
    assert message["event"] == delivery.event and message["fault"] == delivery.fault
    assert message["storm"] == {"target": "athena"} and message["forced"] == []


def test_the_local_deployment_refuses_what_its_backend_cannot_serve(tmp_path: Path) -> None:
    job = fixture_job(FLIGHTS)
    with pytest.raises(LocalDeploymentError, match="backend must be one of"):
        LocalDeployment(job, backend="localstack", workdir=tmp_path, lock_table="l", results_table="r")
    with pytest.raises(LocalDeploymentError, match="needs the atomic-moto backend"):
        LocalDeployment(
            job, backend="dynamodb-local", workdir=tmp_path, lock_table="l", results_table="r", results_bucket="b"
        )
