"""Count the DynamoDB requests a boto3 client sends, with botocore event hooks, and the capacity they cost.

Hooks registered on one client (``client.meta.events``):

- ``before-call.dynamodb``: one logical API call (what the library asked for), by operation name;
- ``before-send.dynamodb``: one HTTP request on the wire (botocore retries included);
- ``before-parameter-build.dynamodb``: keeps the call's parameters and, with ``capacity=True``, adds
  ``ReturnConsumedCapacity=TOTAL`` where accepted, so DynamoDB reports what each request consumed;
- ``after-call.dynamodb``: reads ``ConsumedCapacity`` from the response, and notes failed conditional writes.

DynamoDB reports no consumed capacity on a failed conditional write, although AWS charges for it: "If a
ConditionExpression evaluates to false, DynamoDB still consumes write capacity from the table": 1 WCU per
started KB of the existing item (1 WCU when the item is absent).
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html#write-operation-consumption
For those, the units are computed here from the item's size (:func:`slotlock.capacity.item_size_bytes`, AWS's
sizing rules): the old item from
``ReturnValuesOnConditionCheckFailure=ALL_OLD`` when the request asked for it, otherwise one consistent read,
right after the failure, by a separate, uncounted ``reader`` client.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slotlock.capacity import item_size_bytes
from tools.cost.usage import single_write_units

#: Operations that accept ReturnConsumedCapacity (the ones the contenders use, and a few more).
CAPACITY_OPERATIONS = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "TransactWriteItems",
        "TransactGetItems",
        "Query",
        "Scan",
        "BatchGetItem",
        "BatchWriteItem",
    }
)
WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
CONDITIONAL_FAILURE = "ConditionalCheckFailedException"


def failed_write_units(existing_item: Mapping[str, Mapping[str, Any]] | None) -> float:
    """Write units a failed conditional write costs: one per started KB of the existing item, at least 1 (the
    plain write's units of :mod:`tools.cost.usage`, the item sized by :func:`slotlock.capacity.item_size_bytes`)."""
    return float(single_write_units(item_size_bytes(existing_item))) if existing_item else 1.0


@dataclass
class Tally:
    """Requests and capacity seen by a :class:`RequestCounter` (``calls`` by operation name)."""

    calls: collections.Counter[str] = field(default_factory=collections.Counter)
    attempts: int = 0
    reported_units: float = 0.0
    computed_units: float = 0.0
    failed_conditional: int = 0

    @property
    def requests(self) -> int:
        """Logical API calls (one per call the library made, whatever botocore retried)."""
        return sum(self.calls.values())

    @property
    def capacity_units(self) -> float:
        """Reported plus computed capacity units (read and write)."""
        return self.reported_units + self.computed_units

    def __sub__(self, other: Tally) -> Tally:
        calls = collections.Counter(self.calls)
        calls.subtract(other.calls)
        return Tally(
            +calls,
            self.attempts - other.attempts,
            self.reported_units - other.reported_units,
            self.computed_units - other.computed_units,
            self.failed_conditional - other.failed_conditional,
        )

    def copy(self) -> Tally:
        return Tally(
            collections.Counter(self.calls),
            self.attempts,
            self.reported_units,
            self.computed_units,
            self.failed_conditional,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "by_operation": dict(sorted(self.calls.items())),
            "http_attempts": self.attempts,
            "failed_conditional_writes": self.failed_conditional,
            "capacity_units_reported": round(self.reported_units, 3),
            "capacity_units_computed": round(self.computed_units, 3),
        }


class RequestCounter:
    """Counts one client's DynamoDB requests (see the module docstring). Not thread-safe across clients;
    one counter per client.

    Parameters
    ----------
    client:
        A boto3 DynamoDB client (for a resource: ``resource.meta.client``).
    capacity:
        Ask DynamoDB for ``ReturnConsumedCapacity=TOTAL`` on every request that accepts it. This changes the
        requests (a little), so timing runs leave it off.
    reader:
        An uncounted DynamoDB client used to size the existing item after a failed conditional write that
        did not ask for ALL_OLD; ``None`` counts such a failure as 1 unit (an absent item's cost).
    """

    def __init__(self, client: Any, *, capacity: bool = False, reader: Any = None) -> None:
        self.client = client
        self.capacity = capacity
        self.reader = reader
        self.tally = Tally()
        self._key_schema: dict[str, list[str]] = {}
        events = client.meta.events
        events.register("before-parameter-build.dynamodb", self._on_parameters)
        events.register("before-call.dynamodb", self._on_call)
        events.register("before-send.dynamodb", self._on_send)
        events.register("after-call.dynamodb", self._on_response)

    def snapshot(self) -> Tally:
        """A copy of the running totals (subtract two snapshots for one interval)."""
        return self.tally.copy()

    # --- hooks ---------------------------------------------------------------------------------------
    def _on_parameters(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        # The API parameters (kept by reference: a resource's own hook may still transform them in place).
        context["bench_params"] = params
        if self.capacity and model.name in CAPACITY_OPERATIONS:
            params.setdefault("ReturnConsumedCapacity", "TOTAL")

    def _on_call(self, model: Any, **_: Any) -> None:
        self.tally.calls[model.name] += 1

    def _on_send(self, **_: Any) -> None:
        self.tally.attempts += 1

    def _on_response(self, parsed: Mapping[str, Any], model: Any, context: Mapping[str, Any], **_: Any) -> None:
        consumed = parsed.get("ConsumedCapacity")
        for entry in consumed if isinstance(consumed, list) else ([consumed] if consumed else []):
            self.tally.reported_units += float(entry.get("CapacityUnits") or 0.0)
        code = (parsed.get("Error") or {}).get("Code")
        if code == CONDITIONAL_FAILURE and model.name in WRITE_OPERATIONS:
            self.tally.failed_conditional += 1
            if self.capacity:
                old = parsed.get("Item")
                if old is None:
                    old = self._read_existing(model.name, context.get("bench_params") or {})
                self.tally.computed_units += failed_write_units(old)

    def _read_existing(self, operation: str, params: Mapping[str, Any]) -> Mapping[str, Any] | None:
        if self.reader is None:
            return None
        table = params["TableName"]
        key = params.get("Key")
        if key is None:  # PutItem: the key attributes are inside the item
            names = self._key_schema.get(table)
            if names is None:
                schema = self.reader.describe_table(TableName=table)["Table"]["KeySchema"]
                names = self._key_schema[table] = [k["AttributeName"] for k in schema]
            key = {name: params["Item"][name] for name in names}
        return self.reader.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
