"""The chaos suite's history checker: pure functions over a recorded history and the final stored state.

In the manner of Jepsen's checkers (https://jepsen.io/consistency), the checker trusts nothing the
racers *say* about the protocol's guarantees: it replays what every racer observed, with machine-wide
``CLOCK_MONOTONIC`` timestamps (comparable across processes on one host), against what DynamoDB holds at
the end, and reports every violation of:

``one_commit_per_slot``
    at most one commit (a slot's final outcome) is accepted per slot;
``tokens_increase``
    committed fencing tokens strictly increase in slot order (history and stored results);
``stale_write_accepted``
    no commit is accepted whose token was already superseded when it was sent: an acquisition with a
    higher token had returned before the commit request left (Kleppmann, "How to do distributed
    locking", 2016: https://martin.kleppmann.com/2016/02/08/how-to-do-distributed-locking.html);
``commit_after_newer_slot``
    no slot commits after a newer slot's commit was acknowledged;
``slot_unaccounted``
    every planned slot ends committed (SUCCEEDED or FAILED) or with a recorded reason (a MISSED slot
    item with its reason, or Lambda's on-failure destination after the async retries ran out);
``results_mismatch``
    every SUCCEEDED slot has exactly one stored result, under the committed token, whose rows equal the
    rows the query gives for that slot (no row lost, none duplicated), and the LATEST pointer names the
    newest committed slot.

History events are dicts with ``what`` and ``t_ns`` plus, by kind: ``checkpoint`` (``request_id``,
``slot``, ``checkpoint``, ``token``), ``resumed`` (``request_id``), ``result`` (``request_id``, ``slot``,
``status``, ``token``), ``dlq`` (``slot``). See :mod:`local.chaos` for how they are recorded.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

FINAL_COMMIT_STATUSES = ("succeeded", "failed")


@dataclass(frozen=True)
class Commit:
    """A commit the history shows as accepted: who, which slot, which token, when sent and acknowledged."""

    slot: str
    token: int
    request_id: str
    sent_ns: int
    acked_ns: int
    status: str

    @property
    def slot_epoch_s(self) -> int:
        return slot_epoch_s(self.slot)


@dataclass(frozen=True)
class Acquisition:
    slot: str
    token: int
    request_id: str
    t_ns: int


@dataclass
class FinalState:
    """What the tables hold at the end.

    ``slot_items``: slot iso -> the lock table's slot item (``status``, ``fencing_token``, ``reason``,
    ``summary``, ``error``); ``results``: slot iso -> the results item (``fencing_token``, ``rows``,
    ``row_count``); ``latest``: the LATEST pointer (``latest_slot``, ``fencing_token``) or ``None``.
    """

    slot_items: dict[str, dict[str, Any]] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    latest: dict[str, Any] | None = None


def slot_epoch_s(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())


def _violation(check: str, slot: str | None, detail: str) -> dict[str, Any]:
    return {"check": check, "slot": slot, "detail": detail}


def accepted_commits(history: Iterable[Mapping[str, Any]]) -> list[Commit]:
    """Commits the racers saw accepted: a ``committed`` checkpoint, or a succeeded/failed result.

    The send time is the later of the ``before_commit`` checkpoint and a ``resumed`` event of the same
    request after it (a racer stopped at ``before_commit`` sends its commit only once resumed).
    """
    before: dict[tuple[str, int], int] = {}
    resumed: dict[str, list[int]] = defaultdict(list)
    acked: dict[tuple[str, int], tuple[int, str, str]] = {}
    for event in history:
        what = event.get("what")
        rid = str(event.get("request_id"))
        if what == "checkpoint" and event.get("token") is not None:
            key = (rid, int(event["token"]))
            if event.get("checkpoint") == "before_commit":
                before[key] = int(event["t_ns"])
            elif event.get("checkpoint") == "committed" and key not in acked:
                acked[key] = (int(event["t_ns"]), str(event["slot"]), "committed")
        elif what == "resumed":
            resumed[rid].append(int(event["t_ns"]))
        elif what == "result" and event.get("status") in FINAL_COMMIT_STATUSES and event.get("token") is not None:
            key = (rid, int(event["token"]))
            if key not in acked or acked[key][2] == "committed":
                acked[key] = (acked.get(key, (int(event["t_ns"]),))[0], str(event["slot"]), str(event["status"]))
    commits = []
    for (rid, token), (acked_ns, slot, status) in acked.items():
        sent_ns = before.get((rid, token), acked_ns)
        later = [t for t in resumed.get(rid, ()) if sent_ns <= t <= acked_ns]
        commits.append(Commit(slot, token, rid, max([sent_ns, *later]), acked_ns, status))
    return sorted(commits, key=lambda c: (c.acked_ns, c.token))


def acquisitions(history: Iterable[Mapping[str, Any]]) -> list[Acquisition]:
    return sorted(
        (
            Acquisition(str(e["slot"]), int(e["token"]), str(e["request_id"]), int(e["t_ns"]))
            for e in history
            if e.get("what") == "checkpoint" and e.get("checkpoint") == "acquired" and e.get("token") is not None
        ),
        key=lambda a: a.t_ns,
    )


def check_history(history: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Violations visible in the history alone (the first four checks of the module docstring)."""
    violations: list[dict[str, Any]] = []
    commits = accepted_commits(history)
    by_slot: dict[str, list[Commit]] = defaultdict(list)
    for commit in commits:
        by_slot[commit.slot].append(commit)
    for slot, slot_commits in sorted(by_slot.items()):
        tokens = sorted({c.token for c in slot_commits})
        if len(tokens) > 1:
            violations.append(_violation("one_commit_per_slot", slot, f"{len(tokens)} commits accepted, tokens {tokens}"))
    # tokens_increase: one representative (the first accepted) per slot, in slot order
    firsts = sorted((min(cs, key=lambda c: c.acked_ns) for cs in by_slot.values()), key=lambda c: c.slot_epoch_s)
    for previous, current in zip(firsts, firsts[1:]):
        if current.token <= previous.token:
            violations.append(_violation(
                "tokens_increase", current.slot,
                f"token {current.token} is not above token {previous.token} of the earlier slot {previous.slot}",
            ))
    acquired = acquisitions(history)
    for commit in commits:
        newer = next((a for a in acquired if a.token > commit.token and a.t_ns < commit.sent_ns), None)
        if newer is not None:
            violations.append(_violation(
                "stale_write_accepted", commit.slot,
                f"commit with token {commit.token} (request {commit.request_id}) was accepted although token"
                f" {newer.token} (slot {newer.slot}) had been acquired {(commit.sent_ns - newer.t_ns) / 1e6:.1f} ms"
                " before it was sent",
            ))
        later = next(
            (d for d in commits if d.slot_epoch_s > commit.slot_epoch_s and d.acked_ns < commit.sent_ns), None
        )
        if later is not None:
            violations.append(_violation(
                "commit_after_newer_slot", commit.slot,
                f"commit with token {commit.token} was accepted after slot {later.slot} had committed"
                f" (token {later.token})",
            ))
    return violations


