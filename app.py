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
with status 2. So is every refusal of the SQL check of every job (:mod:`stacks.sql_gate`, cached under
``.cache/sql-check``; ``-c skip_sql_check=true`` skips it). A stack over a CloudFormation quota
(:mod:`stacks.quotas`) is reported the same way, one line per stack, before CDK's own check would raise.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

import aws_cdk as cdk

from athena_refresh.checks import ConfigError, format_problems
from stacks import JOBS_DIR, REPO_ROOT, quotas
from stacks.deployment import Deployment, build_deployment
from stacks.job_groups import SHARED_STACK_NAME
from stacks.jobs import load_jobs
from stacks.nag import enable_nag
from stacks.sql_gate import CACHE_DIR, SKIP_CONTEXT_KEY, SKIPPED_WARNING, check_jobs_sql, skip_requested
from stacks.stack_settings import STACK_KEY, StackSettings, load_app_options, load_context
from stacks.value_metrics_cost import value_metrics_warnings

EXIT_INVALID_CONFIG = 2  # a configuration problem: the list is on stderr
CDK_JSON = REPO_ROOT / "cdk.json"
SAMPLE_DATA_DIR = REPO_ROOT / ".cache" / "data" / "flights"  # written by `python -m sample_data.flights`
SQL_CHECK_CACHE = CACHE_DIR  # the SQL check's results between synths (stacks.sql_gate)
STACK_NAME = SHARED_STACK_NAME


def build_app(
    *,
    context: Mapping[str, Any] | None = None,
    sample_data_dir: Path = SAMPLE_DATA_DIR,
    outdir: Path | None = None,
    jobs_dir: Path = JOBS_DIR,
    sql_check_cache: Path | None = SQL_CHECK_CACHE,
    warn: Callable[[str], None] | None = None,
) -> tuple[cdk.App, Deployment]:
    """Build the app and its stacks (not yet synthesized). ``context`` defaults to cdk.json's; ``jobs_dir``
    holds the job folders.

    Every job's SQL is checked as Athena engine v3 would judge it (:mod:`stacks.sql_gate`; its results cached in
    ``sql_check_cache``, ``None``: no cache) unless the context sets ``skip_sql_check`` to true
    (``cdk synth -c skip_sql_check=true``; then ``warn``, when given, receives one line saying so).

    :raises athena_refresh.checks.ConfigError: every problem of the stack settings or of any job, or every
        refusal of the SQL check (``jobs/x/query.sql:L:C: CLASS: message``).

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
    if skip_requested(app.node.try_get_context(SKIP_CONTEXT_KEY)):
        if warn is not None:
            warn(SKIPPED_WARNING)
    else:
        refusals = check_jobs_sql(jobs, cache_dir=sql_check_cache)
        if refusals:
            raise ConfigError(refusals)
    deployment = build_deployment(app, settings=settings, jobs=jobs, sample_data_dir=sample_data_dir)
    return app, deployment


def template_sizes(assembly: cdk.cx_api.CloudAssembly) -> dict[str, int]:
    """Each synthesized stack's template size in bytes, by stack name."""
    return {
        stack.stack_name: (Path(assembly.directory) / stack.template_file).stat().st_size for stack in assembly.stacks
    }


def main(
    *, jobs_dir: Path = JOBS_DIR, err: TextIO | None = None, sql_check_cache: Path | None = SQL_CHECK_CACHE
) -> int:
    """Synthesize; every configuration problem goes to ``err`` (stderr), one per line, and the status is 2. A job
    whose value metrics would cost far more than its work is named in a ``warning:`` line (the synth goes on), and
    so is a skipped SQL check (``-c skip_sql_check=true``). ``sql_check_cache``: as :func:`build_app`'s."""
    err = err or sys.stderr
    try:
        app, deployment = build_app(
            jobs_dir=jobs_dir, sql_check_cache=sql_check_cache, warn=lambda line: err.write(f"warning: {line}\n")
        )
    except ConfigError as exc:
        err.write(format_problems(exc.problems) + "\n")
        return EXIT_INVALID_CONFIG
    for warning in value_metrics_warnings(deployment.definitions):  # a warning, never a failure
        err.write(f"warning: {warning}\n")
    notice = deployment.per_job_metrics_notice()  # what an upgrade's deploy removes (issue 35)
    if notice:
        err.write(f"note: {notice}\n")
    for warning in deployment.account_quota_warnings():  # IAM roles, Lambda concurrency: requests, never failures
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
