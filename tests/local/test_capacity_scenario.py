"""The capacity scenario, small, for ``make test``: 12 jobs x 3 racers fire on one slot against a budget of 3 permits
and an Athena quota of 4 active queries, on AWS DynamoDB Local, with one permit holder killed (Lambda's retry, same
request id) and one stopped past its lease (taken over, then resumed), a 3-slot backfill beside the live schedule,
and the negative control without the budget. ``make capacity`` runs the full size (200 jobs x 3, budget 20, quota 25)
and writes capacity-report.json.

No timing assertion: every check reads what was recorded (the engine's intervals, the permit writes, the outcomes,
the stored slot items); every wait in the harness is bounded (``max_run_s``, the function's timeout).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from local.capacity.cli import failed_goals, summary_lines
from local.capacity.harness import run_capacity
from local.capacity.plan import CapacityOptions
from local.chaos.capacity_check import CHECKS
from tests.sample_jobs import sample_repo_fixture

pytestmark = pytest.mark.slow  # 8 execution environments on DynamoDB Local: not in test-fast

JOBS, RACERS, BUDGET, QUOTA, BACKFILL = 12, 3, 3, 4, 3

# The harness copies the flights-dashboard sample: here its canonical copy (tests/fixtures/jobs), whatever jobs/ holds.
sample_repo = sample_repo_fixture("local.capacity.harness.REPO_ROOT")


@pytest.fixture(scope="module")
def report(dynamodb_local: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("capacity")
    options = CapacityOptions(
        jobs=JOBS,
        racers=RACERS,
        budget=BUDGET,
        quota=QUOTA,
        environments=8,
        lease_s=10.0,  # far longer than a loaded machine's stalls between a permit's take and its record (docs/local.md)
        heartbeat_s=2.5,
        long_query_ms=(4_000, 5_000),  # the faults' queries outlast the takeovers whatever this says
        time_scale=0.05,  # Lambda's retries 3 s and 6 s later, the deferrals 3 s later
        kills=1,
        pauses=1,
        backfill_slots=BACKFILL,
        manual_headroom=1,
        control_jobs=5,
        workdir=workdir,
        max_run_s=600.0,
        dynamodb_endpoint=dynamodb_local.endpoint_url,
    )
    started = time.monotonic()
    result = run_capacity(options, out=print)
    result["test_duration_s"] = round(time.monotonic() - started, 1)
    (workdir / "capacity-report.json").write_text(json.dumps(result, indent=2, default=str))
    print("\n".join(summary_lines(result)), f"\nthe scenario took {result['test_duration_s']} s")
    return result


def test_every_goal_passes(report: dict[str, Any]) -> None:
    assert failed_goals(report) == []
    assert report["harness_errors"] == []


def test_the_budget_held_athena_never_refused_and_every_slot_committed_once(report: dict[str, Any]) -> None:
    assert report["max_active_queries"] <= BUDGET and report["too_many_requests"] == 0
    assert report["slots"] == JOBS + BACKFILL == report["slots_committed_once"]
    assert report["missed_capacity"] == 0 and report["failure_queue"] == 0
    check = report["phases"]["budget"]["capacity_check"]
    assert set(check["checks"]) == set(CHECKS) and check["violations"] == []
    assert check["max_permitted_active"] <= BUDGET and check["max_queries_per_slot"] == 1


def test_slots_waited_for_permits(report: dict[str, Any]) -> None:
    # 12 winners on 3 permits: some waited in place (the figures exist; their size depends on the machine)
    assert report["wait_s"]["samples"] == report["slots"]
    assert report["wait_s"]["max"] is not None and report["wait_s"]["max"] > 0
    assert report["waiting_gb_s"] > 0


def test_the_killed_and_the_stopped_holder_were_replaced_by_an_invocation_that_inherited_the_permit(
    report: dict[str, Any],
) -> None:
    faults = {f["action"]: f for f in report["phases"]["budget"]["faults"]}
    assert set(faults) == {"kill", "pause"}
    for fault in faults.values():
        assert fault["fired"], fault
        committed = fault["committed_by"]
        assert committed is not None, fault
        assert committed["permit"] in ("inherited", "held") and committed["query_adopted"], fault
        assert committed["queries_started"] == 0, fault  # the running query adopted, never a second one
    # Lambda retried the killed holder with the same request id: that retry inherited the permit and committed (or,
    # had a late duplicate of the slot come first, found it committed by one that inherited it)
    kill = faults["kill"]
    assert kill["struck"]["status"] == "crashed:killed"
    assert any(i.startswith("retry:") for i in kill["invocations"]), kill
    assert kill["committed_by"]["same_request_id"] or "retry:lost" in kill["invocations"], kill
    # the stopped holder, resumed after the takeover, had nothing accepted
    assert faults["pause"]["struck"]["status"] in ("lease_lost", "stale_rejected")


def test_the_backfill_ran_beside_the_live_schedule(report: dict[str, Any]) -> None:
    backfill = report["phases"]["budget"]["backfill"]
    assert backfill["slots"] == BACKFILL and backfill["errors"] == []
    assert set(backfill["statuses"].values()) == {"SUCCEEDED"}


def test_the_semaphore_adds_two_requests_to_a_winners_slot(report: dict[str, Any]) -> None:
    requests = report["dynamodb_requests_per_slot"]
    assert requests["added_by_semaphore"] == 2
    added = {
        op: n - requests["without_budget_operations"].get(op, 0) for op, n in requests["with_budget_operations"].items()
    }
    assert {op: n for op, n in added.items() if n} == {"BatchGetItem": 1, "UpdateItem": 1}


def test_the_negative_control_without_the_budget_meets_athenas_quota(report: dict[str, Any]) -> None:
    control = report["negative_control"]
    assert control["budget"] == 0 and control["too_many_requests"] > 0
    assert control["max_active_queries"] <= QUOTA  # the stand-in enforces the quota itself
