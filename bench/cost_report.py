"""The cost scenarios' tables and goals (:mod:`bench.cost`): scan bytes versus history, cost per slot of our
fan-out against the alternatives, and the figures behind them. USD figures are in micro-dollars (µUSD, 1e-6 USD):
a slot costs tens of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from athena_refresh.cost import MB, athena_billed_bytes

from .cost import HISTORIES
from .cost_slot import LABELS
from .tables import table

FULL_HISTORIES = HISTORIES["full"]

COST_TARGETS = {
    "flat": "bytes read per slot flat from {first}x to {last}x history, partitioned (max deviation from {first}x, %)",
    "overhead": "N={n}: the lock's whole overhead per slot (losers, lock writes, transaction) below one"
    " minimum-billed Athena query (µUSD)",
    "athena": "N={n}: N unlocked runners' Athena cost at least N x ours (multiple of ours)",
}


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


def cost_checks(cost: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's cost goals: flat partitioned bytes; per N, the lock's overhead against one minimum-billed Athena
    query, and N unlocked runners' Athena cost against N x ours."""
    checks: list[dict[str, Any]] = []
    scan = cost["scan"]
    flat = scan["flat"]
    deviation = flat["max_deviation"]
    met = deviation is not None and deviation <= flat["limit"] + 1e-12
    entry = {
        "endpoint": "local engine",
        "target": COST_TARGETS["flat"].format(first=flat["from"], last=flat["to"]),
        "limit": flat["limit"] * 100,
        "measured": None if deviation is None else deviation * 100,
        "met": met,
    }
    if not met:
        entry["missed_by"] = "n/a" if deviation is None else f"{(deviation - flat['limit']) * 100:.1f} points"
    checks.append(entry)
    figures = cost["figures"]
    where = (cost.get("slot_measurement") or {}).get("endpoint") or "modelled"
    for key, entry in cost["per_slot"].items():
        if key == "prices":
            continue
        n = entry["racers"]
        overhead = entry["overhead"]
        check = {
            "endpoint": where,
            "target": COST_TARGETS["overhead"].format(n=n),
            "limit": overhead["reference_usd"] * 1e6,
            "measured": overhead["usd"] * 1e6,
            "met": overhead["met"],
            "note": f"DynamoDB units {figures['units_source']}; assumed Athena wait"
            f" {figures['assumed_query_ms'] / 1000:g} s for every alternative",
        }
        if not overhead["met"]:
            check["missed_by"] = f"{(overhead['usd'] - overhead['reference_usd']) * 1e6:.2f} µUSD"
        checks.append(check)
        multiple = entry["athena_multiple"]
        check = {
            "endpoint": "price table",
            "target": COST_TARGETS["athena"].format(n=n),
            "limit": float(n),
            "measured": multiple["ratio"],
            "met": multiple["met"],
            "note": "every unlocked runner starts its own query (no shared ClientRequestToken)",
        }
        if not multiple["met"]:
            check["missed_by"] = f"{n - (multiple['ratio'] or 0):.2f} below"
        checks.append(check)
    return checks


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


def render_cost(cost: dict[str, Any], say: Callable[[str], None] = print) -> None:
    scan = cost["scan"]
    say(f"\n(8) Scan bytes versus history: {scan['job']}'s query on the local engine (Athena's byte rule)")
    say(scan_table(scan))
    for line in scan_notes(scan):
        say(f"  {line}")
    say("\n(9) Cost per slot versus the alternatives (µUSD = 1e-6 USD; estimates from the price table)")
    for key, entry in cost["per_slot"].items():
        if key != "prices":
            say(per_slot_table(entry) + "\n")
    say(figures_table(cost))
    for line in cost_notes(cost):
        say(f"  {line}")


__all__ = ["COST_TARGETS", "cost_checks", "cost_notes", "figures_table", "per_slot_table", "render_cost", "scan_table"]
