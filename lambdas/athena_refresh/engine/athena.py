"""The Athena engine: start a query idempotently, read its state and its typed results (boto3)."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import boto3
import botocore.config
from botocore.exceptions import BotoCoreError, ClientError

from athena_refresh.errors import QueryEngineError, ResultTypeError

from .conversion import _convert_named
from .model import _ALL_STATES, MAX_RESULTS_PER_PAGE, Column, QueryError, QueryExecution, QueryResult, QueryStatistics
from .tokens import check_start_request

if TYPE_CHECKING:  # the stubs are a development aid only; they are not installed in the Lambda
    from mypy_boto3_athena.client import AthenaClient

logger = logging.getLogger(__name__)

#: botocore configuration of the default client: ``standard`` retries ThrottlingException and
#: TooManyRequestsException with exponential backoff and jitter. In a client Config, ``max_attempts``
#: counts RETRIES (botocore turns it into ``total_max_attempts`` = 6): one call plus up to 5 retries.
DEFAULT_CLIENT_CONFIG = botocore.config.Config(retries={"mode": "standard", "max_attempts": 5})


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
            # A copy: botocore rewrites a Config's ``retries`` dict in place when it builds a client (``max_attempts``
            # becomes ``total_max_attempts``, botocore/args.py ``_compute_retry_max_attempts``), which would change
            # this module's constant for every later reader.
            self._client = boto3.client("athena", config=copy.deepcopy(DEFAULT_CLIENT_CONFIG))
        return self._client

    # ---- StartQueryExecution ----------------------------------------------------------------------
    def start_request(self, *, sql: str, parameters: Sequence[str], client_request_token: str) -> dict[str, Any]:
        """The StartQueryExecution request :meth:`start_query` sends, as a dict of its fields (no I/O): what
        ``athena-once compile`` prints. Arguments and ``ValueError``/``TypeError`` as :meth:`start_query`."""
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
        return request

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
        request = self.start_request(sql=sql, parameters=parameters, client_request_token=client_request_token)
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
