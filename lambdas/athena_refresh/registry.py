"""The job registry's format: one SSM String parameter per deployed job, where consumers find the job.

The registry replaces the per-job stack outputs (``JobNames``, ``FunctionName<Job>``): each job stack writes its
job's entry, and the operator tools (``tools.registry``) read it. This module is the format only: the standard
library, the one job-name rule (:mod:`slotlock.table`) and the bound of the job stacks
(:data:`athena_refresh.contract.MAX_JOB_STACKS`), no AWS call, so ``stacks/`` imports it as it imports
:mod:`athena_refresh.contract`:

- the path: ``/<shared stack name>/jobs/`` (the shared stack's output ``JobRegistryPath``), each job's parameter
  ``<path><job>/<group>``, the group being the two-digit index of the job stack that deploys it, e.g.
  ``/ScheduledAthenaRefresh/jobs/flights-dashboard/34`` (:func:`parameter_name`). The group is in the name so that
  a job moving to another job stack (``stack.job_stacks`` raised, ``stack_group`` changed) never collides:
  CloudFormation may create the new stack's parameter before the old stack deletes its own (two stacks deploy in
  any order), and a parameter name is unique in the account and Region. One job's entries are the parameters
  under ``<path><job>/`` (one ``GetParametersByPath``; two while a move is under way, the newer one the move's
  target); a name without the group (``<path><job>``, what earlier versions wrote) is read as an entry
  too, until the upgrade's deploy replaces it (:func:`named_job`);
- the value: compact JSON of at most 4 KB (a Standard-tier parameter), format 1::

    {"format": 1, "job": "flights-dashboard", "function_name": "<physical function name>",
     "stack": "<job stack name>", "schedule_expression": "cron(0/30 * * * ? *)", "schedule_timezone": "UTC",
     "racers": 3, "log_group_name": "<physical log group name>"}

:func:`entry_value` writes it, :func:`parse_entry` reads it back. A reader of format 1 ignores keys it does not
know (a later version may add some without breaking the deployed tools); a new ``format`` number is refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from slotlock.table import JOB_NAME_RULE, is_valid_job_name

from .contract import MAX_JOB_STACKS
from .errors import ConfigurationError

REGISTRY_FORMAT: Final = 1
#: A Standard-tier String parameter holds at most 4 KB.
MAX_VALUE_BYTES: Final = 4096
#: The folder of the shared stack's parameters that holds the jobs: ``/<stack>/jobs/``.
JOBS_FOLDER: Final = "jobs"
#: The shared stack's output naming the registry's path.
REGISTRY_PATH_OUTPUT: Final = "JobRegistryPath"
#: The last part of a job's parameter name: its job stack's group in two digits (``MAX_JOB_STACKS`` is 100).
GROUP_DIGITS: Final = 2
#: The value's keys, in the order :func:`entry_value` writes them.
KEYS: Final = (
    "format",
    "job",
    "function_name",
    "stack",
    "schedule_expression",
    "schedule_timezone",
    "racers",
    "log_group_name",
)


class RegistryEntryError(ConfigurationError):
    """A job registry value is malformed; ``name`` is its parameter (or ``"registry entry"`` when unknown) and
    ``problems`` says what is wrong, one item per field."""

    def __init__(self, name: str, problems: list[str]) -> None:
        super().__init__(name, "; ".join(problems))
        self.name = name
        self.problems = tuple(problems)


@dataclass(frozen=True)
class JobRegistryEntry:
    """One deployed job as its registry entry describes it.

    ``function_name``, ``log_group_name``: physical names (as CloudFormation generated them); ``stack``: the job
    stack that deploys it; ``schedule_expression`` (``cron(...)``) in ``schedule_timezone`` (IANA), fanned out to
    ``racers`` invocations per slot.
    """

    job: str
    function_name: str
    stack: str
    schedule_expression: str
    schedule_timezone: str
    racers: int
    log_group_name: str

    def as_dict(self) -> dict[str, Any]:
        """The value's JSON object (``format`` first, then :data:`KEYS`' order)."""
        values = {"format": REGISTRY_FORMAT, **{key: getattr(self, key) for key in KEYS[1:]}}
        return {key: values[key] for key in KEYS}


def registry_path(stack_name: str) -> str:
    """The registry's path of the shared stack ``stack_name``: ``/<stack_name>/jobs/``."""
    if not stack_name or "/" in stack_name:
        raise ValueError(f"stack name {stack_name!r}: expected a CloudFormation stack name (no '/')")
    return f"/{stack_name}/{JOBS_FOLDER}/"


