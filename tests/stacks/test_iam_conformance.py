"""IAM conformance: every AWS call the deployed code makes is allowed by the synthesized policies, and every
grant is used (least privilege both ways).

The real handlers run on in-process moto with the names of a deployment of the synthesized stacks (the shared
stack and the job stacks, :mod:`tests.stacks.iam.scenarios`) while :class:`~tests.stacks.iam.recorder.CallRecorder`
records every botocore call and presigned URL, per principal: each job's refresh function (in its job stack), the
read API and the widget (one read role), and the operator (``tools.ops`` and ``tools.results``, which find the jobs
in the job registry; their policy is ``docs/operator-policy.json``).
Each call becomes the permissions AWS checks for it (:mod:`tests.stacks.iam.permissions`, with what Athena does
with the caller's credentials), evaluated against that principal's identity policies with moto's IAM policy
evaluator (:func:`tests.stacks.iam.template.evaluate`; conditions checked beside it).

The job functions run with the capacity budget on, as synthesized (issue 24, :mod:`tests.stacks.iam.capacity`):
every winner takes a permit of the semaphore and releases it in its commit, and one slot per job waits for a permit
held by others, gives the slot back (``scheduler.CreateSchedule``, which passes the job's Scheduler role:
``iam:PassRole`` to ``scheduler.amazonaws.com``) and is committed by the schedule's re-invocation.

A deployment sharing another deployment's budget (cdk.json ``capacity.table_name`` and ``capacity.shared_workgroups``)
has a module of its own, ``test_iam_conformance_shared.py`` (a second world with the same physical names).

No emulator here enforces IAM: this test is the gate for every grant. A new call or function extends the
scenarios; a denied call fails with the principal, the call and what is missing; a grant no call used fails
unless the stack names it with a reason (``PLATFORM_GRANTS`` of the construct that grants it).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import moto
import pytest
from botocore.exceptions import ClientError

from athena_refresh import contract
from athena_refresh.watchdog import watch_key
from slotlock import Slot, SlotLock, pause, table
from slotlock._expressions import LEASE_EXPIRY_UPDATE
from slotlock.schedule import latest_firings
from stacks import REPO_ROOT
from stacks.constructs import read_api, refresh_function
from tests.stacks import deployment_view
from tests.stacks.iam import capacity
from tests.stacks.iam.permissions import AthenaWorld, Permission, permissions_for
from tests.stacks.iam.recorder import CallRecorder, RecordedCall
from tests.stacks.iam.scenarios import (
    OFFLOAD_ROWS,
    OPERATOR,
    READ_API,
    WATCHDOG,
    WIDGET,
    ConformanceWorld,
    describe_stacks_answer,
    invoke_answer,
    refresh_principal,
    run_cli,
)
from tests.stacks.iam.template import ResolvedTemplate, evaluate, grant_used, grants

OPERATOR_POLICY = REPO_ROOT / "docs" / "operator-policy.json"


# ---------------------------------------------------------------------------------------------------
# the recorded world: every scenario once per session
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def resolved(stack_templates: dict[str, dict[str, Any]], stack: Any) -> ResolvedTemplate:
    """Every stack of the deployment, merged (each resource named after its own stack), the shared one's name as
    the deployment's."""
    return ResolvedTemplate(deployment_view.merged_template(stack_templates), stack.stack_name)


@pytest.fixture(scope="module")
def recorded(resolved: ResolvedTemplate, deployment: Any) -> Iterator[tuple[ConformanceWorld, CallRecorder]]:
    recorder = CallRecorder()
    with pytest.MonkeyPatch.context() as patch, moto.mock_aws(), recorder.installed():
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }.items():
            patch.setenv(name, value)
        patch.delenv("AWS_PROFILE", raising=False)
        # One boto3 session for every CLI run (each `main` builds its own; a fresh one reloads every service
        # model, about 1 s a run): the same clients, sent through the same recorder.
        shared = boto3.session.Session(region_name="us-east-1")
        patch.setattr(boto3.session, "Session", lambda **_: shared)
        job_assets = {job: Path(d) for group in deployment.job_stacks.values() for job, d in group.asset_dirs.items()}
        world = ConformanceWorld(
            resolved, recorder, job_assets=job_assets, read_asset=Path(deployment.shared.runtime_asset_dir)
        )
        world.create()
        recorder.answer("lambda", "Invoke", invoke_answer(world))
        recorder.answer("cloudformation", "DescribeStacks", describe_stacks_answer(world))
        # Each job's eight latest schedule firings, taken once: a firing passing during the run must not shift them.
        slots = {job: world.job_slots(job, 8) for job in world.refresh_functions}
        for job in sorted(world.refresh_functions):
            capacity.run_deferral_scenario(world, job, slots[job][-5])
            _refresh_scenarios(world, job, slots[job])
            _operator_scenarios(world, job, resolved.stack_name, slots[job])
        _read_scenarios(world, slots)
        _watchdog_scenarios(world)
        yield world, recorder


