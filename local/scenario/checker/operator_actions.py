"""What the operator's actions promise: ``paused_slot`` (pause and resume) and ``force_release`` (a released
holder is fenced out, a takeover completes its slot).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from local.scenario.checker.history import accepted_commits, live_history, operator_events
from local.scenario.checker.model import FINAL_COMMIT_STATUSES, FinalState, slot_epoch_s, violation

#: Why a racer of a paused job lost, and the reason of the paused slot's MISSED record.
PAUSED_REASON = "paused"


def _results_by_request(history: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    by_request: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for event in history:
        if event.get("what") == "result":
            by_request[str(event.get("request_id"))].append(event)
    return by_request


def check_paused_slots(
    history: Sequence[Mapping[str, Any]], final: FinalState, *, queries_started: Mapping[str, int] | None = None
) -> list[dict[str, Any]]:
    """``paused_slot``: what the operator's pause and resume promise, per paused slot (``pause`` events).

    - no racer of the slot acquired it (no checkpoint at all), none started a query (``queries_started`` in
      its result, and ``queries_started``: slot -> queries the query engine holds for the slot's generation 1,
      when the harness counted them);
    - every racer delivered while the job was paused returned ``lost`` or ``missed`` with reason ``paused``,
      after one acquisition request (more only for a request the fault injector answered with an error, or a
      Lambda retry);
    - exactly one racer reported writing the MISSED record (status ``missed``), and the stored slot item is
      MISSED with reason ``paused``;
    - a racer refused as ``paused`` met a pause: the job was paused then, or its slot is within what the last
      ``resume`` left paused (at or before its paused-through slot); no slot that was never paused is stored
      MISSED ``paused``.
    """
    history = list(history)
    live = live_history(history)
    violations: list[dict[str, Any]] = []
    pauses = operator_events(history, "pause")
    resumes = operator_events(history, "resume")
    paused = {str(e["slot"]) for e in pauses}
    results = _results_by_request(live)
    delivered: dict[str, set[str]] = defaultdict(set)
    attempts: Counter[str] = Counter()
    acquires: Counter[str] = Counter()
    excused: Counter[str] = Counter()  # acquisition resends the injector caused
    for event in live:
        rid = str(event.get("request_id"))
        if event.get("what") == "deliver":
            delivered[str(event.get("slot"))].add(rid)
            attempts[rid] += 1
        elif event.get("what") == "dynamodb_requests":
            acquires[rid] += int((event.get("writes") or {}).get("acquire") or 0)
        elif event.get("what") == "injected" and event.get("operation") == "UpdateItem":
            excused[rid] += 1
    for pause in pauses:
        slot = str(pause["slot"])
        resumed_ns = min((int(r["t_ns"]) for r in resumes if r.get("slot") == slot), default=None)
        reached = sorted(
            {str(e.get("checkpoint")) for e in live if e.get("what") == "checkpoint" and e.get("slot") == slot}
        )
        if reached:
            violations.append(violation("paused_slot", slot, f"a racer of the paused slot reached {reached}"))
        engine = (queries_started or {}).get(slot, 0)
        reported = sum(int(r.get("queries_started") or 0) for rid in delivered[slot] for r in results.get(rid, ()))
        if engine or reported:
            violations.append(
                violation(
                    "paused_slot",
                    slot,
                    f"queries started for the paused slot: {engine} in the engine, {reported} reported",
                )
            )
        writers = 0
        for rid in sorted(delivered[slot]):
            for result in results.get(rid, ()):
                during = resumed_ns is None or int(result["t_ns"]) < resumed_ns
                if result.get("status") == "missed" and result.get("reason") == PAUSED_REASON:
                    writers += 1
                elif during and (result.get("status"), result.get("reason")) != ("lost", PAUSED_REASON):
                    violations.append(
                        violation(
                            "paused_slot",
                            slot,
                            f"racer {rid} returned {result.get('status')}/{result.get('reason')} while the job was paused",
                        )
                    )
            if acquires[rid] > attempts[rid] + excused[rid]:
                violations.append(
                    violation(
                        "paused_slot",
                        slot,
                        f"racer {rid} sent {acquires[rid]} acquisition requests in {attempts[rid]} attempt(s)"
                        f" ({excused[rid]} answered by the fault injector)",
                    )
                )
        item = final.slot_items.get(slot) or {}
        if writers != 1 or (item.get("status"), item.get("reason")) != ("MISSED", PAUSED_REASON):
            violations.append(
                violation(
                    "paused_slot",
                    slot,
                    f"{writers} racer(s) recorded the paused slot MISSED; stored {item.get('status') or 'nothing'}"
                    f"/{item.get('reason')}",
                )
            )
    # A racer refused as paused must have met a pause: the job paused then, or the slot within what the last
    # resume left paused (its paused-through slot).
    switches = sorted(pauses + resumes, key=lambda e: int(e["t_ns"]))
    for event in live:
        if event.get("what") != "result" or event.get("reason") != PAUSED_REASON:
            continue
        last = next((e for e in reversed(switches) if int(e["t_ns"]) < int(event["t_ns"])), None)
        if last is not None and last.get("action") == "pause":
            continue
        through = None if last is None else last.get("through")
        if through is None or slot_epoch_s(str(event["slot"])) > slot_epoch_s(str(through)):
            violations.append(
                violation(
                    "paused_slot",
                    str(event["slot"]),
                    f"racer {event.get('request_id')} refused as paused, but the job was not paused for it"
                    + (f" (resumed, paused through {through})" if last is not None else ""),
                )
            )
    for slot, item in sorted(final.slot_items.items(), key=lambda kv: slot_epoch_s(kv[0])):
        if item.get("reason") == PAUSED_REASON and slot not in paused:
            violations.append(violation("paused_slot", slot, "stored MISSED paused, but the job was not paused for it"))
    return violations


def check_force_release(history: Sequence[Mapping[str, Any]], final: FinalState) -> list[dict[str, Any]]:
    """``force_release``: per ``release`` event (the operator released holder R of slot S, fencing out token T):

    - no commit of S under a token at or below T is accepted once the release applied, R's above all (the
      release bumped the lock's token: R's commit must be rejected as stale, never applied);
    - no result of R says ``succeeded`` or ``failed`` under T;
    - S ends committed (SUCCEEDED or FAILED) under a token above T, by another request that took the slot over
      (``takeover``, or the re-entry of its own Lambda retry) and adopted R's query (it started none itself).
    """
    history = list(history)
    live = live_history(history)
    violations: list[dict[str, Any]] = []
    commits = accepted_commits(live)
    results = _results_by_request(live)
    for release in operator_events(history, "release"):
        slot, rid, token = str(release["slot"]), str(release.get("request_id")), int(release["token"])
        for commit in commits:
            if (
                commit.slot == slot
                and commit.token <= token
                and (commit.request_id == rid or commit.sent_ns > int(release["t_ns"]))
            ):
                violations.append(
                    violation(
                        "force_release",
                        slot,
                        f"commit with token {commit.token} (request {commit.request_id}) accepted although the operator"
                        f" had released token {token}",
                    )
                )
        for result in results.get(rid, ()):
            if result.get("status") in FINAL_COMMIT_STATUSES and result.get("token") == token:
                violations.append(
                    violation("force_release", slot, f"the released holder {rid} reported {result.get('status')}")
                )
        item = final.slot_items.get(slot) or {}
        final_token = item.get("fencing_token")
        if (
            item.get("status") not in ("SUCCEEDED", "FAILED")
            or not isinstance(final_token, int)
            or final_token <= token
        ):
            violations.append(
                violation(
                    "force_release",
                    slot,
                    f"not completed after the release of token {token} (stored {item.get('status') or 'nothing'},"
                    f" token {final_token})",
                )
            )
            continue
        successor = next((c for c in commits if c.slot == slot and c.token == final_token), None)
        if successor is None or successor.request_id == rid:
            violations.append(
                violation("force_release", slot, f"no other request's commit under the stored token {final_token}")
            )
            continue
        reported = [r for r in results.get(successor.request_id, ()) if r.get("status") in FINAL_COMMIT_STATUSES]
        took_over = any(r.get("takeover") or r.get("reentered") for r in reported)
        queries = sum(int(r.get("queries_started") or 0) for r in results.get(successor.request_id, ()))
        if not reported or not took_over or queries:
            violations.append(
                violation(
                    "force_release",
                    slot,
                    f"the successor {successor.request_id} did not take over adopting the query (results"
                    f" {len(reported)}, takeover {took_over}, queries started {queries})",
                )
            )
    return violations
