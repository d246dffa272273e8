"""Reading the recorded history: the operator's actions, the manual invocations, the live schedule's events, and
the commits and acquisitions the racers saw (the events every invariant family replays).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from local.scenario.checker.model import FINAL_COMMIT_STATUSES, OPERATOR, Acquisition, Commit


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