def _refresh_scenarios(world: ConformanceWorld, job: str, slots: list[str]) -> None:
    """Live slot with heartbeats; oversized rows offloaded to S3; a crashed winner taken over and adopted; a
    delivery while paused."""
    from tools.ops.cli import main as ops_main

    live, offload, takeover, paused = slots[-4:]
    # A live slot whose query stays RUNNING for 2 polls (real polling sleeps of 200 ms and more), with a
    # 0.1 s heartbeat interval: the lease is renewed while it runs.
    world.lock_clock.set(Slot.parse(live).epoch_ms + 2_000)
    world.keep_queries_running(2)
    outcome = world.invoke_refresh(job, {"scheduled_time": live, "job": job}, "live", heartbeat_s="0.1")
    world.finish_queries_at_once()
    assert outcome["status"] == "succeeded", outcome
    # Rows too large for an item: the result goes to S3.
    world.lock_clock.set(Slot.parse(offload).epoch_ms + 2_000)
    world.queue_results(
        [[f"row-{i:04d}", "x" * 1000] for i in range(OFFLOAD_ROWS)], [("k", "varchar"), ("v", "varchar")]
    )
    outcome = world.invoke_refresh(job, {"scheduled_time": offload, "job": job}, "offload")
    assert outcome["status"] == "succeeded", outcome
    # The winner dies right after starting its query (its lease still held); a successor takes over after the
    # lease and adopts the query instead of starting a second one.
    start = Slot.parse(takeover).epoch_ms + 2_000
    world.lock_clock.set(start)
    world.keep_queries_running(2)
    crashed = world.invoke_refresh(job, {"scheduled_time": takeover, "job": job}, "crash", crash_at="query_started")
    assert crashed == {"outcome": "crashed"}
    world.finish_queries_at_once()
    world.lock_clock.set(start + 120_000)
    outcome = world.invoke_refresh(job, {"scheduled_time": takeover, "job": job}, "takeover")
    assert outcome["status"] == "succeeded", outcome
    successor = [c.operation for c in world.recorder.of(refresh_principal(job)) if c.scenario == "takeover"]
    assert "GetQueryExecution" in successor and "StartQueryExecution" not in successor, successor
    # A delivery while the job is paused (paused by the test's own set-up, not recorded): its racer records the
    # slot MISSED "paused" with one conditional PutItem.
    own = ["--lock-table", world.lock_table, "--results-table", world.results_table, "--function", f"{job}=x"]
    assert run_cli(ops_main, [*own, "pause", "--job", job, "--reason", "set-up", "--yes"])[0] == 0
    world.lock_clock.set(Slot.parse(paused).epoch_ms + 2_000)
    outcome = world.invoke_refresh(job, {"scheduled_time": paused, "job": job}, "paused")
    assert (outcome["status"], outcome["reason"]) == ("missed", "paused"), outcome
    assert run_cli(ops_main, [*own, "resume", "--job", job, "--yes"])[0] == 0


