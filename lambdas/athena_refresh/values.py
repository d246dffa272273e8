"""The job's result values as CloudWatch metrics, so the dashboard shows the data the job computes.

After a slot's results are committed (never for a stale or lost run), each result row is published as
one EMF blob (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html)
in namespace :data:`contract.VALUES_NAMESPACE`:

- one metric per configured **value column** (``VALUE_METRIC_COLUMNS``): metric name = the column name,
  value = the row's number, unit ``None``;
- dimensions ``{"job": <job name>}`` plus ``{<dimension column>: str(row value)}`` for each configured
  **dimension column** (``VALUE_METRIC_DIMENSIONS``), and nothing else (no ``service``): the stack's
  dashboard graphs them with ``SEARCH('{ScheduledAthenaRefresh/Values,job,<dims...>} MetricName="<col>"')``,
  which matches this exact dimension set only.

Cost cap: every distinct combination of dimension values is a separate custom metric per value column,
and CloudWatch bills each one (https://aws.amazon.com/cloudwatch/pricing/). Only the first
``VALUE_METRIC_MAX_SERIES`` distinct combinations of a run (in result order: put an ``ORDER BY`` in the
SQL to choose which) are published; the number of combinations left out is returned
(:attr:`ValuesReport.series_dropped`), logged with a warning naming the first one left out, and carried by the
invocation's log line as ``value_series_dropped`` (no metric of its own: issue 23).

Values: ``int``, ``float`` and :class:`decimal.Decimal` are published; a ``decimal`` column's exact
text (how :mod:`athena_refresh.engine` returns decimals) is converted to a float. SQL NULL is skipped
silently; booleans, other strings and non-finite numbers (``NaN``/``Infinity``, which EMF cannot carry)
are skipped with a warning naming the column and the row. A NULL dimension value becomes ``"null"``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

from . import contract
from .engine import QueryResult

logger = logging.getLogger(__name__)

#: CloudWatch accepts EMF timestamps up to 14 days in the past; older slots are stamped with "now".
MAX_TIMESTAMP_AGE_MS = 14 * 24 * 3600 * 1000 - 3600 * 1000
#: CloudWatch dimension value length limit (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_Dimension.html).
MAX_DIMENSION_VALUE_LENGTH = 1024
NULL_DIMENSION_VALUE = "null"
VALUE_UNIT = "None"


@dataclasses.dataclass(frozen=True)
class ValuesReport:
    """What one :meth:`ValuePublisher.publish` did (also logged).

    ``series_published``: distinct dimension combinations published; ``series_dropped``: combinations
    beyond the cap; ``datapoints``: metric values published; ``values_skipped``: non-numeric values;
    ``missing_columns``: configured columns absent from the result.
    """

    series_published: int = 0
    series_dropped: int = 0
    datapoints: int = 0
    values_skipped: int = 0
    missing_columns: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The report as the log line's ``value_metrics`` field (``dataclasses.asdict``'s shape, built directly)."""
        return {
            "series_published": self.series_published,
            "series_dropped": self.series_dropped,
            "datapoints": self.datapoints,
            "values_skipped": self.values_skipped,
            "missing_columns": self.missing_columns,
        }


