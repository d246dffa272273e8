"""Glue between the Lambda handler and the job: the invocation's dependencies, observability, outcome.

Kept out of ``handler.py`` so the handler stays a stack of Powertools decorators and one call. The runtime has one
seam, :class:`Deps`: everything an invocation runs with besides its event and its context (the lock, the query
engine, the results store, the capacity semaphore, deferral and wait, the checkpoint listener, the clock).
:func:`athena_refresh.handler.make_handler` turns deps into a Lambda handler; the deployed one builds its deps from
the settings (:meth:`Deps.from_settings`) once per execution environment, and tests and local tools pass their own.
What an outcome emits (metrics, the log line, corrupt and unsupported items) is :mod:`athena_refresh.outcomes`.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

from slotlock import (
    CommitConflictError,
    CorruptLockItemError,
    InvalidEventError,
    Lease,
    Semaphore,
    Slot,
    SlotLock,
    SlotRunner,
    UnsupportedSchemaVersionError,
    system_clock_ms,
)
from slotlock.manual import ManualMarker
from slotlock.runner import CHECKPOINT_ACQUIRED, Listener

from . import contract
from .cost import InvocationCost, PriceTableError, load_prices
from .deferral import DeferralFactory, scheduler_deferral
from .engine import AthenaQueryEngine, QueryEngine
from .job import AthenaRefreshJob
from .observability import logger, metrics, tracer
from .outcomes import (
    corrupt_outcome,
    emit_outcome_metrics,
    outcome_log_fields,
    unsupported_layout_outcome,
)
from .permits import CapacityGate, Gate, no_capacity_gate
from .reclaim import ReclaimCheck
from .report import SlotReport
from .results import ResultsStore
from .settings import Settings
from .values import ValuePublisher

# Library loggers (stdlib logging) get the same JSON formatter, so they carry job/slot/owner/token keys.
copy_config_to_registered_loggers(source_logger=logger, include={"slotlock", "athena_refresh"})


def athena_engine(settings: Settings) -> AthenaQueryEngine:
    """The deployed query engine: Athena, in the settings' workgroup, database and catalog."""
    return AthenaQueryEngine(
        workgroup=settings.athena_workgroup,
        database=settings.athena_database,
        catalog=settings.athena_catalog,
        result_reuse_max_age_min=settings.result_reuse_max_age_min,
    )


