"""``capacity-report.json``: the figures of one ``make capacity`` run and its goals, from what was recorded.

Sources, per phase (the budgeted run, the second deployment on its budget, the negative control): the engine's
quota record (:func:`local.emulators.duckdb_engine.quota_report`: starts, refusals, every query's active interval;
one Athena for the two deployments sharing the budget), the permit writes DynamoDB accepted and every
StartQueryExecution answer (reported by the environments, :mod:`local.capacity.worker`), the fake Lambda service's
deliveries (outcomes, retries, the on-failure destination, the faults), the invocations' outcome log lines
(``"slot <iso>: <outcome>"``: ``permit``, ``permit_wait_ms``, ``capacity_deferrals``) and the slot items read back
from each deployment's lock table. The capacity checker judges both deployments' queries and permit writes against
the one budget (their tokens and owners name their deployment).

Goals (each ``{"pass": bool, ...}``; the run fails when one does not pass; ``pass`` None: not judged, e.g. the goals
that need the negative control when the run had none): the engine never saw more active queries than the budget,
Athena never answered ``TooManyRequestsException``, every slot of either deployment committed exactly once
(SUCCEEDED; MISSED ``capacity`` only past its maximum age), nothing in the failure queue, the capacity checker found
no violation, no query stayed active longer than ``capacity.max_query_active_s``, the semaphore adds at most 2
DynamoDB requests to a winner's slot when no one waits, and the negative control (no budget) did meet
``TooManyRequestsException`` and the checker, judging it against the budget it lacked, reports
``capacity_exceeded`` (else the budget, or the checker, proved nothing).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from athena_refresh import contract
from athena_refresh.results import ResultsStore
from athena_refresh.settings import Settings
from local.capacity.goals import goals
from local.capacity.plan import LOSE_START_ANSWER, PROBE_JOB, permit_owner
from local.emulators.duckdb_engine import QuotaReport, quota_report
from local.scenario.checker import percentile
from local.scenario.checker.capacity import CapacityCheck, PermitEvent, check_capacity, holdings, token_index
from local.scenario.driver import outcome_lines
from slotlock import PermitOwner, SlotLock

if TYPE_CHECKING:
    from local.capacity.harness import CapacityRun
    from local.capacity.phases import FunctionDelivery, Phase

REPORT_FORMAT = 1


def _stats_s(values_ms: Sequence[float]) -> dict[str, float | None]:
    def seconds(q: float) -> float | None:
        value = percentile(values_ms, q)
        return None if value is None else round(value / 1000, 3)

    return {"p50": seconds(50), "p95": seconds(95), "max": seconds(100), "samples": len(values_ms)}


def permit_events(history: Iterable[Mapping[str, Any]], phases: Iterable[Phase]) -> list[PermitEvent]:
    """The permit writes of these phases' invocations, each with its writer's deployment (the lock table)."""
    deployment_of = {request_id: phase.lock_table for phase in phases for request_id in phase.request_ids}
    return [
        PermitEvent(
            t_ms=int(e["wall_ms"]),
            op=str(e["op"]),
            key=str(e["key"]),
            owner=str(e["owner"]),
            token=e.get("token"),
            query=e.get("query"),
            request_id=e.get("request_id"),
            deployment=deployment_of[str(e["request_id"])],
        )
        for e in history
        if e["what"] == "permit" and e.get("request_id") in deployment_of
    ]


def slot_owners(phase: Phase) -> tuple[list[str], list[str]]:
    """The phase's live and backfill slots as permit owners (``<job>#<slot>#g<n>#d<lock table>``)."""
    plan = phase.plan
    live = [permit_owner(job, plan.slot, 1, phase.lock_table) for job in plan.jobs]
    backfill = (
        [phase.backfill.owner(item) for item in phase.backfill.slots if item.generation is not None]
        if phase.backfill
        else []
    )
    return live, backfill


Judged = tuple[CapacityCheck, QuotaReport, list[PermitEvent]]


def judge(run: CapacityRun, phases: Sequence[Phase], budget: int | None) -> Judged:
    """The capacity checker over ``phases`` (a deployment and those sharing its budget and Athena): every query the
    engine registered, every slot attempt's token of each deployment (the probe's included), every permit write;
    with the quota record and the permit writes it judged."""
    owners = []
    for phase in phases:
        live, backfill = slot_owners(phase)
        owners += [*live, *backfill, permit_owner(PROBE_JOB, phase.plan.slot, 1, phase.lock_table)]
    max_attempts = Settings.from_env(phases[0].env).max_query_attempts  # the jobs' spec, as their functions read it
    quota = quota_report(phases[0].state_dir)
    events = permit_events(run.lambda_service.history, phases)
    return check_capacity(quota.intervals, token_index(owners, max_attempts), events, budget=budget), quota, events


