"""Fencing, from the history alone (the live schedule's): ``one_commit_per_slot``, ``tokens_increase`` (in the
history), ``stale_write_accepted`` and ``commit_after_newer_slot``.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from local.scenario.checker.history import accepted_commits, acquisitions, live_history
from local.scenario.checker.model import Commit, violation


def check_history(history: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Violations visible in the history alone (the first four checks of :mod:`local.scenario.checker`), of the live
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
                violation("one_commit_per_slot", slot, f"{len(tokens)} commits accepted, tokens {tokens}")
            )
    # tokens_increase: one representative (the first accepted) per slot, in slot order
    firsts = sorted((min(cs, key=lambda c: c.acked_ns) for cs in by_slot.values()), key=lambda c: c.slot_epoch_s)
    for previous, current in itertools.pairwise(firsts):
        if current.token <= previous.token:
            violations.append(
                violation(
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
                violation(
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
                violation(
                    "commit_after_newer_slot",
                    commit.slot,
                    f"commit with token {commit.token} was accepted after slot {later.slot} had committed"
                    f" (token {later.token})",
                )
            )
    return violations
