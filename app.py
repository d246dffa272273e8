#!/usr/bin/env python3
"""Composition root: read cdk.json's context once, validate it, build the one stack, synthesize.

``CDK_OUTDIR=cdk.out python app.py`` (no CLI, so no context is passed in) and ``npx cdk synth`` (the
CLI passes cdk.json's context) produce the same template: this file reads cdk.json itself and gives its
context to ``cdk.App``; context from the CLI then overrides it with equal values. No environment
lookups and no AWS calls at synth time: the stack is environment-agnostic. Every synth runs cdk-nag
(``stacks.nag``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from stacks import REPO_ROOT
from stacks.config import CONTEXT_KEY, JobConfig, load_app_options, load_context
from stacks.nag import enable_nag
from stacks.refresh_stack import ScheduledAthenaRefreshStack

CDK_JSON = REPO_ROOT / "cdk.json"
SAMPLE_DATA_DIR = REPO_ROOT / ".cache" / "data" / "flights"  # written by `python -m sample_data.flights`
STACK_NAME = "ScheduledAthenaRefresh"


def build_app(
    *, context: Mapping[str, Any] | None = None, sample_data_dir: Path = SAMPLE_DATA_DIR, outdir: Path | None = None
) -> tuple[cdk.App, ScheduledAthenaRefreshStack]:
    """Build the app and its stack (not yet synthesized). ``context`` defaults to cdk.json's.

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
    config = JobConfig.from_context(app.node.try_get_context(CONTEXT_KEY))
    stack = ScheduledAthenaRefreshStack(
        app,
        STACK_NAME,
        config=config,
        sample_data_dir=sample_data_dir,
        description="Scheduled Athena refresh: N racers, one fenced DynamoDB lease per schedule slot",
    )
    return app, stack


def main() -> None:
    app, _ = build_app()
    app.synth()


if __name__ == "__main__":
    main()
