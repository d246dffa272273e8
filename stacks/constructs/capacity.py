"""The Athena capacity budget's wiring of one job function (issue 24): its environment, its grants and their
cdk-nag acknowledgment.

The budget (cdk.json ``context.stack.capacity``, :class:`~stacks.stack_settings.CapacitySettings`) is the same for
every job of the deployment, so every job's catalog carries its numbers (``stacks.runtime_asset``: the catalog's
``capacity`` section) and every job function gets its wiring, ``contract.CAPACITY_ENV_VARS`` (changing the budget
updates every job stack). The runtime bounds the active queries with ``slotlock.Semaphore`` on the lock table (permit items
``permit#<name>#<i>`` and ``tickets#<name>``), and a slot that waited too long for a permit is given back and comes
back ``retry_delay_s`` later through a one-time EventBridge Scheduler schedule (``at(...)``,
``ActionAfterCompletion: DELETE``) whose target is the job's own function and whose role is the job's Scheduler role
(the racers' role, which may invoke that function only).

Least privilege, while the budget is on (``permits`` > 0; off, the runtime makes none of these calls and the role
gets none of them):

- ``dynamodb:BatchGetItem`` on the lock table (one strongly consistent read of the permits and the tickets item),
  added to the lock grant (:data:`~slotlock_cdk.grants.SEMAPHORE_TABLE_ACTIONS`); the permit and
  ticket writes are ``UpdateItem``, which the lock grant has;
- ``scheduler:CreateSchedule`` on ``arn:<partition>:scheduler:<region>:<account>:schedule/default/<prefix>*``:
  the job's own deferral schedules only (:func:`deferral_schedule_prefix`). No ``scheduler:DeleteSchedule``: the
  schedule deletes itself after its one invocation;
- ``iam:PassRole`` of the job's Scheduler role only, and only to EventBridge Scheduler (``iam:PassedToService``):
  CreateSchedule passes the schedule's role.
  https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoneventbridgescheduler.html
- with a budget shared by several deployments: ``dynamodb`` item actions on the lock table holding the permits
  (``capacity.table_name``, statement ``SharedCapacityTableItems``), and ``athena:GetQueryExecution`` (only that
  action) on the other deployments' workgroups (``capacity.shared_workgroups``, statement
  ``SharedCapacityQueryStatus``, :func:`shared_workgroup_statement`): the waiter's reclaim check of an expired
  permit that names another deployment's query.

Every one of these grants is used by a recorded call of the IAM conformance test (tests/stacks/test_iam_conformance.py:
each job's winner takes a permit; one slot per job waits, gives the slot back and creates its deferral schedule;
tests/stacks/test_iam_conformance_shared.py: a waiter of a deployment sharing another's budget reads the query of an
expired permit in a named workgroup and reclaims it, and may not read one in a workgroup not named).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

from stacks.nag import acknowledge, wildcard_finding
from stacks.stack_settings import DEFERRAL_SCHEDULE_GROUP, CapacitySettings

#: A Scheduler schedule's name: 1 to 64 of ``[0-9a-zA-Z-_.]`` (CreateSchedule's ``Name``,
#: https://docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateSchedule.html; botocore's scheduler model).
SCHEDULE_NAME = re.compile(r"[0-9a-zA-Z_.-]{1,64}")
#: The deferral prefix's length bound: the runtime appends its own part (slot, generation, attempt) to at most
#: 64 characters, so it keeps at least 40.
MAX_DEFERRAL_SCHEDULE_PREFIX = 24
DEFERRAL_PREFIX_HEX_DIGITS = 12  # 48 bits of SHA-256: two jobs of one account colliding is negligible
SCHEDULER_SERVICE = "scheduler.amazonaws.com"
DEFERRAL_ACTIONS = ("scheduler:CreateSchedule",)
PASS_ROLE_ACTIONS = ("iam:PassRole",)
#: On another deployment's lock table (``capacity.table_name``): what the semaphore sends there (one consistent
#: BatchGetItem; the tickets item's creation is a PutItem; takes, renewals, releases are UpdateItem, also inside the
#: record_state and commit transactions, which IAM authorizes per item and action).
SHARED_TABLE_ACTIONS = ("dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")
#: On the other deployments' workgroups (``capacity.shared_workgroups``): the reclaim check's one call. Not
#: StartQueryExecution, not GetQueryResults: a job never runs or reads another deployment's queries.
SHARED_WORKGROUP_ACTIONS = ("athena:GetQueryExecution",)


def deferral_schedule_prefix(deployment: str, job_name: str) -> str:
    """``sar-`` + the first 12 hex digits of the SHA-256 of ``<deployment>/<job>`` + ``-`` (17 characters): the
    names of one job's deferral schedules, and what its function may create (deterministic, short, and without the
    job's name, which may be 64 characters long).

    :param deployment: the shared stack's name (``ScheduledAthenaRefresh``): two deployments in one account get
        different prefixes for the same job.
    """
    digest = hashlib.sha256(f"{deployment}/{job_name}".encode()).hexdigest()[:DEFERRAL_PREFIX_HEX_DIGITS]
    prefix = f"sar-{digest}-"
    assert len(prefix) <= MAX_DEFERRAL_SCHEDULE_PREFIX and SCHEDULE_NAME.fullmatch(prefix), prefix
    return prefix


def default_semaphore_name() -> str:
    """``<AWS::AccountId>-<AWS::Region>`` as CloudFormation tokens: every deployment in one account and Region shares
    one budget, as they share Athena's active-query quota."""
    return f"{cdk.Aws.ACCOUNT_ID}-{cdk.Aws.REGION}"