def take_to_record_ms(events: Iterable[PermitEvent]) -> list[int]:
    """For every permit taken, the time until its holder (the same fencing token) recorded its query on it: the
    window in which a stalled holder's permit can expire naming no query (reclaimable) while the holder still goes
    on to start its query. A record by a later holder (a lost start answer's retry, which inherited the permit) is
    not the taker's: that permit stays counted by its start window, not by the lease."""
    taken: dict[tuple[str, str, int | None], int] = {}
    gaps = []
    for event in sorted(events, key=lambda e: e.t_ms):
        holder = (event.holder, event.key, event.token)
        if event.op == "take":
            taken[holder] = event.t_ms
        elif event.op == "record" and holder in taken:
            gaps.append(event.t_ms - taken.pop(holder))
    return gaps


def stored_statuses(phase: Phase, owners: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Each owner's slot item (status, reason) and whether its result is stored, read back consistently."""
    client = phase.deployment.client("dynamodb")
    store = ResultsStore(phase.deployment.results_table, dynamodb_client=client)
    locks: dict[str, SlotLock] = {}
    found = {}
    for owner_id in owners:
        owner = PermitOwner.from_id(owner_id)
        assert owner is not None, owner_id
        job, number = owner.job, owner.generation
        lock = locks.setdefault(job, SlotLock(phase.lock_table, job, client=client))
        item = lock.for_generation(number).get_slot(owner.slot) or {}
        found[owner_id] = {
            "status": item.get("status"),
            "reason": item.get("reason"),
            "result": store.get_result(job, owner.slot.iso, number) is not None,
        }
    return found


def phase_figures(
    run: CapacityRun,
    phase: Phase,
    lines: Mapping[str, list[dict[str, Any]]],
    judged: Judged,
) -> dict[str, Any]:
    """The figures of one phase (see the module docstring); ``judged``: the checker's verdict on the phases sharing
    its budget, their Athena's quota record and their permit writes (:func:`judge`): a permit of this deployment's
    slot reclaimed by the other deployment's counts here."""
    service = run.lambda_service
    deliveries: list[FunctionDelivery] = [
        d  # type: ignore[misc]
        for d in service.deliveries
        if d.request_id in phase.request_ids and d.request_id != phase.probe_request_id
    ]
    plan = phase.plan
    live, backfill = slot_owners(phase)
    owners = live + backfill
    check, quota, shared_events = judged
    events = [e for e in shared_events if e.deployment == phase.lock_table]  # this deployment's writes
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
    reclaimed = [
        h
        for h in holdings(shared_events)
        if h.ended_by not in (None, "release") and h.owner.endswith(f"#d{phase.lock_table}")
    ]
    gaps_ms = take_to_record_ms(events)
    missed_capacity = [o for o, s in stored.items() if s["status"] == "MISSED" and s["reason"] == "capacity"]
    # MISSED "capacity" is right only for a live slot, once its maximum age (less the deferral margin and one retry
    # delay, athena_refresh.permits) has passed: the waiter at its last chance records it. Never for a manual
    # generation: the maximum age does not apply to manual runs (docs/protocol.md rule 12).
    now_s = time.time()
    slot_of = {o: PermitOwner.from_id(o) for o in missed_capacity}
    missed_early = [
        o
        for o, slot_owner in slot_of.items()
        if slot_owner is None
        or slot_owner.generation != 1
        or now_s - slot_owner.slot.epoch_s < run.o.max_slot_age_s - 120
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
        "lock_table": phase.lock_table,
        "shares_budget_of": None if phase.shares is None else phase.shares.name,
        "jobs": len(plan.jobs),
        "slot": plan.slot,
        "duration_s": round(phase.duration_s, 1),
        "invocations": len(deliveries),
        "outcomes": dict(sorted(statuses.items())),
        "max_active_queries": quota.max_active_queries,
        "starts": quota.starts,
        "too_many_requests": quota.too_many_requests,
        "throttled": quota.throttled,
        "longest_query_active_s": max(((i.ends_at_ms - i.submitted_at_ms) / 1000 for i in quota.intervals), default=0),
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
        "faults": _faults(run, phase, by_owner, lines, quota),
        "backfill": phase.backfill.summary() if phase.backfill else None,
        "probe": None if probe is None else {"requests": probe.get("count"), "operations": probe.get("operations")},
    }


def _faults(
    run: CapacityRun,
    phase: Phase,
    by_owner: Mapping[str, list[FunctionDelivery]],
    lines: Mapping[str, Any],
    quota: QuotaReport,
) -> list[dict[str, Any]]:
    """What became of each planned fault: the struck holder, and how its slot's committing invocation held the
    permit (``inherited``/``held`` for a retry or a takeover of a running query). For a lost StartQueryExecution
    answer, also the query whose answer was lost (as the environment reported it), whether a later start of the
    same ClientRequestToken got that same query back, and how many queries the engine registered for the slot."""
    found = []
    max_attempts = Settings.from_env(phase.env).max_query_attempts
    starts = [e for e in run.lambda_service.history if e["what"] == "query_start"]
    for job, fault in sorted(phase.plan.faults.items()):
        owner = permit_owner(job, phase.plan.slot, 1, phase.lock_table)
        mine = by_owner.get(owner, [])
        struck = next((d for d in mine if d.fault_fired), None)
        committer = next((d for d in mine if d.status == "succeeded"), None)
        line = (lines.get(committer.request_id) or [{}])[-1] if committer else {}
        figures: dict[str, Any] = {
            "job": job,
            "owner": owner,
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
        if fault.action == LOSE_START_ANSWER:
            tokens = token_index([owner], max_attempts)
            mine_starts = [e for e in starts if e.get("token") in tokens]
            lost = [e for e in mine_starts if e.get("answer_lost")]
            lost_ids = {e.get("query_execution_id") for e in lost}
            figures["answers_lost"] = len(lost)
            figures["lost_query"] = next(iter(lost_ids), None) if len(lost_ids) == 1 else sorted(map(str, lost_ids))
            figures["same_query_returned"] = bool(lost) and any(
                not e.get("answer_lost") and e.get("query_execution_id") in lost_ids for e in mine_starts
            )
            figures["queries_registered"] = sum(1 for i in quota.intervals if i.client_request_token in tokens)
        found.append(figures)
    return found


def build_report(run: CapacityRun) -> dict[str, Any]:
    """The report (see the module docstring); ``goals`` judged by :func:`local.capacity.goals.goals`."""
    o = run.o
    lines = outcome_lines(run.logs_dir)
    budgeted = run.phases[0]
    shared = [p for p in run.phases if p is budgeted or p.shares is budgeted]
    judged = judge(run, shared, o.budget)  # both deployments' queries and permit writes against the one budget
    main = phase_figures(run, budgeted, lines, judged)
    second = next((phase_figures(run, p, lines, judged) for p in shared[1:]), None)
    control_phase = next((p for p in run.phases if p.name == "control"), None)
    # the negative control judged against the budget it lacked: the checker must report it
    control = (
        None
        if control_phase is None
        else phase_figures(run, control_phase, lines, judge(run, [control_phase], o.budget))
    )
    with_budget = (main["probe"] or {}).get("requests")
    without = (control["probe"] or {}).get("requests") if control else None
    added = None if with_budget is None or without is None else with_budget - without
    lost = [f for f in main["faults"] if f["action"] == LOSE_START_ANSWER]
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
        "max_query_active_s": o.max_query_active_s,
        "memory_mb": o.memory_mb,
        "seed": o.seed,
        "duration_s": round(time_since(run), 1),
        **{k: main[k] for k in _MAIN_FIELDS},
        "lost_answers": {
            "planned": len(lost),
            "answers_lost": sum(f["answers_lost"] for f in lost),
            "same_query_returned": sum(1 for f in lost if f["same_query_returned"]),
            "committed_with_permit_inherited": sum(
                1 for f in lost if (f["committed_by"] or {}).get("permit") in ("inherited", "held")
            ),
        },
        "second_deployment": None
        if second is None
        else {
            **{k: second[k] for k in _SECOND_FIELDS},
            "same_names": len(set(shared[1].plan.jobs) & set(budgeted.plan.jobs)),
            "capacity_table": budgeted.lock_table,
        },
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
            **{k: control[k] for k in _CONTROL_FIELDS},
            "checker_violations_by_check": control["capacity_check"]["violations_by_check"],
        },
        "harness_errors": list(run.harness_errors) + list(run.lambda_service.errors),
        "phases": {
            "budget": main,
            **({"second": second} if second else {}),
            **({"control": control} if control else {}),
        },
    }
    report["goals"] = goals(report, main, second, added)
    return report


_MAIN_FIELDS = (
    "max_active_queries",
    "too_many_requests",
    "throttled",
    "starts",
    "longest_query_active_s",
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
_SECOND_FIELDS = (
    "jobs",
    "lock_table",
    "slots",
    "slots_committed_once",
    "missed_capacity",
    "failure_queue",
    "deferrals",
    "invocations",
    "outcomes",
    "permit_how",
    "wait_s",
)
_CONTROL_FIELDS = (
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


def time_since(run: CapacityRun) -> float:
    return time.monotonic() - run.t0
