"""The relationships between a job's keys that make the schedule, the lease and Lambda's retries work together:
the second pass of :class:`athena_refresh.jobspec.JobSpec`'s validation, run on the keys that passed their own
check, at synth, by ``check`` and at cold start alike.

Each rule says why the combination cannot work (:func:`relationship_problems`); :mod:`athena_refresh.job_defaults`
derives the defaults so that every rule holds. The heartbeat rule is written once, :func:`heartbeat_bound_s`:
the check, the derived default and the runtime's lock all use it. Standard library and ``slotlock.schedule`` only
(this module ships in the Lambda asset); the query's output columns come from the caller (the stack parses the
SQL with sqlglot, which the runtime does not carry).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slotlock.schedule import CronError, CronPeriod, cron_period

from . import contract
from .checks import Labels

# Relationships between the lease, the heartbeat and Lambda's asynchronous retries (defined in the
# contract because MAX_LEASE_DURATION_S derives from them).
CLOCK_SKEW_ALLOWANCE_S = contract.CLOCK_SKEW_ALLOWANCE_S
ASYNC_FIRST_RETRY_DELAY_S = contract.ASYNC_FIRST_RETRY_DELAY_S
#: Seconds the runtime keeps back from the invocation deadline for reading results and the commit.
COMMIT_RESERVE_S = contract.COMMIT_RESERVE_S
#: The shortest schedule period a job can have: a slot needs lambda_timeout_s > heartbeat + commit reserve and
#: max_slot_age_s >= lambda_timeout_s + Lambda's first async retry (60 s), both within one period. 120 s leaves
#: the default 15 s heartbeat a 60 s timeout (the derived defaults take every schedule-bound default from it).
MIN_SCHEDULE_PERIOD_S = 120


def heartbeat_bound_s(lease_duration_s: float) -> float:
    """The heartbeat must be strictly below this: ``(lease - CLOCK_SKEW_ALLOWANCE_S) / 2`` seconds.

    A renewal can be late by up to one interval (it happens at the next poll) and other racers may read expiry
    with a clock ``CLOCK_SKEW_ALLOWANCE_S`` ahead, so ``2 * heartbeat + skew < lease``.
    """
    return (lease_duration_s - CLOCK_SKEW_ALLOWANCE_S) / 2


def largest_heartbeat_s(lease_duration_s: int) -> int:
    """The largest whole heartbeat below :func:`heartbeat_bound_s` (at least 1): the derived default's ceiling."""
    return max(1, -(-(lease_duration_s - CLOCK_SKEW_ALLOWANCE_S) // 2) - 1)


def relationship_problems(
    values: Mapping[str, Any], labels: Labels, output_columns: tuple[str, ...] | None = None
) -> list[str]:
    """Problems between keys that each passed their own check (a missing/invalid key skips its rules).

    The rules, and why each configuration would not work:

    - heartbeat: the holder renews every ``heartbeat_interval_s``; a renewal can be late by up to one
      interval (it happens at the next poll) and other racers may read expiry with a clock
      ``CLOCK_SKEW_ALLOWANCE_S`` ahead, so ``2 * heartbeat + skew < lease``.
    - lease vs retry: a winner killed by its timeout leaves its lease behind; the only invocation
      left to finish the slot is Lambda's first async retry, about ``ASYNC_FIRST_RETRY_DELAY_S`` later.
      The lease (plus skew) must have expired by then, or the retry loses to a dead holder. Both are
      constants, so this is the key's own range (``contract.MAX_LEASE_DURATION_S``), not checked here.
    - period vs timeout: a slot must be able to finish before the next one starts; the runtime
      otherwise records the next slot as missed (overrun) every time.
    - event age: Lambda drops a retried event older than ``max_slot_age_s``; the first retry of a
      timed-out invocation arrives ``lambda_timeout_s + ASYNC_FIRST_RETRY_DELAY_S`` after the
      event. An event older than one period is superseded by the next slot anyway.
    - timeout vs heartbeat: the winner stops polling ``COMMIT_RESERVE_S`` before its deadline; with
      a shorter timeout than one heartbeat plus that reserve, no run ever renews its lease.
    - freshness: the watchdog calls a slot late ``freshness_s`` after its firing; a grace shorter than
      ``lambda_timeout_s`` would call a slot late while it may still legitimately run.
    - data scanned alarm: Athena cancels a query at ``bytes_scanned_cutoff_per_query``, so a threshold
      at or above it can never fire.
    - value metrics: a column is either a value or a dimension; the columns must be ``output_columns`` (the
      query's, as the stack's ``stacks.query_sql.output_columns`` finds them; ``None``: not checked);
    - assertions: ``rows_at_least`` <= ``rows_at_most``; the columns they name are output columns.
    - period: at least ``MIN_SCHEDULE_PERIOD_S``; a shorter one is one problem, and the rules that involve
      the period (timeout, slot age) are not checked against it.
    """
    problems: list[str] = []
    lease, heartbeat = values.get("lease_duration_s"), values.get("heartbeat_interval_s")
    timeout, max_age = values.get("lambda_timeout_s"), values.get("max_slot_age_s")
    schedule = values.get("schedule_expression")
    period: CronPeriod | None = None
    if schedule is not None:
        try:
            period = cron_period(schedule, values.get("schedule_timezone", "UTC"))
        except CronError as exc:
            problems.append(f"{labels.at('schedule_expression')}: {exc}, got {schedule!r}")
        else:
            if period.shortest_s < MIN_SCHEDULE_PERIOD_S:
                every = "every" if period.shortest_s == period.longest_s else "as little as"
                problems.append(
                    f"{labels.at('schedule_expression')}: fires {every} {period.shortest_s} s"
                    f"{'' if every == 'every' else ' apart'}; the shortest period a job can have is "
                    f"{MIN_SCHEDULE_PERIOD_S} s ({MIN_SCHEDULE_PERIOD_S // 60} minutes): a slot's Lambda timeout "
                    f"plus Lambda's {ASYNC_FIRST_RETRY_DELAY_S} s first retry must fit in one period, got {schedule!r}"
                )
                timeout = max_age = period = None  # their rules involve the period: one problem, not three
    if lease is not None and heartbeat is not None:
        bound = heartbeat_bound_s(lease)
        if not heartbeat < bound:
            problems.append(
                f"{labels.at('heartbeat_interval_s')}: must be below ({labels.ref('lease_duration_s')} - "
                f"{CLOCK_SKEW_ALLOWANCE_S} s clock skew allowance) / 2 = {bound:g} s, so that a renewal lands "
                f"before other racers may see the lease as expired, got {heartbeat}"
            )
    if timeout is not None and heartbeat is not None and not timeout > heartbeat + COMMIT_RESERVE_S:
        problems.append(
            f"{labels.at('lambda_timeout_s')}: must be longer than {labels.ref('heartbeat_interval_s')} + "
            f"{COMMIT_RESERVE_S} s commit reserve = {heartbeat + COMMIT_RESERVE_S} s, so that a run can renew "
            f"its lease, got {timeout}"
        )
    if timeout is not None and max_age is not None and max_age < timeout + ASYNC_FIRST_RETRY_DELAY_S:
        problems.append(
            f"{labels.at('max_slot_age_s')}: must be at least {labels.ref('lambda_timeout_s')} + "
            f"{ASYNC_FIRST_RETRY_DELAY_S} s = {timeout + ASYNC_FIRST_RETRY_DELAY_S} s, or Lambda drops the first "
            f"async retry of a timed-out invocation as too old, got {max_age}"
        )
    if period is not None:
        if timeout is not None and period.shortest_s < timeout:
            problems.append(
                f"{labels.at('lambda_timeout_s')}: must not exceed the schedule's period "
                f"({labels.ref('schedule_expression')} {schedule!r} fires {period.shortest_s} s apart), "
                f"or a slot can still run when the next one starts, got {timeout}"
            )
        if max_age is not None and max_age > period.shortest_s:
            problems.append(
                f"{labels.at('max_slot_age_s')}: must not exceed the schedule's period "
                f"({labels.ref('schedule_expression')} {schedule!r} fires {period.shortest_s} s apart): an older "
                f"delivery is superseded by the next slot, got {max_age}"
            )
    freshness = values.get("freshness_s")
    if freshness is not None and timeout is not None and freshness < timeout:
        problems.append(
            f"{labels.at('freshness_s')}: must be at least {labels.ref('lambda_timeout_s')} ({timeout} s): a slot may "
            f"run that long, so the watchdog would call every slot late while it runs, got {freshness}"
        )
    cutoff, alarms = values.get("bytes_scanned_cutoff_per_query"), values.get("alarms")
    if cutoff is not None and alarms is not None and alarms.data_scanned_bytes >= cutoff:
        problems.append(
            f"{labels.at('alarms.data_scanned_bytes')}: must be below "
            f"{labels.ref('bytes_scanned_cutoff_per_query')} ({cutoff}): Athena cancels a query at the cutoff, so "
            f"the alarm could never fire, got {alarms.data_scanned_bytes}"
        )
    value_metrics = values.get("value_metrics")
    if value_metrics is not None:
        if contract.DIMENSION_JOB in value_metrics.dimensions:
            problems.append(
                f"{labels.at('value_metrics.dimensions')}: must not name a column {contract.DIMENSION_JOB!r}: every "
                "value metric already has the job dimension"
            )
        overlap = sorted(set(value_metrics.columns) & set(value_metrics.dimensions))
        if overlap:
            problems.append(
                f"{labels.at('value_metrics.dimensions')}: must not repeat a value column, got {', '.join(overlap)}"
            )
        if output_columns is not None:
            for sub in ("columns", "dimensions"):
                unknown = [name for name in getattr(value_metrics, sub) if name not in output_columns]
                if unknown:
                    problems.append(
                        f"{labels.at('value_metrics.' + sub)}: must name output columns of {labels.ref('sql')} "
                        f"({', '.join(output_columns)}), got unknown {', '.join(unknown)}"
                    )
    assertions = values.get("assertions")
    if assertions is not None:
        low, high = assertions.rows_at_least, assertions.rows_at_most
        if low is not None and high is not None and low > high:
            problems.append(
                f"{labels.at('assertions.rows_at_most')}: must be at least rows_at_least ({low}), got {high}"
            )
        unknown = [name for name in assertions.columns if output_columns is not None and name not in output_columns]
        if unknown:
            problems.append(
                f"{labels.at('assertions')}: must name output columns of {labels.ref('sql')}"
                f" ({', '.join(output_columns or ())}), got unknown {', '.join(unknown)}"
            )
    return problems
