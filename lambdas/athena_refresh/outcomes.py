"""What an invocation's outcome emits: its few metrics (:func:`emit_outcome_metrics`), the fields of its one log line
(:func:`outcome_log_fields`), and the report of an outcome that ends in no :class:`slotlock.SlotOutcome` of the
runner (a tampered stored item: :func:`corrupt_outcome`; an item of a newer table layout:
:func:`unsupported_layout_outcome`).

Observability (issue 23: each metric name + dimension set is a billed custom metric): every invocation writes one
structured log line, ``"slot <iso>: <outcome>"``, carrying its facts (:func:`outcome_log_fields`); the metrics are
only :data:`contract.JOB_METRICS` (the ``metrics`` singleton, dimensions service + job, flushed by the handler's
``log_metrics``) and :data:`contract.DEPLOYMENT_METRICS` (one ``single_metric`` blob each, dimension service only,
printed when it happens). :func:`emit_outcome_metrics` decides which an outcome emits.
"""

from __future__ import annotations

from typing import Any, Literal

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from slotlock import CommitConflictError, CorruptLockItemError, Slot, SlotOutcome, UnsupportedSchemaVersionError

from . import contract
from .errors import CorruptResultsItemError
from .observability import logger, metrics
from .report import SlotReport
from .results import ResultsStore
from .stored import result_sort_key

#: The per-job metrics' units (contract.JOB_METRICS); the deployment-wide counts are Count.
_UNITS = {
    "Milliseconds": MetricUnit.Milliseconds,
    "Bytes": MetricUnit.Bytes,
    "Seconds": MetricUnit.Seconds,
}


def _job_metric(name: str, value: float, unit: str) -> None:
    """A per-job metric (:data:`contract.JOB_METRICS`): the invocation's blob, dimensions service + job."""
    metrics.add_metric(name=name, unit=_UNITS[unit], value=value)


def _deployment_metric(name: str, value: float = 1, unit: MetricUnit = MetricUnit.Count) -> None:
    """A deployment-wide measurement or count (:data:`contract.DEPLOYMENT_METRICS`; by default a count of 1), in a
    blob of its own printed now, with the ``service`` dimension only: one custom metric for all jobs (the log line
    names the job). Powertools' ``single_metric`` is its way to give one metric other dimensions than the
    ``Metrics`` singleton's."""
    with single_metric(
        name=name,
        unit=unit,
        value=value,
        namespace=contract.METRICS_NAMESPACE,
        default_dimensions={contract.DIMENSION_SERVICE: contract.SERVICE_NAME},
    ):
        pass


def emit_outcome_metrics(outcome: SlotOutcome, report: SlotReport, now_ms: int, *, per_job_metrics: bool) -> None:
    """The outcome's metrics, and nothing else (issue 23; everything else is a field of its log line).

    Per job (dimensions service + job), only when the job opted in (``per_job_metrics = true``, issue 35: each is a
    billed custom metric; the same facts are fields of the log line, ``estimated_cost_usd`` too): every invocation of the live schedule reports the age of the last successful
    run, ``LastSuccessAgeS`` (seconds): the winner just succeeded (0) or read it from the lock item; a loser got it
    from ALL_OLD at no extra request. A manual generation (2+) does not: a backfill must not hide that the live
    schedule stopped succeeding. The invocation that committed the slot's results reports its query's
    ``DataScannedBytes`` and ``QueryDurationMs`` (once per committed slot: a stale or lost holder commits nothing).

    Deployment-wide (dimension service only), only when it happens: ``ThresholdExceeded`` when the committed slot
    went above one of its job's ``[alarms]`` thresholds (or both: one count), ``StaleWriteRejected`` for a commit
    refused as stale. (``CorruptLockItem``: :func:`corrupt_outcome`.) The capacity semaphore's ``PermitsInUse`` and
    ``PermitWaitMs`` (dimension service only: statistics across every job, p50/p95 on the dashboard) when this
    invocation took a permit: once per permit taken, never per job.
    """
    last_success_ms = now_ms if outcome.status == "succeeded" else outcome.last_succeeded_at_ms
    if per_job_metrics and isinstance(last_success_ms, int) and outcome.generation == 1:
        _job_metric(contract.METRIC_LAST_SUCCESS_AGE_S, max(0, now_ms - last_success_ms) / 1000, "Seconds")
    if report.committed and report.data_scanned_bytes is not None and report.query_duration_ms is not None:
        if per_job_metrics:
            _job_metric(contract.METRIC_DATA_SCANNED_BYTES, report.data_scanned_bytes, "Bytes")
            _job_metric(contract.METRIC_QUERY_DURATION_MS, report.query_duration_ms, "Milliseconds")
        if report.thresholds:
            _deployment_metric(contract.METRIC_THRESHOLD_EXCEEDED)
    if outcome.status == "stale_rejected":
        _deployment_metric(contract.METRIC_STALE_WRITE_REJECTED)
    if report.permits_in_use is not None:  # this invocation took a permit: the semaphore's two measurements
        _deployment_metric(contract.METRIC_PERMITS_IN_USE, report.permits_in_use, MetricUnit.Count)
        _deployment_metric(contract.METRIC_PERMIT_WAIT_MS, report.permit_wait_ms or 0, MetricUnit.Milliseconds)


