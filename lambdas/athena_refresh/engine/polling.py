"""Polling a query until it ends, with capped exponential backoff, within a deadline."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from athena_refresh.errors import QueryTimeoutError

from .model import QueryEngine, QueryExecution

logger = logging.getLogger(__name__)


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
