"""IAM conformance of a deployment sharing another deployment's capacity budget (issue 31, finding 3).

The same machinery as ``test_iam_conformance.py`` (the real handlers on moto, every call recorded per principal and
evaluated with moto's IAM policy evaluator against the synthesized policies), for the sample deployment with cdk.json
``capacity.table_name`` and ``capacity.shared_workgroups`` (``shared_budget_deployment``). A module of its own: its
world is a second deployment of the same stacks, with the same physical names, on a moto of its own.

What it proves, with the calls the code really makes (:mod:`tests.stacks.iam.shared_budget`): each job role may read
the state of another deployment's query in a workgroup named in ``shared_workgroups`` (and the waiter reclaims that
query's expired permit once it ended), may NOT read one in a workgroup not named (the world answers
``AccessDeniedException`` as AWS would, and the waiter goes on: not reclaimable now), may do nothing else on the named
workgroups, and every other call it made is allowed.
"""

from __future__ import annotations

from typing import Any

import pytest

from athena_refresh import contract
from tests.stacks import deployment_view
from tests.stacks.iam import shared_budget
from tests.stacks.iam.permissions import Permission, permissions_for
from tests.stacks.iam.scenarios import refresh_principal
from tests.stacks.iam.shared_budget import NAMED_WORKGROUP, UNNAMED_WORKGROUP, SharedBudgetRecord, workgroup_arn
from tests.stacks.iam.template import ResolvedTemplate, evaluate, grant_used, grants

SID = "SharedCapacityQueryStatus"

# Each job's function runs in this one process, one after the other: Powertools warns that the job dimension changes.
pytestmark = pytest.mark.filterwarnings("ignore:Dimension 'job' has already been added")


@pytest.fixture(scope="module")
def shared(shared_budget_deployment: Any) -> SharedBudgetRecord:
    templates = deployment_view.stack_templates(shared_budget_deployment)
    resolved = ResolvedTemplate(deployment_view.merged_template(templates), shared_budget_deployment.shared.stack_name)
    return shared_budget.record(resolved, shared_budget_deployment)


def test_a_waiter_reads_the_named_workgroups_query_and_reclaims_its_permit(shared: SharedBudgetRecord) -> None:
    for job, run in shared.runs.items():
        # GIVEN every permit held; permit 0 expired naming a query in a workgroup not named, permit 1 expired naming an
        # ended query in the other deployment's (named) workgroup
        # WHEN the waiter ran / THEN it asked about both, in index order: the refusal did not end it
        assert [call.params["QueryExecutionId"] for call in shared_budget.reads_of(shared, job)][:2] == [
            run.unnamed_query,
            run.named_query,
        ], job
        # AND it reclaimed permit 1 (the ended query's), committed its slot and gave the permit back in the commit
        assert run.outcome["status"] == "succeeded", run.outcome
        assert run.permits_after[1] == (None, None), run.permits_after
        # AND permit 0 stays the third deployment's, naming its query: not reclaimed while it cannot be read
        assert run.permits_after[0] == (run.seeded_owners[0], run.unnamed_query), run.permits_after


def test_the_role_may_read_a_query_in_a_named_workgroup_and_not_in_another(shared: SharedBudgetRecord) -> None:
    # GIVEN the waiter's recorded reads of the two expired permits' queries
    for job, run in shared.runs.items():
        principal = refresh_principal(job)
        policies = shared.policies(principal)
        reads = {call.params["QueryExecutionId"]: call for call in shared_budget.reads_of(shared, job)}
        (named,) = permissions_for(reads[run.named_query], shared.world.athena)
        (unnamed,) = permissions_for(reads[run.unnamed_query], shared.world.athena)
        # THEN GetQueryExecution is authorized on each query's workgroup: allowed on the named one...
        assert (named.action, named.resource) == ("athena:GetQueryExecution", workgroup_arn(NAMED_WORKGROUP))
        assert evaluate(named, policies).allowed, evaluate(named, policies).detail
        # ...and only thanks to the shared-workgroups statement
        without = [{**d, "Statement": [s for s in _statements(d) if s.get("Sid") != SID]} for d in policies]
        assert not evaluate(named, without).allowed
        # AND denied on a workgroup not named: the refusal the world answered, as AWS would
        verdict = evaluate(unnamed, policies)
        assert unnamed.resource == workgroup_arn(UNNAMED_WORKGROUP)
        assert not verdict.allowed and verdict.detail == (
            f"missing: a statement allowing athena:GetQueryExecution on {workgroup_arn(UNNAMED_WORKGROUP)}"
        )


def test_the_named_workgroups_grant_only_query_state(shared: SharedBudgetRecord) -> None:
    # GIVEN each job role of the deployment sharing the budget
    # WHEN it would start, read the results of, or stop a query in the other deployment's workgroup / THEN denied
    for job in shared.runs:
        policies = shared.policies(refresh_principal(job))
        for action in ("athena:StartQueryExecution", "athena:GetQueryResults", "athena:StopQueryExecution"):
            permission = Permission(action, workgroup_arn(NAMED_WORKGROUP), "never made")
            assert not evaluate(permission, policies).allowed, (job, action)


def test_every_other_recorded_call_is_allowed_and_the_new_grant_is_used(shared: SharedBudgetRecord) -> None:
    # GIVEN every call each job's waiter made (its lock, the other deployment's lock table, Athena, the results)
    # THEN each is allowed but the one refused on purpose, and the new statement served a recorded call
    denied: list[str] = []
    for job, run in shared.runs.items():
        principal = refresh_principal(job)
        policies = shared.policies(principal)
        used: list[Permission] = []
        for call in shared.recorder.of(principal):
            if call.operation == "GetQueryExecution" and call.params["QueryExecutionId"] == run.unnamed_query:
                continue  # refused on purpose (above)
            for permission in permissions_for(call, shared.world.athena):
                used.append(permission)
                verdict = evaluate(permission, policies)
                if not verdict.allowed:
                    denied.append(f"{principal}: {permission.describe()}: {verdict.detail}")
        # the shared-workgroups grant on the other deployment's workgroup served a recorded call
        (grant,) = [g for g in grants(policies) if g[0] == SID and g[2] == workgroup_arn(NAMED_WORKGROUP)]
        assert grant_used(grant, used), grant
        env = shared.world.resolved.function_environment(shared.world.refresh_functions[job])
        assert env[contract.ENV_CAPACITY_TABLE_NAME] == shared_budget.OTHER_TABLE
    assert not denied, "denied on AWS:\n" + "\n".join(sorted(denied))


def _statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    statement = document["Statement"]
    return statement if isinstance(statement, list) else [statement]
