"""The synthesized deployment as one account and Region would see it.

:class:`ResolvedTemplate` reads the merged template of every stack (:func:`tests.stacks.deployment_view.merged_template`,
whose ``x-stack-of`` names each resource's stack), gives every resource a physical name (its own ``*Name`` property
when it sets one, otherwise ``<its stack>-<logical id>`` as CloudFormation generates them: a job function is
``ScheduledAthenaRefresh-Jobs-NN-...``) and resolves the intrinsics the policies, environments, registry parameters
and outputs use (``Ref``, ``Fn::GetAtt`` ``Arn``, ``Fn::Join``, ``Fn::Sub``, ``Fn::Select``, pseudo parameters,
``AWS::StackName`` being the stack of the resource resolved). :func:`evaluate` asks moto's IAM policy evaluator
(``moto.iam.access_control.IAMPolicy.is_action_permitted``) about one permission against a role's identity
policies, and :func:`condition_gaps` checks what that evaluator does not (it evaluates only ``StringEquals``
conditions and treats the others as satisfied, and ignores ``NotResource``): the ``StringLike`` ``s3:prefix``
of the ``ListBucket`` statements.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from moto.iam.access_control import IAMPolicy, PermissionResult

from tests.stacks.deployment_view import STACK_OF
from tests.stacks.iam.permissions import ACCOUNT, PARTITION, Permission, parameter_arn

REGION = "us-east-1"
_NAME_PROPERTIES = {
    "AWS::DynamoDB::Table": "TableName",
    "AWS::DynamoDB::GlobalTable": "TableName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::IAM::Role": "RoleName",
    "AWS::Athena::WorkGroup": "Name",
    "AWS::SSM::Parameter": "Name",
}


class ResolvedTemplate:
    """``template`` (the merged ``Template.to_json()`` of the deployment) deployed in :data:`REGION`, account
    :data:`~tests.stacks.iam.permissions.ACCOUNT`; ``stack_name``: the shared stack, the stack of a resource
    ``x-stack-of`` does not name and the ``AWS::StackName`` of what is resolved outside any resource (the
    operator's policy, the outputs)."""

    def __init__(self, template: dict[str, Any], stack_name: str) -> None:
        self.template = template
        self.resources: dict[str, Any] = template["Resources"]
        self.stack_name = stack_name
        self.stack_of: dict[str, str] = dict(template.get(STACK_OF, {}))
        self.pseudo = {
            "AWS::Partition": PARTITION,
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::StackName": stack_name,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NoValue": None,
        }

    # ---- names ------------------------------------------------------------------------------------
    def stack(self, logical_id: str) -> str:
        """The name of the stack declaring ``logical_id``."""
        return self.stack_of.get(logical_id, self.stack_name)

    def name(self, logical_id: str) -> str:
        """The physical name of a resource (what ``Ref`` gives for named resources)."""
        resource = self.resources[logical_id]
        props = resource.get("Properties", {})
        type_ = resource["Type"]
        if type_ == "AWS::Glue::Database":
            return str(self.resolve(props["DatabaseInput"]["Name"]))
        if type_ == "AWS::Glue::Table":
            return str(self.resolve(props["TableInput"]["Name"]))
        prop = _NAME_PROPERTIES.get(type_)
        if prop and prop in props:
            return str(self.resolve_in(logical_id, props[prop]))
        generated = f"{self.stack(logical_id)}-{logical_id}"
        return generated.lower()[:63] if type_ == "AWS::S3::Bucket" else generated[:64]

    def ref(self, logical_id: str) -> str:
        if logical_id in self.pseudo:
            return str(self.pseudo[logical_id])
        if logical_id in self.template.get("Parameters", {}):
            return f"resolved-parameter-{logical_id}"
        type_ = self.resources[logical_id]["Type"]
        name = self.name(logical_id)
        if type_ == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
        if type_ == "AWS::SNS::Topic":
            return f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:{name}"
        return name

    def get_att(self, logical_id: str, attribute: str) -> str:
        type_ = self.resources[logical_id]["Type"]
        name = self.name(logical_id)
        if attribute != "Arn":
            if attribute == "QueueName":
                return name
            return f"{logical_id}.{attribute}"
        arns = {
            "AWS::DynamoDB::Table": f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{name}",
            "AWS::DynamoDB::GlobalTable": f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{name}",
            "AWS::S3::Bucket": f"arn:{PARTITION}:s3:::{name}",
            "AWS::Lambda::Function": f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:{name}",
            "AWS::Logs::LogGroup": f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{name}:*",
            "AWS::SQS::Queue": f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{name}",
            "AWS::SNS::Topic": f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:{name}",
            "AWS::IAM::Role": f"arn:{PARTITION}:iam::{ACCOUNT}:role/{name}",
            "AWS::Athena::WorkGroup": f"arn:{PARTITION}:athena:{REGION}:{ACCOUNT}:workgroup/{name}",
            "AWS::SSM::Parameter": parameter_arn(REGION, name),
        }
        assert type_ in arns, f"no ARN format for {type_} ({logical_id})"
        return arns[type_]

    # ---- intrinsics ------------------------------------------------------------------------------
    def resolve(self, value: Any) -> Any:
        """``value`` with every intrinsic function replaced by its value in this deployment."""
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                logical_id, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.get_att(logical_id, attribute)
            if key == "Fn::Join":
                separator, parts = arg
                return separator.join(str(self.resolve(part)) for part in parts)
            if key == "Fn::Select":
                index, items = arg
                return self.resolve(items)[int(index)]
            if key == "Fn::Split":
                separator, text = arg
                return str(self.resolve(text)).split(separator)
            if key == "Fn::Sub":
                text, variables = (arg, {}) if isinstance(arg, str) else arg
                return self.substitute(text, {k: self.resolve(v) for k, v in variables.items()})
            if key.startswith("Fn::"):
                raise AssertionError(f"unsupported intrinsic {key}: {value}")
        return {key: self.resolve(item) for key, item in value.items()}

    def resolve_in(self, logical_id: str, value: Any) -> Any:
        """:meth:`resolve` as the stack of ``logical_id`` does it (its ``AWS::StackName``)."""
        saved = self.pseudo["AWS::StackName"]
        self.pseudo["AWS::StackName"] = self.stack(logical_id)
        try:
            return self.resolve(value)
        finally:
            self.pseudo["AWS::StackName"] = saved

    def substitute(self, text: str, variables: dict[str, Any] | None = None) -> str:
        """``Fn::Sub``: ``${Name}`` from ``variables``, then pseudo parameters and ``Ref``s, ``${Id.Attr}``."""
        variables = variables or {}

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name and name not in self.pseudo:
                logical_id, attribute = name.split(".", 1)
                return self.get_att(logical_id, attribute)
            return self.ref(name)

        return re.sub(r"\$\{([^}!]+)\}", one, text)

    # ---- roles and outputs -------------------------------------------------------------------------
    def role_policies(self, role_id: str) -> list[dict[str, Any]]:
        """The identity policies (resolved documents) of a role: its inline ``Policies`` and every
        ``AWS::IAM::Policy`` attached to it. A managed policy fails: no role of ours may carry one."""
        role = self.resources[role_id]["Properties"]
        assert not role.get("ManagedPolicyArns"), f"{role_id} carries managed policies {role['ManagedPolicyArns']}"
        documents = [self.resolve_in(role_id, policy["PolicyDocument"]) for policy in role.get("Policies", [])]
        for logical_id, resource in self.resources.items():
            if resource["Type"] != "AWS::IAM::Policy":
                continue
            if {"Ref": role_id} in resource["Properties"].get("Roles", []):
                documents.append(self.resolve_in(logical_id, resource["Properties"]["PolicyDocument"]))
        return documents

    def function_role(self, function_id: str) -> str:
        return str(self.resources[function_id]["Properties"]["Role"]["Fn::GetAtt"][0])

    def function_environment(self, function_id: str) -> dict[str, str]:
        variables = self.resources[function_id]["Properties"].get("Environment", {}).get("Variables", {})
        return {name: str(value) for name, value in self.resolve_in(function_id, variables).items()}

    def parameters(self) -> dict[str, tuple[str, str]]:
        """Every SSM parameter the deployment writes (the job registry): name -> (type, value), resolved."""
        found = {}
        for logical_id, resource in self.of_type("AWS::SSM::Parameter").items():
            props = self.resolve_in(logical_id, resource["Properties"])
            found[str(props["Name"])] = (str(props["Type"]), str(props["Value"]))
        return found

    def outputs(self) -> dict[str, str]:
        return {name: str(self.resolve(output["Value"])) for name, output in self.template.get("Outputs", {}).items()}

    def of_type(self, type_: str) -> dict[str, dict[str, Any]]:
        return {lid: res for lid, res in self.resources.items() if res["Type"] == type_}


# ---- evaluation ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    permission: Permission
    allowed: bool
    detail: str


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def statements(documents: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [statement for document in documents for statement in _as_list(document["Statement"])]


def evaluate(permission: Permission, documents: list[dict[str, Any]]) -> Verdict:
    """Is ``permission`` allowed by the identity policies ``documents``? moto's evaluator decides on action and
    resource (an explicit Deny wins; no Allow is an implicit deny); it is given no condition context, so each
    policy goes to it without its ``Condition`` blocks, and :func:`condition_gaps` checks those."""
    permitted = False
    for document in documents:
        stripped = {**document, "Statement": [_without_condition(s) for s in _as_list(document["Statement"])]}
        for statement in stripped["Statement"]:
            assert "NotResource" not in statement, f"NotResource is not evaluated by moto: {statement}"
        result = IAMPolicy(json.dumps(stripped)).is_action_permitted(permission.action, permission.resource)
        if result == PermissionResult.DENIED:
            return Verdict(permission, False, "explicitly denied")
        permitted = permitted or result == PermissionResult.PERMITTED
    if not permitted:
        return Verdict(permission, False, f"missing: a statement allowing {permission.action} on {permission.resource}")
    gaps = condition_gaps(permission, documents)
    if gaps:
        return Verdict(permission, False, gaps)
    return Verdict(permission, True, "allowed")


def _without_condition(statement: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in statement.items() if key != "Condition"}


def matching_statements(permission: Permission, documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Allow statements whose Action and Resource match ``permission`` (moto's matcher, one at a time)."""
    found = []
    for statement in statements(documents):
        if statement["Effect"] != "Allow":
            continue
        single = {"Version": "2012-10-17", "Statement": [_without_condition(statement)]}
        result = IAMPolicy(json.dumps(single)).is_action_permitted(permission.action, permission.resource)
        if result == PermissionResult.PERMITTED:
            found.append(statement)
    return found


def condition_gaps(permission: Permission, documents: list[dict[str, Any]]) -> str:
    """Empty when some matching Allow statement's conditions hold for the request's condition keys; otherwise
    why not. Understood operators: ``StringEquals`` and ``StringLike`` (the ones our policies use); any other
    fails the check, so a new kind of condition gets an evaluator before it gets a grant."""
    context = dict(permission.conditions)
    reasons = []
    for statement in matching_statements(permission, documents):
        condition = statement.get("Condition")
        if not condition:
            return ""
        ok = True
        for operator, keys in condition.items():
            for key, expected in keys.items():
                patterns = [str(p) for p in _as_list(expected)]
                actual = context.get(key)
                if operator == "StringEquals":
                    ok = ok and actual is not None and actual in patterns
                elif operator == "StringLike":
                    ok = ok and actual is not None and any(fnmatch.fnmatchcase(actual, p) for p in patterns)
                else:
                    raise AssertionError(f"condition operator {operator} has no evaluator here: {statement}")
        if ok:
            return ""
        reasons.append(f"{statement.get('Sid', '?')}'s condition {condition} does not hold for {context}")
    return "; ".join(reasons) or "no statement allows it"


def grants(documents: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(Sid, action, resource) of every Allow statement's action and resource."""
    found = []
    for statement in statements(documents):
        if statement["Effect"] != "Allow":
            continue
        for action in _as_list(statement["Action"]):
            for resource in _as_list(statement["Resource"]):
                found.append((str(statement.get("Sid", "")), str(action), str(resource)))
    return found


def grant_used(grant: tuple[str, str, str], used: Iterable[Permission]) -> bool:
    """Did any recorded permission need this (action, resource) of a statement?"""
    _, action, resource = grant
    single = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": action, "Resource": resource}]}
    policy = IAMPolicy(json.dumps(single))
    return any(policy.is_action_permitted(p.action, p.resource) == PermissionResult.PERMITTED for p in used)
