"""The scenario driver's command-line end and shared pieces, without processes: options from the parsed flags, the
exit statuses of one run (passed, failed, could not run, interrupted), the report written only when the run
happened, and the racers' Scheduler-shaped event."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from local.capacity.cli import parse_args
from local.capacity.plan import CapacityOptions
from local.emulators.dynamodb_local import DynamoDBLocalError
from local.scenario.cli import options_from, run_and_report
from local.scenario.driver import ScenarioError, scheduler_event


def test_options_come_from_the_flags_of_the_same_names_then_the_overrides() -> None:
    args = argparse.Namespace(jobs=7, racers=2, report=Path("r.json"), no_control=True)
    options = options_from(CapacityOptions, args, control_jobs=0)
    assert (options.jobs, options.racers, options.control_jobs) == (7, 2, 0)
    assert options.budget == CapacityOptions.budget  # a field without a flag keeps its default


def test_the_capacity_flags_default_to_the_capacity_options(tmp_path: Path) -> None:
    options, report = parse_args([])
    assert options == CapacityOptions() and report.name == "capacity-report.json"
    options, _ = parse_args(["--start-rate", "5", "--lease-s", "8", "--no-control", "--query-ms", "100-200"])
    assert (options.start_rate_per_s, options.heartbeat_s, options.control_jobs) == (5.0, 2.0, 0)
    assert options.query_ms == (100, 200)


def _run(report: dict[str, Any] | Exception) -> Any:
    def run() -> dict[str, Any]:
        if isinstance(report, BaseException):
            raise report
        return report

    return run


def _status(tmp_path: Path, outcome: dict[str, Any] | BaseException) -> int:
    return run_and_report(
        _run(outcome),  # type: ignore[arg-type]
        report_path=tmp_path / "x-report.json",
        failed="x run failed:",
        summary=lambda report: [f"summary {report['n']}"],
        problems=lambda report: report["problems"],
    )


def test_a_passed_run_writes_its_report_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _status(tmp_path, {"n": 1, "problems": []}) == 0
    out = capsys.readouterr()
    assert out.out == f"summary 1\nreport: {tmp_path / 'x-report.json'}\n" and out.err == ""
    assert json.loads((tmp_path / "x-report.json").read_text()) == {"n": 1, "problems": []}


def test_a_failed_run_says_each_problem_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _status(tmp_path, {"n": 2, "problems": [f"p{i}" for i in range(25)]}) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "FAIL p0" and len(err) == 20  # at most 20 FAIL lines
    assert (tmp_path / "x-report.json").exists()


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            ScenarioError("slot X did not settle within its bound"),
            "x run failed: slot X did not settle within its bound",
        ),
        (DynamoDBLocalError("no java"), "x run failed: DynamoDB Local is unavailable: no java"),
    ],
)
def test_a_run_that_could_not_happen_is_one_line_exit_2_and_no_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], error: Exception, line: str
) -> None:
    assert _status(tmp_path, error) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err == line + "\n"
    assert not (tmp_path / "x-report.json").exists()


def test_an_interrupted_run_exits_130(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _status(tmp_path, KeyboardInterrupt()) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_a_bug_keeps_its_traceback(tmp_path: Path) -> None:
    with pytest.raises(KeyError):
        _status(tmp_path, KeyError("a bug"))


def test_the_scheduler_event_is_the_same_for_every_racer_but_the_index() -> None:
    first, second = (
        scheduler_event("job-a", "2026-11-24T10:00:00Z", 0),
        scheduler_event("job-a", "2026-11-24T10:00:00Z", 1),
    )
    assert set(first) == {"scheduled_time", "execution_id", "racer", "job"}
    assert (first["job"], first["scheduled_time"], first["racer"], second["racer"]) == (
        "job-a",
        "2026-11-24T10:00:00Z",
        0,
        1,
    )
    assert first["execution_id"] != second["execution_id"]
