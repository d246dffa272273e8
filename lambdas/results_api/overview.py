"""The dashboard's overview: every job of the deployment, one row per job (the custom widget called with
``{"view": "overview"}``, :func:`results_api.widget.widget_response`; drawn by :mod:`results_api.overview_html`).

A row (:class:`JobRow`): the job; its last slot's status (SUCCEEDED, FAILED, MISSED, RUNNING, or NEVER RUN); its
**freshness**, exactly as ``GET /jobs/{job}/results/latest`` says it, from the same function
(:func:`results_api.freshness.freshness_document`: the latest result's slot and commit time, the expected next
slot, late or not, and the watchdog's state: on time, waiting, late, failing or paused); the age of its last
success; the live lease's holder and expiry; the pause (who, why); the latest result's cost estimate. Rows needing
attention (late, failing, their last slot FAILED, unreadable) come first, then by name.

Reads, for N jobs, bounded whatever the state (no request per job, no ``GetItem``, no ``Query``, no S3):

1. ceil(N / 50) consistent ``BatchGetItem`` of the live lock items and the LATEST items (their pointer, commit time
   and cost estimate only, never the rows): :meth:`ResultsReader.job_items`;
2. ceil(K / 100) consistent ``BatchGetItem`` of slot items, K <= 5 N distinct keys: per job, the history item of the
   newest slot its lock item names (the status, a miss's reason, a failure's error), and the items the freshness
   decision reads (its schedule's 4 newest firings, :func:`~results_api.freshness.freshness_slot_keys`), mostly
   overlapping. Whole items: a read is billed by the item's size whatever the projection
   (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html).

The last slot is the newest the live lock item knows (its lease, last finished or missed slot). A slot the lock
item never saw (a delivery that has not started, a MISSED ``paused`` record) does not show there: the freshness
(late, with its due slot) covers a schedule that stopped.

A job whose items cannot be decoded (an edited item) is one row with an error cell: the overview never fails for one
job; it fails as a whole (a message) only when DynamoDB does.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from athena_refresh.failures import describe_failure
from athena_refresh.freshness import JobState
from athena_refresh.stored import plain_item
from slotlock import LockRecord, table
from slotlock.codec import decode_lock_item, decode_slot_item
from slotlock.slot import Slot
from slotlock.table import PAUSE_REASON, PAUSED_BY

from .freshness import jobs_freshness
from .reader import JOBS_PER_BATCH, ResultsReader

logger = logging.getLogger(__name__)

#: The widget's ``view`` param of this mode.
VIEW = "overview"
#: The LATEST item's attributes the overview reads: which result it is, when it was committed, its cost estimate.
POINTER_FIELDS = ("latest_slot", "latest_generation", "committed_at_ms", "cost_json")
NEVER_RUN = "NEVER RUN"
#: The freshness states that put a row first (the watchdog's alarm counts the same two).
ATTENTION_STATES = (JobState.LATE, JobState.FAILING)
_MAX_TEXT = 160  # an error message or owner shown in a cell is cut to this many characters


@dataclass(frozen=True)
class JobRow:
    """One job of the overview. Times are epoch milliseconds; ``freshness``: the object ``latest`` returns
    (:func:`~results_api.freshness.freshness_document`); ``problem`` set: the row is an error cell."""

    job: str
    status: str = NEVER_RUN
    slot_iso: str | None = None
    detail: str | None = None
    last_success_at_ms: int | None = None
    freshness: Mapping[str, Any] | None = None
    lease_owner_id: str | None = None
    lease_expires_at_ms: int | None = None
    paused: bool = False
    paused_by: str | None = None
    pause_reason: str | None = None
    cost_usd: float | None = None
    cost_of: str | None = None  # the latest result's slot (and generation, if a manual run's)
    problem: str | None = None

    @property
    def attention(self) -> bool:
        """Whether the row goes first: unreadable, late or failing, or its last slot FAILED."""
        state = (self.freshness or {}).get("state")
        return self.problem is not None or state in ATTENTION_STATES or self.status == "FAILED"


def read_overview(reader: ResultsReader, *, now_ms: int) -> list[JobRow]:
    """Every job of ``reader``'s catalog as a :class:`JobRow` at ``now_ms``, attention first, then by name (reads:
    the module docstring). A job whose items cannot be decoded is an error row (:attr:`JobRow.problem`).

    :raises BackendUnavailableError: DynamoDB failed.
    """
    names = reader.job_names()
    locks: dict[str, Any] = {}
    pointers: dict[str, Any] = {}
    for start in range(0, len(names), JOBS_PER_BATCH):
        chunk = names[start : start + JOBS_PER_BATCH]
        chunk_locks, chunk_pointers = reader.job_items(chunk, pointer_fields=POINTER_FIELDS)
        locks.update(chunk_locks)
        pointers.update(chunk_pointers)
    probes = [table.slot_key(name, slot.iso) for name in names if (slot := _newest_slot_or_none(name, locks.get(name)))]
    freshness, items = jobs_freshness(reader, locks, pointers, now_ms=now_ms, extra_keys=probes)
    rows = []
    for name in names:
        try:
            row = job_row(name, locks.get(name), items, pointers.get(name), freshness[name], now_ms=now_ms)
        except Exception as exc:  # an edited item, whatever it holds, is that job's error cell
            logger.exception("overview: job %s cannot be shown", name)
            row = JobRow(name, status="UNKNOWN", problem=cut(f"{type(exc).__name__}: {exc}"))
        rows.append(row)
    return sorted(rows, key=lambda row: (not row.attention, row.job))


def newest_slot(record: LockRecord) -> Slot | None:
    """The newest slot the live lock item knows: its lease's, its last finished one, or a missed one."""
    known = [record.lease_slot, record.last_finished_slot, max(record.missed_slots, default=None)]
    return max((slot for slot in known if slot is not None), default=None)


