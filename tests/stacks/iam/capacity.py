"""The capacity budget's paths (issue 24) in the conformance world: the semaphore's calls and the deferral.

The synthesized job functions run with the budget on (their catalogs' ``capacity.permits`` 10), so every winner of the other
scenarios already takes a permit (one ``BatchGetItem`` of the permits and the tickets item, one ``UpdateItem`` of a
permit), records its query on it in the ``record_state`` transaction and releases it in the commit transaction:
:func:`assert_permit_taken_and_released` checks that the live scenario did. :func:`run_deferral_scenario` adds the
path no other scenario reaches: a winner that finds every permit held by other owners, waits in line past
``capacity.wait_in_place_s`` (1 s here, in a copy of the job's catalog, on the lock's clock: the runtime's capacity sleep is a fake that moves
that clock) and gives the slot back, so the real :class:`athena_refresh.permits.SchedulerDeferral` sends
``scheduler.CreateSchedule`` to moto (target: the job's own function; role: the job's Scheduler role, which
``iam:PassRole`` must allow). Then the schedule's re-invocation: its ``Input`` as the event, once the permits are
free, ``retry_delay_s`` later: the slot is taken over, takes a permit and commits with its wait in the summary.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3

from athena_refresh import contract
from athena_refresh.catalog import CATALOG_FILE
from slotlock import Permit, PermitOwner, Semaphore, Slot
from slotlock import table as lock_table
from slotlock._expressions import PERMIT_RENEW_UPDATE
from tests.stacks.iam.recorder import RecordedCall
from tests.stacks.iam.scenarios import ConformanceWorld, refresh_principal
from tests.stacks.iam.template import REGION

PK = lock_table.PARTITION_KEY

#: The scenarios' names in the recorded calls.
WAITER = "capacity: waits, gives the slot back"
REINVOKED = "capacity: re-invoked by the deferral schedule"
#: Longest wait in place of the waiting scenario (seconds on the lock's clock, which the fake sleep moves).
WAIT_IN_PLACE_S = 1
#: Other owners' permits expire this long after the real now (the scenarios' lock clock is days behind it).
SEEDED_PERMIT_TTL_S = 3600


def semaphore_of(world: ConformanceWorld, job: str) -> Semaphore:
    """The job's semaphore as its function's environment names it and its catalog counts its permits (the
    set-up's client: not recorded)."""
    env = world.resolved.function_environment(world.refresh_functions[job])
    return Semaphore(
        world.lock_table,
        env[contract.ENV_CAPACITY_SEMAPHORE_NAME],
        world.capacity_budget(job).permits,
        client=boto3.client("dynamodb", region_name=REGION),
    )


@contextlib.contextmanager
def every_permit_held_by_others(world: ConformanceWorld, job: str) -> Iterator[list[Permit]]:
    """Every permit of the job's semaphore taken by other owners (``slotlock.Semaphore.try_acquire``, as their
    winners would), given back when the block ends. The earlier scenarios must have given every permit back."""
    semaphore = semaphore_of(world, job)
    permits, _ = semaphore.read()
    held = [p.key for p in permits if not p.free]
    assert not held, f"permits still held after the earlier scenarios: {held}"
    expires_at_ms = time.time_ns() // 1_000_000 + SEEDED_PERMIT_TTL_S * 1000
    seeded: list[Permit] = []
    for index in range(semaphore.permits):
        owner = PermitOwner(f"other-job-{index}", Slot(1_800_000_000))
        got = semaphore.try_acquire(owner, 1, expires_at_ms)
        assert isinstance(got, Permit), f"seeding permit {index}: {got}"
        seeded.append(got)
    try:
        yield seeded
    finally:
        for permit in seeded:
            semaphore.release(permit)


def run_deferral_scenario(world: ConformanceWorld, job: str, slot_iso: str) -> dict[str, Any]:
    """The waiter gives the slot back (a one-time schedule), then the schedule's re-invocation commits it.
    Returns the schedule as moto stored it (``GetSchedule``, the set-up's client: not recorded)."""
    from athena_refresh import deferral

    # The runtime caches its Scheduler client per execution environment: one built by another test module (its
    # own region, its own mock) must not stand in for this deployment's.
    deferral.scheduler_client.cache_clear()
    slot = Slot.parse(slot_iso)
    world.lock_clock.set(slot.epoch_ms + 2_000)
    event = {"scheduled_time": slot_iso, "job": job}
    with every_permit_held_by_others(world, job), tempfile.TemporaryDirectory() as tuned:
        # The job's own catalog with a short wait in place (the budget's numbers are the catalog's, not the env's).
        document = json.loads(world.job_catalog_paths[job].read_text(encoding="utf-8"))
        document["capacity"] = {**document["capacity"], "wait_in_place_s": WAIT_IN_PLACE_S}
        catalog = Path(tuned) / CATALOG_FILE
        catalog.write_text(json.dumps(document), encoding="utf-8")
        outcome = world.invoke_refresh(
            job,
            event,
            WAITER,
            env={contract.ENV_JOB_CATALOG_PATH: str(catalog)},
            capacity_sleep_s=world.lock_clock.advance,
        )
    assert (outcome["status"], outcome["reason"]) == ("deferred", "capacity"), outcome
    details = outcome["details"]
    assert details["deferrals"] == 1 and details["waited_ms"] >= 1000, details
    env = world.resolved.function_environment(world.refresh_functions[job])
    group = env[contract.ENV_DEFERRAL_SCHEDULE_GROUP]
    schedule = boto3.client("scheduler", region_name=REGION).get_schedule(GroupName=group, Name=details["schedule"])
    assert schedule["ActionAfterCompletion"] == "DELETE", schedule
    # The Scheduler delivers the schedule's input to its target retry_delay_s later: the same slot, taken over
    # (the waiter's lease was given back), now with free permits.
    world.lock_clock.set(details["back_at_ms"])
    back = world.invoke_refresh(job, json.loads(schedule["Target"]["Input"]), REINVOKED)
    assert back["status"] == "succeeded" and back["takeover"], back
    return dict(schedule)


def assert_deferral_schedule(world: ConformanceWorld, job: str, calls: list[RecordedCall]) -> None:
    """The waiter's one ``CreateSchedule``: named with the job's prefix, in its group, invoking its own function
    with its Scheduler role, deleted after its one run; no query started."""
    env = world.resolved.function_environment(world.refresh_functions[job])
    function_arn = world.resolved.get_att(world.refresh_functions[job], "Arn")
    waiter = [call for call in calls if call.scenario == WAITER]
    made = [(call.service, call.operation) for call in waiter]
    assert ("athena", "StartQueryExecution") not in made, made
    (create,) = [call for call in waiter if call.operation == "CreateSchedule"]
    params = create.params
    assert params["Name"].startswith(env[contract.ENV_DEFERRAL_SCHEDULE_PREFIX]), params["Name"]
    assert params["GroupName"] == env[contract.ENV_DEFERRAL_SCHEDULE_GROUP], params
    assert params["ActionAfterCompletion"] == "DELETE", params
    assert params["Target"]["Arn"] == function_arn, (params["Target"], function_arn)
    assert params["Target"]["RoleArn"] == env[contract.ENV_DEFERRAL_ROLE_ARN], params["Target"]
    assert json.loads(params["Target"]["Input"])["capacity_deferral"] == 1, params["Target"]


def assert_permit_taken_and_released(world: ConformanceWorld, job: str, calls: list[RecordedCall]) -> None:
    """The live winner's semaphore calls: one consistent ``BatchGetItem`` of every permit and the tickets item,
    one ``UpdateItem`` taking a permit (renewing it only before its query is recorded: the record sets an expiry
    covering the invocation),
    the permit in the ``record_state`` transaction and in the commit's."""
    semaphore = semaphore_of(world, job)
    keys = {lock_table.permit_key(semaphore.name, i) for i in range(semaphore.permits)}
    live = [call for call in calls if call.scenario == "live"]
    reads = [call for call in live if call.operation == "BatchGetItem"]
    assert len(reads) == 1, [call.describe() for call in reads]
    (request,) = reads[0].params["RequestItems"].values()
    assert request.get("ConsistentRead") is True, request
    read_keys = {key[PK]["S"] for key in request["Keys"]}
    assert read_keys == keys | {lock_table.tickets_key(semaphore.name)}, read_keys
    take, *renewals = [c for c in live if c.operation == "UpdateItem" and c.params["Key"][PK]["S"] in keys]
    assert "#acquired = :now" in take.params["UpdateExpression"], take.params
    transactions = [c for c in live if c.operation == "TransactWriteItems"]
    assert len(transactions) == 2, [c.describe() for c in transactions]  # record_state, then the commit
    # The permit follows the lease (a heartbeat due right before the start renews both) until its query is recorded;
    # the record (in record_state) sets an expiry covering the invocation, so it is never renewed after (issue 31),
    # whatever the query's length: the live scenario's later heartbeats renew the lease only.
    record_at = live.index(transactions[0])
    late = [c.params["UpdateExpression"] for c in renewals if live.index(c) > record_at]
    assert late == [], late
    assert all(c.params["UpdateExpression"] == PERMIT_RENEW_UPDATE for c in renewals), renewals
    lease_renewals = [
        c for c in live[record_at:] if c.operation == "UpdateItem" and c.params["Key"][PK]["S"].startswith("lock#")
    ]
    assert lease_renewals, "the live scenario's query must outlast a heartbeat after its record"
    for transaction in transactions:
        items = transaction.params["TransactItems"]
        permits = [item for item in items if _key(item) in keys]
        assert len(permits) == 1, items


def _key(transact_item: dict[str, Any]) -> str | None:
    ((_, request),) = transact_item.items()
    key = request.get("Key") or request.get("Item") or {}
    return key.get(PK, {}).get("S")


def principal_calls(world: ConformanceWorld, job: str) -> list[RecordedCall]:
    return world.recorder.of(refresh_principal(job))
