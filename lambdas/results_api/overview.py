"""The dashboard's overview: every job of the deployment in one HTML table, one row per job (the custom widget
called with ``{"view": "overview"}``, :func:`results_api.widget.widget_response`).

Columns: the job; its last slot's status (SUCCEEDED, FAILED, MISSED, RUNNING, or NEVER RUN); the age of its last
success against its schedule's period, flagged **stale** past :data:`~athena_refresh.contract.STALE_AFTER_PERIODS`
periods (the ``NoRecentSuccess`` alarm's rule); the live lease's holder and expiry; the pause (who, why); the
latest result's cost estimate; how to fetch the result (a command and the API route: the API needs SigV4, so a
plain link would answer 403). Rows needing attention (stale, FAILED, unreadable) come first, then by name.

Reads, for N jobs, bounded whatever the state (no request per job, no ``GetItem``, no ``Query``, no S3):

1. ceil(N / 50) consistent ``BatchGetItem`` of the live lock items and the LATEST items (their pointer and cost
   estimate only, never the rows): :meth:`ResultsReader.job_items`;
2. ceil(M / 100) consistent ``BatchGetItem`` of the history item of the newest slot each lock item names
   (M <= N: the jobs that ever acquired or missed a slot).

The last slot is the newest the live lock item knows (its lease, last finished or missed slot); its history item
tells the status, a miss's reason, a failure's error. A slot the lock item never saw (a delivery that has not
started, a MISSED ``paused`` record) does not show here: the age column's stale flag covers a schedule that stopped.

The period is :func:`~slotlock.schedule.cron_period` of the catalog's schedule. It scans years of days
(tens of ms each, more on a small Lambda), so periods are cached for the execution environment, and a render
computes new ones for :data:`PERIOD_BUDGET_S` at most: the rows left without one say so and get it on a later
refresh.

Every value is HTML-escaped. A job whose items cannot be decoded (an edited item) is one row with an error cell:
the overview never fails for one job; it fails as a whole (a message) only when DynamoDB does.
"""

from __future__ import annotations

import datetime as dt
import html
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from athena_refresh.catalog import CatalogSchedule
from athena_refresh.contract import STALE_AFTER_PERIODS
from athena_refresh.cost import format_usd
from athena_refresh.failures import describe_failure
from athena_refresh.stored import plain_item
from slotlock import LockRecord, table
from slotlock.codec import decode_lock_item, decode_slot_item
from slotlock.schedule import CronError, CronPeriod, cron_period
from slotlock.slot import Slot
from slotlock.table import PAUSE_REASON, PAUSED_BY

from .batch import MAX_KEYS_PER_BATCH, batch_get
from .errors import ResultsApiError
from .reader import JOBS_PER_BATCH, ResultsReader

logger = logging.getLogger(__name__)

#: The widget's ``view`` param of this mode.
VIEW = "overview"
#: The LATEST item's attributes the overview reads: which result it is, and its cost estimate.
POINTER_FIELDS = ("latest_slot", "latest_generation", "committed_at_ms", "cost_json")
#: The history item's attributes the overview reads (``status`` is a reserved word: names go through ``#``).
SLOT_FIELDS = ("pk", "status", "reason", "error_json")
#: Seconds of schedule-period computation one render may spend (periods are cached afterwards).
PERIOD_BUDGET_S = 2.0
NEVER_RUN = "NEVER RUN"
_MAX_TEXT = 160  # an error message or owner shown in a cell is cut to this many characters
_COLUMNS = ("job", "last slot", "last success", "lease", "paused", "est. cost (latest result)", "fetch the result")


