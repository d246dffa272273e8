"""``make chaos``: real racer processes, seeded faults, a recorded history and a checker; no AWS account.

Per schedule slot, ``--racers`` (default 16) execution environments (``local.chaos.worker`` processes, each
calling the REAL handler ``athena_refresh.handler.lambda_handler``) receive the slot's Scheduler-shaped
event at once and race for the fenced lease on **AWS DynamoDB Local** (or the atomic moto server); the
winner runs the job's query on DuckDB (the Athena stand-in, ``local.emulators.duckdb_engine``) and commits. A seeded
random plan adds, per run:

- **SIGKILL of the holder** at each protocol point (``acquired``; ``query_started``; ``query_finished``,
  i.e. before the commit; ``committed``), each followed by Lambda's async retry of the same event with
  the **same request id** (up to two retries, then the on-failure destination);
- **SIGSTOP of the holder past its lease, then SIGCONT**: resumed as soon as a late delivery of the same
  slot has taken the lease over, once that delivery has finished, or only after the next slot (which then
  supersedes the stopped one); a stopped holder's commit must be rejected;
- **clock skew**: every environment's lock clock is off by up to a quarter of the lease, either way;
- **duplicate deliveries** of a slot and **late deliveries** of older slots (some older than the maximum
  slot age);
- **throttling and connection errors** at random calls of the real boto3 clients
  (``ProvisionedThroughputExceededException``, ``ThrottlingException``, a dropped connection, a response
  lost after the write applied) and Athena ``TooManyRequestsException`` at the engine, plus *storms* that
  outlast botocore's retries (see :mod:`local.chaos.worker`);
- **faults aimed at the lock's writes** (rates in :data:`local.chaos.worker.WRITE_FAULTS`): the
  ``record_state`` and ``commit`` transactions cancelled (``TransactionCanceledException``) with a transient
  reason (``ThrottlingError``, ``ProvisionedThroughputExceeded``, ``TransactionConflict``) on one random item,
  a commit rarely refused for good (``ValidationError`` on a results item: the slot must end FAILED,
  ``write_rejected``), ``TransactionConflictException`` on the acquire and heartbeat ``UpdateItem``, and
  the answer of a MISSED record lost so botocore resends the applied write. Every kind is also forced
  once on some slot (:data:`FORCED_WRITE_FAULTS`), so even a short run covers them all;
- **near-future deliveries**: some slots come with one more delivery whose scheduled time is 30-599 s
  ahead of now (a hostile or mistyped event). It must be refused before any request, on every attempt
  (Lambda's two async retries included), and its slot never acquired nor recorded.

Every observation (who, what, slot, fencing token, outcome, machine-wide monotonic time) is recorded; at
the end :mod:`local.chaos.checker` checks the history, the stored state (every slot item of the lock table)
and the ``SlotMissed`` metric values the environments emitted (the Powertools EMF lines of their logs), and
the run writes ``chaos-report.json``. The **negative control** repeats the run with fencing switched off by
a test-only knob (the commit transaction's conditions made vacuous, ``--no-fencing`` in the worker) and must
be reported as violating: it proves the checker can fail.

    python -m local.chaos [--racers 16] [--slots 200] [--backend dynamodb-local|atomic-moto] [--seed N]
                          [--write-fault-scale 1.0] [--future-fraction 0.1]
                          [--control-slots N | --no-control] [--report chaos-report.json]

Every wait is bounded (per slot, per run, per process); the exit status is non-zero when the fenced run has
a violation, the harness failed, or the negative control found none.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import heapq
import itertools
import json
import os
import queue
import random
import shutil
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
LAMBDAS_DIR = REPO_ROOT / "lambdas"

import boto3
from botocore.config import Config

from athena_refresh.engine import client_request_token
from athena_refresh.results import ResultsStore, create_results_table
from athena_refresh.settings import Settings
from local.chaos import checker as chaos_checker
from local.chaos.checker import FinalState, percentile
from local.chaos.worker import (
    ACQUIRE,
    ATHENA_MAX_ATTEMPTS,
    ATHENA_THROTTLE,
    COMMIT,
    DYNAMODB_FAULT_KINDS,
    DYNAMODB_STANDARD_MAX_ATTEMPTS,
    HEARTBEAT,
    PERMANENT_CANCELLATION_KIND,
    RECORD_MISSED,
    RECORD_STATE,
    RESPONSE_LOST,
    TRANSACTION_CONFLICT,
    TRANSIENT_CANCELLATION_KINDS,
    WRITE_FAULTS,
)
from local.emulators.lambda_pool import Worker, pump
from slotlock import Slot, SlotLock, create_lock_table
from stacks.config import CONTEXT_KEY, JobConfig, load_context

BACKENDS = ("dynamodb-local", "atomic-moto")
SLOT_PERIOD_S = 1800  # cdk.json: cron(0/30 * * * ? *)
KILL_POINTS = ("acquired", "query_started", "query_finished", "committed")
PAUSE_POINTS = ("query_started", "query_finished", "before_commit")
# A holder stopped here resumes straight into its commit. Not "query_finished": the job renews the lease (when
# a heartbeat is due, as it is after a stop past the lease) while reading the results and again right before
# its commit, so a holder resumed there learns it lost the lease (lease_lost) before it could commit stale.
STALE_COMMIT_POINTS = ("before_commit",)
# When a stopped holder is resumed (SIGCONT): ...
RESUME_ON_TAKEOVER_ACQUIRED = "takeover_acquired"  # ... as soon as a late delivery has taken the lease over
RESUME_ON_TAKEOVER_DONE = "takeover_done"  # ... once that delivery has finished (committed)
RESUME_AFTER_NEXT_SLOT = "next_slot"  # ... after the next slot ran (and superseded it); no late delivery
RESUME_POLICIES = (RESUME_ON_TAKEOVER_ACQUIRED, RESUME_ON_TAKEOVER_DONE, RESUME_AFTER_NEXT_SLOT)
MIN_STALE_COMMIT_SCENARIOS = 2  # every plan has at least this many stopped-before-commit holders
MAX_ASYNC_RETRIES = 2  # Lambda async invocation: two retries, then the on-failure destination
MAX_REDELIVERIES = 4  # late deliveries of a stopped holder's slot that arrive while the lease still holds
EXTRA_ENVIRONMENTS = 8  # Lambda scales out beyond the racers for retries and late deliveries
TIMEOUT_GRACE_S = 5.0
WORKER_START_TIMEOUT_S = 180.0
TAKEOVER_MARGIN_S = 0.3
#: Near-future deliveries: scheduled at least this far ahead of now (seconds), rounded up to the minute as slots
#: are: 30 to 599 s ahead, far beyond the runtime's lead allowance (MAX_SLOT_LEAD_S, 5 s by default).
FUTURE_LEAD_S = (30, 540)
#: Faults aimed at the lock's writes that every plan forces once (on fault-free, storm-free slots), so
#: that a short run covers each kind whatever the random draws: (write, kind, racers) where racers ``all``
#: means every racer of the slot carries it (only the holder reaches the write) and ``one`` one racer.
#: The MISSED record's lost answer is forced on the ancient deliveries (too_old) and on the slot after a
#: holder stopped until the next slot (its winner records the stopped slot superseded).
FORCED_WRITE_FAULTS: tuple[tuple[str, str, str], ...] = (
    *((RECORD_STATE, kind, "all") for kind in TRANSIENT_CANCELLATION_KINDS),
    *((COMMIT, kind, "all") for kind in TRANSIENT_CANCELLATION_KINDS),
    (COMMIT, PERMANENT_CANCELLATION_KIND, "all"),
    (ACQUIRE, TRANSACTION_CONFLICT, "one"),
)
FORCED_MISSED_RESEND = {"write": RECORD_MISSED, "kind": RESPONSE_LOST}
#: Heartbeat-shaped writes are rare (a 100 ms query needs no renewal): the sure one is the release of a holder
#: whose query engine stayed throttled (an Athena storm), so each plan has one and its release meets a conflict.
FORCED_RELEASE_CONFLICT = {"write": HEARTBEAT, "kind": TRANSACTION_CONFLICT}

REGION = "us-east-1"
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}
FUNCTION_NAME = "athena-refresh-chaos"


class ChaosHarnessError(RuntimeError):
    """The harness itself failed (a process would not start, a slot never settled): not a protocol verdict."""


@dataclass(frozen=True)
class ChaosOptions:
    """One chaos run. Durations in seconds; fractions are per slot; ``transient_rate`` is per AWS call."""

    racers: int = 16
    slots: int = 200
    backend: str = "dynamodb-local"
    seed: int = 20261122
    lease_s: float = 2.0
    query_ms: int = 100
    timeout_s: int = 30
    fault_fraction: float = 0.25  # slots whose holder is killed or stopped
    duplicate_fraction: float = 0.1
    late_fraction: float = 0.1
    storm_fraction: float = 0.05
    transient_rate: float = 0.01
    future_fraction: float = 0.1  # slots that also get a near-future delivery (at least one per run)
    write_fault_scale: float = 1.0  # multiplies local.chaos.worker.WRITE_FAULTS (0: no aimed write faults)
    fencing: bool = True
    workdir: Path = REPO_ROOT / ".chaos"
    max_run_s: float = 3600.0
    dynamodb_endpoint: str | None = None  # reuse a running DynamoDB Local (tests); else one is started

    @property
    def heartbeat_s(self) -> float:
        return round(self.lease_s / 4, 3)

    @property
    def max_skew_ms(self) -> int:
        return int(self.lease_s * 1000 / 4)

    @property
    def max_slot_age_s(self) -> int:
        return self.slots * SLOT_PERIOD_S + 3600


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------------------------------
@dataclass
class SlotPlan:
    index: int
    scheduled: dt.datetime
    fault: dict[str, str] | None = None  # {"action": "kill"|"pause", "checkpoint": ..., "policy": ...}
    duplicates: int = 0
    late: str | None = None  # iso of an older slot delivered again with this one
    storm: dict[str, Any] | None = None  # {"target", "kind", "calls", "racer"}
    future_lead_s: int | None = None  # one more delivery scheduled this far ahead of now
    forced: list[dict[str, Any]] = field(default_factory=list)  # [{"write", "kind", "racer"?}]

    @property
    def iso(self) -> str:
        return iso(self.scheduled)

    def forced_for(self, racer: int) -> list[dict[str, Any]]:
        """The aimed write faults this racer's delivery carries (those for any racer, or for this one)."""
        return [f for f in self.forced if f.get("racer", racer) == racer]


