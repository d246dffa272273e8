"""What one invocation did for its slot besides its outcome: the fields of its log line, the values of its metrics.

Issue 23: every metric name and dimension set is a billed CloudWatch custom metric, so a fact nobody alarms on is
a field of the invocation's one structured log line ("slot <iso>: <outcome>", :mod:`athena_refresh.outcomes`), not
a metric. The job (:class:`~athena_refresh.job.AthenaRefreshJob`) fills a :class:`SlotReport` as it goes; the
service turns it into the log line's fields (:meth:`SlotReport.log_fields`) and into the few metrics of
:data:`contract.ALL_METRICS` (the measurements only once the slot's results are committed).

Standard library only (no Powertools): the job and the local tools use it without the Lambda runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import contract


@dataclass(frozen=True)
class ThresholdExceeded:
    """One of the job's ``[alarms]`` thresholds that a committed slot went above.

    ``metric``: the measurement's metric name (``DataScannedBytes`` or ``QueryDurationMs``); ``setting``: the job
    setting holding the threshold (``ALARM_DATA_SCANNED_BYTES`` or ``ALARM_QUERY_DURATION_MS``); ``value`` and
    ``threshold`` in the metric's unit (bytes, milliseconds).
    """

    metric: str
    setting: str
    value: int
    threshold: int


def thresholds_exceeded(
    *,
    data_scanned_bytes: int,
    query_duration_ms: int,
    max_data_scanned_bytes: int | None,
    max_query_duration_ms: int | None,
) -> tuple[ThresholdExceeded, ...]:
    """The thresholds the measurements are above (strictly, as the alarms compare), in metric order; ``None``
    thresholds are off."""
    checks = (
        (
            contract.METRIC_DATA_SCANNED_BYTES,
            contract.ENV_ALARM_DATA_SCANNED_BYTES,
            data_scanned_bytes,
            max_data_scanned_bytes,
        ),
        (
            contract.METRIC_QUERY_DURATION_MS,
            contract.ENV_ALARM_QUERY_DURATION_MS,
            query_duration_ms,
            max_query_duration_ms,
        ),
    )
    return tuple(
        ThresholdExceeded(metric, setting, value, threshold)
        for metric, setting, value, threshold in checks
        if threshold is not None and value > threshold
    )


@dataclass
class SlotReport:
    """What the job did for its slot in this invocation (filled as it goes; the defaults: nothing yet).

    ``query_adopted``: it adopted the query a predecessor (dead holder, or its own earlier attempt) recorded;
    ``queries_started``: queries it started; ``data_scanned_bytes``/``query_duration_ms``: the slot's query
    statistics once it SUCCEEDED (``None`` before); ``committed``: this invocation committed the slot's results
    (the fenced commit succeeded: a stale or lost holder never sets it); ``rows_stored``, ``estimated_cost_usd``
    (``None``: no estimate), ``value_series_dropped`` (``None``: value metrics off or not published):
    set with the commit; ``thresholds``: the ``[alarms]`` thresholds the committed slot went above.

    The capacity budget (issue 24; :mod:`athena_refresh.permits`): ``permit`` how this invocation holds the slot's
    permit (``free``, ``reclaimed``, ``inherited``, ``held``; ``None``: none, or the budget is off);
    ``permits_in_use`` the permits held just after it took one (``None``: it took none); ``permit_wait_ms`` how long
    the slot has waited for its permit, deferrals included (``None``: it did not wait for one here);
    ``capacity_deferrals`` times the slot was given back for capacity so far; ``permit_queries_unreadable`` times
    the reclaim check could not read an expired permit's query (:mod:`athena_refresh.reclaim`: not reclaimable now).
    """

    query_adopted: bool = False
    queries_started: int = 0
    data_scanned_bytes: int | None = None
    query_duration_ms: int | None = None
    committed: bool = False
    rows_stored: int | None = None
    estimated_cost_usd: float | None = None
    value_series_dropped: int | None = None
    thresholds: tuple[ThresholdExceeded, ...] = ()
    permit: str | None = None
    permits_in_use: int | None = None
    permit_wait_ms: int | None = None
    capacity_deferrals: int = 0
    permit_queries_unreadable: int = 0

    def log_fields(self) -> dict[str, Any]:
        """The report's fields of the invocation's log line (:data:`contract.LOG_ONLY_FIELDS` names); a value not
        known is ``None``, which the Powertools logger leaves out of the line."""
        return {
            contract.LOG_FIELD_QUERY_ADOPTED: self.query_adopted,
            contract.LOG_FIELD_QUERIES_STARTED: self.queries_started,
            contract.LOG_FIELD_DATA_SCANNED_BYTES: self.data_scanned_bytes,
            contract.LOG_FIELD_QUERY_DURATION_MS: self.query_duration_ms,
            contract.LOG_FIELD_ROWS_STORED: self.rows_stored,
            contract.LOG_FIELD_ESTIMATED_COST_USD: self.estimated_cost_usd,
            contract.LOG_FIELD_VALUE_SERIES_DROPPED: self.value_series_dropped,
            contract.LOG_FIELD_THRESHOLD_EXCEEDED: ",".join(t.metric for t in self.thresholds) or None,
            contract.LOG_FIELD_PERMIT: self.permit,
            contract.LOG_FIELD_PERMIT_WAIT_MS: self.permit_wait_ms,
            contract.LOG_FIELD_CAPACITY_DEFERRALS: self.capacity_deferrals or None,
            contract.LOG_FIELD_PERMIT_QUERIES_UNREADABLE: self.permit_queries_unreadable or None,
        }
