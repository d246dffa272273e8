"""The read API's response shapes as pydantic models: they document the API (its OpenAPI document) and the tests
validate real responses against them. Routes build plain dicts (``results_api.reader``, ``results_api.responses``)
and never pass through these at run time, so a CSV body or a redirect is never "validated" as JSON.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Schedule(_Model):
    expression: str = Field(description="EventBridge Scheduler cron(...) expression")
    timezone: str = Field(description="IANA time zone of the cron's wall clock")
    racers: int = Field(description="invocations fanned out per slot")


class Lease(_Model):
    state: str = Field(description="held (an unexpired live lease), free, or unknown (lock item unreadable)")
    owner_id: str | None = None
    slot: str | None = Field(None, description="the slot the holder runs (ISO 8601, UTC)")
    fencing_token: int | None = Field(None, description="the live lock's current fencing token")
    expires_at_ms: int | None = Field(None, description="lease expiry, epoch milliseconds")


class LastSuccess(_Model):
    slot: str | None = None
    at_ms: int | None = Field(None, description="when the live schedule last committed, epoch milliseconds")


class LastFinished(_Model):
    slot: str | None = Field(None, description="the live schedule's last finished slot (ISO 8601, UTC)")
    outcome: str | None = Field(None, description="succeeded, failed or missed (its reason: the slot's history entry)")


class LatestPointer(_Model):
    slot: str | None = None
    generation: int | None = None
    fencing_token: int | None = None
    committed_at_ms: int | None = None


class Freshness(_Model):
    slot: str | None = Field(description="the latest result's slot, ISO 8601 UTC; null (GET /jobs): no result yet")
    committed_at_ms: int | None = Field(description="when it was committed, epoch milliseconds; null: no result yet")
    expected_next_slot: str | None = Field(description="the schedule's next firing after now, ISO 8601 UTC")
    late: bool | None = Field(
        description="the latest firing whose freshness_s grace is over has no finished slot (the watchdog's rule);"
        " null when unknown"
    )
    state: str | None = Field(description="on_time, waiting, late, failing or paused (docs/watchdog.md)")
    due_slot: str | None = Field(description="the latest firing whose grace is over, ISO 8601 UTC")
    reason: str | None = Field(description="why, in one line")


class Job(_Model):
    job: str
    schedule: Schedule | None
    lease: Lease
    paused: bool
    paused_through_slot: str | None
    last_success: LastSuccess
    last_finished: LastFinished
    latest: LatestPointer
    problem: str | None = Field(None, description="why the lock item could not be read, if it could not")
    freshness: Freshness | None = Field(
        None, description="how fresh the job is, as GET /jobs/{job}/results/latest says it (docs/watchdog.md)"
    )


class Jobs(_Model):
    jobs: list[Job]


class Column(_Model):
    name: str
    type: str = Field(description="Athena (Trino) type name, e.g. varchar, bigint, double, decimal(10,2)")


class Window(_Model):
    start: str | None
    end: str | None


class CostEstimate(_Model):
    estimated_cost_usd: float = Field(description="the total, USD: an estimate, not a bill")
    estimate: bool = Field(True, description="always true: computed from list prices and measured usage")
    by_service_usd: dict[str, float] = Field(description="athena, lambda, dynamodb, scheduler, s3 (USD)")
    usage: dict[str, float] = Field(
        description="the billed quantities: athena_billed_bytes (10 MB minimum per query, rounded up to the MB), "
        "lambda_gb_s, lambda_requests, read_units, write_units"
    )
    prices: dict[str, str] = Field(description="region, requested_region and retrieved (date) of the price table")


class Result(_Model):
    freshness: Freshness | None = Field(
        None, description="latest only: how fresh the result is; absent from a slot's and a generation's result"
    )
    job: str
    slot: str = Field(description="the schedule slot, ISO 8601 UTC (2026-11-22T00:30:00Z)")
    generation: int = Field(description="1: the live schedule's run; 2+: a deliberate re-run or backfill")
    fencing_token: int = Field(description="the token the result was committed under")
    query_execution_id: str
    committed_at_ms: int
    window: Window
    statistics: dict[str, Any] = Field(description="Athena's statistics (bytes scanned, execution times in ms)")
    row_count: int
    estimated_cost_usd: float | None = Field(
        None,
        description="an ESTIMATE of what the slot cost in USD (Athena, Lambda, DynamoDB, Scheduler, S3) from the "
        "bundled price table; null for slots committed before estimates existed",
    )
    cost: CostEstimate | None = Field(None, description="the estimate's breakdown: null when there is none")
    columns: list[Column]
    rows: list[dict[str, Any]] = Field(
        description="one object per row, values typed by column: integers, floats, decimals as exact text, "
        "dates and timestamps as ISO text, NULL as null"
    )
    assertions_failed: list[dict[str, Any]] | None = Field(
        None,
        description="the job's assertions these rows broke ({assertion, failing, detail}): the slot is FAILED and the"
        " rows, kept for inspection, were never published as latest; null for a published result",
    )


class Failure(_Model):
    status: str = Field(description="FAILED or MISSED")
    error_class: str = Field(
        description="Athena's (Trino's) error name (COLUMN_NOT_FOUND, TYPE_MISMATCH, ...), CANCELLED, the error's "
        "type (ResultTypeError, ...), or the MISSED reason (capacity, paused, too_old, overrun, superseded)"
    )
    message: str = Field(description="the whole message (may be empty)")
    summary: str = Field(description="error_class: message, on one line, cut to 160 characters")
    failing: bool = Field(description="true unless MISSED because the job was paused")


class SlotEntry(_Model):
    slot: str
    generation: int
    status: str = Field(description="REQUESTED, RUNNING, SUCCEEDED, FAILED or MISSED")
    reason: str | None = Field(
        None, description="why a slot was MISSED (too_old, overrun, superseded, paused, capacity)"
    )
    fencing_token: int | None = None
    owner_id: str | None = None
    query_execution_id: str | None = None
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    duration_ms: int | None = None
    data_scanned_bytes: int | None = None
    row_count: int | None = None
    estimated_cost_usd: float | None = Field(
        None,
        description="an ESTIMATE of what the slot cost in USD (Athena, Lambda, DynamoDB, Scheduler, S3) from the "
        "bundled price table; null for slots committed before estimates existed",
    )
    cost: CostEstimate | None = Field(None, description="the estimate's breakdown: null when there is none")
    run_kind: str | None = None
    run_id: str | None = None
    requested_by: str | None = None
    requested_at_ms: int | None = None
    request_reason: str | None = None
    error: dict[str, Any] | None = Field(None, description="the failure or miss detail the job recorded, as stored")
    failure: Failure | None = Field(None, description="a FAILED or MISSED slot's reason, read from its record")
    corrupt: str | None = None


class SlotsPage(_Model):
    job: str
    slots: list[SlotEntry] = Field(description="newest first; a status filter may leave a page short, even empty")
    next_token: str | None = Field(None, description="pass as next_token for the next page; absent on the last")
    limit: int
    filters: dict[str, str | None]


class Problem(_Model):
    type: str
    title: str
    status: int
    detail: str
    code: str
    parameter: str | None = Field(None, description="the request parameter to blame, when one is")
