"""Where the job's results live: the only module that knows the results table's wire format.

Results table (partition key ``job``, sort key ``slot``):

- one **immutable result item per slot** (``slot`` = canonical ISO time): fencing token, query execution
  id, statistics, columns, and the rows as compact JSON, or, when they would not fit a DynamoDB item
  (400 KB, https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html), a pointer
  to an S3 object holding them (with its size and SHA-256), never a silent truncation;
- a **"LATEST" pointer item** naming the newest committed slot. Its write is conditioned on holding a
  lower fencing token, so it never moves backwards (Kleppmann's fencing applied at the resource).

Both writes are returned as TransactWriteItems entries that :meth:`slotlock.SlotLock.commit` puts in the
same transaction as the lock's fenced release, so results appear if and only if the slot completes
under the current token. (A transaction carries at most 4 MB and 100 items.)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from . import contract
from .engine import QueryResult, QueryStatistics
from .errors import CorruptResultsItemError, ResultsStoreError

if TYPE_CHECKING:  # pragma: no cover
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_s3.client import S3Client

LATEST = "LATEST"
#: Rows JSON above this many bytes go to S3 (leaves room under the 400 KB item limit for metadata).
DEFAULT_MAX_INLINE_BYTES = 300_000


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=False, allow_nan=False)


@dataclass(frozen=True)
class PreparedResult:
    """The transaction writes for one slot's result, and a summary for logs and the slot item."""

    writes: list[dict[str, Any]]
    summary: dict[str, Any]


