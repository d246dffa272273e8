"""The IAM permissions AWS checks for one recorded call: action, resource ARN and condition keys.

Sources, per service (the "Actions, resources, and condition keys" pages of the Service Authorization
Reference; an operation's action is its name unless listed here):

- DynamoDB: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazondynamodb.html
  ``TransactWriteItems``/``TransactGetItems`` have no action of their own: IAM authorizes each item's action
  (``Put`` -> ``PutItem``, ``Update`` -> ``UpdateItem``, ``Delete`` -> ``DeleteItem``, ``ConditionCheck`` ->
  ``ConditionCheckItem``, ``Get`` -> ``GetItem``) on its table
  (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html); a ``Query`` or
  ``Scan`` of an index is authorized on ``table/<t>/index/<i>``; a batch on every table it names.
- S3: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html
  ``ListObjects(V2)`` is ``s3:ListBucket`` on the bucket with the ``s3:prefix`` condition key; ``HeadObject`` is
  ``s3:GetObject``; the multipart calls are ``s3:PutObject``; a presigned URL is checked against the signer's
  permissions when it is used (https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-presigned-url.html).
- Athena: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonathena.html
  query calls are authorized on the query's workgroup. Athena also calls Glue and S3 *with the caller's
  credentials*: :func:`athena_on_behalf` adds those (see there).
- Lambda ``Invoke`` is ``lambda:InvokeFunction``; CloudFormation ``DescribeStacks`` is authorized on the stack.
- SSM (https://docs.aws.amazon.com/service-authorization/latest/reference/list_awssystemsmanager.html):
  ``GetParameter`` is authorized on the parameter's ARN (``parameter`` + its name, which starts with ``/``);
  ``GetParametersByPath`` on the *path in the request*, not on the parameters it returns
  (https://docs.aws.amazon.com/systems-manager/latest/userguide/ps-retrieval-authorization.html). The path's ARN
  is the path without a trailing slash: AWS's advice to protect ``/myapp/restricted/db-password`` is to deny
  ``GetParametersByPath`` on ``/myapp/restricted``, ``/myapp`` and ``/``
  (https://docs.aws.amazon.com/systems-manager/latest/userguide/ps-restrict-parameter-access.html), which would
  not hold if ``Path="/myapp/restricted/"`` were authorized as another resource; the root ``/`` stays ``/``
  (AWS names ``parameter/`` when it refuses a listing of ``/``).
- EventBridge Scheduler
  (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoneventbridgescheduler.html):
  ``CreateSchedule`` is authorized on the schedule, ``schedule/<group>/<name>`` (group ``default`` when the request
  names none), and lists ``iam:PassRole`` as its dependent action: the schedule's ``Target.RoleArn`` is passed to
  the Scheduler, which IAM checks as ``iam:PassRole`` on that role with the condition key ``iam:PassedToService``
  = ``scheduler.amazonaws.com``
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_use_passrole.html,
  https://docs.aws.amazon.com/scheduler/latest/UserGuide/setting-up.html#setting-up-execution-role).
- STS ``GetCallerIdentity`` needs no permission ("No permissions are required to perform this operation":
  https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.stacks.iam.recorder import RecordedCall

ACCOUNT = "123456789012"
PARTITION = "aws"

#: IAM service prefix of a botocore service name where they differ.
IAM_PREFIX = {"monitoring": "cloudwatch"}
#: The service principal a schedule's role is passed to (``iam:PassedToService``).
SCHEDULER_SERVICE = "scheduler.amazonaws.com"
#: Calls that need no IAM permission at all.
UNAUTHORIZED_CALLS = {("sts", "GetCallerIdentity")}
_TRANSACT_ITEM_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
_S3_ACTIONS = {
    "HeadObject": "GetObject",
    "ListObjects": "ListBucket",
    "ListObjectsV2": "ListBucket",
    "HeadBucket": "ListBucket",
    "CreateMultipartUpload": "PutObject",
    "UploadPart": "PutObject",
    "CompleteMultipartUpload": "PutObject",
}


@dataclass(frozen=True)
class Permission:
    """One authorization AWS makes: ``action`` (``service:Action``) on ``resource`` (an ARN), with the request's
    ``conditions`` (condition key -> value, e.g. ``{"s3:prefix": "data/flights/"}``); ``via`` says which call
    (and whether Athena made it on the caller's behalf)."""

    action: str
    resource: str
    via: str
    conditions: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        keys = "".join(f" [{key}={value!r}]" for key, value in self.conditions)
        return f"{self.action} on {self.resource}{keys} (for {self.via})"


@dataclass(frozen=True)
class TableLocation:
    """A Glue table Athena reads: database, name, ``s3://bucket/prefix/`` of its data, and whether Athena asks
    Glue for its partitions (partitioned without partition projection)."""

    database: str
    table: str
    location: str
    lists_partitions: bool = False


@dataclass
class AthenaWorld:
    """What Athena needs to know to act for a caller: each workgroup's enforced output location, the tables a
    query may read (by ``database.table``), and the workgroup of every started query."""

    output_locations: Mapping[str, str]
    tables: Mapping[str, TableLocation]
    query_workgroups: Mapping[str, str] = field(default_factory=dict)


def split_s3_url(url: str) -> tuple[str, str]:
    match = re.fullmatch(r"s3://([^/]+)/?(.*)", url)
    assert match, f"not an s3:// URL: {url!r}"
    return match.group(1), match.group(2)


def arn(service: str, region: str, resource: str, *, account: str = ACCOUNT) -> str:
    return f"arn:{PARTITION}:{service}:{region}:{account}:{resource}"


def table_arn(region: str, name: str, index: str | None = None) -> str:
    return arn("dynamodb", region, f"table/{name}" + (f"/index/{index}" if index else ""))


def parameter_arn(region: str, name: str) -> str:
    """The ARN of SSM parameter (or path) ``name``: ``parameter`` + the name (``/`` added when it has none)."""
    return arn("ssm", region, "parameter" + (name if name.startswith("/") else f"/{name}"))


def parameter_path_arn(region: str, path: str) -> str:
    """The resource ``GetParametersByPath(Path=path)`` is authorized on (see the module doc)."""
    return parameter_arn(region, path.rstrip("/") or "/")


def permissions_for(call: RecordedCall, athena: AthenaWorld) -> list[Permission]:
    """Every permission ``call`` needs (empty for a call that needs none)."""
    key = (call.service, call.operation)
    if key in UNAUTHORIZED_CALLS:
        return []
    via = call.describe()
    if call.service == "dynamodb":
        return _dynamodb(call, via)
    if call.service == "s3":
        return _s3(call, via)
    if call.service == "athena":
        return _athena(call, via, athena)
    if call.service == "lambda" and call.operation == "Invoke":
        name = call.params["FunctionName"]
        resource = name if name.startswith("arn:") else arn("lambda", call.region, f"function:{name}")
        return [Permission("lambda:InvokeFunction", resource, via)]
    if call.service == "cloudformation" and call.operation == "DescribeStacks":
        name = call.params["StackName"]
        resource = name if name.startswith("arn:") else arn("cloudformation", call.region, f"stack/{name}/*")
        return [Permission("cloudformation:DescribeStacks", resource, via)]
    if call.service == "scheduler" and call.operation == "CreateSchedule":
        return _create_schedule(call, via)
    if call.service == "ssm" and call.operation == "GetParameter":
        return [Permission("ssm:GetParameter", parameter_arn(call.region, call.params["Name"]), via)]
    if call.service == "ssm" and call.operation == "GetParametersByPath":
        resource = parameter_path_arn(call.region, call.params["Path"])
        return [Permission("ssm:GetParametersByPath", resource, via)]
    if call.service == "sns" and call.operation == "Publish":
        # https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsns.html: the topic's ARN.
        return [Permission("sns:Publish", call.params["TopicArn"], via)]
    raise AssertionError(f"no IAM mapping for {via}: add the operation's action and resource to {__name__}")


def _dynamodb(call: RecordedCall, via: str) -> list[Permission]:
    params, region = call.params, call.region
    if call.operation in ("TransactWriteItems", "TransactGetItems"):
        found = []
        for item in params["TransactItems"]:
            ((kind, request),) = item.items()
            found.append(
                Permission(f"dynamodb:{_TRANSACT_ITEM_ACTIONS[kind]}", table_arn(region, request["TableName"]), via)
            )
        return found
    if call.operation in ("BatchGetItem", "BatchWriteItem"):
        return [
            Permission(f"dynamodb:{call.operation}", table_arn(region, table), via) for table in params["RequestItems"]
        ]
    return [
        Permission(f"dynamodb:{call.operation}", table_arn(region, params["TableName"], params.get("IndexName")), via)
    ]


def _create_schedule(call: RecordedCall, via: str) -> list[Permission]:
    """The schedule itself, and the role its target runs with, passed to the Scheduler (see the module doc)."""
    params = call.params
    schedule = arn("scheduler", call.region, f"schedule/{params.get('GroupName') or 'default'}/{params['Name']}")
    passed = (("iam:PassedToService", SCHEDULER_SERVICE),)
    return [
        Permission("scheduler:CreateSchedule", schedule, via),
        Permission("iam:PassRole", params["Target"]["RoleArn"], f"{via}: its Target.RoleArn", passed),
    ]


def _s3(call: RecordedCall, via: str) -> list[Permission]:
    action = "s3:" + _S3_ACTIONS.get(call.operation, call.operation)
    bucket = call.params["Bucket"]
    if "Key" in call.params:
        return [Permission(action, f"arn:{PARTITION}:s3:::{bucket}/{call.params['Key']}", via)]
    conditions = (("s3:prefix", call.params.get("Prefix", "")),) if action == "s3:ListBucket" else ()
    return [Permission(action, f"arn:{PARTITION}:s3:::{bucket}", via, conditions)]


def _athena(call: RecordedCall, via: str, world: AthenaWorld) -> list[Permission]:
    params = call.params
    if "WorkGroup" in params:
        workgroup = params["WorkGroup"]
    else:
        query_id = params["QueryExecutionId"]
        assert query_id in world.query_workgroups, f"{via}: query {query_id} was not started by a recorded call"
        workgroup = world.query_workgroups[query_id]
    found = [Permission(f"athena:{call.operation}", arn("athena", call.region, f"workgroup/{workgroup}"), via)]
    return found + athena_on_behalf(call, workgroup, world)


def athena_on_behalf(call: RecordedCall, workgroup: str, world: AthenaWorld) -> list[Permission]:
    """What Athena does with the caller's credentials for ``call`` (a query call in ``workgroup``).

    - ``StartQueryExecution``: Glue ``GetDatabase`` and ``GetTable`` (and ``GetPartitions`` for a partitioned
      table without projection) on the catalog, the database and the table of every table the query names
      (https://docs.aws.amazon.com/athena/latest/ug/fine-grained-access-to-glue-resources.html); S3
      ``GetBucketLocation``, ``ListBucket`` (the table's prefix) and ``GetObject`` of the data; and the query
      result location: ``GetBucketLocation``, ``ListBucketMultipartUploads``, ``PutObject``,
      ``ListMultipartUploadParts``, ``AbortMultipartUpload`` (https://docs.aws.amazon.com/athena/latest/ug/s3-permissions.html).
    - ``GetQueryResults``: ``s3:GetObject`` of the query's output file (Athena reads it back as the caller).
    """
    via = f"Athena on the caller's behalf, {call.describe()}"
    region = call.region
    out_bucket, out_prefix = split_s3_url(world.output_locations[workgroup])
    out_bucket_arn = f"arn:{PARTITION}:s3:::{out_bucket}"
    output_object = f"{out_bucket_arn}/{out_prefix}{call.params.get('QueryExecutionId', 'query-id')}.csv"
    if call.operation == "GetQueryResults":
        return [Permission("s3:GetObject", output_object, via)]
    if call.operation != "StartQueryExecution":
        return []
    found: list[Permission] = []
    database = call.params.get("QueryExecutionContext", {}).get("Database", "default")
    for table in _tables_named(call.params["QueryString"], database, world):
        glue = [
            arn("glue", region, "catalog"),
            arn("glue", region, f"database/{table.database}"),
            arn("glue", region, f"table/{table.database}/{table.table}"),
        ]
        actions = ["glue:GetDatabase", "glue:GetTable"] + (["glue:GetPartitions"] if table.lists_partitions else [])
        found += [Permission(action, resource, via) for action in actions for resource in glue]
        data_bucket, data_prefix = split_s3_url(table.location)
        data_bucket_arn = f"arn:{PARTITION}:s3:::{data_bucket}"
        found += [
            Permission("s3:GetBucketLocation", data_bucket_arn, via),
            Permission("s3:ListBucket", data_bucket_arn, via, (("s3:prefix", data_prefix),)),
            Permission("s3:GetObject", f"{data_bucket_arn}/{data_prefix}part-00000.parquet", via),
        ]
    found += [
        Permission("s3:GetBucketLocation", out_bucket_arn, via),
        Permission("s3:ListBucketMultipartUploads", out_bucket_arn, via),
    ]
    found += [
        Permission(action, output_object, via)
        for action in ("s3:PutObject", "s3:ListMultipartUploadParts", "s3:AbortMultipartUpload")
    ]
    return found


def _tables_named(sql: str, default_database: str, world: AthenaWorld) -> list[TableLocation]:
    """The catalog tables ``sql`` reads (sqlglot's parse, Trino dialect); each must be one ``world`` knows."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql.replace("?", "NULL"), read="trino")
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    tables = []
    for node in tree.find_all(exp.Table):
        if node.name in ctes and not node.db:
            continue
        key = f"{node.db or default_database}.{node.name}"
        assert key in world.tables, f"the query reads {key}, which the test's Athena world does not know: {sql}"
        tables.append(world.tables[key])
    return tables


def conditions_of(permission: Permission) -> dict[str, Any]:
    return dict(permission.conditions)
