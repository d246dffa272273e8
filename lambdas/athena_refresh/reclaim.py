"""The reclaim check of the capacity budget: may an expired permit that names a query be taken now?

The semaphore (``slotlock.Semaphore``, docs/protocol.md "Capacity semaphore") asks its caller's
``query_is_terminal(query id)`` about expired permits that name a query, only when the free permits do not suffice,
at most once per poll, and about one query at most once per ``query_recheck_s`` while the answer is "not terminal";
the job answers with one ``GetQueryExecution`` (:meth:`athena_refresh.engine.QueryEngine.get_query`).

That query may be one the caller cannot read: with a budget shared by several deployments (cdk.json
``capacity.table_name``), an expired permit of another deployment names a query in *that* deployment's workgroup,
and a job role may call ``GetQueryExecution`` only on the workgroups it is granted (its own, plus
``capacity.shared_workgroups``: docs/operations.md#capacity-budget), so Athena answers ``AccessDeniedException``.
Athena may also throttle the call past botocore's retries (``ThrottlingException``), or no longer know the id
(``InvalidRequestException``). None of these says the query ended, and none is the waiting slot's failure: the
permit is **not reclaimable now**. :class:`ReclaimCheck` answers ``False``, logs one WARNING naming the query, the
error code and that the permit stays counted, and counts it on the invocation's report
(:attr:`SlotReport.permit_queries_unreadable`, a field of the outcome line, not a metric). The semaphore keeps that
answer like any "still active" one (asking again after ``query_recheck_s``: throttling passes, a grant may be added),
so an unreadable query costs no more requests than a running one. The slot keeps waiting,
and past ``wait_in_place_s`` it is given back like any slot waiting for a permit (outcome ``deferred``): never a
FAILED record, never a Lambda error. The permit is reclaimed later by a caller that can read its query, or given back
by its own holder.

Only the engine's own error (:class:`~athena_refresh.errors.QueryEngineError`, which wraps every botocore error:
docs/engine-interface.md) and a botocore error that a non-conforming engine let through are answered so; anything
else (a ``TypeError``, a ``KeyError``) is a programming error and propagates.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from botocore.exceptions import BotoCoreError, ClientError

from .engine import QueryEngine
from .errors import QueryEngineError
from .report import SlotReport

logger = logging.getLogger(__name__)

#: The errors that mean "this query cannot be read now" (see the module doc); anything else propagates.
UNREADABLE_QUERY_ERRORS = (QueryEngineError, ClientError, BotoCoreError)


def error_code(error: BaseException) -> str:
    """The AWS error code of ``error`` (``AccessDeniedException``, ...), else the name of its type (a botocore
    connection error, or the engine's own check) and of the botocore error it wraps."""
    code = getattr(error, "error_code", None)
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code")
    if isinstance(code, str) and code:
        return code
    cause = error.__cause__
    return type(error).__name__ if cause is None else f"{type(error).__name__} ({type(cause).__name__})"


@dataclass
class ReclaimCheck:
    """``query_is_terminal`` of one invocation's :class:`~athena_refresh.permits.CapacityGate`: ``True`` when the
    expired permit's query ended (it may be reclaimed), ``False`` while it runs or when it cannot be read (see the
    module doc); never raises for an unreadable query. ``report``: the invocation's, counting the unreadable ones."""

    engine: QueryEngine
    report: SlotReport

    def __call__(self, query_execution_id: str) -> bool:
        try:
            return bool(self.engine.get_query(query_execution_id).done)
        except UNREADABLE_QUERY_ERRORS as error:
            code = error_code(error)
            self.report.permit_queries_unreadable += 1
            logger.warning(
                "capacity permit's query %s cannot be read (%s): not reclaimable now, the permit stays counted",
                query_execution_id,
                code,
                extra={"permit_query_execution_id": query_execution_id, "error_code": code, "error": str(error)},
            )
            return False


__all__ = ["UNREADABLE_QUERY_ERRORS", "ReclaimCheck", "error_code"]
