"""Is a job late? The watchdog's decision per job, from what the lock table says and a clock (no I/O).

A job's schedule fires at D1 < D2 < ... in its own time zone, daylight-saving rules included
(:func:`slotlock.schedule.latest_firings`, EventBridge Scheduler's rules). With ``grace_s`` (the job's
``freshness_s``), at ``now``:

- **paused**: an operator paused the job (the live lock item's ``paused``); nothing else is judged;
- **failing**: the last finished slot is FAILED (any reason, ``assertion`` included) or MISSED for any reason but
  ``paused`` (:attr:`athena_refresh.failures.Failure.failing`);
- **late**: the latest firing D with ``D + grace_s <= now`` has no finished slot at or after it, unless the slot
  is *waiting*;
- **waiting**: that slot was given back for capacity (``SlotRun.give_back("capacity")``, the lock item's
  ``given_back_reason`` on its lease slot) and is still younger than ``max_slot_age_s``: a redelivery may still
  run it;
- **on time** otherwise, and for a job first seen by the watchdog after D (a job deployed since: its earlier
  firings were never due).

``lateness_s`` is how long past its grace the first unfinished firing after the last finished slot is (0 when not
late); the deployment's ``OldestLatenessS`` is the largest. The decision reads generation 1 (the live schedule)
only: a manual run is an operator's, not the schedule's. Sources: docs/protocol.md (slot items, the pause, the
give-back), docs/watchdog.md.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from slotlock.schedule import CronError, latest_firings, next_firing

from .failures import Failure, describe_failure

__all__ = [
    "FINISHED",
    "JobState",
    "JobWatch",
    "Observed",
    "SlotRecord",
    "Verdict",
    "decide",
    "recent_firings",
]

FINISHED: Final = ("SUCCEEDED", "FAILED", "MISSED")


class JobState:
    """The states a job is in, as the notifications and metrics name them."""

    ON_TIME: Final = "on_time"
    WAITING: Final = "waiting"
    LATE: Final = "late"
    FAILING: Final = "failing"
    PAUSED: Final = "paused"
    ALL: Final = (ON_TIME, WAITING, LATE, FAILING, PAUSED)


@dataclass(frozen=True)
class JobWatch:
    """What the watchdog knows of a job from the catalog: its schedule (``cron(...)`` in ``timezone``), its grace
    (``grace_s``, seconds) and its ``max_slot_age_s`` (seconds)."""

    job: str
    expression: str
    timezone: str
    grace_s: int
    max_slot_age_s: int


@dataclass(frozen=True)
class SlotRecord:
    """One slot's history item (generation 1): ``slot_epoch_s``, ``status``, its ``reason`` and ``error`` (FAILED,
    MISSED), and ``finished_at_ms`` when recorded."""

    slot_epoch_s: int
    status: str
    reason: str | None = None
    error: Mapping[str, Any] | None = None
    finished_at_ms: int | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def failure(self) -> Failure | None:
        return describe_failure(self.status, self.reason, self.error)


@dataclass(frozen=True)
class Observed:
    """What the lock table says of a job: the live lock item's fields (``None``/``False`` when it has none yet),
    the slot items read (:func:`recent_firings` and the last finished one), and when the watchdog first saw the job
    (``first_seen_ms``, epoch ms)."""

    paused: bool = False
    lease_slot_epoch_s: int | None = None
    given_back_reason: str | None = None
    last_finished_slot_epoch_s: int | None = None
    last_finished_outcome: str | None = None
    last_succeeded_slot_epoch_s: int | None = None
    last_succeeded_at_ms: int | None = None
    slots: Sequence[SlotRecord] = ()
    first_seen_ms: int | None = None

    def last_finished(self) -> SlotRecord | None:
        """The newest finished slot: a slot item read, or the lock item's last commit (its outcome only)."""
        finished = [record for record in self.slots if record.finished]
        newest = max(finished, key=lambda record: record.slot_epoch_s, default=None)
        lock_slot = self.last_finished_slot_epoch_s
        if lock_slot is not None and (newest is None or lock_slot > newest.slot_epoch_s):
            status = "FAILED" if (self.last_finished_outcome or "").lower() == "failed" else "SUCCEEDED"
            return SlotRecord(lock_slot, status)
        return newest


@dataclass(frozen=True)
class Verdict:
    """The decision for one job: ``state`` (:class:`JobState`), ``reason`` (one line for people), ``lateness_s``,
    the latest firing due (``due_slot_epoch_s``: its grace is over), the last finished slot and its status, and the
    last success (slot and commit time, epoch ms), as far as the table says."""

    job: str
    state: str
    reason: str
    lateness_s: int = 0
    due_slot_epoch_s: int | None = None
    last_finished_slot_epoch_s: int | None = None
    last_finished_status: str | None = None
    last_succeeded_slot_epoch_s: int | None = None
    last_succeeded_at_ms: int | None = None

    @property
    def alarming(self) -> bool:
        """Late or failing: what the deployment's alarm counts."""
        return self.state in (JobState.LATE, JobState.FAILING)


