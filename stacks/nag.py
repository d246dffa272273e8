"""cdk-nag 3 (``AwsSolutionsChecks``) on every synth, and the one way this app acknowledges a finding.

cdk-nag 3 is a CDK policy-validation plugin: ``app.synth()`` (so ``python app.py`` and ``cdk synth``)
fails with ``ValidationFailed`` and writes ``validation-report.json`` into the assembly when a
finding is not acknowledged. An acknowledgment (:func:`slotlock_cdk.acknowledgments.acknowledge`, shared with the
construct library, which must not depend on cdk-nag) is CDK's own ``Validations.of(scope).acknowledge``: it
covers ``scope`` and everything below it, for exactly one rule id, which for per-finding rules
(IAM4, IAM5) includes the finding: ``AwsSolutions-IAM5[Resource::<Bucket.Arn>/data/*]``.
https://github.com/cdklabs/cdk-nag/blob/main/MIGRATION.md
"""

from __future__ import annotations

import hashlib
import json
import re

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from slotlock_cdk.acknowledgments import ACKNOWLEDGMENTS, MIN_REASON_LENGTH, AcknowledgedFinding, acknowledge

__all__ = [
    "ACKNOWLEDGMENTS",
    "MIN_REASON_LENGTH",
    "AcknowledgedFinding",
    "acknowledge",
    "enable_nag",
    "published_output_name",
    "wildcard_finding",
]


def enable_nag(app: cdk.App) -> None:
    """Run the AWS Solutions rule pack on every synthesis of ``app``."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))


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
