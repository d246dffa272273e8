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
    newest committed slot;
``terminal_records``
    every delivered slot (near-future deliveries aside) ends with exactly one terminal record, written
    once and never overwritten (:func:`check_terminal_records`);
``slot_missed_logged``
    the MISSED records the environments logged (lines with ``missed_reason``) equal, reason by reason, the slot
    items recorded MISSED (:func:`check_slot_missed_logged`);
``future_slot_refused``
    a delivery scheduled ahead of now (beyond the lead allowance) is refused with ``InvalidEventError`` on
    every attempt before any DynamoDB request, and its slot is never acquired nor recorded
    (:func:`check_future_refused`);
``paused_slot``
    a slot the operator paused is never acquired: every racer of it loses as ``paused`` after one acquisition
    request, exactly one records it MISSED ``paused`` (and that is its stored record), no query is started for
    it; after the resume no later slot is refused as paused (:func:`check_paused_slots`);
``force_release``
    the holder whose live lease the operator released never has a commit accepted (its token is fenced out),
    and its slot is completed by a takeover under a higher token that adopted the recorded query
    (:func:`check_force_release`);
``generation_commits``
    the once-per-slot rules per (slot, generation) for every manual generation (a re-run): exactly one commit
    accepted (SUCCEEDED or FAILED), none stale on the manual lease, the stored generation item is that commit,
    and a SUCCEEDED generation has its own result item (under its token, with the slot's rows), a FAILED one
    none; no generation item nor result nobody requested (:func:`check_generations`);
``manual_isolated``
    manual runs never touch the live schedule: no live racer loses to the manual lease (``busy``), no manual run
    records a slot MISSED, the live slot raced beside a re-run still ends committed, and the re-run slot's live
    record (generation 1) stays as it was (:func:`check_manual_isolation`).

Generations: the live schedule runs generation 1 of each slot, and the first eight checks apply to it as they
always did (the manual invocations' events are left out of them: :func:`live_history`); each manual generation
(2, 3, ...) is judged on its own by ``generation_commits``; the LATEST pointer must end at the newest (slot,
generation) stored (``results_mismatch``).

History events are dicts with ``what`` and ``t_ns`` plus, by kind: ``deliver`` (``request_id``, ``slot``,
``kind``), ``checkpoint`` (``request_id``, ``slot``, ``checkpoint``, ``token``), ``resumed``
(``request_id``), ``result`` (``request_id``, ``slot``, ``status``, ``reason``, ``token``, ``error_type``),
``error`` (``request_id``, ``slot``, ``error_type``), ``superseded`` (``request_id``, ``slot``: the older
slot an acquisition replaced, ``recorded``: whether it wrote that slot's MISSED record),
``dynamodb_requests`` (``request_id``, ``count``), ``dlq`` (``slot``). :mod:`local.emulators.lambda_service`
records them (for the chaos suite and the demo alike). The chaos harness adds ``operator`` events (``action``
``pause``, ``resume``, ``release`` or ``rerun``, ``slot``; :data:`OPERATOR` describes their fields).

Size (about 1,030 lines): thirteen checks, each a pure function with its helpers next to it; splitting them would
scatter one specification (the list above) over several files.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from athena_refresh import contract

FINAL_COMMIT_STATUSES = ("succeeded", "failed")
TERMINAL_STATUSES = ("SUCCEEDED", "FAILED", "MISSED")
MISSED_REASON_FIELD = contract.LOG_FIELD_MISSED_REASON
#: Every check, as named in the violations' ``check`` (the module docstring says what each one means).
CHECKS = (
    "one_commit_per_slot",
    "tokens_increase",
    "stale_write_accepted",
    "commit_after_newer_slot",
    "slot_unaccounted",
    "results_mismatch",
    "terminal_records",
    "slot_missed_logged",
    "future_slot_refused",
    "paused_slot",
    "force_release",
    "generation_commits",
    "manual_isolated",
)
#: History events of the operator's actions, recorded by the chaos harness when it acts (``t_ns``: once the
#: action returned): ``pause`` (``slot``: the slot about to be delivered); ``resume`` (``slot``, ``through``: the
#: paused-through slot the resume left, later slots run); ``release`` (``slot``, ``request_id``: the holder
#: released, ``token``: its fencing token, fenced out, ``checkpoint``: where it stopped); ``rerun`` (``slot``,
#: ``generation``, ``request_id``: the manual invocation, ``beside``: the live slot delivered with it or
#: ``None``, ``live_status``/``live_token``: the slot's generation-1 record when the re-run was requested).
OPERATOR = "operator"
#: Why a loser lost to the manual lease: never a live racer's reason.
MANUAL_LEASE_REASON = "busy"
PAUSED_REASON = "paused"


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
    ``summary``, ``error``), every generation-1 slot item the table holds for the job; ``results``: slot iso
    -> the generation-1 results item (``fencing_token``, ``rows``, ``row_count``); ``latest``: the LATEST
    pointer (``latest_slot``, ``latest_generation``, absent for 1, ``fencing_token``) or ``None``.
    ``generation_items`` and ``generation_results``: the same for the manual generations, keyed by (slot iso,
    generation >= 2).
    """

    slot_items: dict[str, dict[str, Any]] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    latest: dict[str, Any] | None = None
    generation_items: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    generation_results: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)


def slot_epoch_s(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp())


def _violation(check: str, slot: str | None, detail: str) -> dict[str, Any]:
    return {"check": check, "slot": slot, "detail": detail}


def operator_events(history: Iterable[Mapping[str, Any]], action: str | None = None) -> list[Mapping[str, Any]]:
    """The operator's actions in the history (:data:`OPERATOR`), in order; ``action``: only those."""
    return [e for e in history if e.get("what") == OPERATOR and (action is None or e.get("action") == action)]


def manual_requests(history: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, int]]:
    """Request id -> (slot, generation) of every manual invocation (the operator's ``rerun`` events); Lambda's
    retries of one keep its request id."""
    return {
        str(e["request_id"]): (str(e["slot"]), int(e["generation"]))
        for e in operator_events(history, "rerun")
        if e.get("request_id") is not None and e.get("generation") is not None
    }


def live_history(history: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The live schedule's events (generation 1): all but the operator's own and its manual invocations'."""
    history = list(history)
    manual = manual_requests(history)
    return [
        e
        for e in history
        if e.get("what") != OPERATOR and (e.get("request_id") is None or e["request_id"] not in manual)
    ]


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
    """Violations visible in the history alone (the first four checks of the module docstring), of the live
    schedule (generation 1: :func:`live_history`)."""
    history = live_history(history)
    violations: list[dict[str, Any]] = []
    commits = accepted_commits(history)
    by_slot: dict[str, list[Commit]] = defaultdict(list)
    for commit in commits:
        by_slot[commit.slot].append(commit)
    for slot, slot_commits in sorted(by_slot.items()):
        tokens = sorted({c.token for c in slot_commits})
        if len(tokens) > 1:
            violations.append(
                _violation("one_commit_per_slot", slot, f"{len(tokens)} commits accepted, tokens {tokens}")
            )
    # tokens_increase: one representative (the first accepted) per slot, in slot order
    firsts = sorted((min(cs, key=lambda c: c.acked_ns) for cs in by_slot.values()), key=lambda c: c.slot_epoch_s)
    for previous, current in itertools.pairwise(firsts):
        if current.token <= previous.token:
            violations.append(
                _violation(
                    "tokens_increase",
                    current.slot,
                    f"token {current.token} is not above token {previous.token} of the earlier slot {previous.slot}",
                )
            )
    acquired = acquisitions(history)
    for commit in commits:
        newer = next((a for a in acquired if a.token > commit.token and a.t_ns < commit.sent_ns), None)
        if newer is not None:
            violations.append(
                _violation(
                    "stale_write_accepted",
                    commit.slot,
                    f"commit with token {commit.token} (request {commit.request_id}) was accepted although token"
                    f" {newer.token} (slot {newer.slot}) had been acquired {(commit.sent_ns - newer.t_ns) / 1e6:.1f} ms"
                    " before it was sent",
                )
            )
        later = next((d for d in commits if d.slot_epoch_s > commit.slot_epoch_s and d.acked_ns < commit.sent_ns), None)
        if later is not None:
            violations.append(
                _violation(
                    "commit_after_newer_slot",
                    commit.slot,
                    f"commit with token {commit.token} was accepted after slot {later.slot} had committed"
                    f" (token {later.token})",
                )
            )
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
        violations.append(
            _violation(
                "slot_unaccounted",
                slot,
                f"no outcome recorded (slot item: {status or 'absent'}, not in the on-failure destination)",
            )
        )
    succeeded = {slot: item for slot, item in final.slot_items.items() if item.get("status") == "SUCCEEDED"}
    for slot, item in sorted(succeeded.items(), key=lambda kv: slot_epoch_s(kv[0])):
        stored = final.results.get(slot)
        if stored is None:
            violations.append(_violation("results_mismatch", slot, "SUCCEEDED but no result item is stored"))
            continue
        if stored.get("fencing_token") != item.get("fencing_token"):
            violations.append(
                _violation(
                    "results_mismatch",
                    slot,
                    f"result stored under token {stored.get('fencing_token')}, slot committed under"
                    f" {item.get('fencing_token')}",
                )
            )
        rows = stored.get("rows")
        if slot in expected_rows and rows != expected_rows[slot]:  # same rows, same order, nothing extra
            got, want = len(rows or []), len(expected_rows[slot] or [])
            violations.append(
                _violation(
                    "results_mismatch",
                    slot,
                    f"stored rows differ from the query's rows ({got} stored, {want} expected)",
                )
            )
        if stored.get("row_count") is not None and rows is not None and stored["row_count"] != len(rows):
            violations.append(
                _violation("results_mismatch", slot, f"row_count {stored['row_count']} but {len(rows)} rows stored")
            )
    for slot in sorted(set(final.results) - set(succeeded), key=slot_epoch_s):
        violations.append(_violation("results_mismatch", slot, "a result is stored for a slot that did not succeed"))
    ordered = sorted(final.results.items(), key=lambda kv: slot_epoch_s(kv[0]))
    for (prev_slot, prev), (slot, current) in itertools.pairwise(ordered):
        if int(current.get("fencing_token", 0)) <= int(prev.get("fencing_token", 0)):
            violations.append(
                _violation(
                    "tokens_increase",
                    slot,
                    f"stored token {current.get('fencing_token')} is not above {prev.get('fencing_token')} of {prev_slot}",
                )
            )
    # LATEST: the newest (slot, generation) stored, whichever generation (a re-run of the newest slot moves it)
    stored_results = [((slot, 1), item) for slot, item in final.results.items()]
    stored_results += list(final.generation_results.items())
    if stored_results:
        (newest_slot, newest_generation), newest = max(
            stored_results, key=lambda kv: (slot_epoch_s(kv[0][0]), kv[0][1])
        )
        latest = final.latest or {}
        at = (latest.get("latest_slot"), int(latest.get("latest_generation") or 1), latest.get("fencing_token"))
        if at != (newest_slot, newest_generation, newest.get("fencing_token")):
            violations.append(
                _violation(
                    "results_mismatch",
                    newest_slot,
                    f"LATEST points at {at[0]} generation {at[1]} (token {at[2]}), the newest stored result is"
                    f" {newest_slot} generation {newest_generation} (token {newest.get('fencing_token')})",
                )
            )
    return violations


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
                    _violation(
                        "terminal_records",
                        slot,
                        f"no terminal record at the end (slot item: {status or 'absent'}; racers' results: {seen})",
                    )
                )
            continue
        if status in ("SUCCEEDED", "FAILED") and (item or {}).get("reason") is not None:
            violations.append(
                _violation("terminal_records", slot, f"{status} item carries the miss reason {item.get('reason')!r}")
            )
        if corrupt.get(slot):
            violations.append(
                _violation("terminal_records", slot, f"{corrupt[slot]} racer(s) reported the slot's items as corrupt")
            )
        if len(reported) > 1:
            described = "; ".join(
                f"{w.status}{'/' + str(w.reason) if w.reason else ''} by {w.writer[0]}"
                f"{' token ' + str(w.token) if w.token is not None else ''}"
                for w in reported
            )
            violations.append(
                _violation(
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
                _violation(
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
                _violation(
                    "slot_missed_logged",
                    None,
                    f"reason {reason}: {logged.get(reason, 0)} MISSED record(s) logged, {stored.get(reason, 0)}"
                    f" slot item(s) MISSED {slots}",
                )
            )
    return violations


def check_future_refused(
    history: Sequence[Mapping[str, Any]], final: FinalState, *, future_slots: Iterable[str], max_attempts: int = 3
) -> list[dict[str, Any]]:
    """``future_slot_refused``: near-future deliveries were refused, and nothing happened for their slots.

    For each near-future slot: every invocation of it ended in ``InvalidEventError`` (none returned an
    outcome, none crashed), having sent no DynamoDB request; no request id was invoked more than
    ``max_attempts`` times (Lambda's two async retries, then the on-failure destination); no racer acquired
    or recorded the slot; and the tables hold no slot item and no result for it.
    """
    violations: list[dict[str, Any]] = []
    future = set(future_slots)
    attempts: Counter[str] = Counter()
    for event in history:
        slot = str(event.get("slot"))
        what = event.get("what")
        if what == "deliver" and event.get("kind") == "future":
            attempts[str(event.get("request_id"))] += 1
        if slot not in future:
            continue
        if what == "checkpoint":
            violations.append(
                _violation(
                    "future_slot_refused",
                    slot,
                    f"checkpoint {event.get('checkpoint')} (token {event.get('token')}) reached",
                )
            )
        elif what == "result":
            violations.append(
                _violation(
                    "future_slot_refused", slot, f"an invocation returned {event.get('status')}/{event.get('reason')}"
                )
            )
        elif what == "error" and event.get("error_type") != "InvalidEventError":
            violations.append(
                _violation(
                    "future_slot_refused",
                    slot,
                    f"an invocation failed with {event.get('error_type')}, not InvalidEventError",
                )
            )
        elif what == "crash":
            violations.append(_violation("future_slot_refused", slot, f"an invocation crashed ({event.get('cause')})"))
        elif what == "dynamodb_requests" and event.get("count"):
            violations.append(
                _violation("future_slot_refused", slot, f"an invocation sent {event.get('count')} DynamoDB request(s)")
            )
        elif what == "superseded":
            violations.append(_violation("future_slot_refused", slot, "recorded MISSED by an acquisition"))
    for event in history:
        if event.get("what") == "superseded" and str(event.get("by_slot")) in future:
            violations.append(
                _violation(
                    "future_slot_refused", str(event["by_slot"]), f"its acquisition superseded {event.get('slot')}"
                )
            )
    for request_id, n in sorted(attempts.items()):
        if n > max_attempts:
            violations.append(
                _violation(
                    "future_slot_refused", None, f"request {request_id} was invoked {n} times (at most {max_attempts})"
                )
            )
    for slot in sorted(future, key=slot_epoch_s):
        if slot in final.slot_items:
            violations.append(
                _violation(
                    "future_slot_refused", slot, f"a slot item is stored ({final.slot_items[slot].get('status')})"
                )
            )
        if slot in final.results:
            violations.append(_violation("future_slot_refused", slot, "a result is stored"))
    return violations


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
            violations.append(_violation("paused_slot", slot, f"a racer of the paused slot reached {reached}"))
        engine = (queries_started or {}).get(slot, 0)
        reported = sum(int(r.get("queries_started") or 0) for rid in delivered[slot] for r in results.get(rid, ()))
        if engine or reported:
            violations.append(
                _violation(
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
                        _violation(
                            "paused_slot",
                            slot,
                            f"racer {rid} returned {result.get('status')}/{result.get('reason')} while the job was paused",
                        )
                    )
            if acquires[rid] > attempts[rid] + excused[rid]:
                violations.append(
                    _violation(
                        "paused_slot",
                        slot,
                        f"racer {rid} sent {acquires[rid]} acquisition requests in {attempts[rid]} attempt(s)"
                        f" ({excused[rid]} answered by the fault injector)",
                    )
                )
        item = final.slot_items.get(slot) or {}
        if writers != 1 or (item.get("status"), item.get("reason")) != ("MISSED", PAUSED_REASON):
            violations.append(
                _violation(
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
                _violation(
                    "paused_slot",
                    str(event["slot"]),
                    f"racer {event.get('request_id')} refused as paused, but the job was not paused for it"
                    + (f" (resumed, paused through {through})" if last is not None else ""),
                )
            )
    for slot, item in sorted(final.slot_items.items(), key=lambda kv: slot_epoch_s(kv[0])):
        if item.get("reason") == PAUSED_REASON and slot not in paused:
            violations.append(
                _violation("paused_slot", slot, "stored MISSED paused, but the job was not paused for it")
            )
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
                    _violation(
                        "force_release",
                        slot,
                        f"commit with token {commit.token} (request {commit.request_id}) accepted although the operator"
                        f" had released token {token}",
                    )
                )
        for result in results.get(rid, ()):
            if result.get("status") in FINAL_COMMIT_STATUSES and result.get("token") == token:
                violations.append(
                    _violation("force_release", slot, f"the released holder {rid} reported {result.get('status')}")
                )
        item = final.slot_items.get(slot) or {}
        final_token = item.get("fencing_token")
        if (
            item.get("status") not in ("SUCCEEDED", "FAILED")
            or not isinstance(final_token, int)
            or final_token <= token
        ):
            violations.append(
                _violation(
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
                _violation("force_release", slot, f"no other request's commit under the stored token {final_token}")
            )
            continue
        reported = [r for r in results.get(successor.request_id, ()) if r.get("status") in FINAL_COMMIT_STATUSES]
        took_over = any(r.get("takeover") or r.get("reentered") for r in reported)
        queries = sum(int(r.get("queries_started") or 0) for r in results.get(successor.request_id, ()))
        if not reported or not took_over or queries:
            violations.append(
                _violation(
                    "force_release",
                    slot,
                    f"the successor {successor.request_id} did not take over adopting the query (results"
                    f" {len(reported)}, takeover {took_over}, queries started {queries})",
                )
            )
    return violations


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
                _violation("generation_commits", slot, f"{where}: {len(tokens)} commits accepted (tokens {tokens})")
            )
        for commit in commits:
            newer = next((a for a in manual_acquired if a.token > commit.token and a.t_ns < commit.sent_ns), None)
            if newer is not None:
                violations.append(
                    _violation(
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
            violations.append(_violation("generation_commits", slot, f"{where}: {'; '.join(problems)}"))
    for slot, generation in sorted(
        (set(final.generation_items) | set(final.generation_results)) - set(requested),
        key=lambda k: (slot_epoch_s(k[0]), k[1]),
    ):
        violations.append(
            _violation("generation_commits", slot, f"generation {generation} is stored but was never requested")
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
                _violation(
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
                _violation(
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
                    _violation(
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
                    _violation(
                        "manual_isolated",
                        str(rerun["slot"]),
                        f"generation 1 changed under the re-run: {rerun.get('live_status')}/token"
                        f" {rerun.get('live_token')} when requested, {now[0]}/token {now[1]} at the end",
                    )
                )
    return violations


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100) of ``values``; ``None`` when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), -(-len(ordered) * q // 100)))
    return ordered[int(rank) - 1]
