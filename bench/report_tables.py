"""The tables of :mod:`bench.report` (the one report writer): one function per table or list of notes, each taking
the figures as written to ``bench-report.json`` and returning text (tables: :func:`tools.cli.render.markdown_table`, the renderer every command uses). USD
figures of the cost tables are in micro-dollars (µUSD, 1e-6 USD): a slot costs tens of them."""

from __future__ import annotations

from typing import Any

from athena_refresh.cost import MB, athena_billed_bytes
from tools.cli.render import markdown_table as table

from .contenders import BY_NAME
from .cost import HISTORIES
from .cost_slot import LABELS

FULL_HISTORIES = HISTORIES["full"]
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
    cells: tuple[tuple[str, int, str], ...] = (("cycle_p50_ms", 2, ""), ("cycle_p50_vs_floor", 2, "x"))
    cells += (("cycle_p95_ms", 2, ""), ("cycles_per_s", 0, ""), ("loser_p50_ms", 2, ""), ("loser_p50_vs_floor", 2, "x"))
    rows = [[_label(name), *(_range(e.get(k), d, x) for k, d, x in cells)] for name, e in uncontended.items()]
    headers = ["contender", "cycle p50 ms", "vs floor p50", "cycle p95 ms", "cycles/s", "loser p50 ms"]
    return table([*headers, "loser vs floor p50"], rows)


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
    cells = (("kill_to_commit_s", 2), ("beyond_lease_s", 3), ("successor_requests", 0))
    rows = [[_label(name), _fmt(e["lease_s"], 2), *(_range(e[k], d) for k, d in cells)] for name, e in takeover.items()]
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
    keys = ("start_query_execution_per_slot", "distinct_executions_per_slot", "result_writers_per_slot")
    rows = [[mode, *(_range(fan[mode][key], 2) for key in keys)] for mode in ("slotlock", "no lock")]
    headers = [f"{fan['racers']} racers x {fan['slots']} slots", "StartQueryExecution per slot"]
    return table([*headers, "distinct executions per slot", "result writers per slot"], rows)


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


def _micro(usd: float | None) -> str:
    return "n/a" if usd is None else f"{usd * 1e6:.2f}"


def _bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    return f"{n / MB:.2f} MB" if n >= MB else f"{n / 1024:.1f} KiB"


UNIT_NOTES = {
    "reported": "the endpoint's ConsumedCapacity; DynamoDB Local 1.25.1's transaction figures do not follow AWS's"
    " per-item rule (a probe: 1, 2 or 3 small items = 4 WRU, one 1.5 KB item = 8)",
    "aws_rule": "2 WRU per started KB per item written, read back after each transaction; an index copy counted"
    " like its item (assumed: AWS does not document the transactional factor of index writes)",
    "modelled": "tools.cost's model, as the runtime's estimate (InvocationCost) counts: no history-index writes",
}


def scan_table(scan: dict[str, Any]) -> str:
    """Bytes per slot by layout and history size, with the scan breakdown and the whole-table bound."""
    rows = []
    for layout in ("partitioned", "unpartitioned"):
        for r in scan[layout]:
            s = r["scan"]
            rows.append(
                [
                    layout,
                    f"{r['years']}x",
                    f"{r['table_rows']:,}",
                    f"{s['files_read']}/{s['files_total']}",
                    f"{s['row_groups_read']}/{s['row_groups_total']}",
                    f"{r['engine_bytes']:,}",
                    f"{r['vs_first']:.2f}x" if r["vs_first"] is not None else "n/a",
                    f"{r['whole_table_bytes']:,}",
                    f"{r['build_s']:.1f} / {r['query_s']:.2f}",
                ]
            )
    headers = ["layout", "history", "rows", "files read/total", "row groups read/total", "bytes read per slot"]
    headers += [f"vs {scan['histories'][0]}x", "whole table, columns read (no pruning)", "build s / query s"]
    return table(headers, rows)


