"""The one report writer of ``make bench``: the target checks of every scenario, the printed tables and
``bench-report.json``.

- :func:`check` builds one target check, the one shape of every entry of the report's ``targets``: ``endpoint``,
  ``target`` (what is promised), ``limit`` (the largest value that meets it, unless said otherwise), ``measured``,
  ``met``, and when missed ``missed_by`` (how far); a ``note`` where the figure needs one.
- :func:`check_targets` judges every scenario's figures: the lock's (:data:`TARGETS`), the read API's
  (:data:`READ_TARGETS`, issue 13), fan-out, cold start, cost (:data:`COST_TARGETS`, issue 14) and scaling
  (issue 23: CloudFormation's and CloudWatch's quotas, the synth's time, the fixed cost of a job).
- :func:`render` prints every table of a report (:mod:`bench.report_tables`), in the order of the scenarios;
  :func:`write` writes it with the house's one report file writer (:func:`local.reports.write_report`: indented
  JSON, non-JSON values as text, written atomically).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from local.reports import write_report

from .report_tables import (
    CONTENDED_NOTE,
    accounting_table,
    coldstart_table,
    contended_table,
    cost_notes,
    fanout_table,
    features_table,
    figures_table,
    per_slot_table,
    read_breakdown_table,
    read_path_table,
    scaling_table,
    scan_notes,
    scan_table,
    stacks_table,
    takeover_table,
    targets_table,
    uncontended_table,
)

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
    "latest_requests": "GET latest sends exactly 1 DynamoDB request (BatchGetItem: the result and its freshness)",
    "latest_vs_getitem_p50": "GET latest (full resolver) p50 within 1.3x a bare GetItem's p50",
    "history_requests": "a history page of 50 is exactly 1 Query (0 Scan)",
    "history_page": "the history page holds 50 entries and a next_token",
}
#: The cost goals (issue 14), judged on the cost scenarios' figures (:mod:`bench.cost`).
COST_TARGETS = {
    "flat": "bytes read per slot flat from {first}x to {last}x history, partitioned (max deviation from {first}x, %)",
    "overhead": "N={n}: the lock's whole overhead per slot (losers, lock writes, transaction) below one"
    " minimum-billed Athena query (µUSD)",
    "athena": "N={n}: N unlocked runners' Athena cost at least N x ours (multiple of ours)",
}
#: The scaling goals (issue 23), judged on :mod:`bench.scaling`'s runs under this endpoint name.
SCALING_ENDPOINT: Final = "scaling"
#: The synth of this many jobs ...
SYNTH_JOBS: Final = 300
#: ... within this many seconds.
SYNTH_LIMIT_S: Final = 300.0
#: Every template below these (CloudFormation's quotas are 500 resources, 200 outputs, 1 MB).
MAX_RESOURCES: Final = 500
MAX_OUTPUTS: Final = 200
MAX_TEMPLATE_BYTES: Final = 1_000_000
MAX_WIDGETS: Final = 500  # CloudWatch's widgets per dashboard
#: The fixed monthly cost of a 30-minute job, at these job counts.
FIXED_COST_LIMIT_USD: Final = 1.50
FIXED_COST_AT: Final = (50, 300)
#: Without a run of :data:`SYNTH_JOBS` jobs, the fit is extrapolated to it only from a run of this many jobs or more.
EXTRAPOLATE_FROM: Final = 50


def check(
    endpoint: str | None,
    target: str,
    limit: float | None,
    measured: float | None,
    *,
    met: bool | None = None,
    missed_by: str | None = None,
    note: str = "",
    excess: str = ".2f",
) -> dict[str, Any]:
    """One target check (see the module docstring). ``met`` defaults to ``measured <= limit``; ``missed_by``, kept
    only when not met, defaults to the excess (``excess`` its format) and its share of the limit, or the bare
    excess when the limit is 0, and is left out when nothing was measured."""
    if met is None:
        met = measured is not None and limit is not None and measured <= limit + 1e-9
    entry: dict[str, Any] = {"endpoint": endpoint, "target": target, "limit": limit, "measured": measured, "met": met}
    if not met and missed_by is None and measured is not None:
        over = measured - (limit or 0)
        missed_by = f"{over:{excess}} ({(measured / limit - 1) * 100:.0f}% over)" if limit else f"{over:g}"
    if not met and missed_by is not None:
        entry["missed_by"] = missed_by
    if note:
        entry["note"] = note
    return entry


def check_targets(
    backend_results: dict[str, Any],
    fan: dict[str, Any] | None,
    cold: dict[str, Any] | None,
    cost: dict[str, Any] | None = None,
    scaling: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Compare our figures with the issues' targets, per endpoint; a miss says by how much."""
    checks: list[dict[str, Any]] = []
    for endpoint, result in backend_results.items():
        checks.extend(lock_checks(endpoint, result))
        if result.get("read_path"):
            checks.extend(read_checks(endpoint, result["read_path"]))
    if fan:
        measured = fan["slotlock"]["start_query_execution_per_slot"]["max"]
        target = "Athena queries started per slot under fan-out = 1.0"
        checks.append(check(fan.get("endpoint"), target, 1.0, measured, met=measured == 1.0))
    if cold:
        mem = cold["memory"]
        peak, configured = mem["peak_rss_mb"]["max"], mem["configured_memory_mb"]
        target = f"peak RSS fits the configured {configured} MB"
        checks.append(check("moto-atomic", target, float(configured), peak, met=mem["fits_configured"]))
        missed_by = f"{peak - 128:.1f} MB"
        checks.append(
            check("moto-atomic", "peak RSS fits 128 MB (aim)", 128.0, peak, met=mem["fits_128_mb"], missed_by=missed_by)
        )
    if cost:
        checks.extend(cost_checks(cost))
    if scaling:
        checks.extend(scaling_checks(scaling))
    return checks


