"""``make capacity``: many jobs fire on the same minute against one Athena capacity budget; no AWS account.

Per run, on **AWS DynamoDB Local** (:mod:`local.emulators.dynamodb_local`) and the fake Lambda service the demo and
the chaos suite drive (:mod:`local.emulators.lambda_service`):

- ``--jobs`` copies of the sample job (``cap-000``, ...; one function each, as the stack deploys them) fire their
  ``--racers`` Scheduler-shaped deliveries on the same slot at once. Each delivery runs the REAL handler in a pool of
  ``--environments`` execution environments (:mod:`local.capacity.worker`: each invocation runs as its job's function;
  deliveries beyond the pool wait in the service's queue, as asynchronous invocations wait for concurrency);
- every winner takes a permit of the deployment's semaphore (``capacity.permits`` = ``--budget``) before it starts
  its query on the Athena stand-in, which enforces Athena's own quota (``--quota`` active queries, 20 starts/s,
  burst 80) across every environment and records each query's active interval; each job's query has its own
  duration (some longer than the lease), bounded by the stand-in's query timeout (``capacity.max_query_active_s``);
- a **second deployment** (``--second-jobs`` jobs, its own lock table; :mod:`local.capacity.phases`) shares that
  budget through ``CAPACITY_TABLE_NAME`` and the same Athena: its jobs are named like some of the first's and fire on
  the same slot, so their permit owners differ only by the deployment;
- a winner without a permit waits in place (heartbeating), past ``--wait-in-place-s`` gives the slot back, and the
  deferral (:class:`local.capacity.worker.LocalDeferral`) delivers the event again after the runtime's retry delay
  (``capacity.retry_delay_s``, at least 60 s) times ``--time-scale``;
- some permit holders are SIGKILLed (Lambda's async retry, with the same request id, must inherit the permit) or
  SIGSTOPped past their lease (a late delivery takes the slot over and inherits the permit; the stopped holder is
  resumed with SIGCONT and its writes are refused), some lose their StartQueryExecution answer (the stand-in
  applies the start, then the call fails retryably, once: the invocation fails and Lambda's retry, after the permit's
  expiry, inherits the permit and gets the same query back for the same ClientRequestToken), and a backfill
  (:mod:`local.capacity.backfill`) runs past slots of one job as manual generations beside the live schedule;
- then one probe invocation (a job of its own, nothing waiting) counts the DynamoDB requests of a winner's slot,
  and the **negative control** runs ``--control-jobs`` jobs the same way without the budget (``capacity.permits 0``):
  Athena's quota must then refuse starts (``TooManyRequestsException``), or the budget proved nothing.

The verdict (:mod:`local.capacity.report`) reads the engine's intervals, the permit writes DynamoDB accepted, the
outcomes and the invocations' log lines, runs the capacity checker (:mod:`local.scenario.checker.capacity`) and writes
``capacity-report.json``. Every wait is bounded (``--max-run-s``, the function's timeout). This module is the
capacity preset of the scenario driver (:class:`local.scenario.driver.Scenario`).
"""

from __future__ import annotations

import datetime as dt
import shutil
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from athena_refresh import contract
from local.capacity.backfill import Backfill, BackfillSlot
from local.capacity.phases import FunctionDelivery, Phase, build_phase
from local.capacity.plan import (
    LAMBDA_RETRY_DELAYS_S,
    LOSE_START_ANSWER,
    PROBE_JOB,
    TAKEOVER_MARGIN_S,
    CapacityOptions,
    CapacityPlan,
    lost_answer_retry_s,
    make_plan,
    permit_owner,
    second_plan,
)
from local.emulators.lambda_pool import Worker
from local.emulators.lambda_service import PAUSE, Delivery
from local.scenario.driver import REPO_ROOT, Scenario, ScenarioError, scheduler_event
from slotlock import SlotLock
from stacks.jobs import default_local_job, load_repo_jobs

FUNCTION_NAME = "athena-refresh-capacity"
WORKER_START_TIMEOUT_S = 600.0
PROGRESS_EVERY_S = 15.0
#: The probe's lease and heartbeat: the job's defaults (45 s, 15 s), so its short invocation renews nothing.
PROBE_LEASE = {contract.ENV_LEASE_DURATION_S: "45", contract.ENV_HEARTBEAT_INTERVAL_S: "15"}


class CapacityHarnessError(ScenarioError):
    """The harness itself failed (environments would not start, a phase never settled): not a verdict."""


