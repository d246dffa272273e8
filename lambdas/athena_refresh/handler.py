"""Lambda entry point: Powertools decorators and one call (see :func:`athena_refresh.service.handle`).

The imports below are nearly all of the INIT phase; their duration goes to the first invocation's cost estimate.
"""

from __future__ import annotations

import time

_IMPORT_STARTED_S = time.monotonic()

from collections.abc import Callable
from typing import Any

from athena_refresh.service import Deps, DepsSource, handle, invocation_deps, logger, metrics, record_init_ms, tracer

record_init_ms((time.monotonic() - _IMPORT_STARTED_S) * 1000)

LambdaHandler = Callable[[Any, Any], dict[str, Any]]


def make_handler(deps: DepsSource) -> LambdaHandler:
    """The Lambda handler ``(event, context) -> outcome dict`` running with ``deps``, under the deployed Powertools
    decorators (log context and keys, the EMF flush, tracing): how tests and outside tools run one real invocation.

    ``deps`` is a :class:`athena_refresh.service.Deps` (the lock, the query engine, the results store, the
    capacity semaphore or none, the capacity deferral, the sleep while waiting for a permit, the checkpoint
    listener, and the clock, which is the lock's), used by every invocation with its own settings; or a builder
    ``settings -> Deps`` (the deployed one is :meth:`Deps.from_settings`): then each invocation reads its settings
    from the environment and the deps are built once per settings and reused by warm invocations, as in a Lambda
    execution environment. For example, on the local engine::

        handler = make_handler(lambda settings: Deps.from_settings(settings, engine=DuckDBQueryEngine(...)))
        outcome = handler({"scheduled_time": "2026-11-24T20:30:00Z"}, context)

    The handler raises what :func:`athena_refresh.service.handle` raises (``ConfigurationError`` for a bad
    environment, ``InvalidEventError``, the transient errors Lambda retries).
    """
    resolve = invocation_deps(deps)

    @logger.inject_lambda_context(clear_state=True)
    # No ColdStart metric: it would be one more custom metric per job function (dimension function_name); the log
    # lines carry Powertools' cold_start key instead.
    @metrics.log_metrics
    @tracer.capture_lambda_handler(capture_response=False)
    def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        """Invoked by each racer's EventBridge schedule; returns the slot outcome (never raises on a lost race)."""
        return handle(event, context, resolve)

    return lambda_handler


#: The deployed handler: its deps built from the environment's settings, once per execution environment.
lambda_handler = make_handler(Deps.from_settings)

__all__ = ["LambdaHandler", "lambda_handler", "make_handler"]
