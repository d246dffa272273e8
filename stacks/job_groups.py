"""Which stack deploys which job: a stable assignment of job names to a fixed number of job stacks.

A deployment is the shared stack (``ScheduledAthenaRefresh``: tables, bucket, workgroup, read side, dashboard,
deployment-wide alarms) plus ``job_stacks`` job stacks ``ScheduledAthenaRefresh-Jobs-00`` ..
``-Jobs-<job_stacks - 1>``. A job's group is its ``job.toml`` ``stack_group`` when set, else
:func:`jump_hash` of its name over ``job_stacks`` buckets. The group depends on the job's own name (or key)
and on ``job_stacks`` only, so adding or removing a job folder never moves another job between stacks (a move
would replace its function and schedules). Raising ``job_stacks`` from K to K' moves about (K' - K) / K' of
the jobs, each into one of the new stacks only: that is what jump consistent hashing guarantees.

Every group's stack is synthesized, an empty one too: ``cdk deploy`` skips an empty stack that does not exist
and deletes one that does ("stack has no resources, deleting existing stack"), so removing the last job of a
group removes its stack with the same ``cdk deploy --all``.

Jump consistent hash: John Lamping, Eric Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm", 2014,
https://arxiv.org/abs/1406.2294
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

from athena_refresh import contract

#: The shared stack's name (kept from the one-stack layout, so that existing deployments update in place).
SHARED_STACK_NAME = "ScheduledAthenaRefresh"
#: Job stacks when cdk.json's ``stack.job_stacks`` is absent: the count every deployment made before issue 35 deployed
#: with (the key did not exist in their cdk.json), kept so that their jobs never move on upgrade.
DEFAULT_JOB_STACKS = 16
#: What a new project's cdk.json sets (issue 35): 1,000 jobs fit. Jump-hashing 1,000 names over 64 stacks puts at
#: most about 25 jobs in one (23 for fd-0001 .. fd-1000), at 10 resources a job without per-job metrics (11 with):
#: about 250 to 280 resources per stack, under CloudFormation's 500 (docs/performance.md#a-thousand-jobs).
NEW_PROJECT_JOB_STACKS = 64
#: At most this many job stacks (two digits in the name): the bound of a job's ``stack_group`` (in the contract).
MAX_JOB_STACKS = contract.MAX_JOB_STACKS

_MULTIPLIER = 2862933555777941757  # Lamping & Veach's 64-bit linear congruential step
_MASK = (1 << 64) - 1

T = TypeVar("T")


def name_key(name: str) -> int:
    """A 64-bit key of ``name``: the first 8 bytes of its SHA-256, big-endian (stable across processes and
    Python versions, unlike ``hash()``)."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big")


def jump_hash(key: int, buckets: int) -> int:
    """Lamping and Veach's jump consistent hash: a bucket in ``[0, buckets)`` for a 64-bit ``key``.

    :raises ValueError: ``buckets`` < 1.
    """
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    key &= _MASK
    bucket, candidate = -1, 0
    while candidate < buckets:
        bucket = candidate
        key = (key * _MULTIPLIER + 1) & _MASK
        candidate = int((bucket + 1) * ((1 << 31) / ((key >> 33) + 1)))
    return bucket


def job_group(job_name: str, job_stacks: int, explicit: int | None = None) -> int:
    """The group (job stack index) of ``job_name``: ``explicit`` (job.toml ``stack_group``) when given, else
    :func:`jump_hash` of its name.

    :raises ValueError: ``explicit`` outside ``[0, job_stacks)``.
    """
    if explicit is not None:
        if not 0 <= explicit < job_stacks:
            raise ValueError(f"stack_group must be in [0, {job_stacks - 1}] (stack.job_stacks = {job_stacks})")
        return explicit
    return jump_hash(name_key(job_name), job_stacks)


def group_stack_name(group: int, shared_stack_name: str = SHARED_STACK_NAME) -> str:
    """``ScheduledAthenaRefresh-Jobs-07``: the stack deploying group ``group``."""
    return f"{shared_stack_name}-Jobs-{group:02d}"


def group_jobs(jobs: Sequence[tuple[str, int | None, T]], job_stacks: int) -> dict[int, list[T]]:
    """Every group ``0 .. job_stacks - 1`` (empty ones too) -> its items, in the given order.

    ``jobs``: (job name, explicit group or ``None``, item).
    """
    groups: dict[int, list[T]] = {group: [] for group in range(job_stacks)}
    for job_name, explicit, item in jobs:
        groups[job_group(job_name, job_stacks, explicit)].append(item)
    return groups
