"""Decoding the lock table's items (DynamoDB JSON) into checked Python values (no I/O).

A tampered item is reported as :class:`~slotlock.errors.CorruptLockItemError` naming the item and the
attribute, never as a ``KeyError``/``ValueError`` that a Lambda retry would repeat forever. Every decoder first
checks the item's table layout (:func:`check_schema_version`): an item of a layout this slotlock does not read
raises :class:`~slotlock.errors.UnsupportedSchemaVersionError`, before any attribute is looked at.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from . import _wire as wire
from . import table
from ._expressions import (
    ACQUIRED,
    EXPIRES,
    GIVEN_BACK,
    LAST_FIN_AT,
    LAST_FIN_GENERATION,
    LAST_FIN_OUTCOME,
    LAST_FIN_SLOT,
    LAST_FIN_TOKEN,
    LAST_OK_AT,
    LAST_OK_SLOT,
    LEASE_GENERATION,
    LEASE_SLOT,
    MISSED_SLOTS,
    OWNER,
    PAUSED,
    PAUSED_THROUGH,
    PREV_GENERATION,
    PREV_GIVEN_BACK,
    PREV_OWNER,
    PREV_SLOT,
    TOKEN,
)
from ._lease import LockRecord
from .errors import CorruptLockItemError, UnsupportedSchemaVersionError
from .slot import Slot


def schema_version_supported(value: Mapping[str, Any] | None) -> bool:
    """Whether a ``schema_version`` attribute value (DynamoDB JSON, ``None`` when absent) is a layout this
    slotlock reads: absent (layout 1, written before the attribute existed), or a Number equal to one of
    :data:`slotlock.table.SUPPORTED_SCHEMA_VERSIONS`. The same rule as the ``SCHEMA_COMPATIBLE`` clause of every
    conditional write (:mod:`slotlock._expressions`), so a decoder and a condition never disagree."""
    if value is None:
        return True
    if set(value) != {"N"}:
        return False
    try:
        number = Decimal(str(value["N"]))
    except InvalidOperation:
        return False
    return any(number == version for version in table.SUPPORTED_SCHEMA_VERSIONS)


def check_schema_version(item: Mapping[str, Mapping[str, Any]] | None, key: str | None = None) -> None:
    """Refuse an item of a table layout this slotlock does not read (``None``, an absent item, passes).

    ``key``: the item's partition key for the message (default: the item's own ``pk``).

    :raises UnsupportedSchemaVersionError: ``schema_version`` is a newer layout, or not a Number.
    """
    if not item:
        return
    value = item.get(table.SCHEMA_VERSION_ATTRIBUTE)
    if schema_version_supported(value):
        return
    assert value is not None
    try:
        found = wire.plain(value)
    except (TypeError, ValueError, ArithmeticError):  # not decodable at all: show it as stored
        found = dict(value)
    if key is None:
        key = str(item.get(table.PARTITION_KEY, {}).get("S", "?"))
    raise UnsupportedSchemaVersionError(key, found)


def plain_value(value: Mapping[str, Any]) -> Any:
    """One DynamoDB JSON attribute value (``{"N": "3"}``) as a plain Python value (numbers as int or float)."""
    return wire.plain(value)


def number_attribute(
    item: Mapping[str, Mapping[str, Any]], key: str, name: str, *, required: bool = False
) -> int | None:
    """The integer of Number attribute ``name`` of item ``key`` (``None`` when absent or NULL).

    :raises CorruptLockItemError: another type, a non-integer, or absent although ``required``.
    """
    value = item.get(name)
    if value is None or "NULL" in value:
        if required:
            raise CorruptLockItemError(key, name, "is missing")
        return None
    if set(value) != {"N"}:
        raise CorruptLockItemError(key, name, f"must be a Number, found {wire.type_of(value)}")
    try:
        return int(value["N"])
    except ValueError as exc:
        raise CorruptLockItemError(key, name, f"must be an integer, found {value['N']!r}") from exc


def text_attribute(item: Mapping[str, Mapping[str, Any]], key: str, name: str) -> str | None:
    """The text of String attribute ``name`` of item ``key`` (``None`` when absent or NULL).

    :raises CorruptLockItemError: another type.
    """
    value = item.get(name)
    if value is None or "NULL" in value:
        return None
    if set(value) != {"S"}:
        raise CorruptLockItemError(key, name, f"must be a String, found {wire.type_of(value)}")
    return str(value["S"])


def decode_lock_item(item: Mapping[str, Mapping[str, Any]], key: str) -> LockRecord:
    """Decode and type-check the lock item ``key`` (DynamoDB JSON) into a :class:`LockRecord`.

    Raises
    ------
    UnsupportedSchemaVersionError
        The item has a table layout this slotlock does not read (checked first).
    CorruptLockItemError
        An attribute has the wrong DynamoDB type or an impossible value (named with ``key``).
    """
    check_schema_version(item, key)

    def number(name: str, *, required: bool = False) -> int | None:
        return number_attribute(item, key, name, required=required)

    def text(name: str) -> str | None:
        return text_attribute(item, key, name)

    def slot(name: str) -> Slot | None:
        epoch = number(name)
        return None if epoch is None else Slot(epoch)

    def flag(name: str) -> bool:
        value = item.get(name)
        if value is None or "NULL" in value:
            return False
        if set(value) != {"BOOL"}:
            raise CorruptLockItemError(key, name, f"must be a Boolean, found {wire.type_of(value)}")
        return bool(value["BOOL"])

    token = number(TOKEN, required=True)
    assert token is not None
    if token < 0:
        raise CorruptLockItemError(key, TOKEN, f"must not be negative, found {token}")
    owner = text(OWNER)
    expires = number(EXPIRES)
    if owner is not None and expires is None:
        raise CorruptLockItemError(key, EXPIRES, "is missing although an owner is set")
    missed = item.get(MISSED_SLOTS)
    if missed is not None and set(missed) != {"NS"}:
        raise CorruptLockItemError(key, MISSED_SLOTS, f"must be a Number Set, found {wire.type_of(missed)}")
    try:
        missed_slots = frozenset(Slot(int(epoch)) for epoch in (missed or {}).get("NS", ()))
    except ValueError as exc:
        raise CorruptLockItemError(key, MISSED_SLOTS, f"must hold epoch seconds: {exc}") from exc
    return LockRecord(
        fencing_token=token,
        missed_slots=missed_slots,
        owner_id=owner,
        lease_expires_at_ms=expires,
        acquired_at_ms=number(ACQUIRED),
        lease_slot=slot(LEASE_SLOT),
        previous_owner_id=text(PREV_OWNER),
        previous_slot=slot(PREV_SLOT),
        last_finished_slot=slot(LAST_FIN_SLOT),
        last_finished_outcome=text(LAST_FIN_OUTCOME),
        last_finished_token=number(LAST_FIN_TOKEN),
        last_finished_at_ms=number(LAST_FIN_AT),
        last_succeeded_slot=slot(LAST_OK_SLOT),
        last_succeeded_at_ms=number(LAST_OK_AT),
        paused=flag(PAUSED),
        paused_through_slot=slot(PAUSED_THROUGH),
        lease_generation=number(LEASE_GENERATION),
        previous_generation=number(PREV_GENERATION),
        last_finished_generation=number(LAST_FIN_GENERATION),
        given_back_reason=text(GIVEN_BACK),
        previous_given_back_reason=text(PREV_GIVEN_BACK),
    )


def decode_slot_item(item: Mapping[str, Mapping[str, Any]], key: str) -> dict[str, Any]:
    """A slot (history) item ``key`` in DynamoDB JSON as plain Python: ``*_json`` attributes parsed into
    ``state``, ``summary``, ``error`` (JSON objects), numbers as int or float.

    Raises
    ------
    UnsupportedSchemaVersionError
        The item has a table layout this slotlock does not read (checked first).
    CorruptLockItemError
        A ``*_json`` attribute is not a String holding a JSON object.
    """
    check_schema_version(item, key)
    decoded: dict[str, Any] = {}
    for name, value in item.items():
        if not name.endswith("_json"):
            decoded[name] = wire.plain(value)
            continue
        if set(value) != {"S"}:
            raise CorruptLockItemError(
                key, name, f"must be a String holding a JSON object, found {wire.type_of(value)}"
            )
        try:
            parsed = json.loads(value["S"])
        except ValueError as exc:
            raise CorruptLockItemError(key, name, f"is not valid JSON: {value['S'][:80]!r}") from exc
        if not isinstance(parsed, dict):
            raise CorruptLockItemError(key, name, f"must hold a JSON object, found {type(parsed).__name__}")
        decoded[name[: -len("_json")]] = parsed
    return decoded
