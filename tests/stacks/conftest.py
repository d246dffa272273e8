"""Shared fixtures of the stack tests: one synthesis per session (jsii's first synth costs seconds)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template

import app
from stacks import REPO_ROOT
from stacks.config import CONTEXT_KEY, JobConfig, load_context
from tests.stacks.helpers import HANDLER


@pytest.fixture(scope="session")
def job_context() -> dict[str, Any]:
    return load_context(REPO_ROOT / "cdk.json")[CONTEXT_KEY]


@pytest.fixture(scope="session")
def config(job_context: dict[str, Any]) -> JobConfig:
    return JobConfig.from_context(job_context)


@pytest.fixture(scope="session")
def sample_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Any:
    data_dir = tmp_path_factory.mktemp("flights")
    (data_dir / "placeholder.txt").write_text("stand-in for flights.parquet\n")
    return data_dir


@pytest.fixture(scope="session")
def template(sample_data_dir: Any) -> Template:
    """The stack as ``app.py`` builds it (cdk.json context and feature flags), with a stand-in data dir."""
    _, stack = app.build_app(sample_data_dir=sample_data_dir)
    return Template.from_stack(stack)


@pytest.fixture(scope="session")
def resources(template: Template) -> dict[str, Any]:
    return template.to_json()["Resources"]


@pytest.fixture(scope="session")
def function_id(template: Template) -> str:
    functions = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": HANDLER}})
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
