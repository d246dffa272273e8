"""The Athena refresh: the function run once per slot under the slot lock.

Per slot (all under one :class:`slotlock.SlotRun`):

1. adopt a predecessor's query if the slot's in-flight state names one (takeover or our own retry);
   otherwise start the query with a ClientRequestToken derived from job, slot and attempt, so two
   starts of one attempt are one query, and record its query execution id on the slot item (fenced);
2. poll with capped exponential backoff, renewing the lease at each poll when a heartbeat is due, never
   past the invocation deadline minus the time reserved for the commit;
3. a FAILED query with a retryable error starts a new attempt (bounded by ``max_query_attempts``); a
   permanent failure ends the slot as failed with the AthenaError recorded (normal return: no retry storm),
   and so do results that cannot be typed (``ResultTypeError``: the same rows would fail every retry);
4. read the typed results and commit them with the slot's completion in one fenced transaction; the LATEST
   pointer's write is left out when a newer (slot, generation) is already there (a re-run of an older slot,
   or a live commit after a re-run of its own slot), and the commit is retried without it when the pointer
   moved ahead in between (``CommitConflictError`` on the pointer);
5. only after that commit succeeded, publish the configured result columns as metrics (optional
   :class:`~athena_refresh.values.ValuePublisher`): a stale or lost holder never publishes values, and a
   publishing failure is logged, never raised (the slot is already committed).

A manual generation (2+: a re-run, a backfill) runs the same steps under the manual lease; its query attempts
have their own ClientRequestTokens (the token's slot part is ``<slot>#g<n>``) and its result its own item.

If the lease is lost, nothing more is written and the query is left running for the successor to adopt.
If the time budget runs out, the lease is released (keeping the state) and QueryTimeoutError propagates,
so Lambda's async retry (same request id) re-enters at once and adopts the query.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slotlock import CommitConflictError, SlotRun

from . import assertions, contract
from .engine import QUERY_EXECUTION_ID, QueryEngine, QueryExecution, client_request_token, wait_for_query
from .errors import QueryEngineError, QueryFailedError, ResultsStoreError, ResultTypeError
from .permits import Gate, NoCapacityGate, no_capacity_gate
from .report import SlotReport, thresholds_exceeded
from .results import ResultsStore
from .settings import Settings
from .stored import result_sort_key

if TYPE_CHECKING:  # pragma: no cover
    from .cost import InvocationCost
    from .values import ValuePublisher

logger = logging.getLogger(__name__)

CHECKPOINT_QUERY_STARTED = "query_started"
CHECKPOINT_QUERY_FINISHED = "query_finished"
#: Time kept back from the invocation deadline for reading results and the commit (shared with the stack).
DEFAULT_COMMIT_RESERVE_MS = contract.COMMIT_RESERVE_S * 1000


@dataclass
class AthenaRefreshJob:
    """Callable ``job(run) -> summary`` for :class:`slotlock.SlotRunner`.

    Parameters
    ----------
    settings:
        Validated job settings (SQL, window, attempts).
    engine:
        A :class:`~athena_refresh.engine.QueryEngine` (Athena, or DuckDB locally).
    results:
        Prepares the fenced result writes.
    sleep_s, poll_initial_delay_ms, poll_max_delay_ms:
        Polling pace (injected in tests).
    commit_reserve_ms:
        Milliseconds before the invocation deadline at which polling stops.
    values:
        Publishes result columns as metrics after a successful commit (``None``: off). Each distinct
        combination of dimension values is a billed custom metric; the publisher caps them.
    capacity:
        Builds the slot's gate from the report: a :class:`~athena_refresh.permits.CapacityGate` (a query is started
        only under a permit of the deployment's semaphore), or by default the
        :class:`~athena_refresh.permits.NoCapacityGate` (the capacity budget is off).
    cost:
        Measures this invocation for the slot's cost estimate (:mod:`athena_refresh.cost`; ``None``: no
        estimate). The estimate is committed with the result and reported as ``estimated_cost_usd``.

    The job emits no metric itself: it fills :attr:`report` (:class:`~athena_refresh.report.SlotReport`: adoption,
    queries started, the query's statistics, and with the commit the rows stored, the estimate, the value series
    dropped and the ``[alarms]`` thresholds exceeded, each of those logged as a warning); the service turns it into
    the invocation's log line and its few metrics.
    """

    settings: Settings
    engine: QueryEngine
    results: ResultsStore
    sleep_s: Callable[[float], None] = time.sleep
    poll_initial_delay_ms: int = 200
    poll_max_delay_ms: int = 5_000
    commit_reserve_ms: int = DEFAULT_COMMIT_RESERVE_MS
    values: ValuePublisher | None = None
    cost: InvocationCost | None = None
    capacity: Callable[[SlotReport], Gate] = no_capacity_gate
    report: SlotReport = field(default_factory=SlotReport, init=False)
    gate: Gate = field(default_factory=NoCapacityGate, init=False)

    @property
    def queries_started(self) -> int:
        """Queries this job started (the report's count)."""
        return self.report.queries_started

    def __call__(self, run: SlotRun) -> dict[str, Any]:
        """Run the slot's refresh; a permanent engine or store error fails the slot (no Lambda retry).

        A retryable :class:`QueryEngineError`/:class:`ResultsStoreError` propagates: the runner releases
        the lease keeping the state, and Lambda's async retry (same request id) re-enters and adopts.
        """
        try:
            return self._refresh(run)
        except (QueryEngineError, ResultsStoreError) as error:
            if error.retryable or run.finished:
                raise
            logger.error("slot %s failed for good: %s", run.lease.slot.iso, error)
            failure = error.as_dict()
            self._fail(run, failure)  # recorded once, nothing of the results written; normal return: no retry storm
            return failure

    def _refresh(self, run: SlotRun) -> dict[str, Any]:
        lease = run.lease
        slot = lease.slot
        generation = lease.generation
        parameters = self.settings.execution_parameters(slot.datetime)
        attempt, query_execution_id = self._adopted_state(run)
        gate = self.gate = self.capacity(self.report)
        if query_execution_id:
            logger.info("adopting query %s of slot %s (attempt %d)", query_execution_id, slot.iso, attempt)
            self.report.query_adopted = True
            gate.adopt(run)  # the query already runs: inherit its permit, never wait
        previous_query: str | None = None
        while True:
            if query_execution_id is None:
                token = client_request_token(
                    self.settings.job_name,
                    result_sort_key(slot.iso, generation),
                    attempt,
                    deployment_id=self.settings.lock_table_name,
                )
                started = self._start(run, gate, parameters, token)
                if not isinstance(started, str):
                    return started  # given back for capacity, or MISSED "capacity"
                query_execution_id = started
                self.report.queries_started += 1
                self._record_query(run, gate, query_execution_id, attempt, previous_query)
                run.checkpoint(CHECKPOINT_QUERY_STARTED)
            execution = self._wait(run, query_execution_id)
            if execution.state == "SUCCEEDED":
                break
            try:
                execution.raise_for_state()
            except QueryFailedError as failure:
                if failure.retryable and attempt < self.settings.max_query_attempts:
                    logger.warning("query %s failed retryably (attempt %d): %s", query_execution_id, attempt, failure)
                    attempt += 1
                    previous_query, query_execution_id = query_execution_id, None
                    continue
                logger.error("query %s failed for good: %s", query_execution_id, failure)
                error = {**failure.as_dict(), "attempt": attempt}
                self._fail(run, error)
                return error
        run.checkpoint(CHECKPOINT_QUERY_FINISHED)
        statistics = execution.statistics
        self.report.query_duration_ms = statistics.total_execution_time_ms
        self.report.data_scanned_bytes = statistics.data_scanned_bytes
        try:
            # Reading many pages can outlast a heartbeat interval: renew between pages (when one is due).
            result = self.engine.get_results(query_execution_id, on_page=lambda _rows: self._heartbeat(run))
        except ResultTypeError as bad:  # permanent: the same rows fail the same way on every retry
            logger.error("results of query %s cannot be stored: %s", query_execution_id, bad)
            error = {**bad.as_dict(), "query_execution_id": query_execution_id, "attempt": attempt}
            self._fail(run, error)  # nothing of the results is written; normal return: no Lambda retry
            return error
        start, end = self.settings.window(slot.datetime)
        job_name = self.settings.job_name
        spec = self.settings.spec
        broken = assertions.evaluate(spec.assertions, result.rows) if spec and spec.assertions else []
        # The live schedule's commit nearly always moves the pointer (no read); a manual one rarely does; rows that
        # break an assertion never do (the last good result stays published).
        move_latest = not broken and (generation == 1 or self.results.latest_order(job_name, slot.iso, generation) <= 0)
        prepared = self.results.prepare(
            job_name=job_name,
            slot_iso=slot.iso,
            fencing_token=lease.fencing_token,
            query_execution_id=query_execution_id,
            statistics=statistics,
            result=result,
            committed_at_ms=run.now_ms(),
            window=(start.isoformat(), end.isoformat()),
            generation=generation,
            move_latest=move_latest,
            cost=self._cost_hook(statistics.data_scanned_bytes),
            assertions_failed=[failure.as_dict() for failure in broken],
        )
        if broken:  # stored for inspection under the slot and generation, FAILED, not retried: same rows, same fate
            error = {**assertions.failure_record(broken, len(result.rows)), "query_execution_id": query_execution_id}
            logger.error("slot %s failed its assertions: %s", slot.iso, error["error_message"])
            self._fail(run, error, writes=prepared.writes)
            return error
        waited = {} if self.report.permit_wait_ms is None else {"permit_wait_ms": self.report.permit_wait_ms}
        summary = {**prepared.summary, "attempt": attempt, "generation": generation, **waited}
        self._heartbeat(run)  # an S3 offload may have taken a while: no lease gap before the commit
        while True:
            release = gate.release_writes()
            try:
                run.commit(writes=[*prepared.writes, *release], summary=summary)
                break
            except CommitConflictError as conflict:
                if release and conflict.index >= len(prepared.writes):
                    gate.drop("release", conflict)  # the permit was reclaimed: never hold the result back
                    continue
                # The pointer refused: if it is now at a newer (slot, generation) (a re-run committed in between),
                # the result is still ours to store, without moving the pointer. Anything else is a tampered item.
                if (
                    conflict.index != prepared.latest_index
                    or self.results.latest_order(job_name, slot.iso, generation) <= 0
                ):
                    raise
                logger.info("LATEST already names a newer result than slot %s generation %d", slot.iso, generation)
                prepared = prepared.without_latest()
                summary = {**prepared.summary, "attempt": attempt, "generation": generation, **waited}
        gate.permit = None  # released in the commit
        self._committed(slot.iso, len(result.rows), summary)
        if self.values is not None:
            try:
                published = self.values.publish(result, slot_epoch_ms=slot.epoch_ms, now_ms=run.now_ms())
                self.report.value_series_dropped = published.series_dropped
            except Exception:  # the slot is committed: a metrics problem must not turn it into a retry
                logger.exception("could not publish the result values of slot %s as metrics", slot.iso)
        return summary

    def _start(self, run: SlotRun, gate: Gate, parameters: Any, token: str) -> str | dict[str, Any]:
        """Start the attempt's query under a permit: the query execution id, or the summary of the slot given back
        (``deferred``) or MISSED ``capacity``. Under a budget, Athena's "no capacity now" answers are waiting, not
        failures."""
        delay_s = gate.poll_initial_s
        while True:
            verdict = gate.take(run)  # a permit, renewed with the lease right before the start (when due)
            if verdict is not None:
                return self._capacity_end(run, gate, verdict)
            try:
                return self.engine.start_query(
                    sql=self.settings.query_sql, parameters=parameters, client_request_token=token
                )
            except QueryEngineError as error:
                if not gate.waits_out(error):
                    raise
                logger.warning("Athena has no capacity for slot %s now (%s): waiting", run.lease.slot.iso, error)
                verdict = gate.pause(run, delay_s)
                if verdict != "wait":
                    return self._capacity_end(run, gate, verdict)
                delay_s = min(gate.poll_max_s, delay_s * 2)

    @staticmethod
    def _capacity_end(run: SlotRun, gate: Gate, verdict: str) -> dict[str, Any]:
        if verdict == "missed":
            return gate.miss(run)
        return gate.defer(run) or {}

    def _record_query(
        self, run: SlotRun, gate: Gate, query_execution_id: str, attempt: int, previous: str | None
    ) -> None:
        """Record the query on the slot item (for a successor to adopt) and on the permit, in one transaction; a
        permit that refuses (reclaimed meanwhile) is dropped and the state recorded without it."""
        writes = gate.record_query_writes(run, query_execution_id, replacing=previous)
        try:
            run.record_state(query_execution_id=query_execution_id, attempt=attempt, writes=writes)
        except CommitConflictError as conflict:
            if not writes:
                raise
            gate.drop("record_query", conflict)
            run.record_state(query_execution_id=query_execution_id, attempt=attempt)
            return
        gate.recorded(run, query_execution_id)

    def _heartbeat(self, run: SlotRun) -> None:
        self.gate.heartbeat(run)  # the lease (when due), and a held permit with it

    def _fail(self, run: SlotRun, error: dict[str, Any], writes: Sequence[Mapping[str, Any]] = ()) -> None:
        """Record the slot FAILED (fenced; ``writes`` in the same transaction), then give its permit back."""
        run.fail(error, writes=writes)
        self.gate.release_now()

    def _committed(self, slot_iso: str, rows: int, summary: dict[str, Any]) -> None:
        """Report the commit: rows, the cost estimate, and each ``[alarms]`` threshold the slot went above (a
        warning naming job, slot, threshold, value and threshold; the service counts ``ThresholdExceeded``)."""
        report = self.report
        report.committed, report.rows_stored = True, rows
        estimate = summary.get("cost")  # absent when it could not be computed: the slot committed without it
        estimated_usd = estimate.get("estimated_cost_usd") if isinstance(estimate, dict) else None
        if isinstance(estimated_usd, (int, float)) and not isinstance(estimated_usd, bool):
            report.estimated_cost_usd = float(estimated_usd)
        report.thresholds = thresholds_exceeded(
            data_scanned_bytes=report.data_scanned_bytes or 0,
            query_duration_ms=report.query_duration_ms or 0,
            max_data_scanned_bytes=self.settings.alarm_data_scanned_bytes,
            max_query_duration_ms=self.settings.alarm_query_duration_ms,
        )
        for exceeded in report.thresholds:
            logger.warning(
                "job %s slot %s: %s %d is above the threshold %d (%s)",
                self.settings.job_name,
                slot_iso,
                exceeded.metric,
                exceeded.value,
                exceeded.threshold,
                exceeded.setting,
                extra={
                    "threshold_metric": exceeded.metric,
                    "threshold_setting": exceeded.setting,
                    "measured": exceeded.value,
                    "threshold": exceeded.threshold,
                },
            )

    def _cost_hook(self, data_scanned_bytes: int) -> Callable[[Any, Any], dict[str, Any]] | None:
        """The results store's cost hook: this invocation's estimate with the commit's writes (None: off)."""
        tracker = self.cost
        if tracker is None:
            return None

        def estimate(writes: Any, summary: Any) -> dict[str, Any]:
            return tracker.estimate(
                data_scanned_bytes=[data_scanned_bytes],
                commit_writes=writes,
                summary_bytes=len(json.dumps(summary, default=str)),
                s3_put_requests=1 if summary.get("rows_location") == "s3" else 0,
            ).as_dict()

        return estimate

    def _adopted_state(self, run: SlotRun) -> tuple[int, str | None]:
        """The attempt number and query execution id recorded by a predecessor, validated before any use.

        A tampered slot item (an attempt that is not an integer within ``max_query_attempts``, an id that is
        not of Athena's shape) would otherwise raise a ValueError or a botocore parameter error that Lambda
        retries forever; it is reported as corrupt instead (:meth:`slotlock.SlotRun.corrupt_state`).
        """
        attempt = run.state.get("attempt", 1)
        maximum = self.settings.max_query_attempts
        if isinstance(attempt, bool) or not isinstance(attempt, int) or not 1 <= attempt <= maximum:
            raise run.corrupt_state(
                "attempt", f"must be an integer from 1 to {maximum} (max_query_attempts), found {attempt!r:.80}"
            )
        query_execution_id = run.state.get("query_execution_id")
        if query_execution_id is not None and (
            not isinstance(query_execution_id, str) or not QUERY_EXECUTION_ID.fullmatch(query_execution_id)
        ):
            raise run.corrupt_state(
                "query_execution_id",
                f"must be an Athena query execution id (1..128 non-space characters), found {query_execution_id!r:.80}",
            )
        return attempt, query_execution_id

    def _wait(self, run: SlotRun, query_execution_id: str) -> QueryExecution:
        deadline_ms = run.lease.deadline_ms
        if deadline_ms is None:
            deadline_ms = run.now_ms() + 15 * 60 * 1000  # Lambda's maximum timeout
        # The lease is renewed at polls only: never poll further apart than a heartbeat interval (a short lease,
        # e.g. 2 s, would otherwise run out between two polls 3.2 s or 5 s apart, and another delivery take over).
        max_delay_ms = max(1, min(self.poll_max_delay_ms, run.heartbeat_interval_ms))
        return wait_for_query(
            self.engine,
            query_execution_id,
            deadline_ms=deadline_ms - self.commit_reserve_ms,
            clock_ms=run.now_ms,
            sleep_s=self.sleep_s,
            on_poll=lambda _execution: self._heartbeat(run),
            initial_delay_ms=min(self.poll_initial_delay_ms, max_delay_ms),
            max_delay_ms=max_delay_ms,
        )
