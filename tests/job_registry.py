"""The job registry as a test deploys it: entries built from the fixture jobs (as a job stack writes them) and put
into an SSM client (moto's, or one a Stubber answers for)."""

from __future__ import annotations

from typing import Any

from athena_refresh.registry import JobRegistryEntry, entry_value, parameter_name, registry_path
from tests.sample_jobs import FIXTURE_JOBS_DIR, fixture_job

STACK = "ScheduledAthenaRefresh"
#: The registry of the default shared stack: ``/ScheduledAthenaRefresh/jobs/``.
PATH = registry_path(STACK)


def entry(job: str, *, function_name: str | None = None, group: int = 0, **overrides: Any) -> JobRegistryEntry:
    """``job``'s entry: its schedule from its fixture folder when there is one (else hourly UTC), the physical
    names as CloudFormation would generate them in job stack ``group``."""
    stack = f"{STACK}-Jobs-{group:02d}"
    schedule: dict[str, Any] = {"schedule_expression": "cron(0 * * * ? *)", "schedule_timezone": "UTC", "racers": 2}
    if (FIXTURE_JOBS_DIR / job).is_dir():
        config = fixture_job(job).config
        schedule = {
            "schedule_expression": config.schedule_expression,
            "schedule_timezone": config.schedule_timezone,
            "racers": config.racers,
        }
    function = function_name or f"{stack}-Job{job.replace('-', '')}Refresh-ABC123"
    values: dict[str, Any] = {
        "job": job,
        "function_name": function,
        "stack": stack,
        **schedule,
        "log_group_name": f"/aws/lambda/{function}",
    }
    return JobRegistryEntry(**(values | overrides))


def group_of(item: JobRegistryEntry) -> int:
    """The group of the job stack ``item`` names (``<shared>-Jobs-<group>``, as :func:`entry` builds it)."""
    return int(item.stack.rsplit("-", 1)[-1])


def register(ssm: Any, *entries: JobRegistryEntry, path: str = PATH) -> None:
    """Put each entry's parameter under ``path`` (String, overwriting), named by its job stack's group, as the job
    stacks do."""
    for item in entries:
        name = parameter_name(path, item.job, group_of(item))
        ssm.put_parameter(Name=name, Value=entry_value(item), Type="String", Overwrite=True)


def put_raw(ssm: Any, job: str, value: str, *, path: str = PATH, group: int = 0) -> None:
    """A parameter with any ``value`` (a malformed entry)."""
    ssm.put_parameter(Name=parameter_name(path, job, group), Value=value, Type="String", Overwrite=True)
