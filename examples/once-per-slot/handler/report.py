"""A small report for each schedule slot, computed exactly once per slot however many racers are invoked.

The stack (``app.py``) invokes this function three times per slot (three EventBridge Scheduler schedules with the
same cron expression: one missed or late delivery does not skip the slot). ``slotlock.once_per_slot`` lets exactly
one invocation win the slot's lease; only that one runs :func:`report`, whose result is committed as the slot's
summary in the lock table's history item, fenced by the winner's token. The other invocations return
``"status": "lost"`` at once, without running it. Replace :func:`build_report` with your own job.

Environment (set by ``app.py``): ``LOCK_TABLE_NAME`` (required), ``JOB_NAME`` (default ``slot-report``),
``MAX_SLOT_AGE_S`` (optional: an older delivery is recorded MISSED instead of run).

The ``slotlock`` package comes from the function's layer (``slotlock_cdk.SlotlockLayer``), boto3 from Lambda's
Python runtime.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from slotlock import Slot, SlotLock, SlotRun, once_per_slot

logger = logging.getLogger(__name__)
logger.setLevel(logging.INFO)

DEFAULT_JOB_NAME = "slot-report"


def build_report(slot: Slot, *, started_at_ms: int, previous_success_at_ms: int | None) -> dict[str, Any]:
    """The slot's report: its calendar facts (UTC) and how punctually the schedule ran it.

    ``start_delay_ms``: from the scheduled time to this run's start (delivery and cold start);
    ``since_previous_success_s``: from the job's previous successful run to this one (``None`` on the first run),
    which grows past the schedule's period when slots were missed.
    """
    scheduled = slot.datetime
    iso_year, iso_week, iso_weekday = scheduled.isocalendar()
    return {
        "slot": slot.iso,
        "date": scheduled.date().isoformat(),
        "weekday": scheduled.strftime("%A"),
        "iso_week": f"{iso_year}-W{iso_week:02d}",
        "business_day": iso_weekday <= 5,
        "start_delay_ms": started_at_ms - slot.epoch_ms,
        "since_previous_success_s": (
            None if previous_success_at_ms is None else round((started_at_ms - previous_success_at_ms) / 1000, 3)
        ),
    }


def make_lock() -> SlotLock:
    """The job's lock, built on the first invocation (not at import): settings come from the environment."""
    max_slot_age_s = os.environ.get("MAX_SLOT_AGE_S")
    return SlotLock(
        os.environ["LOCK_TABLE_NAME"],
        os.environ.get("JOB_NAME", DEFAULT_JOB_NAME),
        max_slot_age_s=float(max_slot_age_s) if max_slot_age_s else None,
    )


@once_per_slot(make_lock)
def report(run: SlotRun, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The job. Runs only in the invocation that won the slot's lease, and at most once per slot."""
    summary = build_report(
        run.lease.slot, started_at_ms=run.now_ms(), previous_success_at_ms=run.lease.last_succeeded_at_ms
    )
    run.commit(summary=summary)  # the slot SUCCEEDED with this summary, if our fencing token is still current
    return summary


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda's entry point (``report.handler``): the slot's outcome for this invocation, as JSON.

    ``status`` is ``succeeded`` for the winner (``value``: the report) and ``lost`` for the others (``reason``:
    ``held`` while the winner runs, ``slot_finished`` after its commit). Losing returns normally: a Lambda retry
    would not help. An exception (e.g. DynamoDB unreachable) releases the lease and propagates, so Lambda's
    asynchronous retries try again.
    """
    outcome = report(event, context)  # the SlotOutcome as a JSON-ready dict (once_per_slot)
    logger.info(
        "slot %s: %s%s",
        outcome["slot"],
        outcome["status"],
        f" ({outcome['reason']})" if outcome["reason"] else "",
        extra={"outcome": outcome},
    )
    return outcome
