"""Glue between the Lambda handler and the job: settings, cached clients, observability, outcome.

Kept out of ``handler.py`` so the handler stays a stack of Powertools decorators and one call.

Observability (issue 23: each metric name + dimension set is a billed custom metric): every invocation writes one
structured log line, ``"slot <iso>: <outcome>"``, carrying its facts (:func:`outcome_log_fields`); the metrics are
only :data:`contract.JOB_METRICS` (the ``metrics`` singleton, dimensions service + job, flushed by the handler's
``log_metrics``) and :data:`contract.DEPLOYMENT_METRICS` (one ``single_metric`` blob each, dimension service only,
printed when it happens). :func:`emit_outcome_metrics` decides which an outcome emits.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from botocore.config import Config

from slotlock import (
    CommitConflictError,
    CorruptLockItemError,
    InvalidEventError,
    Lease,
    Semaphore,
    Slot,
    SlotLock,
    SlotOutcome,
    SlotRunner,
    UnsupportedSchemaVersionError,
    system_clock_ms,
)
from slotlock.manual import ManualMarker
from slotlock.runner import CHECKPOINT_ACQUIRED, Listener

from . import contract
from .cost import InvocationCost, PriceTableError, load_prices
from .engine import AthenaQueryEngine, QueryEngine
from .errors import CorruptResultsItemError
from .job import AthenaRefreshJob
from .permits import CapacityGate, Deferral, SchedulerDeferral
from .reclaim import ReclaimCheck
from .report import SlotReport
from .results import ResultsStore
from .settings import Settings
from .stored import result_sort_key
from .values import ValuePublisher

logger = Logger(service=contract.SERVICE_NAME)
metrics = Metrics(namespace=contract.METRICS_NAMESPACE, service=contract.SERVICE_NAME)
tracer = Tracer(service=contract.SERVICE_NAME)
# Library loggers (stdlib logging) get the same JSON formatter, so they carry job/slot/owner/token keys.
copy_config_to_registered_loggers(source_logger=logger, include={"slotlock", "athena_refresh"})

EngineFactory = Callable[[Settings], QueryEngine]
DeferralFactory = Callable[[Settings, Any], Deferral | None]

#: The per-job metrics' units (contract.JOB_METRICS); the deployment-wide counts are Count.
_UNITS = {
    "Milliseconds": MetricUnit.Milliseconds,
    "Bytes": MetricUnit.Bytes,
    "Seconds": MetricUnit.Seconds,
}


def _athena_engine(settings: Settings) -> QueryEngine:
    return AthenaQueryEngine(
        workgroup=settings.athena_workgroup,
        database=settings.athena_database,
        catalog=settings.athena_catalog,
        result_reuse_max_age_min=settings.result_reuse_max_age_min,
    )


@dataclass(frozen=True)
class RuntimeSeams:
    """What a local runtime may replace, passed explicitly (:func:`use_seams`), never by rebinding names.

    ``engine_factory``: builds the query engine from the settings (Athena by default; the demo and the
    chaos suite use the DuckDB engine, the chaos suite wraps it with faults). ``lock_clock_ms``: the lock's
    clock (epoch ms; ``None``: the system clock; the chaos suite skews it). ``listener``: called with every
    checkpoint after the service's own handling (the demo and the chaos suite report checkpoints and
    inject kills and pauses there). ``deferral_factory``: builds the capacity deferral from the settings and the
    invocation's context (``None``: a one-time EventBridge Scheduler schedule when the stack configured one; the
    local harnesses re-invoke through their own Lambda service). ``capacity_sleep_s``: the sleep between polls of
    a slot waiting for a permit (``None``: ``time.sleep``).
    """

    engine_factory: EngineFactory = _athena_engine
    lock_clock_ms: Callable[[], int] | None = None
    listener: Listener | None = None
    deferral_factory: DeferralFactory | None = None
    capacity_sleep_s: Callable[[float], None] | None = None


_seams = RuntimeSeams()


def use_seams(seams: RuntimeSeams | None) -> None:
    """Install ``seams`` for the following invocations of this environment (``None``: the defaults).

    Dependencies built with the previous seams are dropped, so the next invocation builds new ones.
    """
    global _seams
    _seams = seams or RuntimeSeams()
    dependencies.cache_clear()


def seams() -> RuntimeSeams:
    """The seams in use (to extend them: ``use_seams(replace(seams(), ...))``)."""
    return _seams


def use_engine_factory(factory: EngineFactory | None) -> None:
    """Replace only the query engine (tests use fakes); ``None`` restores Athena."""
    use_seams(replace(_seams, engine_factory=factory or _athena_engine))


@dataclass(frozen=True)
class Dependencies:
    """Long-lived objects reused across warm invocations."""

    lock: SlotLock
    engine: QueryEngine
    results: ResultsStore
    semaphore: Semaphore | None = None  # the capacity budget's (None: off)


@functools.lru_cache(maxsize=4)
def dependencies(settings: Settings) -> Dependencies:
    """Build (once per settings, per execution environment) the lock, engine and results store."""
    lock = SlotLock(
        settings.lock_table_name,
        settings.job_name,
        lease_duration_s=settings.lease_duration_s,
        heartbeat_interval_s=settings.heartbeat_interval_s,
        max_slot_age_s=settings.max_slot_age_s,
        history_ttl_s=settings.history_ttl_s,
        max_slot_lead_s=settings.max_slot_lead_s,
        clock_ms=_seams.lock_clock_ms or system_clock_ms,
    )
    results = ResultsStore(settings.results_table_name, bucket_name=settings.results_bucket_name)
    capacity = settings.capacity
    semaphore = None
    if capacity.enabled:
        semaphore = Semaphore(
            capacity.table_name or settings.lock_table_name,
            capacity.semaphore_name,
            capacity.permits,
            client=lock.client,
            clock_ms=lock.clock_ms,
            deployment=settings.lock_table_name,  # owner ids name the deployment: a shared budget's jobs never mix
            max_query_active_s=capacity.max_query_active_s,
        )
    return Dependencies(lock=lock, engine=_seams.engine_factory(settings), results=results, semaphore=semaphore)


def _scheduler_deferral(settings: Settings, context: Any) -> Deferral | None:
    """The deployed deferral: a one-time Scheduler schedule invoking this very function (its ARN from the
    invocation's context), or ``None`` when the stack configured none."""
    capacity = settings.capacity
    function_arn = getattr(context, "invoked_function_arn", None)
    if capacity.deferral_role_arn is None or not isinstance(function_arn, str):
        return None
    return SchedulerDeferral(
        client=_scheduler_client(),
        function_arn=function_arn,
        role_arn=capacity.deferral_role_arn,
        group=capacity.deferral_schedule_group,
        prefix=capacity.deferral_schedule_prefix,
    )


@functools.lru_cache(maxsize=1)
def _scheduler_client() -> Any:
    return boto3.client("scheduler", config=Config(retries={"mode": "standard"}))


def _capacity_gate(
    settings: Settings, deps: Dependencies, event: Any, context: Any
) -> Callable[[SlotReport], CapacityGate] | None:
    """The job's capacity gate factory for this invocation (``None``: the budget is off). Its reclaim check never
    raises for a query it cannot read (:mod:`athena_refresh.reclaim`)."""
    semaphore = deps.semaphore
    if semaphore is None:
        return None
    deferral = (_seams.deferral_factory or _scheduler_deferral)(settings, context)
    max_age_s = settings.max_slot_age_s

    def gate(report: SlotReport) -> CapacityGate:
        return CapacityGate(
            semaphore=semaphore,
            settings=settings.capacity,
            event=dict(event) if isinstance(event, Mapping) else {},
            report=report,
            max_slot_age_ms=None if max_age_s is None else int(max_age_s * 1000),
            deferral=deferral,
            query_is_terminal=ReclaimCheck(deps.engine, report),  # an unreadable query: not reclaimable now
            sleep_s=_seams.capacity_sleep_s or time.sleep,
        )

    return gate


def _job_metric(name: str, value: float, unit: str) -> None:
    """A per-job metric (:data:`contract.JOB_METRICS`): the invocation's blob, dimensions service + job."""
    metrics.add_metric(name=name, unit=_UNITS[unit], value=value)


def _deployment_metric(name: str, value: float, unit: MetricUnit) -> None:
    """A deployment-wide measurement (:data:`contract.DEPLOYMENT_METRICS`), dimension service only, printed now."""
    with single_metric(
        name=name,
        unit=unit,
        value=value,
        namespace=contract.METRICS_NAMESPACE,
        default_dimensions={contract.DIMENSION_SERVICE: contract.SERVICE_NAME},
    ):
        pass


def _deployment_count(name: str) -> None:
    """A deployment-wide count (:data:`contract.DEPLOYMENT_METRICS`) of 1, in a blob of its own printed now, with
    the ``service`` dimension only: one custom metric for all jobs (the log line names the job). Powertools'
    ``single_metric`` is its way to give one metric other dimensions than the ``Metrics`` singleton's."""
    with single_metric(
        name=name,
        unit=MetricUnit.Count,
        value=1,
        namespace=contract.METRICS_NAMESPACE,
        default_dimensions={contract.DIMENSION_SERVICE: contract.SERVICE_NAME},
    ):
        pass


def _check_event_job(event: Any, job_name: str) -> None:
    """A Scheduler input names its job (``"job"``): an event for another job's function (a misrouted target)
    is refused before any request. A scheduled rule's event names none and is accepted.

    :raises InvalidEventError: ``field`` ``job``.
    """
    named = event.get("job") if isinstance(event, Mapping) else None
    if named is not None and named != job_name:
        raise InvalidEventError("job", f"names job {str(named)[:80]!r}, but this function runs job {job_name!r}")


def _on_checkpoint(checkpoint: str, lease: Lease) -> None:
    keys: dict[str, Any] = {"fencing_token": lease.fencing_token}
    if lease.state.get("query_execution_id"):
        keys["query_execution_id"] = lease.state["query_execution_id"]
    logger.append_keys(**keys)
    logger.info(f"checkpoint {checkpoint}", checkpoint=checkpoint, takeover=lease.takeover, reentered=lease.reentered)
    if checkpoint == CHECKPOINT_ACQUIRED and lease.superseded_slot is not None and lease.superseded_recorded:
        # Our acquisition recorded an older, unfinished slot (its holder died, or gave it back) as missed: said once (a
        # racer of it may have written the record first, and says so), at the acquisition, so counted if we fail later.
        missed_slot, missed_reason = lease.superseded_slot.iso, lease.superseded_reason or "superseded"
        logger.warning(
            f"slot {missed_slot} missed: superseded by {lease.slot.iso}"
            + ("" if missed_reason == "superseded" else f", given back for {missed_reason} (MISSED {missed_reason})"),
            extra={
                "superseded_slot": missed_slot,
                contract.LOG_FIELD_MISSED_SLOT: missed_slot,
                contract.LOG_FIELD_MISSED_REASON: missed_reason,
            },
        )


def _listener(extra: Listener | None, cost: InvocationCost | None = None) -> Listener:
    """The service's checkpoint handling (and the cost tracker's lock decision), then ``extra`` (a seam), for
    one invocation."""
    if extra is None and cost is None:
        return _on_checkpoint

    def both(checkpoint: str, lease: Lease) -> None:
        if cost is not None and checkpoint == CHECKPOINT_ACQUIRED:
            cost.lock_decided()
        _on_checkpoint(checkpoint, lease)
        if extra is not None:
            extra(checkpoint, lease)

    return both


_pending_init_ms = 0.0


def record_init_ms(init_ms: float) -> None:
    """The INIT phase's duration (ms), measured by the handler module around its imports: the first invocation
    of this environment pays for it (billed since 1 August 2025:
    https://aws.amazon.com/blogs/compute/aws-lambda-standardizes-billing-for-init-phase/)."""
    global _pending_init_ms
    _pending_init_ms = max(0.0, float(init_ms))


def _init_ms() -> float:
    """The INIT duration for the first invocation of this environment, then 0."""
    global _pending_init_ms
    init_ms, _pending_init_ms = _pending_init_ms, 0.0
    return init_ms


def _invocation_cost(settings: Settings, lock: SlotLock, context: Any) -> InvocationCost | None:
    """This invocation's cost tracker (:mod:`athena_refresh.cost`), or ``None`` when the price table is broken
    (a price missing, or not a finite number >= 0) or the tracker cannot be built (logged: the estimate is
    informative and never fails a slot; the results store likewise commits without an estimate it cannot encode).
    """
    init_ms = _init_ms()
    try:
        memory_mb = int(getattr(context, "memory_limit_in_mb", 0)) or contract.DEFAULT_LAMBDA_MEMORY_MB
    except (TypeError, ValueError):
        memory_mb = contract.DEFAULT_LAMBDA_MEMORY_MB
    try:
        return InvocationCost(
            prices=load_prices(os.environ.get("AWS_REGION")),
            racers=settings.racers,
            memory_mb=memory_mb,
            capacity=lock.capacity,
            architecture=contract.LAMBDA_ARCHITECTURE,
            init_ms=init_ms,
        )
    except PriceTableError:
        logger.exception("no cost estimate: the bundled price table is broken")
    except Exception:  # informative only: whatever fails here leaves the slot without an estimate, never fails it
        logger.exception("no cost estimate: the invocation's cost tracker could not start")
    return None


def emit_outcome_metrics(outcome: SlotOutcome, report: SlotReport, now_ms: int) -> None:
    """The outcome's metrics, and nothing else (issue 23; everything else is a field of its log line).

    Per job (dimensions service + job): every invocation of the live schedule reports the age of the last successful
    run, ``LastSuccessAgeS`` (seconds): the winner just succeeded (0) or read it from the lock item; a loser got it
    from ALL_OLD at no extra request. A manual generation (2+) does not: a backfill must not hide that the live
    schedule stopped succeeding. The invocation that committed the slot's results reports its query's
    ``DataScannedBytes`` and ``QueryDurationMs`` (once per committed slot: a stale or lost holder commits nothing).

    Deployment-wide (dimension service only), only when it happens: ``ThresholdExceeded`` when the committed slot
    went above one of its job's ``[alarms]`` thresholds (or both: one count), ``StaleWriteRejected`` for a commit
    refused as stale. (``CorruptLockItem``: :func:`_corrupt_outcome`.) The capacity semaphore's ``PermitsInUse`` and
    ``PermitWaitMs`` (dimension service only: statistics across every job, p50/p95 on the dashboard) when this
    invocation took a permit: once per permit taken, never per job.
    """
    last_success_ms = now_ms if outcome.status == "succeeded" else outcome.last_succeeded_at_ms
    if isinstance(last_success_ms, int) and outcome.generation == 1:
        _job_metric(contract.METRIC_LAST_SUCCESS_AGE_S, max(0, now_ms - last_success_ms) / 1000, "Seconds")
    if report.committed and report.data_scanned_bytes is not None and report.query_duration_ms is not None:
        _job_metric(contract.METRIC_DATA_SCANNED_BYTES, report.data_scanned_bytes, "Bytes")
        _job_metric(contract.METRIC_QUERY_DURATION_MS, report.query_duration_ms, "Milliseconds")
        if report.thresholds:
            _deployment_count(contract.METRIC_THRESHOLD_EXCEEDED)
    if outcome.status == "stale_rejected":
        _deployment_count(contract.METRIC_STALE_WRITE_REJECTED)
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


@tracer.capture_method(capture_response=False)
def handle(event: Any, context: Any, *, settings: Settings | None = None) -> dict[str, Any]:
    """Run the refresh for the event's slot; returns the :class:`SlotOutcome` as a dict.

    Raises
    ------
    ConfigurationError
        Invalid environment (names the variable); raised before any AWS request.
    InvalidEventError
        The event has no usable scheduled time, its ``job`` names another job, or its ``manual`` marker is
        malformed (names the field, e.g. ``manual.generation``); raised before any AWS request. (A manual
        generation that was never requested is refused after the manual acquisition, which it gives back.)
    QueryTimeoutError, LockBackendError, QueryEngineError, ResultsStoreError
        Transient trouble: the lease was released and Lambda's retry (same request id) re-enters. (A
        permanent engine or store error, ``retryable`` False, is not raised: the job records the slot
        FAILED with the error and returns status ``failed``.)

    A tampered item (``CorruptLockItemError``: the lock item or the slot's history item; or results that
    contradict the lock, reported as ``CorruptResultsItemError``) is not raised: it cannot repair itself, so
    Lambda's retries would only repeat it. It is logged with the item and attribute (outcome ``corrupt``, with
    the job), counted as the deployment-wide EMF metric ``CorruptLockItem`` (dimension service only; alarm on
    it), and returned as status ``corrupt`` with ``details`` naming the item. Nothing was written (a slot whose
    adoption found a corrupt history item gets its lease released again).

    An item of a newer table layout (``UnsupportedSchemaVersionError``: a newer slotlock wrote the lock table) is
    handled alike, but never as a corrupt item: not raised (every retry would meet the same item), logged at ERROR
    naming the item and the versions (outcome ``unsupported_schema``), returned as status ``unsupported_schema``.
    The item was left as it is. No metric: ``NoRecentSuccess`` alarms once the job's slots stop succeeding.
    """
    settings = settings or Settings.from_env()
    slot = Slot.from_event(event)
    _check_event_job(event, settings.job_name)
    marker = ManualMarker.from_event(event)
    deps = dependencies(settings)
    if metrics.default_dimensions.get(contract.DIMENSION_JOB) != settings.job_name:  # once per environment
        metrics.set_default_dimensions(**{contract.DIMENSION_JOB: settings.job_name})
    lock = deps.lock
    if marker is not None and marker.generation is not None:
        lock = lock.for_generation(marker.generation)  # a manual generation: the manual lease
    logger.append_keys(job=settings.job_name, slot=slot.iso, owner=context.aws_request_id, generation=lock.generation)
    if marker is not None:  # an operator's run: the audit goes to the log with the outcome
        logger.append_keys(run_kind=marker.kind, run_id=marker.run_id, requested_by=marker.requested_by)
        logger.info(f"operator {marker.kind} of slot {slot.iso}: {marker.reason}", request_reason=marker.reason)
    cost = _invocation_cost(settings, lock, context)
    job = AthenaRefreshJob(
        settings=settings,
        engine=deps.engine,
        results=deps.results,
        values=ValuePublisher.from_settings(settings),
        cost=cost,
        capacity=_capacity_gate(settings, deps, event, context),
    )
    runner = SlotRunner(lock, listener=_listener(_seams.listener, cost))
    deadline_ms = lock.clock_ms() + int(context.get_remaining_time_in_millis())
    try:
        outcome = runner.run(job, slot=slot, owner_id=context.aws_request_id, deadline_ms=deadline_ms)
    except (CorruptLockItemError, CommitConflictError) as error:
        return _corrupt_outcome(
            error, deps.results, settings.job_name, slot, context.aws_request_id, job.report, lock.generation
        )
    except UnsupportedSchemaVersionError as error:
        return _unsupported_layout_outcome(
            error, settings.job_name, slot, context.aws_request_id, job.report, lock.generation
        )
    emit_outcome_metrics(outcome, job.report, lock.clock_ms())
    result = outcome.as_dict()
    result["queries_started"] = job.queries_started
    # One line per invocation, its facts as fields (the Logs Insights queries of athena_refresh.log_queries
    # filter on them). WARNING for the outcomes someone may need to look at (a harness logging at WARNING keeps them).
    level = logger.info if outcome.status in ("succeeded", "lost", "deferred") else logger.warning
    level(f"slot {slot.iso}: {outcome.status}", **outcome_log_fields(outcome, job.report))
    return result


def _unsupported_layout_outcome(
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
    logger.error(
        f"slot {slot.iso}: unsupported_schema (table layout), not retried: {error}",
        extra={contract.LOG_FIELD_OUTCOME: "unsupported_schema", **details, **report.log_fields()},
    )
    outcome = SlotOutcome(
        "unsupported_schema",
        job_name,
        slot.iso,
        owner_id,
        reason="schema_version",
        details=details,
        generation=generation,
    )
    return {**outcome.as_dict(), "queries_started": report.queries_started}


def _corrupt_outcome(
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
    _deployment_count(contract.METRIC_CORRUPT_LOCK_ITEM)
    details = {
        "item_key": corrupt.key,
        "attribute": corrupt.attribute,
        "error": str(corrupt),
        "error_type": type(corrupt).__name__,
    }
    logger.error(
        f"slot {slot.iso}: corrupt stored item, not retried: {corrupt}",
        extra={contract.LOG_FIELD_OUTCOME: "corrupt", **details, **report.log_fields()},
    )
    outcome = SlotOutcome(
        "corrupt",
        job_name,
        slot.iso,
        owner_id,
        reason="corrupt_item",
        details=details,
        generation=generation,
    )
    return {**outcome.as_dict(), "queries_started": report.queries_started}
