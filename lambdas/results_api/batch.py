"""``BatchGetItem`` with the keys DynamoDB leaves unprocessed read again: the one batched read of the read side
(``GET /jobs`` and the dashboard's overview, :mod:`results_api.overview`).

DynamoDB answers at most 100 keys (16 MB) per request and may leave some unprocessed when throttled; they are
asked again, after a short exponential back-off, at most :data:`MAX_BATCH_ATTEMPTS` times in all.
https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchGetItem.html
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from .errors import BackendUnavailableError

if TYPE_CHECKING:  # pragma: no cover
    from mypy_boto3_dynamodb.client import DynamoDBClient

#: Requests per batch, the first included: DynamoDB leaving keys unprocessed this often is a failure.
MAX_BATCH_ATTEMPTS = 5
#: BatchGetItem reads at most this many keys per request, every table included.
MAX_KEYS_PER_BATCH = 100


def batch_get(
    client: DynamoDBClient, request_items: Mapping[str, Any], *, what: str
) -> dict[str, list[dict[str, Any]]]:
    """Every item ``request_items`` (``BatchGetItem``'s ``RequestItems``, at most 100 keys) names that exists,
    by table name: one request, repeated for the keys DynamoDB leaves unprocessed.

    :raises BackendUnavailableError: DynamoDB failed (naming ``what``), or left keys unprocessed
        :data:`MAX_BATCH_ATTEMPTS` times.
    """
    found: dict[str, list[dict[str, Any]]] = {}
    request: dict[str, Any] = dict(request_items)
    for attempt in range(MAX_BATCH_ATTEMPTS):
        try:
            response = client.batch_get_item(RequestItems=request)
        except (ClientError, BotoCoreError) as exc:
            raise BackendUnavailableError(f"could not read {what}: {exc}") from exc
        for table_name, items in response.get("Responses", {}).items():
            found.setdefault(table_name, []).extend(dict(item) for item in items)
        request = dict(response.get("UnprocessedKeys") or {})
        if not request:
            return found
        if attempt + 1 < MAX_BATCH_ATTEMPTS:  # no back-off after the last attempt: it only delays the failure
            time.sleep(min(0.05 * 2**attempt, 1.0))
    raise BackendUnavailableError(f"DynamoDB left keys unprocessed {MAX_BATCH_ATTEMPTS} times (throttled)")