def _operator_scenarios(world: ConformanceWorld, job: str, stack_name: str, slots: list[str]) -> None:
    """``tools.ops`` and ``tools.results`` as an operator runs them against the stack (outputs read from it)."""
    from tools.ops.cli import main as ops_main
    from tools.results.cli import main as results_main

    stack = ["--stack", stack_name, "--region", "us-east-1"]
    commands: list[list[str]] = [
        ["status"],
        ["history", "--job", job],
        ["pause", "--job", job, "--reason", "conformance", "--yes"],
        ["resume", "--job", job, "--yes"],
        ["release", "--job", job, "--reason", "conformance", "--yes"],
        # The current slot through the live path, like any racer: MISSED (exit 1) when it is older than the
        # job's max slot age (a daily job), SUCCEEDED otherwise; either way the function ran.
        ["run", "--job", job, "--reason", "conformance", "--yes", "--wait-s", "30"],
        ["run", "--job", job, "--slot", slots[2], "--reason", "conformance", "--yes", "--wait-s", "30"],
        ["rerun", "--job", job, "--slot", slots[-2], "--reason", "conformance", "--yes", "--wait-s", "30"],
        ["backfill", "--job", job, "--from", slots[0], "--to", slots[1], "--only", "all", "--yes", "--wait-s", "30"],
        ["release", "--job", job, "--reason", "conformance", "--force", "--yes"],
        ["release", "--job", job, "--reason", "conformance", "--manual", "--force", "--yes"],
    ]
    with world.recorder.acting_as(OPERATOR, "tools.ops"):
        for command in commands:
            code, output = run_cli(ops_main, [*stack, *command])
            assert code == 0 or (code == 1 and command[0] == "run" and "MISSED" in output), (command, output)
    with world.recorder.acting_as(OPERATOR, "tools.results"):
        offloaded = slots[-3]
        for command in (
            ["jobs"],
            ["latest", "--job", job],
            ["slot", "--job", job, "--slot", offloaded],
            ["slot", "--job", job, "--slot", offloaded, "--generation", "1"],
            ["history", "--job", job],
        ):
            code, output = run_cli(results_main, [*stack, *command, "--format", "json"])
            assert code == 0, (command, output)


def _read_scenarios(world: ConformanceWorld, slots: dict[str, list[str]]) -> None:
    """Every route of the read API (an offloaded result: a presigned GetObject), the widget of each job and the
    widget's overview of every job."""
    for job in sorted(world.refresh_functions):
        offload = slots[job][-3]
        for path, query in (
            ("/jobs", ""),
            (f"/jobs/{job}/results/latest", ""),
            (f"/jobs/{job}/results/{offload}", ""),
            (f"/jobs/{job}/results/{offload}", "generation=1"),
            (f"/jobs/{job}/slots", "limit=5"),
            ("/openapi.json", ""),
        ):
            response = world.invoke_read(READ_API, _api_event(path, query))
            assert response["statusCode"] in (200, 302), (path, response)
        html = world.invoke_read(WIDGET, {"job": job, "widgetContext": {"width": 600, "height": 400}})
        assert "slot <b>" in html, html[:300]
    # CloudWatch merges the widget's params into the event: {"view": "overview"} draws every job in one table.
    overview = world.invoke_read(
        WIDGET, {"view": "overview", "widgetContext": {"width": 1200, "height": 400}}, "overview"
    )
    assert f"<b>{len(world.refresh_functions)}</b> jobs" in overview, overview[:500]
    for job in world.refresh_functions:
        assert job in overview, (job, overview[:500])
    # each row's freshness (its slot items read by BatchGetItem under the read role): a state, late yes or no
    assert overview.count(" &middot; late: ") == len(world.refresh_functions), overview[:1000]
    # GET /jobs says each job's freshness from the same reads
    jobs = json.loads(world.invoke_read(READ_API, _api_event("/jobs", ""))["body"])["jobs"]
    assert all(job["freshness"]["state"] is not None for job in jobs), jobs