@dataclass(frozen=True)
class Deps:
    """What one invocation runs with besides its event and its context: the runtime's one seam.

    This is how tests and outside tools run one real invocation: build deps (usually :meth:`from_settings`, with
    the parts to replace), pass them to :func:`athena_refresh.handler.make_handler`, and call the handler it
    returns with an event and a Lambda-like context; everything else is the deployed code path. Nothing is
    installed globally and nothing rebound.

    ``settings``: the job's validated settings. ``lock``: the job's :class:`slotlock.SlotLock`; its ``clock_ms``
    (epoch ms) is the invocation's clock (:attr:`clock_ms`: the lease, the deadline, the permits, the metrics'
    now). ``engine``: the :class:`~athena_refresh.engine.QueryEngine` (Athena deployed; DuckDB locally, fakes in
    tests). ``results``: the :class:`~athena_refresh.results.ResultsStore`. ``semaphore``: the capacity budget's
    :class:`slotlock.Semaphore` (``None``: the budget is off, the job runs with the no-op
    :class:`~athena_refresh.permits.NoCapacityGate`). ``deferral``: builds the capacity deferral from the settings
    and the invocation's context (deployed: :func:`~athena_refresh.deferral.scheduler_deferral`, a one-time
    EventBridge Scheduler schedule when the stack configured one; ``None`` from it: no deferral).
    ``capacity_sleep_s``: the sleep (seconds) between polls of a slot waiting for a permit. ``listener``: called
    with every checkpoint (name, lease) after the service's own handling (``None``: none); the demo and the chaos
    suite report checkpoints and inject kills and pauses there.
    """

    settings: Settings
    lock: SlotLock
    engine: QueryEngine
    results: ResultsStore
    semaphore: Semaphore | None = None
    deferral: DeferralFactory = scheduler_deferral
    capacity_sleep_s: Callable[[float], None] = time.sleep
    listener: Listener | None = None

    @property
    def clock_ms(self) -> Callable[[], int]:
        """The invocation's clock (epoch ms): the lock's."""
        return self.lock.clock_ms

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        engine: QueryEngine | None = None,
        clock_ms: Callable[[], int] = system_clock_ms,
        deferral: DeferralFactory = scheduler_deferral,
        capacity_sleep_s: Callable[[float], None] = time.sleep,
        listener: Listener | None = None,
    ) -> Deps:
        """The deployed deps for ``settings`` (what the deployed handler builds once per execution environment):
        the lock and, when the budget is on, the semaphore on ``clock_ms`` and one DynamoDB client, the results
        store, and ``engine`` (``None``: Athena, :func:`athena_engine`). Builds clients; sends no request."""
        lock = SlotLock(
            settings.lock_table_name,
            settings.job_name,
            lease_duration_s=settings.lease_duration_s,
            heartbeat_interval_s=settings.heartbeat_interval_s,
            max_slot_age_s=settings.max_slot_age_s,
            history_ttl_s=settings.history_ttl_s,
            max_slot_lead_s=settings.max_slot_lead_s,
            clock_ms=clock_ms,
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
        return cls(
            settings=settings,
            lock=lock,
            engine=athena_engine(settings) if engine is None else engine,
            results=results,
            semaphore=semaphore,
            deferral=deferral,
            capacity_sleep_s=capacity_sleep_s,
            listener=listener,
        )


#: What :func:`athena_refresh.handler.make_handler` takes: fixed deps, or a builder of deps from the settings.
DepsSource = Deps | Callable[[Settings], Deps]
#: Per invocation: its settings, and a builder of its deps (:func:`invocation_deps`).
InvocationDeps = Callable[[], tuple[Settings, Callable[[], Deps]]]


#: Variables the Lambda runtime sets at every invocation (the X-Ray trace header), which the settings never read:
#: as ``os.environ``'s own table spells them (bytes on POSIX) and as text.
_PER_INVOCATION_VARIABLES = (b"_X_AMZN_TRACE_ID", "_X_AMZN_TRACE_ID")


def _environment() -> dict[Any, Any]:
    """The process environment the settings are read from: a copy of ``os.environ``'s own table (copied and compared
    in C, no Python-level call per variable), without the variables set at every invocation."""
    data = getattr(os.environ, "_data", None)
    environment = dict(data) if isinstance(data, dict) else dict(os.environ)
    for name in _PER_INVOCATION_VARIABLES:
        environment.pop(name, None)
    return environment


def invocation_deps(deps: DepsSource) -> InvocationDeps:
    """Resolve ``deps`` per invocation: the invocation's settings, and its deps (built only when called, after
    the event was checked).

    A :class:`Deps`: every invocation runs with it and its settings (no environment read). A builder (the deployed
    :meth:`Deps.from_settings`): the settings are read from the environment (``Settings.from_env``: a bad variable
    raises ``ConfigurationError`` before any request) once per execution environment, and again only when an
    invocation finds the environment's variables changed (a test's or a local tool's edit; they are compared at
    every invocation); the deps are built once per settings for the life of this resolver (up to 4 settings
    cached), so warm invocations reuse both. The job catalog the settings read is part of the immutable asset.
    """
    if isinstance(deps, Deps):
        fixed = deps
        return lambda: (fixed.settings, lambda: fixed)
    build = functools.lru_cache(maxsize=4)(deps)
    # The environment of the last settings read, those settings, and their deps once built (no hashing of the
    # settings at every warm invocation).
    read: list[Any] = []

    def resolve() -> tuple[Settings, Callable[[], Deps]]:
        environment = _environment()
        if not read or read[0] != environment:
            settings = Settings.from_env()
            read[:] = [environment, settings, functools.cache(functools.partial(build, settings))]
        return read[1], read[2]

    return resolve


def _capacity_gate(deps: Deps, event: Any, context: Any) -> Callable[[SlotReport], Gate]:
    """The job's capacity gate factory for this invocation (:func:`~athena_refresh.permits.no_capacity_gate`: the
    budget is off). Its reclaim check never raises for a query it cannot read (:mod:`athena_refresh.reclaim`)."""
    semaphore = deps.semaphore
    if semaphore is None:
        return no_capacity_gate
    settings = deps.settings
    deferral = deps.deferral(settings, context)
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
            sleep_s=deps.capacity_sleep_s,
        )

    return gate


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
    """The service's checkpoint handling (and the cost tracker's lock decision), then ``extra`` (the deps'
    listener), for one invocation."""
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
    except Exception:  # noqa: BLE001 - informative only: whatever fails leaves the slot without an estimate
        logger.exception("no cost estimate: the invocation's cost tracker could not start")
    return None


