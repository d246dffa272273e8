"""What the read paths return, as JSON-safe views: a job of ``GET /jobs`` (:class:`JobSummary`, its CSV row) and one
generation of a job's history (:func:`history_entry`). :mod:`results_api.reader` builds them from the tables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from athena_refresh.catalog import CatalogSchedule
from athena_refresh.failures import describe_failure
from slotlock.history import HistoryRecord

__all__ = ["JOB_COLUMNS", "JobSummary", "history_entry"]

#: The columns of ``GET /jobs`` as CSV (:meth:`JobSummary.csv_row`).
JOB_COLUMNS = (
    "job",
    "lease_state",
    "paused",
    "latest_slot",
    "latest_generation",
    "latest_fencing_token",
    "last_success_slot",
    "last_success_at_ms",
    "schedule",
    "freshness_state",
    "late",
    "expected_next_slot",
)


@dataclass(frozen=True)
class JobSummary:
    """One job of ``GET /jobs``: schedule, the live lease, the pause, the last success, the latest result and its
    freshness (the object ``latest`` returns, for a job without a result too: ``slot`` null).

    ``lease_state``: ``held`` (an unexpired live lease), ``free``, or ``unknown`` (the lock item cannot be
    decoded: ``problem`` says why). Times are epoch milliseconds.
    """

    job: str
    schedule: CatalogSchedule | None
    lease_state: str
    lease_owner_id: str | None = None
    lease_slot: str | None = None
    lease_fencing_token: int | None = None
    lease_expires_at_ms: int | None = None
    paused: bool = False
    paused_through_slot: str | None = None
    last_success_slot: str | None = None
    last_success_at_ms: int | None = None
    latest_slot: str | None = None
    latest_generation: int | None = None
    latest_fencing_token: int | None = None
    latest_committed_at_ms: int | None = None
    problem: str | None = None
    last_finished_slot: str | None = None
    last_finished_outcome: str | None = None
    freshness: Mapping[str, Any] | None = None  # results_api.freshness.freshness_document: as ``latest`` says it

    def csv_row(self) -> dict[str, Any]:
        """The flat row of ``GET /jobs`` as CSV (:data:`JOB_COLUMNS`; the schedule as JSON text)."""
        return {
            "job": self.job,
            "lease_state": self.lease_state,
            "paused": self.paused,
            "latest_slot": self.latest_slot,
            "latest_generation": self.latest_generation,
            "latest_fencing_token": self.latest_fencing_token,
            "last_success_slot": self.last_success_slot,
            "last_success_at_ms": self.last_success_at_ms,
            "schedule": self.schedule.as_dict() if self.schedule else None,
            "freshness_state": (self.freshness or {}).get("state"),
            "late": (self.freshness or {}).get("late"),
            "expected_next_slot": (self.freshness or {}).get("expected_next_slot"),
        }

    def as_dict(self) -> dict[str, Any]:
        """The JSON object of the API (nested: ``schedule``, ``lease``, ``last_success``, ``latest``, ``freshness``)."""
        return {
            "job": self.job,
            "schedule": self.schedule.as_dict() if self.schedule else None,
            "lease": {
                "state": self.lease_state,
                "owner_id": self.lease_owner_id,
                "slot": self.lease_slot,
                "fencing_token": self.lease_fencing_token,
                "expires_at_ms": self.lease_expires_at_ms,
            },
            "paused": self.paused,
            "paused_through_slot": self.paused_through_slot,
            "last_success": {"slot": self.last_success_slot, "at_ms": self.last_success_at_ms},
            "last_finished": {"slot": self.last_finished_slot, "outcome": self.last_finished_outcome},
            "latest": {
                "slot": self.latest_slot,
                "generation": self.latest_generation,
                "fencing_token": self.latest_fencing_token,
                "committed_at_ms": self.latest_committed_at_ms,
            },
            "problem": self.problem,
            "freshness": dict(self.freshness) if self.freshness is not None else None,
        }


def history_entry(record: HistoryRecord) -> dict[str, Any]:
    """One generation of one slot as the API lists it: outcome, reason, token, owner, query execution id,
    times and duration (ms), bytes scanned, rows, the cost estimate (USD, committed slots since it exists), the
    operator's request of a manual generation, and for a FAILED or MISSED slot ``failure``
    (:meth:`athena_refresh.failures.Failure.as_dict`: error class, full message, one-line summary)."""
    summary, state, error = dict(record.summary), dict(record.state), dict(record.error)
    statistics = summary.get("statistics")
    scanned = statistics.get("data_scanned_bytes") if isinstance(statistics, dict) else None
    cost: dict[str, Any] = summary["cost"] if isinstance(summary.get("cost"), dict) else {}
    cost_usd = cost.get("estimated_cost_usd")
    query_id = summary.get("query_execution_id") or state.get("query_execution_id")
    return {
        "slot": record.slot.iso,
        "generation": record.generation,
        "status": record.status,
        "reason": record.reason,
        "fencing_token": record.fencing_token,
        "owner_id": record.owner_id,
        "query_execution_id": query_id if isinstance(query_id, str) else None,
        "started_at_ms": record.started_at_ms,
        "finished_at_ms": record.finished_at_ms,
        "duration_ms": record.duration_ms,
        "data_scanned_bytes": scanned if isinstance(scanned, int) else None,
        "row_count": summary.get("row_count") if isinstance(summary.get("row_count"), int) else None,
        "estimated_cost_usd": float(cost_usd) if isinstance(cost_usd, (int, float)) and cost_usd >= 0 else None,
        "cost": cost or None,
        "run_kind": record.run_kind,
        "run_id": record.run_id,
        "requested_by": record.requested_by,
        "requested_at_ms": record.requested_at_ms,
        "request_reason": record.request_reason,
        "error": error or None,
        "failure": failure.as_dict() if (failure := describe_failure(record.status, record.reason, error)) else None,
        "corrupt": record.corrupt,
    }
