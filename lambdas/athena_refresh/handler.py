"""Lambda entry point: Powertools decorators and one call (see :func:`athena_refresh.service.handle`).

The imports below are nearly all of the INIT phase; their duration goes to the first invocation's cost estimate.
"""

from __future__ import annotations

import time

_IMPORT_STARTED_S = time.monotonic()

from typing import Any

from athena_refresh.service import handle, logger, metrics, record_init_ms, tracer

record_init_ms((time.monotonic() - _IMPORT_STARTED_S) * 1000)


@logger.inject_lambda_context(clear_state=True)
# No ColdStart metric: it would be one more custom metric per job function (dimension function_name); the log
# lines carry Powertools' cold_start key instead.
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Invoked by each racer's EventBridge schedule; returns the slot outcome (never raises on a lost race)."""
    return handle(event, context)
