"""The dashboard's overview as HTML: one table, one row per job of :func:`results_api.overview.read_overview`
(the custom widget's ``{"view": "overview"}`` mode, :func:`results_api.widget.widget_response`).

Columns: the job; its last slot's status and reason; its freshness as ``latest`` says it (the state, late yes or
no, the reason, the expected next slot); the age of its last success; the live lease; the pause; the latest result
(its slot, when it was committed, its cost estimate); how to fetch it (a command and the API route: the API needs
SigV4, so a plain link would answer 403). Every value is HTML-escaped; a row no cell can show (a time past year
9999) becomes an error row.
"""

from __future__ import annotations

import datetime as dt
import html
import logging
from collections.abc import Mapping
from typing import Any

from athena_refresh.cost import format_usd

from .errors import ResultsApiError
from .overview import JobRow, cut, read_overview
from .reader import ResultsReader

logger = logging.getLogger(__name__)

COLUMNS = (
    "job",
    "last slot",
    "freshness",
    "last success",
    "lease",
    "paused",
    "latest result",
    "fetch the result",
)


def render_overview(reader: ResultsReader, *, now_ms: int) -> str:
    """The overview's HTML at ``now_ms``, or one paragraph saying why it cannot be read (DynamoDB failed)."""
    try:
        rows = read_overview(reader, now_ms=now_ms)
    except ResultsApiError as exc:
        return f"<p>{html.escape(exc.message)}</p>"
    if not rows:
        return "<p>This deployment has no jobs.</p>"
    drawn = sorted((_drawn(row, now_ms) for row in rows), key=lambda pair: (not pair[0].attention, pair[0].job))
    attention = sum(row.attention for row, _ in drawn)
    late = sum(bool((row.freshness or {}).get("late")) for row, _ in drawn)
    summary = (
        f"<p><b>{len(rows)}</b> jobs &middot; <b>{attention}</b> need attention (late, failing, failed or "
        f"unreadable, listed first) &middot; <b>{late}</b> late &middot; as of <b>{_iso(now_ms)}</b> (times in UTC)</p>"
    )
    head = "".join(f"<th>{html.escape(name)}</th>" for name in COLUMNS)
    body = "".join(row_html for _, row_html in drawn)
    notes = (
        "Freshness is what GET /jobs/{job}/results/latest says (the watchdog's decision: docs/watchdog.md).",
        (
            "The read API needs SigV4 (a plain link would answer 403): fetch a result with the command, or sign a "
            "request of the route (docs/api.md)."
        ),
    )
    tail = "".join(f"<p>{html.escape(note)}</p>" for note in notes)
    return f"{summary}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{tail}"


def _drawn(row: JobRow, now_ms: int) -> tuple[JobRow, str]:
    """``row`` and its HTML; a row no cell can show (an expiry past year 9999) becomes an error row."""
    try:
        return row, _row_html(row, now_ms)
    except Exception as exc:
        logger.exception("overview: job %s cannot be drawn", row.job)
        row = JobRow(row.job, status="UNKNOWN", problem=cut(f"{type(exc).__name__}: {exc}"))
        return row, _row_html(row, now_ms)


def _row_html(row: JobRow, now_ms: int) -> str:
    job = f"<td><b>{html.escape(row.job)}</b></td>"
    fetch = (
        f"<td><code>python -m tools.results latest --job {html.escape(row.job)}</code><br>"
        f"<code>GET /jobs/{html.escape(row.job)}/results/latest</code></td>"
    )
    if row.problem is not None:
        span = len(COLUMNS) - 2
        return f'<tr>{job}<td colspan="{span}">cannot show this job: {html.escape(row.problem)}</td>{fetch}</tr>'
    cells = [
        _status_cell(row),
        freshness_cell(row.freshness or {}),
        "never" if row.last_success_at_ms is None else f"{html.escape(duration(now_ms - row.last_success_at_ms))} ago",
        _lease_cell(row, now_ms),
        _pause_cell(row),
        _result_cell(row, now_ms),
    ]
    return "<tr>" + job + "".join(f"<td>{cell}</td>" for cell in cells) + fetch + "</tr>"


def _status_cell(row: JobRow) -> str:
    status = f"<b>{html.escape(row.status)}</b>"
    if row.slot_iso:
        status += f" {html.escape(row.slot_iso)}"
    if row.detail:
        status += f"<br>{html.escape(row.detail)}"
    return status


def freshness_cell(freshness: Mapping[str, Any]) -> str:
    """A ``freshness`` object (:func:`results_api.freshness.freshness_document`) as one cell: the state in capitals,
    ``late: yes``/``late: no``, the reason, the expected next slot."""
    state, late = freshness.get("state"), freshness.get("late")
    if state is None:
        text = "<b>UNKNOWN</b>"
    else:
        text = f"<b>{html.escape(str(state).replace('_', ' ').upper())}</b> &middot; late: {'yes' if late else 'no'}"
    reason = freshness.get("reason") or ("no schedule in the catalog" if state is None else None)
    if reason:
        text += f"<br>{html.escape(cut(str(reason)))}"
    if freshness.get("expected_next_slot"):
        text += f"<br>next slot {html.escape(str(freshness['expected_next_slot']))}"
    return text


def _lease_cell(row: JobRow, now_ms: int) -> str:
    if row.lease_owner_id is None or row.lease_expires_at_ms is None:
        return "free"
    left = duration(row.lease_expires_at_ms - now_ms)
    return f"{html.escape(cut(row.lease_owner_id))}<br>until {_iso(row.lease_expires_at_ms)} (in {html.escape(left)})"


def _pause_cell(row: JobRow) -> str:
    if not row.paused:
        return "no"
    text = "<b>yes</b>"
    if row.paused_by:
        text += f" by {html.escape(row.paused_by)}"
    if row.pause_reason:
        text += f"<br>{html.escape(row.pause_reason)}"
    return text


def _result_cell(row: JobRow, now_ms: int) -> str:
    """The latest result: its slot (and generation), when it was committed (the freshness object's), its cost."""
    if row.cost_of is None:
        return "no result yet"
    text = html.escape(row.cost_of)
    committed = (row.freshness or {}).get("committed_at_ms")
    if isinstance(committed, int):
        text += f"<br>committed {_iso(committed)} ({html.escape(duration(now_ms - committed))} ago)"
    cost = "no estimate" if row.cost_usd is None else format_usd(row.cost_usd)
    return f"{text}<br>est. cost {html.escape(cost)}"


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
