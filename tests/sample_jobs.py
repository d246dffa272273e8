"""The job folders the tests build on, independent of what ``jobs/`` holds today.

A team forks this project and replaces the samples with its own jobs: a test about the sample jobs' behaviour
never reads ``jobs/``. It reads the canonical copies of the two samples under ``tests/fixtures/jobs/`` (plus
``top-routes``, a team's own hourly job, which ``.ci/run`` also copies into ``jobs/`` for a second run), loaded
directly (:func:`load_fixture_jobs`) or staged into a temporary directory shaped like the repository
(:func:`stage_jobs`, :func:`stage_repo`). A test about "the jobs" of the repository computes the expected set
from the folders present (:func:`repo_job_names`).
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from athena_refresh.jobspec import JobSpec
from stacks.jobs import JobDefinition, discover, load_job
from stacks.query_sql import output_columns
from stacks.stack_settings import STACK_KEY, StackSettings, load_context

REPO_ROOT = Path(__file__).resolve().parents[1]
REPO_JOBS_DIR = REPO_ROOT / "jobs"
FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"
FIXTURE_JOBS_DIR = FIXTURES_DIR / "jobs"

FLIGHTS = "flights-dashboard"  # every 30 minutes, UTC; stacks.jobs.DEFAULT_LOCAL_JOB
CARRIERS = "carrier-on-time"  # daily at 06:15 New York time, one constant
TOP_ROUTES = "top-routes"  # a team's own job: hourly, no constants, no value metrics
#: The two sample jobs, in the order ``stacks.jobs.load_jobs`` returns them (by folder name).
SAMPLE_JOBS = (CARRIERS, FLIGHTS)


def repo_job_names() -> list[str]:
    """The jobs ``jobs/`` holds right now (``stacks.jobs.discover``), sorted by name."""
    return [folder.name for folder in discover(REPO_JOBS_DIR)]


def spec_from_context(job: Any) -> JobSpec:
    """:meth:`JobSpec.from_context` with the value metrics checked against the query's output columns (sqlglot), as
    ``stacks.jobs`` checks a job folder (a raw ``job`` without a non-empty ``sql``: not checked).

    :raises ConfigError: as :meth:`JobSpec.from_context`.
    """
    sql = job.get("sql") if isinstance(job, Mapping) else None
    columns = output_columns(sql) if isinstance(sql, str) and sql.strip() else None
    return JobSpec.from_context(job, output_columns=columns)


def stack_settings() -> StackSettings:
    """The stack-wide settings of the repository's cdk.json."""
    return StackSettings.from_context(load_context(REPO_ROOT / "cdk.json").get(STACK_KEY))


@functools.cache
def _load(names: tuple[str, ...]) -> tuple[JobDefinition, ...]:
    settings = stack_settings()
    return tuple(load_job(FIXTURE_JOBS_DIR / name, settings, root=FIXTURES_DIR) for name in sorted(names))


def load_fixture_jobs(names: Sequence[str] = SAMPLE_JOBS) -> tuple[JobDefinition, ...]:
    """The fixture jobs ``names``, validated as at synth, sorted by name (as ``load_jobs`` sorts them)."""
    return _load(tuple(names))


def fixture_job(name: str) -> JobDefinition:
    """One fixture job (``FLIGHTS``, ``CARRIERS`` or ``TOP_ROUTES``)."""
    (job,) = _load((name,))
    return job


def stage_jobs(root: Path, names: Sequence[str] = SAMPLE_JOBS) -> Path:
    """Copy the fixture job folders ``names`` into ``root/jobs`` (created); returns that ``jobs`` directory."""
    jobs_dir = root / "jobs"
    jobs_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copytree(FIXTURE_JOBS_DIR / name, jobs_dir / name)
    return jobs_dir


def stage_repo(root: Path, names: Sequence[str] = SAMPLE_JOBS) -> Path:
    """A stand-in repository root: the real cdk.json and a ``jobs/`` of the fixture folders ``names``
    (what ``stacks.jobs.load_repo_jobs(root)`` reads); returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO_ROOT / "cdk.json", root / "cdk.json")
    stage_jobs(root, names)
    return root


def sample_repo_fixture(*targets: str) -> Any:
    """A module-scoped, autouse fixture ``sample_repo``: the two samples staged as a repository (:func:`stage_repo`),
    with each of ``targets`` (a dotted module attribute holding the repository root, e.g.
    ``"bench.cost.REPO_ROOT"``) pointed at it for the module. Use: ``sample_repo = sample_repo_fixture(...)``."""

    @pytest.fixture(scope="module", autouse=True)
    def sample_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
        with pytest.MonkeyPatch.context() as patch:
            root = stage_repo(tmp_path_factory.mktemp("repo"))
            for target in targets:
                patch.setattr(target, root)
            yield root

    return sample_repo
