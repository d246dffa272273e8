"""Acknowledged cdk-nag findings, recorded as CDK validation acknowledgments (no dependency on cdk-nag).

cdk-nag 3 runs as a CDK policy-validation plugin; a finding it reports is silenced by CDK's own
``Validations.of(scope).acknowledge`` (aws-cdk-lib), which covers ``scope`` and everything below it for exactly
one rule id. For per-finding rules (IAM4, IAM5) the id includes the finding:
``AwsSolutions-IAM5[Resource::<Bucket.Arn>/data/*]``. So the constructs of this library acknowledge the few
findings they cause by design (each with its reason), and an app that runs cdk-nag sees them acknowledged,
while an app without cdk-nag is unaffected.
https://github.com/cdklabs/cdk-nag/blob/main/MIGRATION.md
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import aws_cdk as cdk
from constructs import IConstruct

__all__ = ["ACKNOWLEDGMENTS", "MIN_REASON_LENGTH", "AcknowledgedFinding", "acknowledge"]

RULE_ID = re.compile(r"AwsSolutions-[A-Z]+[0-9]+(\[.+\])?")
MIN_REASON_LENGTH = 40  # a reason says why this resource is fine, not just "not needed"


@dataclass(frozen=True)
class AcknowledgedFinding:
    """One acknowledgment: the construct path it covers (with its children), the rule id, the reason."""

    path: str
    rule_id: str
    reason: str


#: Every acknowledgment made in this process, in order (for audits and tests).
ACKNOWLEDGMENTS: list[AcknowledgedFinding] = []
#: False only in an audit that synthesizes without acknowledgments to list the raw findings.
apply_acknowledgments = True


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge one cdk-nag rule (or one finding of it) on ``scope`` and its children.

    :raises ValueError: the id is not an AwsSolutions rule id, or the reason is too short to explain
        why the finding is acceptable here.
    """
    if not RULE_ID.fullmatch(rule_id):
        raise ValueError(f"not an AwsSolutions rule id: {rule_id!r}")
    if len(reason) < MIN_REASON_LENGTH:
        raise ValueError(f"the reason for {rule_id} must explain the acknowledgment, got {reason!r}")
    ACKNOWLEDGMENTS.append(AcknowledgedFinding(scope.node.path, rule_id, reason))
    if apply_acknowledgments:
        cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))
