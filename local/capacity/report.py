"""``capacity-report.json``: the figures of one ``make capacity`` run and its goals, from what was recorded.

Sources, per phase (the budgeted run, the negative control): the engine's quota record
(:func:`local.emulators.duckdb_engine.quota_report`: starts, refusals, every query's active interval), the permit
writes DynamoDB accepted and every StartQueryExecution answer (reported by the environments,
:mod:`local.capacity.worker`), the fake Lambda service's deliveries (outcomes, retries, the on-failure destination),
the invocations' outcome log lines (``"slot <iso>: <outcome>"``: ``permit``, ``permit_wait_ms``,
``capacity_deferrals``) and the slot items read back from the lock table.

Goals (each ``{"pass": bool, ...}``; the run fails when one does not pass; ``pass`` None: not judged, the two goals
that need the negative control when the run had none): the engine never saw more active queries
than the budget, Athena never answered ``TooManyRequestsException``, every slot committed exactly once (SUCCEEDED;
MISSED ``capacity`` only past its maximum age), nothing in the failure queue, the capacity checker found no
violation, the semaphore adds at most 2 DynamoDB requests to a winner's slot when no one waits, and the negative
control (no budget) did meet ``TooManyRequestsException`` (else the budget proved nothing).
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from athena_refresh import contract
from athena_refresh.engine import client_request_token
from athena_refresh.results import ResultsStore
from athena_refresh.stored import result_sort_key
from local.chaos.capacity_check import PermitEvent, SlotAttempt, check_capacity, holdings
from local.chaos.checker import percentile
from local.emulators.duckdb_engine import quota_report
from slotlock import Slot, SlotLock

if TYPE_CHECKING:
    from local.capacity.harness import CapacityRun, FunctionDelivery, Phase

#: The most DynamoDB requests the semaphore may add to a winner's slot when no one waits (one BatchGetItem of the
#: permits and the tickets item, one conditional UpdateItem of a permit): docs/protocol.md, "Capacity semaphore".
MAX_ADDED_REQUESTS = 2
REPORT_FORMAT = 1


def outcome_lines(logs_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The invocations' outcome log lines (JSON, ``"slot <iso>: <outcome>"``), by request id, in log order."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(logs_dir.glob("*.log")):
        with open(path, encoding="utf-8", errors="replace") as lines:
            for text in lines:
                if '"outcome"' not in text or not text.startswith("{"):
                    continue
                try:
                    line = json.loads(text)
                except ValueError:
                    continue
                message = str(line.get("message", ""))
                request_id = line.get("function_request_id") or line.get("owner")
                if message.startswith("slot ") and request_id and contract.LOG_FIELD_OUTCOME in line:
                    found[str(request_id)].append(line)
    return found


def _stats_s(values_ms: Sequence[float]) -> dict[str, float | None]:
    def seconds(q: float) -> float | None:
        value = percentile(values_ms, q)
        return None if value is None else round(value / 1000, 3)

    return {"p50": seconds(50), "p95": seconds(95), "max": seconds(100), "samples": len(values_ms)}


def token_index(phase: Phase, owners: Iterable[str], max_attempts: int) -> dict[str, SlotAttempt]:
    """Every ClientRequestToken a query of these owners (``<job>#<slot>#g<n>``) can carry, one per attempt."""
    index = {}
    for owner in owners:
        job, slot, generation = owner.rsplit("#", 2)
        key = result_sort_key(slot, int(generation[1:]))
        for attempt in range(1, max_attempts + 1):
            token = client_request_token(job, key, attempt, deployment_id=phase.deployment.lock_table)
            index[token] = SlotAttempt(owner, attempt)
    return index


def permit_events(history: Iterable[Mapping[str, Any]], request_ids: set[str]) -> list[PermitEvent]:
    return [
        PermitEvent(
            t_ms=int(e["wall_ms"]),
            op=str(e["op"]),
            key=str(e["key"]),
            owner=str(e["owner"]),
            token=e.get("token"),
            query=e.get("query"),
            request_id=e.get("request_id"),
        )
        for e in history
        if e["what"] == "permit" and e.get("request_id") in request_ids
    ]


def take_to_record_ms(events: Iterable[PermitEvent]) -> list[int]:
    """For every permit taken, the time until its holder recorded its query on it: the window in which a stalled
    holder's permit can expire naming no query (reclaimable) while the holder still goes on to start its query."""
    taken: dict[tuple[str, str], int] = {}
    gaps = []
    for event in sorted(events, key=lambda e: e.t_ms):
        if event.op == "take":
            taken[(event.owner, event.key)] = event.t_ms
        elif event.op == "record" and (event.owner, event.key) in taken:
            gaps.append(event.t_ms - taken.pop((event.owner, event.key)))
    return gaps


def stored_statuses(phase: Phase, owners: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Each owner's slot item (status, reason) and whether its result is stored, read back consistently."""
    client = phase.deployment.client("dynamodb")
    store = ResultsStore(phase.deployment.results_table, dynamodb_client=client)
    locks: dict[str, SlotLock] = {}
    found = {}
    for owner in owners:
        job, slot, generation = owner.rsplit("#", 2)
        lock = locks.setdefault(job, SlotLock(phase.deployment.lock_table, job, client=client))
        number = int(generation[1:])
        item = lock.for_generation(number).get_slot(Slot.parse(slot)) or {}
        found[owner] = {
            "status": item.get("status"),
            "reason": item.get("reason"),
            "result": store.get_result(job, slot, number) is not None,
        }
    return found


def phase_figures(run: CapacityRun, phase: Phase, lines: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The figures of one phase (see the module docstring)."""
    service = run.lambda_service
    deliveries: list[FunctionDelivery] = [
        d  # type: ignore[misc]
        for d in service.deliveries
        if d.request_id in phase.request_ids and d.request_id != phase.probe_request_id
    ]
    plan = phase.plan
    live = [f"{job}#{plan.slot}#g1" for job in plan.jobs]
    backfill = (
        [phase.backfill.owner(item) for item in phase.backfill.slots if item.generation is not None]
        if phase.backfill
        else []
    )
    owners = live + backfill
    max_attempts = int(phase.env.get(contract.ENV_MAX_QUERY_ATTEMPTS) or 3)
    probe_owner = f"cap-probe#{plan.slot}#g1"
    tokens = token_index(phase, [*owners, probe_owner], max_attempts)
    quota = quota_report(phase.state_dir)
    events = permit_events(service.history, phase.request_ids)
    check = check_capacity(quota.intervals, tokens, events, budget=phase.budget or None)
    stored = stored_statuses(phase, owners)
    commits = Counter(d.owner for d in deliveries if d.status == "succeeded")
    by_owner: dict[str, list[FunctionDelivery]] = defaultdict(list)
    for d in deliveries:
        by_owner[d.owner].append(d)
    waits_ms: dict[str, int] = {}
    how: Counter[str] = Counter()
    for owner, mine in by_owner.items():
        waited = [
            int(line[contract.LOG_FIELD_PERMIT_WAIT_MS])
            for d in mine
            for line in lines.get(d.request_id, ())
            if isinstance(line.get(contract.LOG_FIELD_PERMIT_WAIT_MS), int)
        ]
        waits_ms[owner] = max(waited, default=0)
        for d in mine:
            for line in lines.get(d.request_id, ()):
                if line.get(contract.LOG_FIELD_PERMIT):
                    how[str(line[contract.LOG_FIELD_PERMIT])] += 1
    slot_waits = [waits_ms.get(owner, 0) for owner in owners]
    dead = [d for d in service.dead_lettered if d.request_id in phase.request_ids]
    statuses = Counter(str(d.status) for d in deliveries if d.done)
    delays = [(d.delivered_at - d.due) * 1000 for d in deliveries if d.delivered_at is not None]
    reclaimed = [h for h in holdings(events) if h.ended_by not in (None, "release")]
    gaps_ms = take_to_record_ms(events)
    missed_capacity = [o for o, s in stored.items() if s["status"] == "MISSED" and s["reason"] == "capacity"]
    # MISSED "capacity" is right only for a live slot, once its maximum age (less the deferral margin and one retry
    # delay, athena_refresh.permits) has passed: the waiter at its last chance records it. Never for a manual
    # generation: the maximum age does not apply to manual runs (docs/protocol.md rule 12).
    now_s = time.time()
    missed_early = [
        o
        for o in missed_capacity
        if not o.endswith("#g1") or now_s - Slot.parse(o.rsplit("#", 2)[1]).epoch_s < run.o.max_slot_age_s - 120
    ]
    committed_once = [
        o for o in owners if commits[o] == 1 and stored[o]["status"] == "SUCCEEDED" and stored[o]["result"]
    ]
    problems = [
        f"{o}: {commits[o]} commits, stored {stored[o]['status']}"
        + ("" if stored[o]["result"] or stored[o]["status"] != "SUCCEEDED" else ", no result")
        for o in owners
        if o not in committed_once and (o not in missed_capacity or o in missed_early)
    ]
    probe = next(
        (e for e in service.history if e["what"] == "request_counts" and e.get("request_id") == phase.probe_request_id),
        None,
    )
    return {
        "phase": phase.name,
        "budget": phase.budget,
        "jobs": len(plan.jobs),
        "slot": plan.slot,
        "duration_s": round(phase.duration_s, 1),
        "invocations": len(deliveries),
        "outcomes": dict(sorted(statuses.items())),
        "max_active_queries": quota.max_active_queries,
        "starts": quota.starts,
        "too_many_requests": quota.too_many_requests,
        "throttled": quota.throttled,
        "slots": len(owners),
        "slots_live": len(live),
        "slots_backfill": len(backfill),
        "slots_committed_once": len(committed_once),
        "slot_problems": problems,
        "missed_capacity": len(missed_capacity),
        "failure_queue": len(dead),
        "deferrals": statuses.get("deferred", 0),
        "permits_reclaimed_after_expiry": len(reclaimed),
        "permit_how": dict(sorted(how.items())),
        "wait_s": _stats_s(slot_waits),
        "waiting_gb_s": round(sum(slot_waits) / 1000 * run.o.memory_mb / 1024, 3),
        "delivery_delay_s": _stats_s(delays),
        "take_to_record_s": _stats_s(gaps_ms),
        # A take is written with at least lease - heartbeat interval ahead: a holder slower than that between its
        # take and its record could lose its permit while starting its query (docs/protocol.md, "A stalled holder")
        "stall_margin_s": None if not gaps_ms else round(run.o.lease_s - run.o.heartbeat_s - max(gaps_ms) / 1000, 3),
        "stale_rejected": statuses.get("stale_rejected", 0),
        "lease_lost": statuses.get("lease_lost", 0),
        "capacity_check": check.as_dict(),
        "faults": _faults(run, phase, by_owner, lines),
        "backfill": phase.backfill.summary() if phase.backfill else None,
        "probe": None if probe is None else {"requests": probe.get("count"), "operations": probe.get("operations")},
    }


def _faults(
    run: CapacityRun, phase: Phase, by_owner: Mapping[str, list[FunctionDelivery]], lines: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """What became of each planned fault: the struck holder, and how its slot's committing invocation held the
    permit (``inherited``/``held`` for a retry or a takeover of a running query)."""
    found = []
    for job, fault in sorted(phase.plan.faults.items()):
        owner = f"{job}#{phase.plan.slot}#g1"
        mine = by_owner.get(owner, [])
        struck = next((d for d in mine if d.fault_fired), None)
        committer = next((d for d in mine if d.status == "succeeded"), None)
        line = (lines.get(committer.request_id) or [{}])[-1] if committer else {}
        found.append(
            {
                "job": job,
                "action": fault.action,
                "checkpoint": fault.checkpoint,
                "fired": struck is not None,
                "struck": None if struck is None else {"request_id": struck.request_id, "status": struck.status},
                "committed_by": None
                if committer is None
                else {
                    "kind": committer.kind,
                    "same_request_id": struck is not None and committer.request_id == struck.request_id,
                    "permit": line.get(contract.LOG_FIELD_PERMIT),
                    "query_adopted": line.get(contract.LOG_FIELD_QUERY_ADOPTED),
                    "queries_started": line.get(contract.LOG_FIELD_QUERIES_STARTED),
                },
                "invocations": [f"{d.kind}:{d.status}" for d in mine],
            }
        )
    return found


def build_report(run: CapacityRun) -> dict[str, Any]:
    """The report (see the module docstring); ``goals`` judged here."""
    o = run.o
    lines = outcome_lines(run.logs_dir)
    main = phase_figures(run, run.phases[0], lines)
    control = phase_figures(run, run.phases[1], lines) if len(run.phases) > 1 else None
    with_budget = (main["probe"] or {}).get("requests")
    without = (control["probe"] or {}).get("requests") if control else None
    added = None if with_budget is None or without is None else with_budget - without
    report: dict[str, Any] = {
        "format": REPORT_FORMAT,
        "jobs": o.jobs,
        "racers": o.racers,
        "budget": o.budget,
        "quota": {"active_queries": o.quota, "start_rate_per_s": o.start_rate_per_s, "start_burst": o.start_burst},
        "environments": o.environments,
        "lease_duration_s": o.lease_s,
        "heartbeat_interval_s": o.heartbeat_s,
        "wait_in_place_s": o.wait_in_place_s,
        "time_scale": o.time_scale,
        "query_ms": {"short": list(o.query_ms), "long": list(o.long_query_ms), "long_fraction": o.long_fraction},
        "memory_mb": o.memory_mb,
        "seed": o.seed,
        "duration_s": round(time_since(run), 1),
        **{k: main[k] for k in _MAIN_FIELDS},
        "dynamodb_requests_per_slot": {
            "with_budget": with_budget,
            "without_budget": without,
            "added_by_semaphore": added,
            "with_budget_operations": (main["probe"] or {}).get("operations"),
            "without_budget_operations": (control["probe"] or {}).get("operations") if control else None,
            "how": "one probe invocation per phase (a job of its own, nothing waiting, the job's default 45 s lease:"
            " no renewal), every DynamoDB request its boto3 clients sent, counted by a botocore before-send hook",
        },
        "negative_control": None
        if control is None
        else {
            k: control[k]
            for k in (
                "jobs",
                "budget",
                "max_active_queries",
                "too_many_requests",
                "throttled",
                "starts",
                "slots_committed_once",
                "failure_queue",
                "outcomes",
                "duration_s",
            )
        },
        "harness_errors": list(run.harness_errors) + list(run.lambda_service.errors),
        "phases": {"budget": main, **({"control": control} if control else {})},
    }
    report["goals"] = goals(report, main, added)
    return report


_MAIN_FIELDS = (
    "max_active_queries",
    "too_many_requests",
    "throttled",
    "starts",
    "slots",
    "slots_live",
    "slots_backfill",
    "slots_committed_once",
    "permits_reclaimed_after_expiry",
    "wait_s",
    "waiting_gb_s",
    "deferrals",
    "missed_capacity",
    "failure_queue",
    "invocations",
    "outcomes",
    "permit_how",
    "stale_rejected",
    "lease_lost",
    "delivery_delay_s",
    "take_to_record_s",
    "stall_margin_s",
)


def time_since(run: CapacityRun) -> float:
    return time.monotonic() - run.t0


def goals(report: Mapping[str, Any], main: Mapping[str, Any], added: int | None) -> dict[str, dict[str, Any]]:
    """Each goal's verdict (``pass``) with the value it judged."""
    budget = report["budget"]
    check = main["capacity_check"]
    control = report["negative_control"]
    return {
        "max_active_queries_within_budget": {
            "pass": main["max_active_queries"] <= budget,
            "value": main["max_active_queries"],
            "limit": budget,
        },
        "no_too_many_requests": {"pass": main["too_many_requests"] == 0, "value": main["too_many_requests"]},
        "every_slot_committed_once": {
            "pass": not main["slot_problems"]
            and main["slots_committed_once"] + main["missed_capacity"] == main["slots"],
            "value": main["slots_committed_once"],
            "slots": main["slots"],
            "missed_capacity": main["missed_capacity"],
            "problems": main["slot_problems"][:10],
        },
        "failure_queue_empty": {"pass": main["failure_queue"] == 0, "value": main["failure_queue"]},
        "capacity_checker": {
            "pass": not check["violations"],
            "violations_by_check": check["violations_by_check"],
            "examples": check["violations"][:5],
        },
        "semaphore_adds_at_most_2_requests": _unless_no_control(
            control,
            {"pass": added is not None and added <= MAX_ADDED_REQUESTS, "value": added, "limit": MAX_ADDED_REQUESTS},
        ),
        "negative_control_meets_too_many_requests": _unless_no_control(
            control,
            {
                "pass": control is not None and control["too_many_requests"] > 0,
                "value": (control or {}).get("too_many_requests"),
            },
        ),
        "no_harness_error": {"pass": not report["harness_errors"], "value": len(report["harness_errors"])},
    }


def _unless_no_control(control: Mapping[str, Any] | None, goal: dict[str, Any]) -> dict[str, Any]:
    """A goal that needs the negative control: not judged (``pass`` None) when the run had none (``--no-control``)."""
    if control is None:
        return {"pass": None, "skipped": "no negative control (--no-control)"}
    return goal
