"""``tools.ops`` without a deployment: argument parsing, the deployment from the shared stack's outputs and its
job registry (moto's SSM), backfill selection and ids, the confirmation rule, and the Lambda invoker's request
(Stubber)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import boto3
import moto
import pytest
from botocore.stub import Stubber

from slotlock import HistoryRecord, Slot
from tests.job_registry import PATH, entry, put_raw, register
from tools.ops.cli import build_parser, confirm, main, resolve_deployment
from tools.ops.operator import LambdaInvoker, OpsError, backfill_run_id, selects

SLOT = Slot.parse("2026-11-22T00:30:00Z")
SHARED_OUTPUTS = {"LockTableName": "lock-t", "ResultsTableName": "results-t", "JobRegistryPath": PATH}


@pytest.fixture
def ssm() -> Iterator[Any]:
    """moto's SSM holding the registry of the two sample jobs."""
    with moto.mock_aws():
        client = boto3.client("ssm", region_name="us-east-1")
        register(
            client,
            entry("flights-dashboard", function_name="fn-flights"),
            entry("carrier-on-time", function_name="fn-carrier", group=7),
        )
        yield client


def stack_client(outputs: dict[str, str], stack: str = "S") -> tuple[Any, Stubber]:
    """A CloudFormation client whose one DescribeStacks answers ``outputs`` (Stubber, activated)."""
    client = boto3.client("cloudformation", region_name="us-east-1")
    response = {
        "Stacks": [
            {
                "StackName": stack,
                "CreationTime": "2026-11-22T00:00:00Z",
                "StackStatus": "CREATE_COMPLETE",
                "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
            }
        ]
    }
    stubber = Stubber(client)
    stubber.add_response("describe_stacks", response, {"StackName": stack})
    stubber.activate()
    return client, stubber


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


def test_the_deployment_comes_from_the_shared_stack_s_outputs_and_its_job_registry(ssm: Any) -> None:
    # GIVEN the shared stack's outputs (no per-job output) and its registry
    cloudformation, stubber = stack_client(SHARED_OUTPUTS)

    # WHEN status (no --job) resolves the deployment
    deployment = resolve_deployment(
        build_parser().parse_args(["--stack", "S", "status"]), lambda: cloudformation, lambda: ssm
    )

    # THEN the tables are the outputs', every registered job is there with its function and schedule
    stubber.assert_no_pending_responses()
    assert (deployment.lock_table, deployment.results_table) == ("lock-t", "results-t")
    assert sorted(deployment.jobs) == ["carrier-on-time", "flights-dashboard"]
    flights = deployment.job("flights-dashboard")
    assert flights.function_name == "fn-flights" and flights.schedule_expression == "cron(0/30 * * * ? *)"
    assert deployment.job("carrier-on-time").schedule_timezone == "America/New_York"
    with pytest.raises(OpsError, match="no job 'nope'"):
        deployment.job("nope")


def test_a_command_naming_a_job_reads_that_job_only(ssm: Any) -> None:
    cloudformation, _ = stack_client(SHARED_OUTPUTS)
    calls: list[str] = []
    ssm.meta.events.register("before-call.ssm.*", lambda model, **_: calls.append(model.name))
    args = build_parser().parse_args(["--stack", "S", "history", "--job", "carrier-on-time"])
    deployment = resolve_deployment(args, lambda: cloudformation, lambda: ssm)
    assert list(deployment.jobs) == ["carrier-on-time"] and calls == ["GetParameter"]
    assert deployment.job("carrier-on-time").function_name == "fn-carrier"


def test_more_than_ten_jobs_are_read_page_by_page(ssm: Any) -> None:
    register(ssm, *(entry(f"job-{i:02d}") for i in range(12)))
    calls: list[str] = []
    ssm.meta.events.register("before-call.ssm.*", lambda model, **_: calls.append(model.name))
    args = build_parser().parse_args(["--lock-table", "l", "--results-table", "r", "status"])
    deployment = resolve_deployment(args, None, lambda: ssm)
    assert len(deployment.jobs) == 14 and calls == ["GetParametersByPath"] * 2