def _watchdog_scenarios(world: ConformanceWorld) -> None:
    """The freshness watchdog over four of its slots a < b < c < d: a's two racers (one wins: every job's lock and
    slot items read, each job's state recorded); before b and c a job's recorded state is changed by hand (set-up)
    so that the run has a change to publish, while the topic is gone: the run fails after its conditional write.
    b is retried by Lambda (the same request id: the lock re-enters the slot with a consistent read of the slot item)
    and publishes; c is not, and d's winner records c MISSED superseded and publishes c's pending change (at least
    once), and pushes back the TTL of a state item that had none (set-up). Then an operator pauses the watchdog's own
    lock (set-up): e's racer records e MISSED paused (PutItem)."""
    schedule = world.resolved.resolve(
        next(
            r["Properties"]
            for r in world.resolved.of_type("AWS::Scheduler::Schedule").values()
            if world.watchdog_function in json.dumps(r["Properties"]["Target"])
        )
    )
    a, b, c, d, e = (
        f.strftime("%Y-%m-%dT%H:%M:%SZ")
        for f in latest_firings(schedule["ScheduleExpression"], "UTC", dt.datetime.now(dt.UTC), 5)
    )
    for racer in range(2):
        outcome = world.invoke_watchdog({"scheduled_time": a, "racer": racer}, "watchdog")
        assert outcome["status"] in ("succeeded", "lost"), outcome
    sns = boto3.client("sns", region_name="us-east-1")
    topic_arn = world.resolved.function_environment(world.watchdog_function)[contract.ENV_ALARM_TOPIC_ARN]

    def change_a_state_and_lose_the_topic() -> None:
        boto3.client("dynamodb", region_name="us-east-1").update_item(
            TableName=world.lock_table,
            Key={"pk": {"S": watch_key(min(world.refresh_functions))}},
            UpdateExpression="SET #state = :paused",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={":paused": {"S": "paused"}},
        )
        sns.delete_topic(TopicArn=topic_arn)

    for slot, request_id in ((b, "wd-retry"), (c, None)):
        change_a_state_and_lose_the_topic()
        with pytest.raises(ClientError):
            world.invoke_watchdog({"scheduled_time": slot, "racer": 0}, "watchdog-change", request_id=request_id)
        sns.create_topic(Name=topic_arn.rsplit(":", 1)[1])
        if request_id is not None:
            outcome = world.invoke_watchdog(
                {"scheduled_time": slot, "racer": 0}, "watchdog-retry", request_id=request_id
            )
            assert outcome["status"] == "succeeded" and outcome["reentered"], outcome
            assert outcome["value"]["notified"] >= 1, outcome
    # A state item written before it carried a TTL (set-up: the attribute removed): d's run gives it one.
    aged = watch_key(max(world.refresh_functions))
    boto3.client("dynamodb", region_name="us-east-1").update_item(
        TableName=world.lock_table, Key={"pk": {"S": aged}}, UpdateExpression=f"REMOVE {table.TTL_ATTRIBUTE}"
    )
    outcome = world.invoke_watchdog({"scheduled_time": d, "racer": 0}, "watchdog-next")
    assert outcome["status"] == "succeeded" and outcome["superseded_recorded"], outcome
    assert outcome["value"]["notified"] >= 1, outcome
    kept_alive = [
        call.params["Key"]["pk"]["S"]
        for call in world.recorder.of(WATCHDOG)
        if call.scenario == "watchdog-next"
        and call.operation == "UpdateItem"
        and call.params.get("ExpressionAttributeNames", {}).get("#name") == table.TTL_ATTRIBUTE
    ]
    assert kept_alive == [aged], kept_alive
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    pause(SlotLock(world.lock_table, contract.WATCHDOG_JOB_NAME, client=ddb), reason="set-up", requested_by="test")
    outcome = world.invoke_watchdog({"scheduled_time": e, "racer": 0}, "watchdog-paused")
    assert (outcome["status"], outcome["reason"]) == ("missed", "paused"), outcome


def _api_event(path: str, query: str) -> dict[str, Any]:
    """A payload 2.0 ``GET`` event as API Gateway's HTTP API sends it."""
    parameters = dict(part.split("=", 1) for part in query.split("&") if part)
    http = {"method": "GET", "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "t"}
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": {},
        "queryStringParameters": parameters or None,
        "requestContext": {"http": http, "requestId": "r", "routeKey": "$default", "stage": "$default"},
        "isBase64Encoded": False,
    }


# ---------------------------------------------------------------------------------------------------
# the principals and their policies
# ---------------------------------------------------------------------------------------------------
def _principal_policies(world: ConformanceWorld, principal: str) -> list[dict[str, Any]]:
    resolved = world.resolved
    if principal == OPERATOR:
        return [json.loads(resolved.substitute(OPERATOR_POLICY.read_text(encoding="utf-8"), resolved.outputs()))]
    if principal in (READ_API, WIDGET):
        return resolved.role_policies(resolved.function_role(world.read_functions[principal]))
    if principal == WATCHDOG:
        return resolved.role_policies(resolved.function_role(world.watchdog_function))
    job = principal.split(":", 1)[1]
    return resolved.role_policies(resolved.function_role(world.refresh_functions[job]))


def _needed(world: ConformanceWorld, recorder: CallRecorder, principals: set[str]) -> list[tuple[str, Permission]]:
    return [
        (call.principal, permission)
        for call in recorder.calls
        if call.principal in principals
        for permission in permissions_for(call, world.athena)
    ]


