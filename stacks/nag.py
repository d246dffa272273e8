"""cdk-nag 3 (``AwsSolutionsChecks``) on every synth, and the one way this app acknowledges a finding.

cdk-nag 3 is a CDK policy-validation plugin: ``app.synth()`` (so ``python app.py`` and ``cdk synth``)
fails with ``ValidationFailed`` and writes ``validation-report.json`` into the assembly when a
finding is not acknowledged. An acknowledgment is CDK's own ``Validations.of(scope).acknowledge``: it
covers ``scope`` and everything below it, for exactly one rule id, which for per-finding rules
(IAM4, IAM5) includes the finding: ``AwsSolutions-IAM5[Resource::<Bucket.Arn>/data/*]``.
https://github.com/cdklabs/cdk-nag/blob/main/MIGRATION.md
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

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
#: False only in the audit test that synthesizes without acknowledgments to list the raw findings.
apply_acknowledgments = True


def enable_nag(app: cdk.App) -> None:
    """Run the AWS Solutions rule pack on every synthesis of ``app``."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))


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


def wildcard_finding(scope: IConstruct, resource: str, *, producer: cdk.Stack | None = None) -> str:
    """The IAM5 finding id cdk-nag reports for ``resource`` (a token-bearing ARN string).

    cdk-nag renders references as ``<LogicalId.Arn>``/``<LogicalId>``, so the id is derived from the
    resolved template value of ``resource`` instead of being written by hand. ``producer``: the stack that owns
    the referenced resource when it is not ``scope``'s (a job stack using the shared stack's bucket): the
    consumer's template then holds CDK's weak cross-stack reference (``Fn::GetStackOutput`` of an output CDK
    publishes in the producer), which cdk-nag renders as its JSON text.
    """
    consumer = cdk.Stack.of(scope)
    foreign = producer if producer is not None and producer.node.path != consumer.node.path else None
    resolved = (foreign or consumer).resolve(resource)
    return f"AwsSolutions-IAM5[Resource::{_render(resolved, foreign)}]"


def published_output_name(reference: object) -> str:
    """The logical id of the output CDK publishes in a producer stack for a weak cross-stack reference to
    ``reference`` (its resolved value): construct ``Publish/Output<JSON of the value>``, named by CDK's unique-id
    rule (the path's alphanumerics, then the first 8 hex digits of the MD5 of the path, upper case)."""
    components = ["Publish", "Output" + json.dumps(reference, separators=(",", ":"))]
    digest = hashlib.md5("/".join(components).encode("utf-8"), usedforsecurity=False).hexdigest()[:8].upper()
    return "".join(re.sub(r"[^A-Za-z0-9]", "", part) for part in components) + digest


def _render(value: object, producer: cdk.Stack | None = None) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return separator.join(_render(part, producer) for part in parts)
        if producer is not None and ("Fn::GetAtt" in value or "Ref" in value):
            output = {
                "StackName": producer.stack_name,
                "Region": {"Ref": "AWS::Region"},
                "OutputName": published_output_name(value),
            }
            return json.dumps({"Fn::GetStackOutput": output}, separators=(",", ":"))
        if "Fn::GetAtt" in value:
            logical_id, attribute = value["Fn::GetAtt"]
            return f"<{logical_id}.{attribute}>"
        if "Ref" in value:
            return f"<{value['Ref']}>"
    raise ValueError(f"cannot render {value!r} as a cdk-nag finding")