def outcome_log_fields(outcome: SlotOutcome, report: SlotReport) -> dict[str, Any]:
    """The fields of the invocation's log line beyond the keys every line carries (job, slot, owner, generation,
    and once known fencing_token and query_execution_id): the outcome, its reason, and the facts that used to be
    metrics (:data:`contract.LOG_ONLY_FIELDS`). ``None`` values are left out of the line by the logger."""
    acquired = outcome.fencing_token is not None and outcome.status != "lost"  # a holder's MISSED has a token
    missed = outcome.status == "missed"
    return {
        contract.LOG_FIELD_OUTCOME: outcome.status,
        contract.LOG_FIELD_REASON: outcome.reason,
        contract.LOG_FIELD_FENCING_TOKEN: outcome.fencing_token,
        contract.LOG_FIELD_LEASE_ACQUIRED: acquired,
        contract.LOG_FIELD_TAKEOVER: acquired and outcome.takeover,
        **report.log_fields(),
        contract.LOG_FIELD_MISSED_SLOT: outcome.slot if missed else None,
        contract.LOG_FIELD_MISSED_REASON: outcome.reason if missed else None,
    }


def unsupported_layout_outcome(
    error: UnsupportedSchemaVersionError, job_name: str, slot: Slot, owner_id: str, report: SlotReport, generation: int
) -> dict[str, Any]:
    """Report an item of a table layout this slotlock does not read: ERROR log naming the item and the versions
    (outcome ``unsupported_schema``), status ``unsupported_schema`` (no raise: a Lambda retry would meet the same
    item). Not a corrupt item (no ``CorruptLockItem`` count): the item is intact, this function is too old for it."""
    details = {
        "item_key": error.key,
        "schema_version_found": error.found if isinstance(error.found, (int, float, str)) else repr(error.found),
        "schema_version_supported": list(error.supported),
        "error": str(error),
        "error_type": type(error).__name__,
    }
    message = f"slot {slot.iso}: unsupported_schema (table layout), not retried: {error}"
    return _not_retried(
        "unsupported_schema", "schema_version", message, details, job_name, slot, owner_id, report, generation
    )


def corrupt_outcome(
    error: CorruptLockItemError | CommitConflictError,
    results: ResultsStore,
    job_name: str,
    slot: Slot,
    owner_id: str,
    report: SlotReport,
    generation: int = 1,
) -> dict[str, Any]:
    """Report a tampered stored item: ERROR log (outcome ``corrupt`` and the report's fields), the deployment-wide
    ``CorruptLockItem`` count, status ``corrupt`` (no raise)."""
    corrupt: CorruptLockItemError | CorruptResultsItemError
    if isinstance(error, CommitConflictError):  # our only commit writes are the results store's
        corrupt = results.conflict_error(
            error.index,
            error.item,
            job_name=job_name,
            slot_iso=result_sort_key(slot.iso, generation),
            fencing_token=error.fencing_token,
            code=error.code,
        )
        corrupt.__cause__ = error
    else:
        corrupt = error
    _deployment_metric(contract.METRIC_CORRUPT_LOCK_ITEM)
    details = {
        "item_key": corrupt.key,
        "attribute": corrupt.attribute,
        "error": str(corrupt),
        "error_type": type(corrupt).__name__,
    }
    message = f"slot {slot.iso}: corrupt stored item, not retried: {corrupt}"
    return _not_retried("corrupt", "corrupt_item", message, details, job_name, slot, owner_id, report, generation)


def _not_retried(
    status: Literal["corrupt", "unsupported_schema"],
    reason: str,
    message: str,
    details: dict[str, Any],
    job_name: str,
    slot: Slot,
    owner_id: str,
    report: SlotReport,
    generation: int,
) -> dict[str, Any]:
    """The ERROR line (outcome ``status``, ``details`` and the report's fields) and the returned outcome (status
    ``status``, ``reason``, ``details``) of an invocation that ends without the runner's outcome and is not retried."""
    # stacklevel 3: the line's location names the caller (corrupt_outcome, unsupported_layout_outcome)
    logger.error(message, stacklevel=3, extra={contract.LOG_FIELD_OUTCOME: status, **details, **report.log_fields()})
    outcome = SlotOutcome(status, job_name, slot.iso, owner_id, reason=reason, details=details, generation=generation)
    return {**outcome.as_dict(), "queries_started": report.queries_started}


__all__ = ["corrupt_outcome", "emit_outcome_metrics", "outcome_log_fields", "unsupported_layout_outcome"]