def _principals(world: ConformanceWorld) -> list[str]:
    return [*(refresh_principal(job) for job in sorted(world.refresh_functions)), READ_API, WIDGET, OPERATOR, WATCHDOG]


#: What each principal's scenarios must have called (so a scenario that silently stopped running fails).
EXPECTED_OPERATIONS = {
    "refresh": {
        ("dynamodb", "UpdateItem"),
        ("dynamodb", "GetItem"),
        ("dynamodb", "TransactWriteItems"),
        ("dynamodb", "BatchGetItem"),
        ("scheduler", "CreateSchedule"),
        ("athena", "StartQueryExecution"),
        ("athena", "GetQueryExecution"),
        ("athena", "GetQueryResults"),
        ("s3", "PutObject"),
    },
    READ_API: {("dynamodb", "BatchGetItem"), ("dynamodb", "GetItem"), ("dynamodb", "Query"), ("s3", "GetObject")},
    WIDGET: {("dynamodb", "GetItem"), ("dynamodb", "BatchGetItem")},
    WATCHDOG: {
        ("dynamodb", "BatchGetItem"),
        ("dynamodb", "UpdateItem"),
        ("dynamodb", "TransactWriteItems"),
        ("sns", "Publish"),
    },
    OPERATOR: {
        ("dynamodb", "UpdateItem"),
        ("dynamodb", "GetItem"),
        ("lambda", "Invoke"),
        ("cloudformation", "DescribeStacks"),
        ("ssm", "GetParametersByPath"),
    },
}


def test_every_scenario_made_its_calls(recorded: tuple[ConformanceWorld, CallRecorder]) -> None:
    world, recorder = recorded
    for principal in _principals(world):
        made = {(call.service, call.operation) for call in recorder.of(principal)}
        expected = EXPECTED_OPERATIONS[principal.split(":", 1)[0] if principal.startswith("refresh:") else principal]
        assert expected <= made, f"{principal} never made {sorted(expected - made)}; it made {sorted(made)}"
    for job in world.refresh_functions:
        renewals = [
            call
            for call in recorder.of(refresh_principal(job))
            if call.scenario == "live" and call.params.get("UpdateExpression") == LEASE_EXPIRY_UPDATE
        ]
        assert renewals, f"{job}: the live scenario renewed no lease (heartbeat)"


def test_the_capacity_scenarios_took_a_permit_and_deferred(recorded: tuple[ConformanceWorld, CallRecorder]) -> None:
    """Each job's live winner took a permit and released it in its commit; its waiter created one deferral schedule
    invoking its own function with its Scheduler role."""
    world, _ = recorded
    for job in world.refresh_functions:
        calls = capacity.principal_calls(world, job)
        capacity.assert_permit_taken_and_released(world, job, calls)
        capacity.assert_deferral_schedule(world, job, calls)


def test_every_recorded_call_is_allowed(recorded: tuple[ConformanceWorld, CallRecorder]) -> None:
    world, recorder = recorded
    denied: list[str] = []
    for principal in _principals(world):
        documents = _principal_policies(world, principal)
        seen: set[Permission] = set()
        for _, permission in _needed(world, recorder, {principal}):
            if permission in seen:
                continue
            seen.add(permission)
            verdict = evaluate(permission, documents)
            if not verdict.allowed:
                denied.append(f"{principal}: {permission.describe()}: {verdict.detail}")
    assert not denied, "denied on AWS (add the grant, or stop making the call):\n" + "\n".join(sorted(denied))


#: Operator grants no recorded call exercises, each with its reason.
UNRECORDED_OPERATOR_GRANTS = {
    "execute-api:Invoke": "`tools.results --api` reads through the deployed read API with SigV4-signed HTTP requests"
    " (botocore's SigV4Auth over urllib, not a botocore API call the recorder sees); the routes are GET only.",
}


def _exempt_grants(principal: str) -> dict[str, str]:
    if principal == OPERATOR:
        return dict(UNRECORDED_OPERATOR_GRANTS)
    if principal in (READ_API, WIDGET):
        return dict(read_api.PLATFORM_GRANTS)
    return dict(refresh_function.PLATFORM_GRANTS)


