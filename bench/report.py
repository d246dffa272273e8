"""Turn the measured figures into tables (plain text, Markdown-compatible) and a list of target checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .contenders import BY_NAME
from .cost_report import cost_checks, render_cost
from .scaling_report import render_scaling, scaling_checks
from .tables import table

#: The issue's targets for our lock (slotlock). ``limit`` is the largest value that meets the target.
TARGETS = (
    ("loser_requests", "a loser sends exactly one request (held and late)", 1.0),
    ("loser_vs_floor_p50", "an uncontended loser returns within 1.2x the floor's p50", 1.2),
    ("winner_requests", "the winner's lock costs 2 requests per slot", 2.0),
    ("heartbeat_requests", "plus 1 request per heartbeat", 1.0),
    ("cycle_vs_floor_p50", "an uncontended cycle (acquire + atomic commit) within 2.5x the floor's p50", 2.5),
    ("contended32_vs_floor_p95", "32 contended racers all return within 2x the floor's contended p95", 2.0),
    ("runs_not_once", "contended slots not run exactly once", 0.0),
)
#: The read API's goals (issue 13), judged on each endpoint's ``read_path`` figures (:mod:`bench.read_path`).
READ_TARGETS = {
    "latest_requests": "GET latest sends exactly 1 DynamoDB request (GetItem)",
    "latest_vs_getitem_p50": "GET latest (full resolver) p50 within 1.3x a bare GetItem's p50",
    "history_requests": "a history page of 50 is exactly 1 Query (0 Scan)",
    "history_page": "the history page holds 50 entries and a next_token",
}
CONTENDED_NOTE = (
    "32 racer processes on 2 cores: the contended figures measure the OS scheduler and process "
    "wake-up as much as DynamoDB."
)


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _range(entry: dict[str, Any] | None, digits: int = 1, suffix: str = "") -> str:
    if not entry or entry.get("median") is None:
        return "n/a"
    if entry["n"] > 1 and round(entry["min"], digits) != round(entry["max"], digits):
        return f"{entry['median']:.{digits}f}{suffix} [{entry['min']:.{digits}f}-{entry['max']:.{digits}f}]"
    return f"{entry['median']:.{digits}f}{suffix}"


def _label(name: str) -> str:
    return BY_NAME[name].label if name in BY_NAME else name


def features_table(names: list[str]) -> str:
    rows = []
    for name in names:
        f = BY_NAME[name].features
        rows.append([_label(name), f.once_per_slot, f.fencing, f.takeover, f.loser])
    return table(["contender", "once per slot", "fencing", "takeover of a crashed holder", "loser"], rows)


def accounting_table(accounting: dict[str, Any], reports_capacity: bool) -> str:
    rows = []
    for name, entry in accounting.items():
        last = entry["last"]

        def cell(role: str, last: dict[str, Any] = last) -> str:
            r = last[role]
            ops = "+".join(f"{op}" if n == 1 else f"{n}x{op}" for op, n in r["by_operation"].items())
            ran = " (RAN the job again)" if role != "winner" and r["ran"] else ""
            return f"{r['requests']}: {ops}{ran}"

        def units(role: str, last: dict[str, Any] = last) -> str:
            r = last[role]
            computed = r["capacity_units_computed"]
            total = r["capacity_units_reported"] + computed
            return f"{total:g}" + (f" ({computed:g} computed)" if computed else "")

        hb = entry.get("heartbeat")
        row = [
            _label(name),
            cell("winner"),
            cell("loser"),
            cell("late"),
            _fmt(hb["requests_per_heartbeat"]) if hb else "no heartbeat",
        ]
        if reports_capacity:
            row += [units("winner"), units("loser"), units("late")]
        row.append("yes" if entry["stable"] else "NO")
        rows.append(row)
    headers = ["contender", "winner requests", "loser while held", "late loser", "per heartbeat"]
    if reports_capacity:
        headers += ["winner CU", "loser CU", "late CU"]
    return table(headers + ["same every slot"], rows)


def uncontended_table(uncontended: dict[str, Any]) -> str:
    rows = []
    for name, e in uncontended.items():
        rows.append(
            [
                _label(name),
                _range(e["cycle_p50_ms"], 2),
                _range(e.get("cycle_p50_vs_floor"), 2, "x"),
                _range(e["cycle_p95_ms"], 2),
                _range(e["cycles_per_s"], 0),
                _range(e["loser_p50_ms"], 2),
                _range(e.get("loser_p50_vs_floor"), 2, "x"),
            ]
        )
    return table(
        ["contender", "cycle p50 ms", "vs floor p50", "cycle p95 ms", "cycles/s", "loser p50 ms", "loser vs floor p50"],
        rows,
    )


def contended_table(contended: dict[str, Any]) -> str:
    counts = list(contended)
    names = list(next(iter(contended.values()))) if contended else []
    rows = []
    for name in names:
        row = [_label(name)]
        for n in counts:
            e = contended[n][name]
            runs = e["runs_per_slot"]
            runs_text = f"{runs['min']}" if runs["min"] == runs["max"] else f"{runs['min']}-{runs['max']}"
            row.append(
                f"{_fmt(e['resolution']['p50_ms'], 0)}/{_fmt(e['resolution']['p95_ms'], 0)} ms"
                f" ({_fmt(e.get('resolution_p95_vs_floor_p95'), 2)}x) runs {runs_text}"
                f" req {_fmt(e['loser_requests']['mean'], 2)}"
            )
        rows.append(row)
    return table(
        ["contender", *(f"{n} racers: all returned p50/p95 (p95 vs floor) job runs, loser req" for n in counts)], rows
    )


def takeover_table(takeover: dict[str, Any]) -> str:
    rows = []
    for name, e in takeover.items():
        rows.append(
            [
                _label(name),
                _fmt(e["lease_s"], 2),
                _range(e["kill_to_commit_s"], 2),
                _range(e["beyond_lease_s"], 3),
                _range(e["successor_requests"], 0),
            ]
        )
    return table(["contender", "lease s", "kill -> successor done s", "beyond the lease s", "successor requests"], rows)


def coldstart_table(cold: dict[str, Any]) -> str:
    imp, mem, asset = cold["import"], cold["memory"], cold["asset"]
    heavy = ", ".join(f"{name} {ms:.0f}" for name, ms in imp["heaviest_packages_ms"][:4])
    rows = [
        [
            "handler import (-X importtime, cumulative)",
            _range(imp["handler_import_ms"], 0, " ms"),
            f"heaviest: {heavy} ms",
        ],
        [
            "peak RSS, one invocation, fresh process",
            _range(mem["peak_rss_mb"], 1, " MB"),
            (
                f"configured {mem['configured_memory_mb']} MB: {'fits' if mem['fits_configured'] else 'DOES NOT FIT'};"
                f" 128 MB: {'fits' if mem['fits_128_mb'] else 'does not fit'}; bare interpreter {mem['interpreter_only_mb']:.1f} MB"
            ),
        ],
        ["RSS after import", _range(mem["rss_after_import_mb"], 1, " MB"), ""],
        [
            "first invocation (cold, after import)",
            _range(mem["invoke_s"], 2, " s"),
            "moto: DynamoDB + Athena, tracing on",
        ],
        [
            "Lambda asset (lambdas/ minus excludes)",
            f"{asset['zip_bytes'] / 1024:.1f} KiB zipped",
            f"{asset['files']} files, {asset['bytes'] / 1024:.1f} KiB unzipped; Powertools from its layer",
        ],
    ]
    return table(["cold start", "measured", "notes"], rows)


def fanout_table(fan: dict[str, Any]) -> str:
    rows = []
    for mode in ("slotlock", "no lock"):
        e = fan[mode]
        rows.append(
            [
                mode,
                _range(e["start_query_execution_per_slot"], 2),
                _range(e["distinct_executions_per_slot"], 2),
                _range(e["result_writers_per_slot"], 2),
            ]
        )
    return table(
        [
            f"{fan['racers']} racers x {fan['slots']} slots",
            "StartQueryExecution per slot",
            "distinct executions per slot",
            "result writers per slot",
        ],
        rows,
    )


def check_targets(
    backend_results: dict[str, Any],
    fan: dict[str, Any] | None,
    cold: dict[str, Any] | None,
    cost: dict[str, Any] | None = None,
    scaling: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Compare our figures with the issue's targets, per endpoint; a miss says by how much."""
    checks: list[dict[str, Any]] = []

    def add(endpoint: str, key: str, measured: float | None, note: str = "") -> None:
        spec = next(t for t in TARGETS if t[0] == key) if any(t[0] == key for t in TARGETS) else None
        description, limit = (spec[1], spec[2]) if spec else (key, None)
        met = measured is not None and limit is not None and measured <= limit + 1e-9
        entry = {"endpoint": endpoint, "target": description, "limit": limit, "measured": measured, "met": met}
        if not met and measured is not None and limit:
            entry["missed_by"] = f"{measured - limit:.2f} ({(measured / limit - 1) * 100:.0f}% over)"
        elif not met and measured is not None:
            entry["missed_by"] = f"{measured - (limit or 0):g}"
        if note:
            entry["note"] = note
        checks.append(entry)

    for endpoint, result in backend_results.items():
        acc = result.get("accounting", {}).get("slotlock")
        if acc:
            last = acc["last"]
            add(endpoint, "loser_requests", float(max(last["loser"]["requests"], last["late"]["requests"])))
            add(endpoint, "winner_requests", float(last["winner"]["requests"]))
            if acc.get("heartbeat"):
                add(endpoint, "heartbeat_requests", acc["heartbeat"]["requests_per_heartbeat"])
        unc = result.get("uncontended", {}).get("slotlock")
        if unc and unc.get("loser_p50_vs_floor"):
            add(endpoint, "loser_vs_floor_p50", unc["loser_p50_vs_floor"]["median"])
            add(endpoint, "cycle_vs_floor_p50", unc["cycle_p50_vs_floor"]["median"])
        contended = result.get("contended", {})
        if "32" in contended and "slotlock" in contended["32"]:
            add(
                endpoint,
                "contended32_vs_floor_p95",
                contended["32"]["slotlock"].get("resolution_p95_vs_floor_p95"),
                CONTENDED_NOTE,
            )
        not_once = sum(
            c["slotlock"]["runs_per_slot"]["slots_not_exactly_once"] for c in contended.values() if "slotlock" in c
        )
        if contended:
            add(endpoint, "runs_not_once", float(not_once))
        if result.get("read_path"):
            checks.extend(read_checks(endpoint, result["read_path"]))
    if fan:
        measured = fan["slotlock"]["start_query_execution_per_slot"]["max"]
        checks.append(
            {
                "endpoint": fan.get("endpoint"),
                "target": "Athena queries started per slot under fan-out = 1.0",
                "limit": 1.0,
                "measured": measured,
                "met": measured == 1.0,
            }
        )
    if cold:
        mem = cold["memory"]
        peak = mem["peak_rss_mb"]["max"]
        checks.append(
            {
                "endpoint": "moto-atomic",
                "target": f"peak RSS fits the configured {mem['configured_memory_mb']} MB",
                "limit": float(mem["configured_memory_mb"]),
                "measured": peak,
                "met": mem["fits_configured"],
            }
        )
        entry = {
            "endpoint": "moto-atomic",
            "target": "peak RSS fits 128 MB (aim)",
            "limit": 128.0,
            "measured": peak,
            "met": mem["fits_128_mb"],
        }
        if not mem["fits_128_mb"]:
            entry["missed_by"] = f"{peak - 128:.1f} MB"
        checks.append(entry)
    if cost:
        checks.extend(cost_checks(cost))
    if scaling:
        checks.extend(scaling_checks(scaling))
    return checks


