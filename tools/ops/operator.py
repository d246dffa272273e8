"""The operator's actions on a deployment: what ``python -m tools.ops`` does, without the terminal.

Each action reads or writes the lock table through :mod:`slotlock` (the same conditions as the racers) and
invokes the job's function through an :class:`Invoker`; the CLI (:mod:`tools.ops.cli`) only parses, asks for
confirmation and renders. Tests drive this module with the local fake Lambda service on both DynamoDB backends.

- ``status``: per job the live holder (owner, fencing token, lease expiry), the manual run in progress, last
  finished slot, last success and its age, the pause (who, when, why), and the capacity wait of the live lease's
  slot (:func:`capacity_wait`, from its slot item);
- ``history``: every generation, newest first, by ``Query`` on the history index (:class:`slotlock.SlotHistory`),
  each with its capacity wait;
- ``pause``/``resume``/``release``: one conditional UpdateItem each, audited on the lock item
  (:mod:`slotlock.ops.admin`);
- ``run`` (the current slot, through the live path like any racer), ``run --slot``/``rerun`` (a new generation
  through the manual path) and ``backfill`` (the range's slots one at a time, resumable: a generation the same
  command requested before is resumed or skipped, never requested twice).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from slotlock import (
    DEFAULT_LEASE_DURATION_S,
    HistoryRecord,
    LockRecord,
    OperatorAction,
    Slot,
    SlotHistory,
    SlotLock,
    pause,
    release,
    request_generation,
    resume,
)
from slotlock.history import decode_record
from slotlock.manual import GenerationRequest, find_requested
from slotlock.schedule import CronError, firings_between, latest_firings
from slotlock.table import STATUS_FAILED, STATUS_RUNNING, STATUS_SUCCEEDED, TERMINAL_STATUSES
from tools.ops.views import JobStatus, RunResult, capacity_wait

BackfillSelection = Literal["missed", "failed", "all"]
#: Between two reads of a run's history item while waiting for its outcome.
DEFAULT_POLL_S = 2.0


class OpsError(Exception):
    """An operator action was refused or failed; the message says what to do. Nothing was written unless it
    says so."""


class Invoker(Protocol):
    """How the CLI reaches a job's function (boto3's Lambda client on AWS, the fake service locally)."""

    def invoke_async(self, function_name: str, event: Mapping[str, Any]) -> str:
        """Invoke ``function_name`` asynchronously with ``event``; returns the request id."""
        ...

    def pause_s(self, seconds: float) -> None:
        """Wait ``seconds`` between two polls (locally: drive the fake service meanwhile)."""
        ...


class LambdaInvoker:
    """:class:`Invoker` over boto3's Lambda client: ``Invoke`` with ``InvocationType=Event`` (Lambda queues the
    event and retries it twice on error, keeping its request id, which is the lock owner):
    https://docs.aws.amazon.com/lambda/latest/dg/invocation-async.html"""

    def __init__(self, client: Any) -> None:
        self.client = client

    def invoke_async(self, function_name: str, event: Mapping[str, Any]) -> str:
        response = self.client.invoke(
            FunctionName=function_name, InvocationType="Event", Payload=json.dumps(dict(event)).encode()
        )
        if response.get("StatusCode") != 202:
            raise OpsError(f"Lambda did not queue the invocation of {function_name}: {response.get('StatusCode')}")
        return str(response.get("ResponseMetadata", {}).get("RequestId", ""))

    def pause_s(self, seconds: float) -> None:
        time.sleep(seconds)


#: The lease duration of the operator's :class:`slotlock.SlotLock` (slotlock's default): the operator never holds a
#: lease (the function it invokes does, with its job's setting); only the retry budget of a generation request (a
#: quarter of it) depends on it, so one value fits every job and the job registry need not carry each job's.
OPERATOR_LEASE_DURATION_S = DEFAULT_LEASE_DURATION_S


@dataclass(frozen=True)
class JobTarget:
    """One deployed job: its function and its schedule (cron in its time zone, for slots)."""

    name: str
    function_name: str
    schedule_expression: str
    schedule_timezone: str
    lease_duration_s: float = OPERATOR_LEASE_DURATION_S


@dataclass(frozen=True)
class Deployment:
    """A deployed stack as the operator sees it: the two tables and the jobs."""

    lock_table: str
    results_table: str
    jobs: Mapping[str, JobTarget]

    def job(self, name: str) -> JobTarget:
        if name not in self.jobs:
            raise OpsError(f"no job {name!r} in this deployment (jobs: {', '.join(sorted(self.jobs)) or 'none'})")
        return self.jobs[name]