def test_explicit_tables_need_no_stack_and_the_registry_follows_the_stack_name(ssm: Any) -> None:
    # GIVEN --lock-table and --results-table (no CloudFormation client at all) and a function named directly
    args = build_parser().parse_args(
        ["--lock-table", "l", "--results-table", "r", "--function", "flights-dashboard=fn", "status"]
    )

    # WHEN the deployment is resolved, THEN the registry /ScheduledAthenaRefresh/jobs/ gives the jobs, the flag the
    # function it names
    deployment = resolve_deployment(args, None, lambda: ssm)
    assert deployment.job("flights-dashboard").function_name == "fn"
    assert deployment.job("carrier-on-time").function_name == "fn-carrier"
    bad = build_parser().parse_args(["--lock-table", "l", "--results-table", "r", "--function", "nofn", "status"])
    with pytest.raises(OpsError, match="JOB=FUNCTION_NAME"):
        resolve_deployment(bad, None, lambda: ssm)
    stray = build_parser().parse_args(["--lock-table", "l", "--results-table", "r", "--function", "nope=f", "status"])
    with pytest.raises(OpsError, match="--function nope=...: no job 'nope' in the job registry"):
        resolve_deployment(stray, None, lambda: ssm)
    other = build_parser().parse_args(["--stack", "Other", "--lock-table", "l", "--results-table", "r", "status"])
    assert resolve_deployment(other, None, lambda: ssm).jobs == {}  # /Other/jobs/ holds none


def test_a_stack_without_the_registry_output_is_refused(ssm: Any) -> None:
    outputs = {"LockTableName": "lock-t", "ResultsTableName": "results-t", "JobNames": "flights-dashboard"}
    cloudformation, _ = stack_client(outputs)
    with pytest.raises(OpsError, match="stack S has no JobRegistryPath output"):
        resolve_deployment(build_parser().parse_args(["--stack", "S", "status"]), lambda: cloudformation, lambda: ssm)


class MotoSession:
    """``boto3.session.Session`` for ``main``: moto's clients (the mock is active), CloudFormation stubbed."""

    def __init__(self, cloudformation: Any, ssm: Any) -> None:
        self.cloudformation, self.ssm = cloudformation, ssm

    def client(self, name: str, **kwargs: Any) -> Any:
        if name == "cloudformation":
            return self.cloudformation
        if name == "ssm":
            return self.ssm
        return boto3.client(name, region_name="us-east-1", **kwargs)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["pause", "--job", "nope", "--reason", "r", "--yes"],
            (
                "refused: no job 'nope' in the job registry /ScheduledAthenaRefresh/jobs/ (no parameter"
                " /ScheduledAthenaRefresh/jobs/nope); the deployed jobs are the parameters under that path"
            ),
        ),
        (
            ["status", "--job", "broken"],
            (
                "refused: job registry parameter /ScheduledAthenaRefresh/jobs/broken: racers: must be a positive"
                " integer, got 0"
            ),
        ),
    ],
    ids=["unknown job", "malformed entry"],
)
def test_an_unknown_job_or_a_malformed_entry_is_one_refused_line_and_exit_1(
    ssm: Any, monkeypatch: pytest.MonkeyPatch, argv: list[str], expected: str
) -> None:
    # GIVEN the registry, with one malformed entry
    put_raw(ssm, "broken", entry_json(racers=0, job="broken"))
    cloudformation, _ = stack_client(SHARED_OUTPUTS, stack="ScheduledAthenaRefresh")
    monkeypatch.setattr("boto3.session.Session", lambda **_: MotoSession(cloudformation, ssm))

    # WHEN the command names an unknown job, or the malformed one
    out = io.StringIO()
    status = main(["--region", "us-east-1", *argv], out=out)

    # THEN one line says which parameter and what is wrong, exit status 1, no traceback
    assert status == 1 and out.getvalue() == expected + "\n"


def entry_json(**overrides: Any) -> str:
    return json.dumps({**entry("flights-dashboard").as_dict(), **overrides})


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