class CapacityRun(Scenario):
    """The run: set-up, the budgeted phase (with the second deployment on its budget), the probes, the negative
    control; its environments run :mod:`local.capacity.worker`, the rest of the run's skeleton is
    :class:`local.scenario.driver.Scenario`'s. :meth:`close` is idempotent."""

    error = CapacityHarnessError
    worker_module = "local.capacity.worker"

    def __init__(self, options: CapacityOptions, *, out: Callable[[str], None] | None = None) -> None:
        super().__init__(options, workdir=options.workdir, out=out)
        self.template = default_local_job(load_repo_jobs(REPO_ROOT)[1])
        self.phases: list[Phase] = []
        self.base_env: dict[str, str] = {}
        self.deferrals: dict[str, str] = {}  # deferral key -> the request id of its delivery
        self.faults_fired: dict[str, str] = {}  # permit owner (the live slot) -> request id of the holder struck
        self.stopped: dict[str, FunctionDelivery] = {}  # owner -> its stopped holder
        self.fan_out: deque[FunctionDelivery] = deque()  # fired racers not yet handed to the service (:meth:`_feed`)
        self.notices = 0
        self._endpoint: str | None = options.dynamodb_endpoint

    # ---- set-up ------------------------------------------------------------------------------------
    def setup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.prepare_data()
        now = dt.datetime.now(dt.UTC)
        budgeted = self._phase("budget", make_plan(self.o, self.template, now), self.o.budget)
        if budgeted.plan.second_jobs:
            self._phase("second", second_plan(self.o, budgeted.plan), self.o.budget, shares=budgeted)
        self.base_env = budgeted.env
        service = self.add_service(name=FUNCTION_NAME, env=self.base_env, environments=self.o.environments)
        self.say(
            f"DynamoDB Local at {self._endpoint}; {self.o.jobs} jobs x {self.o.racers} racers on slot"
            f" {budgeted.plan.slot}, budget {self.o.budget}, Athena quota {self.o.quota}"
            + (f", {len(budgeted.plan.second_jobs)} jobs of a second deployment" if budgeted.plan.second_jobs else "")
            + f"; starting {self.o.environments} execution environments"
        )
        self.ensure_ready(service, self.o.environments, WORKER_START_TIMEOUT_S)
        self.say("environments ready")

    def report(self) -> dict[str, Any]:
        """The report (:func:`local.capacity.report.build_report`)."""
        from local.capacity.report import build_report

        return build_report(self)

    def _phase(self, name: str, plan: CapacityPlan, budget: int, *, shares: Phase | None = None) -> Phase:
        """A deployment (its tables on the shared DynamoDB Local, its engine state) and its functions' env
        (:func:`local.capacity.phases.build_phase`)."""
        phase = build_phase(
            name,
            plan,
            budget,
            options=self.o,
            template=self.template,
            workdir=self.workdir / name,
            run_id=self.run_id,
            endpoint=self._endpoint,
            function_name=FUNCTION_NAME,
            shares=shares,
        )
        self._endpoint = phase.deployment.endpoint
        self.add_deployment(phase.deployment)  # the first owns DynamoDB Local when the harness started it
        self.phases.append(phase)
        return phase

    def environment_options(self, worker_id: str, seq: int) -> dict[str, Any]:
        return {"function_name": FUNCTION_NAME, "memory_mb": self.o.memory_mb}

    # ---- deliveries --------------------------------------------------------------------------------
    def _deliver(
        self,
        phase: Phase,
        job: str,
        event: dict[str, Any],
        kind: str,
        *,
        racer: int = 0,
        due: float | None = None,
        env: dict[str, str] | None = None,
        retry_of: Delivery | None = None,
        fan_out: bool = False,
    ) -> FunctionDelivery:
        generation = int((event.get("manual") or {}).get("generation") or 1)
        owner = permit_owner(job, str(event["scheduled_time"]), generation, phase.lock_table)
        function_env = {**phase.env, contract.ENV_JOB_NAME: job, **(env or {})}
        overlay = {k: v for k, v in function_env.items() if self.base_env.get(k) != v}
        fault = phase.plan.faults.get(job)
        delivery = FunctionDelivery(
            str(uuid.uuid4()),
            owner,
            0,
            racer,
            event,
            kind,
            fault=fault.instruction() if fault and generation == 1 and owner not in self.faults_fired else None,
            due=time.monotonic() if due is None else due,
            retry_of=retry_of,
            env=overlay,
            owner=owner,
        )
        phase.request_ids.add(delivery.request_id)
        if fan_out:
            self.fan_out.append(delivery)
        else:
            self.lambda_service.invoke(delivery)
        return delivery

    def _phase_of(self, delivery: Delivery) -> Phase:
        return next(p for p in self.phases if delivery.request_id in p.request_ids)

    def fire(self, phases: list[Phase]) -> None:
        """Every job's racers on the slot at once, in every deployment: racer 0 of every job first (each deployment
        in turn), then racer 1, ... They wait in the fan-out queue (:meth:`_feed`) for an idle environment, all due
        now (their delay is measured from now)."""
        now = time.monotonic()
        for racer in range(self.o.racers):
            for phase in phases:
                for job in phase.plan.jobs:
                    event = scheduler_event(job, phase.plan.slot, racer)
                    self._deliver(phase, job, event, "race", racer=racer, due=now, fan_out=True)

    def _feed(self) -> None:
        """Hand the fan-out's deliveries to the service only as environments fall idle. The pool stands for Lambda's
        concurrency, which would run all of them at once: the fan-out waits for it, but what comes later (Lambda's
        retries, the late duplicate of a stopped holder's slot, the deferrals, the operator's invocations) goes to
        the service directly and takes the next idle environment, instead of queueing behind hundreds of racers
        that Lambda would have run long before."""
        service = self.lambda_service
        now = time.monotonic()
        due = sum(1 for at, _, _ in service.pending if at <= now)
        for _ in range(len(service.idle()) - due):
            if not self.fan_out:
                return
            delivery = self.fan_out.popleft()
            if delivery.owner in self.faults_fired:
                delivery.fault = None  # one fault per slot: it struck another delivery of the slot already
            service.invoke(delivery)

    # ---- hooks -------------------------------------------------------------------------------------
    def retry_delay_s(self, delivery: Delivery, cause: str) -> float:
        """Lambda's async retries (about 1, then 2 minutes), scaled; the retry of a lost StartQueryExecution answer
        as far past the lease (and so past the permit's expiry) as Lambda's minute after the job's 45 s lease."""
        scaled = LAMBDA_RETRY_DELAYS_S[min(delivery.attempt, len(LAMBDA_RETRY_DELAYS_S)) - 1] * self.o.time_scale
        return max(scaled, lost_answer_retry_s(self.o)) if delivery.fault_fired == LOSE_START_ANSWER else scaled

    def notice(self, text: str) -> None:
        self.notices += 1

    def on_message(self, delivery: Delivery, message: dict[str, Any]) -> None:
        kind = str(message.get("type"))
        data = {k: v for k, v in message.items() if k != "type"}
        self.lambda_service.record(kind, request_id=delivery.request_id, slot=delivery.slot, **data)
        if kind == "defer":
            self._defer(delivery, message)

    def _defer(self, delivery: Delivery, message: dict[str, Any]) -> None:
        """The runtime's deferral: the event again after its delay (``at_ms``, a minute or more) times the scale."""
        key = str(message["key"])
        if key in self.deferrals:
            return  # the same key twice is one invocation
        assert isinstance(delivery, FunctionDelivery)
        delay_s = max(0.0, (int(message["at_ms"]) - int(message["wall_ms"])) / 1000) * self.o.time_scale
        event = dict(message["event"])
        phase = self._phase_of(delivery)
        redelivery = self._deliver(
            phase, str(event["job"]), event, "deferred", due=time.monotonic() + delay_s, env=delivery.env
        )
        self.deferrals[key] = redelivery.request_id

    def on_fault(self, delivery: Delivery, worker: Worker, message: dict[str, Any]) -> None:
        assert isinstance(delivery, FunctionDelivery)
        self.faults_fired[delivery.owner] = delivery.request_id
        for other in self.lambda_service.deliveries:  # one fault per slot: later deliveries carry none
            if isinstance(other, FunctionDelivery) and other.owner == delivery.owner and other is not delivery:
                other.fault = None
        if message.get("action") == PAUSE:
            self.stopped[delivery.owner] = delivery
            self._redeliver(delivery, self.o.lease_s + TAKEOVER_MARGIN_S)

    def _redeliver(self, stopped: FunctionDelivery, wait_s: float) -> None:
        """A late delivery of the stopped holder's slot (EventBridge's at-least-once: a duplicate), once its lease
        has run out: it takes the slot over, adopts the running query and inherits the permit."""
        phase = self._phase_of(stopped)
        event = {**stopped.event, "execution_id": str(uuid.uuid4())}
        job = stopped.owner.split("#", 1)[0]
        self._deliver(phase, job, event, "redelivery", due=time.monotonic() + wait_s, env=stopped.env, retry_of=stopped)

    def on_finished(self, delivery: Delivery) -> None:
        if delivery.kind != "redelivery" or not isinstance(delivery, FunctionDelivery):
            return
        stopped = self.stopped.get(delivery.owner)
        if stopped is None or not stopped.paused:
            return
        if self.lease_still_held(self.lambda_service, delivery, stopped):
            self._redeliver(stopped, self.o.lease_s / 2)  # the stopped holder's lease still held
        else:
            self.lambda_service.resume(stopped, "its slot was taken over")

    # ---- phases ------------------------------------------------------------------------------------
    def run(self) -> None:
        """The budgeted phase (with the backfill and the faults) and the second deployment on its budget, its probe,
        then the negative control and its."""
        deadline = time.monotonic() + self.o.max_run_s
        budgeted = self.phases[0]
        self._run_phase([p for p in self.phases if p is budgeted or p.shares is budgeted], deadline, backfill=True)
        self._probe(budgeted, deadline)
        if self.o.control_jobs:
            now = dt.datetime.now(dt.UTC)
            plan = make_plan(self.o, self.template, now, jobs=self.o.control_jobs, faults=False)
            control = self._phase("control", plan, 0)
            self._run_phase([control], deadline, backfill=False)
            self._probe(control, deadline)

    def _run_phase(self, phases: list[Phase], deadline: float, *, backfill: bool) -> None:
        """``phases``' racers at once (a deployment and those sharing its budget), the first's backfill beside them,
        until nothing is due, running or queued any more."""
        service = self.lambda_service
        phase = phases[0]
        for each in phases:
            each.started_at = time.monotonic()
        plan = phase.plan
        if backfill and plan.backfill_job:
            lock = SlotLock(phase.lock_table, plan.backfill_job, client=phase.deployment.client("dynamodb"))
            phase.backfill = Backfill(
                lock,
                plan.backfill_job,
                [BackfillSlot(slot) for slot in plan.backfill_slots],
                invoke=lambda event: self._invoke_manual(phase, event),
                in_flight=self._in_flight,
                deployment=phase.lock_table,
            )
        self.say(
            f"{phase.name}: {len(plan.jobs)} jobs x {self.o.racers} racers fire on {plan.slot}"
            f" (budget {phase.budget or 'off'}, quota {self.o.quota})"
            + "".join(f"; {each.name}: {len(each.plan.jobs)} jobs on the same budget" for each in phases[1:])
            + (f"; backfill of {len(plan.backfill_slots)} slots of {plan.backfill_job}" if phase.backfill else "")
        )
        self.fire(phases)
        next_progress = time.monotonic() + PROGRESS_EVERY_S
        while True:
            self._feed()
            service.step(0.05)
            if phase.backfill is not None:
                phase.backfill.step()
            if not self.fan_out and service.quiet() and (phase.backfill is None or phase.backfill.done):
                break
            if time.monotonic() > deadline:
                raise CapacityHarnessError(f"phase {phase.name} did not settle within --max-run-s")
            if time.monotonic() >= next_progress:
                next_progress = time.monotonic() + PROGRESS_EVERY_S
                self.say(self._progress(phases))
        for each in phases:
            each.duration_s = time.monotonic() - each.started_at
        if phase.backfill is not None:
            self.harness_errors += phase.backfill.errors
        self.say(f"{phase.name}: settled in {phase.duration_s:.1f} s; {self._progress(phases)}")

    def _invoke_manual(self, phase: Phase, event: dict[str, Any]) -> None:
        """The operator's asynchronous invocation of a manual generation (a new request id, as Lambda's Invoke)."""
        self._deliver(phase, str(event["job"]), event, "manual")

    def _in_flight(self, owner: str) -> bool:
        service = self.lambda_service
        pending = any(isinstance(d, FunctionDelivery) and d.owner == owner for _, _, d in service.pending)
        running = any(isinstance(d, FunctionDelivery) and d.owner == owner for d in service.in_flight.values())
        return pending or running

    def _progress(self, phases: list[Phase]) -> str:
        mine = [d for d in self.lambda_service.deliveries if any(d.request_id in p.request_ids for p in phases)]
        committed = sum(1 for d in mine if d.status == "succeeded")
        deferred = sum(1 for d in mine if d.status == "deferred")
        return (
            f"{committed} commits, {deferred} deferrals, {len(self.lambda_service.in_flight)} running,"
            f" {len(self.lambda_service.pending) + len(self.fan_out)} queued, {len(mine)} invocations"
        )

    def _probe(self, phase: Phase, deadline: float) -> None:
        """One invocation of the probe job (nothing waits any more): the DynamoDB requests of a winner's slot."""
        event = scheduler_event(PROBE_JOB, phase.plan.slot, 0)
        delivery = self._deliver(phase, PROBE_JOB, event, "probe", env=PROBE_LEASE)
        phase.probe_request_id = delivery.request_id
        self.settle(deadline=deadline, what=f"{phase.name} probe")


def run_capacity(options: CapacityOptions, *, out: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the scenario and return its report (:func:`local.capacity.report.build_report`); always stops its
    processes."""
    return CapacityRun(options, out=out).execute()


__all__ = ["CapacityHarnessError", "CapacityOptions", "CapacityRun", "FunctionDelivery", "run_capacity"]
