"""Athena query engine: start a query idempotently, poll it, read its typed results.

The contract is ``docs/engine-interface.md``. This package ships in the Lambda asset, so it imports only the
standard library, boto3/botocore and :mod:`athena_refresh.errors`. Its modules: ``model`` (value objects and
the ``QueryEngine`` protocol), ``tokens`` (ClientRequestToken, start checks), ``conversion`` (typed values),
``athena`` (``AthenaQueryEngine``), ``polling`` (``wait_for_query``); everything public is re-exported here.

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

from .athena import DEFAULT_CLIENT_CONFIG, PERMANENT_ERROR_CODES, AthenaQueryEngine
from .conversion import convert_value
from .model import (
    MAX_RESULTS_PER_PAGE,
    TERMINAL_STATES,
    Column,
    QueryEngine,
    QueryError,
    QueryExecution,
    QueryResult,
    QueryState,
    QueryStatistics,
)
from .polling import wait_for_query
from .tokens import QUERY_EXECUTION_ID, TOKEN_MAX_CHARS, TOKEN_MIN_CHARS, check_start_request, client_request_token

__all__ = [
    "DEFAULT_CLIENT_CONFIG",
    "MAX_RESULTS_PER_PAGE",
    "PERMANENT_ERROR_CODES",
    "QUERY_EXECUTION_ID",
    "TERMINAL_STATES",
    "TOKEN_MAX_CHARS",
    "TOKEN_MIN_CHARS",
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
