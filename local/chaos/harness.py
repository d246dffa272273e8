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
  (Lambda's two async retries included), and its slot never acquired nor recorded;
- **the operator's actions** (:mod:`local.chaos.operator`, ``slotlock``'s operator API, as ``tools.ops``):
  a **pause** of the job before a slot's deliveries (every racer must lose as ``paused`` after one request,
  exactly one record the slot MISSED, no query start) and the **resume** once they settled (the next slot
  runs; the paused slot's late delivery stays refused); a **forced release** of a live holder stopped mid-run
  (its later commit must be rejected, the slot completed by a takeover that adopts its query); **re-runs**:
  a new generation of a finished slot, requested and then invoked with the manual marker through the same
  fake service, beside the next slot's racers or on its own, which must commit exactly once, store its own
  result and never disturb the live schedule (see :func:`local.chaos.plan._plan_operator_actions`).

Every observation (who, what, slot, fencing token, outcome, machine-wide monotonic time) is recorded; at
the end :mod:`local.scenario.checker` checks the history, the stored state (every slot item of the lock table)
and the MISSED records the environments logged (the JSON log lines carrying ``missed_reason``), and
the run writes ``chaos-report.json``. The **negative control** repeats the run with fencing switched off by
a test-only knob (the commit transaction's conditions made vacuous, ``--no-fencing`` in the worker) and must
be reported as violating: it proves the checker can fail.

Where the parts live: the seeded plan in :mod:`local.chaos.plan`; the deliveries, Lambda's async retries
(same request id), timeouts, environments and the recorded history in the fake Lambda service that the demo
uses too (:mod:`local.emulators.lambda_service`); the tables in :mod:`local.emulators.deployment`; the
operator's actions and the read-back of every generation in :mod:`local.chaos.operator`; the checks run and
the report's figures in :mod:`local.chaos.verdict`; the report and history files written by
:mod:`local.reports`; the command line in :mod:`local.chaos.cli`. This module is the chaos preset of the scenario
driver (:class:`local.scenario.driver.Scenario`: set-up, bounded waits, takeovers, teardown): what the plan adds on
top of the service (duplicate, late, ancient and near-future deliveries, when a stopped holder resumes, when the
operator acts).

    python -m local.chaos [--racers 16] [--slots 200] [--backend dynamodb-local|atomic-moto] [--seed N]
                          [--write-fault-scale 1.0] [--future-fraction 0.1] [--operator-fraction 0.03]
                          [--control-slots N | --no-control] [--report chaos-report.json]

Every wait is bounded (per slot, per run, per process); the exit status is non-zero when the fenced run has
a violation, the harness failed, or the negative control found none.
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from local.chaos import operator as chaos_ops
from local.chaos import verdict
from local.chaos.operator import ChaosOperator
from local.chaos.plan import (
    FORCED_MISSED_RESEND,
    OPERATOR_RELEASE,
    REPO_ROOT,
    RESUME_AFTER_NEXT_SLOT,
    RESUME_ON_TAKEOVER_ACQUIRED,
    RESUME_ON_TAKEOVER_DONE,
    ChaosOptions,
    SlotPlan,
    iso,
    make_plan,
)
from local.emulators.deployment import LocalDeployment
from local.emulators.lambda_pool import Worker
from local.emulators.lambda_service import ERROR, KILLED, PAUSE, Delivery
from local.scenario.driver import MAX_REDELIVERIES, Scenario, ScenarioError, scheduler_event
from stacks.jobs import default_local_job, load_repo_jobs

EXTRA_ENVIRONMENTS = 8  # Lambda scales out beyond the racers for retries and late deliveries
WORKER_START_TIMEOUT_S = 180.0
TAKEOVER_MARGIN_S = 0.3
FUNCTION_NAME = "athena-refresh-chaos"
#: A manual invocation that returned without running its generation for one of these reasons (the manual lease
#: was busy or held, DynamoDB stayed unavailable) is invoked again, as the operator's tool would, a few times.
MANUAL_AGAIN_REASONS = ("busy", "held", "conflict", "unavailable")


class ChaosHarnessError(ScenarioError):
    """The harness itself failed (a process would not start, a slot never settled): not a protocol verdict."""


class Chaos(Scenario):
    """One run: the plan carried out on the fake Lambda service, final state, checks, report.

    The service (:class:`local.emulators.lambda_service.FakeLambda`) delivers, retries, times out and records
    the history; this driver decides what the plan adds on top (duplicate, late, ancient and near-future
    deliveries, when a stopped holder resumes, the late deliveries that take its lease over). Its environments
    run :mod:`local.chaos.worker`; the rest of the run's skeleton is :class:`local.scenario.driver.Scenario`'s.
    """

    error = ChaosHarnessError
    worker_module = "local.chaos.worker"

    def __init__(self, options: ChaosOptions, *, out: Callable[[str], None] | None = None) -> None:
        super().__init__(
            options, workdir=options.workdir.resolve() / ("fenced" if options.fencing else "unfenced"), out=out
        )
        self.rng = random.Random(options.seed + 1)
        self.definition = default_local_job(load_repo_jobs(REPO_ROOT)[1])
        self.job = self.definition.config
        self.deployment = self.add_deployment(
            LocalDeployment(
                self.definition,
                backend=options.backend,
                workdir=self.workdir,
                lock_table=f"chaos-locks-{self.run_id}",
                results_table=f"chaos-results-{self.run_id}",
                dynamodb_endpoint=options.dynamodb_endpoint,
            )
        )
        self.env: dict[str, str] = {}
        self.skews_ms: dict[str, int] = {}
        self.deferred: list[tuple[int, Delivery]] = []  # stopped holders resumed after a later slot
        self.faults: Counter[str] = Counter()  # what the plan added (deliveries, storms); the service counts the rest
        self.future_slots: dict[str, int] = {}  # near-future slot iso -> its lead (s) when first delivered
        self.operator: ChaosOperator | None = None
        self.operator_actions: Counter[str] = Counter()  # pause, resume, release, rerun (requests), manual_invoke
        self.manual: dict[str, tuple[str, int, dict[str, Any]]] = {}  # request id -> (slot, generation, event)
        self.not_before = 0.0
        self.plans: list[SlotPlan] = []
        self.ancient: list[str] = []
        self.run_s = 0.0

    # ---- set-up ------------------------------------------------------------------------------------
    def setup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)
        for sub in (self.state_dir, self.logs_dir):
            sub.mkdir(parents=True, exist_ok=True)
        endpoint = self.deployment.start()
        self.operator = ChaosOperator(self.deployment, self.job.job_name, lease_s=self.o.lease_s, run_id=self.run_id)
        self.prepare_data()
        # What the stack sets, with the short chaos lease and a slot age covering the replayed backlog
        self.env = self.deployment.function_env(
            function_name=FUNCTION_NAME,
            lease_duration_s=self.o.lease_s,
            heartbeat_interval_s=self.o.heartbeat_s,
            max_slot_age_s=self.o.max_slot_age_s,
            log_level="WARNING",
        )
        service = self.add_service(
            name=FUNCTION_NAME, env=self.env, environments=self.o.racers, extra_environments=EXTRA_ENVIRONMENTS
        )
        self.say(
            f"{self.o.backend} at {endpoint}; tables {self.deployment.lock_table}, {self.deployment.results_table};"
            f" starting {self.o.racers} execution environments (fencing {'on' if self.o.fencing else 'OFF'})"
        )
        service.ensure_ready(self.o.racers, WORKER_START_TIMEOUT_S)

    def environment_options(self, worker_id: str, seq: int) -> dict[str, Any]:
        skew_ms = self.rng.randint(-self.o.max_skew_ms, self.o.max_skew_ms)
        self.skews_ms[worker_id] = skew_ms
        extra = [
            *("--seed", str(self.o.seed * 1000 + seq), "--transient-rate", str(self.o.transient_rate)),
            *("--clock-skew-ms", str(skew_ms), "--write-fault-scale", str(self.o.write_fault_scale)),
        ]
        return {
            "simulated_duration_ms": self.o.query_ms,
            "function_name": FUNCTION_NAME,
            "memory_mb": self.job.lambda_memory_mb,
            "region": self.env["AWS_REGION"],
            "extra": extra if self.o.fencing else [*extra, "--no-fencing"],
        }

    # ---- the run -----------------------------------------------------------------------------------
    def run(self) -> None:
        service = self.lambda_service
        self.plans, self.ancient = make_plan(self.o)
        started = time.monotonic()
        run_deadline = started + self.o.max_run_s
        for plan in self.plans:
            while time.monotonic() < self.not_before:
                service.step(min(0.05, self.not_before - time.monotonic()))
            if plan.pause:
                chaos_ops.pause_before(self, plan)
            self._fire(plan)
            self._settle(plan, run_deadline)
            if plan.pause:
                chaos_ops.resume_after(self, plan)
            if plan.rerun_after:
                chaos_ops.rerun(self, plan.iso, plan, beside=None)
                self._settle(plan, run_deadline)
            if (plan.index + 1) % 25 == 0 or plan.index + 1 == len(self.plans):
                commits = sum(1 for d in service.deliveries if d.status == "succeeded")
                faults = sum(self.faults_injected().values())
                self.say(f"slot {plan.index + 1}/{len(self.plans)} settled; {commits} commits, {faults} faults so far")
        self._drain(run_deadline)
        self.run_s = time.monotonic() - started

    def _delivery(self, slot: str, plan: SlotPlan, racer: int, kind: str, **fields: Any) -> Delivery:
        return Delivery(str(uuid.uuid4()), slot, plan.index, racer, self._event(slot, racer), kind, **fields)

    def _fire(self, plan: SlotPlan) -> None:
        service = self.lambda_service
        now = time.monotonic()
        for racer in range(self.o.racers):
            storm = (
                plan.storm
                if plan.storm and (plan.storm["target"] == "athena" or plan.storm["racer"] == racer)
                else None
            )
            forced = plan.forced_for(racer)
            service.invoke(
                self._delivery(plan.iso, plan, racer, "race", fault=plan.fault, storm=storm, forced=forced, due=now)
            )
        for _ in range(plan.duplicates):
            self.faults["duplicate_delivery"] += 1
            racer = self.rng.randrange(self.o.racers)
            forced = plan.forced_for(racer)  # a duplicate may win the race
            due = now + self.rng.uniform(0, 0.2)
            service.invoke(self._delivery(plan.iso, plan, racer, "duplicate", fault=plan.fault, forced=forced, due=due))
        if plan.late:
            kind = "ancient" if plan.late in self.ancient else "late"
            self.faults[f"{kind}_delivery"] += 1
            # An ancient slot is recorded MISSED (too_old) by this very delivery: lose that record's answer.
            forced = [dict(FORCED_MISSED_RESEND)] if kind == "ancient" and self.o.write_fault_scale > 0 else []
            service.invoke(self._delivery(plan.late, plan, 0, kind, forced=forced, due=now))
        if plan.future_lead_s:
            # Scheduled at least future_lead_s ahead, on a minute (a Slot is floored to its minute).
            now_s = int(time.time())
            ahead = -(-(now_s + plan.future_lead_s) // 60) * 60
            future = iso(dt.datetime.fromtimestamp(ahead, dt.UTC))
            self.future_slots.setdefault(future, ahead - now_s)
            self.faults["future_delivery"] += 1
            racer = self.rng.randrange(self.o.racers)
            service.invoke(self._delivery(future, plan, racer, "future", due=now + self.rng.uniform(0, 0.2)))
        if plan.storm:
            self.faults[f"storm_{plan.storm['target']}"] += 1
        if plan.rerun:
            chaos_ops.rerun(self, plan.rerun, plan, beside=plan.iso)

    def _event(self, slot_iso: str, racer: int) -> dict[str, Any]:
        return scheduler_event(self.job.job_name, slot_iso, racer)

    def _settle(self, plan: SlotPlan, run_deadline: float) -> None:
        service = self.lambda_service
        deadline = min(run_deadline, time.monotonic() + max(120.0, 4 * self.o.timeout_s))
        self.settle(
            lambda: service.quiet(ignore=lambda d: d.paused and d.resume_policy == RESUME_AFTER_NEXT_SLOT),
            deadline=deadline,
            what=f"slot {plan.iso}",
        )
        # Stopped holders waiting for a later slot: resume those whose slot is now behind us.
        for entry in list(self.deferred):
            round_, delivery = entry
            if plan.index > round_:
                self.deferred.remove(entry)
                service.resume(delivery, "the next slot has run")

    # ---- the operator (local.chaos.operator) -------------------------------------------------------
    @property
    def ops(self) -> ChaosOperator:
        if self.operator is None:
            raise ChaosHarnessError("the run has not been set up")
        return self.operator

    def _drain(self, run_deadline: float) -> None:
        service = self.lambda_service
        for _, delivery in self.deferred:
            service.resume(delivery, "end of run")
        self.deferred.clear()
        self.settle(
            deadline=min(run_deadline, time.monotonic() + max(120.0, 4 * self.o.timeout_s)), what="the last deliveries"
        )

    # ---- hooks (local.emulators.lambda_service.ServiceHooks) ---------------------------------------
    def retry_delay_s(self, delivery: Delivery, cause: str) -> float:
        if cause == ERROR:
            return self.rng.uniform(0.05, 0.3) * self.o.lease_s
        if cause == KILLED:  # the killed holder's lease still holds for a while
            return self.rng.uniform(0.5, 1.5) * self.o.lease_s
        return 0.2

    def on_checkpoint(self, delivery: Delivery, message: dict[str, Any]) -> None:
        if message.get("checkpoint") == "acquired" and delivery.kind == "redelivery":
            self._resume_stopped(delivery.slot, RESUME_ON_TAKEOVER_ACQUIRED)

    def on_fault(self, delivery: Delivery, worker: Worker, message: dict[str, Any]) -> None:
        for other in self.lambda_service.deliveries:  # one fault per slot: later deliveries of the slot carry none
            if other.slot == delivery.slot and not other.done and other is not delivery:
                other.fault = None
        if message.get("action") != PAUSE:
            return
        policy = (delivery.fault or {}).get("policy", RESUME_ON_TAKEOVER_DONE)
        delivery.resume_policy = policy
        wait_s = self.o.lease_s + 2 * self.o.max_skew_ms / 1000 + TAKEOVER_MARGIN_S
        if (delivery.fault or {}).get("operator") == OPERATOR_RELEASE:
            # The operator releases the live lease now: the late delivery need not wait for it to run out,
            # only for the racers' clocks (skewed either way) to agree that it ended.
            chaos_ops.force_release(self, delivery, message)
            wait_s = 2 * self.o.max_skew_ms / 1000 + TAKEOVER_MARGIN_S
        if policy == RESUME_AFTER_NEXT_SLOT:
            self.deferred.append((delivery.round, delivery))
            self.not_before = max(self.not_before, time.monotonic() + wait_s)
        else:
            self._redeliver(delivery, wait_s)

    def on_finished(self, delivery: Delivery) -> None:
        manual = self.manual.get(delivery.request_id)
        if manual is not None:
            slot, generation, event = manual
            invoked = sum(1 for m in self.manual.values() if m[:2] == (slot, generation))
            if delivery.status == "lost" and delivery.reason in MANUAL_AGAIN_REASONS and invoked <= MAX_REDELIVERIES:
                chaos_ops.invoke_manual(self, slot, delivery.round, generation, event, delay_s=self.o.lease_s / 2)
            return
        if delivery.kind != "redelivery" or str(delivery.status).startswith("crashed:"):
            return
        stopped = delivery.retry_of
        if stopped is not None and self.lease_still_held(self.lambda_service, delivery, stopped):
            self._redeliver(stopped, self.o.lease_s / 2)  # the stopped holder's lease still held
        else:
            self._resume_stopped(delivery.slot, RESUME_ON_TAKEOVER_DONE)
            self._resume_stopped(delivery.slot, RESUME_ON_TAKEOVER_ACQUIRED)

    def _redeliver(self, stopped: Delivery, wait_s: float) -> None:
        """A late delivery of the stopped holder's slot (EventBridge delivers at least once)."""
        self.faults["late_delivery"] += 1
        racer = (stopped.racer + 1) % self.o.racers
        event = self._event(stopped.slot, racer)
        self.late_delivery(self.lambda_service, stopped, racer=racer, event=event, wait_s=wait_s)

    def _resume_stopped(self, slot: str, policy: str) -> None:
        for delivery in list(self.lambda_service.in_flight.values()):
            if delivery.paused and delivery.slot == slot and delivery.resume_policy == policy:
                self.lambda_service.resume(delivery, f"policy {policy}")

    # ---- verdict (local.chaos.verdict) -------------------------------------------------------------
    def faults_injected(self) -> Counter[str]:
        """The plan's faults and the service's, by kind (:func:`local.chaos.verdict.faults_injected`)."""
        return verdict.faults_injected(self)

    def report(self) -> dict[str, Any]:
        """Check the run and build its report (the keys of ``chaos-report.json``:
        :func:`local.chaos.verdict.build_report`)."""
        return verdict.build_report(self)


def run_chaos(options: ChaosOptions, *, out: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run one chaos run and return its report (see :meth:`Chaos.report`); always stops its processes."""
    return Chaos(options, out=out).execute()


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