def lock_checks(endpoint: str, result: dict[str, Any]) -> list[dict[str, Any]]:
    """Our lock's targets (:data:`TARGETS`) on one endpoint's accounting, uncontended and contended figures."""
    checks: list[dict[str, Any]] = []
    targets = {key: (description, limit) for key, description, limit in TARGETS}

    def add(key: str, measured: float | None, note: str = "") -> None:
        checks.append(check(endpoint, *targets[key], measured, note=note))

    acc = result.get("accounting", {}).get("slotlock")
    if acc:
        last = acc["last"]
        add("loser_requests", float(max(last["loser"]["requests"], last["late"]["requests"])))
        add("winner_requests", float(last["winner"]["requests"]))
        if acc.get("heartbeat"):
            add("heartbeat_requests", acc["heartbeat"]["requests_per_heartbeat"])
    unc = result.get("uncontended", {}).get("slotlock")
    if unc and unc.get("loser_p50_vs_floor"):
        add("loser_vs_floor_p50", unc["loser_p50_vs_floor"]["median"])
        add("cycle_vs_floor_p50", unc["cycle_p50_vs_floor"]["median"])
    contended = result.get("contended", {})
    if "32" in contended and "slotlock" in contended["32"]:
        add("contended32_vs_floor_p95", contended["32"]["slotlock"].get("resolution_p95_vs_floor_p95"), CONTENDED_NOTE)
    if contended:
        runs = [c["slotlock"]["runs_per_slot"]["slots_not_exactly_once"] for c in contended.values() if "slotlock" in c]
        add("runs_not_once", float(sum(runs)))
    return checks


def read_checks(endpoint: str, read: dict[str, Any]) -> list[dict[str, Any]]:
    """The read API's goals on one endpoint: request counts exactly as promised, GET latest's p50 ratio."""
    latest, history = read["latest"], read["history"]
    calls = latest["requests"]
    exact = calls["requests_min"] == calls["requests_max"] == 1 and calls["by_operation"] == {"BatchGetItem": 1}
    most = float(calls["requests_max"]) if calls["requests_max"] is not None else None
    checks = [
        check(
            endpoint,
            READ_TARGETS["latest_requests"],
            1.0,
            most,
            met=exact,
            missed_by=f"sent {calls['by_operation_variants']}",
        )
    ]
    ratio, target = latest["p50_ratio"], READ_TARGETS["latest_vs_getitem_p50"]
    checks.append(check(endpoint, target, latest["limit"], ratio, missed_by=None if ratio is not None else "?"))
    pages = [history["first_page"]["requests"], history["timed_pages_requests"]]
    one_query = all(
        p["requests_min"] == p["requests_max"] == 1 and p["by_operation"] == {"Query": 1} for p in pages if p["calls"]
    )
    most = float(max(p["requests_max"] or 0 for p in pages))
    sent = f"sent {[p['by_operation_variants'] for p in pages]}"
    checks.append(check(endpoint, READ_TARGETS["history_requests"], 1.0, most, met=one_query, missed_by=sent))
    first = history["first_page"]
    full = first["entries"] == history["limit"] and first["next_token"]
    shape = f"{first['entries']} entries, next_token {'present' if first['next_token'] else 'absent'}"
    target = READ_TARGETS["history_page"]
    checks.append(check(endpoint, target, float(history["limit"]), float(first["entries"]), met=full, missed_by=shape))
    return checks


