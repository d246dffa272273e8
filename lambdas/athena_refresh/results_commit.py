"""What a slot's commit writes to the results table, and why such a write can be refused: pure, no I/O.

:class:`~athena_refresh.results.ResultsStore` builds a slot's result item (uploading oversize rows to S3 first)
and asks :func:`commit_writes` for the two TransactWriteItems entries that :meth:`slotlock.SlotLock.commit` puts
beside the lock's fenced release:

- the **result item's Put**, conditioned on no item under its key (a result is immutable);
- the **LATEST pointer's Update**, which copies the result (:data:`_LATEST_COPIED`) and moves forward only: by
  slot, then generation, then (same slot and generation) fencing token (:func:`latest_condition`).

When the lock's condition passed but one of these was refused, :func:`explain_conflict` says which stored item
contradicts the lock (:class:`~athena_refresh.errors.CorruptResultsItemError`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import CorruptResultsItemError
from .stored import LATEST, LIVE_GENERATION


def latest_condition(generation: int) -> str:
    """The LATEST pointer's condition for a commit of ``generation`` (placeholders ``#latest_slot``,
    ``#gen``, ``#token``, ``:slot``, ``:gen``, ``:token``): a newer slot; the same slot and a newer generation
    (a pointer from before generations has none: generation 1); the same slot and generation and a higher
    token (the fence: a reset counter is refused)."""
    same_generation = "(attribute_not_exists(#gen) OR #gen = :gen)" if generation == LIVE_GENERATION else None
    if same_generation is not None:
        same_slot = f"{same_generation} AND #token < :token"
    else:
        same_slot = "(attribute_not_exists(#gen) OR #gen < :gen OR (#gen = :gen AND #token < :token))"
    return f"attribute_not_exists(#latest_slot) OR #latest_slot < :slot OR (#latest_slot = :slot AND {same_slot})"


#: The result item's attributes the LATEST item copies (all but the keys and ``generation``, which it holds as
#: ``latest_slot``/``latest_generation``); of the rows, either ``rows_json`` or the S3 pointer's three.
_LATEST_COPIED = (
    "query_execution_id",
    "statistics_json",
    "columns_json",
    "row_count",
    "committed_at_ms",
    "window_start",
    "window_end",
    "rows_json",
    "rows_s3_uri",
    "rows_sha256",
    "rows_bytes",
    "cost_json",
)
_ROWS_FIELDS = ("rows_json", "rows_s3_uri", "rows_sha256", "rows_bytes")
#: Copied attributes that a newer result without them must not inherit (REMOVEd from LATEST).
_REPLACED_FIELDS = (*_ROWS_FIELDS, "cost_json")


def _latest_update_expression(item: Mapping[str, Any]) -> str:
    """SET the pointer and the copy of ``item`` (a result item); REMOVE the other rows location's attributes
    (a result stored inline replaces an offloaded one and the reverse)."""
    sets = ["#token = :token", "#latest_slot = :slot", "#gen = :gen"]
    sets += [f"#{name} = :{name}" for name in _LATEST_COPIED if name in item]
    removed = [f"#{name}" for name in _REPLACED_FIELDS if name not in item]
    return "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removed) if removed else "")


def compact_json(value: Any) -> str:
    """``value`` as compact JSON text, keys in their order; ``nan``/``inf`` refused.

    :raises TypeError: a value JSON cannot carry. :raises ValueError: a non-finite float.
    """
    return json.dumps(value, separators=(",", ":"), sort_keys=False, allow_nan=False)


@dataclass(frozen=True)
class PreparedResult:
    """The transaction writes for one slot's result, and a summary for logs and the slot item.

    ``writes``: the result Put, then (when ``latest_index`` is not ``None``) the LATEST pointer's Update.
    """

    writes: list[dict[str, Any]]
    summary: dict[str, Any]
    latest_index: int | None = 1

    def without_latest(self) -> PreparedResult:
        """The same commit without the pointer's write (the pointer is already at a newer result)."""
        if self.latest_index is None:
            return self
        writes = [write for index, write in enumerate(self.writes) if index != self.latest_index]
        return PreparedResult(writes, {**self.summary, "latest_moved": False}, None)


def commit_writes(
    table_name: str,
    item: dict[str, Any],
    *,
    job_name: str,
    slot_iso: str,
    fencing_token: int,
    generation: int,
    move_latest: bool,
) -> list[dict[str, Any]]:
    """The result ``item``'s Put (DynamoDB JSON) into ``table_name`` and (``move_latest``) the LATEST pointer's
    Update copying it, as TransactWriteItems entries, both returning ALL_OLD when their condition fails."""
    put_result = {
        "Put": {
            "TableName": table_name,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(#slot)",
            "ExpressionAttributeNames": {"#slot": "slot"},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }
    update_latest = {
        "Update": {
            "TableName": table_name,
            "Key": {"job": {"S": job_name}, "slot": {"S": LATEST}},
            "UpdateExpression": _latest_update_expression(item),
            # Forward only: by slot, then generation, then (same slot and generation) token.
            "ConditionExpression": latest_condition(generation),
            "ExpressionAttributeNames": {
                "#token": "fencing_token",
                "#latest_slot": "latest_slot",
                "#gen": "latest_generation",
                **{f"#{name}": name for name in _LATEST_COPIED if name in item},
                **{f"#{name}": name for name in _REPLACED_FIELDS if name not in item},
            },
            "ExpressionAttributeValues": {
                ":token": {"N": str(fencing_token)},
                ":slot": {"S": slot_iso},
                ":gen": {"N": str(generation)},
                **{f":{name}": item[name] for name in _LATEST_COPIED if name in item},
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }
    return [put_result, update_latest] if move_latest else [put_result]


def explain_conflict(
    index: int,
    old_item: Mapping[str, Any] | None,
    *,
    job_name: str,
    slot_iso: str,
    fencing_token: int | None = None,
    code: str = "ConditionalCheckFailed",
) -> CorruptResultsItemError:
    """Explain why write ``index`` of :func:`commit_writes`' writes for ``job_name``/``slot_iso`` was refused
    inside a commit whose lock condition passed (``slotlock.CommitConflictError``; ``old_item`` is its
    ALL_OLD item in DynamoDB JSON, ``None`` when the backend returned none; ``fencing_token`` the
    committing token, which the lock item holds; ``code`` the cancellation reason).

    The holder of the current fencing token can only be refused by results that contradict the lock:
    write 0 (the slot's result) finds a result already stored; write 1 (LATEST) refuses although the job
    read it behind this commit's (slot, generation) and, on the refusal, read it again and found it still
    behind (it retries without the pointer otherwise). So the pointer was edited (a ``latest_slot`` that
    is not a String, a ``fencing_token`` that is not a Number), or, for the same slot and generation, holds
    a token at or above the committing one, which is blamed on a reset fencing counter.
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
    latest = item.get("latest_slot")
    refused = "" if code == "ConditionalCheckFailed" else f" ({code})"
    attribute = "fencing_token"
    if token is None and not item:
        problem = f"refused the fenced pointer update{refused} (the backend returned no old item to say why)"
    elif latest is not None and set(latest) != {"S"}:
        attribute = "latest_slot"
        problem = f"must be a String, found {latest}: no commit can pass the pointer's condition"
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
    return CorruptResultsItemError(f"{job_name}/{LATEST}", attribute, problem)
