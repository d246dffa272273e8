"""The I/O layer of the lock: one DynamoDB table through botocore, and slotlock's retry loops.

No protocol here: the operations behind :class:`slotlock._dynamodb.SlotLock` (:mod:`slotlock._acquire`,
:mod:`slotlock._holder`, :mod:`slotlock._commit`, :mod:`slotlock._missed`) decide what to write and how to
judge a failed condition; this layer sends it, wraps botocore's errors (``LockBackendError``,
``WriteRejectedError``), retries transient answers within a :class:`~slotlock._transient.RetryBudget`, and
judges a cancelled transaction item by item (:mod:`slotlock._transient`). One judgement is made here, before any
caller sees a failed condition: an item of this table returned with it (ALL_OLD, or a cancellation reason's item)
whose table layout this slotlock does not read raises :class:`~slotlock.errors.UnsupportedSchemaVersionError`
(:meth:`LockTableClient.call`), so no caller mistakes a newer item for a lost lease or a corrupt item.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from . import _wire as wire
from . import codec
from ._expressions import PK
from ._lease import LockRecord
from ._transient import PERMANENT_ERROR_CODES, TRANSIENT_ERROR_CODES, Cancellation, RetryBudget
from .capacity import CapacityMeter
from .errors import LockBackendError, UnsupportedSchemaVersionError, WriteRejectedError

if TYPE_CHECKING:  # pragma: no cover - stubs are optional
    from mypy_boto3_dynamodb.client import DynamoDBClient

    from ._dynamodb import LockContext


_SNAKE = {
    "UpdateItem": "update_item",
    "PutItem": "put_item",
    "GetItem": "get_item",
    "TransactWriteItems": "transact_write_items",
    "Query": "query",
    "BatchGetItem": "batch_get_item",
}


class LockTableClient:
    """One lock table through a botocore DynamoDB client (created lazily, ``standard`` retry mode).

    Every request asks for ``ReturnConsumedCapacity=TOTAL``; ``capacity`` adds up what DynamoDB reports for the
    client's requests (:meth:`CapacityMeter.of <slotlock.capacity.CapacityMeter.of>`: an event hook on the client,
    registered when the client is known, so no request of this layer calls it).
    """

    def __init__(self, table_name: str, client: DynamoDBClient | None = None) -> None:
        self.table_name = table_name
        self._client = client
        if client is not None:
            CapacityMeter.of(client)

    @property
    def client(self) -> DynamoDBClient:
        """The DynamoDB client (created lazily with the ``standard`` retry mode)."""
        if self._client is None:
            self._client = boto3.client("dynamodb", config=Config(retries={"mode": "standard", "max_attempts": 5}))
            CapacityMeter.of(self._client)
        return self._client

    @property
    def capacity(self) -> CapacityMeter:
        """The client's meter (:mod:`slotlock.capacity`)."""
        return CapacityMeter.of(self.client)

    def call(self, operation: str, **params: Any) -> dict[str, Any]:
        """One request. A failed condition whose returned item has a table layout this slotlock does not read
        raises :class:`UnsupportedSchemaVersionError` (:meth:`refuse_unsupported_layout`); any other
        ``ClientError`` is re-raised for the caller to judge."""
        method = getattr(self.client, _SNAKE[operation])
        try:
            response: dict[str, Any] = method(**params, ReturnConsumedCapacity="TOTAL")
        except ClientError as exc:
            self.refuse_unsupported_layout(params, exc)
            raise  # callers inspect conditional failures; everything else is wrapped by _wrap
        except BotoCoreError as exc:  # connection dropped, read timeout... after botocore's own retries
            raise LockBackendError(operation, str(exc), error_code=type(exc).__name__, retryable=True) from exc
        return response

    def refuse_unsupported_layout(self, params: Mapping[str, Any], exc: ClientError) -> None:
        """Raise :class:`UnsupportedSchemaVersionError` (from ``exc``) when a failed condition returned an item of
        this table whose ``schema_version`` this slotlock does not read: the ALL_OLD item of a single-item write,
        or the item of any cancellation reason whose write targets this table (the caller's own writes to other
        tables are theirs to judge). Checked first: a newer item explains the failure whatever else it holds."""
        code = wire.error_code(exc)
        returned: list[tuple[Mapping[str, Any], Mapping[str, Any] | None]]
        if code == "ConditionalCheckFailedException":
            returned = [(params, wire.old_item(exc))]
        elif code == "TransactionCanceledException":
            actions: list[Mapping[str, Any]] = [next(iter(entry.values()), {}) for entry in params["TransactItems"]]
            reasons = wire.cancellation_reasons(exc)
            returned = [(action, reason.get("Item")) for action, reason in zip(actions, reasons, strict=False)]
        else:
            return
        for action, item in returned:
            if not item or action.get("TableName") != self.table_name:
                continue
            key = (action.get("Key") or action.get("Item") or {}).get(PK, {}).get("S")
            try:
                codec.check_schema_version(item, key)
            except UnsupportedSchemaVersionError as unsupported:
                raise unsupported from exc

    @staticmethod
    def wrap(operation: str, exc: ClientError) -> LockBackendError:
        error = exc.response.get("Error", {})
        code, message = error.get("Code"), error.get("Message") or str(exc)
        if code in PERMANENT_ERROR_CODES:
            return WriteRejectedError(operation, f"{code}: {message}", reason_code=str(code))
        return LockBackendError(
            operation,
            message,
            error_code=code,
            retryable=code in TRANSIENT_ERROR_CODES or wire.http_status(exc) >= 500,
        )

    def send(self, operation: str, params: Mapping[str, Any], budget: RetryBudget) -> dict[str, Any]:
        """One single-item write, its transient answers retried within ``budget``.

        Raises the ``ClientError`` of a failed condition (the caller judges it with ALL_OLD), the
        retryable :class:`TransientLockError` when the budget is spent, :class:`WriteRejectedError` for
        a request DynamoDB will never accept, and :class:`LockBackendError` otherwise.
        """
        while True:
            try:
                return self.call(operation, **params)
            except ClientError as exc:
                if wire.is_conditional_failure(exc):
                    raise
                wrapped = self.wrap(operation, exc)
                if not wrapped.retryable:
                    raise wrapped from exc
                if not budget.retry():
                    raise budget.spent(
                        operation,
                        f"{wrapped.error_code}: still failing after {budget.attempts} request(s)",
                        error_code=wrapped.error_code,
                    ) from exc
            except LockBackendError as exc:
                if not exc.retryable:
                    raise
                if not budget.retry():
                    raise budget.spent(
                        operation, f"{exc} (after {budget.attempts} request(s))", error_code=exc.error_code
                    ) from exc

    def batch_get(self, keys: Sequence[str], budget: RetryBudget) -> dict[str, dict[str, Any]]:
        """Strongly consistent BatchGetItem of ``keys`` (at most 100): item by key, absent ones left out.

        Transient errors and ``UnprocessedKeys`` (a throttled partition) are retried within ``budget``, then
        raise the retryable :class:`TransientLockError`; other errors are wrapped (:meth:`wrap`).
        """
        items: dict[str, dict[str, Any]] = {}
        pending = [{PK: {"S": key}} for key in keys]
        while pending:
            request = {self.table_name: {"Keys": pending, "ConsistentRead": True}}
            try:
                response = self.call("BatchGetItem", RequestItems=request)
            except ClientError as exc:
                wrapped = self.wrap("BatchGetItem", exc)
                if not wrapped.retryable:
                    raise wrapped from exc
                if not budget.retry():
                    raise budget.spent(
                        "BatchGetItem",
                        f"{wrapped.error_code}: still failing after {budget.attempts} request(s)",
                        error_code=wrapped.error_code,
                    ) from exc
                continue
            except LockBackendError as exc:
                if not exc.retryable or not budget.retry():
                    raise
                continue
            for item in response.get("Responses", {}).get(self.table_name, []):
                items[str(item[PK]["S"])] = item
            pending = list(response.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", []))
            if pending and not budget.retry():
                raise budget.spent(
                    "BatchGetItem",
                    f"{len(pending)} key(s) still unprocessed after {budget.attempts} request(s)",
                    error_code="UnprocessedKeys",
                )
        return items

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            response = self.call("GetItem", TableName=self.table_name, Key={PK: {"S": key}}, ConsistentRead=True)
        except ClientError as exc:
            raise self.wrap("GetItem", exc) from exc
        return response.get("Item")

    def transact(
        self,
        items: Sequence[Mapping[str, Any]],
        *,
        operation: str,
        budget: RetryBudget,
        decide_undecided: Callable[[], tuple[bool, LockRecord | None]] | None = None,
        idempotent: bool = False,
    ) -> None:
        """One TransactWriteItems, its cancellation judged item by item (:class:`Cancellation`).

        Transient verdicts and top-level transient errors are retried within ``budget``, then raise the
        retryable :class:`TransientLockError`; permanent ones raise :class:`WriteRejectedError`. An
        undecided cancellation is decided by ``decide_undecided()`` (the caller's consistent read of the lock item:
        ``(still ours, the record)``; :meth:`Cancellation.decided_by_lock`). ``lease_gone`` and
        ``condition_failed`` verdicts raise :class:`Cancelled` for the caller to judge.
        """
        while True:
            params: dict[str, Any] = {"TransactItems": list(items)}
            if idempotent:
                # Idempotency token for botocore's resends of this very request (DynamoDB keeps it 10 minutes;
                # 36 chars max). A digest of the whole request and our attempt number: DynamoDB answers
                # IdempotentParameterMismatchException when a token is reused with any other parameter, and a
                # new attempt after a cancellation is a new request. A resend that differs fails its
                # condition instead, and ``commit`` recognises its own applied commit from ALL_OLD.
                canonical = json.dumps(
                    [params["TransactItems"], budget.attempts], sort_keys=True, separators=(",", ":"), default=repr
                )
                params["ClientRequestToken"] = hashlib.sha256(canonical.encode()).hexdigest()[:36]
            try:
                self.call("TransactWriteItems", **params)
                return
            except ClientError as exc:
                if wire.error_code(exc) != "TransactionCanceledException":
                    wrapped = self.wrap("TransactWriteItems", exc)
                    if not wrapped.retryable:
                        raise wrapped from exc
                    if budget.retry():
                        continue
                    raise budget.spent(
                        "TransactWriteItems",
                        f"{operation}: {wrapped} (after {budget.attempts} request(s))",
                        error_code=wrapped.error_code,
                    ) from exc
                reasons = wire.cancellation_reasons(exc)
                judged = Cancellation.judge(reasons)
                current: LockRecord | None = None
                if judged.verdict == "undecided" and decide_undecided is not None:
                    owned, current = decide_undecided()
                    judged = judged.decided_by_lock(owned)
                if judged.verdict in ("transient", "undecided"):
                    if budget.retry():
                        continue
                    raise budget.spent(
                        "TransactWriteItems",
                        f"{operation}: cancelled with reasons {list(judged.codes)} after {budget.attempts} request(s)",
                        error_code="TransactionCanceledException",
                        reasons=judged.codes,
                    ) from exc
                if judged.verdict == "permanent":
                    reason = reasons[judged.index or 0] if reasons else {}
                    raise WriteRejectedError(
                        "TransactWriteItems",
                        f"{operation}: item #{judged.index} refused for good: {judged.code}: {reason.get('Message') or ''}",
                        reason_code=str(judged.code),
                        index=judged.index,
                    ) from exc
                raise Cancelled(exc, reasons, judged, current) from exc
            except LockBackendError as exc:  # no answer at all (the request may have applied)
                if not exc.retryable:
                    raise
                if budget.retry():
                    continue
                raise budget.spent(
                    "TransactWriteItems",
                    f"{operation}: {exc} (after {budget.attempts} request(s))",
                    error_code=exc.error_code,
                ) from exc


class Cancelled(Exception):
    """Internal: a cancelled transaction that failed a condition: its reasons and verdict (index 0 is the
    lock item for holder writes, the slot item for a missed-slot record)."""

    def __init__(
        self, error: ClientError, reasons: list[dict[str, Any]], judged: Cancellation, current: LockRecord | None
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.reasons = reasons
        self.judged = judged
        self._current = current

    def item(self, index: int) -> dict[str, Any] | None:
        """The ALL_OLD item DynamoDB returned with reason ``index`` (``None`` when it returned none)."""
        return self.reasons[index].get("Item") if index < len(self.reasons) else None

    def lock_record(self, lock: LockContext) -> LockRecord | None:
        """The lock item of the cancelled transaction: as judged, else its ALL_OLD, else one consistent read."""
        if self._current is not None:
            return self._current
        item = self.item(0)
        if item is None:
            item = lock.get_lock_item()
        return lock.decode_lock(item) if item else None
