"""The chaos suite, bounded for ``make test``: 16 racer processes on AWS DynamoDB Local, seeded faults, and
the negative control. ``make chaos`` runs the full size (16 x 200) and writes chaos-report.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from local.chaos import KILL_POINTS, ChaosOptions, run_suite, summary_lines, verdict

RACERS = 16
SLOTS = 30
CONTROL_SLOTS = 12


@pytest.fixture(scope="module")
def report(dynamodb_local: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("chaos")
    options = ChaosOptions(racers=RACERS, slots=SLOTS, seed=20261122, workdir=workdir,
                           dynamodb_endpoint=dynamodb_local.endpoint_url)
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
