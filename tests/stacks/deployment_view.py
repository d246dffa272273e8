"""The deployment's stacks as one template, for tests written against "the template".

:func:`merged_template` unions the Resources, Outputs, Parameters and Rules of every stack of a
:class:`~stacks.deployment.Deployment` and replaces each weak cross-stack reference (``Fn::GetStackOutput`` of an
output CDK publishes in the shared stack) by that output's value, a plain ``Ref``/``Fn::GetAtt`` of the shared
resource: the merged template reads as the one-stack template did. ``STACK_OF`` (a top-level key) maps every
logical id to the stack that declares it, for tests that need physical names (``<stack>-<logical id>``).
"""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Template

STACK_OF = "x-stack-of"  # logical id -> the stack name declaring it


def stack_templates(deployment: Any) -> dict[str, dict[str, Any]]:
    """Every stack's synthesized template, by stack name (the shared stack first)."""
    return {stack.stack_name: Template.from_stack(stack).to_json() for stack in deployment.stacks}


def merged_template(templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One template holding every stack's (see the module doc). :raises AssertionError: a logical id twice."""
    outputs_by_stack = {name: template.get("Outputs", {}) for name, template in templates.items()}
    merged: dict[str, Any] = {"Resources": {}, "Outputs": {}, "Parameters": {}, "Rules": {}, STACK_OF: {}}
    for name, template in templates.items():
        for section in ("Resources", "Outputs", "Parameters", "Rules"):
            for logical_id, value in template.get(section, {}).items():
                if section == "Resources":
                    assert logical_id not in merged["Resources"], f"{logical_id} declared in two stacks"
                    merged[STACK_OF][logical_id] = name
                merged[section].setdefault(logical_id, _local(value, outputs_by_stack))
    return merged


def _local(value: Any, outputs_by_stack: dict[str, dict[str, Any]]) -> Any:
    if isinstance(value, list):
        return [_local(item, outputs_by_stack) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Fn::GetStackOutput"}:
        reference = value["Fn::GetStackOutput"]
        return outputs_by_stack[reference["StackName"]][reference["OutputName"]]["Value"]
    return {key: _local(item, outputs_by_stack) for key, item in value.items()}
