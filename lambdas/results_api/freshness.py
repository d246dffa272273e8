"""How fresh a job's latest result is, as ``GET /jobs/{job}/results/latest`` says it (body and headers).

The watchdog's own decision (:func:`athena_refresh.freshness.decide`) on the job's live lock item and its newest
slot items, read with the LATEST item in one strongly consistent ``BatchGetItem`` across the results and the lock
table (the keys follow from the schedule), at the reader's clock: ``GET latest`` is one DynamoDB request. The object (``freshness`` in the JSON body; headers ``X-Late``, ``X-Freshness-State``, ``X-Committed-At``,
``X-Expected-Next-Slot``)::

    {"slot": "2026-12-01T10:00:00Z", "committed_at_ms": 1764583202000, "expected_next_slot": "2026-12-01T10:30:00Z",
     "late": false, "state": "on_time", "due_slot": "2026-12-01T09:30:00Z", "reason": "the latest slot due has ..."}

Every value changes only when a slot fires, finishes or passes its grace, or an operator acts: the ETag covers it,
so a revalidation never keeps a stale ``"late": false``. docs/watchdog.md, docs/api.md.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from athena_refresh.freshness import JobState, decide, recent_firings
from athena_refresh.stored import StoredResult
from athena_refresh.watchdog import RECENT_SLOTS, job_watches, observed_from_items
from slotlock import table
from slotlock.errors import SlotLockError
from slotlock.slot import Slot

if TYPE_CHECKING:
    from .reader import ResultsReader

__all__ = ["freshness_headers", "freshness_tag", "latest_with_freshness"]


def _iso(epoch_s: int | None) -> str | None:
    return None if epoch_s is None else Slot(epoch_s).iso


def latest_with_freshness(reader: ResultsReader, job: str) -> tuple[StoredResult, dict[str, Any]]:
    """``job``'s latest result and its ``freshness`` object (see the module docstring), both from **one**
    ``BatchGetItem`` (:meth:`ResultsReader.latest_and_lock_items`: the LATEST item, the live lock item and the
    newest slot items, every key known from the schedule at the reader's clock). ``state`` and ``late`` are ``None``
    when the catalog has no schedule for the job (then only the LATEST item is read) or its lock table items cannot
    be decoded.

    :raises BadParameterError, UnknownJobError, ResultNotFoundError, BackendUnavailableError: as
        :meth:`ResultsReader.latest_and_lock_items`.
    """
    now_ms = reader.clock_ms()
    watches = job_watches({job: reader.check_job(job)})
    watch = watches[0] if watches else None
    slot_keys = (
        []
        if watch is None
        else [
            table.slot_key(job, Slot(epoch).iso)
            for epoch in recent_firings(watch, now_ms, after_epoch_s=None, count=RECENT_SLOTS)
        ]
    )
    lock_keys = [] if watch is None else [table.lock_key(job), *slot_keys]
    stored, found = reader.latest_and_lock_items(job, lock_keys)
    following = reader.next_slot(job, now_ms)
    document: dict[str, Any] = {
        "slot": stored.slot_iso,
        "committed_at_ms": stored.committed_at_ms,
        "expected_next_slot": None if following is None else Slot(int(following.timestamp())).iso,
        "late": None,
        "state": None,
        "due_slot": None,
        "reason": None,
    }
    if watch is None:
        return stored, document
    try:
        observed = observed_from_items(
            job, found.get(table.lock_key(job)), {k: found[k] for k in slot_keys if k in found}, None
        )
    except SlotLockError as exc:
        return stored, {**document, "reason": f"the lock table's items of {job} cannot be read: {exc}"}
    verdict = decide(watch, observed, now_ms)
    return stored, {
        **document,
        "late": verdict.state == JobState.LATE,
        "state": verdict.state,
        "due_slot": _iso(verdict.due_slot_epoch_s),
        "reason": verdict.reason,
    }


def freshness_tag(freshness: dict[str, Any]) -> str:
    """The text an ETag over ``freshness`` adds to the result's identity (stable key order)."""
    return json.dumps(freshness, sort_keys=True, separators=(",", ":"))


def freshness_headers(freshness: dict[str, Any]) -> dict[str, str]:
    """``X-Late``, ``X-Freshness-State``, ``X-Committed-At`` and ``X-Expected-Next-Slot`` (each when known)."""
    headers: dict[str, str] = {}
    if freshness.get("late") is not None:
        headers["X-Late"] = "true" if freshness["late"] else "false"
    if freshness.get("state"):
        headers["X-Freshness-State"] = str(freshness["state"])
    committed = freshness.get("committed_at_ms")
    if isinstance(committed, int):
        headers["X-Committed-At"] = dt.datetime.fromtimestamp(committed / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if freshness.get("expected_next_slot"):
        headers["X-Expected-Next-Slot"] = str(freshness["expected_next_slot"])
    return headers
