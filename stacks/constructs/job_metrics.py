"""The job's CloudWatch metrics as the runtime emits them, for the dashboard and the alarms.

Names, namespaces and dimensions come from ``athena_refresh.contract`` only. Operational metrics carry
the dimensions ``service`` (Powertools' service name) and ``job``, plus ``reason`` on the metrics listed
in :data:`REASONS_BY_METRIC`. Result values (:func:`value_search_expression`) live in
``contract.VALUES_NAMESPACE`` with the dimensions ``job`` + the configured dimension columns, whose
values are not known at synth: they are graphed with a SEARCH expression.
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/search-expression-syntax.html
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch

from athena_refresh import contract

# Metrics emitted with an extra "reason" dimension, and the values it takes (one line per value).
REASONS_BY_METRIC: dict[str, Sequence[str]] = {
    contract.METRIC_LOST_RACE: contract.LOSS_REASONS,
    contract.METRIC_SLOT_MISSED: contract.MISSED_REASONS,
}


def job_dimensions(job_name: str) -> dict[str, str]:
    return {contract.DIMENSION_SERVICE: contract.SERVICE_NAME, contract.DIMENSION_JOB: job_name}


def job_metric(
    job_name: str,
    metric_name: str,
    *,
    statistic: str,
    period: cdk.Duration,
    reason: str | None = None,
    label: str | None = None,
) -> cloudwatch.Metric:
    """One operational metric of the job (``reason``: the value of the reason dimension, if it has one)."""
    if metric_name not in contract.ALL_METRICS:
        raise ValueError(f"{metric_name!r} is not a metric of athena_refresh.contract.ALL_METRICS")
    dimensions = job_dimensions(job_name)
    if reason is not None:
        if reason not in REASONS_BY_METRIC.get(metric_name, ()):
            raise ValueError(f"{metric_name} has no reason {reason!r}")
        dimensions[contract.DIMENSION_REASON] = reason
    return cloudwatch.Metric(
        namespace=contract.METRICS_NAMESPACE,
        metric_name=metric_name,
        dimensions_map=dimensions,
        statistic=statistic,
        period=period,
        label=label,
    )


def deployment_metric(
    metric_name: str, *, statistic: str, period: cdk.Duration, label: str | None = None
) -> cloudwatch.Metric:
    """A deployment-wide metric: dimension ``service`` only (no ``job``): one series for every job of the
    deployment; the structured log line of the invocation that emitted it names the job."""
    return cloudwatch.Metric(
        namespace=contract.METRICS_NAMESPACE,
        metric_name=metric_name,
        dimensions_map={contract.DIMENSION_SERVICE: contract.SERVICE_NAME},
        statistic=statistic,
        period=period,
        label=label,
    )


def summed_over_reasons(
    job_name: str, metric_name: str, *, period: cdk.Duration, label: str
) -> cloudwatch.MathExpression:
    """Sum of a reason-dimensioned count over all its reasons (missing reasons count as 0)."""
    reasons = REASONS_BY_METRIC[metric_name]
    using = {
        f"r{index}": job_metric(job_name, metric_name, statistic="Sum", period=period, reason=reason)
        for index, reason in enumerate(reasons)
    }
    return cloudwatch.MathExpression(
        expression=" + ".join(f"FILL({name}, 0)" for name in using),
        using_metrics=using,
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
    every series of one value column, one line per combination of dimension values."""
    # Namespace and dimension names are plain (letters, digits, "_", "/"): no quoting needed in the schema.
    schema = ",".join((contract.VALUES_NAMESPACE, contract.DIMENSION_JOB, *dimensions))
    query = f"{{{schema}}} MetricName={_quoted(column)} {contract.DIMENSION_JOB}={_quoted(job_name)}"
    return f"SEARCH('{query}', '{statistic}', {int(period.to_seconds())})"