def read_checks(endpoint: str, read: dict[str, Any]) -> list[dict[str, Any]]:
    """The read API's goals on one endpoint: request counts exactly as promised, GET latest's p50 ratio."""
    checks: list[dict[str, Any]] = []

    def check(key: str, measured: float | None, limit: float, met: bool, missed_by: str | None = None) -> None:
        entry = {"endpoint": endpoint, "target": READ_TARGETS[key], "limit": limit, "measured": measured, "met": met}
        if not met:
            entry["missed_by"] = missed_by or "?"
        checks.append(entry)

    latest = read["latest"]
    calls = latest["requests"]
    exact = calls["requests_min"] == calls["requests_max"] == 1 and calls["by_operation"] == {"GetItem": 1}
    check(
        "latest_requests",
        float(calls["requests_max"]) if calls["requests_max"] is not None else None,
        1.0,
        exact,
        f"sent {calls['by_operation_variants']}",
    )
    measured, limit = latest["p50_ratio"], latest["limit"]
    met = measured is not None and measured <= limit + 1e-9
    check(
        "latest_vs_getitem_p50",
        measured,
        limit,
        met,
        f"{measured - limit:.2f} ({(measured / limit - 1) * 100:.0f}% over)" if measured is not None else None,
    )
    history = read["history"]
    pages = [history["first_page"]["requests"], history["timed_pages_requests"]]
    one_query = all(
        p["requests_min"] == p["requests_max"] == 1 and p["by_operation"] == {"Query": 1} for p in pages if p["calls"]
    )
    check(
        "history_requests",
        float(max(p["requests_max"] or 0 for p in pages)),
        1.0,
        one_query,
        f"sent {[p['by_operation_variants'] for p in pages]}",
    )
    first = history["first_page"]
    check(
        "history_page",
        float(first["entries"]),
        float(history["limit"]),
        first["entries"] == history["limit"] and first["next_token"],
        f"{first['entries']} entries, next_token {'present' if first['next_token'] else 'absent'}",
    )
    return checks