def deferral_schedule_arn(stack: cdk.Stack, prefix: str) -> str:
    """The ARN pattern of the schedules named ``<prefix>*`` in the ``default`` group of the stack's account and
    Region."""
    return stack.format_arn(
        service="scheduler", resource="schedule", resource_name=f"{DEFERRAL_SCHEDULE_GROUP}/{prefix}*"
    )


def capacity_statements(stack: cdk.Stack, *, prefix: str, deferral_role: iam.IRole) -> list[iam.PolicyStatement]:
    """The deferral's statements (the semaphore's ``BatchGetItem`` is in the lock grant): see the module doc."""
    return [
        iam.PolicyStatement(
            sid="CapacityDeferralSchedules",
            actions=list(DEFERRAL_ACTIONS),
            resources=[deferral_schedule_arn(stack, prefix)],
        ),
        iam.PolicyStatement(
            sid="CapacityDeferralPassRole",
            actions=list(PASS_ROLE_ACTIONS),
            resources=[deferral_role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": SCHEDULER_SERVICE}},
        ),
    ]


def shared_workgroup_statement(stack: cdk.Stack, workgroups: Sequence[str]) -> iam.PolicyStatement:
    """``athena:GetQueryExecution`` on the other deployments' workgroups (``capacity.shared_workgroups``), in the
    stack's account and Region (Athena's active-query quota is per account and Region, so the deployments sharing
    one budget are always there).

    Serves the runtime's reclaim check (``athena_refresh.reclaim.ReclaimCheck``, the ``query_is_terminal`` of
    ``slotlock.Semaphore.try_acquire``): ``AthenaQueryEngine.get_query`` sends ``GetQueryExecution`` for the query an
    expired permit names, which Athena authorizes on the query's workgroup; a permit of another deployment names a
    query in that deployment's workgroup. Without this grant Athena answers ``AccessDeniedException`` and the
    runtime treats such a permit as not reclaimable now (docs/operations.md#capacity-budget).
    """
    return iam.PolicyStatement(
        sid="SharedCapacityQueryStatus",
        actions=list(SHARED_WORKGROUP_ACTIONS),
        resources=[
            stack.format_arn(
                service="athena",
                resource="workgroup",
                resource_name=name,
                arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME,
            )
            for name in workgroups
        ],
    )


def wire_capacity(
    function: lambda_.Function,
    *,
    settings: CapacitySettings,
    deferral_role: iam.IRole,
    deployment: str,
    job_name: str,
    lock_table_name: str,
) -> None:
    """Set ``contract.CAPACITY_ENV_VARS`` (the budget's wiring) on ``function`` (always, the budget off too: its
    numbers, ``permits`` 0 when off, are in the job's catalog) and, when the
    budget is on, grant its role the deferral (the semaphore's read comes with the lock grant:
    ``OncePerSlotSchedule(capacity_semaphore=True)``).

    :param deferral_role: the job's Scheduler role, allowed to invoke ``function``: the deferral schedules' role.
    :param deployment: the shared stack's name (:func:`deferral_schedule_prefix`).
    :param lock_table_name: this deployment's lock table, which holds the permits unless ``settings.table_name``
        names another deployment's lock table (then the role may read and write that table's items too: the same
        actions as on its own lock table, on that table only).

    With ``settings.shared_workgroups`` the role may also read the other deployments' query executions
    (:func:`shared_workgroup_statement`).
    """
    prefix = deferral_schedule_prefix(deployment, job_name)
    environment = settings.runtime_environment(
        default_semaphore_name=default_semaphore_name(),
        lock_table_name=lock_table_name,
        deferral_role_arn=deferral_role.role_arn,
        deferral_schedule_prefix=prefix,
    )
    for name, value in environment.items():
        function.add_environment(name, value)
    if not settings.enabled:
        return
    stack = cdk.Stack.of(function)
    for statement in capacity_statements(stack, prefix=prefix, deferral_role=deferral_role):
        function.add_to_role_policy(statement)
    if settings.table_name:
        function.add_to_role_policy(
            iam.PolicyStatement(
                sid="SharedCapacityTableItems",
                actions=list(SHARED_TABLE_ACTIONS),
                resources=[stack.format_arn(service="dynamodb", resource="table", resource_name=settings.table_name)],
            )
        )
    if settings.shared_workgroups:
        function.add_to_role_policy(shared_workgroup_statement(stack, settings.shared_workgroups))
    role = function.role
    assert role is not None, "a job function has a role of its own"
    acknowledge(
        role,
        wildcard_finding(role, deferral_schedule_arn(stack, prefix)),
        "scheduler:CreateSchedule of the job's own deferral schedules: one-time schedules whose names start with "
        f"{prefix} and are completed at run time (one per slot given back for capacity), so only the prefix is "
        "known; each deletes itself after its one invocation.",
    )
