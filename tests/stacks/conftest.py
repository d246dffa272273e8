"""Shared fixtures of the stack tests: one synthesis per session (jsii's first synth costs seconds).

The stack is built from the two sample jobs' canonical copies (``tests/fixtures/jobs``, staged into a temporary
``jobs/``), never from the repository's ``jobs/``: a fork that adds, changes or deletes job folders keeps these
tests as they are. ``test_repo_jobs.py`` synthesizes the repository's own folders, whatever they are.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

import app
from athena_refresh.jobspec import JobSpec
from stacks import REPO_ROOT
from stacks.jobs import DEFAULT_LOCAL_JOB, JobDefinition, job_named
from stacks.stack_settings import STACK_KEY, load_context
from tests.sample_jobs import load_fixture_jobs, stage_repo
from tests.stacks import deployment_view
from tests.stacks.helpers import HANDLER, SHARED_BUDGET

JOB = DEFAULT_LOCAL_JOB  # the job whose resources the single-job fixtures below pick


@pytest.fixture(scope="session")
def jobs() -> tuple[JobDefinition, ...]:
    """The two sample jobs (carrier-on-time, flights-dashboard) from tests/fixtures/jobs."""
    return load_fixture_jobs()


@pytest.fixture(scope="session")
def job(jobs: tuple[JobDefinition, ...]) -> JobDefinition:
    return job_named(jobs, JOB)


@pytest.fixture(scope="session")
def job_context(job: JobDefinition) -> dict[str, Any]:
    """The flights job's settings as the flat mapping ``JobSpec.from_context`` validates (what the job
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
def config(job: JobDefinition) -> JobSpec:
    return job.config


@pytest.fixture(scope="session")
def sample_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Any:
    data_dir = tmp_path_factory.mktemp("flights")
    (data_dir / "placeholder.txt").write_text("stand-in for flights.parquet\n")
    return data_dir


@pytest.fixture(scope="session")
def sample_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stand-in repository: cdk.json and a ``jobs/`` holding exactly the two sample jobs (tests/fixtures/jobs)."""
    return stage_repo(tmp_path_factory.mktemp("repo"))


@pytest.fixture(scope="session")
def sample_jobs_dir(sample_repo: Path) -> Path:
    """The stand-in repository's ``jobs/``: the two sample jobs the stack below is built from."""
    return sample_repo / "jobs"


@pytest.fixture(scope="session")
def deployment(sample_data_dir: Any, sample_jobs_dir: Any) -> Any:
    """The deployment as ``app.py`` builds it (cdk.json context and feature flags) from the two sample jobs, with a
    stand-in data dir: the shared stack and the job stacks."""
    _, built = app.build_app(sample_data_dir=sample_data_dir, jobs_dir=sample_jobs_dir)
    return built


@pytest.fixture(scope="session")
def shared_budget_deployment(sample_data_dir: Any, sample_jobs_dir: Any) -> Any:
    """The same deployment sharing another deployment's capacity budget: cdk.json's ``capacity`` with
    :data:`~tests.stacks.helpers.SHARED_BUDGET` (its lock table and workgroups). One synthesis per session."""
    context = load_context(REPO_ROOT / "cdk.json")
    capacity = {**context[STACK_KEY]["capacity"], **SHARED_BUDGET}
    context[STACK_KEY] = {**context[STACK_KEY], "capacity": capacity}
    _, built = app.build_app(context=context, sample_data_dir=sample_data_dir, jobs_dir=sample_jobs_dir)
    return built


@pytest.fixture(scope="session")
def stack(deployment: Any) -> Any:
    """The shared stack (``ScheduledAthenaRefresh``)."""
    return deployment.shared


@pytest.fixture(scope="session")
def stack_templates(deployment: Any) -> dict[str, dict[str, Any]]:
    """Every stack's template by stack name."""
    return deployment_view.stack_templates(deployment)


@pytest.fixture(scope="session")
def shared_template(stack_templates: dict[str, dict[str, Any]]) -> Template:
    return Template.from_json(stack_templates[app.STACK_NAME])


@pytest.fixture(scope="session")
def job_template(deployment: Any, stack_templates: dict[str, dict[str, Any]]) -> Template:
    """The template of the job stack deploying the flights job."""
    return Template.from_json(stack_templates[deployment.stack_of(JOB).stack_name])


@pytest.fixture(scope="session")
def template(stack_templates: dict[str, dict[str, Any]]) -> Template:
    """Every stack of the deployment as one template, cross-stack references read as local ones
    (``tests.stacks.deployment_view``)."""
    return Template.from_json(deployment_view.merged_template(stack_templates))


@pytest.fixture(scope="session")
def catalog(deployment: Any) -> dict[str, Any]:
    """Each job's catalog entry as its own function's asset holds it: job -> {sql, parameters, constants, settings}."""
    from athena_refresh.catalog import CATALOG_FILE

    entries: dict[str, Any] = {}
    for job_stack in deployment.job_stacks.values():
        for name, asset_dir in job_stack.asset_dirs.items():
            jobs = json.loads((asset_dir / CATALOG_FILE).read_text(encoding="utf-8"))["jobs"]
            assert list(jobs) == [name], f"{name}'s asset must hold its own catalog entry only, got {list(jobs)}"
            entries[name] = jobs[name]
    return entries


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
