"""Each slot's terminal record: ``terminal_records`` (exactly one, written once, the one reported) and
``slot_missed_logged`` (the MISSED records logged equal the MISSED slot items).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from athena_refresh import contract
from local.scenario.checker.history import accepted_commits, live_history
from local.scenario.checker.model import FINAL_COMMIT_STATUSES, FinalState, slot_epoch_s, violation

#: The slot item statuses that end a slot.
TERMINAL_STATUSES = ("SUCCEEDED", "FAILED", "MISSED")
#: The log field that marks a MISSED record's line (``contract.LOG_FIELD_MISSED_REASON``).
MISSED_REASON_FIELD = contract.LOG_FIELD_MISSED_REASON


@dataclass(frozen=True)
class TerminalWrite:
    """A terminal record a racer reported writing: a commit (``SUCCEEDED``/``FAILED``; ``COMMITTED`` when
    the racer died after its ``committed`` checkpoint, before saying which) or a MISSED record."""

    slot: str
    writer: tuple[Any, ...]  # (request id, token) of a commit; (request id, "missed") of a MISSED record
    status: str
    t_ns: int
    token: int | None = None
    reason: str | None = None
    error_type: str | None = None


def terminal_writes(history: Iterable[Mapping[str, Any]]) -> list[TerminalWrite]:
    """Every terminal record the racers reported writing, in the order they reported it.

    A commit is :func:`accepted_commits`' (one per request id and token, however often it is reported); a
    MISSED record is a ``missed`` result (too_old, overrun, superseded: the racer's own slot) or a
    ``superseded`` event with ``recorded`` (an acquisition that recorded the older slot it replaced).
    """
    history = list(history)
    results = {
        (str(e.get("request_id")), e.get("token")): e
        for e in history
        if e.get("what") == "result" and e.get("status") in FINAL_COMMIT_STATUSES
    }
    writes = []
    for commit in accepted_commits(history):
        result = results.get((commit.request_id, commit.token), {})
        status = commit.status.upper() if commit.status in FINAL_COMMIT_STATUSES else "COMMITTED"
        writes.append(
            TerminalWrite(
                commit.slot,
                (commit.request_id, commit.token),
                status,
                commit.acked_ns,
                token=commit.token,
                reason=result.get("reason"),
                error_type=result.get("error_type"),
            )
        )
    for event in history:
        if event.get("what") == "result" and event.get("status") == "missed":
            writes.append(
                TerminalWrite(
                    str(event["slot"]),
                    (str(event.get("request_id")), "missed"),
                    "MISSED",
                    int(event["t_ns"]),
                    reason=event.get("reason"),
                )
            )
        elif event.get("what") == "superseded" and event.get("recorded"):
            writes.append(
                TerminalWrite(
                    str(event["slot"]),
                    (str(event.get("request_id")), "missed"),
                    "MISSED",
                    int(event["t_ns"]),
                    reason="superseded",
                )
            )
    unique: dict[tuple[str, tuple[Any, ...]], TerminalWrite] = {}
    for write in sorted(writes, key=lambda w: w.t_ns):
        unique.setdefault((write.slot, write.writer), write)
    return list(unique.values())


def delivered_slots(history: Iterable[Mapping[str, Any]]) -> list[str]:
    """The slots of every delivery but the near-future ones (``kind`` ``future``), oldest first."""
    return sorted(
        {str(e["slot"]) for e in history if e.get("what") == "deliver" and e.get("kind") != "future"}, key=slot_epoch_s
    )


def check_terminal_records(
    history: Sequence[Mapping[str, Any]], final: FinalState, *, dead_lettered: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """``terminal_records``: every delivered slot ends with exactly one terminal record, never overwritten.

    For each slot delivered at least once (near-future deliveries aside; they have their own check):

    - at the end its slot item is SUCCEEDED, FAILED or MISSED. The one exception is a slot whose event went
      to Lambda's on-failure destination (its outcome is that entry; a replay records it). A slot whose
      racers all lost undecided (``conflict``/``unavailable``, a normal return) and that nothing later
      superseded would end without any record: that is reported, not excused;
    - at most one racer reported writing a terminal record (commits counted once per request id and token,
      so a retry re-reporting its own commit is one writer): two writers mean a terminal record was
      overwritten (SLOT_NOT_ENDED failed to hold);
    - the record that stayed is the one reported: same status (a commit whose racer died before saying
      SUCCEEDED or FAILED matches either), same fencing token for a commit, same reason for a MISSED record,
      and a commit refused for good (``write_rejected``) is a FAILED item carrying ``WriteRejectedError``;
    - a committed item (SUCCEEDED/FAILED) never carries a miss ``reason`` (it would be a MISSED record's,
      overwritten);
    - no racer of the slot reported its items as corrupt (``corrupt``: the runtime met a terminal record it
      could not explain, e.g. a state or commit write refused by SLOT_NOT_ENDED while the lock names it).

    A terminal item no racer reported writing is not attributed here (a MISSED write whose answer never
    arrived shows in ``slot_missed_logged``).
    """
    history = live_history(history)
    violations: list[dict[str, Any]] = []
    dlq = set(dead_lettered)
    writes: dict[str, list[TerminalWrite]] = defaultdict(list)
    for write in terminal_writes(history):
        writes[write.slot].append(write)
    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    corrupt: dict[str, int] = Counter()
    for event in history:
        if event.get("what") == "result":
            outcomes[str(event.get("slot"))][f"{event.get('status')}:{event.get('reason')}"] += 1
            if event.get("status") == "corrupt":
                corrupt[str(event.get("slot"))] += 1
    for slot in delivered_slots(history):
        item = final.slot_items.get(slot)
        status = (item or {}).get("status")
        reported = writes.get(slot, [])
        if status not in TERMINAL_STATUSES:
            if slot not in dlq:
                seen = ", ".join(f"{k} x{n}" for k, n in sorted(outcomes[slot].items())) or "no result"
                violations.append(
                    violation(
                        "terminal_records",
                        slot,
                        f"no terminal record at the end (slot item: {status or 'absent'}; racers' results: {seen})",
                    )
                )
            continue
        if status in ("SUCCEEDED", "FAILED") and (item or {}).get("reason") is not None:
            violations.append(
                violation("terminal_records", slot, f"{status} item carries the miss reason {item.get('reason')!r}")
            )
        if corrupt.get(slot):
            violations.append(
                violation("terminal_records", slot, f"{corrupt[slot]} racer(s) reported the slot's items as corrupt")
            )
        if len(reported) > 1:
            described = "; ".join(
                f"{w.status}{'/' + str(w.reason) if w.reason else ''} by {w.writer[0]}"
                f"{' token ' + str(w.token) if w.token is not None else ''}"
                for w in reported
            )
            violations.append(
                violation(
                    "terminal_records", slot, f"{len(reported)} terminal writes accepted ({described}); final {status}"
                )
            )
            continue
        if not reported:
            continue
        first = reported[0]
        expected = ("SUCCEEDED", "FAILED") if first.status == "COMMITTED" else (first.status,)
        problems = []
        if status not in expected:
            problems.append(f"status {status}, reported {first.status}")
        if first.token is not None and item.get("fencing_token") != first.token:
            problems.append(f"token {item.get('fencing_token')}, committed {first.token}")
        if first.status == "MISSED" and item.get("reason") != first.reason:
            problems.append(f"reason {item.get('reason')!r}, reported {first.reason!r}")
        if first.reason == "write_rejected" and (item.get("error") or {}).get("type") != "WriteRejectedError":
            problems.append(f"write_rejected but the item's error is {(item.get('error') or {}).get('type')!r}")
        if problems:
            violations.append(
                violation(
                    "terminal_records",
                    slot,
                    f"the stored record is not the one written ({'; '.join(problems)}; writer {first.writer[0]})",
                )
            )
    return violations


def logged_missed_slots(lines: Iterable[str]) -> Counter[str]:
    """How many MISSED records the runtime's JSON log lines among ``lines`` report, by reason.

    Each MISSED record is on exactly one line carrying ``missed_reason`` (``contract.LOG_FIELD_MISSED_REASON``): the
    outcome line of a ``missed`` invocation, or the warning of a winner whose acquisition recorded an older slot
    superseded (issue 23: no SlotMissed metric any more). Other lines (EMF blobs, tracebacks) are skipped.
    """
    counts: Counter[str] = Counter()
    for line in lines:
        if MISSED_REASON_FIELD not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "_aws" not in record and MISSED_REASON_FIELD in record:
            counts[str(record[MISSED_REASON_FIELD])] += 1
    return counts


def check_slot_missed_logged(logged: Mapping[str, int], final: FinalState) -> list[dict[str, Any]]:
    """``slot_missed_logged``: the MISSED records logged equal the MISSED slot items, reason by reason.

    Each MISSED record is counted by exactly one racer (the one whose write applied, an SDK resend of its
    own write included); a missing value is a MISSED record nobody owned up to, an extra one a record
    counted twice (or written twice).
    """
    stored = Counter(str(item.get("reason")) for item in final.slot_items.values() if item.get("status") == "MISSED")
    violations = []
    for reason in sorted(set(stored) | set(logged)):
        if stored.get(reason, 0) != logged.get(reason, 0):
            slots = sorted(
                (
                    s
                    for s, item in final.slot_items.items()
                    if item.get("status") == "MISSED" and str(item.get("reason")) == reason
                ),
                key=slot_epoch_s,
            )
            violations.append(
                violation(
                    "slot_missed_logged",
                    None,
                    f"reason {reason}: {logged.get(reason, 0)} MISSED record(s) logged, {stored.get(reason, 0)}"
                    f" slot item(s) MISSED {slots}",
                )
            )
    return violations
