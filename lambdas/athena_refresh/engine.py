"""Athena query engine: start a query idempotently, poll it, read its typed results.

The contract is ``docs/engine-interface.md``. This module ships in the Lambda asset, so it imports only the
standard library, boto3/botocore and :mod:`athena_refresh.errors`.

AWS rules this module relies on (each is repeated where it is used):

- StartQueryExecution ``ClientRequestToken`` (32..128 characters) makes the call idempotent: the same token
  and the same request return the same ``QueryExecutionId``; the same token with a changed request is an
  ``InvalidRequestException``. Tokens are per account and Region, so ours include the deployment.
  https://docs.aws.amazon.com/athena/latest/APIReference/API_StartQueryExecution.html
- GetQueryResults pages with ``MaxResults`` (1..1000) and ``NextToken``; values are strings
  (``VarCharValue``), SQL NULL has no ``VarCharValue``; for a SELECT the first row of the FIRST page is the
  header. https://docs.aws.amazon.com/athena/latest/APIReference/API_GetQueryResults.html
- A failed query reports ``Status.AthenaError`` (``ErrorCategory`` 1 system / 2 user / 3 other,
  ``ErrorType``, ``Retryable``, ``ErrorMessage``).
  https://docs.aws.amazon.com/athena/latest/APIReference/API_AthenaError.html
- Athena API quotas (StartQueryExecution about 20 calls/s, Get* about 100 calls/s per account and Region)
  answer ``ThrottlingException``; too many active queries answer ``TooManyRequestsException``.
  https://docs.aws.amazon.com/athena/latest/ug/service-limits.html . botocore's ``standard`` retry mode
  retries both (the ``legacy`` default does not retry ``TooManyRequestsException``), and a retried
  StartQueryExecution resends the same token, so a retry never starts a second query.
  https://boto3.amazonaws.com/v1/documentation/api/latest/guide/retries.html
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args, runtime_checkable
from zoneinfo import ZoneInfo

import boto3
import botocore.config
from botocore.exceptions import BotoCoreError, ClientError

from athena_refresh.errors import QueryEngineError, QueryFailedError, QueryTimeoutError, ResultTypeError

if TYPE_CHECKING:  # the stubs are a development aid only; they are not installed in the Lambda
    from mypy_boto3_athena.client import AthenaClient

__all__ = [
    "DEFAULT_CLIENT_CONFIG",
    "MAX_RESULTS_PER_PAGE",
    "TERMINAL_STATES",
    "AthenaQueryEngine",
    "Column",
    "QueryEngine",
    "QueryError",
    "QueryExecution",
    "QueryResult",
    "QueryState",
    "QueryStatistics",
    "check_start_request",
    "client_request_token",
    "convert_value",
    "wait_for_query",
]

logger = logging.getLogger(__name__)

QueryState = Literal["QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"]
TERMINAL_STATES: frozenset[str] = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
_ALL_STATES: frozenset[str] = frozenset(get_args(QueryState))

#: GetQueryResults ``MaxResults`` upper bound (rows per page, header row included).
MAX_RESULTS_PER_PAGE = 1000

#: ClientRequestToken length bounds (characters), from the StartQueryExecution API reference.
TOKEN_MIN_CHARS = 32
TOKEN_MAX_CHARS = 128

#: botocore configuration of the default client: ``standard`` retries ThrottlingException and
#: TooManyRequestsException with exponential backoff and jitter. In a client Config, ``max_attempts``
#: counts RETRIES (botocore turns it into ``total_max_attempts`` = 6): one call plus up to 5 retries.
DEFAULT_CLIENT_CONFIG = botocore.config.Config(retries={"mode": "standard", "max_attempts": 5})


# --------------------------------------------------------------------------------------------------
# Value objects
# --------------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------------
# Idempotency token
# --------------------------------------------------------------------------------------------------
#: QueryExecutionId as the Athena API constrains it (1..128 characters, pattern ``\S+``):
#: https://docs.aws.amazon.com/athena/latest/APIReference/API_GetQueryExecution.html#API_GetQueryExecution_RequestSyntax
QUERY_EXECUTION_ID = re.compile(r"\S{1,128}")
_TOKEN_PREFIX_CHARS = 40
_UNSAFE_TOKEN_CHARS = re.compile(r"[^A-Za-z0-9]+")


def client_request_token(job_name: str, slot_iso: str, attempt: int, *, deployment_id: str) -> str:
    """Deterministic StartQueryExecution ``ClientRequestToken`` for one attempt of one slot of one job of one
    deployment.

    Two starts of the same attempt in the same deployment (a Lambda retry, a botocore retry, a second racer
    that adopts the slot) send the same token and therefore get the same query; a new attempt gets a new
    token and therefore a new query. Athena scopes a token to the account and Region, not to a stack, so
    `deployment_id` keeps two deployments of the same job name (staging and prod in one account) from
    sending the same token for different requests (Athena would answer the second with the first's query,
    or with ``InvalidRequestException`` when the SQL differs). The job passes its lock table's name, which
    is unique per account and Region and shared by every racer of the deployment:
    https://docs.aws.amazon.com/athena/latest/APIReference/API_StartQueryExecution.html#athena-StartQueryExecution-request-ClientRequestToken

    The token is ``<readable prefix>-<sha256 hex>``: the prefix (job, slot, attempt with every run of
    characters outside ``[A-Za-z0-9]`` turned into ``-``, at most 40 characters) is for humans reading
    CloudTrail; the 64-hex-digit SHA-256 of ``json.dumps([deployment_id, job_name, slot_iso, attempt])`` is
    what makes it unique, so a truncated or sanitised prefix can never make two different inputs collide.

    Athena keeps a token for a limited time and answers ``InvalidRequestException`` when the same token
    comes with a different request.

    Parameters
    ----------
    job_name : str
        The job's name (non-empty).
    slot_iso : str
        The schedule slot as an ISO-8601 string (non-empty), exactly as stored with the slot.
    attempt : int
        Query attempt number of that slot (>= 0; the job decides where it starts).
    deployment_id : str
        Identity of the deployment (non-empty), the same for every racer of it: the lock table's name.

    Returns
    -------
    str
        Between 32 and 128 characters (in practice 64..105), ASCII letters, digits and ``-``.

    Raises
    ------
    ValueError
        Empty `job_name`, `slot_iso` or `deployment_id` (or not a str), or a negative or non-int `attempt`.

    Examples
    --------
    >>> t = client_request_token("flights", "2026-11-02T10:00:00Z", 1, deployment_id="prod-locks")
    >>> t.startswith("flights-2026-11-02T10-00-00Z-a1-") and len(t) == 32 + 64
    True
    >>> t != client_request_token("flights", "2026-11-02T10:00:00Z", 1, deployment_id="staging-locks")
    True
    """
    if not job_name or not slot_iso:
        raise ValueError("job_name and slot_iso must be non-empty")
    if not isinstance(deployment_id, str) or not deployment_id:
        raise ValueError(f"deployment_id must be a non-empty str (the lock table's name), got {deployment_id!r}")
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
        raise ValueError(f"attempt must be an int >= 0, got {attempt!r}")
    digest = hashlib.sha256(json.dumps([deployment_id, job_name, slot_iso, attempt]).encode("utf-8")).hexdigest()
    readable = _UNSAFE_TOKEN_CHARS.sub("-", f"{job_name}-{slot_iso}-a{attempt}").strip("-")
    prefix = readable[:_TOKEN_PREFIX_CHARS].rstrip("-")
    token = f"{prefix}-{digest}" if prefix else digest
    # 64 <= len(token) <= 40 + 1 + 64: always inside Athena's 32..128.
    return token


def check_start_request(client_request_token: str, parameters: Sequence[str]) -> None:
    """Checks every :class:`QueryEngine` makes before starting a query.

    Raises
    ------
    ValueError
        The token is not 32..128 characters (StartQueryExecution's bounds).
    TypeError
        `parameters` is a single str (a common slip that would send one parameter per character).
    """
    if not TOKEN_MIN_CHARS <= len(client_request_token) <= TOKEN_MAX_CHARS:
        raise ValueError(
            f"client_request_token must be {TOKEN_MIN_CHARS}..{TOKEN_MAX_CHARS} characters,"
            f" got {len(client_request_token)}"
        )
    if isinstance(parameters, str):
        raise TypeError("parameters must be a sequence of SQL literal strings, not one str")


# --------------------------------------------------------------------------------------------------
# Value conversion
# --------------------------------------------------------------------------------------------------
_INT_TYPES = frozenset({"tinyint", "smallint", "integer", "int", "bigint"})
_FLOAT_TYPES = frozenset({"real", "float", "double"})
_STRING_TYPES = frozenset({"varchar", "char", "string", "varbinary"})
_PRINTED_TYPES = frozenset({"array", "map", "row", "struct", "json"})
_FLOAT_SPECIALS = frozenset({"NaN", "Infinity", "-Infinity"})

_INT_RE = re.compile(r"[+-]?\d+")
_FLOAT_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_DECIMAL_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIMESTAMP_RE = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[ T](?P<h>\d{2}):(?P<m>\d{2})(?::(?P<s>\d{2})(?:\.(?P<frac>\d{1,12}))?)?"
    r"(?:\s*(?P<zone>\S+))?"
)
_OFFSET_RE = re.compile(r"(?P<sign>[+-])(?P<h>\d{2}):?(?P<m>\d{2})")
_UTC_NAMES = frozenset({"UTC", "Z", "GMT", "UCT", "Etc/UTC", "Etc/GMT", "Zulu", "Universal"})


class _BadValue(Exception):
    """Internal: a value does not parse as its column type (turned into ResultTypeError by the caller)."""


def _type_kind(column_type: str) -> str:
    """Reduce an Athena type name to the conversion kind: 'timestamp(3) with time zone' -> 'timestamptz'."""
    normalized = " ".join(column_type.strip().lower().split())
    head = normalized.split("(", 1)[0].strip()
    if head.startswith("timestamp"):
        return "timestamptz" if normalized.endswith("with time zone") else "timestamp"
    return head


def _format_offset(seconds: int) -> str:
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")


def _zone_offset(zone: str, naive: datetime) -> str:
    if zone in _UTC_NAMES:
        return "+00:00"
    match = _OFFSET_RE.fullmatch(zone)
    if match:
        if int(match["h"]) > 23 or int(match["m"]) > 59:
            raise _BadValue(f"invalid UTC offset {zone!r}")
        offset = int(match["h"]) * 3600 + int(match["m"]) * 60
        return _format_offset(-offset if match["sign"] == "-" else offset)
    try:  # named zones need the system tz database (or the tzdata package)
        utcoffset = naive.replace(tzinfo=ZoneInfo(zone)).utcoffset()
    except (ValueError, KeyError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
        raise _BadValue(f"unknown time zone {zone!r}") from exc
    assert utcoffset is not None  # a ZoneInfo always yields an offset
    return _format_offset(int(utcoffset.total_seconds()))


def _convert_timestamp(value: str, *, with_zone: bool) -> str:
    match = _TIMESTAMP_RE.fullmatch(value.strip())
    if not match or bool(match["zone"]) != with_zone:
        expected = "'YYYY-MM-DD HH:MM:SS.fff ZONE'" if with_zone else "'YYYY-MM-DD HH:MM:SS.fff'"
        raise _BadValue(f"expected {expected}")
    seconds = match["s"] or "00"
    frac = (match["frac"] or "").ljust(3, "0")  # at least milliseconds; finer precision is kept, not cut
    try:
        naive = datetime.fromisoformat(f"{match['date']}T{match['h']}:{match['m']}:{seconds}")
    except ValueError as exc:
        raise _BadValue(str(exc)) from exc
    iso = f"{naive.isoformat(timespec='seconds')}.{frac}"
    return iso + _zone_offset(match["zone"], naive) if with_zone else iso


def _convert(value: str, kind: str) -> Any:
    if kind == "boolean":
        lowered = value.strip().lower()
        if lowered not in ("true", "false"):
            raise _BadValue("expected 'true' or 'false'")
        return lowered == "true"
    if kind in _INT_TYPES:
        if not _INT_RE.fullmatch(value.strip()):
            raise _BadValue("expected an integer")
        return int(value)
    if kind in _FLOAT_TYPES:
        if value in _FLOAT_SPECIALS:
            return value  # JSON has no NaN/Infinity: keep Athena's spelling instead of losing it
        if not _FLOAT_RE.fullmatch(value.strip()):
            raise _BadValue("expected a floating-point number, 'NaN', 'Infinity' or '-Infinity'")
        number = float(value)
        if not math.isfinite(number):
            raise _BadValue("out of the float range")
        return number
    if kind == "decimal":
        if not _DECIMAL_RE.fullmatch(value.strip()):
            raise _BadValue("expected a decimal number")
        return value.strip()  # exact: a float would round
    if kind == "date":
        if not _DATE_RE.fullmatch(value.strip()):
            raise _BadValue("expected 'YYYY-MM-DD'")
        try:
            return date.fromisoformat(value.strip()).isoformat()
        except ValueError as exc:
            raise _BadValue(str(exc)) from exc
    if kind == "timestamp":
        return _convert_timestamp(value, with_zone=False)
    if kind == "timestamptz":
        return _convert_timestamp(value, with_zone=True)
    # varchar/char/string/varbinary, array/map/row/json as Athena prints them, and any unknown type.
    return value


def convert_value(value: str | None, column_type: str) -> Any:
    """Convert one Athena ``VarCharValue`` to a JSON-safe Python value by its Trino type name.

    Athena returns every value as a string and leaves ``VarCharValue`` out for SQL NULL
    (https://docs.aws.amazon.com/athena/latest/APIReference/API_Datum.html); type names are Trino's
    (https://docs.aws.amazon.com/athena/latest/ug/data-types.html). Parameters in the type name
    (``decimal(10,2)``, ``timestamp(3)``) are ignored; the name is case-insensitive.

    ===================================================  ===============================================
    type                                                 result
    ===================================================  ===============================================
    boolean                                              bool
    tinyint, smallint, integer, int, bigint              int
    real, float, double                                  float; "NaN", "Infinity", "-Infinity" stay str
    decimal                                              str, exactly as printed (no float rounding)
    varchar, char, string, varbinary                     str
    date                                                 "YYYY-MM-DD"
    timestamp                                            "YYYY-MM-DDTHH:MM:SS.fff" (Athena prints
                                                         "2013-01-01 05:00:00.000"; finer fractions kept)
    timestamp with time zone                             same plus offset, "...05:00:00.000+00:00"
    array, map, row, json, and any unknown type          str as Athena prints it
    ===================================================  ===============================================

    Parameters
    ----------
    value : str or None
        The ``VarCharValue``; None when it was missing (SQL NULL).
    column_type : str
        ``ColumnInfo.Type``.

    Returns
    -------
    Any
        None, bool, int, float or str (JSON-safe: never a float NaN or infinity).

    Raises
    ------
    ResultTypeError
        The value does not parse as its type (for example "abc" in a bigint column). ``column`` is "" here;
        :meth:`AthenaQueryEngine.get_results` raises it with the column name.
    """
    return _convert_named(value, column_type, column="")


def _convert_named(value: str | None, column_type: str, *, column: str) -> Any:
    if value is None:
        return None
    try:
        return _convert(value, _type_kind(column_type))
    except _BadValue as exc:
        raise ResultTypeError(column, column_type, value, str(exc)) from exc


# --------------------------------------------------------------------------------------------------
# Athena engine
# --------------------------------------------------------------------------------------------------
def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


class AthenaQueryEngine:
    """:class:`QueryEngine` on Amazon Athena.

    Parameters
    ----------
    workgroup : str
        Athena workgroup (its settings, such as the result location and the per-query scan cutoff, apply).
    database : str
        Default database of the query (``QueryExecutionContext.Database``).
    catalog : str, optional
        Data catalog (``QueryExecutionContext.Catalog``), by default ``"AwsDataCatalog"``.
    client : AthenaClient, optional
        An Athena client. By default one is created on first use with :data:`DEFAULT_CLIENT_CONFIG`
        (botocore retry mode ``standard``, ``max_attempts`` 5: up to 6 calls), which retries ``ThrottlingException`` and
        ``TooManyRequestsException`` (https://boto3.amazonaws.com/v1/documentation/api/latest/guide/retries.html).
    output_location : str, optional
        ``s3://`` prefix sent as ``ResultConfiguration.OutputLocation``; None leaves it to the workgroup.
    result_reuse_max_age_min : int, optional
        When positive, every start asks Athena to reuse the result of an identical earlier query (same
        SQL, parameters, database and result configuration, in this workgroup) up to this many minutes
        old (``ResultReuseConfiguration``; 1..10080). 0 (the default) runs every query afresh.
        https://docs.aws.amazon.com/athena/latest/ug/reusing-query-results.html

    Examples
    --------
    >>> engine = AthenaQueryEngine(workgroup="primary", database="flights")  # doctest: +SKIP
    >>> qid = engine.start_query(sql="SELECT 1", parameters=[], client_request_token=token)  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        workgroup: str,
        database: str,
        catalog: str = "AwsDataCatalog",
        client: AthenaClient | None = None,
        output_location: str | None = None,
        result_reuse_max_age_min: int = 0,
    ) -> None:
        if (
            isinstance(result_reuse_max_age_min, bool)
            or not isinstance(result_reuse_max_age_min, int)
            or not 0 <= result_reuse_max_age_min <= 10_080
        ):
            raise ValueError(
                f"result_reuse_max_age_min must be an int from 0 to 10080, got {result_reuse_max_age_min!r}"
            )
        self.result_reuse_max_age_min = result_reuse_max_age_min
        self.workgroup = workgroup
        self.database = database
        self.catalog = catalog
        self.output_location = output_location
        self._client = client

    @property
    def client(self) -> AthenaClient:
        """The Athena client, created on first use when none was injected."""
        if self._client is None:
            self._client = boto3.client("athena", config=DEFAULT_CLIENT_CONFIG)
        return self._client

    # ---- StartQueryExecution ----------------------------------------------------------------------
    def start_query(self, *, sql: str, parameters: Sequence[str], client_request_token: str) -> str:
        """Start `sql` once per `client_request_token` and return its ``QueryExecutionId``.

        Sends StartQueryExecution with ``QueryString``, ``ClientRequestToken``, ``WorkGroup``,
        ``QueryExecutionContext={"Database", "Catalog"}``, ``ExecutionParameters`` (left out when
        `parameters` is empty: Athena rejects an empty list), ``ResultConfiguration`` only when an
        output location was given and ``ResultReuseConfiguration`` only when reuse is on.
        https://docs.aws.amazon.com/athena/latest/APIReference/API_StartQueryExecution.html

        Parameters
        ----------
        sql : str
            Trino-dialect SQL with ``?`` placeholders.
        parameters : sequence of str
            One SQL literal text per placeholder, strings with their quotes (``"'2013-01-01 00:00:00'"``).
            https://docs.aws.amazon.com/athena/latest/ug/querying-with-prepared-statements.html
        client_request_token : str
            32..128 characters, see :func:`client_request_token`. The same token with the same request returns
            the same id (botocore's own retries resend it); the same token with a different request fails.

        Returns
        -------
        str
            The query execution id.

        Raises
        ------
        ValueError, TypeError
            The token is not 32..128 characters; `parameters` is a single str.
        QueryEngineError
            Any botocore error, for example ``InvalidRequestException`` (token reused with another request),
            ``ThrottlingException``/``TooManyRequestsException`` after the retries, ``AccessDeniedException``;
            the botocore exception is ``__cause__``.
        """
        check_start_request(client_request_token, parameters)
        request: dict[str, Any] = {
            "QueryString": sql,
            "ClientRequestToken": client_request_token,
            "WorkGroup": self.workgroup,
            "QueryExecutionContext": {"Database": self.database, "Catalog": self.catalog},
        }
        if parameters:
            request["ExecutionParameters"] = list(parameters)
        if self.output_location:
            request["ResultConfiguration"] = {"OutputLocation": self.output_location}
        if self.result_reuse_max_age_min:
            request["ResultReuseConfiguration"] = {
                "ResultReuseByAgeConfiguration": {"Enabled": True, "MaxAgeInMinutes": self.result_reuse_max_age_min}
            }
        try:
            response = self.client.start_query_execution(**request)
        except (ClientError, BotoCoreError) as exc:
            raise _engine_error("StartQueryExecution", exc) from exc
        query_execution_id: str = response["QueryExecutionId"]
        logger.info(
            "athena query started",
            extra={"query_execution_id": query_execution_id, "workgroup": self.workgroup},
        )
        return query_execution_id

    # ---- GetQueryExecution ------------------------------------------------------------------------
    def get_query(self, query_execution_id: str) -> QueryExecution:
        """Return the state, statistics and error of one query (GetQueryExecution).

        Maps ``Status.State``, ``Status.AthenaError`` and ``Status.StateChangeReason``
        (https://docs.aws.amazon.com/athena/latest/APIReference/API_QueryExecutionStatus.html) and
        ``Statistics`` (missing fields -> 0). :attr:`QueryExecution.error` is set for FAILED/CANCELLED only.

        Raises
        ------
        QueryEngineError
            Any botocore error (unknown id, throttled past the retries, access denied), ``__cause__`` set;
            or a state outside QUEUED/RUNNING/SUCCEEDED/FAILED/CANCELLED.
        """
        operation = "GetQueryExecution"
        try:
            response = self.client.get_query_execution(QueryExecutionId=query_execution_id)
        except (ClientError, BotoCoreError) as exc:
            raise _engine_error(operation, exc, query_execution_id=query_execution_id) from exc
        execution = response.get("QueryExecution", {})
        status = execution.get("Status", {})
        state = status.get("State")
        if state not in _ALL_STATES:
            raise QueryEngineError(
                operation, f"unexpected query state {state!r}", query_execution_id=query_execution_id
            )
        stats = execution.get("Statistics", {})
        statistics = QueryStatistics(
            data_scanned_bytes=int(stats.get("DataScannedInBytes") or 0),
            engine_execution_time_ms=int(stats.get("EngineExecutionTimeInMillis") or 0),
            query_queue_time_ms=int(stats.get("QueryQueueTimeInMillis") or 0),
            total_execution_time_ms=int(stats.get("TotalExecutionTimeInMillis") or 0),
        )
        error = None
        if state in ("FAILED", "CANCELLED"):
            athena_error = status.get("AthenaError", {})
            error = QueryError(
                error_category=_int_or_none(athena_error.get("ErrorCategory")),
                error_type=_int_or_none(athena_error.get("ErrorType")),
                retryable=bool(athena_error.get("Retryable", False)),
                error_message=athena_error.get("ErrorMessage"),
                state_change_reason=status.get("StateChangeReason"),
            )
        return QueryExecution(
            query_execution_id=execution.get("QueryExecutionId", query_execution_id),
            state=state,
            statistics=statistics,
            error=error,
        )

    # ---- GetQueryResults --------------------------------------------------------------------------
    def get_results(self, query_execution_id: str, *, on_page: Callable[[int], object] | None = None) -> QueryResult:
        """All rows of a SUCCEEDED query, typed (GetQueryResults, every page).

        Pages with ``MaxResults=1000`` (the maximum) and ``NextToken`` until no token is returned. Column
        names and types come from ``ResultSetMetadata.ColumnInfo``; the first row of the FIRST page is
        the header (column labels) and is dropped; later pages carry data only. A missing
        ``VarCharValue`` is SQL NULL (None). https://docs.aws.amazon.com/athena/latest/APIReference/API_GetQueryResults.html

        ``on_page(rows_so_far)`` is called after each page (a result of 100,000 rows is 100 requests:
        the job renews its lease there).

        Returns
        -------
        QueryResult
            Columns in order and one dict per row, values by :func:`convert_value`.

        Raises
        ------
        QueryEngineError
            Any botocore error (the query is not SUCCEEDED: ``InvalidRequestException``; throttled past the
            retries; access denied to the result bucket), ``__cause__`` set; or a malformed answer (a row
            with the wrong number of values, a repeated ``NextToken``).
        ResultTypeError
            A value does not parse as its column type, or two columns share a name (rows are keyed by
            name: alias them in the SQL).
        """
        operation = "GetQueryResults"
        columns: tuple[Column, ...] = ()
        rows: list[dict[str, Any]] = []
        next_token: str | None = None
        first_page = True
        while True:
            request: dict[str, Any] = {"QueryExecutionId": query_execution_id, "MaxResults": MAX_RESULTS_PER_PAGE}
            if next_token:
                request["NextToken"] = next_token
            try:
                response = self.client.get_query_results(**request)
            except (ClientError, BotoCoreError) as exc:
                raise _engine_error(operation, exc, query_execution_id=query_execution_id) from exc
            result_set = response.get("ResultSet", {})
            page_rows = result_set.get("Rows", [])
            if first_page:
                columns = _columns(result_set)
                page_rows = page_rows[1:]  # header row: first row of the first page only
                first_page = False
            for row in page_rows:
                data = row.get("Data", [])
                if len(data) != len(columns):
                    raise QueryEngineError(
                        operation,
                        f"a row has {len(data)} values for {len(columns)} columns",
                        query_execution_id=query_execution_id,
                    )
                rows.append(
                    {
                        col.name: _convert_named(datum.get("VarCharValue"), col.type, column=col.name)
                        for col, datum in zip(columns, data, strict=True)
                    }
                )
            if on_page is not None:
                on_page(len(rows))
            token = response.get("NextToken")
            if not token:
                break
            if token == next_token:
                raise QueryEngineError(
                    operation, "Athena returned the same NextToken twice", query_execution_id=query_execution_id
                )
            next_token = token
        return QueryResult(columns=columns, rows=rows)


def _columns(result_set: Mapping[str, Any]) -> tuple[Column, ...]:
    infos = result_set.get("ResultSetMetadata", {}).get("ColumnInfo", [])
    columns = tuple(Column(name=info["Name"], type=info["Type"]) for info in infos)
    seen: set[str] = set()
    for col in columns:
        if col.name in seen:
            raise ResultTypeError(col.name, col.type, col.name, "duplicate column name; alias the columns in the SQL")
        seen.add(col.name)
    return columns


#: Athena error codes a retry cannot fix: the request itself is rejected (bad SQL parameters, a reused
#: ClientRequestToken with another request, a missing workgroup or table, missing permissions).
#: https://docs.aws.amazon.com/athena/latest/APIReference/CommonErrors.html
PERMANENT_ERROR_CODES = frozenset(
    {
        "InvalidRequestException",
        "AccessDeniedException",
        "ValidationException",
        "ResourceNotFoundException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "MetadataException",
    }
)


def _engine_error(
    operation: str, exc: ClientError | BotoCoreError, *, query_execution_id: str | None = None
) -> QueryEngineError:
    """Wrap a botocore error, classifying it as retryable (throttling, connection, internal) or not."""
    code = exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else None
    return QueryEngineError(
        operation,
        _describe(exc),
        query_execution_id=query_execution_id,
        retryable=code not in PERMANENT_ERROR_CODES,
        error_code=code,
    )


def _describe(exc: ClientError | BotoCoreError) -> str:
    """``"<ErrorCode>: <message>"`` for a ClientError, the text of any other botocore error."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'Unknown')}: {error.get('Message', str(exc))}"
    return f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------------------------------
# Polling
# --------------------------------------------------------------------------------------------------
def wait_for_query(
    engine: QueryEngine,
    query_execution_id: str,
    *,
    deadline_ms: int,
    clock_ms: Callable[[], int],
    sleep_s: Callable[[float], None] = time.sleep,
    on_poll: Callable[[QueryExecution], object] | None = None,
    initial_delay_ms: int = 200,
    max_delay_ms: int = 5000,
    multiplier: float = 2.0,
) -> QueryExecution:
    """Poll ``engine.get_query`` with capped exponential backoff until the query reaches a terminal state.

    Polls at once, then after ``initial_delay_ms``, ``initial_delay_ms * multiplier``, ... each capped at
    ``max_delay_ms`` (200, 400, 800, 1600, 3200, 5000, 5000 ... ms by default). A sleep is cut short so that it
    ends at `deadline_ms`, never later; the poll at the deadline is the last one. The default pace stays far
    below Athena's Get* API quota (about 100 calls/s per account,
    https://docs.aws.amazon.com/athena/latest/ug/service-limits.html).

    Parameters
    ----------
    engine : QueryEngine
        Any engine (Athena or a local one).
    query_execution_id : str
        The query to wait for.
    deadline_ms : int
        Epoch milliseconds (on `clock_ms`) after which no more waiting happens.
    clock_ms : callable
        Returns the current epoch time in milliseconds.
    sleep_s : callable, optional
        Sleeps the given number of seconds (float), by default :func:`time.sleep`.
    on_poll : callable, optional
        Called with each polled :class:`QueryExecution`, terminal or not (the job heartbeats its lease here);
        what it raises propagates and stops the wait.
    initial_delay_ms, max_delay_ms : int, optional
        First and largest delay between polls, milliseconds (> 0, max >= initial).
    multiplier : float, optional
        Growth factor of the delay (>= 1).

    Returns
    -------
    QueryExecution
        The terminal execution. FAILED and CANCELLED are returned, not raised: call
        :meth:`QueryExecution.raise_for_state`.

    Raises
    ------
    QueryTimeoutError
        `deadline_ms` was reached while the query was still QUEUED/RUNNING; the query is left running so a
        later invocation can adopt it. ``waited_ms`` is measured from the call.
    QueryEngineError
        From ``engine.get_query`` (not retried here: botocore already retried).
    ValueError
        Invalid delay settings.
    """
    if initial_delay_ms <= 0 or max_delay_ms < initial_delay_ms or multiplier < 1:
        raise ValueError("need 0 < initial_delay_ms <= max_delay_ms and multiplier >= 1")
    started_ms = clock_ms()
    delay_ms = float(initial_delay_ms)
    while True:
        execution = engine.get_query(query_execution_id)
        if on_poll is not None:
            on_poll(execution)
        if execution.done:
            return execution
        now_ms = clock_ms()
        remaining_ms = deadline_ms - now_ms
        if remaining_ms <= 0:
            raise QueryTimeoutError(query_execution_id, execution.state, waited_ms=now_ms - started_ms)
        sleep_s(min(delay_ms, remaining_ms) / 1000.0)
        delay_ms = min(delay_ms * multiplier, float(max_delay_ms))
