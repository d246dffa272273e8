"""OncePerSlotSchedule stands alone: attached to a plain function (not the Athena job), it gives it the
fan-out schedules, the lock table grant, Lambda's async retries with the on-failure queue, and alarms."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Capture, Match, Template
from cdk_nag import AwsSolutionsChecks

import slotlock
from slotlock_cdk import LockTable, OncePerSlotSchedule, SlotlockLayer, stage_slotlock
from slotlock_cdk.runtime import LAYER_PYTHON_DIR, slotlock_package_dir
from tests.stacks.helpers import as_list, of_type

HANDLER_CODE = """
import os
from slotlock import SlotLock, once_per_slot
lock = SlotLock(os.environ["LOCK_TABLE_NAME"], "nightly-report")
@once_per_slot(lock)
def handler(run, event, context):
    run.commit(summary={"rows": 1})
"""


#: What a user acknowledges on a plain function of their own (not findings of the library's constructs).
NAG_USER_FUNCTION_ACKNOWLEDGMENTS = [
    (
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
        "the function's own role: CDK's default log-writing policy of a plain test function",
    ),
    ("AwsSolutions-L1", "the test function pins python3.13, the runtime the project deploys"),
]


def build(**options: Any) -> tuple[dict[str, Any], str, str]:
    """A stack with a lock table, a plain function and the construct; (resources, function id, table id)."""
    stack = cdk.Stack(cdk.App(), "Plain")
    lock = LockTable(stack, "Lock", removal_policy=cdk.RemovalPolicy.DESTROY)
    function = lambda_.Function(
        stack,
        "Report",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline(HANDLER_CODE),
    )
    topic = sns.Topic(stack, "Alarms")
    OncePerSlotSchedule(
        stack,
        "NightlyReport",
        function=function,
        lock_table=lock.table,
        job_name="nightly-report",
        schedule_expression="cron(0 2 * * ? *)",
        time_zone="Europe/Berlin",
        racers=4,
        max_slot_age_s=3600,
        alarm_topic=topic,
        removal_policy=cdk.RemovalPolicy.DESTROY,
        **options,
    )
    resources = Template.from_stack(stack).to_json()["Resources"]
    (function_id,) = of_type(resources, "AWS::Lambda::Function")
    (table_id,) = of_type(resources, "AWS::DynamoDB::Table")
    return resources, function_id, table_id


@pytest.fixture(scope="module")
def plain() -> tuple[dict[str, Any], str, str]:
    return build()


def test_the_racers_share_one_cron_time_zone_and_scheduled_time(plain: tuple[dict[str, Any], str, str]) -> None:
    resources, function_id, _ = plain
    schedules = of_type(resources, "AWS::Scheduler::Schedule")
    assert len(schedules) == 4
    events = []
    for schedule in schedules.values():
        props = schedule["Properties"]
        assert (props["ScheduleExpression"], props["ScheduleExpressionTimezone"]) == (
            "cron(0 2 * * ? *)",
            "Europe/Berlin",
        )
        assert props["FlexibleTimeWindow"] == {"Mode": "OFF"}
        assert props["Target"]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
        events.append(json.loads(props["Target"]["Input"]))
    assert sorted(e["racer"] for e in events) == [0, 1, 2, 3]
    assert {e["scheduled_time"] for e in events} == {"<aws.scheduler.scheduled-time>"}
    assert {e["job"] for e in events} == {"nightly-report"}


def test_the_function_may_use_the_lock_table_and_send_failures_only(plain: tuple[dict[str, Any], str, str]) -> None:
    resources, function_id, table_id = plain
    role_id = resources[function_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for p in of_type(resources, "AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [{"Ref": role_id}]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    by_sid = {s["Sid"]: s for s in statements}
    assert set(as_list(by_sid["LockTableItems"]["Action"])) == {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
    }
    assert by_sid["LockTableItems"]["Resource"] == {"Fn::GetAtt": [table_id, "Arn"]}
    assert by_sid["OnFailureDestination"]["Action"] == "sqs:SendMessage"
    # AND the table's name is in the function's environment, where SlotLock's caller reads it
    assert resources[function_id]["Properties"]["Environment"]["Variables"] == {"LOCK_TABLE_NAME": {"Ref": table_id}}


def test_async_retries_are_bounded_by_the_slot_age_and_end_in_the_failure_queue(
    plain: tuple[dict[str, Any], str, str],
) -> None:
    resources, function_id, _ = plain
    (config,) = of_type(resources, "AWS::Lambda::EventInvokeConfig").values()
    props = config["Properties"]
    assert props["FunctionName"] == {"Ref": function_id}
    assert (props["MaximumRetryAttempts"], props["MaximumEventAgeInSeconds"]) == (2, 3600)
    queue_id = props["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0]
    queue = resources[queue_id]["Properties"]
    assert queue["SqsManagedSseEnabled"] is True and "RedrivePolicy" in queue


def test_without_handler_metrics_the_alarms_watch_queues_and_dropped_events(
    plain: tuple[dict[str, Any], str, str],
) -> None:
    resources, _, _ = plain
    alarms = of_type(resources, "AWS::CloudWatch::Alarm")
    names = {logical_id[len("NightlyReport") : -8] for logical_id in alarms}
    assert names == {"FailedInvocationsQueued", "FailureRecordsDeadLettered", "AsyncEventsDropped"}
    for alarm in alarms.values():
        assert alarm["Properties"]["Period"] == 86400  # one slot of a daily schedule (the longest gap: 25 h, capped)
        assert len(alarm["Properties"]["AlarmActions"]) == 1


def test_the_handlers_own_metrics_add_success_missed_and_failed_alarms() -> None:
    def metric(name: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(namespace="NightlyReport", metric_name=name, period=cdk.Duration.days(1))

    resources, _, _ = build(
        success_age_metric=metric("LastSuccessAgeS"), missed_metric=metric("Missed"), failed_metric=metric("Failed")
    )
    alarms = {
        logical_id[len("NightlyReport") : -8]: a["Properties"]
        for logical_id, a in of_type(resources, "AWS::CloudWatch::Alarm").items()
    }
    assert {"NoRecentSuccess", "SlotMissed", "RunFailed"} <= set(alarms)
    stale = alarms["NoRecentSuccess"]
    # Two of the longest gap: 02:00 does not exist in Berlin on the spring-forward day (the clock jumps from
    # 02:00 to 03:00), so that firing is skipped and the longest gap is 47 h; longer than a day, missing
    # data is not breaching.
    assert stale["Threshold"] == 2 * 47 * 3600 and stale["TreatMissingData"] == "missing"
    assert not any(r["Type"].startswith("AWS::Athena") for r in resources.values())


def test_the_slotlock_layer_holds_the_installed_package_for_python_3_11_and_later(tmp_path: Path) -> None:
    """The layer's asset is the installed ``slotlock`` package under ``python/`` (on Lambda's ``sys.path``)."""
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Layered")
    layer = SlotlockLayer(stack, "Slotlock")
    lambda_.Function(
        stack,
        "Report",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline(HANDLER_CODE),
        layers=[layer],
    )
    template = Template.from_stack(stack)
    layer_id = stack.get_logical_id(layer.node.default_child)  # type: ignore[arg-type]
    template.has_resource_properties("AWS::Lambda::Function", {"Layers": [{"Ref": layer_id}], "Runtime": "python3.13"})
    template.has_resource_properties(
        "AWS::Lambda::LayerVersion",
        {
            "CompatibleRuntimes": ["python3.11", "python3.12", "python3.13"],
            "Description": Match.string_like_regexp(rf"^slotlock {re.escape(slotlock.__version__)}: "),
        },
    )
    key = Capture()  # the asset's hash: the cloud assembly stages it as asset.<hash>
    template.has_resource_properties("AWS::Lambda::LayerVersion", {"Content": {"S3Key": key}})
    asset = f"asset.{key.as_string().removesuffix('.zip')}"
    staged = Path(app.synth().directory) / asset / LAYER_PYTHON_DIR / "slotlock"
    installed = slotlock_package_dir()
    assert staged_files(staged) == {str(p.relative_to(installed)) for p in installed.rglob("*.py")} | {"py.typed"}
    assert "ops/__init__.py" in staged_files(staged)
    assert (staged / "__init__.py").read_bytes() == (installed / "__init__.py").read_bytes()


def staged_files(directory: Path) -> set[str]:
    """Every file under ``directory``, as a path relative to it."""
    return {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()}


def test_stage_slotlock_copies_the_package_without_caches(tmp_path: Path) -> None:
    target = stage_slotlock(tmp_path / "asset")
    assert target == tmp_path / "asset" / "slotlock"
    assert not any("__pycache__" in p.parts or p.suffix == ".pyc" for p in target.rglob("*"))
    assert (target / "py.typed").is_file() and (target / "_dynamodb.py").is_file()
    assert (target / "ops" / "__init__.py").is_file() and (target / "ops" / "admin.py").is_file()
    with pytest.raises(FileExistsError):
        stage_slotlock(tmp_path / "asset")


def test_a_staged_asset_imports_slotlock_ops_from_its_own_copy(tmp_path: Path) -> None:
    """A fresh interpreter with only the staged asset (and boto3) on ``sys.path`` imports ``slotlock.ops`` and the
    1.x re-exports from the staged copy, not from the checkout: the subpackage is staged."""
    stage_slotlock(tmp_path / "asset")
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import slotlock, slotlock.ops, slotlock.history, "
        "slotlock.manual; print(json.dumps({'ops': slotlock.ops.__file__, 'same': slotlock.pause is "
        "slotlock.ops.pause and slotlock.history.SlotHistory is slotlock.ops.SlotHistory and "
        "slotlock.manual.find_requested is slotlock.ops.find_requested}))"
    )
    answer = subprocess.run(
        [sys.executable, "-I", "-c", code, str(tmp_path / "asset")], capture_output=True, text=True, check=True
    )
    found = json.loads(answer.stdout)
    assert Path(found["ops"]) == tmp_path / "asset" / "slotlock" / "ops" / "__init__.py"
    assert found["same"] is True


def nag_app(outdir: Path, *, acknowledge_user_function: bool) -> cdk.App:
    """A cdk-nag-checked app: the lock table, a plain function with the slotlock layer, and the construct."""
    app = cdk.App(outdir=str(outdir))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    stack = cdk.Stack(app, "NagPlain")
    lock = LockTable(stack, "Lock", removal_policy=cdk.RemovalPolicy.RETAIN)
    function = lambda_.Function(
        stack,
        "Report",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline(HANDLER_CODE),
        layers=[SlotlockLayer(stack, "Slotlock")],
    )
    OncePerSlotSchedule(
        stack,
        "NightlyReport",
        function=function,
        lock_table=lock.table,
        job_name="nightly-report",
        schedule_expression="cron(0 2 * * ? *)",
        racers=3,
        max_slot_age_s=3600,
        alarm_topic=sns.Topic(stack, "Alarms", enforce_ssl=True),
        removal_policy=cdk.RemovalPolicy.RETAIN,
    )
    if acknowledge_user_function:
        for rule_id, reason in NAG_USER_FUNCTION_ACKNOWLEDGMENTS:
            cdk.Validations.of(function).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))
    return app


def test_the_constructs_cause_no_cdk_nag_finding_of_their_own(tmp_path: Path) -> None:
    """cdk-nag's AWS Solutions pack on the library's constructs: the only findings are the user's own function's
    (managed log policy, runtime pin); every finding the constructs cause by design they acknowledge themselves,
    without a cdk-nag dependency."""
    with pytest.raises(RuntimeError, match="ValidationFailed") as failed:
        nag_app(tmp_path / "raw", acknowledge_user_function=False).synth()
    found = set(re.findall(r"^\s+(NagPlain/\S+) ", str(failed.value), flags=re.MULTILINE))
    assert found == {"NagPlain/Report/ServiceRole/Resource", "NagPlain/Report/Resource"}
    nag_app(tmp_path / "acknowledged", acknowledge_user_function=True).synth()  # raises on any finding
    report = json.loads((tmp_path / "acknowledged" / "validation-report.json").read_text())
    assert [plugin for plugin in report["pluginReports"] if plugin["conclusion"] != "success"] == []
