"""What the lock's requests cost in DynamoDB capacity: every request asks for ``ReturnConsumedCapacity=TOTAL``
and :class:`CapacityMeter` adds up what DynamoDB reports, per operation.

The meter is a botocore event hook, not a call on the request path: :meth:`CapacityMeter.of` registers it once on a
DynamoDB client (``after-call`` counts each answer, ``after-call-error`` each request that got none), and every
request sent through that client which asked for its consumed capacity is counted, whoever sent it (the lock, and a
:class:`~slotlock.semaphore.Semaphore` or :class:`~slotlock.history.SlotHistory` built on the same client). Requests
that did not ask (a results store sharing the client) are not.

On-demand tables bill read request units (RRU) and write request units (WRU); the response's
``ConsumedCapacity`` reports them (``ReadCapacityUnits``/``WriteCapacityUnits`` where the operation says which,
else ``CapacityUnits``, read units for GetItem/Query and write units for writes):
https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_ConsumedCapacity.html

A request answered with an error reports nothing, although a write whose condition failed still consumes
write units (by the size of the existing item, at least one):
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/WorkingWithItems.html#WorkingWithItems.ConditionalUpdate
such requests, and answers without ``ConsumedCapacity`` (some emulators omit it), are counted in
``unmetered_requests`` so a reader knows the total is a lower bound.

:func:`estimate_write_units` models a write from the items it sends, for the one write whose cost must be known
before it is sent (the commit records the slot's cost estimate in the same transaction):
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html (1 WRU per KB
written, rounded up per item; twice that inside a transaction) and the item-size rules in
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "CapacityMeter",
    "CapacitySnapshot",
    "attribute_value_size",
    "estimate_write_units",
    "item_size_bytes",
]

#: Operations that read (their ``CapacityUnits`` are read units when the answer does not say).
READ_OPERATIONS: Final = frozenset({"GetItem", "Query", "BatchGetItem", "Scan"})
#: Bytes per write request unit and per (strongly consistent) read request unit.
WRITE_UNIT_BYTES: Final = 1024
READ_UNIT_BYTES: Final = 4096
#: The request context's key the hook sets on each request that asked for its consumed capacity.
_METERED: Final = "slotlock.capacity.metered"
#: One meter per botocore client (weak: a dropped client drops its meter).
_METERS: weakref.WeakKeyDictionary[Any, CapacityMeter] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class CapacitySnapshot:
    """Totals at one moment: ``read_units``/``write_units`` reported by DynamoDB, ``requests`` sent (every
    answer, errors included, by operation name), ``unmetered_requests`` (answers reporting no capacity).

    Subtract two snapshots (``later - earlier``) for what happened in between.
    """

    read_units: float = 0.0
    write_units: float = 0.0
    requests: Mapping[str, int] = field(default_factory=dict)
    unmetered_requests: int = 0

    @property
    def request_count(self) -> int:
        return sum(self.requests.values())

    def __sub__(self, other: CapacitySnapshot) -> CapacitySnapshot:
        names = set(self.requests) | set(other.requests)
        requests = {name: self.requests.get(name, 0) - other.requests.get(name, 0) for name in sorted(names)}
        return CapacitySnapshot(
            read_units=round(self.read_units - other.read_units, 6),
            write_units=round(self.write_units - other.write_units, 6),
            requests={name: count for name, count in requests.items() if count},
            unmetered_requests=self.unmetered_requests - other.unmetered_requests,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "read_units": self.read_units,
            "write_units": self.write_units,
            "requests": dict(self.requests),
            "unmetered_requests": self.unmetered_requests,
        }


class CapacityMeter:
    """Adds up the capacity DynamoDB reports for one client's requests (single-threaded, like a Lambda handler).

    :meth:`of` gives a client's meter, registered on it as an event hook the first time; a meter built directly
    is fed by hand: ``record(operation, response)`` after each answered request, ``record_unmetered(operation)``
    after a request that got no answer. ``snapshot()`` reads the totals.
    """

    @classmethod
    def of(cls, client: Any) -> CapacityMeter:
        """``client``'s meter (a botocore DynamoDB client), its hooks registered once on the client's events:
        ``provide-client-params`` marks a request that asks for ``ReturnConsumedCapacity`` (as its caller sent it),
        ``after-call`` records the answer (an error answer reports no capacity: unmetered) and
        ``after-call-error`` a request that got none (connection dropped, timeout). Idempotent per client. A
        stand-in that is no botocore client (no ``meta.events``, or not weak-referenceable) gets a meter of its own
        that nothing feeds: it reports no request."""
        try:
            meter = _METERS.get(client)
        except TypeError:  # not weak-referenceable: a stand-in, nothing to hook
            return cls()
        if meter is None:
            meter = _METERS[client] = cls()
            events = getattr(getattr(client, "meta", None), "events", None)
            if events is None:
                return meter
            events.register("provide-client-params.dynamodb", _mark_metered, unique_id=_METERED)
            events.register("after-call.dynamodb", meter._on_response)
            events.register("after-call-error.dynamodb", meter._on_error)
        return meter

    def _on_response(self, parsed: Mapping[str, Any], model: Any, context: Mapping[str, Any], **_: Any) -> None:
        if context.get(_METERED):
            self.record(model.name, parsed)

    def _on_error(self, context: Mapping[str, Any], **kwargs: Any) -> None:
        if context.get(_METERED):
            # after-call-error carries no operation model; the event name ends with the operation's name
            self.record_unmetered(str(kwargs.get("event_name", "")).rsplit(".", 1)[-1])

    def __init__(self) -> None:
        self._read_units = 0.0
        self._write_units = 0.0
        self._requests: dict[str, int] = {}
        self._unmetered = 0

    def record(self, operation: str, response: Mapping[str, Any]) -> None:
        """Count one answered request and the ``ConsumedCapacity`` of ``response`` (a dict or a list of them)."""
        self._requests[operation] = self._requests.get(operation, 0) + 1
        consumed = response.get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed] if isinstance(consumed, dict) else []
        if not entries:
            self._unmetered += 1
            return
        for entry in entries:
            read, write = _units(operation, entry)
            self._read_units += read
            self._write_units += write

    def record_unmetered(self, operation: str) -> None:
        """Count a request whose answer was an error (no capacity reported)."""
        self._requests[operation] = self._requests.get(operation, 0) + 1
        self._unmetered += 1

    def snapshot(self) -> CapacitySnapshot:
        return CapacitySnapshot(
            read_units=round(self._read_units, 6),
            write_units=round(self._write_units, 6),
            requests=dict(self._requests),
            unmetered_requests=self._unmetered,
        )


def _mark_metered(params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
    context[_METERED] = params.get("ReturnConsumedCapacity", "NONE") != "NONE"


def _units(operation: str, entry: Mapping[str, Any]) -> tuple[float, float]:
    read, write = entry.get("ReadCapacityUnits"), entry.get("WriteCapacityUnits")
    if isinstance(read, (int, float)) or isinstance(write, (int, float)):
        return float(read or 0.0), float(write or 0.0)
    total = entry.get("CapacityUnits")
    if not isinstance(total, (int, float)):
        return 0.0, 0.0
    return (float(total), 0.0) if operation in READ_OPERATIONS else (0.0, float(total))


def attribute_value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one DynamoDB JSON value by DynamoDB's sizing rules (numbers: about one byte per two significant
    digits plus one; lists and maps: 3 bytes plus 1 per element plus their contents)."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(str(raw).encode("utf-8"))
    if kind == "N":
        digits = str(raw).lstrip("-").replace(".", "").lstrip("0").rstrip("0") or "0"
        return min(21, math.ceil(len(digits) / 2) + 1)
    if kind == "B":
        return len(raw) if isinstance(raw, (bytes, bytearray)) else len(str(raw))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(attribute_value_size({kind[0]: member}) for member in raw)
    if kind == "L":
        return 3 + sum(1 + attribute_value_size(member) for member in raw)
    if kind == "M":
        return 3 + sum(1 + len(name.encode("utf-8")) + attribute_value_size(member) for name, member in raw.items())
    raise ValueError(f"not a DynamoDB JSON value: {value!r:.80}")


def item_size_bytes(item: Mapping[str, Mapping[str, Any]]) -> int:
    """An item's size: the UTF-8 length of each attribute name plus the size of its value."""
    return sum(len(name.encode("utf-8")) + attribute_value_size(value) for name, value in item.items())


