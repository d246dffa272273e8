"""``tools.ops`` without a deployment: argument parsing, the deployment from the shared stack's outputs and its
job registry (moto's SSM), backfill selection and ids, the confirmation rule, the Lambda invoker's request
(Stubber), and each slot's capacity wait in the status and the history (moto's DynamoDB)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import moto
import pytest
from botocore.stub import Stubber

from athena_refresh.errors import QueryFailedError
from slotlock import HistoryRecord, Slot, SlotLock, create_lock_table
from tests.job_registry import PATH, entry, put_raw, register
from tools.cli.exit_status import ExitStatus
from tools.ops.cli import build_parser, confirm, main, resolve_deployment, run_command, selected_jobs
from tools.ops.operator import Deployment, JobTarget, LambdaInvoker, Operator, OpsError, backfill_run_id, selects
from tools.ops.views import capacity_wait

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
    assert list(deployment.jobs) == ["carrier-on-time"] and calls == ["GetParametersByPath"]
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
                "refused: no job 'nope' in the job registry /ScheduledAthenaRefresh/jobs/ (no parameter under"
                " /ScheduledAthenaRefresh/jobs/nope/); the deployed jobs are the parameters under that path"
            ),
        ),
        (
            ["status", "--job", "broken"],
            (
                "refused: job registry parameter /ScheduledAthenaRefresh/jobs/broken/00: racers: must be a positive"
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


# --- the capacity wait (issue 24) ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # MISSED "capacity": the waiter's error records its wait and its deferrals
        (
            {
                "status": "MISSED",
                "reason": "capacity",
                "error": {"reason": "capacity", "waited_ms": 1_700_000, "deferrals": 3},
            },
            {"waited_ms": 1_700_000, "deferrals": 3, "source": "missed"},
        ),
        # MISSED "capacity" by the next slot's winner (given back, its comeback never came): the wait its state kept
        (
            {
                "status": "MISSED",
                "reason": "capacity",
                "error": {"superseded_by_slot": "2026-11-22T01:00:00Z", "fencing_token": 3},
                "state": {"capacity": {"deferrals": 1, "waited_ms": 60_000}},
            },
            {"waited_ms": 60_000, "deferrals": 1, "source": "missed"},
        ),
        # committed: the summary's permit_wait_ms; the deferrals from the state it kept
        (
            {
                "status": "SUCCEEDED",
                "summary": {"permit_wait_ms": 64_000},
                "state": {"capacity": {"deferrals": 1, "waited_ms": 60_000}},
            },
            {"waited_ms": 64_000, "deferrals": 1, "source": "committed"},
        ),
        (
            {"status": "SUCCEEDED", "summary": {"permit_wait_ms": 0}},
            {"waited_ms": 0, "deferrals": 0, "source": "committed"},
        ),
        # in flight, or given back and waiting for the schedule's re-invocation
        (
            {"status": "RUNNING", "state": {"capacity": {"deferrals": 2, "waited_ms": 125_000}}},
            {"waited_ms": 125_000, "deferrals": 2, "source": "waiting"},
        ),
        # nothing to show: the budget off, a MISSED of another reason, a tampered value
        ({"status": "SUCCEEDED", "summary": {"row_count": 3}}, None),
        ({"status": "MISSED", "reason": "too_old", "error": {"waited_ms": 5}}, None),
        ({"status": "RUNNING", "state": {"capacity": {"deferrals": 1, "waited_ms": True}}}, None),
        ({"status": "RUNNING", "state": {"capacity": "61 s"}}, None),
        (
            {"status": "RUNNING", "state": {"capacity": {"deferrals": -1, "waited_ms": 10}}},
            {"waited_ms": 10, "deferrals": None, "source": "waiting"},
        ),
    ],
)
def test_the_capacity_wait_of_a_slot_item(fields: dict[str, Any], expected: dict[str, Any] | None) -> None:
    assert capacity_wait(HistoryRecord("flights-dashboard", SLOT, 1, **fields)) == expected
    assert capacity_wait(None) is None


@pytest.fixture
def lock_world() -> Iterator[tuple[Operator, SlotLock]]:
    """A lock table on moto, the operator over it and the flights job's lock (its current half-hour slot)."""
    with moto.mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        create_lock_table(ddb, "lock-t")
        target = JobTarget("flights-dashboard", "fn-flights", "cron(0/30 * * * ? *)", "UTC")
        deployment = Deployment("lock-t", "results-t", {"flights-dashboard": target})
        operator = Operator(deployment, dynamodb=ddb, invoker=LambdaInvoker(None), identity=lambda: "me")
        yield operator, SlotLock("lock-t", "flights-dashboard", client=ddb, max_slot_lead_s=None)


def ops(operator: Operator, *argv: str) -> tuple[int, str]:
    from rich.console import Console

    out = io.StringIO()
    code = run_command(build_parser().parse_args(list(argv)), operator, Console(file=out, width=250), io.StringIO())
    return code, out.getvalue()


