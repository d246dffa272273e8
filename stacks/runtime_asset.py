"""The Lambda assets: the runtime packages of ``lambdas/`` and ``slotlock`` plus a job catalog, staged at synth.

``lambdas/`` holds the runtime (``athena_refresh``, and ``results_api``, the read side); ``slotlock`` is the
installed distribution's package (``packages/slotlock/src/slotlock`` in this repository, editable), copied by the
construct library's :func:`slotlock_cdk.runtime.stage_slotlock`, as a user's own function gets it. A job
catalog (:mod:`athena_refresh.catalog`, ``job_catalog.json``) is written next to them from the job folders'
prepared queries. Each job's function has an asset of its own whose catalog holds that job alone
(:func:`stage_job_asset`) and the deployment's capacity budget (its numbers: changing the budget changes every job's
asset): editing one job folder changes that job's asset hash only. The read side's functions (shared stack) get
every job's name and schedule, without queries, settings or budget (:func:`stage_read_asset`). A staged
directory's content depends only on those files, so its asset hash (and the template) is the same on every synth.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from athena_refresh.budget import CapacityBudget
from athena_refresh.catalog import CATALOG_FILE, CatalogQuery, CatalogSchedule, write_catalog
from stacks import LAMBDAS_DIR
from stacks.jobs import JobDefinition

RUNTIME_PACKAGES = ("athena_refresh", "results_api")  # from lambdas/; slotlock: stage_slotlock
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")


def catalog_queries(jobs: Sequence[JobDefinition]) -> dict[str, CatalogQuery]:
    """Each job's prepared query and its :class:`~athena_refresh.jobspec.JobSpec`, as the runtime reads them from
    the catalog (typed JSON, loaded back into the same class at cold start)."""
    return {
        job.job_name: CatalogQuery(
            sql=job.query.text,
            parameters=job.query.parameter_order,
            constants=job.parameters,
            spec=job.config,
            schedule=CatalogSchedule(
                expression=job.config.schedule_expression,
                timezone=job.config.schedule_timezone,
                racers=job.config.racers,
                freshness_s=job.config.grace_s,
                max_slot_age_s=job.config.max_slot_age_s,
            ),
        )
        for job in jobs
    }


#: The read side's catalog entries carry no query: it serves results and reports schedules only.
READ_SIDE_SQL = "SELECT 1 /* the read side runs no query: the job's own asset holds it */"


def read_side_queries(jobs: Sequence[JobDefinition]) -> dict[str, CatalogQuery]:
    """Each job's entry as the read side needs it: its name and deployed schedule, no query or settings. So
    editing a job's query or settings changes that job's own asset only, not the read side's."""
    return {
        name: CatalogQuery(sql=READ_SIDE_SQL, parameters=(), schedule=query.schedule)
        for name, query in catalog_queries(jobs).items()
    }


def stage_read_asset(jobs: Sequence[JobDefinition], *, source_dir: Path = LAMBDAS_DIR) -> Path:
    """The read side's asset: the runtime packages and :func:`read_side_queries` of every job."""
    return _stage(read_side_queries(jobs), source_dir)


def stage_job_asset(
    job: JobDefinition, *, capacity: CapacityBudget | None = None, source_dir: Path = LAMBDAS_DIR
) -> Path:
    """One job's asset: the runtime packages and a catalog holding ``job`` alone and the deployment's ``capacity``
    budget (see :func:`stage_runtime_asset`)."""
    return stage_runtime_asset([job], capacity=capacity, source_dir=source_dir)


def stage_runtime_asset(
    jobs: Sequence[JobDefinition], *, capacity: CapacityBudget | None = None, source_dir: Path = LAMBDAS_DIR
) -> Path:
    """Copy the runtime packages and write the catalog of ``jobs`` and the deployment's ``capacity`` budget (its
    ``capacity`` section; ``None``: none, read as off) into a fresh directory; returns it.

    The directory lives until the process ends (``cdk synth`` copies it into the cloud assembly).
    """
    return _stage(catalog_queries(jobs), source_dir, capacity)


def _stage(queries: dict[str, CatalogQuery], source_dir: Path, capacity: CapacityBudget | None = None) -> Path:
    staged = Path(tempfile.mkdtemp(prefix="athena-refresh-asset-"))
    atexit.register(shutil.rmtree, staged, True)
    for package in RUNTIME_PACKAGES:
        shutil.copytree(source_dir / package, staged / package, ignore=IGNORED)
    # Imported here: slotlock_cdk loads aws_cdk (and its jsii runtime), which the local tools importing this module's
    # catalog_queries (the demo, the chaos suite) must not pay for or depend on.
    from slotlock_cdk.runtime import stage_slotlock

    stage_slotlock(staged)
    write_catalog(staged / CATALOG_FILE, queries, capacity=capacity)
    return staged