def test_every_grant_is_used(recorded: tuple[ConformanceWorld, CallRecorder]) -> None:
    """Least privilege the other way: a granted action no recorded call needed fails, unless the construct
    that grants it names it with a reason (the Lambda service or Athena uses it, not our code)."""
    world, recorder = recorded
    groups = {OPERATOR: {OPERATOR}, READ_API: {READ_API, WIDGET}, WATCHDOG: {WATCHDOG}}
    groups.update({p: {p} for p in _principals(world) if p.startswith("refresh:")})
    unused: list[str] = []
    for principal, members in groups.items():
        used = [permission for _, permission in _needed(world, recorder, members)]
        exempt = _exempt_grants(principal)
        for sid, action, resource in grants(_principal_policies(world, principal)):
            if action in exempt:
                continue
            if not grant_used((sid, action, resource), used):
                unused.append(f"{principal}: {sid or '(no Sid)'} grants {action} on {resource}, which no call used")
    assert not unused, "granted but never used (remove it, or name it with a reason):\n" + "\n".join(unused)


def test_exemptions_have_reasons() -> None:
    for grants_ in (
        refresh_function.PLATFORM_GRANTS,
        read_api.PLATFORM_GRANTS,
        UNRECORDED_OPERATOR_GRANTS,
    ):
        for action, reason in grants_.items():
            assert ":" in action and len(reason) > 30, (action, reason)


def test_the_offloaded_result_was_read_through_a_presigned_url(recorded: tuple[ConformanceWorld, CallRecorder]) -> None:
    _, recorder = recorded
    presigned = [call for call in recorder.of(READ_API) if call.presigned]
    assert presigned and all(call.params["Key"].startswith("results/") for call in presigned), presigned


def test_job_functions_are_named_after_their_job_stack(recorded: tuple[ConformanceWorld, CallRecorder]) -> None:
    """Each job function's generated name starts with its own job stack's (the operator's ``RunJobs`` grant,
    ``function:<stack>-Jobs-*``, relies on it), and its registry entry, named by that stack's group, names that function
    and stack."""
    from athena_refresh.registry import parameter_name, parse_entry, registry_path

    world, _ = recorded
    resolved = world.resolved
    parameters = resolved.parameters()
    for job, function_id in world.refresh_functions.items():
        stack = resolved.stack(function_id)
        assert stack.startswith(f"{resolved.stack_name}-Jobs-"), (job, stack)
        assert resolved.name(function_id).startswith(f"{stack}-"), resolved.name(function_id)
        path = registry_path(resolved.stack_name)
        name = parameter_name(path, job, int(stack.rsplit("-", 1)[-1]))
        entry = parse_entry(parameters[name][1], name=name, path=path)
        assert (entry.function_name, entry.stack) == (resolved.name(function_id), stack), entry