class Periods:
    """Schedule periods by (expression, time zone), cached for the execution environment; each render gives
    :meth:`get` a deadline (``time.monotonic``) past which it computes no new one.

    A value is the :class:`CronPeriod`, or a text saying why there is none.
    """

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._known: dict[tuple[str, str], CronPeriod | str] = {}
        self._monotonic = monotonic

    def deadline(self, budget_s: float) -> float:
        return self._monotonic() + budget_s

    def get(self, schedule: CatalogSchedule | None, deadline: float) -> CronPeriod | str | None:
        """The period of ``schedule``; ``None`` when not computed yet and ``deadline`` has passed."""
        if schedule is None:
            return "no schedule in the catalog"
        key = (schedule.expression, schedule.timezone)
        if key not in self._known:
            if self._monotonic() > deadline:
                return None
            try:
                self._known[key] = cron_period(schedule.expression, schedule.timezone)
            except CronError as exc:
                self._known[key] = f"period unknown: {exc}"
        return self._known[key]


#: The execution environment's cache (the widget function's renders share it).
PERIODS = Periods()


@dataclass(frozen=True)
class JobRow:
    """One job of the overview. Times are epoch milliseconds; ``problem`` set: the row is an error cell."""

    job: str
    status: str = NEVER_RUN
    slot_iso: str | None = None
    detail: str | None = None
    last_success_at_ms: int | None = None
    period: CronPeriod | str | None = None  # None: not computed within the render's budget
    stale: bool = False
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
        """Whether the row goes first: unreadable, stale, or its last slot FAILED."""
        return self.problem is not None or self.stale or self.status == "FAILED"


def read_overview(
    reader: ResultsReader,
    *,
    now_ms: int,
    periods: Periods = PERIODS,
    period_budget_s: float = PERIOD_BUDGET_S,
) -> list[JobRow]:
    """Every job of ``reader``'s catalog as a :class:`JobRow`, attention first, then by name (reads: the
    module docstring). A job whose items cannot be decoded is an error row (:attr:`JobRow.problem`).

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
    probes: dict[str, Slot] = {}
    for name, item in locks.items():
        slot = _newest_slot_or_none(name, item)
        if slot is not None:
            probes[name] = slot
    slot_items = _slot_items(reader, probes)

    deadline = periods.deadline(period_budget_s)
    rows = []
    for name in names:
        try:
            period = periods.get(reader.catalog[name].schedule, deadline)
            row = job_row(name, locks.get(name), slot_items.get(name), pointers.get(name), now_ms=now_ms, period=period)
        except Exception as exc:  # an edited item, whatever it holds, is that job's error cell
            logger.exception("overview: job %s cannot be shown", name)
            row = JobRow(name, status="UNKNOWN", problem=_cut(f"{type(exc).__name__}: {exc}"))
        rows.append(row)
    return sorted(rows, key=lambda row: (not row.attention, row.job))


def newest_slot(record: LockRecord) -> Slot | None:
    """The newest slot the live lock item knows: its lease's, its last finished one, or a missed one."""
    known = [record.lease_slot, record.last_finished_slot, max(record.missed_slots, default=None)]
    return max((slot for slot in known if slot is not None), default=None)


def _newest_slot_or_none(name: str, lock_item: Mapping[str, Any]) -> Slot | None:
    try:
        return newest_slot(decode_lock_item(lock_item, table.lock_key(name)))
    except Exception:  # no slot to read: job_row reports the item as the row's error
        logger.debug("overview: job %s: no slot to read", name, exc_info=True)
        return None


