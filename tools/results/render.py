"""How ``python -m tools.results`` prints its tables: a result, the jobs and a history page, aligned (text left,
numbers right), through the one renderer (:mod:`tools.cli.render`: every value printable and never markup, so data
never drives the terminal; JSON and CSV output too)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from athena_refresh.cost import format_usd
from athena_refresh.failures import describe_failure
from tools.cli.render import add_row, data_cell, printable, table

_NUMERIC_TYPES = ("tinyint", "smallint", "integer", "int", "bigint", "real", "double", "float", "decimal")


def meta(value: Any) -> Text:
    """A cell of the jobs and history tables: ``-`` for nothing."""
    return Text("-") if value is None or value == "" else data_cell(value)


def is_numeric(column: dict[str, Any], rows: Sequence[dict[str, Any]]) -> bool:
    """Whether a column is right-aligned: an Athena numeric type, or (type unknown) only numbers in it."""
    kind = column.get("type")
    if isinstance(kind, str):
        return kind.lower().split("(")[0].strip() in _NUMERIC_TYPES
    values = [row.get(column["name"]) for row in rows if row.get(column["name"]) is not None]
    return bool(values) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def when(ms: Any) -> str:
    if not isinstance(ms, int):
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def age(ms: Any, now_s: float) -> str:
    """How long ago epoch-milliseconds ``ms`` was (``-`` unknown)."""
    if not isinstance(ms, int):
        return "-"
    seconds = max(0.0, now_s - ms / 1000)
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86400:.1f} d ago"


def render_result(console: Console, document: dict[str, Any], now_s: float) -> None:
    committed = document.get("committed_at_ms")
    fields = [
        ("job", document.get("job")),
        ("slot", document.get("slot")),
        ("generation", document.get("generation")),
        ("fencing token", document.get("fencing_token")),
        ("query", document.get("query_execution_id")),
        ("committed", f"{when(committed)} ({age(committed, now_s)})" if isinstance(committed, int) else "-"),
    ]
    header = Text()
    for index, (name, value) in enumerate(fields):
        header.append(("   " if index else "") + f"{name} ", style="bold")
        header.append(printable("-" if value is None else str(value)))
    console.print(header)
    freshness = document.get("freshness")
    if isinstance(freshness, dict) and freshness.get("state"):
        line = Text()
        line.append("freshness ", style="bold")
        line.append(
            printable(str(freshness["state"]).replace("_", " ")), style="bold red" if freshness.get("late") else ""
        )
        line.append(printable(f" ({freshness.get('reason') or '-'})   "))
        line.append("expected next slot ", style="bold")
        line.append(printable(str(freshness.get("expected_next_slot") or "-")))
        console.print(line)
    rows: list[dict[str, Any]] = document.get("rows") or []
    columns: list[dict[str, Any]] = document.get("columns") or []
    names = [printable(str(column.get("name"))) for column in columns]
    right = [name for name, column in zip(names, columns, strict=True) if is_numeric(column, rows)]
    rendered = table(names, right=right, fold=True, caption=f"{len(rows)} row(s)", caption_justify="left")
    for row in rows:
        add_row(rendered, *(data_cell(row.get(column["name"])) for column in columns))
    console.print(rendered)


def freshness_cell(freshness: Any) -> Text:
    """A job's ``freshness`` (as ``latest`` says it) in the jobs table: the state (bold red when late), then the
    expected next slot; ``-`` when unknown (no schedule in the catalog)."""
    if not isinstance(freshness, dict) or not freshness.get("state"):
        return Text("-")
    cell = Text(printable(str(freshness["state"]).replace("_", " ")), style="bold red" if freshness.get("late") else "")
    cell.append(printable(f", next {freshness.get('expected_next_slot') or '-'}"))
    return cell


def render_jobs(console: Console, document: dict[str, Any], now_s: float) -> None:
    columns = (
        "job",
        "schedule",
        "freshness",
        "lease",
        "paused",
        "latest slot",
        "gen",
        "token",
        "committed",
        "last success",
    )
    rendered = table(columns, right=("gen", "token"), title="jobs")
    for job in document.get("jobs", []):
        schedule = job.get("schedule") or {}
        lease, latest, success = job.get("lease") or {}, job.get("latest") or {}, job.get("last_success") or {}
        lease_text = str(lease.get("state") or "-")
        if lease.get("state") == "held":
            lease_text += (
                f" by {lease.get('owner_id')} (slot {lease.get('slot')}, expires {when(lease.get('expires_at_ms'))})"
            )
        elif lease.get("state") == "unknown" and job.get("problem"):
            lease_text += f": {job['problem']}"
        paused = "no"
        if job.get("paused"):
            paused = f"yes, through {job.get('paused_through_slot') or '-'}"
        rendered.add_row(
            meta(job.get("job")),
            meta(
                f"{schedule.get('expression')} {schedule.get('timezone')} x{schedule.get('racers')}"
                if schedule
                else "-"
            ),
            freshness_cell(job.get("freshness")),
            meta(lease_text),
            meta(paused),
            meta(latest.get("slot") or "-"),
            meta(latest.get("generation")),
            meta(latest.get("fencing_token")),
            meta(f"{when(latest.get('committed_at_ms'))} ({age(latest.get('committed_at_ms'), now_s)})")
            if isinstance(latest.get("committed_at_ms"), int)
            else meta("-"),
            meta(f"{success.get('slot')} ({age(success.get('at_ms'), now_s)})" if success.get("slot") else "-"),
        )
    console.print(rendered)


#: A FAILED or MISSED slot's reason in a history table is cut to this; ``--format json`` has the full text.
REASON_CHARS = 100


def render_history(console: Console, job: str, entries: list[dict[str, Any]]) -> None:
    columns = ("slot", "gen", "status", "reason / error", "token", "owner / requested by", "query", "started")
    rendered = table(
        (*columns, "duration s", "scanned bytes", "rows", "est. cost USD"),
        right=("gen", "token", "duration s", "scanned bytes", "rows", "est. cost USD"),
        title=f"history of {printable(job)} (newest first)",
        caption=f"{len(entries)} generation(s)",
    )
    for entry in entries:
        duration = entry.get("duration_ms")
        failure = describe_failure(entry.get("status"), entry.get("reason"), entry.get("error"))
        reason = (
            failure.summary(REASON_CHARS)
            if failure
            else entry.get("reason") or ("corrupt" if entry.get("corrupt") else None)
        )
        rendered.add_row(
            meta(entry.get("slot")),
            meta(entry.get("generation")),
            meta(entry.get("status")),
            meta(reason),
            meta(entry.get("fencing_token")),
            meta(entry.get("requested_by") or entry.get("owner_id") or "-"),
            meta(entry.get("query_execution_id") or "-"),
            meta(when(entry.get("started_at_ms"))),
            meta(f"{duration / 1000:.1f}" if isinstance(duration, int) else None),
            meta(entry.get("data_scanned_bytes")),
            meta(entry.get("row_count")),
            meta(format_usd(entry.get("estimated_cost_usd")) if entry.get("estimated_cost_usd") is not None else None),
        )
    console.print(rendered)
