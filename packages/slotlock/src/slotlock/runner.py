"""Run any scheduled handler once per slot: acquire, run, heartbeat, record state, fenced commit.

>>> lock = SlotLock("locks", "nightly-report", lease_duration_s=45)           # doctest: +SKIP
>>> @once_per_slot(lock)                                                     # doctest: +SKIP
... def handler(run: SlotRun, event, context):
...     report_id = run.state.get("report_id") or start_report(run.lease.slot)   # adopt a predecessor's work
...     run.record_state(report_id=report_id)
...     while not done(report_id):
...         run.heartbeat()                        # renews when due; raises LeaseLostError if taken over
...     run.commit(writes=[...], summary={"report_id": report_id})   # your writes, fenced and atomic

The decorated handler returns the :class:`SlotOutcome` as a plain dict (:meth:`SlotOutcome.as_dict`), which
Lambda's runtime serializes as the invocation's response (it JSON-encodes whatever a handler returns, also for an
asynchronous invocation, and fails the invocation with ``Runtime.MarshalError`` on anything else), so what the
wrapped function returns (``value``) must be JSON-serializable too. :meth:`SlotRunner.run_event` returns the
:class:`SlotOutcome` itself. Losing the race, finding the slot
finished, losing the lease mid-run or having a stale commit rejected all *return normally* (no Lambda
retry would help: someone else owns the slot). A write that DynamoDB refuses for good (:class:`WriteRejectedError`: an item over
400 KB, say) records the slot FAILED once with the reason, without the rejected writes, and returns
normally (no retry storm). Any other exception, the retryable :class:`TransientLockError` included,
releases the lease (keeping the recorded state for adoption) and propagates, so Lambda's async retry,
which keeps the request id, re-enters at once.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Protocol

from ._dynamodb import SlotLock
from ._lease import CommitReceipt, Lease, Loss
from .errors import (
    CorruptLockItemError,
    LeaseLostError,
    StaleFencingTokenError,
    StalePermitTokenError,
    WriteRejectedError,
)
from .slot import Slot

logger = logging.getLogger(__name__)

#: "corrupt" is reported by callers that catch ``CorruptLockItemError`` (a tampered item: not retried);
#: "unsupported_schema" by callers that catch ``UnsupportedSchemaVersionError`` (an item of a newer table layout:
#: not retried either; the runner itself lets both errors through).
OutcomeStatus = Literal[
    "succeeded", "failed", "lost", "missed", "lease_lost", "stale_rejected", "corrupt", "unsupported_schema", "deferred"
]

#: Checkpoints passed to a listener, in protocol order. Jobs may add their own (e.g. "query_started").
CHECKPOINT_ACQUIRED = "acquired"
CHECKPOINT_STATE_RECORDED = "state_recorded"
CHECKPOINT_BEFORE_COMMIT = "before_commit"
CHECKPOINT_COMMITTED = "committed"


class Listener(Protocol):
    """Observer of protocol checkpoints (metrics, tracing, fault injection in tests)."""

    def __call__(self, checkpoint: str, lease: Lease) -> None: ...


@dataclass(frozen=True)
class SlotOutcome:
    """What one invocation did for its slot (JSON-safe via :meth:`as_dict`).

    ``status``: ``succeeded``/``failed`` (we committed the slot's final outcome; ``reason``
    ``write_rejected`` when DynamoDB refused the commit for good), ``lost`` (another racer has it, or it
    is finished; ``reason`` says which), ``missed`` (too old, overrun, paused or superseded, and this racer
    recorded it; ``reason`` is the record's: a superseded slot given back for, e.g., ``capacity`` is MISSED
    ``capacity``), ``lease_lost`` (taken over mid-run; we wrote nothing more), ``stale_rejected`` (our
    commit carried a stale fencing token and was rejected atomically), ``deferred`` (the holder gave the slot
    back unfinished, keeping its state, for a later invocation it arranged: ``reason`` says why, e.g. ``capacity``).

    ``superseded_slot``/``superseded_recorded``: our acquisition replaced the expired holder of that
    older slot, and (``superseded_recorded``) we are the one that recorded it MISSED (its reason:
    :attr:`Lease.superseded_reason`).

    ``generation``: 1 for the live schedule's run of the slot, 2+ for a manual run (:mod:`slotlock.manual`).
    """

    status: OutcomeStatus
    job_name: str
    slot: str
    owner_id: str
    fencing_token: int | None = None
    reason: str | None = None
    takeover: bool = False
    reentered: bool = False
    adopted_state: bool = False
    already_applied: bool = False
    last_succeeded_at_ms: int | None = None  # job's last success before this run, from the lock item
    superseded_slot: str | None = None
    superseded_recorded: bool = False
    generation: int = 1
    value: Any = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for the Lambda response and logs."""
        # Not dataclasses.asdict: it deep-copies, and a read-only mapping (e.g. run.state) cannot be copied.
        data = {item.name: getattr(self, item.name) for item in fields(self)}
        if isinstance(self.value, Mapping):
            data["value"] = dict(self.value)
        return {**data, "details": dict(self.details)}


