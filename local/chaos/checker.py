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
``slot_missed_metric``
    the ``SlotMissed`` metric values the environments emitted (EMF) equal, reason by reason, the slot
    items recorded MISSED (:func:`check_slot_missed_metric`);
``future_slot_refused``
    a delivery scheduled ahead of now (beyond the lead allowance) is refused with ``InvalidEventError`` on
    every attempt before any DynamoDB request, and its slot is never acquired nor recorded
    (:func:`check_future_refused`).

History events are dicts with ``what`` and ``t_ns`` plus, by kind: ``deliver`` (``request_id``, ``slot``,
``kind``), ``checkpoint`` (``request_id``, ``slot``, ``checkpoint``, ``token``), ``resumed``
(``request_id``), ``result`` (``request_id``, ``slot``, ``status``, ``reason``, ``token``, ``error_type``),
``error`` (``request_id``, ``slot``, ``error_type``), ``superseded`` (``request_id``, ``slot``: the older
slot an acquisition replaced, ``recorded``: whether it wrote that slot's MISSED record),
``dynamodb_requests`` (``request_id``, ``count``), ``dlq`` (``slot``). :mod:`local.emulators.lambda_service`
records them (for the chaos suite and the demo alike).

Size (about 600 lines): nine checks, each a pure function with its helpers next to it; splitting them would
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
SLOT_MISSED_METRIC = contract.METRIC_SLOT_MISSED
METRICS_NAMESPACE = contract.METRICS_NAMESPACE
REASON_DIMENSION = contract.DIMENSION_REASON
#: Every check, as named in the violations' ``check`` (the module docstring says what each one means).
CHECKS = (
    "one_commit_per_slot",
    "tokens_increase",
    "stale_write_accepted",
    "commit_after_newer_slot",
    "slot_unaccounted",
    "results_mismatch",
    "terminal_records",
    "slot_missed_metric",
    "future_slot_refused",
)


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
    ``summary``, ``error``), every slot item the table holds for the job; ``results``: slot iso -> the
    results item (``fencing_token``, ``rows``, ``row_count``); ``latest``: the LATEST pointer
    (``latest_slot``, ``fencing_token``) or ``None``.
    """

    slot_items: dict[str, dict[str, Any]] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    latest: dict[str, Any] | None = None


def slot_epoch_s(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp())


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
    if ordered:
        newest_slot, newest = ordered[-1]
        latest = final.latest or {}
        if latest.get("latest_slot") != newest_slot or latest.get("fencing_token") != newest.get("fencing_token"):
            violations.append(
                _violation(
                    "results_mismatch",
                    newest_slot,
                    f"LATEST points at {latest.get('latest_slot')} (token {latest.get('fencing_token')}), the newest"
                    f" stored result is {newest_slot} (token {newest.get('fencing_token')})",
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
    arrived shows in ``slot_missed_metric``).
    """
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


def emf_metric_values(
    lines: Iterable[str], metric: str = SLOT_MISSED_METRIC, namespace: str = METRICS_NAMESPACE
) -> Counter[str]:
    """How many values of ``metric`` the Powertools EMF lines among ``lines`` carry, by their ``reason``.

    An EMF line is a JSON object with ``_aws.CloudWatchMetrics`` directives; the metric's values are the
    top-level member of its name (one number, or a list of them). Other lines (JSON logs, tracebacks) are
    skipped.
    """
    counts: Counter[str] = Counter()
    for line in lines:
        if metric not in line or '"_aws"' not in line:
            continue
        try:
            blob = json.loads(line)
        except ValueError:
            continue
        directives = (blob.get("_aws") or {}).get("CloudWatchMetrics") or [] if isinstance(blob, dict) else []
        declared = any(
            d.get("Namespace") == namespace and any(m.get("Name") == metric for m in d.get("Metrics", []))
            for d in directives
        )
        if not declared or metric not in blob:
            continue
        values = blob[metric]
        counts[str(blob.get(REASON_DIMENSION))] += len(values) if isinstance(values, list) else 1
    return counts


def check_slot_missed_metric(emitted: Mapping[str, int], final: FinalState) -> list[dict[str, Any]]:
    """``slot_missed_metric``: the ``SlotMissed`` values emitted equal the MISSED slot items, reason by reason.

    Each MISSED record is counted by exactly one racer (the one whose write applied, an SDK resend of its
    own write included); a missing value is a MISSED record nobody owned up to, an extra one a record
    counted twice (or written twice).
    """
    stored = Counter(str(item.get("reason")) for item in final.slot_items.values() if item.get("status") == "MISSED")
    violations = []
    for reason in sorted(set(stored) | set(emitted)):
        if stored.get(reason, 0) != emitted.get(reason, 0):
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
                    "slot_missed_metric",
                    None,
                    f"reason {reason}: {emitted.get(reason, 0)} SlotMissed value(s) emitted, {stored.get(reason, 0)}"
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


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100) of ``values``; ``None`` when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), -(-len(ordered) * q // 100)))
    return ordered[int(rank) - 1]
