"""``python -m local.chaos``: the command line of the chaos suite (:mod:`local.chaos.harness`), its summary
and its verdict.

    python -m local.chaos [--racers 16] [--slots 200] [--backend dynamodb-local|atomic-moto] [--seed N]
                          [--write-fault-scale 1.0] [--future-fraction 0.1] [--operator-fraction 0.03]
                          [--control-slots N | --no-control] [--report chaos-report.json]

Exit status: 0 every check passed; 1 a check failed (``FAIL`` lines on stderr); 2 bad arguments, or the suite could
not run: a harness failure, or an environment problem such as DynamoDB Local missing (no ``java``, the npm
package not fetched) or a work directory that cannot be written, one ``chaos harness failed:`` line on stderr
(:mod:`local.emulators.environment`); 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from local.chaos import harness
from local.chaos.harness import run_suite
from local.chaos.plan import REPO_ROOT, ChaosOptions
from local.emulators.deployment import BACKENDS
from local.scenario.cli import options_from, run_and_report
from tools.cli.program import prog


def verdict(report: dict[str, Any]) -> list[str]:
    """Why the suite failed (empty when it passed)."""
    problems = [f"violation: {v['check']} {v['slot']}: {v['detail']}" for v in report["violations"]]
    problems += [f"harness: {e}" for e in report["harness_errors"]]
    control = report.get("negative_control")
    if control is not None and control["violations"] == 0:
        problems.append("the negative control (fencing off) found no violation: the checker proved nothing")
    return problems


def summary_lines(report: dict[str, Any]) -> list[str]:
    lat = report["takeover_latency_s"]
    fut = report["future_deliveries"]
    lines = [
        (
            f"racers {report['racers']} x slots {report['slots']} on {report['backend']} (seed {report['seed']},"
            f" lease {report['lease_duration_s']} s, skew up to {report['max_clock_skew_s']} s): {report['duration_s']} s"
        ),
        (
            f"invocations {report['invocations']}, environments started {report['environments_started']},"
            f" faults injected {report['faults_injected_total']}"
        ),
        "faults: " + ", ".join(f"{k} {v}" for k, v in report["faults_injected"].items()),
        (
            f"slots committed {report['slots_committed']}, failed {report['slots_failed']}, missed"
            f" {report['slots_missed']}, dead-lettered {report['slots_dead_lettered']}"
        ),
        (
            f"takeover latency p50 {lat['p50']} s, p95 {lat['p95']} s ({lat['samples']} takeovers);"
            f" queries started per committed slot {report['queries_started_per_committed_slot']}"
        ),
        (
            f"near-future deliveries {fut['invocations']} ({fut['slots']} slots,"
            f" {fut['lead_s']['min']}-{fut['lead_s']['max']} s ahead): refused {fut['refused']}, dead-lettered {fut['dead_lettered']}, DynamoDB requests"
            f" {fut['dynamodb_requests']}"
        ),
        (
            f"MISSED records logged {report['slot_missed_logged']['logged']}, MISSED items"
            f" {report['slot_missed_logged']['stored']}"
        ),
        operator_line(report["operator"]),
        (
            f"violations {len(report['violations'])} {report['violations_by_check']};"
            f" harness errors {len(report['harness_errors'])}"
        ),
    ]
    control = report.get("negative_control")
    if control is not None:
        lines.append(
            f"negative control (fencing off, {control['slots']} slots): {control['violations']} violations"
            f" {control['violations_by_check']}"
        )
    return lines


def operator_line(operator: dict[str, Any]) -> str:
    """One line on the operator's actions: pauses, forced releases, re-runs and where LATEST ended."""
    actions = operator["actions"]
    latest = operator["latest"]
    return (
        f"operator: {actions.get('pause', 0)} pause(s) (racers {operator['paused_outcomes']}, queries"
        f" {operator['paused_queries_started']}), {actions.get('release', 0)} forced release(s) (holders"
        f" {operator['released_holders']}), {actions.get('rerun', 0)} re-run(s) ({actions.get('manual_invoke', 0)}"
        f" invocations; generations {operator['generations']}, up to {operator['max_generation']};"
        f" {operator['manual_queries_started']} queries); LATEST {latest['slot']} generation {latest['generation']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=prog("python -m local.chaos"), description=(harness.__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--racers", type=int, default=16)
    parser.add_argument("--slots", type=int, default=200)
    parser.add_argument("--backend", choices=BACKENDS, default="dynamodb-local")
    parser.add_argument("--seed", type=int, default=ChaosOptions.seed)
    parser.add_argument("--lease-s", type=float, default=ChaosOptions.lease_s)
    parser.add_argument("--transient-rate", type=float, default=ChaosOptions.transient_rate)
    parser.add_argument(
        "--write-fault-scale",
        type=float,
        default=ChaosOptions.write_fault_scale,
        help="multiplies the rates of the faults aimed at the lock's writes (0: none)",
    )
    parser.add_argument(
        "--future-fraction",
        type=float,
        default=ChaosOptions.future_fraction,
        help="slots that also get a near-future delivery",
    )
    parser.add_argument(
        "--operator-fraction",
        type=float,
        default=ChaosOptions.operator_fraction,
        help="slots paused, force-released and re-run beside (each; at least one of each; 0: no operator actions)",
    )
    parser.add_argument("--control-slots", type=int, help="slots of the negative control (default: --slots)")
    parser.add_argument("--no-control", action="store_true", help="skip the negative control")
    parser.add_argument("--report", type=Path, default=REPO_ROOT / "chaos-report.json")
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / ".chaos")
    args = parser.parse_args(argv)
    if args.racers < 2 or args.slots < 3:
        parser.error("need at least 2 racers and 3 slots")
    options = options_from(ChaosOptions, args)
    control_slots = None if args.no_control else (args.control_slots or args.slots)
    return run_and_report(
        lambda: run_suite(options, control_slots=control_slots),
        report_path=args.report,
        failed="chaos harness failed:",
        summary=summary_lines,
        problems=verdict,
    )


if __name__ == "__main__":
    sys.exit(main())
