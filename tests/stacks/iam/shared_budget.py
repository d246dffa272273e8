"""A deployment sharing another deployment's capacity budget (issue 31, finding 3) in the conformance world.

The deployment is the sample one with cdk.json ``capacity.table_name`` (the other deployment's lock table holds the
permits) and ``capacity.shared_workgroups`` (that deployment's workgroups), ``tests.stacks.helpers.SHARED_BUDGET``.
Its job functions run with their real handlers on moto, as their own principals, under a :class:`CallRecorder`.

The scenario, once per job: every permit of the budget is held by other deployments' slots. Permit 0 expired naming
a query in a workgroup *not* named (a third deployment's), permit 1 expired naming an ended query in the other
deployment's workgroup (named), the rest are live. The waiter asks ``GetQueryExecution`` about the expired permits'
queries in index order (``slotlock.Semaphore``: lazily, until one is reclaimable). The world enforces IAM on that
call as AWS does (:func:`iam_enforced`): a call the principal's policies do not allow is answered
``AccessDeniedException`` (moto enforces none), so the waiter meets the refusal AWS would give, treats that permit as
not reclaimable now, reads the named workgroup's query, reclaims permit 1, and runs and commits its slot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import moto
import pytest
from botocore.exceptions import ClientError

from athena_refresh import contract, deferral
from slotlock import Permit, PermitOwner, Semaphore, Slot, create_lock_table
from tests.stacks.helpers import SHARED_BUDGET
from tests.stacks.iam.permissions import ACCOUNT, PARTITION, AthenaWorld, permissions_for
from tests.stacks.iam.recorder import CallRecorder, RecordedCall
from tests.stacks.iam.scenarios import ConformanceWorld, refresh_principal
from tests.stacks.iam.template import REGION, ResolvedTemplate, evaluate

OTHER_TABLE = str(SHARED_BUDGET["table_name"])
#: The other deployment's workgroup (named in ``shared_workgroups``), and a third deployment's (not named).
NAMED_WORKGROUP = str(SHARED_BUDGET["shared_workgroups"][0])
UNNAMED_WORKGROUP = "unnamed-deployment-wg"
SCENARIO = "shared budget: a waiter meets other deployments' expired permits"
#: The seeded permits' expiry, relative to the slot (the lock's clock reads the slot + 2 s when the waiter runs).
EXPIRED_MS, LIVE_MS = -60_000, 3_600_000


@dataclass
class Reclaim:
    """One job's run of the scenario: the two queries the expired permits named, the handler's answer, the seeded
    owners (index -> owner id) and the permits as they were read back afterwards (index -> (owner, query id))."""

    unnamed_query: str
    named_query: str
    outcome: dict[str, Any]
    seeded_owners: dict[int, str]
    permits_after: dict[int, tuple[str | None, str | None]]


@dataclass
class SharedBudgetRecord:
    world: ConformanceWorld
    recorder: CallRecorder
    runs: dict[str, Reclaim] = field(default_factory=dict)

    def policies(self, principal: str) -> list[dict[str, Any]]:
        job = principal.split(":", 1)[1]
        resolved = self.world.resolved
        return resolved.role_policies(resolved.function_role(self.world.refresh_functions[job]))


def workgroup_arn(name: str) -> str:
    return f"arn:{PARTITION}:athena:{REGION}:{ACCOUNT}:workgroup/{name}"


def iam_enforced(world: ConformanceWorld) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """An answer refusing the call just recorded with ``AccessDeniedException`` when the acting principal's policies
    do not allow one of its permissions (as AWS would), else ``None``: moto answers it."""

    def answer(params: dict[str, Any]) -> dict[str, Any] | None:
        call: RecordedCall = world.recorder.calls[-1]  # recorded just before it is answered
        job = call.principal.split(":", 1)[1]
        policies = world.resolved.role_policies(world.resolved.function_role(world.refresh_functions[job]))
        for permission in permissions_for(call, world.athena):
            if not evaluate(permission, policies).allowed:
                message = f"not authorized to perform: {permission.action} on resource: {permission.resource}"
                error = {"Code": "AccessDeniedException", "Message": message}
                raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, call.operation)
        return None

    return answer


def _other_deployments(world: ConformanceWorld) -> None:
    """The other deployment's lock table (holding the permits), its workgroup and a third deployment's workgroup,
    with their output locations (set-up: not recorded)."""
    create_lock_table(boto3.client("dynamodb", region_name=REGION), OTHER_TABLE)
    athena = boto3.client("athena", region_name=REGION)
    outputs = {name: f"s3://{name}-results/athena/" for name in (NAMED_WORKGROUP, UNNAMED_WORKGROUP)}
    for name, output in outputs.items():
        athena.create_work_group(Name=name, Configuration={"ResultConfiguration": {"OutputLocation": output}})
    world.athena = AthenaWorld(
        {**world.athena.output_locations, **outputs}, world.athena.tables, world.athena.query_workgroups
    )


def _seed(semaphore: Semaphore, slot: Slot, queries: Mapping[int, str]) -> list[Permit]:
    """Every permit held by other deployments' slots; those of ``queries`` (index -> query id) expired naming it."""
    seeded = []
    for i in range(semaphore.permits):
        got = semaphore.try_acquire(PermitOwner(f"other-deployment-{i}", slot), 1, slot.epoch_ms + LIVE_MS)
        assert isinstance(got, Permit), got
        seeded.append(got)
    for permit in seeded:
        if permit.index in queries:
            semaphore.record_query(permit, queries[permit.index])
            semaphore.renew(permit, slot.epoch_ms + EXPIRED_MS)
    return seeded


