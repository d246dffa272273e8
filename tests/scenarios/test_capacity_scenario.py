"""The capacity scenario, small, for ``make test``: 12 jobs x 3 racers fire on one slot against a budget of 3 permits
and an Athena quota of 4 active queries, on AWS DynamoDB Local, with one permit holder killed (Lambda's retry, same
request id), one stopped past its lease (taken over, then resumed) and two whose StartQueryExecution answer is lost
(applied, then the call fails retryably: Lambda's retry, after the permit's expiry, inherits the permit and gets the
same query back), a second deployment (its own lock table, CAPACITY_TABLE_NAME naming the first's) whose 4 jobs are
named like 4 of the first's and fire on the same slot on the same budget, a 3-slot backfill beside the live schedule,
and the negative control without the budget. ``make capacity`` runs the full size (200 jobs x 3, budget 20, quota 25,
40 jobs of the second deployment, 3 lost answers) and writes capacity-report.json.

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
from local.capacity.plan import LOSE_START_ANSWER, CapacityOptions
from local.scenario.checker.capacity import CHECKS
from tests.sample_jobs import sample_repo_fixture

pytestmark = pytest.mark.slow  # 8 execution environments on DynamoDB Local: not in test-fast

JOBS, RACERS, BUDGET, QUOTA, BACKFILL = 12, 3, 3, 4, 3
SECOND_JOBS, LOST_ANSWERS = 4, 1
#: capacity.max_query_active_s (its minimum) and the stand-in's query timeout: above every planned query (<= 13.5 s)
MAX_QUERY_ACTIVE_S = 60.0

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
        lost_answers=LOST_ANSWERS,
        second_jobs=SECOND_JOBS,
        max_query_active_s=MAX_QUERY_ACTIVE_S,
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
    faults = {f["action"]: f for f in report["phases"]["budget"]["faults"] if f["action"] != LOSE_START_ANSWER}
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


def test_a_second_deployment_shared_the_budget_with_jobs_of_the_same_names(report: dict[str, Any]) -> None:
    # Finding 1 (issue 31): staging and production, each with its own lock table, share one budget (the permits in
    # the first deployment's lock table) and run jobs of the same names for the same slot
    second = report["second_deployment"]
    assert second["jobs"] == SECOND_JOBS == second["same_names"]
    assert second["capacity_table"] == report["phases"]["budget"]["lock_table"] != second["lock_table"]
    assert second["slots"] == SECOND_JOBS == second["slots_committed_once"] and second["failure_queue"] == 0
    # each deployment took permits of the one budget for its own namesakes: two owners per name (the deployment in
    # the owner id), every query of the two deployments judged against the same N
    check = report["phases"]["budget"]["capacity_check"]
    assert check["violations"] == [] and check["max_known_active"] <= BUDGET
    assert check["max_queries_per_slot"] == 1
    assert check["queries"] >= JOBS + BACKFILL + SECOND_JOBS  # both deployments' queries, on one Athena
    assert sum(second["permit_how"].values()) >= SECOND_JOBS  # its winners held permits (outcome lines)
    assert report["goals"]["second_deployment_committed_once"]["pass"] is True


def test_lost_start_answers_were_retried_under_the_same_permit_and_query(report: dict[str, Any]) -> None:
    # Finding 2 (issue 31): StartQueryExecution applied, its answer lost; Lambda's retry (same request id) inherits
    # the permit, and Athena's ClientRequestToken idempotency returns the same query
    lost = [f for f in report["phases"]["budget"]["faults"] if f["action"] == LOSE_START_ANSWER]
    assert len(lost) == LOST_ANSWERS == report["lost_answers"]["planned"]
    assert report["lost_answers"]["answers_lost"] == LOST_ANSWERS  # recorded by the environments, once per slot
    for fault in lost:
        assert fault["fired"] and fault["answers_lost"] == 1, fault
        assert fault["struck"]["status"].startswith("error:"), fault  # the invocation failed: Lambda retried it
        assert fault["queries_registered"] == 1, fault  # one query for the slot, whoever started it
        assert fault["same_query_returned"], fault  # a later start of the same token got the lost query back
        committed = fault["committed_by"]
        assert committed is not None and committed["permit"] in ("inherited", "held"), fault
    # the query whose answer was lost counted as permitted, and its permit was never reclaimed while it ran
    assert report["phases"]["budget"]["capacity_check"]["violations"] == []


def test_no_query_stayed_active_longer_than_capacity_max_query_active_s(report: dict[str, Any]) -> None:
    assert report["max_query_active_s"] == MAX_QUERY_ACTIVE_S
    assert 0 < report["longest_query_active_s"] <= MAX_QUERY_ACTIVE_S
    assert report["goals"]["queries_within_max_query_active"]["pass"] is True


def test_the_checker_judges_the_negative_control_over_the_budget(report: dict[str, Any]) -> None:
    # without the budget more than N queries ran at once: the checker, judging the control against the budget it
    # lacked, reports capacity_exceeded (and every start as unpermitted), or it proved nothing
    control = report["negative_control"]
    assert control["checker_violations_by_check"]["capacity_exceeded"] == 1
    assert control["checker_violations_by_check"]["unpermitted_start"] >= 1
    assert report["phases"]["control"]["capacity_check"]["max_known_active"] > BUDGET
    assert report["goals"]["negative_control_caught_by_checker"]["pass"] is True
