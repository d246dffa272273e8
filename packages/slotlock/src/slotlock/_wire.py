"""DynamoDB's wire format as slotlock reads it: error codes, cancellation reasons, ALL_OLD items, values.

Pure functions over botocore's ``ClientError`` and DynamoDB JSON (no requests).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

DESERIALIZER = TypeDeserializer()


def is_conditional_failure(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def error_code(exc: ClientError) -> str | None:
    return exc.response.get("Error", {}).get("Code")


def http_status(exc: ClientError) -> int:
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status if isinstance(status, int) else 0


def cancellation_reasons(exc: ClientError) -> list[dict[str, Any]]:
    """A TransactionCanceledException's per-item reasons, in request order (``[]`` when unknown)."""
    reasons = exc.response.get("CancellationReasons")
    if isinstance(reasons, list) and reasons:
        return [dict(reason) for reason in reasons]
    return reasons_from_message(exc)


def reasons_from_message(exc: ClientError) -> list[dict[str, Any]]:
    # Some emulators omit CancellationReasons; the message lists them: "... reasons [None, ConditionalCheckFailed]".
    message = exc.response.get("Error", {}).get("Message", "")
    start, end = message.find("["), message.rfind("]")
    if start < 0 or end < start:
        return []
    return [{"Code": part.strip()} for part in message[start + 1 : end].split(",")]


def old_item(exc: ClientError) -> dict[str, Any] | None:
    """The item returned with a failed condition (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), if any."""
    item = exc.response.get("Item")
    return item if isinstance(item, dict) else None


def type_of(value: Mapping[str, Any]) -> str:
    names = {
        "S": "String",
        "N": "Number",
        "B": "Binary",
        "BOOL": "Boolean",
        "NULL": "Null",
        "M": "Map",
        "L": "List",
        "SS": "String Set",
        "NS": "Number Set",
        "BS": "Binary Set",
    }
    return ", ".join(names.get(key, key) for key in value) or "nothing"


def plain(value: Mapping[str, Any]) -> Any:
    plain = DESERIALIZER.deserialize(value)  # type: ignore[arg-type]  # a DynamoDB JSON value from the wire
    if hasattr(plain, "as_integer_ratio") and not isinstance(plain, (int, float)):
        return int(plain) if plain == int(plain) else float(plain)
    return plain