class SlotRun:
    """Handle given to the wrapped function while it holds the lease of one slot.

    Not thread-safe; use it from the invocation's thread (heartbeats are explicit, from the work loop,
    which is what makes "the heartbeat stops before the commit" hold by construction).
    """

    def __init__(self, lock: SlotLock, lease: Lease, listener: Listener | None = None) -> None:
        self._lock = lock
        self._lease = lease
        self._listener = listener
        self._last_renewal_ms = lease.acquired_at_ms
        self.receipt: CommitReceipt | None = None
        self.summary: Mapping[str, Any] | None = None
        self.reason: str | None = None  # a MISSED finish's reason (:meth:`miss`)
        self.given_back: str | None = None  # why the slot was given back unfinished (:meth:`give_back`)

    @property
    def lease(self) -> Lease:
        """The current lease (renewals replace it)."""
        return self._lease

    @property
    def state(self) -> Mapping[str, Any]:
        """In-flight state adopted from predecessors plus what this run recorded."""
        return self._lease.state

    @property
    def finished(self) -> bool:
        """Whether :meth:`commit` or :meth:`fail` succeeded."""
        return self.receipt is not None

    def now_ms(self) -> int:
        """The lock's clock, epoch ms."""
        return self._lock.clock_ms()

    @property
    def heartbeat_interval_ms(self) -> int:
        """The lock's heartbeat interval: a waiting or polling caller sleeps at most this long between
        :meth:`heartbeat` calls, or its lease can run out between two of them."""
        return self._lock.heartbeat_interval_ms

    @property
    def lease_duration_ms(self) -> int:
        """The lock's lease duration: after the holder's last renewal its lease runs at most this much longer."""
        return self._lock.lease_duration_ms

    def remaining_ms(self) -> int | None:
        """Milliseconds left before the invocation deadline (``None`` if unbounded)."""
        return None if self._lease.deadline_ms is None else self._lease.deadline_ms - self.now_ms()

    def corrupt_state(self, key: str, message: str) -> CorruptLockItemError:
        """The error to raise when adopted state ``key`` is ill-typed: it names the slot item and the
        attribute (``state_json.<key>``); the handler reports it as corrupt (logged, metric, no retry)."""
        return CorruptLockItemError(self._lock.slot_key(self._lease.slot), f"state_json.{key}", message)

    def checkpoint(self, name: str) -> None:
        """Tell the listener we reached ``name`` (a no-op without listener)."""
        if self._listener is not None:
            self._listener(name, self._lease)

    def heartbeat(self, *, force: bool = False) -> bool:
        """Renew the lease if a heartbeat interval has passed since the last renewal (or if ``force``).

        Returns whether a renewal was sent. Raises :class:`LeaseLostError` when the lease was taken over.
        """
        if self.finished:
            return False
        now = self.now_ms()
        if not force and now - self._last_renewal_ms < self._lock.heartbeat_interval_ms:
            return False
        renewed = self._lock.heartbeat(self._lease)
        # SlotLock.heartbeat sends nothing (and returns the lease as is) when the deadline caps the expiry.
        sent = renewed.expires_at_ms != self._lease.expires_at_ms
        self._lease = renewed
        if sent:
            self._last_renewal_ms = now
        return sent

    def record_state(self, *, writes: Sequence[Mapping[str, Any]] = (), **changes: Any) -> None:
        """Record in-flight state for a successor (fenced; also renews), with the caller's ``writes`` in the same
        transaction. Raises :class:`LeaseLostError`, or :class:`CommitConflictError` when one of ``writes``
        failed its condition (nothing written)."""
        self._lease = self._lock.record_state(self._lease, changes, writes=writes)
        self._last_renewal_ms = self.now_ms()
        self.checkpoint(CHECKPOINT_STATE_RECORDED)

    def commit(
        self, *, writes: Sequence[Mapping[str, Any]] = (), summary: Mapping[str, Any] | None = None
    ) -> CommitReceipt:
        """Finish the slot as succeeded with ``writes`` in the same fenced transaction.

        Raises :class:`StaleFencingTokenError` (nothing written) or :class:`CommitConflictError`.
        """
        return self._finish("succeeded", writes=writes, summary=summary, error=None)

    def fail(self, error: Mapping[str, Any], *, writes: Sequence[Mapping[str, Any]] = ()) -> CommitReceipt:
        """Finish the slot as failed for good (no retry), recording ``error``. Fenced like :meth:`commit`."""
        return self._finish("failed", writes=writes, summary=None, error=error)

    def give_back(self, reason: str, detail: Mapping[str, Any] | None = None) -> None:
        """Give the slot back unfinished: release the lease keeping the recorded state (expiry now; owner, token
        and slot kept), so that the later invocation the caller arranged (e.g. a one-time schedule) takes it over
        and adopts the state. The run then ends with outcome ``deferred`` and ``reason``; nothing more is written.
        ``reason`` (1..64 characters) is written on the lock item in the release's own write: should that later
        invocation never come, the next slot's winner records this slot MISSED with ``reason``, not ``superseded``
        (:meth:`SlotLock.release`). Raises :class:`LeaseLostError` (taken over already)."""
        if self.finished or self.given_back:
            raise RuntimeError("this slot run already ended")
        self._lock.release(self._lease, given_back=reason)
        self.given_back = reason
        self.summary = dict(detail or {})

    def miss(
        self, reason: str, detail: Mapping[str, Any], *, writes: Sequence[Mapping[str, Any]] = ()
    ) -> CommitReceipt:
        """Finish the slot as MISSED with ``reason`` (the holder gives up for good, e.g. ``capacity``: no permit
        before the slot's maximum age), recording ``detail``. Fenced like :meth:`commit`; never run again."""
        return self._finish("missed", writes=writes, summary=None, error=detail, reason=reason)

    def _finish(self, outcome: Literal["succeeded", "failed", "missed"], **kwargs: Any) -> CommitReceipt:
        if self.finished:
            raise RuntimeError("this slot run already committed")
        self.checkpoint(CHECKPOINT_BEFORE_COMMIT)
        self.receipt = self._lock.commit(self._lease, outcome=outcome, **kwargs)
        self.reason = kwargs.get("reason")
        self.summary = kwargs.get("summary") or kwargs.get("error")
        self.checkpoint(CHECKPOINT_COMMITTED)
        return self.receipt


