"""The example app synthesized offline (no AWS account, no CDK CLI): what the template holds, and cdk-nag clean.

One synth of the app (``build_app``, cdk-nag included) is shared by the module: the first synth in a process
starts jsii (a few seconds); later ones are quicker.
"""

from __future__ import annotations

import json
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import slotlock
import slotlock_cdk
from aws_cdk.assertions import Capture, Match, Template

import app as example_app

EXAMPLE_DIR = Path(__file__).resolve().parent.parent


@dataclass
class Synthesized:
    template: Template
    assembly_dir: Path
    stack: example_app.SlotReportStack

    def logical_id(self, construct: Any) -> str:
        return self.stack.get_logical_id(construct.node.default_child)


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = example_app.build_app(outdir=str(outdir))
    assembly = app.synth()  # cdk-nag runs here: any finding not acknowledged raises
    stack = app.node.find_child("SlotReport")
    assert isinstance(stack, example_app.SlotReportStack)
    yield Synthesized(Template.from_stack(stack), Path(assembly.directory), stack)


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"]).resolve()


def test_the_libraries_come_from_the_installed_wheels() -> None:
    """slotlock and slotlock_cdk are imported from this venv's site-packages (installed wheels), not a checkout."""
    assert sys.prefix != sys.base_prefix, "run the tests in a virtual environment"
    for module in (slotlock, slotlock_cdk):
        assert module.__file__ is not None
        assert Path(module.__file__).resolve().is_relative_to(site_packages()), module.__file__


def test_the_function_carries_the_slotlock_layer(synthesized: Synthesized) -> None:
    layer_id = synthesized.logical_id(synthesized.stack.layer)
    table_id = synthesized.logical_id(synthesized.stack.lock.table)
    synthesized.template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "report.handler",
            "Runtime": "python3.13",
            "Layers": [{"Ref": layer_id}],
            "Environment": {"Variables": Match.object_like({"LOCK_TABLE_NAME": {"Ref": table_id}})},
        },
    )
    synthesized.template.has_resource_properties(
        "AWS::Lambda::LayerVersion",
        {
            "CompatibleRuntimes": Match.array_with(["python3.13"]),
            "Description": Match.string_like_regexp(rf"^slotlock {slotlock.__version__}: "),
        },
    )


def asset_dir(synthesized: Synthesized, resource_type: str, code_key: str) -> Path:
    """The staged asset of the one ``resource_type`` resource (the assembly stages it as ``asset.<hash>``)."""
    key = Capture()
    synthesized.template.has_resource_properties(resource_type, {code_key: {"S3Key": key}})
    return synthesized.assembly_dir / f"asset.{key.as_string().removesuffix('.zip')}"


def test_the_layer_asset_holds_the_installed_slotlock_package(synthesized: Synthesized) -> None:
    staged = asset_dir(synthesized, "AWS::Lambda::LayerVersion", "Content") / "python" / "slotlock"
    assert (staged / "__init__.py").is_file() and (staged / "py.typed").is_file()
    installed = Path(slotlock.__file__ or "").resolve().parent
    # the whole package tree: top-level modules and subpackages (slotlock.ops), no byte code
    assert {p.relative_to(staged) for p in staged.rglob("*") if p.is_file()} == {
        p.relative_to(installed) for p in installed.rglob("*.py") if "__pycache__" not in p.parts
    } | {Path("py.typed")}
    assert (staged / "ops" / "__init__.py").is_file()
    assert (staged / "__init__.py").read_bytes() == (installed / "__init__.py").read_bytes()


def test_the_function_asset_is_the_handler_alone(synthesized: Synthesized) -> None:
    code = asset_dir(synthesized, "AWS::Lambda::Function", "Code")
    assert sorted(p.name for p in code.iterdir()) == ["report.py"]  # slotlock comes from the layer


def test_three_schedules_invoke_the_function_for_the_same_slot(synthesized: Synthesized) -> None:
    function_id = synthesized.logical_id(synthesized.stack.function)
    synthesized.template.resource_count_is("AWS::Scheduler::Schedule", 3)
    schedules = synthesized.template.find_resources(
        "AWS::Scheduler::Schedule",
        {
            "Properties": {
                "ScheduleExpression": example_app.SCHEDULE,
                "ScheduleExpressionTimezone": example_app.TIME_ZONE,
                "State": "ENABLED",
                "Target": Match.object_like({"Arn": {"Fn::GetAtt": [function_id, "Arn"]}}),
            }
        },
    )
    inputs = [json.loads(schedule["Properties"]["Target"]["Input"]) for schedule in schedules.values()]
    assert sorted(event["racer"] for event in inputs) == [0, 1, 2]
    assert {(event["job"], event["scheduled_time"]) for event in inputs} == {
        (example_app.JOB_NAME, "<aws.scheduler.scheduled-time>")
    }


def test_the_function_may_use_the_lock_table_items_only(synthesized: Synthesized) -> None:
    table_id = synthesized.logical_id(synthesized.stack.lock.table)
    role = synthesized.stack.function.role
    assert role is not None
    role_id = synthesized.logical_id(role)
    synthesized.template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [{"Ref": role_id}],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        {
                            "Sid": "LockTableItems",
                            "Effect": "Allow",
                            "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
                            "Resource": {"Fn::GetAtt": [table_id, "Arn"]},
                        }
                    ]
                )
            },
        },
    )


def test_the_lock_table_is_retained_unless_disposable(synthesized: Synthesized) -> None:
    synthesized.template.has_resource(
        "AWS::DynamoDB::Table", {"DeletionPolicy": "Retain", "Properties": Match.object_like({})}
    )
    stack = example_app.SlotReportStack(cdk.App(), "Disposable", disposable=True)
    Template.from_stack(stack).has_resource("AWS::DynamoDB::Table", {"DeletionPolicy": "Delete"})


def test_cdk_nag_is_clean(synthesized: Synthesized) -> None:
    """The synth of the fixture raised nothing; its validation report has no failing plugin."""
    report = json.loads((synthesized.assembly_dir / "validation-report.json").read_text())
    assert [plugin for plugin in report["pluginReports"] if plugin["conclusion"] != "success"] == []


def test_cdk_nag_runs_and_only_our_function_needs_acknowledgments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without our two acknowledgments the synth fails on exactly those findings, on our function only: the checks
    do run, and the library's constructs cause no finding of their own."""
    iam4, l1 = sorted(example_app.FUNCTION_ACKNOWLEDGMENTS)
    assert iam4.startswith("AwsSolutions-IAM4[") and l1 == "AwsSolutions-L1"
    monkeypatch.setattr(example_app, "FUNCTION_ACKNOWLEDGMENTS", {})
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        example_app.build_app(outdir=str(tmp_path)).synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    violations = {
        (violation["ruleName"], construct["constructPath"])
        for plugin in report["pluginReports"]
        for violation in plugin["violations"]
        for construct in violation["violatingConstructs"]
    }
    assert violations == {(iam4, "SlotReport/Report/ServiceRole/Resource"), (l1, "SlotReport/Report/Resource")}


def test_cdk_json_runs_the_app_as_the_tests_do() -> None:
    """``cdk synth`` runs app.py with no feature flags of its own: it synthesizes what these tests check."""
    settings = json.loads((EXAMPLE_DIR / "cdk.json").read_text())
    assert settings["app"] == "python3 app.py"
    assert not [key for key in settings.get("context", {}) if key.startswith("@aws-cdk")]