def make_plan(o: ChaosOptions, now: dt.datetime | None = None) -> tuple[list[SlotPlan], list[str]]:
    """The seeded plan: slots (the last ``o.slots`` half-hours, oldest first) and the ancient slots.

    Ancient slots are older than the maximum slot age: they are only ever delivered late, and must end as
    missed (``too_old``).
    """
    rng = random.Random(o.seed)
    now = now or dt.datetime.now(dt.UTC)
    last = int(now.timestamp()) // SLOT_PERIOD_S * SLOT_PERIOD_S
    first = last - (o.slots - 1) * SLOT_PERIOD_S
    plans = [SlotPlan(i, dt.datetime.fromtimestamp(first + i * SLOT_PERIOD_S, dt.UTC)) for i in range(o.slots)]
    ancient: list[str] = []
    for plan in plans:
        if rng.random() < o.fault_fraction:
            if rng.random() < 0.6:
                plan.fault = {"action": "kill", "checkpoint": rng.choice(KILL_POINTS)}
            else:
                plan.fault = {
                    "action": "pause",
                    "checkpoint": rng.choice(PAUSE_POINTS),
                    "policy": rng.choice(RESUME_POLICIES),
                }
        if rng.random() < o.duplicate_fraction:
            plan.duplicates = rng.randint(1, 3)
        if plan.index > 0 and rng.random() < o.late_fraction:
            if rng.random() < 0.25:
                moment = first - o.max_slot_age_s - (len(ancient) + 1) * SLOT_PERIOD_S
                plan.late = iso(dt.datetime.fromtimestamp(moment, dt.UTC))
                ancient.append(plan.late)
            else:
                plan.late = plans[rng.randint(max(0, plan.index - 10), plan.index - 1)].iso
        if rng.random() < o.storm_fraction:
            target = rng.choice(("dynamodb", "athena"))
            kind = rng.choice(DYNAMODB_FAULT_KINDS) if target == "dynamodb" else ATHENA_THROTTLE
            calls = DYNAMODB_STANDARD_MAX_ATTEMPTS if target == "dynamodb" else ATHENA_MAX_ATTEMPTS
            plan.storm = {"target": target, "kind": kind, "calls": calls, "racer": rng.randrange(o.racers)}
    _ensure_coverage(plans, rng)
    _plan_writes_and_future(o, plans, ancient)
    return plans, ancient


