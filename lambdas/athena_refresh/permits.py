"""The Athena capacity budget of one slot: a permit of the deployment's semaphore before ``StartQueryExecution``.

Athena limits the active DML queries (running + queued) per account and Region, shared by every workgroup; past
the quota ``StartQueryExecution`` answers ``TooManyRequestsException``
(https://docs.aws.amazon.com/athena/latest/ug/service-limits.html). Every job's winner takes one permit of the
deployment's :class:`slotlock.Semaphore` (N permits, on the lock table) before it starts its query, so at most N
of the deployment's queries are active at once. docs/protocol.md, "Capacity semaphore", has the semantics; this
module is the job's side of it (:class:`CapacityGate`):

- **Adopt.** A winner that adopts a predecessor's query (a takeover, a Lambda retry) inherits that query's permit
  (:meth:`slotlock.Semaphore.adopt_for`); it never waits, since the query already runs.
- **Take, or wait in line.** A first start takes a permit (2 DynamoDB requests when no one waits: one
  ``BatchGetItem``, one ``UpdateItem``), or waits in ticket order (first come, first served), heartbeating its
  lease, polling with capped, jittered backoff. A ``TooManyRequestsException``/``ThrottlingException`` that
  still reaches us (people's own queries took the account's quota) is waiting too, never a failed attempt.
- **Record, renew, release.** The query id is recorded on the permit in the same transaction as on the slot
  item, with an expiry covering the invocation and the takeover window (no renewal after it, whatever the
  query's length; before it, the permit's expiry follows the lease's); it is given back in the commit
  transaction. The permit names the deployment (the lock table's name), so a shared budget's same-named jobs
  never mix, and a take marks it "a start may follow": a start whose answer or record was lost stays counted
  for ``max_query_active_s`` past the permit's expiry, until Lambda's retry records it. A permit
  write that fails (the permit was reclaimed) never holds the result back: the write is dropped, and the
  slot goes on without a permit.
- **Deadline.** Waiting in place is billed Lambda time: past ``wait_in_place_s`` (or half the invocation's time)
  the slot is given back (:meth:`slotlock.SlotRun.give_back`) and a one-time EventBridge Scheduler schedule
  re-invokes the function ``retry_delay_s`` later (:class:`SchedulerDeferral`): not a Lambda error, never the
  failure queue. A slot that cannot have a permit before its maximum slot age is finished MISSED with reason
  ``capacity`` by the waiter at its last chance (:meth:`slotlock.SlotRun.miss`), exactly once: the commit is
  fenced. A manual run leaves ``manual_headroom`` permits to the live schedule.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from slotlock import (
    CommitConflictError,
    Permit,
    PermitLostError,
    Semaphore,
    SlotLockError,
    SlotRun,
    StalePermitTokenError,
    Ticket,
    TransientLockError,
)
from slotlock import table as lock_table

from . import contract
from .budget import CapacitySettings
from .deferral import Deferral, SchedulerDeferral
from .errors import QueryEngineError
from .report import SlotReport

logger = logging.getLogger(__name__)

#: Athena's answers that mean "no capacity now" (the active-query quota; the API rate): waiting, not failure.
CAPACITY_ERROR_CODES = frozenset({"TooManyRequestsException", "ThrottlingException"})
#: A slot's re-invocation must arrive this long before its maximum age (Scheduler delivery, clock skew).
DEFERRAL_MARGIN_MS = 60_000
#: The event key carrying how many times the slot was given back (set on the re-invocation's event).
EVENT_DEFERRAL = "capacity_deferral"
#: The slot's state key (recorded on the slot item for the next holder): ``{"deferrals", "waited_ms"}``.
STATE_KEY = "capacity"


class CapacityWaitTimeoutError(QueryEngineError):
    """No permit within this invocation and no deferral configured (local tools): retryable, the lease is
    released keeping the state, and the next invocation of the slot waits again."""

    def __init__(self, waited_ms: int) -> None:
        super().__init__("capacity", f"no capacity permit after {waited_ms} ms and no deferral configured")


Verdict = Literal["wait", "defer", "missed"]


@dataclass
class CapacityGate:
    """The permit of one slot run (one invocation). Build with :meth:`for_run`; ``permit`` is ``None`` until one
    is held (and again after it was lost, given back or released)."""

    semaphore: Semaphore
    settings: CapacitySettings
    event: Mapping[str, Any]
    report: SlotReport
    max_slot_age_ms: int | None
    deferral: Deferral | None = None
    query_is_terminal: Callable[[str], bool] | None = None
    sleep_s: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)
    poll_initial_s: float = 0.5
    poll_max_s: float = 5.0
    permit: Permit | None = None
    _ticket: Ticket | None = None
    _waited_before_ms: int = 0
    _wait_started_ms: int | None = None
    _invocation_ms: int | None = None

    # --- adopt / take -----------------------------------------------------------------------------------
    def adopt(self, run: SlotRun) -> None:
        """Inherit the permit of the query we adopt (one read; one write if it carries a lower token)."""
        self._load_state(run)
        try:
            self.permit = self.semaphore.adopt_for(
                run.lease, expires_at_ms=self.semaphore.query_expiry_ms(run.lease, run.lease_duration_ms)
            )
        except (PermitLostError, TransientLockError) as lost:
            logger.warning("adopting the query's permit failed, going on without it: %s", lost)
            self.permit = None
        self.report.permit = self.permit.how if self.permit else None

    def acquire(self, run: SlotRun) -> Verdict | None:
        """Take a permit, waiting in line; ``None`` once held (:attr:`permit`), else what to do instead:
        ``"defer"`` (give the slot back, :meth:`defer`) or ``"missed"`` (:meth:`miss`)."""
        if self.permit is not None:
            return None
        self._load_state(run)
        manual = run.lease.generation > lock_table.LIVE_GENERATION
        headroom = self.settings.manual_headroom if manual else 0
        delay_s = self.poll_initial_s
        while True:
            # A fresh lease first (when a heartbeat is due): the permit is taken with the lease's expiry, and a lease
            # that ran out since the acquisition (a stall) would give it none (the semaphore refuses a past expiry).
            self.heartbeat(run)
            got = self.semaphore.try_acquire_for(
                run.lease, ticket=self._ticket, query_is_terminal=self.query_is_terminal, headroom=headroom
            )
            if got.acquired:
                assert isinstance(got, Permit)
                self._took(run, got)
                return None
            self._ticket = got.ticket
            verdict = self.pause(run, delay_s)
            if verdict != "wait":
                return verdict
            delay_s = min(self.poll_max_s, delay_s * 2)

    def take(self, run: SlotRun) -> Verdict | None:
        """Hold a permit for a start: ``None`` once held, renewed right before the start (when due), else the verdict
        of :meth:`acquire`. A permit lost meanwhile (it expired naming no query while we stalled, and another slot
        reclaimed it) is waited for again: Athena does not check permits, so a query started without one is one more
        than the budget."""
        while True:
            verdict = self.acquire(run)
            if verdict is not None:
                return verdict
            self.heartbeat(run)
            if self.permit is not None:
                return None

    def waits_out(self, error: BaseException) -> bool:
        """Whether a ``StartQueryExecution`` error is waited out (:meth:`pause`): Athena's "no capacity now"."""
        return is_capacity_error(error)

    def pause(self, run: SlotRun, delay_s: float) -> Verdict:
        """One step of waiting (for a permit, or for Athena after ``TooManyRequestsException``): the verdict at
        the deadlines, else sleep ``delay_s`` (jittered, within the waiter's ticket TTL) and heartbeat."""
        now_ms = run.now_ms()
        if self._wait_started_ms is None:
            self._wait_started_ms = now_ms
        self.report.permit_wait_ms = self._waited_before_ms + (now_ms - self._wait_started_ms)
        slot_deadline_ms = self._slot_deadline_ms(run)
        if slot_deadline_ms is not None and now_ms >= slot_deadline_ms:
            return "missed"
        remaining_ms = run.remaining_ms()
        if self._invocation_ms is None:
            self._invocation_ms = remaining_ms
        in_place_ms = self.settings.wait_in_place_s * 1000
        if self._invocation_ms is not None:
            in_place_ms = min(in_place_ms, self._invocation_ms / 2)
        if now_ms - self._wait_started_ms >= in_place_ms:
            back_at_ms = now_ms + int(self.settings.retry_delay_s * 1000)
            if slot_deadline_ms is None or back_at_ms < slot_deadline_ms:
                return "defer"
            # The slot would come back too late: wait here to its deadline if this invocation lasts that long.
            if remaining_ms is None or remaining_ms - contract.COMMIT_RESERVE_S * 1000 < slot_deadline_ms - now_ms:
                return "missed"
        # Never longer than a heartbeat interval (or a short lease runs out in between), and renew the permit with
        # the lease: a holder waiting on Athena's own quota keeps its permit (an expired permit naming no query is
        # reclaimable, and this holder would still start its query once Athena lets it).
        self.sleep_s(min(delay_s, run.heartbeat_interval_ms / 1000) * (0.5 + self.rng.random() / 2))
        self.heartbeat(run)
        return "wait"

    # --- the holder's writes ----------------------------------------------------------------------------
    def record_query_writes(
        self, run: SlotRun, query_execution_id: str, *, replacing: str | None
    ) -> list[dict[str, Any]]:
        """The permit's record of the query, for the slot item's ``record_state`` transaction ([] without one),
        with an expiry covering this invocation and the takeover window after it
        (:meth:`slotlock.Semaphore.query_expiry_ms`): from then on the permit needs no renewal."""
        if self.permit is None:
            return []
        expires_ms = self.semaphore.query_expiry_ms(run.lease, run.lease_duration_ms)
        return [
            self.semaphore.record_query_item(
                self.permit, query_execution_id, replacing=replacing, expires_at_ms=expires_ms
            )
        ]

    def recorded(self, run: SlotRun, query_execution_id: str) -> None:
        """The record_state transaction carrying :meth:`record_query_writes` went through."""
        if self.permit is not None:
            expires_ms = self.semaphore.query_expiry_ms(run.lease, run.lease_duration_ms)
            self.permit = self.semaphore.recorded(self.permit, query_execution_id, expires_at_ms=expires_ms)

    def drop(self, why: str, error: Exception | None = None) -> None:
        """Go on without the permit (its write conflicted: reclaimed or taken over); at worst it leaks until its
        expiry and its query's end let a waiter reclaim it."""
        if self.permit is not None:
            logger.warning("going on without capacity permit %s (%s): %s", self.permit.key, why, error)
        self.permit = None

    def heartbeat(self, run: SlotRun) -> None:
        """Renew the lease when due, and the permit's expiry with it while the permit would otherwise expire before
        the lease (one more write: only before the query is recorded, e.g. waiting on Athena's own quota; a
        recorded permit's expiry already covers the invocation)."""
        if not run.heartbeat() or self.permit is None:
            return
        if self.permit.expires_at_ms >= run.lease.expires_at_ms:
            return
        try:
            self.permit = self.semaphore.renew(self.permit, run.lease.expires_at_ms)
        except (PermitLostError, StalePermitTokenError) as lost:
            self.drop("renew", lost)
        except TransientLockError as slow:
            logger.warning("capacity permit %s not renewed this time: %s", self.permit.key, slow)

    def release_writes(self) -> list[dict[str, Any]]:
        """The permit's release for the commit transaction ([] without one)."""
        return [] if self.permit is None else [self.semaphore.release_item(self.permit)]

    def release_now(self) -> None:
        """Give the permit back by itself (after a FAILED record, or before a deferral); errors only logged."""
        if self.permit is None:
            return
        try:
            self.semaphore.release(self.permit)
        except SlotLockError as exc:  # the permit expires, and its query is terminal or absent: reclaimable
            logger.warning("capacity permit %s not released: %s", self.permit.key, exc)
        self.permit = None

    def leave_line(self) -> None:
        if self._ticket is not None:
            try:
                self.semaphore.leave(self._ticket)
            except SlotLockError as exc:  # the ticket expires by itself
                logger.warning("could not leave the capacity line: %s", exc)
            self._ticket = None

    # --- endings ----------------------------------------------------------------------------------------
    def defer(self, run: SlotRun) -> dict[str, Any] | None:
        """Give the slot back and arrange its re-invocation ``retry_delay_s`` later; the summary, or ``None``
        when there is no deferral (local tools: raises :class:`CapacityWaitTimeoutError`, retryable)."""
        waited_ms = self.report.permit_wait_ms or 0
        if self.deferral is None:
            raise CapacityWaitTimeoutError(waited_ms)
        deferrals = self.report.capacity_deferrals + 1
        back_at_ms = run.now_ms() + int(self.settings.retry_delay_s * 1000)
        run.record_state(capacity={"deferrals": deferrals, "waited_ms": waited_ms})  # STATE_KEY
        self.release_now()
        event = {**self.event, EVENT_DEFERRAL: deferrals}
        owner = self.semaphore.owner_of(run.lease).id  # the slot's permit owner and waiter id: one name for one query
        name = self.deferral.defer(event, at_ms=back_at_ms, key=f"{owner}#d{deferrals}")
        self.leave_line()
        self.report.capacity_deferrals = deferrals
        detail = {"deferrals": deferrals, "waited_ms": waited_ms, "back_at_ms": back_at_ms, "schedule": name}
        logger.info(
            "slot %s given back for capacity (deferral %d, waited %d ms)", run.lease.slot.iso, deferrals, waited_ms
        )
        run.give_back("capacity", detail)
        return detail

    def miss(self, run: SlotRun) -> dict[str, Any]:
        """Finish the slot MISSED ``capacity`` (fenced: recorded once), the permit released in the same write."""
        detail = {
            "reason": "capacity",
            "waited_ms": self.report.permit_wait_ms or 0,
            "deferrals": self.report.capacity_deferrals,
            "permits": self.settings.permits,
        }
        self.leave_line()
        try:
            run.miss("capacity", detail, writes=self.release_writes())
        except CommitConflictError as conflict:
            self.drop("release", conflict)
            run.miss("capacity", detail)
        self.permit = None
        logger.warning("slot %s missed: no capacity permit before its maximum age", run.lease.slot.iso)
        return detail

    # --- plumbing ---------------------------------------------------------------------------------------
    def _took(self, run: SlotRun, permit: Permit) -> None:
        self.permit = permit
        self._ticket = None
        self.report.permit = permit.how
        self.report.permits_in_use = permit.in_use
        if self._wait_started_ms is not None or self._waited_before_ms:
            started = self._wait_started_ms if self._wait_started_ms is not None else run.now_ms()
            self.report.permit_wait_ms = self._waited_before_ms + (run.now_ms() - started)
        else:
            self.report.permit_wait_ms = 0

    def _load_state(self, run: SlotRun) -> None:
        state = run.state.get(STATE_KEY)
        if isinstance(state, Mapping):
            deferrals, waited = state.get("deferrals"), state.get("waited_ms")
            if isinstance(deferrals, int) and not isinstance(deferrals, bool) and deferrals >= 0:
                self.report.capacity_deferrals = deferrals
            if isinstance(waited, int) and not isinstance(waited, bool) and waited >= 0:
                self._waited_before_ms = waited

    def _slot_deadline_ms(self, run: SlotRun) -> int | None:
        """The last moment the slot may still get its permit: its maximum age, less the deferral margin. A manual
        generation has none: the maximum slot age does not apply to a manual run (a backfill runs old slots,
        docs/protocol.md rule 12); it waits, or is given back and comes back, until a permit frees."""
        if self.max_slot_age_ms is None or run.lease.generation > lock_table.LIVE_GENERATION:
            return None
        return run.lease.slot.epoch_ms + self.max_slot_age_ms - DEFERRAL_MARGIN_MS


