"""The demo's terminal output: the per-slot table (every job), each job's stored numbers, and the totals.

Pure formatting over the report's per-slot summaries (:meth:`local.demo.runner.Demo.summarise`) and totals;
``out`` receives one line at a time.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from athena_refresh.cost import format_usd
from athena_refresh.jobspec import JobSpec
from athena_refresh.registry import REGISTRY_PATH_OUTPUT
from tools.cli.render import padded_line

#: The totals the last line shows, in this order (every key of ``Demo.verify``'s totals is in the report).
TOTALS_SHOWN = (
    "slots",
    "racers",
    "invocations",
    "slots_completed",
    "slots_failed",
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


#: ``make serve``'s port unless ``PORT`` says otherwise (local.serve.cli).
DEFAULT_SERVE_PORT = 8080
#: The shared stack (app.py) and its output naming the deployed read API's base URL.
STACK_NAME = "ScheduledAthenaRefresh"
READ_API_OUTPUT = "ReadApiUrl"


def output_command(variable: str, output: str, stack: str = STACK_NAME) -> str:
    """The shell line that sets ``variable`` to the shared stack's output ``output`` (AWS CLI)."""
    return (
        f"{variable}=$(aws cloudformation describe-stacks --stack-name {stack} --query"
        f" \"Stacks[0].Outputs[?OutputKey=='{output}'].OutputValue\" --output text)"
    )


def deployed_job_lines(job: str) -> list[str]:
    """The commands that find ``job`` on a deployment: its entry in the job registry (the shared stack's output
    ``JobRegistryPath``; no stack has a per-job output) and the operator tools, which read the same registry."""
    return [
        (
            f"Deployed: {job}'s function, job stack, log group and schedule are its job registry entry, under the"
            f" shared stack's output {REGISTRY_PATH_OUTPUT}; the operator tools read the same registry:"
        ),
        f"  {output_command('JOBS', REGISTRY_PATH_OUTPUT)}",
        "  aws ssm get-parameters-by-path --path \"$JOBS\" --recursive --query 'Parameters[].Name' --output text",
        f'  aws ssm get-parameters-by-path --path "${{JOBS}}{job}/" --query "Parameters[].Value" --output text',
        f"  .venv/bin/python -m tools.ops status --job {job}",
        f"  .venv/bin/python -m tools.results latest --job {job}",
    ]


def serve_base_url(env: Mapping[str, str] | None = None) -> str:
    """Where ``make serve`` listens: http://127.0.0.1:$PORT (default 8080)."""
    port = ((os.environ if env is None else env).get("PORT") or "").strip() or str(DEFAULT_SERVE_PORT)
    return f"http://127.0.0.1:{port}"


def read_api_lines(
    base_url: str,
    *,
    job: str,
    slot: str | None,
    history_job: str | None = None,
    serve_command: str | None = "make serve",
    store: str = ".demo/store",
) -> list[str]:
    """Working curl lines for the read API: ``make serve``'s (``base_url``, no signing), then the deployed one's
    (SigV4-signed, IAM authorization; the URL is the stack's ``ReadApiUrl`` output). ``slot``: a slot of
    ``job`` with a committed result; ``history_job``: the job whose slots to list (default ``job``);
    ``serve_command``: how to start the local server (``None``: it is running, say nothing of it)."""
    history_job = history_job or job
    lines = []
    if serve_command:
        lines.append(f"Read these results over HTTP: run `{serve_command}` in another terminal (it serves {store}")
        lines.append("through the read API; no SigV4 locally; PORT=... for another port), then:")
    lines += [
        f"  curl -s {base_url}/jobs",
        f"  curl -s {base_url}/jobs/{job}/results/latest",
        f"  curl -s -H 'Accept: text/csv' {base_url}/jobs/{job}/results/latest",
    ]
    if slot:
        lines.append(f"  curl -s {base_url}/jobs/{job}/results/{slot}")
    lines += [
        f"  curl -s '{base_url}/jobs/{history_job}/slots?limit=5'",
        f"  curl -s {base_url}/jobs/{job}/widget   # the dashboard widget's HTML (or open it in a browser)",
        f"  curl -s {base_url}/openapi.json",
        (
            f"Deployed: the same routes at the shared stack's output {READ_API_OUTPUT}, IAM-authorized (SigV4, service"
            " execute-api; AWS_REGION: the stack's region):"
        ),
        f"  {output_command('READ_API_URL', READ_API_OUTPUT)}",
        (
            '  curl -s --aws-sigv4 "aws:amz:$AWS_REGION:execute-api" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"'
            ' -H "x-amz-security-token: $AWS_SESSION_TOKEN" "$READ_API_URL/jobs"'
        ),
    ]
    return lines


def short(text: str | None, n: int = 8) -> str:
    return "-" if not text else str(text)[:n]


#: A leading error code, as Athena (and the local engine) begin their messages: ``COLUMN_NOT_FOUND: line 1:8: ...``.
_ERROR_CODE = re.compile(r"[A-Z][A-Z0-9_]{2,}(?=: )")
MAX_REASON_CHARS = 200