def check_final_state(
    final: FinalState,
    *,
    planned_slots: Iterable[str],
    dead_lettered: Iterable[str],
    expected_rows: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """Violations visible in the stored state (the last two checks, and the stored half of the token order).

    ``expected_rows``: slot iso -> the rows (JSON-shaped, as stored) the query returns for that slot.
    """
    violations: list[dict[str, Any]] = []
    dlq = set(dead_lettered)
    for slot in sorted(set(planned_slots), key=slot_epoch_s):
        item = final.slot_items.get(slot)
        status = (item or {}).get("status")
        if status in ("SUCCEEDED", "FAILED"):
            continue
        if status == "MISSED" and (item or {}).get("reason"):
            continue
        if slot in dlq:
            continue
        violations.append(_violation(
            "slot_unaccounted", slot,
            f"no outcome recorded (slot item: {status or 'absent'}, not in the on-failure destination)",
        ))
    succeeded = {slot: item for slot, item in final.slot_items.items() if item.get("status") == "SUCCEEDED"}
    for slot, item in sorted(succeeded.items(), key=lambda kv: slot_epoch_s(kv[0])):
        stored = final.results.get(slot)
        if stored is None:
            violations.append(_violation("results_mismatch", slot, "SUCCEEDED but no result item is stored"))
            continue
        if stored.get("fencing_token") != item.get("fencing_token"):
            violations.append(_violation(
                "results_mismatch", slot,
                f"result stored under token {stored.get('fencing_token')}, slot committed under"
                f" {item.get('fencing_token')}",
            ))
        rows = stored.get("rows")
        if slot in expected_rows and rows != expected_rows[slot]:  # same rows, same order, nothing extra
            got, want = len(rows or []), len(expected_rows[slot] or [])
            violations.append(_violation(
                "results_mismatch", slot, f"stored rows differ from the query's rows ({got} stored, {want} expected)"
            ))
        if stored.get("row_count") is not None and rows is not None and stored["row_count"] != len(rows):
            violations.append(_violation(
                "results_mismatch", slot, f"row_count {stored['row_count']} but {len(rows)} rows stored"
            ))
    for slot in sorted(set(final.results) - set(succeeded), key=slot_epoch_s):
        violations.append(_violation("results_mismatch", slot, "a result is stored for a slot that did not succeed"))
    ordered = sorted(final.results.items(), key=lambda kv: slot_epoch_s(kv[0]))
    for (prev_slot, prev), (slot, current) in zip(ordered, ordered[1:]):
        if int(current.get("fencing_token", 0)) <= int(prev.get("fencing_token", 0)):
            violations.append(_violation(
                "tokens_increase", slot,
                f"stored token {current.get('fencing_token')} is not above {prev.get('fencing_token')} of {prev_slot}",
            ))
    if ordered:
        newest_slot, newest = ordered[-1]
        latest = final.latest or {}
        if latest.get("latest_slot") != newest_slot or latest.get("fencing_token") != newest.get("fencing_token"):
            violations.append(_violation(
                "results_mismatch", newest_slot,
                f"LATEST points at {latest.get('latest_slot')} (token {latest.get('fencing_token')}), the newest"
                f" stored result is {newest_slot} (token {newest.get('fencing_token')})",
            ))
    return violations


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100) of ``values``; ``None`` when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), -(-len(ordered) * q // 100)))
    return ordered[int(rank) - 1]
