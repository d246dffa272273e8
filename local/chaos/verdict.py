"""The chaos run's verdict: the history and the stores read back, every check of :mod:`local.scenario.checker`
run, and the report (the keys of ``chaos-report.json``, documented in docs/local.md).

Each function reads one finished (or interrupted) run, :class:`local.chaos.harness.Chaos`: its fake Lambda
service (history, deliveries, dead letters), its deployment (the tables), its working directory (the engine's
query files, the environments' logs) and what the driver recorded (plan, faults, operator actions). The
driver calls :func:`build_report` through ``Chaos.report`` and :func:`faults_injected` while it runs.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from athena_refresh.engine import client_request_token
from athena_refresh.settings import Settings
from athena_refresh.stored import result_sort_key
from local.chaos.faults import WRITE_FAULTS
from local.emulators.lambda_service import MAX_ASYNC_RETRIES
from local.scenario import checker as chaos_checker
from local.scenario.checker import FinalState, percentile
from local.scenario.driver import core_violations, logged_missed

if TYPE_CHECKING:
    from local.chaos.harness import Chaos


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def faults_injected(chaos: Chaos) -> Counter[str]:
    """The plan's faults and the service's (injected, checkpoint faults, retries, timeouts), by kind."""
    counts = chaos.faults + chaos.lambda_service.counts
    counts.pop("cold_start", None)
    return counts


def final_state(chaos: Chaos) -> FinalState:
    return chaos.deployment.final_state(chaos.job.job_name)


def query_tokens(chaos: Chaos) -> list[str]:
    """The ``ClientRequestToken`` of every query the engine started (one file per query execution)."""
    tokens = []
    for path in sorted((chaos.state_dir / "queries").glob("*.json")):
        with contextlib.suppress(OSError, ValueError):
            tokens.append(str(json.loads(path.read_text(encoding="utf-8")).get("client_request_token")))
    return tokens


def tokens_of(chaos: Chaos, slot: str, generation: int) -> set[str]:
    """Every token a query of (``slot``, ``generation``) can carry (one per attempt)."""
    attempts = Settings.from_env(chaos.env).max_query_attempts
    key = result_sort_key(slot, generation)
    return {
        client_request_token(chaos.job.job_name, key, attempt, deployment_id=chaos.deployment.lock_table)
        for attempt in range(attempts + 2)
    }


def expected_rows(chaos: Chaos, slots: list[str]) -> dict[str, Any]:
    """The rows the job's query gives for each slot, computed afresh (DuckDB, no simulated duration)."""
    return chaos.deployment.expected_rows(chaos.env, slots, data_dir=chaos.data_dir)


def logged_slot_missed(chaos: Chaos) -> Counter[str]:
    """MISSED records in the environments' logs (JSON lines with ``missed_reason``), by reason."""
    return logged_missed(chaos.logs_dir.glob("*.log"))


def dead_lettered(chaos: Chaos, *, future: bool = False) -> list[str]:
    """Slots whose event went to the on-failure destination (near-future ones apart, or only those)."""
    return [d.slot for d in chaos.lambda_service.dead_lettered if (d.kind == "future") == future]


def lock_writes_sent(chaos: Chaos) -> Counter[str]:
    """The lock's writes the environments sent, by write (``local.chaos.worker.classify_write``)."""
    sent: Counter[str] = Counter()
    for event in chaos.lambda_service.history:
        if event["what"] == "dynamodb_requests":
            for write, n in (event.get("writes") or {}).items():
                sent[write] += int(n)
    return sent


def outcomes(chaos: Chaos) -> Counter[str]:
    """The invocations' outcome statuses, plus ``errors``: the invocations whose handler raised."""
    deliveries = chaos.lambda_service.deliveries
    counts = Counter(str(d.status) for d in deliveries if d.outcome is not None)
    errors = sum(1 for d in deliveries if d.error is not None)
    if errors:
        counts["errors"] = errors
    return counts