def read_path_table(read: dict[str, Any]) -> str:
    """GET latest against the bare GetItem, and the history page against the bare Query."""
    latest, history = read["latest"], read["history"]
    ratio_value, limit = latest["p50_ratio"], latest["limit"]
    verdict = "n/a" if ratio_value is None else ("PASS" if ratio_value <= limit + 1e-9 else "FAIL")

    def ops(requests: dict[str, Any]) -> str:
        shape = requests["by_operation"]
        if shape is None:
            return "VARIES: " + "; ".join(requests["by_operation_variants"])
        return f"{sum(shape.values())}: " + "+".join(f"{n}x{op}" if n > 1 else op for op, n in sorted(shape.items()))

    def times(summary: dict[str, Any]) -> list[str]:
        return [_fmt(summary["p50_ms"], 2), _fmt(summary["p90_ms"], 2), str(summary["n"])]

    first, following = history["first_page"], history["next_page"]
    rows = [
        [
            f"GET latest (resolver, {read['rows']} rows x {read['columns']} columns, {latest['body_bytes']} B JSON)",
            *times(latest["resolver"]),
            ops(latest["requests"]) + " per request",
            f"p50 {_fmt(ratio_value, 2)}x the bare GetItem (limit {limit}x): {verdict}",
        ],
        ["bare GetItem of the same LATEST item", *times(latest["bare_getitem"]), "1: GetItem", "same client"],
        [
            f"GET slots: a history page of {history['limit']} (resolver)",
            *times(history["resolver"]),
            ops(history["timed_pages_requests"]) + " per page",
            (
                f"{first['entries']} entries, next_token {'yes' if first['next_token'] else 'NO'};"
                f" next page {following['entries']} entries, {ops(following['requests'])},"
                f" next_token {'yes' if following['next_token'] else 'no'}"
            ),
        ],
        [
            f"bare Query of the history index (Limit {history['limit']})",
            *times(history["bare_query"]),
            "1: Query",
            f"page p50 {_fmt(history['p50_ratio'], 2)}x the bare Query",
        ],
    ]
    return table(["read", "p50 ms", "p90 ms", "n", "DynamoDB requests", "notes"], rows)