class ResultsStore:
    """Prepare and read the job's stored results.

    Parameters
    ----------
    table_name:
        The results table (``job`` S, ``slot`` S).
    bucket_name:
        Bucket for rows too large for an item (``None``: oversize results raise ``ResultsStoreError``).
    dynamodb_client, s3_client:
        Injected boto3 clients; defaults use botocore's ``standard`` retry mode.
    max_inline_bytes:
        Rows JSON larger than this goes to S3.
    """

    def __init__(
        self,
        table_name: str,
        *,
        bucket_name: str | None = None,
        dynamodb_client: DynamoDBClient | None = None,
        s3_client: S3Client | None = None,
        max_inline_bytes: int = DEFAULT_MAX_INLINE_BYTES,
    ) -> None:
        self.table_name = table_name
        self.bucket_name = bucket_name
        self._dynamodb = dynamodb_client
        self._s3 = s3_client
        self.max_inline_bytes = max_inline_bytes

    @property
    def dynamodb(self) -> DynamoDBClient:
        if self._dynamodb is None:
            self._dynamodb = boto3.client("dynamodb", config=Config(retries={"mode": "standard"}))
        return self._dynamodb

    @property
    def s3(self) -> S3Client:
        if self._s3 is None:
            self._s3 = boto3.client("s3", config=Config(retries={"mode": "standard"}))
        return self._s3

    def prepare(
        self,
        *,
        job_name: str,
        slot_iso: str,
        fencing_token: int,
        query_execution_id: str,
        statistics: QueryStatistics,
        result: QueryResult,
        committed_at_ms: int,
        window: tuple[str, str],
    ) -> PreparedResult:
        """Build the result-item Put and the fenced LATEST-pointer Update for a commit transaction.

        Rows larger than ``max_inline_bytes`` are uploaded first to
        ``s3://<bucket>/results/<job>/<slot>/token-<fencing token>.json`` (a stale holder's upload lands
        under its own token and is never referenced).

        Raises
        ------
        ResultsStoreError
            Rows contain non-JSON values, are too large with no bucket configured, or the upload failed.
        """
        try:
            rows_json = _dumps(result.rows)
        except (TypeError, ValueError) as exc:
            raise ResultsStoreError(
                f"rows of slot {slot_iso} are not JSON-serialisable: {exc}", retryable=False
            ) from exc
        columns = [{"name": c.name, "type": c.type} for c in result.columns]
        item: dict[str, Any] = {
            "job": {"S": job_name},
            "slot": {"S": slot_iso},
            "fencing_token": {"N": str(fencing_token)},
            "query_execution_id": {"S": query_execution_id},
            "statistics_json": {"S": _dumps(statistics.as_dict())},
            "columns_json": {"S": _dumps(columns)},
            "row_count": {"N": str(len(result.rows))},
            "committed_at_ms": {"N": str(committed_at_ms)},
            "window_start": {"S": window[0]},
            "window_end": {"S": window[1]},
        }
        rows_bytes = len(rows_json.encode())
        location = "inline"
        if rows_bytes > self.max_inline_bytes:
            key = f"{contract.RESULTS_S3_PREFIX}{job_name}/{slot_iso}/token-{fencing_token}.json"
            item |= self._upload(key, rows_json, rows_bytes)
            location = "s3"
        else:
            item["rows_json"] = {"S": rows_json}
        put_result = {
            "Put": {
                "TableName": self.table_name,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(#slot)",
                "ExpressionAttributeNames": {"#slot": "slot"},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        update_latest = {
            "Update": {
                "TableName": self.table_name,
                "Key": {"job": {"S": job_name}, "slot": {"S": LATEST}},
                "UpdateExpression": (
                    "SET #token = :token, #latest_slot = :slot, #qid = :qid, #rows = :rows, #at = :at"
                ),
                # Fenced pointer: never replaced by a lower token (a stale writer, or an older slot).
                "ConditionExpression": "attribute_not_exists(#token) OR #token < :token",
                "ExpressionAttributeNames": {
                    "#token": "fencing_token",
                    "#latest_slot": "latest_slot",
                    "#qid": "query_execution_id",
                    "#rows": "row_count",
                    "#at": "committed_at_ms",
                },
                "ExpressionAttributeValues": {
                    ":token": {"N": str(fencing_token)},
                    ":slot": {"S": slot_iso},
                    ":qid": {"S": query_execution_id},
                    ":rows": {"N": str(len(result.rows))},
                    ":at": {"N": str(committed_at_ms)},
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        summary = {
            "query_execution_id": query_execution_id,
            "row_count": len(result.rows),
            "rows_bytes": rows_bytes,
            "rows_location": location,
            "statistics": statistics.as_dict(),
            "window": list(window),
        }
        return PreparedResult([put_result, update_latest], summary)

    def conflict_error(
        self,
        index: int,
        old_item: Mapping[str, Any] | None,
        *,
        job_name: str,
        slot_iso: str,
        fencing_token: int | None = None,
        code: str = "ConditionalCheckFailed",
    ) -> CorruptResultsItemError:
        """Explain why write ``index`` of :meth:`prepare`'s writes for ``job_name``/``slot_iso`` was refused
        inside a commit whose lock condition passed (``slotlock.CommitConflictError``; ``old_item`` is its
        ALL_OLD item in DynamoDB JSON, ``None`` when the backend returned none; ``fencing_token`` the
        committing token, which the lock item holds; ``code`` the cancellation reason).

        The holder of the current fencing token can only be refused by results that contradict the lock:
        write 0 (the slot's result) finds a result already stored; write 1 (LATEST) finds a pointer whose
        ``fencing_token`` is not a Number, or not below the committing token. Only a pointer token at or
        above the committing one (which the lock item holds) is blamed on a reset fencing counter.
        Throttling and transaction conflicts never get here: slotlock retries them.
        """
        item = dict(old_item or {})
        if index == 0 and code != "ConditionalCheckFailed":
            return CorruptResultsItemError(
                f"{job_name}/{slot_iso}",
                "slot",
                f"refused the result write with {code} although the lock holds the committing token {fencing_token}",
            )
        if index == 0:
            return CorruptResultsItemError(
                f"{job_name}/{slot_iso}",
                "slot",
                f"already holds a result (fencing_token {item.get('fencing_token')}, query_execution_id"
                f" {item.get('query_execution_id')}) although the lock says the slot never finished",
            )
        token = item.get("fencing_token")
        refused = "" if code == "ConditionalCheckFailed" else f" ({code})"
        if token is None and not item:
            problem = f"refused the fenced pointer update{refused} (the backend returned no old item to say why)"
        elif token is not None and set(token) != {"N"}:
            problem = f"must be a Number, found {token}: no commit can pass the pointer's fencing condition"
        elif token is None:
            problem = f"is missing from the LATEST pointer, which refused the fenced update{refused}: it was edited"
        elif fencing_token is not None and int(token["N"]) < fencing_token:
            problem = (
                f"is {token['N']}, below the committing token {fencing_token}, yet the pointer refused the fenced"
                f" update{refused}: the pointer item was edited (its other attributes no longer match)"
            )
        else:
            held = (
                f"the committing token {fencing_token}, which the lock item holds"
                if fencing_token is not None
                else ("the committing holder's current token")
            )
            problem = (
                f"is {token['N']}, not below {held}: the lock's fencing counter went back (a deleted or"
                " restored lock item: bump the fence above the pointer) or the pointer was edited"
            )
        return CorruptResultsItemError(f"{job_name}/{LATEST}", "fencing_token", problem)

    def _upload(self, key: str, rows_json: str, rows_bytes: int) -> dict[str, Any]:
        if not self.bucket_name:
            raise ResultsStoreError(
                f"result rows are {rows_bytes} bytes, above the {self.max_inline_bytes}-byte item budget, and no"
                " results bucket is configured (RESULTS_BUCKET_NAME): refusing to truncate",
                retryable=False,
            )
        body = rows_json.encode()
        digest = hashlib.sha256(body).hexdigest()
        try:
            self.s3.put_object(
                Bucket=self.bucket_name,
                Key=key,
                Body=body,
                ContentType="application/json",
                ChecksumAlgorithm="SHA256",
            )
        except (ClientError, BotoCoreError) as exc:
            raise ResultsStoreError(
                f"could not upload {rows_bytes} bytes of rows to s3://{self.bucket_name}/{key}: {exc}"
            ) from exc
        return {
            "rows_s3_uri": {"S": f"s3://{self.bucket_name}/{key}"},
            "rows_sha256": {"S": digest},
            "rows_bytes": {"N": str(rows_bytes)},
        }

    # --- reading (dashboards, APIs, tests) -------------------------------------------------------------
    def get_latest(self, job_name: str) -> dict[str, Any] | None:
        """The LATEST pointer of ``job_name`` (``latest_slot``, ``fencing_token``, ...) or ``None``."""
        item = self._get(job_name, LATEST)
        return None if item is None else _plain_item(item)

    def get_result(self, job_name: str, slot_iso: str) -> dict[str, Any] | None:
        """One slot's stored result with ``rows`` loaded (from S3 when offloaded, checksum verified)."""
        item = self._get(job_name, slot_iso)
        if item is None:
            return None
        plain = _plain_item(item)
        uri = plain.pop("rows_s3_uri", None)
        if uri is not None:
            bucket, _, key = uri.removeprefix("s3://").partition("/")
            try:
                body = self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            except (ClientError, BotoCoreError) as exc:
                raise ResultsStoreError(f"could not read {uri}: {exc}") from exc
            if hashlib.sha256(body).hexdigest() != plain.get("rows_sha256"):
                raise ResultsStoreError(f"{uri} does not match its recorded SHA-256")
            plain["rows"] = json.loads(body)
        return plain

    def list_results(self, job_name: str) -> list[dict[str, Any]]:
        """All stored result items of ``job_name`` (without loading S3 rows), oldest slot first."""
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#job = :job",
            "ExpressionAttributeNames": {"#job": "job"},
            "ExpressionAttributeValues": {":job": {"S": job_name}},
            "ConsistentRead": True,
        }
        while True:
            try:
                page = self.dynamodb.query(**kwargs)
            except (ClientError, BotoCoreError) as exc:
                raise ResultsStoreError(f"could not list results of {job_name}: {exc}") from exc
            items.extend(_plain_item(i) for i in page.get("Items", []) if i["slot"]["S"] != LATEST)
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _get(self, job_name: str, slot: str) -> dict[str, Any] | None:
        try:
            response = self.dynamodb.get_item(
                TableName=self.table_name, Key={"job": {"S": job_name}, "slot": {"S": slot}}, ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as exc:
            raise ResultsStoreError(f"could not read result {job_name}/{slot}: {exc}") from exc
        return response.get("Item")


def _plain_item(item: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    plain: dict[str, Any] = {}
    for name, value in item.items():
        ((kind, raw),) = value.items()
        if kind == "N":
            plain_value: Any = int(raw) if raw.lstrip("-").isdigit() else float(raw)
        else:
            plain_value = raw
        if name.endswith("_json") and isinstance(plain_value, str):
            plain[name[: -len("_json")]] = json.loads(plain_value)
        else:
            plain[name] = plain_value
    return plain


def create_results_table(client: DynamoDBClient, table_name: str, *, wait: bool = True) -> str:
    """Create an on-demand results table (``contract.RESULTS_TABLE_PARTITION_KEY`` /
    ``RESULTS_TABLE_SORT_KEY``, both strings) as the stack declares it; ``wait`` until ACTIVE.

    For tests and local tools: the stack creates the deployed table. Returns ``table_name``.
    """
    partition, sort = contract.RESULTS_TABLE_PARTITION_KEY, contract.RESULTS_TABLE_SORT_KEY
    client.create_table(
        TableName=table_name,
        KeySchema=[{"AttributeName": partition, "KeyType": "HASH"}, {"AttributeName": sort, "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": partition, "AttributeType": "S"},
            {"AttributeName": sort, "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    if wait:
        client.get_waiter("table_exists").wait(TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    return table_name
