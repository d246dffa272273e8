"""Where the job's results live: the store that writes and reads the results table (its wire format is here and
in :mod:`athena_refresh.results_commit`, which builds the commit's two writes; :mod:`athena_refresh.stored`
decodes the items).

Results table (partition key ``job``, sort key ``slot``):

- one **immutable result item per slot and generation** (``slot`` = canonical ISO time for generation 1,
  the live schedule's run; ``<slot>#g<n>`` for a manual generation ``n``): fencing token, generation, query
  execution id, statistics, columns, and the rows as compact JSON, or, when they would not fit a DynamoDB
  item (400 KB, https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html), a
  pointer to an S3 object holding them (with its size and SHA-256), never a silent truncation;
- a **"LATEST" item** naming the newest committed (slot, generation) and carrying a copy of its result
  (columns, statistics, window, and the rows inline or the same S3 pointer), so reading the latest result
  costs one ``GetItem`` (:meth:`ResultsStore.latest`). It moves forward by slot, then by generation: its
  condition compares the slot (canonical ISO text orders as time) and, for the same slot, the generation, and
  only for the same slot and generation the fencing token (``results_commit.latest_condition``). A re-run or
  backfill of an older slot can never move it backwards, whatever its token. Rows go inline on both items below
  ``max_inline_bytes`` (300 KB: each item stays under 400 KB, the transaction far under its 4 MB).

Both writes are returned as TransactWriteItems entries that :meth:`slotlock.SlotLock.commit` puts in the
same transaction as the lock's fenced release, so results appear if and only if the slot completes
under the current token. (A transaction carries at most 4 MB and 100 items.) A commit whose (slot,
generation) is not ahead of the pointer leaves the pointer out (:meth:`ResultsStore.latest_order` decides
before the commit; the job retries without it when the pointer moved ahead in between): the result is stored,
and LATEST keeps naming the newer one.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from . import contract
from .engine import QueryResult, QueryStatistics
from .errors import CorruptResultsItemError, ResultsStoreError
from .results_commit import PreparedResult, commit_writes, compact_json, explain_conflict
from .stored import LATEST, LIVE_GENERATION, StoredResult, plain_item, result_sort_key

if TYPE_CHECKING:  # pragma: no cover
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_s3.client import S3Client

logger = logging.getLogger(__name__)


#: Rows JSON above this many bytes go to S3 (leaves room under the 400 KB item limit for metadata).
DEFAULT_MAX_INLINE_BYTES = 300_000
#: ``cost(writes, summary) -> estimate`` (see :meth:`ResultsStore.prepare`).
CostHook = Callable[[Sequence[Mapping[str, Any]], Mapping[str, Any]], Mapping[str, Any]]


def _estimate(
    cost: CostHook, writes: Sequence[Mapping[str, Any]], summary: Mapping[str, Any], slot_iso: str
) -> tuple[dict[str, Any], str] | None:
    """The hook's estimate as plain JSON data and as its text, or ``None`` (logged) when the hook raised or its
    estimate holds what JSON cannot carry (``nan``, ``inf``, a non-JSON value): the estimate is informative, so
    nothing it computes may fail the commit (the slot commits without one)."""
    try:
        text = compact_json(dict(cost(writes, summary)))
    except Exception:  # any failure of an informative figure: commit without it rather than retry forever
        logger.exception("slot %s commits without a cost estimate: it could not be computed or encoded", slot_iso)
        return None
    return json.loads(text), text  # round-tripped: what the slot item's summary encodes is plain JSON data


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
        generation: int = LIVE_GENERATION,
        move_latest: bool = True,
        cost: CostHook | None = None,
        assertions_failed: Sequence[Mapping[str, Any]] = (),
    ) -> PreparedResult:
        """Build the result-item Put and (``move_latest``) the LATEST-pointer Update for a commit transaction.

        Rows larger than ``max_inline_bytes`` are uploaded first to
        ``s3://<bucket>/results/<job>/<slot>/token-<fencing token>.json`` (generation 2+:
        ``.../<slot>/g<generation>-token-<fencing token>.json``; a stale holder's upload lands under its own
        token and is never referenced).

        ``assertions_failed``: the assertions the rows broke (:mod:`athena_refresh.assertions`), stored on the item as
        ``assertions_failed_json`` (the slot is FAILED: the rows are kept for inspection, never LATEST).

        ``cost(writes, summary)``, when given, returns the slot's cost estimate (:mod:`athena_refresh.cost`) from
        the writes and summary as they stand; it is stored as ``cost_json`` on the result item and its LATEST
        copy, and as ``cost`` in the summary. A hook that raises, or an estimate with a non-finite figure, is
        logged and left out: the result is prepared without it (never an error).

        Raises
        ------
        ResultsStoreError
            Rows contain non-JSON values, are too large with no bucket configured, or the upload failed.
        """
        try:
            rows_json = compact_json(result.rows)
        except (TypeError, ValueError) as exc:
            raise ResultsStoreError(
                f"rows of slot {slot_iso} are not JSON-serialisable: {exc}", retryable=False
            ) from exc
        columns = [{"name": c.name, "type": c.type} for c in result.columns]
        item: dict[str, Any] = {
            "job": {"S": job_name},
            "slot": {"S": result_sort_key(slot_iso, generation)},
            "slot_time": {"S": slot_iso},
            "generation": {"N": str(generation)},
            "fencing_token": {"N": str(fencing_token)},
            "query_execution_id": {"S": query_execution_id},
            "statistics_json": {"S": compact_json(statistics.as_dict())},
            "columns_json": {"S": compact_json(columns)},
            "row_count": {"N": str(len(result.rows))},
            "committed_at_ms": {"N": str(committed_at_ms)},
            "window_start": {"S": window[0]},
            "window_end": {"S": window[1]},
        }
        if assertions_failed:
            item["assertions_failed_json"] = {"S": compact_json(list(assertions_failed))}
        rows_bytes = len(rows_json.encode())
        location = "inline"
        if rows_bytes > self.max_inline_bytes:
            name = f"token-{fencing_token}" if generation == LIVE_GENERATION else f"g{generation}-token-{fencing_token}"
            key = f"{contract.RESULTS_S3_PREFIX}{job_name}/{slot_iso}/{name}.json"
            item |= self._upload(key, rows_json, rows_bytes)
            location = "s3"
        else:
            item["rows_json"] = {"S": rows_json}
        summary = {
            "query_execution_id": query_execution_id,
            "row_count": len(result.rows),
            "rows_bytes": rows_bytes,
            "rows_location": location,
            "statistics": statistics.as_dict(),
            "window": list(window),
            "latest_moved": move_latest,
        }
        where: dict[str, Any] = {
            "job_name": job_name,
            "slot_iso": slot_iso,
            "fencing_token": fencing_token,
            "generation": generation,
            "move_latest": move_latest,
        }
        if cost is not None:  # measured with the writes as they stand, then carried by the result and LATEST
            writes = commit_writes(self.table_name, item, **where)
            estimate = _estimate(cost, writes, summary, slot_iso)
            if estimate is not None:
                summary["cost"], text = estimate
                item["cost_json"] = {"S": text}
        writes = commit_writes(self.table_name, item, **where)
        return PreparedResult(writes, summary, 1 if move_latest else None)

    def latest_order(self, job_name: str, slot_iso: str, generation: int) -> int:
        """Where ``job_name``'s LATEST pointer stands against (``slot_iso``, ``generation``), one consistent read:
        -1 behind it (or no pointer: a commit moves it), 0 at it, 1 ahead of it (a commit leaves it alone).
        A pointer whose fields are not of their types counts as behind, so the fenced write's condition refuses
        it and :meth:`conflict_error` names the attribute.

        Raises :class:`ResultsStoreError` (retryable) when DynamoDB fails.
        """
        item = self._get(job_name, LATEST, projection=("latest_slot", "latest_generation"))
        if item is None:
            return -1
        pointer = plain_item(item)
        latest_slot = pointer.get("latest_slot")
        latest_generation = pointer.get("latest_generation", LIVE_GENERATION)
        if not isinstance(latest_slot, str) or not isinstance(latest_generation, int):
            return -1
        pointer_at, ours = (latest_slot, latest_generation), (slot_iso, generation)
        if pointer_at > ours:
            return 1
        return 0 if pointer_at == ours else -1

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
        inside a commit whose lock condition passed (``old_item``: the ALL_OLD item in DynamoDB JSON or ``None``;
        ``fencing_token``: the committing token; ``code``: the cancellation reason). The rules are
        :func:`athena_refresh.results_commit.explain_conflict`'s.
        """
        return explain_conflict(
            index, old_item, job_name=job_name, slot_iso=slot_iso, fencing_token=fencing_token, code=code
        )

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
        return None if item is None else plain_item(item)

    def get_result(
        self, job_name: str, slot_iso: str, generation: int | None = LIVE_GENERATION
    ) -> dict[str, Any] | None:
        """One slot's stored result of ``generation`` with ``rows`` loaded (from S3 when offloaded, checksum
        verified); ``generation=None``: the newest committed generation of the slot (one Query, then the GetItem)."""
        found = self._result_item(job_name, slot_iso, generation)
        if found is None:
            return None
        plain = found[1]
        uri = plain.pop("rows_s3_uri", None)
        if uri is not None:
            plain["rows"] = self._read_offloaded(uri, plain.get("rows_sha256"))
        return plain

    def latest(self, job_name: str, *, consistent: bool = True) -> StoredResult | None:
        """``job_name``'s newest committed result from its LATEST item: one ``GetItem`` (``None``: nothing
        committed yet). Rows are not fetched from S3 when offloaded (:meth:`load_rows`). A pointer written before
        LATEST carried its result (no ``columns_json``) costs a second read, of the result item it names.

        :raises ResultsStoreError: DynamoDB failed. :raises CorruptResultsItemError: the item is not a result.
        """
        return self.latest_from_item(
            job_name, self._get(job_name, LATEST, consistent=consistent), consistent=consistent
        )

    def latest_key(self, job_name: str) -> dict[str, Any]:
        """The key of ``job_name``'s LATEST item (DynamoDB JSON), for a caller batching it with other reads."""
        return {
            contract.RESULTS_TABLE_PARTITION_KEY: {"S": job_name},
            contract.RESULTS_TABLE_SORT_KEY: {"S": LATEST},
        }

    def latest_from_item(
        self, job_name: str, item: Mapping[str, Any] | None, *, consistent: bool = True
    ) -> StoredResult | None:
        """:meth:`latest` from the LATEST item ``item`` (DynamoDB JSON, the whole item) the caller already read
        (``None``: absent, nothing committed yet); a pointer without its result costs the result item's read.

        :raises ResultsStoreError: DynamoDB failed. :raises CorruptResultsItemError: the item is not a result.
        """
        if item is None:
            return None
        plain = plain_item(item)
        slot, generation = plain.get("latest_slot"), plain.get("latest_generation", LIVE_GENERATION)
        if not isinstance(slot, str) or not isinstance(generation, int):
            raise CorruptResultsItemError(f"{job_name}/{LATEST}", "latest_slot", "is not a (slot, generation) pointer")
        if "columns" not in plain:
            return self.result(job_name, slot, generation, consistent=consistent)
        return StoredResult.from_item(job_name, slot, generation, plain)

    def result(
        self, job_name: str, slot_iso: str, generation: int | None = LIVE_GENERATION, *, consistent: bool = True
    ) -> StoredResult | None:
        """One slot's stored result of ``generation`` (``None``: the newest committed generation, one Query
        first), rows not fetched from S3 (:meth:`load_rows`); ``None`` when there is none.

        :raises ResultsStoreError: DynamoDB failed. :raises CorruptResultsItemError: the item is not a result.
        """
        found = self._result_item(job_name, slot_iso, generation, consistent=consistent)
        return None if found is None else StoredResult.from_item(job_name, slot_iso, found[0], found[1])

    def _result_item(
        self, job_name: str, slot_iso: str, generation: int | None, *, consistent: bool = True
    ) -> tuple[int, dict[str, Any]] | None:
        """(generation, plain item) of one slot's result (``generation`` ``None``: the newest committed one)."""
        if generation is None:
            generations = self.list_generations(job_name, slot_iso)
            if not generations:
                return None
            generation = max(generations)
        item = self._get(job_name, result_sort_key(slot_iso, generation), consistent=consistent)
        return None if item is None else (generation, plain_item(item))

    def load_rows(self, stored: StoredResult) -> list[dict[str, Any]]:
        """``stored``'s rows: inline, or read from S3 and checked against the recorded SHA-256.

        :raises ResultsStoreError: S3 failed or the object does not match its checksum.
        """
        if stored.rows is not None:
            return stored.rows
        assert stored.rows_s3_uri is not None
        return self._read_offloaded(stored.rows_s3_uri, stored.rows_sha256)

    def _read_offloaded(self, uri: str, sha256: Any) -> list[dict[str, Any]]:
        """The rows stored at ``uri`` (``s3://bucket/key``), checked against their recorded ``sha256``."""
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        try:
            body = self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            raise ResultsStoreError(f"could not read {uri}: {exc}") from exc
        if hashlib.sha256(body).hexdigest() != sha256:
            raise ResultsStoreError(f"{uri} does not match its recorded SHA-256")
        rows: list[dict[str, Any]] = json.loads(body)
        return rows

    def list_results(self, job_name: str) -> list[dict[str, Any]]:
        """All stored result items of ``job_name`` (without loading S3 rows), oldest slot first."""
        items = self._query(
            f"results of {job_name}",
            KeyConditionExpression="#job = :job",
            ExpressionAttributeNames={"#job": "job"},
            ExpressionAttributeValues={":job": {"S": job_name}},
        )
        return [plain_item(item) for item in items if item["slot"]["S"] != LATEST]

    def list_generations(self, job_name: str, slot_iso: str) -> list[int]:
        """The generations of ``slot_iso`` with a stored result, ascending (one consistent Query)."""
        items = self._query(
            f"the results of {job_name}/{slot_iso}",
            KeyConditionExpression="#job = :job AND begins_with(#slot, :slot)",
            ExpressionAttributeNames={"#job": "job", "#slot": "slot"},
            ExpressionAttributeValues={":job": {"S": job_name}, ":slot": {"S": slot_iso}},
            ProjectionExpression="#slot",
        )
        found: list[int] = []
        for item in items:
            key = item["slot"]["S"]
            if key == slot_iso:
                found.append(LIVE_GENERATION)
            elif key.startswith(f"{slot_iso}#g") and key[len(slot_iso) + 2 :].isdigit():
                found.append(int(key[len(slot_iso) + 2 :]))
        return sorted(found)

    def _query(self, what: str, **params: Any) -> list[dict[str, Any]]:
        """Every item of one strongly consistent Query of the results table, page after page."""
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": self.table_name, "ConsistentRead": True, **params}
        while True:
            try:
                page = self.dynamodb.query(**kwargs)
            except (ClientError, BotoCoreError) as exc:
                raise ResultsStoreError(f"could not list {what}: {exc}") from exc
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _get(
        self, job_name: str, slot: str, *, projection: tuple[str, ...] = (), consistent: bool = True
    ) -> dict[str, Any] | None:
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {"job": {"S": job_name}, "slot": {"S": slot}},
            "ConsistentRead": consistent,
        }
        if projection:
            params["ProjectionExpression"] = ", ".join(f"#p{index}" for index in range(len(projection)))
            params["ExpressionAttributeNames"] = {f"#p{index}": name for index, name in enumerate(projection)}
        try:
            response = self.dynamodb.get_item(**params)
        except (ClientError, BotoCoreError) as exc:
            raise ResultsStoreError(f"could not read result {job_name}/{slot}: {exc}") from exc
        return response.get("Item")


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
