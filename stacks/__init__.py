"""Infrastructure of the scheduled Athena refresh (aws_cdk only; never imports the runtime's boto3 code).

Stack modules import ``athena_refresh.contract`` (constants only, standard library only) and the
lock table layout (``slotlock.table``), installed with the project (``pip install -e .``): the stack and
the runtime then share the names of environment variables, metrics, keys and prefixes.
Paths are resolved from this file, never from the current working directory.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
LAMBDAS_DIR = REPO_ROOT / "lambdas"  # the runtime packages, staged with the job catalog (stacks.runtime_asset)
JOBS_DIR = REPO_ROOT / "jobs"  # one folder per job: job.toml + query.sql (stacks.jobs)
