"""``tools.ops`` end to end on both DynamoDB backends, invocations through the local fake Lambda service.

Each test deploys the flights job locally (:class:`local.emulators.deployment.LocalDeployment`: the lock table
with its history index, the results table), starts execution environments that run the real handler with the
DuckDB engine (:class:`local.emulators.lambda_service.FakeLambda`), and drives them with the operator
(:class:`tools.ops.operator.Operator`, through :class:`local.emulators.lambda_service.ServiceInvoker`) and with
scheduled deliveries of the live slot, as the Scheduler's fan-out would. Every wait is bounded.
"""

from __future__ import annotations

import datetime as dt
import io
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from athena_refresh.results import ResultsStore
from local.emulators.atomic_moto import start_server_process, stop_server_process
from local.emulators.deployment import LocalDeployment, aws_env
from local.emulators.lambda_service import Delivery, FakeLambda, FunctionConfig, ServiceInvoker
from sample_data.flights import ensure_flights_table
from slotlock import Slot, SlotLock
from slotlock.schedule import latest_firings
from stacks.jobs import DEFAULT_LOCAL_JOB
from tests.sample_jobs import fixture_job, stack_settings
from tools.ops.cli import build_parser, run_command
from tools.ops.operator import Deployment, JobTarget, Operator

REPO_ROOT = Path(__file__).resolve().parents[3]
JOB = DEFAULT_LOCAL_JOB
FUNCTION = f"ops-test-{JOB}"
LEASE_S = 6.0
HEARTBEAT_S = 2.0
QUERY_MS = 300
WAIT_S = 60.0
OPERATOR = "arn:aws:iam::123456789012:user/operator"
BACKENDS = ["atomic-moto", "dynamodb-local"]


@dataclass
class OpsWorld:
    """One local deployment of the flights job, its fake function and the operator."""

    deployment: LocalDeployment
    service: FakeLambda
    operator: Operator
    lock: SlotLock
    results: ResultsStore
    ddb: Any

    def slots(self, count: int) -> list[Slot]:
        """The job's last ``count`` schedule slots, oldest first (the last one is the current slot)."""
        now = dt.datetime.now(dt.UTC)
        return [Slot(int(t.timestamp())) for t in latest_firings("cron(0/30 * * * ? *)", "UTC", now, count)]

    def race(self, slot: Slot, racers: int) -> list[Delivery]:
        """Deliver ``slot`` to ``racers`` invocations at once (the live schedule's fan-out); returns them."""
        deliveries = []
        for racer in range(racers):
            event = {"job": JOB, "scheduled_time": slot.iso}
            delivery = Delivery(f"live-{uuid.uuid4().hex[:10]}", slot.iso, 0, racer, event, "race")
            self.service.invoke(delivery)
            deliveries.append(delivery)
        return deliveries

    def settle(self, deliveries: list[Delivery], timeout_s: float = WAIT_S) -> None:
        deadline = __import__("time").monotonic() + timeout_s
        self.service.run_until(
            lambda: all(d.done for d in deliveries) and self.service.quiet(), deadline=deadline, what="deliveries"
        )

    def outcomes(self, deliveries: list[Delivery]) -> list[dict[str, Any]]:
        return [d.outcome or {"status": d.status} for d in deliveries]