def handle(event: Any, context: Any, deps: InvocationDeps) -> dict[str, Any]:
    """Run the refresh for the event's slot; returns the :class:`SlotOutcome` as a dict.

    ``deps`` (:func:`invocation_deps`, as :func:`athena_refresh.handler.make_handler` passes it) gives the
    invocation's settings first, and its :class:`Deps` once the event was checked.

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
    settings, build = deps()
    slot = Slot.from_event(event)
    _check_event_job(event, settings.job_name)
    marker = ManualMarker.from_event(event)
    built = build()
    if metrics.default_dimensions.get(contract.DIMENSION_JOB) != settings.job_name:  # once per environment
        metrics.set_default_dimensions(**{contract.DIMENSION_JOB: settings.job_name})
    lock = built.lock
    if marker is not None and marker.generation is not None:
        lock = lock.for_generation(marker.generation)  # a manual generation: the manual lease
    logger.append_keys(job=settings.job_name, slot=slot.iso, owner=context.aws_request_id, generation=lock.generation)
    if marker is not None:  # an operator's run: the audit goes to the log with the outcome
        logger.append_keys(run_kind=marker.kind, run_id=marker.run_id, requested_by=marker.requested_by)
        logger.info(f"operator {marker.kind} of slot {slot.iso}: {marker.reason}", request_reason=marker.reason)
    cost = _invocation_cost(settings, lock, context)
    job = AthenaRefreshJob(
        settings=settings,
        engine=built.engine,
        results=built.results,
        values=ValuePublisher.from_settings(settings),
        cost=cost,
        capacity=_capacity_gate(built, event, context),
    )
    runner = SlotRunner(lock, listener=_listener(built.listener, cost))
    deadline_ms = lock.clock_ms() + int(context.get_remaining_time_in_millis())
    try:
        outcome = runner.run(job, slot=slot, owner_id=context.aws_request_id, deadline_ms=deadline_ms)
    except (CorruptLockItemError, CommitConflictError) as error:
        return corrupt_outcome(
            error, built.results, settings.job_name, slot, context.aws_request_id, job.report, lock.generation
        )
    except UnsupportedSchemaVersionError as error:
        return unsupported_layout_outcome(
            error, settings.job_name, slot, context.aws_request_id, job.report, lock.generation
        )
    # The job's own metrics are opt-in (issue 35); settings built without a spec (tests, tools) have none.
    per_job_metrics = settings.spec is not None and settings.spec.per_job_metrics
    emit_outcome_metrics(outcome, job.report, lock.clock_ms(), per_job_metrics=per_job_metrics)
    result = outcome.as_dict()
    result["queries_started"] = job.queries_started
    # One line per invocation, its facts as fields (the Logs Insights queries of athena_refresh.log_queries
    # filter on them). WARNING for the outcomes someone may need to look at (a harness logging at WARNING keeps them).
    level = logger.info if outcome.status in ("succeeded", "lost", "deferred") else logger.warning
    level(f"slot {slot.iso}: {outcome.status}", **outcome_log_fields(outcome, job.report))
    return result


__all__ = [
    "Deps",
    "DepsSource",
    "InvocationDeps",
    "athena_engine",
    "emit_outcome_metrics",
    "handle",
    "invocation_deps",
    "logger",
    "metrics",
    "outcome_log_fields",
    "record_init_ms",
    "tracer",
]
