"""Manual generations (re-runs): ``generation_commits`` (each requested generation ends exactly once, on its own)
and ``manual_isolated`` (manual runs leave the live schedule alone).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from local.scenario.checker.history import (
    accepted_commits,
    acquisitions,
    live_history,
    manual_requests,
    operator_events,
)
from local.scenario.checker.model import FINAL_COMMIT_STATUSES, OPERATOR, FinalState, slot_epoch_s, violation

#: Why a loser lost to the manual lease: never a live racer's reason.
MANUAL_LEASE_REASON = "busy"


def check_generations(
    history: Sequence[Mapping[str, Any]], final: FinalState, *, expected_rows: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """``generation_commits``: every manual generation (the ``rerun`` events) ends exactly once, on its own.

    Per requested (slot, generation): exactly one commit accepted among its invocations (one token; a retry
    re-reporting its commit is one); none sent after a higher token of the manual lease had been acquired (by
    any manual invocation: the manual lock item has one fencing counter per job); the stored generation item is
    SUCCEEDED or FAILED under that token, with the reported status; a SUCCEEDED one has its own result item under
    that token whose rows equal the slot's rows (``expected_rows``: slot -> rows) and ``row_count``, a FAILED one
    none. A generation item or a generation result that no ``rerun`` requested is reported too.
    """
    history = list(history)
    violations: list[dict[str, Any]] = []
    manual = manual_requests(history)
    events: dict[tuple[str, int], list[Mapping[str, Any]]] = defaultdict(list)
    for event in history:
        rid = event.get("request_id")
        if event.get("what") != OPERATOR and rid is not None and str(rid) in manual:
            events[manual[str(rid)]].append(event)
    manual_acquired = acquisitions(e for es in events.values() for e in es)
    requested = sorted(set(manual.values()), key=lambda k: (slot_epoch_s(k[0]), k[1]))
    for key in requested:
        slot, generation = key
        where = f"{slot} generation {generation}"
        commits = accepted_commits(events[key])
        tokens = sorted({c.token for c in commits})
        if len(tokens) != 1:
            violations.append(
                violation("generation_commits", slot, f"{where}: {len(tokens)} commits accepted (tokens {tokens})")
            )
        for commit in commits:
            newer = next((a for a in manual_acquired if a.token > commit.token and a.t_ns < commit.sent_ns), None)
            if newer is not None:
                violations.append(
                    violation(
                        "generation_commits",
                        slot,
                        f"{where}: commit with token {commit.token} accepted although manual token {newer.token}"
                        f" ({newer.slot}) had been acquired before it was sent",
                    )
                )
        item = final.generation_items.get(key) or {}
        status = item.get("status")
        stored = final.generation_results.get(key)
        problems = []
        if status not in ("SUCCEEDED", "FAILED"):
            problems.append(f"stored {status or 'nothing'}")
        elif len(tokens) == 1:
            commit = next(c for c in commits if c.token == tokens[0])
            if item.get("fencing_token") != commit.token:
                problems.append(f"stored under token {item.get('fencing_token')}, committed {commit.token}")
            if commit.status in FINAL_COMMIT_STATUSES and status != commit.status.upper():
                problems.append(f"stored {status}, reported {commit.status}")
        if status == "SUCCEEDED":
            if stored is None:
                problems.append("SUCCEEDED but no result item of its own")
            else:
                if stored.get("fencing_token") != item.get("fencing_token"):
                    problems.append(
                        f"result under token {stored.get('fencing_token')}, item under {item.get('fencing_token')}"
                    )
                rows = stored.get("rows")
                if expected_rows is not None and slot in expected_rows and rows != expected_rows[slot]:
                    problems.append(
                        f"stored rows differ from the query's ({len(rows or [])} stored,"
                        f" {len(expected_rows[slot] or [])} expected)"
                    )
                if stored.get("row_count") is not None and rows is not None and stored["row_count"] != len(rows):
                    problems.append(f"row_count {stored['row_count']} but {len(rows)} rows stored")
        elif stored is not None:
            problems.append(f"a result is stored although the generation is {status or 'not stored'}")
        if problems:
            violations.append(violation("generation_commits", slot, f"{where}: {'; '.join(problems)}"))
    for slot, generation in sorted(
        (set(final.generation_items) | set(final.generation_results)) - set(requested),
        key=lambda k: (slot_epoch_s(k[0]), k[1]),
    ):
        violations.append(
            violation("generation_commits", slot, f"generation {generation} is stored but was never requested")
        )
    return violations


def check_manual_isolation(history: Sequence[Mapping[str, Any]], final: FinalState) -> list[dict[str, Any]]:
    """``manual_isolated``: manual runs leave the live schedule alone.

    - no live racer lost as ``busy`` (the manual lease's reason: a live racer never races for it);
    - no manual invocation recorded a slot MISSED (a ``missed`` result, or a ``superseded`` record);
    - the live slot delivered beside a re-run (``beside``) ends committed (SUCCEEDED or FAILED), not MISSED;
    - the re-run slot's generation-1 record is what it was when the re-run was requested (``live_status``,
      ``live_token``).
    """
    history = list(history)
    violations: list[dict[str, Any]] = []
    manual = manual_requests(history)
    for event in live_history(history):
        if event.get("what") == "result" and event.get("reason") == MANUAL_LEASE_REASON:
            violations.append(
                violation(
                    "manual_isolated",
                    str(event.get("slot")),
                    f"live racer {event.get('request_id')} lost to the manual lease ({MANUAL_LEASE_REASON})",
                )
            )
    for event in history:
        rid = event.get("request_id")
        if rid is None or str(rid) not in manual or event.get("what") == OPERATOR:
            continue
        if (event.get("what") == "result" and event.get("status") == "missed") or (
            event.get("what") == "superseded" and event.get("recorded")
        ):
            violations.append(
                violation(
                    "manual_isolated",
                    str(event.get("slot")),
                    f"manual invocation {rid} recorded a slot MISSED ({event.get('what')}: {event.get('reason')})",
                )
            )
    for rerun in operator_events(history, "rerun"):
        beside = rerun.get("beside")
        if beside is not None:
            status = (final.slot_items.get(str(beside)) or {}).get("status")
            if status not in ("SUCCEEDED", "FAILED"):
                violations.append(
                    violation(
                        "manual_isolated",
                        str(beside),
                        f"the live slot raced beside the re-run of {rerun.get('slot')} ended {status or 'without a record'}",
                    )
                )
        if "live_status" in rerun:
            item = final.slot_items.get(str(rerun["slot"])) or {}
            now = (item.get("status"), item.get("fencing_token"))
            if now != (rerun.get("live_status"), rerun.get("live_token")):
                violations.append(
                    violation(
                        "manual_isolated",
                        str(rerun["slot"]),
                        f"generation 1 changed under the re-run: {rerun.get('live_status')}/token"
                        f" {rerun.get('live_token')} when requested, {now[0]}/token {now[1]} at the end",
                    )
                )
    return violations
