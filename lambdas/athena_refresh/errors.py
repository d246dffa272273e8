"""Errors of the Athena refresh job: one base class, specific subclasses that carry context.

AWS errors are wrapped with ``raise ... from exc`` so the original ``botocore`` error stays attached.
"""

from __future__ import annotations

from typing import Any


class AthenaRefreshError(Exception):
    """Base class of every error raised by ``athena_refresh``."""


class ConfigurationError(AthenaRefreshError, ValueError):
    """The job's configuration (environment variables) is missing or invalid.

    ``key`` names the offending environment variable; the message says what is allowed.
    """

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class QueryEngineError(AthenaRefreshError):
    """The query engine could not be called (throttled past botocore's retries, access denied, ...).

    ``retryable`` says whether another invocation may succeed: throttling, a dropped connection or an
    internal error may pass, a rejected request (``InvalidRequestException``, ``AccessDeniedException``)
    will not, so the job records the slot as failed instead of letting Lambda retry it. The stored data is
    untouched either way. ``error_code`` is the AWS error code when there is one.
    """

    def __init__(
        self,
        operation: str,
        message: str,
        *,
        query_execution_id: str | None = None,
        retryable: bool = True,
        error_code: str | None = None,
    ) -> None:
        super().__init__(f"{operation} failed: {message}")
        self.operation = operation
        self.query_execution_id = query_execution_id
        self.retryable = retryable
        self.error_code = error_code

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe description, recorded as the failed slot's error."""
        return {
            "type": type(self).__name__,
            "operation": self.operation,
            "error_code": self.error_code,
            "retryable": self.retryable,
            "query_execution_id": self.query_execution_id,
            "error_message": str(self),
        }


class QueryFailedError(AthenaRefreshError):
    """A query ended FAILED or CANCELLED.

    Carries Athena's ``AthenaError`` fields (https://docs.aws.amazon.com/athena/latest/APIReference/API_AthenaError.html):
    ``error_category`` (1 system, 2 user, 3 other), ``error_type``, ``retryable`` and the state change reason.
    """

    def __init__(
        self,
        query_execution_id: str,
        state: str,
        *,
        reason: str | None = None,
        error_category: int | None = None,
        error_type: int | None = None,
        retryable: bool = False,
        error_message: str | None = None,
    ) -> None:
        detail = error_message or reason or "no reason given"
        super().__init__(
            f"query {query_execution_id} ended {state}: {detail}"
            f" (category={error_category}, type={error_type}, retryable={retryable})"
        )
        self.query_execution_id = query_execution_id
        self.state = state
        self.reason = reason
        self.error_category = error_category
        self.error_type = error_type
        self.retryable = retryable
        self.error_message = error_message

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe description stored with a failed slot."""
        return {
            "query_execution_id": self.query_execution_id,
            "state": self.state,
            "reason": self.reason,
            "error_category": self.error_category,
            "error_type": self.error_type,
            "retryable": self.retryable,
            "error_message": self.error_message,
        }


class QueryTimeoutError(AthenaRefreshError, TimeoutError):
    """The query was still running when the invocation's time budget ran out (the query keeps running)."""

    def __init__(self, query_execution_id: str, state: str, waited_ms: int) -> None:
        super().__init__(f"query {query_execution_id} still {state} after {waited_ms} ms; left running for adoption")
        self.query_execution_id = query_execution_id
        self.state = state
        self.waited_ms = waited_ms


#: Longest excerpt of an offending value put in messages and stored errors (a value can be megabytes).
MAX_VALUE_EXCERPT_CHARS = 200


def _excerpt(value: str) -> str:
    if len(value) <= MAX_VALUE_EXCERPT_CHARS:
        return value
    return f"{value[:MAX_VALUE_EXCERPT_CHARS]}... ({len(value)} characters)"


class ResultTypeError(AthenaRefreshError, ValueError):
    """A result value could not be converted from its declared column type (or two columns share a name).

    Permanent for the query: the same rows fail the same way on every retry, so the job records the slot
    as failed with :meth:`as_dict` (nothing of the results is written) and returns normally. The message
    and the stored error carry at most :data:`MAX_VALUE_EXCERPT_CHARS` characters of the value.
    """

    def __init__(self, column: str, column_type: str, value: str, message: str) -> None:
        super().__init__(f"column {column!r} ({column_type}): cannot convert {_excerpt(value)!r}: {message}")
        self.column = column
        self.column_type = column_type
        self.value = value
        self.reason = message

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe description stored with a failed slot (the value cut to an excerpt)."""
        return {
            "type": type(self).__name__,
            "column": self.column,
            "column_type": self.column_type,
            "value": _excerpt(self.value),
            "error_message": str(self),
        }


class ResultsStoreError(AthenaRefreshError):
    """The results could not be prepared or stored (S3 overflow upload failed, result too large, ...).

    ``retryable`` is False when a retry would fail the same way (rows that are not JSON, or too large for
    an item with no overflow bucket): the job then records the slot as failed instead of raising.
    """

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable

    def as_dict(self) -> dict[str, Any]:
        return {"type": type(self).__name__, "retryable": self.retryable, "error_message": str(self)}


class CorruptResultsItemError(AthenaRefreshError):
    """The results table contradicts the lock: a commit holding the current fencing token was refused.

    The lock item's condition passed in the same transaction, so a refused results write means the stored
    results were tampered with (the LATEST pointer holds a wrong-typed or higher ``fencing_token``, or a
    result item for the slot already exists) or the lock's counter was reset (a deleted lock item). It does
    not repair itself: retries are pointless. ``key`` names the item (``<job>/<slot>``), ``attribute`` the
    attribute at fault. Nothing was written.
    """

    def __init__(self, key: str, attribute: str, message: str) -> None:
        super().__init__(f"results item {key!r}: attribute {attribute!r} {message}")
        self.key = key
        self.attribute = attribute
