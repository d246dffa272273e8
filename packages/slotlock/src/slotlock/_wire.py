"""DynamoDB's wire format as slotlock writes and reads it: the one write builder (:func:`write`); error codes,
cancellation reasons, ALL_OLD items, values.

Pure functions over request parameters, botocore's ``ClientError`` and DynamoDB JSON (no requests). The named
clauses, the attribute names and their timelines: :mod:`slotlock._expressions`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from . import table

DESERIALIZER = TypeDeserializer()
MAX_TRANSACTION_ITEMS = 100  # DynamoDB TransactWriteItems limit
MAX_STATE_BYTES = 64 * 1024  # in-flight state is small by design (ids, counters)


def json_text(value: Mapping[str, Any] | None) -> str:
    """``value`` as the compact, key-sorted JSON text stored in ``*_json`` attributes (``{}`` for ``None``)."""
    # dict(): json only encodes dicts as objects; any other Mapping (e.g. a Lease's read-only state)
    # would go through default=str and be stored as its repr.
    return json.dumps(dict(value) if value is not None else {}, sort_keys=True, separators=(",", ":"), default=str)


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


# --- the one write builder ---------------------------------------------------------------------------
PK = table.PARTITION_KEY
SCHEMA_VERSION_ATTR = table.SCHEMA_VERSION_ATTRIBUTE  # the attribute (its value: table.SCHEMA_VERSION)
SCHEMA_COMPATIBLE = "(attribute_not_exists(#schema_version) OR #schema_version = :schema_version)"
SCHEMA_VERSION_SET = "#schema_version = :schema_version"
SCHEMA_VALUE: Mapping[str, Any] = {"N": str(table.SCHEMA_VERSION)}


class Condition(str):
    """A ConditionExpression that checks the table layout first; made only by :func:`checked`."""


class UpdateExpression(str):
    """An UpdateExpression that sets the table layout; made only by :func:`update`."""


def either(*clauses: str) -> str:
    """The clauses ORed, parenthesized (AND binds tighter than OR, so an OR is always a unit of its own)."""
    return "(" + " OR ".join(clauses) + ")"


def both(*clauses: str) -> str:
    """The clauses ANDed, parenthesized (an operand of :func:`either`)."""
    return "(" + " AND ".join(clauses) + ")"


def checked(*clauses: str) -> Condition:
    """:data:`SCHEMA_COMPATIBLE`, then ``clauses``, ANDed. A clause with an OR at its top comes parenthesized
    (:func:`either`, or a named clause written so); no other parentheses are added (DynamoDB refuses redundant
    ones)."""
    return Condition(" AND ".join((SCHEMA_COMPATIBLE, *clauses)))


def update(*clauses: tuple[str, str | Sequence[str]]) -> UpdateExpression:
    """An UpdateExpression from ``(action, parts)`` clauses in order (``SET``, ``REMOVE``, ``ADD``, ``DELETE``;
    ``parts``: a list, or one text of comma-separated parts; a clause without parts is left out), with
    :data:`SCHEMA_VERSION_SET` last in the first SET clause, or a SET clause of its own in front when there is none."""
    actions = [(action, [parts] if isinstance(parts, str) else list(parts)) for action, parts in clauses if parts]
    sets = [parts for action, parts in actions if action == "SET"]
    if sets:
        sets[0].append(SCHEMA_VERSION_SET)
    else:
        actions.insert(0, ("SET", [SCHEMA_VERSION_SET]))
    return UpdateExpression(" ".join(f"{action} {', '.join(parts)}" for action, parts in actions))


@functools.lru_cache(maxsize=512)
def placeholders(text: str, mark: str = "#") -> tuple[str, ...]:
    """The ``#name`` (or ``:value``) placeholders of an expression, in order of first appearance.

    Cached: slotlock's expressions are a few dozen constant strings (a request's own values are ``:values``,
    never part of the text), so each is scanned once per process instead of on every request (the racer's hot
    path; the cache is bounded in case a caller composes texts).
    """
    found: list[str] = []
    for part in text.split(mark)[1:]:
        length = next((i for i, char in enumerate(part) if not (char.isalnum() or char == "_")), len(part))
        if length and mark + part[:length] not in found:
            found.append(mark + part[:length])
    return tuple(found)


def write(
    table_name: str,
    *,
    condition: Condition,
    names: Mapping[str, str],
    values: Mapping[str, Any] | None = None,
    key: str | None = None,
    expression: UpdateExpression | None = None,
    item: Mapping[str, Any] | None = None,
    return_values: str | None = None,
) -> dict[str, Any]:
    """The one builder of slotlock's writes: an UpdateItem (``key``, ``expression``) or PutItem (``item``)
    request, or the body of a TransactWriteItems ``Update``/``Put`` entry, ALL_OLD on a failed condition.

    The layout is in it by construction: ``condition`` is a :class:`Condition`, ``expression`` an
    :class:`UpdateExpression`, and a Put's item gets :data:`SCHEMA_VERSION_ATTR`. ``ExpressionAttributeNames``
    are derived: every ``#name`` the expressions use, looked up in ``names`` (the item kind's namespace, e.g.
    :data:`slotlock._expressions.LOCK_NAMES`, plus a request's own, e.g. a waiter id); ``values`` are the request's ``:values``
    (``:schema_version`` is added). Raises ``TypeError`` for an unchecked condition or expression and
    ``KeyError`` for a placeholder no namespace defines (both: a bug in slotlock, never a caller's input).
    """
    if not isinstance(condition, Condition) or (
        expression is not None and not isinstance(expression, UpdateExpression)
    ):
        raise TypeError("a write's condition comes from checked() and its update from update()")
    params: dict[str, Any] = {"TableName": table_name}
    if item is not None:
        params["Item"] = {**item, SCHEMA_VERSION_ATTR: SCHEMA_VALUE}
    else:
        params["Key"] = {PK: {"S": key}}
        params["UpdateExpression"] = str(expression)
    params["ConditionExpression"] = str(condition)
    text = f"{condition} {expression or ''}"
    every = {**names, "#schema_version": SCHEMA_VERSION_ATTR}
    params["ExpressionAttributeNames"] = {name: every[name] for name in placeholders(text)}
    params["ExpressionAttributeValues"] = {**(values or {}), ":schema_version": SCHEMA_VALUE}
    if return_values is not None:
        params["ReturnValues"] = return_values
    params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return params