def json_documents(text: str) -> list[Any]:
    """The JSON documents printed one after the other (``print_json`` indents each over several lines)."""
    decoder, documents, rest = json.JSONDecoder(), [], text.strip()
    while rest:
        document, end = decoder.raw_decode(rest)
        documents.append(document)
        rest = rest[end:].strip()
    return documents


def test_status_and_history_show_the_slots_capacity_wait(lock_world: tuple[Operator, SlotLock]) -> None:
    operator, lock = lock_world
    current = int(time.time()) // 1800 * 1800  # the job's current slot: the lock refuses slots past their age
    waiting, missed = Slot(current), Slot(current - 1800)
    # GIVEN no slot yet: nothing to show
    (status,) = operator.status("flights-dashboard")
    assert status.as_dict()["capacity"] is None and status.slot_record is None
    # AND an older slot MISSED "capacity" (the waiter at its last chance), then a slot given back after 61 s
    lease = lock.acquire(missed, "waiter-0")
    lock.commit(
        lease, outcome="missed", reason="capacity", error={"reason": "capacity", "waited_ms": 1_700_000, "deferrals": 3}
    )
    lease = lock.acquire(waiting, "waiter-1")
    lease = lock.record_state(lease, {"capacity": {"deferrals": 1, "waited_ms": 61_000}})
    lock.release(lease)

    # WHEN the operator asks for the status (JSON and table)
    (status,) = operator.status("flights-dashboard")
    code, text = ops(operator, "status", "--job", "flights-dashboard")
    json_code, json_text = ops(operator, "status", "--job", "flights-dashboard", "--json")

    # THEN the live lease's slot shows its wait so far (the slot item's state)
    expected = {"slot": waiting.iso, "status": "RUNNING", "waited_ms": 61_000, "deferrals": 1, "source": "waiting"}
    assert status.as_dict()["capacity"] == expected
    assert json.loads(json_text)[0]["capacity"] == expected
    assert f"slot {waiting.iso}: waiting 61.0 s so far, given back 1x" in text
    # AND the job is failing (issue 34): its last finished slot MISSED ``capacity``, said with why, exit status 4
    assert (code, json_code) == (ExitStatus.JOB_FAILING, ExitStatus.JOB_FAILING)
    failure = json.loads(json_text)[0]["last_finished"]["failure"]
    assert (failure["error_class"], failure["failing"]) == ("capacity", True)
    assert "capacity: no Athena capacity permit before the slot's maximum age; waited 1700.0 s" in failure["summary"]

    # WHEN the re-invocation commits it (its wait in the summary), and the history is asked for
    lease = lock.acquire(waiting, "back-1")
    lock.commit(lease, summary={"row_count": 3, "permit_wait_ms": 64_000})
    (status,) = operator.status("flights-dashboard")
    code, lines = ops(operator, "history", "--job", "flights-dashboard", "--json")
    table_code, table = ops(operator, "history", "--job", "flights-dashboard")

    # THEN the status and each record carry it: committed after one deferral; MISSED without a permit
    assert status.as_dict()["capacity"]["source"] == "committed"
    by_slot = {r["slot"]: r["capacity"] for r in json_documents(lines)}
    assert by_slot[waiting.iso] == {"waited_ms": 64_000, "deferrals": 1, "source": "committed"}
    assert by_slot[missed.iso] == {"waited_ms": 1_700_000, "deferrals": 3, "source": "missed"}
    assert (code, table_code) == (0, 0)
    assert "64.0 s, given back 1x" in table and "1700.0 s, given back 3x: MISSED, no permit" in table


def test_a_failed_query_is_shown_with_its_error_class_and_message_and_status_exits_4(
    lock_world: tuple[Operator, SlotLock],
) -> None:
    """Issue 34: ``history`` showed ``FAILED | -`` for a slot whose record says ``COLUMN_NOT_FOUND: ...``."""
    operator, lock = lock_world
    current = int(time.time()) // 1800 * 1800
    ok, failed = Slot(current - 1800), Slot(current)
    message = "line 3:8: Column 'dst' cannot be resolved"
    error = QueryFailedError("qe-1", "FAILED", error_category=2, error_message=f"COLUMN_NOT_FOUND: {message}")
    # GIVEN a success, then the query failing for good (the error object the runtime records)
    lock.commit(lock.acquire(ok, "racer-0"), summary={"row_count": 1})
    code_ok, _ = ops(operator, "status", "--job", "flights-dashboard")
    lock.commit(lock.acquire(failed, "racer-1"), outcome="failed", error=error.as_dict())

    # WHEN the operator asks for the status and the history
    code, text = ops(operator, "status", "--job", "flights-dashboard")
    json_code, json_text = ops(operator, "status", "--job", "flights-dashboard", "--json")
    history_code, table = ops(operator, "history", "--job", "flights-dashboard")
    _, lines = ops(operator, "history", "--job", "flights-dashboard", "--json")

    # THEN the status names the failure and exits 4 (0 while the last slot succeeded); the history row too
    assert code_ok == ExitStatus.OK
    assert (code, json_code, history_code) == (ExitStatus.JOB_FAILING, ExitStatus.JOB_FAILING, 0)
    assert "COLUMN_NOT_FOUND: line 3:8: Column 'dst'" in text
    failure = json.loads(json_text)[0]["last_finished"]["failure"]
    assert failure == {
        "status": "FAILED",
        "error_class": "COLUMN_NOT_FOUND",
        "message": message,
        "summary": f"COLUMN_NOT_FOUND: {message}",
        "failing": True,
    }
    assert "COLUMN_NOT_FOUND: line 3:8: Column" in table
    by_slot = {r["slot"]: r["failure"] for r in json_documents(lines)}
    assert by_slot[failed.iso]["error_class"] == "COLUMN_NOT_FOUND" and by_slot[ok.iso] is None