class SlotRunner:
    """Runs a function once per slot under a :class:`SlotLock` (the engine behind :func:`once_per_slot`)."""

    def __init__(self, lock: SlotLock, *, listener: Listener | None = None) -> None:
        self.lock = lock
        self.listener = listener

    def run(
        self,
        fn: Callable[[SlotRun], Any],
        *,
        slot: Slot,
        owner_id: str,
        deadline_ms: int | None = None,
    ) -> SlotOutcome:
        """Acquire ``slot`` for ``owner_id``; if won, call ``fn(run)`` and commit.

        If ``fn`` returns without committing, the slot is committed as succeeded with no extra writes
        and ``fn``'s return value (a mapping) as summary.
        """
        result = self.lock.try_acquire(slot, owner_id, deadline_ms=deadline_ms)
        if isinstance(result, Loss):
            return self._loss_outcome(result)
        lease = result
        run = SlotRun(self.lock, lease, self.listener)
        base: dict[str, Any] = {
            "job_name": lease.job_name,
            "slot": lease.slot.iso,
            "owner_id": owner_id,
            "fencing_token": lease.fencing_token,
            "takeover": lease.takeover,
            "reentered": lease.reentered,
            "adopted_state": bool(lease.state),
            "last_succeeded_at_ms": lease.last_succeeded_at_ms,
            "superseded_slot": lease.superseded_slot.iso if lease.superseded_slot else None,
            "superseded_recorded": lease.superseded_recorded,
            "generation": lease.generation,
        }
        try:
            run.checkpoint(CHECKPOINT_ACQUIRED)
            value = fn(run)
            if run.given_back:
                return SlotOutcome(
                    "deferred", reason=run.given_back, value=value, details=dict(run.summary or {}), **base
                )
            if not run.finished:
                run.commit(summary=value if isinstance(value, Mapping) else None)
        except StaleFencingTokenError as exc:
            logger.warning("stale commit rejected: %s", exc)
            return SlotOutcome("stale_rejected", reason="fencing_token_superseded", details=_holder(exc), **base)
        except StalePermitTokenError as exc:
            # A newer holder of this slot's lease (a takeover) holds the slot's capacity permit: we are stale and
            # write nothing more (its lease is not ours to release).
            logger.warning("stale capacity permit write refused: %s", exc)
            details = {"holder_owner_id": exc.current_owner, "holder_fencing_token": exc.current_token}
            return SlotOutcome("stale_rejected", reason="permit_fencing_token_superseded", details=details, **base)
        except LeaseLostError as exc:
            logger.warning("lease lost: %s", exc)
            return SlotOutcome("lease_lost", reason=exc.operation, details=_holder(exc), **base)
        except WriteRejectedError as exc:
            if run.finished:
                raise
            return self._fail_rejected(run, exc, base)
        except BaseException:
            if not run.finished and not run.given_back:
                self._release_quietly(run.lease)
            raise
        assert run.receipt is not None
        return SlotOutcome(
            run.receipt.outcome,
            reason=run.reason,
            value=value,
            already_applied=run.receipt.already_applied,
            details=dict(run.summary or {}),
            **base,
        )

    def run_event(self, fn: Callable[[SlotRun], Any], event: Any, context: Any) -> SlotOutcome:
        """:meth:`run` for a Lambda invocation: slot from the event, owner = ``context.aws_request_id``,
        deadline = now + ``context.get_remaining_time_in_millis()``. Raises ``InvalidEventError`` before
        any request when the event has no usable scheduled time."""
        slot = Slot.from_event(event)
        deadline_ms = None
        if context is not None and hasattr(context, "get_remaining_time_in_millis"):
            deadline_ms = self.lock.clock_ms() + int(context.get_remaining_time_in_millis())
        return self.run(fn, slot=slot, owner_id=str(context.aws_request_id), deadline_ms=deadline_ms)

    def _fail_rejected(self, run: SlotRun, rejected: WriteRejectedError, base: Mapping[str, Any]) -> SlotOutcome:
        """DynamoDB refused a write for good: record the slot FAILED once with the reason (no Lambda retry).

        The failure record carries none of the rejected writes (the same request would fail again). If even
        that record is refused or the lease is gone, the lease is released and the error propagates.
        """
        logger.error("slot %s: write refused for good, recording the slot FAILED: %s", run.lease.slot.iso, rejected)
        error = rejected.as_dict()
        try:
            receipt = run.fail(error)
        except (StaleFencingTokenError, LeaseLostError) as exc:
            logger.warning("lease lost while recording the rejected write: %s", exc)
            return SlotOutcome("lease_lost", reason=exc.operation, details=_holder(exc), **base)
        except BaseException:
            self._release_quietly(run.lease)
            raise
        return SlotOutcome(
            receipt.outcome, reason="write_rejected", already_applied=receipt.already_applied, details=error, **base
        )

    def _release_quietly(self, lease: Lease) -> None:
        try:
            self.lock.release(lease)
        except Exception:  # the original error matters more; the lease expires anyway
            logger.warning("could not release lease after an error", exc_info=True)

    @staticmethod
    def _loss_outcome(loss: Loss) -> SlotOutcome:
        current = loss.current
        details: dict[str, Any] = {}
        if current is not None:
            details = {
                "holder_owner_id": current.owner_id,
                "holder_expires_at_ms": current.lease_expires_at_ms,
                "holder_slot": current.lease_slot.iso if current.lease_slot else None,
                "last_finished_slot": current.last_finished_slot.iso if current.last_finished_slot else None,
                "last_succeeded_at_ms": current.last_succeeded_at_ms,
                "fencing_token": current.fencing_token,
            }
        status: OutcomeStatus = "missed" if loss.missed_recorded else "lost"
        return SlotOutcome(
            status,
            loss.job_name,
            loss.slot.iso,
            loss.owner_id,
            reason=(loss.missed_reason or loss.reason) if loss.missed_recorded else loss.reason,
            details=details,
            last_succeeded_at_ms=current.last_succeeded_at_ms if current is not None else None,
            generation=loss.generation,
        )