def _slot_items(reader: ResultsReader, probes: Mapping[str, Slot]) -> dict[str, Any]:
    """The history item of each job's ``probes`` slot (generation 1), by job: one ``BatchGetItem`` per 100."""
    keys = {table.slot_key(name, slot.iso): name for name, slot in sorted(probes.items())}
    attribute_names = {f"#s{index}": name for index, name in enumerate(SLOT_FIELDS)}
    ordered = list(keys)
    found: dict[str, Any] = {}
    for start in range(0, len(ordered), MAX_KEYS_PER_BATCH):
        request = {
            reader.lock_table: {
                "Keys": [{table.PARTITION_KEY: {"S": key}} for key in ordered[start : start + MAX_KEYS_PER_BATCH]],
                "ConsistentRead": True,
                "ProjectionExpression": ", ".join(attribute_names),
                "ExpressionAttributeNames": attribute_names,
            }
        }
        items = batch_get(reader.dynamodb, request, what="the jobs' last slot records").get(reader.lock_table, [])
        for item in items:
            key = item.get(table.PARTITION_KEY, {}).get("S")
            if key in keys:
                found[keys[key]] = item
    return found


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
    slot_item: Mapping[str, Any] | None,
    pointer: Mapping[str, Any] | None,
    *,
    now_ms: int,
    period: CronPeriod | str | None,
) -> JobRow:
    """The row of job ``name`` at ``now_ms`` from its live lock item, the history item of its newest slot and its
    LATEST item (DynamoDB JSON; ``None``: absent), and its schedule's ``period``.

    :raises Exception: an item cannot be decoded (:func:`read_overview` makes it the row's error cell).
    """
    cost_usd, cost_of = _cost(pointer)
    if not lock_item:
        return JobRow(name, period=period, cost_usd=cost_usd, cost_of=cost_of)
    record = decode_lock_item(lock_item, table.lock_key(name))
    slot = newest_slot(record)
    status, detail = _status(name, record, slot, slot_item, now_ms) if slot is not None else (NEVER_RUN, None)
    last_ok = record.last_succeeded_at_ms
    stale = (
        isinstance(period, CronPeriod)
        and last_ok is not None
        and now_ms - last_ok > STALE_AFTER_PERIODS * period.longest_s * 1000
    )
    live = record.locked(now_ms)
    return JobRow(
        name,
        status=status,
        slot_iso=slot.iso if slot is not None else None,
        detail=detail,
        last_success_at_ms=last_ok,
        period=period,
        stale=stale,
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
    return status, _cut(failure.summary()) if failure else None


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
    return _cut(str(value["S"])) if isinstance(value, Mapping) and isinstance(value.get("S"), str) else None


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


# --- HTML -----------------------------------------------------------------------------------------------
def render_overview(
    reader: ResultsReader,
    *,
    now_ms: int,
    periods: Periods = PERIODS,
    period_budget_s: float = PERIOD_BUDGET_S,
) -> str:
    """The overview's HTML at ``now_ms``, or one paragraph saying why it cannot be read (DynamoDB failed)."""
    try:
        rows = read_overview(reader, now_ms=now_ms, periods=periods, period_budget_s=period_budget_s)
    except ResultsApiError as exc:
        return f"<p>{html.escape(exc.message)}</p>"
    if not rows:
        return "<p>This deployment has no jobs.</p>"
    drawn = sorted((_drawn(row, now_ms) for row in rows), key=lambda pair: (not pair[0].attention, pair[0].job))
    attention = sum(row.attention for row, _ in drawn)
    summary = (
        f"<p><b>{len(rows)}</b> jobs &middot; <b>{attention}</b> need attention (stale, failed or unreadable, "
        f"listed first) &middot; as of <b>{_iso(now_ms)}</b> (times in UTC)</p>"
    )
    head = "".join(f"<th>{html.escape(name)}</th>" for name in _COLUMNS)
    body = "".join(row_html for _, row_html in drawn)
    notes = [
        (
            "The read API needs SigV4 (a plain link would answer 403): fetch a result with the command, or sign a "
            "request of the route (docs/api.md)."
        )
    ]
    pending = sum(row.period is None and row.problem is None for row in rows)
    if pending:
        notes.append(
            f"{pending} jobs' schedule periods were not computed within this render's time budget: they show on a "
            "later refresh, and those rows are not checked for staleness until then."
        )
    tail = "".join(f"<p>{html.escape(note)}</p>" for note in notes)
    return f"{summary}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{tail}"


def _drawn(row: JobRow, now_ms: int) -> tuple[JobRow, str]:
    """``row`` and its HTML; a row no cell can show (an expiry past year 9999) becomes an error row."""
    try:
        return row, _row_html(row, now_ms)
    except Exception as exc:
        logger.exception("overview: job %s cannot be drawn", row.job)
        row = JobRow(row.job, status="UNKNOWN", problem=_cut(f"{type(exc).__name__}: {exc}"))
        return row, _row_html(row, now_ms)


def _row_html(row: JobRow, now_ms: int) -> str:
    job = f"<td><b>{html.escape(row.job)}</b></td>"
    fetch = (
        f"<td><code>python -m tools.results latest --job {html.escape(row.job)}</code><br>"
        f"<code>GET /jobs/{html.escape(row.job)}/results/latest</code></td>"
    )
    if row.problem is not None:
        span = len(_COLUMNS) - 2
        return f'<tr>{job}<td colspan="{span}">cannot show this job: {html.escape(row.problem)}</td>{fetch}</tr>'
    cells = [_status_cell(row), _age_cell(row, now_ms), _lease_cell(row, now_ms), _pause_cell(row), _cost_cell(row)]
    return "<tr>" + job + "".join(f"<td>{cell}</td>" for cell in cells) + fetch + "</tr>"


def _status_cell(row: JobRow) -> str:
    status = f"<b>{html.escape(row.status)}</b>"
    if row.slot_iso:
        status += f" {html.escape(row.slot_iso)}"
    if row.detail:
        status += f"<br>{html.escape(row.detail)}"
    return status


def _age_cell(row: JobRow, now_ms: int) -> str:
    age = "never" if row.last_success_at_ms is None else duration(now_ms - row.last_success_at_ms)
    if isinstance(row.period, CronPeriod):
        shortest, longest = row.period.shortest_s, row.period.longest_s
        period = (
            duration(longest * 1000)
            if shortest == longest
            else f"{duration(shortest * 1000)} to {duration(longest * 1000)}"
        )
        text = f"{html.escape(age)} (period {html.escape(period)})"
    elif isinstance(row.period, str):
        text = f"{html.escape(age)} ({html.escape(row.period)})"
    else:
        text = f"{html.escape(age)} (period not computed yet)"
    if row.stale:
        text += f"<br><b>STALE</b>: over {STALE_AFTER_PERIODS} periods"
    return text


def _lease_cell(row: JobRow, now_ms: int) -> str:
    if row.lease_owner_id is None or row.lease_expires_at_ms is None:
        return "free"
    left = duration(row.lease_expires_at_ms - now_ms)
    return f"{html.escape(_cut(row.lease_owner_id))}<br>until {_iso(row.lease_expires_at_ms)} (in {html.escape(left)})"


def _pause_cell(row: JobRow) -> str:
    if not row.paused:
        return "no"
    text = "<b>yes</b>"
    if row.paused_by:
        text += f" by {html.escape(row.paused_by)}"
    if row.pause_reason:
        text += f"<br>{html.escape(row.pause_reason)}"
    return text


def _cost_cell(row: JobRow) -> str:
    if row.cost_of is None:
        return "no result yet"
    cost = "no estimate" if row.cost_usd is None else format_usd(row.cost_usd)
    return f"{html.escape(cost)}<br>{html.escape(row.cost_of)}"


def duration(ms: int) -> str:
    """``ms`` for people, in its two largest units: ``45 s``, ``31 min``, ``2 h 5 min``, ``3 d 4 h``."""
    seconds = max(0, ms) // 1000
    units = (("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1))
    for index, (unit, size) in enumerate(units[:-1]):
        if seconds >= size:
            whole, rest = divmod(seconds, size)
            smaller, smaller_size = units[index + 1]
            part = rest // smaller_size
            return f"{whole} {unit}" + (f" {part} {smaller}" if part and smaller != "s" else "")
    return f"{seconds} s"


def _iso(ms: int) -> str:
    return html.escape(dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
