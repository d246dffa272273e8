"""The Lambda asset of every job: the runtime packages of ``lambdas/`` plus the job catalog (each job's query
and settings), staged at synth.

``lambdas/`` holds the runtime (``slotlock``, ``athena_refresh``, and ``results_api``, the read side); the job
catalog (:mod:`athena_refresh.catalog`, ``job_catalog.json``) is written next to them from the job folders'
prepared queries. The staged directory's content depends only on those files, so its asset hash (and the template)
is the same on every synth; all the functions share the one asset.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from athena_refresh.catalog import CATALOG_FILE, CatalogQuery, CatalogSchedule, catalog_document
from stacks import LAMBDAS_DIR
from stacks.jobs import JobDefinition

RUNTIME_PACKAGES = ("slotlock", "athena_refresh", "results_api")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")


def catalog_queries(jobs: Sequence[JobDefinition]) -> dict[str, CatalogQuery]:
    """Each job's prepared query and settings, as the runtime reads them from the catalog."""
    return {
        job.job_name: CatalogQuery(
            sql=job.query.text,
            parameters=job.query.parameter_order,
            constants=job.parameters,
            settings=job.config.job_settings(),
            schedule=CatalogSchedule(
                expression=job.config.schedule_expression,
                timezone=job.config.schedule_timezone,
                racers=job.config.racers,
            ),
        )
        for job in jobs
    }


def stage_runtime_asset(jobs: Sequence[JobDefinition], *, source_dir: Path = LAMBDAS_DIR) -> Path:
    """Copy the runtime packages and write the job catalog into a fresh directory; returns it.

    The directory lives until the process ends (``cdk synth`` copies it into the cloud assembly).
    """
    staged = Path(tempfile.mkdtemp(prefix="athena-refresh-asset-"))
    atexit.register(shutil.rmtree, staged, True)
    for package in RUNTIME_PACKAGES:
        shutil.copytree(source_dir / package, staged / package, ignore=IGNORED)
    document = catalog_document(catalog_queries(jobs))
    (staged / CATALOG_FILE).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return staged
