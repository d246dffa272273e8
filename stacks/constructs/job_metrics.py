"""The runtime's CloudWatch metrics as the stack reads them, for the dashboard and the alarms.

Names, namespaces and dimensions come from ``athena_refresh.contract`` only. Per-job metrics
(``contract.JOB_METRICS``) carry the dimensions ``service`` (Powertools' service name) and ``job``;
deployment-wide counts (``contract.DEPLOYMENT_METRICS``) carry ``service`` only: one series for every job, the
invocation's log line naming the job. Result values (:func:`value_search_expression`) live in
``contract.VALUES_NAMESPACE`` with the dimensions ``job`` + the configured dimension columns, whose values are not
known at synth: they are found with a SEARCH expression.
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/search-expression-syntax.html
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch

from athena_refresh import contract


def job_dimensions(job_name: str) -> dict[str, str]:
    return {contract.DIMENSION_SERVICE: contract.SERVICE_NAME, contract.DIMENSION_JOB: job_name}


def job_metric(
    job_name: str, metric_name: str, *, statistic: str, period: cdk.Duration, label: str | None = None
) -> cloudwatch.Metric:
    """One per-job metric of ``job_name``. :raises ValueError: not in ``contract.JOB_METRICS``."""
    if metric_name not in contract.JOB_METRICS:
        raise ValueError(f"{metric_name!r} is not a per-job metric (athena_refresh.contract.JOB_METRICS)")
    return cloudwatch.Metric(
        namespace=contract.METRICS_NAMESPACE,
        metric_name=metric_name,
        dimensions_map=job_dimensions(job_name),
        statistic=statistic,
        period=period,
        label=label,
    )


def deployment_metric(
    metric_name: str,
    *,
    statistic: str,
    period: cdk.Duration,
    label: str | None = None,
    names: Sequence[str] = contract.DEPLOYMENT_METRICS,
) -> cloudwatch.Metric:
    """A deployment-wide metric: dimension ``service`` only (no ``job``), one series for the whole deployment, in
    the runtime's namespace. ``names``: the metrics it may be, by who emits them: the job runtime's counts and
    capacity metrics (``contract.DEPLOYMENT_METRICS``, the default; the structured log line of the invocation that
    emitted one names the job) or the freshness watchdog's (``contract.WATCHDOG_METRICS``).

    :raises ValueError: ``metric_name`` is not in ``names``.
    """
    if metric_name not in names:
        raise ValueError(
            f"{metric_name!r} is not a deployment-wide metric of {', '.join(names)} (athena_refresh.contract)"
        )
    return cloudwatch.Metric(
        namespace=contract.METRICS_NAMESPACE,
        metric_name=metric_name,
        dimensions_map={contract.DIMENSION_SERVICE: contract.SERVICE_NAME},
        statistic=statistic,
        period=period,
        label=label,
    )


def _quoted(text: str) -> str:
    """A SEARCH term in double quotes (job names, column names and the namespace have no quotes)."""
    if '"' in text or "'" in text:
        raise ValueError(f"cannot quote {text!r} in a SEARCH expression")
    return f'"{text}"'


def value_search_expression(
    job_name: str, column: str, dimensions: Sequence[str], *, statistic: str, period: cdk.Duration
) -> str:
    """``SEARCH('{<values namespace>,job,<dims...>} MetricName="<column>" job="<job>"', stat, period)``:
    every series of one value column, one line per combination of dimension values (docs/observability.md shows
    it for graphing a job's values in the console)."""
    # Namespace and dimension names are plain (letters, digits, "_", "/"): no quoting needed in the schema.
    schema = ",".join((contract.VALUES_NAMESPACE, contract.DIMENSION_JOB, *dimensions))
    query = f"{{{schema}}} MetricName={_quoted(column)} {contract.DIMENSION_JOB}={_quoted(job_name)}"
    return f"SEARCH('{query}', '{statistic}', {int(period.to_seconds())})"