def run_reclaim_scenario(world: ConformanceWorld, job: str, slot_iso: str) -> Reclaim:
    """One job's waiter against the seeded budget (see the module doc)."""
    env = world.resolved.function_environment(world.refresh_functions[job])
    assert env[contract.ENV_CAPACITY_TABLE_NAME] == OTHER_TABLE, env[contract.ENV_CAPACITY_TABLE_NAME]
    slot = Slot.parse(slot_iso)
    athena = boto3.client("athena", region_name=REGION)
    unnamed, named = (
        athena.start_query_execution(QueryString="SELECT 1", WorkGroup=wg)["QueryExecutionId"]
        for wg in (UNNAMED_WORKGROUP, NAMED_WORKGROUP)
    )
    semaphore = Semaphore(
        OTHER_TABLE,
        env[contract.ENV_CAPACITY_SEMAPHORE_NAME],
        world.capacity_budget(job).permits,  # the budget's numbers: the job's catalog
        client=boto3.client("dynamodb", region_name=REGION),
        clock_ms=lambda: slot.epoch_ms - 120_000,
    )
    seeded = _seed(semaphore, slot, {0: unnamed, 1: named})
    world.lock_clock.set(slot.epoch_ms + 2_000)
    # A wait costs no real time (the capacity sleep moves the lock's clock), and a deferral (were the permit not
    # reclaimed) would use a Scheduler client of this mock, not one cached by another test module.
    deferral.scheduler_client.cache_clear()
    event = {"scheduled_time": slot_iso, "job": job}
    outcome = world.invoke_refresh(job, event, SCENARIO, capacity_sleep_s=world.lock_clock.advance)
    permits, _ = semaphore.read()
    after = {p.index: (p.owner, p.query_execution_id) for p in permits}
    for permit in seeded:  # give the others' permits back for the next job's run (permit 1 was reclaimed: "gone")
        semaphore.release(permit)
    owners = {permit.index: permit.owner.id for permit in seeded}
    return Reclaim(unnamed, named, dict(outcome), owners, after)


def record(resolved: ResolvedTemplate, deployment: Any) -> SharedBudgetRecord:
    """Stand the deployment up on moto (with the other deployments' table and workgroups) and run the scenario for
    every job; everything recorded, the mock torn down before returning."""
    recorder = CallRecorder()
    with pytest.MonkeyPatch.context() as patch, moto.mock_aws(), recorder.installed():
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION,
        }.items():
            patch.setenv(name, value)
        patch.delenv("AWS_PROFILE", raising=False)
        job_assets = {job: Path(d) for group in deployment.job_stacks.values() for job, d in group.asset_dirs.items()}
        world = ConformanceWorld(
            resolved, recorder, job_assets=job_assets, read_asset=Path(deployment.shared.runtime_asset_dir)
        )
        world.create()
        _other_deployments(world)
        recorder.answer("athena", "GetQueryExecution", iam_enforced(world))
        found = SharedBudgetRecord(world, recorder)
        for job in sorted(world.refresh_functions):
            found.runs[job] = run_reclaim_scenario(world, job, world.job_slots(job, 1)[-1])
    return found


def reads_of(found: SharedBudgetRecord, job: str) -> list[RecordedCall]:
    """The job's recorded ``GetQueryExecution`` calls, in order."""
    return [c for c in found.recorder.of(refresh_principal(job)) if c.operation == "GetQueryExecution"]
