"""The job registry as the operator tools read it: which jobs are deployed, and each one's function and schedule.

Every job stack writes one SSM String parameter per job under the shared stack's ``JobRegistryPath`` output
(``/ScheduledAthenaRefresh/jobs/``); its value's format is :mod:`athena_refresh.registry`. Two reads, nothing
else:

- every job: ``ssm:GetParametersByPath(Path=<path>)``, not recursive, 10 per page (the most a page holds);
- one job: ``ssm:GetParameter(Name=<path><job>)``.

botocore's own errors (no region or credentials, AccessDenied, ...) pass through: each tool's ``main`` prints them
as one line (:mod:`tools.aws_errors`). What the registry answers is a :class:`JobRegistryError`.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from athena_refresh.registry import (
    REGISTRY_PATH_OUTPUT,
    JobRegistryEntry,
    RegistryEntryError,
    entry_value,
    parameter_name,
    parse_entry,
    registry_path,
)
from slotlock.table import JOB_NAME_RULE, is_valid_job_name

#: ``GetParametersByPath`` returns at most 10 parameters a page.
PAGE_SIZE = 10


class JobRegistryError(Exception):
    """The job registry cannot answer: a job is not in it, or an entry is malformed. The message is one line that
    names the parameter or path."""


class JobNotRegisteredError(JobRegistryError):
    """No parameter for ``job`` under ``path``: the job is not deployed (or the name is misspelt)."""

    def __init__(self, job: str, path: str) -> None:
        super().__init__(
            f"no job {job!r} in the job registry {path} (no parameter {parameter_name(path, job)}); the deployed"
            " jobs are the parameters under that path"
        )
        self.job = job
        self.path = path


class MalformedEntryError(JobRegistryError):
    """A registry parameter's value is not a valid entry (:func:`athena_refresh.registry.parse_entry`)."""

    def __init__(self, error: RegistryEntryError) -> None:
        super().__init__(f"job registry parameter {error}")
        self.name = error.name
        self.problems = error.problems


def list_jobs(ssm: Any, path: str) -> dict[str, JobRegistryEntry]:
    """Every job of the registry at ``path``, by name (sorted); ``ssm``: a boto3 SSM client.

    :raises MalformedEntryError: an entry is malformed (the first one met).
    """
    entries: dict[str, JobRegistryEntry] = {}
    pages = ssm.get_paginator("get_parameters_by_path").paginate(
        Path=path, Recursive=False, PaginationConfig={"PageSize": PAGE_SIZE}
    )
    for page in pages:
        for parameter in page.get("Parameters", []):
            entry = _parse(parameter)
            entries[entry.job] = entry
    return dict(sorted(entries.items()))


def get_job(ssm: Any, path: str, job: str) -> JobRegistryEntry:
    """``job``'s entry in the registry at ``path``.

    :raises JobNotRegisteredError: no such parameter. :raises MalformedEntryError: its value is malformed.
        :raises JobRegistryError: ``job`` is no job name (asked nothing).
    """
    if not is_valid_job_name(job):
        raise JobRegistryError(f"{job!r} is not a job name ({JOB_NAME_RULE}): no job of the registry {path}")
    try:
        parameter = ssm.get_parameter(Name=parameter_name(path, job))["Parameter"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ParameterNotFound":
            raise JobNotRegisteredError(job, path) from exc
        raise
    return _parse(parameter)


def _parse(parameter: dict[str, Any]) -> JobRegistryEntry:
    try:
        return parse_entry(parameter.get("Value", ""), name=parameter.get("Name"))
    except RegistryEntryError as exc:
        raise MalformedEntryError(exc) from exc


__all__ = [
    "PAGE_SIZE",
    "REGISTRY_PATH_OUTPUT",
    "JobNotRegisteredError",
    "JobRegistryEntry",
    "JobRegistryError",
    "MalformedEntryError",
    "entry_value",
    "get_job",
    "list_jobs",
    "parameter_name",
    "registry_path",
]