def _newest_slot_or_none(name: str, lock_item: Mapping[str, Any] | None) -> Slot | None:
    if not lock_item:
        return None
    try:
        return newest_slot(decode_lock_item(lock_item, table.lock_key(name)))
    except Exception:  # no slot to read: job_row reports the item as the row's error
        logger.debug("overview: job %s: no slot to read", name, exc_info=True)
        return None


def last_slot(reader: ResultsReader, name: str, *, now_ms: int) -> tuple[str, str, str | None] | None:
    """Job ``name``'s newest slot as ``(slot ISO, status, reason)`` (the overview's "last slot" cell), ``None``
    before any slot. One consistent read of the live lock item, and one of the slot's history item unless
    that slot is the last one the lock records as succeeded.

    :raises BackendUnavailableError: DynamoDB failed. :raises Exception: the lock item cannot be decoded.
    """
    lock_item = reader.get_lock_item(table.lock_key(name))
    if not lock_item:
        return None
    record = decode_lock_item(lock_item, table.lock_key(name))
    slot = newest_slot(record)
    if slot is None:
        return None
    succeeded = record.last_finished_slot == slot and record.last_finished_outcome == "succeeded"
    slot_item = None if succeeded else reader.get_lock_item(table.slot_key(name, slot.iso))
    status, detail = _status(name, record, slot, slot_item, now_ms)
    return slot.iso, status, detail


def job_row(
    name: str,
    lock_item: Mapping[str, Any] | None,
    items: Mapping[str, Any],
    pointer: Mapping[str, Any] | None,
    freshness: Mapping[str, Any],
    *,
    now_ms: int,
) -> JobRow:
    """The row of job ``name`` at ``now_ms`` from its live lock item, the slot items read (by partition key: its
    newest slot's among them) and its LATEST item (DynamoDB JSON; ``None``: absent), and its ``freshness``
    (:func:`~results_api.freshness.jobs_freshness`).

    :raises Exception: an item cannot be decoded (:func:`read_overview` makes it the row's error cell).
    """
    cost_usd, cost_of = _cost(pointer)
    if not lock_item:
        return JobRow(name, freshness=freshness, cost_usd=cost_usd, cost_of=cost_of)
    record = decode_lock_item(lock_item, table.lock_key(name))
    newest = newest_slot(record)
    slot_item = items.get(table.slot_key(name, newest.iso)) if newest is not None else None
    status, detail = _status(name, record, newest, slot_item, now_ms) if newest is not None else (NEVER_RUN, None)
    live = record.locked(now_ms)
    return JobRow(
        name,
        status=status,
        slot_iso=newest.iso if newest is not None else None,
        detail=detail,
        last_success_at_ms=record.last_succeeded_at_ms,
        freshness=freshness,
        lease_owner_id=record.owner_id if live else None,
        lease_expires_at_ms=record.lease_expires_at_ms if live else None,
        paused=record.paused,
        paused_by=_text(lock_item, PAUSED_BY) if record.paused else None,
        pause_reason=_text(lock_item, PAUSE_REASON) if record.paused else None,
        cost_usd=cost_usd,
        cost_of=cost_of,
    )


def _status(
    name: str, record: LockRecord, slot: Slot, slot_item: Mapping[str, Any] | None, now_ms: int
) -> tuple[str, str | None]:
    """(status, detail) of ``slot``: its history item's, else what the lock item says of it (the history item
    expired by its TTL, or a holder crashed before writing it)."""
    decoded = decode_slot_item(slot_item, table.slot_key(name, slot.iso)) if slot_item else {}
    status = decoded.get("status")
    if not isinstance(status, str):
        if record.last_finished_slot == slot and record.last_finished_outcome:
            status = record.last_finished_outcome.upper()
        elif record.lease_slot == slot:
            status = "RUNNING"
        elif slot in record.missed_slots:
            status = "MISSED"
        else:
            status = "UNKNOWN"
    if status == "RUNNING":
        live = record.locked(now_ms) and record.lease_slot == slot
        return status, None if live else "lease expired: a retry or the next slot takes over"
    failure = describe_failure(status, decoded.get("reason"), decoded.get("error"))
    return status, cut(failure.summary()) if failure else None


def _cost(pointer: Mapping[str, Any] | None) -> tuple[float | None, str | None]:
    """The LATEST item's cost estimate (USD) and the result it is of (``None``: no result, or no estimate)."""
    if not pointer:
        return None, None
    values = plain_item(pointer)
    slot, generation = values.get("latest_slot"), values.get("latest_generation", table.LIVE_GENERATION)
    of = None
    if isinstance(slot, str):
        of = slot if generation == table.LIVE_GENERATION else f"{slot} generation {generation}"
    cost = values.get("cost")
    usd = cost.get("estimated_cost_usd") if isinstance(cost, dict) else None
    if isinstance(usd, bool) or not isinstance(usd, (int, float)) or not math.isfinite(usd) or usd < 0:
        return None, of
    return float(usd), of


def _text(item: Mapping[str, Any], name: str) -> str | None:
    value = item.get(name)
    return cut(str(value["S"])) if isinstance(value, Mapping) and isinstance(value.get("S"), str) else None


def cut(text: str) -> str:
    """``text`` cut to :data:`_MAX_TEXT` characters (an ellipsis ends a cut one)."""
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."
