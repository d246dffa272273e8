"""The freshness watchdog: one scheduled function per deployment, under its own once-per-slot lock, that reads every
job's lock and slot items, decides per job (:mod:`athena_refresh.freshness`), emits the deployment-wide metrics and
notifies each change of a job's state once to the alarm topic.

One run (:func:`watch`), ``N`` jobs of the catalog:

1. ``BatchGetItem`` of ``lock#<job>`` and ``watchdog#<job>`` (the state last notified), 100 keys per request;
2. ``BatchGetItem`` of the slot items worth reading: the newest firings after the lock item's last finished slot
   (:func:`~athena_refresh.freshness.recent_firings`, at most 4 a job) and a failed last slot's item (its reason).
   No ``Scan`` and no ``Query``: every key is known from the schedule;
3. :func:`~athena_refresh.freshness.decide` per job;
4. per job whose state changed: one conditional ``UpdateItem`` of ``watchdog#<job>`` (``#state = :old``, or absent);
   only the run that wins it notifies. The item keeps ``published`` false until the notification is sent, so a run
   that died between the write and ``Publish`` is completed by the next run: delivery is at least once;
5. one SNS ``Publish`` naming every changed job (its state, reason, last success and the command to look closer),
   then ``published`` set to true;
6. the metrics ``JobsLate``, ``JobsFailing`` and ``WatchdogRuns`` (dimension service only) every run, and
   ``OldestLatenessS`` only in a run that finds a job late or failing (no alarm reads it; custom metrics are billed
   for the hours they are sent in, https://aws.amazon.com/cloudwatch/pricing/, so a healthy deployment pays none).

A job seen for the first time records ``first_seen_ms`` (a job deployed after its due firing is not late) and is
notified only when it is late or failing. Every write of ``watchdog#<job>`` sets its ``ttl_epoch_s`` (the lock
table's TTL attribute) :data:`WATCH_ITEM_TTL_S` ahead; a run that reads it with less than half of that left pushes it
back (one ``UpdateItem`` per job every 15 days, none per run). The item of a job removed from the catalog is never
read again, so DynamoDB's TTL deletes it ("typically within two days of expiration", UpdateTimeToLive:
https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTimeToLive.html); no ``Scan`` looks for it. Items ``watchdog#<job>`` never carry ``job`` and ``slot_epoch_s`` together,
so the history index never lists them. https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchGetItem.html
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from botocore.exceptions import ClientError

from slotlock import codec
from slotlock import table as lock_table
from slotlock.slot import Slot

from . import contract
from .catalog import CatalogQuery
from .freshness import JobState, JobWatch, Observed, SlotRecord, Verdict, decide, recent_firings

__all__ = [
    "RECENT_SLOTS",
    "WATCH_KEY_PREFIX",
    "WatchReport",
    "WatchdogDeps",
    "job_watches",
    "notification",
    "observed_from_items",
    "watch",
    "watch_key",
]

WATCH_KEY_PREFIX: Final = "watchdog#"
BATCH_KEYS: Final = 100  # BatchGetItem's maximum per request
MAX_BATCH_ATTEMPTS: Final = 5  # UnprocessedKeys retried with backoff this many times, then TransientWatchError
RECENT_SLOTS: Final = 4
#: A ``watchdog#<job>`` item expires this long after its last write (seconds); runs refresh it past half of it.
WATCH_ITEM_TTL_S: Final = 30 * 24 * 3600
Emit = Callable[[str, str, float], None]  # (metric name, unit, value)


class WatchdogError(Exception):
    """Base of the watchdog's errors."""


class TransientWatchError(WatchdogError):
    """DynamoDB left keys unprocessed after every attempt: Lambda's retry runs the slot again (nothing is lost)."""


def watch_key(job: str) -> str:
    """Partition key of the watchdog's item of ``job``: the state last notified, ``published``, ``first_seen_ms``."""
    return f"{WATCH_KEY_PREFIX}{job}"


def job_watches(catalog: Mapping[str, CatalogQuery]) -> list[JobWatch]:
    """Each job of the (read side's) catalog that has a schedule, as a :class:`JobWatch`. A catalog written before
    the watchdog (no ``freshness_s``) falls back to one shortest period plus 300 s, ``max_slot_age_s`` one period."""
    from slotlock.schedule import cron_period

    watches = []
    for name, query in sorted(catalog.items()):
        schedule = query.schedule
        if schedule is None:
            continue
        # The period (years of firings scanned) only for a catalog without max_slot_age_s: the read side builds
        # these per request (results_api.freshness).
        age = schedule.max_slot_age_s or cron_period(schedule.expression, schedule.timezone).shortest_s
        grace = schedule.freshness_s or age + 300
        watches.append(JobWatch(name, schedule.expression, schedule.timezone, grace_s=grace, max_slot_age_s=age))
    return watches


