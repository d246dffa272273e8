"""300 jobs in one deployment (slow: one synth of 300 copies of the sample job, about 2 to 3 minutes on 2 cores).

The synth runs cdk-nag on every stack (a finding raises); cfn-lint lints the shared template and the fullest job
stack's. Every template stays within
CloudFormation's quotas; the dashboard is the same size as with two jobs; each job's grants are still its own.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import app
from athena_refresh import contract
from athena_refresh.registry import parameter_name, registry_path
from stacks import REPO_ROOT, quotas
from stacks.constructs.dashboard import JOB_PLACEHOLDER
from stacks.job_groups import NEW_PROJECT_JOB_STACKS, job_group
from tests.sample_jobs import FIXTURE_JOBS_DIR
from tests.stacks import deployment_view
from tests.stacks.helpers import HANDLER, as_list, of_type

JOBS = 300
TEMPLATE = "flights-dashboard"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scaled(tmp_path_factory: pytest.TempPathFactory, sample_data_dir: Path) -> tuple[Any, Path, dict[str, Any]]:
    """The deployment of 300 copies of the sample job (fd-001 .. fd-300), synthesized into a temporary assembly."""
    root = tmp_path_factory.mktemp("scaled")
    shutil.copy(REPO_ROOT / "cdk.json", root / "cdk.json")
    jobs_dir = root / "jobs"
    for index in range(1, JOBS + 1):
        shutil.copytree(FIXTURE_JOBS_DIR / TEMPLATE, jobs_dir / f"fd-{index:03d}")
    outdir = root / "cdk.out"
    started = time.monotonic()
    cdk_app, deployment = app.build_app(sample_data_dir=sample_data_dir, outdir=outdir, jobs_dir=jobs_dir)
    built = time.monotonic()
    assert deployment.quota_problems() == []
    counted = time.monotonic()
    cdk_app.synth()  # cdk-nag: raises ValidationFailed on any unacknowledged finding
    synthesized = time.monotonic()
    templates = {  # the assembly's templates (no second synthesis)
        stack.stack_name: json.loads((outdir / f"{stack.stack_name}.template.json").read_text(encoding="utf-8"))
        for stack in deployment.stacks
    }
    merged = deployment_view.merged_template(templates)
    print(  # -s shows where the time goes
        f"build {built - started:.1f} s, quota counts {counted - built:.1f} s, synth {synthesized - counted:.1f} s,"
        f" merge {time.monotonic() - synthesized:.1f} s"
    )
    return deployment, outdir, merged


def test_every_template_is_within_cloudformations_quotas(scaled: tuple[Any, Path, dict[str, Any]]) -> None:
    deployment, outdir, _ = scaled
    # a new project's cdk.json: 64 job stacks (issue 35); 300 jobs leave none empty
    assert len(deployment.job_stacks) == NEW_PROJECT_JOB_STACKS and all(
        stack.jobs for stack in deployment.job_stacks.values()
    )
    assert sum(len(stack.jobs) for stack in deployment.job_stacks.values()) == JOBS
    for path in outdir.glob("*.template.json"):
        template = json.loads(path.read_text())
        assert len(template.get("Resources", {})) <= quotas.MAX_RESOURCES, path.name
        assert len(template.get("Outputs", {})) <= quotas.MAX_OUTPUTS, path.name
        assert path.stat().st_size <= quotas.MAX_TEMPLATE_BYTES, path.name


def test_cfn_lint_passes_on_the_shared_and_the_fullest_job_template(scaled: tuple[Any, Path, dict[str, Any]]) -> None:
    """Every job stack is the same construct repeated per job, so the fullest one (most jobs, largest template) is
    the worst case; linting all 65 templates takes over two minutes here (``make lint`` lints every template
    of the repository's own jobs)."""
    _, outdir, _ = scaled
    paths = sorted(outdir.glob("*.template.json"))
    assert len(paths) == 1 + NEW_PROJECT_JOB_STACKS
    fullest = max((p for p in paths if "-Jobs-" in p.name), key=lambda p: p.stat().st_size)
    templates = [str(outdir / f"{app.STACK_NAME}.template.json"), str(fullest)]
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    result = subprocess.run(
        [str(cfn_lint), "--config-file", str(REPO_ROOT / ".cfnlintrc"), *templates],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_shared_stack_keeps_its_name_tables_and_one_dashboard_of_constant_size(
    scaled: tuple[Any, Path, dict[str, Any]],
) -> None:
    deployment, _, merged = scaled
    assert deployment.shared.stack_name == "ScheduledAthenaRefresh"
    resources, stack_of = merged["Resources"], merged[deployment_view.STACK_OF]
    tables = of_type(resources, "AWS::DynamoDB::Table")
    assert sorted(tables) == ["LockTableD8114E48", "ResultsTable7B2FF7F9"]
    assert {stack_of[table] for table in tables} == {"ScheduledAthenaRefresh"}
    ((dashboard_id, dashboard),) = of_type(resources, "AWS::CloudWatch::Dashboard").items()
    body = "".join(
        part if isinstance(part, str) else "0" for part in dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    )
    parsed = json.loads(body)
    assert len(parsed["widgets"]) == 13  # as with two jobs (tests/stacks/test_observability.py)
    custom = [w for w in parsed["widgets"] if w["type"] == "custom"]
    assert [w["properties"]["params"] for w in custom] == [{"view": "overview"}]
    (variable,) = parsed["variables"]
    # a pattern variable (free text, issue 35): no list of job names in the template
    assert variable["type"] == "pattern" and variable["pattern"] == JOB_PLACEHOLDER
    assert not re.search(r"fd-(?!001)\d{3}", body)  # no job but the default is named in the dashboard
    assert stack_of[dashboard_id] == "ScheduledAthenaRefresh"


def test_each_job_keeps_grants_of_its_own(scaled: tuple[Any, Path, dict[str, Any]]) -> None:
    _, _, merged = scaled
    resources = merged["Resources"]
    functions = {
        res["Properties"]["Environment"]["Variables"][contract.ENV_JOB_NAME]: logical_id
        for logical_id, res in of_type(resources, "AWS::Lambda::Function").items()
        if res["Properties"].get("Handler") == HANDLER
    }
    assert len(functions) == JOBS
    roles = {resources[fid]["Properties"]["Role"]["Fn::GetAtt"][0] for fid in functions.values()}
    assert len(roles) == JOBS  # one execution role per job
    # Each job's schedules assume a role that may invoke that job's function alone.
    for logical_id, schedule in of_type(resources, "AWS::Scheduler::Schedule").items():
        target = schedule["Properties"]["Target"]
        role_id, function_id = target["RoleArn"]["Fn::GetAtt"][0], target["Arn"]["Fn::GetAtt"][0]
        statements = [
            statement
            for policy in of_type(resources, "AWS::IAM::Policy").values()
            if {"Ref": role_id} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]
        assert {a for s in statements for a in as_list(s["Action"])} == {"lambda:InvokeFunction"}, logical_id
        invoked = set(re.findall(r'"Fn::GetAtt": \["([A-Za-z0-9]+)", "Arn"\]', json.dumps(statements)))
        assert invoked == {function_id}, logical_id
    # One registry parameter per job, named after it and its job stack's group.
    names = sorted(p["Properties"]["Name"] for p in of_type(resources, "AWS::SSM::Parameter").values())
    path = registry_path(app.STACK_NAME)
    assert names == sorted(parameter_name(path, job, job_group(job, NEW_PROJECT_JOB_STACKS)) for job in functions)