@dataclass
class NoCapacityGate:
    """:class:`CapacityGate`'s null object, when the budget is off (``permits`` 0): no permit and no semaphore
    request; a query starts at once, Athena's "no capacity now" is an ordinary engine error, a heartbeat renews the
    lease only. Never returns a verdict, so :meth:`pause`, :meth:`defer` and :meth:`miss` are never called."""

    permit: Permit | None = None
    poll_initial_s: float = 0.0
    poll_max_s: float = 0.0

    def adopt(self, run: SlotRun) -> None:
        """Nothing to inherit."""

    def take(self, run: SlotRun) -> Verdict | None:
        return None

    def waits_out(self, error: BaseException) -> bool:
        return False

    def pause(self, run: SlotRun, delay_s: float) -> Verdict:
        raise RuntimeError("no capacity budget: nothing to wait for")

    def record_query_writes(
        self, run: SlotRun, query_execution_id: str, *, replacing: str | None
    ) -> list[dict[str, Any]]:
        return []

    def recorded(self, run: SlotRun, query_execution_id: str) -> None:
        """No permit to record the query on."""

    def drop(self, why: str, error: Exception | None = None) -> None:
        """No permit to drop."""

    def heartbeat(self, run: SlotRun) -> None:
        """Renew the lease when due (:meth:`slotlock.SlotRun.heartbeat`)."""
        run.heartbeat()

    def release_writes(self) -> list[dict[str, Any]]:
        return []

    def release_now(self) -> None:
        """No permit to give back."""

    def leave_line(self) -> None:
        """Never in line."""

    def defer(self, run: SlotRun) -> dict[str, Any] | None:
        raise RuntimeError("no capacity budget: nothing to defer for")

    def miss(self, run: SlotRun) -> dict[str, Any]:
        raise RuntimeError("no capacity budget: never missed for capacity")


#: The job's gate: a permit under the budget, or the null object without one.
Gate = CapacityGate | NoCapacityGate


def no_capacity_gate(report: SlotReport) -> NoCapacityGate:
    """The gate factory when the budget is off (:class:`NoCapacityGate`)."""
    return NoCapacityGate()


def is_capacity_error(error: BaseException) -> bool:
    """Athena said "no capacity now" (``TooManyRequestsException``, ``ThrottlingException``) past botocore's
    retries: wait, never a failed attempt."""
    return isinstance(error, QueryEngineError) and error.error_code in CAPACITY_ERROR_CODES


__all__ = [
    "CAPACITY_ERROR_CODES",
    "CapacityGate",
    "CapacitySettings",
    "CapacityWaitTimeoutError",
    "Deferral",
    "Gate",
    "NoCapacityGate",
    "SchedulerDeferral",
    "is_capacity_error",
    "no_capacity_gate",
]
