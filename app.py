#!/usr/bin/env python3
"""Composition root: read cdk.json's context and the job folders once, validate them, build the deployment (the
shared stack ``ScheduledAthenaRefresh`` and the job stacks ``ScheduledAthenaRefresh-Jobs-NN``, :mod:`stacks.deployment`),
check CloudFormation's quotas, synthesize.

``CDK_OUTDIR=cdk.out python app.py`` (no CLI, so no context is passed in) and ``npx cdk synth`` (the
CLI passes cdk.json's context) produce the same template: this file reads cdk.json itself and gives its
context to ``cdk.App``; context from the CLI then overrides it with equal values. No environment
lookups and no AWS calls at synth time: the stack is environment-agnostic. Every synth runs cdk-nag
(``stacks.nag``). The jobs are the folders under ``jobs/`` (:mod:`stacks.jobs`): every problem of every job
is reported before any construct exists: ``main`` prints them one per line to stderr (no traceback) and exits
with status 2. A stack over a CloudFormation quota (:mod:`stacks.quotas`) is reported the same way, one line per
stack, before CDK's own check would raise.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import aws_cdk as cdk

from athena_refresh.checks import ConfigError, format_problems
from stacks import JOBS_DIR, REPO_ROOT, quotas
from stacks.deployment import Deployment, build_deployment
from stacks.job_groups import SHARED_STACK_NAME
from stacks.jobs import load_jobs
from stacks.nag import enable_nag
from stacks.stack_settings import STACK_KEY, StackSettings, load_app_options, load_context
from stacks.value_metrics_cost import value_metrics_warnings

EXIT_INVALID_CONFIG = 2  # a configuration problem: the list is on stderr
CDK_JSON = REPO_ROOT / "cdk.json"
SAMPLE_DATA_DIR = REPO_ROOT / ".cache" / "data" / "flights"  # written by `python -m sample_data.flights`
STACK_NAME = SHARED_STACK_NAME


def build_app(
    *,
    context: Mapping[str, Any] | None = None,
    sample_data_dir: Path = SAMPLE_DATA_DIR,
    outdir: Path | None = None,
    jobs_dir: Path = JOBS_DIR,
) -> tuple[cdk.App, Deployment]:
    """Build the app and its stacks (not yet synthesized). ``context`` defaults to cdk.json's; ``jobs_dir``
    holds the job folders.

    :raises athena_refresh.checks.ConfigError: every problem of the stack settings or of any job.

    cdk-nag's AwsSolutions checks run on every synthesis of the app: an unacknowledged finding makes
    ``app.synth()`` raise and writes ``validation-report.json`` into the cloud assembly (``outdir``;
    default: ``CDK_OUTDIR``, else a temporary directory).
    """
    app = cdk.App(
        context=dict(load_context(CDK_JSON) if context is None else context),
        outdir=None if outdir is None else str(outdir),
        **load_app_options(CDK_JSON),
    )
    enable_nag(app)
    settings = StackSettings.from_context(app.node.try_get_context(STACK_KEY))
    jobs = load_jobs(jobs_dir, settings, root=jobs_dir.parent)
    deployment = build_deployment(app, settings=settings, jobs=jobs, sample_data_dir=sample_data_dir)
    return app, deployment


def template_sizes(assembly: cdk.cx_api.CloudAssembly) -> dict[str, int]:
    """Each synthesized stack's template size in bytes, by stack name."""
    return {
        stack.stack_name: (Path(assembly.directory) / stack.template_file).stat().st_size for stack in assembly.stacks
    }


def main(*, jobs_dir: Path = JOBS_DIR, err: TextIO | None = None) -> int:
    """Synthesize; every configuration problem goes to ``err`` (stderr), one per line, and the status is 2. A job
    whose value metrics would cost far more than its work is named in a ``warning:`` line (the synth goes on)."""
    err = err or sys.stderr
    try:
        app, deployment = build_app(jobs_dir=jobs_dir)
    except ConfigError as exc:
        err.write(format_problems(exc.problems) + "\n")
        return EXIT_INVALID_CONFIG
    for warning in value_metrics_warnings(deployment.definitions):  # a warning, never a failure
        err.write(f"warning: {warning}\n")
    problems = deployment.quota_problems()
    if problems:
        err.write("\n".join(problems) + "\n")
        return EXIT_INVALID_CONFIG
    assembly = app.synth()
    problems = quotas.size_problems(template_sizes(assembly), job_stacks=len(deployment.job_stacks))
    if problems:
        err.write("\n".join(problems) + "\n")
        return EXIT_INVALID_CONFIG
    return 0


if __name__ == "__main__":
    sys.exit(main())