def cost_checks(cost: dict[str, Any]) -> list[dict[str, Any]]:
    """The cost goals: flat partitioned bytes; per N, the lock's overhead against one minimum-billed Athena query,
    and N unlocked runners' Athena cost against N x ours."""
    flat = cost["scan"]["flat"]
    deviation = flat["max_deviation"]
    checks = [
        check(
            "local engine",
            COST_TARGETS["flat"].format(first=flat["from"], last=flat["to"]),
            flat["limit"] * 100,
            None if deviation is None else deviation * 100,
            met=deviation is not None and deviation <= flat["limit"] + 1e-12,
            missed_by="n/a" if deviation is None else f"{(deviation - flat['limit']) * 100:.1f} points",
        )
    ]
    figures = cost["figures"]
    where = (cost.get("slot_measurement") or {}).get("endpoint") or "modelled"
    note = f"DynamoDB units {figures['units_source']}; assumed Athena wait {figures['assumed_query_ms'] / 1000:g} s"
    for key, entry in cost["per_slot"].items():
        if key == "prices":
            continue
        n, overhead, multiple = entry["racers"], entry["overhead"], entry["athena_multiple"]
        usd, reference = overhead["usd"], overhead["reference_usd"]
        checks.append(
            check(
                where,
                COST_TARGETS["overhead"].format(n=n),
                reference * 1e6,
                usd * 1e6,
                met=overhead["met"],
                missed_by=f"{(usd - reference) * 1e6:.2f} µUSD",
                note=f"{note} for every alternative",
            )
        )
        checks.append(
            check(
                "price table",
                COST_TARGETS["athena"].format(n=n),
                float(n),
                multiple["ratio"],
                met=multiple["met"],
                missed_by=f"{n - (multiple['ratio'] or 0):.2f} below",
                note="every unlocked runner starts its own query (no shared ClientRequestToken)",
            )
        )
    return checks


