"""The operator commands against the local world (``make serve``), through the one CLI's entry point.

A store is seeded without the demo (the two sample jobs' catalog, empty tables and bucket, exported as the demo
exports it), the world is started on it (:class:`local.serve.world.LocalWorld`: its own moto server, the read API,
the job registry, each job's function on the fake Lambda service behind the Invoke API, the live schedule; every
server on 127.0.0.1, free ports), and ``athena-once ops --local ...`` / ``athena-once results --local ...`` run in
this process with every AWS setting removed: pause (dry run, then for real), the live schedule's firing of the
paused job's current slot (made due at once: MISSED ``paused``), a run of it (finished: MISSED), resume, a rerun (a new generation), a backfill (dry run, then two slots), a release, the
results read back; what the world's tables hold is checked after each step, and what the store on disk holds once
the world stops. Without ``--local`` and without AWS settings the commands refuse in one line; with ``--local``
and no world running, the line says how to start one. Every wait is bounded (the CLI's ``--wait-s``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from athena_refresh.results import ResultsStore
from local.emulators.deployment import REGION
from local.serve.store import STORE_DIR, read_manifest
from local.serve.world import LOCAL_ENV, WORKDIR_ENV, WORLD_FILE, LocalWorld
from slotlock import Slot, SlotLock
from slotlock.schedule import latest_firings
from tests.integration.local.conftest import CREDENTIALS, seed_store
from tests.sample_jobs import FIXTURE_JOBS_DIR, load_fixture_jobs
from tools.cli import main as athena_once

JOB = "flights-dashboard"
OTHER = "carrier-on-time"
WAIT = ("--wait-s", "180")
HALF_HOUR_S = 1800


def cli(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str]:
    """``athena-once <words>``; (exit status, stdout + stderr)."""
    capsys.readouterr()
    status = athena_once(list(words))
    captured = capsys.readouterr()
    return status, captured.out + captured.err


@dataclass
class World:
    world: LocalWorld
    workdir: Path
    ddb: Any
    lock: SlotLock
    results: ResultsStore

    def current_slot(self) -> Slot:
        (firing,) = latest_firings("cron(0/30 * * * ? *)", "UTC", self.world.clock.now(), 1)
        return Slot(int(firing.timestamp()))

    def wait_for_record(self, slot: Slot, timeout_s: float = 180.0) -> dict[str, Any]:
        """The slot's terminal record, polled (bounded)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            record = self.lock.get_slot(slot)
            if record is not None and record["status"] in ("SUCCEEDED", "FAILED", "MISSED"):
                return record
            time.sleep(0.2)
        raise AssertionError(f"no terminal record of {slot.iso} within {timeout_s:g} s")

    def lock_items(self) -> list[str]:
        pages = self.ddb.get_paginator("scan").paginate(TableName=self.world.manifest["lock_table"])
        return sorted(json.dumps(item, sort_keys=True) for page in pages for item in page["Items"])


@pytest.fixture(scope="module")
def seeded_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workdir whose store holds the two sample jobs' catalog, their empty tables and the results bucket."""
    return seed_store(tmp_path_factory.mktemp("world"), load_fixture_jobs())


