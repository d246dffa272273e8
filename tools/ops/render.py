"""How ``python -m tools.ops`` prints what it read: the status table (or JSON), the history table (or JSON lines),
and a run's results. Each slot's capacity wait (issue 24) is a column, and ``capacity`` in the JSON."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console

from athena_refresh.cost import format_usd
from athena_refresh.failures import describe_failure
from slotlock.history import HistoryRecord
from tools.cli.render import add_row, table
from tools.ops.operator import Operator
from tools.ops.views import RunResult, capacity_wait

#: A FAILED or MISSED slot's reason in a table is cut to this; ``--json`` has the full text.
REASON_CHARS = 100


def _ms(value: int | None) -> str:
    if value is None:
        return "-"
    return dt.datetime.fromtimestamp(value / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def wait_text(wait: dict[str, Any] | None) -> str:
    """A slot's capacity wait (:func:`tools.ops.views.capacity_wait`) in a few words; ``-`` without one."""
    if wait is None:
        return "-"
    waited = f"{wait['waited_ms'] / 1000:.1f} s"
    given_back = f", given back {wait['deferrals']}x" if wait["deferrals"] else ""
    if wait["source"] == "waiting":
        return f"waiting {waited} so far{given_back}"
    if wait["source"] == "missed":
        return f"{waited}{given_back}: MISSED, no permit"
    return f"{waited}{given_back}"


def render_status(console: Console, operator: Operator, job: str | Sequence[str] | None, as_json: bool) -> bool:
    """Print the jobs' status; returns whether one of them is failing (its last finished slot FAILED, or MISSED
    for a reason other than ``paused``)."""
    statuses = operator.status(job)
    failing = any(status.failure is not None and status.failure.failing for status in statuses)
    if as_json:
        console.print_json(json.dumps([s.as_dict() for s in statuses]))
        return failing
    columns = ("job", "holder", "token", "lease", "manual run", "last finished", "last success", "paused")
    rendered = table((*columns, "capacity wait"), title="status", show_lines=True)
    for status in statuses:
        d = status.as_dict()
        holder = d["holder"]
        lease = "-"
        if holder["locked"]:
            lease = f"{_ms(holder['lease_expires_at_ms'])} ({holder['lease_remaining_ms'] / 1000:.0f} s left)"
        elif holder["lease_expires_at_ms"] is not None:
            lease = f"expired {_ms(holder['lease_expires_at_ms'])}"
            if holder["given_back_reason"]:
                lease += f", given back ({holder['given_back_reason']})"
        manual = d["manual_run"]
        manual_text = (
            f"slot {manual['slot']} g{manual['generation']} by {manual['owner_id']}" if manual["in_progress"] else "-"
        )
        finished = d["last_finished"]
        success = d["last_success"]
        paused = "no"
        if d["paused"]:
            audit = d["pause_audit"]
            paused = (
                f"yes, by {audit.get('paused_by')} at {_ms(audit.get('paused_at_ms'))}: {audit.get('pause_reason')}"
            )
        add_row(
            rendered,
            status.job,
            f"{holder['owner_id'] or '-'}" + (f" (slot {holder['slot']})" if holder["locked"] else ""),
            str(holder["fencing_token"]),
            lease,
            manual_text,
            f"{finished['slot'] or '-'} {finished['outcome'] or ''}"
            + (f"\n{status.failure.summary(REASON_CHARS)}" if status.failure else ""),
            f"{success['slot'] or '-'} ({_age(success['age_s'])} ago)" if success["slot"] else "-",
            paused,
            f"slot {d['capacity']['slot']}: {wait_text(d['capacity'])}" if d["capacity"] else "-",
        )
    console.print(rendered)
    return failing


def render_history(console: Console, operator: Operator, args: argparse.Namespace) -> None:
    records = operator.history(args.job, since=args.since, limit=args.limit, status=args.status)
    if args.json:
        for record in records:
            failure = describe_failure(record.status, record.reason, record.error)
            document = {**record.as_dict(), "capacity": capacity_wait(record)}
            console.print_json(json.dumps({**document, "failure": failure.as_dict() if failure else None}))
        return
    columns = ("slot", "gen", "status", "reason", "token", "owner / requested by", "query", "duration", "rows")
    rendered = table((*columns, "capacity wait", "est. cost"), title=f"history of {args.job} (newest first)")
    for record in records:
        summary, state = record.summary, record.state
        query = summary.get("query_execution_id") or state.get("query_execution_id") or "-"
        add_row(
            rendered,
            record.slot.iso,
            str(record.generation),
            record.status,
            _reason(record),
            "-" if record.fencing_token is None else str(record.fencing_token),
            record.requested_by or record.owner_id or "-",
            str(query),
            "-" if record.duration_ms is None else f"{record.duration_ms / 1000:.1f} s",
            str(summary.get("row_count", "-")),
            wait_text(capacity_wait(record)),
            format_usd(cost.get("estimated_cost_usd")) if isinstance(cost := summary.get("cost"), dict) else "-",
        )
    console.print(rendered)


def _reason(record: HistoryRecord) -> str:
    """A history row's reason: a FAILED or MISSED slot's error class and message (cut; ``--json`` has it whole)."""
    failure = describe_failure(record.status, record.reason, record.error)
    if failure is not None:
        return failure.summary(REASON_CHARS)
    return record.reason or ("-" if not record.corrupt else "corrupt")


def render_results(console: Console, title: str, results: Sequence[RunResult]) -> None:
    rendered = table(("slot", "gen", "status", "token", "query", "note"), title=title)
    for result in results:
        record = result.record
        query = (record.summary.get("query_execution_id") if record else None) or "-"
        note = "done before (skipped)" if result.skipped else ("resumed" if result.resumed else "")
        if result.timed_out:
            note = f"still {result.status} after {result.elapsed_s:.0f} s"
        if record is not None and record.reason:
            note = f"{note} {record.reason}".strip()
        add_row(
            rendered,
            result.slot.iso,
            str(result.generation),
            result.status,
            "-" if record is None or record.fencing_token is None else str(record.fencing_token),
            str(query),
            note,
        )
    console.print(rendered)


__all__ = ["render_history", "render_results", "render_status", "wait_text"]
