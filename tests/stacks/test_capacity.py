"""The Athena capacity budget (issue 24) in the stacks (cdk.json ``context.stack.capacity`` validated at synth:
tests/stacks/test_capacity_settings.py): its numbers in every job's catalog (the ``capacity`` section) and the same
wiring, ``contract.CAPACITY_ENV_VARS``, in every job function's environment (none of its numbers there), the
semaphore's read and the deferral's least-privilege grants (none while the budget is off, none for the read side),
and the dashboard's one "Athena capacity" graph.

The sample deployment (``template``: every stack merged, cross-stack references read as local ones) runs with
cdk.json's budget (10 permits, the default semaphore name); one more synthesis has the budget off and a semaphore
name of its own, and one (``shared_budget_deployment``, shared with the IAM conformance test) shares another
deployment's budget: its lock table and its workgroups' queries.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Capture, Match, Template

import app
from athena_refresh import contract
from athena_refresh.budget import CapacityBudget
from athena_refresh.catalog import CATALOG_FILE, load_job
from stacks import REPO_ROOT
from stacks.constructs.capacity import (
    MAX_DEFERRAL_SCHEDULE_PREFIX,
    SCHEDULE_NAME,
    deferral_schedule_prefix,
)
from stacks.constructs.dashboard import CAPACITY_TITLE
from stacks.stack_settings import STACK_KEY, StackSettings, load_context
from tests.stacks import deployment_view
from tests.stacks.helpers import HANDLER, SHARED_BUDGET, as_list, dashboard_body, of_type

ACCOUNT_REGION = {"Fn::Join": ["", [{"Ref": "AWS::AccountId"}, "-", {"Ref": "AWS::Region"}]]}
OFF_SEMAPHORE = "team-a:athena.budget"  # a name of the off deployment's own (letters, digits, '-', '_', '.', ':')


def _capacity_sections(deployment: Any) -> dict[str, Any]:
    """Job name -> the ``capacity`` section of the catalog in its own function's asset."""
    sections = {}
    for job_stack in deployment.job_stacks.values():
        for name, asset_dir in job_stack.asset_dirs.items():
            sections[name] = json.loads((asset_dir / CATALOG_FILE).read_text(encoding="utf-8"))["capacity"]
    return sections


def _job_functions(resources: dict[str, Any]) -> dict[str, str]:
    """Job name -> logical id of its refresh function."""
    return {
        res["Properties"]["Environment"]["Variables"][contract.ENV_JOB_NAME]: logical_id
        for logical_id, res in of_type(resources, "AWS::Lambda::Function").items()
        if res["Properties"].get("Handler") == HANDLER
    }


