"""CloudFormation's per-template quotas, checked before CloudFormation (or CDK's own check, a jsii traceback) would
refuse a stack: each problem is one line naming the stack, the quota, the count and what to do.

Quotas ("CloudFormation quotas", https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html):

- resources declared in a template: 500;
- outputs declared in a template: 200;
- template body size in an Amazon S3 object (how ``cdk deploy`` uploads a template): 1 MB;
- resources a nested-stack hierarchy creates, updates or deletes in one operation: 2,500. This app nests no
  stacks: every job stack is a stack of its own, deployed in its own operation.

The resource and output counts are taken from the construct tree before synthesis (CDK raises
``TooManyResourcesInStack`` during synthesis); the template size from the synthesized template.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import aws_cdk as cdk

MAX_RESOURCES = 500
MAX_OUTPUTS = 200
MAX_TEMPLATE_BYTES = 1_000_000  # 1 MB (decimal: the smaller reading of the documented "1 MB")
QUOTAS_URL = "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html"


class QuotaError(Exception):
    """A stack would exceed a CloudFormation quota; ``problems``: one line each."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = tuple(problems)


@dataclass(frozen=True)
class StackCount:
    """A stack's resources and outputs as declared in its construct tree."""

    stack_name: str
    resources: int
    outputs: int
    jobs: int = 0  # the jobs it deploys (a job stack's), for the advice


def count(stack: cdk.Stack, *, jobs: int = 0) -> StackCount:
    """Resources (``CfnResource``) and outputs (``CfnOutput``) declared under ``stack`` (this app nests no stacks)."""
    resources = outputs = 0
    for node in stack.node.find_all():
        if isinstance(node, cdk.CfnResource):
            resources += 1
        elif isinstance(node, cdk.CfnOutput):
            outputs += 1
    return StackCount(stack.stack_name, resources, outputs, jobs)


def count_problems(counts: Iterable[StackCount], *, job_stacks: int) -> list[str]:
    """One line per stack over the resource or output quota, with what to do."""
    problems: list[str] = []
    for c in counts:
        if c.resources > MAX_RESOURCES:
            advice = (
                f"raise cdk.json context stack.job_stacks (now {job_stacks}) or pin some of its {c.jobs} jobs to "
                "another stack with `stack_group = N` in their job.toml, or lower their racers"
                if c.jobs
                else "this stack holds no jobs: report it as a bug"
            )
            problems.append(
                f"stack {c.stack_name}: {c.resources} resources, over CloudFormation's {MAX_RESOURCES} per template "
                f"({QUOTAS_URL}): {advice}"
            )
        if c.outputs > MAX_OUTPUTS:
            problems.append(
                f"stack {c.stack_name}: {c.outputs} outputs, over CloudFormation's {MAX_OUTPUTS} per template "
                f"({QUOTAS_URL}): report it as a bug (the app declares no output per job)"
            )
    return problems


def size_problems(template_bytes: dict[str, int], *, job_stacks: int) -> list[str]:
    """One line per synthesized template over 1 MB (stack name -> template size in bytes)."""
    return [
        f"stack {name}: template of {size:,} bytes, over CloudFormation's {MAX_TEMPLATE_BYTES:,} bytes for a "
        f"template in S3 ({QUOTAS_URL}): raise cdk.json context stack.job_stacks (now {job_stacks}) or pin some "
        "of its jobs to another stack with `stack_group = N`"
        for name, size in sorted(template_bytes.items())
        if size > MAX_TEMPLATE_BYTES
    ]