def test_status_and_history_show_a_slot_given_back_for_capacity_and_missed_when_its_comeback_never_came(
    lock_world: tuple[Operator, SlotLock],
) -> None:
    operator, lock = lock_world
    current = int(time.time()) // 1800 * 1800
    older, newer = Slot(current - 1800), Slot(current)
    # GIVEN the older slot given back for capacity after waiting 60 s (its comeback arranged)
    lease = lock.acquire(older, "waiter-1")
    lease = lock.record_state(lease, {"capacity": {"deferrals": 1, "waited_ms": 60_000}})
    lock.release(lease, given_back="capacity")

    # WHEN the operator asks for the status
    (status,) = operator.status("flights-dashboard")
    code, text = ops(operator, "status", "--job", "flights-dashboard")

    # THEN the lease shows why it was given back
    assert status.as_dict()["holder"]["given_back_reason"] == "capacity"
    assert code == 0 and "given back (capacity)" in text

    # WHEN its comeback never comes: the next slot's winner runs, and the history is asked for
    lock.commit(lock.acquire(newer, "winner"))
    code, lines = ops(operator, "history", "--job", "flights-dashboard", "--json")
    table_code, table = ops(operator, "history", "--job", "flights-dashboard")

    # THEN the older slot is MISSED "capacity" (not "superseded"), with the wait its state kept
    by_slot = {r["slot"]: r for r in json_documents(lines)}
    assert (by_slot[older.iso]["status"], by_slot[older.iso]["reason"]) == ("MISSED", "capacity")
    assert by_slot[older.iso]["error"]["superseded_by_slot"] == newer.iso
    assert by_slot[older.iso]["capacity"] == {"waited_ms": 60_000, "deferrals": 1, "source": "missed"}
    assert (code, table_code) == (0, 0) and "60.0 s, given back 1x: MISSED, no permit" in table
    # AND the lease no longer says given back
    (status,) = operator.status("flights-dashboard")
    assert status.as_dict()["holder"]["given_back_reason"] is None


# ---- -s/--select (tools/cli/selection.py) ------------------------------------------------------------------------


def test_a_glob_reads_every_entry_and_status_shows_the_jobs_it_matches(ssm: Any) -> None:
    register(ssm, entry("daily-kpis"), entry("daily-revenue"))
    calls: list[str] = []
    ssm.meta.events.register("before-call.ssm.*", lambda model, **_: calls.append(model.name))
    args = build_parser().parse_args(["--lock-table", "l", "--results-table", "r", "status", "-s", "daily-*,flights-*"])
    deployment = resolve_deployment(args, None, lambda: ssm)
    assert calls == ["GetParametersByPath"] and len(deployment.jobs) == 4
    assert selected_jobs(args, deployment) == ("daily-kpis", "daily-revenue", "flights-dashboard")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["history", "-s", "carrier-*"], "carrier-on-time"),  # a glob matching one job: that job
        (["history", "--job", "flights-dashboard"], "flights-dashboard"),
        (["status", "-s", "flights-dashboard"], "flights-dashboard"),
        (["status"], None),  # every job
    ],
)
def test_a_selection_names_the_job_a_command_acts_on(ssm: Any, argv: list[str], expected: str | None) -> None:
    args = build_parser().parse_args(["--lock-table", "l", "--results-table", "r", *argv])
    assert selected_jobs(args, resolve_deployment(args, None, lambda: ssm)) == expected


@pytest.mark.parametrize(
    ("argv", "refusal"),
    [
        (["history", "-s", "*"], "this command takes one job; '*' matches 2: carrier-on-time, flights-dashboard"),
        (
            ["pause", "-s", "daily-*", "--reason", "r"],
            "no job matches 'daily-*'; jobs: carrier-on-time, flights-dashboard",
        ),
        (["status", "-s", "flights-dashbord,c*"], "no job 'flights-dashbord' (did you mean 'flights-dashboard'?)"),
    ],
)
def test_a_selection_that_cannot_be_applied_is_refused(ssm: Any, argv: list[str], refusal: str) -> None:
    args = build_parser().parse_args(["--lock-table", "l", "--results-table", "r", *argv])
    deployment = resolve_deployment(args, None, lambda: ssm)
    with pytest.raises(OpsError) as caught:
        selected_jobs(args, deployment)
    assert refusal in str(caught.value)