def test_operations_md_shows_the_policy_the_test_reads() -> None:
    """docs/operations.md shows the operator's policy verbatim: the file this test evaluates."""
    shown = (REPO_ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    assert f"```json\n{OPERATOR_POLICY.read_text(encoding='utf-8').rstrip()}\n```" in shown


# ---------------------------------------------------------------------------------------------------
# the checker itself: a negative control
# ---------------------------------------------------------------------------------------------------
def _document(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def test_the_checker_denies_the_deferral_without_its_pass_role(recorded: tuple[ConformanceWorld, CallRecorder]) -> None:
    """The waiter's recorded CreateSchedule, against its job's policies without the PassRole statement: the schedule
    is still allowed, passing its role is DENIED; and PassRole to another service than the Scheduler is too."""
    world, recorder = recorded
    for job in world.refresh_functions:
        (call,) = [c for c in recorder.of(refresh_principal(job)) if c.operation == "CreateSchedule"]
        create, pass_role = permissions_for(call, world.athena)
        assert (create.action, pass_role.action) == ("scheduler:CreateSchedule", "iam:PassRole")
        documents = _principal_policies(world, refresh_principal(job))
        assert evaluate(create, documents).allowed and evaluate(pass_role, documents).allowed
        without = [{**d, "Statement": [s for s in _as_list(d["Statement"]) if not _passes_roles(s)]} for d in documents]
        assert evaluate(create, without).allowed
        denied = evaluate(pass_role, without)
        role = call.params["Target"]["RoleArn"]
        assert not denied.allowed and f"missing: a statement allowing iam:PassRole on {role}" == denied.detail
        to_lambda = (("iam:PassedToService", "lambda.amazonaws.com"),)
        verdict = evaluate(Permission(pass_role.action, role, "another service", to_lambda), documents)
        assert not verdict.allowed and "iam:PassedToService" in verdict.detail, verdict


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _passes_roles(statement: dict[str, Any]) -> bool:
    return "iam:PassRole" in _as_list(statement.get("Action", []))


def test_the_checker_reports_todays_missing_results_table_read() -> None:
    """The grant of issue 21 (PutItem/UpdateItem only on the results table) denies the manual path's GetItem."""
    table = "arn:aws:dynamodb:us-east-1:123456789012:table/results"
    before = _document({"Effect": "Allow", "Action": ["dynamodb:PutItem", "dynamodb:UpdateItem"], "Resource": table})
    needed = Permission("dynamodb:GetItem", table, "dynamodb.GetItem (manual run)")
    verdict = evaluate(needed, [before])
    assert not verdict.allowed and "dynamodb:GetItem" in verdict.detail and table in verdict.detail
    after = _document({"Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:PutItem"], "Resource": table})
    assert evaluate(needed, [after]).allowed


def test_the_checker_evaluates_the_list_prefix_condition_itself() -> None:
    bucket = "arn:aws:s3:::b"
    listing = _document(
        {
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": bucket,
            "Condition": {"StringLike": {"s3:prefix": ["data/flights/*"]}},
        }
    )
    inside = Permission("s3:ListBucket", bucket, "list", (("s3:prefix", "data/flights/dt=2013-01-01/"),))
    outside = Permission("s3:ListBucket", bucket, "list", (("s3:prefix", "results/"),))
    assert evaluate(inside, [listing]).allowed
    assert not evaluate(outside, [listing]).allowed
    denied = _document(listing["Statement"][0], {"Effect": "Deny", "Action": "s3:*", "Resource": "*"})
    assert not evaluate(inside, [denied]).allowed


def test_the_checker_reports_an_unused_grant() -> None:
    used = [Permission("dynamodb:GetItem", "arn:aws:dynamodb:us-east-1:123456789012:table/t", "get")]
    table = "arn:aws:dynamodb:us-east-1:123456789012:table/t"
    assert grant_used(("S", "dynamodb:GetItem", table), used)
    assert not grant_used(("S", "dynamodb:DeleteItem", table), used)
    assert not grant_used(("S", "dynamodb:GetItem", f"{table}/index/history"), used)


def test_the_checker_authorizes_a_registry_listing_on_the_path_itself() -> None:
    """``GetParametersByPath`` is authorized on the requested path (trailing slash dropped), which a grant on the
    path's children does not cover (one job's path is a child); ``GetParameter`` on the parameter, which a grant on the
    path does not."""
    registry = "arn:aws:ssm:us-east-1:123456789012:parameter/S/jobs"
    nowhere = AthenaWorld({}, {})
    listing = RecordedCall("operator", "t", "ssm", "GetParametersByPath", "us-east-1", {"Path": "/S/jobs/"})
    one = RecordedCall("operator", "t", "ssm", "GetParameter", "us-east-1", {"Name": "/S/jobs/a"})
    (list_permission,) = permissions_for(listing, nowhere)
    (get_permission,) = permissions_for(one, nowhere)
    assert (list_permission.resource, get_permission.resource) == (registry, f"{registry}/a")
    actions = ["ssm:GetParameter", "ssm:GetParametersByPath"]
    children = _document({"Effect": "Allow", "Action": actions, "Resource": f"{registry}/*"})
    path = _document({"Effect": "Allow", "Action": actions, "Resource": registry})
    assert not evaluate(list_permission, [children]).allowed
    assert evaluate(list_permission, [path]).allowed
    assert evaluate(get_permission, [children]).allowed
    assert not evaluate(get_permission, [path]).allowed
    # one job's entries (<path><job>/<group>): a listing of the job's own path, which the grant on the children covers
    (job_permission,) = permissions_for(
        RecordedCall("operator", "t", "ssm", "GetParametersByPath", "us-east-1", {"Path": "/S/jobs/a/"}), nowhere
    )
    assert job_permission.resource == f"{registry}/a"
    assert evaluate(job_permission, [children]).allowed and not evaluate(job_permission, [path]).allowed