@pytest.fixture
def world(seeded_store: Path, no_aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv(WORKDIR_ENV, str(seeded_store))
    lines: list[str] = []
    # The world's time starts a minute after a half hour: no firing of the schedule falls inside the test (the
    # current slot stays the current slot), whatever the wall clock says.
    start_s = int(time.time()) // HALF_HOUR_S * HALF_HOUR_S + 60
    world = LocalWorld(
        seeded_store, port=0, jobs_dir=FIXTURE_JOBS_DIR, live=True, log=lines.append, start_at_ms=start_s * 1000
    )
    with world:
        ddb = boto3.client("dynamodb", endpoint_url=world.moto_endpoint, region_name=REGION, **CREDENTIALS)
        s3 = boto3.client("s3", endpoint_url=world.moto_endpoint, region_name=REGION, **CREDENTIALS)
        manifest = world.manifest
        yield World(
            world,
            seeded_store,
            ddb,
            SlotLock(manifest["lock_table"], JOB, client=ddb),
            ResultsStore(manifest["results_table"], bucket_name=manifest["bucket"], dynamodb_client=ddb, s3_client=s3),
        )
    assert not (seeded_store / WORLD_FILE).exists()  # removed when the world stops


def test_without_local_and_without_aws_settings_the_commands_refuse_in_one_line(
    no_aws: None, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for words in (("ops", "status"), ("ops", "pause", "-s", JOB, "--reason", "r", "--yes")):
        code, text = cli(capsys, *words)
        assert code == 1 and text.startswith("refused: ") and text.count("\n") == 1, text
        assert "region" in text.lower()
    code, text = cli(capsys, "results", "jobs")
    assert code == 2 and text.startswith("error: no AWS region") and text.count("\n") == 1, text
    # AND with --local but no world running: one line saying how to start it
    monkeypatch.setenv(WORKDIR_ENV, str(tmp_path))
    code, text = cli(capsys, "ops", "--local", "status")
    assert code == 1 and text.count("\n") == 1 and "no local world is running" in text and "make serve" in text
    code, text = cli(capsys, "results", "--local", "jobs")
    assert code == 1 and text.count("\n") == 1 and "make serve" in text
    # AND a world file left by a world that was killed: the world does not answer, so it is not used
    stale = dict.fromkeys(("world_id", "region", "moto_endpoint", "read_api", "lock_table", "results_table"), "x")
    stale |= {"kind": "athena-once-local-world", "format": 1, "pid": 1, "bucket": None, "stack": "S"}
    stale |= {"registry_path": "/S/jobs/", "functions_endpoint": "http://127.0.0.1:9", "started_at": "t"}
    (tmp_path / WORLD_FILE).write_text(json.dumps(stale))
    code, text = cli(capsys, "ops", "--local", "status")
    assert code == 1 and text.count("\n") == 1 and "it has stopped" in text and "make serve" in text, text
    (tmp_path / WORLD_FILE).unlink()
    monkeypatch.setenv(LOCAL_ENV, "1")  # the documented environment setting is --local
    code, text = cli(capsys, "ops", "status")
    assert code == 1 and text.count("\n") == 1 and "no local world is running" in text
    # AND the commands that act on AWS only refuse while the setting says the local world is meant
    code, text = cli(capsys, "ops", "fence-bump", "--lock-table", "l", "--results-table", "r", "--job", JOB)
    assert code == 1 and text.count("\n") == 1 and "acts on AWS only" in text, text
    code, text = cli(capsys, "ops", "smoke-test", "--stack-name", "S")
    assert code == 2 and text.count("\n") == 1 and "acts on AWS only" in text, text
    monkeypatch.delenv(LOCAL_ENV)
    # AND --local beside --endpoint-url is a usage error (two worlds named)
    code, text = cli(capsys, "ops", "--local", "--endpoint-url", "http://127.0.0.1:9", "status")
    assert code == 2 and "two worlds" in text


@pytest.mark.slow
def test_pause_run_resume_rerun_backfill_release_on_the_local_world(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the running world: its registry lists both sample jobs
    code, text = cli(capsys, "ops", "--local", "status")
    assert code == 0 and JOB in text and OTHER in text, text

    # WHEN the job is paused with --dry-run, THEN nothing is written
    before = world.lock_items()
    code, text = cli(capsys, "ops", "--local", "pause", "-s", JOB, "--reason", "practice", "--dry-run")
    assert code == 0, text
    assert world.lock_items() == before
    # WHEN it is paused for real, THEN the lock item says so, audited
    code, text = cli(capsys, "ops", "--local", "pause", "-s", JOB, "--reason", "practice", "--yes")
    assert code == 0, text
    item = world.lock.get_lock_item()
    assert item is not None and item["pause_reason"]["S"] == "practice" and item["paused_by"]["S"]

    # WHEN the live schedule fires the paused job's current slot (its firing made due now, not waited for)
    slot = world.current_slot()
    host = world.world.functions
    (function,) = [name for name, f in host.functions.items() if f.job == JOB]
    host.next_firing[function] = slot.datetime
    record = world.wait_for_record(slot)
    # THEN its racers record it MISSED paused, once
    assert (record["status"], record["reason"]) == ("MISSED", "paused")
    assert (JOB, slot.iso) in host.fired
    # AND a run of the current slot now ("like any racer": once per slot holds) finds it finished: MISSED
    code, text = cli(capsys, "ops", "--local", "run", "-s", JOB, "--yes", *WAIT)
    assert code == 1 and "MISSED" in text, text

    # WHEN resumed and the missed slot re-run, THEN a new generation (2) succeeded, its rows stored, LATEST on it
    assert cli(capsys, "ops", "--local", "resume", "-s", JOB, "--yes")[0] == 0
    code, text = cli(
        capsys, "ops", "--local", "rerun", "-s", JOB, "--slot", slot.iso, "--reason", "after", "--yes", *WAIT
    )
    assert code == 0, text
    assert world.results.list_generations(JOB, slot.iso) == [2]
    latest = world.results.get_latest(JOB)
    assert latest is not None and (latest["latest_slot"], latest["latest_generation"]) == (slot.iso, 2)
    code, text = cli(capsys, "ops", "--local", "history", "-s", JOB, "--json")
    assert code == 0 and '"generation": 2' in text and '"reason": "paused"' in text, text

    # WHEN the two slots before it are backfilled: --dry-run writes nothing, then both run
    first, second = (Slot(slot.epoch_s - 1800 * n) for n in (2, 1))
    window = ("--from", first.iso, "--to", second.iso, "--only", "all")
    before = world.lock_items()
    code, text = cli(capsys, "ops", "--local", "backfill", "-s", JOB, *window, "--dry-run")
    assert code == 0 and f"would run {first.iso}" in text and f"would run {second.iso}" in text, text
    assert world.lock_items() == before
    code, text = cli(capsys, "ops", "--local", "backfill", "-s", JOB, *window, "--reason", "practice", "--yes", *WAIT)
    assert code == 0, text
    for past in (first, second):
        assert world.results.list_generations(JOB, past.iso) == [2]

    # WHEN the lease is released (none is held): --dry-run and for real both say so and write nothing
    before = world.lock_items()
    for extra in ("--dry-run", "--yes"):
        code, text = cli(capsys, "ops", "--local", "release", "-s", JOB, "--reason", "practice", extra)
        assert code == 0, text
    assert world.lock_items() == before

    # THEN the results read back through the local world, directly and through its read API
    for extra in ((), ("--api",)):
        code, text = cli(capsys, "results", "--local", "latest", "-s", JOB, "--format", "json", *extra)
        assert code == 0, text
        assert json.loads(text)["slot"] == slot.iso

    # AND once the world stops, the store on disk keeps what the operations wrote
    world.world.close()
    manifest = read_manifest(world.workdir / STORE_DIR)
    assert manifest["results"][JOB]["latest_slot"] == slot.iso
    assert set(manifest["results"][JOB]["slots"]) == {f"{s.iso}#g2" for s in (first, second, slot)}


def test_the_invoke_api_answers_as_lambda_does() -> None:
    from local.emulators.lambda_service import FunctionConfig
    from local.serve.functions import FunctionHost, InvokeServer, LocalFunction

    config = FunctionConfig("fn", {}, lambda worker_id, seq: [], Path("."), 60, 0, 1)
    host = FunctionHost({"fn": LocalFunction("job", config)})  # never started: nothing is delivered
    server = InvokeServer(host, identity={"world_id": "w"})
    try:
        path = "/2015-03-31/functions/{}/invocations"
        status, headers, _ = server.answer(path.format("fn"), "Event", b'{"job": "job"}')
        assert status == 202 and headers["x-amzn-RequestId"]
        arn = "arn:aws:lambda:us-east-1:123456789012:function:fn"
        assert server.answer(path.format(arn), "Event", b"{}")[0] == 202
        status, headers, body = server.answer(path.format("other"), "Event", b"{}")
        assert (status, headers["x-amzn-ErrorType"]) == (404, "ResourceNotFoundException")
        assert "Function not found: other" in json.loads(body)["message"]
        for invocation_type, payload in (("RequestResponse", b"{}"), (None, b"{}"), ("Event", b"[1]"), ("Event", b"{")):
            status, headers, _ = server.answer(path.format("fn"), invocation_type, payload)
            assert (status, headers["x-amzn-ErrorType"]) == (400, "InvalidRequestContentException")
    finally:
        server.close()
