"""How fresh a job's latest result is, as ``GET /jobs/{job}/results/latest`` says it (body and headers) and the
dashboard's overview says it of every job (:mod:`results_api.overview`): one function, :func:`freshness_document`.

The watchdog's own decision (:func:`athena_refresh.freshness.decide`) on the job's live lock item and its newest
slot items (the keys follow from the schedule: :func:`freshness_slot_keys`), read strongly consistent at the
reader's clock: ``latest`` reads them with its LATEST item in one ``BatchGetItem`` across the results and the lock
table (``GET latest`` is one DynamoDB request), the overview in its batched reads of every job. The object (``freshness`` in the JSON body; headers ``X-Late``, ``X-Freshness-State``, ``X-Committed-At``,
``X-Expected-Next-Slot``)::

    {"slot": "2026-12-01T10:00:00Z", "committed_at_ms": 1764583202000, "expected_next_slot": "2026-12-01T10:30:00Z",
     "late": false, "state": "on_time", "due_slot": "2026-12-01T09:30:00Z", "reason": "the latest slot due has ..."}

Every value changes only when a slot fires, finishes or passes its grace, or an operator acts: the ETag covers it,
so a revalidation never keeps a stale ``"late": false``. docs/watchdog.md, docs/api.md.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from athena_refresh.freshness import JobState, JobWatch, decide, recent_firings
from athena_refresh.stored import StoredResult
from athena_refresh.watchdog import RECENT_SLOTS, job_watches, observed_from_items
from slotlock import table
from slotlock.errors import SlotLockError
from slotlock.schedule import CronError
from slotlock.slot import Slot

from .batch import MAX_KEYS_PER_BATCH, batch_get

if TYPE_CHECKING:
    from .reader import ResultsReader

__all__ = [
    "freshness_document",
    "freshness_headers",
    "freshness_slot_keys",
    "freshness_tag",
    "job_watch",
    "jobs_freshness",
    "latest_with_freshness",
    "read_lock_table_items",
]


def _iso(epoch_s: int | None) -> str | None:
    return None if epoch_s is None else Slot(epoch_s).iso


def job_watch(reader: ResultsReader, job: str) -> JobWatch | None:
    """What the watchdog knows of ``job`` from ``reader``'s catalog (``None``: no schedule). Computes no period
    unless the catalog entry lacks ``max_slot_age_s`` (:func:`athena_refresh.watchdog.job_watches`).

    :raises BadParameterError, UnknownJobError: as :meth:`ResultsReader.check_job`. :raises CronError: that
        period cannot be computed.
    """
    watches = job_watches({job: reader.check_job(job)})
    return watches[0] if watches else None


def freshness_slot_keys(
    watch: JobWatch | None, now_ms: int, memo: dict[tuple[str, str, int], list[int]] | None = None
) -> list[str]:
    """The lock table's slot items the decision reads at ``now_ms`` (epoch ms): those of the schedule's
    :data:`~athena_refresh.watchdog.RECENT_SLOTS` newest firings, oldest first (none without a ``watch``). ``memo``
    keeps the firings of each (expression, time zone, now) across the jobs of one read: jobs share schedules, and a
    frequent schedule's firings take about a millisecond each to compute."""
    if watch is None:
        return []
    key = (watch.expression, watch.timezone, now_ms)
    firings = (memo or {}).get(key)
    if firings is None:
        firings = recent_firings(watch, now_ms, after_epoch_s=None, count=RECENT_SLOTS)
        if memo is not None:
            memo[key] = firings
    return [table.slot_key(watch.job, Slot(epoch).iso) for epoch in firings]