def scaling_checks(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The scaling goals on the measured runs; a synth that failed (a quota) fails every goal it prevents measuring."""
    if result.get("skipped"):
        return []

    def goal(target: str, limit: float, measured: float | None, met: bool, note: str = "") -> dict[str, Any]:
        return check(
            SCALING_ENDPOINT, target, limit, measured, met=met, missed_by=None if limit else "?", note=note, excess="g"
        )

    runs = result["runs"]
    ok = [r for r in runs if r["exit_status"] == 0]
    checks = [
        goal(f"synth of {r['jobs']} jobs succeeds", 0.0, float(r["exit_status"]), False, " / ".join(r["stderr"][-3:]))
        for r in runs
        if r["exit_status"] != 0
    ]
    at = next((r for r in ok if r["jobs"] == SYNTH_JOBS), None)
    synth_target = f"synth of {SYNTH_JOBS} jobs < {SYNTH_LIMIT_S:g} s"
    fit = result["fit"]
    if at is not None:
        checks.append(goal(synth_target, SYNTH_LIMIT_S, at["wall_s"], at["wall_s"] < SYNTH_LIMIT_S))
    elif fit["seconds_per_job"] is not None and max(r["jobs"] for r in ok) >= EXTRAPOLATE_FROM:
        predicted = fit["intercept_s"] + fit["seconds_per_job"] * SYNTH_JOBS
        note = "extrapolated from the fit"
        checks.append(goal(synth_target, SYNTH_LIMIT_S, round(predicted, 1), predicted < SYNTH_LIMIT_S, note))
    if not ok:
        return checks
    most = max(r["jobs"] for r in ok)
    for key, limit, what in (
        ("resources", MAX_RESOURCES, "resources"),
        ("outputs", MAX_OUTPUTS, "outputs"),
        ("bytes", MAX_TEMPLATE_BYTES, "template bytes"),
    ):
        worst = max(ok, key=lambda r, key=key: r["max"][key])
        where = f"{worst['jobs']} jobs, {worst['largest_stack'] if key == 'resources' else 'largest'}"
        target = f"every template < {limit:,} {what} (up to {most} jobs)"
        checks.append(goal(target, float(limit), float(worst["max"][key]), worst["max"][key] < limit, where))
    widgets = [r["dashboard_widgets"] for r in ok]
    checks.append(
        goal(f"dashboard widgets < {MAX_WIDGETS}", float(MAX_WIDGETS), float(max(widgets)), max(widgets) < MAX_WIDGETS)
    )
    counts = ", ".join(f"{r['jobs']}: {r['dashboard_widgets']}" for r in ok)
    constant = len(set(widgets)) == 1
    checks.append(goal("dashboard widgets constant in N", float(widgets[0]), float(max(widgets)), constant, counts))
    for r in ok:
        if r["jobs"] in FIXED_COST_AT:
            fixed = r["cost"]["fixed_monthly_usd"]
            target = f"fixed monthly cost of a 30-minute job < ${FIXED_COST_LIMIT_USD:.2f} at {r['jobs']} jobs"
            checks.append(
                goal(target, FIXED_COST_LIMIT_USD, fixed, fixed < FIXED_COST_LIMIT_USD, r["cost"]["schedule"])
            )
    return checks


def write(path: Path, report: dict[str, Any]) -> Path:
    """Write ``report`` (the structure :mod:`bench.__main__` builds) to ``path`` as ``bench-report.json``."""
    return write_report(path, report)


def render(report: dict[str, Any], say: Callable[[str], None] = print) -> None:
    """Print every table of ``report`` (the structure written to bench-report.json)."""
    meta = report["meta"]
    say(
        f"\nBenchmark {meta['date']} on {meta['machine']} (size {meta['size']}); load average "
        f"{meta['load_average_start']} at start, {meta.get('load_average_end')} at end"
    )
    say("\nWhat each contender guarantees\n" + features_table(report["contenders"]))
    for skipped, reason in report.get("skipped", {}).items():
        say(f"  (skipped {skipped}: {reason})")
    for endpoint, result in report["backends"].items():
        render_backend(endpoint, result, say)
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


def render_backend(endpoint: str, result: dict[str, Any], say: Callable[[str], None] = print) -> None:
    """One endpoint's scenarios: (1) accounting, (2) uncontended, (3) contended, (4) takeover, (7) read path."""
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
        say("\n(2) Uncontended: median [min-max] over repetitions; ratios paired with the floor of the same repetition")
        say(uncontended_table(result["uncontended"]))
    if result.get("contended"):
        say(f"\n(3) Contended: racer processes released by a barrier. {CONTENDED_NOTE}")
        say(contended_table(result["contended"]))
    if result.get("takeover"):
        poll_s = next(iter(result["takeover"].values()))["poll_s"]
        say(f"\n(4) Takeover: holder SIGKILLed right after acquiring; the successor polls every {poll_s} s")
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


def render_cost(cost: dict[str, Any], say: Callable[[str], None] = print) -> None:
    """(8) Scan bytes versus history and (9) the cost per slot against the alternatives."""
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


def render_scaling(result: dict[str, Any], say: Callable[[str], None] = print) -> None:
    """(10) The synth of N jobs: the runs, the largest run's stacks and the fit."""
    if result.get("skipped"):
        say(f"\n(10) Scaling: skipped ({result['skipped']})")
        return
    fit = result["fit"]
    say(
        f"\n(10) Scaling: {', '.join(map(str, result['copies']))} copies of {result['sample']}, each synth in a fresh"
        " process (interpreter, imports, jsii kernel and cdk-nag included); per stack max / total over every template"
    )
    say(scaling_table(result))
    say(stacks_table(result))
    if fit["seconds_per_job"] is not None:
        say(
            f"least squares over {fit['points']} points: {fit['seconds_per_job']:.3f} s per job + {fit['intercept_s']:.1f} s"
            f" (R^2 {fit['r2']:.3f}); CPU {fit['cpu_seconds_per_job']:.3f} s per job + {fit['cpu_intercept_s']:.1f} s"
        )
