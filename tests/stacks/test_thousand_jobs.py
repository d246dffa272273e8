"""A thousand jobs deploy (issue 35), shown without synthesizing 1,000 jobs (make test stays fast; the full synth of
300 and 1,000 jobs is measured in docs/performance.md#a-thousand-jobs):

- a new project's cdk.json sets ``stack.job_stacks`` to 64 (:data:`~stacks.job_groups.NEW_PROJECT_JOB_STACKS`); a
  cdk.json without the key keeps the 16 every earlier deployment deployed with, so no job moves on upgrade;
- each job is 10 CloudFormation resources without its own metrics (11 with its alarm), counted on the synthesized
  sample jobs; a job stack adds nothing of its own;
- the plan: 1,000 job names jump-hashed over 64 stacks, the fullest stack's jobs x the resources and template bytes
  per job, against CloudFormation's 500 resources, 1 MB, 200 outputs and 200 parameters per template
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html);
- the account quotas that grow with jobs: IAM roles (2 per job) and the busiest minute's racers, each one line
  saying what to request when over (stacks.account_quotas).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import aws_cdk as cdk

from stacks import REPO_ROOT, account_quotas, quotas
from stacks.job_groups import DEFAULT_JOB_STACKS, NEW_PROJECT_JOB_STACKS, group_jobs
from stacks.stack_settings import STACK_KEY, StackSettings, load_context

THOUSAND = [f"fd-{i:04d}" for i in range(1, 1001)]
#: Other spellings of a thousand names (a team's prefix, words): the plan must fit for names in general.
OTHER_NAMES = [f"team-{i % 7}-report-{i}" for i in range(1000)]
MAX_TEMPLATE_PARAMETERS = 200  # CloudFormation: parameters per template
JOB_RESOURCES = (
    10  # function, its role and policy, async-invoke config, Scheduler role and policy, 3 schedules, registry
)
OPT_IN_RESOURCES = JOB_RESOURCES + 1  # + NoRecentSuccess


def _resources_of_job(job_stack: cdk.Stack, job_name: str) -> int:
    construct = job_stack.node.find_child(f"Job-{job_name}")
    return sum(1 for node in construct.node.find_all() if isinstance(node, cdk.CfnResource))


def test_a_new_projects_cdk_json_sets_64_job_stacks_and_an_absent_key_keeps_16() -> None:
    stack = load_context(REPO_ROOT / "cdk.json")[STACK_KEY]
    assert stack["job_stacks"] == NEW_PROJECT_JOB_STACKS == 64
    without = {key: value for key, value in stack.items() if key != "job_stacks"}
    assert StackSettings.from_context(without).job_stacks == DEFAULT_JOB_STACKS == 16  # what it deployed with


def test_a_job_is_ten_resources_without_opt_in_and_a_job_stack_adds_none(deployment: Any) -> None:
    for job_stack in deployment.job_stacks.values():
        total = quotas.count(job_stack).resources
        assert total == sum(_resources_of_job(job_stack, name) for name in job_stack.jobs)  # nothing per stack
        for name in job_stack.jobs:
            assert _resources_of_job(job_stack, name) == JOB_RESOURCES, name


def test_a_thousand_jobs_fit_64_job_stacks_within_cloudformations_quotas(
    deployment: Any, stack_templates: dict[str, dict[str, Any]]
) -> None:
    # the template bytes of one job, measured on the synthesized sample job stacks (the largest per job)
    per_job_bytes = max(
        len(json.dumps(stack_templates[stack.stack_name])) / len(stack.jobs)
        for stack in deployment.job_stacks.values()
        if stack.jobs
    )
    for names in (THOUSAND, OTHER_NAMES):
        groups = group_jobs([(name, None, name) for name in names], NEW_PROJECT_JOB_STACKS)
        fullest = max(len(members) for members in groups.values())
        assert sum(len(members) for members in groups.values()) == 1000
        assert fullest * OPT_IN_RESOURCES <= quotas.MAX_RESOURCES  # every job opted in still fits
        assert fullest * per_job_bytes <= quotas.MAX_TEMPLATE_BYTES / 2
        # 16 stacks, as before: the fullest is over 500 (what issue 35 measured)
        old = max(len(m) for m in group_jobs([(n, None, n) for n in names], DEFAULT_JOB_STACKS).values())
        assert old * JOB_RESOURCES > quotas.MAX_RESOURCES
    # job stacks declare no output; the shared stack's outputs and every template's parameters do not grow with jobs
    for name, template in stack_templates.items():
        assert len(template.get("Parameters", {})) <= 2, name  # CDK's BootstrapVersion
        if "-Jobs-" in name:
            assert template.get("Outputs", {}) == {}, name
    assert len(stack_templates[deployment.shared.stack_name].get("Outputs", {})) < quotas.MAX_OUTPUTS
    assert MAX_TEMPLATE_PARAMETERS > 2


def test_synth_counts_two_roles_per_job_and_says_what_to_request_at_a_thousand_jobs(deployment: Any) -> None:
    shared_roles = account_quotas.count_roles([deployment.shared])
    for job_stack in deployment.job_stacks.values():
        assert account_quotas.count_roles([job_stack]) == 2 * len(job_stack.jobs)
    roles = shared_roles + 2 * 1000
    half_hourly = [account_quotas.ScheduledJob("cron(0/30 * * * ? *)", "UTC", 3)] * 1000
    busiest = account_quotas.busiest_minute(half_hourly)
    assert busiest == account_quotas.BusiestMinute(3000, account_quotas.REFERENCE_WEEK_START)
    role_line, lambda_line = account_quotas.quota_lines(roles=roles, busiest=busiest, jobs=1000)
    assert ": OVER; request 'Roles per account' of at least" in role_line and account_quotas.IAM_QUOTAS_URL in role_line
    assert f"{busiest.racers} racers start in the busiest minute" in lambda_line
    assert ": OVER; request 'Concurrent executions' of at least 3000" in lambda_line
    assert account_quotas.LAMBDA_QUOTAS_URL in lambda_line
    # the sample deployment: within both
    assert deployment.account_quota_warnings() == []


def test_the_busiest_minute_adds_the_racers_of_the_jobs_firing_together() -> None:
    jobs = [
        account_quotas.ScheduledJob("cron(0 * * * ? *)", "UTC", 3),  # hourly at :00
        account_quotas.ScheduledJob("cron(0/30 * * * ? *)", "UTC", 2),  # :00 and :30
        account_quotas.ScheduledJob("cron(15 6 * * ? *)", "America/New_York", 5),  # 11:15 UTC in January
    ]
    busiest = account_quotas.busiest_minute(jobs)
    assert busiest.racers == 5 and busiest.at is not None and busiest.at.minute == 0
    # the daily New York job fires at 06:15 EST, 11:15 UTC, on the reference week's first day (a Monday in January)
    alone = account_quotas.busiest_minute(jobs[2:])
    assert alone == account_quotas.BusiestMinute(5, dt.datetime(2027, 1, 4, 11, 15, tzinfo=dt.UTC))
    assert account_quotas.busiest_minute([]) == account_quotas.BusiestMinute(0, None)
