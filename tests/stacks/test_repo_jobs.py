"""The repository's own job folders, whatever they are: a fork's jobs/ synthesizes (cdk-nag included) into one
function, one set of schedules, one alarm and one registry parameter per folder, in the job stack its group names.

Every other stack test builds the two sample jobs from tests/fixtures/jobs; this file alone reads jobs/, and
computes what to expect from the folders present (``.ci/run`` runs it a second time with one more folder).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import app
from athena_refresh import contract
from athena_refresh.registry import parameter_name, registry_path
from stacks.job_groups import group_stack_name, job_group
from stacks.jobs import JobDefinition, load_repo_jobs
from stacks.stack_settings import STACK_KEY, StackSettings, load_context
from tests.sample_jobs import REPO_JOBS_DIR, REPO_ROOT, repo_job_names
from tests.stacks import deployment_view
from tests.stacks.helpers import HANDLER, of_job, of_type


@pytest.fixture(scope="module")
def repo_jobs() -> dict[str, JobDefinition]:
    return {job.job_name: job for job in load_repo_jobs(REPO_ROOT)[1]}


@pytest.fixture(scope="module")
def repo_template(tmp_path_factory: pytest.TempPathFactory, sample_data_dir: Path) -> dict[str, Any]:
    """A full ``app.synth()`` of jobs/ as it is (cdk-nag raises on any unacknowledged finding)."""
    cdk_app, deployment = app.build_app(
        sample_data_dir=sample_data_dir, outdir=tmp_path_factory.mktemp("repo-assembly"), jobs_dir=REPO_JOBS_DIR
    )
    assert deployment.quota_problems() == []
    cdk_app.synth()
    return deployment_view.merged_template(deployment_view.stack_templates(deployment))


def test_every_job_folder_is_one_job_of_the_stack(
    repo_template: dict[str, Any], repo_jobs: dict[str, JobDefinition]
) -> None:
    names = repo_job_names()
    job_stacks = StackSettings.from_context(load_context(REPO_ROOT / "cdk.json")[STACK_KEY]).job_stacks
    assert sorted(repo_jobs) == names != []
    resources, outputs = repo_template["Resources"], repo_template["Outputs"]
    stack_of = repo_template[deployment_view.STACK_OF]
    functions = {
        res["Properties"]["Environment"]["Variables"][contract.ENV_JOB_NAME]
        for res in of_type(resources, "AWS::Lambda::Function").values()
        if res["Properties"].get("Handler") == HANDLER
    }
    assert functions == set(names)
    schedules = of_type(resources, "AWS::Scheduler::Schedule")
    watchdog = [logical_id for logical_id in schedules if logical_id.startswith("Watchdog")]  # its 2 racers
    assert len(schedules) - len(watchdog) == sum(job.config.racers for job in repo_jobs.values())
    for name, job in repo_jobs.items():
        mine = of_type(of_job(resources, name), "AWS::Scheduler::Schedule")
        assert len(mine) == job.config.racers, name
        assert {s["Properties"]["ScheduleExpression"] for s in mine.values()} == {job.config.schedule_expression}
        assert {s["Properties"]["ScheduleExpressionTimezone"] for s in mine.values()} == {job.schedule_timezone}
        # NoRecentSuccess: only for a job that opts in to its own metrics (issue 35)
        assert len(of_type(of_job(resources, name), "AWS::CloudWatch::Alarm")) == int(job.config.per_job_metrics), name
        [(parameter_id, parameter)] = of_type(of_job(resources, name), "AWS::SSM::Parameter").items()
        group = job_group(name, job_stacks, job.config.stack_group)
        assert parameter["Properties"]["Name"] == parameter_name(registry_path(app.STACK_NAME), name, group)
        assert stack_of[parameter_id] == group_stack_name(group) == stack_of[next(iter(mine))]
    assert not [key for key in outputs if key.startswith(("FunctionName", "FailureQueueUrl-", "JobNames"))]
    # Shared whatever the jobs: one lock table and one results table, one workgroup, one dashboard.
    assert len(of_type(resources, "AWS::DynamoDB::Table")) == 2
    assert len(of_type(resources, "AWS::Athena::WorkGroup")) == 1
    assert len(of_type(resources, "AWS::CloudWatch::Dashboard")) == 1
