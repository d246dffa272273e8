"""Upgrading a deployment of the one-stack layout in place (docs/operations.md, "Upgrading from one stack").

``tests/fixtures/upgrade/one-stack-before.json`` is the synthesized ``ScheduledAthenaRefresh`` template of the
layout before the job stacks (main a4ab5e5, the two sample jobs), reduced to each resource's type, names, key
schema and deletion policies. ``cdk deploy --all`` updates that stack into the shared stack first (every job stack
depends on it), then creates the job stacks. These tests check what CloudFormation would do with that update:
the stateful resources keep their logical ids and replacement-relevant properties (no new, empty lock table: the
fencing counters and the history carry over), only job-scoped resources leave the stack, and no fixed physical
name is declared twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

from tests.stacks import deployment_view
from tests.stacks.helpers import PHYSICAL_NAME

BEFORE = Path(__file__).resolve().parents[1] / "fixtures" / "upgrade" / "one-stack-before.json"
#: Resource types that may leave the shared stack in the upgrade: each job's function and what served it alone,
#: and the per-job queues, alarms and dashboard sections that became deployment-wide. Nothing stateful but the
#: per-job failure queues (empty unless a slot failed: drain them before upgrading, docs/operations.md).
JOB_SCOPED_TYPES = {
    "AWS::Lambda::Function",
    "AWS::Lambda::EventInvokeConfig",
    "AWS::IAM::Role",
    "AWS::IAM::Policy",
    "AWS::Scheduler::Schedule",
    "AWS::CloudWatch::Alarm",
    "AWS::Logs::LogGroup",
    "AWS::SQS::Queue",
    "AWS::SQS::QueuePolicy",
}
#: Properties whose change replaces a DynamoDB table (a new, empty table) or an S3 bucket.
REPLACING_PROPERTIES = ("KeySchema", "AttributeDefinitions", "TableName", "BucketName")


@pytest.fixture(scope="module")
def before() -> dict[str, Any]:
    return dict(json.loads(BEFORE.read_text(encoding="utf-8"))["Resources"])


@pytest.fixture(scope="module")
def after(shared_template: Template) -> dict[str, Any]:
    return dict(shared_template.to_json()["Resources"])


def test_the_lock_and_results_tables_keep_their_logical_ids_and_keys(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    tables = {lid: r for lid, r in before.items() if r["Type"] == "AWS::DynamoDB::Table"}
    assert sorted(tables) == ["LockTableD8114E48", "ResultsTable7B2FF7F9"]  # pinned: a new id is a new table
    for logical_id, old in tables.items():
        new = after[logical_id]
        assert new["Type"] == old["Type"]
        for prop in REPLACING_PROPERTIES:
            assert new["Properties"].get(prop) == old["Properties"].get(prop), (logical_id, prop)
        assert (
            new["Properties"]["GlobalSecondaryIndexes" if "Lock" in logical_id else "KeySchema"]
            == old["Properties"]["GlobalSecondaryIndexes" if "Lock" in logical_id else "KeySchema"]
        )
        assert new.get("DeletionPolicy") == old.get("DeletionPolicy") == "Retain"


def test_every_shared_resource_stays_with_its_type_and_names(before: dict[str, Any], after: dict[str, Any]) -> None:
    for logical_id, old in before.items():
        if logical_id not in after:
            continue
        new = after[logical_id]
        assert new["Type"] == old["Type"], logical_id
        for prop, value in old.get("Properties", {}).items():
            if prop in REPLACING_PROPERTIES or (prop.endswith("Name") and isinstance(value, str)):
                assert new["Properties"].get(prop) == value, (logical_id, prop)


def test_only_job_scoped_resources_leave_the_shared_stack(before: dict[str, Any], after: dict[str, Any]) -> None:
    removed = {lid: r["Type"] for lid, r in before.items() if lid not in after}
    assert removed, "the jobs' resources move to the job stacks"
    assert {t for t in removed.values()} <= JOB_SCOPED_TYPES | {"AWS::CloudWatch::Dashboard"}, removed
    # Every removed job resource belonged to a job's construct (logical ids start with Job<name>), except the
    # one dashboard, which is replaced by the deployment's (a new logical id: CloudFormation creates it, then
    # deletes the old one: dashboards have no fixed name here).
    assert all(lid.startswith("Job") or t == "AWS::CloudWatch::Dashboard" for lid, t in removed.items()), removed
    stateful = {"AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::Glue::Database", "AWS::Glue::Table"}
    assert not stateful & set(removed.values())


def test_no_fixed_name_is_declared_twice_across_the_stacks(
    stack_templates: dict[str, dict[str, Any]], before: dict[str, Any]
) -> None:
    names: dict[tuple[str, str], str] = {}
    for stack_name, template in stack_templates.items():
        for logical_id, resource in template.get("Resources", {}).items():
            value = _physical_name(resource)
            if isinstance(value, str):
                key = (resource["Type"], value)
                assert key not in names, f"{key} in {names[key]} and {stack_name}/{logical_id}"
                names[key] = f"{stack_name}/{logical_id}"
    # A job stack declares no fixed name that the old stack held (the workgroup, the Glue database stay shared).
    old_names = {(r["Type"], _physical_name(r)) for r in before.values() if isinstance(_physical_name(r), str)}
    in_job_stacks = {key for key, where in names.items() if "-Jobs-" in where}
    assert not in_job_stacks & old_names
    assert ("AWS::Athena::WorkGroup", "athena-refresh") in names
    assert names[("AWS::Athena::WorkGroup", "athena-refresh")].startswith("ScheduledAthenaRefresh/")


def _physical_name(resource: dict[str, Any]) -> Any:
    props = resource.get("Properties", {})
    if resource["Type"] == "AWS::Glue::Database":
        return props.get("DatabaseInput", {}).get("Name")
    prop = PHYSICAL_NAME.get(resource["Type"])
    return props.get(prop) if prop else None


def test_cdk_deploy_all_updates_the_shared_stack_before_any_job_stack(deployment: Any) -> None:
    for stack in deployment.job_stacks.values():
        if stack.jobs:
            assert deployment.shared in stack.dependencies or [d.stack_name for d in stack.dependencies] == [
                deployment.shared.stack_name
            ]


def test_job_stacks_reference_the_shared_stack_weakly(stack_templates: dict[str, dict[str, Any]]) -> None:
    """CDK's weak references (``Fn::GetStackOutput``) do not lock the shared stack's outputs the way exports do:
    a job stack never blocks an update of the shared stack."""
    for name, template in stack_templates.items():
        if "-Jobs-" in name and template.get("Resources"):
            text = json.dumps(template)
            assert "Fn::ImportValue" not in text and "Fn::GetStackOutput" in text, name
    assert deployment_view.STACK_OF  # the merged view resolves them (tests/stacks/deployment_view.py)