def read_breakdown_table(read: dict[str, Any]) -> str:
    """Where GET latest's time goes: the real path cut at each layer, the resolver's pieces (after a real
    GetItem, and in a hot loop), and the profile's self time by package."""
    breakdown = read["breakdown"]
    layers = breakdown["layers_p50_us"]
    base = next(iter(layers.values()))
    layer_rows = [[name, f"{us:.0f}", _fmt(us / base, 2) + "x" if base else "n/a"] for name, us in layers.items()]
    hot = breakdown["hot_loop_us"]
    piece_rows = [[name, f"{us:.0f}", f"{hot[name]:.0f}"] for name, us in breakdown["pieces_p50_us"].items()]
    profile = breakdown["profile"]
    shares = ", ".join(f"{name} {share * 100:.0f}%" for name, share in profile["self_time_share"][:6])
    return "\n".join(
        [
            table(["GET latest cut at each layer (round-robin)", "p50 us", "vs GetItem"], layer_rows),
            table(["piece on a stub client", "p50 us after a real GetItem", "p50 us hot loop"], piece_rows),
            f"cProfile of the stub path ({profile['calls']} calls), self time by package: {shares}",
        ]
    )


def targets_table(checks: list[dict[str, Any]]) -> str:
    rows = [
        [
            c["endpoint"] or "",
            c["target"],
            _fmt(c["measured"], 2),
            _fmt(c["limit"], 2),
            "met" if c["met"] else f"MISSED by {c.get('missed_by', '?')}",
        ]
        for c in checks
    ]
    return table(["endpoint", "target (ours)", "measured", "limit", "result"], rows)


