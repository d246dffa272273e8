"""The runtime's Powertools objects, one each per execution environment: the JSON ``logger``, the EMF ``metrics``
(namespace :data:`contract.METRICS_NAMESPACE`, dimension service; the job's dimension is set by the service) and the
X-Ray ``tracer``. The handler's decorators (:mod:`athena_refresh.handler`) wrap every invocation with them.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

from . import contract

logger = Logger(service=contract.SERVICE_NAME)
metrics = Metrics(namespace=contract.METRICS_NAMESPACE, service=contract.SERVICE_NAME)
tracer = Tracer(service=contract.SERVICE_NAME)

__all__ = ["logger", "metrics", "tracer"]
