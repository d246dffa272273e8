"""The scaling benchmark's goals (issue 23) and its tables (:mod:`bench.scaling` measures)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .tables import table

ENDPOINT: Final = "scaling"
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


def _check(target: str, limit: float, measured: float | None, met: bool, note: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {"endpoint": ENDPOINT, "target": target, "limit": limit, "measured": measured, "met": met}
    if not met and measured is not None:
        entry["missed_by"] = f"{measured - limit:g} ({(measured / limit - 1) * 100:.0f}% over)" if limit else "?"
    if note:
        entry["note"] = note
    return entry


def scaling_checks(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The goals on the measured runs; a synth that failed (a quota) fails every goal it prevents measuring."""
    if result.get("skipped"):
        return []
    runs = result["runs"]
    ok = [r for r in runs if r["exit_status"] == 0]
    checks = [
        _check(f"synth of {r['jobs']} jobs succeeds", 0.0, float(r["exit_status"]), False, " / ".join(r["stderr"][-3:]))
        for r in runs
        if r["exit_status"] != 0
    ]
    at = next((r for r in ok if r["jobs"] == SYNTH_JOBS), None)
    if at is not None:
        checks.append(
            _check(
                f"synth of {SYNTH_JOBS} jobs < {SYNTH_LIMIT_S:g} s",
                SYNTH_LIMIT_S,
                at["wall_s"],
                at["wall_s"] < SYNTH_LIMIT_S,
            )
        )
    elif result["fit"]["seconds_per_job"] is not None and max(r["jobs"] for r in ok) >= EXTRAPOLATE_FROM:
        fit = result["fit"]
        predicted = fit["intercept_s"] + fit["seconds_per_job"] * SYNTH_JOBS
        checks.append(
            _check(
                f"synth of {SYNTH_JOBS} jobs < {SYNTH_LIMIT_S:g} s",
                SYNTH_LIMIT_S,
                round(predicted, 1),
                predicted < SYNTH_LIMIT_S,
                "extrapolated from the fit",
            )
        )
    if not ok:
        return checks
    for key, limit, what in (
        ("resources", MAX_RESOURCES, "resources"),
        ("outputs", MAX_OUTPUTS, "outputs"),
        ("bytes", MAX_TEMPLATE_BYTES, "template bytes"),
    ):
        worst = max(ok, key=lambda r, key=key: r["max"][key])
        checks.append(
            _check(
                f"every template < {limit:,} {what} (up to {max(r['jobs'] for r in ok)} jobs)",
                float(limit),
                float(worst["max"][key]),
                worst["max"][key] < limit,
                f"{worst['jobs']} jobs, {worst['largest_stack'] if key == 'resources' else 'largest'}",
            )
        )
    widgets = [r["dashboard_widgets"] for r in ok]
    checks.append(
        _check(
            f"dashboard widgets < {MAX_WIDGETS}",
            float(MAX_WIDGETS),
            float(max(widgets)),
            max(widgets) < MAX_WIDGETS,
        )
    )
    checks.append(
        _check(
            "dashboard widgets constant in N",
            float(widgets[0]),
            float(max(widgets)),
            len(set(widgets)) == 1,
            ", ".join(f"{r['jobs']}: {r['dashboard_widgets']}" for r in ok),
        )
    )
    for r in ok:
        if r["jobs"] in FIXED_COST_AT:
            fixed = r["cost"]["fixed_monthly_usd"]
            checks.append(
                _check(
                    f"fixed monthly cost of a 30-minute job < ${FIXED_COST_LIMIT_USD:.2f} at {r['jobs']} jobs",
                    FIXED_COST_LIMIT_USD,
                    fixed,
                    fixed < FIXED_COST_LIMIT_USD,
                    r["cost"]["schedule"],
                )
            )
    return checks


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


def render_scaling(result: dict[str, Any], say: Callable[[str], None] = print) -> None:
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


__all__ = ["render_scaling", "scaling_checks", "scaling_table", "stacks_table"]
