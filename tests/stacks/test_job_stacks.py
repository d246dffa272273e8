"""The deployment's layout: which stack deploys which job, CloudFormation's quotas, and what one job's edit touches.

- the assignment of jobs to job stacks is stable: adding or removing a job never moves another, pinning works,
  and raising ``stack.job_stacks`` moves jobs only into the new stacks (jump consistent hashing);
- a stack over a quota stops ``app.main`` with one line (the stack, the quota, the count, what to do), exit 2;
- editing one job folder (its query or a setting) changes one job stack's template and that job's asset only.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

import app
from athena_refresh.checks import ConfigError
from stacks import quotas
from stacks.job_groups import NEW_PROJECT_JOB_STACKS, group_jobs, group_stack_name, job_group, jump_hash, name_key
from tests.sample_jobs import stage_jobs
from tests.stacks import deployment_view

NAMES = [f"job-{i:03d}" for i in range(400)]
#: The job stacks of the repository's cdk.json (a new project's: issue 35), which the deployments below are built with.
K = NEW_PROJECT_JOB_STACKS


def test_jump_hash_spreads_names_evenly_and_is_stable() -> None:
    groups = group_jobs([(name, None, name) for name in NAMES], 16)
    sizes = sorted(len(members) for members in groups.values())
    assert sum(sizes) == 400 and sizes[0] >= 12 and sizes[-1] <= 40  # 25 on average
    # The same name always lands in the same group (SHA-256 of the name, not Python's salted hash()).
    assert job_group("flights-dashboard", 16) == jump_hash(name_key("flights-dashboard"), 16)
    assert [job_group(name, 16) for name in NAMES] == [job_group(name, 16) for name in NAMES]


def test_adding_or_removing_jobs_never_moves_another() -> None:
    before = {name: job_group(name, 16) for name in NAMES[:300]}
    after = {name: job_group(name, 16) for name in NAMES[100:]}  # 100 removed, 100 added
    assert all(after[name] == before[name] for name in NAMES[100:300])


def test_more_job_stacks_move_jobs_only_into_the_new_stacks() -> None:
    moved = {name: job_group(name, 20) for name in NAMES if job_group(name, 20) != job_group(name, 16)}
    assert set(moved.values()) <= set(range(16, 20))
    assert 0 < len(moved) < len(NAMES) * 0.3  # about 4/20 of them


def test_a_pinned_job_goes_to_its_group_and_a_group_out_of_range_is_refused(tmp_path: Path) -> None:
    assert job_group("flights-dashboard", 16, explicit=3) == 3
    with pytest.raises(ValueError, match="stack_group"):
        job_group("flights-dashboard", 16, explicit=16)
    jobs_dir = stage_jobs(tmp_path)
    toml = jobs_dir / "flights-dashboard" / "job.toml"
    toml.write_text(f"stack_group = {K}\n" + toml.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        app.build_app(jobs_dir=jobs_dir, sample_data_dir=tmp_path)
    (problem,) = caught.value.problems
    assert problem.startswith("jobs/flights-dashboard/job.toml:1: stack_group: must be below the number of job stacks")


def test_the_deployment_is_the_shared_stack_and_every_groups_stack(deployment: Any) -> None:
    assert deployment.shared.stack_name == app.STACK_NAME == "ScheduledAthenaRefresh"
    assert [stack.stack_name for stack in deployment.stacks[1:]] == [group_stack_name(g) for g in range(K)]
    for name in ("flights-dashboard", "carrier-on-time"):
        assert deployment.stack_of(name).stack_name == group_stack_name(job_group(name, K))
    # A group without jobs is an empty stack: cdk deploy skips it, or deletes it once its last job is gone.
    empty = [stack for stack in deployment.job_stacks.values() if not stack.jobs]
    assert len(empty) >= K - 2
    assert all(not Template.from_stack(stack).to_json().get("Resources") for stack in empty)


def test_every_job_stack_depends_on_the_shared_stack_only(deployment: Any) -> None:
    for stack in deployment.job_stacks.values():
        expected = [deployment.shared.stack_name] if stack.jobs else []
        assert [dependency.stack_name for dependency in stack.dependencies] == expected


def test_a_stack_over_a_quota_stops_the_synth_with_one_line(
    tmp_path: Path, sample_data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs_dir = stage_jobs(tmp_path)
    monkeypatch.setattr(quotas, "MAX_RESOURCES", 9)  # each sample job's stack has 10 (64 job stacks, no opt-in)
    err = io.StringIO()
    assert app.main(jobs_dir=jobs_dir, err=err) == app.EXIT_INVALID_CONFIG
    lines = [line for line in err.getvalue().splitlines() if not line.startswith(("warning: ", "note: "))]
    assert len(lines) >= 1 and all(line.startswith("stack ") for line in lines), lines
    job_line = next(line for line in lines if "-Jobs-" in line)
    assert "resources, over CloudFormation's 9 per template" in job_line
    assert "stack.job_stacks" in job_line and "stack_group" in job_line and "Traceback" not in err.getvalue()


def test_quota_lines_name_the_stack_the_count_and_what_to_do() -> None:
    counts = [
        quotas.StackCount("ScheduledAthenaRefresh-Jobs-03", resources=512, outputs=0, jobs=46),
        quotas.StackCount("ScheduledAthenaRefresh", resources=50, outputs=201),
        quotas.StackCount("ScheduledAthenaRefresh-Jobs-04", resources=500, outputs=200, jobs=45),
    ]
    problems = quotas.count_problems(counts, job_stacks=16)
    assert problems == [
        (
            "stack ScheduledAthenaRefresh-Jobs-03: 512 resources, over CloudFormation's 500 per template "
            f"({quotas.QUOTAS_URL}): raise cdk.json context stack.job_stacks (now 16) or pin some of its 46 jobs to "
            "another stack with `stack_group = N` in their job.toml, or lower their racers"
        ),
        (
            f"stack ScheduledAthenaRefresh: 201 outputs, over CloudFormation's 200 per template ({quotas.QUOTAS_URL}): "
            "report it as a bug (the app declares no output per job)"
        ),
    ]
    (line,) = quotas.size_problems({"ScheduledAthenaRefresh-Jobs-01": 1_000_001, "X": 10}, job_stacks=16)
    assert line.startswith("stack ScheduledAthenaRefresh-Jobs-01: template of 1,000,001 bytes, over")


def _snapshot(jobs_dir: Path, sample_data_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Each stack's template (JSON text) and each function's asset hash, by stack name and function id."""
    _, deployment = app.build_app(jobs_dir=jobs_dir, sample_data_dir=sample_data_dir)
    templates = deployment_view.stack_templates(deployment)
    code = {
        f"{name}/{logical_id}": json.dumps(resource["Properties"]["Code"], sort_keys=True)
        for name, template in templates.items()
        for logical_id, resource in template.get("Resources", {}).items()
        if resource["Type"] == "AWS::Lambda::Function"
    }
    assert code
    return {name: json.dumps(t, sort_keys=True) for name, t in templates.items()}, code


