"""The job registry as the operator tools read it: which jobs are deployed, and each one's function and schedule.

Every job stack writes one SSM String parameter per job under the shared stack's ``JobRegistryPath`` output
(``/ScheduledAthenaRefresh/jobs/``), named ``<path><job>/<group>`` by the group of the job stack deploying it; its
value's format and its name are :mod:`athena_refresh.registry`. Two reads, one action (``ssm:GetParametersByPath``),
nothing else:

- every job: ``GetParametersByPath(Path=<path>, Recursive=True)``, 10 per page (the most a page holds);
- one job: ``GetParametersByPath(Path=<path><job>/)``, one page: the operator need not know the job's group.

While a job moves between job stacks (``stack.job_stacks`` raised, ``stack_group`` changed), both stacks' entries
may exist for a moment: the newer one (``LastModifiedDate``) is the move's target and is the one answered. A name
without the group (``<path><job>``, what earlier versions wrote) is listed as the job's entry too, until the upgrade's
deploy replaces it; one job's read sees the new names only (deploy, then operate one job).

botocore's own errors (no region or credentials, AccessDenied, ...) pass through: each tool's ``main`` prints them
as one line (:mod:`tools.aws_errors`). What the registry answers is a :class:`JobRegistryError`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from athena_refresh.registry import (
    REGISTRY_PATH_OUTPUT,
    JobRegistryEntry,
    RegistryEntryError,
    entry_value,
    job_path,
    named_job,
    parameter_name,
    parse_entry,
    registry_path,
)
from slotlock.table import JOB_NAME_RULE, is_valid_job_name

#: ``GetParametersByPath`` returns at most 10 parameters a page.
PAGE_SIZE = 10
_NEVER = dt.datetime.min.replace(tzinfo=dt.UTC)


class JobRegistryError(Exception):
    """The job registry cannot answer: a job is not in it, or an entry is malformed. The message is one line that
    names the parameter or path."""


class JobNotRegisteredError(JobRegistryError):
    """No parameter for ``job`` under ``path``: the job is not deployed (or the name is misspelt)."""

    def __init__(self, job: str, path: str) -> None:
        super().__init__(
            f"no job {job!r} in the job registry {path} (no parameter under {job_path(path, job)}); the deployed"
            " jobs are the parameters under that path"
        )
        self.job = job
        self.path = path


class MalformedEntryError(JobRegistryError):
    """A registry parameter's value is not a valid entry (:func:`athena_refresh.registry.parse_entry`)."""

    def __init__(self, error: RegistryEntryError) -> None:
        super().__init__(f"job registry parameter {error}")
        self.name = error.name
        self.problems = tuple(error.problems)


def list_jobs(ssm: Any, path: str) -> dict[str, JobRegistryEntry]:
    """Every job of the registry at ``path``, by name (sorted); ``ssm``: a boto3 SSM client. A parameter under
    ``path`` that is no job's entry (:func:`athena_refresh.registry.named_job`) is skipped.

    :raises MalformedEntryError: an entry is malformed (the first one met).
    """
    return _newest(path, _pages(ssm, path, recursive=True))


def get_job(ssm: Any, path: str, job: str) -> JobRegistryEntry:
    """``job``'s entry in the registry at ``path`` (its newest, while it moves between job stacks).

    :raises JobNotRegisteredError: no parameter under ``<path><job>/``. :raises MalformedEntryError: its value is
        malformed. :raises JobRegistryError: ``job`` is no job name (asked nothing).
    """
    if not is_valid_job_name(job):
        raise JobRegistryError(f"{job!r} is not a job name ({JOB_NAME_RULE}): no job of the registry {path}")
    found = _newest(path, _pages(ssm, job_path(path, job), recursive=False))
    if job not in found:
        raise JobNotRegisteredError(job, path)
    return found[job]


def _pages(ssm: Any, path: str, *, recursive: bool) -> Iterable[dict[str, Any]]:
    """Every parameter under ``path`` (``GetParametersByPath``, :data:`PAGE_SIZE` a page)."""
    pages = ssm.get_paginator("get_parameters_by_path").paginate(
        Path=path, Recursive=recursive, PaginationConfig={"PageSize": PAGE_SIZE}
    )
    for page in pages:
        yield from page.get("Parameters", [])


def _newest(path: str, parameters: Iterable[dict[str, Any]]) -> dict[str, JobRegistryEntry]:
    """Each job's entry among ``parameters`` (under the registry ``path``): the newest by ``LastModifiedDate``
    (then by name), sorted by job."""
    newest: dict[str, tuple[tuple[dt.datetime, str], JobRegistryEntry]] = {}
    for parameter in parameters:
        name = parameter.get("Name", "")
        job = named_job(path, name)
        if job is None:
            continue
        try:
            entry = parse_entry(parameter.get("Value", ""), name=name, path=path)
        except RegistryEntryError as exc:
            raise MalformedEntryError(exc) from exc
        key = (parameter.get("LastModifiedDate") or _NEVER, name)
        if job not in newest or key > newest[job][0]:
            newest[job] = (key, entry)
    return {job: newest[job][1] for job in sorted(newest)}


__all__ = [
    "PAGE_SIZE",
    "REGISTRY_PATH_OUTPUT",
    "JobNotRegisteredError",
    "JobRegistryEntry",
    "JobRegistryError",
    "MalformedEntryError",
    "entry_value",
    "get_job",
    "job_path",
    "list_jobs",
    "parameter_name",
    "registry_path",
]
