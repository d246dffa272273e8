"""The demo's fixed plan: the last K slots of each job (every folder under jobs/, or the ``--job`` ones),
interleaved, N racers, a kill and a pause.

:func:`fault_plan` puts a SIGKILL of the winner right after it started its query a third of the way in, and a
SIGSTOP of the winner just before its commit two thirds in (:data:`FAULT_CHECKPOINT`); the module docstring of
:mod:`local.demo.runner` says what each shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from local.emulators.lambda_model import KILL, PAUSE
from local.scenario.driver import REPO_ROOT
from stacks.jobs import DEFAULT_LOCAL_JOB, GlueSource, JobDefinition, discover, load_jobs
from stacks.stack_settings import STACK_KEY, StackSettings, load_context
from tools.cli.selection import SelectionError, select

DEFAULT_SLOTS = 8
DEFAULT_RACERS = 6  # the six instances of the original problem
DEFAULT_LEASE_S = 4.0  # short, so takeovers happen within seconds (the sample jobs use 45 s and 50 s)
DEFAULT_QUERY_MS = 1500  # how long each query appears QUEUED/RUNNING, like an Athena query
DEFAULT_TIMEOUT_S = 60  # the demo's Lambda timeout (the jobs use their lambda_timeout_s)
#: Resident memory of one local Lambda execution environment (Python, boto3, DuckDB, the handler), MB: measured
#: by a user's 41-job demo, 246 environments in 16 GB (issue 34); rounded up.
ENVIRONMENT_MB = 70
#: The share of the available memory the demo's environments may take (the moto server, DuckDB's queries and the
#: rest of the machine keep the other half).
MEMORY_SHARE = 0.5
#: Jobs at once per core: a job's racers mostly wait (the simulated query, the lease), so a core carries two jobs.
JOBS_PER_CORE = 2


FAULT_CHECKPOINT = {KILL: "query_started", PAUSE: "before_commit"}

# the local deployment's names (re-exported by local.demo.runner)
LOCK_TABLE = "athena-refresh-demo-locks"
RESULTS_TABLE = "athena-refresh-demo-results"
RESULTS_BUCKET = "athena-refresh-demo-results"
FUNCTION_NAME = "athena-refresh-demo"


@dataclass(frozen=True)
class DemoOptions:
    slots: int = DEFAULT_SLOTS
    racers: int = DEFAULT_RACERS
    lease_s: float = DEFAULT_LEASE_S
    faults: bool = True
    report: Path = REPO_ROOT / "demo-report.json"
    workdir: Path = REPO_ROOT / ".demo"
    query_ms: int = DEFAULT_QUERY_MS
    timeout_s: int = DEFAULT_TIMEOUT_S
    seed: int = 13
    jobs: tuple[str, ...] = ()  # the jobs to run (--job, repeatable); empty: every job folder
    jobs_dir: Path = REPO_ROOT / "jobs"
    parallel_jobs: int = 0  # how many jobs run at once (--parallel-jobs); 0: as many as the machine carries

    @property
    def heartbeat_s(self) -> float:
        """A quarter of the lease (1 s for the default 4 s lease): well below half, as the lock requires."""
        return round(self.lease_s / 4, 3)


def jobs_at_once(jobs: int, racers: int, *, cores: int, available_mb: float | None, asked: int = 0) -> int:
    """How many jobs' functions run at once: ``asked`` when given (>0), else as many as the machine carries, by
    its cores (:data:`JOBS_PER_CORE` each) and its available memory (:data:`MEMORY_SHARE` of ``available_mb`` over
    :data:`ENVIRONMENT_MB` per environment, ``racers`` + 1 per job: a retry or a late delivery needs one more);
    at least 1, at most ``jobs``. The racers of one slot always start together: that race is the point."""
    if asked > 0:
        return max(1, min(asked, jobs))
    by_cores = max(1, cores * JOBS_PER_CORE)
    by_memory = (
        by_cores if available_mb is None else int(available_mb * MEMORY_SHARE // (ENVIRONMENT_MB * (racers + 1)))
    )
    return max(1, min(jobs, by_cores, by_memory))


def available_memory_mb(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    """The memory the kernel says is available for new processes (``MemAvailable``), MB; ``None`` when unknown."""
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def fault_plan(slots: int, enabled: bool = True) -> dict[int, str]:
    """Slot index (within a job) -> fault: a kill a third of the way in, a pause two thirds in (one slot: kill
    only). The demo gives the kill to its first job and the pause to its last."""
    if not enabled or slots < 1:
        return {}
    plan = {slots // 3: KILL}
    pause_at = (2 * slots) // 3
    if pause_at not in plan:
        plan[pause_at] = PAUSE
    return plan


class UnknownJobError(LookupError):
    """``--job`` names a job that has no folder: the message lists the jobs there are (one line, exit 2)."""


def select_jobs(jobs_dir: Path, names: tuple[str, ...] = ()) -> list[JobDefinition]:
    """The jobs the demo runs: every folder under ``jobs_dir`` (``names`` empty), or only those ``names`` selects
    (``-s/--select`` patterns, :mod:`tools.cli.selection`), read and
    validated as synth reads them (``stacks.jobs.load_jobs``), ``stacks.jobs.DEFAULT_LOCAL_JOB`` first if present (it
    takes the kill), then by name.

    :raises UnknownJobError: a name has no folder (before any folder is read). :raises athena_refresh.checks.ConfigError: a
    job folder is invalid.
    """
    folders = [folder.name for folder in discover(jobs_dir)]
    where = jobs_dir.relative_to(REPO_ROOT) if jobs_dir.is_relative_to(REPO_ROOT) else jobs_dir
    try:
        wanted = select(names, folders, where=f"{where}/") if names else ()
    except SelectionError as exc:
        raise UnknownJobError("; ".join(str(exc).splitlines())) from exc
    settings = StackSettings.from_context(load_context(REPO_ROOT / "cdk.json").get(STACK_KEY))
    jobs = [job for job in load_jobs(jobs_dir, settings, root=jobs_dir.parent) if not wanted or job.job_name in wanted]
    return sorted(jobs, key=lambda job: (job.job_name != DEFAULT_LOCAL_JOB, job.job_name))


class NoLocalDataError(LookupError):
    """No job the demo selected can run locally (each reads its own Glue table and has no sample files): one line,
    exit 2."""


def runnable_jobs(
    jobs: list[JobDefinition], data_dir: Path | None = None
) -> tuple[list[JobDefinition], dict[str, str]]:
    """The jobs the local engine can run (a sample source, or your own Glue table with Parquet files under
    ``.cache/data/<table>/``: :func:`tools.jobs.common.own_table_dir`) and, per job left out, the one line saying why
    (:func:`tools.jobs.common.no_own_files`).

    :raises NoLocalDataError: every job is left out (the lines joined)."""
    from tools.jobs import common

    left_out = {
        job.job_name: common.no_own_files(job, data_dir)
        for job in jobs
        if isinstance(job.source, GlueSource) and common.own_table_dir(job, data_dir) is None
    }
    runnable = [job for job in jobs if job.job_name not in left_out]
    if jobs and not runnable:
        raise NoLocalDataError("; ".join(f"{name}: {why}" for name, why in left_out.items()))
    return runnable, left_out
