"""What :class:`local.serve.world.LocalWorld` stands up beside the read API: the job registry and the functions.

- :func:`write_registry`: one SSM parameter per job of the store's catalog, as a job stack writes it
  (``stacks``' registry construct: :func:`athena_refresh.registry.entry_value` under
  :func:`athena_refresh.registry.registry_path`), its function named as the demo names it;
- :func:`build_functions`: each job's function on the fake Lambda service (:class:`local.serve.functions.FunctionHost`),
  for the jobs of the store that have a folder under ``jobs/`` and local data; the others are left out with the
  one line saying why.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from athena_refresh.registry import JobRegistryEntry, entry_value, parameter_name, registry_path
from local.serve.read_api import ServeError
from local.serve.store import store_catalog

if TYPE_CHECKING:
    from local.serve.functions import FunctionHost
    from local.serve.world import LocalWorld

#: The job stack named in the world's registry entries (no CloudFormation stack exists locally).
LOCAL_STACK = "local-world"
#: The group in the world's registry names (``<path><job>/00``): the one job stack the world stands for.
LOCAL_GROUP = 0
#: Execution environments per function at most (started on demand): a manual run and Lambda's retry beside it.
MAX_ENVIRONMENTS = 2


def function_name(job: str) -> str:
    """The local function of ``job``: the demo's name for it (``athena-refresh-demo-<job>``)."""
    from local.demo.plan import FUNCTION_NAME

    return f"{FUNCTION_NAME}-{job}"


def write_registry(ssm: Any, manifest: Mapping[str, Any], stack: str) -> dict[str, JobRegistryEntry]:
    """Write every job of ``manifest``'s catalog into the registry of shared stack ``stack`` (``PutParameter``,
    ``Type=String``, ``Overwrite``); returns the entries by job.

    :raises ServeError: an entry is invalid or SSM refused it."""
    from botocore.exceptions import BotoCoreError, ClientError

    from athena_refresh.registry import RegistryEntryError

    path = registry_path(stack)
    entries: dict[str, JobRegistryEntry] = {}
    for name, query in store_catalog(manifest).items():
        schedule = query.schedule
        if schedule is None:
            continue  # an entry that runs no query (the read side's): not a deployed job
        function = function_name(name)
        entry = JobRegistryEntry(
            job=name,
            function_name=function,
            stack=LOCAL_STACK,
            schedule_expression=schedule.expression,
            schedule_timezone=schedule.timezone,
            racers=schedule.racers,
            log_group_name=f"/aws/lambda/{function}",
        )
        try:
            ssm.put_parameter(
                Name=parameter_name(path, name, LOCAL_GROUP), Value=entry_value(entry), Type="String", Overwrite=True
            )
        except (RegistryEntryError, ClientError, BotoCoreError) as exc:
            raise ServeError(f"could not write the job registry entry of {name}: {exc}") from exc
        entries[name] = entry
    return entries


def build_functions(world: LocalWorld) -> tuple[FunctionHost, dict[str, str]]:
    """The functions of the store's jobs (none started yet) and, per job without one, why.

    Each function's environment is what the stack sets, pointed at the world's moto server
    (:meth:`local.emulators.deployment.LocalDeployment.function_env` with the job's own lease, heartbeat and slot
    age); the catalog the functions read is the store's (what the demo deployed)."""
    from athena_refresh.checks import ConfigError
    from local.demo.plan import NoLocalDataError, runnable_jobs, select_jobs
    from local.emulators.clock import CLOCK_FILE_ENV
    from local.emulators.deployment import LocalDeployment
    from local.emulators.lambda_service import FunctionConfig
    from local.serve.functions import FunctionHost, LocalFunction
    from stacks.jobs import discover

    manifest = world.manifest
    catalog = store_catalog(manifest)
    names = sorted(catalog)
    folders = {folder.name for folder in discover(world.jobs_dir)}
    left_out = {name: f"no job folder {world.jobs_dir.name}/{name}" for name in names if name not in folders}
    wanted = tuple(name for name in names if name in folders)
    jobs = []
    if wanted:
        try:
            jobs, unrunnable = runnable_jobs(select_jobs(world.jobs_dir, wanted))
            left_out.update(unrunnable)
        except NoLocalDataError as exc:
            left_out.update({name: str(exc) for name in wanted})
        except ConfigError as exc:
            left_out.update({name: f"{world.jobs_dir.name}/ does not load: {exc}" for name in wanted})
    root = world.workdir / "world"
    functions: dict[str, LocalFunction] = {}
    if jobs:
        deployment = LocalDeployment(
            jobs,
            backend="atomic-moto",
            workdir=root,
            lock_table=str(manifest["lock_table"]),
            results_table=str(manifest["results_table"]),
            results_bucket=manifest.get("bucket"),
        )
        deployment.endpoint = world.moto_endpoint  # the world's server: nothing is started or created here
        root.mkdir(parents=True, exist_ok=True)
        deployment.catalog_path.write_text(json.dumps(manifest["catalog"], indent=1) + "\n", encoding="utf-8")
        for job in jobs:
            name, config = job.job_name, job.config
            logs = root / "logs" / name
            logs.mkdir(parents=True, exist_ok=True)
            function = function_name(name)

            schedule = catalog[name].schedule
            functions[function] = LocalFunction(
                name,
                FunctionConfig(
                    name=function,
                    env={
                        **deployment.function_env(
                            function_name=function,
                            lease_duration_s=None,
                            heartbeat_interval_s=None,
                            max_slot_age_s=None,
                            job=job,
                        ),
                        CLOCK_FILE_ENV: str(world.clock.path),  # the world's time, in every environment
                    },
                    worker_argv=_worker_argv(
                        world, root, logs, function, config.lambda_memory_mb, config.lambda_timeout_s
                    ),
                    logs_dir=logs,
                    timeout_s=float(config.lambda_timeout_s),
                    min_environments=0,
                    max_environments=max(MAX_ENVIRONMENTS, schedule.racers if world.live and schedule else 0),
                ),
                schedule.expression if schedule else "",
                schedule.timezone if schedule else "UTC",
                schedule.racers if schedule else 1,
            )

    def prepare_data() -> None:  # in the functions' thread, before the first invocation: a second when built
        from sample_data.flights import ensure_flights_table

        world.data_dir = ensure_flights_table().parent

    host = FunctionHost(
        functions, before_first=prepare_data, log=world.log, live=world.live, clock_ms=world.clock.now_ms
    )
    return host, left_out


def _worker_argv(
    world: LocalWorld, root: Path, logs: Path, function: str, memory_mb: int, timeout_s: int
) -> Callable[[str, int], list[str]]:
    """The command of one execution environment of ``function`` (:func:`~local.emulators.lambda_model.environment_argv`:
    the plain runtime, no simulated query duration), once the sample data is prepared."""
    from local.emulators.deployment import REGION
    from local.emulators.lambda_service import environment_argv

    def argv(worker_id: str, seq: int) -> list[str]:
        if world.data_dir is None:
            raise ServeError("the sample data was not prepared")
        return environment_argv(
            "local.emulators.lambda_runtime",
            worker_id=worker_id,
            log_file=logs / f"{worker_id}.log",
            data_dir=world.data_dir,
            state_dir=root / "engine",
            function_name=function,
            memory_mb=memory_mb,
            timeout_s=timeout_s,
            region=REGION,
        )

    return argv