def scan_notes(scan: dict[str, Any]) -> list[str]:
    flat = scan["flat"]
    part, unpart = scan["partitioned"], scan["unpartitioned"]
    first, last = unpart[0], unpart[-1]
    growth = last["whole_table_bytes"] / first["whole_table_bytes"] if first["whole_table_bytes"] else None
    deviation = flat["max_deviation"]
    largest = max(r["engine_bytes"] for r in part + unpart)
    notes = [
        (
            f"Query: {scan['job']}'s prepared SQL for slot {scan['slot']} (parameters"
            f" {', '.join(scan['parameters'])}); columns read: {', '.join(part[0]['scan']['columns'])}."
        ),
        (
            f"Partitioned: {part[-1]['scan']['files_read']} of {part[-1]['scan']['files_total']} files at"
            f" {flat['to']}x; bytes per slot {'flat' if deviation == 0 else f'within {deviation * 100:.1f}%'}"
            f" from {flat['from']}x to {flat['to']}x (goal: within {flat['limit'] * 100:.0f}%)."
        ),
        (
            f"Unpartitioned: the same SQL without {' AND '.join(scan['removed_predicate'])} (the table has no dt),"
            f" one file sorted by time. Row groups of {scan['row_group_rows']:,} rows (about"
            f" {scan['months_per_row_group']} months of this table) with min/max statistics on sched_dep_utc: only"
            " the window's row group is read, so the pruned bytes are one row group's columns whatever the history"
            " (they vary with where the boundaries fall, not with the size). An unsorted table, or statistics that"
            " do not separate the window, reads the whole-table column: "
            + (f"{growth:.1f}x from {first['years']}x to {last['years']}x." if growth else "n/a.")
        ),
        "Not counted in either layout: the Parquet footers and page indexes Athena also reads (and bills).",
        (
            f"Athena bills at least 10 MB per query: the largest bytes per slot above ({_bytes(largest)}) is billed"
            f" {_bytes(athena_billed_bytes(largest))}; the whole-table bound at {last['years']}x"
            f" ({_bytes(last['whole_table_bytes'])}) would be billed {_bytes(athena_billed_bytes(last['whole_table_bytes']))}."
        ),
    ]
    smoke = tuple(scan["histories"]) != FULL_HISTORIES
    sizes = ", ".join(f"{h}x" for h in scan["histories"])
    notes.append(
        (f"Size smoke: {sizes} instead of {', '.join(f'{h}x' for h in FULL_HISTORIES)}. " if smoke else "")
        + f"{last['years']}x history: {scan['largest_history_s']} s to build and query both layouts; the whole"
        f" scenario {scan['duration_s']} s."
    )
    return notes


def per_slot_table(entry: dict[str, Any]) -> str:
    """One racer count: the three alternatives by service (µUSD), their requests, and the lock's overhead."""
    n = entry["racers"]
    services = ("athena", "lambda", "dynamodb", "scheduler")
    ours_total = entry["ours"]["estimated_cost_usd"]
    rows = []
    for name in ("ours", "single", "unlocked"):
        e = entry[name]
        req = e["requests"]
        ops = "+".join(f"{k} {v}" for k, v in req["dynamodb_by_operation"].items())
        rows.append(
            [
                LABELS[name].replace("N ", f"{n} "),
                *(_micro(e["by_service_usd"][s]) for s in services),
                _micro(e["estimated_cost_usd"]),
                f"{e['estimated_cost_usd'] / ours_total:.2f}x" if ours_total else "n/a",
                f"{req['lambda_invocations']} / {req['athena_queries']}",
                f"{req['dynamodb_requests']}: {ops}",
                {"ours": "yes (fenced)", "single": "no (a retry re-runs)", "unlocked": f"no ({n} runs)"}[name],
            ]
        )
    overhead = entry["overhead"]
    rows.append(
        [
            "lock overhead (ours - 1 runner)",
            *(_micro(overhead["by_service_usd"][s]) for s in services),
            _micro(overhead["usd"]),
            "",
            "",
            "",
            f"{'met' if overhead['met'] else 'MISSED'}: limit {_micro(overhead['reference_usd'])} (one 10 MB query)",
        ]
    )
    headers = [f"N={n}, µUSD per slot", "Athena", "Lambda", "DynamoDB", "Scheduler", "total", "vs ours"]
    return table(headers + ["Lambda inv. / queries", "DynamoDB requests", "once per slot"], rows)


def figures_table(cost: dict[str, Any]) -> str:
    """The figures the alternatives are priced from, and where each comes from."""
    f, m = cost["figures"], cost.get("slot_measurement")
    src = f["sources"]
    rows = [
        ["bytes per slot (1x, partitioned)", f"{f['scan_bytes']:,} B (billed 10 MB: the minimum)", src["scan_bytes"]],
        ["Athena wait, every alternative", f"{f['assumed_query_ms'] / 1000:g} s", src["query"]],
    ]
    spans = (m or {}).get("durations_ms_range", {})

    def span(key: str) -> str:
        return f" [{spans[key][0]}-{spans[key][1]}]" if key in spans else ""

    rows += [
        ["winner's own work (ours)", f"{f['winner_lock_ms']:.1f} ms{span('winner')}", src["durations"]],
        ["loser, to its lock decision", f"{f['loser_ms']:.1f} ms{span('loser')}", src["durations"]],
        ["unlocked runner's own work", f"{f['runner_own_ms']:.1f} ms{span('runner')}", src["durations"]],
    ]
    if m:
        for source, units in (("reported", m.get("reported_units")), ("aws_rule", m["aws_rule_units"])):
            if units:
                phases = ", ".join(f"{k} {v:g}" for k, v in units["by_phase"].items())
                extra = (
                    f"; {units['index_write_units']} for history-index copies" if "index_write_units" in units else ""
                )
                rows.append(
                    [f"winner WRU ({source})", f"{units['winner_write_units']:g} ({phases}{extra})", UNIT_NOTES[source]]
                )
    model = m["modelled_units"] if m else None
    if model:
        phases = ", ".join(f"{k} {v:g}" for k, v in model["by_phase"].items())
        rows.append(["winner WRU (modelled)", f"{model['winner_write_units']:g} ({phases})", UNIT_NOTES["modelled"]])
    rows += [
        ["priced DynamoDB units", f"winner {f['winner_write_units']:g} WRU", src["units"]],
        ["heartbeats", str(f["heartbeats"]), src["heartbeats"]],
        ["loser WRU (failed conditional write)", f"{f['loser_write_units']:g}", ""],
        ["unlocked result PutItem WRU", f"{f['put_write_units']:g}", ""],
        ["Lambda", f"{f['memory_mb']} MB, {f['architecture']}, warm (no INIT billed)", "the job's configuration"],
    ]
    return table(["figure", "value", "source"], rows)