@dataclass
class WatchdogDeps:
    """What one run needs: the botocore DynamoDB ``dynamodb`` client and lock ``table`` name, the SNS ``publish``
    callable (``TopicArn``/``Subject``/``Message`` keywords: ``sns_client.publish``) and ``topic_arn``, the ``jobs``,
    the metric sink ``emit`` and the epoch-ms clock; ``stack`` names the deployment in the command to look closer."""

    dynamodb: Any
    table: str
    publish: Callable[..., Any]
    topic_arn: str
    jobs: Sequence[JobWatch]
    emit: Emit
    clock_ms: Callable[[], int] = field(default=lambda: int(time.time() * 1000))
    stack: str = "ScheduledAthenaRefresh"
    sleep_s: Callable[[float], None] = time.sleep


@dataclass(frozen=True)
class WatchReport:
    """One run: every job's verdict, the jobs notified (state changed and this run won the write) and the metrics."""

    verdicts: tuple[Verdict, ...]
    notified: tuple[str, ...]
    metrics: Mapping[str, float]

    def as_dict(self) -> dict[str, Any]:
        return {
            "jobs": {v.job: {"state": v.state, "reason": v.reason, "lateness_s": v.lateness_s} for v in self.verdicts},
            "notified": list(self.notified),
            "metrics": dict(self.metrics),
        }


