"""``python -m local.capacity``: the command line of ``make capacity`` (:mod:`local.capacity.harness`), its summary and
its verdict.

    python -m local.capacity [--jobs 200] [--racers 3] [--budget 20] [--quota 25] [--environments 40] [--seed N]
                             [--second-jobs 40] [--lost-answers 3] [--max-query-active-s 60]
                             [--control-jobs 40 | --no-control] [--report capacity-report.json]

Exit status: 0 every goal passed; 1 a goal failed (``FAIL`` lines on stderr); 2 bad arguments, or the run could not
happen (a harness failure, DynamoDB Local missing, ...: one ``capacity run failed:`` line on stderr); 130
interrupted.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from local.capacity.harness import run_capacity
from local.capacity.plan import REPO_ROOT, CapacityOptions
from local.scenario.cli import options_from, run_and_report
from tools.cli.program import prog

DEFAULTS = CapacityOptions()


def failed_goals(report: dict[str, Any]) -> list[str]:
    """One line per goal that did not pass (empty when the run passed)."""
    return [
        f"{name}: {json.dumps({k: v for k, v in goal.items() if k != 'pass'}, default=str)}"
        for name, goal in report["goals"].items()
        if goal["pass"] is False
    ]


def summary_lines(report: dict[str, Any]) -> list[str]:
    wait = report["wait_s"]
    requests = report["dynamodb_requests_per_slot"]
    lines = [
        (
            f"{report['jobs']} jobs x {report['racers']} racers, budget {report['budget']}, Athena quota"
            f" {report['quota']['active_queries']} ({report['environments']} environments, lease"
            f" {report['lease_duration_s']} s): {report['duration_s']} s"
        ),
        (
            f"max active queries {report['max_active_queries']}, TooManyRequests {report['too_many_requests']},"
            f" throttled {report['throttled']}, queries started {report['starts']}"
        ),
        (
            f"slots {report['slots']} ({report['slots_live']} live, {report['slots_backfill']} backfill), committed"
            f" once {report['slots_committed_once']}, missed capacity {report['missed_capacity']}, failure queue"
            f" {report['failure_queue']}"
        ),
        (
            f"permit wait p50 {wait['p50']} s, p95 {wait['p95']} s, max {wait['max']} s; waiting"
            f" {report['waiting_gb_s']} GB-s at {report['memory_mb']} MB; deferrals {report['deferrals']};"
            f" permits reclaimed after expiry {report['permits_reclaimed_after_expiry']}; permits {report['permit_how']}"
        ),
        (
            f"DynamoDB requests of a winner's slot: {requests['with_budget']} with the budget,"
            f" {requests['without_budget']} without, added {requests['added_by_semaphore']}"
        ),
        f"invocations {report['invocations']}: {report['outcomes']}",
        (
            f"lost StartQueryExecution answers {report['lost_answers']['answers_lost']} (planned"
            f" {report['lost_answers']['planned']}), the same query returned to a later start"
            f" {report['lost_answers']['same_query_returned']}, committed with the permit inherited"
            f" {report['lost_answers']['committed_with_permit_inherited']}; longest query active"
            f" {report['longest_query_active_s']} s (capacity.max_query_active_s {report['max_query_active_s']})"
        ),
        (
            f"permit take to query record p95 {report['take_to_record_s']['p95']} s, max"
            f" {report['take_to_record_s']['max']} s (margin to lease - heartbeat: {report['stall_margin_s']} s);"
            f" delivery delay p50 {report['delivery_delay_s']['p50']} s"
        ),
    ]
    margin = report.get("stall_margin_s")
    if margin is not None and margin < 0:
        lines.append(
            "note: a holder took longer than lease - heartbeat interval between its permit's take and its query's"
            " record (the machine was loaded?): a permit could then be reclaimed under a running query; a longer"
            " --lease-s restores the margin"
        )
    second = report.get("second_deployment")
    if second:
        lines.append(
            f"second deployment on the same budget ({second['jobs']} jobs, {second['same_names']} named like the"
            f" first's, permits in {second['capacity_table']}): slots {second['slots']}, committed once"
            f" {second['slots_committed_once']}, failure queue {second['failure_queue']}, permits {second['permit_how']}"
        )
    control = report.get("negative_control")
    if control:
        lines.append(
            f"negative control (no budget, {control['jobs']} jobs): max active queries {control['max_active_queries']},"
            f" TooManyRequests {control['too_many_requests']}, failure queue {control['failure_queue']}; the checker"
            f" against budget {report['budget']}: {control['checker_violations_by_check']}"
        )
    verdicts = {True: "pass", False: "FAIL", None: "not judged"}
    lines += [f"goal {name}: {verdicts[goal['pass']]}" for name, goal in report["goals"].items()]
    return lines


def _pair(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def parse_args(argv: list[str] | None = None) -> tuple[CapacityOptions, Path]:
    d = DEFAULTS
    parser = argparse.ArgumentParser(
        prog=prog("python -m local.capacity"),
        description="make capacity: many jobs fire on one slot against one Athena capacity budget, on DynamoDB Local"
        " and the local Athena stand-in; writes capacity-report.json (docs/local.md, 'make capacity').",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add("--jobs", type=int, default=d.jobs, help="jobs (one function each) firing on the same slot")
    add("--racers", type=int, default=d.racers, help="deliveries per job and slot")
    add("--budget", type=int, default=d.budget, help="capacity.permits: the semaphore's permits")
    add("--quota", type=int, default=d.quota, help="Athena's active-query quota the local engine enforces")
    add(
        "--start-rate",
        dest="start_rate_per_s",
        metavar="START_RATE",
        type=float,
        default=d.start_rate_per_s,
        help="StartQueryExecution calls per second",
    )
    add("--start-burst", type=int, default=d.start_burst, help="StartQueryExecution burst")
    add("--environments", type=int, default=d.environments, help="execution environments shared by the functions")
    add("--lease-s", type=float, default=d.lease_s, help="the jobs' lease (the heartbeat is a quarter of it)")
    add("--query-ms", type=_pair, default=d.query_ms, help="most queries' simulated duration, ms (MIN-MAX)")
    add("--long-query-ms", type=_pair, default=d.long_query_ms, help="long queries' duration, ms (MIN-MAX)")
    add("--long-fraction", type=float, default=d.long_fraction, help="share of the jobs with a long query")
    add("--kills", type=int, default=d.kills, help="permit holders SIGKILLed (Lambda retries them)")
    add("--pauses", type=int, default=d.pauses, help="permit holders SIGSTOPped past their lease, then resumed")
    add("--lost-answers", type=int, default=d.lost_answers, help="permit holders whose query start's answer is lost")
    add(
        "--second-jobs",
        type=int,
        default=d.second_jobs,
        help="jobs of a second deployment sharing the budget (named like some of the first's; 0: none)",
    )
    add(
        "--max-query-active-s",
        type=float,
        default=d.max_query_active_s,
        help="capacity.max_query_active_s and the Athena stand-in's query timeout (at least 60)",
    )
    add("--backfill-slots", type=int, default=d.backfill_slots, help="past slots of one job run as a backfill")
    add("--wait-in-place-s", type=float, default=d.wait_in_place_s, help="capacity.wait_in_place_s")
    add("--manual-headroom", type=int, default=d.manual_headroom, help="capacity.manual_headroom")
    add("--time-scale", type=float, default=d.time_scale, help="Lambda retries and deferrals come after delay x this")
    add("--timeout-s", type=int, default=d.timeout_s, help="the function's timeout (the fake service enforces it)")
    add("--max-slot-age-s", type=int, default=d.max_slot_age_s, help="MAX_SLOT_AGE_S")
    add("--memory-mb", type=int, default=d.memory_mb, help="the function's memory (waiting GB-s)")
    control = parser.add_mutually_exclusive_group()
    control.add_argument("--control-jobs", type=int, default=d.control_jobs, help="jobs of the negative control")
    control.add_argument("--no-control", action="store_true", help="skip the negative control")
    add("--seed", type=int, default=d.seed, help="the plan's seed (query durations, fault targets)")
    add("--workdir", type=Path, default=d.workdir, help="logs, engine state, history.jsonl")
    add("--max-run-s", type=float, default=d.max_run_s, help="bound of the whole run")
    add("--report", type=Path, default=REPO_ROOT / "capacity-report.json", help="where the report goes")
    args = parser.parse_args(argv)
    options = options_from(
        CapacityOptions,
        args,
        heartbeat_s=round(args.lease_s / 4, 3),
        control_jobs=0 if args.no_control else args.control_jobs,
    )
    problems = options.problems()
    if problems:
        parser.error("; ".join(problems))
    return options, args.report


def main(argv: list[str] | None = None) -> int:
    options, report_path = parse_args(argv)
    return run_and_report(
        lambda: run_capacity(options),
        report_path=report_path,
        failed="capacity run failed:",
        summary=summary_lines,
        problems=failed_goals,
    )
