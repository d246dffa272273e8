"""A job moves between job stacks safely by construction (issue 35): no physical name fixed in a job stack is the same
in two job stacks.

When ``stack.job_stacks`` grows (or a job's ``stack_group`` changes), a job's resources leave job stack A and are
created in job stack B. ``cdk deploy --all`` deploys the two stacks independently, in any order (``--concurrency``),
and within a stack CloudFormation creates new resources before it deletes old ones. A resource whose physical name
the template fixes (``Name``, ``FunctionName``, ``RoleName``, ``AlarmName``, ...) and that is unique in the account
and Region would be created in B while A's still exists, and fail ("already exists"). So the test synthesizes the
same jobs with 16 and with 64 job stacks (the sample jobs, which do move) and asserts that no fixed physical name of
a job stack appears in two different stacks across the two synths. Every resource type found in a job stack, and
every property of it whose name ends in ``Name``, must be judged below (a new one fails until it is).
CloudFormation "usually creates the replacement resource first" and deletes the old one after
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/using-cfn-updating-stacks-update-behaviors.html); a
resource removed from a template is deleted in the update's clean-up, after the new ones exist.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import app
from athena_refresh import contract
from athena_refresh.registry import named_job, registry_path
from stacks import REPO_ROOT
from stacks.job_groups import DEFAULT_JOB_STACKS, NEW_PROJECT_JOB_STACKS, group_stack_name, job_group
from stacks.stack_settings import STACK_KEY, load_context
from tests.sample_jobs import stage_jobs
from tests.stacks import deployment_view
from tests.stacks.helpers import PHYSICAL_NAME

#: The fixture jobs synthesized: with 16 and 64 job stacks, two of them at least are in different stacks (jump consistent
#: hashing moves about 3/4 of the jobs from 16 to 64 stacks, into the new ones).
JOBS = ("carrier-on-time", "flights-dashboard", "top-routes")
#: Resource types of a job stack that have no physical name (each type with one is in ``helpers.PHYSICAL_NAME``). An
#: inline policy's PolicyName is unique per role only, and the role is the job's own (a new one in the new stack):
#: https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-iam-policy.html
NAMELESS = frozenset({"AWS::IAM::Policy", "AWS::Lambda::EventInvokeConfig"})
#: Other ``...Name`` properties of those types: they name something else (a resource, a metric), not the resource.
REFERENCES: dict[str, frozenset[str]] = {
    "AWS::IAM::Policy": frozenset({"PolicyName"}),  # scoped to its role (above)
    "AWS::Lambda::EventInvokeConfig": frozenset({"FunctionName"}),  # the function it configures
    "AWS::Scheduler::Schedule": frozenset({"GroupName"}),  # the schedule group it is in
    "AWS::CloudWatch::Alarm": frozenset({"MetricName"}),  # the metric it watches
}


def _job_stacks_context(job_stacks: int) -> dict[str, Any]:
    context = load_context(REPO_ROOT / "cdk.json")
    context[STACK_KEY] = {**context[STACK_KEY], "job_stacks": job_stacks}
    return context


@pytest.fixture(scope="module")
def jobs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three fixture jobs, every one opted in to its own metrics (so its alarm is in the template too)."""
    staged = stage_jobs(tmp_path_factory.mktemp("moves"), JOBS)
    (staged / "defaults.toml").write_text("per_job_metrics = true\n", encoding="utf-8")
    return staged


@pytest.fixture(scope="module")
def synths(jobs_dir: Path, sample_data_dir: Path) -> dict[int, dict[str, dict[str, Any]]]:
    """job_stacks -> every stack's template by stack name, for 16 (an upgraded deployment) and 64 (a new one)."""
    built = {}
    for count in (DEFAULT_JOB_STACKS, NEW_PROJECT_JOB_STACKS):
        _, deployment = app.build_app(
            context=_job_stacks_context(count), jobs_dir=jobs_dir, sample_data_dir=sample_data_dir
        )
        built[count] = deployment_view.stack_templates(deployment)
    return built


def render(value: Any, stack: str) -> str:
    """A name as text, what makes it differ between stacks kept: ``{"Ref": "AWS::StackName"}`` is ``stack``, a
    ``Ref``/``Fn::GetAtt`` of the stack's own resource is ``<stack>/<logical id>``, a shared stack's output (a weak
    cross-stack reference or an import) is the same text in every stack, as a literal is."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref" and argument == "AWS::StackName":
            return stack
        if function == "Ref":  # another pseudo parameter (the same in every stack) or the stack's own resource
            return f"<{argument}>" if argument.startswith("AWS::") else f"<{stack}/{argument}>"
        if function == "Fn::GetAtt":
            return f"<{stack}/{argument[0]}.{argument[1]}>"
        if function == "Fn::Join":
            separator, parts = argument
            return separator.join(render(part, stack) for part in parts)
        if function == "Fn::GetStackOutput":
            return f"<output {argument['StackName']}.{argument['OutputName']}>"
        if function == "Fn::ImportValue":
            return f"<import {render(argument, stack)}>"
    raise AssertionError(f"cannot render the name {value!r}: judge this intrinsic in {__name__}.render")


def fixed_names(templates: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """Every physical name a job stack's template sets: rendered name -> (stack, logical id).

    :raises AssertionError: a resource type or a ``...Name`` property nobody judged (``helpers.PHYSICAL_NAME``,
        :data:`NAMELESS`, :data:`REFERENCES`), or one name twice.
    """
    names: dict[str, tuple[str, str]] = {}
    for stack, template in templates.items():
        if "-Jobs-" not in stack:
            continue
        for logical_id, resource in template.get("Resources", {}).items():
            type_ = resource["Type"]
            known = type_ in PHYSICAL_NAME or type_ in NAMELESS
            assert known, f"{stack}/{logical_id}: {type_}: judge its physical name in {__name__}"
            properties = resource.get("Properties", {})
            own = PHYSICAL_NAME.get(type_)
            unjudged = {key for key in properties if key.endswith("Name")} - {own} - REFERENCES.get(type_, frozenset())
            assert not unjudged, f"{stack}/{logical_id}: {type_}.{sorted(unjudged)}: judge it in {__name__}"
            if own is not None and own in properties:
                name = render(properties[own], stack)
                assert name not in names, f"{name} set twice: {names[name]} and {(stack, logical_id)}"
                names[name] = (stack, logical_id)
    return names


def collisions(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The fixed names that are in one job stack in ``before`` and in another in ``after`` (the deploy from
    ``before`` to ``after`` would create one where the other still exists), one line each."""
    old, new = fixed_names(before), fixed_names(after)
    return sorted(
        f"{name}: {old[name][0]} -> {new[name][0]}" for name in old.keys() & new.keys() if old[name][0] != new[name][0]
    )


