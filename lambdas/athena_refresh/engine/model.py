"""Value objects of the query engine interface and its Protocol (docs/engine-interface.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from athena_refresh.errors import QueryFailedError

logger = logging.getLogger(__name__)

QueryState = Literal["QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"]
TERMINAL_STATES: frozenset[str] = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
_ALL_STATES: frozenset[str] = frozenset(get_args(QueryState))

#: GetQueryResults ``MaxResults`` upper bound (rows per page, header row included).
MAX_RESULTS_PER_PAGE = 1000


@dataclass(frozen=True)
class QueryStatistics:
    """Athena ``QueryExecutionStatistics`` of one execution (0 when Athena does not report a field yet).

    https://docs.aws.amazon.com/athena/latest/APIReference/API_QueryExecutionStatistics.html

    Attributes
    ----------
    data_scanned_bytes : int
        ``DataScannedInBytes``, bytes (what the query is billed for).
    engine_execution_time_ms : int
        ``EngineExecutionTimeInMillis``, milliseconds.
    query_queue_time_ms : int
        ``QueryQueueTimeInMillis``, milliseconds.
    total_execution_time_ms : int
        ``TotalExecutionTimeInMillis``, milliseconds.
    """

    data_scanned_bytes: int = 0
    engine_execution_time_ms: int = 0
    query_queue_time_ms: int = 0
    total_execution_time_ms: int = 0

    def as_dict(self) -> dict[str, int]:
        """Return the statistics as a JSON-safe ``{field name: int}`` dict (names as above, units in names)."""
        return {
            "data_scanned_bytes": self.data_scanned_bytes,
            "engine_execution_time_ms": self.engine_execution_time_ms,
            "query_queue_time_ms": self.query_queue_time_ms,
            "total_execution_time_ms": self.total_execution_time_ms,
        }


@dataclass(frozen=True)
class QueryError:
    """Why a query ended FAILED or CANCELLED: Athena's ``AthenaError`` plus ``StateChangeReason``.

    https://docs.aws.amazon.com/athena/latest/APIReference/API_AthenaError.html

    Attributes
    ----------
    error_category : int or None
        1 system, 2 user, 3 other; None when Athena gave no ``AthenaError`` (typical for CANCELLED).
    error_type : int or None
        Athena's specific error number (see the Athena error reference).
    retryable : bool
        Athena's ``Retryable``; False when absent.
    error_message : str or None
        ``AthenaError.ErrorMessage``.
    state_change_reason : str or None
        ``Status.StateChangeReason``.
    """

    error_category: int | None
    error_type: int | None
    retryable: bool
    error_message: str | None
    state_change_reason: str | None


@dataclass(frozen=True)
class QueryExecution:
    """One GetQueryExecution answer, reduced to what the job needs.

    Attributes
    ----------
    query_execution_id : str
        Athena's ``QueryExecutionId``.
    state : QueryState
        ``Status.State``. RUNNING can go back to QUEUED; only :data:`TERMINAL_STATES` are final.
    statistics : QueryStatistics
        Bytes scanned and times in milliseconds.
    error : QueryError or None
        Set for FAILED and CANCELLED, None otherwise.
    """

    query_execution_id: str
    state: QueryState
    statistics: QueryStatistics
    error: QueryError | None = None

    @property
    def done(self) -> bool:
        """True when the state is terminal (SUCCEEDED, FAILED or CANCELLED)."""
        return self.state in TERMINAL_STATES

    def raise_for_state(self) -> None:
        """Raise when the query ended FAILED or CANCELLED; do nothing otherwise (also while it runs).

        Raises
        ------
        QueryFailedError
            With ``state``, ``reason`` (StateChangeReason) and the ``AthenaError`` fields
            ``error_category``, ``error_type``, ``retryable``, ``error_message``.
        """
        if self.state not in ("FAILED", "CANCELLED"):
            return
        err = self.error or QueryError(None, None, False, None, None)
        raise QueryFailedError(
            self.query_execution_id,
            self.state,
            reason=err.state_change_reason,
            error_category=err.error_category,
            error_type=err.error_type,
            retryable=err.retryable,
            error_message=err.error_message,
        )


@dataclass(frozen=True)
class Column:
    """One result column.

    Attributes
    ----------
    name : str
        ``ColumnInfo.Name``.
    type : str
        ``ColumnInfo.Type``, the Trino type name as Athena reports it ("varchar", "bigint", "double",
        "timestamp", "decimal", "array", ...).
    """

    name: str
    type: str


@dataclass(frozen=True)
class QueryResult:
    """All rows of a SUCCEEDED query.

    Attributes
    ----------
    columns : tuple of Column
        In result order.
    rows : list of dict
        One ``{column name: value}`` dict per row, values converted by :func:`convert_value`
        (JSON-safe; SQL NULL -> None).
    """

    columns: tuple[Column, ...]
    rows: list[dict[str, Any]]


@runtime_checkable
class QueryEngine(Protocol):
    """What the job needs from a query engine (Athena in production, DuckDB in local runs)."""

    def start_query(self, *, sql: str, parameters: Sequence[str], client_request_token: str) -> str:
        """Start `sql` (Trino dialect, `?` placeholders) with ExecutionParameters `parameters`.

        Athena semantics: each value is SQL literal text, so strings carry their quotes:
        ``"'2013-01-01 00:00:00'"``. Idempotent by `client_request_token` (32..128 chars): the same token and the
        same sql/parameters return the same query execution id; the same token with different sql/parameters
        raises QueryEngineError. Returns the query execution id.
        """
        ...

    def get_query(self, query_execution_id: str) -> QueryExecution:
        """Return the current state, statistics and error of one query."""
        ...

    def get_results(self, query_execution_id: str, *, on_page: Callable[[int], object] | None = None) -> QueryResult:
        """All rows of a SUCCEEDED query, typed. ``on_page(rows_so_far)`` is called after each page (the job
        renews its lease there, so a long read does not hand the slot to a successor); what it raises
        propagates."""
        ...
