"""Names shared by the runtime and the CDK stack: environment variables, metrics, dimensions.

This module is dependency free (standard library only) so that ``stacks/`` can import it without
pulling in boto3 or Powertools, and so that a renamed metric or variable breaks the stack's template
tests instead of silently emptying a dashboard widget.
"""

from __future__ import annotations

from typing import Final

# --- Environment variables read by ``athena_refresh.settings.Settings.from_env`` -------------------
ENV_JOB_NAME: Final = "JOB_NAME"
ENV_LOCK_TABLE_NAME: Final = "LOCK_TABLE_NAME"
ENV_RESULTS_TABLE_NAME: Final = "RESULTS_TABLE_NAME"
ENV_RESULTS_BUCKET_NAME: Final = "RESULTS_BUCKET_NAME"  # large results overflow here (optional)
ENV_LEASE_DURATION_S: Final = "LEASE_DURATION_S"
ENV_HEARTBEAT_INTERVAL_S: Final = "HEARTBEAT_INTERVAL_S"
ENV_MAX_SLOT_AGE_S: Final = "MAX_SLOT_AGE_S"
ENV_HISTORY_TTL_S: Final = "HISTORY_TTL_S"
ENV_MAX_QUERY_ATTEMPTS: Final = "MAX_QUERY_ATTEMPTS"
ENV_WINDOW_S: Final = "WINDOW_S"
ENV_DATA_YEAR: Final = "DATA_YEAR"  # the slot is mapped onto this year of the data's timeline
ENV_ATHENA_WORKGROUP: Final = "ATHENA_WORKGROUP"
ENV_ATHENA_DATABASE: Final = "ATHENA_DATABASE"
ENV_ATHENA_CATALOG: Final = "ATHENA_CATALOG"
ENV_QUERY_SQL: Final = "QUERY_SQL"
# Athena query result reuse, minutes (0 or unset: off). Per query, on StartQueryExecution:
# https://docs.aws.amazon.com/athena/latest/ug/reusing-query-results.html
ENV_RESULT_REUSE_MAX_AGE_MIN: Final = "RESULT_REUSE_MAX_AGE_MIN"
# Analytics values published as metrics (issue 4): comma-separated result column names.
ENV_VALUE_METRIC_COLUMNS: Final = "VALUE_METRIC_COLUMNS"  # numeric columns -> one metric each (optional)
ENV_VALUE_METRIC_DIMENSIONS: Final = "VALUE_METRIC_DIMENSIONS"  # columns whose values become dimensions
ENV_VALUE_METRIC_MAX_SERIES: Final = "VALUE_METRIC_MAX_SERIES"  # cap on dimension combinations per run

ALL_ENV_VARS: Final = (
    ENV_JOB_NAME,
    ENV_LOCK_TABLE_NAME,
    ENV_RESULTS_TABLE_NAME,
    ENV_RESULTS_BUCKET_NAME,
    ENV_LEASE_DURATION_S,
    ENV_HEARTBEAT_INTERVAL_S,
    ENV_MAX_SLOT_AGE_S,
    ENV_HISTORY_TTL_S,
    ENV_MAX_QUERY_ATTEMPTS,
    ENV_WINDOW_S,
    ENV_DATA_YEAR,
    ENV_ATHENA_WORKGROUP,
    ENV_ATHENA_DATABASE,
    ENV_ATHENA_CATALOG,
    ENV_QUERY_SQL,
    ENV_RESULT_REUSE_MAX_AGE_MIN,
    ENV_VALUE_METRIC_COLUMNS,
    ENV_VALUE_METRIC_DIMENSIONS,
    ENV_VALUE_METRIC_MAX_SERIES,
)

# --- Observability ---------------------------------------------------------------------------------
SERVICE_NAME: Final = "athena-refresh"  # POWERTOOLS_SERVICE_NAME, and the EMF "service" dimension
METRICS_NAMESPACE: Final = "ScheduledAthenaRefresh"  # POWERTOOLS_METRICS_NAMESPACE
# The job's result values (one metric per configured value column, dimensions: job + the configured
# dimension columns) live in their own namespace, so the dashboard's SEARCH expressions cannot match
# the operational metrics above.
VALUES_NAMESPACE: Final = "ScheduledAthenaRefresh/Values"
DIMENSION_SERVICE: Final = "service"
DIMENSION_JOB: Final = "job"
DIMENSION_REASON: Final = "reason"  # only on METRIC_LOST_RACE and METRIC_SLOT_MISSED

# Counts (unit Count)
METRIC_LEASE_ACQUIRED: Final = "LeaseAcquired"
METRIC_LOST_RACE: Final = "LostRace"  # dimension reason: one of LOSS_REASONS
METRIC_TAKEOVER: Final = "Takeover"
METRIC_QUERY_ADOPTED: Final = "QueryAdopted"
METRIC_STALE_WRITE_REJECTED: Final = "StaleWriteRejected"
METRIC_LEASE_LOST: Final = "LeaseLost"
METRIC_RUN_SUCCEEDED: Final = "RunSucceeded"
METRIC_RUN_FAILED: Final = "RunFailed"
METRIC_SLOT_MISSED: Final = "SlotMissed"  # dimension reason: one of MISSED_REASONS
METRIC_QUERIES_STARTED: Final = "QueriesStarted"
METRIC_ROWS_STORED: Final = "RowsStored"
METRIC_CORRUPT_LOCK_ITEM: Final = "CorruptLockItem"  # a tampered/invalid lock item was found (alarm)
METRIC_VALUE_SERIES_DROPPED: Final = "ValueSeriesDropped"  # result rows beyond VALUE_METRIC_MAX_SERIES
# Measurements
METRIC_QUERY_DURATION_MS: Final = "QueryDurationMs"  # unit Milliseconds
METRIC_DATA_SCANNED_BYTES: Final = "DataScannedBytes"  # unit Bytes
# Age of the last successful run, emitted by every invocation (losers read it from the lock item they
# already touched), so "no success for two periods" is alarmable: CloudWatch has no time-since metric.
METRIC_LAST_SUCCESS_AGE_S: Final = "LastSuccessAgeS"  # unit Seconds

#: Every metric the runtime emits (the dashboard graphs each one).
ALL_METRICS: Final = (
    METRIC_LEASE_ACQUIRED,
    METRIC_LOST_RACE,
    METRIC_TAKEOVER,
    METRIC_QUERY_ADOPTED,
    METRIC_STALE_WRITE_REJECTED,
    METRIC_LEASE_LOST,
    METRIC_RUN_SUCCEEDED,
    METRIC_RUN_FAILED,
    METRIC_SLOT_MISSED,
    METRIC_QUERIES_STARTED,
    METRIC_ROWS_STORED,
    METRIC_CORRUPT_LOCK_ITEM,
    METRIC_VALUE_SERIES_DROPPED,
    METRIC_QUERY_DURATION_MS,
    METRIC_DATA_SCANNED_BYTES,
    METRIC_LAST_SUCCESS_AGE_S,
)

# Why a racer did not run the slot (values of the "reason" dimension of LostRace).
LOSS_REASONS: Final = (
    "held",  # another owner holds an unexpired lease for this slot
    "overrun",  # an older slot's holder is still running
    "slot_finished",  # this slot already completed or failed for good
    "superseded",  # a newer slot already acquired or finished
)
# Why a slot did not run at all (values of the "reason" dimension of SlotMissed).
MISSED_REASONS: Final = (
    "too_old",  # the delivery arrived later than the maximum slot age
    "overrun",  # every racer lost to an older slot's holder
    "superseded",  # a newer slot took the lock while this slot was unfinished
)
