"""Security posture of the synthesized stack: cdk-nag on every synth with every acknowledgment justified,
cfn-lint, the function role's exact statements, and data protection."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Capture, Match, Template
from cdk_nag import AwsSolutionsChecks

import app
from athena_refresh import contract
from slotlock_cdk import acknowledgments as acknowledgments_module
from slotlock_cdk.runtime import slotlock_package_dir
from stacks import LAMBDAS_DIR, REPO_ROOT, nag
from stacks.constructs.capacity import deferral_schedule_prefix
from stacks.stack_settings import STACK_KEY, load_context
from tests.stacks import deployment_view
from tests.stacks.helpers import as_list, of_job, of_type, render, single

_SHARED_BUCKET_ARN = (
    '{"Fn::GetStackOutput":{"StackName":"ScheduledAthenaRefresh","Region":{"Ref":"AWS::Region"},'
    '"OutputName":"PublishOutputFnGetAttResultsBucket46167C27Arn2B55BB28"}}'
)
# The acknowledged findings, reviewed: a new acknowledgment (or a new finding) fails
# test_acknowledgments_cover_exactly_the_raw_findings until it is added here.
EXPECTED_ACKNOWLEDGED_RULES = {
    "AwsSolutions-L1",
    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
    "AwsSolutions-IAM5[Resource::*]",
    # the read role (shared stack) reads results/*; the BucketDeployment writes the bucket (*)
    "AwsSolutions-IAM5[Resource::<ResultsBucket46167C27.Arn>/results/*]",
    "AwsSolutions-IAM5[Resource::<ResultsBucket46167C27.Arn>/*]",
    # the job functions (job stacks) reach the shared bucket through CDK's weak cross-stack reference
    *(
        f"AwsSolutions-IAM5[Resource::{_SHARED_BUCKET_ARN}/{prefix}/*]"
        for prefix in ("data/flights", "athena-results", "results")
    ),
    # one per job: its schedules' role invokes its function's versions and aliases
    "AwsSolutions-IAM5[Resource::<JobcarrierontimeRefreshFunction09A88B39.Arn>:*]",
    "AwsSolutions-IAM5[Resource::<JobflightsdashboardRefreshFunction436853C5.Arn>:*]",
    # the freshness watchdog's schedules' role (shared stack), the same grant
    "AwsSolutions-IAM5[Resource::<WatchdogFunction79A09A6B.Arn>:*]",
    # one per job while the capacity budget is on: its function creates its own deferral schedules (name prefix)
    *(
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/default/{p}*]"
        for p in ("sar-ff400f2d71f8-", "sar-060c8c76e094-")  # carrier-on-time, flights-dashboard
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*]",
    "AwsSolutions-IAM5[Action::s3:GetBucket*]",
    "AwsSolutions-IAM5[Action::s3:GetObject*]",
    "AwsSolutions-IAM5[Action::s3:List*]",
    "AwsSolutions-IAM5[Action::s3:Abort*]",
    "AwsSolutions-IAM5[Action::s3:DeleteObject*]",
}
TEMPLATE_NAME = f"{app.STACK_NAME}.template.json"


def _findings(deployment: Any) -> set[tuple[str, str]]:
    """(rule id, construct path) of every unacknowledged AwsSolutions finding in any stack of ``deployment``."""
    return {
        (violation.rule_name, resource.construct_path)
        for stack in deployment.stacks
        for violation in AwsSolutionsChecks().validate_scope(stack).violations
        for resource in violation.violating_resources
    }


@pytest.fixture(scope="module")
def synthesized(
    tmp_path_factory: pytest.TempPathFactory, sample_data_dir: Path, sample_jobs_dir: Path
) -> tuple[Any, Path]:
    """A full ``app.synth()`` of the sample jobs (cdk-nag runs as a validation plugin) into a temporary assembly."""
    outdir = tmp_path_factory.mktemp("assembly")
    cdk_app, stack = app.build_app(sample_data_dir=sample_data_dir, outdir=outdir, jobs_dir=sample_jobs_dir)
    cdk_app.synth()  # raises ValidationFailed on any unacknowledged finding
    return stack, outdir


# --- cdk-nag ----------------------------------------------------------------------------------------


def test_synth_runs_cdk_nag_and_has_no_unacknowledged_finding(synthesized: tuple[Any, Path]) -> None:
    stack, outdir = synthesized
    assert _findings(stack) == set()
    # The plugin ran (test_acknowledgments_cover_exactly_the_raw_findings shows it fails a synth) and
    # reported nothing: a failing plugin would be listed here.
    report = json.loads((outdir / "validation-report.json").read_text())
    assert [plugin for plugin in report["pluginReports"] if plugin["conclusion"] != "success"] == []
    assert (outdir / TEMPLATE_NAME).is_file()


def test_acknowledgments_cover_exactly_the_raw_findings(
    monkeypatch: pytest.MonkeyPatch, sample_data_dir: Path, sample_jobs_dir: Path, tmp_path: Path
) -> None:
    """Synthesize without applying acknowledgments: every raw finding must be acknowledged on the finding's
    construct or an ancestor, and every acknowledgment must match at least one raw finding."""
    monkeypatch.setattr(acknowledgments_module, "apply_acknowledgments", False)
    monkeypatch.setattr(acknowledgments_module, "ACKNOWLEDGMENTS", [])
    cdk_app, stack = app.build_app(sample_data_dir=sample_data_dir, outdir=tmp_path, jobs_dir=sample_jobs_dir)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        cdk_app.synth()
    raw = _findings(stack)
    acknowledgments = list(acknowledgments_module.ACKNOWLEDGMENTS)

    def covers(ack: nag.AcknowledgedFinding, finding: tuple[str, str]) -> bool:
        rule_id, path = finding
        return ack.rule_id == rule_id and (path == ack.path or path.startswith(ack.path + "/"))

    unacknowledged = [finding for finding in raw if not any(covers(ack, finding) for ack in acknowledgments)]
    unused = [ack for ack in acknowledgments if not any(covers(ack, finding) for finding in raw)]
    assert unacknowledged == []
    assert unused == []
    assert {ack.rule_id for ack in acknowledgments} == EXPECTED_ACKNOWLEDGED_RULES
    # Nothing is acknowledged stack-wide: each acknowledgment sits on the construct it is about.
    assert all(ack.path.count("/") >= 1 for ack in acknowledgments)
    assert all(len(ack.reason) >= nag.MIN_REASON_LENGTH for ack in acknowledgments)


@pytest.mark.parametrize(
    ("rule_id", "reason", "message"),
    [
        ("S1", "a reason that is long enough to explain the finding", "not an AwsSolutions rule id"),
        ("AwsSolutions-S1", "not needed", "must explain"),
    ],
)
def test_acknowledge_refuses_vague_acknowledgments(rule_id: str, reason: str, message: str) -> None:
    import aws_cdk as cdk

    with pytest.raises(ValueError, match=message):
        nag.acknowledge(cdk.Stack(cdk.App(), "Scratch"), rule_id, reason)


# --- cfn-lint ---------------------------------------------------------------------------------------


def test_cfn_lint_passes_on_the_synthesized_template(synthesized: tuple[Any, Path]) -> None:
    _, outdir = synthesized
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    templates = [  # every stack with resources (an empty job stack is deleted by cdk deploy, never created)
        str(path) for path in sorted(outdir.glob("*.template.json")) if json.loads(path.read_text()).get("Resources")
    ]
    assert str(outdir / TEMPLATE_NAME) in templates and len(templates) >= 2
    result = subprocess.run(
        [str(cfn_lint), "--config-file", str(REPO_ROOT / ".cfnlintrc"), *templates],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_cfn_lint_ignores_only_w3005() -> None:
    settings = (REPO_ROOT / ".cfnlintrc").read_text()
    assert re.findall(r"^\s*-\s*([EWI]\d+)", settings, re.MULTILINE) == ["W3005"]


# --- the function role: exactly what the runtime calls ------------------------------------------------


def _statements_by_sid(statements: list[dict[str, Any]]) -> dict[str, tuple[set[str], list[str], Any]]:
    normalized = {}
    for statement in statements:
        assert statement["Effect"] == "Allow"
        sid = statement.get("Sid", "<no sid>")
        assert sid not in normalized, sid
        normalized[sid] = (
            set(as_list(statement["Action"])),
            sorted(render(resource) for resource in as_list(statement["Resource"])),
            statement.get("Condition"),
        )
    return normalized


def test_function_role_statements_are_exactly_the_needed_ones(
    function_statements: list[dict[str, Any]],
    function_props: dict[str, Any],
    resources: dict[str, Any],
    results_bucket_id: str,
) -> None:
    env = function_props["Environment"]["Variables"]
    lock, results = env[contract.ENV_LOCK_TABLE_NAME]["Ref"], env[contract.ENV_RESULTS_TABLE_NAME]["Ref"]
    workgroup, database = env[contract.ENV_ATHENA_WORKGROUP]["Ref"], env[contract.ENV_ATHENA_DATABASE]["Ref"]
    log_group = function_props["LoggingConfig"]["LogGroup"]["Ref"]
    (queue,) = [  # the deployment's one on-failure queue (shared stack)
        logical_id
        for logical_id, resource in of_type(resources, "AWS::SQS::Queue").items()
        if "RedrivePolicy" in resource["Properties"]
    ]
    bucket = f"<{results_bucket_id}.Arn>"
    account = "arn:<AWS::Partition>:{service}:<AWS::Region>:<AWS::AccountId>:"
    prefix, scheduler_role = (
        env[contract.ENV_DEFERRAL_SCHEDULE_PREFIX],
        env[contract.ENV_DEFERRAL_ROLE_ARN]["Fn::GetAtt"][0],
    )
    glue, athena = account.format(service="glue"), account.format(service="athena")
    assert _statements_by_sid(function_statements) == {
        # X-Ray (added by CDK for Tracing.ACTIVE): no resource-level permissions for these actions.
        "<no sid>": ({"xray:PutTraceSegments", "xray:PutTelemetryRecords"}, ["*"], None),
        "WriteOwnLogs": ({"logs:CreateLogStream", "logs:PutLogEvents"}, [f"<{log_group}.Arn>"], None),
        "OnFailureDestination": ({"sqs:SendMessage"}, [f"<{queue}.Arn>"], None),
        # BatchGetItem: the capacity semaphore's one consistent read of its permits and tickets (budget on).
        "LockTableItems": (
            {"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
            [f"<{lock}.Arn>"],
            None,
        ),
        # GetItem: the LATEST item, read for a manual generation and after a LATEST conflict (latest_order).
        "ResultsTableCommit": (
            {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
            [f"<{results}.Arn>"],
            None,
        ),
        "AthenaQueries": (
            {"athena:StartQueryExecution", "athena:GetQueryExecution", "athena:GetQueryResults"},
            [f"{athena}workgroup/<{workgroup}>"],
            None,
        ),
        "GlueCatalogRead": (
            {"glue:GetDatabase", "glue:GetTable"},  # the sample table projects its partitions: no GetPartitions
            sorted([f"{glue}catalog", f"{glue}database/<{database}>", f"{glue}table/<{database}>/flights"]),
            None,
        ),
        "ReadSourceData": ({"s3:GetObject"}, [f"{bucket}/data/flights/*"], None),
        "ListSourceData": ({"s3:ListBucket"}, [bucket], {"StringLike": {"s3:prefix": ["data/flights/*"]}}),
        "ListQueryOutput": ({"s3:ListBucket"}, [bucket], {"StringLike": {"s3:prefix": ["athena-results/*"]}}),
        "BucketForAthena": ({"s3:GetBucketLocation", "s3:ListBucketMultipartUploads"}, [bucket], None),
        "QueryOutput": (
            {"s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"},
            [f"{bucket}/athena-results/*"],
            None,
        ),
        "OversizedResults": ({"s3:PutObject"}, [f"{bucket}/results/*"], None),
        # The capacity budget's deferral (stacks.constructs.capacity): the job's own one-time schedules, created with
        # the job's Scheduler role passed to Scheduler only; no DeleteSchedule (they delete themselves).
        "CapacityDeferralSchedules": (
            {"scheduler:CreateSchedule"},
            [f"{account.format(service='scheduler')}schedule/default/{prefix}*"],
            None,
        ),
        "CapacityDeferralPassRole": (
            {"iam:PassRole"},
            [f"<{scheduler_role}.Arn>"],
            {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
        ),
    }
    assert resources[log_group]["Type"] == "AWS::Logs::LogGroup"
    assert resources[scheduler_role]["Type"] == "AWS::IAM::Role"
    assert prefix == deferral_schedule_prefix(app.STACK_NAME, env[contract.ENV_JOB_NAME]) == "sar-060c8c76e094-"
    assert resources[workgroup]["Type"] == "AWS::Athena::WorkGroup"


def test_function_role_has_no_managed_policy_and_only_lambda_may_assume_it(
    resources: dict[str, Any], function_role_id: str
) -> None:
    role = resources[function_role_id]["Properties"]
    assert "ManagedPolicyArns" not in role
    assert "Policies" not in role
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "lambda.amazonaws.com"}
    assert statement["Action"] == "sts:AssumeRole"


# Runtime calls (boto3 method or slotlock operation name) that each granted action stands for.
_CALLS_BY_ACTION = {
    "dynamodb:GetItem": ("GetItem",),
    "dynamodb:BatchGetItem": ("batch_get(",),  # slotlock.semaphore's read of its permits (capacity budget on)
    "dynamodb:PutItem": ("PutItem", '"Put":'),  # directly, or as a TransactWriteItems item
    "dynamodb:UpdateItem": ("UpdateItem", '"Update":'),
    "athena:StartQueryExecution": ("start_query_execution",),
    "athena:GetQueryExecution": ("get_query_execution",),
    "athena:GetQueryResults": ("get_query_results",),
}


def test_granted_dynamodb_and_athena_actions_are_calls_the_runtime_makes(
    function_statements: list[dict[str, Any]],
) -> None:
    """Guards against drift: an action stays granted only while lambdas/ still makes the call."""
    roots = (LAMBDAS_DIR, slotlock_package_dir())  # the asset: lambdas/ and the installed slotlock package
    source = "\n".join(path.read_text() for root in roots for path in root.rglob("*.py"))
    granted = {
        action
        for statement in function_statements
        for action in as_list(statement["Action"])
        if action.startswith(("dynamodb:", "athena:"))
    }
    assert granted == set(_CALLS_BY_ACTION)
    for action, calls in _CALLS_BY_ACTION.items():
        assert any(call in source for call in calls), f"{action} is granted but lambdas/ never calls it"
    for unused in ("stop_query_execution", "delete_item", "batch_write_item", "scan("):
        assert unused not in source, f"lambdas/ calls {unused}: grant it (or keep it out of the function)"


def test_no_policy_in_the_stack_grants_service_wildcards(template: Template) -> None:
    for logical_id, policy in template.find_resources("AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = set(as_list(statement["Action"]))
            assert not actions & {"dynamodb:*", "s3:*", "athena:*", "glue:*", "sqs:*", "sns:*", "*"}, (
                logical_id,
                actions,
            )


# --- data protection --------------------------------------------------------------------------------


def test_every_bucket_is_encrypted_private_and_ssl_only(template: Template, resources: dict[str, Any]) -> None:
    buckets = of_type(resources, "AWS::S3::Bucket")
    assert len(buckets) == 2
    policies = of_type(resources, "AWS::S3::BucketPolicy")
    for bucket_id, bucket in buckets.items():
        props = bucket["Properties"]
        assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
        ]
        assert props["PublicAccessBlockConfiguration"] == dict.fromkeys(
            ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"), True
        )
        assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
        assert props["LifecycleConfiguration"]["Rules"], bucket_id
        (policy,) = [p for p in policies.values() if p["Properties"]["Bucket"] == {"Ref": bucket_id}]
        assert {
            "Effect": "Deny",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }.items() <= policy["Properties"]["PolicyDocument"]["Statement"][0].items()


def test_results_bucket_logs_access_and_keeps_results_but_expires_query_output(
    resources: dict[str, Any], results_bucket_id: str
) -> None:
    props = resources[results_bucket_id]["Properties"]
    logs_bucket = props["LoggingConfiguration"]["DestinationBucketName"]["Ref"]
    assert logs_bucket != results_bucket_id and resources[logs_bucket]["Type"] == "AWS::S3::Bucket"
    rules = props["LifecycleConfiguration"]["Rules"]
    expiring = {rule.get("Prefix"): rule["ExpirationInDays"] for rule in rules if "ExpirationInDays" in rule}
    assert expiring == {"athena-results/": 30}  # results/ is referenced by result items: never expires
    assert any(rule.get("AbortIncompleteMultipartUpload") == {"DaysAfterInitiation": 1} for rule in rules)


def test_results_bucket_is_versioned_and_what_versioning_keeps_expires(
    template: Template, resources: dict[str, Any], results_bucket_id: str
) -> None:
    """The results bucket keeps overwritten and deleted objects (offloaded rows that result items point at) for the
    tables' point-in-time recovery window, and nothing longer: an expiration on a versioned bucket only hides the
    current version behind a delete marker, so noncurrent versions expire and lone delete markers are removed."""
    rules = Capture()
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "VersioningConfiguration": Match.object_equals({"Status": "Enabled"}),
            "LifecycleConfiguration": {"Rules": rules},
            "LoggingConfiguration": Match.object_like({"LogFilePrefix": "results-bucket/"}),
        },
    )
    versioned = template.find_resources(
        "AWS::S3::Bucket", {"Properties": {"VersioningConfiguration": Match.any_value()}}
    )
    assert set(versioned) == {results_bucket_id}  # the access-log bucket (a log sink) is not versioned
    by_id = {rule["Id"]: rule for rule in rules.as_array()}
    assert set(by_id) == {"ExpireAthenaResults", "AbortIncompleteUploads", "ExpireNoncurrentVersions"}
    # Bucket-wide: noncurrent versions expire after the tables' PITR window (35 days, the default: no table sets
    # RecoveryPeriodInDays), and a delete marker left with no version behind it is removed.
    assert by_id["ExpireNoncurrentVersions"] == {
        "Id": "ExpireNoncurrentVersions",
        "Status": "Enabled",
        "NoncurrentVersionExpiration": {"NoncurrentDays": 35},
        "ExpiredObjectDeleteMarker": True,
    }
    for table in of_type(resources, "AWS::DynamoDB::Table").values():
        assert "RecoveryPeriodInDays" not in table["Properties"]["PointInTimeRecoverySpecification"]
    # Athena's output still expires after 30 days; the noncurrent version that expiry leaves goes a day later
    # (overlapping expirations: S3 honours the shorter one).
    assert by_id["ExpireAthenaResults"] == {
        "Id": "ExpireAthenaResults",
        "Prefix": "athena-results/",
        "Status": "Enabled",
        "ExpirationInDays": 30,
        "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
    }
    assert by_id["AbortIncompleteUploads"] == {
        "Id": "AbortIncompleteUploads",
        "Status": "Enabled",
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
    }


def test_tables_have_pitr_and_deletion_protection_and_ttl_only_on_history(resources: dict[str, Any]) -> None:
    tables = of_type(resources, "AWS::DynamoDB::Table")
    assert len(tables) == 2
    ttl = {}
    for table in tables.values():
        props = table["Properties"]
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert props["DeletionProtectionEnabled"] is True
        assert table["DeletionPolicy"] == table["UpdateReplacePolicy"] == "Retain"
        ttl[props["KeySchema"][0]["AttributeName"]] = props.get("TimeToLiveSpecification")
    # Lock table: TTL on slot (history) items only; results table: no TTL.
    assert ttl == {"pk": {"AttributeName": "ttl_epoch_s", "Enabled": True}, "job": None}


def test_queues_are_encrypted_ssl_only_and_the_failure_queue_has_a_dlq(
    template: Template, resources: dict[str, Any]
) -> None:
    queues = of_type(resources, "AWS::SQS::Queue")
    assert not of_type(of_job(resources), "AWS::SQS::Queue")  # no queue per job
    assert len(queues) == 2  # per deployment: the on-failure queue and its dead-letter queue
    for queue_id, queue in queues.items():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True
        assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600
        template.has_resource_properties(
            "AWS::SQS::QueuePolicy",
            {
                "Queues": [{"Ref": queue_id}],
                "PolicyDocument": {
                    "Statement": Match.array_with(
                        [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                    )
                },
            },
        )
    (with_dlq,) = [q for q in queues.values() if "RedrivePolicy" in q["Properties"]]
    dlq_id = with_dlq["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
    assert dlq_id in queues and with_dlq["Properties"]["RedrivePolicy"]["maxReceiveCount"] == 5


def test_alarm_topic_only_accepts_tls_publishing(template: Template) -> None:
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            }
        },
    )


def test_removal_policy_destroy_makes_the_stack_disposable(sample_data_dir: Path, sample_jobs_dir: Path) -> None:
    context = load_context(REPO_ROOT / "cdk.json")
    context[STACK_KEY] = {**context[STACK_KEY], "removal_policy": "DESTROY"}
    _, deployment = app.build_app(context=context, sample_data_dir=sample_data_dir, jobs_dir=sample_jobs_dir)
    resources = deployment_view.merged_template(deployment_view.stack_templates(deployment))["Resources"]
    for type_ in ("AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::SQS::Queue", "AWS::Logs::LogGroup"):
        for logical_id, resource in of_type(resources, type_).items():
            assert resource["DeletionPolicy"] == "Delete", logical_id
    for table in of_type(resources, "AWS::DynamoDB::Table").values():
        assert table["Properties"]["DeletionProtectionEnabled"] is False
    single(resources, "AWS::Athena::WorkGroup")
