"""How ``python -m tools.results`` prints: ``rich`` tables of a result, the jobs and a history page, aligned
(text left, numbers right), with every value made printable so data never drives the terminal; JSON output.
"""

from __future__ import annotations

import datetime as dt
import json
import unicodedata
from collections.abc import Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from athena_refresh.cost import format_usd

_NUMERIC_TYPES = ("tinyint", "smallint", "integer", "int", "bigint", "real", "double", "float", "decimal")
_BIDI_CONTROLS = set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A))


def printable(value: str) -> str:
    """``value`` with control characters (ANSI escapes among them) and bidi overrides made visible, so data
    never drives the terminal."""
    if value.isprintable():
        return value
    out = []
    for char in value:
        if unicodedata.category(char) == "Cc" or ord(char) in _BIDI_CONTROLS:
            out.append(char.encode("unicode_escape").decode("ascii"))
        else:
            out.append(char)
    return "".join(out)


def cell(value: Any) -> Text:
    """A table cell: NULL dimmed, booleans and nested values as JSON text, never markup."""
    if value is None:
        return Text("NULL", style="dim")
    if isinstance(value, bool):
        return Text("true" if value else "false")
    if isinstance(value, (dict, list)):
        return Text(printable(json.dumps(value, separators=(",", ":"), ensure_ascii=False)))
    return Text(printable(str(value)))


def meta(value: Any) -> Text:
    """A cell of the jobs and history tables: ``-`` for nothing."""
    return Text("-") if value is None or value == "" else cell(value)


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
    rows: list[dict[str, Any]] = document.get("rows") or []
    columns: list[dict[str, Any]] = document.get("columns") or []
    table = Table(caption=f"{len(rows)} row(s)", caption_justify="left")
    for column in columns:
        name = printable(str(column.get("name")))
        table.add_column(name, justify="right" if is_numeric(column, rows) else "left", overflow="fold")
    for row in rows:
        table.add_row(*(cell(row.get(column["name"])) for column in columns))
    console.print(table)


def render_jobs(console: Console, document: dict[str, Any], now_s: float) -> None:
    table = Table(title="jobs")
    for name, justify in (
        ("job", "left"),
        ("schedule", "left"),
        ("lease", "left"),
        ("paused", "left"),
        ("latest slot", "left"),
        ("gen", "right"),
        ("token", "right"),
        ("committed", "left"),
        ("last success", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
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
        table.add_row(
            meta(job.get("job")),
            meta(
                f"{schedule.get('expression')} {schedule.get('timezone')} x{schedule.get('racers')}"
                if schedule
                else "-"
            ),
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
    console.print(table)


def render_history(console: Console, job: str, entries: list[dict[str, Any]]) -> None:
    table = Table(title=f"history of {printable(job)} (newest first)", caption=f"{len(entries)} generation(s)")
    for name, justify in (
        ("slot", "left"),
        ("gen", "right"),
        ("status", "left"),
        ("reason / error", "left"),
        ("token", "right"),
        ("owner / requested by", "left"),
        ("query", "left"),
        ("started", "left"),
        ("duration s", "right"),
        ("scanned bytes", "right"),
        ("rows", "right"),
        ("est. cost USD", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for entry in entries:
        duration = entry.get("duration_ms")
        error: dict[str, Any] = entry["error"] if isinstance(entry.get("error"), dict) else {}
        reason = entry.get("reason") or error.get("type") or ("corrupt" if entry.get("corrupt") else None)
        table.add_row(
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
    console.print(table)


# --- the commands ------------------------------------------------------------------------------------------


def print_json(out: TextIO, document: Any) -> None:
    out.write(json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def console_for(out: TextIO) -> Console:
    terminal = out.isatty()
    # Off a terminal nothing wraps or truncates (a pager, a file): the table is as wide as its data.
    return Console(file=out, width=None if terminal else 100_000, highlight=False, soft_wrap=not terminal)