def _utc(epoch_s: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch_s, dt.UTC)


def _iso(epoch_s: int | None) -> str:
    return "never" if epoch_s is None else _utc(epoch_s).strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.lru_cache(maxsize=4096)
def _latest_firings_s(expression: str, timezone: str, until_minute_s: int, count: int) -> tuple[int, ...]:
    """:func:`slotlock.schedule.latest_firings` as epoch seconds, at the start of a minute (``until_minute_s``): a
    cron fires on whole minutes, so every instant of a minute has the firings of its start, and every request of
    that minute (the read API's ``GET latest``, one watchdog run's jobs) reuses them. :raises CronError."""
    return tuple(int(f.timestamp()) for f in latest_firings(expression, timezone, _utc(until_minute_s), count))


def _latest(watch: JobWatch, until_s: int, count: int) -> tuple[int, ...]:
    return _latest_firings_s(watch.expression, watch.timezone, until_s - until_s % 60, count)


def due_firing(watch: JobWatch, now_ms: int) -> int | None:
    """The latest firing D (epoch s) with ``D + grace_s <= now``; ``None`` when the schedule never fired."""
    try:
        firings = _latest(watch, (now_ms // 1000) - watch.grace_s, 1)
    except CronError:
        return None
    return firings[-1]


def recent_firings(watch: JobWatch, now_ms: int, *, after_epoch_s: int | None, count: int = 4) -> list[int]:
    """The newest firings (epoch s, oldest first) at or before ``now``, at most ``count``, all after
    ``after_epoch_s`` (the lock item's last finished slot: nothing before it can be newer): the slot items worth a
    read. Empty when the schedule never fired."""
    try:
        epochs = _latest(watch, now_ms // 1000, count)
    except CronError:
        return []
    return [epoch for epoch in epochs if after_epoch_s is None or epoch > after_epoch_s]


def _lateness_s(watch: JobWatch, now_ms: int, after_epoch_s: int | None, due: int) -> int:
    first = due
    if after_epoch_s is not None:
        following = next_firing(watch.expression, watch.timezone, _utc(after_epoch_s))
        if following is not None:
            first = min(due, int(following.timestamp()))
    return max(0, now_ms // 1000 - (first + watch.grace_s))


def decide(watch: JobWatch, observed: Observed, now_ms: int) -> Verdict:
    """The :class:`Verdict` of one job at ``now_ms`` (epoch ms). Pure: the same inputs give the same verdict."""
    last = observed.last_finished()
    due = due_firing(watch, now_ms)
    base = Verdict(
        job=watch.job,
        state=JobState.ON_TIME,
        reason="",
        due_slot_epoch_s=due,
        last_finished_slot_epoch_s=None if last is None else last.slot_epoch_s,
        last_finished_status=None if last is None else last.status,
        last_succeeded_slot_epoch_s=observed.last_succeeded_slot_epoch_s,
        last_succeeded_at_ms=observed.last_succeeded_at_ms,
    )
    if observed.paused:
        return replace(base, state=JobState.PAUSED, reason="paused by an operator")
    overdue = due is not None and (last is None or last.slot_epoch_s < due)
    lateness = 0
    if overdue and due is not None:
        lateness = _lateness_s(watch, now_ms, None if last is None else last.slot_epoch_s, due)
    failure = None if last is None else last.failure
    if failure is not None and failure.failing:
        return replace(
            base,
            state=JobState.FAILING,
            reason=f"slot {_iso(last.slot_epoch_s if last else None)} {failure.status}: {failure.summary()}",
            lateness_s=lateness,
        )
    if not overdue or due is None:
        return replace(base, state=JobState.ON_TIME, reason="the latest slot due has finished")
    lease_slot = observed.lease_slot_epoch_s
    if (
        observed.given_back_reason == "capacity"
        and lease_slot is not None
        and lease_slot >= due
        and now_ms < (lease_slot + watch.max_slot_age_s) * 1000
    ):
        return replace(
            base,
            state=JobState.WAITING,
            reason=(
                f"slot {_iso(lease_slot)} given back for capacity, may run until "
                f"{_iso(lease_slot + watch.max_slot_age_s)}"
            ),
        )
    if last is None and observed.first_seen_ms is not None and observed.first_seen_ms > due * 1000:
        return replace(base, state=JobState.ON_TIME, reason="new job: no slot due since the watchdog first saw it")
    since = "no slot has ever finished" if last is None else f"last finished slot {_iso(last.slot_epoch_s)}"
    return replace(
        base,
        state=JobState.LATE,
        reason=f"slot {_iso(due)} not finished {watch.grace_s} s after its firing; {since}",
        lateness_s=lateness,
    )


def count(verdicts: Iterable[Verdict], state: str) -> int:
    """How many ``verdicts`` are in ``state``."""
    return sum(1 for verdict in verdicts if verdict.state == state)
