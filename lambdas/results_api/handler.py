"""Lambda entry points of the read side (thin: the reader is built once per execution environment).

- ``api_handler``: API Gateway HTTP API (payload 2.0) events -> :func:`results_api.api.create_app`'s resolver;
- ``widget_handler``: CloudWatch custom widget events -> :func:`results_api.widget.widget_response` (HTML: one
  job's latest result for params ``{"job": <name>}``, every job's row for ``{"view": "overview"}``).

Both read ``LOCK_TABLE_NAME`` and ``RESULTS_TABLE_NAME`` and the job catalog bundled in the asset.
"""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from .api import create_app
from .reader import ResultsReader
from .widget import widget_response

logger = Logger()
_reader: ResultsReader | None = None
_app: APIGatewayHttpResolver | None = None


def _get_reader() -> ResultsReader:
    global _reader
    if _reader is None:
        _reader = ResultsReader.from_env()
    return _reader


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
def api_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    global _app
    if _app is None:
        _app = create_app(_get_reader())
    response: dict[str, Any] = _app.resolve(event, context)
    return response


@logger.inject_lambda_context
def widget_handler(event: dict[str, Any], context: LambdaContext) -> str:
    return widget_response(event, _get_reader(), now_ms=time.time_ns() // 1_000_000)
