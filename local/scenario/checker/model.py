"""The checker's shared vocabulary: the check names, the outcomes, the operator's events, what a commit and an
acquisition are, the final stored state, and a violation's shape (``{"check", "slot", "detail"}``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: The results that report a commit (the slot's final outcome: SUCCEEDED or FAILED).
FINAL_COMMIT_STATUSES = ("succeeded", "failed")
#: Every check, as named in the violations' ``check`` (:mod:`local.scenario.checker` says what each one means).
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


def violation(check: str, slot: str | None, detail: str) -> dict[str, Any]:
    """One violation of ``check`` (a name in :data:`CHECKS`) at ``slot`` (``None``: not one slot's)."""
    return {"check": check, "slot": slot, "detail": detail}


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100) of ``values``; ``None`` when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), -(-len(ordered) * q // 100)))
    return ordered[int(rank) - 1]
