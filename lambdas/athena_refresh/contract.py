"""Names shared by the runtime and the CDK stack: environment variables, their bounds, metrics, dimensions.

This module is dependency free (standard library only) so that ``stacks/`` can import it without
pulling in boto3 or Powertools, and so that a renamed metric or variable breaks the stack's template
tests instead of silently emptying a dashboard widget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final

# --- Storage layout shared with the stack (its IAM grants depend on it) ----------------------------
#: Key prefix of result rows too large for a DynamoDB item, in the results bucket: the runtime writes
#: ``<prefix><job>/<slot>/token-<n>.json``; the stack grants ``s3:PutObject``/``GetObject`` on exactly it.
RESULTS_S3_PREFIX: Final = "results/"
#: Results table key schema (partition key, sort key), both strings.
RESULTS_TABLE_PARTITION_KEY: Final = "job"
RESULTS_TABLE_SORT_KEY: Final = "slot"

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
ENV_QUERY_SQL: Final = "QUERY_SQL"  # no longer read (the query is the catalog spec's sql): refused when set
ENV_JOB_CATALOG_PATH: Final = "JOB_CATALOG_PATH"  # a job catalog other than the bundled one (local tools)
# Athena query result reuse, minutes (0 or unset: off). Per query, on StartQueryExecution:
# https://docs.aws.amazon.com/athena/latest/ug/reusing-query-results.html
ENV_RESULT_REUSE_MAX_AGE_MIN: Final = "RESULT_REUSE_MAX_AGE_MIN"
# Analytics values published as metrics (issue 4): comma-separated result column names.
ENV_VALUE_METRIC_COLUMNS: Final = "VALUE_METRIC_COLUMNS"  # numeric columns -> one metric each (optional)
ENV_VALUE_METRIC_DIMENSIONS: Final = "VALUE_METRIC_DIMENSIONS"  # columns whose values become dimensions
ENV_VALUE_METRIC_MAX_SERIES: Final = "VALUE_METRIC_MAX_SERIES"  # cap on dimension combinations per run
# A delivery whose scheduled time is further ahead of the runtime's clock than this is refused before any
# request (clock-skew allowance; the Scheduler never delivers early). Seconds, passed to SlotLock.
ENV_MAX_SLOT_LEAD_S: Final = "MAX_SLOT_LEAD_S"
# The job's ``[alarms]`` thresholds (issue 23): after a committed slot the runtime compares the slot's scanned bytes
# and query duration with them and counts ThresholdExceeded (deployment-wide) when either is above. Unset: off.
ENV_ALARM_DATA_SCANNED_BYTES: Final = "ALARM_DATA_SCANNED_BYTES"
ENV_ALARM_QUERY_DURATION_MS: Final = "ALARM_QUERY_DURATION_MS"
# The deployment's Athena capacity budget (issue 24, docs/protocol.md#capacity-semaphore): the same for every job of
# a deployment, from cdk.json's ``capacity`` settings. Its numbers travel in the job catalog's ``capacity`` section
# (``athena_refresh.budget.CapacityBudget``); these names are the keys of their bounds (NUMERIC_BOUNDS), and one of
# them set in the environment is refused. Permits 0: off (no semaphore request).
ENV_CAPACITY_PERMITS: Final = "CAPACITY_PERMITS"  # N permits: at most N of the deployment's queries active
ENV_CAPACITY_WAIT_IN_PLACE_S: Final = "CAPACITY_WAIT_IN_PLACE_S"  # longer waits give the slot back
ENV_CAPACITY_MANUAL_HEADROOM: Final = "CAPACITY_MANUAL_HEADROOM"  # permits a manual run leaves to live slots
ENV_CAPACITY_RETRY_DELAY_S: Final = "CAPACITY_RETRY_DELAY_S"  # a slot given back returns this much later
# The longest a query can stay active (the workgroup's DML query timeout): a permit naming no query (a start whose
# answer or record was lost may have started one) stays counted this long past its expiry.
ENV_CAPACITY_MAX_QUERY_ACTIVE_S: Final = "CAPACITY_MAX_QUERY_ACTIVE_S"
# The budget's wiring, set by the stack in the environment: the semaphore's name (default ``<account>-<region>``,
# CloudFormation pseudo parameters known at deploy time only) and the table holding the permits.
ENV_CAPACITY_SEMAPHORE_NAME: Final = "CAPACITY_SEMAPHORE_NAME"  # shared by all who share the budget
# The table holding the permits: this deployment's lock table, or another deployment's (one budget for several).
ENV_CAPACITY_TABLE_NAME: Final = "CAPACITY_TABLE_NAME"
# The delayed re-invocation of a slot given back for capacity: a one-time EventBridge Scheduler schedule that
# invokes the job's function (not a Lambda retry: never an error, never the failure queue).
ENV_DEFERRAL_ROLE_ARN: Final = "DEFERRAL_ROLE_ARN"  # the job's Scheduler role (iam:PassRole)
ENV_DEFERRAL_SCHEDULE_GROUP: Final = "DEFERRAL_SCHEDULE_GROUP"
ENV_DEFERRAL_SCHEDULE_PREFIX: Final = "DEFERRAL_SCHEDULE_PREFIX"  # the function may create schedules named so

#: The deployment's wiring, which the stack sets in the function's environment: the job's name and the
#: names of the shared resources (CDK tokens, known at deploy time only).
WIRING_ENV_VARS: Final = (
    ENV_JOB_NAME,
    ENV_LOCK_TABLE_NAME,
    ENV_RESULTS_TABLE_NAME,
    ENV_RESULTS_BUCKET_NAME,
    ENV_ATHENA_WORKGROUP,
    ENV_ATHENA_DATABASE,
    ENV_ATHENA_CATALOG,
)
#: The capacity budget's wiring and the deferral's (the same for every job but the deferral's role and prefix; set in
#: each environment, the budget off too). The budget's numbers are in the job catalog (CAPACITY_SETTING_ENV_VARS).
CAPACITY_ENV_VARS: Final = (
    ENV_CAPACITY_SEMAPHORE_NAME,
    ENV_CAPACITY_TABLE_NAME,
    ENV_DEFERRAL_ROLE_ARN,
    ENV_DEFERRAL_SCHEDULE_GROUP,
    ENV_DEFERRAL_SCHEDULE_PREFIX,
)
#: The names of the capacity budget's numbers (the keys of their bounds in :data:`NUMERIC_BOUNDS`). Their values come
#: only from the job catalog's ``capacity`` section (``athena_refresh.budget.CapacityBudget``); one of them set in
#: the environment is refused (the environment a stack set before the budget moved into the catalog).
CAPACITY_SETTING_ENV_VARS: Final = (
    ENV_CAPACITY_PERMITS,
    ENV_CAPACITY_WAIT_IN_PLACE_S,
    ENV_CAPACITY_MANUAL_HEADROOM,
    ENV_CAPACITY_RETRY_DELAY_S,
    ENV_CAPACITY_MAX_QUERY_ACTIVE_S,
)
#: The names of the job's own settings (the keys of their bounds in :data:`NUMERIC_BOUNDS`). Their values come only
#: from the job's spec in the job catalog (``athena_refresh.catalog``); one of them set in the environment is refused,
#: the local tuning (:data:`LOCAL_TUNING_ENV_VARS`) aside.
JOB_SETTING_ENV_VARS: Final = (
    ENV_LEASE_DURATION_S,
    ENV_HEARTBEAT_INTERVAL_S,
    ENV_MAX_SLOT_AGE_S,
    ENV_HISTORY_TTL_S,
    ENV_MAX_QUERY_ATTEMPTS,
    ENV_WINDOW_S,
    ENV_DATA_YEAR,
    ENV_RESULT_REUSE_MAX_AGE_MIN,
    ENV_VALUE_METRIC_COLUMNS,
    ENV_VALUE_METRIC_DIMENSIONS,
    ENV_VALUE_METRIC_MAX_SERIES,
    ENV_MAX_SLOT_LEAD_S,
    ENV_ALARM_DATA_SCANNED_BYTES,
    ENV_ALARM_QUERY_DURATION_MS,
)
#: The job settings a local run may still tune in the environment beside a catalog (a short lease and heartbeat, a
#: slot age widened for a replayed backlog: local.demo, local.chaos); every other job setting comes from the
#: catalog's typed spec, and setting one in the environment then is refused.
LOCAL_TUNING_ENV_VARS: Final = (ENV_LEASE_DURATION_S, ENV_HEARTBEAT_INTERVAL_S, ENV_MAX_SLOT_AGE_S)
#: What the stack sets in a job function's environment (its settings travel in the catalog).
STACK_ENV_VARS: Final = WIRING_ENV_VARS + CAPACITY_ENV_VARS
#: Read by the runtime besides, for tests and local tools: another catalog, and a local run's tuning.
LOCAL_ENV_VARS: Final = (ENV_JOB_CATALOG_PATH, *LOCAL_TUNING_ENV_VARS)
#: Every variable ``Settings.from_env`` reads (``QUERY_SQL``, the other job settings and the capacity budget's numbers
#: are refused when set).
ALL_ENV_VARS: Final = STACK_ENV_VARS + LOCAL_ENV_VARS

# --- Bounds of the numeric settings ----------------------------------------------------------------
# Inclusive [MIN_<VARIABLE>, MAX_<VARIABLE>] of each numeric environment variable above, in its unit.
# ``Settings.from_env`` refuses a value outside them naming the variable, and :class:`athena_refresh.jobspec.JobSpec` refuses
# the matching cdk.json key at synth time with the same numbers (integer keys: the integers in the range),
# so the stack cannot deploy a value the runtime refuses, and no accepted value can overflow a datetime or
# millisecond computation at run time. Each bound says why it is where it is.

#: Lambda retries a failed asynchronous invocation about one minute later:
#: https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html
ASYNC_FIRST_RETRY_DELAY_S: Final = 60
#: Allowance for the difference between two racers' clocks (Lambda hosts use the Amazon Time Sync
#: Service, which keeps them far closer; the allowance also absorbs request latency).
#: Seconds the winner keeps back from its invocation deadline for reading results and the commit: it stops
#: polling this long before the deadline (the job), and the stack requires timeout > heartbeat + this.
COMMIT_RESERVE_S: Final = 5
#: Lambda's default memory (MB), assumed when an invocation's context does not say.
DEFAULT_LAMBDA_MEMORY_MB: Final = 128
#: The functions' instruction set (the stack deploys them so; the cost estimate prices GB-seconds by it).
LAMBDA_ARCHITECTURE: Final = "arm64"
CLOCK_SKEW_ALLOWANCE_S: Final = 5

#: Lease, seconds. Above 0 (a lease must outlast one DynamoDB round trip: 1 s); at most the first async
#: retry's delay minus the clock-skew allowance, so the retry of a timed-out winner finds its lease expired.
MIN_LEASE_DURATION_S: Final = 1
MAX_LEASE_DURATION_S: Final = ASYNC_FIRST_RETRY_DELAY_S - CLOCK_SKEW_ALLOWANCE_S  # 55
#: Heartbeat, seconds. At least 0.1 s (each renewal is a DynamoDB write; the local harnesses renew a 2 s
#: lease every 0.5 s); at most below half of the longest lease (the heartbeat must be below half the lease).
MIN_HEARTBEAT_INTERVAL_S: Final = 0.1
MAX_HEARTBEAT_INTERVAL_S: Final = MAX_LEASE_DURATION_S // 2  # 27
#: Maximum slot age, seconds. At least Lambda's minimum MaximumEventAgeInSeconds (60 s), which the stack
#: sets from it; the stack also caps it at Lambda's maximum (21,600 s, ``athena_refresh.jobspec``). The runtime
#: allows up to 366 days because the local harnesses (``local/demo/runner.py``, ``local/chaos/harness.py``) widen it to
#: cover a replayed backlog (chaos: 200 half-hour slots + 1 h = 363,600 s); a delivery a year late is no
#: schedule slot anyone waits for.
MIN_MAX_SLOT_AGE_S: Final = 60
MAX_MAX_SLOT_AGE_S: Final = 366 * 86_400  # 31,622,400
#: Bounds of a job's ``freshness_s`` (the watchdog's grace): a minute, a year.
MIN_FRESHNESS_S: Final = 60
MAX_FRESHNESS_S: Final = 366 * 86_400
#: History TTL, seconds. At least one minute; at most 10 years (3650 days): longer is an archive, not a
#: history, and ``now + ttl`` stays a small epoch for DynamoDB's TTL attribute.
MIN_HISTORY_TTL_S: Final = 60
MAX_HISTORY_TTL_S: Final = 3650 * 86_400  # 315,360,000
#: Query attempts per slot: each attempt is a billed query and must fit the slot's invocation.
MIN_MAX_QUERY_ATTEMPTS: Final = 1
MAX_MAX_QUERY_ATTEMPTS: Final = 10
#: Query window, seconds. At least one minute; at most 366 days (a year, leap day included): a longer
#: window is no refresh, and ``slot - window`` stays a valid timestamp for every slot year 1970..9999 and
#: every data year (``datetime`` would overflow for e.g. 10**12 s).
MIN_WINDOW_S: Final = 60
MAX_WINDOW_S: Final = 366 * 86_400  # 31,622,400
#: Data year onto which slots are mapped: a plausible data year, so mapped windows stay valid timestamps.
MIN_DATA_YEAR: Final = 1900
MAX_DATA_YEAR: Final = 2100
#: Athena query result reuse, minutes: 0 is off; 10080 (7 days) is ResultReuseByAgeConfiguration's
#: MaxAgeInMinutes maximum: https://docs.aws.amazon.com/athena/latest/APIReference/API_ResultReuseByAgeConfiguration.html
MIN_RESULT_REUSE_MAX_AGE_MIN: Final = 0
MAX_RESULT_REUSE_MAX_AGE_MIN: Final = 10_080
#: Distinct dimension combinations published per run: each one is a billed custom metric per value column.
MIN_VALUE_METRIC_MAX_SERIES: Final = 1
MAX_VALUE_METRIC_MAX_SERIES: Final = 50
#: Slot lead allowance, seconds: 0 refuses any lead; a minute is far above any clock skew (the Scheduler
#: never delivers early), and a larger lead would let a future slot make the current one lose as superseded.
MIN_MAX_SLOT_LEAD_S: Final = 0
MAX_MAX_SLOT_LEAD_S: Final = 60
DEFAULT_MAX_SLOT_LEAD_S: Final = 5
#: Alarm thresholds (``[alarms]`` of the job): at least 1 (a threshold of 0 would flag every slot); scanned bytes
#: below int64's maximum, because the stack requires the threshold below the workgroup's
#: ``bytes_scanned_cutoff_per_query`` (an int64); a query duration of at most a day (Athena's longest DML timeout
#: is far shorter). Integers: the bounds are exact ints, so no float rounding near 2**63.
MIN_ALARM_DATA_SCANNED_BYTES: Final = 1
MAX_ALARM_DATA_SCANNED_BYTES: Final = 2**63 - 2
MIN_ALARM_QUERY_DURATION_MS: Final = 1
MAX_ALARM_QUERY_DURATION_MS: Final = 24 * 3600 * 1000
#: Capacity permits: 0 (off) to 99 (one BatchGetItem reads the permits and the tickets item: 100 keys). The default
#: is well under Athena's documented example quota of 25 active DML queries (running + queued, shared by every
#: workgroup of the account in the Region; the 26th gets TooManyRequestsException):
#: https://docs.aws.amazon.com/athena/latest/ug/service-limits.html (each Region's value: Service Quotas).
MIN_CAPACITY_PERMITS: Final = 0
MAX_CAPACITY_PERMITS: Final = 99
DEFAULT_CAPACITY_PERMITS: Final = 10
#: Waiting in place for a permit, seconds (billed Lambda time); past it the slot is given back and comes back later.
MIN_CAPACITY_WAIT_IN_PLACE_S: Final = 0
MAX_CAPACITY_WAIT_IN_PLACE_S: Final = 900  # Lambda's maximum timeout
DEFAULT_CAPACITY_WAIT_IN_PLACE_S: Final = 60
#: Permits a manual run (rerun, backfill) leaves free for the live schedule.
MIN_CAPACITY_MANUAL_HEADROOM: Final = 0
MAX_CAPACITY_MANUAL_HEADROOM: Final = 98
DEFAULT_CAPACITY_MANUAL_HEADROOM: Final = 2
#: Delay of the re-invocation of a slot given back, seconds: EventBridge Scheduler's one-time ``at()`` schedules
#: have minute granularity (https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html#one-time).
MIN_CAPACITY_RETRY_DELAY_S: Final = 60
MAX_CAPACITY_RETRY_DELAY_S: Final = 3600
DEFAULT_CAPACITY_RETRY_DELAY_S: Final = 120
#: The longest a query stays QUEUED or RUNNING, seconds: Athena cancels a DML query at its timeout, 30 minutes by
#: default, adjustable up to 240 (https://docs.aws.amazon.com/athena/latest/ug/service-limits.html and
#: https://docs.aws.amazon.com/general/latest/gr/athena.html). Set it to your quota if you raised it.
MIN_CAPACITY_MAX_QUERY_ACTIVE_S: Final = 60
MAX_CAPACITY_MAX_QUERY_ACTIVE_S: Final = 240 * 60
DEFAULT_CAPACITY_MAX_QUERY_ACTIVE_S: Final = 30 * 60

#: At most this many job stacks (two digits in their names; CloudFormation allows 2,000 stacks per Region): a job's
#: ``stack_group`` is below it (``stacks.job_groups``).
MAX_JOB_STACKS: Final = 100

#: Every numeric variable with its inclusive bounds (docs/configuration.md's job.toml table lists them).
NUMERIC_BOUNDS: Final[Mapping[str, tuple[float, float]]] = MappingProxyType(
    {
        ENV_LEASE_DURATION_S: (MIN_LEASE_DURATION_S, MAX_LEASE_DURATION_S),
        ENV_HEARTBEAT_INTERVAL_S: (MIN_HEARTBEAT_INTERVAL_S, MAX_HEARTBEAT_INTERVAL_S),
        ENV_MAX_SLOT_AGE_S: (MIN_MAX_SLOT_AGE_S, MAX_MAX_SLOT_AGE_S),
        ENV_HISTORY_TTL_S: (MIN_HISTORY_TTL_S, MAX_HISTORY_TTL_S),
        ENV_MAX_QUERY_ATTEMPTS: (MIN_MAX_QUERY_ATTEMPTS, MAX_MAX_QUERY_ATTEMPTS),
        ENV_WINDOW_S: (MIN_WINDOW_S, MAX_WINDOW_S),
        ENV_DATA_YEAR: (MIN_DATA_YEAR, MAX_DATA_YEAR),
        ENV_RESULT_REUSE_MAX_AGE_MIN: (MIN_RESULT_REUSE_MAX_AGE_MIN, MAX_RESULT_REUSE_MAX_AGE_MIN),
        ENV_VALUE_METRIC_MAX_SERIES: (MIN_VALUE_METRIC_MAX_SERIES, MAX_VALUE_METRIC_MAX_SERIES),
        ENV_MAX_SLOT_LEAD_S: (MIN_MAX_SLOT_LEAD_S, MAX_MAX_SLOT_LEAD_S),
        ENV_ALARM_DATA_SCANNED_BYTES: (MIN_ALARM_DATA_SCANNED_BYTES, MAX_ALARM_DATA_SCANNED_BYTES),
        ENV_ALARM_QUERY_DURATION_MS: (MIN_ALARM_QUERY_DURATION_MS, MAX_ALARM_QUERY_DURATION_MS),
        ENV_CAPACITY_PERMITS: (MIN_CAPACITY_PERMITS, MAX_CAPACITY_PERMITS),
        ENV_CAPACITY_WAIT_IN_PLACE_S: (MIN_CAPACITY_WAIT_IN_PLACE_S, MAX_CAPACITY_WAIT_IN_PLACE_S),
        ENV_CAPACITY_MANUAL_HEADROOM: (MIN_CAPACITY_MANUAL_HEADROOM, MAX_CAPACITY_MANUAL_HEADROOM),
        ENV_CAPACITY_RETRY_DELAY_S: (MIN_CAPACITY_RETRY_DELAY_S, MAX_CAPACITY_RETRY_DELAY_S),
        ENV_CAPACITY_MAX_QUERY_ACTIVE_S: (MIN_CAPACITY_MAX_QUERY_ACTIVE_S, MAX_CAPACITY_MAX_QUERY_ACTIVE_S),
    }
)

# --- Observability ---------------------------------------------------------------------------------
# Every metric name + dimension set is a CloudWatch custom metric, billed per month (prorated by the hours in
# which it is published: https://aws.amazon.com/cloudwatch/pricing/). So (issue 23) the runtime emits only what
# an alarm or the dashboard needs: three metrics per job, three deployment-wide counts that occur rarely; every
# other fact of an invocation is a field of its one structured log line (LOG_ONLY_FIELDS), queried with the Logs
# Insights queries of ``athena_refresh.log_queries`` (docs/observability.md).
SERVICE_NAME: Final = "athena-refresh"  # POWERTOOLS_SERVICE_NAME, and the EMF "service" dimension
METRICS_NAMESPACE: Final = "ScheduledAthenaRefresh"  # POWERTOOLS_METRICS_NAMESPACE
# The job's result values (one metric per configured value column, dimensions: job + the configured
# dimension columns) live in their own namespace, so the dashboard's SEARCH expressions cannot match
# the operational metrics above.
VALUES_NAMESPACE: Final = "ScheduledAthenaRefresh/Values"
DIMENSION_SERVICE: Final = "service"
DIMENSION_JOB: Final = "job"
#: Formerly the dimension of LostRace and SlotMissed; no metric carries it any more (the reason is the log
#: line's ``reason`` field). Kept for readers of older metrics.
DIMENSION_REASON: Final = "reason"

# --- Emitted: per job (dimensions service + job) ---
# Age of the last successful run, emitted by every invocation of the live schedule (losers read it from the lock
# item they already touched), so "no success for two periods" is alarmable: CloudWatch has no time-since metric.
METRIC_LAST_SUCCESS_AGE_S: Final = "LastSuccessAgeS"  # unit Seconds
METRIC_QUERY_DURATION_MS: Final = "QueryDurationMs"  # unit Milliseconds; the winner, once per committed slot
METRIC_DATA_SCANNED_BYTES: Final = "DataScannedBytes"  # unit Bytes; the winner, once per committed slot
# --- Emitted: deployment-wide (dimension service only, no job: one metric each for the whole deployment) ---
# Counts (unit Count), emitted only when they happen; the log line names the job.
METRIC_STALE_WRITE_REJECTED: Final = "StaleWriteRejected"  # a holder's commit carried a superseded token
METRIC_CORRUPT_LOCK_ITEM: Final = "CorruptLockItem"  # a tampered/invalid stored item was found
METRIC_THRESHOLD_EXCEEDED: Final = "ThresholdExceeded"  # a committed slot went above an [alarms] threshold
# The capacity semaphore's (issue 24), once per permit taken (never per job: statistics p50/p95 across jobs).
METRIC_PERMITS_IN_USE: Final = "PermitsInUse"  # unit Count: permits held just after the take (ours included)
METRIC_PERMIT_WAIT_MS: Final = "PermitWaitMs"  # unit Milliseconds: how long the slot waited for its permit

#: Per-job metrics: dimensions service + job. Opt-in per job (``per_job_metrics = true`` in job.toml or
#: jobs/defaults.toml, issue 35): each is a billed custom metric, and their facts are fields of the log line anyway.
JOB_METRICS: Final = (METRIC_LAST_SUCCESS_AGE_S, METRIC_DATA_SCANNED_BYTES, METRIC_QUERY_DURATION_MS)
#: Deployment-wide metrics: dimension service only.
DEPLOYMENT_METRICS: Final = (
    METRIC_STALE_WRITE_REJECTED,
    METRIC_CORRUPT_LOCK_ITEM,
    METRIC_THRESHOLD_EXCEEDED,
    METRIC_PERMITS_IN_USE,
    METRIC_PERMIT_WAIT_MS,
)
#: Every metric the runtime emits in METRICS_NAMESPACE (the value metrics aside).
ALL_METRICS: Final = JOB_METRICS + DEPLOYMENT_METRICS

# --- The freshness watchdog's (athena_refresh.watchdog): deployment-wide, dimension service only, once per run ---
METRIC_JOBS_LATE: Final = "JobsLate"  # unit Count: jobs whose latest due slot has not finished in its grace
METRIC_JOBS_FAILING: Final = "JobsFailing"  # unit Count: jobs whose last finished slot failed (or MISSED, not paused)
METRIC_OLDEST_LATENESS_S: Final = "OldestLatenessS"  # unit Seconds: how long past its grace the latest job is
METRIC_WATCHDOG_RUNS: Final = "WatchdogRuns"  # unit Count: 1 per run (the heartbeat its own alarm watches)
WATCHDOG_METRICS: Final = (METRIC_JOBS_LATE, METRIC_JOBS_FAILING, METRIC_OLDEST_LATENESS_S, METRIC_WATCHDOG_RUNS)
#: The watchdog's own lock (``lock#athena-once-watchdog``) and history; no job folder may take this name.
WATCHDOG_JOB_NAME: Final = "athena-once-watchdog"
#: The watchdog's invocations per schedule slot (one winner under its lock; the second covers a lost invocation).
WATCHDOG_RACERS: Final = 2
#: The watchdog function's timeout and memory (the stack deploys them, ``make cost`` prices them, the local world
#: runs with them). 1,000 jobs: about 30 BatchGetItem requests, a few writes and one Publish.
WATCHDOG_TIMEOUT_S: Final = 120
WATCHDOG_MEMORY_MB: Final = 256
#: The watchdog's environment: the alarm topic it notifies and the stack named in its commands.
ENV_ALARM_TOPIC_ARN: Final = "ALARM_TOPIC_ARN"
ENV_DEPLOYMENT_STACK: Final = "DEPLOYMENT_STACK"
#: The watchdog's period: half the shortest job period, bounded to [5, 15] minutes (a multiple of 5 minutes).
MIN_WATCHDOG_PERIOD_S: Final = 300
MAX_WATCHDOG_PERIOD_S: Final = 900


def watchdog_period_s(shortest_job_periods_s: Iterable[int]) -> int:
    """The watchdog's period in seconds for jobs whose shortest schedule periods are ``shortest_job_periods_s``
    (seconds, ``slotlock.schedule.cron_period(...).shortest_s``): half the shortest, bounded to
    [:data:`MIN_WATCHDOG_PERIOD_S`, :data:`MAX_WATCHDOG_PERIOD_S`] (5, 15 minutes) and rounded down to a multiple
    of 5 minutes, a cron minute step that divides the hour (``cron(0/<minutes> * * * ? *)``). No jobs: 15 minutes.

    The one rule: the stack schedules the watchdog with it (``stacks.constructs.watchdog``) and ``make cost``
    prices the watchdog's runs with it (``athena_refresh.cost.WatchdogModel.for_jobs``).
    """
    shortest = min(shortest_job_periods_s, default=MAX_WATCHDOG_PERIOD_S * 2)
    bounded = min(max(shortest // 2, MIN_WATCHDOG_PERIOD_S), MAX_WATCHDOG_PERIOD_S)
    return bounded - bounded % 300


#: Logs Insights queries each view of the deployment's dashboard runs over the one job log group (its "Latest runs"
#: widget and the picked job's runs, stacks/constructs/dashboard.py): what ``make cost`` bills per view.
DASHBOARD_LOG_QUERIES_PER_VIEW: Final = 2
#: A job is stale when its last success is older than this many schedule periods (its longest gap,
#: ``slotlock.schedule.cron_period``): the opt-in per-job ``NoRecentSuccess`` alarm's rule
#: (``slotlock_cdk.OncePerSlotSchedule``, given this number). The dashboard's overview says the watchdog's freshness
#: instead, as the read API's ``latest`` does (``results_api.freshness``).
STALE_AFTER_PERIODS: Final = 2

# --- No longer emitted: former metrics, now fields of the invocation's log line (LOG_ONLY_FIELDS) ---
# The names stay so that a reader of an older dashboard, or of metrics still in CloudWatch, finds them.
METRIC_LEASE_ACQUIRED: Final = "LeaseAcquired"
METRIC_LOST_RACE: Final = "LostRace"
METRIC_TAKEOVER: Final = "Takeover"
METRIC_QUERY_ADOPTED: Final = "QueryAdopted"
METRIC_LEASE_LOST: Final = "LeaseLost"
METRIC_RUN_SUCCEEDED: Final = "RunSucceeded"
METRIC_RUN_FAILED: Final = "RunFailed"
METRIC_SLOT_MISSED: Final = "SlotMissed"
METRIC_QUERIES_STARTED: Final = "QueriesStarted"
METRIC_ROWS_STORED: Final = "RowsStored"
METRIC_VALUE_SERIES_DROPPED: Final = "ValueSeriesDropped"
METRIC_ESTIMATED_COST_USD: Final = "EstimatedCostUSD"
#: The former metrics that are log fields now (none of them is emitted).
RETIRED_METRICS: Final = (
    METRIC_LEASE_ACQUIRED,
    METRIC_LOST_RACE,
    METRIC_TAKEOVER,
    METRIC_QUERY_ADOPTED,
    METRIC_LEASE_LOST,
    METRIC_RUN_SUCCEEDED,
    METRIC_RUN_FAILED,
    METRIC_SLOT_MISSED,
    METRIC_QUERIES_STARTED,
    METRIC_ROWS_STORED,
    METRIC_VALUE_SERIES_DROPPED,
    METRIC_ESTIMATED_COST_USD,
)

# --- The invocation's structured log line: "slot <iso>: <status>" (one per invocation) ---
# Keys every line of the invocation carries (Powertools appended keys), then the line's own fields. A field whose
# value is unknown for the outcome (e.g. rows_stored for a loser) is absent from the line, not null.
LOG_MESSAGE_PREFIX: Final = "slot "  # the line's message: f"slot {slot_iso}: {outcome}"
LOG_FIELD_JOB: Final = "job"
LOG_FIELD_SLOT: Final = "slot"
LOG_FIELD_OUTCOME: Final = "outcome"  # succeeded, failed, lost, missed, lease_lost, stale_rejected, corrupt,
# unsupported_schema (an item of a newer table layout), deferred
LOG_FIELD_REASON: Final = "reason"  # lost: LOSS_REASONS; missed: MISSED_REASONS; failed/lease_lost/...: why
LOG_FIELD_FENCING_TOKEN: Final = "fencing_token"
LOG_FIELD_QUERY_EXECUTION_ID: Final = "query_execution_id"
LOG_FIELD_GENERATION: Final = "generation"
LOG_FIELD_LEASE_ACQUIRED: Final = "lease_acquired"  # bool: this invocation held the slot's lease (was LeaseAcquired)
LOG_FIELD_TAKEOVER: Final = "takeover"  # bool: it took over an expired lease (was Takeover)
LOG_FIELD_QUERY_ADOPTED: Final = "query_adopted"  # bool: it adopted a predecessor's query (was QueryAdopted)
LOG_FIELD_QUERIES_STARTED: Final = "queries_started"  # int: queries it started (was QueriesStarted)
LOG_FIELD_DATA_SCANNED_BYTES: Final = "data_scanned_bytes"  # int: its query's statistics, once it finished
LOG_FIELD_QUERY_DURATION_MS: Final = "query_duration_ms"  # int: likewise
LOG_FIELD_ROWS_STORED: Final = "rows_stored"  # int: rows committed (was RowsStored)
LOG_FIELD_ESTIMATED_COST_USD: Final = (
    "estimated_cost_usd"  # float: the committed slot's estimate (was EstimatedCostUSD)
)
LOG_FIELD_VALUE_SERIES_DROPPED: Final = (
    "value_series_dropped"  # int: value series over the cap (was ValueSeriesDropped)
)
LOG_FIELD_THRESHOLD_EXCEEDED: Final = (
    "threshold_exceeded"  # "DataScannedBytes", "QueryDurationMs" or both, comma-separated
)
# A slot recorded MISSED by this invocation (was SlotMissed + reason): on the line of a "missed" outcome, and on the
# warning a winner writes when its acquisition recorded an older, dead holder's slot MISSED "superseded" (or
# "capacity": that slot was given back for capacity and its comeback never came).
LOG_FIELD_MISSED_SLOT: Final = "missed_slot"
LOG_FIELD_MISSED_REASON: Final = "missed_reason"  # one of MISSED_REASONS
# The capacity budget (issue 24): the slot's own wait for its permit, and what became of it.
LOG_FIELD_PERMIT_WAIT_MS: Final = "permit_wait_ms"  # int: ms this slot waited for its permit (all invocations)
LOG_FIELD_PERMIT: Final = "permit"  # str: how it holds it (free, reclaimed, inherited, held); absent: none, or off
LOG_FIELD_CAPACITY_DEFERRALS: Final = "capacity_deferrals"  # int: times the slot was given back for capacity
# int: expired permits whose query the reclaim check could not read (athena_refresh.reclaim): not reclaimable now
LOG_FIELD_PERMIT_QUERIES_UNREADABLE: Final = "permit_queries_unreadable"
#: The line's keys that existed before issue 23 (kept).
LOG_FIELDS: Final = (
    LOG_FIELD_JOB,
    LOG_FIELD_SLOT,
    LOG_FIELD_OUTCOME,
    LOG_FIELD_REASON,
    LOG_FIELD_FENCING_TOKEN,
    LOG_FIELD_QUERY_EXECUTION_ID,
)
#: The facts that are log fields only (formerly metrics, or new): the Logs Insights queries filter on them.
LOG_ONLY_FIELDS: Final = (
    LOG_FIELD_LEASE_ACQUIRED,
    LOG_FIELD_TAKEOVER,
    LOG_FIELD_QUERY_ADOPTED,
    LOG_FIELD_QUERIES_STARTED,
    LOG_FIELD_DATA_SCANNED_BYTES,
    LOG_FIELD_QUERY_DURATION_MS,
    LOG_FIELD_ROWS_STORED,
    LOG_FIELD_ESTIMATED_COST_USD,
    LOG_FIELD_VALUE_SERIES_DROPPED,
    LOG_FIELD_THRESHOLD_EXCEEDED,
    LOG_FIELD_MISSED_SLOT,
    LOG_FIELD_MISSED_REASON,
    LOG_FIELD_PERMIT_WAIT_MS,
    LOG_FIELD_PERMIT,
    LOG_FIELD_CAPACITY_DEFERRALS,
    LOG_FIELD_PERMIT_QUERIES_UNREADABLE,
)

# Why a racer did not run the slot (values of the log line's "reason" when its outcome is "lost").
LOSS_REASONS: Final = (
    "held",  # another owner holds an unexpired lease for this slot
    "overrun",  # an older slot's holder is still running
    "slot_finished",  # this slot already completed or failed for good
    "superseded",  # a newer slot already acquired or finished
    "conflict",  # every answer was a transaction in flight on the lock item (the holder's commit)
    "unavailable",  # DynamoDB throttled or failed the acquisition past the loser's short retry budget
    "paused",  # an operator paused the job (one racer records the slot MISSED "paused")
    "busy",  # (manual runs) another manual run of the job holds the manual lease
)
# Why a slot did not run at all (values of the log line's "missed_reason", and "reason" of a "missed" outcome).
MISSED_REASONS: Final = (
    "too_old",  # the delivery arrived later than the maximum slot age
    "overrun",  # every racer lost to an older slot's holder
    "superseded",  # a newer slot took the lock while this slot was unfinished
    "paused",  # an operator paused the job
    "capacity",  # no capacity permit before the slot's maximum age, or given back for one and never re-run (issue 24)
)