def _holder(exc: LeaseLostError) -> dict[str, Any]:
    current = exc.current
    if current is None:
        return {}
    return {"holder_owner_id": current.owner_id, "current_fencing_token": current.fencing_token}


def once_per_slot(
    lock: SlotLock | Callable[[], SlotLock], *, listener: Listener | None = None
) -> Callable[[Callable[..., Any]], Callable[[Any, Any], dict[str, Any]]]:
    """Decorate ``fn(run, event, context)`` into a Lambda handler ``(event, context) -> dict``: the slot's
    :class:`SlotOutcome` as :meth:`~SlotOutcome.as_dict` (JSON-ready, the invocation's response), e.g.
    ``{"status": "succeeded", "slot": "2026-11-27T02:00:00Z", "fencing_token": 7, "value": ..., ...}``.

    ``lock`` may be a factory called on first use (so settings and clients are built inside the
    invocation, not at import). See the module docstring for semantics.
    https://docs.aws.amazon.com/lambda/latest/dg/python-handler.html#python-handler-return
    """
    cache: list[SlotRunner] = []

    def decorator(fn: Callable[..., Any]) -> Callable[[Any, Any], dict[str, Any]]:
        @functools.wraps(fn)
        def handler(event: Any, context: Any) -> dict[str, Any]:
            if not cache:
                cache.append(SlotRunner(lock if isinstance(lock, SlotLock) else lock(), listener=listener))
            return cache[0].run_event(lambda run: fn(run, event, context), event, context).as_dict()

        return handler

    return decorator