def render(report: dict[str, Any], say: Callable[[str], None] = print) -> None:
    """Print every table of ``report`` (the structure written to bench-report.json)."""
    meta = report["meta"]
    say(
        f"\nBenchmark {meta['date']} on {meta['machine']} (size {meta['size']}); load average "
        f"{meta['load_average_start']} at start, {meta.get('load_average_end')} at end"
    )
    names = report["contenders"]
    say("\nWhat each contender guarantees\n" + features_table(names))
    for skipped, reason in report.get("skipped", {}).items():
        say(f"  (skipped {skipped}: {reason})")
    for endpoint, result in report["backends"].items():
        say(f"\n=== {endpoint}: {result['note']} ===")
        if "accounting" in result:
            say(
                "\n(1) DynamoDB requests per slot, counted by botocore hooks"
                + (
                    " and capacity units (DynamoDB reports them; failed conditional writes computed from item size)"
                    if result["reports_capacity"]
                    else " (capacity: moto reports placeholders, see DynamoDB Local)"
                )
            )
            say(accounting_table(result["accounting"], result["reports_capacity"]))
        if "uncontended" in result:
            say(
                "\n(2) Uncontended: median [min-max] over repetitions; ratios paired with the floor of the same repetition"
            )
            say(uncontended_table(result["uncontended"]))
        if result.get("contended"):
            say(f"\n(3) Contended: racer processes released by a barrier. {CONTENDED_NOTE}")
            say(contended_table(result["contended"]))
        if result.get("takeover"):
            say(
                "\n(4) Takeover: holder SIGKILLed right after acquiring; the successor polls every "
                f"{next(iter(result['takeover'].values()))['poll_s']} s"
            )
            say(takeover_table(result["takeover"]))
        if result.get("read_path"):
            read = result["read_path"]
            seeded = read["seeded"]
            say(
                f"\n(7) Read API: GET latest and a history page through the resolver (payload-2.0 event in, response"
                f" out), interleaved with the bare request on the same client; {seeded['records']} history records"
                f" seeded through slotlock ({', '.join(f'{n} {s}' for s, n in seeded['by_status'].items())})"
            )
            say(read_path_table(read))
            say(read_breakdown_table(read))
    if report.get("coldstart"):
        say("\n(5) Cold start of the real handler")
        say(coldstart_table(report["coldstart"]))
    if report.get("fanout"):
        say(f"\n(6) Fan-out on {report['fanout'].get('endpoint')}: Athena queries per slot, real job (DuckDB engine)")
        say(fanout_table(report["fanout"]))
    if report.get("cost"):
        render_cost(report["cost"], say)
    if report.get("scaling"):
        render_scaling(report["scaling"], say)
    if report.get("targets"):
        say("\nTargets")
        say(targets_table(report["targets"]))