@pytest.fixture(scope="module")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One atomic moto server process for the module's ``atomic-moto`` tests, as ``LocalDeployment`` starts it
    (each test's tables have names of their own, and its deployment never stops the server); its endpoint URL."""
    log_path = tmp_path_factory.mktemp("moto") / "moto.log"
    process, endpoint = start_server_process(log_path=log_path, env=aws_env(), timeout_s=60)
    try:
        yield str(endpoint)
    finally:
        stop_server_process(process)


@pytest.fixture(scope="module")
def data_dir() -> Path:
    """The sample's data directory (.cache/data), built once if missing; checked once per module (the check reads
    every partition: about a second)."""
    return ensure_flights_table().parent


@pytest.fixture(params=BACKENDS)
def world(request: pytest.FixtureRequest, tmp_path: Path, data_dir: Path) -> Iterator[OpsWorld]:
    backend = request.param
    if backend == "dynamodb-local":
        request.getfixturevalue("dynamodb_local")  # skips (or fails under CI=true) without Java
    settings, job = stack_settings(), fixture_job(JOB)  # the sample's canonical copy (tests/fixtures/jobs)
    suffix = uuid.uuid4().hex[:8]
    (tmp_path / "deploy").mkdir()
    deployment = LocalDeployment(
        job,
        backend=backend,
        workdir=tmp_path / "deploy",
        lock_table=f"ops-lock-{suffix}",
        results_table=f"ops-results-{suffix}",
        dynamodb_endpoint=request.getfixturevalue("dynamodb_local").endpoint_url
        if backend == "dynamodb-local"
        else None,
    )
    if backend == "atomic-moto":
        deployment.endpoint = request.getfixturevalue("moto_server")  # reused: start() starts no server
    deployment.start()
    env = deployment.function_env(
        function_name=FUNCTION, lease_duration_s=LEASE_S, heartbeat_interval_s=HEARTBEAT_S, max_slot_age_s=3 * 3600
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    state = tmp_path / "state"
    state.mkdir()

    def argv(worker_id: str, seq: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "local.emulators.lambda_runtime",
            "--worker-id",
            worker_id,
            "--log-file",
            str(logs / f"{worker_id}.log"),
            "--data-dir",
            str(data_dir),
            "--state-dir",
            str(state),
            "--simulated-duration-ms",
            str(QUERY_MS),
            "--function-name",
            FUNCTION,
            "--timeout-ms",
            "60000",
            "--region",
            env["AWS_REGION"],
        ]

    service = FakeLambda(
        FunctionConfig(
            name=FUNCTION,
            env=env,
            worker_argv=argv,
            logs_dir=logs,
            timeout_s=60,
            min_environments=2,
            max_environments=8,
        )
    )
    ddb = deployment.client("dynamodb")
    target = JobTarget(JOB, FUNCTION, job.config.schedule_expression, job.config.schedule_timezone, LEASE_S)
    operator = Operator(
        Deployment(deployment.lock_table, deployment.results_table, {JOB: target}),
        dynamodb=ddb,
        invoker=ServiceInvoker(service),
        identity=lambda: OPERATOR,
        poll_s=0.2,
    )
    try:
        service.ensure_ready(2, 60)
        yield OpsWorld(
            deployment,
            service,
            operator,
            SlotLock(deployment.lock_table, JOB, client=ddb, lease_duration_s=LEASE_S),
            ResultsStore(deployment.results_table, dynamodb_client=ddb),
            ddb,
        )
    finally:
        service.close()
        deployment.close()
        del settings


def cli(world: OpsWorld, *args: str) -> tuple[int, str]:
    """Run ``python -m tools.ops <args>`` against the world's operator; (exit status, output)."""
    from rich.console import Console

    out = io.StringIO()
    parsed = build_parser().parse_args(list(args))
    status = run_command(parsed, world.operator, Console(file=out, width=200), stdin=io.StringIO())
    return status, out.getvalue()


def test_status_shows_a_live_holder(world: OpsWorld) -> None:
    # GIVEN a live holder of the current slot (acquired directly: the lease runs for LEASE_S)
    slot = world.slots(1)[0]
    lease = world.lock.acquire(slot, "holder-1")

    # WHEN the operator asks for the status
    (status,) = world.operator.status(JOB)
    code, text = cli(world, "status", "--job", JOB)

    # THEN the holder, its token and its lease are shown
    d = status.as_dict()
    assert d["holder"]["owner_id"] == "holder-1" and d["holder"]["fencing_token"] == lease.fencing_token
    assert d["holder"]["locked"] and 0 < d["holder"]["lease_remaining_ms"] <= LEASE_S * 1000
    assert d["manual_run"]["in_progress"] is False and d["paused"] is False
    assert code == 0 and "holder-1" in text


def test_pause_makes_every_racer_return_after_one_request_with_exactly_one_missed_record(world: OpsWorld) -> None:
    # GIVEN the job paused by the operator
    slot = world.slots(1)[0]
    code, text = cli(world, "pause", "--job", JOB, "--reason", "maintenance window", "--yes")
    assert code == 0, text

    # WHEN 8 racers of the current slot run
    deliveries = world.race(slot, 8)
    world.settle(deliveries)

    # THEN each lost as paused, none ran a query, and exactly one MISSED "paused" record exists
    outcomes = world.outcomes(deliveries)
    assert {o["reason"] for o in outcomes} == {"paused"}
    assert sum(o["status"] == "missed" for o in outcomes) == 1
    assert all(o["queries_started"] == 0 for o in outcomes)
    record = world.lock.get_slot(slot)
    assert record is not None and (record["status"], record["reason"]) == ("MISSED", "paused")
    # AND the pause is audited on the lock item
    item = world.lock.get_lock_item()
    assert item is not None and item["paused_by"]["S"] == OPERATOR and item["pause_reason"]["S"] == "maintenance window"
    # AND after the resume, the paused slot's late delivery does not run it either
    assert cli(world, "resume", "--job", JOB, "--yes")[0] == 0
    late = world.race(slot, 1)
    world.settle(late)
    assert world.outcomes(late)[0]["status"] == "lost" and world.outcomes(late)[0]["queries_started"] == 0


def test_force_release_fences_out_a_live_holder_whose_commit_is_then_rejected(world: OpsWorld) -> None:
    # GIVEN a live holder that has recorded a query id
    slot = world.slots(1)[0]
    lease = world.lock.acquire(slot, "holder-1")
    lease = world.lock.record_state(lease, {"query_execution_id": "q-1", "attempt": 1})

    # WHEN the operator releases without --force, then with it
    refused, text = cli(world, "release", "--job", JOB, "--reason", "stuck", "--yes")
    assert refused == 1 and "refused" in text
    code, text = cli(world, "release", "--job", JOB, "--reason", "stuck holder", "--force", "--yes")
    assert code == 0, text

    # THEN the old holder's heartbeat and commit are rejected, and nothing of its commit is written
    from slotlock import LeaseLostError, StaleFencingTokenError

    with pytest.raises(LeaseLostError):
        world.lock.heartbeat(lease)
    with pytest.raises(StaleFencingTokenError):
        world.lock.commit(lease, summary={"late": True})
    record = world.lock.get_slot(slot)
    assert record is not None and record["status"] == "RUNNING"
    # AND the audit names who released which token; the query id stays for the next holder to adopt
    item = world.lock.get_lock_item()
    assert item is not None and item["released_by"]["S"] == OPERATOR
    assert int(item["released_fencing_token"]["N"]) == lease.fencing_token
    successor = world.lock.acquire(slot, "holder-2")
    assert successor.takeover_from == "holder-1" and successor.state["query_execution_id"] == "q-1"


def test_rerun_with_a_newer_slot_present_leaves_latest_and_without_one_moves_it(world: OpsWorld) -> None:
    # GIVEN two live slots that ran (the older and the current one)
    older, current = world.slots(2)
    for slot in (older, current):
        world.settle(world.race(slot, 2))
    latest = world.results.get_latest(JOB)
    assert latest is not None and latest["latest_slot"] == current.iso

    # WHEN the older slot is re-run
    code, text = cli(world, "rerun", "--job", JOB, "--slot", older.iso, "--reason", "data fixed", "--yes")

    # THEN it succeeded as generation 2, stored beside generation 1, and LATEST still names the current slot
    assert code == 0, text
    assert world.results.list_generations(JOB, older.iso) == [1, 2]
    latest = world.results.get_latest(JOB)
    assert latest is not None and (latest["latest_slot"], latest["latest_generation"]) == (current.iso, 1)
    record = world.operator.generation_record(JOB, older, 2)
    assert record is not None and record.status == "SUCCEEDED" and record.requested_by == OPERATOR
    assert record.request_reason == "data fixed" and record.run_kind == "rerun"

    # WHEN the newest slot is re-run
    code, text = cli(world, "rerun", "--job", JOB, "--slot", current.iso, "--reason", "again", "--yes")

    # THEN LATEST moves to its generation 2
    assert code == 0, text
    latest = world.results.get_latest(JOB)
    assert latest is not None and (latest["latest_slot"], latest["latest_generation"]) == (current.iso, 2)
    # AND the live lock item never saw the manual runs
    assert world.lock.get_lock().last_finished_slot == current


def test_history_lists_every_generation_newest_first(world: OpsWorld) -> None:
    (slot,) = world.slots(1)
    world.settle(world.race(slot, 2))
    assert cli(world, "rerun", "--job", JOB, "--slot", slot.iso, "--reason", "r", "--yes")[0] == 0
    records = list(world.operator.history(JOB))
    assert [(r.slot, r.generation, r.status) for r in records[:2]] == [(slot, 2, "SUCCEEDED"), (slot, 1, "SUCCEEDED")]
    code, text = cli(world, "history", "--job", JOB, "--json")
    assert code == 0 and '"generation": 2' in text


def test_dry_run_writes_nothing(world: OpsWorld) -> None:
    older, current = world.slots(2)
    world.settle(world.race(older, 1))
    before = world.ddb.scan(TableName=world.deployment.lock_table)["Items"]
    for args in (
        ("pause", "--job", JOB, "--reason", "x"),
        ("release", "--job", JOB, "--reason", "x", "--force"),
        ("rerun", "--job", JOB, "--slot", older.iso, "--reason", "x"),
        ("run", "--job", JOB),
        ("backfill", "--job", JOB, "--from", older.iso, "--to", current.iso, "--only", "all"),
    ):
        code, text = cli(world, *args, "--dry-run")
        assert code == 0, (args, text)
    after = world.ddb.scan(TableName=world.deployment.lock_table)["Items"]
    assert sorted(map(str, after)) == sorted(map(str, before))
    assert not [d for d in world.service.deliveries if d.kind == "operator"]


def test_a_backfill_killed_half_way_resumes_beside_the_live_schedule(world: OpsWorld) -> None:
    # GIVEN four past slots that the live schedule ran, and the current slot still to come
    slots = world.slots(5)
    past, current = slots[:4], slots[4]
    for slot in past:
        world.settle(world.race(slot, 2))
    plan = world.operator.plan_backfill(JOB, past[0], past[-1], only="all")
    assert plan.selected == past

    # WHEN the backfill is interrupted after two slots (Ctrl-C)
    def interrupt_after_two(result: Any) -> None:
        if len([r for r in world.operator_results if not r.skipped]) >= 2:
            raise KeyboardInterrupt

    world.operator_results = []  # type: ignore[attr-defined]

    def record(result: Any) -> None:
        world.operator_results.append(result)  # type: ignore[attr-defined]
        interrupt_after_two(result)

    with pytest.raises(KeyboardInterrupt):
        world.operator.backfill(plan, reason="catch up", wait_s=WAIT_S, on_result=record)
    # AND the live schedule's racers of the current slot run while it resumes
    live = world.race(current, 3)
    again = world.operator.plan_backfill(JOB, past[0], past[-1], only="all")
    results = world.operator.backfill(again, reason="catch up", wait_s=WAIT_S)
    world.settle(live)

    # THEN every slot of the range has exactly one new generation (2), committed
    assert again.done == past[:2] and again.selected == past[2:]
    assert all(r.status == "SUCCEEDED" for r in results)
    for slot in past:
        assert world.results.list_generations(JOB, slot.iso) == [1, 2]
        records = [r for r in world.operator.history_reader.slot_records(JOB, slot)]
        assert sorted(r.generation for r in records) == [1, 2]
    # AND the live slot ran as if no backfill existed: one winner, one query, LATEST on it
    outcomes = world.outcomes(live)
    assert sum(o["status"] == "succeeded" for o in outcomes) == 1
    assert sum(o.get("queries_started", 0) for o in outcomes) == 1
    latest = world.results.get_latest(JOB)
    assert latest is not None and (latest["latest_slot"], latest["latest_generation"]) == (current.iso, 1)
