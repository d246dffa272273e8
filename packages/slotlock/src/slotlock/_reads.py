"""Reads of the lock table, and the operators' raw access to the lock item.

Strongly consistent GetItem of the lock item and of slot (history) items, decoded
(:mod:`slotlock.codec`); the lock item as ALL_OLD returned it with a failed condition; and the one
conditional UpdateItem that operator tools (:mod:`slotlock._admin`) send to the lock item.
GetItem: https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_GetItem.html
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from . import _wire as wire
from . import codec
from ._expressions import LOCK_NAMES
from ._lease import LockRecord
from ._wire import Condition, UpdateExpression, checked, either, update, write
from .errors import LockConfigurationError
from .slot import Slot

if TYPE_CHECKING:
    from ._dynamodb import LockContext


def get_lock(ctx: LockContext) -> LockRecord:
    """The job's lock item (strongly consistent read); a default record on a fresh table."""
    item = ctx.io.get(ctx.lock_key)
    return ctx.decode_lock(item) if item else LockRecord()


def get_slot(ctx: LockContext, slot: Slot) -> dict[str, Any] | None:
    """The slot's history item decoded to plain Python (``*_json`` attributes parsed), or ``None``.

    Raises :class:`CorruptLockItemError` when a ``*_json`` attribute is not a String holding a JSON object.
    """
    key = ctx.slot_key(slot)
    item = ctx.io.get(key)
    if item is None:
        return None
    return codec.decode_slot_item(item, key)


def old_lock_record(ctx: LockContext, exc: ClientError) -> LockRecord | None:
    """The lock item that failed a condition (ALL_OLD), decoded; ``None`` if there is none."""
    item = wire.old_item(exc)
    if item is None:  # ALL_OLD not returned (older emulators): fall back to one consistent read
        item = ctx.io.get(ctx.lock_key)
    return ctx.decode_lock(item) if item else None


def update_lock_item(
    ctx: LockContext,
    update_expression: str,
    condition_expression: str,
    names: Mapping[str, str],
    values: Mapping[str, Any],
    *,
    return_values: str = "ALL_OLD",
) -> dict[str, Any] | None:
    """One conditional UpdateItem of ``ctx``'s lock item (operator tools), returning the item as
    ``return_values`` asks (``ALL_OLD`` by default, ``ALL_NEW``); ALL_OLD with a failed condition.

    Every operator write goes through here, so each one sets the table layout and is conditioned on it
    (:func:`~slotlock._expressions.write`). The expressions come from :func:`~slotlock._expressions.update` and
    :func:`~slotlock._expressions.checked`, or as text (:func:`as_update`, :func:`as_condition`); the
    placeholders of :data:`~slotlock._expressions.LOCK_NAMES` need no entry in ``names``.

    Re-raises the ``ClientError`` of a failed condition; raises :class:`UnsupportedSchemaVersionError` when the
    item has a newer table layout (from ALL_OLD, :mod:`slotlock._client`); wraps any other error
    (:class:`LockBackendError`).
    """
    params = write(
        ctx.table_name,
        key=ctx.lock_key,
        expression=as_update(update_expression),
        condition=as_condition(condition_expression),
        names={**LOCK_NAMES, **names},
        values=values,
        return_values=return_values,
    )
    try:
        response = ctx.io.call("UpdateItem", **params)
    except ClientError as exc:
        if wire.is_conditional_failure(exc):
            raise
        raise ctx.io.wrap("UpdateItem", exc) from exc
    attributes = response.get("Attributes")
    return attributes if isinstance(attributes, dict) else None


def as_update(expression: str) -> UpdateExpression:
    """An operator's update: an :class:`~slotlock._expressions.UpdateExpression` as it is, or the text of one SET
    clause (its assignments then get the layout's). Raises :class:`LockConfigurationError` for other text."""
    if isinstance(expression, UpdateExpression):
        return expression
    words = expression.split()
    if not words or words[0].upper() != "SET" or {"REMOVE", "ADD", "DELETE"} & {word.upper() for word in words}:
        raise LockConfigurationError("update_expression", f"must be one SET clause, got {expression!r:.80}")
    return update(("SET", [expression.strip()[3:].strip()]))


def as_condition(condition: str) -> Condition:
    """An operator's condition: a :class:`~slotlock._expressions.Condition` as it is, or text ANDed after the
    layout's clause as one clause (parenthesized when it holds the OR keyword: pass a bare disjunction)."""
    if isinstance(condition, Condition):
        return condition
    return checked(either(condition) if "OR" in {word.upper() for word in condition.split()} else condition)