def failure_reason(error: Any) -> str | None:
    """A failed slot's reason in one line: its error code and the first line of its error message (the error the
    winner recorded: an engine failure, a result that cannot be stored, a write refused for good)."""
    if not isinstance(error, Mapping):
        return None
    text = str(error.get("error_message") or error.get("reason") or error.get("message") or "").strip()
    first = text.splitlines()[0].strip() if text else ""
    code = str(error.get("error_code") or error.get("code") or "")
    if _ERROR_CODE.match(first) or (code and first.startswith(f"{code}:")):
        code = ""  # the message begins with its code already
    elif not code:
        code = str(error.get("type") or "")
    reason = ": ".join(part for part in (code, first) if part)
    if not reason:
        return None
    return reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 3] + "..."


def slot_line(total: int, s: dict[str, Any], elapsed_s: float) -> str:
    """The progress line printed when a slot has resolved: its number within its job (of ``total``), and for a
    slot that did not succeed, why (:func:`failure_reason`) instead of rows, bytes and cost."""
    if s.get("status") == "succeeded":
        what = (
            f"rows {s['rows']}  scanned {s.get('data_scanned_bytes')} B"
            f"  est. cost {format_usd(s.get('estimated_cost_usd'))}"
        )
    else:
        what = f"reason: {s.get('error_reason') or 'none recorded'}"
    return (
        f"slot {s['number']}/{total} {s['job']} {s['slot']}  winner racer {s['winner_racer']}"
        f" ({s['winner_worker']}) token {s['fencing_token']}  {s['outcome']}  {what}"
        f"  takeovers {s['takeovers']}  re-entries {s['reentries']}  lost races {s['lost']}"
        f"  {elapsed_s:.1f} s"
    )


def print_tables(
    out: Callable[[str], None],
    summaries: Sequence[dict[str, Any]],
    totals: dict[str, Any],
    *,
    results_table: str,
    jobs: Mapping[str, JobSpec],
) -> None:
    """The per-slot table (job, winner, token, takeovers, rows, outcome), each job's stored numbers, then the
    totals (all jobs, then per job)."""
    out("")
    width = max(len(name) for name in jobs)
    columns = (("#", 2, ">"), ("job", width, "<"), ("slot (UTC)", 20, "<"), ("2013 window end", 16, "<"))
    columns += (("winner", 8, "<"), ("owner", 8, "<"), ("token", 5, ">"), ("takeovers", 9, ">"), ("rows", 4, ">"))
    columns += (("scanned B", 9, ">"), ("est. USD", 9, ">"), ("outcome", 0, "<"))
    header = padded_line(columns)
    out(header)
    out("-" * (len(header) + 30))
    for s in summaries:
        window_end = (s.get("window") or [None, None])[1]
        cells = (
            s.get("number", ""),
            s["job"],
            s["slot"],
            window_end.replace("T", " ")[:16] if window_end else "-",
            f"racer {s['winner_racer']}" if s["winner_racer"] is not None else "-",
            short(s["winner_owner_id"]),
            _or_dash(s["fencing_token"]),
            s["takeovers"],
            _or_dash(s["rows"]),
            _or_dash(s.get("data_scanned_bytes")),
            format_usd(s.get("estimated_cost_usd")),
            s["outcome"],
        )
        out(
            padded_line([(cell, w, align) for cell, (_, w, align) in zip(cells, columns, strict=True)])
            + f"{': ' + s['error_reason'] if s.get('error_reason') and s.get('status') != 'succeeded' else ''}"
            f"{'  PROBLEM: ' + '; '.join(s.get('problems') or []) if s.get('problems') else ''}"
        )
    for name, config in jobs.items():
        mine = [s for s in summaries if s["job"] == name]
        out("")
        out(
            f"{name}: results read back from {results_table} (the {config.window_s // 3600} h before the slot's"
            f" time, {config.data_year}):"
        )
        if name == "flights-dashboard":
            _flights_table(out, mine)
        else:
            _generic_table(out, mine, config)
    out("")
    out("Totals: " + ", ".join(f"{k} {totals[k]}" for k in TOTALS_SHOWN))
    for name, job_totals in (totals.get("per_job") or {}).items():
        shown = ("slots", "invocations", "slots_completed", "slots_failed", "takeovers", "reentries")
        shown += ("stale_writes_rejected",)
        out(f"  {name}: " + ", ".join(f"{k} {job_totals[k]}" for k in shown))


def _or_dash(value: Any) -> Any:
    return "-" if value is None else value


def _generic_table(out: Callable[[str], None], summaries: Sequence[dict[str, Any]], config: JobSpec) -> None:
    """Per slot: the row count, and the first value-metric column's lowest and highest row (its dimension)."""
    column = config.value_metrics.columns[0] if config.value_metrics else None
    label = config.value_metrics.dimensions[0] if config.value_metrics and config.value_metrics.dimensions else None
    for number, s in enumerate(summaries, 1):
        rows = s.get("results") or []
        if not rows:
            out(f"{number:>2}  {s['slot']:<20}  (no result)")
            continue
        text = f"{number:>2}  {s['slot']:<20}  {len(rows):>3} rows"
        valued = [r for r in rows if column and isinstance(r.get(column), (int, float))]
        if valued:
            low, high = min(valued, key=lambda r: r[column]), max(valued, key=lambda r: r[column])
            name = (lambda r: f" ({r.get(label)})") if label else (lambda r: "")
            text += f"  {column} {low[column]}{name(low)} .. {high[column]}{name(high)}"
        out(text)


def _flights_table(out: Callable[[str], None], summaries: Sequence[dict[str, Any]]) -> None:
    """The flights dashboard's numbers: flights per origin, delays, cancellations, average delay."""
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