def build_report(chaos: Chaos) -> dict[str, Any]:
    final = final_state(chaos)
    faults = faults_injected(chaos)
    succeeded = sorted(s for s, item in final.slot_items.items() if item.get("status") == "SUCCEEDED")
    rerun_ok = {s for (s, _), item in final.generation_items.items() if item.get("status") == "SUCCEEDED"}
    expected = expected_rows(chaos, sorted(set(succeeded) | rerun_ok))
    planned = [p.iso for p in chaos.plans] + chaos.ancient
    missed_logs = logged_slot_missed(chaos)
    history = chaos.lambda_service.history
    tokens = query_tokens(chaos)
    paused = [p.iso for p in chaos.plans if p.pause]
    paused_queries = {slot: len(tokens_of(chaos, slot, 1).intersection(tokens)) for slot in paused}
    manual_tokens = set().union(*(tokens_of(chaos, s, g) for s, g, _ in chaos.manual.values()))
    manual_queries = sum(t in manual_tokens for t in tokens)
    violations = core_violations(
        history,
        final,
        planned=planned,
        dead_lettered=dead_lettered(chaos),
        expected_rows=expected,
        missed_logged=missed_logs,
    )
    violations += chaos_checker.check_future_refused(
        history, final, future_slots=chaos.future_slots, max_attempts=1 + MAX_ASYNC_RETRIES
    )
    violations += chaos_checker.check_paused_slots(history, final, queries_started=paused_queries)
    violations += chaos_checker.check_force_release(history, final)
    violations += chaos_checker.check_generations(history, final, expected_rows=expected)
    violations += chaos_checker.check_manual_isolation(history, final)
    future_runs = [e for e in history if e["what"] == "deliver" and e.get("kind") == "future"]
    future_requests = sum(
        int(e.get("count") or 0) for e in history if e["what"] == "dynamodb_requests" and e.get("kind") == "future"
    )
    missed = Counter(str(item.get("reason")) for item in final.slot_items.values() if item.get("status") == "MISSED")
    failed = sum(1 for item in final.slot_items.values() if item.get("status") == "FAILED")
    failed_errors = Counter(
        str((item.get("error") or {}).get("type"))
        for item in final.slot_items.values()
        if item.get("status") == "FAILED"
    )
    queries = len(tokens) - manual_queries  # the live schedule's
    latencies = takeover_latencies_s(chaos)
    committed = len(succeeded)
    return {
        "racers": chaos.o.racers,
        "slots": chaos.o.slots,
        "backend": chaos.o.backend,
        "fencing": chaos.o.fencing,
        "seed": chaos.o.seed,
        "lease_duration_s": chaos.o.lease_s,
        "heartbeat_interval_s": chaos.o.heartbeat_s,
        "max_clock_skew_s": chaos.o.max_skew_ms / 1000,
        "clock_skews_ms": {"min": min(chaos.skews_ms.values()), "max": max(chaos.skews_ms.values())},
        "transient_fault_rate": chaos.o.transient_rate,
        "write_fault_rates": {
            write: {"/".join(kinds): round(rate * chaos.o.write_fault_scale, 4) for kinds, rate in groups}
            for write, groups in WRITE_FAULTS.items()
        },
        "duration_s": round(chaos.run_s, 1),
        "invocations": len([d for d in chaos.lambda_service.deliveries if d.worker_id]),
        "environments_started": chaos.lambda_service.worker_seq,
        "faults_injected": dict(
            sorted((faults + Counter(clock_skew=sum(1 for skew in chaos.skews_ms.values() if skew))).items())
        ),
        "faults_injected_total": sum(faults.values()),  # events; clock_skew counts environments
        "violations": violations,
        "violations_by_check": dict(sorted(Counter(v["check"] for v in violations).items())),
        "checks": list(chaos_checker.CHECKS),
        "harness_errors": chaos.harness_errors + chaos.lambda_service.errors,
        "slots_committed": committed,
        "slots_failed": failed,
        "slots_failed_errors": dict(sorted(failed_errors.items())),  # the FAILED items' error types
        "slots_missed": dict(sorted(missed.items())),
        "slots_dead_lettered": len(set(dead_lettered(chaos))),
        "ancient_slots": len(chaos.ancient),
        "slot_missed_logged": {
            "logged": dict(sorted(missed_logs.items())),
            "stored": dict(sorted(missed.items())),
        },
        "future_deliveries": {
            "slots": len(chaos.future_slots),
            "invocations": len(future_runs),
            "lead_s": {
                "min": min(chaos.future_slots.values(), default=None),
                "max": max(chaos.future_slots.values(), default=None),
            },
            "refused": sum(
                1
                for e in history
                if e["what"] == "error" and e.get("kind") == "future" and e.get("error_type") == "InvalidEventError"
            ),
            "dead_lettered": len(dead_lettered(chaos, future=True)),
            "dynamodb_requests": future_requests,
        },
        "lock_writes_sent": dict(sorted(lock_writes_sent(chaos).items())),
        "outcomes": dict(sorted(outcomes(chaos).items())),
        "takeover_latency_s": {
            "p50": _round(percentile(latencies, 50)),
            "p95": _round(percentile(latencies, 95)),
            "samples": len(latencies),
        },
        "queries_started": queries,
        "queries_started_per_committed_slot": round(queries / committed, 3) if committed else None,
        "operator": operator_report(chaos, final, paused_queries, manual_queries),
    }


