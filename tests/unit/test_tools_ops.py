"""``tools.ops`` without a deployment: argument parsing, the deployment from stack outputs, backfill selection
and ids, the confirmation rule, and the Lambda invoker's request (Stubber)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from slotlock import HistoryRecord, Slot
from stacks.jobs import output_suffix
from tests.sample_jobs import stage_repo
from tools.ops.cli import build_parser, confirm, resolve_deployment
from tools.ops.operator import LambdaInvoker, OpsError, backfill_run_id, selects

SLOT = Slot.parse("2026-11-22T00:30:00Z")


@pytest.fixture(autouse=True)
def sample_repo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """tools.ops reads the job folders of the repository: here the two sample jobs (tests/fixtures/jobs), whatever
    jobs/ holds."""
    monkeypatch.setattr("tools.ops.cli.REPO_ROOT", stage_repo(tmp_path / "repo"))


def record(status: str, generation: int = 1) -> HistoryRecord:
    return HistoryRecord("flights-dashboard", SLOT, generation, status)


@pytest.mark.parametrize(
    ("statuses", "only", "selected"),
    [
        ([], "missed", True),  # no record at all: the slot never ran
        ([("MISSED", 1)], "missed", True),
        ([("SUCCEEDED", 1)], "missed", False),
        ([("FAILED", 1)], "missed", False),  # it ran and failed: --only failed picks it
        ([("RUNNING", 1)], "missed", False),  # still running on the live schedule
        ([("MISSED", 1), ("SUCCEEDED", 2)], "missed", False),  # already backfilled
        ([("FAILED", 1)], "failed", True),
        ([("FAILED", 1), ("SUCCEEDED", 2)], "failed", False),  # the newest committed generation decides
        ([("SUCCEEDED", 1), ("FAILED", 2)], "failed", True),
        ([("MISSED", 1)], "failed", False),
        ([("SUCCEEDED", 1)], "all", True),
    ],
)
def test_backfill_selection_follows_the_newest_committed_generation(
    statuses: list[tuple[str, int]], only: Any, selected: bool
) -> None:
    assert selects([record(s, g) for s, g in statuses], only) is selected


def test_a_backfill_id_is_derived_from_its_arguments_so_the_same_command_resumes() -> None:
    a = backfill_run_id("job", SLOT, Slot(SLOT.epoch_s + 3600), "missed")
    assert a == backfill_run_id("job", SLOT, Slot(SLOT.epoch_s + 3600), "missed")
    assert a != backfill_run_id("job", SLOT, Slot(SLOT.epoch_s + 3600), "all")
    assert a.startswith("backfill-") and len(a) <= 128


def test_every_command_has_help_and_destructive_ones_take_dry_run_and_yes() -> None:
    parser = build_parser()
    for command in ("pause", "resume", "release", "run", "rerun", "backfill"):
        args = parser.parse_args(
            [command, "--job", "j", "--reason", "r", "--dry-run", "--yes"]
            + (["--slot", "2026-11-22T00:30:00Z"] if command == "rerun" else [])
            + (["--from", "2026-11-22T00:00", "--to", "2026-11-22T01:00"] if command == "backfill" else [])
            if command != "resume"
            else [command, "--job", "j", "--dry-run", "--yes"]
        )
        assert args.dry_run and args.yes
    assert parser.parse_args(["history", "--job", "j", "--since", "2026-11-22T00:00"]).since == Slot(
        SLOT.epoch_s - 1800
    )
    with pytest.raises(SystemExit):
        parser.parse_args(["history", "--job", "j", "--since", "yesterday"])
    with pytest.raises(SystemExit):
        parser.parse_args(["pause", "--job", "j"])  # a pause must say why


def test_without_a_terminal_a_change_is_refused_unless_yes() -> None:
    from rich.console import Console

    args = build_parser().parse_args(["pause", "--job", "j", "--reason", "r"])
    with pytest.raises(OpsError, match="--yes"):
        confirm(Console(file=io.StringIO()), args, "pause j?", io.StringIO())
    args.yes = True
    assert confirm(Console(file=io.StringIO()), args, "pause j?", io.StringIO())


def test_the_deployment_comes_from_the_stack_outputs_and_the_job_folders() -> None:
    client = boto3.client("cloudformation", region_name="us-east-1")
    outputs = {
        "LockTableName": "lock-t",
        "ResultsTableName": "results-t",
        "JobNames": "flights-dashboard,carrier-on-time",
    }
    outputs[f"FunctionName{output_suffix('flights-dashboard')}"] = "fn-flights"
    outputs[f"FunctionName{output_suffix('carrier-on-time')}"] = "fn-carrier"
    response = {
        "Stacks": [
            {
                "StackName": "S",
                "CreationTime": "2026-11-22T00:00:00Z",
                "StackStatus": "CREATE_COMPLETE",
                "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
            }
        ]
    }
    with Stubber(client) as stubber:
        stubber.add_response("describe_stacks", response, {"StackName": "S"})
        deployment = resolve_deployment(build_parser().parse_args(["--stack", "S", "status"]), lambda: client)
    assert (deployment.lock_table, deployment.results_table) == ("lock-t", "results-t")
    flights = deployment.job("flights-dashboard")
    assert flights.function_name == "fn-flights" and flights.schedule_expression == "cron(0/30 * * * ? *)"
    assert deployment.job("carrier-on-time").schedule_timezone == "America/New_York"
    with pytest.raises(OpsError, match="no job 'nope'"):
        deployment.job("nope")


def test_explicit_flags_need_no_stack() -> None:
    args = build_parser().parse_args(
        ["--lock-table", "l", "--results-table", "r", "--function", "flights-dashboard=fn", "status"]
    )
    deployment = resolve_deployment(args, None)
    assert deployment.job("flights-dashboard").function_name == "fn"
    bad = build_parser().parse_args(["--lock-table", "l", "--results-table", "r", "--function", "nofn", "status"])
    with pytest.raises(OpsError, match="JOB=FUNCTION_NAME"):
        resolve_deployment(bad, None)


def test_the_lambda_invoker_queues_an_asynchronous_invocation() -> None:
    client = boto3.client("lambda", region_name="us-east-1")
    event = {"job": "j", "scheduled_time": SLOT.iso, "manual": {"generation": 2}}
    with Stubber(client) as stubber:
        stubber.add_response(
            "invoke",
            {"StatusCode": 202, "ResponseMetadata": {"RequestId": "req-1", "HTTPStatusCode": 202}},
            {"FunctionName": "fn", "InvocationType": "Event", "Payload": json.dumps(event).encode()},
        )
        assert LambdaInvoker(client).invoke_async("fn", event) == "req-1"