def parameter_name(path: str, job: str, group: int) -> str:
    """The parameter of ``job`` deployed by job stack ``group`` under the registry ``path`` (``/S/jobs/`` or
    ``/S/jobs``): ``/S/jobs/<job>/<group:02d>``.

    :raises ValueError: ``group`` outside ``[0, MAX_JOB_STACKS)``.
    """
    if isinstance(group, bool) or not 0 <= group < MAX_JOB_STACKS:
        raise ValueError(f"group must be in [0, {MAX_JOB_STACKS - 1}], got {group!r}")
    return f"{job_path(path, job)}{group:0{GROUP_DIGITS}d}"


def job_path(path: str, job: str) -> str:
    """The path holding ``job``'s entries: ``/S/jobs/<job>/`` (one per job stack deploying it: one, or two while
    the job moves)."""
    return f"{path.rstrip('/')}/{job}/"


def named_job(path: str, name: str) -> str | None:
    """The job a parameter ``name`` under the registry ``path`` is the entry of: ``<path><job>/<two digits>``, or
    ``<path><job>`` (the name before the group was part of it); ``None`` for any other name (deeper, or not under
    ``path``): not a job's entry."""
    prefix = path.rstrip("/") + "/"
    if not name.startswith(prefix):
        return None
    parts = name[len(prefix) :].split("/")
    if len(parts) == 2 and len(parts[1]) == GROUP_DIGITS and parts[1].isascii() and parts[1].isdigit():
        parts = parts[:1]
    return parts[0] if len(parts) == 1 and parts[0] else None


def entry_value(entry: JobRegistryEntry) -> str:
    """The parameter's value for ``entry``: compact JSON, :data:`KEYS` in order.

    The stack passes CDK tokens for the physical names; they are written into the JSON as they are and resolved
    by CloudFormation (a token has no character JSON escapes). :raises RegistryEntryError: a field is invalid, or
    the value is above :data:`MAX_VALUE_BYTES`.
    """
    values = entry.as_dict()
    problems = _problems(values)
    text = json.dumps(values, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode("utf-8")) > MAX_VALUE_BYTES:
        problems.append(f"the value is {len(text.encode('utf-8'))} bytes; a Standard parameter holds {MAX_VALUE_BYTES}")
    if problems:
        raise RegistryEntryError(f"registry entry of {entry.job!r}", problems)
    return text


def parse_entry(text: str, *, name: str | None = None, path: str | None = None) -> JobRegistryEntry:
    """The entry in a parameter's value ``text``; ``name``: the parameter's name (named in the error) and, with the
    registry ``path`` it is under, the job it is the entry of (:func:`named_job`), which must be the entry's job.

    :raises RegistryEntryError: not JSON, not an object, another ``format``, or a field missing or invalid (every
        problem is listed).
    """
    where = name or "registry entry"
    try:
        document = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise RegistryEntryError(where, [f"not JSON ({exc})"]) from exc
    if not isinstance(document, Mapping):
        raise RegistryEntryError(where, [f"expected a JSON object, got {type(document).__name__}"])
    version = document.get("format")
    if version != REGISTRY_FORMAT or isinstance(version, bool):
        problem = (
            f"format: expected {REGISTRY_FORMAT}, got {version!r:.40} (written by another version of this project:"
            " use the tools of the version that deployed it)"
        )
        raise RegistryEntryError(where, [problem])
    problems = _problems(document)
    named = named_job(path, name) if name is not None and path is not None else None
    if named is not None and not problems and named != document["job"]:
        problems.append(f"job: {document['job']!r}, but the parameter is named for {named!r}")
    if problems:
        raise RegistryEntryError(where, problems)
    return JobRegistryEntry(**{key: document[key] for key in KEYS[1:]})


def _problems(values: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``values``' fields (empty: nothing)."""
    problems = []
    missing = [key for key in KEYS if key not in values]
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    job = values.get("job")
    if "job" in values and not is_valid_job_name(job):
        problems.append(f"job: must be {JOB_NAME_RULE}, got {job!r:.80}")
    for key in ("function_name", "stack", "schedule_timezone", "log_group_name"):
        if key in values and (not isinstance(values[key], str) or not values[key].strip()):
            problems.append(f"{key}: must be a non-empty string, got {values[key]!r:.80}")
    expression = values.get("schedule_expression")
    if "schedule_expression" in values and (
        not isinstance(expression, str) or not expression.startswith("cron(") or not expression.endswith(")")
    ):
        problems.append(f"schedule_expression: must be a cron(...) expression, got {expression!r:.80}")
    racers = values.get("racers")
    if "racers" in values and (isinstance(racers, bool) or not isinstance(racers, int) or racers < 1):
        problems.append(f"racers: must be a positive integer, got {racers!r:.40}")
    return problems


__all__ = [
    "GROUP_DIGITS",
    "KEYS",
    "MAX_VALUE_BYTES",
    "REGISTRY_FORMAT",
    "REGISTRY_PATH_OUTPUT",
    "JobRegistryEntry",
    "RegistryEntryError",
    "entry_value",
    "job_path",
    "named_job",
    "parameter_name",
    "parse_entry",
    "registry_path",
]