@dataclass
class BackfillPlan:
    """The slots of a backfill: ``selected`` run (or resume), ``done`` were committed by this command before,
    ``excluded`` do not match ``--only``."""

    job: str
    run_id: str
    selected: list[Slot] = field(default_factory=list)
    done: list[Slot] = field(default_factory=list)
    excluded: list[Slot] = field(default_factory=list)


def backfill_run_id(job: str, start: Slot, end: Slot, only: str) -> str:
    """The default id of a backfill command: the same arguments give the same id, so running the same command
    again resumes it (a deliberate second backfill of the range passes its own ``--run-id``)."""
    digest = hashlib.sha256(json.dumps([job, start.iso, end.iso, only]).encode()).hexdigest()[:16]
    return f"backfill-{digest}"


def selects(records: list[HistoryRecord], only: BackfillSelection) -> bool:
    """Whether a slot with these history records (every generation) is selected by ``--only``:
    ``all``; ``missed``: no generation committed (SUCCEEDED or FAILED) and none running, a MISSED record or no
    record at all; ``failed``: the newest committed generation FAILED."""
    if only == "all":
        return True
    committed = [r for r in records if r.status in (STATUS_SUCCEEDED, STATUS_FAILED)]
    if only == "missed":
        return not committed and not any(r.status == STATUS_RUNNING for r in records)
    newest = max(committed, key=lambda r: r.generation, default=None)
    return newest is not None and newest.status == STATUS_FAILED