def operator_report(
    chaos: Chaos, final: FinalState, paused_queries: dict[str, int], manual_queries: int
) -> dict[str, Any]:
    """What the operator did and what came of it (the checks judge it; these are the figures)."""
    deliveries = chaos.lambda_service.deliveries
    paused = {p.iso for p in chaos.plans if p.pause}
    releases = chaos_checker.operator_events(chaos.lambda_service.history, "release")
    released = {e["request_id"] for e in releases}
    stopped_at = {str(e["request_id"]): str(e.get("checkpoint")) for e in releases}
    paused_outcomes = Counter(
        f"{d.status}:{d.reason}" for d in deliveries if d.slot in paused and d.request_id not in chaos.manual
    )
    generations = Counter(str(item.get("status")) for item in final.generation_items.values())
    latest = final.latest or {}
    return {
        "actions": dict(sorted(chaos.operator_actions.items())),
        "paused_slots": len(paused),
        "paused_outcomes": dict(sorted(paused_outcomes.items())),
        "paused_queries_started": sum(paused_queries.values()),
        "released_holders": dict(
            sorted(Counter(str(d.status) for d in deliveries if d.request_id in released and d.done).items())
        ),
        # the same by the checkpoint the holder was stopped at: {"before_commit": {"stale_rejected": 1}}
        "released_holders_by_checkpoint": {
            checkpoint: dict(
                sorted(
                    Counter(
                        str(d.status) for d in deliveries if d.done and stopped_at.get(d.request_id) == checkpoint
                    ).items()
                )
            )
            for checkpoint in sorted(set(stopped_at.values()))
        },
        "generations_requested": len({(s, g) for s, g, _ in chaos.manual.values()}),
        "generations": dict(sorted(generations.items())),
        "generation_results": len(final.generation_results),
        "max_generation": max((g for _, g in final.generation_items), default=1),
        "manual_queries_started": manual_queries,
        "latest": {
            "slot": latest.get("latest_slot"),
            "generation": latest.get("latest_generation", 1) if latest else None,
            "fencing_token": latest.get("fencing_token"),
        },
    }


def takeover_latencies_s(chaos: Chaos) -> list[float]:
    """From each kill/stop of a holder (not after its commit) to the next commit of that slot by anyone."""
    history = chaos_checker.live_history(chaos.lambda_service.history)
    commits = [e for e in history if e["what"] == "checkpoint" and e.get("checkpoint") == "committed"]
    samples = []
    for fault in (e for e in history if e["what"] == "fault" and e.get("checkpoint") != "committed"):
        after = [
            c
            for c in commits
            if c["slot"] == fault["slot"]
            and c["t_ns"] > fault["t_ns"]
            and (c["request_id"], c["token"]) != (fault["request_id"], fault["token"])
        ]
        if after:
            samples.append((min(c["t_ns"] for c in after) - fault["t_ns"]) / 1e9)
    return samples


__all__ = [
    "build_report",
    "dead_lettered",
    "expected_rows",
    "faults_injected",
    "final_state",
    "lock_writes_sent",
    "logged_slot_missed",
    "operator_report",
    "outcomes",
    "query_tokens",
    "takeover_latencies_s",
    "tokens_of",
]