def _batch_get(deps: WatchdogDeps, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Items by partition key (absent ones left out), strongly consistent, in requests of :data:`BATCH_KEYS`."""
    found: dict[str, dict[str, Any]] = {}
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), BATCH_KEYS):
        pending: list[dict[str, Any]] = [
            {lock_table.PARTITION_KEY: {"S": key}} for key in unique[start : start + BATCH_KEYS]
        ]
        for attempt in range(MAX_BATCH_ATTEMPTS):
            response = deps.dynamodb.batch_get_item(
                RequestItems={deps.table: {"Keys": pending, "ConsistentRead": True}}
            )
            for item in response.get("Responses", {}).get(deps.table, []):
                found[item[lock_table.PARTITION_KEY]["S"]] = item
            pending = response.get("UnprocessedKeys", {}).get(deps.table, {}).get("Keys", [])
            if not pending:
                break
            deps.sleep_s(min(2.0, 0.05 * 2**attempt))
        else:
            raise TransientWatchError(
                f"{len(pending)} keys unprocessed after {MAX_BATCH_ATTEMPTS} BatchGetItem requests"
            )
    return found


def observed_from_items(
    job: str, lock_item: Mapping[str, Any] | None, slot_items: Mapping[str, Any], first_seen_ms: int | None
) -> Observed:
    """What the lock table says of ``job``: its live lock item and its slot items (by key; DynamoDB JSON), as the
    :class:`~athena_refresh.freshness.Observed` the decision reads. :raises SlotLockError: an item cannot be decoded."""
    if lock_item is None:
        return Observed(first_seen_ms=first_seen_ms)
    record = codec.decode_lock_item(lock_item, lock_table.lock_key(job))
    slots = []
    for key, item in slot_items.items():
        decoded = codec.decode_slot_item(item, key)
        slots.append(
            SlotRecord(
                int(decoded.get("slot_epoch_s", 0)),
                str(decoded.get("status", "")),
                reason=decoded.get("reason"),
                error=decoded.get("error"),
                finished_at_ms=decoded.get("finished_at_ms"),
            )
        )

    def epoch(slot: Slot | None) -> int | None:
        return None if slot is None else slot.epoch_s

    return Observed(
        paused=record.paused,
        lease_slot_epoch_s=epoch(record.lease_slot),
        given_back_reason=record.given_back_reason,
        last_finished_slot_epoch_s=epoch(record.last_finished_slot),
        last_finished_outcome=record.last_finished_outcome,
        last_succeeded_slot_epoch_s=epoch(record.last_succeeded_slot),
        last_succeeded_at_ms=record.last_succeeded_at_ms,
        slots=tuple(slots),
        first_seen_ms=first_seen_ms,
    )


def _number(item: Mapping[str, Any] | None, name: str) -> int | None:
    value = (item or {}).get(name)
    return int(value["N"]) if value and "N" in value else None


def _text(item: Mapping[str, Any] | None, name: str) -> str | None:
    value = (item or {}).get(name)
    return str(value["S"]) if value and "S" in value else None


def _record_state(deps: WatchdogDeps, verdict: Verdict, old: str | None, now_ms: int, *, published: bool) -> bool:
    """Write ``verdict.state`` on ``watchdog#<job>`` if it still holds ``old``; whether this run won the write."""
    condition = "attribute_not_exists(#state)" if old is None else "#state = :old"
    values: dict[str, Any] = {
        ":new": {"S": verdict.state},
        ":reason": {"S": verdict.reason},
        ":now": {"N": str(now_ms)},
        ":published": {"BOOL": published},
        ":schema": {"N": str(lock_table.SCHEMA_VERSION)},
        ":ttl": {"N": str(now_ms // 1000 + WATCH_ITEM_TTL_S)},
    }
    if old is not None:
        values[":old"] = {"S": old}
    try:
        deps.dynamodb.update_item(
            TableName=deps.table,
            Key={lock_table.PARTITION_KEY: {"S": watch_key(verdict.job)}},
            UpdateExpression=(
                "SET #state = :new, #reason = :reason, #changed = :now, #published = :published, "
                "#first = if_not_exists(#first, :now), #schema = :schema, #ttl = :ttl"
            ),
            ConditionExpression=condition,
            ExpressionAttributeNames={
                "#state": "state",
                "#reason": "reason",
                "#changed": "changed_at_ms",
                "#published": "published",
                "#first": "first_seen_ms",
                "#schema": lock_table.SCHEMA_VERSION_ATTRIBUTE,
                "#ttl": lock_table.TTL_ATTRIBUTE,
            },
            ExpressionAttributeValues=values,
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            return False  # another run recorded a change first: it notifies
        raise
    return True


def _set_if_state(deps: WatchdogDeps, job: str, state: str, name: str, value: Mapping[str, Any]) -> None:
    """Set ``name`` to ``value`` (DynamoDB JSON) on ``watchdog#<job>`` if it still holds ``state`` (else another run
    recorded a newer state meanwhile: its own write and notification follow)."""
    try:
        deps.dynamodb.update_item(
            TableName=deps.table,
            Key={lock_table.PARTITION_KEY: {"S": watch_key(job)}},
            UpdateExpression="SET #name = :value",
            ConditionExpression="#state = :state",
            ExpressionAttributeNames={"#name": name, "#state": "state"},
            ExpressionAttributeValues={":value": dict(value), ":state": {"S": state}},
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
            raise


def _mark_published(deps: WatchdogDeps, job: str, state: str) -> None:
    _set_if_state(deps, job, state, "published", {"BOOL": True})


def _keep_alive(deps: WatchdogDeps, job: str, state: str, watch_item: Mapping[str, Any], now_ms: int) -> None:
    """Push ``watchdog#<job>``'s TTL back to :data:`WATCH_ITEM_TTL_S` from now when less than half of it is left
    (or the item predates it): a job of the catalog keeps its item."""
    expires_s = _number(watch_item, lock_table.TTL_ATTRIBUTE)
    if expires_s is None or expires_s - now_ms // 1000 < WATCH_ITEM_TTL_S // 2:
        _set_if_state(deps, job, state, lock_table.TTL_ATTRIBUTE, {"N": str(now_ms // 1000 + WATCH_ITEM_TTL_S)})


def _iso_s(epoch_s: int | None) -> str:
    return "never" if epoch_s is None else dt.datetime.fromtimestamp(epoch_s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def notification(changes: Sequence[tuple[str | None, Verdict]], *, stack: str) -> tuple[str, str]:
    """``(subject, message)`` of one notification: each job whose state changed (old -> new), its reason, its last
    success and the command to look closer; plain text for an email (SNS subjects: at most 100 characters)."""
    counts = {state: sum(1 for _, v in changes if v.state == state) for state in JobState.ALL}
    named = ", ".join(f"{counts[s]} {s.replace('_', ' ')}" for s in JobState.ALL if counts[s])
    subject = f"athena-once watchdog: {named} ({stack})"[:100]
    lines = [f"The freshness watchdog of {stack} saw {len(changes)} job(s) change state:", ""]
    for old, verdict in changes:
        lines += [
            f"{verdict.job}: {(old or 'new').replace('_', ' ')} -> {verdict.state.replace('_', ' ').upper()}",
            f"  reason:        {verdict.reason}",
            f"  last success:  slot {_iso_s(verdict.last_succeeded_slot_epoch_s)}"
            + (
                f", committed {_iso_s(verdict.last_succeeded_at_ms // 1000)}"
                if verdict.last_succeeded_at_ms is not None
                else ""
            ),
            f"  late by:       {verdict.lateness_s} s" if verdict.lateness_s else "  late by:       -",
            f"  look closer:   athena-once ops --stack {stack} history --job {verdict.job}",
            "",
        ]
    lines.append("Every job's state: athena-once ops --stack " + stack + " status")
    return subject, "\n".join(lines)


def watch(deps: WatchdogDeps) -> WatchReport:
    """One watchdog run at ``deps.clock_ms()`` (see the module docstring); returns its :class:`WatchReport`.

    :raises TransientWatchError: keys stayed unprocessed; botocore's ``ClientError`` for any other refusal.
    """
    now_ms = deps.clock_ms()
    jobs = list(deps.jobs)
    heads = _batch_get(deps, [k for job in jobs for k in (lock_table.lock_key(job.job), watch_key(job.job))])
    slot_keys: dict[str, list[str]] = {}
    for job in jobs:
        lock_item = heads.get(lock_table.lock_key(job.job))
        after = _number(lock_item, "last_finished_slot_epoch_s")
        keys = [
            lock_table.slot_key(job.job, Slot(e).iso)
            for e in recent_firings(job, now_ms, after_epoch_s=after, count=RECENT_SLOTS)
        ]
        if after is not None and (_text(lock_item, "last_finished_outcome") or "").lower() == "failed":
            keys.append(lock_table.slot_key(job.job, Slot(after).iso))
        slot_keys[job.job] = keys if lock_item is not None else []
    slot_items = _batch_get(deps, [key for keys in slot_keys.values() for key in keys])

    verdicts: list[Verdict] = []
    changes: list[tuple[str | None, Verdict]] = []
    for job in jobs:
        watch_item = heads.get(watch_key(job.job))
        items = {key: slot_items[key] for key in slot_keys[job.job] if key in slot_items}
        # First sight: the job is judged from now on (its earlier firings were never the watchdog's to judge).
        first_seen = _number(watch_item, "first_seen_ms") or now_ms
        observed = observed_from_items(job.job, heads.get(lock_table.lock_key(job.job)), items, first_seen)
        verdict = decide(job, observed, now_ms)
        verdicts.append(verdict)
        old = _text(watch_item, "state")
        published = bool((watch_item or {}).get("published", {}).get("BOOL", True))
        if old == verdict.state:
            _keep_alive(deps, job.job, old, watch_item or {}, now_ms)
            if not published:
                changes.append((None, verdict))  # an earlier run won the write and did not publish: publish now
            continue
        quiet = old is None and not verdict.alarming  # first sight of a healthy job: nothing to tell
        if _record_state(deps, verdict, old, now_ms, published=quiet) and not quiet:
            changes.append((old, verdict))

    if changes:
        subject, message = notification(changes, stack=deps.stack)
        deps.publish(TopicArn=deps.topic_arn, Subject=subject, Message=message)
        for _, verdict in changes:
            _mark_published(deps, verdict.job, verdict.state)

    metrics = {
        contract.METRIC_JOBS_LATE: float(sum(1 for v in verdicts if v.state == JobState.LATE)),
        contract.METRIC_JOBS_FAILING: float(sum(1 for v in verdicts if v.state == JobState.FAILING)),
        contract.METRIC_WATCHDOG_RUNS: 1.0,
    }
    alarming = [v.lateness_s for v in verdicts if v.alarming]
    if alarming:  # only while it has something to say: a custom metric is billed for each hour it is sent in
        metrics[contract.METRIC_OLDEST_LATENESS_S] = float(max(alarming))
    for name, value in metrics.items():
        deps.emit(name, "Seconds" if name == contract.METRIC_OLDEST_LATENESS_S else "Count", value)
    return WatchReport(tuple(verdicts), tuple(v.job for _, v in changes), metrics)