def _plan_writes_and_future(o: ChaosOptions, plans: list[SlotPlan], ancient: list[str]) -> None:
    """Near-future deliveries and forced write faults, from their own seeded RNG (the rest of the plan for a
    seed stays as it was before they existed).

    At least one slot gets a near-future delivery (when ``future_fraction`` > 0); each of
    :data:`FORCED_WRITE_FAULTS` goes to a fault-free, storm-free slot (its own one while there are enough); an
    ancient slot is ensured (a late delivery older than the maximum slot age, recorded MISSED too_old), and the
    slot after each holder stopped until the next slot carries the forced lost MISSED answer; an Athena storm
    is ensured, and the release of its holder (a heartbeat-shaped write) meets a forced conflict.
    """
    rng = random.Random(f"{o.seed}/writes-and-future")
    for plan in plans:
        if rng.random() < o.future_fraction:
            plan.future_lead_s = rng.randint(*FUTURE_LEAD_S)
    if o.future_fraction > 0 and not any(p.future_lead_s for p in plans):
        rng.choice(plans).future_lead_s = rng.randint(*FUTURE_LEAD_S)
    if o.write_fault_scale <= 0:
        return
    if not ancient and len(plans) > 1:
        plan = rng.choice([p for p in plans[1:] if p.late is None] or plans[1:])
        moment = int(plans[0].scheduled.timestamp()) - o.max_slot_age_s - SLOT_PERIOD_S
        plan.late = iso(dt.datetime.fromtimestamp(moment, dt.UTC))
        ancient.append(plan.late)
    # A holder killed or stopped at a checkpoint may never query (its retry carries no storm): a plain slot.
    athena_storms = [p for p in plans if p.storm and p.storm["target"] == "athena" and p.fault is None]
    if not athena_storms:
        quiet = [p for p in plans if p.fault is None and p.storm is None] or list(plans)
        storm_plan = rng.choice(quiet)
        storm_plan.storm = {
            "target": "athena",
            "kind": ATHENA_THROTTLE,
            "calls": ATHENA_MAX_ATTEMPTS,
            "racer": rng.randrange(o.racers),
        }
        athena_storms.append(storm_plan)
    athena_storms[0].forced.append(dict(FORCED_RELEASE_CONFLICT))
    free = [p for p in plans if p.fault is None and p.storm is None] or list(plans)
    rng.shuffle(free)
    for n, (write, kind, racers) in enumerate(FORCED_WRITE_FAULTS):
        plan = free[n % len(free)]  # a short plan stacks them: each one hits its own write of the slot
        forced: dict[str, Any] = {"write": write, "kind": kind}
        if racers == "one":
            forced["racer"] = rng.randrange(o.racers)
        plan.forced.append(forced)
    for previous, plan in itertools.pairwise(plans):
        if previous.fault and previous.fault.get("policy") == RESUME_AFTER_NEXT_SLOT:
            plan.forced.append(dict(FORCED_MISSED_RESEND))


def _ensure_coverage(plans: list[SlotPlan], rng: random.Random) -> None:
    """Even a short run covers every kill point, every resume policy, and the scenario fencing exists for.

    That scenario: a holder stopped right before its commit and resumed after a takeover, at least
    ``MIN_STALE_COMMIT_SCENARIOS`` times (without fencing its commit is accepted: the negative control
    depends on it). Faults are moved onto fault-free slots (never the first: it has no predecessor), storm-free
    ones first: a stale-commit scenario on a slot with a storm does not count (an Athena storm fails the
    holder's query before it reaches its commit, and Lambda's retry carries no fault).
    """
    faults = [p.fault for p in plans if p.fault]
    stale = [
        p.fault
        for p in plans
        if p.fault
        and p.storm is None
        and p.fault["action"] == "pause"
        and p.fault["checkpoint"] in STALE_COMMIT_POINTS
        and p.fault.get("policy") != RESUME_AFTER_NEXT_SLOT
    ]
    # In priority order (a very short run may not have room for all): stale commits, kill points, policies.
    wanted: list[dict[str, str]] = [
        {
            "action": "pause",
            "checkpoint": rng.choice(STALE_COMMIT_POINTS),
            "policy": (RESUME_ON_TAKEOVER_ACQUIRED, RESUME_ON_TAKEOVER_DONE)[n % 2],
        }
        for n in range(MIN_STALE_COMMIT_SCENARIOS - len(stale))
    ]
    for point in KILL_POINTS:
        if not any(f["action"] == "kill" and f["checkpoint"] == point for f in faults):
            wanted.append({"action": "kill", "checkpoint": point})
    for policy in RESUME_POLICIES:
        if not any(f.get("policy") == policy for f in faults + wanted):
            wanted.append({"action": "pause", "checkpoint": rng.choice(PAUSE_POINTS), "policy": policy})
    calm = [p for p in plans[1:] if p.fault is None and p.storm is None]
    stormy = [p for p in plans[1:] if p.fault is None and p.storm is not None]
    rng.shuffle(calm)
    rng.shuffle(stormy)
    for plan, fault in zip(calm + stormy, wanted):
        plan.fault = fault


# --------------------------------------------------------------------------------------------------
# Deliveries
# --------------------------------------------------------------------------------------------------
@dataclass
class Delivery:
    """One Lambda invocation of one event (a retry is a new Delivery with the same request id)."""

    request_id: str
    slot: str
    round: int
    racer: int
    event: dict[str, Any]
    kind: str  # race | duplicate | late | ancient | future | retry | redelivery
    attempt: int = 1
    fault: dict[str, str] | None = None
    storm: dict[str, Any] | None = None
    forced: list[dict[str, Any]] = field(default_factory=list)  # aimed write faults (local.chaos.worker)
    due: float = 0.0
    worker_id: str | None = None
    done: bool = False
    paused: bool = False
    resume_policy: str | None = None
    paused_at: float = 0.0
    status: str | None = None
    reason: str | None = None
    token: int | None = None
    retry_of: Delivery | None = field(default=None, repr=False)


