"""The dashboard's custom widget, in two modes chosen by its ``params``:

- ``{"job": <name>}``: a job's latest result as an HTML table, text columns included, with its slot, generation,
  age and fencing token, so the dashboard shows what the job computed (one ``GetItem``), under a line naming the
  last slot's failure when it FAILED or MISSED (the table is then the last good result; one ``GetItem`` of the lock
  item, a second of that slot's record, each a one-key ``BatchGetItem``); with no result yet, the last slot's status and reason;
- ``{"view": "overview"}``: every job of the deployment in one table, one row per job (status of the last slot,
  freshness as ``latest`` says it, age of the last success, lease, pause, the latest result and its cost estimate,
  how to fetch it): :mod:`results_api.overview` (one ``BatchGetItem`` per 50 jobs, and one per 100 slot records).

CloudWatch calls the widget's Lambda with the widget's ``params`` merged into the event plus ``widgetContext``;
the function returns HTML, which CloudWatch renders sanitised. With ``describe`` set it returns the widget's
documentation (Markdown). https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/add_custom_widget_dashboard_about.html

Every value is HTML-escaped (a result value of ``<script>`` shows as text). At most :data:`MAX_ROWS` rows are
drawn; offloaded rows are read from S3 (the same read-only role as the API). What cannot be shown is a message,
never an exception.
"""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Mapping
from typing import Any

from athena_refresh.cost import format_usd
from athena_refresh.stored import StoredResult

from . import overview, overview_html
from .errors import ResultNotFoundError, ResultsApiError
from .reader import ResultsReader

logger = logging.getLogger(__name__)

MAX_ROWS = 100
DOCUMENTATION = """## Latest results
Two modes, chosen by the params.

**One job**: its newest committed result (one DynamoDB read) as a table: slot, generation, age, fencing token,
query execution id, then every column, text included.

```
params:
  job: flights-dashboard   # the job's name
```

**Overview**: every job of the deployment, one row each: status of its last slot, its freshness as the API's
`latest` says it (on time, waiting, late, failing or paused; late yes or no; the expected next slot), age of its
last success, live lease holder, pause, the latest result (slot, commit time, cost estimate), and how to fetch it.
Late, failing, failed and unreadable jobs first. One DynamoDB BatchGetItem per 50 jobs, plus one per 100 slot
records (each job's last slot and its 4 newest firings).

```
params:
  view: overview
```
"""


def render_widget(reader: ResultsReader, job: Any, *, now_ms: int) -> str:
    """The widget's HTML for ``job`` at ``now_ms``: the latest result, or a message naming what is missing."""
    if not isinstance(job, str):
        return _message("This widget needs the param <code>job</code> (the job's name).")
    try:
        stored = reader.latest(job)
        rows = reader.rows(stored)
    except ResultNotFoundError as exc:
        last = _last_slot(reader, job, now_ms)
        return _message(html.escape(exc.message)) + (_message(last) if last else "")
    except ResultsApiError as exc:
        return _message(html.escape(exc.message))
    last = _last_slot(reader, job, now_ms, unless_succeeded=True)
    note = _message(f"{last} The result below is the last good one.") if last else ""
    return note + _table(stored, rows, now_ms)


def _last_slot(reader: ResultsReader, job: str, now_ms: int, *, unless_succeeded: bool = False) -> str:
    """The job's newest slot, its status and, when it did not succeed, its reason (HTML); ``""`` when there is
    nothing to say (no slot yet, or ``unless_succeeded`` and it did not fail or miss). QuickSight's SPICE keeps
    the last good data visible when a refresh fails and says so: so does this widget."""
    try:
        last = overview.last_slot(reader, job, now_ms=now_ms)
    except Exception:  # an unreadable lock item or DynamoDB failing: the result (or its message) is still shown
        logger.warning("widget: job %s: the last slot cannot be read", job, exc_info=True)
        return ""
    if last is None:
        return ""
    slot_iso, status, detail = last
    if unless_succeeded and status not in ("FAILED", "MISSED"):
        return ""
    text = f"Last slot {html.escape(slot_iso)}: <b>{html.escape(status)}</b>"
    return text + (f": {html.escape(detail)}." if detail else ".")


def widget_response(event: Mapping[str, Any], reader: ResultsReader, *, now_ms: int) -> str:
    """The custom widget Lambda's answer to ``event``: documentation when ``describe`` is set, the overview for
    ``view`` ``overview``, else the latest result of ``job``."""
    if event.get("describe"):
        return DOCUMENTATION
    view = event.get("view")
    if view is None:
        return render_widget(reader, event.get("job"), now_ms=now_ms)
    if view == overview.VIEW:
        return overview_html.render_overview(reader, now_ms=now_ms)
    shown = html.escape(repr(view)[:60])
    return _message(
        f"Unknown view {shown}: the param <code>view</code> takes <code>{overview.VIEW}</code> (every job); "
        "for one job, give <code>job</code> instead."
    )


def _table(stored: StoredResult, rows: list[dict[str, Any]], now_ms: int) -> str:
    names = [column["name"] for column in stored.columns]
    facts = [
        ("slot", stored.slot_iso),
        ("generation", str(stored.generation)),
        ("age", _age(now_ms - stored.committed_at_ms)),
        ("fencing token", str(stored.fencing_token)),
        ("rows", str(stored.row_count)),
        ("query", stored.query_execution_id),
    ]
    if stored.cost is not None:
        facts.append(("est. cost (estimate)", format_usd(stored.cost.get("estimated_cost_usd"))))
    header = " &middot; ".join(f"{html.escape(k)} <b>{html.escape(v)}</b>" for k, v in facts)
    head = "".join(
        f'<th title="{html.escape(column["type"], quote=True)}">{html.escape(column["name"])}</th>'
        for column in stored.columns
    )
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(row.get(name))}</td>" for name in names) + "</tr>" for row in rows[:MAX_ROWS]
    )
    more = (
        f"<p>{len(rows) - MAX_ROWS} more rows not shown (the read API serves them all).</p>"
        if len(rows) > MAX_ROWS
        else ""
    )
    return f"<p>{header}</p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def _cell(value: Any) -> str:
    if value is None:
        return "<i>null</i>"
    if isinstance(value, (dict, list)):
        return html.escape(json.dumps(value, separators=(",", ":")))
    if isinstance(value, bool):
        return "true" if value else "false"
    return html.escape(str(value))


def _age(age_ms: int) -> str:
    seconds = max(0, age_ms) // 1000
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


def _message(text_html: str) -> str:
    return f"<p>{text_html}</p>"
