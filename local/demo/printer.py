"""The demo's terminal output: the per-slot table, the stored numbers per slot and the totals.

Pure formatting over the report's per-slot summaries (:meth:`local.demo.runner.Demo.summarise`) and totals;
``out`` receives one line at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

#: The totals the last line shows, in this order (every key of ``Demo.verify``'s totals is in the report).
TOTALS_SHOWN = (
    "slots",
    "racers",
    "invocations",
    "slots_completed",
    "duplicate_commits",
    "stale_writes_rejected",
    "stale_writes_accepted",
    "takeovers",
    "reentries",
    "lost_races",
    "queries_started",
    "kills_injected",
    "pauses_injected",
    "lambda_retries",
    "late_deliveries",
    "cold_starts",
)


def short(text: str | None, n: int = 8) -> str:
    return "-" if not text else str(text)[:n]


def slot_line(number: int, total: int, s: dict[str, Any], elapsed_s: float) -> str:
    """The progress line printed when a slot has resolved."""
    return (
        f"slot {number}/{total} {s['slot']}  winner racer {s['winner_racer']}"
        f" ({s['winner_worker']}) token {s['fencing_token']}  {s['outcome']}  rows {s['rows']}"
        f"  takeovers {s['takeovers']}  re-entries {s['reentries']}  lost races {s['lost']}"
        f"  {elapsed_s:.1f} s"
    )


def print_tables(
    out: Callable[[str], None],
    summaries: Sequence[dict[str, Any]],
    totals: dict[str, Any],
    *,
    results_table: str,
    window_s: int,
    data_year: int,
) -> None:
    """The per-slot table (winner, token, takeovers, rows, outcome), the stored numbers, then the totals."""
    out("")
    header = (
        f"{'#':>2}  {'slot (UTC)':<20}  {'2013 window end':<16}  {'winner':<8}  {'owner':<8}  {'token':>5}"
        f"  {'takeovers':>9}  {'rows':>4}  outcome"
    )
    out(header)
    out("-" * (len(header) + 30))
    for number, s in enumerate(summaries, 1):
        window_end = (s.get("window") or [None, None])[1]
        window_end = window_end.replace("T", " ")[:16] if window_end else "-"
        racer = f"racer {s['winner_racer']}" if s["winner_racer"] is not None else "-"
        out(
            f"{number:>2}  {s['slot']:<20}  {window_end:<16}  {racer:<8}  {short(s['winner_owner_id']):<8}"
            f"  {s['fencing_token'] if s['fencing_token'] is not None else '-':>5}  {s['takeovers']:>9}"
            f"  {s['rows'] if s['rows'] is not None else '-':>4}  {s['outcome']}"
            f"{'  PROBLEM: ' + '; '.join(s.get('problems') or []) if s.get('problems') else ''}"
        )
    out("")
    out(
        f"Results read back from {results_table} (flights departing in the {window_s // 3600} h"
        f" before the slot's time, {data_year}):"
    )
    origins = sorted({row.get("origin") for s in summaries for row in (s.get("results") or []) if row.get("origin")})
    out(
        f"{'#':>2}  {'slot (UTC)':<20}  "
        + "  ".join(f"{o + ' flights':>11}" for o in origins)
        + f"  {'delayed>15m':>11}  {'cancelled':>9}  {'avg dep delay':>13}"
    )
    for number, s in enumerate(summaries, 1):
        rows = {row.get("origin"): row for row in (s.get("results") or [])}
        if not rows:
            out(f"{number:>2}  {s['slot']:<20}  (no result)")
            continue
        flights = sum(int(r.get("flights") or 0) for r in rows.values())
        delayed = sum(int(r.get("delayed_departures") or 0) for r in rows.values())
        cancelled = sum(int(r.get("cancelled") or 0) for r in rows.values())
        weighted = [
            (float(r["avg_dep_delay_min"]), int(r.get("flights") or 0) - int(r.get("cancelled") or 0))
            for r in rows.values()
            if isinstance(r.get("avg_dep_delay_min"), (int, float))
        ]
        total_w = sum(w for _, w in weighted)
        avg = sum(v * w for v, w in weighted) / total_w if total_w else float("nan")
        cells = "  ".join(f"{(rows.get(o) or {}).get('flights', '-'):>11}" for o in origins)
        out(
            f"{number:>2}  {s['slot']:<20}  {cells}  {delayed:>11}  {cancelled:>9}  {avg:>10.2f} min"
            f"   (total {flights})"
        )
    same = [
        f"{n}={n + 1}"
        for n, (a, b) in enumerate(itertools.pairwise(summaries), 1)
        if a.get("results") is not None and a.get("results") == b.get("results")
    ]
    if same:
        out(
            f"note: slots {', '.join(same)} hold identical numbers: their windows differ only by half-hours"
            " without scheduled departures in the data (NYC nights, about 05:00-09:00 UTC)"
        )
    out("")
    out("Totals: " + ", ".join(f"{k} {totals[k]}" for k in TOTALS_SHOWN))