class Chaos:
    """One run: set-up, the slot loop, final state, checks, report. :meth:`close` is idempotent."""

    def __init__(self, options: ChaosOptions, *, out: Callable[[str], None] | None = None) -> None:
        self.o = options
        self.out = out or (lambda text: print(text, flush=True))
        self.rng = random.Random(options.seed + 1)
        self.t0 = time.monotonic()
        self.job = JobConfig.from_context(load_context(REPO_ROOT / "cdk.json")[CONTEXT_KEY])
        self.run_id = uuid.uuid4().hex[:8]
        self.lock_table = f"chaos-locks-{self.run_id}"
        self.results_table = f"chaos-results-{self.run_id}"
        self.workdir = options.workdir.resolve() / ("fenced" if options.fencing else "unfenced")
        self.state_dir = self.workdir / "engine"
        self.logs_dir = self.workdir / "logs"
        self.events: queue.Queue[tuple[str, dict[str, Any] | None]] = queue.Queue()
        self.workers: dict[str, Worker] = {}
        self.worker_seq = 0
        self.skews_ms: dict[str, int] = {}
        self.pending: list[tuple[float, int, Delivery]] = []  # heap of due deliveries
        self.seq = itertools.count()
        self.in_flight: dict[str, Delivery] = {}  # worker id -> delivery
        self.deliveries: list[Delivery] = []
        self.deferred: list[tuple[int, Delivery, Worker]] = []  # stopped holders resumed after a later slot
        self.history: list[dict[str, Any]] = []
        self.faults: Counter[str] = Counter()
        self.counters: Counter[str] = Counter()
        self.requests_by_write: Counter[str] = Counter()  # the lock's writes sent (local.chaos.worker.classify_write)
        self.dead_lettered: list[str] = []
        self.future_slots: dict[str, int] = {}  # near-future slot iso -> its lead (s) when first delivered
        self.future_dead_lettered: list[str] = []
        self.harness_errors: list[str] = []
        self.not_before = 0.0
        self.endpoint: str | None = None
        self._ddb_local: Any = None
        self._moto_proc: Any = None
        self._closed = False

    # ---- output ------------------------------------------------------------------------------------
    def say(self, text: str) -> None:
        self.out(f"[{time.monotonic() - self.t0:7.1f}s] {text}")

    def record(self, what: str, t_ns: int | None = None, **data: Any) -> None:
        self.history.append({"what": what, "t_ns": t_ns if t_ns is not None else time.monotonic_ns(), **data})

    # ---- set-up ------------------------------------------------------------------------------------
    def setup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)
        for sub in (self.state_dir, self.logs_dir):
            sub.mkdir(parents=True, exist_ok=True)
        self.endpoint = self._start_backend()
        self._create_tables()
        from sample_data.flights import ensure_flights_parquet

        self.data_dir = ensure_flights_parquet().parent.parent
        self.say(
            f"{self.o.backend} at {self.endpoint}; tables {self.lock_table}, {self.results_table};"
            f" starting {self.o.racers} execution environments (fencing {'on' if self.o.fencing else 'OFF'})"
        )
        for _ in range(self.o.racers):
            self._spawn()
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        while len(self._idle()) < self.o.racers:
            if time.monotonic() > deadline:
                raise ChaosHarnessError(f"only {len(self._idle())} of {self.o.racers} environments became ready")
            self._pump(0.2)

    def _start_backend(self) -> str:
        if self.o.backend == "dynamodb-local":
            if self.o.dynamodb_endpoint:
                return self.o.dynamodb_endpoint
            from local.emulators.dynamodb_local import DynamoDBLocal, ensure_dynamodb_local

            self._ddb_local = DynamoDBLocal(ensure_dynamodb_local()).start()
            return str(self._ddb_local.endpoint_url)
        if self.o.backend == "atomic-moto":
            from local.emulators.atomic_moto import start_server_process

            self._moto_proc, endpoint = start_server_process(log_path=self.workdir / "moto.log", env=self._aws_env())
            return str(endpoint)
        raise ValueError(f"backend must be one of {BACKENDS}, got {self.o.backend!r}")

    def _aws_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(FAKE_CREDENTIALS, AWS_REGION=REGION, AWS_DEFAULT_REGION=REGION)
        return env

    def dynamodb(self) -> Any:
        return boto3.client(
            "dynamodb",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            aws_session_token="testing",
            config=Config(retries={"mode": "standard", "max_attempts": 5}),
        )

    def _create_tables(self) -> None:
        ddb = self.dynamodb()
        create_lock_table(ddb, self.lock_table)
        create_results_table(ddb, self.results_table)

    def worker_env(self) -> dict[str, str]:
        job, o = self.job, self.o
        env = self._aws_env()
        env.update(
            {
                "AWS_ENDPOINT_URL_DYNAMODB": str(self.endpoint),
                "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(LAMBDAS_DIR)]),
                "PYTHONUNBUFFERED": "1",
                "AWS_LAMBDA_FUNCTION_NAME": FUNCTION_NAME,
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(job.lambda_memory_mb),
                "POWERTOOLS_TRACE_DISABLED": "true",
                "POWERTOOLS_LOG_LEVEL": "WARNING",
            }
        )
        # What the stack sets, with the short chaos lease and a slot age covering the replayed backlog
        env.update(
            job.runtime_environment(
                lock_table_name=self.lock_table,
                results_table_name=self.results_table,
                lease_duration_s=o.lease_s,
                heartbeat_interval_s=o.heartbeat_s,
                max_slot_age_s=o.max_slot_age_s,
            )
        )
        return env

    def _spawn(self) -> Worker:
        self.worker_seq += 1
        worker_id = f"w{self.worker_seq}"
        skew_ms = self.rng.randint(-self.o.max_skew_ms, self.o.max_skew_ms)
        self.skews_ms[worker_id] = skew_ms
        argv = [
            sys.executable,
            "-m",
            "local.chaos.worker",
            "--worker-id",
            worker_id,
            "--log-file",
            str(self.logs_dir / f"{worker_id}.log"),
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
            "--seed",
            str(self.o.seed * 1000 + self.worker_seq),
            "--transient-rate",
            str(self.o.transient_rate),
            "--clock-skew-ms",
            str(skew_ms),
            "--write-fault-scale",
            str(self.o.write_fault_scale),
        ]
        if not self.o.fencing:
            argv.append("--no-fencing")
        worker = Worker(worker_id, argv, self.worker_env(), self.logs_dir / f"{worker_id}.log", self.events)
        self.workers[worker_id] = worker
        return worker

    def _idle(self) -> list[Worker]:
        return [w for w in self.workers.values() if w.state == "idle"]

    def _alive(self) -> int:
        return sum(1 for w in self.workers.values() if w.state != "dead")

    # ---- the run -----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        plans, ancient = make_plan(self.o)
        self.plans = plans
        self.ancient = ancient
        started = time.monotonic()
        run_deadline = started + self.o.max_run_s
        for plan in plans:
            while time.monotonic() < self.not_before:
                self._step(min(0.05, self.not_before - time.monotonic()))
            self._fire(plan)
            self._settle(plan, run_deadline)
            if (plan.index + 1) % 25 == 0 or plan.index + 1 == len(plans):
                self.say(
                    f"slot {plan.index + 1}/{len(plans)} settled; {self.counters['succeeded']} commits,"
                    f" {sum(self.faults.values())} faults so far"
                )
        self._drain(run_deadline)
        self.run_s = time.monotonic() - started
        return self.report()

    def _fire(self, plan: SlotPlan) -> None:
        now = time.monotonic()
        for racer in range(self.o.racers):
            storm = (
                plan.storm
                if plan.storm and (plan.storm["target"] == "athena" or plan.storm["racer"] == racer)
                else None
            )
            forced = plan.forced_for(racer)
            self._enqueue(
                Delivery(
                    str(uuid.uuid4()),
                    plan.iso,
                    plan.index,
                    racer,
                    self._event(plan.iso, racer),
                    "race",
                    fault=plan.fault,
                    storm=storm,
                    forced=forced,
                    due=now,
                )
            )
        for n in range(plan.duplicates):
            self.faults["duplicate_delivery"] += 1
            racer = self.rng.randrange(self.o.racers)
            forced = plan.forced_for(racer)  # a duplicate may win the race
            self._enqueue(
                Delivery(
                    str(uuid.uuid4()),
                    plan.iso,
                    plan.index,
                    racer,
                    self._event(plan.iso, racer),
                    "duplicate",
                    fault=plan.fault,
                    forced=forced,
                    due=now + self.rng.uniform(0, 0.2),
                )
            )
        if plan.late:
            kind = "ancient" if plan.late in self.ancient else "late"
            self.faults[f"{kind}_delivery"] += 1
            # An ancient slot is recorded MISSED (too_old) by this very delivery: lose that record's answer.
            forced = [dict(FORCED_MISSED_RESEND)] if kind == "ancient" and self.o.write_fault_scale > 0 else []
            self._enqueue(
                Delivery(
                    str(uuid.uuid4()), plan.late, plan.index, 0, self._event(plan.late, 0), kind, forced=forced, due=now
                )
            )
        if plan.future_lead_s:
            # Scheduled at least future_lead_s ahead, on a minute (a Slot is floored to its minute).
            now_s = int(time.time())
            ahead = -(-(now_s + plan.future_lead_s) // 60) * 60
            future = iso(dt.datetime.fromtimestamp(ahead, dt.UTC))
            self.future_slots.setdefault(future, ahead - now_s)
            self.faults["future_delivery"] += 1
            racer = self.rng.randrange(self.o.racers)
            self._enqueue(
                Delivery(
                    str(uuid.uuid4()),
                    future,
                    plan.index,
                    racer,
                    self._event(future, racer),
                    "future",
                    due=now + self.rng.uniform(0, 0.2),
                )
            )
        if plan.storm:
            self.faults[f"storm_{plan.storm['target']}"] += 1

    def _event(self, slot_iso: str, racer: int) -> dict[str, Any]:
        # The stack's Scheduler input (stacks/constructs/fanout_schedule.py): same for every racer but the index.
        return {"scheduled_time": slot_iso, "execution_id": str(uuid.uuid4()), "racer": racer, "job": self.job.job_name}

    def _enqueue(self, delivery: Delivery) -> None:
        self.deliveries.append(delivery)
        heapq.heappush(self.pending, (delivery.due, next(self.seq), delivery))

    def _quiet(self) -> bool:
        busy = [d for d in self.in_flight.values() if not (d.paused and d.resume_policy == RESUME_AFTER_NEXT_SLOT)]
        return not self.pending and not busy

    def _settle(self, plan: SlotPlan, run_deadline: float) -> None:
        deadline = min(run_deadline, time.monotonic() + max(120.0, 4 * self.o.timeout_s))
        while not self._quiet():
            if time.monotonic() > deadline:
                raise ChaosHarnessError(f"slot {plan.iso} did not settle within its bound")
            self._step(0.05)
        # Stopped holders waiting for a later slot: resume those whose slot is now behind us.
        for entry in list(self.deferred):
            round_, delivery, worker = entry
            if plan.index > round_:
                self.deferred.remove(entry)
                self._resume(delivery, worker, "the next slot has run")

    def _drain(self, run_deadline: float) -> None:
        for round_, delivery, worker in list(self.deferred):
            self._resume(delivery, worker, "end of run")
        self.deferred.clear()
        deadline = min(run_deadline, time.monotonic() + max(120.0, 4 * self.o.timeout_s))
        while self.pending or self.in_flight:
            if time.monotonic() > deadline:
                raise ChaosHarnessError("the last deliveries did not finish within their bound")
            self._step(0.05)

    def _step(self, timeout_s: float) -> None:
        self._pump(timeout_s)
        self._dispatch()
        self._check_timeouts()

    def _dispatch(self) -> None:
        now = time.monotonic()
        while self.pending and self.pending[0][0] <= now:
            idle = self._idle()
            if not idle:
                starting = any(w.state == "starting" for w in self.workers.values())
                if not starting and self._alive() < self.o.racers + EXTRA_ENVIRONMENTS:
                    self._spawn()  # Lambda scales out: a cold environment
                return
            _, _, delivery = heapq.heappop(self.pending)
            worker = min(idle, key=lambda w: w.last_used)
            delivery.worker_id = worker.id
            worker.invocation = delivery
            worker.state = "busy"
            worker.served += 1
            worker.last_used = now
            self.in_flight[worker.id] = delivery
            self.record(
                "deliver",
                request_id=delivery.request_id,
                slot=delivery.slot,
                kind=delivery.kind,
                attempt=delivery.attempt,
                worker=worker.id,
            )
            message = {
                "type": "invoke",
                "request_id": delivery.request_id,
                "event": delivery.event,
                "timeout_ms": self.o.timeout_s * 1000,
                "fault": delivery.fault,
                "storm": delivery.storm,
                "forced": delivery.forced,
            }
            if not worker.send(message):
                self.say(f"could not deliver to {worker.id}; it has exited")

    def _check_timeouts(self) -> None:
        now = time.monotonic()
        for worker_id, delivery in list(self.in_flight.items()):
            worker = self.workers[worker_id]
            if delivery.paused:
                if now - delivery.paused_at > self.o.timeout_s:  # bounded: never stopped for longer than that
                    self._resume(delivery, worker, "stopped for the whole timeout")
                continue
            if worker.state == "busy" and now - worker.last_used > self.o.timeout_s + TIMEOUT_GRACE_S:
                self.faults["lambda_timeout"] += 1
                delivery.status = "timeout"
                worker.signal(signal.SIGKILL)

    # ---- events ------------------------------------------------------------------------------------
    def _pump(self, timeout_s: float) -> None:
        pump(self.events, timeout_s, self._handle)

    def _handle(self, worker_id: str, message: dict[str, Any] | None) -> None:
        worker = self.workers[worker_id]
        if message is None:
            self._on_exit(worker)
            return
        kind = message.get("type")
        delivery = self.in_flight.get(worker_id)
        t_ns = message.get("mono_ns")
        if kind == "ready":
            worker.init_ms = int(message.get("init_ms", 0))
            if worker.state == "starting":
                worker.state = "idle"
        elif kind == "init_error":
            self.harness_errors.append(f"{worker_id} failed to initialise: {message.get('error_message')}")
            raise ChaosHarnessError(f"{worker_id} failed to initialise: {message.get('error_message')}")
        elif kind == "injected":
            write = message.get("write")  # set on the faults aimed at the lock's writes
            self.faults[f"{message.get('kind')}@{write}" if write else str(message.get("kind"))] += 1
            self.record(
                "injected",
                t_ns,
                worker=worker_id,
                kind=message.get("kind"),
                operation=message.get("operation"),
                write=write,
                forced=message.get("forced"),
                request_id=delivery.request_id if delivery else None,
                slot=delivery.slot if delivery else None,
            )
        elif delivery is None:
            return
        elif kind == "superseded":
            self.record(
                "superseded",
                t_ns,
                request_id=delivery.request_id,
                slot=message.get("slot"),
                by_slot=message.get("by_slot"),
                recorded=message.get("recorded"),
                token=message.get("fencing_token"),
                worker=worker_id,
            )
        elif kind == "dynamodb_requests":
            self.record(
                "dynamodb_requests",
                t_ns,
                request_id=delivery.request_id,
                slot=delivery.slot,
                kind=delivery.kind,
                count=message.get("count"),
                writes=message.get("writes"),
                worker=worker_id,
            )
            for write, n in (message.get("writes") or {}).items():
                self.requests_by_write[write] += int(n)
        elif kind == "checkpoint":
            self.record(
                "checkpoint",
                t_ns,
                request_id=delivery.request_id,
                slot=delivery.slot,
                checkpoint=message.get("checkpoint"),
                token=message.get("fencing_token"),
                takeover=message.get("takeover"),
                reentered=message.get("reentered"),
                worker=worker_id,
            )
            if message.get("checkpoint") == "acquired" and delivery.kind == "redelivery":
                self._resume_stopped(delivery.slot, RESUME_ON_TAKEOVER_ACQUIRED)
        elif kind == "fault":
            self._on_fault(worker, delivery, message)
        elif kind == "resumed":
            self.record("resumed", t_ns, request_id=delivery.request_id, slot=delivery.slot, worker=worker_id)
        elif kind == "result" and message.get("request_id") == delivery.request_id:
            self._on_result(worker, delivery, message)

    def _on_fault(self, worker: Worker, delivery: Delivery, message: dict[str, Any]) -> None:
        action, checkpoint = message.get("action"), message.get("checkpoint")
        self.faults[f"{action}@{checkpoint}"] += 1
        self.record(
            "fault",
            message.get("mono_ns"),
            request_id=delivery.request_id,
            slot=delivery.slot,
            action=action,
            checkpoint=checkpoint,
            token=message.get("fencing_token"),
            worker=worker.id,
        )
        for other in self.deliveries:  # one fault per slot: later deliveries of the slot carry none
            if other.slot == delivery.slot and not other.done and other is not delivery:
                other.fault = None
        if action != "pause":
            return
        delivery.paused = True
        delivery.paused_at = time.monotonic()
        worker.state = "paused"
        policy = (delivery.fault or {}).get("policy", RESUME_ON_TAKEOVER_DONE)
        delivery.resume_policy = policy
        wait_s = self.o.lease_s + 2 * self.o.max_skew_ms / 1000 + TAKEOVER_MARGIN_S
        if policy == RESUME_AFTER_NEXT_SLOT:
            self.deferred.append((delivery.round, delivery, worker))
            self.not_before = max(self.not_before, time.monotonic() + wait_s)
        else:
            self._redeliver(delivery, wait_s)

    def _redeliver(self, stopped: Delivery, wait_s: float) -> None:
        """A late delivery of the stopped holder's slot (EventBridge delivers at least once)."""
        self.faults["late_delivery"] += 1
        racer = (stopped.racer + 1) % self.o.racers
        late = Delivery(
            str(uuid.uuid4()),
            stopped.slot,
            stopped.round,
            racer,
            self._event(stopped.slot, racer),
            "redelivery",
            due=time.monotonic() + wait_s,
            retry_of=stopped,
        )
        self._enqueue(late)

    def _resume_stopped(self, slot: str, policy: str) -> None:
        for worker_id, delivery in list(self.in_flight.items()):
            if delivery.paused and delivery.slot == slot and delivery.resume_policy == policy:
                self._resume(delivery, self.workers[worker_id], f"policy {policy}")

    def _resume(self, delivery: Delivery, worker: Worker, why: str) -> None:
        if not delivery.paused:
            return
        delivery.paused = False
        self.record("sigcont", request_id=delivery.request_id, slot=delivery.slot, worker=worker.id, why=why)
        if worker.state == "paused":
            worker.state = "busy"
            worker.last_used = time.monotonic()
        worker.signal(signal.SIGCONT)

    def _on_result(self, worker: Worker, delivery: Delivery, message: dict[str, Any]) -> None:
        self.in_flight.pop(worker.id, None)
        worker.invocation = None
        worker.state = "idle"
        worker.last_used = time.monotonic()
        delivery.done = True
        t_ns = message.get("mono_ns")
        if message.get("ok"):
            outcome = message.get("outcome") or {}
            delivery.status, delivery.reason = outcome.get("status"), outcome.get("reason")
            delivery.token = outcome.get("fencing_token")
            self.counters[str(delivery.status)] += 1
            self.record(
                "result",
                t_ns,
                request_id=delivery.request_id,
                slot=delivery.slot,
                status=delivery.status,
                reason=delivery.reason,
                token=delivery.token,
                kind=delivery.kind,
                worker=worker.id,
                queries_started=outcome.get("queries_started"),
                takeover=outcome.get("takeover"),
                reentered=outcome.get("reentered"),
                already_applied=outcome.get("already_applied"),
                superseded_slot=outcome.get("superseded_slot"),
                superseded_recorded=outcome.get("superseded_recorded"),
                error_type=(outcome.get("details") or {}).get("type") if delivery.status == "failed" else None,
            )
        else:
            delivery.status = f"error:{message.get('error_type')}"
            self.counters["errors"] += 1
            self.record(
                "error",
                t_ns,
                request_id=delivery.request_id,
                slot=delivery.slot,
                kind=delivery.kind,
                attempt=delivery.attempt,
                error_type=message.get("error_type"),
                error_message=message.get("error_message"),
            )
            self._retry(delivery, self.rng.uniform(0.05, 0.3) * self.o.lease_s)
        if delivery.kind == "redelivery":
            if (
                delivery.status == "lost"
                and delivery.reason == "held"
                and delivery.retry_of is not None
                and delivery.retry_of.paused
                and sum(1 for d in self.deliveries if d.kind == "redelivery" and d.slot == delivery.slot)
                <= MAX_REDELIVERIES
            ):
                self._redeliver(delivery.retry_of, self.o.lease_s / 2)  # the stopped holder's lease still held
            else:
                self._resume_stopped(delivery.slot, RESUME_ON_TAKEOVER_DONE)
                self._resume_stopped(delivery.slot, RESUME_ON_TAKEOVER_ACQUIRED)

    def _on_exit(self, worker: Worker) -> None:
        if worker.state == "dead":
            return
        with contextlib.suppress(Exception):
            worker.proc.wait(timeout=5)
        worker.exit_code = worker.proc.returncode
        previous, worker.state = worker.state, "dead"
        delivery = self.in_flight.pop(worker.id, None)
        if self._closed:
            return
        if previous == "starting":
            self.harness_errors.append(f"{worker.id} exited during its cold start (code {worker.exit_code})")
        if delivery is not None and not delivery.done:
            delivery.done = True
            crashed = (
                "timeout"
                if delivery.status == "timeout"
                else ("killed" if delivery.fault and delivery.fault.get("action") == "kill" else "died")
            )
            delivery.status = f"crashed:{crashed}"
            if crashed == "died":
                self.harness_errors.append(f"{worker.id} died unexpectedly (code {worker.exit_code}); see its log")
            self.record("crash", request_id=delivery.request_id, slot=delivery.slot, cause=crashed, worker=worker.id)
            delay = self.rng.uniform(0.5, 1.5) * self.o.lease_s if crashed == "killed" else 0.2
            self._retry(delivery, delay)
        if self._alive() < self.o.racers:
            self._spawn()  # Lambda replaces the environment (a cold start)

    def _retry(self, delivery: Delivery, delay_s: float) -> None:
        """Lambda's async retry: the same event and request id; after two retries, the on-failure destination."""
        future = delivery.kind == "future"
        if delivery.attempt > MAX_ASYNC_RETRIES:
            (self.future_dead_lettered if future else self.dead_lettered).append(delivery.slot)
            self.record("dlq", request_id=delivery.request_id, slot=delivery.slot, kind=delivery.kind)
            return
        self.faults["lambda_retry_future" if future else "lambda_retry"] += 1
        self._enqueue(
            replace(
                delivery,
                attempt=delivery.attempt + 1,
                kind="future" if future else "retry",
                fault=None,
                storm=None,
                forced=[],
                due=time.monotonic() + delay_s,
                worker_id=None,
                done=False,
                paused=False,
                resume_policy=None,
                status=None,
                reason=None,
                token=None,
            )
        )

    # ---- verdict -----------------------------------------------------------------------------------
    def final_state(self) -> FinalState:
        ddb = self.dynamodb()
        lock = SlotLock(self.lock_table, self.job.job_name, client=ddb)
        store = ResultsStore(self.results_table, dynamodb_client=ddb)
        state = FinalState()
        # Every slot item of the job, not only the planned ones: a near-future or unexpected slot shows too.
        prefix = lock.slot_key(Slot(0)).rsplit("#", 1)[0] + "#"
        for page in ddb.get_paginator("scan").paginate(
            TableName=self.lock_table,
            ConsistentRead=True,
            ProjectionExpression="pk",
        ):
            for key in page["Items"]:
                if key["pk"]["S"].startswith(prefix):
                    slot_iso = key["pk"]["S"][len(prefix) :]
                    item = lock.get_slot(Slot.parse(slot_iso))
                    if item is not None:
                        state.slot_items[slot_iso] = item
        for item in store.list_results(self.job.job_name):  # rows come inline unless offloaded to S3
            offloaded = "rows_s3_uri" in item
            state.results[item["slot"]] = store.get_result(self.job.job_name, item["slot"]) if offloaded else item
        state.latest = store.get_latest(self.job.job_name)
        return state

    def expected_rows(self, slots: list[str]) -> dict[str, Any]:
        """The rows the job's query gives for each slot, computed afresh (DuckDB, no simulated duration)."""
        from local.emulators.duckdb_engine import DuckDBQueryEngine

        settings = Settings.from_env(self.worker_env())
        expected: dict[str, Any] = {}
        with DuckDBQueryEngine(data_dir=self.data_dir, state_dir=self.workdir / "expected") as engine:
            for slot_iso in slots:
                parameters = settings.execution_parameters(Slot.parse(slot_iso).datetime)
                qid = engine.start_query(
                    sql=settings.query_sql,
                    parameters=parameters,
                    client_request_token=client_request_token(
                        "chaos-expected", slot_iso, 1, deployment_id=self.lock_table
                    ),
                )
                expected[slot_iso] = json.loads(json.dumps(engine.get_results(qid).rows))
        return expected

    def emitted_slot_missed(self) -> Counter[str]:
        """``SlotMissed`` values in the environments' logs (Powertools EMF lines), by reason."""
        emitted: Counter[str] = Counter()
        for log in sorted(self.logs_dir.glob("*.log")):
            with open(log, encoding="utf-8", errors="replace") as lines:
                emitted += chaos_checker.emf_metric_values(lines)
        return emitted

    def report(self) -> dict[str, Any]:
        final = self.final_state()
        succeeded = sorted(s for s, item in final.slot_items.items() if item.get("status") == "SUCCEEDED")
        expected = self.expected_rows(succeeded)
        planned = [p.iso for p in self.plans] + self.ancient
        emitted = self.emitted_slot_missed()
        violations = chaos_checker.check_history(self.history) + chaos_checker.check_final_state(
            final,
            planned_slots=planned,
            dead_lettered=self.dead_lettered,
            expected_rows=expected,
        )
        violations += chaos_checker.check_terminal_records(self.history, final, dead_lettered=self.dead_lettered)
        violations += chaos_checker.check_slot_missed_metric(emitted, final)
        violations += chaos_checker.check_future_refused(
            self.history, final, future_slots=self.future_slots, max_attempts=1 + MAX_ASYNC_RETRIES
        )
        future_runs = [e for e in self.history if e["what"] == "deliver" and e.get("kind") == "future"]
        future_requests = sum(
            int(e.get("count") or 0)
            for e in self.history
            if e["what"] == "dynamodb_requests" and e.get("kind") == "future"
        )
        missed = Counter(
            str(item.get("reason")) for item in final.slot_items.values() if item.get("status") == "MISSED"
        )
        failed = sum(1 for item in final.slot_items.values() if item.get("status") == "FAILED")
        failed_errors = Counter(
            str((item.get("error") or {}).get("type"))
            for item in final.slot_items.values()
            if item.get("status") == "FAILED"
        )
        queries = len(list((self.state_dir / "queries").glob("*.json")))
        latencies = self.takeover_latencies_s()
        committed = len(succeeded)
        return {
            "racers": self.o.racers,
            "slots": self.o.slots,
            "backend": self.o.backend,
            "fencing": self.o.fencing,
            "seed": self.o.seed,
            "lease_duration_s": self.o.lease_s,
            "heartbeat_interval_s": self.o.heartbeat_s,
            "max_clock_skew_s": self.o.max_skew_ms / 1000,
            "clock_skews_ms": {"min": min(self.skews_ms.values()), "max": max(self.skews_ms.values())},
            "transient_fault_rate": self.o.transient_rate,
            "write_fault_rates": {
                write: {"/".join(kinds): round(rate * self.o.write_fault_scale, 4) for kinds, rate in groups}
                for write, groups in WRITE_FAULTS.items()
            },
            "duration_s": round(self.run_s, 1),
            "invocations": len([d for d in self.deliveries if d.worker_id]),
            "environments_started": self.worker_seq,
            "faults_injected": dict(
                sorted((self.faults + Counter(clock_skew=sum(1 for skew in self.skews_ms.values() if skew))).items())
            ),
            "faults_injected_total": sum(self.faults.values()),  # events; clock_skew counts environments
            "violations": violations,
            "violations_by_check": dict(sorted(Counter(v["check"] for v in violations).items())),
            "checks": list(chaos_checker.CHECKS),
            "harness_errors": self.harness_errors,
            "slots_committed": committed,
            "slots_failed": failed,
            "slots_failed_errors": dict(sorted(failed_errors.items())),  # the FAILED items' error types
            "slots_missed": dict(sorted(missed.items())),
            "slots_dead_lettered": len(set(self.dead_lettered)),
            "ancient_slots": len(self.ancient),
            "slot_missed_metric": {"emitted": dict(sorted(emitted.items())), "stored": dict(sorted(missed.items()))},
            "future_deliveries": {
                "slots": len(self.future_slots),
                "invocations": len(future_runs),
                "lead_s": {
                    "min": min(self.future_slots.values(), default=None),
                    "max": max(self.future_slots.values(), default=None),
                },
                "refused": sum(
                    1
                    for e in self.history
                    if e["what"] == "error" and e.get("kind") == "future" and e.get("error_type") == "InvalidEventError"
                ),
                "dead_lettered": len(self.future_dead_lettered),
                "dynamodb_requests": future_requests,
            },
            "lock_writes_sent": dict(sorted(self.requests_by_write.items())),
            "outcomes": dict(sorted(self.counters.items())),
            "takeover_latency_s": {
                "p50": _round(percentile(latencies, 50)),
                "p95": _round(percentile(latencies, 95)),
                "samples": len(latencies),
            },
            "queries_started": queries,
            "queries_started_per_committed_slot": round(queries / committed, 3) if committed else None,
        }

    def takeover_latencies_s(self) -> list[float]:
        """From each kill/stop of a holder (not after its commit) to the next commit of that slot by anyone."""
        commits = [e for e in self.history if e["what"] == "checkpoint" and e.get("checkpoint") == "committed"]
        samples = []
        for fault in (e for e in self.history if e["what"] == "fault" and e.get("checkpoint") != "committed"):
            after = [
                c
                for c in commits
                if c["slot"] == fault["slot"]
                and c["t_ns"] > fault["t_ns"]
                and (c["request_id"], c["token"]) != (fault["request_id"], fault["token"])
            ]
            if after:
                samples.append((min(c["t_ns"] for c in after) - fault["t_ns"]) / 1e9)
        return samples

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for worker in self.workers.values():
            with contextlib.suppress(Exception):
                worker.stop(timeout_s=2.0)
        if self._ddb_local is not None:
            with contextlib.suppress(Exception):
                self._ddb_local.stop()
        if self._moto_proc is not None:
            from local.emulators.atomic_moto import stop_server_process

            with contextlib.suppress(Exception):
                stop_server_process(self._moto_proc)
        with contextlib.suppress(OSError):
            (self.workdir / "history.jsonl").write_text(
                "".join(json.dumps(e, default=str) + "\n" for e in self.history)
            )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def run_chaos(options: ChaosOptions, *, out: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run one chaos run and return its report (see :meth:`Chaos.report`); always stops its processes."""
    chaos = Chaos(options, out=out)
    try:
        chaos.setup()
        return chaos.run()
    finally:
        chaos.close()


def run_suite(
    options: ChaosOptions, *, control_slots: int | None, out: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """The fenced run, then (unless ``control_slots`` is ``None``) the negative control without fencing."""
    report = run_chaos(options, out=out)
    if control_slots is not None:
        control = run_chaos(replace(options, fencing=False, slots=control_slots), out=out)
        report["negative_control"] = {
            "slots": control["slots"],
            "racers": control["racers"],
            "fencing": False,
            "violations": len(control["violations"]),
            "violations_by_check": dict(Counter(v["check"] for v in control["violations"])),
            "examples": control["violations"][:5],
            "faults_injected_total": control["faults_injected_total"],
            "harness_errors": control["harness_errors"],
        }
    return report


def verdict(report: dict[str, Any]) -> list[str]:
    """Why the suite failed (empty when it passed)."""
    problems = [f"violation: {v['check']} {v['slot']}: {v['detail']}" for v in report["violations"]]
    problems += [f"harness: {e}" for e in report["harness_errors"]]
    control = report.get("negative_control")
    if control is not None and control["violations"] == 0:
        problems.append("the negative control (fencing off) found no violation: the checker proved nothing")
    return problems


def summary_lines(report: dict[str, Any]) -> list[str]:
    lat = report["takeover_latency_s"]
    fut = report["future_deliveries"]
    lines = [
        (
            f"racers {report['racers']} x slots {report['slots']} on {report['backend']} (seed {report['seed']},"
            f" lease {report['lease_duration_s']} s, skew up to {report['max_clock_skew_s']} s): {report['duration_s']} s"
        ),
        (
            f"invocations {report['invocations']}, environments started {report['environments_started']},"
            f" faults injected {report['faults_injected_total']}"
        ),
        "faults: " + ", ".join(f"{k} {v}" for k, v in report["faults_injected"].items()),
        (
            f"slots committed {report['slots_committed']}, failed {report['slots_failed']}, missed"
            f" {report['slots_missed']}, dead-lettered {report['slots_dead_lettered']}"
        ),
        (
            f"takeover latency p50 {lat['p50']} s, p95 {lat['p95']} s ({lat['samples']} takeovers);"
            f" queries started per committed slot {report['queries_started_per_committed_slot']}"
        ),
        (
            f"near-future deliveries {fut['invocations']} ({fut['slots']} slots,"
            f" {fut['lead_s']['min']}-{fut['lead_s']['max']} s ahead): refused {fut['refused']}, dead-lettered {fut['dead_lettered']}, DynamoDB requests"
            f" {fut['dynamodb_requests']}"
        ),
        (
            f"SlotMissed values emitted {report['slot_missed_metric']['emitted']}, MISSED items"
            f" {report['slot_missed_metric']['stored']}"
        ),
        (
            f"violations {len(report['violations'])} {report['violations_by_check']};"
            f" harness errors {len(report['harness_errors'])}"
        ),
    ]
    control = report.get("negative_control")
    if control is not None:
        lines.append(
            f"negative control (fencing off, {control['slots']} slots): {control['violations']} violations"
            f" {control['violations_by_check']}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--racers", type=int, default=16)
    parser.add_argument("--slots", type=int, default=200)
    parser.add_argument("--backend", choices=BACKENDS, default="dynamodb-local")
    parser.add_argument("--seed", type=int, default=ChaosOptions.seed)
    parser.add_argument("--lease-s", type=float, default=ChaosOptions.lease_s)
    parser.add_argument("--transient-rate", type=float, default=ChaosOptions.transient_rate)
    parser.add_argument(
        "--write-fault-scale",
        type=float,
        default=ChaosOptions.write_fault_scale,
        help="multiplies the rates of the faults aimed at the lock's writes (0: none)",
    )
    parser.add_argument(
        "--future-fraction",
        type=float,
        default=ChaosOptions.future_fraction,
        help="slots that also get a near-future delivery",
    )
    parser.add_argument("--control-slots", type=int, help="slots of the negative control (default: --slots)")
    parser.add_argument("--no-control", action="store_true", help="skip the negative control")
    parser.add_argument("--report", type=Path, default=REPO_ROOT / "chaos-report.json")
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / ".chaos")
    args = parser.parse_args(argv)
    if args.racers < 2 or args.slots < 3:
        parser.error("need at least 2 racers and 3 slots")
    options = ChaosOptions(
        racers=args.racers,
        slots=args.slots,
        backend=args.backend,
        seed=args.seed,
        lease_s=args.lease_s,
        transient_rate=args.transient_rate,
        workdir=args.workdir,
        write_fault_scale=args.write_fault_scale,
        future_fraction=args.future_fraction,
    )
    control_slots = None if args.no_control else (args.control_slots or args.slots)
    try:
        report = run_suite(options, control_slots=control_slots)
    except ChaosHarnessError as exc:
        print(f"chaos harness failed: {exc}", file=sys.stderr)
        return 2
    args.report.write_text(json.dumps(report, indent=2, default=str) + "\n")
    for line in summary_lines(report):
        print(line)
    problems = verdict(report)
    for problem in problems[:20]:
        print(f"FAIL {problem}", file=sys.stderr)
    print(f"report: {args.report}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