class ValuePublisher:
    """Publishes configured result columns as metrics (see the module docstring for the shape).

    Parameters
    ----------
    job_name:
        The ``job`` dimension of every value metric.
    value_columns:
        Result columns whose numeric values become metrics (metric name = column name); non-empty.
    dimension_columns:
        Result columns whose values become dimensions (may be empty: one series per value column).
    max_series:
        Cap on distinct dimension combinations per run (each is a billed custom metric per value column).
    emit:
        Where one serialized EMF blob goes (default: Powertools prints it to stdout, which Lambda sends
        to CloudWatch Logs, which extracts the metrics). Called once per blob with the provider holding
        that blob only; the provider is emptied and reused for the next blob, so serialize or flush it in the call.
    """

    def __init__(
        self,
        *,
        job_name: str,
        value_columns: Sequence[str],
        dimension_columns: Sequence[str] = (),
        max_series: int = 10,
        emit: Callable[[AmazonCloudWatchEMFProvider], None] | None = None,
    ) -> None:
        if not value_columns:
            raise ValueError("value_columns must name at least one column")
        if max_series < 1:
            raise ValueError(f"max_series must be at least 1, got {max_series}")
        overlap = set(value_columns) & set(dimension_columns)
        if overlap:
            raise ValueError(f"columns {sorted(overlap)} cannot be both value and dimension columns")
        self.job_name = job_name
        self.value_columns = tuple(value_columns)
        self.dimension_columns = tuple(dimension_columns)
        self.max_series = max_series
        self._emit = emit or _flush

    @classmethod
    def from_settings(cls, settings: Any) -> ValuePublisher | None:
        """The publisher configured by :class:`~athena_refresh.settings.Settings`, or ``None`` when no
        value column is configured (``VALUE_METRIC_COLUMNS`` unset)."""
        if not settings.value_metric_columns:
            return None
        return cls(
            job_name=settings.job_name,
            value_columns=settings.value_metric_columns,
            dimension_columns=settings.value_metric_dimensions,
            max_series=settings.value_metric_max_series,
        )

    def publish(
        self, result: QueryResult, *, slot_epoch_ms: int | None = None, now_ms: int | None = None
    ) -> ValuesReport:
        """Publish ``result``'s configured columns; call it only after the slot's commit succeeded.

        ``slot_epoch_ms`` (the slot's scheduled time) stamps the datapoints, so each slot's values land
        at its own time; a slot older than CloudWatch accepts (about 14 days) is stamped ``now_ms``.

        Returns a :class:`ValuesReport`. Raises only on programming errors; the job catches even those,
        because the slot is already committed.
        """
        present = {column.name for column in result.columns}
        missing = tuple(c for c in (*self.value_columns, *self.dimension_columns) if c not in present)
        for column in missing:
            kind = "dimension" if column in self.dimension_columns else "value"
            logger.warning(
                "value metrics: configured %s column %r is not in the query result (columns: %s)",
                kind,
                column,
                ", ".join(sorted(present)) or "none",
            )
        if any(c in self.dimension_columns for c in missing):
            # Filling a missing dimension with "null" would put every row into one wrong series.
            logger.error("value metrics: not published for this run: a configured dimension column is missing")
            return ValuesReport(missing_columns=missing)
        decimal_columns = {c.name for c in result.columns if c.type.split("(")[0].strip().lower() == "decimal"}
        value_columns = [c for c in self.value_columns if c in present]
        timestamp_ms = _timestamp(slot_epoch_ms, now_ms)

        seen: set[tuple[str, ...]] = set()
        dropped: set[tuple[str, ...]] = set()
        datapoints = skipped = 0
        provider: AmazonCloudWatchEMFProvider | None = None  # one for the run's blobs, emptied between them
        for index, row in enumerate(result.rows):
            dimensions = self._dimensions(row, index)
            if dimensions is None:
                skipped += 1
                continue
            key = tuple(dimensions.values())
            if key not in seen:
                if len(seen) >= self.max_series:
                    dropped.add(key)
                    continue
                seen.add(key)
            values: dict[str, float] = {}
            for column in value_columns:
                number = _number(row.get(column), column, index, dimensions, decimal_columns)
                if isinstance(number, _Skipped):
                    skipped += 1
                elif number is not None:
                    values[column] = number
            if not values:
                continue
            if provider is None:
                provider = AmazonCloudWatchEMFProvider(
                    namespace=contract.VALUES_NAMESPACE,
                    # "" (not None): never pick up POWERTOOLS_SERVICE_NAME, whose "service" dimension would
                    # put the values outside the dashboard's SEARCH schema {namespace,job,<dims>}.
                    service="",
                )
                if timestamp_ms is not None:
                    provider.set_timestamp(timestamp_ms)  # kept by the provider from blob to blob
            elif provider.metric_set or provider.dimension_set:  # an ``emit`` that did not flush (Powertools' does)
                provider.clear_metrics()
            for name, text in {contract.DIMENSION_JOB: self.job_name, **dimensions}.items():
                provider.add_dimension(name=name, value=text)
            for name, value in values.items():
                provider.add_metric(name=name, unit=VALUE_UNIT, value=value)
            self._emit(provider)
            datapoints += len(values)
        if dropped:
            logger.warning(
                "value metrics: %d dimension combination(s) beyond %s=%d not published (first dropped: %s)",
                len(dropped),
                contract.ENV_VALUE_METRIC_MAX_SERIES,
                self.max_series,
                dict(zip(self.dimension_columns, min(dropped))),
            )
        report = ValuesReport(len(seen), len(dropped), datapoints, skipped, missing)
        logger.info("value metrics published", extra={"value_metrics": report.as_dict()})
        return report

    def _dimensions(self, row: Mapping[str, Any], index: int) -> dict[str, str] | None:
        dimensions: dict[str, str] = {}
        for column in self.dimension_columns:
            raw = row.get(column)
            text = NULL_DIMENSION_VALUE if raw is None else str(raw)
            if not text.strip() or len(text) > MAX_DIMENSION_VALUE_LENGTH:
                logger.warning(
                    "value metrics: row %d skipped: dimension column %r has a value CloudWatch rejects"
                    " (blank or longer than %d characters): %r",
                    index,
                    column,
                    MAX_DIMENSION_VALUE_LENGTH,
                    text[:80],
                )
                return None
            dimensions[column] = text
        return dimensions


class _Skipped:
    """Marker: a value that is present but cannot be published (already logged)."""


_SKIPPED = _Skipped()


def _number(
    value: Any, column: str, index: int, dimensions: Mapping[str, str], decimal_columns: set[str]
) -> float | None | _Skipped:
    if value is None:
        return None
    number: float | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, (int, float, decimal.Decimal)):
        number = float(value)
    elif isinstance(value, str) and column in decimal_columns:
        try:
            number = float(decimal.Decimal(value))
        except decimal.InvalidOperation:
            number = None
    if number is None or not math.isfinite(number):
        logger.warning(
            "value metrics: column %r row %d %s: %r is not a finite number; skipped",
            column,
            index,
            dict(dimensions),
            value,
        )
        return _SKIPPED
    return number


def _timestamp(slot_epoch_ms: int | None, now_ms: int | None) -> int | None:
    if slot_epoch_ms is None:
        return now_ms
    now = now_ms if now_ms is not None else int(dt.datetime.now(dt.UTC).timestamp() * 1000)
    return slot_epoch_ms if now - slot_epoch_ms <= MAX_TIMESTAMP_AGE_MS else now


def _flush(provider: AmazonCloudWatchEMFProvider) -> None:
    # Powertools prints the blob (honouring POWERTOOLS_METRICS_DISABLED) and validates it first.
    provider.flush_metrics(raise_on_empty_metrics=True)
