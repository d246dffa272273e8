"""Template tests of the ScheduledAthenaRefresh stack, plus config validation and app-vs-CLI synth parity.

One synthesis per session (jsii's first synth costs seconds): every template test reads it. Resources are
found by their properties (Match/Capture), never by logical id.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Capture, Match, Template

import app
from athena_refresh import contract
from athena_refresh.checks import ConfigError
from athena_refresh.jobspec import JobSpec
from stacks import REPO_ROOT
from tests.sample_jobs import spec_from_context
from tests.stacks.helpers import as_list

POWERTOOLS_SSM_PARAMETER = "/aws/service/powertools/python/arm64/python3.13/latest"
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
EXECUTION_ID = "<aws.scheduler.execution-id>"
EXPECTED_FLIGHTS_COLUMNS = [
    ("year", "int"),
    ("month", "int"),
    ("day", "int"),
    ("dep_time", "int"),
    ("sched_dep_time", "int"),
    ("dep_delay", "double"),
    ("arr_time", "int"),
    ("sched_arr_time", "int"),
    ("arr_delay", "double"),
    ("carrier", "string"),
    ("flight", "int"),
    ("tailnum", "string"),
    ("origin", "string"),
    ("dest", "string"),
    ("air_time", "double"),
    ("distance", "double"),
    ("hour", "int"),
    ("minute", "int"),
    ("time_hour", "timestamp"),
    ("sched_dep_utc", "timestamp"),
]
# --- tables, bucket, data ---------------------------------------------------------------------------


def test_lock_table_has_pk_ttl_pitr_and_the_sparse_history_index(template: Template) -> None:
    # The key schema is the table's identity: it must never change (a replacement resets every fencing
    # counter); the history index is added beside it.
    template.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": Match.object_like(
                {
                    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                    "AttributeDefinitions": Match.array_equals(
                        [
                            {"AttributeName": "pk", "AttributeType": "S"},
                            {"AttributeName": "job", "AttributeType": "S"},
                            {"AttributeName": "slot_epoch_s", "AttributeType": "N"},
                        ]
                    ),
                    "GlobalSecondaryIndexes": [
                        {
                            "IndexName": "history",
                            "KeySchema": [
                                {"AttributeName": "job", "KeyType": "HASH"},
                                {"AttributeName": "slot_epoch_s", "KeyType": "RANGE"},
                            ],
                            "Projection": {"ProjectionType": "ALL"},
                        }
                    ],
                    "BillingMode": "PAY_PER_REQUEST",
                    "TimeToLiveSpecification": {"AttributeName": "ttl_epoch_s", "Enabled": True},
                    "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                    "DeletionProtectionEnabled": True,
                }
            ),
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
        },
    )


def test_results_table_has_job_and_slot_keys(template: Template) -> None:
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [
                {"AttributeName": "job", "KeyType": "HASH"},
                {"AttributeName": "slot", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": Match.array_equals(
                [{"AttributeName": "job", "AttributeType": "S"}, {"AttributeName": "slot", "AttributeType": "S"}]
            ),
            "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "DeletionProtectionEnabled": True,
            "TimeToLiveSpecification": Match.absent(),
        },
    )


def test_bucket_is_encrypted_private_ssl_only_and_expires_athena_output(template: Template) -> None:
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            },
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "LifecycleConfiguration": {
                "Rules": Match.array_with(
                    [Match.object_like({"Prefix": "athena-results/", "ExpirationInDays": 30, "Status": "Enabled"})]
                )
            },
        },
    )
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            }
        },
    )


def test_sample_data_is_deployed_under_data_flights(template: Template, results_bucket_id: str) -> None:
    bucket_id = results_bucket_id
    template.has_resource_properties(
        "Custom::CDKBucketDeployment",
        {"DestinationBucketName": {"Ref": bucket_id}, "DestinationBucketKeyPrefix": "data/flights/"},
    )


def test_glue_table_is_external_parquet_over_the_data_prefix(
    template: Template, config: JobSpec, results_bucket_id: str
) -> None:
    bucket_id = results_bucket_id
    template.has_resource_properties("AWS::Glue::Database", {"DatabaseInput": {"Name": config.database}})
    columns = Capture()
    template.has_resource_properties(
        "AWS::Glue::Table",
        {
            "DatabaseName": config.database,
            "TableInput": Match.object_like(
                {
                    "Name": "flights",
                    "TableType": "EXTERNAL_TABLE",
                    "StorageDescriptor": Match.object_like(
                        {
                            "Columns": columns,
                            "Location": {"Fn::Join": ["", ["s3://", {"Ref": bucket_id}, "/data/flights/"]]},
                            "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
                            "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
                            "SerdeInfo": Match.object_like(
                                {"SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"}
                            ),
                        }
                    ),
                }
            ),
        },
    )
    assert [(column["Name"], column["Type"]) for column in columns.as_array()] == EXPECTED_FLIGHTS_COLUMNS
    assert {"Name": "sched_dep_utc", "Type": "timestamp"} in columns.as_array()


def test_glue_columns_match_the_parquet_file_local_data_writes() -> None:
    from sample_data.flights import FLIGHTS_GLUE_COLUMNS

    assert list(FLIGHTS_GLUE_COLUMNS) == EXPECTED_FLIGHTS_COLUMNS


def test_workgroup_enforces_its_configuration(template: Template, config: JobSpec, results_bucket_id: str) -> None:
    bucket_id = results_bucket_id
    template.has_resource_properties(
        "AWS::Athena::WorkGroup",
        {
            "Name": config.workgroup,
            "WorkGroupConfiguration": Match.object_like(
                {
                    "EnforceWorkGroupConfiguration": True,
                    "BytesScannedCutoffPerQuery": config.bytes_scanned_cutoff_per_query,
                    "PublishCloudWatchMetricsEnabled": True,
                    "EngineVersion": {"SelectedEngineVersion": "Athena engine version 3"},
                    "ResultConfiguration": {
                        "OutputLocation": {"Fn::Join": ["", ["s3://", {"Ref": bucket_id}, "/athena-results/"]]},
                        "EncryptionConfiguration": {"EncryptionOption": "SSE_S3"},
                    },
                }
            ),
        },
    )


# --- the function -----------------------------------------------------------------------------------


def test_function_runtime_architecture_tracing_and_sizing(
    template: Template, function_props: dict[str, Any], config: JobSpec
) -> None:
    assert function_props["Runtime"] == "python3.13"
    assert function_props["Architectures"] == ["arm64"]
    assert function_props["TracingConfig"] == {"Mode": "Active"}
    assert function_props["Timeout"] == config.lambda_timeout_s
    assert function_props["MemorySize"] == config.lambda_memory_mb
    # Powertools: the public layer whose ARN the public SSM parameter holds, resolved at deploy time.
    (layer,) = function_props["Layers"]
    parameter = template.to_json()["Parameters"][layer["Ref"]]
    assert parameter == {"Type": "AWS::SSM::Parameter::Value<String>", "Default": POWERTOOLS_SSM_PARAMETER}


def test_function_logs_json_to_a_log_group_kept_one_month(
    template: Template, resources: dict[str, Any], function_props: dict[str, Any]
) -> None:
    logging_config = function_props["LoggingConfig"]
    assert logging_config["LogFormat"] == "JSON"
    log_group_id = logging_config["LogGroup"]["Ref"]
    assert resources[log_group_id]["Properties"]["RetentionInDays"] == 30


def test_the_environment_wires_the_function_and_the_catalog_carries_the_job(
    function_props: dict[str, Any], resources: dict[str, Any], config: JobSpec, catalog: dict[str, Any]
) -> None:
    env = function_props["Environment"]["Variables"]
    expected = (set(contract.WIRING_ENV_VARS) - {contract.ENV_ATHENA_CATALOG}) | {
        "POWERTOOLS_SERVICE_NAME",
        "POWERTOOLS_METRICS_NAMESPACE",
    }
    expected |= set(contract.CAPACITY_ENV_VARS)  # the deployment's capacity budget (tests/stacks/test_capacity.py)
    assert set(env) == expected  # the wiring only: no query, no job setting (the catalog has them)
    assert env["POWERTOOLS_SERVICE_NAME"] == contract.SERVICE_NAME
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == contract.METRICS_NAMESPACE
    assert env[contract.ENV_JOB_NAME] == config.job_name
    spec = catalog[config.job_name]["spec"]  # the job's JobSpec as typed JSON, every key
    assert set(spec) == {field.name for field in dataclasses.fields(config)}
    assert spec["lease_duration_s"] == config.lease_duration_s
    assert spec["heartbeat_interval_s"] == config.heartbeat_interval_s
    assert spec["max_slot_age_s"] == config.max_slot_age_s
    assert spec["history_ttl_s"] == config.history_ttl_s
    assert spec["max_query_attempts"] == config.max_query_attempts
    assert spec["window_s"] == config.window_s
    assert spec["data_year"] == config.data_year
    assert spec["max_slot_lead_s"] == config.max_slot_lead_s
    assert spec["alarms"]["email"] is None  # stack-wide: not in a job's asset
    assert catalog[config.job_name]["spec"]["sql"] == config.sql
    # Names of deployed resources are references, never hard-coded physical names.
    referenced_types = {
        contract.ENV_LOCK_TABLE_NAME: "AWS::DynamoDB::Table",
        contract.ENV_RESULTS_TABLE_NAME: "AWS::DynamoDB::Table",
        contract.ENV_RESULTS_BUCKET_NAME: "AWS::S3::Bucket",
        contract.ENV_ATHENA_WORKGROUP: "AWS::Athena::WorkGroup",
        contract.ENV_ATHENA_DATABASE: "AWS::Glue::Database",
    }
    for variable, type_ in referenced_types.items():
        assert resources[env[variable]["Ref"]]["Type"] == type_, variable
    assert env[contract.ENV_LOCK_TABLE_NAME] != env[contract.ENV_RESULTS_TABLE_NAME]
    lock_table = resources[env[contract.ENV_LOCK_TABLE_NAME]["Ref"]]["Properties"]
    assert lock_table["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]


def test_function_async_retries_are_bounded_by_the_slot_age_and_failures_go_to_a_queue(
    template: Template, resources: dict[str, Any], function_id: str, config: JobSpec
) -> None:
    destination = Capture()
    template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {
            "FunctionName": {"Ref": function_id},
            "MaximumRetryAttempts": 2,
            "MaximumEventAgeInSeconds": config.max_slot_age_s,
            "DestinationConfig": {"OnFailure": {"Destination": destination}},
        },
    )
    queue_id, attribute = destination.as_object()["Fn::GetAtt"]
    assert attribute == "Arn"
    assert resources[queue_id]["Type"] == "AWS::SQS::Queue"


# --- the fan-out ------------------------------------------------------------------------------------


def test_racers_share_one_cron_and_get_the_scheduled_time(
    template: Template, function_id: str, config: JobSpec
) -> None:
    schedules = {
        logical_id: schedule
        for logical_id, schedule in template.find_resources("AWS::Scheduler::Schedule").items()
        if schedule["Properties"]["Target"]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
    }
    assert len(schedules) == config.racers == 3
    inputs = []
    for schedule in schedules.values():
        props = schedule["Properties"]
        assert props["ScheduleExpression"] == config.schedule_expression
        assert props["ScheduleExpression"].startswith("cron(")
        assert props.get("ScheduleExpressionTimezone", "UTC") in ("UTC", "Etc/UTC")
        assert props["FlexibleTimeWindow"] == {"Mode": "OFF"}
        assert props.get("State", "ENABLED") == "ENABLED"
        target = props["Target"]
        assert target["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
        assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0
        assert target["RetryPolicy"]["MaximumEventAgeInSeconds"] >= 60
        assert SCHEDULED_TIME in target["Input"]
        inputs.append(json.loads(target["Input"]))
    assert sorted(inputs, key=lambda event: event["racer"]) == [
        {"scheduled_time": SCHEDULED_TIME, "execution_id": EXECUTION_ID, "racer": racer, "job": config.job_name}
        for racer in range(config.racers)
    ]


def test_each_schedule_role_may_only_invoke_its_own_jobs_function(template: Template) -> None:
    schedules = template.find_resources("AWS::Scheduler::Schedule")
    # 3 racers for each of the 2 sample jobs, and the freshness watchdog's 2 (its own role, the same rule)
    assert len(schedules) == 8
    assert len([logical_id for logical_id in schedules if logical_id.startswith("Watchdog")]) == 2
    for logical_id, schedule in schedules.items():
        target = schedule["Properties"]["Target"]
        role_id, function_id = target["RoleArn"]["Fn::GetAtt"][0], target["Arn"]["Fn::GetAtt"][0]
        policies = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}})
        statements = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]
        assert {a for s in statements for a in as_list(s["Action"])} == {"lambda:InvokeFunction"}, logical_id
        invoked = set(re.findall(r'"Fn::GetAtt": \["([A-Za-z0-9]+)", "Arn"\]', json.dumps(statements)))
        assert invoked == {function_id}, logical_id


# --- the dashboard: tests/stacks/test_observability.py (one dashboard for the deployment) -----------------


def test_outputs_name_what_an_operator_needs(shared_template: Template, stack_templates: dict[str, Any]) -> None:
    outputs = shared_template.to_json()["Outputs"]
    for output_id in (
        "LockTableName",
        "ResultsTableName",
        "ResultsBucketName",
        "AthenaWorkgroupName",
        "DashboardName",
        "FailureQueueUrl",
        "JobLogGroupName",
    ):
        assert "Ref" in outputs[output_id]["Value"], output_id
    # A job's function is found in the job registry (one SSM parameter per job), never in an output per job.
    assert outputs["JobRegistryPath"]["Value"] == "/ScheduledAthenaRefresh/jobs/"
    named = [name for name in outputs if not name.startswith("PublishOutput")]  # CDK's weak cross-stack references
    assert not [
        name
        for name in named
        if name.startswith(("FunctionName", "JobNames", "FailureQueueUrl")) and name != "FailureQueueUrl"
    ]
    assert len(outputs) < 40  # whatever the number of jobs: one published output per shared value a job stack uses
    for name, template in stack_templates.items():
        if name != "ScheduledAthenaRefresh":
            assert not template.get("Outputs"), name


# --- configuration ----------------------------------------------------------------------------------


def test_cdk_json_job_block_is_valid(config: JobSpec) -> None:
    assert config.racers == 3
    assert config.removal_policy == "RETAIN"


@pytest.mark.parametrize(
    ("override", "key", "fragment"),
    [
        ({"racers": 0}, "racers", "must be an integer from 1 to 20, got 0"),
        ({"racers": 21}, "racers", "got 21"),
        ({"racers": True}, "racers", "got True"),
        ({"racers": "3"}, "racers", "got '3'"),
        ({"schedule_expression": "rate(30 minutes)"}, "schedule_expression", "rate(...) is rejected"),
        ({"schedule_expression": "cron(0/30 * * * *)"}, "schedule_expression", "6 fields"),
        ({"schedule_expression": "cron(0 12 * * * *)"}, "schedule_expression", "'?'"),
        ({"heartbeat_interval_s": 23, "lease_duration_s": 45}, "heartbeat_interval_s", "must be below"),
        ({"heartbeat_interval_s": 15, "lease_duration_s": 30}, "heartbeat_interval_s", "got 15"),
        ({"lease_duration_s": 0}, "lease_duration_s", "got 0"),
        ({"lambda_timeout_s": 901}, "lambda_timeout_s", "from 1 to 900"),
        ({"max_slot_age_s": 30}, "max_slot_age_s", "from 60 to 21600"),
        ({"sql": ""}, "sql", "non-empty"),
        ({"sql": "   "}, "sql", "non-empty"),
        ({"job_name": "a#b"}, "job_name", "got 'a#b'"),
        ({"database": "Flights-Demo"}, "database", "lowercase"),
        ({"removal_policy": "KEEP"}, "removal_policy", "one of RETAIN, DESTROY"),
        ({"racer_count": 3}, "racer_count", "unknown key"),
    ],
)
def test_invalid_context_names_the_key(
    job_context: dict[str, Any], override: dict[str, Any], key: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as excinfo:
        spec_from_context({**job_context, **override})
    message = str(excinfo.value)
    assert f"context job.{key}:" in message
    assert fragment in message
    assert isinstance(excinfo.value, ValueError)


def test_every_problem_is_reported_at_once(job_context: dict[str, Any]) -> None:
    broken = {**job_context, "racers": 0, "sql": ""}
    del broken["workgroup"]
    with pytest.raises(ConfigError) as excinfo:
        spec_from_context(broken)
    keys = sorted(problem.split(":")[0] for problem in excinfo.value.problems)
    assert keys == ["context job.racers", "context job.sql", "context job.workgroup"]


def test_missing_job_block_is_reported() -> None:
    with pytest.raises(ConfigError, match="context job: must be an object"):
        spec_from_context(None)


def test_removal_policy_destroy_is_accepted(job_context: dict[str, Any]) -> None:
    assert spec_from_context({**job_context, "removal_policy": "destroy"}).removal_policy == "DESTROY"


def test_missing_sample_data_dir_fails_with_a_hint(tmp_path: Path, sample_jobs_dir: Path) -> None:
    with pytest.raises(FileNotFoundError, match="make data"):
        app.build_app(sample_data_dir=tmp_path / "missing", jobs_dir=sample_jobs_dir)


# --- app.py without the CLI == `cdk synth` ----------------------------------------------------------

_ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")


@pytest.fixture
def repo_sample_data_dir() -> Iterator[Path]:
    """app.py's own data directory. Normally built by `make data`; if it is missing, a placeholder
    stands in for the duration of the test and is removed afterwards (never left for a deployment)."""
    data_dir = app.SAMPLE_DATA_DIR
    if data_dir.is_dir():
        yield data_dir
        return
    created = [path for path in (data_dir.parent.parent, data_dir.parent, data_dir) if not path.exists()]
    data_dir.mkdir(parents=True)
    placeholder = data_dir / ".synth-placeholder"
    placeholder.write_text("stand-in for flights.parquet during a synth test\n")
    try:
        yield data_dir
    finally:
        placeholder.unlink(missing_ok=True)
        for path in reversed(created):
            try:
                path.rmdir()  # only if still empty: never touches files written meanwhile
            except OSError:
                break


def _normalized_template(path: Path) -> dict[str, Any]:
    """The template without what legitimately differs between synths: metadata and asset hashes."""
    template = json.loads(path.read_text())
    resources = template.get("Resources", {})
    resources.pop("CDKMetadata", None)
    for resource in resources.values():
        resource.pop("Metadata", None)
    template.pop("Metadata", None)
    template.get("Conditions", {}).pop("CDKMetadataAvailable", None)
    # Another developer editing lambdas/ between the two synths changes the asset hash: not a difference.
    return json.loads(_ASSET_HASH.sub("<asset-hash>", json.dumps(template, sort_keys=True)))


@pytest.mark.slow
def test_python_app_and_cdk_cli_synthesize_the_same_template(tmp_path: Path, repo_sample_data_dir: Path) -> None:
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = "20"
    # cdk.json runs `python3 app.py`: make that the interpreter running these tests (the venv).
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    app_out, cli_out = tmp_path / "app.out", tmp_path / "cli.out"
    runs = {
        "python app.py": subprocess.Popen(
            [sys.executable, "app.py"],
            cwd=REPO_ROOT,
            env={**env, "CDK_OUTDIR": str(app_out)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ),
        "cdk synth": subprocess.Popen(
            [npx, "--no-install", "cdk", "synth", "-o", str(cli_out), "--quiet"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ),
    }
    for name, process in runs.items():
        output, _ = process.communicate(timeout=300)
        assert process.returncode == 0, f"{name} failed:\n{output}"

    names = sorted(path.name for path in app_out.glob("*.template.json"))
    assert (
        f"{app.STACK_NAME}.template.json" in names and len(names) == 65
    )  # the shared stack and cdk.json's 64 job stacks
    assert names == sorted(path.name for path in cli_out.glob("*.template.json"))
    for template_name in names:
        from_app = _normalized_template(app_out / template_name)
        from_cli = _normalized_template(cli_out / template_name)
        assert from_app.get("Resources", {}).keys() == from_cli.get("Resources", {}).keys(), template_name
        assert from_app == from_cli, template_name