def _stack_of_each_job(templates: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Each job's stack: where its function (``JOB_NAME`` in its environment) is."""
    return {
        resource["Properties"]["Environment"]["Variables"][contract.ENV_JOB_NAME]: stack
        for stack, template in templates.items()
        if "-Jobs-" in stack
        for resource in template.get("Resources", {}).values()
        if resource["Type"] == "AWS::Lambda::Function"
    }


def test_no_fixed_physical_name_changes_job_stack_when_job_stacks_grows(
    synths: dict[int, dict[str, dict[str, Any]]],
) -> None:
    before, after = synths[DEFAULT_JOB_STACKS], synths[NEW_PROJECT_JOB_STACKS]
    # the jobs' resources did change stack (what a deploy of the second synth over the first does)
    old_stacks, new_stacks = _stack_of_each_job(before), _stack_of_each_job(after)
    assert sorted(old_stacks) == sorted(new_stacks) == list(JOBS)
    assert len([job for job in JOBS if old_stacks[job] != new_stacks[job]]) >= 2, (old_stacks, new_stacks)
    # the only names a job stack fixes are the registry parameters, one per job, and none collides
    for templates in (before, after):
        names = fixed_names(templates)
        assert {templates[stack]["Resources"][lid]["Type"] for stack, lid in names.values()} == {"AWS::SSM::Parameter"}
        assert sorted(named_job(registry_path(app.STACK_NAME), name) or "" for name in names) == list(JOBS)
    assert collisions(before, after) == []
    assert collisions(after, before) == []  # lowering job_stacks again (a move back) is safe too


def test_the_check_catches_a_registry_name_without_the_job_stack(synths: dict[int, dict[str, dict[str, Any]]]) -> None:
    """The negative control: the same synths with the registry names as they were before (``/<shared>/jobs/<job>``,
    no group) collide on every moved job."""
    path = registry_path(app.STACK_NAME)

    def without_group(templates: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        rewritten = copy.deepcopy(templates)
        for template in rewritten.values():
            for resource in template.get("Resources", {}).values():
                if resource["Type"] == "AWS::SSM::Parameter":
                    name = resource["Properties"]["Name"]
                    resource["Properties"]["Name"] = f"{path}{named_job(path, name)}"
        return rewritten

    found = collisions(without_group(synths[DEFAULT_JOB_STACKS]), without_group(synths[NEW_PROJECT_JOB_STACKS]))
    groups = {job: (job_group(job, DEFAULT_JOB_STACKS), job_group(job, NEW_PROJECT_JOB_STACKS)) for job in JOBS}
    assert found == [
        f"{path}{job}: {group_stack_name(old)} -> {group_stack_name(new)}"
        for job, (old, new) in sorted(groups.items())
        if old != new
    ]
    assert found  # the jobs that move


def test_an_unjudged_physical_name_fails_the_check() -> None:
    """A new resource type in a job stack, or a new ``...Name`` property, must be judged before the check passes."""
    rule = {"S-Jobs-01": {"Resources": {"E": {"Type": "AWS::Events::Rule", "Properties": {"Name": "r"}}}}}
    with pytest.raises(AssertionError, match="AWS::Events::Rule: judge its physical name"):
        fixed_names(rule)
    # a type with a physical name: its name is collected, so a move of it is judged
    queue = {"S-Jobs-01": {"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "q"}}}}}
    assert fixed_names(queue) == {"q": ("S-Jobs-01", "Q")}
    assert collisions(queue, {"S-Jobs-02": queue["S-Jobs-01"]}) == ["q: S-Jobs-01 -> S-Jobs-02"]
    role = {"S-Jobs-01": {"Resources": {"R": {"Type": "AWS::IAM::Role", "Properties": {"PathName": "x"}}}}}
    with pytest.raises(AssertionError, match=r"AWS::IAM::Role\.\['PathName'\]: judge it"):
        fixed_names(role)
    # a name built from the stack's own name differs by stack; a literal one does not
    named = {"Ref": "AWS::StackName"}
    assert render({"Fn::Join": ["-", [named, "x"]]}, "S-Jobs-01") == "S-Jobs-01-x"
    assert render("fixed", "S-Jobs-01") == render("fixed", "S-Jobs-02")