class Operator:
    """The actions, over one :class:`Deployment`.

    ``dynamodb``: a boto3 DynamoDB client; ``invoker``: see :class:`Invoker`; ``identity``: the caller's identity
    for the audit (the CLI passes STS ``GetCallerIdentity``'s ARN); ``clock_ms``: the caller's wall clock.
    """

    def __init__(
        self,
        deployment: Deployment,
        *,
        dynamodb: Any,
        invoker: Invoker,
        identity: Callable[[], str],
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        poll_s: float = DEFAULT_POLL_S,
    ) -> None:
        self.deployment = deployment
        self.dynamodb = dynamodb
        self.invoker = invoker
        self._identity = identity
        self._who: str | None = None
        self.clock_ms = clock_ms
        self.poll_s = poll_s
        self.history_reader = SlotHistory(deployment.lock_table, client=dynamodb)

    # --- plumbing -------------------------------------------------------------------------------------
    @property
    def who(self) -> str:
        """The caller's identity (asked once)."""
        if self._who is None:
            self._who = self._identity()
        return self._who

    def lock(self, job: str) -> SlotLock:
        target = self.deployment.job(job)
        return SlotLock(
            self.deployment.lock_table,
            target.name,
            client=self.dynamodb,
            lease_duration_s=target.lease_duration_s,
            clock_ms=self.clock_ms,
            max_slot_lead_s=None,
        )

    def now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.clock_ms() / 1000, dt.UTC)

    def current_slot(self, job: str) -> Slot:
        """The job's latest schedule firing at or before now."""
        target = self.deployment.job(job)
        (latest,) = latest_firings(target.schedule_expression, target.schedule_timezone, self.now(), 1)
        return Slot(int(latest.timestamp()))

    def check_slot(self, job: str, slot: Slot) -> None:
        """Refuse a slot that is not a firing of the job's schedule, or is in the future."""
        target = self.deployment.job(job)
        if slot.epoch_ms > self.clock_ms():
            raise OpsError(f"slot {slot.iso} is in the future: a manual run is for a past or the current slot")
        if not self.firings(job, slot, slot):
            raise OpsError(
                f"{slot.iso} is not a slot of {job} ({target.schedule_expression} in {target.schedule_timezone})"
            )

    def firings(self, job: str, start: Slot, end: Slot) -> list[dt.datetime]:
        """The job's schedule firings from ``start`` to ``end`` (both included). :raises OpsError: a bad cron."""
        target = self.deployment.job(job)
        try:
            return firings_between(target.schedule_expression, target.schedule_timezone, start.datetime, end.datetime)
        except CronError as exc:
            raise OpsError(f"job {job}: {exc}") from exc

    # --- read -----------------------------------------------------------------------------------------
    def status(self, job: str | Sequence[str] | None = None) -> list[JobStatus]:
        """Each job's (or ``job``'s, or those named) status, from three strongly consistent reads per job: the live
        and manual lock items, and the slot item of the live lease's slot (its capacity wait; none before a first
        acquisition); a fourth when the last finished slot did not succeed and is another (its reason)."""
        names = [job] if isinstance(job, str) else sorted(self.deployment.jobs) if job is None else list(job)
        statuses = []
        for name in names:
            lock = self.lock(name)
            live_item = lock.context.get_lock_item() or {}
            manual_ctx = lock.context.for_generation(2)
            manual_item = manual_ctx.get_lock_item() or {}
            live = lock.context.decode_lock(live_item) if live_item else LockRecord()
            slot_record = self.generation_record(name, live.lease_slot, 1) if live.lease_slot else None
            finished, last = live.last_finished_slot, None
            if finished is not None and live.last_finished_outcome in ("failed", "missed"):
                same = slot_record is not None and slot_record.slot == finished
                last = slot_record if same else self.generation_record(name, finished, 1)
            statuses.append(
                JobStatus(
                    job=name,
                    now_ms=self.clock_ms(),
                    live=live,
                    manual=manual_ctx.decode_lock(manual_item) if manual_item else LockRecord(),
                    live_item=live_item,
                    manual_item=manual_item,
                    slot_record=slot_record,
                    last_finished_record=last,
                )
            )
        return statuses

    def history(
        self, job: str, *, since: Slot | None = None, limit: int = 50, status: str | None = None
    ) -> Iterator[HistoryRecord]:
        """Every generation of ``job``'s slots since ``since``, newest first, at most ``limit`` records."""
        self.deployment.job(job)
        return self.history_reader.records(job, since=since, status=status, limit=limit, page_size=min(100, limit))

    def generation_record(self, job: str, slot: Slot, generation: int) -> HistoryRecord | None:
        """One generation's history item, strongly consistent (``None`` when absent)."""
        ctx = self.lock(job).context.for_generation(generation)
        item = ctx.io.get(ctx.slot_key(slot))
        return None if item is None else decode_record(item)

    # --- pause, resume, release -----------------------------------------------------------------------
    def pause(self, job: str, *, reason: str, dry_run: bool = False) -> OperatorAction:
        return pause(self.lock(job), reason=reason, requested_by=self.who, dry_run=dry_run)

    def resume(self, job: str, *, dry_run: bool = False) -> OperatorAction:
        return resume(self.lock(job), requested_by=self.who, dry_run=dry_run)

    def release(
        self, job: str, *, reason: str, force: bool = False, manual: bool = False, dry_run: bool = False
    ) -> OperatorAction:
        return release(
            self.lock(job), reason=reason, requested_by=self.who, force=force, manual=manual, dry_run=dry_run
        )

    # --- run, re-run, backfill ------------------------------------------------------------------------
    def run_current(self, job: str, *, reason: str, wait_s: float, dry_run: bool = False) -> RunResult:
        """Invoke the function for the current slot through the live path, like any racer (once per slot holds:
        a finished slot is not run again), and wait for the slot's terminal record."""
        slot = self.current_slot(job)
        if dry_run:
            return RunResult(job, slot, 1, "DRY_RUN")
        marker = {"run_id": f"run-{uuid.uuid4().hex[:12]}", "kind": "run", "requested_by": self.who, "reason": reason}
        request_id = self._invoke(job, slot, marker)
        return self.wait(job, slot, 1, wait_s=wait_s, request_id=request_id)

    def run_slot(
        self,
        job: str,
        slot: Slot,
        *,
        kind: Literal["run", "rerun"],
        reason: str,
        wait_s: float,
        dry_run: bool = False,
    ) -> RunResult:
        """A new generation of a past ``slot`` through the manual path; ``rerun`` requires the slot to have
        ended (SUCCEEDED, FAILED or MISSED, any generation). Refused while the slot's live run is RUNNING or a
        manual run holds the manual lease."""
        self.check_slot(job, slot)
        records = self.history_reader.slot_records(job, slot)
        live = self.generation_record(job, slot, 1)
        if live is not None and live.status == STATUS_RUNNING:
            raise OpsError(
                f"slot {slot.iso} of {job} is running on the live schedule (token {live.fencing_token}): wait"
            )
        if kind == "rerun" and not any(r.status in TERMINAL_STATUSES for r in [*records, *([live] if live else [])]):
            raise OpsError(f"slot {slot.iso} of {job} has not ended (no record): use `run --slot` to run it")
        self._refuse_busy_manual_lease(job)
        if dry_run:
            return RunResult(job, slot, 0, "DRY_RUN")
        request = request_generation(
            self.lock(job).context,
            slot,
            run_id=f"{kind}-{uuid.uuid4().hex[:12]}",
            kind=kind,
            requested_by=self.who,
            reason=reason,
        )
        return self._run_generation(job, request, kind=kind, reason=reason, wait_s=wait_s)

    def plan_backfill(
        self, job: str, start: Slot, end: Slot, *, only: BackfillSelection, run_id: str | None = None
    ) -> BackfillPlan:
        """The slots of ``[start, end]`` (schedule firings) that a backfill runs, resumes or skips."""
        self.deployment.job(job)
        if end.epoch_ms > self.clock_ms():
            raise OpsError(f"--to {end.iso} is in the future: a backfill ends at a past slot")
        firings = self.firings(job, start, end)
        plan = BackfillPlan(job, run_id or backfill_run_id(job, start, end, only))
        ctx = self.lock(job).context
        for firing in firings:
            slot = Slot(int(firing.timestamp()))
            mine = find_requested(ctx, slot, plan.run_id)
            if mine is not None and mine.status in (STATUS_SUCCEEDED, STATUS_FAILED):
                plan.done.append(slot)
            elif mine is not None or selects(self.history_reader.slot_records(job, slot), only):
                plan.selected.append(slot)
            else:
                plan.excluded.append(slot)
        return plan

    def backfill(
        self,
        plan: BackfillPlan,
        *,
        reason: str,
        wait_s: float,
        on_result: Callable[[RunResult], None] = lambda result: None,
    ) -> list[RunResult]:
        """Run ``plan``'s selected slots one at a time through the manual path, oldest first: a generation this
        command requested before is resumed (re-invoked: it adopts its recorded query) or, once committed,
        skipped; otherwise a new one is requested. ``on_result`` is called after each slot (a progress bar).
        Interrupting it (Ctrl-C, a crash) loses nothing: the same command resumes."""
        results: list[RunResult] = []
        ctx = self.lock(plan.job).context
        for slot in plan.selected:
            self._refuse_busy_manual_lease(plan.job)
            request = request_generation(
                ctx, slot, run_id=plan.run_id, kind="backfill", requested_by=self.who, reason=reason, resume=True
            )
            if request.status in (STATUS_SUCCEEDED, STATUS_FAILED):
                result = RunResult(plan.job, slot, request.generation, request.status, skipped=True, resumed=True)
            else:
                result = self._run_generation(plan.job, request, kind="backfill", reason=reason, wait_s=wait_s)
            results.append(result)
            on_result(result)
            if result.timed_out:
                raise OpsError(
                    f"slot {slot.iso} generation {request.generation} did not end within {wait_s:.0f} s (status"
                    f" {result.status}); run the same command again to resume"
                )
        return results

    def _run_generation(
        self, job: str, request: GenerationRequest, *, kind: str, reason: str, wait_s: float
    ) -> RunResult:
        marker = {
            "generation": request.generation,
            "run_id": request.run_id,
            "kind": kind,
            "requested_by": self.who,
            "reason": reason,
        }
        request_id = self._invoke(job, request.slot, marker)
        result = self.wait(job, request.slot, request.generation, wait_s=wait_s, request_id=request_id)
        result.resumed = not request.created
        return result

    def _invoke(self, job: str, slot: Slot, marker: Mapping[str, Any]) -> str:
        target = self.deployment.job(job)
        event = {"job": job, "scheduled_time": slot.iso, "manual": dict(marker)}
        return self.invoker.invoke_async(target.function_name, event)

    def _refuse_busy_manual_lease(self, job: str) -> None:
        manual_ctx = self.lock(job).context.for_generation(2)
        item = manual_ctx.get_lock_item()
        if not item:
            return
        record = manual_ctx.decode_lock(item)
        if record.locked(self.clock_ms()):
            slot = record.lease_slot.iso if record.lease_slot else "?"
            raise OpsError(
                f"a manual run of {job} is in progress (slot {slot} generation {record.lease_generation}, owner"
                f" {record.owner_id}, lease until {record.lease_expires_at_ms} ms): one manual run per job at a time"
            )

    def wait(self, job: str, slot: Slot, generation: int, *, wait_s: float, request_id: str | None = None) -> RunResult:
        """Poll the generation's history item (strongly consistent) until it is terminal or ``wait_s`` passed."""
        started = time.monotonic()
        record = None
        while True:
            record = self.generation_record(job, slot, generation)
            if record is not None and record.status in TERMINAL_STATUSES:
                return RunResult(job, slot, generation, record.status, record, request_id, time.monotonic() - started)
            if time.monotonic() - started >= wait_s:
                status = record.status if record is not None else "NOT_STARTED"
                return RunResult(
                    job, slot, generation, status, record, request_id, time.monotonic() - started, timed_out=True
                )
            self.invoker.pause_s(self.poll_s)


__all__ = [
    "BackfillPlan",
    "Deployment",
    "Invoker",
    "JobStatus",
    "JobTarget",
    "LambdaInvoker",
    "Operator",
    "OpsError",
    "RunResult",
    "backfill_run_id",
    "capacity_wait",
    "selects",
]