def freshness_document(
    reader: ResultsReader,
    watch: JobWatch | None,
    job: str,
    lock_item: Mapping[str, Any] | None,
    items: Mapping[str, Any],
    *,
    slot: str | None,
    committed_at_ms: int | None,
    now_ms: int,
    slot_keys: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The ``freshness`` object (the module docstring) of ``job`` at ``now_ms``: its latest result's ``slot`` and
    ``committed_at_ms`` (``None``: no result yet), the expected next slot, and the watchdog's decision on its live
    ``lock_item`` and the slot items of :func:`freshness_slot_keys` (``slot_keys`` when the caller computed them)
    found in ``items`` (by partition key, DynamoDB JSON; other keys are ignored). ``state`` and ``late`` are ``None`` without a ``watch`` or when an item cannot
    be decoded (``reason`` says why). No I/O: the callers batch the reads (``latest``: one ``BatchGetItem``; the
    overview: :mod:`results_api.overview`)."""
    following = reader.next_slot(job, now_ms)
    document: dict[str, Any] = {
        "slot": slot,
        "committed_at_ms": committed_at_ms,
        "expected_next_slot": None if following is None else Slot(int(following.timestamp())).iso,
        "late": None,
        "state": None,
        "due_slot": None,
        "reason": None,
    }
    if watch is None:
        return document
    keys = freshness_slot_keys(watch, now_ms) if slot_keys is None else slot_keys
    slot_items = {key: items[key] for key in keys if key in items}
    try:
        observed = observed_from_items(job, lock_item, slot_items, None)
    except SlotLockError as exc:
        return {**document, "reason": f"the lock table's items of {job} cannot be read: {exc}"}
    verdict = decide(watch, observed, now_ms)
    return {
        **document,
        "late": verdict.state == JobState.LATE,
        "state": verdict.state,
        "due_slot": _iso(verdict.due_slot_epoch_s),
        "reason": verdict.reason,
    }


def latest_with_freshness(reader: ResultsReader, job: str) -> tuple[StoredResult, dict[str, Any]]:
    """``job``'s latest result and its ``freshness`` object (:func:`freshness_document`), both from **one**
    strongly consistent ``BatchGetItem`` (:meth:`ResultsReader.latest_and_lock_items`: the LATEST item, the live lock
    item and :func:`freshness_slot_keys`, every key known from the schedule at the reader's clock). ``state`` and
    ``late`` are ``None`` when the catalog has no schedule for the job (then only the LATEST item is read) or its lock
    table items cannot be decoded.

    :raises BadParameterError, UnknownJobError, ResultNotFoundError, BackendUnavailableError: as
        :meth:`ResultsReader.latest_and_lock_items`.
    """
    now_ms = reader.clock_ms()
    watch = job_watch(reader, job)
    slot_keys = freshness_slot_keys(watch, now_ms)
    lock_keys = [] if watch is None else [table.lock_key(job), *slot_keys]
    stored, found = reader.latest_and_lock_items(job, lock_keys)
    freshness = freshness_document(
        reader,
        watch,
        job,
        found.get(table.lock_key(job)),
        found,
        slot=stored.slot_iso,
        committed_at_ms=stored.committed_at_ms,
        now_ms=now_ms,
        slot_keys=slot_keys,
    )
    return stored, freshness


def read_lock_table_items(reader: ResultsReader, keys: Sequence[str]) -> dict[str, Any]:
    """The lock table's items of ``keys`` that exist, by partition key (DynamoDB JSON): one consistent
    ``BatchGetItem`` per 100 distinct keys (:func:`results_api.batch.batch_get`).

    :raises BackendUnavailableError: DynamoDB failed.
    """
    ordered = list(dict.fromkeys(keys))
    found: dict[str, Any] = {}
    for start in range(0, len(ordered), MAX_KEYS_PER_BATCH):
        request = {
            reader.lock_table: {
                "Keys": [{table.PARTITION_KEY: {"S": key}} for key in ordered[start : start + MAX_KEYS_PER_BATCH]],
                "ConsistentRead": True,
            }
        }
        for item in batch_get(reader.dynamodb, request, what="the jobs' slot records").get(reader.lock_table, []):
            key = item.get(table.PARTITION_KEY, {}).get("S")
            if isinstance(key, str):
                found[key] = item
    return found


def _pointed_result(pointer: Mapping[str, Any] | None) -> tuple[str | None, int | None]:
    """The slot and commit time (epoch ms) of the result a LATEST item points to (DynamoDB JSON; only those two
    attributes are read, so an edited ``cost_json`` leaves them readable); ``None`` for what is absent or not of
    its type."""
    slot = (pointer or {}).get("latest_slot", {}).get("S")
    committed = (pointer or {}).get("committed_at_ms", {}).get("N")
    try:
        committed_ms = int(committed) if isinstance(committed, str) else None
    except ValueError:
        committed_ms = None
    return (slot if isinstance(slot, str) else None), committed_ms


def jobs_freshness(
    reader: ResultsReader,
    locks: Mapping[str, Any],
    pointers: Mapping[str, Any],
    *,
    now_ms: int,
    extra_keys: Sequence[str] = (),
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The ``freshness`` object of every job of ``reader``'s catalog at ``now_ms`` (by job), from the live lock
    items and LATEST items already read (``locks``, ``pointers``: by job, DynamoDB JSON; ``latest_slot`` and
    ``committed_at_ms`` are read from a pointer) and one consistent ``BatchGetItem`` per 100 distinct slot keys
    (each scheduled job's :func:`freshness_slot_keys`, plus ``extra_keys``); also returns the items read, by key.
    A job whose schedule's period cannot be computed has a ``reason`` saying so, ``state`` ``None``.

    :raises BackendUnavailableError: DynamoDB failed.
    """
    watches: dict[str, JobWatch | None] = {}
    problems: dict[str, str] = {}
    slot_keys: dict[str, list[str]] = {}
    memo: dict[tuple[str, str, int], list[int]] = {}
    for job in reader.job_names():
        try:
            watches[job] = job_watch(reader, job)
        except CronError as exc:
            watches[job], problems[job] = None, f"the schedule's period cannot be computed: {exc}"
        slot_keys[job] = freshness_slot_keys(watches[job], now_ms, memo)
    items = read_lock_table_items(reader, [*extra_keys, *(key for keys in slot_keys.values() for key in keys)])
    documents = {}
    for job, watch in watches.items():
        slot, committed = _pointed_result(pointers.get(job))
        document = freshness_document(
            reader,
            watch,
            job,
            locks.get(job),
            items,
            slot=slot,
            committed_at_ms=committed,
            now_ms=now_ms,
            slot_keys=slot_keys[job],
        )
        documents[job] = {**document, "reason": problems[job]} if job in problems else document
    return documents, items


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