def cost_notes(cost: dict[str, Any]) -> list[str]:
    notes = []
    by_units = cost.get("overhead_by_units") or {}
    counts = [k for k in cost["per_slot"] if k != "prices"]
    if len(by_units) > 1:
        parts = [
            f"{source} ({units['winner_write_units']:g} WRU): "
            + ", ".join(f"N={n} {_micro(units[n]['usd'])}" for n in counts)
            for source, units in by_units.items()
        ]
        notes.append("Lock overhead (µUSD) by DynamoDB unit source: " + "; ".join(parts) + ".")
    modelled = ", ".join(f"N={n} {_micro(cost['per_slot'][n]['overhead']['with_modelled_loser_usd'])}" for n in counts)
    loser_ms = cost["per_slot"][counts[0]]["overhead"]["modelled_loser_ms"] if counts else None
    notes.append(
        f"With each loser billed {loser_ms:g} ms (tools.cost's assumption: handler start, clients, logs):"
        f" overhead {modelled} µUSD."
    )
    ref = cost.get("accounting_reference")
    if ref:
        notes.append(
            "Accounting scenario (no-op job, same endpoint): winner "
            f"{'+'.join(ref['winner']['requests'])} {ref['winner']['units']:g} CU, loser {ref['loser']['units']:g} CU;"
            " the real slot adds record_state and the result and LATEST items to the commit."
        )
    prices = cost["per_slot"]["prices"]
    notes.append(f"Prices: {prices['region']}, read {prices['retrieved']} (prices.toml); estimates, no free tier.")
    return notes


def scaling_table(result: dict[str, Any]) -> str:
    rows = []
    for r in result["runs"]:
        if r["exit_status"] != 0:
            rows.append([str(r["jobs"]), f"{r['wall_s']:.1f}", f"FAILED (exit {r['exit_status']})"] + [""] * 7)
            continue
        cost = r["cost"]
        rows.append(
            [
                str(r["jobs"]),
                f"{r['wall_s']:.1f}",
                f"{r['cpu_s']:.1f}",
                f"{r['max']['resources']} / {r['total']['resources']}",
                f"{r['max']['outputs']} / {r['total']['outputs']}",
                f"{r['max']['bytes']:,} / {r['total']['bytes']:,}",
                f"{r['job_stacks_non_empty']} of {r['job_stacks']} (max {r['jobs_per_stack_max']} jobs)",
                str(r["dashboard_widgets"]),
                f"{cost['fixed_monthly_usd']:.2f} ({cost['own_fixed_usd']:.2f} + {cost['deployment_share_usd']:.3f})",
                f"{r['load_average_1m_before']:.1f}",
            ]
        )
    return table(
        [
            "jobs",
            "synth wall s",
            "CPU s",
            "resources max / total",
            "outputs max / total",
            "template bytes max / total",
            "non-empty job stacks",
            "widgets",
            "fixed $/job-month (own + share)",
            "load 1m",
        ],
        rows,
    )


def stacks_table(result: dict[str, Any]) -> str:
    """The largest run, per stack: the shared stack and the three largest job stacks."""
    ok = [r for r in result["runs"] if r["exit_status"] == 0]
    if not ok:
        return ""
    run = max(ok, key=lambda r: r["jobs"])
    shared = [s for s in run["stacks"] if s["jobs"] is None]
    jobs = sorted((s for s in run["stacks"] if s["jobs"] is not None), key=lambda s: -s["resources"])[:3]
    rows = [
        [
            s["stack"],
            "shared" if s["jobs"] is None else str(s["jobs"]),
            str(s["resources"]),
            str(s["outputs"]),
            f"{s['bytes']:,}",
        ]
        for s in shared + jobs
    ]
    return table([f"stack at {run['jobs']} jobs", "jobs", "resources", "outputs", "bytes"], rows)
