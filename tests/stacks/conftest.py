"""Shared fixtures of the stack tests: one synthesis per session (jsii's first synth costs seconds)."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest
from aws_cdk.assertions import Template

import app
from stacks import REPO_ROOT
from stacks.config import JobConfig
from stacks.jobs import DEFAULT_LOCAL_JOB, JobDefinition, job_named, load_repo_jobs
from tests.stacks.helpers import HANDLER

JOB = DEFAULT_LOCAL_JOB  # the job whose resources the single-job fixtures below pick


@pytest.fixture(scope="session")
def jobs() -> tuple[JobDefinition, ...]:
    return load_repo_jobs(REPO_ROOT)[1]


@pytest.fixture(scope="session")
def job(jobs: tuple[JobDefinition, ...]) -> JobDefinition:
    return job_named(jobs, JOB)


@pytest.fixture(scope="session")
def job_context(job: JobDefinition) -> dict[str, Any]:
    """The flights job's settings as the flat mapping ``JobConfig.from_context`` validates (what the job
    loader passes it: job.toml's keys plus the ones the folder, source and stack settings give)."""
    document = tomllib.loads((job.folder / "job.toml").read_text(encoding="utf-8"))
    values = {k: v for k, v in document.items() if k not in ("source", "schedule_timezone", "sample", "parameters")}
    config = job.config
    return {
        **values,
        "job_name": config.job_name,
        "sql": config.sql,
        "database": config.database,
        "table": config.table,
        "data_year": config.data_year,
        "workgroup": config.workgroup,
        "removal_policy": config.removal_policy,
    }


@pytest.fixture(scope="session")
def config(job: JobDefinition) -> JobConfig:
    return job.config


@pytest.fixture(scope="session")
def sample_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Any:
    data_dir = tmp_path_factory.mktemp("flights")
    (data_dir / "placeholder.txt").write_text("stand-in for flights.parquet\n")
    return data_dir


@pytest.fixture(scope="session")
def stack(sample_data_dir: Any) -> Any:
    """The stack as ``app.py`` builds it (cdk.json context and feature flags, jobs/), with a stand-in data dir."""
    _, built = app.build_app(sample_data_dir=sample_data_dir)
    return built


@pytest.fixture(scope="session")
def template(stack: Any) -> Template:
    return Template.from_stack(stack)


@pytest.fixture(scope="session")
def catalog(stack: Any) -> dict[str, Any]:
    """The job catalog bundled in the functions' asset: job -> {sql, parameters, constants, settings}."""
    from athena_refresh.catalog import CATALOG_FILE

    return dict(json.loads((stack.runtime_asset_dir / CATALOG_FILE).read_text(encoding="utf-8"))["jobs"])


@pytest.fixture(scope="session")
def resources(template: Template) -> dict[str, Any]:
    return template.to_json()["Resources"]


@pytest.fixture(scope="session")
def function_id(template: Template) -> str:
    """The flights job's function (one function per job; each job's resources are alike)."""
    from athena_refresh import contract

    functions = template.find_resources(
        "AWS::Lambda::Function",
        {"Properties": {"Handler": HANDLER, "Environment": {"Variables": {contract.ENV_JOB_NAME: JOB}}}},
    )
    assert len(functions) == 1, functions.keys()
    return next(iter(functions))


@pytest.fixture(scope="session")
def function_props(resources: dict[str, Any], function_id: str) -> dict[str, Any]:
    return resources[function_id]["Properties"]


@pytest.fixture(scope="session")
def function_role_id(function_props: dict[str, Any]) -> str:
    return function_props["Role"]["Fn::GetAtt"][0]


@pytest.fixture(scope="session")
def function_statements(template: Template, function_role_id: str) -> list[dict[str, Any]]:
    """Every IAM statement attached to the refresh function's role."""
    policies = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": function_role_id}]}})
    assert policies, f"no inline policy on {function_role_id}"
    return [
        statement for policy in policies.values() for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


@pytest.fixture(scope="session")
def results_bucket_id(function_props: dict[str, Any]) -> str:
    """The bucket holding data, query output and oversized results (the function's RESULTS_BUCKET_NAME)."""
    from athena_refresh import contract

    return function_props["Environment"]["Variables"][contract.ENV_RESULTS_BUCKET_NAME]["Ref"]
