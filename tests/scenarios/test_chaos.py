"""The chaos suite, bounded for ``make test``: 16 racer processes on AWS DynamoDB Local, seeded faults (the
faults aimed at the lock's writes, the near-future deliveries and the operator's actions included), every
check of :mod:`local.scenario.checker`, and the negative control. ``make chaos`` runs the full size (16 x 200) and writes
chaos-report.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from local.chaos.cli import summary_lines, verdict
from local.chaos.harness import run_suite
from local.chaos.plan import FORCED_WRITE_FAULTS, KILL_POINTS, ChaosOptions
from local.emulators.lambda_service import MAX_ASYNC_RETRIES
from local.scenario.checker import CHECKS
from tests.sample_jobs import sample_repo_fixture

pytestmark = pytest.mark.slow  # 16 racer processes on DynamoDB Local, then the atomic moto server: not in test-fast

RACERS = 16
SLOTS = 30
CONTROL_SLOTS = 12
NEW_CHECKS = ("terminal_records", "slot_missed_logged", "future_slot_refused")


# The harness runs the flights-dashboard sample job from the repository's folders: here from its canonical copy (tests/fixtures/jobs), whatever jobs/ holds.
sample_repo = sample_repo_fixture("local.chaos.harness.REPO_ROOT")


@pytest.fixture(scope="module")
def report(dynamodb_local: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("chaos")
    options = ChaosOptions(
        racers=RACERS, slots=SLOTS, seed=20261122, workdir=workdir, dynamodb_endpoint=dynamodb_local.endpoint_url
    )
    result = run_suite(options, control_slots=CONTROL_SLOTS, out=print)
    (workdir / "chaos-report.json").write_text(json.dumps(result, indent=2, default=str))
    print("\n".join(summary_lines(result)))
    return result


def test_the_fenced_run_has_no_violation_and_the_harness_held(report: dict[str, Any]) -> None:
    assert report["violations"] == []
    assert report["harness_errors"] == []
    assert verdict(report) == []


def test_the_negative_control_without_fencing_is_reported_as_violating(report: dict[str, Any]) -> None:
    control = report["negative_control"]
    assert control["harness_errors"] == []
    assert control["violations"] > 0
    assert {"one_commit_per_slot", "stale_write_accepted"} & set(control["violations_by_check"])
    if "one_commit_per_slot" in control["violations_by_check"]:  # a second commit overwrote a terminal record
        assert "terminal_records" in control["violations_by_check"]


def test_the_new_checks_ran_and_held(report: dict[str, Any]) -> None:
    assert set(NEW_CHECKS) <= set(report["checks"]) == set(CHECKS)
    assert not set(NEW_CHECKS) & set(report["violations_by_check"])
    # every MISSED record counted once: the forced ancient slot (too_old) at least, by reason
    missed = report["slot_missed_logged"]
    assert missed["logged"] == missed["stored"] == report["slots_missed"]
    assert missed["stored"].get("too_old", 0) >= report["ancient_slots"] >= 1


def test_the_faults_aimed_at_the_lock_writes_were_injected(report: dict[str, Any]) -> None:
    faults = report["faults_injected"]
    for write, kind, _ in FORCED_WRITE_FAULTS:  # forced once each, plus their random rates
        assert faults.get(f"{kind}@{write}", 0) >= 1, f"{kind}@{write}"
    assert faults.get("TransactionConflictException@heartbeat", 0) >= 1  # forced on an Athena storm's release
    assert faults.get("response_lost@record_missed", 0) >= 1  # forced on the ancient delivery's too_old record
    # The forced ValidationError on a commit's results item: that slot ended FAILED (write_rejected), not lost
    assert report["slots_failed_errors"].get("WriteRejectedError", 0) >= 1 and "corrupt" not in report["outcomes"]


def test_near_future_deliveries_were_refused_without_a_request(report: dict[str, Any]) -> None:
    future = report["future_deliveries"]
    assert future["slots"] >= 1 and 30 <= future["lead_s"]["min"] <= future["lead_s"]["max"] < 600
    # each refused on every attempt: the first and Lambda's two retries, then the on-failure destination
    assert future["invocations"] == future["refused"] == (1 + MAX_ASYNC_RETRIES) * future["dead_lettered"]
    assert future["dynamodb_requests"] == 0


def test_the_operator_actions_ran_and_held(report: dict[str, Any]) -> None:
    operator = report["operator"]
    actions = operator["actions"]
    assert actions["pause"] == actions["resume"] == operator["paused_slots"] >= 1
    assert not {"paused_slot", "force_release", "generation_commits", "manual_isolated"} & set(
        report["violations_by_check"]
    )
    # every racer of a paused slot lost as paused, exactly one recorded it MISSED, no query started
    outcomes = operator["paused_outcomes"]
    assert outcomes.get("missed:paused") == operator["paused_slots"] and outcomes.get("lost:paused", 0) >= RACERS - 1
    assert operator["paused_queries_started"] == 0 and report["slots_missed"].get("paused") == operator["paused_slots"]
    # Forced releases: the checker found no commit of a released holder accepted, none reported, and each slot
    # completed by a takeover that adopted the query (force_release, above), nor any stale commit accepted at all
    # (stale_write_accepted). And the fence was exercised, not bypassed: each holder released before its commit
    # sent that commit once resumed and DynamoDB refused it (stale_rejected: the lock item's condition failed), and
    # a holder released mid-query learns at its next renewal that it lost the lease (lease_lost). Its writes after
    # the resume carry no aimed fault (local.chaos.worker), so this holds wherever the scheduler puts the resume
    # relative to the holder's lease expiry; each released holder ends once, without a Lambda retry.
    assert "stale_write_accepted" not in report["violations_by_check"]
    released = operator["released_holders_by_checkpoint"]
    assert actions["release"] == sum(sum(statuses.values()) for statuses in released.values())
    assert released.get("before_commit", {}).get("stale_rejected", 0) >= 1
    assert set(released.get("before_commit", {})) == {"stale_rejected"}
    assert set(released.get("query_started", {})) <= {"lease_lost", "stale_rejected"}
    # re-runs: the paused slot (generation 2, then 3 beside a later slot) and the newest slot, each committed once
    assert actions["rerun"] >= 3 and operator["max_generation"] >= 3
    assert sum(operator["generations"].values()) == operator["generations_requested"] == actions["rerun"]
    assert set(operator["generations"]) <= {"SUCCEEDED", "FAILED"}
    assert operator["generation_results"] == operator["generations"].get("SUCCEEDED", 0)
    assert operator["manual_queries_started"] >= operator["generation_results"]
    control = report["negative_control"]
    assert control["violations"] > 0


def test_the_run_was_real_size_and_faulty(report: dict[str, Any]) -> None:
    faults = report["faults_injected"]
    assert report["racers"] == RACERS and report["slots"] == SLOTS and report["backend"] == "dynamodb-local"
    assert report["invocations"] >= RACERS * SLOTS
    assert sum(v for k, v in faults.items() if k.startswith("kill@")) >= len(KILL_POINTS) - 1
    assert sum(v for k, v in faults.items() if k.startswith("pause@")) >= 2
    assert faults["lambda_retry"] >= 1 and faults["late_delivery"] >= 2
    assert faults["clock_skew"] >= RACERS // 2
    assert report["takeover_latency_s"]["samples"] >= 2


def test_every_slot_is_accounted_for_and_queries_are_not_repeated(report: dict[str, Any]) -> None:
    finished = report["slots_committed"] + report["slots_failed"] + sum(report["slots_missed"].values())
    assert finished + report["slots_dead_lettered"] >= SLOTS + report["ancient_slots"]
    assert report["slots_committed"] >= SLOTS * 0.8
    # One ClientRequestToken per slot and attempt: a slot never starts two queries for one attempt, so
    # queries can only exceed commits by slots that started one and then failed or were superseded.
    assert report["queries_started"] <= finished
    assert report["queries_started_per_committed_slot"] >= 1.0


def test_the_suite_also_runs_on_the_atomic_moto_server(tmp_path: Path) -> None:
    """The other backend, small: the harness and checker work there too (moto is serialised, so atomic)."""
    options = ChaosOptions(racers=4, slots=8, seed=5, backend="atomic-moto", workdir=tmp_path)
    result = run_suite(options, control_slots=None, out=print)
    assert result["backend"] == "atomic-moto"
    assert verdict(result) == []
    assert result["slots_committed"] >= 6
    assert "negative_control" not in result