def _role_statements(resources: dict[str, Any], role_id: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in of_type(resources, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _statements_with_sid(resources: dict[str, Any], sid: str) -> list[tuple[list[Any], dict[str, Any]]]:
    """(the policy's roles, the statement) of every statement named ``sid``."""
    return [
        (policy["Properties"]["Roles"], statement)
        for policy in of_type(resources, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Sid") == sid
    ]


# --- the deferral's schedule names ---------------------------------------------------------------------------


def test_the_deferral_prefix_is_short_deterministic_and_per_deployment_and_job() -> None:
    prefix = deferral_schedule_prefix("ScheduledAthenaRefresh", "flights-dashboard")
    assert prefix == "sar-060c8c76e094-" == deferral_schedule_prefix("ScheduledAthenaRefresh", "flights-dashboard")
    assert re.fullmatch(r"sar-[0-9a-f]{12}-", prefix) and len(prefix) <= MAX_DEFERRAL_SCHEDULE_PREFIX == 24
    assert SCHEDULE_NAME.fullmatch(prefix + "x" * (64 - len(prefix)))  # the runtime has 47 characters left
    others = {
        deferral_schedule_prefix("ScheduledAthenaRefresh", "carrier-on-time"),
        deferral_schedule_prefix("Staging", "flights-dashboard"),
        deferral_schedule_prefix("ScheduledAthenaRefresh", "x" * 64),
    }
    assert prefix not in others and len(others) == 3


# --- the environment ---------------------------------------------------------------------------------------


def test_every_job_function_carries_the_budget_and_its_own_deferral(
    template: Template, resources: dict[str, Any], deployment: Any
) -> None:
    functions = _job_functions(resources)
    assert sorted(functions) == ["carrier-on-time", "flights-dashboard"]
    sections = _capacity_sections(deployment)
    for job, function_id in functions.items():
        # GIVEN the job's catalog / THEN it holds the deployment's budget as typed JSON, which loads back as it is
        assert sections[job] == {
            "permits": 10,
            "wait_in_place_s": 60.0,
            "manual_headroom": 2,
            "retry_delay_s": 120.0,
            "max_query_active_s": 1800.0,
        }
        assert CapacityBudget.from_raw(sections[job]) == StackSettings().capacity.budget
        # GIVEN the job's function / THEN every capacity wiring variable, its own deferral, and none of the numbers
        role = Capture()
        template.has_resource_properties(
            "AWS::Lambda::Function",
            {
                "Handler": HANDLER,
                "Environment": {
                    "Variables": Match.object_like(
                        {
                            contract.ENV_JOB_NAME: job,
                            contract.ENV_CAPACITY_SEMAPHORE_NAME: ACCOUNT_REGION,
                            **{name: Match.absent() for name in contract.CAPACITY_SETTING_ENV_VARS},
                            contract.ENV_DEFERRAL_ROLE_ARN: {"Fn::GetAtt": [role, "Arn"]},
                            contract.ENV_DEFERRAL_SCHEDULE_GROUP: "default",
                            contract.ENV_DEFERRAL_SCHEDULE_PREFIX: deferral_schedule_prefix(app.STACK_NAME, job),
                        }
                    )
                },
            },
        )
        env = resources[function_id]["Properties"]["Environment"]["Variables"]
        assert set(contract.CAPACITY_ENV_VARS) <= set(env)
        assert not set(contract.CAPACITY_SETTING_ENV_VARS) & set(env)
        # THEN the deferral's role is the one the job's racers use, which may invoke this function only
        racers = of_type(resources, "AWS::Scheduler::Schedule")
        targets = [s["Properties"]["Target"] for s in racers.values()]
        mine = [target for target in targets if target["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}]
        assert mine and all(target["RoleArn"] == {"Fn::GetAtt": [role.as_string(), "Arn"]} for target in mine)
        statements = _role_statements(resources, role.as_string())
        assert {action for s in statements for action in as_list(s["Action"])} == {"lambda:InvokeFunction"}
        invoked = set(re.findall(r'"Fn::GetAtt": \["([A-Za-z0-9]+)", "Arn"\]', json.dumps(statements)))
        assert invoked == {function_id}


# --- IAM ---------------------------------------------------------------------------------------------------


def test_each_job_role_gets_exactly_the_semaphore_read_and_its_own_deferral(
    template: Template, resources: dict[str, Any]
) -> None:
    lock_arn = {"Fn::GetAtt": [Match.string_like_regexp(r"^LockTable[0-9A-F]{8}$"), "Arn"]}
    for job, function_id in _job_functions(resources).items():
        props = resources[function_id]["Properties"]
        role_id = props["Role"]["Fn::GetAtt"][0]
        scheduler_role = props["Environment"]["Variables"][contract.ENV_DEFERRAL_ROLE_ARN]
        prefix = deferral_schedule_prefix(app.STACK_NAME, job)
        expected = [
            {
                "Sid": "LockTableItems",
                "Effect": "Allow",
                "Action": ["dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
                "Resource": lock_arn,
            },
            {
                "Sid": "CapacityDeferralSchedules",
                "Effect": "Allow",
                "Action": "scheduler:CreateSchedule",
                "Resource": {
                    "Fn::Join": [
                        "",
                        [
                            "arn:",
                            {"Ref": "AWS::Partition"},
                            ":scheduler:",
                            {"Ref": "AWS::Region"},
                            ":",
                            {"Ref": "AWS::AccountId"},
                            f":schedule/default/{prefix}*",
                        ],
                    ]
                },
            },
            {
                "Sid": "CapacityDeferralPassRole",
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": scheduler_role,
                "Condition": {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            },
        ]
        template.has_resource_properties(
            "AWS::IAM::Policy",
            {
                "Roles": [{"Ref": role_id}],
                "PolicyDocument": {"Statement": Match.array_with([Match.object_equals(s) for s in expected])},
            },
        )


def test_no_role_may_delete_schedules_and_only_job_functions_create_or_pass(resources: dict[str, Any]) -> None:
    job_roles = {resources[f]["Properties"]["Role"]["Fn::GetAtt"][0] for f in _job_functions(resources).values()}
    for logical_id, policy in of_type(resources, "AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = set(as_list(statement["Action"]))
            assert not any(a.startswith("scheduler:") and a != "scheduler:CreateSchedule" for a in actions), logical_id
            if actions & {"scheduler:CreateSchedule", "iam:PassRole"}:
                assert len(actions) == 1, (logical_id, actions)
                assert {role["Ref"] for role in policy["Properties"]["Roles"]} <= job_roles, logical_id
            if "iam:PassRole" in actions:
                assert statement["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}


def test_the_shared_stack_and_its_read_side_get_none_of_it(
    stack_templates: dict[str, dict[str, Any]], resources: dict[str, Any]
) -> None:
    shared = stack_templates[app.STACK_NAME]["Resources"]
    for policy in of_type(shared, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = set(as_list(statement["Action"]))
            assert not actions & {"scheduler:CreateSchedule", "iam:PassRole"}, statement
            if statement.get("Sid") == "ReadLockItems":  # the read side's BatchGetItem of the lock items, as before
                assert actions == {"dynamodb:BatchGetItem"}
    # Nor does any function of the shared stack carry the budget (the read side never takes a permit).
    for function in of_type(shared, "AWS::Lambda::Function").values():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        assert not set(variables) & set(contract.CAPACITY_ENV_VARS)


# --- the dashboard -----------------------------------------------------------------------------------------


def test_the_dashboard_draws_the_capacity_graph_once(resources: dict[str, Any]) -> None:
    body = dashboard_body(resources, None)
    (graph,) = [w for w in body["widgets"] if w["properties"].get("title", "").startswith("Athena capacity")]
    props = graph["properties"]
    assert props["title"] == CAPACITY_TITLE
    service = [contract.DIMENSION_SERVICE, contract.SERVICE_NAME]  # service only: one series for every job
    in_use, wait = contract.METRIC_PERMITS_IN_USE, contract.METRIC_PERMIT_WAIT_MS
    assert props["metrics"] == [
        [contract.METRICS_NAMESPACE, in_use, *service, {"label": f"{in_use} Maximum", "stat": "Maximum"}],
        *(
            [contract.METRICS_NAMESPACE, wait, *service, {"label": f"{wait} {stat}", "stat": stat, "yAxis": "right"}]
            for stat in ("p50", "p95")
        ),
    ]
    # The configured permits as a line on the permits' axis.
    assert props["annotations"] == {"horizontal": [{"value": 10, "label": "budget: 10 permits", "yAxis": "left"}]}
    assert (props["yAxis"]["left"]["label"], props["yAxis"]["right"]["label"]) == ("permits", "ms")


# --- the budget off, a semaphore name of its own ------------------------------------------------------------


@pytest.fixture(scope="module")
def off_deployment(sample_data_dir: Path, sample_jobs_dir: Path) -> Any:
    """The sample deployment with ``capacity = {permits: 0, semaphore_name: OFF_SEMAPHORE}`` (and the other
    deployments' ``shared_workgroups``, which grant nothing while the budget is off)."""
    context = load_context(REPO_ROOT / "cdk.json")
    capacity = {"permits": 0, "semaphore_name": OFF_SEMAPHORE, "shared_workgroups": SHARED_BUDGET["shared_workgroups"]}
    context[STACK_KEY] = {**context[STACK_KEY], "capacity": capacity}
    _, deployment = app.build_app(context=context, sample_data_dir=sample_data_dir, jobs_dir=sample_jobs_dir)
    return deployment


@pytest.fixture(scope="module")
def off(off_deployment: Any) -> dict[str, Any]:
    """:func:`off_deployment`'s stacks, merged."""
    return deployment_view.merged_template(deployment_view.stack_templates(off_deployment))


def test_off_still_sets_every_variable_but_grants_nothing(off: dict[str, Any], off_deployment: Any) -> None:
    resources = off["Resources"]
    functions = _job_functions(resources)
    assert len(functions) == 2
    sections = _capacity_sections(off_deployment)
    for job, function_id in functions.items():
        props = resources[function_id]["Properties"]
        env = props["Environment"]["Variables"]
        assert sections[job]["permits"] == 0  # the runtime reads it as off
        assert not load_job(job, off_deployment.stack_of(job).asset_dirs[job] / CATALOG_FILE)[1].enabled
        assert env[contract.ENV_CAPACITY_SEMAPHORE_NAME] == OFF_SEMAPHORE  # a name given is used as is
        assert env[contract.ENV_DEFERRAL_SCHEDULE_PREFIX] == deferral_schedule_prefix(app.STACK_NAME, job)
        assert set(contract.CAPACITY_ENV_VARS) <= set(env)
        statements = _role_statements(resources, props["Role"]["Fn::GetAtt"][0])
        actions = {action for s in statements for action in as_list(s["Action"])}
        assert "dynamodb:BatchGetItem" not in actions and not actions & {"scheduler:CreateSchedule", "iam:PassRole"}
        (lock,) = [s for s in statements if s.get("Sid") == "LockTableItems"]
        assert lock["Action"] == ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"]


def test_changing_the_budget_changes_every_jobs_asset_and_not_the_read_sides(
    deployment: Any, off_deployment: Any
) -> None:
    # GIVEN the sample deployment and the same deployment with the budget off / THEN every job's catalog (its asset)
    # differs by the capacity section alone, and the read side's asset (no capacity section) is the same
    for job, section in _capacity_sections(deployment).items():
        on_dir, off_dir = (d.stack_of(job).asset_dirs[job] for d in (deployment, off_deployment))
        on, off_ = (json.loads((d / CATALOG_FILE).read_text(encoding="utf-8")) for d in (on_dir, off_dir))
        assert on["jobs"] == off_["jobs"] and (section["permits"], off_["capacity"]["permits"]) == (10, 0)
        assert cdk.FileSystem.fingerprint(str(on_dir)) != cdk.FileSystem.fingerprint(str(off_dir))
    read_dirs = (deployment.shared.runtime_asset_dir, off_deployment.shared.runtime_asset_dir)
    assert all("capacity" not in json.loads((d / CATALOG_FILE).read_text(encoding="utf-8")) for d in read_dirs)
    assert len({cdk.FileSystem.fingerprint(str(d)) for d in read_dirs}) == 1


def test_off_keeps_the_graph_without_the_budget_line_and_the_widget_count(
    off: dict[str, Any], resources: dict[str, Any]
) -> None:
    body = dashboard_body(off["Resources"], None)
    assert len(body["widgets"]) == len(dashboard_body(resources, None)["widgets"]) == 13  # issue 35: + a log widget
    (graph,) = [w for w in body["widgets"] if w["properties"].get("title", "").startswith("Athena capacity")]
    assert graph["properties"]["title"] == f"{CAPACITY_TITLE} (budget off: permits 0)"
    assert "annotations" not in graph["properties"]


# --- one budget for several deployments: another deployment's lock table ----------------------------------


@pytest.fixture(scope="module")
def shared_table(shared_budget_deployment: Any) -> dict[str, Any]:
    """The sample deployment with ``capacity.table_name`` naming another deployment's lock table (and
    ``shared_workgroups`` naming its workgroups: :data:`~tests.stacks.helpers.SHARED_BUDGET`), merged."""
    return deployment_view.merged_template(deployment_view.stack_templates(shared_budget_deployment))


def test_a_shared_table_is_named_to_every_function_and_granted_on_that_table_only(
    shared_table: dict[str, Any], resources: dict[str, Any]
) -> None:
    # GIVEN capacity.table_name = another deployment's lock table
    found = shared_table["Resources"]
    functions = _job_functions(found)
    assert functions
    for function_id in functions.values():
        # THEN every job function takes its permits there
        env = found[function_id]["Properties"]["Environment"]["Variables"]
        assert env[contract.ENV_CAPACITY_TABLE_NAME] == "other-deployment-locks"
    # AND each job role may read and write that table's items (the semaphore's calls), and that table only
    shared = [statement for _, statement in _statements_with_sid(found, "SharedCapacityTableItems")]
    assert len(shared) == len(functions)
    for statement in shared:
        assert sorted(as_list(statement["Action"])) == [
            "dynamodb:BatchGetItem",
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
        ]
        assert "table/other-deployment-locks" in json.dumps(statement["Resource"])
        assert "*" not in json.dumps(statement["Resource"])
    # AND by default the permits live in this deployment's lock table (no such statement)
    assert _statements_with_sid(resources, "SharedCapacityTableItems") == []


def _workgroup_arn(name: str) -> dict[str, Any]:
    """A workgroup's ARN in the stack's own account and Region, as the template writes it."""
    parts = ["arn:", {"Ref": "AWS::Partition"}, ":athena:", {"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"}]
    return {"Fn::Join": ["", [*parts, f":workgroup/{name}"]]}


def test_shared_workgroups_let_each_job_role_read_their_query_executions_only(
    shared_table: dict[str, Any], resources: dict[str, Any], off: dict[str, Any]
) -> None:
    # GIVEN capacity.shared_workgroups naming the other deployments' workgroups
    found = shared_table["Resources"]
    functions = _job_functions(found)
    roles = {found[f]["Properties"]["Role"]["Fn::GetAtt"][0] for f in functions.values()}
    statements = _statements_with_sid(found, "SharedCapacityQueryStatus")
    # THEN each job role has one statement allowing GetQueryExecution only (no Start, no GetQueryResults) on exactly
    # those workgroups, in the stack's own account and Region
    assert sorted(role["Ref"] for policy_roles, _ in statements for role in policy_roles) == sorted(roles)
    for _, statement in statements:
        assert statement == {
            "Sid": "SharedCapacityQueryStatus",
            "Effect": "Allow",
            "Action": "athena:GetQueryExecution",
            "Resource": [_workgroup_arn(name) for name in SHARED_BUDGET["shared_workgroups"]],
        }
    # AND no other statement of any role names those workgroups (the read side and the shared stack get nothing)
    every = [
        statement
        for policy in of_type(found, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    for name in SHARED_BUDGET["shared_workgroups"]:
        naming = [statement for statement in every if f":workgroup/{name}" in json.dumps(statement)]
        assert naming == [statement for _, statement in statements], name
    # AND without the setting (the default), or with the budget off, no role gets the statement
    assert _statements_with_sid(resources, "SharedCapacityQueryStatus") == []
    assert _statements_with_sid(off["Resources"], "SharedCapacityQueryStatus") == []