def test_editing_one_job_changes_one_job_stack_and_its_own_asset_only(tmp_path: Path, sample_data_dir: Path) -> None:
    jobs_dir = stage_jobs(tmp_path / "before")
    before, before_code = _snapshot(jobs_dir, sample_data_dir)
    query = jobs_dir / "flights-dashboard" / "query.sql"
    query.write_text(query.read_text(encoding="utf-8").replace("SELECT", "SELECT /* edited */", 1), encoding="utf-8")
    toml = jobs_dir / "flights-dashboard" / "job.toml"
    text = toml.read_text(encoding="utf-8")
    assert "lambda_memory_mb = 256\n" in text
    toml.write_text(text.replace("lambda_memory_mb = 256\n", "lambda_memory_mb = 512\n"), encoding="utf-8")
    after, after_code = _snapshot(jobs_dir, sample_data_dir)

    changed = sorted(name for name in before if before[name] != after[name])
    assert changed == [group_stack_name(job_group("flights-dashboard", K))]
    changed_code = sorted(key for key in before_code if before_code[key] != after_code[key])
    assert len(changed_code) == 1 and "Jobflightsdashboard" in changed_code[0]


def test_removing_the_last_job_of_a_group_empties_its_stack(tmp_path: Path, sample_data_dir: Path) -> None:
    jobs_dir = stage_jobs(tmp_path)
    keep = "flights-dashboard"
    for folder in jobs_dir.iterdir():
        if folder.is_dir() and folder.name != keep:
            shutil.rmtree(folder)
    _, deployment = app.build_app(jobs_dir=jobs_dir, sample_data_dir=sample_data_dir)
    templates = deployment_view.stack_templates(deployment)
    non_empty = sorted(name for name, template in templates.items() if template.get("Resources"))
    assert non_empty == [app.STACK_NAME, deployment.stack_of(keep).stack_name]