def estimate_write_units(transact_items: Sequence[Mapping[str, Any]], *, extra_bytes: int = 0) -> int:
    """Write request units of a TransactWriteItems of ``transact_items``: 2 per started KB of each item.

    A ``Put`` counts its item; an ``Update`` counts its key plus the values it sets (a lower bound of the item
    after the update: attributes it leaves alone are not known without a read); ``ConditionCheck`` and
    ``Delete`` count 1 KB. ``extra_bytes`` is added to every item (for attributes added after the estimate).
    """
    units = 0
    for entry in transact_items:
        ((kind, request),) = entry.items()
        if kind == "Put":
            size = item_size_bytes(request["Item"])
        elif kind == "Update":
            size = item_size_bytes(request["Key"]) + _set_values_size(request)
        else:
            size = 0
        units += 2 * max(1, math.ceil((size + extra_bytes) / WRITE_UNIT_BYTES))
    return units


def _set_values_size(update: Mapping[str, Any]) -> int:
    """Names and values an UpdateExpression's SET assigns (``#name = :value`` pairs; other forms count 0)."""
    expression = str(update.get("UpdateExpression", ""))
    names = update.get("ExpressionAttributeNames") or {}
    values = update.get("ExpressionAttributeValues") or {}
    set_part = expression.split("SET", 1)[1] if "SET" in expression else ""
    for keyword in (" REMOVE ", " ADD ", " DELETE "):
        set_part = set_part.split(keyword, 1)[0]
    size = 0
    for assignment in set_part.split(","):
        target, _, source = assignment.partition("=")
        target, source = target.strip(), source.strip()
        value = values.get(source)
        if value is None:
            continue
        name = names.get(target, target)
        size += len(str(name).encode("utf-8")) + attribute_value_size(value)
    return size
