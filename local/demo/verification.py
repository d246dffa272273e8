"""The demo's verdict: each slot's summary as the report shows it, then the stores read back and checked.

:func:`summarise` turns one slot's deliveries and outcomes (on the fake Lambda service) into the per-slot dict of
``demo-report.json``'s ``per_slot``; :func:`verify` reads each job's lock and results tables back
(``LocalDeployment.final_state``), runs the scenario checker (:mod:`local.scenario.checker`) and the demo's
own expectations (one query per slot, both faults injected, the stale commit rejected), fills each summary's
``store``, ``results`` and ``problems`` and appends every failure to ``Demo.failures``. The driver
(:class:`local.demo.runner.Demo`) calls both through its methods of the same names.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from local.demo.plan import KILL, PAUSE, fault_plan
from local.demo.printer import failure_reason
from local.emulators.lambda_service import DIED
from local.scenario import checker
from local.scenario.driver import core_violations, logged_missed

if TYPE_CHECKING:
    from local.demo.runner import Demo, SlotRecord
    from stacks.jobs import JobDefinition


def summarise(demo: Demo, rec: SlotRecord) -> dict[str, Any]:
    """The slot as the report shows it: winner, tokens, takeovers, queries, every invocation."""
    deliveries = demo.deliveries(rec)
    outcomes = demo.outcomes(rec)
    commits = [(d, o) for d, o in outcomes if o.get("status") in checker.FINAL_COMMIT_STATUSES]
    winner_delivery, winner = commits[-1] if commits else (None, {})
    details = winner.get("details") or {}
    status = winner.get("status") or "no commit"
    label = status
    if rec.fault == KILL:
        label += " after kill + retry"
    elif rec.fault == PAUSE:
        label += (
            " after takeover; stale commit rejected"
            if any(o.get("status") == "stale_rejected" for _, o in outcomes)
            else " after takeover"
        )
    checkpoints = [c for d in deliveries for c in d.checkpoints]
    return {
        "job": rec.job,
        "number": rec.number,
        "slot": rec.iso,
        "window": details.get("window"),
        "fault": rec.fault,
        "winner_racer": winner_delivery.racer if winner_delivery else None,
        "winner_worker": winner_delivery.worker_id if winner_delivery else None,
        "winner_owner_id": winner.get("owner_id"),
        "winner_kind": winner_delivery.kind if winner_delivery else None,
        "fencing_token": winner.get("fencing_token"),
        "tokens_acquired": sorted({c["fencing_token"] for c in checkpoints if c["checkpoint"] == "acquired"}),
        "query_execution_id": details.get("query_execution_id"),
        "rows": details.get("row_count"),
        "data_scanned_bytes": (details.get("statistics") or {}).get("data_scanned_bytes"),
        "estimated_cost_usd": (details.get("cost") or {}).get("estimated_cost_usd"),
        "status": status,
        "error_reason": failure_reason(details) if status == "failed" else None,
        "outcome": label,
        "commits": sum(1 for _, o in commits if o.get("status") == "succeeded"),
        "takeovers": sum(1 for _, o in outcomes if o.get("takeover")),
        "reentries": sum(1 for _, o in outcomes if o.get("reentered")),
        "lost": sum(1 for _, o in outcomes if o.get("status") == "lost"),
        "stale_rejected": sum(1 for _, o in outcomes if o.get("status") == "stale_rejected"),
        "queries_started": sum(1 for c in checkpoints if c["checkpoint"] == "query_started"),
        "invocations": len([d for d in deliveries if d.delivered_at is not None]),
        "elapsed_s": round(rec.finished_at - rec.started_at, 2),
        "notes": rec.notes,
        "timed_out": rec.timed_out,
        "invocation_log": [d.as_dict() for d in deliveries],
    }


def verify(demo: Demo) -> dict[str, Any]:
    """Read the stores back, run the scenario checker and the demo's own expectations per job; returns the
    totals (all jobs) with ``jobs`` and ``per_job`` (the same totals for each job)."""
    per_job = {job.job_name: verify_job(demo, job) for job in demo.jobs}
    totals: dict[str, Any] = {"jobs": [job.job_name for job in demo.jobs], "slots_per_job": demo.o.slots}
    for key, value in next(iter(per_job.values())).items():
        if isinstance(value, bool) or not isinstance(value, int) or key in ("racers", "latest_fencing_token"):
            continue
        totals[key] = sum(int(t[key]) for t in per_job.values())
    totals["racers"] = demo.o.racers
    totals["checks"] = list(checker.CHECKS)
    totals["violations"] = [v for t in per_job.values() for v in t["violations"]]
    engine_queries = len(list((demo.state_dir / "queries").glob("*.json")))
    totals["engine_query_executions"] = engine_queries
    totals["per_job"] = per_job
    if engine_queries != totals["queries_started"]:
        demo.failures.append(
            f"the engine holds {engine_queries} query executions, the jobs started {totals['queries_started']}"
        )
    if demo.o.faults:
        plan = fault_plan(demo.o.slots)
        if totals["kills_injected"] != sum(1 for f in plan.values() if f == KILL):
            demo.failures.append("the kill fault was not injected (no winner reached query_started?)")
        if totals["pauses_injected"] != sum(1 for f in plan.values() if f == PAUSE):
            demo.failures.append("the pause fault was not injected")
        elif PAUSE in plan.values() and totals["stale_writes_rejected"] < 1:
            demo.failures.append("the paused winner's stale commit was not rejected")
    return totals


def verify_job(demo: Demo, job: JobDefinition) -> dict[str, Any]:
    name = job.job_name
    service = demo.service_of(name)
    assert demo.data_dir is not None
    final = demo.deployment.final_state(name)
    records = [rec for rec in demo.slots if rec.job == name]
    planned = [rec.iso for rec in records]
    succeeded = [s for s in planned if (final.slot_items.get(s) or {}).get("status") == "SUCCEEDED"]
    expected = demo.deployment.expected_rows(demo.envs[name], succeeded, data_dir=demo.data_dir)
    dead_lettered = [d.slot for d in service.dead_lettered]
    violations = core_violations(
        service.history,
        final,
        planned=planned,
        dead_lettered=dead_lettered,
        expected_rows=expected,
        missed_logged=logged_missed((demo.logs_dir / name).glob("*.log")),
    )
    violations = [{**v, "job": name} for v in violations]
    for violation in violations:
        if violation["slot"] not in planned:
            demo.failures.append(f"{name}: {violation['check']}: {violation['detail']}")
    completed = failed = 0
    for rec in records:
        s = rec.summary
        slot_item = final.slot_items.get(rec.iso) or {}
        result = final.results.get(rec.iso)
        s["store"] = {
            "slot_status": slot_item.get("status"),
            "slot_token": slot_item.get("fencing_token"),
            "result_items": 1 if result is not None else 0,
            "result_token": result.get("fencing_token") if result else None,
            "result_query_execution_id": result.get("query_execution_id") if result else None,
            "result_rows": result.get("row_count") if result else None,
        }
        s["results"] = result.get("rows") if result else None
        problems = [f"{v['check']}: {v['detail']}" for v in violations if v["slot"] == rec.iso]
        if slot_item.get("status") == "FAILED" and not rec.timed_out:
            # the job's query failed for good, recorded once (its reason in the slot line and the report): the
            # job's own problem, not the lock's; the guarantees below still hold for it and are still judged
            failed += 1
            s["error_reason"] = s.get("error_reason") or failure_reason(slot_item.get("error"))
        elif slot_item.get("status") != "SUCCEEDED":
            why = s.get("error_reason") or failure_reason(slot_item.get("error"))
            problems.append(f"slot item status {slot_item.get('status')}{f' ({why})' if why else ''}")
        elif result is not None and result.get("query_execution_id") != s["query_execution_id"]:
            problems.append("stored query execution id differs from the winner's")
        if s["queries_started"] != 1:
            problems.append(f"{s['queries_started']} queries started (adoption should make it exactly 1)")
        if not problems and slot_item.get("status") == "SUCCEEDED":
            completed += 1
        s["problems"] = problems
        demo.failures.extend(f"{name} slot {rec.iso}: {problem}" for problem in problems)
    demo.failures.extend(f"{name}: {error}" for error in service.errors)
    by_check = Counter(v["check"] for v in violations)
    latest = final.latest or {}
    deliveries = [d for rec in records for d in demo.deliveries(rec) if d.delivered_at is not None]
    outcomes = [o for rec in records for _, o in demo.outcomes(rec)]
    return {
        "slots": len(records),
        "racers": demo.o.racers,
        "invocations": len(deliveries),
        "slots_completed": completed,
        "slots_failed": failed,
        "duplicate_commits": by_check["one_commit_per_slot"],
        "stale_writes_rejected": sum(1 for o in outcomes if o.get("status") == "stale_rejected"),
        "stale_writes_accepted": by_check["stale_write_accepted"],
        "takeovers": sum(1 for o in outcomes if o.get("takeover")),
        "reentries": sum(1 for o in outcomes if o.get("reentered")),
        "lost_races": sum(1 for o in outcomes if o.get("status") == "lost"),
        "queries_started": sum(rec.summary["queries_started"] for rec in records),
        "kills_injected": sum(1 for d in deliveries if d.fault_fired == KILL),
        "pauses_injected": sum(1 for d in deliveries if d.fault_fired == PAUSE),
        "lambda_retries": sum(1 for d in deliveries if d.kind == "retry"),
        "late_deliveries": sum(1 for d in deliveries if d.kind == "late"),
        "handler_errors": sum(1 for d in deliveries if d.error is not None),
        "timeouts": service.counts["lambda_timeout"],
        "unexpected_deaths": sum(1 for d in deliveries if d.status == f"crashed:{DIED}"),
        "cold_starts": service.counts["cold_start"],
        "environments_started": service.worker_seq,
        "latest_slot": latest.get("latest_slot"),
        "latest_fencing_token": latest.get("fencing_token"),
        "violations": violations,
        "distinct_results": len(
            {
                json.dumps(rec.summary.get("results"), sort_keys=True)
                for rec in records
                if rec.summary.get("results") is not None
            }
        ),
    }


__all__ = ["summarise", "verify", "verify_job"]
